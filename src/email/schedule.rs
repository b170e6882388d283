//! The sender: every `TICKERTAPE_EMAIL_CHECK_SECS` it records the emails
//! that are due (a report at the start of each local day, week or month;
//! an alert when an episode opens), then sends each due record it can
//! claim, retrying failures with back-off.
//!
//! No email goes out twice for one period: the record of a (kind, site,
//! period, address) is made once, whichever instance or restart finds it
//! due, and only the instance whose claim moved it from `pending` to
//! `sending` sends it. A sender that stops between handing the message to
//! the server and marking it `sent` leaves it `sending`; once its lease is
//! over it is marked `abandoned`, not sent again. That is at most once: a
//! copy that may be lost (counted, and shown on the system page) rather
//! than one that may arrive twice, since the window is the few
//! milliseconds of one SMTP answer and a report a day late is no better.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::OnceCell;

use super::alerts::{self, AlertKind};
use super::render::{self, Rendered};
use super::report::{self, Report};
use super::smtp::{Mailer, SendFailure};
use super::{unsubscribe, EmailConfig, EmailStats};
use crate::clock::SharedClock;
use crate::domain::{AlertRules, Recipient, Schedule, SiteId};
use crate::reports::Period;
use crate::storage::email::{self as stored, NewSend, SendRecord};
use crate::storage::sites::Site;
use crate::storage::Store;

/// The kind of a confirmation email's send record.
const CONFIRM: &str = "confirm";

/// What one round did (tests and logs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Round {
    pub recorded: usize,
    pub sent: usize,
    pub failed: usize,
    pub abandoned: u64,
}

pub struct Sender {
    store: Store,
    clock: SharedClock,
    config: EmailConfig,
    public_url: String,
    mailer: Option<Mailer>,
    stats: Arc<EmailStats>,
    key: OnceCell<[u8; 32]>,
    /// How long buckets are kept: a report's changes compare no period
    /// before past it, as the dashboard's do.
    retention: crate::domain::Retention,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sender({:?})", self.mailer)
    }
}

/// Why a claimed email was not sent.
enum NotSent {
    /// Its subscription is gone (unsubscribed after it was due).
    Unsubscribed,
    Failure(SendFailure),
}

impl From<crate::reports::costly::ReadError> for NotSent {
    fn from(e: crate::reports::costly::ReadError) -> Self {
        NotSent::Failure(SendFailure::Transient(format!(
            "the report could not be read: {}",
            crate::telemetry::chain(&e)
        )))
    }
}

impl From<mongodb::error::Error> for NotSent {
    fn from(e: mongodb::error::Error) -> Self {
        NotSent::Failure(SendFailure::Transient(format!(
            "the database did not answer: {}",
            crate::telemetry::chain(&e)
        )))
    }
}

impl Sender {
    /// A sender; without a server and a sender address it sends nothing
    /// (`enabled` is false), but still makes unsubscribe links.
    pub fn new(
        store: Store,
        clock: SharedClock,
        config: EmailConfig,
        public_url: String,
    ) -> Result<Self, String> {
        let mailer = match (&config.smtp, &config.from) {
            (Some(url), Some(from)) => Some(Mailer::new(
                url,
                from.clone(),
                config.timeout,
                config.ca.as_ref(),
            )?),
            _ => None,
        };
        Ok(Sender {
            store,
            clock,
            config,
            public_url,
            mailer,
            stats: Arc::default(),
            key: OnceCell::new(),
            retention: crate::domain::Retention::default(),
        })
    }

    /// The buckets' retention (`TICKERTAPE_RETAIN_*`), which the changes
    /// of a report respect as the dashboard's do; unset: kept for ever.
    pub fn with_retention(mut self, retention: crate::domain::Retention) -> Self {
        self.retention = retention;
        self
    }

    pub fn enabled(&self) -> bool {
        self.mailer.is_some()
    }

    pub fn stats(&self) -> &Arc<EmailStats> {
        &self.stats
    }

    pub fn config(&self) -> &EmailConfig {
        &self.config
    }

    /// The server and sender, as the system page shows them to an
    /// administrator: host, port and TLS mode, never the user name or
    /// password.
    pub fn describe(&self) -> Option<String> {
        self.mailer
            .as_ref()
            .map(|m| format!("{} as {}", m.server(), m.from()))
    }

    /// The sender address alone, as a site's owner may see it (every email
    /// shows it anyway): nothing of the relay.
    pub fn sender_address(&self) -> Option<String> {
        self.mailer.as_ref().map(|m| m.from().email.to_string())
    }

    /// The unsubscribe key, read (or made) once.
    pub async fn key(&self) -> Result<[u8; 32], mongodb::error::Error> {
        self.key
            .get_or_try_init(|| stored::link_key(&self.store))
            .await
            .copied()
    }

    pub async fn unsubscribe_link(
        &self,
        site: &SiteId,
        address: &Recipient,
    ) -> Result<String, mongodb::error::Error> {
        let key = self.key().await?;
        Ok(unsubscribe::link(&self.public_url, &key, site, address))
    }

    /// Runs a round every `check_every` until aborted.
    pub fn spawn(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.config.check_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = self.round().await {
                    self.stats.round_failures.fetch_add(1, Relaxed);
                    tracing::warn!(error = %crate::telemetry::chain(&e), "email round failed; trying again at the next");
                }
            }
        })
    }

    /// One round: what is due is recorded, then sent.
    pub async fn round(&self) -> Result<Round, mongodb::error::Error> {
        let mut round = Round::default();
        if !self.enabled() {
            return Ok(round);
        }
        let now = self.clock.now();
        round.abandoned = stored::abandon_expired(&self.store, now).await?;
        if round.abandoned > 0 {
            self.stats.abandoned.fetch_add(round.abandoned, Relaxed);
            tracing::warn!(
                emails = round.abandoned,
                "emails abandoned: their sender stopped while sending them; not sent again"
            );
        }
        let sites: HashMap<SiteId, Site> = crate::storage::sites::list(&self.store)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let mut by_site: HashMap<SiteId, Vec<stored::Subscription>> = HashMap::new();
        for sub in stored::list_all(&self.store).await? {
            by_site.entry(sub.site()).or_default().push(sub);
        }
        for (id, subs) in &by_site {
            let Some(site) = sites.get(id) else { continue };
            round.recorded += self.record_confirmations(site, subs, now).await?;
            // Reports and alerts go only to addresses that agreed.
            let confirmed: Vec<stored::Subscription> =
                subs.iter().filter(|s| s.confirmed).cloned().collect();
            round.recorded += self.record_reports(site, &confirmed, now).await?;
            round.recorded += self.record_alerts(site, subs, &confirmed, now).await?;
        }
        for record in stored::due(&self.store, now).await? {
            match self.deliver(&record, &sites).await? {
                Some(true) => round.sent += 1,
                Some(false) => round.failed += 1,
                None => {}
            }
        }
        Ok(round)
    }

    /// Records the reports due in the current period of each subscription
    /// made before that period started.
    async fn record_reports(
        &self,
        site: &Site,
        subs: &[stored::Subscription],
        now: DateTime<Utc>,
    ) -> Result<usize, mongodb::error::Error> {
        let zone = site.time_zone.tz();
        let mut recorded = 0;
        for sub in subs.iter().filter(|s| s.schedule.is_report()) {
            let (Some((start, _)), Some(period)) = (
                report::current(sub.schedule, now, zone),
                report::last_complete(sub.schedule, now, zone),
            ) else {
                continue;
            };
            // Subscribed during this period: its first report is the next.
            if sub.created_at.to_chrono() > start {
                continue;
            }
            let new = NewSend {
                kind: sub.schedule.key(),
                site: &site.id,
                address: &sub.address,
                from: period.from,
                to: period.to,
            };
            recorded += usize::from(stored::record_due(&self.store, &new, now).await?);
        }
        Ok(recorded)
    }

    /// Records one confirmation email for each address waiting to confirm
    /// (named by the UTC day its subscription was made: an address removed
    /// and added again gets at most one a day).
    async fn record_confirmations(
        &self,
        site: &Site,
        subs: &[stored::Subscription],
        now: DateTime<Utc>,
    ) -> Result<usize, mongodb::error::Error> {
        let mut recorded = 0;
        for sub in subs.iter().filter(|s| !s.confirmed) {
            let day = sub
                .created_at
                .to_chrono()
                .date_naive()
                .and_hms_opt(0, 0, 0)
                .expect("midnight")
                .and_utc();
            let new = NewSend {
                kind: CONFIRM,
                site: &site.id,
                address: &sub.address,
                from: day,
                to: now,
            };
            recorded += usize::from(stored::record_due(&self.store, &new, now).await?);
        }
        Ok(recorded)
    }

    /// Opens or closes each alert's episode, and records the alert of an
    /// open one for every confirmed alert subscriber (once per episode:
    /// the record is named by the episode's start).
    ///
    /// An open episode goes on while its condition holds under the rules
    /// of now or under those it opened with: switching a rule off and on,
    /// or editing it, neither ends it nor opens another, so the same spike
    /// or drop is never alerted twice. It ends when neither holds.
    async fn record_alerts(
        &self,
        site: &Site,
        subs: &[stored::Subscription],
        confirmed: &[stored::Subscription],
        now: DateTime<Utc>,
    ) -> Result<usize, mongodb::error::Error> {
        // Episodes are kept while anyone (confirmed or not yet) is
        // subscribed to alerts, so that a confirmation mid-episode does
        // not make it look new.
        if !subs.iter().any(|s| s.schedule == Schedule::Alerts) {
            return Ok(0);
        }
        let to: Vec<&Recipient> = confirmed
            .iter()
            .filter(|s| s.schedule == Schedule::Alerts)
            .map(|s| &s.address)
            .collect();
        let rules = stored::alert_rules(&self.store, &site.id).await?;
        let mut recorded = 0;
        for kind in AlertKind::ALL {
            let holds = |rules: AlertRules| async move {
                Ok::<_, mongodb::error::Error>(
                    kind.enabled(&rules)
                        && alerts::measure(&self.store, site, kind, &rules, now, &self.public_url)
                            .await?
                            .holds,
                )
            };
            let holds_now = holds(rules).await?;
            if !holds_now {
                let open = stored::open_episode_of(&self.store, kind.key(), &site.id).await?;
                let held_as_opened = match open.and_then(|e| e.rules) {
                    Some(opened) if opened != rules => holds(opened).await?,
                    _ => false,
                };
                if !held_as_opened
                    && stored::close_episode(&self.store, kind.key(), &site.id, now).await?
                {
                    tracing::info!(site = %site.domain, alert = kind.key(), "alert episode over");
                }
                continue;
            }
            let started =
                stored::open_episode(&self.store, kind.key(), &site.id, now, &rules).await?;
            for address in &to {
                let new = NewSend {
                    kind: kind.key(),
                    site: &site.id,
                    address,
                    from: started,
                    to: now,
                };
                recorded += usize::from(stored::record_due(&self.store, &new, now).await?);
            }
        }
        Ok(recorded)
    }

    /// Claims and sends one due record: `Some(true)` sent, `Some(false)`
    /// failed (to be retried or given up), `None` not claimed here.
    async fn deliver(
        &self,
        record: &SendRecord,
        sites: &HashMap<SiteId, Site>,
    ) -> Result<Option<bool>, mongodb::error::Error> {
        let now = self.clock.now();
        let Some(claimed) = stored::claim(&self.store, &record.key, now, self.config.lease).await?
        else {
            return Ok(None);
        };
        let outcome = match sites.get(&claimed.site()) {
            Some(site) => self.compose_and_send(site, &claimed).await,
            None => Err(NotSent::Unsubscribed),
        };
        let key = &claimed.key;
        match outcome {
            Ok(()) => {
                stored::mark_sent(&self.store, key, self.clock.now()).await?;
                self.stats.sent.fetch_add(1, Relaxed);
                tracing::info!(site = %claimed.site(), kind = %claimed.kind, from = %claimed.from, "email sent");
                Ok(Some(true))
            }
            Err(NotSent::Unsubscribed) => {
                stored::mark_failed(
                    &self.store,
                    key,
                    "unsubscribed (or the site deleted) before it was sent",
                )
                .await?;
                Ok(None)
            }
            Err(NotSent::Failure(failure)) => {
                let what = failure.to_string();
                self.stats.attempt_failures.fetch_add(1, Relaxed);
                self.stats.failed(
                    now,
                    format!("{} email of site {}: {what}", claimed.kind, claimed.site()),
                );
                let retry = matches!(failure, SendFailure::Transient(_))
                    && claimed.attempts < self.config.max_attempts;
                if retry {
                    let next = now + self.config.backoff(claimed.attempts);
                    stored::mark_retry(&self.store, key, next, &what).await?;
                    self.stats.retries_scheduled.fetch_add(1, Relaxed);
                    tracing::warn!(site = %claimed.site(), kind = %claimed.kind, attempt = claimed.attempts, retry_at = %next, error = %what, "email not sent; trying again later");
                } else {
                    stored::mark_failed(&self.store, key, &what).await?;
                    self.stats.given_up.fetch_add(1, Relaxed);
                    tracing::error!(site = %claimed.site(), kind = %claimed.kind, attempts = claimed.attempts, error = %what, "email given up");
                }
                Ok(Some(false))
            }
        }
    }

    async fn compose_and_send(&self, site: &Site, record: &SendRecord) -> Result<(), NotSent> {
        if record.kind == CONFIRM {
            return self.send_confirmation(site, record).await;
        }
        let schedule = match Schedule::parse(&record.kind) {
            Ok(s) => s,
            Err(_) if AlertKind::parse(&record.kind).is_some() => Schedule::Alerts,
            Err(_) => return Err(NotSent::Unsubscribed),
        };
        let subscribed = stored::list_for_site(&self.store, &site.id)
            .await?
            .iter()
            .any(|s| s.address == record.address && s.schedule == schedule && s.confirmed);
        if !subscribed {
            return Err(NotSent::Unsubscribed);
        }
        let link = self.unsubscribe_link(&site.id, &record.address).await?;
        let rendered = match AlertKind::parse(&record.kind) {
            Some(kind) => {
                let rules = stored::alert_rules(&self.store, &site.id).await?;
                let alert = alerts::measure(
                    &self.store,
                    site,
                    kind,
                    &rules,
                    record.to.to_chrono(),
                    &self.public_url,
                )
                .await?;
                render::alert(&alert, &link)
            }
            None => {
                let period = report::day_period_of(
                    record.from.to_chrono(),
                    record.to.to_chrono(),
                    site.time_zone.tz(),
                );
                let report = report::assemble(
                    &self.store,
                    &self.public_url,
                    site,
                    &period,
                    Some(schedule),
                    (self.clock.now(), &self.retention),
                )
                .await?;
                render::report(&report, &link)
            }
        };
        self.send(&record.address, &rendered, &link)
            .await
            .map_err(NotSent::Failure)
    }

    /// The one email an address gets before it confirms: what it would
    /// receive, from which site, and the link that confirms. Not sent once
    /// the address confirmed or was removed.
    async fn send_confirmation(&self, site: &Site, record: &SendRecord) -> Result<(), NotSent> {
        let waiting: Vec<Schedule> = stored::list_for_site(&self.store, &site.id)
            .await?
            .iter()
            .filter(|s| s.address == record.address && !s.confirmed)
            .map(|s| s.schedule)
            .collect();
        if waiting.is_empty() {
            return Err(NotSent::Unsubscribed);
        }
        let key = self.key().await?;
        let confirm = unsubscribe::confirm_link(&self.public_url, &key, &site.id, &record.address);
        let link = self.unsubscribe_link(&site.id, &record.address).await?;
        let rendered = render::confirmation(site, &waiting, &self.public_url, &confirm);
        self.send(&record.address, &rendered, &link)
            .await
            .map_err(NotSent::Failure)
    }

    async fn send(
        &self,
        to: &Recipient,
        rendered: &Rendered,
        link: &str,
    ) -> Result<(), SendFailure> {
        let mailer = self
            .mailer
            .as_ref()
            .ok_or_else(|| SendFailure::Permanent("no SMTP server is configured".into()))?;
        let message = mailer.message(to, rendered, link)?;
        mailer.send(message).await
    }

    /// Sends a report of `period` to `to` now, outside any schedule and
    /// record (`tickertape email send-report`), trying up to three times.
    pub async fn send_report_now(
        &self,
        site: &Site,
        period: &Period,
        to: &Recipient,
    ) -> anyhow::Result<Report> {
        anyhow::ensure!(
            self.enabled(),
            "set TICKERTAPE_SMTP_URL and TICKERTAPE_SMTP_FROM to send email (docs/email.md)"
        );
        let report = report::assemble(
            &self.store,
            &self.public_url,
            site,
            period,
            None,
            (self.clock.now(), &self.retention),
        )
        .await?;
        let link = self.unsubscribe_link(&site.id, to).await?;
        let rendered = render::report(&report, &link);
        let mut wait = std::time::Duration::from_secs(1);
        for attempt in 1..=3 {
            match self.send(to, &rendered, &link).await {
                Ok(()) => return Ok(report),
                Err(SendFailure::Transient(e)) if attempt < 3 => {
                    tracing::warn!(attempt, error = %e, "email not sent; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 4;
                }
                Err(e) => anyhow::bail!("the email was not sent: {e}"),
            }
        }
        unreachable!("the last attempt returns")
    }
}

//! Email reports and traffic alerts: the figures (`report`, read like the
//! dashboard's), the message (`render`), the SMTP transport (`smtp`), the
//! alert rules (`alerts`), unsubscribe links (`unsubscribe`) and the
//! scheduled sender (`schedule`). docs/email.md is the user's guide.

pub mod alerts;
pub mod render;
pub mod report;
pub mod schedule;
pub mod smtp;
pub mod unsubscribe;

use chrono::{DateTime, TimeDelta, Utc};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

pub use schedule::Sender;

/// What `TICKERTAPE_SMTP_*` and `TICKERTAPE_EMAIL_*` configure.
#[derive(Debug, Clone)]
pub struct EmailConfig {
    /// Unset: nothing is sent (subscriptions are kept).
    pub smtp: Option<smtp::SmtpUrl>,
    /// The sender address (`From:`).
    pub from: Option<lettre::message::Mailbox>,
    /// Roots trusted for the server's certificate besides the system's.
    pub ca: Option<smtp::CaCertificates>,
    /// How often the sender looks for due reports, alerts and retries.
    pub check_every: Duration,
    /// The wait before the first retry; each next one waits 4 times longer.
    pub first_retry: TimeDelta,
    /// Attempts before an email is given up (`failed`).
    pub max_attempts: i32,
    /// How long one sender may hold an email it is sending; past it the
    /// email is taken as abandoned (see `storage::email::abandon_expired`).
    pub lease: TimeDelta,
    /// The SMTP connection and command timeout.
    pub timeout: Duration,
}

impl EmailConfig {
    /// Whether email can be sent: a server and a sender address.
    pub fn enabled(&self) -> bool {
        self.smtp.is_some() && self.from.is_some()
    }

    /// The wait after failed attempt number `attempts` (1 for the first):
    /// 1, 4, 16, 64 … times the first wait, at most 6 hours.
    pub fn backoff(&self, attempts: i32) -> TimeDelta {
        let factor = 4i32.saturating_pow(attempts.clamp(1, 10) as u32 - 1);
        (self.first_retry * factor).min(TimeDelta::hours(6))
    }
}

/// The sender's counters (`/metrics`) and its last failure (the system
/// page).
#[derive(Debug, Default)]
pub struct EmailStats {
    pub sent: AtomicU64,
    pub attempt_failures: AtomicU64,
    pub retries_scheduled: AtomicU64,
    pub given_up: AtomicU64,
    pub abandoned: AtomicU64,
    pub round_failures: AtomicU64,
    last_failure: Mutex<Option<(DateTime<Utc>, String)>>,
}

impl EmailStats {
    pub fn failed(&self, at: DateTime<Utc>, what: String) {
        *self.last_failure.lock().expect("email stats lock") = Some((at, what));
    }

    pub fn last_failure(&self) -> Option<(DateTime<Utc>, String)> {
        self.last_failure.lock().expect("email stats lock").clone()
    }

    /// `/metrics` lines, in the Prometheus text format.
    pub fn render(&self, out: &mut String, configured: bool) {
        use crate::metrics::{counter, gauge};
        let n = |c: &AtomicU64| c.load(Relaxed);
        gauge(
            out,
            "tickertape_email_configured",
            "1 when TICKERTAPE_SMTP_URL and TICKERTAPE_SMTP_FROM are set, so reports and alerts are sent.",
            u64::from(configured),
        );
        counter(
            out,
            "tickertape_email_sent_total",
            "Emails (reports and alerts) the SMTP server accepted.",
            n(&self.sent),
        );
        counter(
            out,
            "tickertape_email_attempt_failures_total",
            "Attempts to send an email that failed (each retried with back-off, or given up).",
            n(&self.attempt_failures),
        );
        counter(
            out,
            "tickertape_email_retries_total",
            "Failed emails scheduled to be tried again.",
            n(&self.retries_scheduled),
        );
        counter(out, "tickertape_email_given_up_total", "Emails given up: refused for good by the server, or still failing after the last attempt.", n(&self.given_up));
        counter(
            out,
            "tickertape_email_abandoned_total",
            "Emails whose sender stopped while sending them (never sent again: at most once).",
            n(&self.abandoned),
        );
        counter(out, "tickertape_email_round_failures_total", "Rounds of the email sender that failed before their end (e.g. the database away); the next round tries again.", n(&self.round_failures));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_four_times_longer_each_time_up_to_six_hours() {
        let config = EmailConfig {
            smtp: None,
            from: None,
            ca: None,
            check_every: Duration::from_secs(60),
            first_retry: TimeDelta::minutes(1),
            max_attempts: 6,
            lease: TimeDelta::minutes(10),
            timeout: Duration::from_secs(30),
        };
        let waits: Vec<i64> = (1..=6).map(|a| config.backoff(a).num_minutes()).collect();
        assert_eq!(waits, [1, 4, 16, 64, 256, 360]);
        assert!(!config.enabled());
    }
}

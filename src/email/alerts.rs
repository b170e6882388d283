//! Traffic alerts: a spike (views in the last hour above a number, or
//! above a multiple of the same hour's usual level) and a drop (no view
//! for some hours on a site that usually has some then). "Usual" is the
//! average of the same stretch of time on each of the 7 days before.

use chrono::{DateTime, TimeDelta, Utc};

use crate::domain::{AlertRules, Resolution};
use crate::reports::{queries, Period, Scope};
use crate::storage::sites::Site;
use crate::storage::Store;

/// Days the usual level is the average of.
pub const USUAL_DAYS: i64 = 7;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    Spike,
    Drop,
}

impl AlertKind {
    pub const ALL: [AlertKind; 2] = [AlertKind::Spike, AlertKind::Drop];

    /// Its name in send records and episodes.
    pub fn key(self) -> &'static str {
        match self {
            AlertKind::Spike => "spike",
            AlertKind::Drop => "drop",
        }
    }

    pub fn parse(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.key() == key)
    }

    /// Whether `rules` ask for this kind at all.
    pub fn enabled(self, rules: &AlertRules) -> bool {
        match self {
            AlertKind::Spike => rules.spike_views.is_some() || rules.spike_factor.is_some(),
            AlertKind::Drop => rules.drop_hours.is_some(),
        }
    }
}

/// What was measured, and (in `holds`) whether the rule is met.
#[derive(Debug, Clone)]
pub struct Alert {
    pub kind: AlertKind,
    pub site_name: String,
    pub domain: String,
    /// Views in the stretch measured (the last hour, or the last `hours`).
    pub views: i64,
    /// The same stretch's average over the days before, rounded.
    pub usual: i64,
    pub hours: u32,
    /// When it was measured, in the site's zone.
    pub noticed: String,
    /// The rule, in words.
    pub rule: String,
    pub dashboard: String,
    pub holds: bool,
}

/// Views of `scope` in `[from, to)`.
async fn views(
    store: &Store,
    scope: &Scope<'_>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<i64, mongodb::error::Error> {
    let period = Period::aligned_in(from, to, Resolution::Hour, chrono_tz::Tz::UTC);
    Ok(queries::total(
        &queries::read_series(store, scope, &period).await?,
    ))
}

/// The views of the `span` before `end`, and the average of the same
/// stretch on each of the [`USUAL_DAYS`] days before.
async fn now_and_usual(
    store: &Store,
    site: &Site,
    end: DateTime<Utc>,
    span: TimeDelta,
) -> Result<(i64, f64), mongodb::error::Error> {
    let scope = Scope::of_site(site);
    let reads = (0..=USUAL_DAYS).map(|d| {
        let to = end - TimeDelta::days(d);
        let scope = scope.clone();
        async move { views(store, &scope, to - span, to).await }
    });
    let all = futures::future::try_join_all(reads).await?;
    let usual = all[1..].iter().sum::<i64>() as f64 / USUAL_DAYS as f64;
    Ok((all[0], usual))
}

/// Measures `kind` on `site` at `now` against `rules`.
pub async fn measure(
    store: &Store,
    site: &Site,
    kind: AlertKind,
    rules: &AlertRules,
    now: DateTime<Utc>,
    public_url: &str,
) -> Result<Alert, mongodb::error::Error> {
    // Up to the end of the current minute: its views count already.
    let end = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
    let hours = match kind {
        AlertKind::Spike => 1,
        AlertKind::Drop => rules.drop_hours.unwrap_or(1),
    };
    let (views, usual) = now_and_usual(store, site, end, TimeDelta::hours(hours.into())).await?;
    let (holds, rule) = match kind {
        AlertKind::Spike => {
            let over_views = rules.spike_views.is_some_and(|n| views > i64::from(n));
            let over_factor = rules
                .spike_factor
                .is_some_and(|k| usual > 0.0 && views as f64 > k * usual);
            let mut said = Vec::new();
            if let Some(n) = rules.spike_views {
                said.push(format!("alert above {n} views an hour"));
            }
            if let Some(k) = rules.spike_factor {
                said.push(format!("or above {k}× the usual level"));
            }
            (over_views || over_factor, said.join(" "))
        }
        AlertKind::Drop => (
            // "Usually has views": at least one in that stretch on an
            // average day.
            views == 0 && usual >= 1.0,
            format!("alert after {hours} hours without a view"),
        ),
    };
    let zone = site.time_zone.tz();
    let (from, to) = (end - TimeDelta::hours(24), end);
    let minute = |t: DateTime<Utc>| t.with_timezone(&zone).format("%Y-%m-%dT%H:%M").to_string();
    Ok(Alert {
        kind,
        site_name: site.name.clone(),
        domain: site.domain.to_string(),
        views,
        usual: usual.round() as i64,
        hours,
        noticed: format!(
            "{} {}",
            end.with_timezone(&zone).format("%-d %B %Y %H:%M"),
            zone.name()
        ),
        rule: rule.trim_start_matches("or ").to_owned(),
        dashboard: format!(
            "{}/sites/{}?range=custom&from={}&to={}",
            public_url.trim_end_matches('/'),
            site.id,
            minute(from),
            minute(to)
        ),
        holds,
    })
}

//! The dates background tasks (the site totals and page summaries
//! backfills, at start and every hour in `serve`, and their commands) take
//! from stored buckets.
//!
//! A bucket's `timestamp` is whatever was written: the write path stamps
//! hits with the server's clock, but a document edited by hand, or an
//! import from before imports bounded their dates, may hold year +262142
//! or −1. Walking from such a day to today is either an overflow (chrono's
//! last day plus one) or hundreds of thousands of windows, and one site's
//! bad bucket would stop the summaries of every site after it. So the
//! tasks only visit [`window`]: buckets outside it are counted
//! ([`BackgroundStats`], `/metrics`), logged, and left alone; and a site
//! whose backfill fails anyway is logged and counted, and the next site
//! goes on.

use bson::{doc, Document};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The first day a stored bucket may be visited from: before any web
/// analytics Tickertape imports existed.
fn first_day() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(1990, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// How far past `now` a bucket may start: a site in the zone furthest
/// ahead, and room for clocks that disagree.
const AHEAD: TimeDelta = TimeDelta::days(2);

/// `[first, end)`: the bucket starts background tasks visit at `now`.
pub fn window(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let end = now
        .checked_add_signed(AHEAD)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    (first_day(), end)
}

/// The `timestamp` condition of [`window`].
pub fn within(now: DateTime<Utc>) -> Document {
    let (first, end) = window(now);
    doc! {"$gte": bson::DateTime::from_chrono(first), "$lt": bson::DateTime::from_chrono(end)}
}

/// A filter of the documents `filter` selects whose `timestamp` is
/// outside [`window`].
pub fn outside(mut filter: Document, now: DateTime<Utc>) -> Document {
    let (first, end) = window(now);
    filter.insert(
        "$or",
        vec![
            doc! {"timestamp": {"$lt": bson::DateTime::from_chrono(first)}},
            doc! {"timestamp": {"$gte": bson::DateTime::from_chrono(end)}},
        ],
    );
    filter
}

/// What the background tasks left out, for `/metrics`. Shared by every
/// clone of a `Store`.
#[derive(Debug, Default)]
pub struct BackgroundStats {
    /// Stored buckets found outside [`window`] and not visited (counted
    /// at each run that finds them).
    pub skipped_buckets: AtomicU64,
    /// Sites whose backfill failed (an error or a panic, logged); the
    /// task went on with the next site.
    pub failed_sites: AtomicU64,
}

impl BackgroundStats {
    pub fn skipped(&self, n: u64) {
        self.skipped_buckets.fetch_add(n, Relaxed);
    }

    pub fn failed(&self) {
        self.failed_sites.fetch_add(1, Relaxed);
    }
}

/// Runs one site's backfill, a panic (a bug) turned into an error, so
/// that the task goes on with the next site.
pub async fn guarded<T, E>(
    task: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T>
where
    E: Into<anyhow::Error>,
{
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(task).catch_unwind().await {
        Ok(result) => result.map_err(Into::into),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(anyhow::anyhow!("panicked: {what}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_window_runs_from_1990_to_two_days_ahead_even_at_the_last_day() {
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        let (first, end) = window(now);
        assert_eq!(first, Utc.with_ymd_and_hms(1990, 1, 1, 0, 0, 0).unwrap());
        assert_eq!(end, now + TimeDelta::days(2));
        let (_, end) = window(DateTime::<Utc>::MAX_UTC);
        assert_eq!(end, DateTime::<Utc>::MAX_UTC);
    }
}

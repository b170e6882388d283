//! Views, entries, exits and visitors per page of whole UTC days, kept in
//! memory so that the top pages of a long range do not read every
//! page-day bucket of it on every request
//! (a year of 1,000 pages is over 100,000 buckets: 1.6 s a dashboard in the
//! year bench). A kept day is only used while the site's own total for that
//! day, read from its site-day buckets with every request, still equals
//! the sum it was kept with: a view arriving late (a journal replayed after
//! an outage) changes the total in the same transaction as the page
//! buckets, and the day is read again. So the answer is always what the
//! buckets hold, only cheaper.

use chrono::{DateTime, TimeDelta, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most bytes kept, all sites together, counting each page's name and a
/// fixed overhead per entry. Past it the cache starts afresh (simple and
/// bounded; a dashboard fills it again in one read), and a day larger than
/// a quarter of it is never kept.
const MAX_BYTES: usize = 64 << 20;
const ENTRY_OVERHEAD: usize = 72;

/// Kept days this close to their page buckets' expiry are read again: the
/// TTL monitor runs on the server's clock, which may be ahead of ours.
const EXPIRY_MARGIN: TimeDelta = TimeDelta::hours(1);

/// One site's pages on one UTC day.
#[derive(Debug)]
pub struct Day {
    /// The site's total that day when it was read: the pages add up to it.
    pub total: i64,
    pub pages: Vec<PageDay>,
}

/// One page's figures on one UTC day. Every change to them comes with a
/// view of the site that day in the same transaction (a visit's credits
/// ride on the hit that made them), so the site's total guards them all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageDay {
    pub page: String,
    pub views: i64,
    /// Visits that entered on the page.
    pub entries: i64,
    pub exits: i64,
    /// The estimate of the page-day bucket's visitors sketch (visitors of
    /// whole UTC days add up: an id is one day's).
    pub visitors: i64,
}

#[derive(Debug, Default)]
pub struct PageDays {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    days: HashMap<(String, DateTime<Utc>), Arc<Day>>,
    bytes: usize,
    /// Page-day buckets older than this are removed by their TTL index
    /// (on the server's clock), so a kept day that old is not used.
    day_retention: Option<TimeDelta>,
}

impl Day {
    fn bytes(&self) -> usize {
        self.pages
            .iter()
            .map(|p| p.page.len() + ENTRY_OVERHEAD)
            .sum()
    }
}

impl PageDays {
    /// Follows the day buckets' retention (`None`: kept for ever).
    pub fn set_day_retention(&self, kept: Option<TimeDelta>) {
        let mut inner = self.lock();
        inner.day_retention = kept;
        inner.days.clear();
        inner.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the page buckets of `day` are past the day retention: the
    /// TTL index deletes a bucket once its `timestamp` (the day's start) is
    /// that old.
    pub fn expired(&self, day: DateTime<Utc>) -> bool {
        self.lock()
            .day_retention
            .is_some_and(|kept| day + kept <= Utc::now())
    }

    /// The pages of site `site` on `day` if they were kept when the site's
    /// total that day was `total` (and the day is not about to expire).
    pub fn get(&self, site: &str, day: DateTime<Utc>, total: i64) -> Option<Arc<Day>> {
        let inner = self.lock();
        if inner
            .day_retention
            .is_some_and(|kept| day + kept <= Utc::now() + EXPIRY_MARGIN)
        {
            return None;
        }
        inner
            .days
            .get(&(site.to_owned(), day))
            .filter(|d| d.total == total)
            .cloned()
    }

    /// Keeps the pages of `site` on `day`; the caller checked that they add
    /// up to `day.total`, the site's total read before them. Returns them,
    /// shared with the cache.
    pub fn keep(&self, site: &str, day_start: DateTime<Utc>, day: Day) -> Arc<Day> {
        let size = day.bytes();
        let day = Arc::new(day);
        if size > MAX_BYTES / 4 {
            return day;
        }
        let mut inner = self.lock();
        if let Some(old) = inner.days.remove(&(site.to_owned(), day_start)) {
            inner.bytes -= old.bytes();
        }
        if inner.bytes + size > MAX_BYTES {
            inner.days.clear();
            inner.bytes = 0;
        }
        inner.bytes += size;
        inner.days.insert((site.to_owned(), day_start), day.clone());
        day
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn day(n: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, n, 0, 0, 0).unwrap()
    }

    fn pages(total: i64) -> Day {
        Day {
            total,
            pages: vec![PageDay {
                page: "s.test/a".into(),
                views: total,
                ..PageDay::default()
            }],
        }
    }

    #[test]
    fn a_kept_day_serves_only_while_the_sites_total_is_unchanged() {
        let kept = PageDays::default();
        kept.keep("s.test", day(1), pages(5));
        assert_eq!(kept.get("s.test", day(1), 5).unwrap().pages[0].views, 5);
        assert!(kept.get("s.test", day(1), 6).is_none(), "a late view");
        assert!(kept.get("s.test", day(2), 5).is_none());
        assert!(kept.get("other.test", day(1), 5).is_none());
    }

    #[test]
    fn days_past_the_day_retention_are_not_served() {
        let kept = PageDays::default();
        let midnight =
            |t: DateTime<Utc>| Utc.from_utc_datetime(&t.date_naive().and_hms_opt(0, 0, 0).unwrap());
        kept.set_day_retention(Some(TimeDelta::days(5)));
        // Its buckets went a few hours ago: not within a day after.
        let gone = midnight(Utc::now() - TimeDelta::days(5) - TimeDelta::hours(3));
        kept.keep("s.test", gone, pages(5));
        assert!(kept.expired(gone));
        assert!(kept.get("s.test", gone, 5).is_none());
        // Two days before its expiry it still serves.
        let live = midnight(Utc::now() - TimeDelta::days(3));
        kept.keep("s.test", live, pages(5));
        assert!(!kept.expired(live));
        assert!(kept.get("s.test", live, 5).is_some());
    }

    #[test]
    fn the_cache_is_bounded_in_bytes() {
        let kept = PageDays::default();
        let many = |total, n: usize| Day {
            total,
            pages: (0..n)
                .map(|i| PageDay {
                    page: format!("s.test/{i:0>200}"),
                    views: 1,
                    ..PageDay::default()
                })
                .collect(),
        };
        let quarter = MAX_BYTES / 4 / (200 + 7 + ENTRY_OVERHEAD);
        // A day larger than a quarter of the bound is not kept.
        kept.keep("s.test", day(1), many(1, quarter + 10));
        assert!(kept.get("s.test", day(1), 1).is_none());
        for n in 1..=5 {
            kept.keep("s.test", day(n), many(i64::from(n), quarter - 10));
            assert!(kept.lock().bytes <= MAX_BYTES);
        }
        assert!(kept.get("s.test", day(5), 5).is_some());
        assert!(kept.get("s.test", day(1), 1).is_none(), "started afresh");
        // Keeping a day again replaces it without counting it twice.
        let before = kept.lock().bytes;
        kept.keep("s.test", day(5), many(5, quarter - 10));
        assert_eq!(kept.lock().bytes, before);
    }
}

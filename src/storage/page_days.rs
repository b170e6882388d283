//! Views per page of whole UTC days, kept in memory so that the top pages
//! of a long range do not read every page-day bucket of it on every request
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

/// Most page-days kept, all sites together (about 80 bytes each, so some
/// 40 MB). Past it the cache starts afresh: simple, bounded, and a
/// dashboard fills it again in one read.
const MAX_PAGE_DAYS: usize = 500_000;

/// One site's views per page on one UTC day.
#[derive(Debug)]
pub struct Day {
    /// The site's total that day when it was read: the pages add up to it.
    pub total: i64,
    pub pages: Vec<(String, i64)>,
}

#[derive(Debug, Default)]
pub struct PageDays {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    days: HashMap<(String, DateTime<Utc>), Arc<Day>>,
    page_days: usize,
    /// Page-day buckets older than this are removed by their TTL index
    /// (on the server's clock), so a kept day that old is not used.
    day_retention: Option<TimeDelta>,
}

impl PageDays {
    /// Follows the day buckets' retention (`None`: kept for ever).
    pub fn set_day_retention(&self, kept: Option<TimeDelta>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.day_retention = kept;
        inner.days.clear();
        inner.page_days = 0;
    }

    /// The pages of `site` on `day` if they were kept when the site's total
    /// that day was `total`.
    pub fn get(&self, site: &str, day: DateTime<Utc>, total: i64) -> Option<Arc<Day>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner
            .day_retention
            .is_some_and(|kept| day + TimeDelta::days(1) + kept <= Utc::now())
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
    /// up to `day.total`, the site's total read before them.
    pub fn keep(&self, site: &str, day_start: DateTime<Utc>, day: Day) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.page_days + day.pages.len() > MAX_PAGE_DAYS {
            inner.days.clear();
            inner.page_days = 0;
        }
        inner.page_days += day.pages.len();
        if let Some(old) = inner
            .days
            .insert((site.to_owned(), day_start), Arc::new(day))
        {
            inner.page_days -= old.pages.len();
        }
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
            pages: vec![("s.test/a".into(), total)],
        }
    }

    #[test]
    fn a_kept_day_serves_only_while_the_sites_total_is_unchanged() {
        let kept = PageDays::default();
        kept.keep("s.test", day(1), pages(5));
        assert_eq!(kept.get("s.test", day(1), 5).unwrap().pages[0].1, 5);
        assert!(kept.get("s.test", day(1), 6).is_none(), "a late view");
        assert!(kept.get("s.test", day(2), 5).is_none());
        assert!(kept.get("other.test", day(1), 5).is_none());
    }

    #[test]
    fn days_past_the_day_retention_are_not_served() {
        let kept = PageDays::default();
        let old = Utc::now() - TimeDelta::days(10);
        let old = Utc.from_utc_datetime(&old.date_naive().and_hms_opt(0, 0, 0).unwrap());
        kept.keep("s.test", old, pages(5));
        assert!(kept.get("s.test", old, 5).is_some());
        kept.set_day_retention(Some(TimeDelta::days(5)));
        kept.keep("s.test", old, pages(5));
        assert!(kept.get("s.test", old, 5).is_none());
    }

    #[test]
    fn the_cache_is_bounded() {
        let kept = PageDays::default();
        let many = |total| Day {
            total,
            pages: (0..MAX_PAGE_DAYS / 2 + 1)
                .map(|i| (format!("s.test/{i}"), 1))
                .collect(),
        };
        kept.keep("s.test", day(1), many(1));
        kept.keep("s.test", day(2), many(2));
        assert!(kept.get("s.test", day(1), 1).is_none(), "started afresh");
        assert!(kept.get("s.test", day(2), 2).is_some());
        assert!(kept.inner.lock().unwrap().page_days <= MAX_PAGE_DAYS);
    }
}

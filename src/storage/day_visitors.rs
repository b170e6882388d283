//! Unique-visitor estimates of parts of UTC days, kept in memory so that a
//! long range does not merge a year of sketches on every request.
//!
//! A range's visitors are a sum over the UTC days it touches of each part
//! it covers (`reports::visits`): a whole day's sketch, or the union of the
//! hour sketches of a part (a Europe/Berlin day is 23 hours of one UTC day
//! and one of the next, so a year by day in Berlin would read every hour
//! sketch of the year: 8,760 of them for a site). The estimate of a part
//! only changes when a hit of that day changes its sketch, and such a hit
//! adds a view to the scope's day total in the same update: an estimate is
//! used only while the day total it was kept with still matches, so the
//! answer is what the buckets hold, only cheaper.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Mutex;

/// Most estimates kept, all scopes together (about 100 bytes each with its
/// key). Past it the cache starts afresh: simple, bounded, and refilled by
/// one read.
const MAX_ENTRIES: usize = 200_000;

/// The hours of a UTC day a part covers, bit `h` for hour `h`.
pub type Hours = u32;

/// Every hour of a day: the whole day's sketch.
pub const WHOLE_DAY: Hours = (1 << 24) - 1;

#[derive(Debug, Default)]
pub struct DayVisitors {
    inner: Mutex<HashMap<Key, Kept>>,
}

/// The scope (`site:<domain>` or `page:<page>`), the day, its hours.
type Key = (String, DateTime<Utc>, Hours);

#[derive(Debug, Clone, Copy)]
struct Kept {
    /// The scope's views that day when the estimate was made.
    day_total: i64,
    visitors: u64,
}

impl DayVisitors {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Kept>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The visitors of `hours` of `day` in `scope`, if they were kept when
    /// the scope's total that day was `day_total`.
    pub fn get(
        &self,
        scope: &str,
        day: DateTime<Utc>,
        hours: Hours,
        day_total: i64,
    ) -> Option<u64> {
        self.lock()
            .get(&(scope.to_owned(), day, hours))
            .filter(|k| k.day_total == day_total)
            .map(|k| k.visitors)
    }

    /// Keeps an estimate made from sketches read after a day total of
    /// `day_total` (a hit in between makes the estimate newer than its
    /// total: it is then read again once, never served stale).
    pub fn keep(
        &self,
        scope: &str,
        day: DateTime<Utc>,
        hours: Hours,
        day_total: i64,
        visitors: u64,
    ) {
        let mut kept = self.lock();
        if kept.len() >= MAX_ENTRIES {
            kept.clear();
        }
        kept.insert(
            (scope.to_owned(), day, hours),
            Kept {
                day_total,
                visitors,
            },
        );
    }

    /// Forgets everything (the retention changed: days may have gone).
    pub fn clear(&self) {
        self.lock().clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn day(n: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, n, 0, 0, 0).unwrap()
    }

    #[test]
    fn an_estimate_serves_only_while_the_day_total_is_unchanged() {
        let kept = DayVisitors::default();
        kept.keep("site:s.test", day(1), WHOLE_DAY, 10, 4);
        assert_eq!(kept.get("site:s.test", day(1), WHOLE_DAY, 10), Some(4));
        assert_eq!(
            kept.get("site:s.test", day(1), WHOLE_DAY, 11),
            None,
            "a later hit"
        );
        assert_eq!(
            kept.get("site:s.test", day(1), 1 << 23, 10),
            None,
            "another part"
        );
        assert_eq!(kept.get("page:s.test/a", day(1), WHOLE_DAY, 10), None);
        assert_eq!(kept.get("site:s.test", day(2), WHOLE_DAY, 10), None);
    }

    #[test]
    fn the_cache_is_bounded() {
        let kept = DayVisitors::default();
        for n in 0..MAX_ENTRIES + 5 {
            kept.keep(&format!("page:s.test/{n}"), day(1), WHOLE_DAY, 1, 1);
            assert!(kept.len() <= MAX_ENTRIES);
        }
        assert_eq!(kept.len(), 5, "started afresh");
    }
}

//! How many custom event names a site may use (issue 20), decided in memory
//! like the new-page cap (`page_cap`).
//!
//! Anyone can send `e=<anything>` with a site's public id. The breakdown
//! buckets already bound what is stored (50 names each, the rest in
//! `other_event`), but a flood of made-up names would push a site's real
//! events into "other". So a site may use at most [`MAX_EVENT_NAMES_PER_DAY`]
//! distinct names a UTC day: names it already used that day always pass, a
//! new one beyond the cap is refused (`event-cap`). The known names are
//! forgotten at midnight UTC and at a restart, which only lets a site
//! start its day's budget again.

use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Distinct event names one site may send in a UTC day.
pub const MAX_EVENT_NAMES_PER_DAY: usize = 100;

#[derive(Debug, Default)]
pub struct EventCap {
    days: Mutex<HashMap<String, (NaiveDate, HashSet<String>)>>,
}

impl EventCap {
    /// Whether `site` may count an event named `name` at `at`.
    pub fn admit(&self, site: &str, name: &str, at: DateTime<Utc>) -> bool {
        let today = at.date_naive();
        let mut days = self.days.lock().unwrap_or_else(|e| e.into_inner());
        let (day, names) = days
            .entry(site.to_owned())
            .or_insert_with(|| (today, HashSet::new()));
        if *day != today {
            *day = today;
            names.clear();
        }
        if names.contains(name) {
            return true;
        }
        if names.len() >= MAX_EVENT_NAMES_PER_DAY {
            return false;
        }
        names.insert(name.to_owned());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_site_may_use_its_days_names_and_no_more() {
        let cap = EventCap::default();
        let at = Utc.with_ymd_and_hms(2026, 11, 25, 10, 0, 0).unwrap();
        for i in 0..MAX_EVENT_NAMES_PER_DAY {
            assert!(cap.admit("a.test", &format!("e{i}"), at));
        }
        assert!(!cap.admit("a.test", "one more", at));
        assert!(cap.admit("a.test", "e7", at), "a known name still counts");
        assert!(cap.admit("b.test", "one more", at), "per site");
        let tomorrow = at + chrono::TimeDelta::days(1);
        assert!(cap.admit("a.test", "one more", tomorrow));
    }
}

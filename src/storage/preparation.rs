//! How far the site totals backfill (`site_totals::backfill`) has come for
//! each site it is running on in this process, so that a report of a site
//! whose read model is not built yet can say what is being prepared
//! instead of failing.
//!
//! Until a site's totals are complete its reports add up page buckets, and
//! a long range of a big site (a year of 10,000 pages: 3.65 million page
//! day buckets) cannot be read within the report time limit: such a report
//! answers what is being prepared and how far it is (see
//! `web::error::WebError::Preparing`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use super::Resolution;

/// One site's backfill: the level it is at (days first, then hours, then
/// minutes) and the windows of that level done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub level: Resolution,
    pub done: u64,
    pub of: u64,
}

impl Progress {
    /// In words: "day totals 40%, hour and minute totals to come".
    pub fn describe(&self) -> String {
        let share = (self.done.saturating_mul(100))
            .checked_div(self.of)
            .unwrap_or(0)
            .min(99);
        match self.level {
            Resolution::Day => {
                format!("day totals {share}%, hour and minute totals to come")
            }
            Resolution::Hour => {
                format!("day totals done, hour totals {share}%, minute totals to come")
            }
            Resolution::Minute => {
                format!("day and hour totals done, minute totals {share}%")
            }
        }
    }
}

static RUNNING: LazyLock<Mutex<HashMap<String, Progress>>> = LazyLock::new(Default::default);

fn running() -> std::sync::MutexGuard<'static, HashMap<String, Progress>> {
    // A panic elsewhere while holding it leaves a map still worth reading.
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The progress of the backfill running on `site` (its domain) in this
/// process, if one is.
pub fn of(site: &str) -> Option<Progress> {
    running().get(site).copied()
}

/// Records a backfill's progress while it lives; dropped, it forgets it
/// (done, failed or cancelled alike).
pub struct Tracker {
    site: String,
}

impl Tracker {
    pub fn start(site: &str) -> Self {
        Tracker {
            site: site.to_owned(),
        }
    }

    pub fn at(&self, level: Resolution, done: u64, of: u64) {
        running().insert(self.site.clone(), Progress { level, done, of });
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        running().remove(&self.site);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_told_per_level_and_forgotten_when_done() {
        let site = "preparation-test.example";
        {
            let tracker = Tracker::start(site);
            assert_eq!(of(site), None);
            tracker.at(Resolution::Hour, 25, 100);
            assert_eq!(
                of(site).map(|p| p.describe()),
                Some("day totals done, hour totals 25%, minute totals to come".to_owned())
            );
            tracker.at(Resolution::Day, 3, 0);
            assert_eq!(
                of(site).map(|p| p.describe()),
                Some("day totals 0%, hour and minute totals to come".to_owned())
            );
        }
        assert_eq!(of(site), None);
    }
}

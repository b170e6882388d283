//! A cap on how many new pages one site can gain per hour.
//!
//! Any visitor can make up paths: one client created 46,696 pages in 12 s
//! with a site's public id, and every page that is active in an hour costs
//! 61 preallocated documents the next hour. Beyond the cap, a view of a page
//! this process has not seen is counted under the site's overflow page
//! [`OVERFLOW_PATH`] instead, so the view still counts but the key space
//! stops growing.
//!
//! "New" is decided in memory, without a database round trip per hit: a
//! page seen in the last [`REMEMBER_HOURS`] hours is known. Only when the
//! hour's budget is spent does an unknown page cost one indexed lookup
//! (does it have a day bucket?), so pages that existed before a restart
//! keep their own counts.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::Page;
use crate::storage::{Resolution, Store};

/// Where views of pages beyond the cap are counted.
pub const OVERFLOW_PATH: &str = "/(other)";

/// How long a page stays known without views before it is looked up again.
const REMEMBER_HOURS: i64 = 48;

pub struct PageCap {
    /// New pages per site per hour; 0 means no cap.
    limit: u64,
    /// Where to check whether an unknown page existed before (tests: none).
    store: Option<Store>,
    sites: Mutex<HashMap<String, SiteBudget>>,
}

#[derive(Default)]
struct SiteBudget {
    hour: i64,
    new_pages: u64,
    overflowed: u64,
    /// Known pages and the hour each was last seen in.
    known: HashMap<String, i64>,
}

/// This hour's figures for one site, for its settings page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapStatus {
    pub limit: u64,
    pub new_pages: u64,
    pub overflowed: u64,
}

/// Whether a hit keeps its page or goes to the overflow page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Page(Page),
    Overflow(Page),
}

fn hour_of(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(3600)
}

impl SiteBudget {
    fn roll(&mut self, hour: i64) {
        if self.hour != hour {
            self.hour = hour;
            self.new_pages = 0;
            self.overflowed = 0;
            self.known.retain(|_, seen| hour - *seen < REMEMBER_HOURS);
        }
    }
}

impl PageCap {
    pub fn new(limit: u64, store: Option<Store>) -> Self {
        Self {
            limit,
            store,
            sites: Mutex::new(HashMap::new()),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    fn with_site<T>(&self, domain: &str, hour: i64, f: impl FnOnce(&mut SiteBudget) -> T) -> T {
        let mut sites = self.sites.lock().expect("page cap lock poisoned");
        let budget = sites.entry(domain.to_owned()).or_default();
        budget.roll(hour);
        f(budget)
    }

    /// Decides where a view of `page` at `at` is counted.
    pub async fn admit(&self, page: Page, at: DateTime<Utc>) -> Admission {
        if self.limit == 0 {
            return Admission::Page(page);
        }
        let hour = hour_of(at);
        let domain = page.domain().to_owned();
        let admitted = self.with_site(&domain, hour, |b| {
            if let Some(seen) = b.known.get_mut(page.as_str()) {
                *seen = hour;
                return true;
            }
            if b.new_pages < self.limit {
                b.new_pages += 1;
                b.known.insert(page.as_str().to_owned(), hour);
                return true;
            }
            false
        });
        if admitted || self.existed(&page).await {
            if !admitted {
                self.with_site(&domain, hour, |b| {
                    b.known.insert(page.as_str().to_owned(), hour);
                });
            }
            return Admission::Page(page);
        }
        self.with_site(&domain, hour, |b| b.overflowed += 1);
        Admission::Overflow(Page::from_stored(format!("{domain}{OVERFLOW_PATH}")))
    }

    /// Whether the page has views from before this process knew it. When
    /// the database cannot say, the page is taken as new: the cap must
    /// hold while the database is away.
    async fn existed(&self, page: &Page) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        let days = store
            .buckets(Resolution::Day)
            .clone_with_type::<bson::Document>();
        let lookup = days
            .find_one(bson::doc! {"page": page.as_str()})
            .projection(bson::doc! {"_id": 1});
        match tokio::time::timeout(std::time::Duration::from_secs(2), lookup).await {
            Ok(Ok(found)) => found.is_some(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "page cap: could not look a page up; counting it as new");
                false
            }
            Err(_) => false,
        }
    }

    pub fn status(&self, domain: &str, at: DateTime<Utc>) -> CapStatus {
        self.with_site(domain, hour_of(at), |b| CapStatus {
            limit: self.limit,
            new_pages: b.new_pages,
            overflowed: b.overflowed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn page(p: &str) -> Page {
        Page::parse(p).unwrap()
    }

    #[tokio::test]
    async fn beyond_the_cap_new_pages_go_to_the_overflow_page() {
        let cap = PageCap::new(2, None);
        let t = Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 0).unwrap();
        let other = Admission::Overflow(page("a.test/(other)"));
        assert_eq!(
            cap.admit(page("a.test/1"), t).await,
            Admission::Page(page("a.test/1"))
        );
        assert_eq!(
            cap.admit(page("a.test/2"), t).await,
            Admission::Page(page("a.test/2"))
        );
        assert_eq!(cap.admit(page("a.test/3"), t).await, other);
        // Known pages keep counting; another site has its own budget.
        assert_eq!(
            cap.admit(page("a.test/1"), t).await,
            Admission::Page(page("a.test/1"))
        );
        assert_eq!(
            cap.admit(page("b.test/3"), t).await,
            Admission::Page(page("b.test/3"))
        );
        assert_eq!(
            cap.status("a.test", t),
            CapStatus {
                limit: 2,
                new_pages: 2,
                overflowed: 1
            }
        );
        // A new hour, a new budget; old pages stay known.
        let next = t + chrono::TimeDelta::hours(1);
        assert_eq!(
            cap.admit(page("a.test/3"), next).await,
            Admission::Page(page("a.test/3"))
        );
        assert_eq!(
            cap.admit(page("a.test/1"), next).await,
            Admission::Page(page("a.test/1"))
        );
        assert_eq!(
            cap.admit(page("a.test/4"), next).await,
            Admission::Page(page("a.test/4"))
        );
        assert_eq!(cap.admit(page("a.test/5"), next).await, other);
    }

    #[tokio::test]
    async fn zero_means_no_cap() {
        let cap = PageCap::new(0, None);
        let t = Utc::now();
        for i in 0..100 {
            let p = page(&format!("a.test/{i}"));
            assert_eq!(cap.admit(p.clone(), t).await, Admission::Page(p));
        }
    }
}

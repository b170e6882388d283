//! Which new pages get buckets of their own, decided in memory.
//!
//! Any visitor can make up paths: one client created 46,696 pages in 12 s
//! with a site's public id, and every page costs documents (three bucket
//! levels, and 61 preallocated documents an hour once it is active) and
//! memory. A view of a page that is not admitted still counts, under the
//! site's overflow page [`OVERFLOW_PATH`], so the key space stops growing
//! while nothing is lost.
//!
//! *The rule.* A page is admitted on first sight while its site has
//! first-sight budget left this hour (`TICKERTAPE_NEW_PAGES_PER_HOUR`, a
//! small site is counted on its own pages from its first view); beyond
//! that, a page is admitted on its **second** view, within a larger hourly
//! budget per site and per instance. Junk paths are typically sent once;
//! a real page that people view comes back, so on a big site only each
//! page's first view (once) goes to the overflow page: 10,000 Zipf pages
//! lose about 10,000 views of the first hour's millions, and none after.
//! Measured in docs/benchmarks.md against both loads.
//!
//! *Bounds.* Pages seen once are remembered in a fixed table of keyed
//! 64-bit hashes (a later page in the same slot replaces it): its memory is
//! fixed, and a junk flood only shortens how long a real page has for its
//! second view. Admitted pages are kept as keyed hashes per site (about 24
//! bytes each), for [`REMEMBER_HOURS`] without views, and the instance
//! admits at most `TICKERTAPE_INSTANCE_NEW_PAGES_PER_HOUR` new pages an
//! hour over all sites. The pixel never waits on the database here: pages
//! that existed before a restart are loaded into the known set in the
//! background at start ([`PageCap::remember`]).

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::domain::Page;

/// Where views of pages beyond the cap are counted.
pub const OVERFLOW_PATH: &str = "/(other)";

/// How long a page stays known without views.
pub const REMEMBER_HOURS: i64 = 48;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapConfig {
    /// New pages one site may gain per hour on their first view; 0: no cap
    /// at all (every page admitted at once).
    pub first_sight_per_hour: u64,
    /// New pages one site may gain per hour on their second view.
    pub repeat_per_hour: u64,
    /// New pages the whole instance may gain per hour, over all sites.
    pub instance_per_hour: u64,
    /// Pages seen once that are remembered (slots of 8 bytes).
    pub candidates: usize,
    /// Admitted pages remembered over all sites (about 24 bytes each):
    /// beyond it, new pages go to the overflow page until old ones age out.
    pub max_known: u64,
}

impl CapConfig {
    pub const DEFAULT: CapConfig = CapConfig {
        first_sight_per_hour: 1_000,
        repeat_per_hour: 100_000,
        instance_per_hour: 1_000_000,
        candidates: 1 << 20,
        max_known: 2_000_000,
    };
}

/// A site's own setting (an admin's choice, kept with the site): the
/// instance's budgets, none, or at most N new pages an hour, first sight
/// and repeat views together.
pub use crate::domain::PageCapSetting as SiteCap;

pub struct PageCap {
    config: CapConfig,
    /// Keys the page hashes, so nobody can aim paths at one slot.
    keys: std::collections::hash_map::RandomState,
    sites: Mutex<HashMap<String, SiteBudget>>,
    candidates: Box<[AtomicU64]>,
    instance: Mutex<(i64, u64)>,
    pub stats: CapStats,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct CapStats {
    pub admitted_first_sight: AtomicU64,
    pub admitted_repeat: AtomicU64,
    pub overflowed: AtomicU64,
    /// Pages remembered as known, over all sites.
    pub known_pages: AtomicU64,
    /// New pages refused because the instance's hourly budget was spent.
    pub instance_refusals: AtomicU64,
}

#[derive(Default)]
struct SiteBudget {
    hour: i64,
    first_sight: u64,
    repeat: u64,
    overflowed: u64,
    /// Known pages (keyed hashes) and the hour each was last seen in.
    known: HashMap<u64, i64>,
}

/// This hour's figures for one site, for its settings page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapStatus {
    pub setting: SiteCap,
    /// The first-sight and repeat budgets in force for the site.
    pub first_sight_limit: u64,
    pub repeat_limit: u64,
    /// Pages admitted this hour, on their first view and on a later one.
    pub first_sight: u64,
    pub repeat: u64,
    /// Views counted under the overflow page this hour (this instance).
    pub overflowed: u64,
    pub known: u64,
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
            self.first_sight = 0;
            self.repeat = 0;
            self.overflowed = 0;
            self.known.retain(|_, seen| hour - *seen < REMEMBER_HOURS);
        }
    }
}

impl PageCap {
    pub fn new(config: CapConfig) -> Self {
        let slots = config.candidates.max(1);
        Self {
            config,
            keys: Default::default(),
            sites: Mutex::new(HashMap::new()),
            candidates: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            instance: Mutex::new((i64::MIN, 0)),
            stats: CapStats::default(),
        }
    }

    pub fn config(&self) -> CapConfig {
        self.config
    }

    fn key(&self, page: &str) -> u64 {
        // 0 marks an empty candidate slot.
        self.keys.hash_one(page).max(1)
    }

    /// The first-sight and repeat budgets of a site with `setting`.
    fn limits(&self, setting: SiteCap) -> Option<(u64, u64)> {
        match setting {
            SiteCap::Unlimited => None,
            SiteCap::Default if self.config.first_sight_per_hour == 0 => None,
            SiteCap::Default => Some((
                self.config.first_sight_per_hour,
                self.config.repeat_per_hour,
            )),
            SiteCap::PerHour(n) => Some((n.min(self.config.first_sight_per_hour), n)),
        }
    }

    /// Runs `f` on the site's budget, rolled over to `hour` first when
    /// given.
    fn with_site<T>(
        &self,
        domain: &str,
        hour: Option<i64>,
        f: impl FnOnce(&mut SiteBudget) -> T,
    ) -> T {
        let mut sites = self.sites.lock().unwrap_or_else(|p| p.into_inner());
        let budget = sites.entry(domain.to_owned()).or_default();
        let before = budget.known.len();
        if let Some(hour) = hour {
            budget.roll(hour);
        }
        let out = f(budget);
        let after = budget.known.len();
        if after >= before {
            self.stats
                .known_pages
                .fetch_add((after - before) as u64, Relaxed);
        } else {
            self.stats
                .known_pages
                .fetch_sub((before - after) as u64, Relaxed);
        }
        out
    }

    /// Takes one page from the instance's budget for `hour`.
    fn instance_allows(&self, hour: i64) -> bool {
        let mut spent = self.instance.lock().unwrap_or_else(|p| p.into_inner());
        if spent.0 != hour {
            *spent = (hour, 0);
        }
        if spent.1 >= self.config.instance_per_hour
            || self.stats.known_pages.load(Relaxed) >= self.config.max_known
        {
            self.stats.instance_refusals.fetch_add(1, Relaxed);
            return false;
        }
        spent.1 += 1;
        true
    }

    /// Was this page seen once before (and not since replaced)? Records it
    /// otherwise.
    fn seen_before(&self, key: u64) -> bool {
        let slot = &self.candidates[(key % self.candidates.len() as u64) as usize];
        slot.swap(key, Relaxed) == key
    }

    /// Decides where a view of `page` at `at` is counted, for a site with
    /// `setting`. In memory only: never waits on the database.
    pub fn admit(&self, page: Page, at: DateTime<Utc>, setting: SiteCap) -> Admission {
        let Some((first_limit, repeat_limit)) = self.limits(setting) else {
            return Admission::Page(page);
        };
        let hour = hour_of(at);
        let key = self.key(page.as_str());
        let domain = page.domain().to_owned();
        let admitted = self.with_site(&domain, Some(hour), |b| {
            if let Some(seen) = b.known.get_mut(&key) {
                *seen = hour;
                return true;
            }
            let first = b.first_sight < first_limit;
            let second_view = || b.repeat < repeat_limit && self.seen_before(key);
            if !(first || second_view()) {
                b.overflowed += 1;
                return false;
            }
            if !self.instance_allows(hour) {
                b.overflowed += 1;
                return false;
            }
            let (mine, all) = if first {
                (&mut b.first_sight, &self.stats.admitted_first_sight)
            } else {
                (&mut b.repeat, &self.stats.admitted_repeat)
            };
            *mine += 1;
            all.fetch_add(1, Relaxed);
            b.known.insert(key, hour);
            true
        });
        if admitted {
            Admission::Page(page)
        } else {
            self.stats.overflowed.fetch_add(1, Relaxed);
            Admission::Overflow(Page::from_stored(format!("{domain}{OVERFLOW_PATH}")))
        }
    }

    /// Marks `page` known as of `at` without spending any budget: pages
    /// the database has views of (loaded at start), so a restart does not
    /// send them through admission again.
    pub fn remember(&self, page: &str, at: DateTime<Utc>) {
        let Some((domain, _)) = page.split_once('/') else {
            return;
        };
        let (hour, key) = (hour_of(at), self.key(page));
        // No roll-over: this hour's budgets are the live traffic's.
        self.with_site(domain, None, |b| {
            let seen = b.known.entry(key).or_insert(hour);
            *seen = (*seen).max(hour);
        });
    }

    /// Marks every page with a day bucket since yesterday as known (read
    /// in the background at start, through the `timestamp_page` index), so
    /// pages that existed before a restart keep their own counts without
    /// the pixel ever asking the database. Returns how many were read.
    pub async fn load_known(
        &self,
        store: &crate::storage::Store,
        now: DateTime<Utc>,
    ) -> Result<u64, mongodb::error::Error> {
        use futures::TryStreamExt;
        let since = crate::storage::Resolution::Day.floor(now) - chrono::TimeDelta::days(1);
        let mut cursor = store
            .buckets(crate::storage::Resolution::Day)
            .clone_with_type::<bson::Document>()
            .find(bson::doc! {"timestamp": {"$gte": bson::DateTime::from_chrono(since)}})
            .projection(bson::doc! {"_id": 0, "page": 1, "timestamp": 1})
            .await?;
        let mut n = 0;
        while let Some(d) = cursor.try_next().await? {
            if let (Ok(page), Ok(at)) = (d.get_str("page"), d.get_datetime("timestamp")) {
                if !page.ends_with(OVERFLOW_PATH) {
                    self.remember(page, at.to_chrono());
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    pub fn status(&self, domain: &str, at: DateTime<Utc>, setting: SiteCap) -> CapStatus {
        let (first_sight_limit, repeat_limit) = self.limits(setting).unwrap_or((0, 0));
        self.with_site(domain, Some(hour_of(at)), |b| CapStatus {
            setting,
            first_sight_limit,
            repeat_limit,
            first_sight: b.first_sight,
            repeat: b.repeat,
            overflowed: b.overflowed,
            known: b.known.len() as u64,
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

    fn config(first: u64, repeat: u64, instance: u64) -> CapConfig {
        CapConfig {
            first_sight_per_hour: first,
            repeat_per_hour: repeat,
            instance_per_hour: instance,
            candidates: 1 << 16,
            max_known: 1_000_000,
        }
    }

    fn t() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 0).unwrap()
    }

    #[test]
    fn beyond_the_first_sight_budget_a_page_needs_a_second_view() {
        let cap = PageCap::new(config(2, 10, 1_000));
        let other = Admission::Overflow(page("a.test/(other)"));
        let admit = |p: &str| cap.admit(page(p), t(), SiteCap::Default);
        assert_eq!(admit("a.test/1"), Admission::Page(page("a.test/1")));
        assert_eq!(admit("a.test/2"), Admission::Page(page("a.test/2")));
        // First sight beyond the budget: the overflow page, then its own.
        assert_eq!(admit("a.test/3"), other);
        assert_eq!(admit("a.test/3"), Admission::Page(page("a.test/3")));
        assert_eq!(admit("a.test/3"), Admission::Page(page("a.test/3")));
        // Known pages keep counting; another site has its own budget.
        assert_eq!(admit("a.test/1"), Admission::Page(page("a.test/1")));
        assert_eq!(admit("b.test/9"), Admission::Page(page("b.test/9")));
        let status = cap.status("a.test", t(), SiteCap::Default);
        assert_eq!(
            (
                status.first_sight,
                status.repeat,
                status.overflowed,
                status.known
            ),
            (2, 1, 1, 3)
        );
        // A new hour, new budgets; admitted pages stay known.
        let next = t() + chrono::TimeDelta::hours(1);
        assert_eq!(
            cap.admit(page("a.test/4"), next, SiteCap::Default),
            Admission::Page(page("a.test/4"))
        );
        assert_eq!(
            cap.admit(page("a.test/3"), next, SiteCap::Default),
            Admission::Page(page("a.test/3"))
        );
    }

    #[test]
    fn the_repeat_budget_and_the_instance_budget_hold() {
        let cap = PageCap::new(config(1, 2, 4));
        let admit = |p: String| cap.admit(page(&p), t(), SiteCap::Default);
        // Site a: one on first sight, two on their second view, then none.
        let mut own = 0;
        for i in 0..10 {
            for _ in 0..2 {
                if let Admission::Page(_) = admit(format!("a.test/{i}")) {
                    own += 1;
                }
            }
        }
        assert_eq!(cap.status("a.test", t(), SiteCap::Default).known, 3);
        assert!(own >= 3, "{own}");
        // Site b: the instance has one new page left of its four.
        assert!(matches!(admit("b.test/1".into()), Admission::Page(_)));
        assert!(matches!(admit("b.test/2".into()), Admission::Overflow(_)));
        assert!(matches!(admit("b.test/2".into()), Admission::Overflow(_)));
        assert_eq!(cap.stats.instance_refusals.load(Relaxed), 1);
    }

    #[test]
    fn a_site_setting_overrides_the_budgets() {
        let cap = PageCap::new(config(1, 1, 1_000));
        for i in 0..50 {
            let p = page(&format!("u.test/{i}"));
            assert_eq!(
                cap.admit(p.clone(), t(), SiteCap::Unlimited),
                Admission::Page(p)
            );
        }
        let mut own = 0;
        for i in 0..50 {
            for _ in 0..2 {
                if let Admission::Page(_) =
                    cap.admit(page(&format!("s.test/{i}")), t(), SiteCap::PerHour(5))
                {
                    own += 1;
                }
            }
        }
        let status = cap.status("s.test", t(), SiteCap::PerHour(5));
        assert_eq!((status.first_sight, status.repeat), (1, 5));
        assert!(own >= 6);
    }

    #[test]
    fn zero_means_no_cap() {
        let cap = PageCap::new(config(0, 0, 0));
        for i in 0..100 {
            let p = page(&format!("a.test/{i}"));
            assert_eq!(
                cap.admit(p.clone(), t(), SiteCap::Default),
                Admission::Page(p)
            );
        }
    }

    #[test]
    fn remembered_pages_are_admitted_without_budget() {
        let cap = PageCap::new(config(1, 0, 1_000));
        let _ = cap.admit(page("r.test/first"), t(), SiteCap::Default);
        cap.remember("r.test/old", t());
        assert_eq!(
            cap.admit(page("r.test/old"), t(), SiteCap::Default),
            Admission::Page(page("r.test/old"))
        );
        assert!(matches!(
            cap.admit(page("r.test/new"), t(), SiteCap::Default),
            Admission::Overflow(_)
        ));
    }

    /// Zipf (s = 1) traffic over `pages` pages on a shortened clock:
    /// the share of views under the overflow page in the first hour and
    /// in the second.
    fn zipf_shares(pages: usize, views_per_hour: usize) -> (f64, f64) {
        let cap = PageCap::new(CapConfig::DEFAULT);
        let h: f64 = (1..=pages).map(|k| 1.0 / k as f64).sum();
        let mut cdf = Vec::with_capacity(pages);
        let mut acc = 0.0;
        for k in 1..=pages {
            acc += 1.0 / (k as f64 * h);
            cdf.push(acc);
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut shares = [0.0; 2];
        for (hour, share) in shares.iter_mut().enumerate() {
            let mut other = 0;
            for i in 0..views_per_hour {
                let k = cdf.partition_point(|&c| c < next()).min(pages - 1);
                // Seconds tick through the hour.
                let at = t()
                    + chrono::TimeDelta::seconds((hour * 3600 + i * 3600 / views_per_hour) as i64);
                if let Admission::Overflow(_) =
                    cap.admit(page(&format!("big.test/p/{k}")), at, SiteCap::Default)
                {
                    other += 1;
                }
            }
            *share = other as f64 / views_per_hour as f64;
        }
        (shares[0], shares[1])
    }

    #[test]
    fn a_big_zipf_site_is_counted_on_its_own_pages_from_the_first_hour() {
        // 10,000 pages, a million views an hour (about 280 a second): at
        // most 1 % under the overflow page in the first hour, 0.1 % after.
        let (first, second) = zipf_shares(10_000, 1_000_000);
        assert!(first <= 0.01, "first hour {first}");
        assert!(second <= 0.001, "second hour {second}");
    }

    #[test]
    fn a_junk_flood_creates_at_most_the_budgets_and_fixed_memory() {
        let config = config(1_000, 100_000, 150_000);
        let cap = PageCap::new(config);
        // 500,000 unique random paths to one site, then to twenty more.
        for i in 0..500_000u64 {
            let _ = cap.admit(page(&format!("junk.test/x{i:x}")), t(), SiteCap::Default);
        }
        let one = cap.status("junk.test", t(), SiteCap::Default);
        // Seen once each: only the first-sight budget got pages (a random
        // path landing on a slot another path left is a 1 in 2^64 hash
        // match, so the repeat budget stays unused).
        assert_eq!((one.first_sight, one.repeat), (1_000, 0));
        for s in 0..20 {
            for i in 0..50_000u64 {
                // Each path twice: every one passes the repeat rule.
                for _ in 0..2 {
                    let _ = cap.admit(page(&format!("j{s}.test/x{i:x}")), t(), SiteCap::Default);
                }
            }
        }
        let known = cap.stats.known_pages.load(Relaxed);
        assert!(known <= config.instance_per_hour, "{known} pages known");
        assert!(cap.stats.instance_refusals.load(Relaxed) > 0);
        // Memory: the candidate table is fixed, the known pages bounded by
        // the instance budget.
        assert_eq!(cap.candidates.len(), config.candidates);
    }
}

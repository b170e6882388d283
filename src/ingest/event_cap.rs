//! How many custom event names a site may use, decided in memory like the
//! new-page cap (`page_cap`).
//!
//! Anyone can send `e=<anything>` with a site's public id. The breakdown
//! buckets already bound what is stored (50 names each, the rest in
//! `other_event`), but a flood of made-up names would push a site's real
//! events into "other". So a site may use at most
//! [`MAX_EVENT_NAMES_PER_DAY`] distinct names a UTC day: names it already
//! used that day always pass, a new one beyond the cap is refused
//! (`event-cap`).
//!
//! The cap is the breakdown buckets' own ([`MAX_NAMES_PER_BUCKET`]): a
//! UTC day's names then all fit in the site's day bucket (and its hours'),
//! so none is pushed into "other".
//!
//! *Junk cannot lock out real names.* The site's event goals always pass,
//! and keep their places in the day's budget until they come: other names
//! fill only what the goals leave. And one client (an address; an IPv6 client by its /64, as the
//! visitor ids take it) may bring at most [`NEW_NAMES_PER_CLIENT`] new
//! names to a site's day: a flood from one client uses that much of the
//! budget and no more, so real visitors' names still find room. The
//! clients are kept only as keyed hashes, in memory, until the site's day
//! ends. The known names are forgotten at midnight UTC and at a restart,
//! which only lets a site start its day's budget again.
//!
//! The same budget bounds a site's custom properties
//! ([`EventCap::properties`]): at most [`MAX_PROPERTY_VALUES_PER_DAY`]
//! distinct key and value pairs a UTC day, of which one client brings at
//! most [`NEW_PROPERTY_VALUES_PER_CLIENT`]. A pair past it is left out of
//! its hit, which still counts. Names are remembered as keyed hashes, so
//! a day of 2,000-byte values costs the same memory as short ones.

use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Mutex;

use crate::storage::breakdowns::MAX_NAMES_PER_BUCKET;

/// Distinct event names one site may send in a UTC day.
pub const MAX_EVENT_NAMES_PER_DAY: usize = MAX_NAMES_PER_BUCKET;

/// New names one client may bring to a site's day.
pub const NEW_NAMES_PER_CLIENT: u8 = 5;

/// Distinct property key and value pairs one site may send in a UTC day.
pub const MAX_PROPERTY_VALUES_PER_DAY: usize = 1_000;

/// New property pairs one client may bring to a site's day: one hit's
/// worth.
pub const NEW_PROPERTY_VALUES_PER_CLIENT: u8 = 30;

#[derive(Debug)]
pub struct EventCap {
    /// Keys the clients' and names' hashes, so none can be aimed at
    /// another's.
    keys: std::collections::hash_map::RandomState,
    days: Mutex<HashMap<String, SiteDay>>,
    per_day: usize,
    per_client: u8,
}

impl Default for EventCap {
    /// The events' budget.
    fn default() -> Self {
        Self::with_limits(MAX_EVENT_NAMES_PER_DAY, NEW_NAMES_PER_CLIENT)
    }
}

#[derive(Debug)]
struct SiteDay {
    day: NaiveDate,
    /// Keyed hashes of the names admitted today.
    names: HashSet<u64>,
    /// New names each client brought today (at most one entry per name
    /// admitted, so bounded by the cap).
    by_client: HashMap<u64, u8>,
}

/// Why a name was not admitted (both answered `event-cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The site used its day's names.
    SiteFull,
    /// This client brought its share of new names already.
    ClientFull,
}

impl EventCap {
    fn with_limits(per_day: usize, per_client: u8) -> Self {
        Self {
            keys: Default::default(),
            days: Mutex::default(),
            per_day,
            per_client,
        }
    }

    /// The properties' budget, of key and value pairs.
    pub fn properties() -> Self {
        Self::with_limits(MAX_PROPERTY_VALUES_PER_DAY, NEW_PROPERTY_VALUES_PER_CLIENT)
    }

    /// Whether a property `key: value` of a hit to `site` fits the
    /// site's day.
    /// `goals` are the pairs the site's goals name ([`Self::goal_pair`]):
    /// like event goals, always admitted, so a flood of made-up pairs
    /// cannot strip a goal's value from the day's hits.
    pub fn admit_property(
        &self,
        site: &str,
        (key, value): (&str, &str),
        goals: &[&str],
        client: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Refusal> {
        self.admit(site, &Self::goal_pair(key, value), goals, client, at)
    }

    /// A property pair as the budget names it.
    pub fn goal_pair(key: &str, value: &str) -> String {
        format!("{key}\u{0}{value}")
    }

    /// Whether `site` may count an event named `name` at `at`, sent by
    /// `client` (its address key). `goals` are the names of the site's
    /// event goals.
    pub fn admit(
        &self,
        site: &str,
        name: &str,
        goals: &[&str],
        client: &str,
        at: DateTime<Utc>,
    ) -> Result<(), Refusal> {
        let today = at.date_naive();
        let mut days = self.days.lock().unwrap_or_else(|e| e.into_inner());
        let entry = days.entry(site.to_owned()).or_insert_with(|| SiteDay {
            day: today,
            names: HashSet::new(),
            by_client: HashMap::new(),
        });
        if entry.day != today {
            entry.day = today;
            entry.names.clear();
            entry.by_client.clear();
        }
        let hash = |name: &str| self.keys.hash_one(("name", name));
        let named = hash(name);
        if entry.names.contains(&named) {
            return Ok(());
        }
        if goals.contains(&name) {
            // Its place was kept: never refused, never charged to the
            // client.
            entry.names.insert(named);
            return Ok(());
        }
        let kept = goals
            .iter()
            .filter(|g| !entry.names.contains(&hash(g)))
            .count();
        if entry.names.len() + kept >= self.per_day {
            return Err(Refusal::SiteFull);
        }
        let brought = entry
            .by_client
            .entry(self.keys.hash_one(("client", client)))
            .or_default();
        if *brought >= self.per_client {
            return Err(Refusal::ClientFull);
        }
        *brought += 1;
        entry.names.insert(named);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, 10, 0, 0).unwrap()
    }

    #[test]
    fn a_site_may_use_its_days_names_and_no_more() {
        let cap = EventCap::default();
        let at = at();
        for i in 0..MAX_EVENT_NAMES_PER_DAY {
            let client = format!("10.0.{}.1", i / NEW_NAMES_PER_CLIENT as usize);
            assert_eq!(
                cap.admit("a.test", &format!("e{i}"), &[], &client, at),
                Ok(())
            );
        }
        assert_eq!(
            cap.admit("a.test", "one more", &[], "10.9.9.9", at),
            Err(Refusal::SiteFull)
        );
        assert_eq!(
            cap.admit("a.test", "e7", &[], "10.9.9.9", at),
            Ok(()),
            "a known name still counts"
        );
        assert_eq!(
            cap.admit("b.test", "one more", &[], "10.9.9.9", at),
            Ok(()),
            "per site"
        );
        let tomorrow = at + chrono::TimeDelta::days(1);
        assert_eq!(
            cap.admit("a.test", "one more", &[], "10.9.9.9", tomorrow),
            Ok(())
        );
    }

    #[test]
    fn a_sites_property_pairs_have_their_own_budget() {
        let cap = EventCap::properties();
        let at = at();
        for i in 0..MAX_PROPERTY_VALUES_PER_DAY {
            let client = format!("10.0.{}.1", i / NEW_PROPERTY_VALUES_PER_CLIENT as usize);
            assert_eq!(
                cap.admit_property("a.test", ("author", &format!("a{i}")), &[], &client, at),
                Ok(())
            );
        }
        assert_eq!(
            cap.admit_property("a.test", ("author", "new"), &[], "10.9.9.9", at),
            Err(Refusal::SiteFull)
        );
        assert_eq!(
            cap.admit_property("a.test", ("author", "a7"), &[], "10.9.9.9", at),
            Ok(()),
            "a known pair still counts"
        );
        let goal = EventCap::goal_pair("plan", "pro");
        assert_eq!(
            cap.admit_property("a.test", ("plan", "pro"), &[&goal], "10.9.9.9", at),
            Ok(()),
            "a goal's pair counts past the budget"
        );
        for i in 0..NEW_PROPERTY_VALUES_PER_CLIENT {
            assert_eq!(
                cap.admit_property("b.test", ("k", &format!("{i}")), &[], "1.2.3.4", at),
                Ok(())
            );
        }
        assert_eq!(
            cap.admit_property("b.test", ("k", "more"), &[], "1.2.3.4", at),
            Err(Refusal::ClientFull)
        );
    }

    #[test]
    fn one_client_brings_only_its_share_of_new_names() {
        let cap = EventCap::default();
        let at = at();
        for i in 0..NEW_NAMES_PER_CLIENT {
            assert_eq!(
                cap.admit("a.test", &format!("junk{i}"), &[], "1.2.3.4", at),
                Ok(())
            );
        }
        assert_eq!(
            cap.admit("a.test", "junk-more", &[], "1.2.3.4", at),
            Err(Refusal::ClientFull)
        );
        assert_eq!(
            cap.admit("a.test", "junk0", &[], "1.2.3.4", at),
            Ok(()),
            "its admitted names still count"
        );
        assert_eq!(
            cap.admit("a.test", "Signup", &[], "5.6.7.8", at),
            Ok(()),
            "another client's new name has room"
        );
        assert_eq!(
            cap.admit("b.test", "junk-more", &[], "1.2.3.4", at),
            Ok(()),
            "a client's share is per site"
        );
    }

    #[test]
    fn goals_keep_their_places_and_pass_a_full_day() {
        let cap = EventCap::default();
        let at = at();
        let goals = ["Signup", "Purchase"];
        let mut admitted = 0;
        for i in 0..MAX_EVENT_NAMES_PER_DAY {
            let client = format!("10.0.{}.1", i / NEW_NAMES_PER_CLIENT as usize);
            if cap
                .admit("a.test", &format!("e{i}"), &goals, &client, at)
                .is_ok()
            {
                admitted += 1;
            }
        }
        assert_eq!(
            admitted,
            MAX_EVENT_NAMES_PER_DAY - goals.len(),
            "the goals' places kept"
        );
        assert_eq!(cap.admit("a.test", "Signup", &goals, "1.2.3.4", at), Ok(()));
        assert_eq!(
            cap.admit("a.test", "Purchase", &goals, "1.2.3.4", at),
            Ok(())
        );
        assert_eq!(
            cap.admit("a.test", "Signup", &[], "1.2.3.4", at),
            Ok(()),
            "known from then on"
        );
        assert_eq!(
            cap.admit("a.test", "Another", &goals, "1.2.3.5", at),
            Err(Refusal::SiteFull),
            "the day holds no more than a bucket"
        );
    }
}

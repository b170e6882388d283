//! `visit_days`: per site and UTC day, how many journaled hits the visits
//! stream has applied to the visits that started that day, and how many
//! visits it opened (their first view). Written by the visits applier in
//! the same transaction as the visits' parts (`VisitWrites`), so each
//! count is exact across crashes: a day's visits change exactly when its
//! counter does.
//!
//! ```text
//! { _id: "example.com 20414",   // the site and the day's number (days since 1970)
//!   site: "example.com",
//!   day: ISODate(the day's midnight, UTC),
//!   hits: 1234, visits: 456 }
//! ```
//!
//! Two readers: a day pack (`visit_packs`) is valid only while its day's
//! counter is what it was built from, and the filtered reads decide whether
//! to sample from the visits of the range's days without counting the
//! documents.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::BTreeMap;

use super::page_summaries::{day_number, day_start};
use super::schema::IndexSpec;
use super::Store;

pub const COLLECTION: &str = "visit_days";

/// The shard key, and the reads' index: a site's days are contiguous.
pub fn shard_key() -> Document {
    doc! {"site": 1, "day": 1}
}

pub fn indexes() -> Vec<IndexSpec> {
    vec![IndexSpec::new(COLLECTION, "site_1_day_1", shard_key())]
}

/// A day's counter: what a pack built from it must still find.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DayCount {
    /// Journaled hits applied to the day's visits.
    pub hits: i64,
    /// Visits opened (their first view applied).
    pub visits: i64,
}

impl DayCount {
    pub fn from_document(d: &Document) -> Self {
        DayCount {
            hits: super::values::count(d.get("hits")),
            visits: super::values::count(d.get("visits")),
        }
    }
}

fn id(site: &str, day: i64) -> String {
    format!("{site} {day}")
}

/// The upsert adding `count` to a site's day (`day`: its number), matched
/// on the id and the shard key (a sharded upsert names it whole).
pub fn statement(site: &str, day: i64, count: DayCount) -> Document {
    doc! {
        "q": {"_id": id(site, day), "site": site, "day": bson::DateTime::from_chrono(day_start(day))},
        "u": {"$inc": {"hits": count.hits, "visits": count.visits}},
        "upsert": true,
    }
}

/// The site and day number a refused statement's filter names.
pub fn key_of(q: &Document) -> Option<(String, i64)> {
    let site = q.get_str("site").ok()?;
    let day = q.get_datetime("day").ok()?;
    Some((site.to_owned(), day_number(day.to_chrono())))
}

/// The counters of a site's days `[first, end)` (day numbers), by day;
/// a day without one is absent (no visit applied since counters exist).
/// Read from the primary: what a pack is checked against must be at least
/// as new as the pack.
pub async fn counts(
    store: &Store,
    site: &str,
    first: i64,
    end: i64,
) -> Result<BTreeMap<i64, DayCount>, mongodb::error::Error> {
    let mut cursor = store
        .db()
        .collection::<Document>(COLLECTION)
        .find(doc! {
            "site": site,
            "day": {"$gte": bson::DateTime::from_chrono(day_start(first)),
                    "$lt": bson::DateTime::from_chrono(day_start(end))},
        })
        .projection(doc! {"_id": 0, "day": 1, "hits": 1, "visits": 1})
        .max_time(store.report_max_time())
        .await?;
    let mut out = BTreeMap::new();
    while let Some(d) = cursor.try_next().await? {
        if let Ok(day) = d.get_datetime("day") {
            out.insert(day_number(day.to_chrono()), DayCount::from_document(&d));
        }
    }
    Ok(out)
}

/// The sites with visits applied on day `day` (its number).
pub async fn sites_on(store: &Store, day: i64) -> Result<Vec<String>, mongodb::error::Error> {
    let at = bson::DateTime::from_chrono(day_start(day));
    let mut cursor = store
        .db()
        .collection::<Document>(COLLECTION)
        .find(doc! {"day": at})
        .projection(doc! {"_id": 0, "site": 1})
        .await?;
    let mut sites = Vec::new();
    while let Some(d) = cursor.try_next().await? {
        if let Ok(site) = d.get_str("site") {
            sites.push(site.to_owned());
        }
    }
    sites.sort();
    sites.dedup();
    Ok(sites)
}

/// Removes a site's counters (its purge).
pub async fn delete_site(store: &Store, site: &str) -> Result<u64, mongodb::error::Error> {
    Ok(store
        .db()
        .collection::<Document>(COLLECTION)
        .delete_many(doc! {"site": site})
        .await?
        .deleted_count)
}

/// The day number of a time.
pub fn day_of(at: DateTime<Utc>) -> i64 {
    day_number(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_names_the_shard_key_and_its_key_comes_back() {
        let s = statement("a.com", 20_000, DayCount { hits: 3, visits: 1 });
        let q = s.get_document("q").unwrap();
        assert_eq!(q.get_str("_id"), Ok("a.com 20000"));
        assert_eq!(key_of(q), Some(("a.com".to_owned(), 20_000)));
        assert_eq!(
            s.get_document("u").unwrap(),
            &doc! {"$inc": {"hits": 3i64, "visits": 1i64}}
        );
    }
}

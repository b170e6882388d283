//! `imported_properties`: the custom properties an import brought, per
//! site, day and event, beside the day's visits, for the Properties report.
//!
//! An import keeps days, not visits, so its properties cannot go in the
//! visit store the report reads for tracked hits. Plausible's export keeps
//! one kind: the `link_url` (as `url`) and `path` of its custom events,
//! which its script's extensions send with outbound links, downloads and
//! 404s. Each is counted here with its events and its visitors (as
//! visits); and each day's visits, so a value's share is of every visit.
//! Umami's event data (`import::umami_data`) gives views properties too:
//! a view's are counted as views, under the event name `""`.
//!
//! ```text
//! { _id: "<hex: site, day, event, key, value>",
//!   site: "example.com", timestamp: ISODate(the day's first instant),
//!   event: "Outbound Link: Click", key: "url", value: "https://…",
//!   events: 12, visits: 9 }
//! { _id: …, site, timestamp, event: "", key: "author", value: "Jane",
//!   views: 40, visits: 31 }                                   // views
//! { _id: "<hex: site, day>", site, timestamp, visits: 1234 }   // the day
//! ```
//!
//! Written by the import's breakdowns stream in the transaction that
//! advances its progress (`BucketWriter::apply_figures`), as `$inc`s, so
//! an import killed midway and run again counts each row once, and a
//! deleted import's rows are taken back by the same statements with the
//! other sign. Kept as long as the day buckets (`storage::retention`),
//! removed with a purged site (`storage::site_purge`) and, over the days
//! it replaces, by an `--overlap replace` import's clear
//! (`storage::clear`). Not sharded by `setup --shard`: a site's documents
//! are its imported days' distinct link URLs and paths, far fewer than
//! its buckets.

use bson::{doc, Document, RawDocumentBuf};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::BTreeMap;

use super::schema::IndexSpec;
use super::Store;

pub const COLLECTION: &str = "imported_properties";

pub fn indexes() -> Vec<IndexSpec> {
    vec![IndexSpec::new(
        COLLECTION,
        "site_1_timestamp_1",
        doc! {"site": 1, "timestamp": 1},
    )]
}

/// A batch's property and day counts, merged per document.
#[derive(Debug, Default)]
pub struct PropertyCounts {
    by_id: BTreeMap<String, Pending>,
}

#[derive(Debug)]
struct Pending {
    set: Document,
    /// Events, or for a view's property (event `""`) views.
    hits: i64,
    visits: i64,
}

/// The event name a view's properties are counted under: no event's name
/// is empty (`domain::EventName`).
pub const VIEWS: &str = "";

impl PropertyCounts {
    /// `events` events of `event` carrying `key` = `value` on the day
    /// starting at `at`, sent in `visits` visits (negative: taken back);
    /// for `event` [`VIEWS`], `events` views.
    pub fn add_property(
        &mut self,
        site: &str,
        at: DateTime<Utc>,
        (event, key, value): (&str, &str, &str),
        events: i64,
        visits: i64,
    ) {
        let id = id(&[site, &at.timestamp_millis().to_string(), event, key, value]);
        let set = doc! {
            "site": site,
            "timestamp": bson::DateTime::from_chrono(at),
            "event": event,
            "key": key,
            "value": value,
        };
        self.add(id, set, events, visits);
    }

    /// The day starting at `at` had `visits` visits (negative: taken
    /// back): what a value's share is of.
    pub fn add_day(&mut self, site: &str, at: DateTime<Utc>, visits: i64) {
        let id = id(&[site, &at.timestamp_millis().to_string()]);
        let set = doc! {"site": site, "timestamp": bson::DateTime::from_chrono(at)};
        self.add(id, set, 0, visits);
    }

    fn add(&mut self, id: String, set: Document, hits: i64, visits: i64) {
        let pending = self.by_id.entry(id).or_insert(Pending {
            set,
            hits: 0,
            visits: 0,
        });
        pending.hits = pending.hits.saturating_add(hits);
        pending.visits = pending.visits.saturating_add(visits);
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// One upsert per document, as BSON bytes.
    pub fn raw_statements(&self) -> Result<Vec<RawDocumentBuf>, bson::raw::Error> {
        self.by_id
            .iter()
            .map(|(id, p)| {
                let mut inc = doc! {"visits": p.visits};
                match p.set.get_str("event") {
                    Ok(VIEWS) => inc.insert("views", p.hits),
                    Ok(_) => inc.insert("events", p.hits),
                    Err(_) => None,
                };
                RawDocumentBuf::from_document(&doc! {
                    "q": {"_id": id},
                    "u": {"$inc": inc, "$setOnInsert": p.set.clone()},
                    "upsert": true,
                })
            })
            .collect()
    }
}

/// A document's key: a hash of its parts, each length-prefixed, so that
/// values of up to 2,000 bytes make an `_id` of 64 characters.
fn id(parts: &[&str]) -> String {
    let mut hasher = blake3::Hasher::new();
    for p in parts {
        hasher.update(&(p.len() as u64).to_le_bytes());
        hasher.update(p.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// One imported value of a property over a range: its views and events,
/// and its visitors as visits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedProperty {
    pub key: String,
    pub value: String,
    pub views: i64,
    pub events: i64,
    pub visits: i64,
}

/// What imports brought to a range: each value's figures, and the days'
/// visits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportedRange {
    pub properties: Vec<ImportedProperty>,
    pub visits: i64,
}

impl ImportedRange {
    pub fn is_empty(&self) -> bool {
        self.properties.is_empty() && self.visits == 0
    }
}

/// The imported properties and visits of `site`'s days starting in
/// `[from, to)`, through the reports' read preference, added up per key
/// and value as they arrive, so what is held is one entry per distinct
/// value (charged to `hold` when first seen: a read past the budget
/// stops), however many days the range has. A document below 0 (an
/// import recorded before imported properties, taken back by a newer
/// build, cannot be: see `ImportRecord::properties`) counts as 0.
pub async fn read<E: From<mongodb::error::Error>>(
    store: &Store,
    site: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    mut hold: impl FnMut(u64) -> Result<(), E>,
) -> Result<ImportedRange, E> {
    let mut found = ImportedRange::default();
    if from >= to {
        return Ok(found);
    }
    let mut cursor = store
        .reports()
        .collection::<Document>(COLLECTION)
        .find(doc! {
            "site": site,
            "timestamp": {"$gte": bson::DateTime::from_chrono(from),
                          "$lt": bson::DateTime::from_chrono(to)},
        })
        .projection(doc! {"key": 1, "value": 1, "views": 1, "events": 1, "visits": 1})
        .max_time(store.report_max_time())
        .await?;
    let mut values: BTreeMap<(String, String), (i64, i64, i64)> = BTreeMap::new();
    while let Some(d) = cursor.try_next().await? {
        let visits = super::values::count(d.get("visits")).max(0);
        let events = super::values::count(d.get("events")).max(0);
        let views = super::values::count(d.get("views")).max(0);
        let (Ok(key), Ok(value)) = (d.get_str("key"), d.get_str("value")) else {
            found.visits = found.visits.saturating_add(visits);
            continue;
        };
        if views == 0 && events == 0 && visits == 0 {
            continue;
        }
        let pair = (key.to_owned(), value.to_owned());
        if !values.contains_key(&pair) {
            hold((pair.0.len() + pair.1.len() + 96) as u64)?;
        }
        let sums = values.entry(pair).or_default();
        sums.0 = sums.0.saturating_add(views);
        sums.1 = sums.1.saturating_add(events);
        sums.2 = sums.2.saturating_add(visits);
    }
    found.properties = values
        .into_iter()
        .map(|((key, value), (views, events, visits))| ImportedProperty {
            key,
            value,
            views,
            events,
            visits,
        })
        .collect();
    Ok(found)
}

/// Deletes what imports brought to `site`'s days starting in `[from,
/// to)`: an `--overlap replace` import's clear, before its own rows.
pub async fn clear_span(
    store: &Store,
    site: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<u64, mongodb::error::Error> {
    let span = doc! {"$gte": bson::DateTime::from_chrono(from),
    "$lt": bson::DateTime::from_chrono(to)};
    Ok(store
        .db()
        .collection::<Document>(COLLECTION)
        .delete_many(doc! {"site": site, "timestamp": span})
        .write_concern(store.commit_write_concern())
        .await?
        .deleted_count)
}

/// Deletes `site`'s documents taken back to nothing (a deleted import's),
/// so that reads do not scan them for ever: none holds a count.
pub async fn drop_emptied(store: &Store, site: &str) -> Result<u64, mongodb::error::Error> {
    Ok(store
        .db()
        .collection::<Document>(COLLECTION)
        .delete_many(doc! {
            "site": site,
            "visits": {"$lte": 0},
            "$and": [
                {"$or": [{"events": {"$exists": false}}, {"events": {"$lte": 0}}]},
                {"$or": [{"views": {"$exists": false}}, {"views": {"$lte": 0}}]},
            ],
        })
        .await?
        .deleted_count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 10, d, 23, 0, 0).unwrap()
    }

    fn statements(c: &PropertyCounts) -> Vec<Document> {
        c.raw_statements()
            .unwrap()
            .into_iter()
            .map(|r| r.to_document().unwrap())
            .collect()
    }

    #[test]
    fn rows_of_one_value_and_day_merge_into_one_upsert() {
        let mut c = PropertyCounts::default();
        let link = ("Outbound Link: Click", "url", "https://a.example/");
        c.add_property("s.example", at(1), link, 3, 2);
        c.add_property("s.example", at(1), link, 4, 1);
        c.add_property("s.example", at(2), link, 1, 1);
        c.add_day("s.example", at(1), 40);
        c.add_day("s.example", at(1), 2);
        let s = statements(&c);
        assert_eq!(s.len(), 3);
        let of = |day: u32, key: bool| {
            s.iter()
                .find(|d| {
                    let on = d
                        .get_document("u")
                        .unwrap()
                        .get_document("$setOnInsert")
                        .unwrap();
                    on.get_datetime("timestamp").unwrap().to_chrono() == at(day)
                        && on.contains_key("key") == key
                })
                .unwrap()
                .get_document("u")
                .unwrap()
                .get_document("$inc")
                .unwrap()
                .clone()
        };
        assert_eq!(of(1, true), doc! {"visits": 3i64, "events": 7i64});
        assert_eq!(of(2, true), doc! {"visits": 1i64, "events": 1i64});
        assert_eq!(of(1, false), doc! {"visits": 42i64});
        assert!(s.iter().all(|d| d.get_bool("upsert") == Ok(true)));
    }

    #[test]
    fn a_taken_back_row_is_the_same_document_with_the_other_sign() {
        let (mut put, mut back) = (PropertyCounts::default(), PropertyCounts::default());
        let path = ("404", "path", "/gone");
        put.add_property("s.example", at(3), path, 5, 4);
        back.add_property("s.example", at(3), path, -5, -4);
        let (p, b) = (&statements(&put)[0], &statements(&back)[0]);
        assert_eq!(p.get_document("q"), b.get_document("q"));
        assert_eq!(
            b.get_document("u").unwrap().get_document("$inc").unwrap(),
            &doc! {"visits": -4i64, "events": -5i64}
        );
    }

    #[test]
    fn ids_tell_apart_what_a_separator_could_join() {
        assert_ne!(id(&["a", "b c"]), id(&["a b", "c"]));
        assert_ne!(id(&["s", "1", "e", "k", "v"]), id(&["s", "1"]));
        assert_eq!(id(&["s", "1"]).len(), 64);
    }
}

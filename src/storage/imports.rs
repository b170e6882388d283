//! What `tickertape import` ran: one document per import (`imports`,
//! `_id` the import's key), written when it starts and completed when it
//! ends. The days it skips as overlapping live figures are decided at its
//! first start and kept here, so that a rerun (after a crash) skips the
//! same rows, whatever the import itself has written since.

use bson::{doc, Document};
use chrono::{DateTime, NaiveDate, Utc};
use futures::TryStreamExt;

use super::{Resolution, Store, Subject};

pub const COLLECTION: &str = "imports";

/// An import as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportRecord {
    pub key: String,
    pub kind: String,
    /// The site's id.
    pub site: String,
    pub file: String,
    /// A second file the rows depend on (Umami's sessions), if any.
    pub also_file: Option<String>,
    /// A third (Umami's event data), if any.
    pub data_file: Option<String>,
    /// Rows in the file (all checked before anything was written).
    pub rows: u64,
    /// UTC days whose rows are skipped: the site had live figures on
    /// them when the import first started.
    pub skipped_days: Vec<NaiveDate>,
    pub started_at: DateTime<Utc>,
    /// Set once every row is in.
    pub finished_at: Option<DateTime<Utc>>,
    /// Rows applied, views and events counted (when finished).
    pub views: u64,
    pub events: u64,
    /// For an import of days' figures (Plausible's), the instants its
    /// days span: reports finer than a day over them say so.
    pub daily: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// What decided where its rows landed besides the file (the site's
    /// zone and hosts, the classifier's version): a delete under another
    /// would not take back what was added.
    pub context: String,
    /// A delete has started: the import must not run again until it ends.
    pub deleting: bool,
    /// Days with live figures whose figures the import replaces
    /// (`--overlap replace`): cleared ([`super::clear`]) before any row is
    /// applied, each over the instants it spans.
    pub replaced: Vec<ReplacedDay>,
    /// Every replaced day is cleared: rows may be applied.
    pub cleared: bool,
    /// Spans later imports of the site cleared to replace them: this
    /// import's rows there are gone, and its delete skips them.
    pub cleared_by_others: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// The site buckets' part its rows went to
    /// ([`super::buckets::PART_IMPORT`]; 0, lane 0's, for imports recorded
    /// before imports had a part of their own): its delete takes them back
    /// from there.
    pub part: i32,
    /// Umami's `--from-website`: the website whose rows it imported.
    pub from_website: Option<String>,
    /// Rows later than this are held back (its first start; none for
    /// imports recorded before rows were held back).
    pub skip_after: Option<DateTime<Utc>>,
    /// What identifies its rows whatever else its files hold (Umami's
    /// event ids), to recognise them in another import.
    pub rows_key: Option<String>,
    /// Its rows wrote what they carry of custom properties
    /// ([`super::imported_properties`]); false for imports recorded
    /// before they did, whose delete must take none back.
    pub properties: bool,
}

/// A day an import replaces, and the instants it spans (a day in the
/// site's zone for Plausible's days, else a UTC day).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplacedDay {
    pub day: NaiveDate,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

fn from_doc(d: &Document) -> Option<ImportRecord> {
    let date = |v: &bson::Bson| v.as_str().and_then(|s| s.parse().ok());
    Some(ImportRecord {
        key: d.get_str("_id").ok()?.to_owned(),
        kind: d.get_str("kind").ok()?.to_owned(),
        site: d.get_str("site").ok()?.to_owned(),
        file: d.get_str("file").unwrap_or_default().to_owned(),
        also_file: d.get_str("alsoFile").ok().map(str::to_owned),
        data_file: d.get_str("dataFile").ok().map(str::to_owned),
        rows: super::values::count(d.get("rows")).max(0) as u64,
        skipped_days: d
            .get_array("skippedDays")
            .map(|a| a.iter().filter_map(date).collect())
            .unwrap_or_default(),
        started_at: d.get_datetime("startedAt").ok()?.to_chrono(),
        finished_at: d.get_datetime("finishedAt").ok().map(|t| t.to_chrono()),
        views: super::values::count(d.get("views")).max(0) as u64,
        events: super::values::count(d.get("events")).max(0) as u64,
        context: d.get_str("context").unwrap_or_default().to_owned(),
        deleting: d.get_bool("deleting").unwrap_or(false),
        replaced: documents(d, "replaced")
            .filter_map(|r| {
                let (from, to) = span_of(r)?;
                let day = r.get_str("day").ok()?.parse().ok()?;
                Some(ReplacedDay { day, from, to })
            })
            .collect(),
        cleared: d.get_bool("cleared").unwrap_or(false),
        part: d.get_i32("part").unwrap_or(0),
        from_website: d.get_str("fromWebsite").ok().map(str::to_owned),
        skip_after: d.get_datetime("skipAfter").ok().map(|t| t.to_chrono()),
        rows_key: d.get_str("rowsKey").ok().map(str::to_owned),
        properties: d.get_bool("properties").unwrap_or(false),
        cleared_by_others: documents(d, "clearedByOthers")
            .filter_map(span_of)
            .collect(),
        daily: match (d.get_datetime("dailyFrom"), d.get_datetime("dailyTo")) {
            (Ok(from), Ok(to)) => Some((from.to_chrono(), to.to_chrono())),
            _ => None,
        },
    })
}

/// The documents in the array `field` of `d` (none if it has no such
/// array).
fn documents<'a>(d: &'a Document, field: &str) -> impl Iterator<Item = &'a Document> {
    d.get_array(field)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_document())
}

/// A span as the record keeps it: `{from, to}`.
fn span_doc(from: DateTime<Utc>, to: DateTime<Utc>) -> Document {
    doc! {"from": bson::DateTime::from_chrono(from), "to": bson::DateTime::from_chrono(to)}
}

fn span_of(d: &Document) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    Some((
        d.get_datetime("from").ok()?.to_chrono(),
        d.get_datetime("to").ok()?.to_chrono(),
    ))
}

/// The days among `days` on which `domain`'s site has views already.
pub async fn days_with_views(
    store: &Store,
    domain: &str,
    days: impl IntoIterator<Item = NaiveDate>,
) -> Result<Vec<NaiveDate>, mongodb::error::Error> {
    let stamps: Vec<bson::DateTime> = days
        .into_iter()
        .map(|d| bson::DateTime::from_chrono(d.and_hms_opt(0, 0, 0).unwrap().and_utc()))
        .collect();
    let found: Vec<Document> = store
        .db()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .find(doc! {"site": domain, "timestamp": {"$in": stamps}, "totalViews": {"$gt": 0}})
        .projection(doc! {"timestamp": 1})
        .await?
        .try_collect()
        .await?;
    let mut days: Vec<NaiveDate> = found
        .iter()
        .filter_map(|d| d.get_datetime("timestamp").ok())
        .map(|t| t.to_chrono().date_naive())
        .collect();
    days.sort();
    days.dedup();
    Ok(days)
}

/// The days among `days` (dates in `tz`) on which `domain`'s site has
/// views already, read from the hours of its UTC day buckets. An hour
/// that straddles a local midnight (a zone half an hour off) marks both
/// days: a day is skipped rather than counted twice.
/// `local` gives a date's first instant in `tz` (`reports::local::midnight`,
/// a layer above this one).
pub async fn local_days_with_views(
    store: &Store,
    domain: &str,
    tz: chrono_tz::Tz,
    days: &std::collections::BTreeSet<NaiveDate>,
    local: impl Fn(NaiveDate) -> DateTime<Utc>,
) -> Result<Vec<NaiveDate>, mongodb::error::Error> {
    let (Some(first), Some(last)) = (days.first(), days.last()) else {
        return Ok(Vec::new());
    };
    let from = Resolution::Day.floor(local(*first));
    let to = local(last.succ_opt().unwrap_or(*last));
    let found: Vec<Document> = store
        .db()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .find(doc! {
            "site": domain,
            "timestamp": {"$gte": bson::DateTime::from_chrono(from), "$lt": bson::DateTime::from_chrono(to)},
            "totalViews": {"$gt": 0},
        })
        .projection(doc! {"timestamp": 1, "hours": 1})
        .await?
        .try_collect()
        .await?;
    let mut live = std::collections::BTreeSet::new();
    for d in &found {
        let Ok(start) = d.get_datetime("timestamp").map(|t| t.to_chrono()) else {
            continue;
        };
        let Ok(hours) = d.get_document("hours") else {
            continue;
        };
        for (hour, views) in hours {
            let (Ok(hour), true) = (hour.parse::<i64>(), super::values::count(Some(views)) > 0)
            else {
                continue;
            };
            let begins = start + chrono::TimeDelta::hours(hour);
            let ends = begins + chrono::TimeDelta::hours(1) - chrono::TimeDelta::seconds(1);
            for t in [begins, ends] {
                let day = t.with_timezone(&tz).date_naive();
                if days.contains(&day) {
                    live.insert(day);
                }
            }
        }
    }
    Ok(live.into_iter().collect())
}

/// Records the import's start unless it started before; returns the
/// record in force (a rerun gets the first run's skipped days).
pub async fn begin(
    store: &Store,
    record: &ImportRecord,
) -> Result<ImportRecord, mongodb::error::Error> {
    let days: Vec<String> = record.skipped_days.iter().map(|d| d.to_string()).collect();
    let replaced: Vec<Document> = record
        .replaced
        .iter()
        .map(|r| {
            let mut span = span_doc(r.from, r.to);
            span.insert("day", r.day.to_string());
            span
        })
        .collect();
    let imports = store.db().collection::<Document>(COLLECTION);
    imports
        .update_one(
            doc! {"_id": &record.key},
            doc! {"$setOnInsert": {
                "kind": &record.kind,
                "site": &record.site,
                "file": &record.file,
                "alsoFile": &record.also_file,
                "dataFile": &record.data_file,
                "context": &record.context,
                "rows": record.rows as i64,
                "skippedDays": days,
                "replaced": replaced,
                "cleared": record.replaced.is_empty(),
                "part": record.part,
                "fromWebsite": &record.from_website,
                "skipAfter": record.skip_after.map(bson::DateTime::from_chrono),
                "rowsKey": &record.rows_key,
                "properties": record.properties,
                "startedAt": bson::DateTime::from_chrono(record.started_at),
                "dailyFrom": record.daily.map(|(from, _)| bson::DateTime::from_chrono(from)),
                "dailyTo": record.daily.map(|(_, to)| bson::DateTime::from_chrono(to)),
            }},
        )
        .upsert(true)
        .write_concern(store.commit_write_concern())
        .await?;
    let stored = imports.find_one(doc! {"_id": &record.key}).await?;
    Ok(stored
        .as_ref()
        .and_then(from_doc)
        .unwrap_or_else(|| record.clone()))
}

/// Before `key` clears `spans` of its site: every other import of the
/// site records them, so that its delete skips its rows there. Refused
/// while another import of the site is incomplete or being deleted (its
/// rows would be cut differently from one run to the next).
pub async fn hand_over_spans(
    store: &Store,
    key: &str,
    site: &str,
    spans: &[(DateTime<Utc>, DateTime<Utc>)],
) -> Result<Result<(), String>, mongodb::error::Error> {
    if let Some(busy) = list(store, Some(site))
        .await?
        .into_iter()
        .find(|o| o.key != key && (o.finished_at.is_none() || o.deleting))
    {
        return Ok(Err(format!(
            "import {} of this site is {}: finish it first",
            busy.key,
            if busy.deleting {
                "being deleted"
            } else {
                "incomplete"
            }
        )));
    }
    let spans: Vec<Document> = spans
        .iter()
        .map(|(from, to)| span_doc(*from, *to))
        .collect();
    store
        .db()
        .collection::<Document>(COLLECTION)
        .update_many(
            doc! {"site": site, "_id": {"$ne": key}},
            doc! {"$addToSet": {"clearedByOthers": {"$each": spans}}},
        )
        .write_concern(store.commit_write_concern())
        .await?;
    Ok(Ok(()))
}

/// Records that every day the import replaces is cleared.
pub async fn mark_cleared(store: &Store, key: &str) -> Result<(), mongodb::error::Error> {
    store
        .db()
        .collection::<Document>(COLLECTION)
        .update_one(doc! {"_id": key}, doc! {"$set": {"cleared": true}})
        .write_concern(store.commit_write_concern())
        .await?;
    Ok(())
}

/// Marks the import complete, with what it counted.
pub async fn finish(
    store: &Store,
    key: &str,
    views: u64,
    events: u64,
    at: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    store
        .db()
        .collection::<Document>(COLLECTION)
        .update_one(
            doc! {"_id": key, "finishedAt": null},
            doc! {"$set": {
                "finishedAt": bson::DateTime::from_chrono(at),
                "views": views as i64,
                "events": events as i64,
            }},
        )
        .await?;
    Ok(())
}

/// The span of days the site's imports of daily figures cover within
/// `from`..`to`, if any does.
pub async fn daily_between(
    store: &Store,
    site: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Option<(DateTime<Utc>, DateTime<Utc>)>, mongodb::error::Error> {
    let found: Vec<Document> = store
        .db()
        .collection::<Document>(COLLECTION)
        .find(doc! {
            "site": site,
            "dailyFrom": {"$lt": bson::DateTime::from_chrono(to)},
            "dailyTo": {"$gt": bson::DateTime::from_chrono(from)},
        })
        .projection(doc! {"dailyFrom": 1, "dailyTo": 1})
        .await?
        .try_collect()
        .await?;
    let spans = found.iter().filter_map(|d| {
        Some((
            d.get_datetime("dailyFrom").ok()?.to_chrono().max(from),
            d.get_datetime("dailyTo").ok()?.to_chrono().min(to),
        ))
    });
    Ok(spans.reduce(|a, b| (a.0.min(b.0), a.1.max(b.1))))
}

/// Every import, oldest first; `site` (an id) keeps one site's.
pub async fn list(
    store: &Store,
    site: Option<&str>,
) -> Result<Vec<ImportRecord>, mongodb::error::Error> {
    let filter = match site {
        Some(site) => doc! {"site": site},
        None => doc! {},
    };
    let docs: Vec<Document> = store
        .db()
        .collection::<Document>(COLLECTION)
        .find(filter)
        .sort(doc! {"startedAt": 1})
        .await?
        .try_collect()
        .await?;
    Ok(docs.iter().filter_map(from_doc).collect())
}

/// Marks an import as being deleted (see [`ImportRecord::deleting`]).
pub async fn mark_deleting(store: &Store, key: &str) -> Result<(), mongodb::error::Error> {
    store
        .db()
        .collection::<Document>(COLLECTION)
        .update_one(doc! {"_id": key}, doc! {"$set": {"deleting": true}})
        .write_concern(store.commit_write_concern())
        .await?;
    Ok(())
}

/// One import's record.
pub async fn get(store: &Store, key: &str) -> Result<Option<ImportRecord>, mongodb::error::Error> {
    let found = store
        .db()
        .collection::<Document>(COLLECTION)
        .find_one(doc! {"_id": key})
        .await?;
    Ok(found.as_ref().and_then(from_doc))
}

/// After an import's rows were taken back: what a sketch cannot take back
/// is dropped where nothing is left to count. Hour and day buckets of the
/// site's pages and of the site between `from` and `to` that hold no view
/// lose their visitors' registers; breakdown buckets whose events are all
/// back to zero lose their converting visitors. A bucket that keeps views
/// (live ones, another import's) keeps its registers: its visitors may be
/// over-counted by the deleted import's.
pub async fn drop_emptied_sketches(
    store: &Store,
    domain: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    let range = doc! {
        "$gte": bson::DateTime::from_chrono(Resolution::Day.floor(from)),
        "$lte": bson::DateTime::from_chrono(to),
    };
    let pages = bson::Bson::Document(doc! {"$regex": format!("^{}/", regex_escape(domain))});
    let site = bson::Bson::String(domain.to_owned());
    for resolution in [Resolution::Hour, Resolution::Day] {
        for (subject, key) in [
            (Subject::Page, pages.clone()),
            (Subject::Site, site.clone()),
        ] {
            store
                .db()
                .collection::<Document>(subject.collection(resolution))
                .update_many(
                    doc! {
                        subject.key_field(): key,
                        "timestamp": range.clone(),
                        "totalViews": 0,
                        crate::storage::buckets::VisitFields::VISITORS: {"$exists": true},
                    },
                    doc! {
                        "$unset": {crate::storage::buckets::VisitFields::VISITORS: ""},
                        "$inc": {crate::storage::buckets::TAKEN_BACK: 1_i64},
                    },
                )
                .write_concern(store.commit_write_concern())
                .await?;
        }
    }
    let converted = crate::storage::breakdowns::CONVERTED;
    for resolution in crate::storage::breakdowns::LEVELS {
        for (subject, key) in [
            (Subject::Page, pages.clone()),
            (Subject::Site, site.clone()),
        ] {
            let collection =
                store
                    .db()
                    .collection::<Document>(crate::storage::breakdowns::collection(
                        subject, resolution,
                    ));
            let found: Vec<Document> = collection
                .find(doc! {
                    subject.key_field(): key.clone(),
                    "timestamp": range.clone(),
                    converted: {"$exists": true},
                })
                .projection(doc! {"_id": 1, crate::domain::Dimension::Event.field(): 1})
                .await?
                .try_collect()
                .await?;
            for d in found {
                let events_left = d
                    .get_document(crate::domain::Dimension::Event.field())
                    .map(|e| e.values().any(|v| super::values::count(Some(v)) != 0))
                    .unwrap_or(false);
                if !events_left {
                    collection
                        .update_one(
                            doc! {"_id": d.get("_id").cloned().unwrap_or(bson::Bson::Null)},
                            doc! {"$unset": {converted: ""}},
                        )
                        .write_concern(store.commit_write_concern())
                        .await?;
                }
            }
        }
    }
    Ok(())
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// Forgets a deleted import: its progress, its stored page summaries'
/// site (made again on demand, from the buckets as they are now), and
/// its record, last, so that a delete killed before this point is run
/// again whole.
pub async fn forget(
    store: &Store,
    record: &ImportRecord,
    delete_key: &str,
) -> Result<(), mongodb::error::Error> {
    let progress = store
        .db()
        .collection::<Document>(super::progress::COLLECTION);
    progress
        .delete_many(doc! {"journal": &record.key})
        .write_concern(store.commit_write_concern())
        .await?;
    super::page_summaries::delete_site(store, &record.site).await?;
    store
        .db()
        .collection::<Document>(COLLECTION)
        .delete_one(doc! {"_id": &record.key})
        .write_concern(store.commit_write_concern())
        .await?;
    progress
        .delete_many(doc! {"journal": delete_key})
        .write_concern(store.commit_write_concern())
        .await?;
    Ok(())
}

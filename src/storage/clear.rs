//! Clearing what a site counted over a span of time: an import run with
//! `--overlap replace` clears the days it replaces before its own rows are
//! applied to them (`tickertape import`, README "Overlap").
//!
//! A span is whole UTC hours (a day in a zone whose midnight is on a UTC
//! hour), so every minute and hour bucket lies wholly inside or outside
//! it; only a day bucket of a zone off UTC is partly inside. Every step
//! can run again and end the same, so a clear killed midway is simply run
//! again before anything is applied:
//!
//! - a view bucket has the span's slots and visit counters set to 0 and
//!   its total lowered by them, in one update that matches only while the
//!   bucket holds what was read (a bucket changed meanwhile is read
//!   again), so a rerun finds nothing left in the span; one wholly inside
//!   also loses its visitors;
//! - a breakdown bucket wholly inside loses every name; a day bucket
//!   partly inside is made again from its hour buckets outside the span
//!   (capped as the writer caps it), in the same transaction that empties
//!   the hour buckets inside, so a rerun makes the same day again;
//! - the imported properties of days starting in the span are deleted
//!   (`imported_properties`: an earlier import's, as the clear runs
//!   before this one's rows);
//! - every bucket written gets [`TAKEN_BACK`] (views) or [`WRITES`]
//!   (breakdowns) raised, so kept answers see the change, and the site's
//!   stored page summaries are dropped (made again from the buckets).
//!
//! A day bucket partly inside keeps its visitors' registers while it keeps
//! views: its visitors may stay over-counted (a sketch cannot subtract).

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::BTreeMap;

use super::breakdowns::{self, WRITES};
use super::buckets::{site_pages, Subject, VisitFields, TAKEN_BACK};
use super::{Resolution, Store};
use crate::domain::{Dimension, DomainName};

/// Why a span cannot be cleared.
#[derive(Debug, thiserror::Error)]
pub enum ClearError {
    #[error("a span to clear must start and end on whole UTC hours: {0} to {1}")]
    NotWholeHours(DateTime<Utc>, DateTime<Utc>),
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
    #[error("clearing: {0}")]
    Reply(String),
}

/// Clears `domain`'s pages and site totals over `from`..`to` (whole UTC
/// hours), at every level and in every breakdown; `site_id` is the same
/// site's id (its page summaries are kept under it).
pub async fn clear_span(
    store: &Store,
    domain: &DomainName,
    site_id: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), ClearError> {
    if !Resolution::Hour.aligned(from) || !Resolution::Hour.aligned(to) || to <= from {
        return Err(ClearError::NotWholeHours(from, to));
    }
    for subject in [Subject::Page, Subject::Site] {
        for level in Resolution::ALL {
            clear_views(store, domain, subject, level, from, to).await?;
        }
        clear_breakdowns(store, domain, subject, from, to).await?;
    }
    super::page_summaries::delete_site(store, site_id).await?;
    super::imported_properties::clear_span(store, domain.as_str(), from, to).await?;
    // Its bound is inclusive (a delete's is its last row's instant).
    let last = to - chrono::TimeDelta::seconds(1);
    super::imports::drop_emptied_sketches(store, domain.as_str(), from, last).await?;
    Ok(())
}

fn key_filter(subject: Subject, domain: &DomainName) -> Bson {
    match subject {
        Subject::Page => Bson::Document(site_pages(domain)),
        Subject::Site => Bson::String(domain.as_str().to_owned()),
    }
}

/// The buckets of `collection` at `level` that start before `to` and end
/// after `from`.
async fn overlapping(
    store: &Store,
    collection: &str,
    subject: Subject,
    domain: &DomainName,
    level: Resolution,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<mongodb::Cursor<Document>, mongodb::error::Error> {
    store
        .db()
        .collection::<Document>(collection)
        .find(doc! {
            subject.key_field(): key_filter(subject, domain),
            "timestamp": {
                "$gte": bson::DateTime::from_chrono(level.floor(from)),
                "$lt": bson::DateTime::from_chrono(to),
            },
        })
        .await
}

fn start_of(d: &Document) -> Option<DateTime<Utc>> {
    d.get_datetime("timestamp").ok().map(|t| t.to_chrono())
}

fn id_of(d: &Document) -> Bson {
    d.get("_id").cloned().unwrap_or(Bson::Null)
}

/// The slots of a bucket at `level` starting at `start` whose time lies in
/// `from`..`to`.
fn slots_inside(
    level: Resolution,
    start: DateTime<Utc>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<usize> {
    let slot = level.step() / level.slot_count() as i32;
    (0..level.slot_count())
        .filter(|&i| {
            let t = start + slot * i as i32;
            from <= t && t < to
        })
        .collect()
}

/// Statements per `update` command: a day of a busy site is a million
/// minute buckets, streamed and cleared a batch at a time.
const BATCH: usize = 1_000;

async fn clear_views(
    store: &Store,
    domain: &DomainName,
    subject: Subject,
    level: Resolution,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), ClearError> {
    let collection = subject.collection(level);
    // A statement matches only while the bucket still holds what was read
    // in the span; one that found it changed (a late hit) is read again.
    for _ in 0..MAX_PASSES {
        let mut found = overlapping(store, collection, subject, domain, level, from, to).await?;
        let mut statements = Vec::with_capacity(BATCH);
        let mut missed = 0;
        while let Some(bucket) = found.try_next().await? {
            let Some(start) = start_of(&bucket) else {
                continue;
            };
            if let Some((mut q, update)) = view_update(&bucket, level, start, from, to) {
                q.insert("_id", id_of(&bucket));
                statements.push(doc! {"q": q, "u": update});
            }
            if statements.len() == BATCH {
                missed += send(store, collection, std::mem::take(&mut statements)).await?;
            }
        }
        missed += send(store, collection, statements).await?;
        if missed == 0 {
            return Ok(());
        }
    }
    Err(ClearError::Reply(format!(
        "{collection}: buckets kept changing while they were cleared"
    )))
}

/// How often a level is read again because buckets changed under it.
const MAX_PASSES: usize = 5;

/// One `update` command of `statements` (each on a bucket by `_id`), with
/// the commit write concern; answers how many matched no bucket.
async fn send(
    store: &Store,
    collection: &str,
    statements: Vec<Document>,
) -> Result<usize, ClearError> {
    if statements.is_empty() {
        return Ok(0);
    }
    let sent = statements.len();
    let concern = bson::to_document(&store.commit_write_concern())
        .map_err(|e| ClearError::Reply(e.to_string()))?;
    let reply = store
        .db()
        .run_command(doc! {
            "update": collection,
            "updates": statements,
            "ordered": false,
            "writeConcern": concern,
        })
        .await?;
    if let Ok(wce) = reply.get_document("writeConcernError") {
        return Err(ClearError::Reply(format!(
            "{collection}: write concern error: {wce}"
        )));
    }
    if let Ok(errors) = reply.get_array("writeErrors") {
        if !errors.is_empty() {
            return Err(ClearError::Reply(format!("{collection}: {errors:?}")));
        }
    }
    let matched = super::values::count(reply.get("n")).max(0) as usize;
    Ok(sent.saturating_sub(matched))
}

/// What clearing `from`..`to` does to a view bucket, or None when it holds
/// nothing there: the filter that holds while the bucket has what was
/// read in the span, and the update. The span's slots are set to 0 and the
/// total lowered by them (`$inc`, so hits counted meanwhile in the slots
/// outside stay counted); a bucket wholly inside also loses its visitors.
fn view_update(
    bucket: &Document,
    level: Resolution,
    start: DateTime<Utc>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Option<(Document, Document)> {
    let slots_field = level.slots_field();
    let maps: Vec<&str> = std::iter::once(slots_field)
        .chain(VisitFields::COUNTERS)
        .collect();
    let inside = slots_inside(level, start, from, to);
    let held = |map: &str, slot: usize| {
        bucket
            .get_document(map)
            .ok()
            .and_then(|m| m.get(slot.to_string()))
            .map(|v| super::values::count(Some(v)))
            .unwrap_or(0)
    };
    let mut filter = Document::new();
    let mut set = Document::new();
    for map in &maps {
        for &slot in &inside {
            let n = held(map, slot);
            if n != 0 {
                filter.insert(format!("{map}.{slot}"), n);
                set.insert(format!("{map}.{slot}"), Bson::Int32(0));
            }
        }
    }
    if set.is_empty() {
        return None;
    }
    let cleared: i64 = inside.iter().map(|&s| held(slots_field, s)).sum();
    let mut update = doc! {"$set": set, "$inc": {"totalViews": -cleared, TAKEN_BACK: 1_i64}};
    if inside.len() == level.slot_count() {
        update.insert("$unset", doc! {VisitFields::VISITORS: ""});
    }
    Some((filter, update))
}

/// A breakdown bucket's counts: every dimension's names (as stored) and
/// its `other_*`, and the views with a known source.
#[derive(Debug, Default, PartialEq)]
struct Names {
    total: i64,
    names: BTreeMap<(Dimension, String), i64>,
    other: BTreeMap<Dimension, i64>,
}

impl Names {
    fn of(bucket: &Document) -> Self {
        let mut names = Names {
            total: super::values::count(bucket.get("totalViews")),
            ..Names::default()
        };
        for d in Dimension::ALL {
            if let Ok(map) = bucket.get_document(d.field()) {
                for (name, n) in map {
                    *names.names.entry((d, name.clone())).or_default() +=
                        super::values::count(Some(n));
                }
            }
            *names.other.entry(d).or_default() += super::values::count(bucket.get(d.other_field()));
        }
        names
    }

    fn add(&mut self, other: &Names) {
        self.total += other.total;
        for (k, n) in &other.names {
            *self.names.entry(k.clone()).or_default() += n;
        }
        for (d, n) in &other.other {
            *self.other.entry(*d).or_default() += n;
        }
    }

    fn is_empty(&self) -> bool {
        self.total == 0
            && self.names.values().all(|n| *n == 0)
            && self.other.values().all(|n| *n == 0)
    }

    /// The update that makes a day bucket hold `self` (what its hours
    /// outside the span add up to), each dimension capped as the writer
    /// caps it: the most counted names keep a counter, the rest go to
    /// `other_*`.
    fn as_day(&self) -> Document {
        let mut set = doc! {"totalViews": self.total};
        let mut unset = Document::new();
        for d in Dimension::ALL {
            let mut names: Vec<(&String, i64)> = self
                .names
                .iter()
                .filter(|((dim, _), n)| *dim == d && **n != 0)
                .map(|((_, name), n)| (name, *n))
                .collect();
            names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            let mut other = self.other.get(&d).copied().unwrap_or(0);
            let mut kept = Document::new();
            for (i, (name, n)) in names.into_iter().enumerate() {
                if i < breakdowns::MAX_NAMES_PER_BUCKET {
                    kept.insert(name.clone(), Bson::Int64(n));
                } else {
                    other += n;
                }
            }
            if kept.is_empty() {
                unset.insert(d.field(), "");
            } else {
                set.insert(d.field(), kept);
            }
            if other == 0 {
                unset.insert(d.other_field(), "");
            } else {
                set.insert(d.other_field(), Bson::Int64(other));
            }
        }
        let mut update = doc! {"$set": set, "$inc": {WRITES: 1_i64}};
        if !unset.is_empty() {
            update.insert("$unset", unset);
        }
        update
    }
}

/// Every name of a breakdown bucket gone: its counts, `other_*` and
/// converting visitors.
fn emptied() -> Document {
    let mut unset = doc! {breakdowns::CONVERTED: ""};
    for d in Dimension::ALL {
        unset.insert(d.field(), "");
        unset.insert(d.other_field(), "");
    }
    doc! {"$set": {"totalViews": 0_i64}, "$unset": unset, "$inc": {WRITES: 1_i64}}
}

async fn clear_breakdowns(
    store: &Store,
    domain: &DomainName,
    subject: Subject,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), ClearError> {
    let day = Resolution::Day;
    let day_collection = breakdowns::collection(subject, day);
    let hour_collection = breakdowns::collection(subject, Resolution::Hour);
    // Day buckets partly inside: made again from their hour buckets
    // outside the span (a day bucket is the sum of its hours: the writer
    // counts every name at both levels), in the same transaction that
    // empties the hours inside, so a rerun makes the same day again.
    let partial: Vec<Document> = overlapping(store, day_collection, subject, domain, day, from, to)
        .await?
        .try_collect()
        .await?;
    for bucket in partial {
        let Some(start) = start_of(&bucket) else {
            continue;
        };
        if from <= start && start + day.step() <= to {
            continue;
        }
        let key = bucket
            .get(subject.key_field())
            .cloned()
            .unwrap_or(Bson::Null);
        let mut hours = doc! {
            subject.key_field(): key,
            "timestamp": {
                "$gte": bson::DateTime::from_chrono(start),
                "$lt": bson::DateTime::from_chrono(start + day.step()),
            },
        };
        if let Some(part) = bucket.get("part") {
            hours.insert("part", part.clone());
        }
        remake_day(
            store,
            (hour_collection, day_collection),
            id_of(&bucket),
            hours,
            (from, to),
        )
        .await?;
    }
    // Then every bucket wholly inside, hours and days.
    for level in breakdowns::LEVELS {
        let collection = breakdowns::collection(subject, level);
        let mut found = overlapping(store, collection, subject, domain, level, from, to).await?;
        let mut statements = Vec::with_capacity(BATCH);
        while let Some(bucket) = found.try_next().await? {
            let Some(start) = start_of(&bucket) else {
                continue;
            };
            if start < from || start + level.step() > to || Names::of(&bucket).is_empty() {
                continue;
            }
            statements.push(doc! {"q": {"_id": id_of(&bucket)}, "u": emptied()});
            if statements.len() == BATCH {
                send(store, collection, std::mem::take(&mut statements)).await?;
            }
        }
        send(store, collection, statements).await?;
    }
    Ok(())
}

/// Makes the day bucket `day_id` again from its hour buckets (`hours`)
/// outside `span` and empties those inside, in one transaction.
async fn remake_day(
    store: &Store,
    (hour_collection, day_collection): (&str, &str),
    day_id: Bson,
    hours: Document,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<(), mongodb::error::Error> {
    let hour_coll = store.db().collection::<Document>(hour_collection);
    let day_coll = store.db().collection::<Document>(day_collection);
    let mut tries = 0;
    loop {
        let mut session = super::txn::begin(store).await?;
        let attempt: Result<(), mongodb::error::Error> = async {
            let found: Vec<Document> = hour_coll
                .find(hours.clone())
                .session(&mut session)
                .await?
                .stream(&mut session)
                .try_collect()
                .await?;
            let (inside, outside): (Vec<&Document>, Vec<&Document>) = found
                .iter()
                .partition(|h| start_of(h).is_some_and(|t| from <= t && t < to));
            let mut kept = Names::default();
            for h in &outside {
                kept.add(&Names::of(h));
            }
            day_coll
                .update_one(doc! {"_id": day_id.clone()}, kept.as_day())
                .session(&mut session)
                .await?;
            for h in inside {
                if !Names::of(h).is_empty() {
                    hour_coll
                        .update_one(doc! {"_id": id_of(h)}, emptied())
                        .session(&mut session)
                        .await?;
                }
            }
            Ok(())
        }
        .await;
        let outcome = match attempt {
            Ok(()) => super::txn::commit(&mut session).await,
            Err(e) => {
                let _ = session.abort_transaction().await;
                Err(e)
            }
        };
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) if super::txn::should_retry(&e) && tries < super::txn::MAX_TRIES => {
                tries += 1;
                super::txn::pause(tries).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, d, h, 0, 0).unwrap()
    }

    #[test]
    fn a_day_bucket_partly_inside_loses_the_spans_hours_only() {
        let bucket = doc! {
            "timestamp": bson::DateTime::from_chrono(utc(2, 0)),
            "totalViews": 10_i64,
            "hours": {"22": 3, "23": 4, "5": 3},
            "visits": {"23": 2_i64},
            "visitors": {"f": 1},
        };
        // Berlin's 3 March: 2 March 23:00 UTC to 3 March 23:00 UTC.
        let (q, u) =
            view_update(&bucket, Resolution::Day, utc(2, 0), utc(2, 23), utc(3, 23)).unwrap();
        assert_eq!(q, doc! {"hours.23": 4_i64, "visits.23": 2_i64});
        assert_eq!(
            u.get_document("$set").unwrap(),
            &doc! {"hours.23": 0, "visits.23": 0}
        );
        assert_eq!(
            u.get_document("$inc").unwrap(),
            &doc! {"totalViews": -4_i64, TAKEN_BACK: 1_i64}
        );
        assert!(u.get("$unset").is_none(), "registers kept");
    }

    #[test]
    fn a_bucket_wholly_inside_is_left_empty_without_visitors() {
        let bucket = doc! {"totalViews": 2_i64, "minutes": {"0": 1, "59": 1}};
        let (_, u) =
            view_update(&bucket, Resolution::Hour, utc(3, 5), utc(3, 0), utc(4, 0)).unwrap();
        assert_eq!(
            u.get_document("$set").unwrap(),
            &doc! {"minutes.0": 0, "minutes.59": 0}
        );
        assert_eq!(
            u.get_document("$inc").unwrap(),
            &doc! {"totalViews": -2_i64, TAKEN_BACK: 1_i64}
        );
        assert_eq!(
            u.get_document("$unset").unwrap(),
            &doc! {VisitFields::VISITORS: ""}
        );
    }

    #[test]
    fn a_bucket_with_nothing_inside_is_not_written() {
        let bucket = doc! {"totalViews": 3_i64, "hours": {"5": 3, "23": 0}};
        assert!(view_update(&bucket, Resolution::Day, utc(2, 0), utc(2, 23), utc(3, 23)).is_none());
    }

    #[test]
    fn a_day_made_again_from_its_hours_keeps_the_writers_cap() {
        let mut hours = Names::default();
        let mut sources = Document::new();
        for i in 0..=breakdowns::MAX_NAMES_PER_BUCKET {
            // One name more than the cap; the least counted goes to other.
            sources.insert(format!("s{i:02}"), Bson::Int64(100 - i as i64));
        }
        let total: i64 = (0..=breakdowns::MAX_NAMES_PER_BUCKET as i64)
            .map(|i| 100 - i)
            .sum();
        hours.add(&Names::of(
            &doc! {"totalViews": total, "sources": sources, "other": 5_i64},
        ));
        let u = hours.as_day();
        let set = u.get_document("$set").unwrap();
        assert_eq!(set.get_i64("totalViews").unwrap(), total);
        let kept = set.get_document("sources").unwrap();
        assert_eq!(kept.len(), breakdowns::MAX_NAMES_PER_BUCKET);
        assert!(kept.get("s50").is_none());
        assert_eq!(set.get_i64("other").unwrap(), 5 + 50);
        let unset = u.get_document("$unset").unwrap();
        assert!(unset.contains_key("browser") && unset.contains_key("other_browser"));
        assert_eq!(u.get_document("$inc").unwrap(), &doc! {WRITES: 1_i64});
    }
}

#[cfg(test)]
mod write_concern_form {
    #[test]
    fn the_commit_write_concern_goes_as_the_server_reads_it() {
        let wc = mongodb::options::WriteConcern::builder()
            .w(mongodb::options::Acknowledgment::Majority)
            .journal(true)
            .w_timeout(std::time::Duration::from_secs(10))
            .build();
        assert_eq!(
            bson::to_document(&wc).unwrap(),
            bson::doc! {"w": "majority", "wtimeout": 10_000_i32, "j": true}
        );
    }
}

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
//! - a view bucket wholly inside loses its slots, visit counters and
//!   visitors and is left with `totalViews` 0; one partly inside has the
//!   slots and visit counters of the span's hours set to 0 and its total
//!   set to what is left (totals are the sum of their slots);
//! - a breakdown bucket wholly inside loses every name; a day bucket
//!   partly inside has its hour buckets' names in the span taken out of
//!   it, in the same transaction that clears those hour buckets, so a
//!   rerun finds nothing left to take out;
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
    super::imports::drop_emptied_sketches(store, domain.as_str(), from, to).await?;
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
    let mut found = overlapping(store, collection, subject, domain, level, from, to).await?;
    let mut statements = Vec::with_capacity(BATCH);
    while let Some(bucket) = found.try_next().await? {
        let Some(start) = start_of(&bucket) else {
            continue;
        };
        if let Some(update) = view_update(&bucket, level, start, from, to) {
            statements.push(doc! {"q": {"_id": id_of(&bucket)}, "u": update});
        }
        if statements.len() == BATCH {
            send(store, collection, std::mem::take(&mut statements)).await?;
        }
    }
    send(store, collection, statements).await
}

/// One `update` command of `statements` (each on a bucket by `_id`), with
/// the commit write concern; every statement must have matched.
async fn send(
    store: &Store,
    collection: &str,
    statements: Vec<Document>,
) -> Result<(), ClearError> {
    if statements.is_empty() {
        return Ok(());
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
    super::update::check_reply(collection, &reply, sent)
        .map_err(|e| ClearError::Reply(e.to_string()))?;
    Ok(())
}

/// What clearing `from`..`to` does to a view bucket, or None when it holds
/// nothing there.
fn view_update(
    bucket: &Document,
    level: Resolution,
    start: DateTime<Utc>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Option<Document> {
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
    let anything = inside
        .iter()
        .any(|&s| maps.iter().any(|map| held(map, s) != 0));
    if !anything {
        return None;
    }
    let left: i64 = (0..level.slot_count())
        .filter(|s| !inside.contains(s))
        .map(|s| held(slots_field, s))
        .sum();
    let mut set = doc! {"totalViews": left};
    for map in &maps {
        for &slot in &inside {
            if held(map, slot) != 0 {
                set.insert(format!("{map}.{slot}"), Bson::Int32(0));
            }
        }
    }
    let mut update = doc! {"$set": set, "$inc": {TAKEN_BACK: 1_i64}};
    if left == 0 {
        update.insert("$unset", doc! {VisitFields::VISITORS: ""});
    }
    Some(update)
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

    /// The `$inc` that takes `self` out of `day`: a name `day` does not
    /// have by name was counted in its `other_*`.
    fn taken_from(&self, day: &Names) -> Document {
        let mut inc = doc! {"totalViews": -self.total, WRITES: 1_i64};
        let mut other: BTreeMap<Dimension, i64> = self.other.clone();
        for ((d, name), n) in &self.names {
            if *n == 0 {
                continue;
            }
            if day.names.contains_key(&(*d, name.clone())) {
                inc.insert(format!("{}.{name}", d.field()), Bson::Int64(-n));
            } else {
                *other.entry(*d).or_default() += n;
            }
        }
        for (d, n) in other {
            if n != 0 {
                inc.insert(d.other_field(), Bson::Int64(-n));
            }
        }
        inc
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
    // Day buckets partly inside, each with the hour buckets of the span
    // that it adds up: taken out and cleared in one transaction.
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
                "$gte": bson::DateTime::from_chrono(from.max(start)),
                "$lt": bson::DateTime::from_chrono(to.min(start + day.step())),
            },
        };
        if let Some(part) = bucket.get("part") {
            hours.insert("part", part.clone());
        }
        take_hours_out_of_day(
            store,
            hour_collection,
            day_collection,
            id_of(&bucket),
            hours,
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

async fn take_hours_out_of_day(
    store: &Store,
    hour_collection: &str,
    day_collection: &str,
    day_id: Bson,
    hours: Document,
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
            let mut sum = Names::default();
            for h in &found {
                sum.add(&Names::of(h));
            }
            if sum.is_empty() {
                return Ok(());
            }
            let Some(day) = day_coll
                .find_one(doc! {"_id": day_id.clone()})
                .session(&mut session)
                .await?
            else {
                return Ok(());
            };
            day_coll
                .update_one(
                    doc! {"_id": day_id.clone()},
                    doc! {"$inc": sum.taken_from(&Names::of(&day))},
                )
                .session(&mut session)
                .await?;
            for h in &found {
                hour_coll
                    .update_one(doc! {"_id": id_of(h)}, emptied())
                    .session(&mut session)
                    .await?;
            }
            Ok(())
        }
        .await;
        let outcome = match attempt {
            Ok(()) => super::txn::commit(&mut session).await,
            Err(e) => Err(e),
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
    fn a_day_bucket_partly_inside_keeps_the_hours_outside() {
        let bucket = doc! {
            "timestamp": bson::DateTime::from_chrono(utc(2, 0)),
            "totalViews": 10_i64,
            "hours": {"22": 3, "23": 4, "5": 3},
            "visits": {"23": 2_i64},
            "visitors": {"f": 1},
        };
        // Berlin's 3 March: 2 March 23:00 UTC to 3 March 23:00 UTC.
        let u = view_update(&bucket, Resolution::Day, utc(2, 0), utc(2, 23), utc(3, 23)).unwrap();
        assert_eq!(
            u.get_document("$set").unwrap(),
            &doc! {"totalViews": 6_i64, "hours.23": 0, "visits.23": 0}
        );
        assert!(u.get("$unset").is_none(), "registers kept while views are");
    }

    #[test]
    fn a_bucket_wholly_inside_is_left_empty_without_visitors() {
        let bucket = doc! {"totalViews": 2_i64, "minutes": {"0": 1, "59": 1}};
        let u = view_update(&bucket, Resolution::Hour, utc(3, 5), utc(3, 0), utc(4, 0)).unwrap();
        assert_eq!(
            u.get_document("$set").unwrap(),
            &doc! {"totalViews": 0_i64, "minutes.0": 0, "minutes.59": 0}
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
    fn names_a_day_counted_in_other_are_taken_from_other() {
        let day = Names::of(&doc! {
            "totalViews": 9_i64,
            "sources": {"google%2Ecom": 5_i64},
            "other": 4_i64,
        });
        let hour = Names::of(&doc! {
            "totalViews": 3_i64,
            "sources": {"google%2Ecom": 1_i64, "bing%2Ecom": 2_i64},
        });
        assert_eq!(
            hour.taken_from(&day),
            doc! {"totalViews": -3_i64, WRITES: 1_i64, "sources.google%2Ecom": -1_i64, "other": -2_i64}
        );
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

//! Retention in the database: one TTL index on `timestamp` per bucket
//! collection, named `retention`, whose `expireAfterSeconds` is the level's
//! retention. The database's TTL monitor deletes expired buckets itself
//! (about once a minute on MongoDB). A changed setting is applied with
//! `collMod` (no index rebuild); "for ever" drops the index.

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::values::count;
use super::{Resolution, Store};
use crate::domain::Retention;

pub const INDEX: &str = "retention";

/// What the `retention` index of a collection says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlState {
    Absent,
    ExpireAfter(i64),
}

/// The `retention` index of `level`'s collection, as the server lists it.
pub async fn current(store: &Store, level: Resolution) -> Result<TtlState, mongodb::error::Error> {
    current_of(store, level.collection()).await
}

pub(super) async fn current_of(
    store: &Store,
    name: &str,
) -> Result<TtlState, mongodb::error::Error> {
    // The raw listing: `expireAfterSeconds` as the server stores it, of
    // whatever numeric type. A handful of indexes fit in the first batch.
    let reply = match store.db().run_command(doc! {"listIndexes": name}).await {
        Ok(reply) => reply,
        // A collection that does not exist yet has no index.
        Err(e) if matches!(*e.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 26) => {
            return Ok(TtlState::Absent)
        }
        Err(e) => return Err(e),
    };
    let indexes: Vec<Document> = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(|batch| {
            batch
                .iter()
                .filter_map(|i| i.as_document().cloned())
                .collect()
        })
        .unwrap_or_default();
    Ok(indexes
        .iter()
        .find(|i| i.get_str("name") == Ok(INDEX))
        .map_or(TtlState::Absent, |i| {
            TtlState::ExpireAfter(count(i.get("expireAfterSeconds")))
        }))
}

/// Makes each bucket collection's TTL index match `retention`, and the
/// page summaries' the day buckets' (a summary stands for its days' page
/// buckets, so it goes with its first day's); returns what was done, one
/// line per collection.
pub async fn apply(
    store: &Store,
    retention: &Retention,
) -> Result<Vec<String>, mongodb::error::Error> {
    let mut report = Vec::new();
    let collections = Resolution::ALL
        .map(|level| (level.collection(), level))
        .into_iter()
        .chain([
            (super::page_summaries::COLLECTION, Resolution::Day),
            (super::page_summaries::HOUR_COLLECTION, Resolution::Hour),
            // Imported properties stand for their days' figures.
            (super::imported_properties::COLLECTION, Resolution::Day),
        ]);
    for (name, level) in collections {
        let wanted = retention.expire_after_secs(level);
        report.push(ttl_index(store, name, "timestamp", "buckets", wanted).await?);
    }
    Ok(report)
}

/// The `retention` TTL index of `collection` on `field` made to match
/// `days`; one line saying what was done.
pub(super) async fn ttl_on(
    store: &Store,
    collection: &str,
    field: &str,
    what: &str,
    days: Option<u32>,
) -> Result<String, mongodb::error::Error> {
    let wanted = days.map(|d| i64::from(d) * 86_400);
    ttl_index(store, collection, field, what, wanted).await
}

/// The `retention` TTL index of `collection` on `field` made to expire
/// after `wanted` seconds (`None`: no index, kept for ever); one line
/// saying what was done (`what` names the documents).
async fn ttl_index(
    store: &Store,
    collection: &str,
    field: &str,
    what: &str,
    wanted: Option<i64>,
) -> Result<String, mongodb::error::Error> {
    let coll = store.db().collection::<Document>(collection);
    let current = super::retention::current_of(store, collection).await?;
    let line = match (current, wanted) {
        (TtlState::Absent, None) => format!("{collection}: kept for ever (no TTL index)"),
        (TtlState::ExpireAfter(_), None) => {
            coll.drop_index(INDEX).await?;
            format!("{collection}: TTL index dropped, {what} now kept for ever")
        }
        (TtlState::Absent, Some(secs)) => {
            coll.create_index(
                IndexModel::builder()
                    .keys(doc! {field: 1})
                    .options(
                        IndexOptions::builder()
                            .name(INDEX.to_owned())
                            .expire_after(std::time::Duration::from_secs(secs as u64))
                            .build(),
                    )
                    .build(),
            )
            .await?;
            format!("{collection}: TTL index created, expireAfterSeconds {secs}")
        }
        (TtlState::ExpireAfter(now), Some(secs)) if now == secs => {
            format!("{collection}: TTL index already at expireAfterSeconds {secs}")
        }
        (TtlState::ExpireAfter(was), Some(secs)) => {
            store
                .db()
                .run_command(doc! {
                    "collMod": collection,
                    "index": {"name": INDEX, "expireAfterSeconds": secs},
                })
                .await?;
            format!(
                "{collection}: TTL index changed with collMod, expireAfterSeconds {was} → {secs}"
            )
        }
    };
    tracing::info!("{line}");
    Ok(line)
}

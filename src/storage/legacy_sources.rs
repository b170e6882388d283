//! The upgrade from the source collections of earlier versions
//! (`sources_hour`, `sources_day`, `site_sources_hour`,
//! `site_sources_day`: one document per page or site part and hour or
//! day) to sources inside the view buckets (`sources`).
//!
//! Each old document maps to exactly one view bucket (same key, time and
//! part) and is moved in a transaction that adds its counts to that bucket
//! and deletes it, so a crash half-way moves nothing twice and running it
//! again goes on where it stopped. Names are added under the cap and
//! `sourceNames` counts them like any writer's; a live writer on the same
//! bucket conflicts and retries, or meets the changed `sourceNames`. A
//! bucket that no longer exists (past its retention) takes nothing: its
//! views are gone too. When a collection is empty it is dropped.
//!
//! Run at start, before the appliers. Sources were kept apart only in
//! development builds, so there is little to move.

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::{ReadConcern, TransactionOptions};
use std::time::Duration;

use super::sources::{fields, Known, NAMES, SOURCES};
use super::{Resolution, Store, Subject};

/// The old collections and the view buckets they go to.
pub const OLD: [(&str, Subject, Resolution); 4] = [
    ("sources_hour", Subject::Page, Resolution::Hour),
    ("sources_day", Subject::Page, Resolution::Day),
    ("site_sources_hour", Subject::Site, Resolution::Hour),
    ("site_sources_day", Subject::Site, Resolution::Day),
];

/// Old documents moved per transaction.
const BATCH: i64 = 200;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FoldReport {
    /// Old documents moved into view buckets.
    pub moved: u64,
    /// Old documents whose view bucket no longer exists.
    pub expired: u64,
}

/// Moves every old source document into its view bucket and drops the old
/// collections.
pub async fn fold(store: &Store) -> anyhow::Result<FoldReport> {
    let present = store.db().list_collection_names().await?;
    let mut report = FoldReport::default();
    for (old, subject, g) in OLD {
        if !present.iter().any(|n| n == old) {
            continue;
        }
        loop {
            let batch = fold_batch_retrying(store, old, subject, g).await?;
            report.moved += batch.moved;
            report.expired += batch.expired;
            if batch.moved + batch.expired == 0 {
                break;
            }
        }
        store.db().collection::<Document>(old).drop().await?;
        tracing::info!(
            collection = old,
            moved = report.moved,
            expired = report.expired,
            "old source buckets folded into the view buckets"
        );
    }
    Ok(report)
}

async fn fold_batch_retrying(
    store: &Store,
    old: &str,
    subject: Subject,
    g: Resolution,
) -> anyhow::Result<FoldReport> {
    let mut attempt = 0;
    loop {
        match fold_batch(store, old, subject, g).await {
            Ok(report) => return Ok(report),
            // A live writer on the same bucket, or a commit whose outcome
            // is unknown: go again on a new snapshot, where a batch that
            // did commit is gone from the old collection.
            Err(e)
                if attempt < 20
                    && (e.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR)
                        || e.contains_label(mongodb::error::UNKNOWN_TRANSACTION_COMMIT_RESULT)) =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn fold_batch(
    store: &Store,
    old: &str,
    subject: Subject,
    g: Resolution,
) -> Result<FoldReport, mongodb::error::Error> {
    let mut session = store.client().start_session().await?;
    session
        .start_transaction()
        .with_options(
            TransactionOptions::builder()
                .write_concern(store.commit_write_concern())
                .read_concern(ReadConcern::majority())
                .build(),
        )
        .await?;
    let old_coll = store.db().collection::<Document>(old);
    let target = store.db().collection::<Document>(subject.collection(g));
    let docs: Vec<Document> = old_coll
        .find(doc! {})
        .limit(BATCH)
        .session(&mut session)
        .await?
        .stream(&mut session)
        .try_collect()
        .await?;
    let mut report = FoldReport::default();
    let field = |d: &Document, name: &str| d.get(name).cloned().unwrap_or(Bson::Null);
    for d in &docs {
        let mut q = doc! {
            subject.key_field(): field(d, subject.key_field()),
            "timestamp": field(d, "timestamp"),
        };
        if subject == Subject::Site {
            q.insert("part", field(d, "part"));
        }
        let bucket = target
            .find_one(q.clone())
            .projection(doc! {"_id": 0, SOURCES: 1, NAMES: 1})
            .session(&mut session)
            .await?;
        if let Some(bucket) = bucket {
            let counts: Vec<(&str, i64)> = d
                .get_document(SOURCES)
                .map(|s| {
                    s.iter()
                        .map(|(name, v)| (name.as_str(), super::values::count(Some(v))))
                        .collect()
                })
                .unwrap_or_default();
            let other = super::values::count(d.get("other"));
            let update = fields(&Known::of_bucket(&bucket), counts.into_iter(), other);
            if !update.inc.is_empty() {
                target
                    .update_one(q, doc! {"$inc": update.inc})
                    .session(&mut session)
                    .await?;
            }
            report.moved += 1;
        } else {
            report.expired += 1;
        }
        old_coll
            .delete_one(doc! {"_id": field(d, "_id")})
            .session(&mut session)
            .await?;
    }
    session.commit_transaction().await?;
    Ok(report)
}

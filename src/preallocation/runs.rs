//! The history of preallocation runs (`prealloc_runs`).

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::{InsertCounts, PreallocRequest, Trigger};
use crate::storage::schema::IndexSpec;
use crate::storage::Store;

pub const COLLECTION: &str = "prealloc_runs";

/// The history lists the latest runs first.
pub fn indexes() -> Vec<IndexSpec> {
    vec![IndexSpec::new(
        COLLECTION,
        "startedAt_-1",
        doc! {"startedAt": -1},
    )]
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreallocRun {
    #[serde(rename = "_id")]
    pub id: bson::Uuid,
    #[serde(rename = "startedAt")]
    pub started_at: bson::DateTime,
    pub trigger: String,
    pub who: String,
    pub scope: String,
    #[serde(rename = "fromHour")]
    pub from_hour: bson::DateTime,
    pub hours: u32,
    pub pages: u64,
    pub inserted: u64,
    #[serde(rename = "alreadyPresent")]
    pub already_present: u64,
    #[serde(rename = "durationMs")]
    pub duration_ms: u64,
    pub errors: Vec<String>,
    /// `running` while a background run works (its counts grow as it
    /// goes), then `done` or `failed`. Runs recorded before there were
    /// background runs read as `done`.
    #[serde(default = "done")]
    pub status: String,
    /// Documents the run has to write: its progress is (inserted + already
    /// present) of these.
    #[serde(default)]
    pub documents: u64,
}

pub const RUNNING: &str = "running";
pub const DONE: &str = "done";
pub const FAILED: &str = "failed";

fn done() -> String {
    DONE.to_owned()
}

impl PreallocRun {
    pub fn new(
        request: &PreallocRequest,
        trigger: Trigger,
        who: &str,
        now: DateTime<Utc>,
        pages: usize,
        counts: InsertCounts,
        took: Duration,
    ) -> Self {
        let mut errors = counts.errors;
        // Keep the record small when every insert failed the same way.
        errors.dedup();
        errors.truncate(20);
        Self {
            id: uuid::Uuid::new_v4().into(),
            started_at: bson::DateTime::from_chrono(now),
            trigger: trigger.as_str().to_owned(),
            who: who.to_owned(),
            scope: request.scope.describe(),
            from_hour: bson::DateTime::from_chrono(request.from),
            hours: request.hours,
            pages: pages as u64,
            inserted: counts.inserted,
            already_present: counts.already_present,
            duration_ms: took.as_millis() as u64,
            status: if errors.is_empty() { DONE } else { FAILED }.to_owned(),
            documents: 0,
            errors,
        }
    }
}

fn collection(store: &Store) -> mongodb::Collection<PreallocRun> {
    store.db().collection(COLLECTION)
}

pub async fn record(store: &Store, run: &PreallocRun) -> Result<(), mongodb::error::Error> {
    collection(store).insert_one(run).await.map(|_| ())
}

/// A background run's figures so far, or at its end.
pub async fn update(store: &Store, run: &PreallocRun) -> Result<(), mongodb::error::Error> {
    collection(store)
        .replace_one(doc! {"_id": run.id}, run)
        .await
        .map(|_| ())
}

pub async fn find(
    store: &Store,
    id: bson::Uuid,
) -> Result<Option<PreallocRun>, mongodb::error::Error> {
    collection(store).find_one(doc! {"_id": id}).await
}

/// The newest runs first.
pub async fn recent(store: &Store, limit: i64) -> Result<Vec<PreallocRun>, mongodb::error::Error> {
    collection(store)
        .find(doc! {})
        .sort(doc! {"startedAt": -1})
        .limit(limit)
        .await?
        .try_collect()
        .await
}

//! Preallocation's documents: the history of runs (`prealloc_runs`), the
//! lease of the scheduled run (`prealloc_lease`), the hour buckets' active
//! pages and the unordered inserts of zero-filled buckets. When and what
//! to preallocate is `preallocation`'s.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::schema::IndexSpec;
use super::values::{count, is_duplicate_key, number, DUPLICATE_KEY};
use super::Store;
use crate::domain::{DomainName, Resolution};

pub const RUNS: &str = "prealloc_runs";
pub const LEASE: &str = "prealloc_lease";
const ID: &str = "schedule";

/// Preallocation finds an hour's active pages by timestamp in the hour
/// buckets; its history lists the latest runs first.
pub fn indexes() -> Vec<IndexSpec> {
    vec![
        IndexSpec::new(
            Resolution::Hour.collection(),
            "active_pages",
            doc! {"timestamp": 1, "totalViews": 1},
        ),
        IndexSpec::new(RUNS, "startedAt_-1", doc! {"startedAt": -1}),
    ]
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

/// The history of runs.
fn collection(store: &Store) -> mongodb::Collection<PreallocRun> {
    store.db().collection(RUNS)
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

/// The lease: one document naming the hour it is for, its holder, until
/// when it is held, and the last hour done.
fn date(t: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(t)
}

/// Takes the lease to preallocate `hour` until `until`, unless another
/// instance holds it or has already done that hour. The update matches only a free lease
/// for another hour; when it matches nothing, its upsert collides with the
/// existing document on `_id` and the lease is someone else's.
pub async fn acquire_lease(
    store: &Store,
    holder: &str,
    hour: DateTime<Utc>,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<bool, mongodb::error::Error> {
    let taken = store
        .db()
        .collection::<bson::Document>(LEASE)
        .update_one(
            doc! {"_id": ID, "until": {"$lte": date(now)}, "done": {"$ne": date(hour)}},
            doc! {"$set": {"holder": holder, "hour": date(hour), "until": date(until)}},
        )
        .upsert(true)
        .await;
    match taken {
        Ok(_) => Ok(true),
        Err(e) if is_duplicate_key(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Releases the lease after a run (only the holder can), recording the
/// hour as done when the run succeeded; a failed hour may be taken again.
pub async fn release_lease(
    store: &Store,
    holder: &str,
    done: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    let mut set = doc! {"until": date(now)};
    if let Some(hour) = done {
        set.insert("done", date(hour));
    }
    store
        .db()
        .collection::<bson::Document>(LEASE)
        .update_one(doc! {"_id": ID, "holder": holder}, doc! {"$set": set})
        .await?;
    Ok(())
}

/// Pages whose views in the hour starting `hour` reach `threshold`.
pub async fn active_pages(
    store: &Store,
    domain: Option<&DomainName>,
    hour: DateTime<Utc>,
    threshold: i64,
) -> Result<Vec<String>, mongodb::error::Error> {
    let mut filter = doc! {
        "timestamp": bson::DateTime::from_chrono(hour),
        "totalViews": {"$gte": threshold.max(1)},
    };
    if let Some(domain) = domain {
        filter.insert("page", domain.pages_filter());
    }
    let docs: Vec<Document> = store
        .db()
        .collection::<Document>(Resolution::Hour.collection())
        .find(filter)
        .projection(doc! {"page": 1, "_id": 0})
        .await?
        .try_collect()
        .await?;
    let mut pages: Vec<String> = docs
        .into_iter()
        .filter_map(|d| d.get_str("page").ok().map(str::to_owned))
        .collect();
    pages.sort();
    pages.dedup();
    Ok(pages)
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InsertCounts {
    pub inserted: u64,
    pub already_present: u64,
    pub errors: Vec<String>,
}

impl InsertCounts {
    pub fn add(&mut self, other: InsertCounts) {
        self.inserted += other.inserted;
        self.already_present += other.already_present;
        self.errors.extend(other.errors);
    }
}

/// One unordered `insert` command; duplicate keys are "already there".
/// Inserts are idempotent here (a repeat only finds duplicates), so a
/// failed command is simply retried a few times.
pub async fn insert_buckets(
    store: &Store,
    resolution: Resolution,
    docs: Vec<Document>,
) -> InsertCounts {
    let collection = resolution.collection();
    let mut counts = InsertCounts::default();
    let sent = docs.len() as u64;
    let command = doc! {
        "insert": collection,
        "documents": docs.into_iter().map(Bson::Document).collect::<Vec<_>>(),
        "ordered": false,
        "writeConcern": store.write_concern().clone(),
    };
    let mut last_error = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
        }
        match store.db().run_command(command.clone()).await {
            Ok(reply) => {
                let mut duplicates = 0;
                for e in reply
                    .get_array("writeErrors")
                    .map(|a| a.as_slice())
                    .unwrap_or_default()
                {
                    let e = e.as_document().cloned().unwrap_or_default();
                    if number(e.get("code")) == Some(i64::from(DUPLICATE_KEY)) {
                        duplicates += 1;
                    } else {
                        counts
                            .errors
                            .push(e.get_str("errmsg").unwrap_or("write error").to_owned());
                    }
                }
                let inserted = count(reply.get("n")).max(0) as u64;
                counts.inserted += inserted;
                counts.already_present += duplicates;
                if let Ok(wce) = reply.get_document("writeConcernError") {
                    counts.errors.push(format!("write concern: {wce}"));
                }
                let unaccounted = sent.saturating_sub(inserted + duplicates);
                if unaccounted > 0 && counts.errors.is_empty() {
                    counts.errors.push(format!(
                        "{unaccounted} document(s) neither inserted nor present"
                    ));
                }
                return counts;
            }
            Err(e) => last_error = crate::telemetry::chain(&e),
        }
    }
    counts.errors.push(format!("{collection}: {last_error}"));
    counts
}

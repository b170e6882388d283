//! What the admin system page shows about the database: topology and the
//! size figures of seed 000 for each bucket collection.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::SharedClock;

use super::values::count;
use super::{Resolution, Store, Topology};

#[derive(Debug, Clone, Default)]
pub struct CollectionStats {
    pub name: &'static str,
    pub count: i64,
    pub size: i64,
    pub storage_size: i64,
    pub index_size: i64,
    /// Why the figures could not be read (shown instead of zeros).
    pub error: Option<String>,
    pub level: Option<Resolution>,
}

/// Namespace not found: a collection not created yet really holds nothing.
const NAMESPACE_NOT_FOUND: i32 = 26;

/// `collStats` of each bucket collection, all three at once. A collection
/// that does not exist yet shows zeros; any other failure (a missing
/// privilege, a timeout) is shown as that failure, never as an empty
/// collection.
pub async fn bucket_sizes(store: &Store) -> Vec<CollectionStats> {
    futures::future::join_all(Resolution::ALL.map(|g| collection_stats(store, g))).await
}

async fn collection_stats(store: &Store, g: Resolution) -> CollectionStats {
    let name = g.collection();
    let reply = store.db().run_command(doc! {"collStats": name}).await;
    let (stats, error) = match reply {
        Ok(stats) => (stats, None),
        Err(e) if command_code(&e) == Some(NAMESPACE_NOT_FOUND) => (Document::new(), None),
        Err(e) => {
            tracing::warn!(collection = name, error = %crate::telemetry::chain(&e), "collStats failed");
            (Document::new(), Some(short_error(&e)))
        }
    };
    CollectionStats {
        name,
        count: count(stats.get("count")),
        size: count(stats.get("size")),
        storage_size: count(stats.get("storageSize")),
        index_size: count(stats.get("totalIndexSize")),
        error,
        level: Some(g),
    }
}

/// The TTL index of each bucket collection as the database has it, in
/// [`Resolution::ALL`]'s order (`None`: could not be read). Cheap: read
/// on every view of the system page.
pub async fn ttl_states(store: &Store) -> Vec<Option<super::retention::TtlState>> {
    futures::future::join_all(
        Resolution::ALL.map(|g| async move { super::retention::current(store, g).await.ok() }),
    )
    .await
}

/// How long measured sizes are shown before a view measures again.
const SIZES_FRESH_FOR: Duration = Duration::from_secs(60);

/// The bucket collections' sizes as last measured, and when.
#[derive(Debug, Clone)]
pub struct Sizes {
    pub at: DateTime<Utc>,
    pub collections: Vec<CollectionStats>,
    /// When they may be measured again: `None` after a failure, so the
    /// next view tries again.
    fresh_until: Option<Instant>,
}

/// The system page's size figures, measured at start and then at most
/// once a minute. `collStats` costs time in proportion to a collection's
/// documents (on the embedded server about 120 ms for 100,000 minute
/// buckets; the three collections of 100,000 views took 230 ms, nearly all
/// of the page's time), so a view shows the last measurement, and one that
/// finds it a minute old starts the next in the background (one at a time).
#[derive(Debug)]
pub struct SizeCache {
    last: Mutex<Option<Sizes>>,
    /// Held while measuring.
    measuring: tokio::sync::Mutex<()>,
    fresh_for: Duration,
}

impl Default for SizeCache {
    fn default() -> Self {
        Self::new(SIZES_FRESH_FOR)
    }
}

impl SizeCache {
    /// Sizes shown for `fresh_for` before a view measures again (a
    /// minute in the server).
    pub fn new(fresh_for: Duration) -> Self {
        Self {
            last: Mutex::new(None),
            measuring: tokio::sync::Mutex::new(()),
            fresh_for,
        }
    }

    pub async fn read(self: &Arc<Self>, store: &Store, clock: &SharedClock) -> Sizes {
        if let Some(sizes) = self.last() {
            if sizes.fresh_until.is_none_or(|t| Instant::now() >= t) {
                self.refresh(store.clone(), clock.clone());
            }
            return sizes;
        }
        // Nothing measured yet: wait for the measurement under way (the
        // one started with the server), or make it.
        let _measuring = self.measuring.lock().await;
        match self.last() {
            Some(sizes) => sizes,
            None => self.measure(store, clock).await,
        }
    }

    /// Measures in the background, unless a measurement is under way.
    pub fn refresh(self: &Arc<Self>, store: Store, clock: SharedClock) {
        let cache = self.clone();
        tokio::spawn(async move {
            let Ok(_measuring) = cache.measuring.try_lock() else {
                return;
            };
            cache.measure(&store, &clock).await;
        });
    }

    fn last(&self) -> Option<Sizes> {
        self.last.lock().expect("size cache lock poisoned").clone()
    }

    async fn measure(&self, store: &Store, clock: &SharedClock) -> Sizes {
        let at = clock.now();
        let collections = bucket_sizes(store).await;
        let failed = collections.iter().any(|c| c.error.is_some());
        let sizes = Sizes {
            at,
            collections,
            fresh_until: (!failed).then(|| Instant::now() + self.fresh_for),
        };
        *self.last.lock().expect("size cache lock poisoned") = Some(sizes.clone());
        sizes
    }
}

fn command_code(e: &mongodb::error::Error) -> Option<i32> {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

/// What the admin is told: the server's code name and message, or the
/// driver's summary; no connection strings.
fn short_error(e: &mongodb::error::Error) -> String {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => {
            format!("{} ({}): {}", c.code_name, c.code, c.message)
        }
        _ => "the database did not answer".to_owned(),
    }
}

#[derive(Debug, Clone)]
pub struct TopologyView {
    pub kind: String,
    /// Replica set members, or shards with their hosts.
    pub members: Vec<String>,
    /// Why the members could not be listed (shown instead of an empty list).
    pub error: Option<String>,
}

pub async fn topology(store: &Store) -> TopologyView {
    match store.topology() {
        Topology::Standalone => TopologyView {
            kind: "single node (standalone)".into(),
            members: vec![],
            error: None,
        },
        Topology::ReplicaSet { name, .. } => {
            let (hello, error) = answer(store.db().run_command(doc! {"hello": 1}).await);
            let members = hello
                .get_array("hosts")
                .map(|hosts| {
                    hosts
                        .iter()
                        .filter_map(|h| h.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            TopologyView {
                kind: format!("replica set {name}"),
                members,
                error,
            }
        }
        Topology::Sharded => {
            let (reply, error) = answer(
                store
                    .client()
                    .database("admin")
                    .run_command(doc! {"listShards": 1})
                    .await,
            );
            let members = reply
                .get_array("shards")
                .map(|shards| {
                    shards
                        .iter()
                        .filter_map(|s| s.as_document())
                        .map(|s: &Document| {
                            format!(
                                "{}: {}",
                                s.get_str("_id").unwrap_or("?"),
                                s.get_str("host").unwrap_or("?")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            TopologyView {
                kind: "sharded cluster (mongos)".into(),
                members,
                error,
            }
        }
    }
}

/// A reply, or an empty one with the failure to show.
fn answer(reply: Result<Document, mongodb::error::Error>) -> (Document, Option<String>) {
    match reply {
        Ok(d) => (d, None),
        Err(e) => {
            tracing::warn!(error = %crate::telemetry::chain(&e), "topology query failed");
            (Document::new(), Some(short_error(&e)))
        }
    }
}

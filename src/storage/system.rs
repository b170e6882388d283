//! What the admin system page shows about the database: topology and the
//! size figures of seed 000 for each bucket collection.

use bson::{doc, Document};

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
    /// The TTL index as the database has it (`None`: could not be read).
    pub ttl: Option<super::retention::TtlState>,
}

/// Namespace not found: a collection not created yet really holds nothing.
const NAMESPACE_NOT_FOUND: i32 = 26;

/// `collStats` for each bucket collection. A collection that does not exist
/// yet shows zeros; any other failure (a missing privilege, a timeout) is
/// shown as that failure, never as an empty collection.
pub async fn bucket_stats(store: &Store) -> Vec<CollectionStats> {
    let mut out = Vec::new();
    for g in Resolution::ALL {
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
        out.push(CollectionStats {
            name,
            count: count(stats.get("count")),
            size: count(stats.get("size")),
            storage_size: count(stats.get("storageSize")),
            index_size: count(stats.get("totalIndexSize")),
            error,
            level: Some(g),
            ttl: super::retention::current(store, g).await.ok(),
        });
    }
    out
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

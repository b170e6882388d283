//! What the admin system page shows about the database: topology and the
//! size figures of seed 000 for each bucket collection.

use bson::{doc, Document};

use super::{Resolution, Store, Topology};
use crate::reports::queries::number;

#[derive(Debug, Clone, Default)]
pub struct CollectionStats {
    pub name: &'static str,
    pub count: i64,
    pub size: i64,
    pub storage_size: i64,
    pub index_size: i64,
    pub level: Option<Resolution>,
    /// The TTL index as the database has it (`None`: could not be read).
    pub ttl: Option<super::retention::TtlState>,
}

/// `collStats` for each bucket collection; a collection that does not exist
/// yet shows zeros.
pub async fn bucket_stats(store: &Store) -> Vec<CollectionStats> {
    let mut out = Vec::new();
    for g in Resolution::ALL {
        let name = g.collection();
        let stats = store
            .db()
            .run_command(doc! {"collStats": name})
            .await
            .unwrap_or_default();
        out.push(CollectionStats {
            name,
            count: number(stats.get("count")),
            size: number(stats.get("size")),
            storage_size: number(stats.get("storageSize")),
            index_size: number(stats.get("totalIndexSize")),
            level: Some(g),
            ttl: super::retention::current(store, g).await.ok(),
        });
    }
    out
}

#[derive(Debug, Clone)]
pub struct TopologyView {
    pub kind: String,
    /// Replica set members, or shards with their hosts.
    pub members: Vec<String>,
}

pub async fn topology(store: &Store) -> TopologyView {
    match store.topology() {
        Topology::Standalone => TopologyView {
            kind: "single node (standalone)".into(),
            members: vec![],
        },
        Topology::ReplicaSet { name, .. } => {
            let hello = store
                .db()
                .run_command(doc! {"hello": 1})
                .await
                .unwrap_or_default();
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
            }
        }
        Topology::Sharded => {
            let reply = store
                .client()
                .database("admin")
                .run_command(doc! {"listShards": 1})
                .await
                .unwrap_or_default();
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
            }
        }
    }
}

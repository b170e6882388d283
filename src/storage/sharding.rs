//! Sharding, an explicit step (`tickertape setup --shard`) that `serve`
//! only checks. Every step is idempotent.

use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::schema::bucket_key;
use super::{Resolution, Store, Topology};

/// What `config.collections` says about one bucket collection.
#[derive(Debug, Clone, PartialEq)]
pub enum ShardState {
    Unsharded,
    /// Sharded on `{page: 1, timestamp: 1}`.
    Sharded,
    /// Sharded on another key: reads and writes would still work, but
    /// site-range queries would scatter; refused, never changed silently.
    OtherKey(Document),
}

/// Reads a `config.collections` entry (absent, or marked dropped, means
/// unsharded). Key values are compared as numbers: a server may answer
/// `1`, `1.0` or `NumberLong(1)`.
pub fn shard_state(entry: Option<&Document>) -> ShardState {
    shard_state_on(entry, &bucket_key())
}

/// [`shard_state`] for a collection whose key is `expected` (the visit
/// store's `{site: 1, start: 1}`).
pub fn shard_state_on(entry: Option<&Document>, expected: &Document) -> ShardState {
    let Some(entry) = entry.filter(|e| e.get_bool("dropped") != Ok(true)) else {
        return ShardState::Unsharded;
    };
    let key = entry.get_document("key").cloned().unwrap_or_default();
    let same = key.len() == expected.len()
        && key.iter().zip(expected.iter()).all(|((k, v), (bk, bv))| {
            k == bk && super::values::number(Some(v)) == super::values::number(Some(bv))
        });
    if same {
        ShardState::Sharded
    } else {
        ShardState::OtherKey(key)
    }
}

/// The shard names of a `listShards` reply.
pub fn shard_names(list_shards: &Document) -> Vec<String> {
    list_shards
        .get_array("shards")
        .map(|shards| {
            shards
                .iter()
                .filter_map(|s| s.as_document()?.get_str("_id").ok().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Chunks per shard made at setup: enough that the balancer can even out a
/// skew later by moving whole chunks, few enough to stay cheap.
pub const CHUNKS_PER_SHARD: usize = 4;

/// Page-key boundaries that cut the key space into `chunks` ranges.
///
/// With at least as many known sites as chunks, the boundaries are
/// quantiles of their domains, each boundary the start of a site's range
/// (`"example.com/"`), so no site starts split across chunks. Otherwise a
/// fixed table of first letters, spaced like the initial letters of
/// registered domain names (s, c, m, p, b and a lead), so that sites added
/// later spread too.
pub fn split_points(domains: &[String], chunks: usize) -> Vec<String> {
    const LETTERS: [&str; 15] = [
        "b", "c", "d", "e", "g", "i", "l", "m", "n", "p", "r", "s", "t", "u", "w",
    ];
    if chunks < 2 {
        return Vec::new();
    }
    let mut sorted: Vec<&String> = domains.iter().collect();
    sorted.sort();
    sorted.dedup();
    if sorted.len() >= chunks {
        return (1..chunks)
            .map(|i| format!("{}/", sorted[i * sorted.len() / chunks]))
            .collect();
    }
    let wanted = (chunks - 1).min(LETTERS.len());
    (1..=wanted)
        .map(|i| LETTERS[i * LETTERS.len() / (wanted + 1)].to_owned())
        .collect()
}

/// The commands that pre-split an empty, freshly sharded collection at
/// `points` and deal its chunks round-robin over `shards`, so writes spread
/// from the first hit instead of waiting for the balancer.
pub fn presplit_plan(namespace: &str, points: &[String], shards: &[String]) -> Vec<Document> {
    if shards.len() < 2 {
        return Vec::new();
    }
    let bound = |page: Bson| doc! {"page": page, "timestamp": Bson::MinKey};
    let mut plan: Vec<Document> = points
        .iter()
        .map(|p| doc! {"split": namespace, "middle": bound(Bson::String(p.clone()))})
        .collect();
    let starts = std::iter::once(Bson::MinKey).chain(points.iter().cloned().map(Bson::String));
    plan.extend(starts.enumerate().map(|(i, start)| {
        doc! {
            "moveRange": namespace,
            "min": bound(start),
            "toShard": shards[i % shards.len()].as_str(),
        }
    }));
    plan
}

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("the server is a {0}, not a mongos: there is nothing to shard")]
    NotMongos(String),
    #[error(
        "{collection} is sharded on {key}, not {{page: 1, timestamp: 1}}: site reports would scatter \
         to every shard. Reshard it (reshardCollection) or restore it unsharded, then run setup --shard"
    )]
    WrongKey { collection: String, key: Document },
    #[error("{0} is still not sharded on {{page: 1, timestamp: 1}} after shardCollection")]
    NotApplied(String),
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
}

/// The sharding state of the three bucket collections.
pub async fn shard_states(
    store: &Store,
) -> Result<Vec<(Resolution, ShardState)>, mongodb::error::Error> {
    let db = store.db().name();
    let namespaces: Vec<String> = Resolution::ALL
        .iter()
        .map(|g| format!("{db}.{}", g.collection()))
        .collect();
    let entries: Vec<Document> = store
        .client()
        .database("config")
        .collection::<Document>("collections")
        .find(doc! {"_id": {"$in": &namespaces}})
        .await?
        .try_collect()
        .await?;
    Ok(Resolution::ALL
        .iter()
        .zip(&namespaces)
        .map(|(g, ns)| {
            let entry = entries.iter().find(|e| e.get_str("_id") == Ok(ns.as_str()));
            (*g, shard_state(entry))
        })
        .collect())
}

/// `tickertape setup --shard`: shards the bucket collections on
/// `{page: 1, timestamp: 1}`, pre-splitting empty ones over the shards, and
/// checks the result. Idempotent; a collection sharded on another key is
/// refused.
pub async fn shard(store: &Store) -> Result<Vec<String>, ShardError> {
    if *store.topology() != Topology::Sharded {
        return Err(ShardError::NotMongos(describe(store.topology())));
    }
    let db = store.db().name().to_owned();
    let admin = store.client().database("admin");
    let mut report = Vec::new();
    admin.run_command(doc! {"enableSharding": &db}).await?;
    report.push(format!("enableSharding {db}"));
    let shards = shard_names(&admin.run_command(doc! {"listShards": 1}).await?);
    let domains: Vec<String> = super::sites::list(store)
        .await
        .map(|sites| sites.into_iter().map(|s| s.domain.to_string()).collect())
        .unwrap_or_default();
    for (g, state) in shard_states(store).await? {
        let collection = g.collection();
        let namespace = format!("{db}.{collection}");
        match state {
            ShardState::Sharded => {
                report.push(format!(
                    "{namespace}: already sharded on {{page: 1, timestamp: 1}}"
                ));
                continue;
            }
            ShardState::OtherKey(key) => {
                return Err(ShardError::WrongKey {
                    collection: namespace,
                    key,
                })
            }
            ShardState::Unsharded => {}
        }
        let empty = store
            .db()
            .collection::<Document>(collection)
            .estimated_document_count()
            .await?
            == 0;
        admin
            .run_command(doc! {"shardCollection": &namespace, "key": bucket_key(), "unique": true})
            .await?;
        report.push(format!("{namespace}: sharded on {{page: 1, timestamp: 1}}"));
        if empty {
            let points = split_points(&domains, shards.len() * CHUNKS_PER_SHARD);
            let plan = presplit_plan(&namespace, &points, &shards);
            for command in &plan {
                admin.run_command(command.clone()).await?;
            }
            if !plan.is_empty() {
                report.push(format!(
                    "{namespace}: pre-split into {} chunks over {} shards",
                    points.len() + 1,
                    shards.len()
                ));
            }
        }
    }
    for (g, state) in shard_states(store).await? {
        if state != ShardState::Sharded {
            return Err(ShardError::NotApplied(g.collection().into()));
        }
    }
    for collection in [super::visit_log::COLLECTION, super::visit_log::PARTS] {
        report.push(shard_visits(store, &db, collection, super::visit_log::shard_key()).await?);
    }
    // The visit days' counters and packs, on the site and the day.
    report.push(
        shard_visits(
            store,
            &db,
            super::visit_days::COLLECTION,
            super::visit_days::shard_key(),
        )
        .await?,
    );
    report.push(
        shard_visits(
            store,
            &db,
            super::visit_packs::COLLECTION,
            super::visit_packs::shard_key(),
        )
        .await?,
    );
    for line in &report {
        tracing::info!("{line}");
    }
    Ok(report)
}

/// The visit store, sharded like the buckets on its site and time
/// (`{site: 1, start: 1}`, every write names both): a site's range of
/// visits is read from the shards that hold that range. Not unique: a
/// visit's id is random and the store only ever upserts it by id, site
/// and start. Its day counters and day packs likewise on `{site: 1, day:
/// 1}` (their writes name their id, site and day).
async fn shard_visits(
    store: &Store,
    db: &str,
    collection: &str,
    key: Document,
) -> Result<String, ShardError> {
    let namespace = format!("{db}.{collection}");
    let entry = store
        .client()
        .database("config")
        .collection::<Document>("collections")
        .find_one(doc! {"_id": &namespace})
        .await?;
    match shard_state_on(entry.as_ref(), &key) {
        ShardState::Sharded => return Ok(format!("{namespace}: already sharded on {key}")),
        ShardState::OtherKey(other) => {
            return Err(ShardError::WrongKey {
                collection: namespace,
                key: other,
            })
        }
        ShardState::Unsharded => {}
    }
    store
        .client()
        .database("admin")
        .run_command(doc! {"shardCollection": &namespace, "key": &key})
        .await?;
    Ok(format!("{namespace}: sharded on {key}"))
}

/// For `serve` on a mongos: warnings about bucket collections that are not
/// sharded as they should be. Never fatal (a least-privilege user may not
/// read `config`); the fix is `tickertape setup --shard`.
pub async fn warnings(store: &Store) -> Vec<String> {
    if *store.topology() != Topology::Sharded {
        return Vec::new();
    }
    match shard_states(store).await {
        Ok(states) => states
            .into_iter()
            .filter_map(|(g, state)| match state {
                ShardState::Sharded => None,
                ShardState::Unsharded => Some(format!(
                    "{} is not sharded: every write goes to one shard; run `tickertape setup --shard`",
                    g.collection()
                )),
                ShardState::OtherKey(key) => Some(format!(
                    "{} is sharded on {key}, not {{page: 1, timestamp: 1}}",
                    g.collection()
                )),
            })
            .collect(),
        Err(e) => vec![format!(
            "could not read config.collections to check sharding: {}",
            crate::telemetry::chain(&e)
        )],
    }
}

fn describe(topology: &Topology) -> String {
    match topology {
        Topology::Standalone => "standalone server".to_owned(),
        Topology::ReplicaSet { name, members } => format!("replica set {name} of {members}"),
        Topology::Sharded => "mongos".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `config.collections` entries as a MongoDB 8.0 mongos answers them.
    fn entry(key: Document) -> Document {
        doc! {
            "_id": "tickertape.views_minute",
            "lastmodEpoch": bson::oid::ObjectId::new(),
            "lastmod": bson::DateTime::now(),
            "timestamp": bson::Timestamp { time: 1, increment: 1 },
            "uuid": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![0; 16] },
            "key": key,
            "unique": true,
            "noBalance": false,
        }
    }

    #[test]
    fn the_shard_key_is_read_back_and_another_key_is_told_apart() {
        assert_eq!(shard_state(None), ShardState::Unsharded);
        assert_eq!(
            shard_state(Some(&entry(doc! {"page": 1, "timestamp": 1}))),
            ShardState::Sharded
        );
        assert_eq!(
            shard_state(Some(&entry(doc! {"page": 1.0, "timestamp": 1_i64}))),
            ShardState::Sharded,
            "numbers of any BSON type"
        );
        for other in [
            doc! {"page": "hashed", "timestamp": 1},
            doc! {"timestamp": 1, "page": 1},
            doc! {"page": 1},
            doc! {"_id": 1},
        ] {
            assert_eq!(
                shard_state(Some(&entry(other.clone()))),
                ShardState::OtherKey(other)
            );
        }
        let mut dropped = entry(doc! {"_id": "hashed"});
        dropped.insert("dropped", true);
        assert_eq!(shard_state(Some(&dropped)), ShardState::Unsharded);
    }

    #[test]
    fn the_visit_stores_key_is_told_apart_from_the_buckets() {
        let visits = crate::storage::visit_log::shard_key();
        let on_visits = entry(visits.clone());
        assert_eq!(
            shard_state_on(Some(&on_visits), &visits),
            ShardState::Sharded
        );
        assert_eq!(
            shard_state_on(Some(&entry(bucket_key())), &visits),
            ShardState::OtherKey(bucket_key())
        );
        assert_eq!(
            shard_state(Some(&on_visits)),
            ShardState::OtherKey(visits.clone())
        );
        assert_eq!(shard_state_on(None, &visits), ShardState::Unsharded);
    }

    #[test]
    fn shard_names_come_from_list_shards() {
        let reply = doc! {"shards": [
            {"_id": "shard1", "host": "shard1/shard1-a:27017,shard1-b:27017", "state": 1},
            {"_id": "shard2", "host": "shard2/shard2-a:27017", "state": 1},
        ], "ok": 1.0};
        assert_eq!(shard_names(&reply), ["shard1", "shard2"]);
        assert!(shard_names(&doc! {"ok": 0.0}).is_empty());
    }

    #[test]
    fn split_points_follow_the_sites_or_the_letters() {
        let domains: Vec<String> = (0..100).map(|i| format!("site{i:03}.test")).collect();
        let points = split_points(&domains, 4);
        assert_eq!(points, ["site025.test/", "site050.test/", "site075.test/"]);
        // Few sites: letter boundaries, sorted and distinct.
        let points = split_points(&["example.com".into()], 8);
        assert_eq!(points.len(), 7);
        assert!(points.windows(2).all(|w| w[0] < w[1]), "{points:?}");
        assert!(split_points(&[], 1).is_empty());
    }

    #[test]
    fn an_empty_collection_is_split_and_dealt_round_robin() {
        let points = vec!["g".to_owned(), "n".to_owned(), "t".to_owned()];
        let shards = vec!["shard1".to_owned(), "shard2".to_owned()];
        let plan = presplit_plan("tickertape.views_minute", &points, &shards);
        assert_eq!(plan.len(), 3 + 4);
        assert_eq!(
            plan[0],
            doc! {"split": "tickertape.views_minute", "middle": {"page": "g", "timestamp": Bson::MinKey}}
        );
        let targets: Vec<&str> = plan[3..]
            .iter()
            .map(|c| c.get_str("toShard").unwrap())
            .collect();
        assert_eq!(targets, ["shard1", "shard2", "shard1", "shard2"]);
        assert_eq!(
            plan[3].get_document("min").unwrap(),
            &doc! {"page": Bson::MinKey, "timestamp": Bson::MinKey}
        );
        // One shard: nothing to spread.
        assert!(presplit_plan("t.c", &points, &shards[..1]).is_empty());
    }
}

//! Indexes and sharding, made to match the brief on every start-up and on
//! `tickertape setup`. Every step is idempotent.

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::{Granularity, Store, Topology};

/// The shard key, and the unique index, of all three bucket collections:
/// one page's buckets are contiguous, and one site's pages are contiguous
/// (seed 004, "Compound shard key").
pub fn bucket_key() -> Document {
    doc! { "page": 1, "timestamp": 1 }
}

/// The admin commands that shard the bucket collections, or none when the
/// server is not a mongos. A pure function of the `hello` reply, so it can
/// be checked without a cluster.
pub fn sharding_plan(topology: &Topology, db_name: &str) -> Vec<Document> {
    if *topology != Topology::Sharded {
        return Vec::new();
    }
    let mut plan = vec![doc! { "enableSharding": db_name }];
    plan.extend(Granularity::ALL.iter().map(|g| {
        doc! {
            "shardCollection": format!("{db_name}.{}", g.collection()),
            "key": bucket_key(),
            "unique": true,
        }
    }));
    plan
}

/// Error codes meaning "already done" for older servers that do not treat
/// a repeated enableSharding/shardCollection as success.
const ALREADY_DONE: [i32; 2] = [
    20, /* IllegalOperation */
    23, /* AlreadyInitialized */
];

#[derive(Debug, Default)]
pub struct SetupReport {
    pub indexes: Vec<String>,
    pub sharding: Vec<String>,
}

pub async fn ensure_schema(store: &Store) -> Result<SetupReport, mongodb::error::Error> {
    let mut report = SetupReport::default();
    let db = store.db();
    for g in Granularity::ALL {
        let index = IndexModel::builder()
            .keys(bucket_key())
            .options(
                IndexOptions::builder()
                    .unique(true)
                    .name("page_timestamp".to_owned())
                    .build(),
            )
            .build();
        db.collection::<Document>(g.collection())
            .create_index(index)
            .await?;
        report.indexes.push(format!(
            "{}: unique {{page: 1, timestamp: 1}}",
            g.collection()
        ));
    }
    let sites = db.collection::<Document>(super::sites::COLLECTION);
    sites
        .create_index(
            IndexModel::builder()
                .keys(doc! {"domain": 1})
                .options(
                    IndexOptions::builder()
                        .unique(true)
                        .name("domain".to_owned())
                        .build(),
                )
                .build(),
        )
        .await?;
    sites
        .create_index(IndexModel::builder().keys(doc! {"aliases": 1}).build())
        .await?;
    report
        .indexes
        .push("sites: unique {domain: 1}, {aliases: 1}".into());
    db.collection::<Document>(crate::accounts::users::COLLECTION)
        .create_index(
            IndexModel::builder()
                .keys(doc! {"email": 1})
                .options(
                    IndexOptions::builder()
                        .unique(true)
                        .name("email".to_owned())
                        .build(),
                )
                .build(),
        )
        .await?;
    let sessions = db.collection::<Document>(crate::accounts::sessions::COLLECTION);
    // Expired sessions are removed by the server (TTL at `expiresAt`).
    sessions
        .create_index(
            IndexModel::builder()
                .keys(doc! {"expiresAt": 1})
                .options(
                    IndexOptions::builder()
                        .expire_after(std::time::Duration::ZERO)
                        .name("expiry".to_owned())
                        .build(),
                )
                .build(),
        )
        .await?;
    sessions
        .create_index(IndexModel::builder().keys(doc! {"userId": 1}).build())
        .await?;
    report
        .indexes
        .push("users: unique {email: 1}; sessions: TTL {expiresAt: 1}, {userId: 1}".into());
    // Preallocation finds the active pages of an hour by timestamp.
    db.collection::<Document>(Granularity::Hour.collection())
        .create_index(
            IndexModel::builder()
                .keys(doc! {"timestamp": 1, "totalViews": 1})
                .options(
                    IndexOptions::builder()
                        .name("active_pages".to_owned())
                        .build(),
                )
                .build(),
        )
        .await?;
    db.collection::<Document>(crate::preallocation::runs::COLLECTION)
        .create_index(IndexModel::builder().keys(doc! {"startedAt": -1}).build())
        .await?;
    report
        .indexes
        .push("views_hour: {timestamp: 1, totalViews: 1}; prealloc_runs: {startedAt: -1}".into());

    let plan = sharding_plan(store.topology(), db.name());
    if plan.is_empty() {
        let line = format!(
            "sharding skipped: the server is a {}, not a mongos",
            match store.topology() {
                Topology::Standalone => "standalone server".to_owned(),
                Topology::ReplicaSet { name, members } =>
                    format!("replica set {name} of {members}"),
                Topology::Sharded => unreachable!(),
            }
        );
        tracing::info!("{line}");
        report.sharding.push(line);
    }
    let admin = store.client().database("admin");
    for command in plan {
        let what = command.to_string();
        match admin.run_command(command).await {
            Ok(_) => {}
            Err(e) if command_code(&e).is_some_and(|c| ALREADY_DONE.contains(&c)) => {}
            Err(e) => return Err(e),
        }
        tracing::info!(command = %what, "sharding ensured");
        report.sharding.push(what);
    }
    Ok(report)
}

fn command_code(e: &mongodb::error::Error) -> Option<i32> {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mongos_gets_enable_sharding_and_three_shard_collections() {
        let hello = doc! {"ismaster": true, "msg": "isdbgrid", "maxWireVersion": 21, "ok": 1.0};
        let plan = sharding_plan(&Topology::from_hello(&hello), "tickertape");
        assert_eq!(plan.len(), 4);
        assert_eq!(plan[0], doc! {"enableSharding": "tickertape"});
        for (command, coll) in plan[1..]
            .iter()
            .zip(["views_minute", "views_hour", "views_day"])
        {
            assert_eq!(
                command,
                &doc! {"shardCollection": format!("tickertape.{coll}"), "key": {"page": 1, "timestamp": 1}, "unique": true}
            );
        }
    }

    #[test]
    fn replica_sets_and_standalone_servers_are_not_sharded() {
        let rs = doc! {"isWritablePrimary": true, "setName": "rs0", "ok": 1.0};
        assert!(sharding_plan(&Topology::from_hello(&rs), "tickertape").is_empty());
        let single = doc! {"isWritablePrimary": true, "ok": 1.0};
        assert!(sharding_plan(&Topology::from_hello(&single), "tickertape").is_empty());
    }
}

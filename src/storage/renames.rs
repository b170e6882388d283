//! Collections renamed since an earlier release, and the migration that
//! renames them in an existing database at start, before anything reads
//! or writes them (`indexes::ensure`, run by `serve` before the appliers
//! start and by every command that writes).

use bson::{doc, Document};

use super::Store;

/// The names the breakdown collections had before they were named for
/// what they hold, with their names now: [`rename_former_collections`]
/// moves an existing database's documents over at start.
pub const FORMER_NAMES: [(&str, &str); 4] = [
    ("sources_hour", "breakdowns_hour"),
    ("sources_day", "breakdowns_day"),
    ("site_sources_hour", "site_breakdowns_hour"),
    ("site_sources_day", "site_breakdowns_day"),
];

/// Renames each breakdown collection still under its former name
/// ([`FORMER_NAMES`]), before anything reads or writes breakdowns: run
/// with the indexes at every start, a no-op once done. Returns what it
/// did, one line per collection.
///
/// One `renameCollection` per collection (the local server supports it):
/// atomic, so a crash leaves either the former name or the new one, never
/// half of each, and the next start finishes the rest. A new collection
/// that exists but is empty (made by an index build before the rename)
/// gives way to the former one; one that holds documents is never
/// overwritten: the former collection is left as it is, with a warning,
/// since its figures and the new ones cannot both be kept under one name.
///
/// A sharded cluster before MongoDB 5.0 cannot rename a sharded
/// collection: there the rename fails and so does the start, naming the
/// collection, for the operator to rename it by hand (or upgrade first);
/// `tickertape setup --shard` shards only the view buckets, so this
/// happens only to a breakdown collection sharded by hand.
pub async fn rename_former_collections(
    store: &Store,
) -> Result<Vec<String>, mongodb::error::Error> {
    let db = store.db();
    let names = db.list_collection_names().await?;
    let mut done = Vec::new();
    for (former, now) in FORMER_NAMES {
        if !names.iter().any(|n| n == former) {
            continue;
        }
        if names.iter().any(|n| n == now) {
            let held = db
                .collection::<Document>(now)
                .find_one(doc! {})
                .await?
                .is_some();
            if held {
                tracing::warn!(
                    former,
                    now,
                    "both the former and the new breakdown collection hold documents: \
                     the former one is left as it is, and its figures are not served"
                );
                done.push(format!(
                    "{former}: left as it is ({now} already holds breakdowns)"
                ));
                continue;
            }
            db.collection::<Document>(now).drop().await?;
        }
        let database = db.name();
        store
            .client()
            .database("admin")
            .run_command(doc! {
                "renameCollection": format!("{database}.{former}"),
                "to": format!("{database}.{now}"),
                "dropTarget": false,
            })
            .await?;
        tracing::info!(former, now, "breakdown collection renamed");
        done.push(format!("{former} renamed to {now}"));
    }
    Ok(done)
}

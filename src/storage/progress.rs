//! `journal_progress`: how far each journal lane has been applied, one
//! document per lane, advanced in the same transaction as the buckets.
//!
//! `{_id: "<journal id>/<lane>", journal, lane, position: NumberLong, updatedAt}`

use bson::{doc, Document};
use mongodb::options::{ReadConcern, ReadPreference, SelectionCriteria};

use super::values::number;
use super::Store;

pub const COLLECTION: &str = "journal_progress";

/// A batch's place in its lane: it moves the lane from `from` to `to`.
#[derive(Debug, Clone)]
pub struct Advance<'a> {
    pub journal: &'a str,
    pub lane: u32,
    pub from: u64,
    pub to: u64,
}

pub fn id(journal: &str, lane: u32) -> String {
    format!("{journal}/{lane}")
}

/// The `update` that moves the lane forward, matching only if it is still
/// at `from`.
pub fn advance_command(a: &Advance<'_>) -> Document {
    doc! {
        "update": COLLECTION,
        "updates": [{
            "q": {"_id": id(a.journal, a.lane), "position": a.from as i64},
            "u": {"$set": {
                "position": a.to as i64,
                "updatedAt": bson::DateTime::now(),
            }},
        }],
        "ordered": true,
    }
}

/// The lane's applied position, read from the primary with majority read
/// concern (a value that a failover cannot roll back). `None`: the database
/// has no record of this lane.
pub async fn position(
    store: &Store,
    journal: &str,
    lane: u32,
) -> Result<Option<u64>, mongodb::error::Error> {
    let found = store
        .db()
        .collection::<Document>(COLLECTION)
        .find_one(doc! {"_id": id(journal, lane)})
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .read_concern(ReadConcern::majority())
        .await?;
    Ok(found
        .and_then(|d| number(d.get("position")))
        .map(|p| p.max(0) as u64))
}

/// Records the lane at `initial` unless the database already knows it;
/// returns the position in force.
pub async fn ensure(
    store: &Store,
    journal: &str,
    lane: u32,
    initial: u64,
) -> Result<u64, mongodb::error::Error> {
    store
        .db()
        .collection::<Document>(COLLECTION)
        .update_one(
            doc! {"_id": id(journal, lane)},
            doc! {"$setOnInsert": {
                "journal": journal,
                "lane": lane as i64,
                "position": initial as i64,
                "updatedAt": bson::DateTime::now(),
            }},
        )
        .upsert(true)
        .write_concern(store.commit_write_concern())
        .await?;
    Ok(position(store, journal, lane).await?.unwrap_or(initial))
}

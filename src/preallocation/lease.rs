//! One instance runs each scheduled preallocation. Every instance has a
//! scheduler; before a run it takes the lease document, which names the
//! hour it is for and holds it until the run ends (or, if that instance
//! dies, until the lease runs out, when another one may take the hour).
//! An hour done is recorded in the lease, so a scheduler that fires a
//! moment later finds it done rather than running it again.

use bson::doc;
use chrono::{DateTime, TimeDelta, Utc};

use crate::storage::values::is_duplicate_key;
use crate::storage::Store;

pub const COLLECTION: &str = "prealloc_lease";
const ID: &str = "schedule";

/// How long a run may hold the lease before another instance may take it.
pub const HOLD: TimeDelta = TimeDelta::minutes(10);

fn date(t: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_chrono(t)
}

/// Takes the lease to preallocate `hour`, unless another instance holds
/// it or has already done that hour. The update matches only a free lease
/// for another hour; when it matches nothing, its upsert collides with the
/// existing document on `_id` and the lease is someone else's.
pub async fn acquire(
    store: &Store,
    holder: &str,
    hour: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<bool, mongodb::error::Error> {
    let taken = store
        .db()
        .collection::<bson::Document>(COLLECTION)
        .update_one(
            doc! {"_id": ID, "until": {"$lte": date(now)}, "done": {"$ne": date(hour)}},
            doc! {"$set": {"holder": holder, "hour": date(hour), "until": date(now + HOLD)}},
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
pub async fn release(
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
        .collection::<bson::Document>(COLLECTION)
        .update_one(doc! {"_id": ID, "holder": holder}, doc! {"$set": set})
        .await?;
    Ok(())
}

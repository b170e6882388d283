//! When a bearer secret (an API token, a share link) was last used, for
//! its owner's list. Written at most once a minute per secret: one write
//! per request would double the cost of a read-only request.

use bson::doc;
use chrono::{DateTime, TimeDelta, Utc};

const PRECISION: TimeDelta = TimeDelta::minutes(1);

/// Records a use at `now` of the secret stored under `hash`, unless
/// `last` is less than a minute before it.
pub async fn record<T: Send + Sync>(
    secrets: &mongodb::Collection<T>,
    hash: &str,
    last: Option<bson::DateTime>,
    now: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    if last.is_some_and(|t| t.to_chrono() + PRECISION > now) {
        return Ok(());
    }
    secrets
        .update_one(
            doc! {"_id": hash},
            doc! {"$set": {"lastUsedAt": bson::DateTime::from_chrono(now)}},
        )
        .await
        .map(|_| ())
}

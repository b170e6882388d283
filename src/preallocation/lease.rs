//! One instance runs each scheduled preallocation. Every instance has a
//! scheduler; before a run it takes the lease document, which names the
//! hour it is for and holds it until the run ends (or, if that instance
//! dies, until the lease runs out, when another one may take the hour).
//! An hour done is recorded in the lease, so a scheduler that fires a
//! moment later finds it done rather than running it again.

use chrono::{DateTime, TimeDelta, Utc};

use crate::storage::prealloc::{acquire_lease, release_lease};
use crate::storage::Store;

/// How long a run may hold the lease before another instance may take it.
pub const HOLD: TimeDelta = TimeDelta::minutes(10);

/// Takes the lease to preallocate `hour` for [`HOLD`], unless another
/// instance holds it or has already done that hour.
pub async fn acquire(
    store: &Store,
    holder: &str,
    hour: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<bool, mongodb::error::Error> {
    acquire_lease(store, holder, hour, now, now + HOLD).await
}

/// Releases the lease after a run (only the holder can), recording the
/// hour as done when the run succeeded; a failed hour may be taken again.
pub async fn release(
    store: &Store,
    holder: &str,
    done: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    release_lease(store, holder, done, now).await
}

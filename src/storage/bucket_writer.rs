//! Applies a set of hits to the three bucket collections: merge per bucket,
//! then one `update` command per collection, the three sent concurrently.
//! Used by the ingest writers and by anything else that writes views
//! (demo data, benchmarks), so there is one write path.

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::update::{run_update, UpdateError, UpdateOutcome, UpdateRequest, UpdateSession};
use super::{Granularity, Increments, Store};

pub struct BucketWriter {
    store: Store,
    /// One session per collection, so the three commands can be in flight
    /// at once, each with its own transaction numbers.
    sessions: [UpdateSession; 3],
}

#[derive(Debug, Default, Clone, Copy)]
pub struct FlushReport {
    pub hits: usize,
    /// Per collection, in [`Granularity::ALL`] order.
    pub outcomes: [UpdateOutcome; 3],
}

impl BucketWriter {
    pub async fn new(store: &Store) -> Result<Self, mongodb::error::Error> {
        Ok(Self {
            store: store.clone(),
            sessions: [
                store.update_session().await?,
                store.update_session().await?,
                store.update_session().await?,
            ],
        })
    }

    pub async fn apply<'a>(
        &mut self,
        hits: impl IntoIterator<Item = (&'a str, DateTime<Utc>)>,
        deadline: Instant,
    ) -> Result<FlushReport, UpdateError> {
        let mut increments = Granularity::ALL.map(Increments::new);
        let mut count = 0;
        for (page, at) in hits {
            count += 1;
            for inc in &mut increments {
                inc.add(page, at);
            }
        }
        if count == 0 {
            return Ok(FlushReport::default());
        }
        let store = &self.store;
        let [minute, hour, day] = &mut self.sessions;
        let (m, h, d) = tokio::join!(
            apply_collection(store, &increments[0], minute, deadline),
            apply_collection(store, &increments[1], hour, deadline),
            apply_collection(store, &increments[2], day, deadline),
        );
        Ok(FlushReport {
            hits: count,
            outcomes: [m?, h?, d?],
        })
    }
}

/// Most statements in one `update` command. A flush normally fits in one
/// command; beyond this many buckets it is split so that a command stays
/// well inside MongoDB's 16 MiB message and 100,000-statement limits.
pub const MAX_STATEMENTS_PER_COMMAND: usize = 10_000;

async fn apply_collection(
    store: &Store,
    increments: &Increments,
    session: &mut UpdateSession,
    deadline: Instant,
) -> Result<UpdateOutcome, UpdateError> {
    let mut total = UpdateOutcome::default();
    for chunk in increments.statements().chunks(MAX_STATEMENTS_PER_COMMAND) {
        let request = UpdateRequest {
            store,
            collection: increments.granularity().collection(),
            statements: chunk.to_vec(),
            write_concern: store.write_concern(),
            attempt_timeout: store.attempt_timeout(),
            deadline,
        };
        let outcome = run_update(request, session).await?;
        total.applied += outcome.applied;
        total.upserted += outcome.upserted;
        total.duplicate_retries += outcome.duplicate_retries;
        total.resent += outcome.resent;
    }
    Ok(total)
}

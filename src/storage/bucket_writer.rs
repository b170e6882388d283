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
        let db = self.store.db();
        let write_concern = self.store.write_concern();
        let [minute, hour, day] = &mut self.sessions;
        let request = |inc: &Increments| UpdateRequest {
            db,
            collection: inc.granularity().collection(),
            statements: inc.statements(),
            write_concern,
            attempt_timeout: self.store.attempt_timeout(),
            deadline,
        };
        let (m, h, d) = tokio::join!(
            run_update(request(&increments[0]), minute),
            run_update(request(&increments[1]), hour),
            run_update(request(&increments[2]), day),
        );
        Ok(FlushReport {
            hits: count,
            outcomes: [m?, h?, d?],
        })
    }
}

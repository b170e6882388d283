//! The bounded hand-off between pixel requests and writer tasks.
//!
//! One lane per writer; a page always goes to the same lane (by hash), so a
//! bucket is only ever written by one task and writers never race each other
//! on an upsert. Each lane holds `capacity / writers` hits; a full lane
//! answers 503 rather than growing memory.

use chrono::{DateTime, Utc};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

use crate::domain::Page;
use crate::settings::{AckMode, IngestSettings};

#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
#[error("the batch holding this hit could not be stored")]
pub struct FlushFailed;

pub type Ack = oneshot::Sender<Result<(), FlushFailed>>;

#[derive(Debug)]
pub struct QueuedHit {
    pub page: Page,
    pub at: DateTime<Utc>,
    /// Present in `durable` mode: answered once the hit's batch is committed.
    pub ack: Option<Ack>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitError {
    Full,
    Closed,
}

pub enum Accepted {
    /// `fast` mode: the hit is queued; nothing more to wait for.
    Queued,
    /// `durable` mode: resolves when the hit's batch is committed (or fails).
    Pending(oneshot::Receiver<Result<(), FlushFailed>>),
}

#[derive(Clone)]
pub struct HitQueue {
    lanes: Arc<[mpsc::Sender<QueuedHit>]>,
    lane_capacity: usize,
    ack_mode: AckMode,
}

impl HitQueue {
    /// The queue and one receiver per writer.
    pub fn new(settings: &IngestSettings) -> (Self, Vec<mpsc::Receiver<QueuedHit>>) {
        let writers = settings.writers.max(1);
        let lane_capacity = (settings.queue_capacity / writers).max(1);
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..writers).map(|_| mpsc::channel(lane_capacity)).unzip();
        let queue = Self {
            lanes: senders.into(),
            lane_capacity,
            ack_mode: settings.ack_mode,
        };
        (queue, receivers)
    }

    pub fn lane_of(&self, page: &Page) -> usize {
        // A fixed-key hasher: the same page maps to the same lane for the
        // life of the process.
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(page.as_str());
        (h % self.lanes.len() as u64) as usize
    }

    pub fn submit(&self, page: Page, at: DateTime<Utc>) -> Result<Accepted, SubmitError> {
        let lane = &self.lanes[self.lane_of(&page)];
        let (ack, accepted) = match self.ack_mode {
            AckMode::Fast => (None, None),
            AckMode::Durable => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            }
        };
        lane.try_send(QueuedHit { page, at, ack })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => SubmitError::Full,
                mpsc::error::TrySendError::Closed(_) => SubmitError::Closed,
            })?;
        Ok(accepted.map_or(Accepted::Queued, Accepted::Pending))
    }

    /// Hits waiting for a writer, over all lanes.
    pub fn depth(&self) -> usize {
        self.lanes
            .iter()
            .map(|lane| self.lane_capacity - lane.capacity())
            .sum()
    }

    pub fn capacity(&self) -> usize {
        self.lane_capacity * self.lanes.len()
    }

    pub fn ack_mode(&self) -> AckMode {
        self.ack_mode
    }
}

//! Counters the writer and the pixel keep, read by the admin system page and
//! `/metrics`. Plain atomics: recording must cost nothing on the hot path.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::pixel::Outcome;

#[derive(Debug, Default)]
pub struct IngestStats {
    outcomes: [AtomicU64; Outcome::COUNT],
    pub batches: AtomicU64,
    pub batched_hits: AtomicU64,
    pub largest_batch: AtomicU64,
    pub flush_micros_total: AtomicU64,
    pub flush_failures: AtomicU64,
    /// Hits already answered (fast mode) whose flush failed for good.
    pub hits_lost: AtomicU64,
    pub duplicate_retries: AtomicU64,
    pub resent_commands: AtomicU64,
}

impl IngestStats {
    pub fn record(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].fetch_add(1, Relaxed);
    }

    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes[outcome as usize].load(Relaxed)
    }

    pub fn record_flush(&self, hits: usize, micros: u64) {
        self.batches.fetch_add(1, Relaxed);
        self.batched_hits.fetch_add(hits as u64, Relaxed);
        self.largest_batch.fetch_max(hits as u64, Relaxed);
        self.flush_micros_total.fetch_add(micros, Relaxed);
    }
}

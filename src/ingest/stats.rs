//! Counters the writer and the pixel keep, read by the admin system page and
//! `/metrics`. Plain atomics: recording must cost nothing on the hot path.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::pixel::Outcome;
use crate::metrics::Histogram;

#[derive(Debug)]
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
    /// Failed flushes since the last good one; readiness fails while > 0.
    pub consecutive_failures: AtomicU64,
    pub batch_sizes: Histogram,
    pub flush_seconds: Histogram,
}

impl Default for IngestStats {
    fn default() -> Self {
        Self {
            outcomes: Default::default(),
            batches: AtomicU64::new(0),
            batched_hits: AtomicU64::new(0),
            largest_batch: AtomicU64::new(0),
            flush_micros_total: AtomicU64::new(0),
            flush_failures: AtomicU64::new(0),
            hits_lost: AtomicU64::new(0),
            duplicate_retries: AtomicU64::new(0),
            resent_commands: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
            batch_sizes: Histogram::sizes(),
            flush_seconds: Histogram::seconds(),
        }
    }
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
        self.consecutive_failures.store(0, Relaxed);
        self.batch_sizes.observe(hits as f64);
        self.flush_seconds.observe(micros as f64 / 1e6);
    }

    pub fn record_flush_failure(&self, unacknowledged: usize) {
        self.flush_failures.fetch_add(1, Relaxed);
        self.consecutive_failures.fetch_add(1, Relaxed);
        self.hits_lost.fetch_add(unacknowledged as u64, Relaxed);
    }
}

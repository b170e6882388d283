//! Counters the pixel and the appliers keep, read by the admin system page,
//! `/readyz` and `/metrics`. Plain atomics: recording must cost nothing on
//! the hot path.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::pixel::Outcome;
use crate::metrics::Histogram;

#[derive(Debug)]
pub struct IngestStats {
    outcomes: [AtomicU64; Outcome::COUNT],
    /// Batches applied to the database, and the hits in them.
    pub batches: AtomicU64,
    pub applied_hits: AtomicU64,
    pub largest_batch: AtomicU64,
    pub flush_micros_total: AtomicU64,
    /// Attempts to apply a batch (or reach the database) that failed.
    pub flush_failures: AtomicU64,
    /// Batches whose commit outcome was unknown and that the progress
    /// document showed to be in.
    pub resolved_by_progress: AtomicU64,
    /// Failed attempts since the last batch went in; readiness fails while
    /// > 0.
    pub consecutive_failures: AtomicU64,
    /// The sources appliers' failed attempts since their last applied
    /// batch: sources that cannot be written keep their journal segments.
    pub sources_consecutive_failures: AtomicU64,
    pub batch_sizes: Histogram,
    pub flush_seconds: Histogram,
    /// Hits applied per batch over the last minute, for the apply rate.
    recent: Mutex<VecDeque<(Instant, u64)>>,
}

/// The span the apply rate is measured over.
const RATE_SPAN: Duration = Duration::from_secs(60);

impl Default for IngestStats {
    fn default() -> Self {
        Self {
            outcomes: Default::default(),
            batches: AtomicU64::new(0),
            applied_hits: AtomicU64::new(0),
            largest_batch: AtomicU64::new(0),
            flush_micros_total: AtomicU64::new(0),
            flush_failures: AtomicU64::new(0),
            resolved_by_progress: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
            sources_consecutive_failures: AtomicU64::new(0),
            batch_sizes: Histogram::sizes(),
            flush_seconds: Histogram::seconds(),
            recent: Mutex::new(VecDeque::new()),
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
        self.largest_batch.fetch_max(hits as u64, Relaxed);
        self.flush_micros_total.fetch_add(micros, Relaxed);
        self.consecutive_failures.store(0, Relaxed);
        self.batch_sizes.observe(hits as f64);
        self.flush_seconds.observe(micros as f64 / 1e6);
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.push_back((now, hits as u64));
        while recent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > RATE_SPAN)
        {
            recent.pop_front();
        }
    }

    /// Hits applied per second over the last minute.
    pub fn apply_rate(&self) -> f64 {
        let now = Instant::now();
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let hits: u64 = recent
            .iter()
            .filter(|(at, _)| now.duration_since(*at) <= RATE_SPAN)
            .map(|(_, n)| n)
            .sum();
        hits as f64 / RATE_SPAN.as_secs_f64()
    }

    pub fn record_flush_failure(&self) {
        self.flush_failures.fetch_add(1, Relaxed);
        self.consecutive_failures.fetch_add(1, Relaxed);
    }
}

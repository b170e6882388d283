//! Counters the pixel and the appliers keep, read by the admin system page,
//! `/readyz` and `/metrics`. Plain atomics: recording must cost nothing on
//! the hot path.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::pixel::Outcome;
use crate::metrics::Histogram;
use crate::storage::progress::Stream;

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
    /// The same for the rollups (hour and day buckets).
    pub rollups_consecutive_failures: AtomicU64,
    /// The same for the visit store.
    pub visits_consecutive_failures: AtomicU64,
    /// Per stream (`Stream::index`): statements applied, and the time their
    /// transactions took (µs), for the cost per statement and per hit.
    pub statements: [AtomicU64; 4],
    pub transaction_micros: [AtomicU64; 4],
    /// Per stream: statements the database refused for what their bucket
    /// holds (an `$inc` past the largest NumberLong, a counter of another
    /// type), left out of their batch so the rest of the lane goes on; and
    /// the hits they carried.
    pub set_aside_statements: [AtomicU64; 4],
    pub set_aside_hits: [AtomicU64; 4],
    pub batch_sizes: Histogram,
    pub flush_seconds: Histogram,
    /// Hits applied per batch over the last minute, for the apply rate.
    recent: Mutex<VecDeque<(Instant, u64)>>,
    /// Minute by minute, the applied rate while the minutes stayed fresh.
    sustained: Mutex<Sustained>,
}

/// How far behind the minute buckets may be for a minute's applied rate to
/// count as sustained (README: "minutes within 5 s").
pub const FRESH_SECS: f64 = 5.0;

#[derive(Debug)]
struct Sustained {
    start: Instant,
    hits: u64,
    worst_lag: f64,
    best: f64,
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
            rollups_consecutive_failures: AtomicU64::new(0),
            visits_consecutive_failures: AtomicU64::new(0),
            statements: Default::default(),
            transaction_micros: Default::default(),
            set_aside_statements: Default::default(),
            set_aside_hits: Default::default(),
            batch_sizes: Histogram::sizes(),
            flush_seconds: Histogram::seconds(),
            recent: Mutex::new(VecDeque::new()),
            sustained: Mutex::new(Sustained {
                start: Instant::now(),
                hits: 0,
                worst_lag: 0.0,
                best: 0.0,
            }),
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

    /// A minutes batch of `hits` went in, its oldest hit `lag_secs` old:
    /// each whole minute whose batches all stayed within [`FRESH_SECS`]
    /// is a rate the write-behind sustained.
    pub fn record_freshness(&self, hits: u64, lag_secs: f64) {
        let now = Instant::now();
        let mut s = self.sustained.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.duration_since(s.start);
        if elapsed >= RATE_SPAN {
            if s.worst_lag <= FRESH_SECS {
                s.best = s.best.max(s.hits as f64 / elapsed.as_secs_f64());
            }
            *s = Sustained {
                start: now,
                hits: 0,
                worst_lag: 0.0,
                best: s.best,
            };
        }
        s.hits += hits;
        s.worst_lag = s.worst_lag.max(lag_secs);
    }

    /// The best one-minute applied rate since start with the minutes
    /// fresh (hits/s).
    pub fn sustained_rate(&self) -> f64 {
        self.sustained
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .best
    }

    /// Failed attempts in a row of `stream`'s appliers other than the
    /// views' (which are `consecutive_failures`).
    pub fn failing(&self, stream: Stream) -> &AtomicU64 {
        match stream {
            Stream::Views => &self.consecutive_failures,
            Stream::Sources => &self.sources_consecutive_failures,
            Stream::Rollups => &self.rollups_consecutive_failures,
            Stream::Visits => &self.visits_consecutive_failures,
        }
    }

    /// A committed batch of `stream` (by index) with `statements`
    /// statements, in `micros` from its start to its commit.
    pub fn record_statements(&self, stream: usize, statements: u64, micros: u64) {
        self.statements[stream].fetch_add(statements, Relaxed);
        self.transaction_micros[stream].fetch_add(micros, Relaxed);
    }

    pub fn record_flush_failure(&self) {
        self.flush_failures.fetch_add(1, Relaxed);
        self.consecutive_failures.fetch_add(1, Relaxed);
    }
}

//! Journal counters for `/metrics`, `/readyz` and the admin system page.
//! Plain atomics: the writer thread records on every group commit.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::metrics::Histogram;

#[derive(Debug)]
pub struct JournalStats {
    /// Records committed (synced) since start, plus the unapplied records
    /// found on disk at start.
    pub committed_records: AtomicU64,
    pub applied_records: AtomicU64,
    /// Records whose sources are applied (the sources stream trails the
    /// views by up to its window).
    pub sources_applied_records: AtomicU64,
    /// Records whose hour and day buckets are applied (the rollups trail
    /// the minutes by up to their window).
    pub rollups_applied_records: AtomicU64,
    /// Records the visit store has taken (or skipped, switched off).
    pub visits_applied_records: AtomicU64,
    /// Records the appliers read back from segment files (replay after a
    /// restart, or catching up after falling behind) rather than from memory.
    pub replayed_records: AtomicU64,
    pub group_commits: AtomicU64,
    pub sync_failures: AtomicU64,
    /// `fast`-mode hits, already answered, whose journal write failed.
    pub fast_hits_lost: AtomicU64,
    pub full_refusals: AtomicU64,
    pub torn_tails_truncated: AtomicU64,
    pub segments_deleted: AtomicU64,
    /// Panics caught in the writer threads and the appliers (bugs), each
    /// logged; the lane went on.
    pub writer_panics: AtomicU64,
    pub commit_sizes: Histogram,
    pub sync_seconds: Histogram,
    /// Segments found damaged in the middle: what and where.
    pub corrupt: Mutex<Vec<String>>,
}

impl Default for JournalStats {
    fn default() -> Self {
        Self {
            committed_records: AtomicU64::new(0),
            applied_records: AtomicU64::new(0),
            sources_applied_records: AtomicU64::new(0),
            rollups_applied_records: AtomicU64::new(0),
            visits_applied_records: AtomicU64::new(0),
            replayed_records: AtomicU64::new(0),
            group_commits: AtomicU64::new(0),
            sync_failures: AtomicU64::new(0),
            fast_hits_lost: AtomicU64::new(0),
            full_refusals: AtomicU64::new(0),
            torn_tails_truncated: AtomicU64::new(0),
            segments_deleted: AtomicU64::new(0),
            writer_panics: AtomicU64::new(0),
            commit_sizes: Histogram::sizes(),
            sync_seconds: Histogram::seconds(),
            corrupt: Mutex::new(Vec::new()),
        }
    }
}

impl JournalStats {
    /// Committed records not yet in the database.
    pub fn backlog(&self) -> u64 {
        self.committed_records
            .load(Relaxed)
            .saturating_sub(self.applied_records.load(Relaxed))
    }

    /// Committed records whose sources are not yet in the database.
    pub fn sources_backlog(&self) -> u64 {
        self.backlog_of(1)
    }

    /// Committed records whose hour and day buckets are not yet in the
    /// database.
    pub fn rollups_backlog(&self) -> u64 {
        self.backlog_of(2)
    }

    /// Committed records not yet in the visit store.
    pub fn visits_backlog(&self) -> u64 {
        self.backlog_of(3)
    }

    /// The counter of records applier `applier` has applied (0 views, 1
    /// sources, 2 rollups, 3 visits: `storage::progress::Stream::index`).
    pub fn applied_by(&self, applier: usize) -> &AtomicU64 {
        match applier {
            0 => &self.applied_records,
            1 => &self.sources_applied_records,
            2 => &self.rollups_applied_records,
            _ => &self.visits_applied_records,
        }
    }

    /// Committed records applier `applier` has not applied yet.
    pub fn backlog_of(&self, applier: usize) -> u64 {
        self.committed_records
            .load(Relaxed)
            .saturating_sub(self.applied_by(applier).load(Relaxed))
    }

    pub fn corrupt_segments(&self) -> Vec<String> {
        self.corrupt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn report_corrupt(&self, what: String) {
        self.corrupt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(what);
    }
}

//! Write-behind: one applier task per journal lane takes committed hits
//! (from memory as they are synced, from the segment files when replaying or
//! behind), merges them over a short window and applies each batch with the
//! lane's progress in one transaction (`storage::bucket_writer`).
//!
//! A second applier per lane applies the hits' sources: it reads the same
//! lane from the segment files at its own position (`progress::Stream`),
//! over a longer window, so each source bucket gets one statement for many
//! hits instead of one more statement in every views batch. Sources show in
//! reports up to that window after the views; a segment is deleted when
//! both appliers are past it, and a restart resumes each where its own
//! progress document says.
//!
//! A batch that fails is retried until it is in: the database being away
//! only grows the backlog. After any failure the progress document says
//! whether the batch committed after all, so a batch counts exactly once.

use super::directory::SiteDirectory;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::stats::IngestStats;
use crate::journal::lane::LaneReadError;
use crate::journal::{CommittedBatch, JournalStats, Lane, LaneFeed, Record};
use crate::storage::bucket_writer::{ApplyError, BucketWriter, Hit};
use crate::storage::progress::{self, Advance, Stream};
use crate::storage::sources::SourceCounts;
use crate::storage::Store;

#[derive(Debug, Clone, Copy)]
pub struct ApplyConfig {
    /// How long hits are gathered before a batch is applied.
    pub window: Duration,
    /// A batch is applied as soon as it holds this many hits.
    pub max_hits: usize,
    /// The same two for the sources applier.
    pub sources_window: Duration,
    pub sources_max_hits: usize,
}

/// Most records the sources applier reads from the files at a time: also
/// how far a batch can pass `SourceCounts::is_full` before it is applied.
const SOURCES_READ_CHUNK: usize = 4_096;

pub struct Appliers {
    handles: Vec<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

struct Applier {
    lane: Arc<Lane>,
    stream: Stream,
    committed: mpsc::Receiver<CommittedBatch>,
    /// A batch taken from `committed` but not yet used.
    pending: Option<CommittedBatch>,
    /// The writer has stopped (shutdown): nothing more comes in memory.
    memory_closed: bool,
    store: Store,
    writer: BucketWriter,
    journal: String,
    config: ApplyConfig,
    /// The lane's position in the database: everything before it is applied.
    applied: u64,
    stats: Arc<IngestStats>,
    journal_stats: Arc<JournalStats>,
    /// Knows the sites marked deleted, whose hits are not applied.
    directory: SiteDirectory,
}

struct Batch {
    /// The views applier's hits, as journaled.
    records: Vec<Record>,
    /// The sources applier's hits, merged as they are read, so a batch of
    /// many seconds holds only the buckets it touches.
    sources: SourceCounts,
    /// Journaled hits in the batch (with or without a source).
    hits: usize,
    from: u64,
    to: u64,
    from_disk: usize,
}

impl Batch {
    fn new(from: u64) -> Self {
        Self {
            records: Vec::new(),
            sources: SourceCounts::default(),
            hits: 0,
            from,
            to: from,
            from_disk: 0,
        }
    }
}

impl Appliers {
    pub fn start(
        store: &Store,
        journal: uuid::Uuid,
        feeds: Vec<LaneFeed>,
        config: ApplyConfig,
        stats: Arc<IngestStats>,
        journal_stats: Arc<JournalStats>,
        directory: SiteDirectory,
    ) -> Self {
        let (shutdown, _) = watch::channel(false);
        let applier = |lane: Arc<Lane>, stream, committed, config| Applier {
            lane,
            stream,
            committed,
            pending: None,
            memory_closed: stream == Stream::Sources,
            store: store.clone(),
            writer: BucketWriter::new(store),
            journal: journal.to_string(),
            config,
            applied: 0,
            stats: stats.clone(),
            journal_stats: journal_stats.clone(),
            directory: directory.clone(),
        };
        let sources_config = ApplyConfig {
            window: config.sources_window,
            max_hits: config.sources_max_hits,
            ..config
        };
        let mut handles = Vec::new();
        for feed in feeds {
            // The sources applier reads only the files: a receiver with no
            // sender, closed from the start.
            let (_, closed) = mpsc::channel(1);
            let sources = applier(feed.lane.clone(), Stream::Sources, closed, sources_config);
            let views = applier(feed.lane, Stream::Views, feed.committed, config);
            handles.push(tokio::spawn(views.run(shutdown.subscribe())));
            handles.push(tokio::spawn(sources.run(shutdown.subscribe())));
        }
        Self { handles, shutdown }
    }

    /// Applies what the database will take within `drain`; whatever is
    /// left stays in the journal for the next start. Call after the
    /// journal's writers are closed, so there is an end to drain to.
    pub async fn shutdown(self, drain: Duration) {
        let _ = self.shutdown.send(true);
        let deadline = Instant::now() + drain;
        for mut handle in self.handles {
            match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "applier task ended abnormally"),
                Err(_) => {
                    handle.abort();
                    tracing::warn!(
                        "the database did not take the whole backlog before shutdown; \
                         the rest stays in the journal and is applied at the next start"
                    );
                }
            }
        }
    }
}

impl Applier {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let lane = self.lane.index;
        let stream = self.stream.as_str();
        let Some(start) = self.establish(&mut shutdown).await else {
            return;
        };
        self.applied = start;
        tracing::info!(
            lane,
            stream,
            position = start,
            committed = self.lane.committed(),
            "applier started"
        );
        loop {
            // A panic (a bug) in one round is logged and the applier goes
            // on from the position the database has: nothing is lost, since
            // `applied` only moves after a commit is known.
            let round = AssertUnwindSafe(self.round(&mut shutdown))
                .catch_unwind()
                .await;
            match round {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => {
                    self.journal_stats.writer_panics.fetch_add(1, Relaxed);
                    self.pending = None;
                    tracing::error!(
                        lane,
                        stream,
                        position = self.applied,
                        "applier panicked; going on"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        tracing::debug!(lane, stream, position = self.applied, "applier stopped");
    }

    /// Gathers and applies one batch; false when it is time to stop.
    async fn round(&mut self, shutdown: &mut watch::Receiver<bool>) -> bool {
        let closing = *shutdown.borrow();
        match self.gather(shutdown).await {
            Some(batch) => self.commit(batch, shutdown).await,
            None => !(closing || *shutdown.borrow()),
        }
    }

    /// Finds where the database says this lane's stream stands, retrying
    /// while it is away. The views applier records the lane (both streams)
    /// if it is new to this database; the sources applier waits for that.
    async fn establish(&mut self, shutdown: &mut watch::Receiver<bool>) -> Option<u64> {
        let mut backoff = Duration::from_millis(100);
        loop {
            let (store, journal, lane) = (&self.store, &self.journal, self.lane.index);
            let found = match self.stream {
                Stream::Views => progress::ensure_lane(store, journal, lane, self.lane.oldest())
                    .await
                    .map(Some),
                Stream::Sources => progress::position(store, journal, lane, Stream::Sources).await,
            };
            match found {
                Ok(Some(position)) => {
                    self.count_applied_before(position);
                    return Some(position);
                }
                Ok(None) => {
                    tracing::debug!(
                        lane,
                        "the sources wait for the views applier to record the lane"
                    );
                }
                Err(e) => {
                    self.record_failure();
                    tracing::warn!(lane = self.lane.index, error = %crate::telemetry::chain(&e),
                        "cannot read the journal progress; hits wait in the journal");
                }
            }
            if *shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.changed() => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Records on disk before `position` are already applied: count them so
    /// the backlog is right from the start.
    fn count_applied_before(&self, position: u64) {
        let mut at = self.lane.oldest();
        let mut applied = 0u64;
        while at < position {
            match self.lane.read(at, 65_536) {
                Ok(chunk) if chunk.end > at => {
                    let before = chunk.end.min(position);
                    if chunk.end <= position {
                        applied += chunk.records.len() as u64;
                    } else {
                        // Only part of this chunk is before the position:
                        // count record by record.
                        let mut pos = at;
                        for r in &chunk.records {
                            pos += r.encoded_len() as u64;
                            if pos <= before {
                                applied += 1;
                            }
                        }
                    }
                    at = chunk.end;
                }
                _ => break,
            }
        }
        self.applied_records().fetch_add(applied, Relaxed);
    }

    /// A failed round: the views' counts in the flush statistics; both
    /// make the app degraded until their next applied batch.
    fn record_failure(&self) {
        match self.stream {
            Stream::Views => self.stats.record_flush_failure(),
            Stream::Sources => {
                self.stats
                    .sources_consecutive_failures
                    .fetch_add(1, Relaxed);
            }
        }
    }

    /// The counter of records this applier has applied.
    fn applied_records(&self) -> &std::sync::atomic::AtomicU64 {
        match self.stream {
            Stream::Views => &self.journal_stats.applied_records,
            Stream::Sources => &self.journal_stats.sources_applied_records,
        }
    }

    fn peek_memory(&mut self) -> Option<&CommittedBatch> {
        if self.pending.is_none() {
            self.pending = self.committed.try_recv().ok();
        }
        self.pending.as_ref()
    }

    /// Gathers the next batch, starting at the applied position: in memory
    /// when the hand-off continues exactly where we are, from the files
    /// otherwise. `None` when there is nothing to apply (or we are closing
    /// and caught up).
    async fn gather(&mut self, shutdown: &mut watch::Receiver<bool>) -> Option<Batch> {
        let from = self.applied;
        let mut batch = Batch::new(from);
        let mut to = from;
        let mut deadline: Option<Instant> = None;
        let max = self.config.max_hits.max(1);
        loop {
            let closing = *shutdown.borrow();
            if batch.hits >= max || batch.sources.is_full() {
                break;
            }
            // In memory, right where we are?
            let head = self.peek_memory().map(|b| (b.start, b.end));
            match head {
                Some((_, end)) if end <= to => {
                    self.pending = None; // already read from the files
                    continue;
                }
                Some((start, _)) if start == to => {
                    let b = self.pending.take().expect("peeked");
                    to = b.end;
                    self.take(&mut batch, b.records);
                    deadline.get_or_insert_with(|| Instant::now() + self.config.window);
                    continue;
                }
                _ => {}
            }
            // Committed beyond `to`, but not in memory here: read the files.
            if self.lane.committed() > to {
                // The sources applier merges as it reads: in chunks, so a
                // large batch is never held as records.
                let chunk = match self.stream {
                    Stream::Views => max - batch.hits,
                    Stream::Sources => (max - batch.hits).min(SOURCES_READ_CHUNK),
                };
                match self.lane.read(to, chunk) {
                    Ok(chunk) if chunk.end > to => {
                        batch.from_disk += chunk.records.len();
                        to = chunk.end;
                        if !chunk.records.is_empty() {
                            self.take(&mut batch, chunk.records);
                            deadline.get_or_insert_with(|| Instant::now() + self.config.window);
                        }
                        continue;
                    }
                    Ok(_) => {}
                    Err(LaneReadError::Missing { position, oldest }) => {
                        tracing::error!(lane = self.lane.index, position, oldest,
                            "the database's journal position is before the oldest segment on disk \
                             (database restored, or segments removed by hand): applying from the oldest");
                        to = oldest;
                        continue;
                    }
                    Err(e) => {
                        let what =
                            format!("lane {}: {}", self.lane.index, crate::telemetry::chain(&e));
                        tracing::error!("journal read failed: {what}; retrying");
                        self.record_failure();
                        if batch.hits == 0 {
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                                _ = shutdown.changed() => {}
                            }
                            if closing {
                                return None;
                            }
                            continue;
                        }
                        break;
                    }
                }
            }
            let empty = batch.hits == 0;
            if !empty && (closing || deadline.is_some_and(|d| Instant::now() >= d)) {
                break;
            }
            if empty && closing && self.lane.committed() <= to {
                return None;
            }
            if empty && to > from {
                // Skipped a gap with no records (a cut tail): record it too.
                break;
            }
            let wake = deadline.unwrap_or_else(|| Instant::now() + Duration::from_millis(250));
            tokio::select! {
                received = self.committed.recv(), if self.pending.is_none() && !self.memory_closed => {
                    self.memory_closed = received.is_none();
                    self.pending = received;
                }
                _ = tokio::time::sleep_until(wake) => {}
                _ = shutdown.changed() => {}
            }
        }
        if let Some(first) = batch.records.first() {
            let ms = first.at.timestamp_millis().max(1) as u64;
            let _ = self
                .lane
                .oldest_unapplied_ms
                .compare_exchange(0, ms, Relaxed, Relaxed);
        }
        batch.to = to;
        Some(batch)
    }

    /// Adds journaled hits to the batch: as they are for the views, merged
    /// for the sources (leaving out those without one).
    fn take(&self, batch: &mut Batch, records: Vec<Record>) {
        batch.hits += records.len();
        match self.stream {
            Stream::Views => batch.records.extend(records),
            Stream::Sources => {
                for r in records {
                    if let Some(source) = r.source {
                        batch.sources.add(r.page, r.at, source);
                    }
                }
            }
        }
    }

    /// Applies a batch, retrying until it is in. Returns false when
    /// shutting down gave up on it (it stays in the journal).
    #[tracing::instrument(name = "flush", level = "debug", skip_all, fields(lane = self.lane.index, stream = self.stream.as_str(), hits = batch.hits, from = batch.from, to = batch.to))]
    async fn commit(&mut self, batch: Batch, shutdown: &mut watch::Receiver<bool>) -> bool {
        let views = self.stream == Stream::Views;
        let advance = Advance {
            journal: &self.journal,
            lane: self.lane.index,
            stream: self.stream,
            from: batch.from,
            to: batch.to,
        };
        let mut backoff = Duration::from_millis(50);
        let mut attempts = 0u32;
        loop {
            let started = Instant::now();
            // A deleted site's hits accepted before its deletion are
            // skipped, so they do not re-create its buckets; the progress
            // still advances past them.
            let result = match self.stream {
                Stream::Views => {
                    let hits = batch
                        .records
                        .iter()
                        .filter(|r| !self.directory.is_deleted_page(&r.page))
                        .map(|r| Hit {
                            page: &r.page,
                            at: r.at,
                            source: None,
                        });
                    self.writer.apply(hits, Some(&advance)).await
                }
                Stream::Sources => {
                    let views = batch
                        .sources
                        .iter()
                        .filter(|(page, ..)| !self.directory.is_deleted_page(page));
                    self.writer.apply_sources(views, batch.hits, &advance).await
                }
            };
            // The flush statistics (latency, sizes) are the views'.
            let error = match result {
                Ok(report) => {
                    if views {
                        self.stats
                            .record_flush(report.hits, started.elapsed().as_micros() as u64);
                    } else {
                        self.stats.sources_consecutive_failures.store(0, Relaxed);
                    }
                    break;
                }
                Err(e) => e,
            };
            attempts += 1;
            self.record_failure();
            let transient = matches!(&error, ApplyError::NotApplied(t) if t.is_transient());
            let log = crate::telemetry::chain(&error);
            if transient {
                tracing::debug!(lane = self.lane.index, error = %log, "batch conflicted; retrying");
            } else if attempts == 1 || attempts.is_power_of_two() {
                tracing::warn!(lane = self.lane.index, attempts, hits = batch.hits,
                    error = %log, "batch not applied; retrying (hits are safe in the journal)");
            }
            // Whatever happened, the progress document says whether the
            // batch is in.
            let read = progress::position(&self.store, &self.journal, self.lane.index, self.stream);
            let known = match tokio::time::timeout(self.store.attempt_timeout(), read).await {
                Ok(Ok(position)) => Some(position),
                _ => None, // the database is away or slow: try again later
            };
            tracing::debug!(
                lane = self.lane.index,
                ?known,
                from = batch.from,
                to = batch.to,
                "progress after a failed batch"
            );
            match known {
                Some(Some(p)) if p == batch.to => {
                    tracing::info!(
                        lane = self.lane.index,
                        stream = self.stream.as_str(),
                        "the batch had committed after all"
                    );
                    if views {
                        self.stats.resolved_by_progress.fetch_add(1, Relaxed);
                        self.stats.consecutive_failures.store(0, Relaxed);
                    } else {
                        self.stats.sources_consecutive_failures.store(0, Relaxed);
                    }
                    break;
                }
                Some(Some(p)) if p == batch.from => {}
                Some(found) => {
                    tracing::error!(lane = self.lane.index, expected = batch.from, ?found,
                        "the journal progress moved elsewhere (another process on a copy of this journal, \
                         or a restored database); continuing from the database's position");
                    if let Some(p) = found {
                        self.applied = p;
                    }
                    return true;
                }
                None => {}
            }
            if *shutdown.borrow() && attempts >= 3 {
                return false;
            }
            if !transient {
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
        self.applied = batch.to;
        let n = batch.hits as u64;
        self.applied_records().fetch_add(n, Relaxed);
        if !views {
            self.lane.applied(Stream::Sources.index(), batch.to);
            return true;
        }
        self.journal_stats
            .replayed_records
            .fetch_add(batch.from_disk as u64, Relaxed);
        self.stats.applied_hits.fetch_add(n, Relaxed);
        let caught_up = self.lane.committed() <= batch.to;
        let next_oldest = match batch.records.last() {
            Some(last) if !caught_up => last.at.timestamp_millis().max(1) as u64,
            _ => 0,
        };
        self.lane.oldest_unapplied_ms.store(next_oldest, Relaxed);
        self.lane.applied(Stream::Views.index(), batch.to);
        true
    }
}

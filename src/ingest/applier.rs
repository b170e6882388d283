//! Write-behind: each journal lane has four applier tasks, one per
//! `progress::Stream`, each with its own position in the lane and its own
//! progress document, so each batch of any of them commits exactly once.
//!
//! - **views** (the page and site minute buckets) take committed hits from
//!   memory as they are synced (from the segment files when replaying or
//!   behind) and apply them within about a second;
//! - **rollups** (the page and site hour and day buckets) read the lane's
//!   files and merge over a few seconds;
//! - **sources** (every breakdown dimension and the events: the stream
//!   kept its first name) read the files and merge over 2 s;
//! - **visits** (the visit store, `storage::visit_log`) read the files and
//!   merge each visit's hits over 5 s into one entry per visit, written
//!   as one part (an insert) per site and day.
//!   Switched off (`TICKERTAPE_VISIT_STORE=false`), it still moves its
//!   progress, writing nothing, so switching it on later goes on from
//!   there.
//!
//! *Why*: a statement costs about the same whatever it carries, and each
//! level costs one statement per distinct page in a batch, so at 10,000
//! active pages one window of all three levels cost 30,000 statements,
//! more than two cores apply in a second. Hours and days are read for
//! longer ranges and can trail the minutes by seconds; merged over a longer
//! window, one statement carries many more hits.
//!
//! *Adaptive batches*: a batch closes once its oldest hit is a window old
//! and nothing more is waiting, so at light load it gathers a window of
//! hits, and behind (a backlog, or a batch that took longer than the
//! window) it takes everything already committed, up to a bound in hits
//! and in buckets: the statements per hit fall as the load rises, and a
//! backlog drains in few, large batches.
//!
//! A batch that fails is retried until it is in: the database being away
//! only grows the backlog. After any failure the progress document says
//! whether the batch committed after all, so a batch counts exactly once.
//!
//! *Set aside*: a statement the database refuses for what its bucket holds
//! (an `$inc` past the largest NumberLong after a hand edit or an old
//! import, a counter of another type) would be refused on every retry, and
//! the lane would stop for every site on it. Such a refusal aborts the
//! transaction, so nothing of the batch is in; the batch is sent again
//! without that bucket, which is logged (its key and start only) and
//! counted in `/metrics`. Everything else still commits exactly once, with
//! the progress document in the same transaction.
//!
//! *Length*: the four streams share one loop (batching, retries, the
//! progress check after a failure, set-aside), differing only in what a
//! batch writes; one file keeps that loop in one place.

use super::directory::SiteDirectory;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::stats::IngestStats;
use crate::journal::lane::LaneReadError;
use crate::journal::{CommittedBatch, Handoff, JournalStats, Lane, LaneFeed, Record};
use crate::storage::breakdowns::BreakdownCounts;
use crate::storage::bucket_writer::{self, ApplyError, BucketWriter};
use crate::storage::progress::{self, Advance, Stream};
use crate::storage::visit_log::VisitWrites;
use crate::storage::{Increments, Store};
use chrono::{DateTime, Utc};

#[derive(Debug, Clone, Copy)]
pub struct ApplyConfig {
    /// How long the minute buckets' hits are gathered at light load.
    pub window: Duration,
    /// A minutes batch is applied as soon as it holds this many hits.
    pub max_hits: usize,
    /// The same two for the hour and day buckets.
    pub rollups_window: Duration,
    pub rollups_max_hits: usize,
    /// The same two for the sources applier.
    pub sources_window: Duration,
    pub sources_max_hits: usize,
    /// The same two for the visit store, and whether it is written at all.
    pub visits_window: Duration,
    pub visits_max_hits: usize,
    pub visit_store: bool,
    /// Most buckets (all levels) in one minutes or rollups batch: bounds
    /// the transaction and the applier's memory however many pages a
    /// backlog touches.
    pub max_buckets: usize,
}

impl ApplyConfig {
    fn for_stream(self, stream: Stream) -> (Duration, usize) {
        match stream {
            Stream::Views => (self.window, self.max_hits),
            Stream::Rollups => (self.rollups_window, self.rollups_max_hits),
            Stream::Sources => (self.sources_window, self.sources_max_hits),
            Stream::Visits => (self.visits_window, self.visits_max_hits),
        }
    }
}

/// Most records an applier reads from the files at a time: also how far a
/// batch can pass its bounds before it is applied.
const READ_CHUNK: usize = 4_096;

/// The fewest records read at a time, however little room a batch has
/// left: smaller reads would only cost more calls.
const MIN_READ: usize = 64;

/// The fewest buckets a batch is shrunk to after failures.
const MIN_BOUND: usize = 500;

/// Most visits in one visits batch. A batch is a part per site and day
/// (one statement, whatever it holds), so this bounds what a batch holds,
/// not its statements: at 10,000 visits a batch was most of the app's
/// memory at saturation (design/applier.md, "Measured: every stream at
/// saturation"). A visit's entry is at most its dimensions (a few hundred
/// bytes) and the batch's steps of it (each under 1 KiB,
/// `visit_log::step_bytes`), so a batch holds a few MiB.
const MAX_VISITS_PER_BATCH: usize = 2_000;

pub struct Appliers {
    handles: Vec<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

struct Applier {
    lane: Arc<Lane>,
    stream: Stream,
    committed: Handoff,
    /// A batch taken from `committed` but not yet used.
    pending: Option<CommittedBatch>,
    /// The writer has stopped (shutdown): nothing more comes in memory.
    memory_closed: bool,
    store: Store,
    writer: BucketWriter,
    journal: String,
    /// How long hits are gathered at light load, and the most in a batch.
    window: Duration,
    max_hits: usize,
    max_buckets: usize,
    /// The buckets a batch may touch now: `max_buckets`, halved after a
    /// batch the database could not take (too slow for the attempt's time
    /// limit, or too large for its cache), grown back by a quarter after
    /// each batch that went in.
    bound: usize,
    /// The lane's position in the database: everything before it is applied.
    applied: u64,
    stats: Arc<IngestStats>,
    journal_stats: Arc<JournalStats>,
    /// Knows the sites marked deleted, whose hits are not applied.
    directory: SiteDirectory,
    /// Held by a rollups applier while its transaction runs (see
    /// [`Appliers::start`]).
    rollups_turn: Arc<tokio::sync::Mutex<()>>,
    /// Held by a visits applier while its transaction runs: the visits
    /// of a site and day sit in every lane, so two lanes' batches add to
    /// the same day counter (`visit_days`) and would conflict.
    visits_turn: Arc<tokio::sync::Mutex<()>>,
    /// Whether the visits stream writes the visit store.
    visit_store: bool,
}

struct Batch {
    /// The views or rollups applier's hits, merged per bucket as they are
    /// read, so a large batch holds only the buckets it touches.
    levels: Vec<Increments>,
    /// The breakdowns applier's hits, merged the same way.
    sources: BreakdownCounts,
    /// The visits applier's hits, merged per visit.
    visits: VisitWrites,
    /// Journaled hits in the batch (with or without a source).
    hits: usize,
    /// The times of its oldest and newest hits (their lag).
    first_at: Option<DateTime<Utc>>,
    last_at: Option<DateTime<Utc>>,
    from: u64,
    to: u64,
    from_disk: usize,
}

impl Batch {
    fn new(from: u64, levels: Vec<Increments>) -> Self {
        Self {
            levels,
            sources: BreakdownCounts::default(),
            visits: VisitWrites::default(),
            hits: 0,
            first_at: None,
            last_at: None,
            from,
            to: from,
            from_disk: 0,
        }
    }

    /// The documents the batch writes: its buckets, or its visits. What a
    /// batch the database failed to take is halved by, so a visits batch
    /// too slow for the attempt's time limit (a backlog of long visits on
    /// a busy machine) is gathered again smaller, not retried whole for
    /// ever.
    fn buckets(&self) -> usize {
        self.levels.iter().map(Increments::len).sum::<usize>() + self.visits.len()
    }

    fn is_full(&self, max_hits: usize, max_buckets: usize) -> bool {
        self.hits >= max_hits || self.buckets() >= max_buckets || self.sources.is_full()
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
        // The lanes' rollups take turns. A lane writes the page buckets of
        // its own pages, so lanes never conflict, except that a visit's
        // later hit credits its entry page (non-bounce, duration) and its
        // previous page (the exit it loses), which may be another lane's:
        // two rollups transactions of this process would then write the
        // same bucket and one would abort, all its statements wasted. In
        // turns they never do (other instances' conflicts are retried, as
        // before).
        let rollups_turn = Arc::new(tokio::sync::Mutex::new(()));
        // The visits streams likewise: a site's visits come from every
        // lane, so every lane's batch adds to the same day counters.
        let visits_turn = Arc::new(tokio::sync::Mutex::new(()));
        let max_buckets = |stream| match stream {
            Stream::Visits => config.max_buckets.clamp(1, MAX_VISITS_PER_BATCH),
            _ => config.max_buckets.max(1),
        };
        let applier = |lane: Arc<Lane>, stream, committed| {
            let (window, max_hits) = config.for_stream(stream);
            Applier {
                lane,
                stream,
                committed,
                pending: None,
                memory_closed: stream != Stream::Views,
                store: store.clone(),
                writer: BucketWriter::new(store),
                journal: journal.to_string(),
                window,
                max_hits: max_hits.max(1),
                max_buckets: max_buckets(stream),
                bound: max_buckets(stream),
                applied: 0,
                stats: stats.clone(),
                journal_stats: journal_stats.clone(),
                directory: directory.clone(),
                rollups_turn: rollups_turn.clone(),
                visits_turn: visits_turn.clone(),
                visit_store: config.visit_store,
            }
        };
        let mut handles = Vec::new();
        for feed in feeds {
            // The rollups and sources appliers read only the files: a
            // receiver with no sender, closed from the start.
            for stream in [Stream::Rollups, Stream::Sources, Stream::Visits] {
                let applier = applier(feed.lane.clone(), stream, Handoff::closed());
                handles.push(tokio::spawn(applier.run(shutdown.subscribe())));
            }
            let views = applier(feed.lane, Stream::Views, feed.committed);
            handles.push(tokio::spawn(views.run(shutdown.subscribe())));
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
        // Known from the start, so the sources need not wait for the
        // rollups' first batch (see `wait_for_rollups`), and segments from
        // before a restart that every stream has applied go now, not at
        // the next batch (which a quiet lane may not have for hours).
        self.lane.applied(self.stream.index(), start);
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
            Some(batch) => {
                if self.stream == Stream::Sources {
                    self.wait_for_rollups(batch.to, shutdown).await;
                }
                self.commit(batch, shutdown).await
            }
            None => !(closing || *shutdown.borrow()),
        }
    }

    /// Reports read a period's views from the hour and day buckets and its
    /// sources (and other breakdowns) beside them: breakdowns applied
    /// before the rollups would show more views with a known source than
    /// views for the seconds the rollups trail. So a breakdowns batch waits
    /// until the rollups have applied its hits, at most [`ROLLUPS_WAIT`]:
    /// a rollups stream that cannot go on delays the breakdowns by that
    /// much, never stops them.
    async fn wait_for_rollups(&self, to: u64, shutdown: &mut watch::Receiver<bool>) {
        let until = Instant::now() + ROLLUPS_WAIT;
        let rollups = Stream::Rollups.index();
        while self.lane.applied_by(rollups) < to && Instant::now() < until {
            if *shutdown.borrow() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = shutdown.changed() => {}
            }
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
                other => progress::position(store, journal, lane, other).await,
            };
            match found {
                Ok(Some(position)) => {
                    if self.lane.raise_floor(position) {
                        // Only a journal that lost its mark on a machine whose
                        // clock is behind gets here: its hits since it
                        // opened lie below the database's position.
                        tracing::error!(lane, stream = self.stream.as_str(), position,
                            committed = self.lane.committed(),
                            "the database has applied this journal lane beyond every position it holds; \
                             new hits start after the database's position, hits journaled since start \
                             below it are not applied");
                    }
                    self.count_applied_between(self.lane.oldest(), position);
                    return Some(position);
                }
                Ok(None) => {
                    tracing::debug!(
                        lane,
                        stream = self.stream.as_str(),
                        "waiting for the views applier to record the lane"
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

    /// Records on disk from `from` to `position` are already applied:
    /// count them so the backlog is right (at start, from the oldest on
    /// disk; after the progress moved, from where this applier stood).
    fn count_applied_between(&self, from: u64, position: u64) {
        let mut at = from;
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

    /// A failed round: the views' counts in the flush statistics; every
    /// stream makes the app degraded until its next applied batch.
    fn record_failure(&self) {
        match self.stream {
            Stream::Views => self.stats.record_flush_failure(),
            other => {
                self.stats.failing(other).fetch_add(1, Relaxed);
            }
        }
    }

    /// The counter of records this applier has applied.
    fn applied_records(&self) -> &std::sync::atomic::AtomicU64 {
        self.journal_stats.applied_by(self.stream.index())
    }

    /// Hits the batch may still take before its bounds: each hit adds at
    /// most one visit, and a few buckets of which most are shared.
    fn room(&self, batch: &Batch) -> usize {
        let buckets = self.bound.saturating_sub(batch.buckets());
        let hits = self.max_hits.saturating_sub(batch.hits);
        buckets.min(hits)
    }

    fn peek_memory(&mut self) -> Option<&CommittedBatch> {
        if self.pending.is_none() {
            self.pending = self.committed.try_recv();
        }
        self.pending.as_ref()
    }

    /// Gathers the next batch, starting at the applied position: in memory
    /// when the hand-off continues exactly where we are, from the files
    /// otherwise. It closes once its oldest hit is a window old and nothing
    /// more is waiting, or when it is full. `None` when there is nothing to
    /// apply (or we are closing and caught up).
    async fn gather(&mut self, shutdown: &mut watch::Receiver<bool>) -> Option<Batch> {
        let from = self.applied;
        let part = bucket_writer::part_of(Some(&self.advance(from, from)));
        let mut batch = Batch::new(
            from,
            bucket_writer::view_increments(Some(self.stream), part),
        );
        let mut to = from;
        let mut deadline: Option<Instant> = None;
        loop {
            let closing = *shutdown.borrow();
            if batch.is_full(self.max_hits, self.bound) {
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
                    // A group commit goes whole into a batch; one that
                    // would take a batch far past its bounds waits for the
                    // next batch, so a batch holds at most its bounds and
                    // one group commit.
                    let records = self.pending.as_ref().map_or(0, |b| b.records.len());
                    if batch.hits > 0 && records > self.room(&batch) {
                        break;
                    }
                    let b = self.pending.take().expect("peeked");
                    to = b.end;
                    self.take(&mut batch, b.records, &mut deadline);
                    continue;
                }
                _ => {}
            }
            // Committed beyond `to`, but not in memory here: read the files,
            // in chunks merged as they are read, so a large batch is never
            // held as records.
            if self.lane.committed() > to {
                // Read no more than the batch has room for: a stream that
                // is behind reads its batches from the files, and whole
                // chunks took a visits batch of 2,000 visits to 6,000.
                let chunk = self.room(&batch).clamp(MIN_READ, READ_CHUNK);
                match self.lane.read(to, chunk) {
                    Ok(chunk) if chunk.end > to => {
                        batch.from_disk += chunk.records.len();
                        to = chunk.end;
                        if !chunk.records.is_empty() {
                            self.take(&mut batch, chunk.records, &mut deadline);
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
        batch.to = to;
        Some(batch)
    }

    /// Adds journaled hits to the batch, merged per bucket (the sources
    /// leave out those without one). The first hit sets the deadline: a
    /// window after it was made, so a batch that starts behind closes as
    /// soon as nothing more is waiting.
    fn take(&self, batch: &mut Batch, records: Vec<Record>, deadline: &mut Option<Instant>) {
        let Some(first) = records.first() else {
            return;
        };
        if deadline.is_none() {
            *deadline = Some(deadline_after(first.at, self.window));
            // The stream's lag runs from its oldest unapplied hit, while
            // the batch still gathers.
            let ms = millis_since_epoch(first.at);
            let _ = self.lane.unapplied_since_ms[self.stream.index()]
                .compare_exchange(0, ms, Relaxed, Relaxed);
        }
        batch.first_at.get_or_insert(first.at);
        batch.last_at = records.last().map(|r| r.at);
        batch.hits += records.len();
        match self.stream {
            Stream::Views | Stream::Rollups => {
                // An event is not a view: only the breakdowns count it. An
                // engagement adds to its view's page hours and days only
                // (minute buckets hold views).
                for r in records.iter().filter(|r| !r.is_event()) {
                    for inc in &mut batch.levels {
                        match &r.engagement {
                            Some(e) => inc.add_engagement(&r.page, e),
                            None => inc.add_hit(&r.page, r.at, r.visit.as_ref()),
                        }
                    }
                }
            }
            Stream::Sources => {
                for r in &records {
                    batch.sources.add_record(r);
                }
            }
            // Switched off, the stream only moves its progress.
            Stream::Visits if self.visit_store => {
                for r in &records {
                    batch.visits.add_record(r);
                }
            }
            Stream::Visits => {}
        }
    }

    /// Takes the buckets of the refused statements (`buckets`, their
    /// filters, on `collection`) out of `batch`, logs and counts them.
    /// Whether any was taken out (the batch changed, and is worth sending
    /// again at once).
    fn set_aside(
        &self,
        batch: &mut Batch,
        collection: &str,
        buckets: &[bson::Document],
        error: &crate::storage::update::ReplyError,
    ) -> bool {
        let mut taken = Vec::new();
        for q in buckets {
            let found = match self.stream {
                Stream::Views | Stream::Rollups => batch
                    .levels
                    .iter_mut()
                    .filter(|inc| inc.collection() == collection)
                    .find_map(|inc| inc.set_aside(q)),
                Stream::Sources => batch.sources.set_aside(collection, q),
                Stream::Visits => batch.visits.set_aside(collection, q),
            };
            taken.extend(found);
        }
        let index = self.stream.index();
        for bucket in &taken {
            // The bucket's key (a page or a site's domain) and start only:
            // never what the hits in it say of their visitors.
            tracing::error!(
                lane = self.lane.index,
                stream = self.stream.as_str(),
                collection,
                bucket = %bucket.key,
                start = %bucket.start,
                views = bucket.views,
                error = %crate::telemetry::chain(error),
                "the database refuses this bucket's statement for what the bucket holds \
                 (edited by hand, or an old import's figures): its hits of this batch are \
                 set aside, the rest of the batch and the lane go on"
            );
            self.stats.set_aside_statements[index].fetch_add(1, Relaxed);
            let hits = u64::try_from(bucket.views).unwrap_or(0);
            self.stats.set_aside_hits[index].fetch_add(hits, Relaxed);
        }
        !taken.is_empty()
    }

    fn advance(&self, from: u64, to: u64) -> Advance<'_> {
        Advance {
            journal: &self.journal,
            lane: self.lane.index,
            stream: self.stream,
            from,
            to,
        }
    }

    /// Applies a batch, retrying until it is in. Returns false when
    /// shutting down gave up on it (it stays in the journal).
    #[tracing::instrument(name = "flush", level = "debug", skip_all, fields(lane = self.lane.index, stream = self.stream.as_str(), hits = batch.hits, from = batch.from, to = batch.to))]
    async fn commit(&mut self, mut batch: Batch, shutdown: &mut watch::Receiver<bool>) -> bool {
        let views = self.stream == Stream::Views;
        let mut backoff = Duration::from_millis(50);
        let mut attempts = 0u32;
        loop {
            let started = Instant::now();
            let advance = self.advance(batch.from, batch.to);
            // A deleted site's hits accepted before its deletion are
            // skipped, so they do not re-create its buckets; the progress
            // still advances past them.
            let directory = &self.directory;
            let result = match self.stream {
                Stream::Views | Stream::Rollups => {
                    for inc in &mut batch.levels {
                        inc.drop_where(|page| directory.is_deleted_page(page));
                    }
                    let _turn = match self.stream {
                        Stream::Rollups => Some(self.rollups_turn.lock().await),
                        _ => None,
                    };
                    self.writer
                        .apply_merged(&batch.levels, batch.hits, &advance)
                        .await
                }
                Stream::Sources => {
                    let counts = batch
                        .sources
                        .iter()
                        .filter(|(page, ..)| !directory.is_deleted_page(page));
                    self.writer
                        .apply_breakdowns(counts, batch.hits, &advance)
                        .await
                }
                Stream::Visits => {
                    batch
                        .visits
                        .drop_sites(|site| directory.is_deleted_page(&format!("{site}/")));
                    // The statements are made once the turn is ours, so
                    // a lane waiting for it holds only its batch.
                    let _turn = self.visits_turn.lock().await;
                    self.writer
                        .apply_visits(&batch.visits, batch.hits, &advance)
                        .await
                }
            };
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            if let Ok(report) = &result {
                let statements = u64::try_from(report.statements()).unwrap_or(u64::MAX);
                self.stats
                    .record_statements(self.stream.index(), statements, micros);
            }
            // The flush statistics (latency, sizes) are the views'.
            let error = match result {
                Ok(report) => {
                    if views {
                        self.stats.record_flush(report.hits, micros);
                    } else {
                        self.stats.failing(self.stream).store(0, Relaxed);
                    }
                    break;
                }
                Err(ApplyError::Refused {
                    collection,
                    buckets,
                    source,
                }) => {
                    // Nothing of the batch is in (the refusal aborted the
                    // transaction): without these buckets it can go in.
                    if self.set_aside(&mut batch, &collection, &buckets, &source) {
                        continue;
                    }
                    // None of them is this batch's (cannot happen: they
                    // are its statements); retried as any failure.
                    ApplyError::Refused {
                        collection,
                        buckets,
                        source,
                    }
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
                        self.stats.failing(self.stream).store(0, Relaxed);
                    }
                    break;
                }
                Some(Some(p)) if p == batch.from => {
                    // Not in. A batch the database failed to take (not a
                    // conflict) is gathered again, smaller: retried as it
                    // is, a batch too slow for the time limit or too large
                    // for the server's cache would fail for ever. Nothing
                    // of it committed, so its hits are simply read again.
                    let buckets = batch.buckets();
                    if !transient && buckets > MIN_BOUND {
                        self.bound = (buckets / 2).max(MIN_BOUND);
                        tracing::warn!(lane = self.lane.index, stream = self.stream.as_str(),
                            buckets, bound = self.bound,
                            "batch not taken by the database; gathering it again in smaller batches");
                        return true;
                    }
                }
                // Unknown: the database did not answer in time. Gathered
                // again smaller too: a batch an overloaded database cannot
                // finish within the time limit would otherwise be sent whole
                // for ever (eight such streams kept a fresh demo from ever
                // applying). Safe: the smaller batch moves the progress
                // only from `from`, so if this one commits after all, the
                // smaller one is refused and the progress read then says so.
                None if !transient && batch.buckets() > MIN_BOUND => {
                    self.bound = (batch.buckets() / 2).max(MIN_BOUND);
                    tracing::warn!(
                        lane = self.lane.index,
                        stream = self.stream.as_str(),
                        buckets = batch.buckets(),
                        bound = self.bound,
                        "batch outcome unknown; gathering it again in smaller batches"
                    );
                    return true;
                }
                Some(found) => {
                    tracing::error!(lane = self.lane.index, expected = batch.from, ?found,
                        "the journal progress moved elsewhere (a batch whose outcome was unknown committed after all, \
                         another process on a copy of this journal, or a restored database); \
                         continuing from the database's position");
                    if let Some(p) = found {
                        if p > batch.from {
                            self.count_applied_between(batch.from, p);
                            self.lane.applied(self.stream.index(), p);
                        }
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
        self.bound = (self.bound + self.bound / 4 + 1).min(self.max_buckets);
        let n = batch.hits as u64;
        self.applied_records().fetch_add(n, Relaxed);
        let caught_up = self.lane.committed() <= batch.to;
        let next_oldest = match batch.last_at {
            Some(last) if !caught_up => millis_since_epoch(last),
            _ => 0,
        };
        self.lane.unapplied_since_ms[self.stream.index()].store(next_oldest, Relaxed);
        if views {
            self.journal_stats
                .replayed_records
                .fetch_add(batch.from_disk as u64, Relaxed);
            self.stats.applied_hits.fetch_add(n, Relaxed);
            if let Some(first) = batch.first_at {
                let lag = (Utc::now() - first).num_milliseconds().max(0) as f64 / 1000.0;
                self.stats.record_freshness(n, lag);
            }
        }
        self.lane.applied(self.stream.index(), batch.to);
        true
    }
}

/// The longest a breakdowns batch waits for the rollups to apply its hits
/// (see `Applier::wait_for_rollups`): a few rollups windows.
const ROLLUPS_WAIT: Duration = Duration::from_secs(20);

/// When a batch whose oldest hit was made `at` closes: a window later, but
/// never later than a window from now (a clock ahead) and at once for hits
/// already a window old (a backlog).
fn deadline_after(at: DateTime<Utc>, window: Duration) -> Instant {
    let age = (Utc::now() - at).to_std().unwrap_or(Duration::ZERO);
    let now = Instant::now();
    now.checked_add(window.saturating_sub(age)).unwrap_or(now)
}

/// A hit's time as the lag gauges keep it: milliseconds since 1970, at
/// least 1 (0 means "nothing waiting").
fn millis_since_epoch(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_millis()).unwrap_or(0).max(1)
}

//! The group-commit writer: one OS thread per lane. It takes every hit that
//! has arrived, appends them in one write, syncs once (`fdatasync`), and
//! only then answers them. Under load a sync covers many hits; at low load a
//! hit waits for one sync (~0.3 ms on a local SSD).

use std::fs::File;
use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

use super::lane::{Lane, SegmentInfo};
use super::record::Record;
use super::segment::{self, SegmentHeader, FORMAT, HEADER_LEN};

/// Most hits one group commit takes, so answers flow even under a flood.
const MAX_GROUP: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error("the journal is at its disk budget")]
    Full,
    #[error("the journal could not be written or synced")]
    Io,
}

pub type Ack = oneshot::Sender<Result<(), AppendError>>;

pub struct Submission {
    pub record: Record,
    /// Answered after the sync (`durable`); `None` in `fast` mode.
    pub ack: Option<Ack>,
}

// Nearly every message is a hit: boxing it to shrink the rare others
// would cost each hit one more allocation on the pixel's path.
#[allow(clippy::large_enum_variant)]
pub enum Message {
    Hit(Submission),
    /// Close the segment being appended to if it is older than the
    /// journal's `segment_max_age`.
    Seal,
    /// Commit what came before, then stop.
    Stop,
}

/// Records that are committed, handed to the lane's applier in memory so
/// that normal running never reads the segment files back.
#[derive(Debug)]
pub struct CommittedBatch {
    pub start: u64,
    pub end: u64,
    pub records: Vec<Record>,
}

/// Bytes of committed records (as journaled) a lane's hand-off holds at
/// most. The count of group commits alone did not bound it: a group commit
/// takes up to [`MAX_GROUP`] hits. Past it, a lane's applier is behind and
/// reads the files instead, which costs a read, never a hit.
pub const HANDOFF_BYTES: u64 = 16 << 20;

/// The lane writer's end of the hand-off: it sends a group commit only
/// while the hand-off holds under [`HANDOFF_BYTES`].
pub(super) struct HandoffSender {
    tx: mpsc::Sender<CommittedBatch>,
    held: Arc<AtomicU64>,
}

/// The applier's end of the hand-off; what it takes no longer counts
/// against the bound.
pub struct Handoff {
    rx: mpsc::Receiver<CommittedBatch>,
    held: Arc<AtomicU64>,
}

/// A lane's hand-off of committed records, from its writer to its views
/// applier: at most `batches` group commits and [`HANDOFF_BYTES`].
pub(super) fn handoff(batches: usize) -> (HandoffSender, Handoff) {
    let (tx, rx) = mpsc::channel(batches);
    let held = Arc::new(AtomicU64::new(0));
    (
        HandoffSender {
            tx,
            held: held.clone(),
        },
        Handoff { rx, held },
    )
}

impl HandoffSender {
    /// Hands `batch` on unless that would pass the bounds (the applier
    /// then reads it from the files).
    pub(super) fn offer(&self, batch: CommittedBatch) {
        let bytes = batch.end - batch.start;
        let reserved = self.held.fetch_update(Relaxed, Relaxed, |held| {
            (held + bytes <= HANDOFF_BYTES).then_some(held + bytes)
        });
        if reserved.is_ok() && self.tx.try_send(batch).is_err() {
            self.held.fetch_sub(bytes, Relaxed);
        }
    }
}

impl Handoff {
    /// A hand-off with no writer, closed from the start: for an applier
    /// that reads only the files.
    pub fn closed() -> Self {
        handoff(1).1
    }

    fn taken(&self, batch: Option<CommittedBatch>) -> Option<CommittedBatch> {
        if let Some(b) = &batch {
            self.held.fetch_sub(b.end - b.start, Relaxed);
        }
        batch
    }

    /// The next group commit, if one is waiting.
    pub fn try_recv(&mut self) -> Option<CommittedBatch> {
        let batch = self.rx.try_recv().ok();
        self.taken(batch)
    }

    /// Waits for the next group commit; `None` once the writer stopped.
    pub async fn recv(&mut self) -> Option<CommittedBatch> {
        let batch = self.rx.recv().await;
        self.taken(batch)
    }

    /// Bytes of records waiting in the hand-off.
    pub fn held_bytes(&self) -> u64 {
        self.held.load(Relaxed)
    }
}

pub(super) struct LaneWriter {
    pub lane: Arc<Lane>,
    pub journal: uuid::Uuid,
    pub segment_max: u64,
    /// A segment is appended to for at most this long. Applied hits are
    /// deleted with their segment, and the segment being appended to is
    /// never deleted, so without this bound a quiet lane would keep its
    /// applied hits (visitor ids, pages, the visits' steps) on disk until
    /// 16 MiB more came or the process restarted.
    pub segment_max_age: Duration,
    pub rx: mpsc::Receiver<Message>,
    pub committed_tx: HandoffSender,
    /// Bytes of the hits waiting in every lane's queue (see
    /// `Appender::submit`).
    pub queued: Arc<AtomicU64>,
    /// The segment being appended to: its file, start and committed length.
    pub current: Option<(File, u64, u64)>,
}

impl LaneWriter {
    pub fn run(mut self) {
        let mut group = Vec::with_capacity(256);
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut stop = false;
        while !stop {
            match self.rx.blocking_recv() {
                Some(Message::Hit(s)) => self.take(&mut group, s),
                Some(Message::Seal) => self.seal_if_old(),
                Some(Message::Stop) | None => stop = true,
            }
            while group.len() < MAX_GROUP {
                match self.rx.try_recv() {
                    Ok(Message::Hit(s)) => self.take(&mut group, s),
                    Ok(Message::Seal) => self.seal_if_old(),
                    Ok(Message::Stop) => stop = true,
                    Err(_) => break,
                }
            }
            if !group.is_empty() {
                // A panic here (a bug) must not take the lane down with it:
                // the hits of this group lose their answers (503), the
                // segment in progress is abandoned, and the lane goes on.
                let committed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.commit(&mut group, &mut buf)
                }));
                if committed.is_err() {
                    self.lane.stats.writer_panics.fetch_add(1, Relaxed);
                    tracing::error!(
                        lane = self.lane.index,
                        "journal writer panicked; its group was answered 503 and the lane goes on"
                    );
                    group.clear();
                    if self.current.take().is_some_and(|(_, _, len)| len == 0) {
                        // Its name is where the next segment starts.
                        self.lane.drop_empty_newest();
                    }
                }
            }
        }
        tracing::debug!(lane = self.lane.index, "journal writer stopped");
    }

    /// Moves a hit from the queue into the group being committed: the
    /// group has its own bound ([`MAX_GROUP`]).
    fn take(&self, group: &mut Vec<Submission>, submission: Submission) {
        self.queued
            .fetch_sub(submission.record.encoded_len() as u64, Relaxed);
        group.push(submission);
    }

    fn commit(&mut self, group: &mut Vec<Submission>, buf: &mut Vec<u8>) {
        let stats = self.lane.stats.clone();
        buf.clear();
        let mut records = Vec::with_capacity(group.len());
        let mut acks = Vec::with_capacity(group.len());
        // Each record's bytes were reserved against the budget when it was
        // submitted (`Appender::submit`), so nothing is refused here.
        for Submission { record, ack } in group.drain(..) {
            record.encode_into(buf);
            records.push(record);
            acks.push(ack);
        }
        if records.is_empty() {
            return;
        }
        let started = Instant::now();
        let result = self.append(buf);
        let answer = match result {
            Ok((start, end)) => {
                stats.sync_seconds.observe(started.elapsed().as_secs_f64());
                stats.commit_sizes.observe(records.len() as f64);
                stats.group_commits.fetch_add(1, Relaxed);
                stats
                    .committed_records
                    .fetch_add(records.len() as u64, Relaxed);
                // A full hand-off only means the applier is behind; it reads
                // these records back from the segment file instead.
                self.committed_tx.offer(CommittedBatch {
                    start,
                    end,
                    records,
                });
                Ok(())
            }
            Err(e) => {
                stats.sync_failures.fetch_add(1, Relaxed);
                let unanswerable = acks.iter().filter(|a| a.is_none()).count();
                stats.fast_hits_lost.fetch_add(unanswerable as u64, Relaxed);
                self.lane.release_reserved(buf.len() as u64);
                tracing::error!(lane = self.lane.index, error = %e, hits = acks.len(),
                    "journal append failed; these hits are answered 503");
                Err(AppendError::Io)
            }
        };
        for ack in acks.into_iter().flatten() {
            let _ = ack.send(answer);
        }
    }

    /// Whether the current segment holds records and was started more
    /// than `segment_max_age` ago.
    fn current_is_old(&self) -> bool {
        match (&self.current, self.lane.active_since()) {
            (Some((_, _, len)), Some(since)) => *len > 0 && since.elapsed() >= self.segment_max_age,
            _ => false,
        }
    }

    /// Closes the current segment if it is old: the next hit starts a new
    /// one, and the closed one is deleted as soon as every applier is past
    /// it (now, if they are).
    fn seal_if_old(&mut self) {
        if self.current_is_old() {
            self.current = None;
            self.lane.seal_active();
        }
    }

    /// Appends `bytes` to the current segment (starting a new one when it
    /// is full or old) and syncs. Returns the positions the bytes occupy.
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<(u64, u64)> {
        if self.current_is_old() || (self.current.is_some() && self.lane.below_floor()) {
            self.current = None;
            self.lane.seal_active();
        }
        let roll = match &self.current {
            None => true,
            Some((_, _, len)) => *len > 0 && len + bytes.len() as u64 > self.segment_max,
        };
        if roll {
            let start = self.lane.next_start();
            let header = SegmentHeader {
                format: FORMAT,
                lane: self.lane.index,
                start,
                journal: self.journal,
            };
            let (file, path) = segment::create(&self.lane.dir, &header)?;
            self.lane.used.fetch_add(HEADER_LEN, Relaxed);
            self.lane.push_segment(SegmentInfo {
                start,
                format: FORMAT,
                path,
                len: 0,
                corrupt: None,
                active: true,
                started: Some(Instant::now()),
            });
            self.current = Some((file, start, 0));
        }
        let (file, start, len) = self.current.as_mut().expect("a current segment");
        let written = file.write_all(bytes).and_then(|()| file.sync_data());
        if let Err(e) = written {
            // Whatever part reached the file was not acknowledged: cut it
            // off, and start a fresh segment for the next append, so that a
            // replay never counts a hit that was answered 503.
            let _ = file.set_len(HEADER_LEN + *len);
            let _ = file.sync_all();
            if *len == 0 {
                // Its name is the position the next segment will start at.
                self.lane.drop_empty_newest();
            }
            self.current = None;
            return Err(e);
        }
        let from = *start + *len;
        *len += bytes.len() as u64;
        self.lane.committed_to(*len);
        Ok((from, from + bytes.len() as u64))
    }
}

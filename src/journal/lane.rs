//! One lane of the journal: its segment files, shared between the lane's
//! writer thread (which appends and syncs) and its applier (which reads
//! what is committed and deletes what is applied).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::mark;
use super::record::Record;
use super::segment::{self, ReadError, HEADER_LEN};
use super::stats::JournalStats;

#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub start: u64,
    /// Its record format (from its header): older segments are replayed
    /// in the format they were written in.
    pub format: u32,
    pub path: PathBuf,
    /// Bytes of committed (synced) records after the header.
    pub len: u64,
    /// Replay stops at `len` in this segment and continues with the next;
    /// the file is moved to `quarantine/` once everything before it is
    /// applied.
    pub corrupt: Option<String>,
    /// The segment the writer appends to (only ever one created by this
    /// process; segments found at start are never appended to).
    pub active: bool,
    /// When this process created it (none for segments found at start).
    pub started: Option<std::time::Instant>,
}

impl SegmentInfo {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// How many appliers read each lane (one per `storage::progress::Stream`).
pub const APPLIERS: usize = 4;

#[derive(Debug)]
pub struct Lane {
    pub index: u32,
    pub dir: PathBuf,
    quarantine: PathBuf,
    segments: Mutex<Vec<SegmentInfo>>,
    /// The position after the last committed record.
    committed: AtomicU64,
    /// Where the next segment may start at the lowest: raised by an
    /// applier that finds the database ahead of this lane (see
    /// [`Lane::raise_floor`]).
    floor: AtomicU64,
    /// The lane's high-water mark file and the value last written to it
    /// (see `mark`); held while segments are deleted, so two appliers
    /// releasing at once write it in order.
    mark_path: PathBuf,
    mark: Mutex<u64>,
    /// A lane that lost its place started this life at a time floor (see
    /// `mark::time_floor`): the positions below it that it does not hold
    /// are a gap, not lost records.
    gap_below: u64,
    /// Per applier, the time (ms since the epoch) of the oldest hit it has
    /// not applied yet; 0 when it is caught up. Set by each applier: the
    /// lag of its stream.
    pub unapplied_since_ms: [AtomicU64; APPLIERS],
    /// Where each of the lane's appliers stands (views, sources, rollups:
    /// see `storage::progress::Stream`); a segment is deleted only when all
    /// are past it.
    applied: [AtomicU64; APPLIERS],
    /// Total bytes of this journal's files, shared by all lanes.
    pub(super) used: Arc<AtomicU64>,
    pub(super) stats: Arc<JournalStats>,
}

/// Records read from the segment files, and the position after them.
#[derive(Debug)]
pub struct Chunk {
    pub records: Vec<Record>,
    pub end: u64,
}

impl Lane {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        index: u32,
        dir: PathBuf,
        quarantine: PathBuf,
        segments: Vec<SegmentInfo>,
        committed: u64,
        marked: (PathBuf, u64),
        gap_below: u64,
        used: Arc<AtomicU64>,
        stats: Arc<JournalStats>,
    ) -> Self {
        Self {
            index,
            dir,
            quarantine,
            segments: Mutex::new(segments),
            committed: AtomicU64::new(committed),
            floor: AtomicU64::new(committed),
            mark_path: marked.0,
            mark: Mutex::new(marked.1),
            gap_below,
            unapplied_since_ms: Default::default(),
            applied: Default::default(),
            used,
            stats,
        }
    }

    pub fn committed(&self) -> u64 {
        self.committed.load(Relaxed)
    }

    /// The database records this lane applied up to `position`, beyond
    /// anything the lane holds: its positions went back (a journal whose
    /// mark was lost, on a machine whose clock is behind the one that
    /// wrote before). New segments start at `position` from now on, so no
    /// later hit is taken for applied; returns whether it had to.
    pub fn raise_floor(&self, position: u64) -> bool {
        self.floor.fetch_max(position, Relaxed) < position && position > self.committed()
    }

    /// Where the writer's next segment starts.
    pub(super) fn next_start(&self) -> u64 {
        self.committed().max(self.floor.load(Relaxed))
    }

    /// Whether the segment being appended to lies below the floor and must
    /// be closed first.
    pub(super) fn below_floor(&self) -> bool {
        self.floor.load(Relaxed) > self.committed()
    }

    /// The oldest position still on disk: where replay must start when the
    /// database has no record of this lane.
    pub fn oldest(&self) -> u64 {
        self.lock().first().map_or(self.committed(), |s| s.start)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SegmentInfo>> {
        self.segments.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn push_segment(&self, info: SegmentInfo) {
        let mut segments = self.lock();
        for s in segments.iter_mut() {
            s.active = false;
        }
        segments.push(info);
    }

    /// When the segment being appended to was started.
    pub(super) fn active_since(&self) -> Option<std::time::Instant> {
        self.lock()
            .iter()
            .rev()
            .find(|s| s.active)
            .and_then(|s| s.started)
    }

    /// The writer closed the segment it appended to: delete it too once
    /// every applier is past it (at once, if they already are).
    pub(super) fn seal_active(&self) {
        for s in self.lock().iter_mut() {
            s.active = false;
        }
        let all = self.applied.iter().map(|a| a.load(Relaxed)).min();
        self.release(all.unwrap_or(0));
    }

    pub(super) fn release_reserved(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(bytes)));
    }

    /// Removes the newest segment if it holds no record (after a failed
    /// first append), so a new one can take its start position.
    pub(super) fn drop_empty_newest(&self) {
        let mut segments = self.lock();
        if segments.last().is_some_and(|s| s.len == 0) {
            let s = segments.pop().expect("a last segment");
            if std::fs::remove_file(&s.path).is_ok() {
                self.release_reserved(HEADER_LEN);
            }
        }
    }

    /// Called by the writer after a sync: the newest segment now holds
    /// `len` committed bytes.
    pub(super) fn committed_to(&self, len: u64) {
        let mut segments = self.lock();
        if let Some(last) = segments.last_mut() {
            last.len = len;
            self.committed.store(last.end(), Relaxed);
        }
    }

    /// Reads up to `max` committed records from `from`. A position at the
    /// end of a segment (or at the damage in a corrupt one) continues at the
    /// next segment's start.
    pub fn read(&self, from: u64, max: usize) -> Result<Chunk, LaneReadError> {
        let segment = {
            let segments = self.lock();
            let Some(i) = segments.iter().rposition(|s| s.start <= from) else {
                if from < self.gap_below {
                    // Below this life's time floor: no record was ever
                    // written here by this journal's current numbering.
                    let next = segments.first().map_or(self.committed(), |s| s.start);
                    return Ok(Chunk {
                        records: vec![],
                        end: next.max(from),
                    });
                }
                // Everything before the oldest segment has been applied and
                // deleted: start there.
                return match segments.first() {
                    Some(first) => Err(LaneReadError::Missing {
                        position: from,
                        oldest: first.start,
                    }),
                    None => Ok(Chunk {
                        records: vec![],
                        end: from,
                    }),
                };
            };
            let s = &segments[i];
            if from >= s.end() {
                // At this segment's end (or at the damage in a corrupt one):
                // move on to where the next records start.
                let next = segments.get(i + 1).map_or(self.committed(), |n| n.start);
                return Ok(Chunk {
                    records: vec![],
                    end: from.max(next),
                });
            }
            s.clone()
        };
        let mut records = Vec::new();
        let end = segment::read(
            &segment.path,
            segment.format,
            from - segment.start,
            segment.len,
            max,
            &mut records,
        )
        .map_err(|e| LaneReadError::Segment {
            path: segment.path.clone(),
            source: e,
        })?;
        Ok(Chunk {
            records,
            end: segment.start + end,
        })
    }

    /// Where applier `applier` (0 views, 1 sources, 2 rollups) stands:
    /// everything before it is in the database (0 until it has said).
    pub fn applied_by(&self, applier: usize) -> u64 {
        self.applied[applier].load(Relaxed)
    }

    /// Applier `applier` (0 views, 1 sources, 2 rollups) has everything
    /// before `position` in the database: release what all of them have.
    pub fn applied(&self, applier: usize, position: u64) {
        self.applied[applier].store(position, Relaxed);
        let all = self.applied.iter().map(|a| a.load(Relaxed)).min();
        self.release(all.unwrap_or(0));
    }

    /// Everything before `applied` is in the database: delete the segments
    /// that lie wholly before it (never the one the writer appends to), and
    /// move corrupt ones aside.
    ///
    /// The lane's mark is moved past them first (and synced), so that the
    /// position after them survives their files.
    pub fn release(&self, applied: u64) {
        let mut marked = self.mark.lock().unwrap_or_else(|p| p.into_inner());
        let done: Vec<SegmentInfo> = {
            let mut segments = self.lock();
            let keep_from = segments
                .iter()
                .position(|s| s.end() > applied || s.active)
                .unwrap_or(segments.len());
            let Some(end) = keep_from.checked_sub(1).map(|last| segments[last].end()) else {
                return;
            };
            if end > *marked {
                if let Err(e) = mark::write(&self.mark_path, end) {
                    // Kept on disk: deleting them would let the lane forget
                    // where it stands.
                    tracing::error!(path = %self.mark_path.display(), error = %e,
                        "could not write the journal lane's mark; applied segments are kept until it can");
                    return;
                }
                *marked = end;
            }
            segments.drain(..keep_from).collect()
        };
        drop(marked);
        for s in done {
            let size = HEADER_LEN + s.len;
            let result = match &s.corrupt {
                Some(_) => move_aside(&s.path, s.len, &self.quarantine),
                None => std::fs::remove_file(&s.path),
            };
            match result {
                Ok(()) => {
                    self.release_reserved(size);
                    self.stats.segments_deleted.fetch_add(1, Relaxed);
                }
                Err(e) => tracing::error!(
                    path = %s.path.display(), error = %e,
                    "could not remove an applied journal segment"
                ),
            }
        }
    }
}

/// Sets a damaged segment aside for an operator, once the records before
/// the damage (its first `valid_len` bytes after the header) are applied:
/// only its header and the bytes from the damage on are kept. The applied
/// records are not, since a segment kept for ever would keep its visitors'
/// steps (the privacy promise: nothing applied stays on disk).
pub(super) fn move_aside(path: &Path, valid_len: u64, quarantine: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(quarantine)?;
    let name = path.file_name().unwrap_or_default();
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = quarantine.join(format!("{parent}-{}", name.to_string_lossy()));
    let bytes = std::fs::read(path)?;
    let header = bytes.len().min(HEADER_LEN as usize);
    let damage = usize::try_from(HEADER_LEN.saturating_add(valid_len))
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let mut kept = Vec::with_capacity(header + bytes.len() - damage);
    kept.extend_from_slice(&bytes[..header]);
    kept.extend_from_slice(&bytes[damage..]);
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&target)?;
        file.write_all(&kept)?;
        file.sync_all()?;
    }
    std::fs::remove_file(path)?;
    tracing::error!(
        from = %path.display(), to = %target.display(),
        "a journal segment with a damaged record was moved aside after replaying what preceded the damage \
         (its applied records dropped, the damaged bytes kept)"
    );
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum LaneReadError {
    #[error("position {position} is before the oldest journal segment ({oldest}): those records are gone")]
    Missing { position: u64, oldest: u64 },
    #[error("reading {}", path.display())]
    Segment {
        path: PathBuf,
        #[source]
        source: ReadError,
    },
}

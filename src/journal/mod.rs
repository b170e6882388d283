//! The local write-ahead journal: a hit is acknowledged once it is on local
//! disk, and written behind to MongoDB by the appliers (`ingest::applier`).
//!
//! ```text
//! <dir>/LOCK              flock'd by the one process using the journal
//! <dir>/journal.meta      format, journal id, lane count
//! <dir>/lane-<n>/<start>.seg   segment files (see `segment`)
//! <dir>/lane-<n>.mark     the position after the lane's last record (see `mark`)
//! <dir>/quarantine/       segments with a damaged record, kept aside
//! ```
//!
//! Pages are spread over lanes by a stable hash; each lane has its own
//! segment files, group-commit writer thread and applier, and its own
//! progress document in MongoDB (`journal_progress`, `_id: "<id>/<lane>"`).
//! Why our own code rather than a crate: the applied position lives in
//! MongoDB, in the same transaction as the buckets, so the journal must
//! expose byte positions that replay can seek to, delete segments only when
//! told, and treat a damaged record as something to keep and report rather
//! than repair; `okaywal` (checkpoints by entry id, its own recovery) and
//! `commitlog` (unmaintained) fit neither, and the codec here is ~100 lines
//! with property tests.

pub mod lane;
pub mod mark;
pub mod record;
pub mod segment;
pub mod stats;
pub mod writer;

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

pub use lane::Lane;
pub use record::{Engagement, Record, Visit, VisitPlace, MAX_ENGAGED_MS};
pub use stats::JournalStats;
pub use writer::{AppendError, CommittedBatch, Handoff, HANDOFF_BYTES};

use segment::{Damage, SegmentHeader, FORMAT, HEADER_LEN};
use writer::{LaneWriter, Message, Submission};

const META: &str = "journal.meta";
const LOCK: &str = "LOCK";

/// When the pixel answers a counted hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// After the hit is synced (`fdatasync`) to the local journal.
    Durable,
    /// As soon as the hit is queued for the journal (a crash of the app
    /// loses the hits of the last few milliseconds).
    Fast,
}

#[derive(Debug, Clone)]
pub struct JournalConfig {
    pub dir: PathBuf,
    /// Lanes of a new journal; an existing journal keeps the count it was
    /// created with.
    pub lanes: u32,
    pub segment_bytes: u64,
    /// Most time a segment is appended to: an older one is closed, so that
    /// it is deleted once applied (see [`LaneWriter`]'s sealing).
    pub segment_max_age: std::time::Duration,
    pub budget_bytes: u64,
    /// Hits that may wait for a lane's writer, over all lanes.
    pub queue_capacity: usize,
    /// Bytes (as journaled) those hits may take, over all lanes.
    pub queue_bytes: u64,
    pub ack_mode: AckMode,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "the journal {} is in use by another process{holder}; \
         each tickertape process needs its own TICKERTAPE_JOURNAL_DIR",
        dir.display()
    )]
    Locked { dir: PathBuf, holder: String },
    #[error(
        "the journal {} has format {found} and still holds records; this version reads format {FORMAT}. \
         Start the version that wrote it once so it applies them (it deletes applied segments), \
         or move the directory aside",
        dir.display()
    )]
    OtherFormat { dir: PathBuf, found: u32 },
    #[error("the journal {} has an unreadable {META}: {detail}", dir.display())]
    BadMeta { dir: PathBuf, detail: String },
    #[error("journal I/O on {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> OpenError + '_ {
    move |source| OpenError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The open journal. Dropping it releases the directory lock.
pub struct Journal {
    id: uuid::Uuid,
    dir: PathBuf,
    lanes: Vec<Arc<Lane>>,
    stats: Arc<JournalStats>,
    appender: Appender,
    used: Arc<AtomicU64>,
    budget: u64,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    _lock: File,
}

/// What a lane's applier consumes: the lane's files and the in-memory
/// hand-off of freshly committed records.
pub struct LaneFeed {
    pub lane: Arc<Lane>,
    pub committed: Handoff,
}

impl Journal {
    /// Locks the directory, checks every segment (cutting a torn tail,
    /// setting damaged segments aside for reporting) and starts the lanes'
    /// writer threads.
    pub fn open(config: &JournalConfig) -> Result<(Self, Vec<LaneFeed>), OpenError> {
        let dir = config.dir.clone();
        std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
        let lock = lock_dir(&dir)?;
        let (meta, created) = Meta::load_or_create(&dir, config.lanes)?;
        if meta.lanes != config.lanes {
            tracing::warn!(
                configured = config.lanes,
                journal = meta.lanes,
                "the journal keeps the lane count it was created with"
            );
        }
        let stats = Arc::new(JournalStats::default());
        let used = Arc::new(AtomicU64::new(0));
        let quarantine = dir.join("quarantine");
        let mut lanes = Vec::new();
        let mut feeds = Vec::new();
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        let per_lane = (config.queue_capacity / meta.lanes as usize).max(1);
        let queued = Arc::new(AtomicU64::new(0));
        for index in 0..meta.lanes {
            let lane_dir = dir.join(format!("lane-{index}"));
            std::fs::create_dir_all(&lane_dir).map_err(io_at(&lane_dir))?;
            let (segments, next) =
                recover_lane(&lane_dir, &quarantine, meta.id, index, &stats, &used)?;
            let (next, marked, gap_below) = resume_lane(&dir, index, next, !created)?;
            let lane = Arc::new(Lane::new(
                index,
                lane_dir,
                quarantine.clone(),
                segments,
                next,
                marked,
                gap_below,
                used.clone(),
                stats.clone(),
            ));
            let (tx, rx) = mpsc::channel(per_lane);
            // Room for a few seconds of group commits; beyond it the
            // applier reads the files instead.
            let (committed_tx, committed_rx) = writer::handoff(1024);
            let writer = LaneWriter {
                lane: lane.clone(),
                journal: meta.id,
                segment_max: config.segment_bytes.max(64 * 1024),
                segment_max_age: config.segment_max_age,
                rx,
                committed_tx,
                queued: queued.clone(),
                current: None,
            };
            let thread = std::thread::Builder::new()
                .name(format!("journal-{index}"))
                .spawn(move || writer.run())
                .map_err(io_at(&dir))?;
            threads.push(thread);
            senders.push(tx);
            feeds.push(LaneFeed {
                lane: lane.clone(),
                committed: committed_rx,
            });
            lanes.push(lane);
        }
        let closed = Arc::new(AtomicBool::new(false));
        spawn_sealer(senders.clone(), closed.clone(), config.segment_max_age)
            .map_err(io_at(&dir))?;
        let appender = Appender {
            lanes: senders.into(),
            ack_mode: config.ack_mode,
            closed,
            used: used.clone(),
            budget: config.budget_bytes,
            stats: stats.clone(),
            lane_capacity: per_lane,
            queued,
            queue_bytes: config.queue_bytes,
        };
        tracing::info!(
            dir = %dir.display(), id = %meta.id, lanes = meta.lanes,
            records_on_disk = stats.committed_records.load(Relaxed),
            bytes = used.load(Relaxed),
            "journal open"
        );
        Ok((
            Self {
                id: meta.id,
                dir,
                lanes,
                stats,
                appender,
                used,
                budget: config.budget_bytes,
                threads: Mutex::new(threads),
                _lock: lock,
            },
            feeds,
        ))
    }

    pub fn id(&self) -> uuid::Uuid {
        self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn appender(&self) -> &Appender {
        &self.appender
    }

    pub fn stats(&self) -> &Arc<JournalStats> {
        &self.stats
    }

    pub fn lanes(&self) -> &[Arc<Lane>] {
        &self.lanes
    }

    /// Bytes of segment files on disk (and reserved by queued hits).
    pub fn bytes(&self) -> u64 {
        self.used.load(Relaxed)
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Age of the oldest hit not yet in the database, in seconds: the
    /// minute buckets' lag.
    pub fn backlog_age_secs(&self, now: chrono::DateTime<chrono::Utc>) -> f64 {
        self.lag_secs(0, now)
    }

    /// How far behind applier `applier` (0 views, 1 sources, 2 rollups, 3 visits) is:
    /// the age of the oldest hit it has not applied, in seconds (0 when it
    /// has nothing left).
    pub fn lag_secs(&self, applier: usize, now: chrono::DateTime<chrono::Utc>) -> f64 {
        let oldest = self
            .lanes
            .iter()
            .map(|l| l.unapplied_since_ms[applier].load(Relaxed))
            .filter(|&ms| ms > 0)
            .min();
        match oldest {
            Some(ms) if self.stats.backlog_of(applier) > 0 => {
                (now.timestamp_millis() - ms as i64).max(0) as f64 / 1000.0
            }
            _ => 0.0,
        }
    }

    /// Refuses new hits, commits every hit already submitted, and stops the
    /// writer threads.
    pub async fn close_writers(&self) {
        self.appender.closed.store(true, Relaxed);
        for lane in self.appender.lanes.iter() {
            let _ = lane.send(Message::Stop).await;
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

/// Submits hits to the lanes' writers; cheap to clone into every handler.
#[derive(Clone)]
pub struct Appender {
    lanes: Arc<[mpsc::Sender<Message>]>,
    ack_mode: AckMode,
    closed: Arc<AtomicBool>,
    used: Arc<AtomicU64>,
    budget: u64,
    stats: Arc<JournalStats>,
    lane_capacity: usize,
    /// Bytes of the hits waiting for the writers, and their bound: the
    /// count alone let 100,000 hits of 4.5 KB hold 450 MB.
    queued: Arc<AtomicU64>,
    queue_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitError {
    /// The writer's queue is full (back-pressure).
    QueueFull,
    /// The journal's disk budget is used up (the database has been away).
    JournalFull,
    Closed,
}

pub enum Accepted {
    /// `fast`: queued for the journal; nothing to wait for.
    Queued,
    /// `durable`: resolves once the hit is synced to the journal.
    Pending(oneshot::Receiver<Result<(), AppendError>>),
}

impl Appender {
    pub fn lane_of(&self, page: &str) -> usize {
        (fnv1a(page.as_bytes()) % self.lanes.len() as u64) as usize
    }

    pub fn submit(&self, record: Record) -> Result<Accepted, SubmitError> {
        if self.closed.load(Relaxed) {
            return Err(SubmitError::Closed);
        }
        // Reserve the record's bytes now, so a hit answered in `fast` mode
        // is never refused later for want of space.
        let bytes = record.encoded_len() as u64;
        let reserved = self.used.fetch_update(Relaxed, Relaxed, |u| {
            (u + bytes <= self.budget).then_some(u + bytes)
        });
        if reserved.is_err() {
            self.stats.full_refusals.fetch_add(1, Relaxed);
            return Err(SubmitError::JournalFull);
        }
        let queued = self.queued.fetch_update(Relaxed, Relaxed, |q| {
            (q + bytes <= self.queue_bytes).then_some(q + bytes)
        });
        let unreserve_disk = || {
            let _ = self
                .used
                .fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(bytes)));
        };
        if queued.is_err() {
            unreserve_disk();
            return Err(SubmitError::QueueFull);
        }
        let lane = &self.lanes[self.lane_of(&record.page)];
        let (ack, accepted) = match self.ack_mode {
            AckMode::Fast => (None, Accepted::Queued),
            AckMode::Durable => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Accepted::Pending(rx))
            }
        };
        match lane.try_send(Message::Hit(Submission { record, ack })) {
            Ok(()) => Ok(accepted),
            Err(e) => {
                self.queued.fetch_sub(bytes, Relaxed);
                unreserve_disk();
                Err(match e {
                    mpsc::error::TrySendError::Full(_) => SubmitError::QueueFull,
                    mpsc::error::TrySendError::Closed(_) => SubmitError::Closed,
                })
            }
        }
    }

    /// Hits waiting for a writer, over all lanes.
    pub fn depth(&self) -> usize {
        self.lanes
            .iter()
            .map(|l| self.lane_capacity.saturating_sub(l.capacity()))
            .sum()
    }

    pub fn capacity(&self) -> usize {
        self.lane_capacity * self.lanes.len()
    }

    /// Bytes (as journaled) of the hits waiting for a writer, over all
    /// lanes.
    pub fn depth_bytes(&self) -> u64 {
        self.queued.load(Relaxed)
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.queue_bytes
    }

    pub fn ack_mode(&self) -> AckMode {
        self.ack_mode
    }

    /// Committed hits the slowest applier has not applied yet.
    pub fn unapplied(&self) -> u64 {
        (0..lane::APPLIERS)
            .map(|a| self.stats.backlog_of(a))
            .max()
            .unwrap_or(0)
    }
}

/// Asks every lane's writer, four times per `max_age`, to close a segment
/// older than that, so that a quiet lane's applied hits do not wait on
/// disk for the next hit (a busy lane's writer closes it on its own at the
/// next append). Stops once the journal is closed. A full queue means the
/// writer is busy and will see the age itself.
fn spawn_sealer(
    lanes: Vec<mpsc::Sender<Message>>,
    closed: Arc<AtomicBool>,
    max_age: std::time::Duration,
) -> std::io::Result<()> {
    let tick = (max_age / 4).max(std::time::Duration::from_millis(100));
    std::thread::Builder::new()
        .name("journal-sealer".into())
        .spawn(move || loop {
            std::thread::sleep(tick);
            if closed.load(Relaxed) {
                return;
            }
            for lane in &lanes {
                if let Err(mpsc::error::TrySendError::Closed(_)) = lane.try_send(Message::Seal) {
                    return;
                }
            }
        })
        .map(drop)
}

/// FNV-1a: a hash that is the same in every process and version, so a page
/// keeps its lane across restarts.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn lock_dir(dir: &Path) -> Result<File, OpenError> {
    let path = dir.join(LOCK);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io_at(&path))?;
    // SAFETY: flock on a descriptor we own.
    let locked = unsafe {
        use std::os::fd::AsRawFd;
        libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB)
    };
    if locked != 0 {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = match holder.trim() {
            "" => String::new(),
            pid => format!(" (pid {pid})"),
        };
        return Err(OpenError::Locked {
            dir: dir.to_owned(),
            holder,
        });
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    Ok(file)
}

struct Meta {
    id: uuid::Uuid,
    lanes: u32,
}

impl Meta {
    /// The journal's meta, and whether it was created now (a new journal).
    fn load_or_create(dir: &Path, lanes: u32) -> Result<(Self, bool), OpenError> {
        let path = dir.join(META);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let meta = parse_meta(&text).map_err(|detail| OpenError::BadMeta {
                    dir: dir.to_owned(),
                    detail,
                })?;
                if meta.0 == FORMAT {
                    return Ok((meta.1, false));
                }
                // A journal of an older format this build still reads
                // (format 1: no sources) is upgraded in place: its segments
                // keep their format in their headers and are replayed as
                // written; new segments are written in this format.
                if has_segments(dir) && !segment::READABLE.contains(&meta.0) {
                    return Err(OpenError::OtherFormat {
                        dir: dir.to_owned(),
                        found: meta.0,
                    });
                }
                tracing::info!(from = meta.0, to = FORMAT, "upgrading the journal's format");
                let fresh = Meta {
                    id: meta.1.id,
                    lanes: meta.1.lanes,
                };
                fresh.write(dir)?;
                Ok((fresh, false))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = Meta {
                    id: uuid::Uuid::new_v4(),
                    lanes: lanes.max(1),
                };
                fresh.write(dir)?;
                Ok((fresh, true))
            }
            Err(e) => Err(io_at(&path)(e)),
        }
    }

    fn write(&self, dir: &Path) -> Result<(), OpenError> {
        let text = format!(
            "tickertape-journal\nformat={FORMAT}\nid={}\nlanes={}\n",
            self.id, self.lanes
        );
        let tmp = dir.join(format!("{META}.tmp"));
        let path = dir.join(META);
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            segment::sync_dir(dir)
        };
        write().map_err(io_at(&path))
    }
}

fn parse_meta(text: &str) -> Result<(u32, Meta), String> {
    let mut lines = text.lines();
    if lines.next() != Some("tickertape-journal") {
        return Err("not a tickertape journal".into());
    }
    let (mut format, mut id, mut lanes) = (None, None, None);
    for line in lines {
        match line.split_once('=') {
            Some(("format", v)) => format = v.parse::<u32>().ok(),
            Some(("id", v)) => id = uuid::Uuid::parse_str(v).ok(),
            Some(("lanes", v)) => lanes = v.parse::<u32>().ok().filter(|&n| n > 0),
            _ => {}
        }
    }
    match (format, id, lanes) {
        (Some(format), Some(id), Some(lanes)) => Ok((format, Meta { id, lanes })),
        _ => Err("format, id or lanes missing".into()),
    }
}

fn has_segments(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|lane| {
        std::fs::read_dir(lane.path()).is_ok_and(|files| {
            files
                .flatten()
                .any(|f| segment::start_of(&f.path()).is_some())
        })
    })
}

/// Where a lane's new records start, given `next` from its segments: never
/// below its mark, so positions never go back once the segments that held
/// them are deleted. A lane of an existing journal with neither segments
/// nor a mark has lost its place: it starts at the time floor (and the gap
/// below it is known as one). The mark is brought up to date before any
/// record is written. Returns the start, the mark (path and value), and
/// the gap.
fn resume_lane(
    dir: &Path,
    lane: u32,
    next: u64,
    existed: bool,
) -> Result<(u64, (PathBuf, u64), u64), OpenError> {
    let path = mark::path(dir, lane);
    let found = mark::read(&path).map_err(io_at(&path))?;
    let (start, gap_below) = match found {
        Some(marked) => (next.max(marked), 0),
        None if next == 0 && existed => {
            let floor = mark::time_floor(chrono::Utc::now());
            tracing::warn!(
                lane,
                position = floor,
                "journal lane without segments or mark (upgraded, or its files removed): \
                 its positions start at a time floor, above any it held before"
            );
            (floor, floor)
        }
        None => (next, 0),
    };
    if found != Some(start) {
        mark::write(&path, start).map_err(io_at(&path))?;
    }
    Ok((start, (path, start), gap_below))
}

/// Scans a lane's segments; returns them and the position new records
/// start at.
fn recover_lane(
    dir: &Path,
    quarantine: &Path,
    journal: uuid::Uuid,
    lane: u32,
    stats: &JournalStats,
    used: &AtomicU64,
) -> Result<(Vec<lane::SegmentInfo>, u64), OpenError> {
    let mut paths: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(io_at(dir))?
        .flatten()
        .filter_map(|e| segment::start_of(&e.path()).map(|start| (start, e.path())))
        .collect();
    paths.sort();
    let mut segments = Vec::new();
    let mut next = 0;
    let count = paths.len();
    for (i, (start, path)) in paths.into_iter().enumerate() {
        let expected = SegmentHeader {
            format: FORMAT,
            lane,
            start,
            journal,
        };
        let last = i + 1 == count;
        let scanned = segment::scan(&path, &expected, last).map_err(io_at(&path))?;
        let mut corrupt = None;
        match &scanned.damage {
            None => {}
            Some(Damage::TornTail { bytes }) => {
                tracing::warn!(
                    path = %path.display(), bytes, records_kept = scanned.records,
                    "journal: cut off a torn tail (a write interrupted by a crash; never acknowledged)"
                );
                stats.torn_tails_truncated.fetch_add(1, Relaxed);
                if scanned.valid_len > 0 {
                    segment::truncate(&path, scanned.valid_len).map_err(io_at(&path))?;
                }
            }
            Some(Damage::Corrupt { offset, error }) => {
                let what = format!(
                    "{}: {error} at byte {offset} after {} good records; replay stops there and the file is kept in {}",
                    path.display(),
                    scanned.records,
                    quarantine.display()
                );
                tracing::error!("journal: damaged segment: {what}");
                stats.report_corrupt(what);
                corrupt = Some(error.clone());
            }
        }
        // A damaged segment keeps its bytes after the damage: new records
        // start beyond them, so positions never repeat.
        let kept = if corrupt.is_some() {
            scanned.file_len
        } else {
            scanned.valid_len
        };
        next = next.max(start + kept);
        if kept == 0 {
            // Nothing in it: remove it, so its start position stays free.
            std::fs::remove_file(&path).map_err(io_at(&path))?;
            continue;
        }
        stats.committed_records.fetch_add(scanned.records, Relaxed);
        used.fetch_add(HEADER_LEN + kept, Relaxed);
        segments.push(lane::SegmentInfo {
            start,
            format: scanned.format,
            path,
            len: scanned.valid_len,
            corrupt,
            active: false,
            started: None,
        });
    }
    Ok((segments, next))
}

#[cfg(test)]
mod tests;

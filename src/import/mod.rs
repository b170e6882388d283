//! `tickertape import …`: a peer's history into the buckets, exactly once.
//!
//! An import reads its file twice. The first pass validates every row and
//! writes nothing: a bad row names the file, line and column, and the
//! command stops there. The second pass applies the rows in batches of
//! [`BATCH_ROWS`] (fewer when their visitors reach [`BATCH_VISITORS`])
//! through the same bucket writes as live hits; each batch
//! moves the import's progress (one document per stream, as a journal lane
//! has) in the same transaction as its increments. An import is keyed by
//! its site and the file's content, so running it again, or again after a
//! `kill -9`, applies only the batches that are not in yet.
//!
//! Rows older than a view level's retention (as the database's TTL
//! indexes enforce it, [`expired_levels`]) are not written at that level:
//! the TTL monitor would delete those buckets anyway, and reports never
//! read a level past its retention (`reports::retention`). Their batches
//! still move every stream's progress, with fewer statements or none.
//!
//! *Length*: the reading every source shares (CSV records capped while
//! streaming, decompression bounds, figure bounds) and the exactly-once
//! apply with its progress; each source is its own module.

pub mod goatcounter;
pub mod plausible;
pub mod umami;
pub mod workflow;

mod by_kind;
pub use by_kind::delete;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use crate::domain::Labels;
use crate::journal::Visit;
use crate::storage::bucket_writer::{ApplyError, BucketWriter, Expired, Hit};
use crate::storage::progress::{self, Advance, Stream};
use crate::storage::retention::TtlState;
use crate::storage::{Resolution, Store};

/// Rows per batch (`TICKERTAPE_IMPORT_BATCH_ROWS` overrides it, for the
/// crash test). A batch's buckets are at most its rows times the levels.
pub const BATCH_ROWS: u64 = 2_000;

/// Most visitor ids one batch adds to sketches ([`Counted::visitors`]): a
/// sketch is written one field per register (`domain::sketch`), and a
/// day's figure carries its day's visitors, so [`BATCH_ROWS`] days of a
/// busy site (Plausible's `visitors` file: a year of 10,000 visitors a
/// day) would be millions of fields in one transaction, more than the
/// database takes within an attempt. A batch ends at [`BATCH_ROWS`] rows
/// or once its rows' visitors reach this, whichever comes first; rows
/// without visitors (hits) are batched by rows alone. A batch's buckets of
/// one level go in one `update` command, under the attempt's time limit:
/// this bounds its register fields, which written in parts
/// (`buckets::MAX_FIELDS_PER_MAX`) cost about 2 s at 200,000 on the local
/// server (docs/benchmarks.md, imports). It is part of where batches end,
/// so changing it strands imports in progress.
pub const BATCH_VISITORS: u64 = 200_000;

/// One row, as it will be counted.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportHit {
    /// The bucket key (`domain/path`).
    pub page: String,
    pub at: DateTime<Utc>,
    pub source: Option<String>,
    /// Breakdown labels; with an event's name, the row is that event.
    pub labels: Labels,
    /// What the row changes of its visit, when the export tells visits
    /// apart (an event carries only its visitor, as the pixel's does).
    pub visit: Option<Visit>,
}

/// A row that is not counted, and why (the summary counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skipped {
    Bot,
    /// On a day the site had live figures on when the import started.
    Overlap,
    /// In a span another import cleared to replace it (`--overlap
    /// replace`): what this import added there is gone already.
    Replaced,
    /// A row the peer keeps beside views and events (Umami's link, pixel
    /// and performance rows).
    NotAViewOrEvent,
    /// A row of another website than the one named to import (Umami's
    /// `--from-website`).
    OtherWebsite,
    /// Later than the import's first start: not over when it was
    /// exported (or dated wrong), held back rather than shown early.
    Later,
}

impl Skipped {
    pub fn reason(self) -> &'static str {
        match self {
            Skipped::Bot => "bot",
            Skipped::Overlap => "on days with live figures",
            Skipped::Replaced => "on days another import replaced",
            Skipped::NotAViewOrEvent => "neither a view nor an event",
            Skipped::OtherWebsite => "of other websites",
            Skipped::Later => "later than the import's start",
        }
    }
}

/// The rows an import's run does not apply: those on the days it skipped
/// as live, and those in spans a later import cleared to replace them
/// (their figures are gone: a delete must not take them back again).
#[derive(Debug, Default, Clone)]
pub struct Skips {
    pub days: BTreeSet<NaiveDate>,
    pub cleared: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// Rows after this are held back ([`Skipped::Later`]).
    pub after: Option<DateTime<Utc>>,
}

impl Skips {
    pub fn of(record: &crate::storage::imports::ImportRecord) -> Self {
        Skips {
            days: record.skipped_days.iter().copied().collect(),
            cleared: record.cleared_by_others.clone(),
            after: record.skip_after,
        }
    }

    fn replaced(&self, at: DateTime<Utc>) -> bool {
        self.cleared
            .iter()
            .any(|(from, to)| *from <= at && at < *to)
    }
}

/// What a row gives.
pub type Row = Result<ImportHit, Skipped>;

/// A row that cannot be read: where, and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {}{message}", match column.as_str() {
    "" => String::new(),
    column => format!("column {column:?}: "),
})]
pub struct RowError {
    pub file: String,
    pub line: u64,
    pub column: String,
    pub message: String,
}

impl RowError {
    pub fn new(file: &str, line: u64, column: &str, message: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            line,
            column: column.to_owned(),
            message: message.into(),
        }
    }
}

/// A CSV export with a header row, its columns found by name (in any
/// order; the others are ignored), read record by record.
pub struct CsvFile<R: Read> {
    records: csv::StringRecordsIntoIter<RecordBound<R>>,
    columns: HashMap<&'static str, usize>,
    file: String,
    /// Where a record went over [`MAX_RECORD_BYTES`], once one did.
    overlong: Rc<std::cell::Cell<Option<u64>>>,
    /// The line read up to (where a failed read failed).
    line: Rc<std::cell::Cell<u64>>,
    /// The header's names, by position: what a row short of fields lacks.
    header: Vec<String>,
}

/// The longest record (a row, its line end and any line ends inside its
/// quotes) an import reads: the rows of every peer's export are far
/// shorter, and a longer one is refused as soon as it passes this, so
/// memory stays bounded whatever a file holds.
pub const MAX_RECORD_BYTES: u64 = 64 << 10;

/// Passes a CSV file's bytes through, failing once a record (quotes
/// followed, as `csv` reads them) passes [`MAX_RECORD_BYTES`]; `overlong`
/// learns the line it started on.
pub struct RecordBound<R> {
    inner: R,
    in_quotes: bool,
    /// Bytes of the record so far.
    record: u64,
    /// The line the next byte is on, and the one the record started on.
    line: Rc<std::cell::Cell<u64>>,
    record_line: u64,
    overlong: Rc<std::cell::Cell<Option<u64>>>,
}

impl<R: Read> Read for RecordBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            self.record += 1;
            match b {
                b'"' => self.in_quotes = !self.in_quotes,
                b'\n' => {
                    self.line.set(self.line.get() + 1);
                    if !self.in_quotes {
                        self.record = 0;
                        self.record_line = self.line.get();
                    }
                }
                _ => {}
            }
            if self.record > MAX_RECORD_BYTES {
                self.overlong.set(Some(self.record_line));
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a record over the longest an import reads",
                ));
            }
        }
        Ok(n)
    }
}

impl<R: Read> CsvFile<R> {
    /// Reads the header: every `required` column must be there,
    /// `optional` ones are read when they are. `check` sees the header
    /// first (a format's own mark).
    pub fn open(
        read: R,
        file: &str,
        required: &[&'static str],
        optional: &[&'static str],
        check: impl FnOnce(&csv::StringRecord) -> Result<(), RowError>,
    ) -> Result<Self, RowError> {
        let overlong = Rc::new(std::cell::Cell::new(None));
        let line = Rc::new(std::cell::Cell::new(1));
        let bounded = RecordBound {
            inner: read,
            in_quotes: false,
            record: 0,
            line: line.clone(),
            record_line: 1,
            overlong: overlong.clone(),
        };
        let mut reader = csv::ReaderBuilder::new()
            .flexible(false)
            .from_reader(bounded);
        let header = reader.headers().map_err(|e| match overlong.get() {
            Some(line) => overlong_error(file, line),
            None => RowError::new(file, 1, "", not_csv(&e)),
        })?;
        check(header)?;
        let names = header.iter().map(|h| h.trim().to_owned()).collect();
        let mut columns = HashMap::new();
        for &name in required.iter().chain(optional) {
            match header.iter().position(|h| h.trim() == name) {
                Some(i) => {
                    columns.insert(name, i);
                }
                None if optional.contains(&name) => {}
                None => {
                    return Err(RowError::new(
                        file,
                        1,
                        name,
                        "this required column is missing",
                    ))
                }
            }
        }
        Ok(Self {
            records: reader.into_records(),
            columns,
            file: file.to_owned(),
            overlong,
            line,
            header: names,
        })
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn has(&self, column: &str) -> bool {
        self.columns.contains_key(column)
    }

    /// A record's cell of `column`, trimmed; empty when the column is not
    /// in the file.
    pub fn cell<'r>(&self, record: &'r csv::StringRecord, column: &str) -> &'r str {
        self.columns
            .get(column)
            .and_then(|&i| record.get(i))
            .unwrap_or_default()
            .trim()
    }

    /// The next record and its line, or where the file stops being CSV.
    pub fn next_record(&mut self) -> Option<Result<(u64, csv::StringRecord), RowError>> {
        Some(match self.records.next()? {
            Ok(record) => Ok((record.position().map_or(0, |p| p.line()), record)),
            Err(_) if self.overlong.get().is_some() => Err(overlong_error(
                &self.file,
                self.overlong.get().unwrap_or_default(),
            )),
            Err(e) => {
                let line = e.position().map_or(self.line.get(), |p| p.line());
                Err(match e.kind() {
                    // Named by the first field it lacks (or has beyond
                    // the header, by its number).
                    &csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => {
                        let column = match self.header.get(len as usize) {
                            Some(name) if len < expected_len => name.clone(),
                            _ => format!("{}", expected_len + 1),
                        };
                        RowError::new(
                            &self.file,
                            line,
                            &column,
                            format!(
                                "not CSV as its header says: the row has {len} fields, \
                                 the header {expected_len}"
                            ),
                        )
                    }
                    _ => RowError::new(&self.file, line, "", not_csv(&e)),
                })
            }
        })
    }
}

/// Why a file stops being read: it is not CSV, or its bytes cannot be
/// read (a decompression bomb, a broken zip entry).
fn not_csv(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => format!("cannot be read: {io}"),
        _ => format!("not CSV: {e}"),
    }
}

fn overlong_error(file: &str, line: u64) -> RowError {
    RowError::new(
        file,
        line,
        "",
        format!(
            "a row over {} KiB (the longest an import reads; is it an export at all?)",
            MAX_RECORD_BYTES >> 10
        ),
    )
}

/// The first day an import takes: earlier dates are typing errors (or
/// worse), and far-out ones would overflow the date arithmetic of the
/// tasks that read the buckets.
pub const FIRST_DAY: NaiveDate = match NaiveDate::from_ymd_opt(1990, 1, 1) {
    Some(day) => day,
    None => panic!("1990-01-01 is a date"),
};

/// Checks that `day` (a row's date; for a time, its UTC date) is within
/// [`FIRST_DAY`] to tomorrow (UTC), the days an import takes.
pub fn day_in_window(day: NaiveDate) -> Result<(), String> {
    let tomorrow = Utc::now().date_naive() + chrono::Days::new(1);
    if day < FIRST_DAY || day > tomorrow {
        return Err(format!(
            "{day} is outside the days an import takes ({FIRST_DAY} to tomorrow, {tomorrow}, UTC)"
        ));
    }
    Ok(())
}

/// Whether `raw` starts with a date written `YYYY-MM-DD`, four digits of
/// year and two each of month and day, and then ends or goes on with a
/// time (`T` or a space): chrono alone also takes `+262142-12-31` and
/// `2026-1-5`.
pub fn starts_with_plain_date(raw: &str) -> bool {
    let b = raw.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() >= 10
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b.get(10), None | Some(b'T' | b't' | b' '))
}

/// A format's reading of one record of its file.
pub trait Format {
    /// What a valid row counts.
    type Counted;
    fn row<R: Read>(
        &mut self,
        csv: &CsvFile<R>,
        line: u64,
        record: &csv::StringRecord,
    ) -> Result<Result<Self::Counted, Skipped>, RowError>;
}

/// A file's rows in order, each checked by its format.
pub struct Rows<F, R: Read> {
    csv: CsvFile<R>,
    format: F,
}

impl<F: Format, R: Read> Rows<F, R> {
    pub fn new(csv: CsvFile<R>, format: F) -> Self {
        Self { csv, format }
    }
}

impl<F: Format, R: Read> Iterator for Rows<F, R> {
    type Item = Result<Result<F::Counted, Skipped>, RowError>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.csv.next_record()? {
            Ok((line, record)) => self.format.row(&self.csv, line, &record),
            Err(e) => Err(e),
        })
    }
}

/// What an import did (or, validated, would do).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Summary {
    pub rows: u64,
    pub views: u64,
    pub events: u64,
    /// Visits started (imports that tell visits apart).
    pub visits: u64,
    /// Days' visitors added up, and the days (imports of days' figures).
    pub visitors: u64,
    pub days: u64,
    pub skipped: BTreeMap<&'static str, u64>,
    pub first: Option<DateTime<Utc>>,
    pub last: Option<DateTime<Utc>>,
    /// Rows applied now (the rest were in already).
    pub applied_rows: u64,
    /// Of those, the rows counted (the others were skipped).
    pub written: u64,
    /// When the file's last counted row is (files in time order end
    /// there, and a file cut short ends early).
    pub last_row: Option<DateTime<Utc>>,
}

impl Summary {
    fn add<T: Counted>(&mut self, row: &Result<T, Skipped>) {
        self.rows += 1;
        match row {
            Ok(counted) => {
                counted.summarize(self);
                let at = counted.at();
                self.first = Some(self.first.map_or(at, |f| f.min(at)));
                self.last = Some(self.last.map_or(at, |l| l.max(at)));
                self.last_row = Some(at);
            }
            Err(why) => *self.skipped.entry(why.reason()).or_default() += 1,
        }
    }
}

/// What a valid row of an import counts, applied a batch at a time.
pub trait Counted: Sized {
    /// When it counts (a day's figure: its day's first instant).
    fn at(&self) -> DateTime<Utc>;
    /// The day it is on, as the import's skipped days name them.
    fn day(&self) -> NaiveDate;
    fn summarize(&self, summary: &mut Summary);
    /// The visitor ids it adds to sketches (a day's figure), which bound a
    /// batch ([`BATCH_VISITORS`]); none for a hit.
    fn visitors(&self) -> u64 {
        0
    }
    /// Applies a batch of rows in one transaction of `advance`'s stream;
    /// with `sign` −1, takes them back.
    fn apply_batch(
        writer: &BucketWriter,
        rows: &[&Self],
        advance: &Advance<'_>,
        sign: i32,
    ) -> impl std::future::Future<Output = Result<(), ApplyError>>;
}

impl Counted for ImportHit {
    fn at(&self) -> DateTime<Utc> {
        self.at
    }

    fn day(&self) -> NaiveDate {
        self.at.date_naive()
    }

    fn summarize(&self, summary: &mut Summary) {
        if self.labels.get(crate::domain::Dimension::Event).is_some() {
            summary.events += 1;
        } else {
            summary.views += 1;
            if self.visit.as_ref().is_some_and(Visit::starts) {
                summary.visits += 1;
            }
        }
    }

    async fn apply_batch(
        writer: &BucketWriter,
        rows: &[&Self],
        advance: &Advance<'_>,
        sign: i32,
    ) -> Result<(), ApplyError> {
        let hits = rows.iter().map(|h| Hit {
            page: &h.page,
            at: h.at,
            source: h.source.as_deref(),
            visit: h.visit.as_ref(),
            labels: Some(&h.labels),
        });
        writer
            .apply_signed(hits, Some(advance), sign)
            .await
            .map(drop)
    }
}

/// Opens `path`, gunzipping it when it starts with gzip's magic bytes
/// (within [`MAX_RATIO`]).
pub fn open(path: &Path) -> std::io::Result<Box<dyn Read>> {
    let read = Counting::new(std::fs::File::open(path)?);
    let compressed = read.count.clone();
    let mut file = BufReader::new(read);
    let gzipped = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gzipped {
        Box::new(RatioBound::new(
            flate2::read::MultiGzDecoder::new(file),
            compressed,
        ))
    } else {
        Box::new(file)
    })
}

/// The most a compressed file (gzip, or a zip's entry) may expand, once
/// past [`RATIO_FREE_BYTES`]: the peers' exports compress 5 to 50 times
/// (dates, ids and times differ from row to row), while a decompression
/// bomb of repeated bytes expands about 1,000 times; refused before it
/// costs much.
pub const MAX_RATIO: u64 = 500;
/// What a compressed file may expand to before [`MAX_RATIO`] is checked
/// (a small file's ratio says little).
pub const RATIO_FREE_BYTES: u64 = 16 << 20;

/// Counts the bytes read through it (shared, to be read by a
/// [`RatioBound`] above a decompressor).
pub struct Counting<R> {
    inner: R,
    pub count: Rc<std::cell::Cell<u64>>,
}

impl<R> Counting<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            count: Rc::new(std::cell::Cell::new(0)),
        }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// A decompressor's output, failing once it passes [`RATIO_FREE_BYTES`]
/// and [`MAX_RATIO`] times the compressed bytes read so far.
pub struct RatioBound<R> {
    inner: R,
    compressed: Rc<std::cell::Cell<u64>>,
    out: u64,
    /// [`RATIO_FREE_BYTES`] (less in tests).
    free: u64,
}

impl<R> RatioBound<R> {
    pub fn new(inner: R, compressed: Rc<std::cell::Cell<u64>>) -> Self {
        Self {
            inner,
            compressed,
            out: 0,
            free: RATIO_FREE_BYTES,
        }
    }
}

impl<R: Read> Read for RatioBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out += n as u64;
        if self.out > self.free && self.out > self.compressed.get().saturating_mul(MAX_RATIO) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "it expands over {MAX_RATIO} times ({} bytes from {}): \
                     refused as a decompression bomb",
                    self.out,
                    self.compressed.get()
                ),
            ));
        }
        Ok(n)
    }
}

/// A row's page as a path of `site`: a path, or a full address on one of
/// its hosts (as the pixel takes a page named with the site's id).
pub fn site_path(
    site: &crate::storage::sites::Site,
    raw: &str,
) -> Result<crate::domain::PagePath, String> {
    use crate::domain::PageRef;
    match PageRef::parse(raw).map_err(|e| e.to_string())? {
        PageRef::Path(path) => Ok(path),
        PageRef::Url { host, path } if site.owns_host(&host) => Ok(path),
        PageRef::Url { host, .. } => Err(format!("{host} is not a host of {}", site.domain)),
    }
}

/// Passes a reader's bytes through while hashing them; the hash is
/// shared so it can be read once the reader has been consumed.
pub struct Hashing {
    inner: Box<dyn Read>,
    hasher: Rc<RefCell<blake3::Hasher>>,
}

impl Hashing {
    pub fn new(inner: Box<dyn Read>) -> (Self, Rc<RefCell<blake3::Hasher>>) {
        let hasher = Rc::new(RefCell::new(blake3::Hasher::new()));
        let reader = Self {
            inner,
            hasher: hasher.clone(),
        };
        (reader, hasher)
    }
}

impl Read for Hashing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.borrow_mut().update(&buf[..n]);
        Ok(n)
    }
}

/// The import's key: its kind, site and the file's content (a
/// BLAKE3 hash of the decompressed bytes, taken in the validating pass).
pub fn key(kind: &str, site: &crate::domain::SiteId, content: &blake3::Hash) -> String {
    format!("import/{kind}/{site}/{}", &content.to_hex()[..24])
}

/// How much older than a level's retention a row must be before its
/// buckets of that level are left out: room for the importer's clock, the
/// database's (its TTL monitor) and the server's (its reports) to
/// disagree.
pub const EXPIRY_MARGIN: TimeDelta = TimeDelta::days(1);

/// The view levels whose buckets are already past retention for rows
/// before a cut-off, at `now`: what the database's TTL index of each level
/// (`storage::retention`, set by the server on start and by `tickertape
/// setup` from the `TICKERTAPE_RETAIN_*` settings) deletes, less
/// [`EXPIRY_MARGIN`]. A level without a TTL index is kept for ever, and
/// written whole.
pub async fn expired_levels(
    store: &Store,
    now: DateTime<Utc>,
) -> Result<Expired, mongodb::error::Error> {
    let mut before = [None; 3];
    for level in Resolution::ALL {
        if let TtlState::ExpireAfter(secs) =
            crate::storage::retention::current(store, level).await?
        {
            before[level as usize] = Some(now - TimeDelta::seconds(secs.max(0)) - EXPIRY_MARGIN);
        }
    }
    Ok(Expired::new(|level| before[level as usize]))
}

/// How a run applies an import's rows: under `key` (its progress), in
/// batches of `batch_rows`, skipping `skips`; `sign` −1 takes them back
/// (under another key), as exactly. Site buckets are written as `part`
/// (the import's record says which). `until`, for taking back an import
/// that never completed, is how far each stream ([`Stream::index`]) got:
/// a stream's batches past it are not taken back, since they never went
/// in.
pub struct Pass<'a> {
    pub key: &'a str,
    pub skips: &'a Skips,
    pub batch_rows: u64,
    pub sign: i32,
    pub part: i32,
    pub until: Option<[u64; 3]>,
}

/// Applies `rows` (the file's rows in order, every one valid) as `pass`
/// says, skipping the batches already in. `progress` is told the rows
/// done so far.
/// Rows on the skipped days (as [`Counted::day`] names them) are skipped
/// as overlapping live figures.
pub async fn apply<T: Counted>(
    store: &Store,
    pass: &Pass<'_>,
    rows: impl Iterator<Item = Result<T, Skipped>>,
    mut progress: impl FnMut(u64),
) -> anyhow::Result<Summary> {
    let Pass {
        key,
        skips,
        batch_rows,
        sign,
        part,
        until,
    } = *pass;
    let rows = rows.map(|row| match row {
        Ok(counted) if skips.after.is_some_and(|after| counted.at() > after) => Err(Skipped::Later),
        Ok(counted) if skips.days.contains(&counted.day()) => Err(Skipped::Overlap),
        Ok(counted) if skips.replaced(counted.at()) => Err(Skipped::Replaced),
        other => other,
    });
    // Rows past a level's retention skip that level's buckets; their
    // batches still move every stream's progress.
    let expired = expired_levels(store, Utc::now()).await?;
    for level in Resolution::ALL {
        if let Some(cut) = expired.before(level) {
            tracing::info!(
                "{key}: rows before {cut} are past the {} buckets' retention: not written there",
                level.as_str()
            );
        }
    }
    let writer = BucketWriter::new(store)
        .skipping(expired)
        .writing_part(part);
    let mut at = [0u64; 3];
    for stream in Stream::ALL {
        at[stream.index()] = progress::ensure(store, key, 0, stream, 0).await?;
    }
    let mut summary = Summary::default();
    let mut batch: Vec<Result<T, Skipped>> =
        Vec::with_capacity(batch_rows.min(BATCH_ROWS) as usize);
    let mut from = 0u64;
    let mut rows = rows.peekable();
    while rows.peek().is_some() {
        // Rows up to `batch_rows`, or fewer once their visitors reach
        // BATCH_VISITORS: the same boundaries on every run of a file.
        let mut visitors = 0u64;
        while (batch.len() as u64) < batch_rows && visitors < BATCH_VISITORS {
            let Some(row) = rows.next() else { break };
            if let Ok(counted) = &row {
                visitors = visitors.saturating_add(counted.visitors());
            }
            batch.push(row);
        }
        let to = from + batch.len() as u64;
        for row in &batch {
            summary.add(row);
        }
        let counted: Vec<&T> = batch.iter().filter_map(|r| r.as_ref().ok()).collect();
        let mut applied = false;
        for stream in Stream::ALL {
            let position = &mut at[stream.index()];
            if *position >= to {
                continue;
            }
            if let Some(until) = until {
                let got = until[stream.index()];
                if got <= from {
                    continue;
                }
                anyhow::ensure!(
                    got >= to,
                    "the import's {} progress is at row {got}, not at a batch end ({to}): \
                     was it run with another batch size (TICKERTAPE_IMPORT_BATCH_ROWS)?",
                    stream.as_str()
                );
            }
            anyhow::ensure!(
                *position == from,
                "the import's {} progress is at row {position}, not at a batch start ({from}): \
                 was it run with another batch size?",
                stream.as_str()
            );
            let advance = Advance {
                journal: key,
                lane: 0,
                stream,
                from,
                to,
            };
            apply_batch(store, &writer, &counted, &advance, sign).await?;
            *position = to;
            applied = true;
        }
        if applied {
            summary.applied_rows += to - from;
            summary.written += counted.len() as u64;
        }
        progress(to);
        from = to;
        batch.clear();
    }
    Ok(summary)
}

/// One batch of one stream, retried until it is in: a batch not applied
/// is sent again, and one whose commit went unanswered is looked up in
/// its progress document.
async fn apply_batch<T: Counted>(
    store: &Store,
    writer: &BucketWriter,
    rows: &[&T],
    advance: &Advance<'_>,
    sign: i32,
) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        let failure: ApplyError = match T::apply_batch(writer, rows, advance, sign).await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        match progress::position(store, advance.journal, 0, advance.stream).await {
            Ok(Some(p)) if p == advance.to => return Ok(()),
            Ok(Some(p)) if p == advance.from => {}
            Ok(found) => anyhow::bail!(
                "the import's progress moved to {found:?} while this run applied rows {}..{}: \
                 is the same import running elsewhere?",
                advance.from,
                advance.to
            ),
            Err(_) => {}
        }
        if std::time::Instant::now() > deadline {
            return Err(anyhow::Error::new(failure)
                .context("the database did not take a batch for 5 minutes"));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &[u8]) -> Result<Vec<u64>, RowError> {
        let mut csv = CsvFile::open(text, "t.csv", &["a"], &[], |_| Ok(()))?;
        let mut lines = Vec::new();
        while let Some(next) = csv.next_record() {
            lines.push(next?.0);
        }
        Ok(lines)
    }

    #[test]
    fn a_record_over_the_bound_is_refused_on_the_line_it_starts_even_across_quoted_line_ends() {
        let long = "x".repeat(MAX_RECORD_BYTES as usize);
        let ok = format!("a,b\n1,{}\n2,3\n", &long[..long.len() - 10]);
        assert_eq!(records(ok.as_bytes()).unwrap(), vec![2, 3]);
        let over = format!("a,b\n1,2\n3,{long}\n4,5\n");
        let e = records(over.as_bytes()).unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (3, ""), "{e}");
        assert!(
            e.to_string().starts_with("t.csv:3: a row over 64 KiB"),
            "{e}"
        );
        // Line ends inside quotes do not end the record.
        let quoted = format!("a,b\n1,\"{}\"\n", "y\n".repeat(MAX_RECORD_BYTES as usize));
        let e = records(quoted.as_bytes()).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    /// `data` gzipped, read back through a [`RatioBound`] that checks
    /// from 1 MiB on: what it read, or why it stopped.
    fn expand(data: &[u8]) -> std::io::Result<u64> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(data).unwrap();
        let packed = gz.finish().unwrap();
        let compressed = Counting::new(&packed[..]);
        let count = compressed.count.clone();
        let mut read = RatioBound::new(flate2::read::GzDecoder::new(compressed), count);
        read.free = 1 << 20;
        std::io::copy(&mut read, &mut std::io::sink())
    }

    #[test]
    fn a_stream_expanding_past_the_ratio_is_refused_and_a_plain_one_is_not() {
        let e = expand(&vec![b'\n'; 8 << 20]).unwrap_err();
        assert!(e.to_string().contains("decompression bomb"), "{e}");
        // Text that differs from line to line passes.
        let text: String = (0..200_000u64)
            .map(|i| format!("{i},{}\n", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect();
        assert_eq!(expand(text.as_bytes()).unwrap(), text.len() as u64);
    }

    #[test]
    fn dates_are_plain_and_within_the_window() {
        for good in [
            "2026-11-25",
            "2026-11-25T10:00:00Z",
            "2026-11-25 10:00:00+00",
        ] {
            assert!(starts_with_plain_date(good), "{good}");
        }
        for bad in [
            "+262142-12-31",
            "-0001-01-01",
            "-0044-03-15 10:00:00+00",
            "2026-1-5",
            "2026-01-5",
            "26-01-05",
            "2026-01-05x",
            "",
        ] {
            assert!(!starts_with_plain_date(bad), "{bad}");
        }
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        assert!(day_in_window(day("1990-01-01")).is_ok());
        assert!(day_in_window(Utc::now().date_naive() + chrono::Days::new(1)).is_ok());
        assert!(day_in_window(day("1989-12-31")).is_err());
        assert!(day_in_window(day("0000-01-01")).is_err());
        assert!(day_in_window(Utc::now().date_naive() + chrono::Days::new(2)).is_err());
    }
}

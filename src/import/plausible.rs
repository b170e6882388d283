//! Plausible CE's CSV export: a zip (or a directory) of files named
//! `imported_<table>[_<from>_<to>].csv`, the `imported_` prefix optional,
//! each with a header row; every row is one day in the site's time zone
//! for one dimension value. Columns are found by name: Plausible changed
//! them between versions (`imported_pages` lost `exits` and `time_on_page`
//! and gained `visits`, scroll depth and time on page), and columns this
//! import does not read are named in a note.
//!
//! A row is a day's figure, not hits: it is counted at the first instant
//! of its day in the site's zone, in the minute, hour and day buckets that
//! instant falls in (`bucket_writer::Figure`), so every report adds it up
//! as it adds up hits, and one at hour or minute resolution says the days
//! are daily figures only. What lands where:
//!
//! - `visitors`: the site's visits, bounces, visit duration and visitors;
//! - `pages`: each page's views (and the site's: the day's views are the
//!   pages file's) and visitors;
//! - `entry_pages`: each page's entries, bounces and visit duration;
//! - `exit_pages`: each page's exits;
//! - `sources` (source, `utm_medium`, `utm_campaign`), `locations`
//!   (country), `devices`, `browsers`, `operating_systems`: breakdowns,
//!   counted by the row's `pageviews` (older exports without it: `visits`)
//!   on the site's home page, since Plausible keeps them per site;
//! - `custom_events`: events by name, with their visitors as conversions,
//!   on the home page too.
//!
//! Visitors are made-up ids from one pool per day (`Figure::seed`), so the
//! site's sketch and its pages' agree as real ones do; several rows of one
//! page (or event) and day take successive ids, so their visitors add up.
//!
//! The tables are applied in [`Table::ALL`]'s order, `pages` last: a kept
//! page summary is checked against the site's day total of views, which
//! only the pages rows move, so no summary made while the import runs
//! outlives the entries, exits and visitors applied before them.
//!
//! *Length*: Plausible's export has seven tables; each is read here with
//! its columns, bounds and the hits it becomes, beside the rules they share
//! (dates, figure bounds, the site-zone days), so one file holds the one
//! format.

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::reading::{
    day_in_window, site_path, starts_with_plain_date, Counting, CsvFile, Format, Hashing,
    RatioBound, RowError, Rows,
};
use super::{Skipped, Summary};
use crate::classify::user_agent::{BROWSERS, OPERATING_SYSTEMS};
use crate::classify::{Country, DeviceClass, UNKNOWN};
use crate::domain::properties::{Properties, Rules};
use crate::domain::{Dimension, EventName, Page, PagePath, Source};
use crate::storage::bucket_writer::{ApplyError, BucketWriter, Counts, Figure};
use crate::storage::progress::Advance;
use crate::storage::sites::Site;

pub const KIND: &str = "plausible";

/// Most visitors one row may count: each is a made-up visitor id added
/// to the day's sketches one by one, so this bounds the time a row costs
/// (ten million: about a second).
pub const MAX_ROW_VISITORS: u64 = 10_000_000;

/// Most one table file's figures (views, visits, bounces, entries, exits,
/// events and visit durations in seconds, all its rows together) may add
/// up to: 2^53, so that no bucket's counter (a 64-bit integer) can
/// overflow from imports, even a thousand of them added to one day.
pub const MAX_FILE_TOTAL: u128 = 1 << 53;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Visitors,
    EntryPages,
    ExitPages,
    Sources,
    Locations,
    Devices,
    Browsers,
    OperatingSystems,
    CustomEvents,
    Pages,
}

impl Table {
    /// In the order they are applied (`pages` last: see the module's
    /// documentation).
    pub const ALL: [Table; 10] = [
        Table::Visitors,
        Table::EntryPages,
        Table::ExitPages,
        Table::Sources,
        Table::Locations,
        Table::Devices,
        Table::Browsers,
        Table::OperatingSystems,
        Table::CustomEvents,
        Table::Pages,
    ];

    /// Without it an export is refused: it carries the site's visits and
    /// visitors. An export without `pages` is taken (Plausible takes
    /// one): its page views stay empty, and a note says so.
    pub const REQUIRED: [Table; 1] = [Table::Visitors];

    pub fn name(self) -> &'static str {
        match self {
            Table::Visitors => "visitors",
            Table::EntryPages => "entry_pages",
            Table::ExitPages => "exit_pages",
            Table::Sources => "sources",
            Table::Locations => "locations",
            Table::Devices => "devices",
            Table::Browsers => "browsers",
            Table::OperatingSystems => "operating_systems",
            Table::CustomEvents => "custom_events",
            Table::Pages => "pages",
        }
    }

    /// The table a file holds, by its name: `imported_pages.csv`,
    /// `pages_20240101_20241231.csv`, …
    pub fn of_file_name(name: &str) -> Option<Table> {
        let stem = name.strip_suffix(".csv")?;
        let stem = stem.strip_prefix("imported_").unwrap_or(stem);
        Table::ALL.into_iter().find(|t| {
            let Some(rest) = stem.strip_prefix(t.name()) else {
                return false;
            };
            if rest.is_empty() {
                return true;
            }
            let dates: Vec<&str> = rest.split('_').collect();
            matches!(dates.as_slice(), ["", from, to] if is_date_stamp(from) && is_date_stamp(to))
        })
    }

    /// The columns read, without which the file is refused.
    fn required(self) -> &'static [&'static str] {
        match self {
            Table::Visitors => &[
                "date",
                "visitors",
                "pageviews",
                "bounces",
                "visits",
                "visit_duration",
            ],
            Table::Pages => &["date", "page", "visitors", "pageviews"],
            Table::EntryPages => &[
                "date",
                "entry_page",
                "entrances",
                "bounces",
                "visit_duration",
            ],
            Table::ExitPages => &["date", "exit_page", "exits"],
            Table::Sources => &["date", "source"],
            Table::Locations => &["date", "country"],
            Table::Devices => &["date", "device"],
            Table::Browsers => &["date", "browser"],
            Table::OperatingSystems => &["date", "operating_system"],
            Table::CustomEvents => &["date", "name", "events"],
        }
    }

    /// The columns read when they are there.
    fn optional(self) -> &'static [&'static str] {
        match self {
            Table::Sources => &[
                "pageviews",
                "visits",
                "referrer",
                "utm_medium",
                "utm_campaign",
            ],
            Table::Locations | Table::Devices | Table::Browsers | Table::OperatingSystems => {
                &["pageviews", "visits"]
            }
            Table::CustomEvents => &["visitors", "link_url", "path"],
            _ => &[],
        }
    }

    /// Columns of Plausible's exports, old and new, that are not read:
    /// not worth a note.
    fn known(self) -> &'static [&'static str] {
        match self {
            Table::Visitors => &[],
            Table::Pages => &[
                "hostname",
                "visits",
                "exits",
                "time_on_page",
                "scroll_depth",
                "pageleave_visitors",
                "total_scroll_depth",
                "total_scroll_depth_visits",
                "total_time_on_page",
                "total_time_on_page_visits",
            ],
            Table::EntryPages => &["visitors", "pageviews"],
            Table::ExitPages => &["visitors", "visit_duration", "bounces", "pageviews"],
            Table::Sources => &[
                "utm_source",
                "utm_content",
                "utm_term",
                "visitors",
                "visit_duration",
                "bounces",
            ],
            Table::Locations => &["region", "city", "visitors", "visit_duration", "bounces"],
            Table::Devices => &["visitors", "visit_duration", "bounces"],
            Table::Browsers => &["browser_version", "visitors", "visit_duration", "bounces"],
            Table::OperatingSystems => &[
                "operating_system_version",
                "visitors",
                "visit_duration",
                "bounces",
            ],
            Table::CustomEvents => &[],
        }
    }

    /// The breakdown a table's rows count in.
    fn dimension(self) -> Option<Dimension> {
        match self {
            Table::Sources => Some(Dimension::Source),
            Table::Locations => Some(Dimension::Country),
            Table::Devices => Some(Dimension::Device),
            Table::Browsers => Some(Dimension::Browser),
            Table::OperatingSystems => Some(Dimension::Os),
            Table::CustomEvents => Some(Dimension::Event),
            _ => None,
        }
    }
}

fn is_date_stamp(s: &str) -> bool {
    s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit())
}

/// An export's files, found by name in a directory or in a zip (read
/// in place, entry by entry, never unpacked: nothing is written to
/// temporary space), so that memory stays bounded whatever the export's
/// size.
pub struct Export {
    /// In [`Table::ALL`]'s order.
    pub files: Vec<(Table, TableSource)>,
    /// Files that are no table of the export, named in a note.
    pub ignored: Vec<String>,
}

/// Where a table file is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableSource {
    File(PathBuf),
    /// A zip's entry, read from its bytes in the zip.
    Entry(ZipEntry),
}

/// A zip entry as its central directory describes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZipEntry {
    zip: PathBuf,
    name: String,
    /// Where its compressed bytes start, and how many there are.
    start: u64,
    compressed: u64,
    /// Its size and CRC-32 uncompressed, checked as it is read.
    size: u64,
    crc: u32,
    deflated: bool,
}

impl TableSource {
    /// How errors name it.
    pub fn shown(&self) -> String {
        match self {
            TableSource::File(path) => path.display().to_string(),
            TableSource::Entry(e) => format!("{}/{}", e.zip.display(), e.name),
        }
    }

    fn open(&self) -> anyhow::Result<Box<dyn Read>> {
        use anyhow::Context;
        match self {
            TableSource::File(path) => {
                super::reading::open(path).with_context(|| format!("reading {}", path.display()))
            }
            TableSource::Entry(e) => e
                .open()
                .with_context(|| format!("reading {}", self.shown())),
        }
    }
}

impl ZipEntry {
    /// Its bytes, decompressed within [`super::reading::MAX_RATIO`], then
    /// checked against its size and CRC-32.
    fn open(&self) -> std::io::Result<Box<dyn Read>> {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::File::open(&self.zip)?;
        file.seek(SeekFrom::Start(self.start))?;
        let raw = Counting::new(file.take(self.compressed));
        let compressed = raw.count.clone();
        let data: Box<dyn Read> = if self.deflated {
            Box::new(RatioBound::new(
                flate2::read::DeflateDecoder::new(std::io::BufReader::new(raw)),
                compressed,
            ))
        } else {
            Box::new(raw)
        };
        Ok(Box::new(EntryCheck {
            inner: data,
            crc: flate2::Crc::new(),
            read: 0,
            entry: self.clone(),
        }))
    }
}

/// A zip entry's bytes, failing where they pass the size its directory
/// gives, or end short of it or with another CRC-32.
struct EntryCheck {
    inner: Box<dyn Read>,
    crc: flate2::Crc,
    read: u64,
    entry: ZipEntry,
}

impl Read for EntryCheck {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.read += n as u64;
        let read = self.read;
        let broken = |why: String| {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the zip entry {} {why}", self.entry.name),
            ))
        };
        if read > self.entry.size {
            return broken(format!("holds more than its {} bytes", self.entry.size));
        }
        if n == 0 && read != self.entry.size {
            return broken(format!("ends at {read} of its {} bytes", self.entry.size));
        }
        if n == 0 && self.crc.sum() != self.entry.crc {
            return broken("does not match its checksum".into());
        }
        Ok(n)
    }
}

impl Export {
    pub fn open(path: &Path) -> anyhow::Result<Export> {
        use anyhow::Context;
        let shown = path.display();
        let mut ignored = Vec::new();
        let mut files = Vec::new();
        if path.is_dir() {
            for entry in std::fs::read_dir(path).with_context(|| format!("reading {shown}"))? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                match Table::of_file_name(&name) {
                    Some(table) if entry.path().is_file() => {
                        files.push((table, TableSource::File(entry.path())))
                    }
                    _ => ignored.push(name),
                }
            }
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("reading {shown}"))?;
            entries(file, path, &mut files, &mut ignored)
                .with_context(|| format!("{shown}: not a readable zip"))?;
        }
        files.sort();
        ignored.sort();
        // Plausible writes one file per table: two would count their
        // common days twice.
        for pair in files.windows(2) {
            anyhow::ensure!(
                pair[0].0 != pair[1].0,
                "{shown}: two files for the {} table ({} and {}): import one export at a time",
                pair[0].0.name(),
                pair[0].1.shown(),
                pair[1].1.shown()
            );
        }
        for table in Table::REQUIRED {
            anyhow::ensure!(
                files.iter().any(|(t, _)| *t == table),
                "{shown}: no {} file (imported_{}.csv, or with its dates: \
                 imported_{}_20240101_20241231.csv): is it Plausible's CSV export?",
                table.name(),
                table.name(),
                table.name()
            );
        }
        Ok(Export { files, ignored })
    }

    /// Tables the export has no file for (their figures stay empty).
    pub fn missing(&self) -> Vec<&'static str> {
        Table::ALL
            .into_iter()
            .filter(|t| !self.files.iter().any(|(f, _)| f == t))
            .map(Table::name)
            .collect()
    }

    /// The export's content as [`Export::check`] hashes it, read whole
    /// without checking a row (to find an import's key again).
    pub fn content(&self) -> anyhow::Result<blake3::Hash> {
        let mut content = blake3::Hasher::new();
        for (table, source) in &self.files {
            let (mut read, hasher) = Hashing::new(source.open()?);
            std::io::copy(&mut read, &mut std::io::sink())
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", source.shown()))?;
            content.update(table.name().as_bytes());
            content.update(hasher.borrow().finalize().as_bytes());
        }
        Ok(content.finalize())
    }
}

/// A zip's table files (at any depth; their names alone count), each
/// stored or deflated and not encrypted; other entries are named in
/// `ignored`.
fn entries(
    file: std::fs::File,
    path: &Path,
    files: &mut Vec<(Table, TableSource)>,
    ignored: &mut Vec<String>,
) -> anyhow::Result<()> {
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))?;
    for i in 0..zip.len() {
        let entry = zip.by_index_raw(i)?;
        if entry.is_dir() {
            continue;
        }
        let name = entry
            .name()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let Some(table) = Table::of_file_name(&name) else {
            ignored.push(entry.name().to_owned());
            continue;
        };
        anyhow::ensure!(
            !entry.encrypted(),
            "{name} is encrypted: export it again without a password"
        );
        let deflated = match entry.compression() {
            zip::CompressionMethod::Stored => false,
            zip::CompressionMethod::Deflated => true,
            other => anyhow::bail!("{name} is compressed with {other}: not read (only deflate)"),
        };
        anyhow::ensure!(
            !files
                .iter()
                .any(|(_, s)| matches!(s, TableSource::Entry(e) if e.name == name)),
            "{name} is in the zip twice: import one export at a time"
        );
        let start = entry
            .data_start()
            .ok_or_else(|| anyhow::anyhow!("{name}: where its data starts is unknown"))?;
        files.push((
            table,
            TableSource::Entry(ZipEntry {
                zip: path.to_owned(),
                name,
                start,
                compressed: entry.compressed_size(),
                size: entry.size(),
                crc: entry.crc32(),
                deflated,
            }),
        ));
    }
    Ok(())
}

/// What the first pass over an export found: every row checked, each
/// file hashed (with its table's name, in [`Table::ALL`]'s order).
pub struct Checked {
    pub rows: u64,
    /// The local days its rows are on.
    pub days: std::collections::BTreeSet<NaiveDate>,
    pub content: blake3::Hash,
    /// Columns not read, per file.
    pub notes: Vec<String>,
}

impl Export {
    /// The first pass: nothing is written; a bad row is an error naming
    /// its file, line and column.
    pub fn check(&self, site: &Site) -> anyhow::Result<Checked> {
        let mut checked = Checked {
            rows: 0,
            days: Default::default(),
            content: blake3::hash(b""),
            notes: Vec::new(),
        };
        let mut content = blake3::Hasher::new();
        for (table, source) in &self.files {
            let (read, hasher) = Hashing::new(source.open()?);
            let shown = source.shown();
            for row in rows(read, &shown, *table, site.clone(), &mut checked.notes)? {
                if let Ok(day) = row? {
                    checked.days.insert(day.day);
                }
                checked.rows += 1;
            }
            content.update(table.name().as_bytes());
            content.update(hasher.borrow().finalize().as_bytes());
        }
        checked.content = content.finalize();
        Ok(checked)
    }

    /// The second pass: every file's rows again, in the same order.
    pub fn rows(
        &self,
        site: &Site,
    ) -> anyhow::Result<impl Iterator<Item = Result<Result<DayRow, Skipped>, RowError>> + use<>>
    {
        let mut notes = Vec::new();
        let mut files = Vec::new();
        for (table, source) in &self.files {
            let shown = source.shown();
            files.push(rows(
                source.open()?,
                &shown,
                *table,
                site.clone(),
                &mut notes,
            )?);
        }
        Ok(files.into_iter().flatten())
    }
}

/// A day's figure, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct DayRow {
    /// The day, in the site's zone.
    pub day: NaiveDate,
    /// Its first instant.
    pub at: DateTime<Utc>,
    /// The bucket key of the page it counts on.
    pub page: String,
    pub counts: DayCounts,
    pub visitors: u64,
    /// The day's pool of made-up visitor ids.
    pub seed: u64,
}

/// [`Counts`] with its name owned.
#[derive(Debug, Clone, PartialEq)]
pub enum DayCounts {
    Views(u32),
    SiteVisits {
        visits: u32,
        bounces: u32,
        duration_secs: u64,
    },
    Entries {
        visits: u32,
        bounces: u32,
        duration_secs: u64,
    },
    Exits(u32),
    /// A breakdown row: its names (a source's with its medium and
    /// campaign), each counted `n` times.
    Labels {
        names: Vec<(Dimension, String)>,
        n: u32,
        /// An event's: what Plausible's script extensions sent with it.
        properties: Properties,
    },
}

impl DayCounts {
    /// Its figures added up, durations in seconds too.
    fn total(&self) -> u128 {
        match self {
            DayCounts::Views(n) | DayCounts::Exits(n) | DayCounts::Labels { n, .. } => {
                u128::from(*n)
            }
            DayCounts::SiteVisits {
                visits,
                bounces,
                duration_secs,
            }
            | DayCounts::Entries {
                visits,
                bounces,
                duration_secs,
            } => u128::from(*visits) + u128::from(*bounces) + u128::from(*duration_secs),
        }
    }
}

impl DayRow {
    fn figure(&self, sign: i32) -> Figure<'_> {
        let counts = match &self.counts {
            DayCounts::Views(n) => Counts::Views(*n),
            &DayCounts::SiteVisits {
                visits,
                bounces,
                duration_secs,
            } => Counts::SiteVisits {
                visits,
                bounces,
                duration_secs,
            },
            &DayCounts::Entries {
                visits,
                bounces,
                duration_secs,
            } => Counts::Entries {
                visits,
                bounces,
                duration_secs,
            },
            DayCounts::Exits(n) => Counts::Exits(*n),
            DayCounts::Labels {
                names,
                n,
                properties,
            } => Counts::Labels {
                names,
                n: *n,
                properties,
            },
        };
        Figure {
            page: &self.page,
            at: self.at,
            counts,
            visitors: self.visitors,
            seed: self.seed,
            sign,
        }
    }
}

impl super::Counted for DayRow {
    fn at(&self) -> DateTime<Utc> {
        self.at
    }

    fn day(&self) -> NaiveDate {
        self.day
    }

    fn summarize(&self, summary: &mut Summary) {
        match &self.counts {
            DayCounts::Views(n) => summary.views += u64::from(*n),
            DayCounts::SiteVisits { visits, .. } => {
                summary.visits += u64::from(*visits);
                summary.visitors += self.visitors;
                summary.days += 1;
            }
            DayCounts::Labels { names, n, .. } if names[0].0 == Dimension::Event => {
                summary.events += u64::from(*n)
            }
            _ => {}
        }
    }

    fn visitors(&self) -> u64 {
        self.visitors
    }

    async fn apply_batch(
        writer: &BucketWriter,
        rows: &[&Self],
        advance: &Advance<'_>,
        sign: i32,
    ) -> Result<(), ApplyError> {
        let figures: Vec<Figure<'_>> = rows.iter().map(|r| r.figure(sign)).collect();
        writer.apply_figures(&figures, advance).await.map(drop)
    }
}

/// One table file's reading.
pub struct TableFormat {
    table: Table,
    site: Site,
    tz: Tz,
    home: String,
    /// `pageviews`, or in older exports `visits`: what a breakdown counts.
    count_column: &'static str,
    site_seed: u64,
    /// The file's figures so far, added up ([`MAX_FILE_TOTAL`]).
    total: u128,
    /// The day being read, and the made-up visitor ids its rows took so
    /// far per page (or event).
    pools: (Option<NaiveDate>, HashMap<String, u64>),
}

/// A table file's rows, each checked; `notes` gets the columns it does
/// not read.
pub fn rows<R: Read>(
    read: R,
    file: &str,
    table: Table,
    site: Site,
    notes: &mut Vec<String>,
) -> Result<Rows<TableFormat, R>, RowError> {
    let mut unread = Vec::new();
    let csv = CsvFile::open(read, file, table.required(), table.optional(), |header| {
        for column in header.iter().map(str::trim) {
            let read_or_known = [table.required(), table.optional(), table.known()]
                .iter()
                .any(|list| list.contains(&column));
            if !read_or_known {
                unread.push(column.to_owned());
            }
        }
        Ok(())
    })?;
    if !unread.is_empty() {
        notes.push(format!("{file}: columns not read: {}", unread.join(", ")));
    }
    let count_column = match table.dimension() {
        Some(Dimension::Event) => "events",
        Some(_) if csv.has("pageviews") => "pageviews",
        Some(_) if csv.has("visits") => {
            notes.push(format!(
                "{file}: no pageviews column (an export before Plausible 2.1): \
                 its breakdown counts visits"
            ));
            "visits"
        }
        Some(_) => {
            return Err(RowError::new(
                file,
                1,
                "pageviews",
                "this required column is missing (or, in older exports, visits)",
            ))
        }
        None => "",
    };
    let home = Page::new(&site.domain, &PagePath::root()).into_string();
    let site_seed = u64::from_le_bytes(
        blake3::hash(site.id.to_string().as_bytes()).as_bytes()[..8]
            .try_into()
            .expect("8 bytes"),
    );
    let tz = site.time_zone.tz();
    Ok(Rows::new(
        csv,
        TableFormat {
            table,
            site,
            tz,
            home,
            count_column,
            site_seed,
            total: 0,
            pools: (None, HashMap::new()),
        },
    ))
}

impl Format for TableFormat {
    type Counted = DayRow;

    fn row<R: Read>(
        &mut self,
        csv: &CsvFile<R>,
        line: u64,
        record: &csv::StringRecord,
    ) -> Result<Result<DayRow, Skipped>, RowError> {
        let error =
            |column: &str, message: String| RowError::new(csv.file(), line, column, message);
        let cell = |name: &str| csv.cell(record, name);
        let number = |column: &str| -> Result<u64, RowError> {
            let raw = cell(column);
            raw.parse::<u64>()
                .map_err(|_| error(column, format!("not a whole number of 0 or more: {raw:?}")))
        };
        // At most i32::MAX, so that a figure taken back (a deletion) is
        // one too.
        let count = |column: &str| -> Result<u32, RowError> {
            number(column)?
                .try_into()
                .ok()
                .filter(|n: &u32| i32::try_from(*n).is_ok())
                .ok_or_else(|| error(column, "over 2,147,483,647 in one day".into()))
        };
        // A part can be no more than its whole (visitors than visits, …).
        let at_most = |column: &str, whole: &str, limit: u32| -> Result<u64, RowError> {
            let n = number(column)?;
            if n > u64::from(limit) {
                return Err(error(
                    column,
                    format!("{n} is over the row's {limit} {whole}"),
                ));
            }
            Ok(n)
        };
        // Visitors are made-up ids added one by one: bounded by the row's
        // whole and by MAX_ROW_VISITORS, so that no row can take long.
        let visitors_of = |whole: &str, limit: u32| -> Result<u64, RowError> {
            let n = at_most("visitors", whole, limit)?;
            if n > MAX_ROW_VISITORS {
                return Err(error(
                    "visitors",
                    format!("{n} is over the {MAX_ROW_VISITORS} visitors a row may count"),
                ));
            }
            Ok(n)
        };
        // At most a day a visit: what is over is not a duration.
        let duration = |visits: u32| -> Result<u64, RowError> {
            let seconds = number("visit_duration")?;
            if seconds > u64::from(visits) * 86_400 {
                return Err(error(
                    "visit_duration",
                    format!("{seconds} seconds is over a day for each of the {visits} visits"),
                ));
            }
            Ok(seconds)
        };
        let raw_day = cell("date");
        let day = Some(raw_day)
            .filter(|raw| raw.len() == 10 && starts_with_plain_date(raw))
            .and_then(|raw| NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok())
            .ok_or_else(|| error("date", format!("not a date (YYYY-MM-DD): {raw_day:?}")))?;
        day_in_window(day).map_err(|e| error("date", e))?;
        let page_of = |column: &str| -> Result<String, RowError> {
            let path = site_path(&self.site, cell(column)).map_err(|e| error(column, e))?;
            Ok(Page::new(&self.site.domain, &path).into_string())
        };
        let mut page = self.home.clone();
        let mut visitors = 0;
        let counts = match self.table {
            Table::Visitors => {
                // Read to be checked; the day's views are the pages file's.
                count("pageviews")?;
                let visits = count("visits")?;
                // Every visitor of a day made a visit that day (a visit
                // need not have a page view: one may start with an event).
                visitors = visitors_of("visits", visits)?;
                let bounces = count("bounces")?;
                if bounces > visits {
                    return Err(error(
                        "bounces",
                        format!("{bounces} is over the {visits} visits"),
                    ));
                }
                DayCounts::SiteVisits {
                    visits,
                    bounces,
                    duration_secs: duration(visits)?,
                }
            }
            Table::Pages => {
                page = page_of("page")?;
                let views = count("pageviews")?;
                visitors = visitors_of("pageviews", views)?;
                DayCounts::Views(views)
            }
            Table::EntryPages => {
                page = page_of("entry_page")?;
                let visits = count("entrances")?;
                let bounces = at_most("bounces", "entrances", visits)? as u32;
                DayCounts::Entries {
                    visits,
                    bounces,
                    duration_secs: duration(visits)?,
                }
            }
            Table::ExitPages => {
                page = page_of("exit_page")?;
                DayCounts::Exits(count("exits")?)
            }
            Table::CustomEvents => {
                let name = EventName::parse(cell("name"))
                    .map_err(|e| error("name", format!("not an event name: {e}")))?;
                let events = count("events")?;
                if csv.has("visitors") {
                    visitors = visitors_of("events", events)?;
                }
                // What Plausible's script extensions sent with the events
                // (the link's or file's address, the missing page's path),
                // under the keys its live events carry them in; blank for
                // other events. Held to the properties' rules: a value
                // past its bound or like an email address is left out.
                let pairs = [("url", "link_url"), ("path", "path")]
                    .into_iter()
                    .filter(|(_, column)| csv.has(column))
                    .map(|(key, column)| (key.to_owned(), cell(column).to_owned()))
                    .collect();
                DayCounts::Labels {
                    names: vec![(Dimension::Event, name.into_string())],
                    n: events,
                    properties: Properties::of(pairs, Rules::Lenient).unwrap_or_default(),
                }
            }
            table => {
                let dimension = table.dimension().expect("a breakdown table");
                let name = match table {
                    Table::Sources => self.source(cell("source"), cell("referrer")),
                    Table::Locations => country(cell("country"))
                        .ok_or_else(|| {
                            error(
                                "country",
                                format!("not a country code: {:?}", cell("country")),
                            )
                        })?
                        .as_str()
                        .to_owned(),
                    Table::Devices => device(cell("device")).to_owned(),
                    Table::Browsers => browser(cell("browser")).to_owned(),
                    _ => os(cell("operating_system")).to_owned(),
                };
                let n = count(self.count_column)?;
                let mut labels = vec![(dimension, name)];
                if table == Table::Sources {
                    for (column, dimension) in [
                        ("utm_medium", Dimension::Medium),
                        ("utm_campaign", Dimension::Campaign),
                    ] {
                        if let Some(value) = Source::from_utm(cell(column)) {
                            labels.push((dimension, value.into_string()));
                        }
                    }
                }
                DayCounts::Labels {
                    names: labels,
                    n,
                    properties: Properties::EMPTY,
                }
            }
        };
        self.total += counts.total();
        if self.total > MAX_FILE_TOTAL {
            return Err(error(
                "",
                format!(
                    "the file's figures (views, visits, durations in seconds, …) add up \
                     to over {MAX_FILE_TOTAL} by this row: more than any site's history"
                ),
            ));
        }
        let at = crate::reports::local::midnight(day, self.tz);
        // Several rows of one page (or event) and day (Plausible writes
        // one per hostname) have visitors of their own: each row takes
        // the ids after the ones the rows before it took, so that they
        // add up. Kept for the day being read (Plausible writes a table
        // by date), so memory stays a day's pages.
        if self.pools.0 != Some(day) {
            self.pools = (Some(day), HashMap::new());
        }
        let pool = match &counts {
            DayCounts::Labels { names, .. } => format!("{page}\n{}", names[0].1),
            _ => page.clone(),
        };
        let taken = self.pools.1.entry(pool).or_default();
        let first_id = *taken;
        *taken = taken.saturating_add(visitors);
        let seed = crate::domain::sketch::mix(
            self.site_seed ^ (day.to_epoch_days() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        )
        .wrapping_add(first_id);
        Ok(Ok(DayRow {
            day,
            at,
            page,
            counts,
            visitors,
            seed,
        }))
    }
}

impl TableFormat {
    /// Plausible's source name (`Google`, `Direct / None`), as a source
    /// by the pixel's rules: the name as a `utm_source` would be, else the
    /// referrer's host, else direct.
    fn source(&self, name: &str, referrer: &str) -> String {
        let referrer = Some(referrer)
            .filter(|r| !r.is_empty())
            .map(|r| match r.contains("://") {
                true => r.to_owned(),
                false => format!("https://{r}"),
            });
        let name = Some(name).filter(|n| !matches!(*n, "" | "Direct / None" | "(none)"));
        Source::of_view(name, referrer.as_deref(), |h| self.site.owns_host(h)).into_string()
    }
}

/// A location row's country: a code, or empty ("unknown").
fn country(code: &str) -> Option<Country> {
    match code {
        "" | "ZZ" | "XX" => Some(Country::UNKNOWN),
        c if c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic()) => {
            Some(Country::from_code(c))
        }
        _ => None,
    }
}

/// Plausible's device names as Tickertape's classes.
fn device(plausible: &str) -> &'static str {
    match plausible.to_ascii_lowercase().as_str() {
        "desktop" | "laptop" => DeviceClass::Desktop.as_str(),
        "mobile" => DeviceClass::Mobile.as_str(),
        "tablet" => DeviceClass::Tablet.as_str(),
        _ => UNKNOWN,
    }
}

/// Plausible's browser names as Tickertape's (`classify::BROWSERS`).
fn browser(plausible: &str) -> &'static str {
    let ours = match plausible {
        "Microsoft Edge" => "Edge",
        "Samsung Browser" => "Samsung Internet",
        "Yandex Browser" => "Yandex",
        "DuckDuckGo Privacy Browser" => "DuckDuckGo",
        "Chrome Webview" | "Android Webview" => "Android WebView",
        "Opera GX" | "Opera Touch" | "Opera Mini" => "Opera",
        "Firefox Mobile" | "Firefox iOS" => "Firefox",
        "Mobile Safari" | "Safari Mobile" => "Safari",
        "Huawei Browser Mobile" => "Huawei Browser",
        other => other,
    };
    BROWSERS
        .iter()
        .copied()
        .find(|b| *b == ours)
        .unwrap_or(UNKNOWN)
}

/// Plausible's operating systems as Tickertape's
/// (`classify::OPERATING_SYSTEMS`).
fn os(plausible: &str) -> &'static str {
    let ours = match plausible {
        "Mac" | "Mac OS" | "macOS" => "macOS",
        "GNU/Linux" | "Ubuntu" | "Fedora" | "Debian" | "Linux" => "Linux",
        "Chrome OS" | "Chromium OS" => "ChromeOS",
        "KaiOS" => "KaiOS",
        other => other,
    };
    OPERATING_SYSTEMS
        .iter()
        .copied()
        .find(|o| *o == ours)
        .unwrap_or(UNKNOWN)
}

impl super::workflow::Importer for Export {
    const KIND: &'static str = KIND;
    const DAYS: super::workflow::Days = super::workflow::Days::SiteZone;
    type Counted = DayRow;

    fn reopen(
        _record: &crate::storage::imports::ImportRecord,
        file: &Path,
        _moved: super::workflow::Moved<'_>,
    ) -> anyhow::Result<Self> {
        Export::open(file)
    }

    /// Also what to tell after the rows are in: the files not read, the
    /// tables without a file, the columns left out.
    fn check(&self, site: &Site) -> anyhow::Result<super::workflow::Checked> {
        let Checked {
            rows,
            days,
            content,
            notes: columns,
        } = Export::check(self, site)?;
        let mut notes: Vec<String> = self
            .ignored
            .iter()
            .map(|file| format!("{file} is no table of Plausible's export: not read"))
            .collect();
        let missing = self.missing();
        if missing.contains(&Table::Pages.name()) {
            notes.push(
                "no pages file: the site's visits, visitors, bounces and visit \
                 durations are imported, its page views are not (a day's views are its \
                 pages' views)"
                    .to_owned(),
            );
        }
        if !missing.is_empty() {
            notes.push(format!(
                "no file for {}: those figures stay empty",
                missing.join(", ")
            ));
        }
        notes.extend(columns);
        Ok(super::workflow::Checked {
            rows,
            days,
            content,
            notes,
        })
    }

    fn content(&self) -> anyhow::Result<blake3::Hash> {
        Export::content(self)
    }

    fn rows(&self, site: &Site) -> anyhow::Result<super::workflow::CheckedRows<'_, DayRow>> {
        Ok(Box::new(Export::rows(self, site)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_found_by_its_table_name_with_or_without_prefix_and_dates() {
        for (name, table) in [
            ("imported_pages.csv", Some(Table::Pages)),
            ("pages.csv", Some(Table::Pages)),
            (
                "imported_entry_pages_20240101_20241231.csv",
                Some(Table::EntryPages),
            ),
            (
                "imported_devices_20261013_20261018.csv",
                Some(Table::Devices),
            ),
            (
                "operating_systems_20240101_20241231.csv",
                Some(Table::OperatingSystems),
            ),
            ("imported_pages_2024_2025.csv", None),
            ("imported_pagesx.csv", None),
            ("imported_pages.csv.gz", None),
            ("README.txt", None),
        ] {
            assert_eq!(Table::of_file_name(name), table, "{name}");
        }
    }

    fn site() -> Site {
        use crate::domain::DomainName;
        Site {
            id: crate::domain::SiteId::new(),
            name: "Example".into(),
            domain: DomainName::parse("example.com").unwrap(),
            aliases: vec![],
            owners: vec![],
            created_at: Utc::now(),
            time_zone: crate::domain::TimeZone::UTC,
            totals_complete: true,
            page_cap: crate::domain::PageCapSetting::Default,
            unconfirmed_hosts: vec![],
            goals: vec![],
        }
    }

    /// The rows of a visitors file of `rows`, each `date,visitors,…`.
    fn visitors_file(rows: &[&str]) -> Result<Vec<DayRow>, RowError> {
        let text = format!(
            "date,visitors,pageviews,bounces,visits,visit_duration\n{}\n",
            rows.join("\n")
        );
        let read = rows_of(text.as_bytes(), Table::Visitors)?;
        read.map(|r| r.map(|r| r.expect("counted"))).collect()
    }

    fn rows_of(text: &[u8], table: Table) -> Result<Rows<TableFormat, &[u8]>, RowError> {
        rows(
            text,
            "imported_visitors.csv",
            table,
            site(),
            &mut Vec::new(),
        )
    }

    #[test]
    fn each_figure_is_bounded_and_so_is_a_files_total() {
        let most = "2026-11-20,10000000,2147483647,0,2147483647,185542587014400";
        let ok = visitors_file(&[most]).unwrap();
        assert_eq!(ok.len(), 1);
        for (row, column) in [
            ("2026-11-20,1,1,0,1,86401", "visit_duration"),
            ("2026-11-20,2,2,0,1,10", "visitors"),
            ("2026-11-20,10000001,20000000,0,20000000,0", "visitors"),
            ("2026-11-20,1,2147483648,0,1,0", "pageviews"),
            ("2026-11-20,1,1,2,1,0", "bounces"),
            ("2026-1-5,1,1,0,1,0", "date"),
        ] {
            let e = visitors_file(&[row]).unwrap_err();
            assert_eq!((e.line, e.column.as_str()), (2, column), "{row}: {e}");
        }
        // Rows each within their bounds, adding up past 2^53: refused on
        // the row that passes it.
        let many = vec![most; 60];
        let e = visitors_file(&many).unwrap_err();
        let rows_fit = MAX_FILE_TOTAL / (185_542_587_014_400 + 2_147_483_647);
        assert_eq!(e.line, rows_fit as u64 + 2, "{e}");
        assert!(e.message.contains("add up"), "{e}");
    }

    #[test]
    fn peers_names_become_ours() {
        assert_eq!(browser("Microsoft Edge"), "Edge");
        assert_eq!(browser("Chrome"), "Chrome");
        assert_eq!(browser("Netscape"), UNKNOWN);
        assert_eq!(os("Mac"), "macOS");
        assert_eq!(os("GNU/Linux"), "Linux");
        assert_eq!(os("Windows"), "Windows");
        assert_eq!(device("Laptop"), "desktop");
        assert_eq!(device("Mobile"), "mobile");
        assert_eq!(device(""), UNKNOWN);
        assert_eq!(
            country("DE").map(|c| c.as_str().to_owned()),
            Some("DE".into())
        );
        assert_eq!(
            country("").map(|c| c.as_str().to_owned()),
            Some(UNKNOWN.into())
        );
        assert!(country("Germany").is_none());
    }
}

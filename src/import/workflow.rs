//! An import and its delete, whatever the source: the two passes, the
//! overlap decision, the record in `imports`, the days a replacing import
//! clears, and taking an import back. What differs between the peers'
//! exports (their files, their key, the days their rows are on) is behind
//! [`Importer`], implemented once per source; the workflow names no kind.
//! The command line gives the files and prints; this module neither
//! parses flags nor writes to the console ([`Watch`] is told what to show).

use anyhow::Context;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeSet;
use std::path::Path;

use super::reading::{Hashing, RowError};
use super::{Counted, Skipped, Summary};
use crate::domain::SiteId;
use crate::storage::imports::{self, ImportRecord, ReplacedDay};
use crate::storage::progress::{self, Stream};
use crate::storage::sites::{self, Site};
use crate::storage::{Resolution, Store};

/// A file's rows in order, each checked: counted or skipped, or where the
/// file cannot be read.
pub type CheckedRows<'a, T> = Box<dyn Iterator<Item = Result<Result<T, Skipped>, RowError>> + 'a>;

/// One peer's export, as an import reads it (GoatCounter's, Umami's,
/// Plausible's): the workflow's only view of a source. Below it,
/// [`super::reading::Format`] reads one record of one CSV file; an
/// export may be several files (Plausible's tables) or a file and what
/// decides its rows (Umami's sessions).
pub trait Importer: Sized {
    /// The kind its imports record (`imports.kind`, and part of the key).
    const KIND: &'static str;
    /// Which days its rows are on.
    const DAYS: Days;
    /// What a valid row counts.
    type Counted: Counted;

    /// The export an import of `record` read, to take it back: its file is
    /// now at `file`, and `moved` says where the files beside it (Umami's
    /// sessions and event data) are when they have moved.
    fn reopen(record: &ImportRecord, file: &Path, moved: Moved<'_>) -> anyhow::Result<Self>;

    /// The first pass: every row checked, the content hashed; nothing
    /// written. A bad row is an error naming its file, line and column.
    fn check(&self, site: &Site) -> anyhow::Result<Checked>;

    /// The content as [`check`](Self::check) hashes it, read whole
    /// without checking a row (to find an import's key again).
    fn content(&self) -> anyhow::Result<blake3::Hash>;

    /// The rows again, in the order the first pass read them.
    fn rows(&self, site: &Site) -> anyhow::Result<CheckedRows<'_, Self::Counted>>;

    /// What the import records besides its file.
    fn beside(&self) -> Beside {
        Beside::default()
    }
}

/// The days an export's rows are on, which the overlap with live figures
/// is decided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Days {
    /// UTC days: rows at their own time (hits).
    Utc,
    /// The site's days: figures of whole days in the site's zone, counted
    /// at each day's first instant (the import records their span).
    SiteZone,
}

impl Days {
    /// A day's first instant and the next day's.
    fn span(self, site: &Site, day: NaiveDate) -> (DateTime<Utc>, DateTime<Utc>) {
        let next = day.succ_opt().unwrap_or(day);
        match self {
            Days::Utc => {
                let utc = |d: NaiveDate| d.and_time(chrono::NaiveTime::MIN).and_utc();
                (utc(day), utc(next))
            }
            Days::SiteZone => {
                let tz = site.time_zone.tz();
                (
                    crate::reports::local::midnight(day, tz),
                    crate::reports::local::midnight(next, tz),
                )
            }
        }
    }

    /// Of `days`, those the site has live views on.
    async fn with_views(
        self,
        store: &Store,
        site: &Site,
        days: &BTreeSet<NaiveDate>,
    ) -> anyhow::Result<Vec<NaiveDate>> {
        Ok(match self {
            Days::Utc => {
                imports::days_with_views(store, site.domain.as_str(), days.clone()).await?
            }
            Days::SiteZone => {
                let tz = site.time_zone.tz();
                imports::local_days_with_views(store, site.domain.as_str(), tz, days, |d| {
                    crate::reports::local::midnight(d, tz)
                })
                .await?
            }
        })
    }
}

/// What the first pass found.
#[derive(Debug, Clone)]
pub struct Checked {
    pub rows: u64,
    /// The days its counted rows are on ([`Importer::DAYS`]).
    pub days: BTreeSet<NaiveDate>,
    pub content: blake3::Hash,
    /// What to tell once the rows are in (files not read, columns left
    /// out), in order.
    pub notes: Vec<String>,
}

/// Where the files beside an export are, when given (Umami's sessions and
/// event data): to import, or to delete an import whose files have moved.
#[derive(Debug, Default, Clone, Copy)]
pub struct Moved<'a> {
    pub sessions: Option<&'a Path>,
    pub event_data: Option<&'a Path>,
}

/// What decides an import's rows besides its file, and what recognises
/// them (Umami's).
#[derive(Debug, Default, Clone)]
pub struct Beside {
    /// The path, as recorded, of another file the rows depend on (Umami's
    /// sessions); its hash is part of the content.
    pub also_file: Option<String>,
    /// The path, as recorded, of a third (Umami's event data); its hash
    /// is part of the content too.
    pub data_file: Option<String>,
    /// Umami's `--from-website`.
    pub from_website: Option<String>,
    /// What identifies the rows whatever the other files (Umami's event
    /// ids): another import of the site with the same is refused.
    pub rows_key: Option<String>,
}

/// What an import does with rows on days the site already has views on
/// (decided when it first starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Leave those days as they are: their rows are skipped and counted in
    /// the summary.
    Skip,
    /// Add the rows to what the days have.
    Add,
    /// Clear what the days have, then apply the rows; only days already
    /// over, and only over whole UTC hours.
    Replace,
}

/// What the workflow tells as it goes; the command line prints it.
pub trait Watch {
    /// A line to read ("note: …" on the console).
    fn note(&mut self, note: &str);
    /// Rows of `file` applied so far, of `count`.
    fn progress(&mut self, file: &str, done: u64, count: u64);
    /// The pass [`progress`](Self::progress) told of has ended.
    fn pass_done(&mut self);
}

/// A completed import: what it read and wrote, and its record.
pub struct Imported {
    /// The file, as given.
    pub name: String,
    pub summary: Summary,
    pub record: ImportRecord,
}

/// A completed delete.
pub struct Deleted {
    pub record: ImportRecord,
    pub summary: Summary,
    /// The import had never completed: only the rows it had written were
    /// taken back.
    pub incomplete: bool,
}

/// Imports `source` (read from `file`) into `site`: the first pass checks
/// every row and hashes the content, then the rows are applied exactly
/// once (a rerun, or a run after a crash, adds only what is not in yet).
pub async fn import<S: Importer>(
    store: &Store,
    site: &Site,
    source: &S,
    file: &Path,
    overlap: Overlap,
    watch: &mut impl Watch,
) -> anyhow::Result<Imported> {
    let name = file.display().to_string();
    let Checked {
        rows: count,
        days,
        content,
        notes,
    } = source.check(site)?;
    let key = super::key(S::KIND, &site.id, &content);
    let Beside {
        also_file,
        data_file,
        from_website,
        rows_key,
    } = source.beside();
    // A rerun keeps the first run's decision: nothing to decide.
    let first_run = imports::get(store, &key).await?.is_none();
    if let (true, Some(rows_key)) = (first_run, &rows_key) {
        let site_id = site.id.to_string();
        if let Some(other) = imports::list(store, Some(&site_id))
            .await?
            .into_iter()
            .find(|o| o.rows_key.as_ref() == Some(rows_key) && o.key != key)
        {
            anyhow::bail!(
                "{name} holds the same events (by their ids) as import {} of {}, which \
                 read them with other files beside it (sessions, event data): they would count \
                 twice, or their days be skipped as taken. To import them this way, \
                 `tickertape import delete {}` first",
                other.key,
                other.file,
                other.key
            );
        }
    }
    let live = match overlap {
        _ if !first_run => Vec::new(),
        Overlap::Skip | Overlap::Replace => S::DAYS.with_views(store, site, &days).await?,
        Overlap::Add => Vec::new(),
    };
    let (live, replaced) = overlapping_days(overlap, live, |d| S::DAYS.span(site, d), watch)?;
    let daily = match S::DAYS {
        Days::Utc => None,
        Days::SiteZone => days
            .first()
            .zip(days.last())
            .map(|(first, last)| (S::DAYS.span(site, *first).0, S::DAYS.span(site, *last).1)),
    };
    // A rerun keeps the first run's days: its own rows are not live.
    let record = start_import(
        store,
        site,
        ImportRecord {
            also_file,
            data_file,
            from_website,
            rows_key,
            skipped_days: live,
            daily,
            replaced,
            ..new_record((S::KIND, S::DAYS), site, file, &key, count)
        },
    )
    .await?;
    // Second pass: the same rows, applied in batches.
    let mut unreadable = None;
    let checked = source
        .rows(site)?
        .map_while(|row| row.map_err(|e| unreadable = Some(e)).ok());
    let summary = apply_checked(
        store,
        &record,
        (&key, 1, None),
        (&name, count),
        checked,
        watch,
    )
    .await?;
    if let Some(e) = unreadable {
        anyhow::bail!("{name} changed while it was imported: {e}");
    }
    for note in &notes {
        watch.note(note);
    }
    finish_import(store, &name, count, &summary, &record).await?;
    Ok(Imported {
        name,
        summary,
        record,
    })
}

/// The import recorded under `key`.
pub async fn recorded(store: &Store, key: &str) -> anyhow::Result<ImportRecord> {
    imports::get(store, key).await?.with_context(|| {
        format!("no import has the key {key}: `tickertape import list` shows them")
    })
}

/// Takes `record` back through its source `S`, exactly, and forgets it:
/// its file is read again (from where the import read it, or `file`;
/// Umami's other files from `moved`) and must be the same. A delete killed
/// midway and run again completes. [`super::delete`] finds `S` by the kind
/// the import recorded.
pub async fn delete_as<S: Importer>(
    store: &Store,
    record: ImportRecord,
    file: Option<&Path>,
    moved: Moved<'_>,
    watch: &mut impl Watch,
) -> anyhow::Result<Deleted> {
    let delete = Delete {
        store,
        record: &record,
        file,
        moved,
    };
    let (summary, until) = delete.of::<S>(watch).await?;
    Ok(Deleted {
        record,
        summary,
        incomplete: until.is_some(),
    })
}

/// A delete of `record`, its files where they are given.
struct Delete<'a> {
    store: &'a Store,
    record: &'a ImportRecord,
    file: Option<&'a Path>,
    moved: Moved<'a>,
}

impl Delete<'_> {
    /// The delete through `S`; the summary of what was taken back, and how
    /// far each stream of an import that never completed had got.
    async fn of<S: Importer>(
        &self,
        watch: &mut impl Watch,
    ) -> anyhow::Result<(Summary, Option<[u64; 3]>)> {
        let Delete {
            store,
            record,
            file,
            moved,
        } = *self;
        // An import that never completed (killed, or refused on a rerun
        // by rules newer than it) is taken back as far as each of its
        // streams got: its file is read that far, and rows after it need
        // not pass today's rules.
        let until = match record.finished_at {
            Some(_) => None,
            None => {
                let mut until = [0u64; 3];
                for stream in Stream::ALL {
                    until[stream.index()] = progress::position(store, &record.key, 0, stream)
                        .await?
                        .unwrap_or(0);
                }
                Some(until)
            }
        };
        let limit = until.map_or(u64::MAX, |u| u.into_iter().max().unwrap_or(0));
        let site = recorded_site(store, &record.site).await?;
        let now = context(S::DAYS, &site);
        anyhow::ensure!(
            record.context.is_empty() || record.context == now,
            "import {} ran with {} and the site now has {now}: its rows would not land \
             where they did, so it cannot be taken back exactly (set the site back, or \
             run the Tickertape version it ran with)",
            record.key,
            record.context
        );
        // A replacing import that has not cleared its days yet may clear
        // some of this one's rows after they are taken back here.
        if let Some(replacing) = imports::list(store, Some(&record.site))
            .await?
            .into_iter()
            .find(|o| o.key != record.key && !o.replaced.is_empty() && !o.cleared)
        {
            anyhow::bail!(
                "import {} replaces days of this site and has not cleared them yet: \
                 run it again to complete it first",
                replacing.key
            );
        }
        let file = file.map_or_else(|| record.file.clone().into(), Path::to_owned);
        let name = file.display().to_string();
        // The deletion's own progress: a delete killed midway resumes, and
        // one of a later import of the same file is another.
        let delete_key = format!(
            "delete/{}/{}",
            record.key,
            record.started_at.timestamp_millis()
        );
        let source = S::reopen(record, &file, moved)?;
        if super::key(S::KIND, &site.id, &source.content()?) != record.key {
            anyhow::bail!(
                "{name} is not the file import {} read (its content differs): \
                 give that file with --file",
                record.key
            );
        }
        // Every row it read checked, as far as it got.
        let mut count = 0u64;
        for row in source.rows(&site)?.take(limit_rows(limit)) {
            let _counted_or_skipped = row?;
            count += 1;
        }
        let rows = source
            .rows(&site)?
            .take(limit_rows(limit))
            .map_while(Result::ok);
        // From here the import may be half taken back: it must not run
        // again until the delete ends.
        imports::mark_deleting(store, &record.key).await?;
        let summary = apply_checked(
            store,
            record,
            (&delete_key, -1, until),
            (&name, count),
            rows,
            watch,
        )
        .await?;
        anyhow::ensure!(summary.rows == count, "{name} changed while it was read");
        if let (Some(first), Some(last)) = (summary.first, summary.last) {
            imports::drop_emptied_sketches(store, site.domain.as_str(), first, last).await?;
        }
        crate::storage::imported_properties::drop_emptied(store, site.domain.as_str()).await?;
        imports::forget(store, record, &delete_key).await?;
        Ok((summary, until))
    }
}

/// The site an import recorded (by its id).
async fn recorded_site(store: &Store, id: &str) -> anyhow::Result<Site> {
    let parsed = SiteId::parse(&id.to_ascii_lowercase()).ok();
    sites::list(store)
        .await?
        .into_iter()
        .find(|s| Some(&s.id) == parsed.as_ref())
        .with_context(|| format!("no site has the id {id}"))
}

/// Rows as far as `limit` (an incomplete import's furthest stream).
fn limit_rows(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// What decides where an import's rows land besides its file: the
/// site's hosts (sources, pages given as addresses), for days of the
/// site's zone that zone, and the version, whose User-Agent rules name
/// browsers and systems. `import delete` must run under the same.
fn context(days: Days, site: &Site) -> String {
    let mut hosts: Vec<String> = std::iter::once(&site.domain)
        .chain(&site.aliases)
        .map(|h| h.to_string())
        .collect();
    hosts.sort();
    let zone = match days {
        Days::SiteZone => site.time_zone.name(),
        Days::Utc => "-",
    };
    format!(
        "hosts={} zone={zone} version={}",
        hosts.join(","),
        env!("CARGO_PKG_VERSION")
    )
}

/// A file's path as an import records it: absolute, so that `import
/// delete` finds it from anywhere.
pub fn recorded_path(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_owned())
        .display()
        .to_string()
}

/// An import's content from the hash of its rows' file, with what else
/// decides its rows: another file's hash (Umami's sessions), and Umami's
/// `--from-website` (imports without it keep the key they had before it
/// existed).
pub fn file_content(
    mut hasher: blake3::Hasher,
    also: Option<blake3::Hash>,
    from_website: Option<&str>,
) -> blake3::Hash {
    if let Some(other) = also {
        hasher.update(other.as_bytes());
    }
    if let Some(website) = from_website {
        hasher.update(b"from-website ");
        hasher.update(website.as_bytes());
    }
    hasher.finalize()
}

/// The first pass over one file of hits (`rows` reads it from a reader):
/// every row checked, the UTC days of the counted ones, and the content
/// hashed with what else decides its rows ([`file_content`]).
pub fn check_file<I>(
    file: &Path,
    rows: impl FnOnce(Box<dyn std::io::Read>) -> Result<I, RowError>,
    also: Option<blake3::Hash>,
    from_website: Option<&str>,
) -> anyhow::Result<Checked>
where
    I: Iterator<Item = Result<super::Row, RowError>>,
{
    let (read, hasher) = Hashing::new(open(file)?);
    let mut count = 0u64;
    let mut days = BTreeSet::new();
    for row in rows(Box::new(read))? {
        if let Ok(hit) = row? {
            days.insert(hit.at.date_naive());
        }
        count += 1;
    }
    let hasher = hasher.borrow().clone();
    Ok(Checked {
        rows: count,
        days,
        content: file_content(hasher, also, from_website),
        notes: Vec::new(),
    })
}

/// A file's content as [`check_file`] hashes it, read whole.
pub fn file_hash(
    file: &Path,
    also: Option<blake3::Hash>,
    from_website: Option<&str>,
) -> anyhow::Result<blake3::Hash> {
    let (mut read, hasher) = Hashing::new(open(file)?);
    std::io::copy(&mut read, &mut std::io::sink())
        .with_context(|| format!("reading {}", file.display()))?;
    let hasher = hasher.borrow().clone();
    Ok(file_content(hasher, also, from_website))
}

/// Opens an export's file ([`super::reading::open`]), naming it when it
/// cannot be read.
pub fn open(file: &Path) -> anyhow::Result<Box<dyn std::io::Read>> {
    super::reading::open(file).with_context(|| format!("reading {}", file.display()))
}

/// The record of an import of `file` into `site` starting now, with
/// nothing skipped, replaced or counted yet.
fn new_record(
    (kind, days): (&str, Days),
    site: &Site,
    file: &Path,
    key: &str,
    rows: u64,
) -> ImportRecord {
    let now = Utc::now();
    ImportRecord {
        key: key.to_owned(),
        kind: kind.into(),
        site: site.id.to_string(),
        file: recorded_path(file),
        also_file: None,
        data_file: None,
        rows,
        skipped_days: Vec::new(),
        started_at: now,
        finished_at: None,
        views: 0,
        events: 0,
        daily: None,
        context: context(days, site),
        deleting: false,
        replaced: Vec::new(),
        cleared: false,
        cleared_by_others: Vec::new(),
        part: crate::storage::buckets::PART_IMPORT,
        from_website: None,
        skip_after: Some(now),
        rows_key: None,
        properties: true,
    }
}

fn refuse_while_deleting(record: &ImportRecord) -> anyhow::Result<()> {
    anyhow::ensure!(
        !record.deleting,
        "import {} is being deleted: run `tickertape import delete {}` to finish first",
        record.key,
        record.key
    );
    Ok(())
}

/// Records the import's start (a rerun gets the first run's record),
/// refuses it while a delete of it runs, and clears the days it replaces;
/// returns the record in force.
async fn start_import(
    store: &Store,
    site: &Site,
    record: ImportRecord,
) -> anyhow::Result<ImportRecord> {
    let record = imports::begin(store, &record).await?;
    refuse_while_deleting(&record)?;
    clear_replaced(store, &record, site).await?;
    Ok(record)
}

/// Splits the days that have live figures into those skipped and those
/// replaced, as `overlap` says: `span` gives a day's first instant and the
/// next day's. Only a day already over is replaced (live hits may still
/// come on one that is not), and only over whole UTC hours.
fn overlapping_days(
    overlap: Overlap,
    live: Vec<NaiveDate>,
    span: impl Fn(NaiveDate) -> (DateTime<Utc>, DateTime<Utc>),
    watch: &mut impl Watch,
) -> anyhow::Result<(Vec<NaiveDate>, Vec<ReplacedDay>)> {
    if overlap != Overlap::Replace {
        return Ok((live, Vec::new()));
    }
    let now = Utc::now();
    let mut skipped = Vec::new();
    let mut replaced = Vec::new();
    for day in live {
        let (from, to) = span(day);
        let whole_hours = [from, to].iter().all(|t| Resolution::Hour.aligned(*t));
        anyhow::ensure!(
            whole_hours,
            "--overlap replace: {day} does not start on a whole UTC hour in the site's zone; \
             use --overlap skip or add"
        );
        if to <= now {
            replaced.push(ReplacedDay { day, from, to });
        } else {
            watch.note(&format!(
                "{day} is not over yet: its rows are skipped, not replaced"
            ));
            skipped.push(day);
        }
    }
    Ok((skipped, replaced))
}

/// Clears the days `record` replaces, unless done: before any row is
/// applied, so a rerun after a crash clears again what it may have half
/// cleared, and never what the import added.
async fn clear_replaced(store: &Store, record: &ImportRecord, site: &Site) -> anyhow::Result<()> {
    if record.cleared || record.replaced.is_empty() {
        return Ok(());
    }
    // Other imports of the site learn the spans first: a delete of one
    // of them must not take back again what the clear takes out.
    let spans: Vec<_> = record.replaced.iter().map(|r| (r.from, r.to)).collect();
    if let Err(why) = imports::hand_over_spans(store, &record.key, &record.site, &spans).await? {
        anyhow::bail!("--overlap replace: {why}");
    }
    for r in &record.replaced {
        crate::storage::clear::clear_span(store, &site.domain, &record.site, r.from, r.to)
            .await
            .with_context(|| format!("clearing {} to replace it", r.day))?;
    }
    imports::mark_cleared(store, &record.key).await?;
    Ok(())
}

/// The second pass: `rows`, every one checked by the first, applied in
/// batches as `record` says (its part, its skipped days and spans) under
/// `key`, with `sign` −1 taking them back; `until`, for an import that
/// never completed, how far each of its streams got. `watch` is told the
/// rows done.
async fn apply_checked<T: Counted>(
    store: &Store,
    record: &ImportRecord,
    (key, sign, until): (&str, i32, Option<[u64; 3]>),
    (name, count): (&str, u64),
    rows: impl Iterator<Item = Result<T, Skipped>>,
    watch: &mut impl Watch,
) -> anyhow::Result<Summary> {
    let batch_rows = std::env::var("TICKERTAPE_IMPORT_BATCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(super::BATCH_ROWS);
    let skips = super::Skips::of(record);
    let pass = super::Pass {
        key,
        skips: &skips,
        batch_rows,
        sign,
        part: record.part,
        properties: record.properties,
        until,
    };
    let summary =
        super::apply(store, &pass, rows, |done| watch.progress(name, done, count)).await?;
    watch.pass_done();
    Ok(summary)
}

/// Checks that the second pass read what the first did and marks the
/// import complete.
async fn finish_import(
    store: &Store,
    name: &str,
    count: u64,
    summary: &Summary,
    record: &ImportRecord,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        summary.rows == count,
        "{name} changed while it was imported: {count} rows checked, {} read",
        summary.rows
    );
    imports::finish(
        store,
        &record.key,
        summary.views,
        summary.events,
        Utc::now(),
    )
    .await?;
    // A stored page summary is kept while its span's views stand; an
    // import may add entries and exits to days whose views it leaves as
    // they are (days without pages rows): the site's are made again.
    crate::storage::page_summaries::delete_site(store, &record.site).await?;
    Ok(())
}

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
//! This module holds what a row counts and the exactly-once apply loop
//! with its progress; the bounded reading every source shares (CSV records
//! capped while streaming, decompression bounds, dates) is
//! [`reading`], and each source is its own module.

pub mod goatcounter;
pub mod plausible;
pub mod reading;
pub mod umami;
pub mod umami_data;
pub mod workflow;

mod by_kind;
pub use by_kind::delete;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use std::collections::{BTreeMap, BTreeSet};

use crate::domain::Labels;
use crate::journal::Visit;
use crate::storage::bucket_writer::{ApplyError, BucketWriter, Carrying, Expired, Hit};
use crate::storage::imported_properties;
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
    /// What it carries besides, when its export has that (Umami's event
    /// data).
    pub carried: Option<Box<Carried>>,
}

/// What an imported hit carries of custom properties and revenue, with
/// what it adds to the imported properties' counts
/// (`storage::imported_properties`): the source decides what is a new
/// visit, since only it can tell visits apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// The first instant of its day in the site's zone: where its counts
    /// go.
    pub day: DateTime<Utc>,
    pub properties: crate::domain::Properties,
    /// Per property, in order: whether its visit sends that value (as a
    /// view's, or as this event's) for the first time that day.
    pub new_values: Vec<bool>,
    /// Whether it is its visit's first row that day: one more of the
    /// day's visits.
    pub new_visit: bool,
    /// An event's revenue.
    pub revenue: Option<crate::domain::Revenue>,
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
        let mut carrying = Carrying::default();
        // What rows carry goes with the breakdowns only.
        let carried = rows
            .iter()
            .filter(|_| advance.stream == Stream::Sources)
            .filter_map(|h| Some((h, h.carried.as_deref()?)));
        for (hit, carried) in carried {
            let event = hit.labels.get(crate::domain::Dimension::Event);
            if let (Some(event), Some(revenue)) = (event, carried.revenue) {
                carrying.revenue.push((&hit.page, hit.at, event, revenue));
            }
            // The property counts are kept as long as the day buckets.
            if !writer.keeps(crate::storage::Resolution::Day, carried.day) {
                continue;
            }
            let site = crate::storage::Subject::Site.key_of(&hit.page);
            let signed = i64::from(sign);
            if carried.new_visit {
                carrying.properties.add_day(site, carried.day, signed);
            }
            let name = event.unwrap_or(imported_properties::VIEWS);
            for ((key, value), new) in carried.properties.iter().zip(&carried.new_values) {
                let visits = i64::from(*new) * signed;
                let what = (name, key, value);
                carrying
                    .properties
                    .add_property(site, carried.day, what, signed, visits);
            }
        }
        writer
            .apply_carrying(hits, &carrying, Some(advance), sign)
            .await
            .map(drop)
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
    /// Whether its rows' custom properties are written (taken back).
    pub properties: bool,
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
        properties,
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
        .writing_part(part)
        .writing_properties(properties);
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

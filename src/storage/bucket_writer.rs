//! Applies hits to the bucket collections in ONE multi-document
//! transaction: merged per bucket, one `update` command per collection, and,
//! for journaled hits, the advance of the lane's `journal_progress`
//! document for the stream being applied, from the batch's first position
//! to the position after it.
//!
//! What a transaction writes follows its stream (`progress::Stream`,
//! [`levels`]): the views stream writes the page and site minute buckets,
//! the rollups stream the page and site hour and day buckets, the
//! breakdowns stream (`Stream::Sources`) the four breakdown collections. Writers outside the journal (demo
//! data, benchmarks, tests) write everything at once.
//!
//! The progress update matches only `position: from`, so a batch can commit
//! at most once whatever is retried: after an unknown outcome the caller
//! reads the progress document (`progress::position`) to learn whether the
//! batch is in. Nothing relies on the server remembering retryable writes.
//!
//! *Length*: the one transaction every write path uses (journal streams,
//! imports), with its retries and set-aside; splitting it would split the
//! exactly-once rule across files.

use bson::{Document, RawArrayBuf, RawDocumentBuf};
use chrono::{DateTime, Utc};
use mongodb::options::{ReadConcern, TransactionOptions};
use mongodb::ClientSession;
use std::future::IntoFuture;
use std::time::Duration;

use super::breakdowns::{self, BreakdownCounts, BreakdownIncrements};
use super::buckets::{Subject, PART_DIRECT};
use super::imported_properties;
use super::progress::{self, Advance, Stream};
use super::update::{check_reply, ReplyError, UpdateOutcome};
use super::{Increments, Resolution, Store};
use crate::domain::Labels;
use crate::journal::Visit;

/// Most statements in one `update` command: a flush normally fits in one
/// command; beyond this many buckets it is split so a command stays well
/// inside MongoDB's 16 MiB message and 100,000-statement limits.
pub const MAX_STATEMENTS_PER_COMMAND: usize = 10_000;

/// Bucket documents a breakdowns lookup takes from the server at a time:
/// what it holds of them before they are reduced to their names.
const LOOKUP_BATCH: u32 = 256;

/// Most bytes of statements in one `update` command, well inside MongoDB's
/// 16 MiB message: a sources statement can carry fifty long names.
pub const MAX_STATEMENT_BYTES_PER_COMMAND: usize = 8 << 20;

pub struct BucketWriter {
    store: Store,
    /// Which names the breakdown buckets hold, so most batches skip the
    /// lookup (see [`breakdowns::KnownNames`]).
    known_names: std::sync::Mutex<breakdowns::KnownNames>,
    /// The view levels' buckets this writer leaves out as already past
    /// retention (an import's old rows); none for live hits.
    expired: Expired,
    /// The site buckets' part this writer writes, when it is not its
    /// lane's ([`part_of`]): an import's own, so that nothing it adds can
    /// make a live lane's statement fail.
    part: Option<i32>,
    /// Whether an import's figures write their custom properties
    /// ([`BucketWriter::writing_properties`]).
    properties: bool,
}

/// Per view level, the instant before which a bucket is already past the
/// retention the database enforces (its TTL index deletes a bucket whose
/// `timestamp` is older than that): a hit or figure before it is not
/// written at that level. Breakdown buckets have no TTL index and are
/// always written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    /// In [`Resolution::ALL`] order; `None`: kept for ever.
    before: [Option<DateTime<Utc>>; 3],
}

impl Expired {
    /// `before(level)`: the level's cut-off, if its buckets expire.
    pub fn new(before: impl Fn(Resolution) -> Option<DateTime<Utc>>) -> Self {
        Self {
            before: Resolution::ALL.map(before),
        }
    }

    pub fn before(&self, level: Resolution) -> Option<DateTime<Utc>> {
        self.before[level as usize]
    }

    /// Whether the bucket of `level` that `at` falls in is written.
    pub fn keeps(&self, level: Resolution, at: DateTime<Utc>) -> bool {
        self.before(level).is_none_or(|cut| at >= cut)
    }
}

/// One view as the write path applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit<'a> {
    pub page: &'a str,
    pub at: DateTime<Utc>,
    /// Where it came from, when known (the script, or `utm_source`).
    pub source: Option<&'a str>,
    /// What it changed of its visit, when it has a visitor.
    pub visit: Option<&'a Visit>,
    /// Its breakdown labels; with an event's name it is that event, not
    /// a view.
    pub labels: Option<&'a Labels>,
}

impl Hit<'_> {
    pub fn is_event(&self) -> bool {
        self.labels
            .is_some_and(|l| l.get(crate::domain::Dimension::Event).is_some())
    }
}

impl<'a> From<(&'a str, DateTime<Utc>)> for Hit<'a> {
    fn from((page, at): (&'a str, DateTime<Utc>)) -> Self {
        Hit {
            page,
            at,
            source: None,
            visit: None,
            labels: None,
        }
    }
}

impl<'a> From<(&'a str, DateTime<Utc>, Option<&'a str>)> for Hit<'a> {
    fn from((page, at, source): (&'a str, DateTime<Utc>, Option<&'a str>)) -> Self {
        Hit {
            page,
            at,
            source,
            visit: None,
            labels: None,
        }
    }
}

/// A day's figure of an import that keeps days, not hits (Plausible's
/// export): counted at `at`, the first instant of its day in the site's
/// zone, in the minute, hour and day buckets that instant falls in, so
/// that every report adds it up as it adds up hits.
#[derive(Debug, Clone, Copy)]
pub struct Figure<'a> {
    /// The page's bucket key (`domain/path`); the site's home page for a
    /// figure of the whole site.
    pub page: &'a str,
    pub at: DateTime<Utc>,
    pub counts: Counts<'a>,
    /// The day's visitors this figure has: made-up ids `seed + 0 ..
    /// seed + visitors` (hashed), the same pool for every figure of a day,
    /// so that the site's sketch and its pages' agree.
    pub visitors: u64,
    pub seed: u64,
    /// 1, or −1 to take the figure back (an import's deletion).
    pub sign: i32,
}

/// What a [`Figure`] adds, and where.
#[derive(Debug, Clone, Copy)]
pub enum Counts<'a> {
    /// Views of the page: its buckets and the site's, as hits add them
    /// (the site's day total moves with its pages'); visitors in the
    /// page's sketch.
    Views(u32),
    /// The site's visits: site buckets only, visitors in its sketch.
    SiteVisits {
        visits: u32,
        bounces: u32,
        duration_secs: u64,
    },
    /// Visits that entered on the page: page buckets only.
    Entries {
        visits: u32,
        bounces: u32,
        duration_secs: u64,
    },
    /// Visits that left from the page: page buckets only.
    Exits(u32),
    /// Breakdown names, each counted `n` times (an event's: `n` events,
    /// its visitors converted), and the custom properties an event's
    /// `n` events carried (`storage::imported_properties`).
    Labels {
        names: &'a [(crate::domain::Dimension, String)],
        n: u32,
        properties: &'a crate::domain::properties::Properties,
    },
}

impl Figure<'_> {
    /// The made-up visitor ids: a day's pool, shared by its figures. None
    /// when the figure is taken back (a sketch cannot take ids back).
    pub fn visitor_ids(&self) -> impl Iterator<Item = u64> {
        let seed = self.seed;
        let n = if self.sign > 0 { self.visitors } else { 0 };
        (0..n).map(move |i| crate::domain::sketch::mix(seed.wrapping_add(i)))
    }

    fn add_to(&self, inc: &mut Increments) {
        let site = inc.is_site();
        let none = std::iter::empty();
        let sign = self.sign;
        // Figures are at most i32::MAX (the parser's rule); saturating
        // all the same, so no figure can wrap into a count of the other
        // sign.
        let views = |n: u32| i32::try_from(n).unwrap_or(i32::MAX).saturating_mul(sign);
        let counters = |c: [i64; 4]| c.map(|n| n.saturating_mul(i64::from(sign)));
        match self.counts {
            Counts::Views(n) if site => inc.add_figures(self.page, self.at, views(n), [0; 4], none),
            Counts::Views(n) => {
                inc.add_figures(self.page, self.at, views(n), [0; 4], self.visitor_ids())
            }
            Counts::SiteVisits {
                visits,
                bounces,
                duration_secs,
            } if site => inc.add_figures(
                self.page,
                self.at,
                0,
                counters(visit_counters(visits, bounces, duration_secs, 0)),
                self.visitor_ids(),
            ),
            Counts::Entries {
                visits,
                bounces,
                duration_secs,
            } if !site => inc.add_figures(
                self.page,
                self.at,
                0,
                counters(visit_counters(visits, bounces, duration_secs, 0)),
                none,
            ),
            Counts::Exits(n) if !site => inc.add_figures(
                self.page,
                self.at,
                0,
                counters(visit_counters(0, 0, 0, n)),
                none,
            ),
            _ => {}
        }
    }

    /// What the figure adds to the imported properties: an event's
    /// properties, with its events and its visitors as visits; the site's
    /// visits of the day, which a value's share is of.
    fn add_properties(&self, into: &mut imported_properties::PropertyCounts) {
        let site = Subject::Site.key_of(self.page);
        let sign = i64::from(self.sign);
        let visitors = i64::try_from(self.visitors).unwrap_or(i64::MAX);
        match self.counts {
            Counts::Labels {
                names,
                n,
                properties,
            } => {
                let Some((_, event)) = names
                    .iter()
                    .find(|(d, _)| *d == crate::domain::Dimension::Event)
                else {
                    return;
                };
                for (key, value) in properties.iter() {
                    into.add_property(
                        site,
                        self.at,
                        (event, key, value),
                        i64::from(n) * sign,
                        visitors * sign,
                    );
                }
            }
            Counts::SiteVisits { visits, .. } => {
                into.add_day(site, self.at, i64::from(visits) * sign)
            }
            _ => {}
        }
    }
}

/// What imported hits carry besides themselves (Umami's event data): the
/// events' revenue (page, time, event), and their custom properties'
/// counts for `storage::imported_properties`, written with the breakdowns.
#[derive(Debug, Default)]
pub struct Carrying<'a> {
    pub revenue: Vec<(&'a str, DateTime<Utc>, &'a str, crate::domain::Revenue)>,
    pub properties: imported_properties::PropertyCounts,
}

/// [`super::buckets::VisitFields::COUNTERS`] from a peer's figures.
fn visit_counters(visits: u32, bounces: u32, duration_secs: u64, exits: u32) -> [i64; 4] {
    [
        i64::from(visits),
        i64::from(visits) - i64::from(bounces.min(visits)),
        i64::try_from(duration_secs).unwrap_or(i64::MAX),
        i64::from(exits),
    ]
}

#[derive(Debug, Default, Clone)]
pub struct FlushReport {
    pub hits: usize,
    /// Per collection written: pages and site totals in
    /// [`Resolution::ALL`] order, then the source collections (each only
    /// when it had something to write); per transaction, in order, when
    /// [`BucketWriter::apply_direct`] split the batch.
    pub outcomes: Vec<UpdateOutcome>,
}

impl FlushReport {
    pub fn statements(&self) -> usize {
        self.outcomes.iter().map(|o| o.applied).sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Nothing was committed: the batch can be sent again as it is.
    #[error("the batch was not applied")]
    NotApplied(#[source] TxnError),
    /// The commit was sent but no answer came back: it may or may not be
    /// in. Only the progress document can tell.
    #[error("the outcome of the commit is unknown")]
    Unknown(#[source] TxnError),
    /// The progress document was not at the batch's first position: the
    /// batch (or a later one) is already in.
    #[error("the journal progress is not where this batch starts")]
    ProgressMoved,
    /// The server refused statements for what their buckets hold (an
    /// `$inc` past the largest NumberLong, a counter of another type: see
    /// [`super::update::REFUSED_CODES`]). Nothing was committed (a write
    /// error aborts the transaction), and sent again the same statements
    /// would be refused again: the batch can go in without them.
    #[error("the database refused {} statement(s) on {collection} for what their buckets hold", buckets.len())]
    Refused {
        collection: String,
        /// The refused statements' filters (`q`), one bucket each.
        buckets: Vec<Document>,
        #[source]
        source: ReplyError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    #[error(transparent)]
    Driver(#[from] mongodb::error::Error),
    #[error(transparent)]
    Reply(#[from] ReplyError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl TxnError {
    /// A conflict with a concurrent write (another lane's batch on the same
    /// bucket, a preallocation insert): retrying at once is right.
    pub fn is_transient(&self) -> bool {
        match self {
            TxnError::Driver(e) => {
                e.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR)
                    || matches!(*e.kind, mongodb::error::ErrorKind::Write(_))
            }
            TxnError::Reply(ReplyError::StatementsFailed {
                duplicates_only, ..
            }) => *duplicates_only,
            _ => false,
        }
    }
}

impl BucketWriter {
    pub fn new(store: &Store) -> Self {
        Self {
            store: store.clone(),
            known_names: Default::default(),
            expired: Expired::default(),
            part: None,
            properties: false,
        }
    }

    /// A writer of an import's figures that writes (or, with the other
    /// sign, takes back) the custom properties they carry: not for an
    /// import recorded before they were written.
    pub fn writing_properties(mut self, properties: bool) -> Self {
        self.properties = properties;
        self
    }

    /// A writer of the site buckets' `part` whatever its advance's lane
    /// (an import's: [`super::buckets::PART_IMPORT`], or the part an
    /// older import was written to, for its deletion).
    pub fn writing_part(mut self, part: i32) -> Self {
        self.part = Some(part);
        self
    }

    /// The site buckets' part written with `advance`.
    fn part(&self, advance: Option<&Advance<'_>>) -> i32 {
        self.part.unwrap_or_else(|| part_of(advance))
    }

    /// A writer that leaves out the view buckets `expired` says are past
    /// retention (see [`Expired`]).
    pub fn skipping(mut self, expired: Expired) -> Self {
        self.expired = expired;
        self
    }

    /// Merges `hits` per bucket and applies them, with `advance` if given,
    /// in one transaction: what `advance`'s stream writes, or everything
    /// without one.
    pub async fn apply<'a>(
        &self,
        hits: impl IntoIterator<Item = Hit<'a>>,
        advance: Option<&Advance<'_>>,
    ) -> Result<FlushReport, ApplyError> {
        self.apply_signed(hits, advance, 1).await
    }

    /// [`Self::apply`], or with `sign` −1 the hits' exact opposite (an
    /// import's deletion; visitor sketches keep their registers).
    pub async fn apply_signed<'a>(
        &self,
        hits: impl IntoIterator<Item = Hit<'a>>,
        advance: Option<&Advance<'_>>,
        sign: i32,
    ) -> Result<FlushReport, ApplyError> {
        self.apply_carrying(hits, &Carrying::default(), advance, sign)
            .await
    }

    /// Whether this writer keeps `level`'s buckets at `at` (see
    /// [`Self::skipping`]).
    pub fn keeps(&self, level: Resolution, at: DateTime<Utc>) -> bool {
        self.expired.keeps(level, at)
    }

    /// [`Self::apply_signed`] for imported hits with what they carry: its
    /// revenue and properties go with the breakdowns (the properties only
    /// for a writer [`Self::writing_properties`]), signed as the hits.
    pub async fn apply_carrying<'a>(
        &self,
        hits: impl IntoIterator<Item = Hit<'a>>,
        carrying: &Carrying<'_>,
        advance: Option<&Advance<'_>>,
        sign: i32,
    ) -> Result<FlushReport, ApplyError> {
        let stream = advance.map(|a| a.stream);
        let mut increments = view_increments(stream, self.part(advance));
        if sign < 0 {
            increments.iter_mut().for_each(Increments::mark_taken_back);
        }
        let with_breakdowns = matches!(stream, None | Some(Stream::Sources));
        // Breakdowns are merged per page and hour first, as their applier
        // merges them (only direct writers get here with them: the
        // appliers send views and breakdowns apart).
        let mut counted = BreakdownCounts::default();
        let none = Labels::default();
        let mut count = 0;
        for hit in hits {
            count += 1;
            if !hit.is_event() {
                for inc in &mut increments {
                    if self.expired.keeps(inc.resolution(), hit.at) {
                        inc.add_hit_signed(hit.page, hit.at, hit.visit, sign);
                    }
                }
            }
            if with_breakdowns {
                let labels = hit.labels.unwrap_or(&none);
                let visitor = hit.visit.map(|v| v.visitor);
                counted.add_hit_signed(hit.page, hit.at, hit.source, labels, visitor, sign);
            }
        }
        let mut others = Vec::new();
        if with_breakdowns {
            for &(page, at, event, revenue) in &carrying.revenue {
                counted.add_revenue_signed(page, at, event, revenue, sign);
            }
            if self.properties && !carrying.properties.is_empty() {
                let statements = carrying.properties.raw_statements().map_err(unencodable)?;
                others.push((imported_properties::COLLECTION, statements));
            }
        }
        if count == 0 && advance.is_none() {
            return Ok(FlushReport::default());
        }
        let by_source = breakdown_increments(self.part(advance), counted.iter());
        self.transact(&increments, &by_source, others, advance)
            .await
            .map(|outcomes| FlushReport {
                hits: count,
                outcomes,
            })
    }

    /// [`Self::apply`] for an import's day figures.
    pub async fn apply_figures(
        &self,
        figures: &[Figure<'_>],
        advance: &Advance<'_>,
    ) -> Result<FlushReport, ApplyError> {
        let mut increments = view_increments(Some(advance.stream), self.part(Some(advance)));
        if figures.iter().any(|f| f.sign < 0) {
            increments.iter_mut().for_each(Increments::mark_taken_back);
        }
        for inc in &mut increments {
            let level = inc.resolution();
            for figure in figures.iter().filter(|f| self.expired.keeps(level, f.at)) {
                figure.add_to(inc);
            }
        }
        let mut counted = BreakdownCounts::default();
        let mut properties = imported_properties::PropertyCounts::default();
        if advance.stream == Stream::Sources {
            for figure in figures {
                if self.properties && self.expired.keeps(Resolution::Day, figure.at) {
                    figure.add_properties(&mut properties);
                }
                if let Counts::Labels { names, n, .. } = figure.counts {
                    for (dimension, name) in names {
                        let converted = (*dimension == crate::domain::Dimension::Event)
                            .then(|| figure.visitor_ids())
                            .into_iter()
                            .flatten();
                        let n = i64::from(n).saturating_mul(i64::from(figure.sign));
                        counted.add_n(figure.page, figure.at, *dimension, name, n, converted);
                    }
                }
            }
        }
        let by_source = breakdown_increments(self.part(Some(advance)), counted.iter());
        let others = if properties.is_empty() {
            Vec::new()
        } else {
            let statements = properties.raw_statements().map_err(unencodable)?;
            vec![(imported_properties::COLLECTION, statements)]
        };
        self.transact(&increments, &by_source, others, Some(advance))
            .await
            .map(|outcomes| FlushReport {
                hits: figures.len(),
                outcomes,
            })
    }

    /// Applies a batch of `hits` journaled hits already merged per bucket
    /// (the levels `advance`'s stream writes: [`view_increments`]), with
    /// its advance.
    pub async fn apply_merged(
        &self,
        increments: &[Increments],
        hits: usize,
        advance: &Advance<'_>,
    ) -> Result<FlushReport, ApplyError> {
        self.transact(increments, &[], Vec::new(), Some(advance))
            .await
            .map(|outcomes| FlushReport { hits, outcomes })
    }

    /// Applies a breakdowns batch of `hits` journaled hits, already merged
    /// per page and hour (`breakdowns::BreakdownCounts`),
    /// with its advance.
    pub async fn apply_breakdowns<'a>(
        &self,
        views: impl Iterator<Item = (&'a str, DateTime<Utc>, &'a breakdowns::PageHour)>,
        hits: usize,
        advance: &Advance<'_>,
    ) -> Result<FlushReport, ApplyError> {
        let by_source = breakdown_increments(self.part(Some(advance)), views);
        self.transact(&[], &by_source, Vec::new(), Some(advance))
            .await
            .map(|outcomes| FlushReport { hits, outcomes })
    }

    /// The visit store's statements of a batch, with the visits stream's
    /// progress, in one transaction. They are made here, as BSON bytes, so
    /// they are held only while the transaction runs.
    pub async fn apply_visits(
        &self,
        visits: &super::visit_log::VisitWrites,
        hits: usize,
        advance: &Advance<'_>,
    ) -> Result<FlushReport, ApplyError> {
        let statements = visits.raw_statements().map_err(unencodable)?;
        let days = raw(visits.day_statements()).map_err(unencodable)?;
        // The visit days' counters, in the same transaction: a day pack
        // is valid exactly while its day's counter is unchanged.
        let others = vec![
            (super::visit_log::PARTS, statements),
            (super::visit_days::COLLECTION, days),
        ];
        self.transact(&[], &[], others, Some(advance))
            .await
            .map(|outcomes| FlushReport { hits, outcomes })
    }

    async fn transact(
        &self,
        increments: &[Increments],
        by_source: &[BreakdownIncrements],
        others: Vec<(&'static str, Vec<RawDocumentBuf>)>,
        advance: Option<&Advance<'_>>,
    ) -> Result<Vec<UpdateOutcome>, ApplyError> {
        let limit = self.store.attempt_timeout();
        let mut session = timed(limit, self.store.client().start_session())
            .await
            .map_err(ApplyError::NotApplied)?;
        let options = TransactionOptions::builder()
            .write_concern(self.store.commit_write_concern())
            .read_concern(ReadConcern::majority())
            .max_commit_time(limit)
            .build();
        session
            .start_transaction()
            .with_options(options)
            .await
            .map_err(|e| ApplyError::NotApplied(e.into()))?;
        let body = self
            .statements(&mut session, increments, by_source, others, advance)
            .await;
        let (outcomes, written_names) = match body {
            Ok(done) => done,
            Err(e) => {
                // Best effort: the server also aborts it on its own when the
                // session goes idle.
                let _ = tokio::time::timeout(limit, session.abort_transaction()).await;
                return Err(e);
            }
        };
        timed(limit, session.commit_transaction())
            .await
            .map_err(|e| match e {
                // A commit refused as a transient transaction error (a
                // write conflict found at commit) is known not to be in:
                // the driver's label says the whole transaction may be
                // run again. Anything else may or may not have committed.
                TxnError::Driver(d)
                    if d.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR) =>
                {
                    ApplyError::NotApplied(TxnError::Driver(d))
                }
                other => ApplyError::Unknown(other),
            })?;
        let mut known = self.known_names();
        for (inc, names) in by_source
            .iter()
            .filter(|i| !i.is_empty())
            .zip(written_names)
        {
            known.learn(inc, &names);
        }
        Ok(outcomes)
    }

    fn known_names(&self) -> std::sync::MutexGuard<'_, breakdowns::KnownNames> {
        // What it holds is true whatever a panicking holder left half done.
        self.known_names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// For writers outside the journal (demo data, benchmarks, tests):
    /// retries a batch that was not applied (a conflict, a passing outage)
    /// until `deadline`. A batch the server refused (too large for its
    /// cache while other transactions hold it, too slow for the time limit)
    /// is split in halves, as the appliers do: sent again whole it could
    /// fail until the deadline. An unknown commit outcome is an error here:
    /// without a progress document it cannot be resolved. On an error, the
    /// parts before the one that failed are in.
    pub async fn apply_direct<'a, H: Copy + Into<Hit<'a>>>(
        &self,
        hits: &[H],
        deadline: tokio::time::Instant,
    ) -> Result<FlushReport, ApplyError> {
        let mut report = FlushReport::default();
        // The parts still to apply, the next one last.
        let mut parts = vec![hits];
        let mut backoff = Duration::from_millis(20);
        while let Some(part) = parts.pop() {
            match self.apply(part.iter().map(|&h| h.into()), None).await {
                Ok(done) => {
                    report.hits += done.hits;
                    report.outcomes.extend(done.outcomes);
                }
                Err(ApplyError::NotApplied(e)) if tokio::time::Instant::now() < deadline => {
                    let refused =
                        !e.is_transient() && matches!(e, TxnError::Reply(_) | TxnError::Timeout(_));
                    if refused && part.len() > 1 {
                        let (first, second) = part.split_at(part.len() / 2);
                        parts.extend([second, first]);
                        continue;
                    }
                    // A transient conflict is retried too, after a pause:
                    // retried at once it can meet the same other writer
                    // again and again on a busy server.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    parts.push(part);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    async fn statements(
        &self,
        session: &mut ClientSession,
        increments: &[Increments],
        by_source: &[BreakdownIncrements],
        others: Vec<(&'static str, Vec<RawDocumentBuf>)>,
        advance: Option<&Advance<'_>>,
    ) -> Result<(Vec<UpdateOutcome>, Vec<breakdowns::Names>), ApplyError> {
        let limit = self.store.attempt_timeout();
        let mut outcomes = Vec::with_capacity(increments.len() + by_source.len());
        let mut written_names = Vec::with_capacity(by_source.len());
        for inc in increments {
            if inc.is_empty() {
                continue;
            }
            let statements = encoded(inc.statements_as(|s| RawDocumentBuf::from_document(&s)))
                .map_err(unencodable)?;
            let outcome = self
                .update(session, inc.collection(), statements, limit)
                .await?;
            outcomes.push(outcome);
        }
        for inc in by_source.iter().filter(|i| !i.is_empty()) {
            let covered = self.known_names().covering(inc);
            let existing = match covered {
                Some(known) => known,
                None => self.look_up_names(session, inc, limit).await?,
            };
            let (statements, names) =
                inc.statements_and_names_as(&existing, |s| RawDocumentBuf::from_document(&s));
            let statements = encoded(statements).map_err(unencodable)?;
            written_names.push(names);
            let outcome = self
                .update(session, inc.collection(), statements, limit)
                .await?;
            outcomes.push(outcome);
        }
        // Other collections the batch writes (the visit store, imported
        // properties), each in one command.
        for (collection, statements) in others {
            if statements.is_empty() {
                continue;
            }
            let outcome = self.update(session, collection, statements, limit).await?;
            outcomes.push(outcome);
        }
        if let Some(advance) = advance {
            let reply = self
                .run(session, progress::advance_command(advance), limit)
                .await
                .map_err(ApplyError::NotApplied)?;
            if reply.get_document("writeConcernError").is_ok()
                || reply.get_array("writeErrors").is_ok()
            {
                return Err(ApplyError::NotApplied(
                    ReplyError::BadReply {
                        collection: progress::COLLECTION.into(),
                        detail: reply.to_string(),
                    }
                    .into(),
                ));
            }
            if super::values::number(reply.get("n")) != Some(1) {
                return Err(ApplyError::ProgressMoved);
            }
        }
        Ok((outcomes, written_names))
    }

    /// Which names `inc`'s buckets hold, read in this transaction's
    /// snapshot: the cap is decided on what commits. Everything found is
    /// remembered, the buckets of other pages at these times included.
    async fn look_up_names(
        &self,
        session: &mut ClientSession,
        inc: &BreakdownIncrements,
        limit: Duration,
    ) -> Result<breakdowns::Names, ApplyError> {
        // Each document is reduced to its names as it arrives: a lookup by
        // time alone (secantusd-rs) finds every page's bucket at the
        // batch's times, and held whole they were most of the app's memory
        // at saturation (design/applier.md, "Measured: every stream at
        // saturation").
        let existing: breakdowns::Names = timed(limit, async {
            let mut cursor = self
                .store
                .db()
                .collection::<Document>(inc.collection())
                .find(inc.lookup(self.store.is_secantus()))
                .projection(inc.projection())
                .batch_size(LOOKUP_BATCH)
                .session(&mut *session)
                .await?;
            let mut names = breakdowns::Names::new();
            while let Some(found) = cursor.next(&mut *session).await {
                if let Some((key, held)) = inc.existing_of(&found?) {
                    names.insert(key, held);
                }
            }
            Ok::<_, mongodb::error::Error>(names)
        })
        .await
        .map_err(ApplyError::NotApplied)?;
        self.known_names().learn(inc, &existing);
        Ok(existing)
    }

    /// One `update` command per collection (split beyond
    /// [`MAX_STATEMENTS_PER_COMMAND`]), every reply checked.
    async fn update(
        &self,
        session: &mut ClientSession,
        collection: &str,
        statements: Vec<RawDocumentBuf>,
        limit: Duration,
    ) -> Result<UpdateOutcome, ApplyError> {
        let mut outcome = UpdateOutcome::default();
        let sizes: Vec<usize> = commands(
            &statements,
            MAX_STATEMENTS_PER_COMMAND,
            MAX_STATEMENT_BYTES_PER_COMMAND,
        )
        .iter()
        .map(|chunk| chunk.len())
        .collect();
        let mut rest = statements.into_iter();
        for size in sizes {
            // What a refusal names: each statement's bucket.
            let mut filters = Vec::with_capacity(size);
            let mut updates = RawArrayBuf::new();
            // Each statement's bytes move into the command and are freed:
            // the batch is never held twice.
            for statement in rest.by_ref().take(size) {
                filters.push(filter_of(&statement));
                updates.push(statement);
            }
            let mut command = RawDocumentBuf::new();
            command.append("update", collection);
            command.append("updates", updates);
            command.append("ordered", false);
            let reply = timed(
                limit,
                self.store
                    .db()
                    .run_raw_command(command)
                    .session(&mut *session),
            )
            .await
            .map_err(ApplyError::NotApplied)?;
            let checked = match check_reply(collection, &reply, size) {
                Ok(checked) => checked,
                Err(e) => {
                    let filters: Vec<Document> = filters
                        .iter()
                        .map(|q| Document::try_from(q.as_ref()).unwrap_or_default())
                        .collect();
                    return Err(refused_or_not_applied(collection, &filters, e));
                }
            };
            outcome.applied += checked.applied;
            outcome.upserted += checked.upserted;
        }
        Ok(outcome)
    }

    async fn run(
        &self,
        session: &mut ClientSession,
        command: Document,
        limit: Duration,
    ) -> Result<Document, TxnError> {
        timed(limit, self.store.db().run_command(command).session(session)).await
    }
}

/// A failed update's error: [`ApplyError::Refused`] with the buckets (the
/// `filters` of the statements sent) the server refused for what they
/// hold, or a batch simply not applied (to be sent again).
fn refused_or_not_applied(collection: &str, filters: &[Document], e: ReplyError) -> ApplyError {
    let buckets: Vec<Document> = match &e {
        ReplyError::StatementsFailed { refused, .. } => refused
            .iter()
            .filter_map(|&i| filters.get(i))
            .filter(|q| !q.is_empty())
            .cloned()
            .collect(),
        ReplyError::BadReply { .. } => Vec::new(),
    };
    if buckets.is_empty() {
        return ApplyError::NotApplied(e.into());
    }
    ApplyError::Refused {
        collection: collection.to_owned(),
        buckets,
        source: e,
    }
}

/// Splits statements into commands of at most `count` statements and
/// `bytes` bytes (a single larger statement goes alone).
fn commands(statements: &[RawDocumentBuf], count: usize, bytes: usize) -> Vec<&[RawDocumentBuf]> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, statement) in statements.iter().enumerate() {
        let len = statement.as_bytes().len();
        if i > start && (i - start == count || size + len > bytes) {
            out.push(&statements[start..i]);
            (start, size) = (i, 0);
        }
        size += len;
    }
    if start < statements.len() {
        out.push(&statements[start..]);
    }
    out
}

/// Statements as BSON bytes. A statement held as a `Document` takes
/// several times its bytes (a map at each level), and a batch's
/// statements are all held while it commits.
fn raw(statements: Vec<Document>) -> Result<Vec<RawDocumentBuf>, bson::raw::Error> {
    statements
        .iter()
        .map(RawDocumentBuf::from_document)
        .collect()
}

/// Statements encoded as they were made, or why one could not be.
fn encoded(
    statements: Vec<Result<RawDocumentBuf, bson::raw::Error>>,
) -> Result<Vec<RawDocumentBuf>, bson::raw::Error> {
    statements.into_iter().collect()
}

/// A statement that cannot be encoded is not sent: the batch is not
/// applied, as when the driver refuses a command it cannot encode.
fn unencodable(e: bson::raw::Error) -> ApplyError {
    ApplyError::NotApplied(TxnError::Driver(e.into()))
}

/// A statement's filter (`q`), which names its bucket or visit.
fn filter_of(statement: &RawDocumentBuf) -> RawDocumentBuf {
    match statement.get_document("q") {
        Ok(q) => q.to_raw_document_buf(),
        Err(_) => RawDocumentBuf::new(),
    }
}

/// The view levels a stream writes: minutes for the views stream, hours
/// and days for the rollups, none for the sources and visits; all three for writers
/// outside the journal (`None`).
pub fn levels(stream: Option<Stream>) -> &'static [Resolution] {
    match stream {
        Some(Stream::Views) => &[Resolution::Minute],
        Some(Stream::Rollups) => &[Resolution::Hour, Resolution::Day],
        Some(Stream::Sources | Stream::Visits) => &[],
        None => &Resolution::ALL,
    }
}

/// Empty increments for the page and site buckets of `stream`'s levels,
/// the site's written as `part`.
pub fn view_increments(stream: Option<Stream>, part: i32) -> Vec<Increments> {
    let levels = levels(stream);
    levels
        .iter()
        .map(|&g| Increments::new(g))
        .chain(levels.iter().map(|&g| Increments::for_site(g, part)))
        .collect()
}

/// Site buckets are written as the writer's part (its lane), so lanes
/// never write the same site document.
pub fn part_of(advance: Option<&Advance<'_>>) -> i32 {
    advance.map_or(PART_DIRECT, |a| a.lane as i32)
}

/// The breakdown buckets' increments, from counts per page and hour.
fn breakdown_increments<'a>(
    part: i32,
    hours: impl Iterator<Item = (&'a str, DateTime<Utc>, &'a breakdowns::PageHour)>,
) -> Vec<BreakdownIncrements> {
    let mut by_bucket: Vec<BreakdownIncrements> = breakdowns::LEVELS
        .map(BreakdownIncrements::for_pages)
        .into_iter()
        .chain(breakdowns::LEVELS.map(|g| BreakdownIncrements::for_site(g, part)))
        .collect();
    for (page, hour, counts) in hours {
        for inc in &mut by_bucket {
            inc.add_page_hour(page, hour, counts);
        }
    }
    by_bucket
}

async fn timed<T>(
    limit: Duration,
    f: impl IntoFuture<Output = Result<T, mongodb::error::Error>>,
) -> Result<T, TxnError> {
    match tokio::time::timeout(limit, f.into_future()).await {
        Ok(result) => result.map_err(TxnError::Driver),
        Err(_) => Err(TxnError::Timeout(limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn statement(name_len: usize) -> RawDocumentBuf {
        let doc =
            doc! {"q": {"page": "example.com/"}, "u": {"$inc": {"x".repeat(name_len): 1_i64}}};
        RawDocumentBuf::from_document(&doc).unwrap()
    }

    fn sizes(chunks: &[&[RawDocumentBuf]]) -> Vec<usize> {
        chunks.iter().map(|c| c.len()).collect()
    }

    #[test]
    fn expired_levels_leave_out_only_what_is_before_their_cut_off() {
        use chrono::TimeZone;
        let cut = Utc.with_ymd_and_hms(2026, 8, 28, 0, 0, 0).unwrap();
        let expired = Expired::new(|g| (g == Resolution::Minute).then_some(cut));
        let before = cut - chrono::TimeDelta::seconds(1);
        assert!(!expired.keeps(Resolution::Minute, before));
        assert!(expired.keeps(Resolution::Minute, cut));
        assert!(expired.keeps(Resolution::Hour, before));
        assert!(expired.keeps(Resolution::Day, before));
        assert_eq!(expired.before(Resolution::Hour), None);
        // Live writers keep everything.
        assert!(Resolution::ALL
            .iter()
            .all(|&g| Expired::default().keeps(g, before)));
    }

    #[test]
    fn commands_split_by_count() {
        let statements: Vec<RawDocumentBuf> = (0..25).map(|_| statement(3)).collect();
        assert_eq!(sizes(&commands(&statements, 10, 1 << 20)), [10, 10, 5]);
        assert_eq!(sizes(&commands(&statements, 100, 1 << 20)), [25]);
        assert!(commands(&[], 10, 1 << 20).is_empty());
    }

    #[test]
    fn a_statement_converts_to_its_bson_bytes_and_names_its_filter() {
        let doc =
            doc! {"q": {"_id": 7_i64, "site": "example.com"}, "u": {"$inc": {"views": 1_i64}}};
        let statements = raw(vec![doc.clone()]).unwrap();
        assert_eq!(statements[0].as_bytes(), bson::to_vec(&doc).unwrap());
        let filter = Document::try_from(filter_of(&statements[0]).as_ref()).unwrap();
        assert_eq!(filter, doc! {"_id": 7_i64, "site": "example.com"});
    }

    #[test]
    fn commands_split_by_bytes_and_a_large_statement_goes_alone() {
        let one = statement(1000).as_bytes().len();
        let statements: Vec<RawDocumentBuf> = (0..6).map(|_| statement(1000)).collect();
        // Two statements fit in the byte budget, not three.
        assert_eq!(sizes(&commands(&statements, 100, one * 2 + 1)), [2, 2, 2]);
        // Smaller than one statement: each goes alone rather than never.
        assert_eq!(sizes(&commands(&statements, 100, 10)), [1, 1, 1, 1, 1, 1]);
    }
}

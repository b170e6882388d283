//! Breakdowns: what views and events are counted under beside
//! their page, in one bounded bucket document per page (and per site) and
//! hour, and per day, holding every dimension (`domain::Dimension`):
//!
//! ```text
//! breakdowns_hour / breakdowns_day            {page, timestamp, totalViews, sources: {"google%2Ecom": 3, ...}, other,
//!                                              browser: {"Firefox": 2, ...}, other_browser, os: {...}, ...,
//!                                              event: {"Signup": 1}, other_event}
//! site_breakdowns_hour / site_breakdowns_day  {site, part, timestamp, ... the same ...,
//!                                              converted: {"Signup": <visitors' sketch>},
//!                                              revenue: {"Purchase": {"EUR": {h: <10^9 ten-thousandths>, l: <ten-thousandths>, n: <events>}}}}
//! ```
//!
//! The collections had the names `sources_*` while they held sources
//! alone; a database from then is renamed at start
//! (`storage::renames`). `totalViews` is still the views with a known
//! source. One statement per
//! bucket carries every dimension, so a batch's statements do not grow with
//! the number of dimensions (docs/design/breakdowns.md: why one document
//! for all, and the measured cost of a breakdown statement).
//!
//! A bucket holds at most [`MAX_NAMES_PER_BUCKET`] distinct names per
//! dimension; the counts of any further name go to the dimension's
//! `other_*` field, so a flood of made-up values cannot grow a document
//! without bound. Which names a bucket already has is read inside the
//! applying transaction, so the cap is exact: the snapshot read and the
//! write commit together or conflict and are retried whole. Site buckets
//! are split by writer part like the site totals (`buckets::Subject`), so
//! the cap holds per part.
//!
//! A site bucket also holds, per event name it counts, the sketch of the
//! visitors who sent it (`converted`, raised with `$max` like the views'
//! `visitors`): a goal's converting visitors; and, per event name and
//! currency, the revenue its events carried (`revenue`: the amounts in
//! ten-thousandths and the events that carried one, raised with `$inc`).
//! An amount is added in two fields, its billions of ten-thousandths (`h`)
//! and the rest (`l`), so that no number of events a bucket could take
//! (about 9 × 10^9 events of the largest amount, one hour of any site)
//! overflows an `i64` that the database would then refuse to raise: a
//! refused statement sets its whole bucket aside, so one site's hostile
//! amounts must not be able to cause one.
//! An event counted under `other_event` (past the cap) has its revenue
//! left out with its name.
//!
//! This module writes the buckets; `storage::breakdown_reads` reads them
//! and `storage::kept_breakdowns` keeps long ranges' answers.
//!
//! *Length*: about 600 lines of code; the rest is its unit tests.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};

use super::buckets::{Subject, Target};
use crate::domain::dimension::{field_name, Dimension, Labels};
use crate::domain::revenue::{Currency, Revenue};
use crate::domain::sketch::Sketch;
use crate::domain::Resolution;
use crate::journal::Record;

pub const MAX_NAMES_PER_BUCKET: usize = 50;
/// The name the cap had when sources were the only dimension.
pub const MAX_SOURCES_PER_BUCKET: usize = MAX_NAMES_PER_BUCKET;

/// The field of a site bucket holding each event's converting visitors.
pub const CONVERTED: &str = "converted";

/// The field of a site bucket holding each event's revenue per currency.
pub const REVENUE: &str = "revenue";

/// How an amount is split between a revenue's `h` and `l` fields.
pub const REVENUE_SPLIT: i64 = 1_000_000_000;

/// The field every statement on a bucket raises by one: how many times
/// the bucket was written, so that a reader can tell, from this field
/// alone, whether a bucket changed since it last read the whole of it
/// (`reports::breakdowns` keeps long ranges' answers by it).
pub const WRITES: &str = "writes";

/// A random number a bucket gets when it is made: with [`WRITES`], it
/// tells a bucket from one deleted and made again (a site deleted and
/// added again under its domain) whose counter has come back to the same
/// value.
pub const GENERATION: &str = "gen";

/// The levels breakdowns are kept at: hours for the edges of a range, days
/// for the rest of it.
pub const LEVELS: [Resolution; 2] = [Resolution::Hour, Resolution::Day];

pub fn collection(subject: Subject, g: Resolution) -> &'static str {
    match (subject, g) {
        (Subject::Page, Resolution::Day) => "breakdowns_day",
        (Subject::Page, _) => "breakdowns_hour",
        (Subject::Site, Resolution::Day) => "site_breakdowns_day",
        (Subject::Site, _) => "site_breakdowns_hour",
    }
}

/// Every breakdown collection, for indexes and site deletion.
pub fn collections() -> impl Iterator<Item = (Subject, &'static str)> {
    [Subject::Page, Subject::Site]
        .into_iter()
        .flat_map(|s| LEVELS.into_iter().map(move |g| (s, collection(s, g))))
}

/// One bucket per page (or site and writer part) and time; and by time
/// first, for the writer's lookup on secantusd-rs (see
/// [`BreakdownIncrements::lookup`]).
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    let by_time = collections().map(|(subject, collection)| {
        let (name, keys) = match subject {
            Subject::Page => ("timestamp_page", doc! {"timestamp": 1, "page": 1}),
            Subject::Site => ("timestamp_site", doc! {"timestamp": 1, "site": 1}),
        };
        super::schema::IndexSpec::new(collection, name, keys)
    });
    collections()
        .map(|(subject, collection)| match subject {
            Subject::Page => super::schema::IndexSpec::new(
                collection,
                "page_timestamp",
                doc! {"page": 1, "timestamp": 1},
            )
            .unique(),
            Subject::Site => super::schema::IndexSpec::new(
                collection,
                "site_timestamp_part",
                doc! {"site": 1, "timestamp": 1, "part": 1},
            )
            .unique(),
        })
        .chain(by_time)
        .collect()
}

type Key = (String, DateTime<Utc>);

/// What one page's hour holds in a gathering batch: counts per dimension
/// and name, and per event name the sketch of the visitors who sent it.
#[derive(Debug, Default)]
pub struct PageHour {
    /// Signed: an import's deletion takes its counts back.
    pub counts: HashMap<(Dimension, String), i64>,
    pub converted: HashMap<String, Sketch>,
    /// Per event name and currency: the amounts (ten-thousandths, as
    /// [`REVENUE_SPLIT`] parts) and the events that carried one.
    pub revenue: HashMap<(String, Currency), RevenueSum>,
}

/// Revenue added up in two parts, each far from overflowing: the
/// amounts' billions of ten-thousandths and the rest.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RevenueSum {
    pub high: i64,
    pub low: i64,
    pub events: i64,
}

impl RevenueSum {
    /// One event's amount, or with `sign` −1 its opposite: Rust's division
    /// truncates toward zero, so −a splits into the negated parts of a.
    fn add_signed(&mut self, scaled: i64, sign: i32) {
        let scaled = scaled * i64::from(sign.signum());
        self.high += scaled / REVENUE_SPLIT;
        self.low += scaled % REVENUE_SPLIT;
        self.events += i64::from(sign.signum());
    }

    fn merge(&mut self, other: &RevenueSum) {
        self.high += other.high;
        self.low += other.low;
        self.events += other.events;
    }
}

/// Counts per page, hour, dimension and name: what a batch of the
/// breakdowns applier holds while it gathers, so a batch of many seconds
/// stays as small as the buckets it touches. Breakdowns are kept by hour
/// and day, so an hour's start stands for its hits. The applier ends a
/// batch at [`Self::is_full`], which bounds both its memory and its
/// transaction.
#[derive(Debug, Default)]
pub struct BreakdownCounts {
    // The keys are made up by whoever sends hits (pages, `utm_source`):
    // hashed with the standard, per-map keyed SipHash, so nobody can craft
    // names that collide (with an unkeyed hash a batch of them turns every
    // lookup into a scan).
    hours: HashMap<Key, PageHour>,
    entries: usize,
}

/// Most page-hours in one breakdowns batch (the applier may pass it by one
/// read of 4,096 hits): with their days and the site's, at most about
/// 16,000 statements (a views batch of 20,000 hits may write 60,000), and
/// the lookup's list of pages (765 bytes at most each) stays under 7 MiB.
pub const MAX_PAGE_HOURS_PER_BATCH: usize = 4_000;
/// Most (page, hour, dimension, name) counts in one breakdowns batch,
/// against a flood of made-up values: about 100 bytes each.
pub const MAX_COUNTS_PER_BATCH: usize = 200_000;

impl BreakdownCounts {
    /// Every name a journaled hit is counted under: its source and labels
    /// (an event, only its name), and an event's visitor.
    pub fn add_record(&mut self, record: &Record) {
        // An engagement is neither a view nor an event: no breakdown
        // counts it.
        if record.is_engagement() {
            return;
        }
        let visitor = record.visit.as_ref().map(|v| v.visitor);
        let source = record.source.as_deref();
        self.add_hit(&record.page, record.at, source, &record.labels, visitor);
        if let (Some(revenue), Some(event)) = (record.revenue, record.labels.get(Dimension::Event))
        {
            self.add_revenue(&record.page, record.at, event, revenue);
        }
    }

    /// An event's revenue, beside its count ([`Self::add_hit`]).
    pub fn add_revenue(&mut self, page: &str, at: DateTime<Utc>, event: &str, revenue: Revenue) {
        self.add_revenue_signed(page, at, event, revenue, 1);
    }

    /// [`Self::add_revenue`], or with `sign` −1 its exact opposite (an
    /// import's deletion: both parts and the count taken back).
    pub fn add_revenue_signed(
        &mut self,
        page: &str,
        at: DateTime<Utc>,
        event: &str,
        revenue: Revenue,
        sign: i32,
    ) {
        let hour = self
            .hours
            .entry((page.to_owned(), Resolution::Hour.floor(at)))
            .or_default();
        hour.revenue
            .entry((event.to_owned(), revenue.currency))
            .or_insert_with(|| {
                self.entries += 1;
                RevenueSum::default()
            })
            .add_signed(revenue.amount.scaled(), sign);
    }

    /// [`Self::add_record`] for a hit in parts (writers outside the journal).
    pub fn add_hit(
        &mut self,
        page: &str,
        at: DateTime<Utc>,
        source: Option<&str>,
        labels: &Labels,
        visitor: Option<u64>,
    ) {
        self.add_hit_signed(page, at, source, labels, visitor, 1);
    }

    /// [`Self::add_hit`], or with `sign` −1 its opposite (an import's
    /// deletion; a converting visitor is not taken back).
    pub fn add_hit_signed(
        &mut self,
        page: &str,
        at: DateTime<Utc>,
        source: Option<&str>,
        labels: &Labels,
        visitor: Option<u64>,
        sign: i32,
    ) {
        let hour = self
            .hours
            .entry((page.to_owned(), Resolution::Hour.floor(at)))
            .or_default();
        let mut count = |dimension: Dimension, name: &str| {
            let n = hour
                .counts
                .entry((dimension, name.to_owned()))
                .or_insert_with(|| {
                    self.entries += 1;
                    0
                });
            *n = n.saturating_add(i64::from(sign));
        };
        if let Some(event) = labels.get(Dimension::Event) {
            count(Dimension::Event, event);
            if let Some(visitor) = visitor.filter(|_| sign > 0) {
                hour.converted
                    .entry(event.to_owned())
                    .or_default()
                    .insert(visitor);
            }
            return;
        }
        if let Some(source) = source {
            count(Dimension::Source, source);
        }
        for (dimension, name) in labels.iter() {
            count(dimension, name);
        }
    }

    /// `n` views of `page` at `at` under one dimension's name (writers
    /// outside the journal, tests).
    pub fn add(&mut self, page: String, at: DateTime<Utc>, dimension: Dimension, name: &str) {
        self.add_n(&page, at, dimension, name, 1, []);
    }

    /// `n` counts of one dimension's name on `page` at `at` (a day's
    /// figure of an import), and for an event the visitors who sent it.
    pub fn add_n(
        &mut self,
        page: &str,
        at: DateTime<Utc>,
        dimension: Dimension,
        name: &str,
        n: i64,
        converted: impl IntoIterator<Item = u64>,
    ) {
        let hour = self
            .hours
            .entry((page.to_owned(), Resolution::Hour.floor(at)))
            .or_default();
        let count = hour
            .counts
            .entry((dimension, name.to_owned()))
            .or_insert_with(|| {
                self.entries += 1;
                0
            });
        *count = count.saturating_add(n);
        if dimension == Dimension::Event {
            let mut converted = converted.into_iter().peekable();
            if converted.peek().is_some() {
                let sketch = hour.converted.entry(name.to_owned()).or_default();
                for visitor in converted {
                    sketch.insert(visitor);
                }
            }
        }
    }

    /// The batch should be applied now, whatever its window says.
    pub fn is_full(&self) -> bool {
        self.hours.len() >= MAX_PAGE_HOURS_PER_BATCH || self.entries >= MAX_COUNTS_PER_BATCH
    }

    pub fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, DateTime<Utc>, &PageHour)> {
        self.hours
            .iter()
            .map(|((page, hour), counts)| (page.as_str(), *hour, counts))
    }
    /// Takes out of the batch every page's hour that counts in the bucket
    /// `q` (the filter of a statement on `collection`) selects, at every
    /// level: for a statement the database refuses for what its bucket
    /// holds, so that the rest of the batch can go in. Its key, start and
    /// about the hits it carried (per page's hour, the most counted
    /// dimension's views, and its events); `None` when no hour of the
    /// batch counts there.
    pub fn set_aside(
        &mut self,
        collection: &str,
        q: &Document,
    ) -> Option<super::buckets::SetAside> {
        let (subject, g) = [Subject::Page, Subject::Site]
            .into_iter()
            .flat_map(|s| LEVELS.map(|g| (s, g)))
            .find(|&(s, g)| self::collection(s, g) == collection)?;
        let key = q.get_str(subject.key_field()).ok()?.to_owned();
        let start = q.get_datetime("timestamp").ok()?.to_chrono();
        let target = Target::pages(g);
        let target = Target { subject, ..target };
        let mut hits = 0_i64;
        let before = self.hours.len();
        self.hours.retain(|(page, hour), counts| {
            let (k, t) = target.bucket_of(page, *hour);
            if k != key || t != start {
                return true;
            }
            let mut by_dimension: HashMap<Dimension, i64> = HashMap::new();
            for ((dimension, _), n) in &counts.counts {
                let sum = by_dimension.entry(*dimension).or_default();
                *sum = sum.saturating_add(*n);
            }
            let events = by_dimension.remove(&Dimension::Event).unwrap_or(0);
            let views = by_dimension.into_values().max().unwrap_or(0);
            hits = hits.saturating_add(views.saturating_add(events));
            false
        });
        (self.hours.len() < before).then_some(super::buckets::SetAside {
            key,
            start,
            views: hits,
        })
    }
}

/// A bucket's share of a batch: counts per dimension and field name, and
/// the converting visitors per event field name (site buckets only).
#[derive(Debug, Default)]
struct BucketCounts {
    names: HashMap<(Dimension, String), i64>,
    converted: HashMap<String, Sketch>,
    /// Per event field name: per currency, the amounts and events.
    revenue: HashMap<String, HashMap<Currency, RevenueSum>>,
}

/// A batch's counts per bucket, dimension and name (by field name).
#[derive(Debug)]
pub struct BreakdownIncrements {
    target: Target,
    buckets: HashMap<Key, BucketCounts>,
}

impl BreakdownIncrements {
    /// Page buckets.
    pub fn for_pages(resolution: Resolution) -> Self {
        Self::to(Target::pages(resolution))
    }

    /// Site buckets, written as `part`.
    pub fn for_site(resolution: Resolution, part: i32) -> Self {
        Self::to(Target::site(resolution, part))
    }

    fn to(target: Target) -> Self {
        Self {
            target,
            buckets: HashMap::new(),
        }
    }

    /// Everything one page's hour gathered.
    pub fn add_page_hour(&mut self, page: &str, hour: DateTime<Utc>, counts: &PageHour) {
        let bucket = self
            .buckets
            .entry(self.target.bucket_of(page, hour))
            .or_default();
        for ((dimension, name), n) in &counts.counts {
            let sum = bucket
                .names
                .entry((*dimension, field_name(name)))
                .or_default();
            *sum = sum.saturating_add(*n);
        }
        if self.target.subject == Subject::Site {
            for (event, sketch) in &counts.converted {
                bucket
                    .converted
                    .entry(field_name(event))
                    .or_default()
                    .merge(sketch);
            }
            for ((event, currency), sum) in &counts.revenue {
                bucket
                    .revenue
                    .entry(field_name(event))
                    .or_default()
                    .entry(*currency)
                    .or_default()
                    .merge(sum);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub fn collection(&self) -> &'static str {
        collection(self.target.subject, self.target.resolution)
    }

    /// The query that finds the buckets this batch touches (and perhaps a
    /// few more of the same keys and times: the caller ignores those).
    ///
    /// On MongoDB by keys and times. secantusd-rs scans `{page: {$in}, timestamp:
    /// {$in}}` over the unique key at a cost that grows with every bucket
    /// the pages ever had (1.4 s for 1,000 pages with a year stored, probed
    /// on the year bench's data), which halved the write path's rate with
    /// sources; by the times alone, through the `timestamp_*` index, it
    /// reads only this hour's and day's buckets. [`Self::existing`] keeps
    /// the batch's own.
    pub fn lookup(&self, by_time_only: bool) -> Document {
        let times: HashSet<DateTime<Utc>> = self.buckets.keys().map(|(_, t)| *t).collect();
        let mut q = doc! {
            "timestamp": {"$in": times.into_iter().map(bson::DateTime::from_chrono).collect::<Vec<_>>()},
        };
        if !by_time_only {
            let keys: HashSet<&str> = self.buckets.keys().map(|(k, _)| k.as_str()).collect();
            q.insert(
                self.target.subject.key_field(),
                doc! {"$in": keys.into_iter().collect::<Vec<_>>()},
            );
            if let Some(part) = self.target.part {
                q.insert("part", part);
            }
        }
        q
    }

    /// The maps of the dimensions this batch counts in (a name's own
    /// counter is decided on them), never the sketches.
    pub fn projection(&self) -> Document {
        let mut p = doc! {"_id": 0, self.target.subject.key_field(): 1, "timestamp": 1, "part": 1};
        let counted: HashSet<Dimension> = self
            .buckets
            .values()
            .flat_map(|b| b.names.keys().map(|(d, _)| *d))
            .collect();
        for dimension in counted {
            p.insert(dimension.field(), 1);
        }
        p
    }

    /// The field names each found bucket already holds, per dimension.
    pub fn existing(&self, found: &[Document]) -> Names {
        found.iter().filter_map(|d| self.existing_of(d)).collect()
    }

    /// The names one found bucket holds, per dimension: the lookup keeps
    /// these and drops the document as it reads (a lookup by time alone
    /// finds every page's bucket at those times).
    pub fn existing_of(&self, d: &Document) -> Option<(Key, BucketNames)> {
        if self.target.part.is_some_and(|p| d.get_i32("part") != Ok(p)) {
            return None;
        }
        let key = d.get_str(self.target.subject.key_field()).ok()?.to_owned();
        let at = d.get_datetime("timestamp").ok()?.to_chrono();
        let names = Dimension::ALL
            .into_iter()
            .filter_map(|dimension| Some((dimension, d.get_document(dimension.field()).ok()?)))
            .flat_map(|(dimension, map)| map.keys().map(move |name| (dimension, name.clone())))
            .collect();
        Some(((key, at), names))
    }

    /// One upsert per bucket, every dimension in it. A name the bucket
    /// already has, or that still fits under its dimension's cap, gets its
    /// own counter; the rest go to the dimension's `other_*`. Within a
    /// batch the most counted new names take the free places first (ties
    /// by name, so a retry decides the same way). Events' conversions of
    /// more than `buckets::MAX_FIELDS_PER_MAX` registers go on in further
    /// `$max` statements on the same bucket (`buckets::with_max_parts`).
    pub fn statements(&self, existing: &Names) -> Vec<Document> {
        self.statements_and_names(existing).0
    }

    /// [`Self::statements`], and the names each bucket gains once they
    /// commit: those not in `existing` given a counter of their own (what
    /// `existing` holds, [`KnownNames`] has learned already).
    pub fn statements_and_names(&self, existing: &Names) -> (Vec<Document>, Names) {
        self.statements_and_names_as(existing, |statement| statement)
    }

    /// [`Self::statements_and_names`], each statement turned by `made` as
    /// it is made (the writer keeps their BSON bytes only).
    pub fn statements_and_names_as<T>(
        &self,
        existing: &Names,
        made: impl FnMut(Document) -> T,
    ) -> (Vec<T>, Names) {
        let none = BucketNames::default();
        let mut after = Names::with_capacity(self.buckets.len());
        let statements = self
            .buckets
            .iter()
            .flat_map(|((key, start), counts)| {
                let known = existing.get(&(key.clone(), *start)).unwrap_or(&none);
                let gained = after.entry((key.clone(), *start)).or_default();
                let mut inc = Document::new();
                let mut max = Document::new();
                for dimension in Dimension::ALL {
                    let mut ordered: Vec<(&String, i64)> = counts
                        .names
                        .iter()
                        .filter(|((d, _), _)| *d == dimension)
                        .map(|((_, name), &n)| (name, n))
                        .collect();
                    if ordered.is_empty() {
                        continue;
                    }
                    ordered.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
                    let mut room = MAX_NAMES_PER_BUCKET.saturating_sub(known.count(dimension));
                    if dimension == Dimension::Source {
                        let total = ordered
                            .iter()
                            .map(|(_, n)| *n)
                            .fold(0_i64, i64::saturating_add);
                        inc.insert("totalViews", total);
                    }
                    let mut other = 0i64;
                    for (name, n) in ordered {
                        // A count taken back (an import's deletion) never
                        // takes a place: a name not in the bucket was
                        // counted in `other`, so it is taken from there.
                        let own = known.contains(dimension, name)
                            || n > 0 && {
                                let fits = room > 0;
                                room = room.saturating_sub(1);
                                if fits {
                                    gained.insert(dimension, name);
                                }
                                fits
                            };
                        if own {
                            inc.insert(format!("{}.{name}", dimension.field()), Bson::Int64(n));
                            if let Some(sketch) = counts.converted.get(name) {
                                if dimension == Dimension::Event {
                                    max.extend(sketch.max_fields(&format!("{CONVERTED}.{name}")));
                                }
                            }
                            if let Some(by) = counts.revenue.get(name) {
                                if dimension == Dimension::Event {
                                    for (currency, sum) in by {
                                        let field = format!("{REVENUE}.{name}.{currency}");
                                        inc.insert(format!("{field}.h"), Bson::Int64(sum.high));
                                        inc.insert(format!("{field}.l"), Bson::Int64(sum.low));
                                        inc.insert(format!("{field}.n"), Bson::Int64(sum.events));
                                    }
                                }
                            }
                        } else {
                            other = other.saturating_add(n);
                        }
                    }
                    if other != 0 {
                        inc.insert(dimension.other_field(), other);
                    }
                }
                inc.insert(WRITES, 1_i64);
                let generation = uuid::Uuid::new_v4().as_u64_pair().0 as i64;
                let mut update = doc! {"$inc": inc, "$setOnInsert": {GENERATION: generation}};
                if !max.is_empty() {
                    update.insert("$max", max);
                }
                super::buckets::with_max_parts(self.target.bucket_query(key, *start), update)
            })
            .map(made)
            .collect();
        (statements, after)
    }
}

/// The names one breakdown bucket holds, per dimension, each as a keyed
/// 64-bit fingerprint of its field name, kept sorted.
///
/// *Why fingerprints*: [`KnownNames`] remembers the names of every bucket a
/// writer's batches touch (at 10,000 pages, two buckets per page and
/// hour), and held as strings in a set per dimension they were the largest
/// thing the write path kept: 55 MB of a 168 MB heap peak at saturation
/// (design/applier.md, "What the write path holds"). Sixteen bytes a name
/// instead of about a hundred. The key is drawn per process
/// ([`RandomState`]), so nobody can craft a name that collides with one a
/// bucket holds; a chance collision (about 2^-58 for a full dimension)
/// would give one name a counter of its own past the cap: never a lost or
/// doubled count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BucketNames {
    held: Vec<(Dimension, u64)>,
}

/// The per-process key of the names' fingerprints.
static NAME_KEY: std::sync::LazyLock<RandomState> = std::sync::LazyLock::new(RandomState::new);

fn fingerprint(name: &str) -> u64 {
    NAME_KEY.hash_one(name)
}

impl BucketNames {
    /// How many names the bucket holds in `dimension`.
    pub fn count(&self, dimension: Dimension) -> usize {
        let start = self.held.partition_point(|(d, _)| *d < dimension);
        let end = self.held.partition_point(|(d, _)| *d <= dimension);
        end - start
    }

    pub fn contains(&self, dimension: Dimension, name: &str) -> bool {
        self.held
            .binary_search(&(dimension, fingerprint(name)))
            .is_ok()
    }

    pub fn insert(&mut self, dimension: Dimension, name: &str) {
        let entry = (dimension, fingerprint(name));
        if let Err(at) = self.held.binary_search(&entry) {
            self.held.insert(at, entry);
        }
    }

    /// Adds what `other` holds, growing by exactly what is new: a vector
    /// grown one insert at a time may double past it, and the remembered
    /// names' bound counts what an entry will take before it is added.
    pub fn extend(&mut self, other: &BucketNames) {
        let new: Vec<(Dimension, u64)> = other
            .held
            .iter()
            .filter(|e| self.held.binary_search(e).is_err())
            .copied()
            .collect();
        self.held.reserve_exact(new.len());
        for entry in new {
            if let Err(at) = self.held.binary_search(&entry) {
                self.held.insert(at, entry);
            }
        }
    }

    /// What it takes in memory.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.held.capacity() * std::mem::size_of::<(Dimension, u64)>()
    }
}

impl FromIterator<(Dimension, String)> for BucketNames {
    fn from_iter<I: IntoIterator<Item = (Dimension, String)>>(iter: I) -> Self {
        let mut held: Vec<(Dimension, u64)> = iter
            .into_iter()
            .map(|(d, name)| (d, fingerprint(&name)))
            .collect();
        held.sort_unstable();
        held.dedup();
        held.shrink_to_fit();
        BucketNames { held }
    }
}

/// Names per bucket.
pub type Names = HashMap<Key, BucketNames>;

/// Most bytes [`KnownNames`] holds before it starts over (per writer: one
/// per lane's breakdowns stream). At the bench's traffic a bucket holds
/// about 30 names, about 600 bytes with its key: the buckets of 10,000
/// pages' hour and day fit twice over.
pub const MAX_KNOWN_BYTES: usize = 8 << 20;

/// The names breakdown buckets are known to hold, learned from lookups and
/// from batches that committed, so a batch whose every name is known needs
/// no lookup in its transaction (at 1,000 pages the lookup read every
/// page's bucket of the hour and day for each batch, half the write path's
/// cost with breakdowns: docs/benchmarks.md).
///
/// What it holds is a lower bound of each bucket's names, whatever else
/// writes the bucket (another instance, an import): a name, once in a
/// bucket, stays until the bucket goes, and a bucket that went (retention,
/// a deleted site) is made again by the upsert with at most the names
/// known. So a name it knows may be counted on its own, and a dimension
/// known to hold the cap's names has no room: the cap stays exact. Any
/// other name needs the lookup. Bounded by [`MAX_KNOWN_BYTES`]: past it,
/// it forgets everything and learns again from the next lookups.
#[derive(Debug, Default)]
pub struct KnownNames {
    /// By collection, writer part and bucket.
    buckets: HashMap<(&'static str, Option<i32>, Key), BucketNames>,
    /// What `buckets` takes, as [`Self::entry_bytes`] counts it.
    bytes: usize,
}

impl KnownNames {
    /// What `inc`'s buckets hold, when it is enough to decide every name
    /// of the batch without a lookup.
    pub fn covering(&self, inc: &BreakdownIncrements) -> Option<Names> {
        let mut names = Names::with_capacity(inc.buckets.len());
        for (key, counts) in &inc.buckets {
            let known = self
                .buckets
                .get(&(inc.collection(), inc.target.part, key.clone()))?;
            let decided = counts.names.keys().all(|(dimension, name)| {
                known.count(*dimension) >= MAX_NAMES_PER_BUCKET || known.contains(*dimension, name)
            });
            if !decided {
                return None;
            }
            names.insert(key.clone(), known.clone());
        }
        Some(names)
    }

    /// Remembers that `inc`'s collection holds `names` (found by a lookup,
    /// or written by a batch that committed).
    pub fn learn(&mut self, inc: &BreakdownIncrements, names: &Names) {
        let coming: usize = names
            .iter()
            .map(|(key, held)| Self::entry_bytes(key, held))
            .sum();
        if self.bytes + coming > MAX_KNOWN_BYTES {
            self.buckets.clear();
            self.bytes = 0;
        }
        for (key, held) in names {
            // One lookup can find more than the bound (on secantusd-rs it
            // finds every page's bucket at the batch's times): what does
            // not fit is not remembered, and asked again if needed.
            let slot = (inc.collection(), inc.target.part, key.clone());
            if !self.buckets.contains_key(&slot)
                && self.bytes + Self::entry_bytes(key, held) > MAX_KNOWN_BYTES
            {
                continue;
            }
            let known = self.buckets.entry(slot).or_insert_with(|| {
                self.bytes += Self::entry_bytes(key, &BucketNames::default());
                BucketNames::default()
            });
            let before = known.bytes();
            known.extend(held);
            self.bytes = (self.bytes + known.bytes()).saturating_sub(before);
        }
    }

    /// What one bucket's entry takes: its key, its names, and the map's
    /// slot (key, value and control byte).
    fn entry_bytes(key: &Key, held: &BucketNames) -> usize {
        key.0.len()
            + held.bytes()
            + std::mem::size_of::<((&'static str, Option<i32>, Key), BucketNames)>()
            + 1
    }

    /// What it holds now, as its bound counts it.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::record::Visit;
    use chrono::TimeZone;

    #[test]
    fn a_refused_bucket_sets_aside_the_page_hours_that_count_in_it() {
        let hour = |h: u32| Utc.with_ymd_and_hms(2026, 11, 22, h, 0, 0).unwrap();
        let mut counts = BreakdownCounts::default();
        let labels = Labels::default();
        for (page, h) in [
            ("poisoned.test/", 10),
            ("poisoned.test/a", 10),
            ("poisoned.test/", 11),
            ("healthy.test/", 10),
        ] {
            counts.add_hit(page, hour(h), Some("search.test"), &labels, None);
        }
        counts.add_hit(
            "poisoned.test/",
            hour(10),
            Some("other.test"),
            &labels,
            None,
        );
        let q = doc! {"site": "poisoned.test", "timestamp": bson::DateTime::from_chrono(hour(10)), "part": 0};
        let taken = counts.set_aside("site_breakdowns_hour", &q).unwrap();
        // Two views of the home page and one of /a in that hour.
        assert_eq!(
            (taken.key.as_str(), taken.start, taken.views),
            ("poisoned.test", hour(10), 3)
        );
        let mut left: Vec<(String, DateTime<Utc>)> =
            counts.iter().map(|(p, h, _)| (p.to_owned(), h)).collect();
        left.sort();
        assert_eq!(
            left,
            [
                ("healthy.test/".to_owned(), hour(10)),
                ("poisoned.test/".to_owned(), hour(11))
            ]
        );
        // Nothing left there, or a collection that is not a breakdown's.
        assert!(counts.set_aside("site_breakdowns_hour", &q).is_none());
        assert!(counts.set_aside("views_hour", &q).is_none());
    }

    #[test]
    fn every_statement_raises_the_write_counter_and_gives_a_new_bucket_a_generation() {
        let mut counts = BreakdownCounts::default();
        counts.add_record(&hit("a.test/x", 1, Some("direct"), Labels::default()));
        let mut inc = BreakdownIncrements::for_pages(Resolution::Hour);
        increments(&mut inc, &counts);
        let (one, two) = (
            inc.statements(&HashMap::new()),
            inc.statements(&HashMap::new()),
        );
        let generation = |s: &Document| {
            s.get_document("u")
                .unwrap()
                .get_document("$setOnInsert")
                .unwrap()
                .get_i64(GENERATION)
                .unwrap()
        };
        assert_eq!(
            inc_of(&one[0]),
            doc! {"totalViews": 1_i64, "sources.direct": 1_i64}
        );
        assert_ne!(generation(&one[0]), generation(&two[0]));
    }

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, 5, 0).unwrap()
    }

    fn hit(page: &str, h: u32, source: Option<&str>, labels: Labels) -> Record {
        Record {
            source: source.map(str::to_owned),
            labels,
            ..Record::view(page, at(h))
        }
    }

    /// A statement's increments of counts: every statement also raises
    /// [`WRITES`] by one, which this checks and leaves out.
    fn inc_of(statement: &Document) -> Document {
        let mut inc = statement
            .get_document("u")
            .unwrap()
            .get_document("$inc")
            .unwrap()
            .clone();
        assert_eq!(inc.remove(WRITES), Some(Bson::Int64(1)), "{statement}");
        inc
    }

    fn increments(inc: &mut BreakdownIncrements, counts: &BreakdownCounts) {
        for (page, hour, c) in counts.iter() {
            inc.add_page_hour(page, hour, c);
        }
    }

    /// The statements of `counts`' site hour bucket and of its pages'.
    fn site_and_page_statements(counts: &BreakdownCounts) -> (Vec<Document>, Vec<Document>) {
        let mut site = BreakdownIncrements::for_site(Resolution::Hour, 0);
        let mut pages = BreakdownIncrements::for_pages(Resolution::Hour);
        increments(&mut site, counts);
        increments(&mut pages, counts);
        (
            site.statements(&HashMap::new()),
            pages.statements(&HashMap::new()),
        )
    }

    #[test]
    fn site_buckets_merge_pages_and_every_dimension_rides_one_statement() {
        let mut counts = BreakdownCounts::default();
        let firefox = Labels::default()
            .with(Dimension::Browser, "Firefox")
            .with(Dimension::Country, "DE");
        counts.add_record(&hit(
            "example.com/a",
            1,
            Some("google.com"),
            firefox.clone(),
        ));
        counts.add_record(&hit("example.com/b", 2, Some("google.com"), firefox));
        counts.add_record(&hit("example.com/b", 3, Some("direct"), Labels::default()));
        let mut inc = BreakdownIncrements::for_site(Resolution::Day, 0);
        increments(&mut inc, &counts);
        let s = inc.statements(&HashMap::new());
        assert_eq!(s.len(), 1);
        assert_eq!(
            inc_of(&s[0]),
            doc! {"totalViews": 3_i64, "sources.google%2Ecom": 2_i64, "sources.direct": 1_i64,
            "browser.Firefox": 2_i64, "country.DE": 2_i64}
        );
        assert_eq!(inc.collection(), "site_breakdowns_day");
    }

    #[test]
    fn an_event_counts_only_its_name_and_its_converting_visitor() {
        let mut counts = BreakdownCounts::default();
        let mut event = hit(
            "example.com/",
            1,
            None,
            Labels::default().with(Dimension::Event, "Sign.up"),
        );
        event.visit = Some(Visit {
            visitor: 42,
            ..Visit::default()
        });
        counts.add_record(&event);
        let (s, page_statements) = site_and_page_statements(&counts);
        assert_eq!(inc_of(&s[0]), doc! {"event.Sign%2Eup": 1_i64});
        let max = s[0]
            .get_document("u")
            .unwrap()
            .get_document("$max")
            .unwrap();
        let mut sketch = Sketch::new();
        sketch.insert(42);
        assert_eq!(max, &sketch.max_fields("converted.Sign%2Eup"));
        // Pages count the event, without sketches.
        let s = page_statements;
        assert_eq!(inc_of(&s[0]), doc! {"event.Sign%2Eup": 1_i64});
        assert!(s[0].get_document("u").unwrap().get("$max").is_none());
    }

    #[test]
    fn an_events_revenue_rides_its_site_statement_in_two_parts() {
        let mut counts = BreakdownCounts::default();
        let purchase = Labels::default().with(Dimension::Event, "Buy");
        let largest = crate::domain::Amount::parse("999999999.9999").unwrap();
        let refund = crate::domain::Amount::parse("-0.5").unwrap();
        let eur = Currency::parse("EUR").unwrap();
        for amount in [largest, largest, refund] {
            let mut event = hit("example.com/", 1, None, purchase.clone());
            event.revenue = Some(Revenue {
                currency: eur,
                amount,
            });
            counts.add_record(&event);
        }
        let (s, page_statements) = site_and_page_statements(&counts);
        // 2 × 9,999,999,999,999 − 5,000 ten-thousandths: 19,998 billions
        // and 1,999,994,998 (both parts far from an i64's bounds).
        assert_eq!(
            inc_of(&s[0]),
            doc! {"event.Buy": 3_i64, "revenue.Buy.EUR.h": 19_998_i64,
            "revenue.Buy.EUR.l": 1_999_994_998_i64, "revenue.Buy.EUR.n": 3_i64}
        );
        assert_eq!(
            19_998_i128 * i128::from(REVENUE_SPLIT) + 1_999_994_998,
            2 * 9_999_999_999_999 - 5_000
        );
        // Pages count the event, without its revenue.
        let s = page_statements;
        assert_eq!(inc_of(&s[0]), doc! {"event.Buy": 3_i64});
    }

    #[test]
    fn beyond_the_cap_new_names_count_as_other_per_dimension() {
        let page = "example.com/a";
        // The bucket already holds the cap less one sources: one new source
        // fits, the most viewed one; a source it already has keeps
        // counting. Its browsers have room of their own.
        let mut known: HashSet<String> = (0..MAX_NAMES_PER_BUCKET - 1)
            .map(|i| format!("s{i}"))
            .collect();
        known.insert("old".into());
        known.remove("s0");
        let mut counts = BreakdownCounts::default();
        let with = |s: &str| {
            hit(
                page,
                1,
                Some(s),
                Labels::default().with(Dimension::Browser, s),
            )
        };
        for _ in 0..3 {
            counts.add_record(&with("big"));
        }
        for s in ["small", "tiny", "old"] {
            counts.add_record(&with(s));
        }
        let mut inc = BreakdownIncrements::for_pages(Resolution::Hour);
        increments(&mut inc, &counts);
        let start = Resolution::Hour.floor(at(1));
        let existing = HashMap::from([(
            (page.to_owned(), start),
            known.into_iter().map(|n| (Dimension::Source, n)).collect(),
        )]);
        let s = inc.statements(&existing);
        assert_eq!(
            inc_of(&s[0]),
            doc! {"totalViews": 6_i64, "sources.big": 3_i64, "sources.old": 1_i64, "other": 2_i64,
            "browser.big": 3_i64, "browser.old": 1_i64, "browser.small": 1_i64, "browser.tiny": 1_i64}
        );
    }

    fn batch(part: Option<i32>, names: &[(Dimension, &str)]) -> BreakdownIncrements {
        let mut counts = BreakdownCounts::default();
        for (dimension, name) in names {
            counts.add("example.com/a".into(), at(1), *dimension, name);
        }
        let mut inc = match part {
            Some(part) => BreakdownIncrements::for_site(Resolution::Hour, part),
            None => BreakdownIncrements::for_pages(Resolution::Hour),
        };
        increments(&mut inc, &counts);
        inc
    }

    /// Statements without the generation a new bucket would get (random
    /// in each).
    fn settled(mut statements: Vec<Document>) -> Vec<Document> {
        for s in &mut statements {
            s.get_document_mut("u").unwrap().remove("$setOnInsert");
        }
        statements
    }

    #[test]
    fn known_names_spare_the_lookup_only_where_every_name_is_decided() {
        let mut known = KnownNames::default();
        let first = batch(None, &[(Dimension::Source, "a"), (Dimension::Browser, "x")]);
        assert!(known.covering(&first).is_none(), "nothing known yet");
        // A batch that committed teaches the names it gave counters.
        let (_, written) = first.statements_and_names(&HashMap::new());
        known.learn(&first, &written);
        let again = batch(None, &[(Dimension::Source, "a")]);
        let names = known.covering(&again).expect("every name known");
        assert_eq!(
            settled(again.statements(&names)),
            settled(again.statements(&HashMap::new()))
        );
        // A new name with room left needs the bucket's real names.
        assert!(known
            .covering(&batch(None, &[(Dimension::Source, "b")]))
            .is_none());
        // Another collection, or another writer's part, knows nothing.
        assert!(known
            .covering(&batch(Some(0), &[(Dimension::Source, "a")]))
            .is_none());
        let site = batch(Some(1), &[(Dimension::Source, "a")]);
        let (_, written) = site.statements_and_names(&HashMap::new());
        known.learn(&site, &written);
        assert!(known.covering(&site).is_some());
        assert!(known
            .covering(&batch(Some(2), &[(Dimension::Source, "a")]))
            .is_none());
    }

    #[test]
    fn a_dimension_known_to_be_full_sends_new_names_to_other_without_a_lookup() {
        let mut known = KnownNames::default();
        let full: Vec<String> = (0..MAX_NAMES_PER_BUCKET).map(|i| format!("s{i}")).collect();
        let filling: Vec<(Dimension, &str)> = full
            .iter()
            .map(|n| (Dimension::Source, n.as_str()))
            .collect();
        let first = batch(None, &filling);
        let (_, written) = first.statements_and_names(&HashMap::new());
        known.learn(&first, &written);
        let late = batch(
            None,
            &[(Dimension::Source, "late"), (Dimension::Source, "s3")],
        );
        let names = known.covering(&late).expect("the cap decides the new name");
        let s = late.statements(&names);
        assert_eq!(
            inc_of(&s[0]),
            doc! {"totalViews": 2_i64, "sources.s3": 1_i64, "other": 1_i64}
        );
        // Browsers have room: a new browser still needs the lookup.
        assert!(known
            .covering(&batch(None, &[(Dimension::Browser, "new")]))
            .is_none());
    }

    #[test]
    fn known_names_are_bounded_in_bytes() {
        let mut known = KnownNames::default();
        let inc = batch(None, &[(Dimension::Source, "a")]);
        let thirty: BucketNames = (0..30)
            .map(|i| {
                (
                    Dimension::ALL[i % Dimension::ALL.len()],
                    format!("name-{i}"),
                )
            })
            .collect();
        let bucket = |i: usize| ((format!("example.com/page-{i}"), at(1)), thirty.clone());
        // Learned a batch at a time, it never holds more than its bound,
        // and it keeps learning after it starts over.
        let mut peak = 0;
        for batch_start in (0..100_000).step_by(5_000) {
            let names: Names = (batch_start..batch_start + 5_000).map(bucket).collect();
            known.learn(&inc, &names);
            peak = peak.max(known.bytes());
            assert!(known.bytes() <= MAX_KNOWN_BYTES, "{}", known.bytes());
        }
        assert!(
            peak > MAX_KNOWN_BYTES / 2,
            "the bound is what limits it: {peak}"
        );
        // One lookup finding more than the bound keeps what fits.
        let mut one = KnownNames::default();
        let huge: Names = (0..50_000).map(bucket).collect();
        one.learn(&inc, &huge);
        assert!(one.bytes() <= MAX_KNOWN_BYTES, "{}", one.bytes());
        assert!(one.bytes() > MAX_KNOWN_BYTES / 2, "{}", one.bytes());
        // What it counts is what it holds: each bucket's key, its names
        // and the map's slot.
        let counted: usize = known
            .buckets
            .iter()
            .map(|((_, _, key), held)| KnownNames::entry_bytes(key, held))
            .sum();
        assert_eq!(known.bytes(), counted);
        // Learning names a bucket already holds adds nothing.
        let before = known.bytes();
        let (key, held) = bucket(99_999);
        known.learn(&inc, &Names::from([(key, held)]));
        assert_eq!(known.bytes(), before);
    }

    #[test]
    fn bucket_names_count_and_find_names_per_dimension() {
        let mut names: BucketNames = [
            (Dimension::Source, "google%2Ecom".to_owned()),
            (Dimension::Source, "direct".to_owned()),
            (Dimension::Os, "Linux".to_owned()),
        ]
        .into_iter()
        .collect();
        assert_eq!(names.count(Dimension::Source), 2);
        assert_eq!(names.count(Dimension::Os), 1);
        assert_eq!(names.count(Dimension::Browser), 0);
        assert!(names.contains(Dimension::Source, "direct"));
        assert!(!names.contains(Dimension::Os, "direct"), "per dimension");
        names.insert(Dimension::Source, "direct");
        assert_eq!(names.count(Dimension::Source), 2, "no duplicate");
        names.insert(Dimension::Browser, "Firefox");
        assert!(names.contains(Dimension::Browser, "Firefox"));
    }

    #[test]
    fn existing_reads_the_field_names_of_found_buckets_per_dimension() {
        let inc = BreakdownIncrements::for_pages(Resolution::Hour);
        let t = Resolution::Hour.floor(at(1));
        let found = vec![doc! {
            "page": "example.com/a",
            "timestamp": bson::DateTime::from_chrono(t),
            "sources": {"google%2Ecom": 1_i64, "direct": 2_i64},
            "os": {"Linux": 1_i64},
        }];
        let e = inc.existing(&found);
        let names = &e[&("example.com/a".to_owned(), t)];
        assert_eq!(names.count(Dimension::Source), 2);
        assert_eq!(names.count(Dimension::Os), 1);
        assert_eq!(names.count(Dimension::Browser), 0);
        assert!(names.contains(Dimension::Source, "google%2Ecom"));
    }

    #[test]
    fn a_lookup_by_time_alone_keeps_only_this_writers_part() {
        let mut counts = BreakdownCounts::default();
        counts.add(
            "example.com/a".into(),
            at(1),
            Dimension::Source,
            "google.com",
        );
        let mut inc = BreakdownIncrements::for_site(Resolution::Hour, 1);
        increments(&mut inc, &counts);
        let lookup = inc.lookup(true);
        assert_eq!(lookup.len(), 1, "the times alone: {lookup}");
        let full = inc.lookup(false);
        assert_eq!(full.get_i32("part"), Ok(1));
        assert!(full.contains_key("site"));
        assert_eq!(inc.projection().get_i32("sources"), Ok(1));
        assert!(inc.projection().get("browser").is_none());
        let t = Resolution::Hour.floor(at(1));
        let bucket = |part: i32, name: &str| {
            doc! {"site": "example.com", "timestamp": bson::DateTime::from_chrono(t), "part": part, "sources": {name: 1_i64}}
        };
        let e = inc.existing(&[bucket(0, "other%2Epart"), bucket(1, "mine")]);
        let names = &e[&("example.com".to_owned(), t)];
        assert!(
            names.contains(Dimension::Source, "mine")
                && !names.contains(Dimension::Source, "other%2Epart"),
            "{names:?}"
        );
    }

    #[test]
    fn counts_merge_per_page_hour_dimension_and_name() {
        let mut counts = BreakdownCounts::default();
        let t = |h, m| Utc.with_ymd_and_hms(2026, 11, 22, h, m, 0).unwrap();
        for (h, m, s) in [(10, 1, "x"), (10, 59, "x"), (11, 0, "x"), (10, 5, "y")] {
            counts.add("a.test/".into(), t(h, m), Dimension::Source, s);
        }
        let mut got: Vec<_> = counts
            .iter()
            .flat_map(|(page, hour, c)| {
                c.counts
                    .iter()
                    .map(move |((_, name), n)| (page, hour, name.clone(), *n))
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("a.test/", t(10, 0), "x".to_owned(), 2),
                ("a.test/", t(10, 0), "y".to_owned(), 1),
                ("a.test/", t(11, 0), "x".to_owned(), 1),
            ]
        );
        assert!(!counts.is_full());
    }

    #[test]
    fn the_counts_are_hashed_with_a_key_of_their_own() {
        // With an unkeyed hash (FxHash) every batch
        // placed the same names the same way, so colliding names could be
        // computed once and sent to any instance. Keyed per map, two
        // batches of the same 1,000 names keep them in different orders.
        let names: Vec<String> = (0..1000).map(|i| format!("source-{i}")).collect();
        let order = || {
            let mut counts = BreakdownCounts::default();
            for name in &names {
                counts.add("example.com/".into(), at(1), Dimension::Source, name);
            }
            counts
                .iter()
                .flat_map(|(_, _, c)| c.counts.keys().map(|(_, n)| n.clone()))
                .collect::<Vec<_>>()
        };
        assert_ne!(order(), order());
    }

    #[test]
    fn a_batch_is_full_at_its_page_hours_or_its_counts() {
        let mut pages = BreakdownCounts::default();
        for i in 0..MAX_PAGE_HOURS_PER_BATCH {
            assert!(!pages.is_full(), "{i}");
            pages.add(format!("a.test/{i}"), at(1), Dimension::Source, "x");
        }
        assert!(pages.is_full());
        // One page-hour and a flood of made-up names.
        let mut names = BreakdownCounts::default();
        for i in 0..MAX_COUNTS_PER_BATCH {
            assert!(!names.is_full(), "{i}");
            names.add("a.test/".into(), at(1), Dimension::Medium, &format!("s{i}"));
        }
        assert!(names.is_full());
    }
}

//! The visit store: each visit's dimensions and its ordered steps (page
//! views and events), for the reports that filter by a dimension and for
//! funnels. The unfiltered reports never read it: they keep reading the
//! buckets. A read gives a visit as a [`StoredVisit`]:
//!
//! ```text
//! { _id: NumberLong(visit id),      // random, drawn when the visit opens
//!   site: "example.com",            // the site's canonical domain
//!   start: ISODate(first hit, ms),
//!   entry: "/", source, medium, campaign, browser, os, device, country,
//!                                   // from the visit's first view; absent when unknown
//!   reg: 1234, rank: 3,             // the visitor's HyperLogLog register
//!   views: 3,                       // page views of the visit
//!   duration: 95,                   // seconds from its first to its last view
//!   steps: [ {n: 0, t: 0, p: "/"},
//!            {n: 1, t: 40, p: "/pricing"},
//!            {n: 2, t: 52, p: "/pricing", e: "Signup"},   // an event
//!            {n: 3, t: 95, p: "/signup"} ] }
//! ```
//!
//! Written by the write-behind's fourth stream (`ingest::applier`, stream
//! `visits`), exactly once per journaled hit, as **parts** (`visit_parts`):
//! each batch inserts, per site, UTC day of its visits' starts and chunk
//! of their visitors' registers ([`PART_CHUNKS`]), one document holding
//! what the batch adds to each visit it touches (an entry: the steps, the
//! views and the greatest duration, and the dimensions when it holds the
//! visit's first view), committed with the stream's progress document:
//!
//! ```text
//! { _id: ObjectId, site: "example.com",
//!   start: ISODate(the earliest start of its visits),
//!   day: ISODate(their UTC day's midnight), c: 3 (chunk),
//!   v: [ {i: NumberLong(visit id), s: ISODate(start), g: 1234 (register),
//!         f: {entry: "/", source, ..., reg, rank},   // with the first view only
//!         w: 2 (views), d: 95 (duration), st: [steps]}, ... ] }
//! ```
//!
//! *Why parts and not one upsert per visit*: a visit's views are tens of
//! seconds apart, so a batch of a few seconds held about one hit per visit
//! and the stream made one statement per hit, half of what the database
//! server spent on the write path at saturation (design/applier.md).
//! A part is one statement for a batch's visits of a site and chunk, and
//! an insert never rewrites an earlier document. A read merges a visit's
//! entries (and its visit document, written by releases before parts) into
//! one [`StoredVisit`]: the steps of every entry (`n`, the hit's place in
//! its visit given at the pixel, orders them, as the hits of one visit sit
//! in every lane and arrive in any order), the views added, the greatest
//! duration, the dimensions of the entry with the first view. A part never
//! changes once written, so a read never sees half of one.
//!
//! Visit documents (`visits`, one per visit, upserted per batch) are what
//! releases before parts wrote, and the bench loads write directly; they
//! stay readable and are read beside the parts.
//!
//! What it keeps of a visitor is only what the visitors sketch of the
//! buckets already keeps (the register index and rank, `domain::sketch`):
//! never the visitor id, the address or the User-Agent, so two visits can
//! be tied to one visitor no more than the day's aggregated sketch allows.
//!
//! Invariants (tested in `tests/api/visit_log.rs`):
//! - every answered view or event of a visit is exactly one step, across
//!   crashes of the app or the database;
//! - `views` is the number of view steps (up to [`MAX_STEPS`] steps taking
//!   up to [`MAX_STEP_BYTES`], past which steps are no longer kept but still
//!   counted), `duration` the greatest offset of a view step, the entry the
//!   page of step 0;
//! - a visit lies within one UTC day (the visitor id changes with the day's
//!   salt), so a day's visits are those whose `start` is in that day, and
//!   a part holds the visits of one UTC day, so they are in the parts whose
//!   `start` is in that day.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::schema::IndexSpec;
use super::Store;
use crate::domain::dimension::Dimension;
use crate::domain::sketch::{register_of, REGISTERS};
use crate::domain::visit::{self, VisitRecord};
use crate::domain::{Amount, Currency, Properties, Revenue};
use crate::journal::Record;

pub const COLLECTION: &str = "visits";

/// What the write path adds to the visits, batch by batch (see above).
pub const PARTS: &str = "visit_parts";

/// Bytes of entries in one part before the batch starts another: well
/// inside a command's 8 MiB of statements and the 16 MiB document.
pub const MAX_PART_BYTES: usize = 2 << 20;

/// A batch writes a site's day as this many parts at most, one per range
/// of the visitors' sketch registers (`c`, chunk k: registers
/// `[k·R/N, (k+1)·R/N)`, as the day packs cut a day): a sample of the
/// visitors (the first registers) is then read from the first chunks'
/// parts, and the others are neither sent nor decoded.
pub const PART_CHUNKS: u16 = 16;

const REGISTERS_PER_CHUNK: u16 = (REGISTERS / PART_CHUNKS as usize) as u16;

/// Steps kept per visit: a visit is a person's reading of a site, and this
/// bounds the document whatever a script does. Past it the visit's `views`
/// and `duration` still count every view.
pub const MAX_STEPS: u32 = 2_000;

/// Bytes a visit's kept steps may take ([`step_bytes`] each): the step
/// count alone let a client sending 2,000 views of 511-byte paths grow one
/// document to 0.8 MB (rewritten by each of its statements, decoded by
/// every filtered read). A visit keeps its steps up to the first that
/// would pass either bound ([`MAX_STEPS`] or this), so a stored visit is
/// at most about 130 KB: 2,000 views of paths up to 30 bytes fit, or 240
/// of the longest paths the pixel takes (512 bytes).
///
/// The open-visits table (`ingest::visits`) applies it, since only it sees
/// a visit's hits in order: the first step past the budget and every later
/// one get a place at or past [`MAX_STEPS`], which the applier counts and
/// does not keep. So the document never holds a step after a gap, whatever
/// order the lanes apply them in, and a replay makes the same choice.
pub const MAX_STEP_BYTES: usize = 128 << 10;

/// What one step takes in a visit's `steps` array: its page's path (`page`
/// as the pixel names it, domain and path), its event's name, its
/// properties, and the fields around them (exact for steps 1,000 to 9,999
/// without properties, more for earlier ones, whose array keys are
/// shorter; at most two bytes more a property than they take).
pub fn step_bytes(
    page: &str,
    event: Option<&str>,
    props: &Properties,
    revenue: Option<Revenue>,
) -> usize {
    // `rv`'s type, name ("rv\0"), length and end; `c` (type, "c\0",
    // length, three letters and NUL) and `a` (type, "a\0", eight bytes).
    const REVENUE_FIELD: usize = (1 + 3 + 4 + 1) + (1 + 2 + 4 + 4) + (1 + 2 + 8);
    let revenue_bytes = revenue.map_or(0, |_| REVENUE_FIELD);
    // `pr`'s type, name, length and end; each pair's element type, index
    // (up to "29\0"), length, its two strings' type, index, length and
    // NUL, and the pair's end.
    const PROPS_FIELD: usize = 9;
    const PAIR_AROUND: usize = 25;
    let props_bytes = if props.is_empty() {
        0
    } else {
        PROPS_FIELD
            + props
                .iter()
                .map(|(k, v)| PAIR_AROUND + k.len() + v.len())
                .sum::<usize>()
    };
    revenue_bytes + props_bytes + view_or_event_bytes(page, event)
}

fn view_or_event_bytes(page: &str, event: Option<&str>) -> usize {
    // Element type, key "1234\0", the step's length, `n` and `t` (7 each),
    // `p`'s type, name and length, the string's NUL, the step's end.
    const AROUND: usize = 33;
    // `e`'s type, name, length and NUL.
    const EVENT_FIELD: usize = 8;
    let path = page.find('/').map_or("/", |i| &page[i..]);
    AROUND + path.len() + event.map_or(0, |e| EVENT_FIELD + e.len())
}

/// The shard key (and the reads' index): one site's visits are contiguous
/// and in time order.
pub fn shard_key() -> Document {
    doc! {"site": 1, "start": 1}
}

pub fn indexes() -> Vec<IndexSpec> {
    vec![
        IndexSpec::new(COLLECTION, "site_1_start_1", shard_key()),
        IndexSpec::new(PARTS, "site_1_start_1", shard_key()),
    ]
}

/// One stored visit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredVisit {
    #[serde(rename = "_id")]
    pub id: i64,
    pub site: String,
    pub start: bson::DateTime,
    /// The entry page's path; absent only while the batch holding the
    /// first view is not applied yet (its lane trails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The visitor's register in the visitors sketch (`domain::sketch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reg: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i32>,
    #[serde(default)]
    pub views: i64,
    #[serde(default)]
    pub duration: i64,
    /// In the order they were applied; [`StoredVisit::ordered_steps`]
    /// orders them as they happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
}

/// A page view or an event of a visit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// Its place in the visit, from 0 (the entry).
    pub n: i32,
    /// Seconds since the visit's start.
    pub t: i32,
    /// The page's path.
    pub p: String,
    /// The event's name; absent for a page view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e: Option<String>,
    /// Its custom properties, `[key, value]` pairs sorted by key (an
    /// array, not a document: keys may hold `.` and `$`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pr: Vec<(String, String)>,
    /// An event's revenue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rv: Option<StepRevenue>,
}

/// An event's revenue in a step: its ISO 4217 code and its amount in
/// ten-thousandths (`domain::revenue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRevenue {
    pub c: String,
    pub a: i64,
}

impl StepRevenue {
    pub fn of(revenue: Revenue) -> Self {
        StepRevenue {
            c: revenue.currency.as_str().to_owned(),
            a: revenue.amount.scaled(),
        }
    }

    /// The revenue, if it is one this build takes (otherwise it counts
    /// nowhere rather than failing the report).
    pub fn revenue(&self) -> Option<Revenue> {
        Some(Revenue {
            currency: Currency::parse(&self.c).ok()?,
            amount: Amount::from_scaled(self.a)?,
        })
    }
}

impl Step {
    pub fn is_view(&self) -> bool {
        self.e.is_none()
    }
}

impl StoredVisit {
    pub fn start(&self) -> DateTime<Utc> {
        self.start.to_chrono()
    }

    /// The steps as they happened.
    pub fn ordered_steps(&self) -> Vec<&Step> {
        let mut steps: Vec<&Step> = self.steps.iter().collect();
        steps.sort_by_key(|s| s.n);
        steps
    }

    /// The page of the last view: where the visit left the site.
    pub fn exit(&self) -> Option<&str> {
        self.steps
            .iter()
            .filter(|s| s.is_view())
            .max_by_key(|s| s.n)
            .map(|s| s.p.as_str())
    }

    /// A visit of a single view (events do not undo a bounce, as in the
    /// buckets).
    pub fn bounced(&self) -> bool {
        self.views == 1
    }

    /// The visit's name in `dimension`; for [`Dimension::Event`], its
    /// first event's (see [`StoredVisit::has_event`] for any).
    pub fn dimension(&self, dimension: Dimension) -> Option<&str> {
        match dimension {
            Dimension::Source => self.source.as_deref(),
            Dimension::Medium => self.medium.as_deref(),
            Dimension::Campaign => self.campaign.as_deref(),
            Dimension::Browser => self.browser.as_deref(),
            Dimension::Os => self.os.as_deref(),
            Dimension::Device => self.device.as_deref(),
            Dimension::Country => self.country.as_deref(),
            Dimension::Event => self
                .ordered_steps()
                .into_iter()
                .find_map(|s| s.e.as_deref()),
        }
    }

    pub fn has_event(&self, name: &str) -> bool {
        self.steps.iter().any(|s| s.e.as_deref() == Some(name))
    }

    /// The visitor's register in the visitors sketch, to add to a
    /// `domain::Sketch` with `raise`.
    pub fn register(&self) -> Option<(u16, u8)> {
        let index = u16::try_from(self.reg?).ok()?;
        let rank = u8::try_from(self.rank?).ok()?;
        (usize::from(index) < REGISTERS).then_some((index, rank))
    }

    /// What the visit says to the filtered reports: the same value a day
    /// pack gives back for it (`visit_packs`).
    pub fn record(&self) -> VisitRecord {
        let mut labels = BTreeMap::new();
        for d in Dimension::ALL {
            if d == Dimension::Event {
                continue;
            }
            if let Some(name) = self.dimension(d) {
                labels.insert(d, Arc::from(name));
            }
        }
        let ordered = self.ordered_steps();
        let props = ordered
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                s.pr.iter()
                    .map(move |(k, v)| (i as u32, Arc::from(k.as_str()), Arc::from(v.as_str())))
            })
            .collect();
        let revenue = ordered
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.rv.as_ref()?.revenue()?)))
            .collect();
        let steps = ordered
            .into_iter()
            .map(|s| {
                let offset = u32::try_from(s.t).unwrap_or(0);
                match &s.e {
                    Some(name) => visit::Step::Event {
                        offset,
                        name: Arc::from(name.as_str()),
                    },
                    None => visit::Step::View {
                        offset,
                        path: Arc::from(s.p.as_str()),
                    },
                }
            })
            .collect();
        VisitRecord {
            start: self.start(),
            labels,
            steps,
            register: self.register(),
            views: self.views,
            duration: self.duration,
            props,
            revenue,
        }
    }
}

/// The field of a dimension in the document (its key, as the API names
/// it): what a filter on the database matches.
pub fn field(dimension: Dimension) -> &'static str {
    dimension.key()
}

/// Which visits a read takes: those of `site` that started in
/// `[from, to)`, optionally only a sample of their visitors.
#[derive(Debug, Clone)]
pub struct VisitQuery<'a> {
    /// The site's canonical domain.
    pub site: &'a str,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub sample: Option<Sample>,
    /// Without steps a visit is about a tenth of its size: enough for
    /// filters on its dimensions and its entry, views, duration and bounce
    /// (not its exit, which is its last view step).
    pub steps: bool,
    /// Extra conditions on the stored fields (`{country: "DE"}`), or none:
    /// each a dimension's key or `entry`, equal to a string. The database
    /// checks them on visit documents, the read on the merged visits.
    pub filter: Document,
}

impl<'a> VisitQuery<'a> {
    pub fn new(site: &'a str, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Self {
            site,
            from,
            to,
            sample: None,
            steps: true,
            filter: Document::new(),
        }
    }

    /// The visit documents the query selects, its filter and sample
    /// checked by the database (what [`count`] counts).
    fn selector(&self) -> Document {
        let mut q = doc! {
            "site": self.site,
            "start": {"$gte": bson::DateTime::from_chrono(self.from), "$lt": bson::DateTime::from_chrono(self.to)},
        };
        if let Some(sample) = self.sample {
            q.insert("reg", doc! {"$lt": i32::from(sample.registers)});
        }
        for (k, v) in &self.filter {
            q.insert(k.clone(), v.clone());
        }
        q
    }

    /// The visit documents a merged read takes: a document may lack its
    /// first view (its dimensions and register), which a part then holds,
    /// so only the site and the range are asked of the database, and of
    /// a sample the documents in it or without a register; the merged
    /// visits are checked ([`Self::keeps`]).
    fn documents_selector(&self) -> Document {
        let mut q = doc! {
            "site": self.site,
            "start": {"$gte": bson::DateTime::from_chrono(self.from), "$lt": bson::DateTime::from_chrono(self.to)},
        };
        if let Some(sample) = self.sample {
            q.insert(
                "$or",
                vec![
                    doc! {"reg": {"$lt": i32::from(sample.registers)}},
                    doc! {"reg": {"$exists": false}},
                ],
            );
        }
        q
    }

    fn projection(&self) -> Option<Document> {
        (!self.steps).then(|| doc! {"steps": 0})
    }

    /// The parts that may hold entries of the query's visits: a part's
    /// visits start on one UTC day, on or after its `start`, so those of
    /// the range are in the parts that start from the range's first UTC
    /// midnight to its end.
    fn parts_selector(&self) -> Document {
        let midnight = self
            .from
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .expect("midnight exists")
            .and_utc();
        let mut q = doc! {
            "site": self.site,
            "start": {"$gte": bson::DateTime::from_chrono(midnight), "$lt": bson::DateTime::from_chrono(self.to)},
        };
        // A sample's visitors are in the first chunks: the others are
        // neither sent nor decoded.
        if let Some(sample) = self.sample {
            let chunks = sample.registers.div_ceil(REGISTERS_PER_CHUNK);
            q.insert("c", doc! {"$lt": i32::from(chunks)});
        }
        q
    }

    /// Whether a part's entry belongs to one of the query's visits: its
    /// start in the range, its visitor in the sample.
    fn takes(&self, entry: &PartEntry) -> bool {
        let start = entry.s.to_chrono();
        start >= self.from
            && start < self.to
            && self.sample.is_none_or(|s| entry.g < i32::from(s.registers))
    }

    /// Whether a merged visit is one the query selects: in the sample by
    /// its first view's register (a visit without its first view has none
    /// and is left out of a sample, as the day packs leave it out), and
    /// meeting [`Self::filter`].
    fn keeps(&self, visit: &StoredVisit) -> bool {
        let sampled = self
            .sample
            .is_none_or(|s| visit.reg.is_some_and(|r| r < i32::from(s.registers)));
        sampled && self.passes(visit)
    }

    /// Whether a merged visit meets [`Self::filter`]'s conditions (each a
    /// stored field, `entry` or a dimension's key, equal to a string).
    fn passes(&self, visit: &StoredVisit) -> bool {
        self.filter.iter().all(|(k, v)| {
            let stored = if k == "entry" {
                visit.entry.as_deref()
            } else {
                Dimension::parse(k).and_then(|d| visit.dimension(d))
            };
            stored.is_some() && stored == v.as_str()
        })
    }
}

/// A sample of the visitors: those whose sketch register index is below
/// `registers` (of [`REGISTERS`]). The register is a hash of the visitor,
/// so a sample keeps or drops all the visits of a visitor together and
/// every visitor with the same chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    registers: u16,
}

impl Sample {
    /// The sample closest to `rate` (0 < rate ≤ 1), at least one register.
    pub fn rate(rate: f64) -> Self {
        let registers = (rate.clamp(0.0, 1.0) * REGISTERS as f64).round() as usize;
        Self {
            registers: registers.clamp(1, REGISTERS) as u16,
        }
    }

    /// The share of visitors the sample keeps: the factor to scale counts
    /// by is its inverse.
    pub fn fraction(self) -> f64 {
        f64::from(self.registers) / REGISTERS as f64
    }

    pub fn registers(self) -> u16 {
        self.registers
    }
}

/// The visits `query` selects, in the order of their start: the visit
/// documents and the parts, merged per visit (every visit of the range,
/// held; the reports read [`records_held`]).
pub async fn visits(
    store: &Store,
    query: &VisitQuery<'_>,
) -> Result<Vec<StoredVisit>, mongodb::error::Error> {
    visits_on(store, query, true).await
}

/// [`visits`] through the reports' read preference or, with `reports`
/// false, the primary.
pub async fn visits_on(
    store: &Store,
    query: &VisitQuery<'_>,
    reports: bool,
) -> Result<Vec<StoredVisit>, mongodb::error::Error> {
    let mut visits: Vec<StoredVisit> = merged(store, query, reports, &mut |_| {
        Ok::<(), mongodb::error::Error>(())
    })
    .await?
    .into_values()
    .collect();
    visits.sort_unstable_by_key(|v| (v.start, v.id));
    Ok(visits)
}

/// The visits `query` selects as the read side uses them (in no order),
/// telling `hold` the bytes of memory each visit document and each part's
/// entry adds as it is merged (an estimate: the visit, its steps and
/// their text), so that a read bounded in memory stops as soon as it
/// holds too much. A visit's entries sit in any of the range's parts, so
/// every visit is merged before any is given out; each is then made a
/// record and freed in turn, so the visits and their records are never
/// all held at once. `reports` false reads the primary (what a day pack
/// is built from: at least as new as the day counter read there just
/// before).
pub async fn records_held<E: From<mongodb::error::Error>>(
    store: &Store,
    query: &VisitQuery<'_>,
    reports: bool,
    mut hold: impl FnMut(u64) -> Result<(), E>,
) -> Result<Vec<VisitRecord>, E> {
    let by_id = merged(store, query, reports, &mut hold).await?;
    let mut records = Vec::with_capacity(by_id.len());
    records.extend(by_id.into_values().map(|v| v.record()));
    Ok(records)
}

/// The visits `query` selects, merged per visit: its visit documents (of
/// releases before parts) and its parts' entries.
async fn merged<E: From<mongodb::error::Error>>(
    store: &Store,
    query: &VisitQuery<'_>,
    reports: bool,
    hold: &mut impl FnMut(u64) -> Result<(), E>,
) -> Result<HashMap<i64, StoredVisit>, E> {
    let mut by_id: HashMap<i64, StoredVisit> = HashMap::new();
    let visits = collection(store, reports);
    let mut find = visits
        .find(query.documents_selector())
        .max_time(store.report_max_time())
        .batch_size(1_000);
    if let Some(projection) = query.projection() {
        find = find.projection(projection);
    }
    let mut documents = find.await?;
    while let Some(v) = documents.try_next().await? {
        hold(visit_bytes(&v))?;
        by_id.insert(v.id, v);
    }
    let mut parts = find_parts(store, query, reports).await?;
    while let Some(part) = parts.try_next().await? {
        for mut entry in part.v {
            if !query.takes(&entry) {
                continue;
            }
            if !query.steps {
                entry.st = Vec::new();
            }
            match by_id.entry(entry.i) {
                std::collections::hash_map::Entry::Occupied(mut v) => {
                    hold(entry_bytes(&entry))?;
                    v.get_mut().absorb(entry);
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    let visit = StoredVisit::of_entry(&part.site, entry);
                    hold(visit_bytes(&visit))?;
                    v.insert(visit);
                }
            }
        }
    }
    by_id.retain(|_, v| query.keeps(v));
    Ok(by_id)
}

/// The parts that may hold entries of `query`'s visits.
async fn find_parts(
    store: &Store,
    query: &VisitQuery<'_>,
    reports: bool,
) -> Result<mongodb::Cursor<StoredPart>, mongodb::error::Error> {
    // Parts are mostly a few KB (a batch's visits of one site, day and
    // chunk), up to `MAX_PART_BYTES`; a reply holds at most 16 MiB.
    parts(store, reports)
        .find(query.parts_selector())
        .max_time(store.report_max_time())
        .batch_size(64)
        .await
}

/// How many visits `query` selects: the visit documents with their first
/// view, counted by the database, and the part entries with a visit's
/// first view (read to count them, none held). The reads ask it only of
/// days without a counter: from before the counters, and so before the
/// parts.
pub async fn count(store: &Store, query: &VisitQuery<'_>) -> Result<u64, mongodb::error::Error> {
    let mut documents = query.selector();
    documents.insert("entry", doc! {"$exists": true});
    let mut counted = collection(store, true)
        .count_documents(documents)
        .max_time(store.report_max_time())
        .await?;
    let mut parts = find_parts(store, query, true).await?;
    while let Some(part) = parts.try_next().await? {
        for mut entry in part.v {
            if entry.f.is_none() || !query.takes(&entry) {
                continue;
            }
            entry.st = Vec::new();
            if query.keeps(&StoredVisit::of_entry(&part.site, entry)) {
                counted += 1;
            }
        }
    }
    Ok(counted)
}

/// What a visit takes in memory, about: the visit, its text and steps.
fn visit_bytes(v: &StoredVisit) -> u64 {
    let entry = v.entry.as_ref().map_or(0, String::len);
    let dimensions = text_len([
        &v.source,
        &v.medium,
        &v.campaign,
        &v.browser,
        &v.os,
        &v.device,
        &v.country,
    ]);
    let text = (v.site.len() + entry + dimensions) as u64;
    std::mem::size_of::<StoredVisit>() as u64 + text + held_bytes(&v.steps)
}

/// What an entry adds to a visit already held: its steps, its first
/// view's text.
fn entry_bytes(entry: &PartEntry) -> u64 {
    let first = entry.f.as_ref().map_or(0, |f| {
        f.entry.len()
            + text_len([
                &f.source,
                &f.medium,
                &f.campaign,
                &f.browser,
                &f.os,
                &f.device,
                &f.country,
            ])
    });
    first as u64 + held_bytes(&entry.st)
}

/// The bytes of a visit's dimensions' names, those it has.
fn text_len(dimensions: [&Option<String>; 7]) -> usize {
    dimensions
        .iter()
        .map(|t| t.as_ref().map_or(0, String::len))
        .sum()
}

/// What `steps` take in memory: each step and its text.
fn held_bytes(steps: &[Step]) -> u64 {
    steps
        .iter()
        .map(|s| {
            std::mem::size_of::<Step>()
                + s.p.len()
                + s.e.as_ref().map_or(0, String::len)
                + s.pr
                    .iter()
                    .map(|(k, v)| 2 * std::mem::size_of::<String>() + k.len() + v.len())
                    .sum::<usize>()
        })
        .sum::<usize>() as u64
}

/// The collection, through the reports' read preference or the primary.
pub fn collection(store: &Store, reports: bool) -> mongodb::Collection<StoredVisit> {
    let db = if reports { store.reports() } else { store.db() };
    db.collection(COLLECTION)
}

fn parts(store: &Store, reports: bool) -> mongodb::Collection<StoredPart> {
    let db = if reports { store.reports() } else { store.db() };
    db.collection(PARTS)
}

/// `TICKERTAPE_VISIT_RETENTION_DAYS`: a TTL index named `retention`
/// deletes visit documents this many days after they started (`start`),
/// and parts this many days after their visits' UTC day began (`day`, as
/// the day counters and packs go, so a day's visits go together)
/// (`None`: kept for ever, no index). Returns what was done. (The app
/// applies it through `visit_packs::apply_retention`, which takes the day
/// counters and packs along.)
pub async fn apply_retention(
    store: &Store,
    days: Option<u32>,
) -> Result<String, mongodb::error::Error> {
    let documents = super::retention::ttl_on(store, COLLECTION, "start", "visits", days).await?;
    // By the day, as the day's counter and pack go: a visit's entries sit
    // in parts of different starts, and must go together.
    let parts = super::retention::ttl_on(store, PARTS, "day", "visit parts", days).await?;
    Ok(format!("{documents}; {parts}"))
}

/// A part as stored: the entries one batch wrote for one site, UTC day
/// and register chunk.
#[derive(Debug, Deserialize)]
struct StoredPart {
    site: String,
    #[serde(default)]
    v: Vec<PartEntry>,
}

/// What one batch adds to one visit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PartEntry {
    /// The visit's id.
    i: i64,
    /// Its start.
    s: bson::DateTime,
    /// The visitor's register (`domain::sketch`), on every entry so a
    /// sample is taken before the entries are merged.
    g: i32,
    /// What the visit's first view says, in the entry that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    f: Option<First>,
    /// Page views.
    #[serde(default, skip_serializing_if = "is_zero")]
    w: i64,
    /// The greatest offset of its views, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    d: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    st: Vec<Step>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A visit's dimensions, from its first view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct First {
    entry: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    medium: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    campaign: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    browser: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    country: Option<String>,
    reg: i32,
    rank: i32,
}

impl First {
    fn set(&mut self, dimension: Dimension, name: &str) {
        let field = match dimension {
            Dimension::Source => &mut self.source,
            Dimension::Medium => &mut self.medium,
            Dimension::Campaign => &mut self.campaign,
            Dimension::Browser => &mut self.browser,
            Dimension::Os => &mut self.os,
            Dimension::Device => &mut self.device,
            Dimension::Country => &mut self.country,
            // A view has no event; an event is never a first view.
            Dimension::Event => return,
        };
        *field = Some(name.to_owned());
    }
}

impl StoredVisit {
    fn of_entry(site: &str, entry: PartEntry) -> Self {
        let mut v = StoredVisit {
            id: entry.i,
            site: site.to_owned(),
            start: entry.s,
            entry: None,
            source: None,
            medium: None,
            campaign: None,
            browser: None,
            os: None,
            device: None,
            country: None,
            reg: None,
            rank: None,
            views: 0,
            duration: 0,
            steps: Vec::new(),
        };
        v.absorb(entry);
        v
    }

    /// Adds an entry as the visit document's upsert added it: the views
    /// summed, the greatest duration, the steps appended, the dimensions
    /// set by the first view's.
    fn absorb(&mut self, entry: PartEntry) {
        self.views = self.views.saturating_add(entry.w);
        if let Some(d) = entry.d {
            self.duration = self.duration.max(d);
        }
        self.steps.extend(entry.st);
        if let Some(f) = entry.f {
            self.entry = Some(f.entry);
            self.source = f.source;
            self.medium = f.medium;
            self.campaign = f.campaign;
            self.browser = f.browser;
            self.os = f.os;
            self.device = f.device;
            self.country = f.country;
            self.reg = Some(f.reg);
            self.rank = Some(f.rank);
        }
    }
}

/// The steps and counters a batch of journaled hits adds to each visit it
/// touches, merged per visit, written as one part per site, UTC day and
/// register chunk (more past [`MAX_PART_BYTES`]).
#[derive(Debug, Default)]
pub struct VisitWrites {
    visits: HashMap<i64, Pending>,
}

#[derive(Debug)]
struct Pending {
    site: String,
    hits: u64,
    entry: PartEntry,
}

impl VisitWrites {
    /// Adds a journaled hit; hits without a place in a visit (older
    /// journal formats, imports, an event outside any visit) add nothing.
    pub fn add_record(&mut self, record: &Record) {
        let Some(visit) = &record.visit else { return };
        let Some(place) = &visit.place else { return };
        let (site, path) = match record.page.split_once('/') {
            Some((site, rest)) => (site, format!("/{rest}")),
            None => (record.page.as_str(), "/".to_owned()),
        };
        let id = place.id as i64;
        let (reg, rank) = register_of(visit.visitor);
        let pending = self.visits.entry(id).or_insert_with(|| Pending {
            site: site.to_owned(),
            hits: 0,
            entry: PartEntry {
                i: id,
                s: bson::DateTime::from_millis(place.start.timestamp_millis()),
                g: i32::from(reg),
                f: None,
                w: 0,
                d: None,
                st: Vec::new(),
            },
        });
        pending.hits += 1;
        let entry = &mut pending.entry;
        // Whole seconds, as the buckets count a visit's duration.
        let t = (record.at.timestamp() - place.start.timestamp()).clamp(0, i64::from(i32::MAX));
        let event = record.labels.get(Dimension::Event).map(str::to_owned);
        if event.is_none() {
            entry.w += 1;
            entry.d = Some(entry.d.map_or(t, |d| d.max(t)));
            if place.step == 0 {
                let mut first = First {
                    entry: path.clone(),
                    source: record.source.clone(),
                    reg: i32::from(reg),
                    rank: i32::from(rank),
                    ..First::default()
                };
                for (dimension, name) in record.labels.iter() {
                    first.set(dimension, name);
                }
                entry.f = Some(first);
            }
        }
        if place.step < MAX_STEPS {
            entry.st.push(Step {
                n: place.step as i32,
                t: t as i32,
                p: path,
                e: event,
                pr: record
                    .props
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                rv: record.revenue.map(StepRevenue::of),
            });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.visits.is_empty()
    }

    /// Visits the batch touches.
    pub fn len(&self) -> usize {
        self.visits.len()
    }

    /// The parts' inserts, as documents to look into; the writer sends
    /// [`Self::raw_statements`].
    #[cfg(test)]
    pub fn statements(&self) -> Vec<Document> {
        self.raw_statements()
            .expect("a part encodes")
            .into_iter()
            .map(|s| Document::try_from(s.as_ref()).expect("a part decodes"))
            .collect()
    }

    /// One statement per part, a part per site and UTC day of the visits'
    /// starts (more past [`MAX_PART_BYTES`]): an upsert of a new id that
    /// names the shard key (`{site, start}`, as a sharded upsert must), so
    /// it inserts. Made as BSON bytes, each entry encoded as it is added:
    /// held as documents, a batch's statements were most of what the app
    /// held while it committed (design/applier.md, "Measured: every stream
    /// at saturation").
    pub fn raw_statements(&self) -> Result<Vec<bson::RawDocumentBuf>, bson::raw::Error> {
        let mut statements = Vec::new();
        for ((site, day, chunk), ids) in self.by_day() {
            let part = |start, entries| part_statement(site, day, chunk, start, entries);
            let mut entries = bson::RawArrayBuf::new();
            let mut bytes = 0;
            let mut start: Option<bson::DateTime> = None;
            for id in ids {
                let entry = &self.visits[&id].entry;
                // Strings, numbers and dates only: it always encodes.
                let encoded = bson::to_vec(entry).expect("a part's entry encodes");
                // With its type byte and index ("1234\0") in the array.
                let taken = encoded.len() + 8;
                if bytes > 0 && bytes + taken > MAX_PART_BYTES {
                    statements.push(part(start, entries)?);
                    entries = bson::RawArrayBuf::new();
                    bytes = 0;
                    start = None;
                }
                bytes += taken;
                start = Some(start.map_or(entry.s, |s| s.min(entry.s)));
                entries.push(bson::RawDocumentBuf::from_bytes(encoded)?);
            }
            if bytes > 0 {
                statements.push(part(start, entries)?);
            }
        }
        Ok(statements)
    }

    /// The visits' ids per site, UTC day of their starts and chunk of
    /// their visitors' registers, in order.
    fn by_day(&self) -> BTreeMap<(&str, i64, u16), Vec<i64>> {
        let mut days: BTreeMap<(&str, i64, u16), Vec<i64>> = BTreeMap::new();
        for (id, p) in &self.visits {
            let day = super::visit_days::day_of(p.entry.s.to_chrono());
            let chunk = u16::try_from(p.entry.g).unwrap_or(0) / REGISTERS_PER_CHUNK;
            days.entry((p.site.as_str(), day, chunk))
                .or_default()
                .push(*id);
        }
        for ids in days.values_mut() {
            ids.sort_unstable();
        }
        days
    }

    /// The day counters' upserts (`visit_days`): per site and UTC day of
    /// the visits' starts, the batch's hits and the visits it opens. They
    /// commit with the visits' statements, so a day's counter changes
    /// exactly when its visits do.
    pub fn day_statements(&self) -> Vec<Document> {
        let mut days: BTreeMap<(&str, i64), super::visit_days::DayCount> = BTreeMap::new();
        for p in self.visits.values() {
            let day = super::visit_days::day_of(p.entry.s.to_chrono());
            let count = days.entry((p.site.as_str(), day)).or_default();
            count.hits = count
                .hits
                .saturating_add(i64::try_from(p.hits).unwrap_or(i64::MAX));
            if p.entry.f.is_some() {
                count.visits += 1;
            }
        }
        days.into_iter()
            .map(|((site, day), count)| super::visit_days::statement(site, day, count))
            .collect()
    }

    /// Takes out what a refused statement (its filter `q`, on `collection`)
    /// wrote: a part's or a day counter's, every visit of that site and
    /// UTC day (their keys say "visits of day" and the site, nothing of a
    /// visitor), so that no visit changes without its day's counter.
    pub fn set_aside(
        &mut self,
        collection: &str,
        q: &Document,
    ) -> Option<super::buckets::SetAside> {
        let (site, day) = if collection == super::visit_days::COLLECTION {
            super::visit_days::key_of(q)?
        } else if collection == PARTS {
            let site = q.get_str("site").ok()?.to_owned();
            let start = q.get_datetime("start").ok()?;
            (site, super::visit_days::day_of(start.to_chrono()))
        } else {
            return None;
        };
        let of_day =
            |p: &Pending| p.site == site && super::visit_days::day_of(p.entry.s.to_chrono()) == day;
        let hits: u64 = self
            .visits
            .values()
            .filter(|p| of_day(p))
            .map(|p| p.hits)
            .sum();
        if hits == 0 {
            return None;
        }
        self.visits.retain(|_, p| !of_day(p));
        Some(super::buckets::SetAside {
            key: format!("{site} visits of day {day}"),
            start: super::page_summaries::day_start(day),
            views: i64::try_from(hits).unwrap_or(i64::MAX),
        })
    }

    /// Leaves out the visits of the sites `deleted` names (by domain).
    pub fn drop_sites(&mut self, deleted: impl Fn(&str) -> bool) {
        self.visits.retain(|_, p| !deleted(&p.site));
    }

    /// Journaled hits the batch holds for the store.
    pub fn hits(&self) -> u64 {
        self.visits.values().map(|p| p.hits).sum()
    }
}

/// A part's insert: `{q: {_id, site, start}, u: {site, start, day, c, v},
/// upsert}`.
fn part_statement(
    site: &str,
    day: i64,
    chunk: u16,
    start: Option<bson::DateTime>,
    entries: bson::RawArrayBuf,
) -> Result<bson::RawDocumentBuf, bson::raw::Error> {
    let start = start.unwrap_or(bson::DateTime::MIN);
    let mut q = bson::RawDocumentBuf::new();
    q.append("_id", bson::oid::ObjectId::new());
    q.append("site", site);
    q.append("start", start);
    let mut u = bson::RawDocumentBuf::new();
    u.append("site", site);
    u.append("start", start);
    u.append(
        "day",
        bson::DateTime::from_chrono(super::page_summaries::day_start(day)),
    );
    u.append("c", i32::from(chunk));
    u.append("v", entries);
    let mut statement = bson::RawDocumentBuf::new();
    statement.append("q", q);
    statement.append("u", u);
    statement.append("upsert", true);
    Ok(statement)
}

/// Bytes the visit documents and the parts take (`collStats`'s `size`),
/// and how many visits they hold (the documents, and the entries with a
/// first view in the parts, read to count them): the storage per visit.
pub async fn storage(store: &Store) -> Result<(i64, i64), mongodb::error::Error> {
    let mut bytes = 0;
    for collection in [COLLECTION, PARTS] {
        let stats = store
            .db()
            .run_command(doc! {"collStats": collection})
            .await?;
        bytes += super::values::count(stats.get("size"));
    }
    let documents = collection(store, false).estimated_document_count().await?;
    let mut opened = 0;
    let mut cursor = parts(store, false).find(doc! {}).batch_size(16).await?;
    while let Some(part) = cursor.try_next().await? {
        opened += part.v.iter().filter(|e| e.f.is_some()).count() as i64;
    }
    Ok((bytes, i64::try_from(documents).unwrap_or(i64::MAX) + opened))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::dimension::Labels;
    use crate::journal::{Visit, VisitPlace};
    use bson::Bson;
    use chrono::TimeZone;

    fn at(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 27, 10, 0, s).unwrap()
    }

    fn hit(page: &str, s: u32, step: u32, event: Option<&str>) -> Record {
        let labels = match event {
            Some(e) => Labels::default().with(Dimension::Event, e),
            None => Labels::default()
                .with(Dimension::Country, "DE")
                .with(Dimension::Browser, "Firefox"),
        };
        Record {
            page: page.into(),
            at: at(s),
            source: (step == 0).then(|| "google.com".to_owned()),
            visit: Some(Visit {
                visitor: 0xdead_beef_0000_0001,
                place: Some(VisitPlace {
                    id: 42,
                    start: at(0) + chrono::TimeDelta::milliseconds(250),
                    step,
                }),
                ..Visit::default()
            }),
            labels,
            props: Default::default(),
            revenue: None,
            engagement: None,
        }
    }

    /// The entries of a batch's parts, as stored.
    fn entries(w: &VisitWrites) -> Vec<PartEntry> {
        w.statements()
            .iter()
            .flat_map(|s| s.get_document("u").unwrap().get_array("v").unwrap().clone())
            .map(|e| bson::from_bson(e).unwrap())
            .collect()
    }

    #[test]
    fn a_batch_writes_one_part_a_site_and_day_with_an_entry_per_visit() {
        let mut w = VisitWrites::default();
        w.add_record(&hit("a.com/pricing", 40, 1, None));
        w.add_record(&hit("a.com/", 0, 0, None));
        w.add_record(&hit("a.com/pricing", 52, 2, Some("Signup")));
        let statements = w.statements();
        assert_eq!(statements.len(), 1);
        let s = &statements[0];
        let start = bson::DateTime::from_chrono(at(0) + chrono::TimeDelta::milliseconds(250));
        let q = s.get_document("q").unwrap();
        assert!(q.get_object_id("_id").is_ok());
        assert_eq!(
            (q.get_str("site"), q.get_datetime("start")),
            (Ok("a.com"), Ok(&start))
        );
        assert_eq!(s.get_bool("upsert"), Ok(true));
        let u = s.get_document("u").unwrap();
        assert!(u.keys().all(|k| !k.starts_with('$')), "an insert: {u}");
        assert_eq!(
            u.get_datetime("day"),
            Ok(&bson::DateTime::from_chrono(
                Utc.with_ymd_and_hms(2026, 11, 27, 0, 0, 0).unwrap()
            ))
        );
        let (reg, _) = register_of(0xdead_beef_0000_0001);
        assert_eq!(u.get_i32("c"), Ok(i32::from(reg / REGISTERS_PER_CHUNK)));
        let entry = &entries(&w)[0];
        assert_eq!(
            (entry.i, entry.s, entry.w, entry.d),
            (42, start, 2, Some(40))
        );
        let first = entry.f.as_ref().unwrap();
        assert_eq!(first.entry, "/");
        assert_eq!(first.source.as_deref(), Some("google.com"));
        assert_eq!(first.country.as_deref(), Some("DE"));
        assert_eq!(entry.g, first.reg);
        assert_eq!(entry.st.len(), 3);
        // Refused: every visit of the site and day is taken out.
        let taken = w.set_aside(PARTS, q).unwrap();
        assert_eq!(
            (taken.key.as_str(), taken.views),
            (
                &*format!(
                    "a.com visits of day {}",
                    super::super::visit_days::day_of(at(0))
                ),
                3
            )
        );
        assert!(w.is_empty());
    }

    #[test]
    fn a_later_batch_adds_steps_without_touching_the_dimensions() {
        let mut w = VisitWrites::default();
        w.add_record(&hit("a.com/b", 30, 3, None));
        let entry = entries(&w).remove(0);
        assert!(entry.f.is_none());
        // An event alone neither counts a view nor moves the duration.
        let mut e = VisitWrites::default();
        e.add_record(&hit("a.com/b", 59, 4, Some("Play")));
        let entry = entries(&e).remove(0);
        assert_eq!((entry.w, entry.d, entry.st.len()), (0, None, 1));
    }

    #[test]
    fn steps_past_the_cap_are_counted_not_kept() {
        let mut w = VisitWrites::default();
        w.add_record(&hit("a.com/b", 30, MAX_STEPS, None));
        let entry = entries(&w).remove(0);
        assert!(entry.st.is_empty());
        assert_eq!(entry.w, 1);
    }

    #[test]
    fn a_visit_read_from_its_parts_is_whatever_order_its_batches_came_in() {
        // Three batches of one visit, as three lanes may apply them.
        let batch = |hits: &[(&str, u32, u32, Option<&str>)]| {
            let mut w = VisitWrites::default();
            for (page, s, step, event) in hits {
                w.add_record(&hit(page, *s, *step, *event));
            }
            entries(&w).remove(0)
        };
        let batches = [
            batch(&[("a.com/c", 58, 3, None)]),
            batch(&[("a.com/", 0, 0, None), ("a.com/b", 40, 1, None)]),
            batch(&[("a.com/b", 52, 2, Some("Signup"))]),
        ];
        let merged = |order: [usize; 3]| {
            let mut v = StoredVisit::of_entry("a.com", batches[order[0]].clone());
            for i in &order[1..] {
                v.absorb(batches[*i].clone());
            }
            v
        };
        let sorted = |mut v: StoredVisit| {
            v.steps.sort_by_key(|s| s.n);
            v
        };
        let v = merged([0, 1, 2]);
        for order in [[1, 0, 2], [2, 1, 0], [2, 0, 1]] {
            assert_eq!(sorted(merged(order)), sorted(v.clone()), "{order:?}");
        }
        assert_eq!((v.views, v.duration), (3, 58));
        assert_eq!(v.entry.as_deref(), Some("/"));
        assert_eq!(v.country.as_deref(), Some("DE"));
        assert_eq!(v.exit(), Some("/c"));
        let order: Vec<i32> = v.ordered_steps().iter().map(|s| s.n).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert!(v.register().is_some());
    }

    #[test]
    fn a_part_holds_one_day_and_splits_past_its_bytes() {
        let mut w = VisitWrites::default();
        let long = format!("a.com/{}", "x".repeat(500));
        // 6,000 visits of 500-byte paths: about 3 MB, two parts.
        for i in 0..6_000u64 {
            let mut r = hit(&long, 10, 1, None);
            r.visit.as_mut().unwrap().place.as_mut().unwrap().id = i;
            w.add_record(&r);
        }
        // A visit of the day before, and one of another site.
        let mut r = hit("a.com/", 10, 1, None);
        let place = r.visit.as_mut().unwrap().place.as_mut().unwrap();
        place.id = 10_000;
        place.start -= chrono::TimeDelta::days(1);
        w.add_record(&r);
        let mut r = hit("b.com/", 10, 1, None);
        r.visit.as_mut().unwrap().place.as_mut().unwrap().id = 10_001;
        w.add_record(&r);
        let statements = w.statements();
        let sizes: Vec<usize> = statements
            .iter()
            .map(|s| bson::to_vec(s).unwrap().len())
            .collect();
        assert_eq!(statements.len(), 4, "{sizes:?}");
        assert!(
            sizes.iter().all(|b| *b <= MAX_PART_BYTES + 1_000),
            "{sizes:?}"
        );
        assert_eq!(entries(&w).len(), 6_002);
        for s in &statements {
            let start = s.get_document("q").unwrap().get_datetime("start").unwrap();
            let u = s.get_document("u").unwrap();
            for e in u.get_array("v").unwrap() {
                let e: PartEntry = bson::from_bson(e.clone()).unwrap();
                assert!(e.s >= *start);
                assert_eq!(e.s.to_chrono().date_naive(), start.to_chrono().date_naive());
            }
        }
    }

    #[test]
    fn a_flood_visit_costs_one_small_entry_a_batch() {
        // A batch of 10,000 hits of one visit past its cap, against the
        // same hits as 4,000 short visits (2.5 views each, the bench's
        // mean): statements and bytes per hit.
        let mut flood = VisitWrites::default();
        let long = format!("a.com/{}", "x".repeat(505));
        for i in 0..10_000u32 {
            flood.add_record(&hit(&long, i % 60, MAX_STEPS + i, None));
        }
        let mut short = VisitWrites::default();
        for i in 0..10_000u32 {
            let mut r = hit("a.com/pricing", 10, i % 5 % 3, None);
            r.visit.as_mut().unwrap().place.as_mut().unwrap().id =
                u64::from(i / 5 * 2 + u32::from(i % 5 >= 3));
            short.add_record(&r);
        }
        let cost = |w: &VisitWrites| {
            let statements: Vec<Document> = w
                .statements()
                .into_iter()
                .chain(w.day_statements())
                .collect();
            let bytes: usize = statements
                .iter()
                .map(|s| bson::to_vec(s).unwrap().len())
                .sum();
            (statements.len() as f64 / 10_000.0, bytes as f64 / 10_000.0)
        };
        let (flood_statements, flood_bytes) = cost(&flood);
        let (short_statements, short_bytes) = cost(&short);
        eprintln!(
            "per hit: flood {flood_statements:.4} statements, {flood_bytes:.2} bytes; \
             short visits {short_statements:.4} statements, {short_bytes:.2} bytes"
        );
        // One part and one day counter for 10,000 hits, either way.
        assert_eq!((flood_statements, short_statements), (0.0002, 0.0002));
        let entry = entries(&flood).remove(0);
        assert!(entry.st.is_empty(), "nothing past the cap is kept");
        assert_eq!(entry.w, 10_000);
        assert!(flood_bytes <= short_bytes);
    }

    #[test]
    fn step_bytes_bounds_what_a_step_with_properties_takes() {
        let props = Properties::parse_json(
            &serde_json::json!({"author": "Jane", "k.$": "v".repeat(2_000)}),
            crate::domain::properties::Rules::Strict,
        )
        .unwrap();
        let step = Step {
            n: 1_999,
            t: 3_600,
            p: "/a".into(),
            e: None,
            pr: props
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            rv: None,
        };
        let mut steps = vec![Bson::Null; 1_999];
        let without = bson::to_vec(&doc! {"s": steps.clone()}).unwrap().len();
        steps.push(bson::to_bson(&step).unwrap());
        let with = bson::to_vec(&doc! {"s": steps}).unwrap().len();
        let bytes = step_bytes("a.com/a", None, &props, None);
        assert!(bytes >= with - without, "{bytes} < {}", with - without);
        assert!(bytes <= with - without + 2 * props.len());
    }

    #[test]
    fn step_bytes_is_what_a_step_takes_in_the_document() {
        let revenue = Revenue {
            currency: Currency::parse("EUR").unwrap(),
            amount: Amount::parse("9.99").unwrap(),
        };
        let encoded_with = |n: i32, p: &str, e: Option<&str>, rv: Option<Revenue>| {
            let step = Step {
                n,
                t: 3_600,
                p: p.into(),
                e: e.map(str::to_owned),
                pr: Vec::new(),
                rv: rv.map(StepRevenue::of),
            };
            let mut steps = vec![Bson::Null; n as usize];
            steps.push(bson::to_bson(&step).unwrap());
            let with = bson::to_vec(&doc! {"s": steps.clone()}).unwrap().len();
            steps.pop();
            with - bson::to_vec(&doc! {"s": steps}).unwrap().len()
        };
        let encoded = |n: i32, p: &str, e: Option<&str>| encoded_with(n, p, e, None);
        assert_eq!(
            step_bytes(
                "a.com/buy",
                Some("Purchase"),
                &Properties::EMPTY,
                Some(revenue)
            ),
            encoded_with(1_999, "/buy", Some("Purchase"), Some(revenue))
        );
        let long = format!("/{}", "x".repeat(510));
        for (page, path, event) in [
            ("a.com/", "/", None),
            ("a.com/pricing", "/pricing", Some("Signup")),
            (&*format!("a.com{long}"), &*long, None),
        ] {
            assert_eq!(
                step_bytes(page, event, &Properties::EMPTY, None),
                encoded(1_999, path, event)
            );
            assert!(step_bytes(page, event, &Properties::EMPTY, None) >= encoded(7, path, event));
        }
        // The bounds together: 2,000 short steps fit, long ones stop early.
        assert!(
            MAX_STEPS as usize
                * step_bytes(
                    "a.com/blog/2026/a-thirty-byte-pat",
                    None,
                    &Properties::EMPTY,
                    None
                )
                <= MAX_STEP_BYTES
        );
        assert_eq!(
            MAX_STEP_BYTES / step_bytes(&format!("a.com{long}"), None, &Properties::EMPTY, None),
            240
        );
    }

    #[test]
    fn hits_without_a_place_in_a_visit_add_nothing() {
        let mut w = VisitWrites::default();
        let mut r = hit("a.com/", 0, 0, None);
        r.visit.as_mut().unwrap().place = None;
        w.add_record(&r);
        w.add_record(&Record::view("a.com/", at(0)));
        assert!(w.is_empty());
    }

    #[test]
    fn a_stored_visit_orders_its_steps_and_finds_its_exit() {
        let v = StoredVisit {
            id: 1,
            site: "a.com".into(),
            start: bson::DateTime::from_chrono(at(0)),
            entry: Some("/".into()),
            source: None,
            medium: None,
            campaign: None,
            browser: None,
            os: None,
            device: None,
            country: Some("DE".into()),
            reg: Some(7),
            rank: Some(2),
            views: 2,
            duration: 40,
            steps: vec![
                Step {
                    n: 2,
                    t: 50,
                    p: "/b".into(),
                    e: Some("Go".into()),
                    pr: Vec::new(),
                    rv: None,
                },
                Step {
                    n: 0,
                    t: 0,
                    p: "/".into(),
                    e: None,
                    pr: Vec::new(),
                    rv: None,
                },
                Step {
                    n: 1,
                    t: 40,
                    p: "/a".into(),
                    e: None,
                    pr: Vec::new(),
                    rv: None,
                },
            ],
        };
        let order: Vec<i32> = v.ordered_steps().iter().map(|s| s.n).collect();
        assert_eq!(order, [0, 1, 2]);
        assert_eq!(v.exit(), Some("/a"));
        assert!(!v.bounced());
        assert_eq!(v.dimension(Dimension::Country), Some("DE"));
        assert_eq!(v.dimension(Dimension::Event), Some("Go"));
        assert!(v.has_event("Go"));
        assert_eq!(v.register(), Some((7, 2)));
        let stored = bson::to_document(&v).unwrap();
        assert!(stored.get("source").is_none());
        assert_eq!(bson::from_document::<StoredVisit>(stored).unwrap(), v);
    }

    #[test]
    fn a_sample_keeps_a_share_of_the_registers() {
        assert_eq!(Sample::rate(1.0).registers() as usize, REGISTERS);
        assert_eq!(Sample::rate(0.0).registers(), 1);
        assert!((Sample::rate(0.1).fraction() - 0.1).abs() < 0.001);
        let q = VisitQuery {
            sample: Some(Sample::rate(0.5)),
            filter: doc! {"country": "DE"},
            ..VisitQuery::new("a.com", at(0), at(30))
        };
        let s = q.selector();
        assert_eq!(s.get_document("reg").unwrap(), &doc! {"$lt": 8192});
        assert_eq!(s.get_str("country"), Ok("DE"));
        // A part's entries: by their own register and start; the filter
        // on the merged visit.
        let mut w = VisitWrites::default();
        w.add_record(&hit("a.com/", 0, 0, None));
        let mut entry = entries(&w).remove(0);
        entry.g = 8191;
        assert!(q.takes(&entry));
        entry.g = 8192;
        assert!(!q.takes(&entry));
        entry.g = 1;
        entry.s = bson::DateTime::from_chrono(at(30));
        assert!(!q.takes(&entry));
        let v = StoredVisit::of_entry("a.com", entries(&w).remove(0));
        assert!(q.passes(&v));
        // In a sample by its first view's register; without its first
        // view a visit has none and is left out, as the packs leave it.
        let sampled = |reg: Option<i32>| {
            let mut v = v.clone();
            v.reg = reg;
            q.keeps(&v)
        };
        assert!(sampled(Some(8191)) && !sampled(Some(8192)) && !sampled(None));
        // The parts of a sample: the chunks of its registers.
        assert_eq!(
            q.parts_selector().get_document("c").unwrap(),
            &doc! {"$lt": i32::from(PART_CHUNKS / 2)}
        );
        let tiny = VisitQuery {
            sample: Some(Sample::rate(0.0001)),
            ..q.clone()
        };
        assert_eq!(
            tiny.parts_selector().get_document("c").unwrap(),
            &doc! {"$lt": 1}
        );
        assert!(VisitQuery::new("a.com", at(0), at(30))
            .parts_selector()
            .get("c")
            .is_none());
        let us = VisitQuery {
            filter: doc! {"country": "US"},
            ..q.clone()
        };
        assert!(!us.passes(&v));
        let entry_page = VisitQuery {
            filter: doc! {"entry": "/"},
            ..q
        };
        assert!(entry_page.passes(&v));
        // The parts of a range start from its first UTC midnight.
        let parts = entry_page.parts_selector();
        assert_eq!(
            parts.get_document("start").unwrap().get_datetime("$gte"),
            Ok(&bson::DateTime::from_chrono(
                Utc.with_ymd_and_hms(2026, 11, 27, 0, 0, 0).unwrap()
            ))
        );
    }
}

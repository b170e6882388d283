//! The three bucket collections and the arithmetic that maps a hit's time to
//! a bucket and a slot inside it.
//!
//! *Length*: under 800 lines of code; the rest is its unit tests.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};

use crate::domain::sketch::Sketch;
use crate::domain::{DomainName, Resolution};
use crate::journal::Visit;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// `page` filter for every page of a site: `"<domain>/"` ≤ page < `"<domain>0"`
/// (`0` sorts right after `/`).
pub fn site_pages(domain: &DomainName) -> Document {
    doc! {"$gte": format!("{domain}/"), "$lt": format!("{domain}0")}
}

/// A preallocated bucket: every slot present with 0, so the document has
/// its final size from the start (seed 004).
pub fn zero_filled(resolution: Resolution, page: &str, start: DateTime<Utc>) -> Document {
    let slots: Document = (0..resolution.slot_count())
        .map(|i| (i.to_string(), Bson::Int32(0)))
        .collect();
    doc! {
        "page": page,
        "timestamp": bson::DateTime::from_chrono(start),
        "totalViews": 0_i64,
        resolution.slots_field(): slots,
    }
}

/// One bucket per page and start time, at every level: the upsert's
/// target and the shard key's prefix.
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    use super::schema::IndexSpec;
    let keys = Resolution::ALL.into_iter().map(|r| {
        IndexSpec::new(
            r.collection(),
            "page_timestamp",
            super::schema::bucket_key(),
        )
        .unique()
    });
    let by_time = [Resolution::Hour, Resolution::Day]
        .into_iter()
        .map(|r| IndexSpec::new(r.collection(), BY_TIME, doc! {"timestamp": 1, "page": 1}));
    keys.chain(by_time).collect()
}

/// The index a site's page buckets of a few hours or days are read by.
/// Under `{page, timestamp}` the site's pages are one key range, but the
/// times are not: reading one day of a site with a year stored walked the
/// whole year's keys (560 ms for "today" in the year bench). Hour and day
/// buckets only: a bucket is inserted once per page and hour or day, so the
/// index costs one key per insert and nothing per `$inc`; minute buckets,
/// inserted once per page-minute, are never read by site.
pub const BY_TIME: &str = "timestamp_page";

/// Site totals: one bucket per site, time and writer part.
pub fn site_indexes() -> Vec<super::schema::IndexSpec> {
    Resolution::ALL
        .into_iter()
        .map(|r| {
            super::schema::IndexSpec::new(
                Subject::Site.collection(r),
                "site_timestamp_part",
                doc! {"site": 1, "timestamp": 1, "part": 1},
            )
            .unique()
        })
        .collect()
}

/// Whose views a bucket counts: one page (`views_*`, keyed by `page`, the
/// domain and path) or a whole site (`site_views_*`, keyed by `site`, the
/// site's domain). Site totals live in their own collections so that a sum
/// over a page collection still means "pages".
///
/// A site bucket is split by writer into *parts* (`part`: the journal lane,
/// [`PART_DIRECT`], [`PART_BACKFILL`] or [`PART_IMPORT`]), and readers add
/// the parts up.
/// Pages are spread over lanes, so every lane writes to the same site
/// buckets: with one document per site and time, the lanes' transactions
/// conflicted on it all the time (measured: four lanes retrying each other
/// for over a minute on 2,000 hits). With one part per lane, each lane
/// writes only its own, and a site bucket is at most a few documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subject {
    Page,
    Site,
}

impl Subject {
    pub fn key_field(self) -> &'static str {
        match self {
            Subject::Page => "page",
            Subject::Site => "site",
        }
    }

    pub fn collection(self, g: Resolution) -> &'static str {
        match self {
            Subject::Page => g.collection(),
            Subject::Site => match g {
                Resolution::Minute => "site_views_minute",
                Resolution::Hour => "site_views_hour",
                Resolution::Day => "site_views_day",
            },
        }
    }

    /// The key of a page's bucket, or of its site's (the domain: a page
    /// is `<domain>/<path>`).
    pub fn key_of(self, page: &str) -> &str {
        match self {
            Subject::Page => page,
            Subject::Site => page.split_once('/').map_or(page, |(domain, _)| domain),
        }
    }
}

/// The part written outside the journal (demo data, benchmarks, tests).
pub const PART_DIRECT: i32 = -1;
/// The part the backfill sets: what the page buckets hold beyond the
/// other parts (views from before site totals existed).
pub const PART_BACKFILL: i32 = -2;
/// The part imports write (`tickertape import`): never a live lane's, so
/// that no figure an import adds can make a lane's statement fail. Imports
/// run before this part existed wrote lane 0's part (`part` 0), and their
/// deletions still do (the import's record keeps its part).
pub const PART_IMPORT: i32 = -3;

/// A bucket as read back. Upserted buckets carry only the slots that were
/// incremented; a missing slot is 0.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Bucket {
    pub page: String,
    pub timestamp: bson::DateTime,
    #[serde(rename = "totalViews")]
    pub total_views: i64,
    #[serde(alias = "seconds", alias = "minutes", alias = "hours", default)]
    pub slots: BTreeMap<String, i64>,
}

impl Bucket {
    pub fn slot(&self, index: usize) -> i64 {
        self.slots.get(&index.to_string()).copied().unwrap_or(0)
    }
}

/// The views of one page on the day starting `day` (its day bucket's
/// total; 0 without one).
pub async fn day_views(
    store: &super::Store,
    page: &str,
    day: DateTime<Utc>,
) -> Result<i64, mongodb::error::Error> {
    let bucket = store
        .buckets(Resolution::Day)
        .find_one(bson::doc! {"page": page, "timestamp": bson::DateTime::from_chrono(day)})
        .await?;
    Ok(bucket.map_or(0, |b| b.total_views))
}

/// Which buckets a batch's increments go to: the page buckets, or the
/// site buckets (keyed by the domain) written as the writer's part; at one
/// resolution.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub subject: Subject,
    /// For site buckets: the writer's part.
    pub part: Option<i32>,
    pub resolution: Resolution,
}

impl Target {
    pub fn pages(resolution: Resolution) -> Self {
        Target {
            subject: Subject::Page,
            part: None,
            resolution,
        }
    }

    pub fn site(resolution: Resolution, part: i32) -> Self {
        Target {
            subject: Subject::Site,
            part: Some(part),
            resolution,
        }
    }

    /// The bucket (key, start) a view of `page` at `at` counts in.
    pub fn bucket_of(&self, page: &str, at: DateTime<Utc>) -> (String, DateTime<Utc>) {
        (
            self.subject.key_of(page).to_owned(),
            self.resolution.floor(at),
        )
    }

    /// The filter of an upsert statement: one bucket, and the part.
    pub fn bucket_query(&self, key: &str, start: DateTime<Utc>) -> Document {
        let mut q =
            doc! {self.subject.key_field(): key, "timestamp": bson::DateTime::from_chrono(start)};
        if let Some(part) = self.part {
            q.insert("part", part);
        }
        q
    }
}

/// Hits merged per bucket: for each (page, bucket start) the count per slot.
/// N hits on one page-minute become one statement.
///
/// At hour and day level a bucket also gathers what the hits changed of
/// their visits (see [`VisitFields`]): counters added with `$inc` like the
/// views, and the visitors' sketch raised with `$max`, all in the same
/// statement, so visits cost no statement of their own.
#[derive(Debug)]
pub struct Increments {
    target: Target,
    buckets: HashMap<(String, DateTime<Utc>), BucketIncrement>,
    /// Counts are being taken back (an import's deletion): every bucket
    /// written gets `takenBack` raised, which guards kept answers (see
    /// [`TAKEN_BACK`]).
    taken_back: bool,
}

/// A bucket taken out of a batch ([`Increments::set_aside`]): its key
/// (a page, or a site's domain), its start, and the views it carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub key: String,
    pub start: DateTime<Utc>,
    pub views: i64,
}

/// The start of the second `at` falls in.
fn whole_second(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp(), 0).unwrap_or(at)
}

/// A bucket's count of deletions that took counts out of it, and (site
/// buckets) of hits of a later hour or day that credited its views' exits
/// and bounces. Totals only grow otherwise, so readers that keep an answer
/// while a day's total is unchanged (page summaries, visitor estimates)
/// also compare this: a day taken back and filled again to the same total,
/// or whose last view's exit moved on to the next day, is not the same day.
pub const TAKEN_BACK: &str = "takenBack";

#[derive(Debug, Default)]
struct BucketIncrement {
    /// Signed: an import's deletion takes its views back.
    views: Vec<i32>,
    visits: Option<Box<VisitIncrement>>,
    /// A later hit changed what this (site) bucket's pages hold without a
    /// view of its own here: raises [`TAKEN_BACK`], so that answers kept
    /// while the bucket's total is unchanged are made again.
    credited_late: bool,
}

#[derive(Debug, Default)]
struct VisitIncrement {
    /// Per slot, the counters in [`VisitFields::COUNTERS`] order.
    slots: BTreeMap<u16, [i64; VisitFields::COUNTERS.len()]>,
    visitors: Sketch,
}

/// The visit counters of an hour or day bucket, each a map of slot to
/// count like the views' (`minutes` of an hour bucket, `hours` of a day
/// bucket), and the visitors' sketch (which minute buckets keep too, for
/// ranges cut inside an hour):
///
/// - `visits`: visits started (on a page: visits that entered there);
/// - `nonBounces`: visits that went on to a second view, credited to the
///   entry page, in the slot of the visit's first view (so a slot's
///   non-bounces are of the visits it counts);
/// - `duration`: seconds between a visit's hits, credited to its entry
///   page, in the slot of the later hit;
/// - `exits` (pages only): +1 on each viewed page, −1 on the visit's
///   previous page in the slot of that previous view, so over a visit
///   only its last view keeps one, and no range's sum is below zero;
/// - `timedViews` and `timedSeconds` (pages only): a view followed by
///   another view of its visit, and the seconds until that next view,
///   credited to the earlier view's page in its own slot, so a range's
///   time on page until the next view is of the views it counts (a
///   visit's last view has no next view and no time: it is not timed);
/// - `engagedViews`, `scrollSum` and `engagedMs` (pages, and the site's
///   buckets as their sum, which page summaries are checked against):
///   from the engagements a tracker sends for a view
///   (`journal::Engagement`), in the slot of that view: +1 at its first engagement, each increase of
///   its greatest scroll depth in percentage points, and its engaged
///   milliseconds; so a range's mean scroll depth (scrollSum /
///   engagedViews) is the mean of each of its engaged views' greatest
///   depth, and its engaged time the mean of their time;
/// - `visitors`: the HyperLogLog registers of the visitor ids seen
///   (`domain::sketch`), merged with `$max`.
pub struct VisitFields;

impl VisitFields {
    pub const VISITS: usize = 0;
    pub const NON_BOUNCES: usize = 1;
    pub const DURATION: usize = 2;
    pub const EXITS: usize = 3;
    pub const TIMED_VIEWS: usize = 4;
    pub const TIMED_SECONDS: usize = 5;
    pub const ENGAGED_VIEWS: usize = 6;
    pub const SCROLL_SUM: usize = 7;
    pub const ENGAGED_MS: usize = 8;
    pub const COUNTERS: [&'static str; 9] = [
        "visits",
        "nonBounces",
        "duration",
        "exits",
        "timedViews",
        "timedSeconds",
        "engagedViews",
        "scrollSum",
        "engagedMs",
    ];
    pub const VISITORS: &'static str = "visitors";
}

impl Increments {
    /// Page buckets.
    pub fn new(resolution: Resolution) -> Self {
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
            taken_back: false,
        }
    }

    /// See [`TAKEN_BACK`].
    pub fn mark_taken_back(&mut self) {
        self.taken_back = true;
    }

    fn bucket(&mut self, page: &str, at: DateTime<Utc>) -> &mut BucketIncrement {
        let g = self.target.resolution;
        self.buckets
            .entry(self.target.bucket_of(page, at))
            .or_insert_with(|| BucketIncrement {
                views: vec![0; g.slot_count()],
                visits: None,
                credited_late: false,
            })
    }

    /// Counts a view of `page` (the site's bucket is keyed by its domain).
    pub fn add(&mut self, page: &str, at: DateTime<Utc>) {
        self.add_n(page, at, 1);
    }

    pub fn add_n(&mut self, page: &str, at: DateTime<Utc>, n: i32) {
        let slot = self.target.resolution.slot(at);
        // Saturating: a batch's own hits never come near, but an import's
        // figures are added here too, and a wrapped count would be stored
        // for ever.
        let views = &mut self.bucket(page, at).views[slot];
        *views = views.saturating_add(n);
    }

    /// Counts a view of `page` and, at hour and day level, what it changed
    /// of its visit (minute buckets hold views only).
    pub fn add_hit(&mut self, page: &str, at: DateTime<Utc>, visit: Option<&Visit>) {
        self.add_hit_signed(page, at, visit, 1);
    }

    /// [`Self::add_hit`], or with `sign` −1 its exact opposite (an
    /// import's deletion), but for the visitor: a sketch cannot take an
    /// id back.
    pub fn add_hit_signed(
        &mut self,
        page: &str,
        at: DateTime<Utc>,
        visit: Option<&Visit>,
        sign: i32,
    ) {
        self.add_n(page, at, sign);
        let Some(visit) = visit else {
            return;
        };
        if self.target.resolution == Resolution::Minute {
            // Minute buckets keep the visitors (not the visit counters), so
            // a range cut inside an hour counts exactly who viewed in it.
            if sign > 0 {
                self.bucket(page, at)
                    .visits_mut()
                    .visitors
                    .insert(visit.visitor);
            }
            return;
        }
        let pages = self.target.subject == Subject::Page;
        // The visit's previous hit: `duration_secs` is the difference of
        // the two hits' whole-second clocks, so this is the second it was
        // made in.
        let previous_at = whole_second(at)
            .checked_sub_signed(chrono::TimeDelta::seconds(i64::from(visit.duration_secs)))
            .unwrap_or(at);
        // The previous view's exit and the visit's bounce are credited where
        // that view was: when it is an earlier hour or day, the site's
        // bucket there says so, since page summaries and visit answers
        // are kept while a bucket's total is unchanged (and this changes
        // its pages without a view).
        if visit.entry.is_some()
            && self.target.subject == Subject::Site
            && self.target.bucket_of(page, previous_at) != self.target.bucket_of(page, at)
        {
            self.bucket(page, previous_at).credited_late = true;
        }
        let credit = |inc: &mut Self, page: &str, when: DateTime<Utc>, counter: usize, n: i64| {
            let n = n.saturating_mul(i64::from(sign));
            if n != 0 {
                let slot = inc.target.resolution.slot(when) as u16;
                let sum = &mut inc
                    .bucket(page, when)
                    .visits_mut()
                    .slots
                    .entry(slot)
                    .or_default()[counter];
                *sum = sum.saturating_add(n);
            }
        };
        match (&visit.entry, &visit.previous) {
            (Some(entry), previous) => {
                // The second view undoes the bounce where the visit started
                // (its previous hit is the entry), so every range's bounces
                // are of the visits it counts, never below zero.
                credit(
                    self,
                    entry,
                    previous_at,
                    VisitFields::NON_BOUNCES,
                    i64::from(visit.second_view),
                );
                credit(
                    self,
                    entry,
                    at,
                    VisitFields::DURATION,
                    i64::from(visit.duration_secs),
                );
                if pages {
                    credit(self, page, at, VisitFields::EXITS, 1);
                    // The previous page loses its exit where it was viewed:
                    // a range's exits are its views that ended their visit,
                    // never fewer than none.
                    if let Some(previous) = previous {
                        credit(self, previous, previous_at, VisitFields::EXITS, -1);
                        // The previous view lasted until this one: events
                        // do not move a visit's last hit
                        // (`ingest::visits`), so `duration_secs` is the
                        // gap between the two views.
                        credit(self, previous, previous_at, VisitFields::TIMED_VIEWS, 1);
                        credit(
                            self,
                            previous,
                            previous_at,
                            VisitFields::TIMED_SECONDS,
                            i64::from(visit.duration_secs),
                        );
                    }
                }
            }
            (None, _) => {
                credit(self, page, at, VisitFields::VISITS, 1);
                if pages {
                    credit(self, page, at, VisitFields::EXITS, 1);
                }
            }
        }
        let visits = self.bucket(page, at).visits_mut();
        if sign > 0 {
            visits.visitors.insert(visit.visitor);
        }
    }

    /// Adds an engagement with a view of `page` to the view's slot, in
    /// hour and day buckets (minute buckets hold views), the page's and
    /// its site's alike. The site's are what page summaries check their
    /// engagement against: an engagement changes its view's page bucket
    /// without a view, often after the view's day has ended, so the
    /// site's views alone would not tell a summary made before it from
    /// the buckets after it. Written in the same statement batch (and
    /// transaction) as the page's, every engagement moves them as it
    /// moves the pages' (each of the three only ever grows).
    pub fn add_engagement(&mut self, page: &str, engagement: &crate::journal::Engagement) {
        if self.target.resolution == Resolution::Minute {
            return;
        }
        let at = engagement.view_at;
        let slot = self.target.resolution.slot(at) as u16;
        let sums = self
            .bucket(page, at)
            .visits_mut()
            .slots
            .entry(slot)
            .or_default();
        for (counter, n) in [
            (VisitFields::ENGAGED_VIEWS, i64::from(engagement.first)),
            (VisitFields::SCROLL_SUM, i64::from(engagement.depth_added)),
            (VisitFields::ENGAGED_MS, i64::from(engagement.engaged_ms)),
        ] {
            sums[counter] = sums[counter].saturating_add(n);
        }
    }

    pub fn resolution(&self) -> Resolution {
        self.target.resolution
    }

    /// Adds a day's figures as one import keeps them (`import::plausible`):
    /// `views` of `page` at `at`, and in hour and day buckets the visit
    /// counters (in [`VisitFields::COUNTERS`] order) and `visitors` into
    /// the sketch. Which scope a figure belongs to is the caller's choice:
    /// it adds to page increments or site increments only.
    pub fn add_figures(
        &mut self,
        page: &str,
        at: DateTime<Utc>,
        views: i32,
        counters: [i64; 4],
        visitors: impl IntoIterator<Item = u64>,
    ) {
        if views != 0 {
            self.add_n(page, at, views);
        }
        if self.target.resolution == Resolution::Minute {
            return;
        }
        let slot = self.target.resolution.slot(at) as u16;
        let mut visitors = visitors.into_iter().peekable();
        if counters == [0; 4] && visitors.peek().is_none() {
            return;
        }
        let visits = self.bucket(page, at).visits_mut();
        if counters != [0; 4] {
            let slot = visits.slots.entry(slot).or_default();
            for (sum, n) in slot.iter_mut().zip(counters) {
                *sum = sum.saturating_add(n);
            }
        }
        for visitor in visitors {
            visits.visitors.insert(visitor);
        }
    }

    pub fn is_site(&self) -> bool {
        self.target.subject == Subject::Site
    }

    /// Drops the buckets of pages for which `gone(page)` holds; a site
    /// bucket is asked as its domain's root page (`<domain>/`).
    pub fn drop_where(&mut self, gone: impl Fn(&str) -> bool) {
        let site = self.target.subject == Subject::Site;
        self.buckets.retain(|(key, _), _| {
            if site {
                !gone(&format!("{key}/"))
            } else {
                !gone(key)
            }
        });
    }

    /// Views counted so far.
    pub fn views(&self) -> u64 {
        let sum = self
            .buckets
            .values()
            .flat_map(|b| b.views.iter().map(|&n| i64::from(n)))
            .fold(0_i64, i64::saturating_add);
        u64::try_from(sum).unwrap_or(0)
    }

    /// Takes out of the batch the bucket that `q` (the filter of one of
    /// [`Self::statements`]) selects, when it is one of this batch's:
    /// its key, start and the views it carried. For a statement the
    /// database refuses for what its bucket holds, so that the rest of
    /// the batch can go in.
    pub fn set_aside(&mut self, q: &Document) -> Option<SetAside> {
        let key = q.get_str(self.target.subject.key_field()).ok()?;
        let start = q.get_datetime("timestamp").ok()?.to_chrono();
        if let Some(part) = self.target.part {
            if super::values::number(q.get("part")) != Some(i64::from(part)) {
                return None;
            }
        }
        let (key, start) = (key.to_owned(), start);
        let bucket = self.buckets.remove(&(key.clone(), start))?;
        let views = bucket
            .views
            .iter()
            .map(|&n| i64::from(n))
            .fold(0_i64, i64::saturating_add);
        Some(SetAside { key, start, views })
    }

    pub fn collection(&self) -> &'static str {
        self.target.subject.collection(self.target.resolution)
    }

    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// One upsert statement per bucket for an `update` command:
    /// `{q: {page, timestamp}, u: {$inc: {totalViews, "<slots>.<i>"...,
    /// "visits.<i>"...}, $max: {"visitors.<register>"...}}, upsert: true}`;
    /// a sketch of more than [`MAX_FIELDS_PER_MAX`] registers goes on in
    /// further `$max` statements on the same bucket ([`with_max_parts`]).
    pub fn statements(&self) -> Vec<Document> {
        self.statements_as(|statement| statement)
    }

    /// [`Self::statements`], each turned by `made` as it is made (the
    /// writer keeps their BSON bytes only).
    pub fn statements_as<T>(&self, made: impl FnMut(Document) -> T) -> Vec<T> {
        let field = self.target.resolution.slots_field();
        self.buckets
            .iter()
            .flat_map(|((key, start), bucket)| {
                // At most 1,440 slots of i32: the sum fits an i64.
                let total: i64 = bucket.views.iter().map(|&n| i64::from(n)).sum();
                let mut inc = doc! { "totalViews": total };
                if self.taken_back || bucket.credited_late {
                    inc.insert(TAKEN_BACK, 1_i64);
                }
                for (slot, &n) in bucket.views.iter().enumerate().filter(|(_, &n)| n != 0) {
                    inc.insert(format!("{field}.{slot}"), Bson::Int32(n));
                }
                let mut update = Document::new();
                if let Some(visits) = &bucket.visits {
                    for (slot, counters) in &visits.slots {
                        for (name, &n) in VisitFields::COUNTERS.iter().zip(counters) {
                            if n != 0 {
                                inc.insert(format!("{name}.{slot}"), Bson::Int64(n));
                            }
                        }
                    }
                    if !visits.visitors.is_empty() {
                        update.insert("$max", visits.visitors.max_fields(VisitFields::VISITORS));
                    }
                }
                update.insert("$inc", inc);
                with_max_parts(self.target.bucket_query(key, *start), update)
            })
            .map(made)
            .collect()
    }
}

/// Most fields in one statement's `$max`. secantusd-rs checks an update's
/// paths against one another, at a cost that grows with the square of
/// their number: one `$max` of a day's sketch of an import (8,000
/// registers) took it about a second, a full one (16,384) about four, and
/// a few such days in one transaction passed the attempt's time limit
/// (docs/benchmarks.md, imports). In parts of this many the cost grows with
/// the registers alone. A live batch's bucket holds far fewer registers, so
/// its statement is one, as it always was.
pub const MAX_FIELDS_PER_MAX: usize = 1_000;

/// The upsert of `update` on the bucket `query` selects, its `$max` cut
/// into parts of at most [`MAX_FIELDS_PER_MAX`] fields: the first part
/// stays with the rest of `update`, each other part is a statement of its
/// own on the same bucket, right after it in the same command (and so the
/// same transaction). Registers merge by maximum, so how they are cut
/// changes nothing stored. Every part is an upsert with `update`'s
/// `$setOnInsert`, so the bucket comes out the same whichever statement
/// creates it.
pub fn with_max_parts(query: Document, mut update: Document) -> Vec<Document> {
    let rest: Vec<Document> = match update.get_document_mut("$max") {
        Ok(max) if max.len() > MAX_FIELDS_PER_MAX => {
            let all = std::mem::take(max);
            let mut parts: Vec<Document> = Vec::new();
            for (i, (name, value)) in all.into_iter().enumerate() {
                if i % MAX_FIELDS_PER_MAX == 0 {
                    parts.push(Document::new());
                }
                parts.last_mut().expect("pushed").insert(name, value);
            }
            let mut parts = parts.into_iter();
            *max = parts.next().expect("over the limit, so not empty");
            parts.collect()
        }
        _ => Vec::new(),
    };
    let on_insert = update.get_document("$setOnInsert").ok().cloned();
    let statement = |u: Document| doc! {"q": query.clone(), "u": u, "upsert": true};
    let mut statements = Vec::with_capacity(1 + rest.len());
    statements.push(statement(update));
    for part in rest {
        let mut u = doc! {"$max": part};
        if let Some(on_insert) = &on_insert {
            u.insert("$setOnInsert", on_insert.clone());
        }
        statements.push(statement(u));
    }
    statements
}

impl BucketIncrement {
    fn visits_mut(&mut self) -> &mut VisitIncrement {
        self.visits.get_or_insert_with(Default::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, m, s).unwrap()
    }

    #[test]
    fn merges_hits_on_one_bucket_into_one_statement() {
        let mut inc = Increments::new(Resolution::Minute);
        inc.add("example.com/a", at(10, 1, 7));
        inc.add("example.com/a", at(10, 1, 7));
        inc.add("example.com/a", at(10, 1, 9));
        inc.add("example.com/b", at(10, 1, 9));
        let mut statements = inc.statements();
        statements.sort_by_key(|s| {
            s.get_document("q")
                .unwrap()
                .get_str("page")
                .unwrap()
                .to_owned()
        });
        assert_eq!(statements.len(), 2);
        assert_eq!(
            statements[0],
            doc! {
                "q": {"page": "example.com/a", "timestamp": bson::DateTime::from_chrono(at(10, 1, 0))},
                "u": {"$inc": {"totalViews": 3_i64, "seconds.7": 2, "seconds.9": 1}},
                "upsert": true,
            }
        );
    }

    #[test]
    fn a_refused_statements_bucket_is_set_aside_and_the_others_stay() {
        let mut inc = Increments::for_site(Resolution::Hour, 0);
        inc.add("poisoned.test/", at(10, 1, 7));
        inc.add("poisoned.test/a", at(10, 2, 0));
        inc.add("healthy.test/", at(10, 1, 7));
        let q = |site: &str, part: i32| {
            doc! {"site": site, "timestamp": bson::DateTime::from_chrono(at(10, 0, 0)), "part": part}
        };
        // Another part's bucket, or one not in the batch, is not ours.
        assert_eq!(inc.set_aside(&q("poisoned.test", 1)), None);
        assert_eq!(inc.set_aside(&q("other.test", 0)), None);
        assert_eq!(
            inc.set_aside(&q("poisoned.test", 0)),
            Some(SetAside {
                key: "poisoned.test".into(),
                start: at(10, 0, 0),
                views: 2,
            })
        );
        let statements = inc.statements();
        assert_eq!(statements.len(), 1);
        assert_eq!(
            statements[0].get_document("q").unwrap().get_str("site"),
            Ok("healthy.test")
        );
        // Page buckets by page.
        let mut pages = Increments::new(Resolution::Minute);
        pages.add("poisoned.test/", at(10, 1, 7));
        let page_q =
            doc! {"page": "poisoned.test/", "timestamp": bson::DateTime::from_chrono(at(10, 1, 0))};
        assert_eq!(pages.set_aside(&page_q).map(|s| s.views), Some(1));
        assert!(pages.is_empty());
    }

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        let mut inc = Increments::new(Resolution::Day);
        inc.add_figures(
            "s.test/",
            at(0, 0, 0),
            i32::MAX,
            [i64::MAX, 0, i64::MAX, 0],
            [],
        );
        inc.add_figures("s.test/", at(0, 0, 0), i32::MAX, [1, 0, i64::MAX, 0], []);
        let statements = inc.statements();
        let u = statements[0].get_document("u").unwrap();
        let add = u.get_document("$inc").unwrap();
        assert_eq!(add.get_i32("hours.0"), Ok(i32::MAX));
        assert_eq!(add.get_i64("visits.0"), Ok(i64::MAX));
        assert_eq!(add.get_i64("duration.0"), Ok(i64::MAX));
    }

    #[test]
    fn site_increments_key_by_domain_and_merge_its_pages() {
        let mut inc = Increments::for_site(Resolution::Hour, 3);
        inc.add("example.com/a", at(10, 1, 7));
        inc.add("example.com/b", at(10, 1, 9));
        inc.add("example.com/", at(10, 2, 0));
        inc.add("other.org/a", at(10, 2, 0));
        assert_eq!(inc.collection(), "site_views_hour");
        let statements = inc.statements();
        assert_eq!(statements.len(), 2);
        let ours = statements
            .iter()
            .find(|s| s.get_document("q").unwrap().get_str("site") == Ok("example.com"))
            .unwrap();
        assert_eq!(
            ours.get_document("u")
                .unwrap()
                .get_document("$inc")
                .unwrap(),
            &doc! {"totalViews": 3_i64, "minutes.1": 2, "minutes.2": 1}
        );
        assert_eq!(ours.get_document("q").unwrap().get_i32("part"), Ok(3));
    }

    #[test]
    fn a_credit_to_an_earlier_hour_marks_the_sites_bucket_there() {
        let visit = |duration_secs| Visit {
            visitor: 42,
            duration_secs,
            entry: Some("example.com/a".into()),
            previous: Some("example.com/a".into()),
            second_view: true,
            place: None,
        };
        let taken_back = |duration_secs| {
            let mut inc = Increments::for_site(Resolution::Hour, 0);
            inc.add_hit("example.com/b", at(10, 1, 7), Some(&visit(duration_secs)));
            let mut marks: Vec<(DateTime<Utc>, i64)> = inc
                .statements()
                .iter()
                .map(|s| {
                    let q = s.get_document("q").unwrap();
                    let u = s.get_document("u").unwrap().get_document("$inc").unwrap();
                    (
                        q.get_datetime("timestamp").unwrap().to_chrono(),
                        u.get_i64(TAKEN_BACK).unwrap_or(0),
                    )
                })
                .collect();
            marks.sort();
            marks
        };
        // The previous view at 10:00:37: same hour, nothing marked.
        assert_eq!(taken_back(30), [(at(10, 0, 0), 0)]);
        // At 09:59:07: the 09:00 bucket gets the bounce and is marked.
        assert_eq!(taken_back(120), [(at(9, 0, 0), 1), (at(10, 0, 0), 0)]);
    }

    #[test]
    fn a_later_view_times_the_previous_view_where_it_was_made() {
        // /a viewed at 09:59:07, /b at 10:01:07: /a's view lasted 120 s.
        let visit = Visit {
            visitor: 42,
            duration_secs: 120,
            entry: Some("example.com/a".into()),
            previous: Some("example.com/a".into()),
            second_view: true,
            place: None,
        };
        let mut inc = Increments::new(Resolution::Hour);
        inc.add_hit("example.com/b", at(10, 1, 7), Some(&visit));
        let incs: HashMap<(String, DateTime<Utc>), Document> = inc
            .statements()
            .iter()
            .map(|s| {
                let q = s.get_document("q").unwrap();
                let key = (
                    q.get_str("page").unwrap().to_owned(),
                    q.get_datetime("timestamp").unwrap().to_chrono(),
                );
                (
                    key,
                    s.get_document("u")
                        .unwrap()
                        .get_document("$inc")
                        .unwrap()
                        .clone(),
                )
            })
            .collect();
        let a = &incs[&("example.com/a".to_owned(), at(9, 0, 0))];
        assert_eq!(a.get_i64("timedViews.59"), Ok(1));
        assert_eq!(a.get_i64("timedSeconds.59"), Ok(120));
        // The view that ends nothing yet is not timed.
        let b = &incs[&("example.com/b".to_owned(), at(10, 0, 0))];
        assert!(b.keys().all(|k| !k.starts_with("timed")), "{b:?}");
        // Its visit's first view has no previous view to time.
        let mut first = Increments::new(Resolution::Day);
        let start = Visit {
            visitor: 42,
            ..Visit::default()
        };
        first.add_hit("example.com/a", at(9, 59, 7), Some(&start));
        let u = first.statements()[0].get_document("u").unwrap().clone();
        assert!(u
            .get_document("$inc")
            .unwrap()
            .keys()
            .all(|k| !k.starts_with("timed")));
    }

    #[test]
    fn an_engagement_adds_to_its_views_slot_of_its_page_and_site_and_not_to_minutes() {
        let e = crate::journal::Engagement {
            view_at: at(9, 59, 7),
            depth_added: 30,
            first: true,
            engaged_ms: 4_500,
        };
        let mut hour = Increments::new(Resolution::Hour);
        hour.add_engagement("example.com/a", &e);
        let s = &hour.statements()[0];
        assert_eq!(
            s.get_document("q")
                .unwrap()
                .get_datetime("timestamp")
                .unwrap()
                .to_chrono(),
            at(9, 0, 0)
        );
        assert_eq!(
            s.get_document("u").unwrap().get_document("$inc").unwrap(),
            &doc! {"totalViews": 0_i64, "engagedViews.59": 1_i64, "scrollSum.59": 30_i64, "engagedMs.59": 4_500_i64}
        );
        // Not minutes: not a view.
        let mut minutes = Increments::new(Resolution::Minute);
        minutes.add_engagement("example.com/a", &e);
        assert!(minutes.is_empty());
        // The site's buckets too, in the view's slot (what page summaries
        // are checked against), still without a view.
        let mut site = Increments::for_site(Resolution::Day, 2);
        site.add_engagement("example.com/a", &e);
        let s = &site.statements()[0];
        assert_eq!(
            s.get_document("q").unwrap(),
            &doc! {"site": "example.com", "timestamp": bson::DateTime::from_chrono(at(0, 0, 0)), "part": 2}
        );
        assert_eq!(
            s.get_document("u").unwrap().get_document("$inc").unwrap(),
            &doc! {"totalViews": 0_i64, "engagedViews.9": 1_i64, "scrollSum.9": 30_i64, "engagedMs.9": 4_500_i64}
        );
    }

    #[test]
    fn a_hit_taken_back_is_its_exact_opposite_but_for_the_visitor() {
        let visit = Visit {
            visitor: 42,
            duration_secs: 30,
            entry: Some("example.com/a".into()),
            previous: Some("example.com/a".into()),
            second_view: true,
            place: None,
        };
        let statement = |sign: i32| {
            let mut inc = Increments::new(Resolution::Hour);
            inc.add_hit_signed("example.com/b", at(10, 1, 7), Some(&visit), sign);
            let mut all = inc.statements();
            all.sort_by_key(|s| {
                s.get_document("q")
                    .unwrap()
                    .get_str("page")
                    .unwrap()
                    .to_owned()
            });
            all.iter()
                .map(|s| s.get_document("u").unwrap().clone())
                .collect::<Vec<_>>()
        };
        let (added, taken) = (statement(1), statement(-1));
        for (a, t) in added.iter().zip(&taken) {
            let a_inc = a.get_document("$inc").unwrap();
            let t_inc = t.get_document("$inc").unwrap();
            assert_eq!(
                a_inc.keys().collect::<Vec<_>>(),
                t_inc.keys().collect::<Vec<_>>()
            );
            for (field, value) in a_inc {
                let n = |v: &Bson| v.as_i64().or(v.as_i32().map(i64::from)).unwrap();
                assert_eq!(n(value), -n(t_inc.get(field).unwrap()), "{field}");
            }
            assert!(t.get("$max").is_none(), "no visitor registers taken back");
        }
        assert!(added.iter().any(|a| a.get("$max").is_some()));
    }

    #[test]
    fn a_heavy_days_sketch_is_written_in_parts_of_bounded_max() {
        use crate::domain::sketch::mix;
        let day = at(0, 0, 0);
        let mut inc = Increments::for_site(Resolution::Day, 0);
        // A Plausible day of 10,000 visitors: about 7,500 registers.
        inc.add_figures("example.com", day, 0, [5, 3, 60, 0], (0..10_000).map(mix));
        let mut sketch = Sketch::new();
        (0..10_000).map(mix).for_each(|id| sketch.insert(id));
        let whole = sketch.max_fields(VisitFields::VISITORS);
        let statements = inc.statements();
        assert_eq!(statements.len(), whole.len().div_ceil(MAX_FIELDS_PER_MAX));
        let query = statements[0].get_document("q").unwrap();
        let mut union = Document::new();
        for (i, s) in statements.iter().enumerate() {
            assert_eq!(s.get_document("q").unwrap(), query, "one bucket");
            assert_eq!(s.get_bool("upsert"), Ok(true));
            let u = s.get_document("u").unwrap();
            let max = u.get_document("$max").unwrap();
            assert!(max.len() <= MAX_FIELDS_PER_MAX, "{}", max.len());
            // The counters once, with the first part.
            assert_eq!(u.get("$inc").is_some(), i == 0);
            for (name, value) in max {
                assert!(union.insert(name, value.clone()).is_none(), "{name} twice");
            }
        }
        assert_eq!(union, whole, "every register, once");
        // A live batch's bucket is one statement, as before.
        let mut live = Increments::new(Resolution::Hour);
        live.add_figures("example.com/a", day, 1, [0; 4], (0..500).map(mix));
        assert_eq!(live.statements().len(), 1);
    }

    #[test]
    fn max_parts_keep_what_the_statement_sets_on_insert() {
        let query = doc! {"page": "example.com/", "timestamp": 1};
        let max: Document = (0..MAX_FIELDS_PER_MAX + 1)
            .map(|i| (format!("v.{i}"), Bson::Int32(1)))
            .collect();
        let update = doc! {"$inc": {"writes": 1_i64}, "$setOnInsert": {"g": 7_i64}, "$max": max};
        let parts = with_max_parts(query.clone(), update);
        assert_eq!(parts.len(), 2);
        let second = parts[1].get_document("u").unwrap();
        assert_eq!(second.get_document("$max").unwrap().len(), 1);
        assert_eq!(
            second.get_document("$setOnInsert").unwrap(),
            &doc! {"g": 7_i64}
        );
        assert!(second.get("$inc").is_none(), "counted once");
        // At the limit, one statement as it was.
        let max: Document = (0..MAX_FIELDS_PER_MAX)
            .map(|i| (format!("v.{i}"), Bson::Int32(1)))
            .collect();
        let update = doc! {"$inc": {"writes": 1_i64}, "$max": max};
        assert_eq!(
            with_max_parts(query.clone(), update.clone()),
            [doc! {"q": query, "u": update, "upsert": true}]
        );
    }

    #[test]
    fn zero_filled_buckets_have_every_slot() {
        let d = zero_filled(Resolution::Day, "example.com/", at(0, 0, 0));
        assert_eq!(d.get_document("hours").unwrap().len(), 24);
        assert_eq!(d.get_i64("totalViews").unwrap(), 0);
        let m = zero_filled(Resolution::Minute, "example.com/", at(10, 1, 0));
        assert_eq!(m.get_document("seconds").unwrap().get_i32("59").unwrap(), 0);
    }
}

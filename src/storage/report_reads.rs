//! The report reads of the page and site buckets: which collection, which
//! filter, which index and projection a report's read uses, and the
//! documents it gets back turned into numbers. `reports/` decides what to
//! read for a period and adds the numbers up into what a report shows.
//!
//! Every read goes through `Store::reports()`, the handle with the
//! configured read preference (or `Store::realtime()` for the realtime
//! panels), and is an index range scan on `{page, timestamp}`.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use mongodb::options::Hint;
use std::collections::HashMap;

use super::buckets::{site_pages, VisitFields};
use super::page_summaries::{Grain, PageCounts};
use super::{Bucket, Grouping, Resolution, Store, Subject};
use crate::domain::sketch::Sketch;
use crate::domain::{DomainName, Page};

/// What a report covers: every page of a site, or one page.
#[derive(Debug, Clone)]
pub enum Scope<'a> {
    /// A site, by adding up its page buckets (a site whose totals are not
    /// backfilled yet).
    Site(&'a DomainName),
    /// A site, from its own totals (`site_views_*`): one bucket per time
    /// instead of one per page and time.
    SiteTotals(&'a super::sites::Site),
    Page(&'a Page),
}

impl<'a> Scope<'a> {
    /// The cheapest exact way to read a whole site.
    pub fn of_site(site: &'a super::sites::Site) -> Self {
        if site.totals_complete {
            Scope::SiteTotals(site)
        } else {
            Scope::Site(&site.domain)
        }
    }
}

/// A find over one scope's buckets at one level, at the times `times`
/// (a filter on `timestamp`).
///
/// A whole site's page buckets over a stretch of time are read through the
/// `timestamp_page` index (see [`super::buckets::BY_TIME`]). On
/// MongoDB the filter names the site's page range and the times, and a
/// `hint` names the index. secantusd-rs scans a compound index with bounds
/// on both fields, or any hinted one, at 100 to 500 ms whatever it returns,
/// but the times alone in 8 ms for 672 buckets (measured on the year
/// bench's data, docs/benchmarks.md): there the filter is the times alone
/// and the site's pages are kept here by their prefix.
pub struct BucketFind {
    coll: mongodb::Collection<Document>,
    matcher: Document,
    hint: Option<Hint>,
    /// Pages not starting with it are skipped here.
    prefix: Option<String>,
}

impl BucketFind {
    pub fn new(
        store: &Store,
        freshness: Freshness,
        scope: &Scope<'_>,
        g: Resolution,
        times: Document,
    ) -> Self {
        let (coll, mut matcher) = buckets_of(scope, g);
        let (mut hint, mut prefix) = (None, None);
        if let (Scope::Site(domain), Resolution::Hour | Resolution::Day) = (scope, g) {
            if store.is_secantus() {
                matcher = Document::new();
                prefix = Some(format!("{domain}/"));
            } else {
                hint = Some(Hint::Name(super::buckets::BY_TIME.into()));
            }
        }
        matcher.insert("timestamp", times);
        BucketFind {
            coll: handle(store, freshness).collection(coll),
            matcher,
            hint,
            prefix,
        }
    }

    /// The buckets at `g` of the pages named, at `times`.
    pub fn of_pages(
        store: &Store,
        freshness: Freshness,
        pages: &[&Page],
        g: Resolution,
        times: Document,
    ) -> Self {
        BucketFind {
            coll: handle(store, freshness).collection(g.collection()),
            matcher: pages_at(pages, times.into()),
            hint: None,
            prefix: None,
        }
    }

    async fn cursor(
        self,
        store: &Store,
        projection: Document,
    ) -> Result<(mongodb::Cursor<Document>, Option<String>), mongodb::error::Error> {
        let find = self.coll.find(self.matcher);
        let find = match self.hint {
            Some(hint) => find.hint(hint),
            None => find,
        };
        let cursor = find
            .projection(projection)
            .batch_size(10_000)
            .max_time(store.report_max_time())
            .await?;
        Ok((cursor, self.prefix))
    }
}

/// The most pages [`pages_at`] asks for as one range each.
const PAGES_AS_RANGES: usize = 32;

/// The buckets of the pages named at `times`. A few pages are one
/// `{page, timestamp}` range each (`$or`), which secantusd-rs reads fastest
/// for a screen of top pages (48 hours of 10 pages: 6 ms, where an `$in`
/// of them takes 18 ms). More are one `$in` of pages: the cost of an `$or`
/// there grows with the square of its branches (30 days of 1,000 pages:
/// 25 s as ranges, 0.4 s as an `$in`; today of 1,000 pages, 0.5 s and
/// 20 ms). MongoDB plans both forms on the `{page, timestamp}` index.
pub fn pages_at(pages: &[&Page], times: Bson) -> Document {
    if pages.len() > PAGES_AS_RANGES {
        let names: Vec<&str> = pages.iter().map(|p| p.as_str()).collect();
        return doc! {"page": {"$in": names}, "timestamp": times};
    }
    let each: Vec<Document> = pages
        .iter()
        .map(|p| doc! {"page": p.as_str(), "timestamp": times.clone()})
        .collect();
    doc! {"$or": each}
}

/// Whether a bucket read by a [`BucketFind`] belongs to its scope.
fn wanted(d: &Document, prefix: Option<&str>) -> bool {
    prefix.is_none_or(|p| d.get_str("page").is_ok_and(|page| page.starts_with(p)))
}

/// The collection and key filter of a scope's buckets at `g`.
pub fn buckets_of(scope: &Scope<'_>, g: Resolution) -> (&'static str, Document) {
    match scope {
        Scope::Site(domain) => (g.collection(), doc! {"page": site_pages(domain)}),
        Scope::SiteTotals(site) => (
            Subject::Site.collection(g),
            doc! {"site": site.domain.as_str()},
        ),
        Scope::Page(page) => (g.collection(), doc! {"page": page.as_str()}),
    }
}

pub fn time_filter(from: DateTime<Utc>, to: DateTime<Utc>) -> Document {
    doc! {"$gte": bson::DateTime::from_chrono(from), "$lt": bson::DateTime::from_chrono(to)}
}

pub fn number(value: Option<&Bson>) -> i64 {
    match value {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}

/// Where a query reads: report pages accept the configured staleness; the
/// realtime panels (this minute, the last hour) want the newest counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    Report,
    Realtime,
}

fn handle(store: &Store, freshness: Freshness) -> &mongodb::Database {
    match freshness {
        Freshness::Report => store.reports(),
        Freshness::Realtime => store.realtime(),
    }
}

/// Adds the slots (`minutes` of hour buckets, `hours` of day buckets, each
/// `width` long) of the buckets `find` reads (`add(field index, slot
/// start, page, count)`), one per field,
/// where `keep(bucket start, slot start)` says so; `key_field` keeps them
/// apart by page.
pub async fn add_slots(
    store: &Store,
    find: BucketFind,
    (fields, width): (&[&str], TimeDelta),
    key_field: Option<&str>,
    keep: impl Fn(DateTime<Utc>, DateTime<Utc>) -> bool,
    mut add: impl FnMut(usize, DateTime<Utc>, Option<&str>, i64),
) -> Result<(), mongodb::error::Error> {
    let mut projection = doc! {"_id": 0, "page": 1, "timestamp": 1};
    for field in fields {
        projection.insert(*field, 1);
    }
    let (mut cursor, prefix) = find.cursor(store, projection).await?;
    while let Some(d) = cursor.try_next().await? {
        if !wanted(&d, prefix.as_deref()) {
            continue;
        }
        let Ok(start) = d.get_datetime("timestamp") else {
            continue;
        };
        let start = start.to_chrono();
        let page = key_field.and_then(|k| d.get_str(k).ok());
        for (i, field) in fields.iter().enumerate() {
            let Ok(slots) = d.get_document(field) else {
                continue;
            };
            for (slot, views) in slots {
                let Ok(n) = slot.parse::<i32>() else {
                    continue;
                };
                let at = start + width * n;
                if keep(start, at) {
                    add(i, at, page, number(Some(views)));
                }
            }
        }
    }
    Ok(())
}

/// Whether any view of the scope was ever stored. Day buckets suffice:
/// every view reaches one; preallocated buckets hold 0.
pub async fn has_views(store: &Store, scope: &Scope<'_>) -> Result<bool, mongodb::error::Error> {
    let (coll, mut matcher) = buckets_of(scope, Resolution::Day);
    matcher.insert("totalViews", doc! {"$gt": 0});
    Ok(store
        .reports()
        .collection::<Document>(coll)
        .find_one(matcher)
        .projection(doc! {"_id": 0, "totalViews": 1})
        .max_time(store.report_max_time())
        .await?
        .is_some())
}

pub fn add_views(by_page: &mut HashMap<String, i64>, page: &str, views: i64) {
    if views != 0 {
        match by_page.get_mut(page) {
            Some(total) => *total += views,
            None => {
                by_page.insert(page.to_owned(), views);
            }
        }
    }
}

/// Adds the views per page of the whole UTC days `[first, last)` from the
/// day buckets.
pub async fn add_whole_day_views(
    store: &Store,
    domain: &DomainName,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
    by_page: &mut HashMap<String, i64>,
) -> Result<(), mongodb::error::Error> {
    let site = Scope::Site(domain);
    let times = time_filter(first, last);
    let find = BucketFind::new(store, Freshness::Report, &site, Resolution::Day, times);
    if store.grouping() == Grouping::Server {
        let mut matcher = find.matcher;
        if find.prefix.is_some() {
            // Grouped on the server, so the site's pages must be named in
            // the match (the times alone would group every site's pages).
            matcher.insert("page", site_pages(domain));
        }
        let mut aggregate = find.coll.aggregate([
            doc! {"$match": matcher},
            doc! {"$group": {"_id": "$page", "views": {"$sum": "$totalViews"}}},
        ]);
        if let Some(hint) = find.hint {
            aggregate = aggregate.hint(hint);
        }
        let mut cursor = aggregate.max_time(store.report_max_time()).await?;
        while let Some(d) = cursor.try_next().await? {
            if let Ok(page) = d.get_str("_id") {
                add_views(by_page, page, number(d.get("views")));
            }
        }
    } else {
        let projection = doc! {"_id": 0, "page": 1, "totalViews": 1};
        let (mut cursor, prefix) = find.cursor(store, projection).await?;
        while let Some(d) = cursor.try_next().await? {
            if let (true, Ok(page)) = (wanted(&d, prefix.as_deref()), d.get_str("page")) {
                add_views(by_page, page, number(d.get("totalViews")));
            }
        }
    }
    Ok(())
}

/// The site's views per UTC day over `[first, last)` (its writer parts
/// added up; days without a document left out): what page summaries are
/// checked against.
pub async fn site_day_totals(
    store: &Store,
    domain: &DomainName,
    range: (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<DateTime<Utc>, i64>, mongodb::error::Error> {
    site_totals(store, domain, Resolution::Day, range).await
}

/// The site's views per bucket of `resolution` over `[first, last)`, its
/// writer parts added up.
pub async fn site_totals(
    store: &Store,
    domain: &DomainName,
    resolution: Resolution,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<DateTime<Utc>, i64>, mongodb::error::Error> {
    let mut totals: HashMap<DateTime<Utc>, i64> = HashMap::new();
    let mut cursor = store
        .reports()
        .collection::<Document>(Subject::Site.collection(resolution))
        .find(doc! {"site": domain.as_str(), "timestamp": time_filter(first, last)})
        .projection(doc! {"_id": 0, "timestamp": 1, "totalViews": 1})
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        if let Ok(day) = d.get_datetime("timestamp") {
            // Saturating: a stored count may be anything (a hand edit).
            let sum = totals.entry(day.to_chrono()).or_default();
            *sum = sum.saturating_add(number(d.get("totalViews")));
        }
    }
    Ok(totals)
}

/// What a site bucket says of its unit that kept page summaries are
/// checked against (its writer parts added up): the views, the deletions
/// and late credits that changed its pages without a view
/// (`buckets::TAKEN_BACK`), and the engaged views, scroll sum and engaged
/// milliseconds of its engagements, which change its pages without a
/// view too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SiteUnit {
    pub views: i64,
    pub taken_back: i64,
    pub engaged: [i64; 3],
}

/// The engagement counters of a bucket, in [`SiteUnit::engaged`]'s order.
const ENGAGED: [&str; 3] = [
    VisitFields::COUNTERS[VisitFields::ENGAGED_VIEWS],
    VisitFields::COUNTERS[VisitFields::SCROLL_SUM],
    VisitFields::COUNTERS[VisitFields::ENGAGED_MS],
];

/// The timed views' counters of a bucket: views, seconds.
const TIMED: [&str; 2] = [
    VisitFields::COUNTERS[VisitFields::TIMED_VIEWS],
    VisitFields::COUNTERS[VisitFields::TIMED_SECONDS],
];

/// [`site_totals`] with what else guards kept page summaries, per unit
/// ([`SiteUnit`]).
pub async fn site_totals_guarded(
    store: &Store,
    domain: &DomainName,
    resolution: Resolution,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<DateTime<Utc>, SiteUnit>, mongodb::error::Error> {
    use super::buckets::TAKEN_BACK;
    let mut totals: HashMap<DateTime<Utc>, SiteUnit> = HashMap::new();
    let mut projection = doc! {"_id": 0, "timestamp": 1, "totalViews": 1, TAKEN_BACK: 1};
    for name in ENGAGED {
        projection.insert(name, 1);
    }
    let mut cursor = store
        .reports()
        .collection::<Document>(Subject::Site.collection(resolution))
        .find(doc! {"site": domain.as_str(), "timestamp": time_filter(first, last)})
        .projection(projection)
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        if let Ok(day) = d.get_datetime("timestamp") {
            let entry = totals.entry(day.to_chrono()).or_default();
            entry.views = entry.views.saturating_add(number(d.get("totalViews")));
            entry.taken_back = entry.taken_back.saturating_add(number(d.get(TAKEN_BACK)));
            for (sum, name) in entry.engaged.iter_mut().zip(ENGAGED) {
                *sum = sum.saturating_add(slots_sum(d.get_document(name).ok()));
            }
        }
    }
    Ok(totals)
}

/// The site's visits per bucket start at `resolution` over `[first,
/// last)` (all writer parts added up), where there are any.
pub async fn site_visits(
    store: &Store,
    domain: &DomainName,
    resolution: Resolution,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<DateTime<Utc>, i64>, mongodb::error::Error> {
    let visits = VisitFields::COUNTERS[VisitFields::VISITS];
    let mut out: HashMap<DateTime<Utc>, i64> = HashMap::new();
    let mut cursor = store
        .reports()
        .collection::<Document>(Subject::Site.collection(resolution))
        .find(doc! {
            "site": domain.as_str(),
            "timestamp": time_filter(first, last),
            visits: {"$exists": true},
        })
        .projection(doc! {"_id": 0, "timestamp": 1, visits: 1})
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        if let Ok(at) = d.get_datetime("timestamp") {
            let n = slots_sum(d.get_document(visits).ok());
            let entry = out.entry(at.to_chrono()).or_default();
            *entry = entry.saturating_add(n);
        }
    }
    out.retain(|_, n| *n != 0);
    Ok(out)
}

/// The first and last UTC day of the site's day totals within
/// [`crate::storage::stored_dates::window`] at `now`.
pub async fn site_day_range(
    store: &Store,
    domain: &DomainName,
    now: DateTime<Utc>,
) -> Result<Option<(DateTime<Utc>, DateTime<Utc>)>, mongodb::error::Error> {
    super::site_totals::first_and_last_of(
        store,
        Subject::Site.collection(Resolution::Day),
        doc! {"site": domain.as_str(), "timestamp": super::stored_dates::within(now)},
    )
    .await
}

/// Each page's figures in each of the units numbered `units` of `grain`
/// (UTC days or hours since 1970-01-01), from the page buckets, sorted by
/// page: views, visits entered there, exits, time on page and scroll
/// depth counters, and for days the estimate of the bucket's visitors
/// sketch (a visitor id is a day's, so hours carry none). `$in` of unit
/// starts is a point lookup per unit.
pub async fn page_units(
    store: &Store,
    domain: &DomainName,
    grain: Grain,
    units: &[i64],
) -> Result<HashMap<i64, Vec<(String, PageCounts)>>, mongodb::error::Error> {
    let list: Vec<bson::DateTime> = units
        .iter()
        .map(|d| bson::DateTime::from_chrono(grain.start(*d)))
        .collect();
    let pages_of_site = Scope::Site(domain);
    let find = BucketFind::new(
        store,
        Freshness::Report,
        &pages_of_site,
        grain.resolution(),
        doc! {"$in": list},
    );
    let visits = VisitFields::COUNTERS[VisitFields::VISITS];
    let exits = VisitFields::COUNTERS[VisitFields::EXITS];
    let mut projection = doc! {
        "_id": 0, "page": 1, "timestamp": 1, "totalViews": 1, visits: 1, exits: 1,
    };
    for name in TIMED.iter().chain(&ENGAGED) {
        projection.insert(*name, 1);
    }
    if grain == Grain::Day {
        projection.insert(VisitFields::VISITORS, 1);
    }
    let (mut cursor, prefix) = find.cursor(store, projection).await?;
    let mut read: HashMap<i64, Vec<(String, PageCounts)>> = HashMap::new();
    while let Some(d) = cursor.try_next().await? {
        let (true, Ok(page), Ok(day)) = (
            wanted(&d, prefix.as_deref()),
            d.get_str("page"),
            d.get_datetime("timestamp"),
        ) else {
            continue;
        };
        let sum = |name: &str| slots_sum(d.get_document(name).ok());
        let counts = PageCounts {
            views: number(d.get("totalViews")),
            entries: sum(visits),
            exits: sum(exits),
            visitors: 0,
            timed_views: sum(TIMED[0]),
            timed_secs: sum(TIMED[1]),
            engaged_views: sum(ENGAGED[0]),
            scroll_sum: sum(ENGAGED[1]),
            engaged_ms: sum(ENGAGED[2]),
        };
        // A page may have entries or exits in a unit without views: an
        // imported day's figures (Plausible's entry and exit pages
        // without a pages row for that page and day).
        if !counts.is_empty() {
            read.entry(grain.number(day.to_chrono()))
                .or_default()
                .push((
                    page.to_owned(),
                    PageCounts {
                        visitors: d
                            .get_document(VisitFields::VISITORS)
                            .map_or(0, estimate_stored),
                        ..counts
                    },
                ));
        }
    }
    for pages in read.values_mut() {
        pages.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(read)
}

/// The sum of a slot map's values (0 where it is absent).
pub fn slots_sum(slots: Option<&Document>) -> i64 {
    slots.map_or(0, |s| {
        s.iter()
            .map(|(_, v)| number(Some(v)))
            .fold(0, i64::saturating_add)
    })
}

/// The 60 per-second counts of one page-minute (`seconds` of its bucket).
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "seconds_of", page = %page, minute = %minute))]
pub async fn seconds_of(
    store: &Store,
    page: &Page,
    minute: DateTime<Utc>,
) -> Result<[i64; 60], mongodb::error::Error> {
    seconds_from(store, page, minute, Freshness::Report).await
}

/// [`seconds_of`] for the realtime panel (this minute).
pub async fn realtime_seconds(
    store: &Store,
    page: &Page,
    minute: DateTime<Utc>,
) -> Result<[i64; 60], mongodb::error::Error> {
    seconds_from(store, page, minute, Freshness::Realtime).await
}

async fn seconds_from(
    store: &Store,
    page: &Page,
    minute: DateTime<Utc>,
    freshness: Freshness,
) -> Result<[i64; 60], mongodb::error::Error> {
    let minute = Resolution::Minute.floor(minute);
    let bucket: Option<Bucket> = match freshness {
        Freshness::Report => store.reports(),
        Freshness::Realtime => store.realtime(),
    }
    .collection::<Bucket>(Resolution::Minute.collection())
    .find_one(doc! {"page": page.as_str(), "timestamp": bson::DateTime::from_chrono(minute)})
    .max_time(store.report_max_time())
    .await?;
    let mut out = [0; 60];
    if let Some(b) = bucket {
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = b.slot(i);
        }
    }
    Ok(out)
}

/// The most recent minute before `before` in which `page` had views, within
/// the day before it (the default minute of the per-second breakdown).
///
/// With `Grouping::Server` (MongoDB) the server walks the `{page,
/// timestamp}` index backwards and stops at the first bucket with views
/// (`limit 1`). With `Grouping::App` (secantusd-rs) the app walks the page's
/// minute buckets newest first and skips empty ones: there a `totalViews >
/// 0` condition made the server examine the whole day instead of stopping
/// at the first match (70 ms instead of 5 ms for a busy page). Empty buckets
/// are preallocated ones: normally the current and next hour, at worst (an
/// admin's run over past hours) the day's 1,440, so the walk stays bounded.
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "latest_minute", page = %page))]
pub async fn latest_minute(
    store: &Store,
    page: &Page,
    before: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, mongodb::error::Error> {
    let coll = store
        .reports()
        .collection::<Document>(Resolution::Minute.collection());
    let window = time_filter(before - TimeDelta::days(1), before);
    if store.grouping() == Grouping::Server {
        let found = coll
            .find_one(doc! {"page": page.as_str(), "timestamp": window, "totalViews": {"$gt": 0}})
            .projection(doc! {"_id": 0, "timestamp": 1})
            .sort(doc! {"timestamp": -1})
            .max_time(store.report_max_time())
            .await?;
        return Ok(found.and_then(|d| d.get_datetime("timestamp").ok().map(|t| t.to_chrono())));
    }
    let mut cursor = coll
        .find(doc! {"page": page.as_str(), "timestamp": window})
        .projection(doc! {"_id": 0, "timestamp": 1, "totalViews": 1})
        .sort(doc! {"timestamp": -1})
        .batch_size(64)
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        if number(d.get("totalViews")) > 0 {
            return Ok(d.get_datetime("timestamp").ok().map(|t| t.to_chrono()));
        }
    }
    Ok(None)
}

/// The estimate of one stored sketch (0, with a warning, for one of a
/// format this build does not read).
pub fn estimate_stored(stored: &Document) -> i64 {
    let mut sketch = Sketch::default();
    match sketch.merge_stored(stored) {
        Ok(()) => sketch.estimate_count() as i64,
        Err(e) => {
            tracing::warn!(error = %e, "a visitors sketch of an unknown format is skipped");
            0
        }
    }
}

/// How many of the site's day totals are dated outside
/// [`super::stored_dates::window`] at `now` (a hand edit, an old import's
/// year +262142 or −1): what a backfill leaves out.
pub async fn site_days_outside_window(
    store: &Store,
    domain: &DomainName,
    now: DateTime<Utc>,
) -> Result<u64, mongodb::error::Error> {
    let site_days = doc! {"site": domain.as_str()};
    store
        .db()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .count_documents(super::stored_dates::outside(site_days, now))
        .await
}

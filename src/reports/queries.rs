//! Report queries. Every one goes through `Store::reports()`, the handle
//! with the configured read preference, and is an index range scan on
//! `{page, timestamp}`.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use mongodb::options::Hint;
use std::collections::{BTreeSet, HashMap};

use super::period::{Period, Resolution};
use crate::domain::{DomainName, Page};
use crate::storage::buckets::site_pages;
use crate::storage::buckets::VisitFields;
use crate::storage::page_summaries::{Grain, PageFigures};
use crate::storage::{Bucket, Grouping, Store, Subject};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub at: DateTime<Utc>,
    pub views: i64,
}

/// What a report covers: every page of a site, or one page.
#[derive(Debug, Clone)]
pub enum Scope<'a> {
    /// A site, by adding up its page buckets (a site whose totals are not
    /// backfilled yet).
    Site(&'a DomainName),
    /// A site, from its own totals (`site_views_*`): one bucket per time
    /// instead of one per page and time.
    SiteTotals(&'a crate::storage::sites::Site),
    Page(&'a Page),
}

impl<'a> Scope<'a> {
    /// The cheapest exact way to read a whole site.
    pub fn of_site(site: &'a crate::storage::sites::Site) -> Self {
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
/// `timestamp_page` index (see [`crate::storage::buckets::BY_TIME`]). On
/// MongoDB the filter names the site's page range and the times, and a
/// `hint` names the index. secantusd-rs scans a compound index with bounds
/// on both fields, or any hinted one, at 100 to 500 ms whatever it returns,
/// but the times alone in 8 ms for 672 buckets (measured on the year
/// bench's data, docs/benchmarks.md): there the filter is the times alone
/// and the site's pages are kept here by their prefix.
struct BucketFind {
    coll: mongodb::Collection<Document>,
    matcher: Document,
    hint: Option<Hint>,
    /// Pages not starting with it are skipped here.
    prefix: Option<String>,
}

impl BucketFind {
    fn new(
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
                hint = Some(Hint::Name(crate::storage::buckets::BY_TIME.into()));
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
    fn of_pages(
        store: &Store,
        freshness: Freshness,
        pages: &[&Page],
        g: Resolution,
        times: Document,
    ) -> Self {
        BucketFind {
            coll: handle(store, freshness).collection(g.collection()),
            matcher: pages_at(pages, times),
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

/// The buckets of the pages named at `times`: one `{page, timestamp}`
/// range per page. (An `$in` of pages made secantusd-rs walk its
/// `timestamp_page` index: 100 ms for 25 pages' last day, where this
/// reads in 6 ms.)
pub fn pages_at(pages: &[&Page], times: Document) -> Document {
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
fn buckets_of(scope: &Scope<'_>, g: Resolution) -> (&'static str, Document) {
    match scope {
        Scope::Site(domain) => (g.collection(), doc! {"page": site_pages(domain)}),
        Scope::SiteTotals(site) => (
            Subject::Site.collection(g),
            doc! {"site": site.domain.as_str()},
        ),
        Scope::Page(page) => (g.collection(), doc! {"page": page.as_str()}),
    }
}

fn time_filter(from: DateTime<Utc>, to: DateTime<Utc>) -> Document {
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
enum Freshness {
    Report,
    Realtime,
}

fn handle(store: &Store, freshness: Freshness) -> &mongodb::Database {
    match freshness {
        Freshness::Report => store.reports(),
        Freshness::Realtime => store.realtime(),
    }
}

/// Views per shown bucket over the period, one point per local bucket,
/// 0 where there were none.
pub async fn series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    Ok(rollup(period, &read_series(store, scope, period).await?))
}

/// The period's views as units (see [`Period`]): whole UTC hours where no
/// bucket boundary cuts them, minutes elsewhere; only those with views,
/// oldest first. [`rollup`] adds them up into the shown buckets; the change
/// against the previous period compares them directly.
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "series", scope = ?scope, from = %period.from, to = %period.to, read = period.read.as_str()))]
pub async fn read_series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    read_series_from(store, scope, period, Freshness::Report).await
}

/// [`read_series`] for a realtime panel: read from the primary when it
/// answers, so the last minutes are not missing on a lagging secondary.
pub async fn realtime_series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    read_series_from(store, scope, period, Freshness::Realtime).await
}

async fn read_series_from(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    freshness: Freshness,
) -> Result<Vec<Point>, mongodb::error::Error> {
    let units = read_units(store, scope, period, false, freshness).await?;
    Ok(Units::points(units.by_time))
}

/// What a read found: views per unit, and per page for a site read from
/// its page buckets.
#[derive(Default)]
struct Units {
    by_time: HashMap<DateTime<Utc>, i64>,
    by_page: HashMap<String, i64>,
}

impl Units {
    fn add(&mut self, at: DateTime<Utc>, page: Option<&str>, views: i64) {
        if views == 0 {
            return;
        }
        *self.by_time.entry(at).or_default() += views;
        if let Some(page) = page {
            add_views(&mut self.by_page, page, views);
        }
    }

    /// The units in time order.
    fn points(by_time: HashMap<DateTime<Utc>, i64>) -> Vec<Point> {
        let mut points: Vec<Point> = by_time
            .into_iter()
            .map(|(at, views)| Point { at, views })
            .collect();
        points.sort_by_key(|p| p.at);
        points
    }
}

/// Reads a period as units: the hour buckets' `minutes` slots for every
/// hour when shown by minute, else only for the UTC hours a boundary cuts
/// (the range's edges, local hours or days starting inside a UTC hour); the
/// day buckets' `hours` slots for every other whole hour.
async fn read_units(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    by_page: bool,
    freshness: Freshness,
) -> Result<Units, mongodb::error::Error> {
    let target = Target::Scope(scope, by_page);
    let mut units = read_units_of(store, target, period, freshness, &[VIEWS]).await?;
    Ok(units.pop().unwrap_or_default())
}

/// Which slot maps of the hour and day buckets a read adds up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    pub hour: &'static str,
    pub day: &'static str,
}

/// The views: `minutes` of hour buckets, `hours` of day buckets.
pub const VIEWS: Slots = Slots {
    hour: "minutes",
    day: "hours",
};

impl Slots {
    /// A visit counter (`storage::buckets::VisitFields`): the same name at
    /// both levels, its slots minutes in hour buckets and hours in day
    /// buckets like the views'.
    pub const fn counter(name: &'static str) -> Self {
        Slots {
            hour: name,
            day: name,
        }
    }
}

/// A counter's units over a period, as [`read_series`] reads the views.
pub async fn read_counter(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    slots: Slots,
) -> Result<Vec<Point>, mongodb::error::Error> {
    let mut read = read_counters(store, scope, period, &[slots]).await?;
    Ok(read.pop().unwrap_or_default())
}

/// Several counters' units over a period, read together: one pass over
/// the buckets instead of one per counter (on secantusd-rs a read costs
/// per bucket it returns, whatever it projects).
pub async fn read_counters(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    fields: &[Slots],
) -> Result<Vec<Vec<Point>>, mongodb::error::Error> {
    let target = Target::Scope(scope, false);
    let units = read_units_of(store, target, period, Freshness::Report, fields).await?;
    Ok(units
        .into_iter()
        .map(|u| Units::points(u.by_time))
        .collect())
}

/// Counters per page of a site (the site's page buckets) over a period,
/// read together.
pub async fn counters_by_page(
    store: &Store,
    domain: &DomainName,
    period: &Period,
    fields: &[Slots],
) -> Result<Vec<HashMap<String, i64>>, mongodb::error::Error> {
    let site = Scope::Site(domain);
    let target = Target::Scope(&site, true);
    let units = read_units_of(store, target, period, Freshness::Report, fields).await?;
    Ok(units.into_iter().map(|u| u.by_page).collect())
}

/// Counters per page of the pages named (a screen of top pages) over a
/// period: one read of their buckets per level, whatever their number.
pub async fn counters_of_pages(
    store: &Store,
    pages: &[&Page],
    period: &Period,
    fields: &[Slots],
) -> Result<Vec<HashMap<String, i64>>, mongodb::error::Error> {
    if pages.is_empty() {
        return Ok(vec![HashMap::new(); fields.len()]);
    }
    let units = read_units_of(
        store,
        Target::Pages(pages),
        period,
        Freshness::Report,
        fields,
    )
    .await?;
    Ok(units.into_iter().map(|u| u.by_page).collect())
}

/// At most this many whole hours of a UTC day are read from its hour
/// buckets instead of its day buckets (see `read_units_of`).
const FEW_HOURS: usize = 6;

/// Whose buckets a read adds up: a scope's (`true`: kept apart by page),
/// or those of the pages named.
#[derive(Clone, Copy)]
enum Target<'a> {
    Scope(&'a Scope<'a>, bool),
    Pages(&'a [&'a Page]),
}

async fn read_units_of(
    store: &Store,
    target: Target<'_>,
    period: &Period,
    freshness: Freshness,
    fields: &[Slots],
) -> Result<Vec<Units>, mongodb::error::Error> {
    let (from, to) = (period.from, period.to);
    let hour = Resolution::Hour;
    let (h0, h1) = (hour.floor(from), hour.ceil(to));
    let all_minutes = period.resolution == Resolution::Minute;
    let mut cut: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    if !all_minutes {
        for b in period.points().into_iter().chain([from, to]) {
            if !hour.aligned(b) {
                cut.insert(hour.floor(b));
            }
        }
    }
    let key_field = match target {
        Target::Scope(Scope::Site(_), true) | Target::Pages(_) => Some("page"),
        _ => None,
    };
    let find = |g: Resolution, times: Document| match target {
        Target::Scope(scope, _) => BucketFind::new(store, freshness, scope, g, times),
        Target::Pages(pages) => BucketFind::of_pages(store, freshness, pages, g, times),
    };
    // A UTC day of which a range wants only a few whole hours (the hour
    // before a Europe/Berlin midnight, the first hours of today) is read
    // from those hours' buckets, a page-hour each, rather than from the
    // day's buckets, one per page active at any time that day.
    let (first, last) = (hour.ceil(from), hour.floor(to));
    if !all_minutes {
        let mut day = Resolution::Day.floor(first);
        while day < last {
            let next = day + TimeDelta::days(1);
            let (a, b) = (first.max(day), last.min(next));
            let wanted: Vec<DateTime<Utc>> = (0..(b - a).num_hours())
                .map(|h| a + TimeDelta::hours(h))
                .filter(|h| !cut.contains(h))
                .collect();
            if wanted.len() <= FEW_HOURS {
                cut.extend(wanted);
            }
            day = next;
        }
    }
    let mut units: Vec<Units> = fields.iter().map(|_| Units::default()).collect();
    let hours = (h1 - h0).num_hours();
    if all_minutes || !cut.is_empty() {
        // A long list of cut hours (every local hour at +05:30) is read
        // as a range and filtered here.
        let times = if all_minutes || cut.len() as i64 * 4 > hours {
            time_filter(h0, h1)
        } else {
            let list: Vec<bson::DateTime> = cut
                .iter()
                .map(|t| bson::DateTime::from_chrono(*t))
                .collect();
            doc! {"$in": list}
        };
        let keep = |start, at| (all_minutes || cut.contains(&start)) && at >= from && at < to;
        let slots: Vec<&str> = fields.iter().map(|f| f.hour).collect();
        let buckets = find(Resolution::Hour, times);
        let width = TimeDelta::minutes(1);
        add_slots(store, buckets, (&slots, width), key_field, keep, &mut units).await?;
    }
    // The days whose hours are not all cut: the first and last may be.
    let day = Resolution::Day;
    let mut left = std::iter::successors(Some(first), |h| Some(*h + TimeDelta::hours(1)))
        .take_while(|h| *h < last)
        .filter(|h| !cut.contains(h));
    if let (false, Some(a)) = (all_minutes, left.next()) {
        let b = left.last().unwrap_or(a);
        let times = time_filter(day.floor(a), (day.floor(b) + TimeDelta::days(1)).min(last));
        let keep = |_, at| at >= first && at < last && !cut.contains(&at);
        let slots: Vec<&str> = fields.iter().map(|f| f.day).collect();
        let buckets = find(Resolution::Day, times);
        let width = TimeDelta::hours(1);
        add_slots(store, buckets, (&slots, width), key_field, keep, &mut units).await?;
    }
    Ok(units)
}

/// Adds the slots (`minutes` of hour buckets, `hours` of day buckets, each
/// `width` long) of the buckets `find` reads to `units`, one per field,
/// where `keep(bucket start, slot start)` says so; `key_field` keeps them
/// apart by page.
async fn add_slots(
    store: &Store,
    find: BucketFind,
    (fields, width): (&[&str], TimeDelta),
    key_field: Option<&str>,
    keep: impl Fn(DateTime<Utc>, DateTime<Utc>) -> bool,
    units: &mut [Units],
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
        for (field, units) in fields.iter().zip(units.iter_mut()) {
            let Ok(slots) = d.get_document(field) else {
                continue;
            };
            for (slot, views) in slots {
                let Ok(n) = slot.parse::<i32>() else {
                    continue;
                };
                let at = start + width * n;
                if keep(start, at) {
                    units.add(at, page, number(Some(views)));
                }
            }
        }
    }
    Ok(())
}

/// Units added up into the shown (local) buckets.
pub fn rollup(period: &Period, units: &[Point]) -> Vec<Point> {
    let starts = period.points();
    let mut shown: Vec<Point> = starts.iter().map(|&at| Point { at, views: 0 }).collect();
    for u in units {
        let i = starts.partition_point(|s| *s <= u.at);
        if i > 0 {
            if let Some(slot) = shown.get_mut(i - 1) {
                slot.views += u.views;
            }
        }
    }
    shown
}

/// Pages with views, most viewed first, ties by page.
fn ranked(pages: impl IntoIterator<Item = (Page, i64)>) -> Vec<(Page, i64)> {
    let mut pages: Vec<(Page, i64)> = pages.into_iter().filter(|(_, v)| *v > 0).collect();
    pages.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    pages
}

fn ranked_pages(by_page: HashMap<String, i64>) -> Vec<(Page, i64)> {
    ranked(
        by_page
            .into_iter()
            .map(|(page, views)| (Page::from_stored(page), views)),
    )
}

/// A site's series (units, as [`read_series`]) and its pages ranked, as
/// [`top_pages`]: from the site's totals and one projected scan of its page
/// buckets when its totals are complete, else from that one scan alone.
pub async fn site_overview(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<(Vec<Point>, Vec<(Page, i64)>), mongodb::error::Error> {
    match scope {
        Scope::SiteTotals(_) => {
            let (series, pages) = tokio::try_join!(
                read_series(store, scope, period),
                top_pages(store, scope, period)
            )?;
            Ok((series, pages))
        }
        _ => {
            let units = read_units(store, scope, period, true, Freshness::Report).await?;
            Ok((Units::points(units.by_time), ranked_pages(units.by_page)))
        }
    }
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

pub fn total(points: &[Point]) -> i64 {
    points.iter().map(|p| p.views).sum()
}

/// Every page of a site with views in the period, most viewed first (ties
/// by page), counting exactly the views of the series so the page totals
/// add up to the site total shown beside them.
///
/// A page's total does not care when in the range a view was: whole UTC
/// days inside the range are read as the day buckets' `totalViews`, and
/// only the edges before the first and after the last whole day as units.
/// With the site's totals complete ([`Scope::SiteTotals`]) the whole days
/// and the edges' whole UTC hours come from the page summaries
/// ([`super::page_totals`]), checked against the site's day and hour
/// totals; else they are summed by `$group` on MongoDB and in the app on
/// secantusd-rs (see `Grouping`).
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "top_pages", from = %period.from, to = %period.to))]
pub async fn top_pages(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<(Page, i64)>, mongodb::error::Error> {
    let domain = match scope {
        Scope::Site(domain) => *domain,
        Scope::SiteTotals(site) => &site.domain,
        Scope::Page(page) => {
            let units = read_units(store, scope, period, false, Freshness::Report).await?;
            let views = units.by_time.values().sum();
            return Ok(ranked([((*page).clone(), views)]));
        }
    };
    let pages_of_site = Scope::Site(domain);
    let (first_day, last_day) = (
        Resolution::Day.ceil(period.from),
        Resolution::Day.floor(period.to),
    );
    let complete = match scope {
        Scope::SiteTotals(site) => Some(*site),
        _ => None,
    };
    if period.resolution == Resolution::Minute || (first_day >= last_day && complete.is_none()) {
        let units = read_units(store, &pages_of_site, period, true, Freshness::Report).await?;
        return Ok(ranked_pages(units.by_page));
    }
    let mut by_page: HashMap<String, i64> = HashMap::new();
    let edges = if first_day < last_day {
        vec![(period.from, first_day), (last_day, period.to)]
    } else {
        vec![(period.from, period.to)]
    };
    for (from, to) in edges.into_iter().filter(|(a, b)| a < b) {
        // Whole UTC hours of a site with complete totals from the hour
        // summaries; minutes only where an edge cuts an hour.
        let hours = super::page_totals::summarised_hours(store, (from, to));
        let minutes = match (complete, hours) {
            (Some(site), Some(hours)) => {
                let pages = super::page_totals::whole_hours(store, site, hours).await?;
                for (page, f) in pages.iter() {
                    add_views(&mut by_page, page, f.views);
                }
                vec![(from, hours.0), (hours.1, to)]
            }
            _ => vec![(from, to)],
        };
        for (from, to) in minutes.into_iter().filter(|(a, b)| a < b) {
            let edge = Period::aligned_in(from, to, Resolution::Hour, chrono_tz::Tz::UTC);
            let units = read_units(store, &pages_of_site, &edge, true, Freshness::Report).await?;
            for (page, views) in units.by_page {
                *by_page.entry(page).or_default() += views;
            }
        }
    }
    if first_day < last_day {
        match complete {
            Some(site) => {
                let pages =
                    super::page_totals::whole_days(store, site, (first_day, last_day)).await?;
                for (page, f) in pages.iter() {
                    add_views(&mut by_page, page, f.views);
                }
            }
            None => whole_days(store, domain, (first_day, last_day), &mut by_page).await?,
        }
    }
    Ok(ranked_pages(by_page))
}

fn add_views(by_page: &mut HashMap<String, i64>, page: &str, views: i64) {
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
async fn whole_days(
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

/// [`site_totals`] and, per unit, the deletions that took counts out of
/// it (`buckets::TAKEN_BACK`): what guards kept page summaries.
pub async fn site_totals_guarded(
    store: &Store,
    domain: &DomainName,
    resolution: Resolution,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<DateTime<Utc>, (i64, i64)>, mongodb::error::Error> {
    use crate::storage::buckets::TAKEN_BACK;
    let mut totals: HashMap<DateTime<Utc>, (i64, i64)> = HashMap::new();
    let mut cursor = store
        .reports()
        .collection::<Document>(Subject::Site.collection(resolution))
        .find(doc! {"site": domain.as_str(), "timestamp": time_filter(first, last)})
        .projection(doc! {"_id": 0, "timestamp": 1, "totalViews": 1, TAKEN_BACK: 1})
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        if let Ok(day) = d.get_datetime("timestamp") {
            let entry = totals.entry(day.to_chrono()).or_default();
            entry.0 = entry.0.saturating_add(number(d.get("totalViews")));
            entry.1 = entry.1.saturating_add(number(d.get(TAKEN_BACK)));
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
    crate::storage::site_totals::first_and_last_of(
        store,
        Subject::Site.collection(Resolution::Day),
        doc! {"site": domain.as_str(), "timestamp": crate::storage::stored_dates::within(now)},
    )
    .await
}

/// Each page's figures in each of the units numbered `units` of `grain`
/// (UTC days or hours since 1970-01-01), from the page buckets, sorted by
/// page: views, visits entered there, exits, and for days the estimate of
/// the bucket's visitors sketch (a visitor id is a day's, so hours carry
/// none). `$in` of unit starts is a point lookup per unit.
pub async fn page_units(
    store: &Store,
    domain: &DomainName,
    grain: Grain,
    units: &[i64],
) -> Result<HashMap<i64, Vec<(String, PageFigures)>>, mongodb::error::Error> {
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
    if grain == Grain::Day {
        projection.insert(VisitFields::VISITORS, 1);
    }
    let (mut cursor, prefix) = find.cursor(store, projection).await?;
    let mut read: HashMap<i64, Vec<(String, PageFigures)>> = HashMap::new();
    while let Some(d) = cursor.try_next().await? {
        let (true, Ok(page), Ok(day)) = (
            wanted(&d, prefix.as_deref()),
            d.get_str("page"),
            d.get_datetime("timestamp"),
        ) else {
            continue;
        };
        let views = number(d.get("totalViews"));
        let entries = slots_sum(d.get_document(visits).ok());
        let exits = slots_sum(d.get_document(exits).ok());
        // A page may have entries or exits in a unit without views: an
        // imported day's figures (Plausible's entry and exit pages
        // without a pages row for that page and day).
        if views != 0 || entries != 0 || exits != 0 {
            read.entry(grain.number(day.to_chrono()))
                .or_default()
                .push((
                    page.to_owned(),
                    PageFigures {
                        views,
                        entries,
                        exits,
                        visitors: d
                            .get_document(VisitFields::VISITORS)
                            .map_or(0, super::visits::estimate_stored),
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
fn slots_sum(slots: Option<&Document>) -> i64 {
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

/// How many minutes "right now" covers: this one and the four before.
pub const NOW_MINUTES: i64 = 5;

/// A scope's views of the last [`NOW_MINUTES`] minutes, the current one
/// included, read from the primary like the realtime panels.
pub async fn views_now(
    store: &Store,
    scope: &Scope<'_>,
    now: DateTime<Utc>,
) -> Result<i64, mongodb::error::Error> {
    let from = Resolution::Minute.floor(now) - TimeDelta::minutes(NOW_MINUTES - 1);
    let to = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
    let period = Period::aligned_in(from, to, Resolution::Minute, chrono_tz::Tz::UTC);
    Ok(total(&realtime_series(store, scope, &period).await?))
}

/// Headline numbers for the sites list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteSummary {
    pub today: i64,
    pub last_7_days: i64,
    pub last_30_days: i64,
    /// Views per day, oldest first, 30 values ending today.
    pub daily: Vec<i64>,
    /// Unique visitors over the 30 days (a sum over UTC days); `None`
    /// where the stored data cannot say.
    pub visitors_30_days: Option<i64>,
}

pub async fn site_summary(
    store: &Store,
    site: &crate::storage::sites::Site,
    now: DateTime<Utc>,
) -> Result<SiteSummary, mongodb::error::Error> {
    let q = super::RangeQuery {
        range: Some("30d".into()),
        ..Default::default()
    };
    let period = Period::resolve_in(&q, now, site.time_zone.tz())
        .expect("the 30-day preset always resolves");
    let scope = Scope::of_site(site);
    let whole = [(period.from, period.to)];
    let (points, visitors) = tokio::try_join!(
        series(store, &scope, &period),
        super::visits::visitors(store, &scope, &whole),
    )?;
    let daily: Vec<i64> = points.iter().map(|p| p.views).collect();
    Ok(SiteSummary {
        today: *daily.last().unwrap_or(&0),
        last_7_days: daily.iter().rev().take(7).sum(),
        last_30_days: daily.iter().sum(),
        daily,
        visitors_30_days: visitors.map(|v| v[0]),
    })
}

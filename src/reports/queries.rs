//! Report queries. Every one goes through `Store::reports()`, the handle
//! with the configured read preference (the realtime panels through
//! `Store::realtime()`, primary preferred), is an index range scan on
//! `{page, timestamp}`, and is bounded by `maxTimeMS`.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::collections::HashMap;

use super::period::{Period, Resolution};
use crate::domain::{DomainName, Page};
use crate::storage::values::count;
use crate::storage::{Bucket, Grouping, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub at: DateTime<Utc>,
    pub views: i64,
}

/// What a report covers: every page of a site, or one page.
#[derive(Debug, Clone)]
pub enum Scope<'a> {
    Site(&'a DomainName),
    Page(&'a Page),
}

fn page_filter(scope: &Scope<'_>) -> Bson {
    match scope {
        Scope::Site(domain) => Bson::Document(domain.pages_filter()),
        Scope::Page(page) => Bson::String(page.as_str().to_owned()),
    }
}

fn time_filter(from: DateTime<Utc>, to: DateTime<Utc>) -> Document {
    doc! {"$gte": bson::DateTime::from_chrono(from), "$lt": bson::DateTime::from_chrono(to)}
}

/// Where a query reads: report pages accept the configured staleness; the
/// realtime panels (this minute, the last hour) want the newest counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freshness {
    Report,
    Realtime,
}

fn collection(store: &Store, g: Resolution) -> mongodb::Collection<Document> {
    collection_for(store, g, Freshness::Report)
}

fn collection_for(
    store: &Store,
    g: Resolution,
    freshness: Freshness,
) -> mongodb::Collection<Document> {
    match freshness {
        Freshness::Report => store.reports(),
        Freshness::Realtime => store.realtime(),
    }
    .collection(g.collection())
}

/// Views per shown bucket over the period, one point per bucket, 0 where
/// no bucket exists.
pub async fn series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    Ok(rollup(period, &read_series(store, scope, period).await?))
}

/// Views per bucket of the period's read resolution (what the change
/// against the previous period is computed from).
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
    if let (Scope::Site(domain), Resolution::Minute) = (scope, period.read) {
        let (by_time, _) = site_minutes_from_hours(store, domain, period).await?;
        return Ok(fill(period, &by_time));
    }
    let coll = collection_for(store, period.read, freshness);
    let matcher =
        doc! {"page": page_filter(scope), "timestamp": time_filter(period.from, period.to)};
    let mut by_time: HashMap<DateTime<Utc>, i64> = HashMap::new();
    let mut cursor = coll
        .aggregate([
            doc! {"$match": matcher},
            doc! {"$group": {"_id": "$timestamp", "views": {"$sum": "$totalViews"}}},
        ])
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        if let Ok(at) = d.get_datetime("_id") {
            by_time.insert(at.to_chrono(), count(d.get("views")));
        }
    }
    Ok(fill(period, &by_time))
}

/// One point per read bucket of the period, 0 where there is no bucket.
fn fill(period: &Period, by_time: &HashMap<DateTime<Utc>, i64>) -> Vec<Point> {
    period
        .read_points()
        .map(|at| Point {
            at,
            views: by_time.get(&at).copied().unwrap_or(0),
        })
        .collect()
}

/// Read buckets added up into the shown buckets.
pub fn rollup(period: &Period, read: &[Point]) -> Vec<Point> {
    let mut shown: Vec<Point> = period.points().map(|at| Point { at, views: 0 }).collect();
    if period.read == period.resolution {
        for (slot, p) in shown.iter_mut().zip(read) {
            slot.views = p.views;
        }
        return shown;
    }
    let (Some(first), step) = (shown.first().map(|p| p.at), period.resolution.step()) else {
        return shown;
    };
    for p in read {
        let i =
            ((period.resolution.floor(p.at) - first).num_seconds() / step.num_seconds()) as usize;
        if let Some(slot) = shown.get_mut(i) {
            slot.views += p.views;
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

/// A site's series and its pages, most viewed first.
pub type SiteOverview = (Vec<Point>, Vec<(Page, i64)>);

/// A site's series and its pages ranked, as [`series`] and [`top_pages`]
/// return them. With `Grouping::Server` (MongoDB) these are two `$group`
/// queries run side by side, so only sums cross the network. With
/// `Grouping::App` (secantusd-rs) they come from ONE projected read of the
/// period's buckets summed here: there each `$group` over a site's 30,000
/// day buckets costs ~150 ms of server time, while one scan costs about the
/// same as one of them (docs/benchmarks.md compares both).
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "site_overview", site = %domain, from = %period.from, to = %period.to, read = period.read.as_str()))]
pub async fn site_overview(
    store: &Store,
    domain: &DomainName,
    period: &Period,
) -> Result<SiteOverview, mongodb::error::Error> {
    if period.read != Resolution::Minute && store.grouping() == Grouping::Server {
        let scope = Scope::Site(domain);
        return tokio::try_join!(
            read_series(store, &scope, period),
            top_pages(store, domain, period),
        );
    }
    if period.read == Resolution::Minute {
        let (by_time, by_page) = site_minutes_from_hours(store, domain, period).await?;
        let pages = ranked(
            by_page
                .into_iter()
                .map(|(page, views)| (Page::from_stored(page), views)),
        );
        return Ok((fill(period, &by_time), pages));
    }
    let coll = collection(store, period.read);
    let matcher =
        doc! {"page": domain.pages_filter(), "timestamp": time_filter(period.from, period.to)};
    let mut cursor = coll
        .find(matcher)
        .projection(doc! {"_id": 0, "page": 1, "timestamp": 1, "totalViews": 1})
        .batch_size(10_000)
        .max_time(store.report_max_time())
        .await?;
    let mut by_time: HashMap<DateTime<Utc>, i64> = HashMap::new();
    let mut by_page: HashMap<String, i64> = HashMap::new();
    while let Some(d) = cursor.try_next().await? {
        let views = count(d.get("totalViews"));
        if let (Ok(at), Ok(page)) = (d.get_datetime("timestamp"), d.get_str("page")) {
            *by_time.entry(at.to_chrono()).or_default() += views;
            match by_page.get_mut(page) {
                Some(total) => *total += views,
                None => {
                    by_page.insert(page.to_owned(), views);
                }
            }
        }
    }
    let pages = ranked(
        by_page
            .into_iter()
            .map(|(page, views)| (Page::from_stored(page), views)),
    );
    Ok((fill(period, &by_time), pages))
}

/// Whether any view of the scope was ever stored. Day buckets suffice:
/// every view reaches one; preallocated buckets hold 0.
pub async fn has_views(store: &Store, scope: &Scope<'_>) -> Result<bool, mongodb::error::Error> {
    Ok(collection(store, Resolution::Day)
        .find_one(doc! {"page": page_filter(scope), "totalViews": {"$gt": 0}})
        .projection(doc! {"_id": 0, "totalViews": 1})
        .max_time(store.report_max_time())
        .await?
        .is_some())
}

/// A site's views per minute and per page over `period` (read by minute),
/// from the `minutes` slots of its HOUR buckets: one document per page-hour
/// instead of sixty. A site-wide "last hour" read by minute buckets cost 60
/// documents per page and its previous hour as many again, the slowest
/// dashboard by far; through hour buckets it costs 2 or 3 per page, so the
/// cost follows the window's hours rather than its minutes.
async fn site_minutes_from_hours(
    store: &Store,
    domain: &DomainName,
    period: &Period,
) -> Result<(HashMap<DateTime<Utc>, i64>, HashMap<String, i64>), mongodb::error::Error> {
    let coll = collection(store, Resolution::Hour);
    let (first, end) = (
        Resolution::Hour.floor(period.from),
        Resolution::Hour.ceil(period.to),
    );
    let mut cursor = coll
        .find(doc! {"page": domain.pages_filter(), "timestamp": time_filter(first, end)})
        .projection(doc! {"_id": 0, "page": 1, "timestamp": 1, "minutes": 1})
        .batch_size(10_000)
        .max_time(store.report_max_time())
        .await?;
    let mut by_time: HashMap<DateTime<Utc>, i64> = HashMap::new();
    let mut by_page: HashMap<String, i64> = HashMap::new();
    while let Some(d) = cursor.try_next().await? {
        let (Ok(hour), Ok(page), Ok(minutes)) = (
            d.get_datetime("timestamp"),
            d.get_str("page"),
            d.get_document("minutes"),
        ) else {
            continue;
        };
        let hour = hour.to_chrono();
        let mut in_window = 0;
        for (minute, views) in minutes {
            let Ok(m) = minute.parse::<i64>() else {
                continue;
            };
            let at = hour + TimeDelta::minutes(m);
            let views = count(Some(views));
            if views != 0 && at >= period.from && at < period.to {
                *by_time.entry(at).or_default() += views;
                in_window += views;
            }
        }
        if in_window != 0 {
            *by_page.entry(page.to_owned()).or_default() += in_window;
        }
    }
    Ok((by_time, by_page))
}

pub fn total(points: &[Point]) -> i64 {
    points.iter().map(|p| p.views).sum()
}

/// Every page of a site with views in the period, most viewed first (ties
/// by page), read from the collection of the period's resolution so the
/// page totals add up to the site total shown beside them.
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "top_pages", site = %domain, from = %period.from, to = %period.to))]
pub async fn top_pages(
    store: &Store,
    domain: &DomainName,
    period: &Period,
) -> Result<Vec<(Page, i64)>, mongodb::error::Error> {
    let coll = collection(store, period.read);
    let matcher =
        doc! {"page": domain.pages_filter(), "timestamp": time_filter(period.from, period.to)};
    let docs: Vec<Document> = coll
        .aggregate([
            doc! {"$match": matcher},
            doc! {"$group": {"_id": "$page", "views": {"$sum": "$totalViews"}}},
            doc! {"$sort": {"views": -1, "_id": 1}},
        ])
        .max_time(store.report_max_time())
        .await?
        .try_collect()
        .await?;
    // The server sorted already; sorting again keeps the order exact even
    // where a server returns equal counts in another order.
    Ok(ranked(docs.into_iter().filter_map(|d| {
        let page = d.get_str("_id").ok()?.to_owned();
        Some((Page::from_stored(page), count(d.get("views"))))
    })))
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
        if count(d.get("totalViews")) > 0 {
            return Ok(d.get_datetime("timestamp").ok().map(|t| t.to_chrono()));
        }
    }
    Ok(None)
}

/// Headline numbers for the sites list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteSummary {
    pub today: i64,
    pub last_7_days: i64,
    pub last_30_days: i64,
    /// Views per day, oldest first, 30 values ending today.
    pub daily: Vec<i64>,
}

#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "site_summary", site = %domain))]
pub async fn site_summary(
    store: &Store,
    domain: &DomainName,
    now: DateTime<Utc>,
) -> Result<SiteSummary, mongodb::error::Error> {
    let today = Resolution::Day.floor(now);
    let period = Period::aligned(
        today - TimeDelta::days(29),
        today + TimeDelta::days(1),
        Resolution::Day,
    );
    let points = series(store, &Scope::Site(domain), &period).await?;
    let daily: Vec<i64> = points.iter().map(|p| p.views).collect();
    Ok(SiteSummary {
        today: *daily.last().unwrap_or(&0),
        last_7_days: daily.iter().rev().take(7).sum(),
        last_30_days: daily.iter().sum(),
        daily,
    })
}

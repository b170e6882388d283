//! The API's report endpoints: the period parameters of the pages
//! (`range`, `from`, `to`, `res`) and the same queries, as JSON.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::query::NamedPath;
use super::{ApiClient, ApiError};
use crate::domain::Page;
use crate::reports::compared::{self, ComparedShares, Stretches};
use crate::reports::request::ReportRequest;
use crate::reports::retention::Coarsened;
use crate::reports::sources::{self, SourceScope};
use crate::reports::{filter, queries, Period, Point, Resolution, Scope};
use crate::reports::{notes, summaries};
use crate::storage::sites::Site;
use crate::web::state::WebState;

mod filtered;
pub use filtered::funnel;

type Data = web::Data<WebState>;
type Id = web::Path<String>;
type Q = super::query::ApiQ;
type Reply = Result<HttpResponse, ApiError>;

/// Default and largest number of rows of `pages` and `sources`.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

fn ok(body: &impl Serialize) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header(crate::web::pages::no_store())
        .json(body)
}

// ---------------------------------------------------------------- /sites

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SiteEntry {
    id: String,
    name: String,
    domain: String,
    aliases: Vec<String>,
    /// The IANA zone its reports' days are local to.
    time_zone: &'static str,
    /// The figures of the sites list.
    views: SiteViews,
    /// Unique visitors over the last 30 days (null where unknown).
    visitors30_days: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SiteViews {
    today: i64,
    last7_days: i64,
    last30_days: i64,
}

#[derive(Serialize)]
struct SitesBody {
    sites: Vec<SiteEntry>,
}

/// `GET /api/v1/sites`: the sites this token reads, with the sites list's
/// figures (the presets today, 7d and 30d: local days), ordered by name like the list.
pub async fn sites(
    state: web::Data<WebState>,
    client: ApiClient,
) -> Result<HttpResponse, ApiError> {
    let readable = state
        .directory
        .all()
        .into_iter()
        .filter(|s| client.can_read(s))
        .collect();
    let summaries = summaries::of_sites(&state.store, readable, state.clock.now()).await?;
    let sites = summaries
        .iter()
        .map(|(site, s)| SiteEntry {
            id: site.id.to_string(),
            name: site.name.clone(),
            domain: site.domain.to_string(),
            aliases: site.aliases.iter().map(|a| a.to_string()).collect(),
            time_zone: site.time_zone.name(),
            views: SiteViews {
                today: s.today,
                last7_days: s.last_7_days,
                last30_days: s.last_30_days,
            },
            visitors30_days: s.visitors_30_days,
        })
        .collect();
    Ok(ok(&SitesBody { sites }))
}

// --------------------------------------------------------------- series

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PeriodBody {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    resolution: &'static str,
    /// The preset key, when the period is one.
    preset: Option<&'static str>,
    /// Why it is shown coarser than asked: the finer buckets of part of
    /// the range are past their retention.
    coarsened: Option<String>,
    /// A series finer than a day over days an import brought as daily
    /// figures: they show at each day's first instant (series only).
    #[serde(skip_serializing_if = "Option::is_none")]
    daily_only: Option<String>,
    /// With `filter`: what the figures are (`filtered::FilteredBody`).
    #[serde(skip_serializing_if = "Option::is_none")]
    filtered: Option<filtered::FilteredBody>,
}

impl PeriodBody {
    fn new(p: &Period, coarsened: Option<&Coarsened>) -> Self {
        PeriodBody {
            from: p.from,
            to: p.to,
            resolution: p.resolution.as_str(),
            preset: p.preset.map(|p| p.key()),
            coarsened: coarsened.map(|c| c.to_string()),
            daily_only: None,
            filtered: None,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PointBody {
    at: DateTime<Utc>,
    views: i64,
    /// The bucket covers only part of its time: cut by the period's
    /// edges, or still counting.
    partial: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SeriesBody {
    site: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    period: PeriodBody,
    total: i64,
    points: Vec<PointBody>,
}

fn series_body(
    site: &Site,
    path: Option<&NamedPath>,
    (period, coarsened): &(Period, Option<Coarsened>),
    points: &[Point],
    now: DateTime<Utc>,
    daily_only: Option<String>,
) -> SeriesBody {
    SeriesBody {
        site: site.id.to_string(),
        path: path.map(|p| p.shown().to_owned()),
        period: PeriodBody {
            daily_only,
            ..PeriodBody::new(period, coarsened.as_ref())
        },
        total: queries::total(points),
        points: points
            .iter()
            .map(|p| PointBody {
                at: p.at,
                views: p.views,
                partial: period.is_partial(p.at, now),
            })
            .collect(),
    }
}

/// `GET /api/v1/sites/{id}/series`: the dashboard's chart.
pub async fn site_series(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::site_series(&state, &site, &q, &filters).await;
    }
    let answer: Reply = async {
        let period = q.period(&state, &site)?;
        let points = queries::series(&state.store, &Scope::of_site(&site), &period.0).await?;
        let daily_only = notes::daily_only_note(&state.store, &site, &period.0).await?;
        Ok(ok(&series_body(
            &site,
            None,
            &period,
            &points,
            state.clock.now(),
            daily_only,
        )))
    }
    .await;
    // A long range of a site whose totals are being built: what is
    // being prepared, not a 503.
    answer.map_err(|e| e.unless_preparing(&site))
}

/// `GET /api/v1/sites/{id}/page/series?path=`: a page report's chart.
pub async fn page_series(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::page_series(&state, &site, &q, &filters).await;
    }
    let path = q.path()?;
    let period = q.period(&state, &site)?;
    let points = match &path {
        NamedPath::Page(p) => {
            let page = Page::new(&site.domain, p);
            queries::series(&state.store, &Scope::Page(&page), &period.0).await?
        }
        NamedPath::Nowhere(_) => queries::rollup(&period.0, &[]),
    };
    let daily_only = notes::daily_only_note(&state.store, &site, &period.0).await?;
    Ok(ok(&series_body(
        &site,
        Some(&path),
        &period,
        &points,
        state.clock.now(),
        daily_only,
    )))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecondsBody {
    site: String,
    path: String,
    minute: DateTime<Utc>,
    total: i64,
    points: Vec<SecondPoint>,
}

#[derive(Serialize)]
struct SecondPoint {
    at: DateTime<Utc>,
    views: i64,
}

/// `GET /api/v1/sites/{id}/page/seconds?path=&minute=`: the page report's
/// per-second breakdown of one minute (60 points).
pub async fn page_seconds(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::page_seconds(&state, &site, &q, &filters).await;
    }
    let path = q.path()?;
    let minute = Resolution::Minute.floor(q.minute()?);
    let seconds = match &path {
        NamedPath::Page(p) => {
            let page = Page::new(&site.domain, p);
            queries::seconds_of(&state.store, &page, minute).await?
        }
        NamedPath::Nowhere(_) => [0; 60],
    };
    Ok(ok(&SecondsBody {
        site: site.id.to_string(),
        path: path.shown().to_owned(),
        minute,
        total: seconds.iter().sum(),
        points: seconds
            .iter()
            .enumerate()
            .map(|(s, views)| SecondPoint {
                at: minute + TimeDelta::seconds(s as i64),
                views: *views,
            })
            .collect(),
    }))
}

// ---------------------------------------------------------------- pages

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PagesBody {
    site: String,
    period: PeriodBody,
    /// Views of every page in the period (the share's denominator).
    total: i64,
    /// Pages matching the filter, before `limit` and `offset`.
    matching: usize,
    pages: Vec<PageEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PageEntry {
    path: String,
    views: i64,
    /// Percent of `total`, one decimal (as in `pages.csv`).
    share: f64,
    /// Unique visitors of the page (`None` where the stored data cannot
    /// say, as for the site).
    visitors: Option<i64>,
    /// Visits that entered on the page.
    entries: i64,
    /// Visits that left from it.
    exits: i64,
}

/// `GET /api/v1/sites/{id}/pages`: the dashboard's top pages, most viewed
/// first, with its filter (`q`) and `limit`/`offset` paging.
pub async fn top_pages(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::top_pages(&state, &site, &q, &filters).await;
    }
    let answer: Reply = async {
        let (period, coarsened) = q.period(&state, &site)?;
        let needle = q.page_filter()?;
        let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
        let offset = q.offset()?;
        let scope = Scope::of_site(&site);
        let now = state.clock.now();
        let top = queries::top_pages(&state.store, &scope, &period).await?;
        // The pages with entries or exits and no views follow, as in `pages.csv`.
        let (top, _) =
            crate::reports::visits::listed_pages(&state.store, &site, &period, top).await?;
        let total: i64 = top.iter().map(|(_, v)| v).sum();
        let matching = filter::matching(&top, &needle);
        let shown: Vec<&(Page, i64)> = matching.iter().skip(offset).take(limit).copied().collect();
        let names: Vec<&Page> = shown.iter().map(|(page, _)| page).collect();
        let figures =
            crate::reports::visits::page_rows(&state.store, &scope, &names, &period, now).await?;
        let pages = shown
            .into_iter()
            .zip(figures)
            .map(|((page, views), f)| PageEntry {
                path: page.path().to_owned(),
                views: *views,
                share: share(*views, total),
                visitors: f.visitors,
                entries: f.visits,
                exits: f.exits.unwrap_or(0),
            })
            .collect();
        Ok(ok(&PagesBody {
            site: site.id.to_string(),
            period: PeriodBody::new(&period, coarsened.as_ref()),
            total,
            matching: matching.len(),
            pages,
        }))
    }
    .await;
    // A long range of a site whose totals are being built: what is
    // being prepared, not a 503.
    answer.map_err(|e| e.unless_preparing(&site))
}

/// Percent with one decimal, the number `pages.csv` prints.
fn share(part: i64, total: i64) -> f64 {
    crate::web::fmt::percent(part, total).parse().unwrap_or(0.0)
}

// -------------------------------------------------------------- sources

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourcesBody {
    site: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    period: PeriodBody,
    /// The whole hours the sources were read from (sources are kept by the
    /// hour, so a range that starts or ends inside one is widened).
    covered: Covered,
    compared: ComparedBody,
    /// Every view in `covered`, with a known source or not (the share's
    /// denominator).
    views: i64,
    /// Views with a known source in `covered` (the sources and `other`).
    total: i64,
    /// Views of sources beyond a bucket's cap, not named.
    other: i64,
    /// Views in `covered` without a known source.
    none: NoSource,
    /// Sources matching the filter, before `limit` and `offset`.
    matching: usize,
    sources: Vec<SourceEntry>,
}

#[derive(Serialize)]
struct Covered {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

/// What each entry's change compares: while the period runs, its complete
/// hours (`from` to `to`) with the same stretch of the period before
/// (`previousFrom` to `previousTo`); once it is over, the whole of both.
/// Both are read as whole UTC hours, as `covered`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ComparedBody {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    previous_from: DateTime<Utc>,
    previous_to: DateTime<Utc>,
}

impl ComparedBody {
    fn of(period: &crate::reports::Period, now: DateTime<Utc>) -> Self {
        let s = Stretches::of(period, now);
        ComparedBody {
            from: s.current.0,
            to: s.current.1,
            previous_from: s.previous.0,
            previous_to: s.previous.1,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceEntry {
    source: String,
    views: i64,
    /// Percent of `views`, one decimal (as in `sources.csv`).
    share: f64,
    /// The same source's views in `compared` (the complete hours of a
    /// running period, else all of it): what its change compares.
    compared_views: i64,
    /// The same source's views in the same stretch of the period just
    /// before (`previousCompared`).
    previous_period_views: i64,
}

/// `sources.csv`'s "(none)" row.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NoSource {
    views: i64,
    share: f64,
    compared_views: i64,
    previous_period_views: i64,
}

/// `GET /api/v1/sites/{id}/sources`: "Top sources" of the site, or of one
/// page with `path`, most views first, with the `source` filter of the
/// pages and `limit`/`offset` paging.
pub async fn top_sources(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::top_sources(&state, &site, &q, &filters).await;
    }
    let answer: Reply = async {
        let (period, coarsened) = q.period(&state, &site)?;
        let path = q.optional_path()?;
        let filter = q.source_filter()?;
        let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
        let offset = q.offset()?;
        let now = state.clock.now();
        let read = match &path {
            None => {
                let scope = SourceScope::Site(&site);
                let request = ReportRequest::new(&state.store, scope, &period, now);
                compared::read_source_shares(&request).await?
            }
            Some(NamedPath::Page(p)) => {
                let page = Page::new(&site.domain, p);
                let scope = SourceScope::Page(&page);
                let request = ReportRequest::new(&state.store, scope, &period, now);
                compared::read_source_shares(&request).await?
            }
            Some(NamedPath::Nowhere(_)) => ComparedShares::nothing(&period, now),
        };
        let (current, compared, previous) = (&read.now, read.compared_now(), &read.before);
        let matching = sources::matching(&current.sources, &filter);
        let sources = matching
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(source, views)| SourceEntry {
                source: source.to_string(),
                views: *views,
                share: share(*views, current.views),
                compared_views: compared.sources.views_of(source),
                previous_period_views: previous.sources.views_of(source),
            })
            .collect();
        Ok(ok(&SourcesBody {
            site: site.id.to_string(),
            path: path.as_ref().map(|p| p.shown().to_owned()),
            period: PeriodBody::new(&period, coarsened.as_ref()),
            covered: Covered {
                from: current.sources.from,
                to: current.sources.to,
            },
            compared: ComparedBody::of(&period, now),
            views: current.views,
            total: current.sources.total,
            other: current.sources.other,
            none: NoSource {
                views: current.without_source(),
                share: share(current.without_source(), current.views),
                compared_views: compared.without_source(),
                previous_period_views: previous.without_source(),
            },
            matching: matching.len(),
            sources,
        }))
    }
    .await;
    // A long range of a site whose totals are being built: what is
    // being prepared, not a 503.
    answer.map_err(|e| e.unless_preparing(&site))
}

// ----------------------------------------------------------- breakdown

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BreakdownBody {
    site: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    period: PeriodBody,
    dimension: &'static str,
    /// The whole hours the breakdown was read from.
    covered: Covered,
    compared: ComparedBody,
    /// What the shares are of: the dimension's own total where every view
    /// has a name in it (device, browser, os, country) and for events;
    /// every view of `covered` for source, medium and campaign.
    of: i64,
    /// Views (events, for `event`) counted in the dimension: `entries`
    /// and `other`.
    total: i64,
    /// Counted under names beyond a bucket's cap, not named.
    other: i64,
    /// Names before `limit` and `offset`.
    matching: usize,
    entries: Vec<BreakdownEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BreakdownEntry {
    name: String,
    count: i64,
    /// Percent of `of`, one decimal (as in `breakdown.csv`).
    share: f64,
    /// The count in `compared` (what the change compares).
    compared_count: i64,
    /// The count in the same stretch of the period before.
    previous_period_count: i64,
}

/// `GET /api/v1/sites/{id}/breakdown?dimension=<key>`: one dimension of
/// the site, or of one page with `path`, most counted first, with the
/// previous period's counts, paged with `limit` and `offset`.
pub async fn breakdown(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::breakdown(&state, &site, &q, &filters).await;
    }
    let answer: Reply = async {
        let (period, coarsened) = q.period(&state, &site)?;
        let dimension = q.dimension()?;
        let path = q.optional_path()?;
        let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
        let offset = q.offset()?;
        let page = match &path {
            Some(NamedPath::Page(p)) => Some(Page::new(&site.domain, p)),
            _ => None,
        };
        let scope = match (&path, &page) {
            (None, _) => Some(SourceScope::Site(&site)),
            (_, Some(page)) => Some(SourceScope::Page(page)),
            _ => None,
        };
        let (now, compared, was, of) = match scope {
            Some(scope) => {
                let request = ReportRequest::new(&state.store, scope, &period, state.clock.now());
                compared::one_dimension(&request, dimension).await?
            }
            None => Default::default(),
        };
        let entries = now
            .names
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(name, count)| BreakdownEntry {
                name: name.clone(),
                count: *count,
                share: share(*count, of),
                compared_count: compared.of(name),
                previous_period_count: was.of(name),
            })
            .collect();
        let (from, to) = sources::covered(period.from, period.to);
        Ok(ok(&BreakdownBody {
            site: site.id.to_string(),
            path: path.as_ref().map(|p| p.shown().to_owned()),
            period: PeriodBody::new(&period, coarsened.as_ref()),
            dimension: dimension.key(),
            covered: Covered { from, to },
            compared: ComparedBody::of(&period, state.clock.now()),
            of,
            total: now.total,
            other: now.other,
            matching: now.names.len(),
            entries,
        }))
    }
    .await;
    // A long range of a site whose totals are being built: what is
    // being prepared, not a 503.
    answer.map_err(|e| e.unless_preparing(&site))
}

// --------------------------------------------------------------- visits

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VisitsBody {
    site: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    period: PeriodBody,
    /// Unique visitors (a sum over UTC days; null where the stored data
    /// cannot say).
    visitors: Option<i64>,
    /// Visits started (of a page: visits that entered there).
    visits: i64,
    views: i64,
    bounces: i64,
    /// Seconds between the hits of those visits, in all.
    duration_seconds: i64,
    /// Visits that left from the page (with `path` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    exits: Option<i64>,
    views_per_visit: Option<f64>,
    /// Bounces per visit, 0 to 1.
    bounce_rate: Option<f64>,
    /// Average seconds per visit.
    visit_duration: Option<f64>,
    /// The first UTC day with visitors (views before it have none).
    counted_since: Option<DateTime<Utc>>,
}

/// `GET /api/v1/sites/{id}/visits`: the dashboard's (or, with `path`, the
/// page report's) first line: visitors, visits, views, bounce rate and
/// visit duration over the period.
pub async fn visits(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    // Filtered: read from the visit store instead of the buckets.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return filtered::visits(&state, &site, &q, &filters).await;
    }
    let answer: Reply = async {
        use crate::reports::visits as v;
        let (period, coarsened) = q.period(&state, &site)?;
        let path = q.optional_path()?;
        let page = match &path {
            Some(NamedPath::Page(p)) => Some(Page::new(&site.domain, p)),
            _ => None,
        };
        let scope = match (&path, &page) {
            (_, Some(page)) => Scope::Page(page),
            (None, _) => Scope::of_site(&site),
            // Not a page of this site: nothing, as the other endpoints answer.
            (Some(NamedPath::Nowhere(_)), None) | (Some(NamedPath::Page(_)), None) => {
                return Ok(ok(&VisitsBody {
                    site: site.id.to_string(),
                    path: path.as_ref().map(|p| p.shown().to_owned()),
                    period: PeriodBody::new(&period, coarsened.as_ref()),
                    visitors: Some(0),
                    visits: 0,
                    views: 0,
                    bounces: 0,
                    duration_seconds: 0,
                    exits: Some(0),
                    views_per_visit: None,
                    bounce_rate: None,
                    visit_duration: None,
                    counted_since: None,
                }))
            }
        };
        let (views, figures, since) = tokio::try_join!(
            queries::read_series(&state.store, &scope, &period),
            v::figures(&state.store, &scope, &period),
            v::counted_since(&state.store, &scope),
        )?;
        let views = queries::total(&views);
        Ok(ok(&VisitsBody {
            site: site.id.to_string(),
            path: path.as_ref().map(|p| p.shown().to_owned()),
            period: PeriodBody::new(&period, coarsened.as_ref()),
            visitors: figures.visitors,
            visits: figures.visits,
            views,
            bounces: figures.bounces(),
            duration_seconds: figures.duration_secs,
            exits: figures.exits,
            views_per_visit: figures.views_per_visit(views),
            bounce_rate: figures.bounce_rate(),
            visit_duration: figures.average_duration(),
            counted_since: since,
        }))
    }
    .await;
    // A long range of a site whose totals are being built: what is
    // being prepared, not a 503.
    answer.map_err(|e| e.unless_preparing(&site))
}

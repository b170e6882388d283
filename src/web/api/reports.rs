//! The API's report endpoints: the period parameters of the pages
//! (`range`, `from`, `to`, `res`) and the same queries, as JSON.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::{ApiClient, ApiError};
use crate::domain::{Page, PagePath};
use crate::reports::retention::{self, Coarsened};
use crate::reports::sources::{self, SourceScope};
use crate::reports::{filter, queries, Period, Point, RangeQuery, Resolution, Scope};
use crate::storage::sites::Site;
use crate::web::state::WebState;

type Data = web::Data<WebState>;
type Id = web::Path<String>;
type Q = web::Query<ApiQuery>;
type Reply = Result<HttpResponse, ApiError>;

/// Default and largest number of rows of `pages`.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

#[derive(Debug, Default, Deserialize)]
pub struct ApiQuery {
    range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    res: Option<String>,
    path: Option<String>,
    q: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
    minute: Option<String>,
    source: Option<String>,
}

impl ApiQuery {
    /// The period asked for, in the site's time zone, as the pages read it
    /// under the retention.
    fn period(
        &self,
        state: &WebState,
        site: &Site,
    ) -> Result<(Period, Option<Coarsened>), ApiError> {
        let now = state.clock.now();
        let asked = Period::resolve_in(
            &RangeQuery {
                range: self.range.clone(),
                from: self.from.clone(),
                to: self.to.clone(),
                res: self.res.clone(),
            },
            now,
            site.time_zone.tz(),
        )?;
        Ok(retention::keep(asked, &state.retention, now))
    }

    fn path(&self) -> Result<PagePath, ApiError> {
        let raw = self.path.as_deref().ok_or_else(|| ApiError::BadParameter {
            parameter: "path",
            message: "Name the page: path=/blog/hello.".into(),
        })?;
        PagePath::parse(raw).map_err(|e| ApiError::BadParameter {
            parameter: "path",
            message: format!("That page cannot be read: {e}."),
        })
    }

    /// The optional page (`path`), for the reports that read a site or
    /// one of its pages.
    fn optional_path(&self) -> Result<Option<PagePath>, ApiError> {
        self.path.as_ref().map(|_| self.path()).transpose()
    }

    fn minute(&self) -> Result<DateTime<Utc>, ApiError> {
        let bad = || {
            ApiError::BadParameter {
            parameter: "minute",
            message: "The minute must be a UTC date and time (YYYY-MM-DDTHH:MM) between the years 2000 and 2200.".into(),
        }
        };
        let raw = self
            .minute
            .as_deref()
            .filter(|m| !m.is_empty())
            .ok_or_else(bad)?;
        crate::reports::period::parse_local_minute(raw)
            .map(|t| t.and_utc())
            .ok_or_else(bad)
    }

    fn bounded(
        raw: Option<&str>,
        parameter: &'static str,
        default: usize,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<usize, ApiError> {
        match raw.filter(|r| !r.is_empty()) {
            None => Ok(default),
            Some(raw) => raw
                .parse()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| ApiError::BadParameter {
                    parameter,
                    message: format!(
                        "The {parameter} must be a whole number from {} to {}.",
                        range.start(),
                        range.end()
                    ),
                }),
        }
    }
}

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
/// figures (UTC days), ordered by name like the list.
pub async fn sites(
    state: web::Data<WebState>,
    client: ApiClient,
) -> Result<HttpResponse, ApiError> {
    let summaries = crate::web::reports::summaries(&state, |s| client.can_read(s)).await?;
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
}

impl PeriodBody {
    fn new(p: &Period, coarsened: Option<&Coarsened>) -> Self {
        PeriodBody {
            from: p.from,
            to: p.to,
            resolution: p.resolution.as_str(),
            preset: p.preset.map(|p| p.key()),
            coarsened: coarsened.map(|c| c.to_string()),
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
    path: Option<&PagePath>,
    (period, coarsened): &(Period, Option<Coarsened>),
    points: &[Point],
    now: DateTime<Utc>,
) -> SeriesBody {
    SeriesBody {
        site: site.id.to_string(),
        path: path.map(|p| p.as_str().to_owned()),
        period: PeriodBody::new(period, coarsened.as_ref()),
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
    let period = q.period(&state, &site)?;
    let points = queries::series(&state.store, &Scope::of_site(&site), &period.0).await?;
    Ok(ok(&series_body(
        &site,
        None,
        &period,
        &points,
        state.clock.now(),
    )))
}

/// `GET /api/v1/sites/{id}/page/series?path=`: a page report's chart.
pub async fn page_series(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let path = q.path()?;
    let period = q.period(&state, &site)?;
    let page = Page::new(&site.domain, &path);
    let points = queries::series(&state.store, &Scope::Page(&page), &period.0).await?;
    Ok(ok(&series_body(
        &site,
        Some(&path),
        &period,
        &points,
        state.clock.now(),
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
    let path = q.path()?;
    let minute = Resolution::Minute.floor(q.minute()?);
    let page = Page::new(&site.domain, &path);
    let seconds = queries::seconds_of(&state.store, &page, minute).await?;
    Ok(ok(&SecondsBody {
        site: site.id.to_string(),
        path: path.as_str().to_owned(),
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
}

/// `GET /api/v1/sites/{id}/pages`: the dashboard's top pages, most viewed
/// first, with its filter (`q`) and `limit`/`offset` paging.
pub async fn top_pages(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let (period, coarsened) = q.period(&state, &site)?;
    let needle = filter::parse(q.q.as_deref()).map_err(|e| ApiError::BadParameter {
        parameter: "q",
        message: e.to_string(),
    })?;
    let limit = ApiQuery::bounded(q.limit.as_deref(), "limit", DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let offset = ApiQuery::bounded(q.offset.as_deref(), "offset", 0, 0..=1_000_000)?;
    let top = queries::top_pages(&state.store, &Scope::of_site(&site), &period).await?;
    let total: i64 = top.iter().map(|(_, v)| v).sum();
    let matching = filter::matching(&top, &needle);
    let pages = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(page, views)| PageEntry {
            path: page.path().to_owned(),
            views: *views,
            share: share(*views, total),
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
    /// Views with a known source in `covered` (the share's denominator).
    total: i64,
    /// Views of sources beyond a bucket's cap, not named.
    other: i64,
    /// Sources matching the filter, before `limit` and `offset`.
    matching: usize,
    sources: Vec<SourceEntry>,
}

#[derive(Serialize)]
struct Covered {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceEntry {
    source: String,
    views: i64,
    /// Percent of `total`, one decimal (as in `sources.csv`).
    share: f64,
    /// The same source's views in the period just before.
    previous_period_views: i64,
}

/// `GET /api/v1/sites/{id}/sources`: "Top sources" of the site, or of one
/// page with `path`, most views first, with the `source` filter of the
/// pages and `limit`/`offset` paging.
pub async fn top_sources(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let (period, coarsened) = q.period(&state, &site)?;
    let path = q.optional_path()?;
    let filter =
        sources::parse_filter(q.source.as_deref()).map_err(|e| ApiError::BadParameter {
            parameter: "source",
            message: e.to_string(),
        })?;
    let limit = ApiQuery::bounded(q.limit.as_deref(), "limit", DEFAULT_LIMIT, 1..=MAX_LIMIT)?;
    let offset = ApiQuery::bounded(q.offset.as_deref(), "offset", 0, 0..=1_000_000)?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = match &page {
        Some(page) => SourceScope::Page(page),
        None => SourceScope::Site(&site.domain),
    };
    let (current, previous) = crate::web::reports::sources::read(&state, scope, &period).await?;
    let matching = sources::matching(&current, &filter);
    let sources = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(source, views)| SourceEntry {
            source: source.to_string(),
            views: *views,
            share: share(*views, current.total),
            previous_period_views: previous.views_of(source),
        })
        .collect();
    Ok(ok(&SourcesBody {
        site: site.id.to_string(),
        path: path.map(|p| p.as_str().to_owned()),
        period: PeriodBody::new(&period, coarsened.as_ref()),
        covered: Covered {
            from: current.from,
            to: current.to,
        },
        total: current.total,
        other: current.other,
        matching: matching.len(),
        sources,
    }))
}

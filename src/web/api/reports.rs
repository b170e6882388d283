//! The API's report endpoints: the period parameters of the pages
//! (`range`, `from`, `to`, `res`) and the filters, turned into one
//! [`ReportRequest`]; the figures come from [`engine`] (which decides
//! where they are read, with filters or without) and are only rendered
//! here, as JSON.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::query::{Breakdown, NamedPath};
use super::{ApiClient, ApiError};
use crate::domain::{Filters, Page};
use crate::ingest::freshness::Lags;
use crate::reports::compared::Stretches;
use crate::reports::engine::{self, Panel, Said};
use crate::reports::request::ReportRequest;
use crate::reports::retention::Coarsened;
use crate::reports::sources::SourceScope;
use crate::reports::summaries;
use crate::reports::{filtered_read, Period, Point};
use crate::storage::progress::Stream;
use crate::storage::sites::Site;
use crate::web::state::WebState;

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

// ------------------------------------------------------------- requests

/// The question of a report endpoint: the site, or one of its pages
/// (`None` for a path no page of it can have), over the asked period,
/// with the asked filters.
struct Asked {
    period: Period,
    coarsened: Option<Coarsened>,
    filters: Filters,
    now: DateTime<Utc>,
    /// How far behind each write-behind stream is, read once.
    lags: Lags,
}

impl Asked {
    fn of(state: &WebState, site: &Site, q: &Q) -> Result<Self, ApiError> {
        let filters = q.filters()?;
        let (period, coarsened) = q.period(state, site)?;
        Ok(Asked {
            period,
            coarsened,
            filters,
            now: state.clock.now(),
            lags: Lags::now(&state.journal, &state.apply, state.clock.now()),
        })
    }

    fn request<'a>(&'a self, state: &'a WebState, scope: SourceScope<'a>) -> ReportRequest<'a> {
        ReportRequest::new(&state.store, scope, &self.period, self.now).filtered(&self.filters)
    }

    /// What a report of nothing (a page the site cannot have) says.
    fn nothing(&self) -> Said {
        Said::nothing(&self.filters)
    }

    fn period_body(&self, said: &Said) -> PeriodBody {
        PeriodBody {
            filtered: FilteredBody::of(said),
            ..self.period_read_from(said.streams)
        }
    }

    /// The period of figures read from the visit store alone (funnels,
    /// properties), whether filtered or not: the filters, the share of
    /// visitors read, and the site's imports: left out (they keep no
    /// visits), but for the imported properties an unfiltered Properties
    /// read counts (`imported_counted`).
    async fn visit_store_period(
        &self,
        state: &WebState,
        site: &Site,
        sampled: f64,
        imported_counted: bool,
    ) -> Result<PeriodBody, ApiError> {
        let imported =
            filtered_read::visit_store_imported_note(&state.store, site, imported_counted).await?;
        Ok(PeriodBody {
            filtered: Some(FilteredBody {
                filters: self.filters.iter().map(ToString::to_string).collect(),
                sampled,
                imported_counted: imported.as_ref().map(|_| imported_counted),
                imported,
            }),
            ..self.period_read_from(engine::VISIT_STORE)
        })
    }

    /// The period of figures read from what `streams` write: how far
    /// behind they are, when past their window.
    fn period_read_from(&self, streams: &[Stream]) -> PeriodBody {
        PeriodBody {
            behind_seconds: self.lags.behind(streams).map(|b| b.secs),
            ..PeriodBody::new(&self.period, self.coarsened.as_ref())
        }
    }
}

/// A long range of a site whose totals are being built: what is being
/// prepared, not a 503 (the buckets' reads only: a filtered report's
/// refusals say what they are).
fn prepared(answer: Reply, site: &Site, q: &Q) -> Reply {
    let unfiltered = q.filters().is_ok_and(|f| f.is_empty());
    answer.map_err(|e| {
        if unfiltered {
            e.unless_preparing(site)
        } else {
            e
        }
    })
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
    /// With `filter`: what the figures are.
    #[serde(skip_serializing_if = "Option::is_none")]
    filtered: Option<FilteredBody>,
    /// The write-behind stream that writes these figures' store is behind
    /// by more than its window: by how many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    behind_seconds: Option<u64>,
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
            behind_seconds: None,
        }
    }
}

/// `period.filtered`: the filters applied, and the share of visitors read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FilteredBody {
    filters: Vec<String>,
    /// The share of visitors whose visits were read, 0 to 1 (1: all of
    /// them); counts are scaled up by its inverse.
    sampled: f64,
    /// Set when the site has imports: whether their figures count under
    /// these filters, and if not why (docs/segments.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    imported: Option<String>,
    /// With `imported`: whether imported figures are in the counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    imported_counted: Option<bool>,
}

impl FilteredBody {
    /// Set for filtered figures only.
    fn of(said: &Said) -> Option<Self> {
        said.is_filtered().then(|| FilteredBody {
            filters: said.filters.clone(),
            sampled: said.sampled,
            imported: said.imported.as_ref().map(|i| i.note()),
            imported_counted: said.imported.as_ref().map(|i| i.counted()),
        })
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
    asked: &Asked,
    s: &engine::Series,
) -> SeriesBody {
    SeriesBody {
        site: site.id.to_string(),
        path: path.map(|p| p.shown().to_owned()),
        period: PeriodBody {
            daily_only: s.daily_only.clone(),
            ..asked.period_body(&s.said)
        },
        total: s.total(),
        points: s
            .points
            .iter()
            .map(|p| PointBody {
                at: p.at,
                views: p.views,
                partial: asked.period.is_partial(p.at, asked.now),
            })
            .collect(),
    }
}

/// `GET /api/v1/sites/{id}/series`: the dashboard's chart.
pub async fn site_series(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let answer: Reply = async {
        let asked = Asked::of(&state, &site, &q)?;
        let request = asked.request(&state, SourceScope::Site(&site));
        let series = engine::series(&state.reads(), &site, &request).await?;
        Ok(ok(&series_body(&site, None, &asked, &series)))
    }
    .await;
    prepared(answer, &site, &q)
}

/// `GET /api/v1/sites/{id}/page/series?path=`: a page report's chart.
pub async fn page_series(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let path = q.path()?;
    let asked = Asked::of(&state, &site, &q)?;
    let series = match &path {
        NamedPath::Page(p) => {
            let page = Page::new(&site.domain, p);
            let request = asked.request(&state, SourceScope::Page(&page));
            engine::series(&state.reads(), &site, &request).await?
        }
        NamedPath::Nowhere(_) => engine::Series::nothing(&asked.period, asked.nothing()),
    };
    Ok(ok(&series_body(&site, Some(&path), &asked, &series)))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecondsBody {
    site: String,
    path: String,
    minute: DateTime<Utc>,
    total: i64,
    points: Vec<SecondPoint>,
    /// With `filter`: what the figures are (as a period's).
    #[serde(skip_serializing_if = "Option::is_none")]
    filtered: Option<FilteredBody>,
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
    let filters = q.filters()?;
    let path = q.path()?;
    let minute = q.minute()?;
    let now = state.clock.now();
    let seconds = match &path {
        NamedPath::Page(p) => {
            let page = Page::new(&site.domain, p);
            // The period is the minute's own: only its zone and edges matter.
            let period = Period::last_hour(minute, site.time_zone.tz());
            let request = ReportRequest::new(&state.store, SourceScope::Page(&page), &period, now)
                .filtered(&filters);
            engine::seconds(&state.reads(), &site, &request, minute).await?
        }
        NamedPath::Nowhere(_) => engine::Steps::seconds_of_nothing(minute, Said::nothing(&filters)),
    };
    Ok(ok(&SecondsBody {
        site: site.id.to_string(),
        path: path.shown().to_owned(),
        minute: seconds.points.first().map_or(minute, |p| p.at),
        total: seconds.total(),
        points: seconds
            .points
            .iter()
            .map(|p: &Point| SecondPoint {
                at: p.at,
                views: p.views,
            })
            .collect(),
        filtered: FilteredBody::of(&seconds.said),
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
    #[serde(flatten)]
    time: TimeOnPage,
}

/// A page's time on page: its mean in seconds (one decimal), what it is
/// measured by (`engaged`: the engaged time trackers sent, where the
/// range has engaged views; else `until_next_view`: from each view to its
/// visit's next view, a visit's last view not timed), and the views it is
/// the mean of; the mean of each engaged view's greatest scroll depth
/// (percent, one decimal) and the engaged views. All null under a filter
/// (the visit store keeps neither); the means null without their views.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TimeOnPage {
    time_on_page: Option<f64>,
    time_kind: Option<&'static str>,
    timed_views: Option<i64>,
    scroll_depth: Option<f64>,
    engaged_views: Option<i64>,
}

impl TimeOnPage {
    fn of(engagement: Option<&crate::reports::engagement::Engagement>) -> Self {
        let mean = engagement.and_then(|e| e.time_on_page());
        TimeOnPage {
            time_on_page: mean.map(|(secs, _)| (secs * 10.0).round() / 10.0),
            time_kind: mean.map(|(_, kind)| kind.as_str()),
            timed_views: engagement.map(|e| e.time_views()),
            scroll_depth: engagement
                .and_then(|e| e.scroll_depth())
                .map(|d| (d * 10.0).round() / 10.0),
            engaged_views: engagement.map(|e| e.engaged_views),
        }
    }
}

/// `GET /api/v1/sites/{id}/pages`: the dashboard's top pages, most viewed
/// first, with its filter (`q`) and `limit`/`offset` paging.
pub async fn top_pages(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let answer: Reply = async {
        let asked = Asked::of(&state, &site, &q)?;
        let needle = q.page_filter()?;
        let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
        let window = (q.offset()?, limit);
        let request = asked.request(&state, SourceScope::Site(&site));
        let read = engine::pages(&state.reads(), &site, &request, &needle, window).await?;
        Ok(ok(&PagesBody {
            site: site.id.to_string(),
            period: asked.period_body(&read.said),
            total: read.total,
            matching: read.matching,
            pages: read
                .rows
                .iter()
                .map(|r| PageEntry {
                    path: r.path.clone(),
                    views: r.views,
                    share: share(r.views, read.total),
                    visitors: r.visitors,
                    entries: r.entries,
                    exits: r.exits,
                    time: TimeOnPage::of(r.engagement.as_ref()),
                })
                .collect(),
        }))
    }
    .await;
    prepared(answer, &site, &q)
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

impl Covered {
    fn of(panel: &Panel) -> Self {
        Covered {
            from: panel.covered.0,
            to: panel.covered.1,
        }
    }
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
    fn of(s: &Stretches) -> Self {
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

/// The panel of the site, or of the page `path` names (nothing for a path
/// no page of it can have).
async fn panel_of(
    state: &WebState,
    site: &Site,
    asked: &Asked,
    path: Option<&NamedPath>,
    dimension: Option<crate::domain::Dimension>,
) -> Result<Panel, ApiError> {
    let page = match path {
        Some(NamedPath::Page(p)) => Some(Page::new(&site.domain, p)),
        Some(NamedPath::Nowhere(_)) => {
            return Ok(Panel::nothing(&asked.period, asked.now, asked.nothing()))
        }
        None => None,
    };
    let request = asked.request(state, SourceScope::of(site, page.as_ref()));
    let reads = state.reads();
    Ok(match dimension {
        Some(d) => engine::dimension(&reads, site, &request, d).await?,
        None => engine::sources(&reads, site, &request).await?,
    })
}

/// `GET /api/v1/sites/{id}/sources`: "Top sources" of the site, or of one
/// page with `path`, most views first, with the `source` filter of the
/// pages and `limit`/`offset` paging.
pub async fn top_sources(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let answer: Reply = async {
        let asked = Asked::of(&state, &site, &q)?;
        let path = q.optional_path()?;
        let filter = q.source_filter()?;
        let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
        let offset = q.offset()?;
        let panel = panel_of(&state, &site, &asked, path.as_ref(), None).await?;
        let matching = panel.matching(&filter);
        let sources = matching
            .iter()
            .skip(offset)
            .take(limit)
            .map(|r| SourceEntry {
                source: r.name.clone(),
                views: r.count,
                share: share(r.count, panel.of),
                compared_views: r.compared,
                previous_period_views: r.previous,
            })
            .collect();
        Ok(ok(&SourcesBody {
            site: site.id.to_string(),
            path: path.as_ref().map(|p| p.shown().to_owned()),
            period: asked.period_body(&panel.said),
            covered: Covered::of(&panel),
            compared: ComparedBody::of(&panel.stretches),
            views: panel.views,
            total: panel.total,
            other: panel.other.count,
            none: NoSource {
                views: panel.unnamed.count,
                share: share(panel.unnamed.count, panel.of),
                compared_views: panel.unnamed.compared,
                previous_period_views: panel.unnamed.previous,
            },
            matching: matching.len(),
            sources,
        }))
    }
    .await;
    prepared(answer, &site, &q)
}

// ----------------------------------------------------------- breakdown

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BreakdownBody {
    site: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    period: PeriodBody,
    dimension: String,
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
    /// `prop:<key>` only: every property key the visits carry, with
    /// the visits carrying it, most first.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<Vec<PropertyKeyBody>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PropertyKeyBody {
    name: String,
    visits: i64,
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
    /// `prop:<key>` only: the views and the events carrying the value
    /// (`count` is its visits).
    #[serde(skip_serializing_if = "Option::is_none")]
    views: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<i64>,
}

/// `breakdown?dimension=prop:<key>`: the values of a custom property over
/// the period, from the visit store (whole periods: the visit store
/// keeps seconds, so nothing is widened), each with its visits (`count`),
/// views and events, and the visits of the period before.
async fn property_breakdown(
    state: &WebState,
    site: &Site,
    asked: &Asked,
    q: &Q,
    key: &str,
) -> Reply {
    let path = q.optional_path()?;
    let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = q.offset()?;
    // A page's properties are those of the visits that viewed it, as the
    // page report filters them (a path no page can have matches none).
    let filters = match &path {
        Some(p) => {
            match crate::domain::Filter::new(crate::domain::FilterDimension::Page, p.shown()) {
                Ok(page) => asked.filters.and_page(page),
                Err(_) => asked.filters.clone(),
            }
        }
        None => asked.filters.clone(),
    };
    let (now, before) = state
        .reads()
        .properties(site, &filters, Some(key), &asked.period)
        .await?;
    let total = now
        .keys
        .iter()
        .find(|(k, _)| k == key)
        .map_or(0, |(_, n)| *n);
    let entries = now
        .rows_with_previous(&before)
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(r, previous)| BreakdownEntry {
            name: r.value.clone(),
            count: r.visits,
            share: share(r.visits, now.visits),
            compared_count: r.visits,
            previous_period_count: previous,
            views: Some(r.views),
            events: Some(r.events),
        })
        .collect();
    let previous_period = asked.period.previous();
    let period = asked
        .visit_store_period(state, site, now.sampled, now.imported)
        .await?;
    Ok(ok(&BreakdownBody {
        site: site.id.to_string(),
        path: path.as_ref().map(|p| p.shown().to_owned()),
        period,
        dimension: format!("prop:{key}"),
        covered: Covered {
            from: asked.period.from,
            to: asked.period.to,
        },
        compared: ComparedBody {
            from: asked.period.from,
            to: asked.period.to,
            previous_from: previous_period.from,
            previous_to: previous_period.to,
        },
        of: now.visits,
        total,
        other: 0,
        matching: now.rows.len(),
        entries,
        keys: Some(
            now.keys
                .iter()
                .map(|(name, visits)| PropertyKeyBody {
                    name: name.clone(),
                    visits: *visits,
                })
                .collect(),
        ),
    }))
}

/// `GET /api/v1/sites/{id}/breakdown?dimension=<key>`: one dimension of
/// the site, or of one page with `path`, most counted first, with the
/// previous period's counts, paged with `limit` and `offset`.
pub async fn breakdown(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let answer: Reply = async {
        let asked = Asked::of(&state, &site, &q)?;
        let dimension = match q.dimension()? {
            Breakdown::Dimension(d) => d,
            Breakdown::Property(key) => {
                return property_breakdown(&state, &site, &asked, &q, &key).await
            }
        };
        let path = q.optional_path()?;
        let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
        let offset = q.offset()?;
        let panel = panel_of(&state, &site, &asked, path.as_ref(), Some(dimension)).await?;
        let entries = panel
            .rows
            .iter()
            .skip(offset)
            .take(limit)
            .map(|r| BreakdownEntry {
                name: r.name.clone(),
                count: r.count,
                share: share(r.count, panel.of),
                compared_count: r.compared,
                previous_period_count: r.previous,
                views: None,
                events: None,
            })
            .collect();
        Ok(ok(&BreakdownBody {
            site: site.id.to_string(),
            path: path.as_ref().map(|p| p.shown().to_owned()),
            period: asked.period_body(&panel.said),
            dimension: dimension.key().to_owned(),
            covered: Covered::of(&panel),
            compared: ComparedBody::of(&panel.stretches),
            of: panel.of,
            total: panel.total,
            other: panel.other.count,
            matching: panel.rows.len(),
            entries,
            keys: None,
        }))
    }
    .await;
    prepared(answer, &site, &q)
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
    /// The page's time on page (with `path` only; null under a filter).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    time: Option<TimeOnPage>,
}

/// `GET /api/v1/sites/{id}/visits`: the dashboard's (or, with `path`, the
/// page report's) first line: visitors, visits, views, bounce rate and
/// visit duration over the period. A page's visits are those that
/// entered there, with filters or without.
pub async fn visits(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let answer: Reply = async {
        let asked = Asked::of(&state, &site, &q)?;
        let path = q.optional_path()?;
        let line = match &path {
            Some(NamedPath::Page(p)) => {
                let page = Page::new(&site.domain, p);
                let request = asked.request(&state, SourceScope::Page(&page));
                engine::line(&state.reads(), &site, &request).await?
            }
            None => {
                let request = asked.request(&state, SourceScope::Site(&site));
                engine::line(&state.reads(), &site, &request).await?
            }
            // Not a page of this site: nothing, as the other endpoints answer.
            Some(NamedPath::Nowhere(_)) => engine::Line::nothing(asked.nothing()),
        };
        Ok(ok(&VisitsBody {
            site: site.id.to_string(),
            path: path.as_ref().map(|p| p.shown().to_owned()),
            period: asked.period_body(&line.said),
            visitors: line.visitors,
            visits: line.visits,
            views: line.views,
            bounces: line.bounces,
            duration_seconds: line.duration_secs,
            exits: line.exits,
            views_per_visit: line.views_per_visit(),
            bounce_rate: line.bounce_rate(),
            visit_duration: line.average_duration(),
            counted_since: line.counted_since,
            time: path
                .is_some()
                .then(|| TimeOnPage::of(line.engagement.as_ref())),
        }))
    }
    .await;
    prepared(answer, &site, &q)
}

// --------------------------------------------------------------- goals

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoalsBody {
    site: String,
    period: PeriodBody,
    /// What converts: `visitors` (unfiltered) or `visits` (with filters).
    converting: &'static str,
    goals: Vec<GoalBody>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoalBody {
    kind: &'static str,
    goal: String,
    conversions: i64,
    previous_period_conversions: i64,
    converting: Option<i64>,
    /// What `converting` counts: the table's, or visits for a goal on an
    /// event with a property value (always read from the visit store).
    converting_kind: &'static str,
    conversion_rate: Option<f64>,
    /// The share of visitors its figures were read from (1: all; below,
    /// estimates from the visit store's sample: a goal on a property
    /// value, or any goal with filters).
    sampled: f64,
    /// The property a goal's events must carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    property: Option<PropertyBody>,
    revenue: Vec<RevenueBody>,
}

#[derive(Serialize)]
struct PropertyBody {
    key: String,
    value: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RevenueBody {
    currency: String,
    /// Exact decimals, as strings: a JSON number would be read as a
    /// binary fraction.
    amount: String,
    events: i64,
    average: Option<String>,
    previous_period_amount: String,
}

/// `GET /api/v1/sites/{id}/goals`: the dashboard's Goals table, each
/// goal's conversions, converting visitors (with filters: visits), rate
/// and revenue per currency over the period.
pub async fn goals(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let answer: Reply = async {
        let asked = Asked::of(&state, &site, &q)?;
        let request = asked.request(&state, SourceScope::Site(&site));
        let report = engine::Report::new(state.reads(), &site, request, &state.retention);
        let (goals, said) = report.goals().await?;
        let revenue = |g: &crate::reports::goals::GoalFigures| {
            g.revenue_compared()
                .into_iter()
                .map(|(r, was)| RevenueBody {
                    currency: r.currency.to_string(),
                    amount: r.amount(),
                    events: r.conversions,
                    average: r.average(),
                    previous_period_amount: was.amount(),
                })
                .collect()
        };
        Ok(ok(&GoalsBody {
            site: site.id.to_string(),
            period: asked.period_body(&said),
            converting: goals.converting.noun(),
            goals: goals
                .rows
                .iter()
                .map(|g| GoalBody {
                    kind: g.goal.kind(),
                    goal: g.goal.name().to_owned(),
                    conversions: g.conversions,
                    previous_period_conversions: g.conversions_before,
                    converting: g.converting,
                    converting_kind: g.converting_kind.noun(),
                    conversion_rate: g.rate(),
                    sampled: g.sampled,
                    property: g.goal.property().map(|(key, value)| PropertyBody {
                        key: key.to_owned(),
                        value: value.to_owned(),
                    }),
                    revenue: revenue(g),
                })
                .collect(),
        }))
    }
    .await;
    prepared(answer, &site, &q)
}

// --------------------------------------------------------------- funnel

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunnelBody {
    site: String,
    period: PeriodBody,
    steps: Vec<FunnelStepBody>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunnelStepBody {
    step: String,
    /// Visits that reached this step after every step before it, in order,
    /// within the visit.
    visits: i64,
    /// Of the previous step's visits, 0 to 1 (the first step: 1, or null
    /// without visits).
    conversion_from_previous: Option<f64>,
    /// Of the first step's visits, 0 to 1.
    conversion_from_start: Option<f64>,
    /// The previous step's visits that did not reach this one.
    drop_off: i64,
}

/// `GET /api/v1/sites/{id}/funnel?step=/pricing&step=event:Signup`: an
/// ad-hoc funnel of 2 to 8 steps over the period, with the filters.
pub async fn funnel(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let asked = Asked::of(&state, &site, &q)?;
    let steps = q.funnel_steps()?;
    let figures = state
        .reads()
        .funnel(&site, &asked.filters, &steps, &asked.period)
        .await?;
    // A funnel always leaves imports out: they keep no visits.
    let period = asked
        .visit_store_period(&state, &site, figures.sampled, false)
        .await?;
    Ok(ok(&FunnelBody {
        site: site.id.to_string(),
        period,
        steps: (0..figures.steps.len())
            .map(|i| FunnelStepBody {
                step: figures.steps[i].step.clone(),
                visits: figures.steps[i].visits,
                conversion_from_previous: figures.from_previous(i),
                conversion_from_start: figures.from_start(i),
                drop_off: figures.drop_off(i),
            })
            .collect(),
    }))
}

//! Report pages and CSV exports for site owners (and admins).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse, ResponseError};
use askama::Template;
use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Instant;

use super::auth::{AuthError, Viewer};
use super::fmt;
use super::pages::{error_page, render, Nav};
use super::snippets;
use super::state::WebState;
use crate::domain::{Page, PagePath, SiteId};
use crate::reports::period::Preset;
use crate::reports::{
    chart, csv, queries, Period, PeriodError, Point, RangeQuery, Resolution, Scope,
};
use crate::storage::sites::Site;
use crate::storage::Topology;
use crate::telemetry::chain;

const PAGES_PER_SCREEN: usize = 25;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Unknown, or not this viewer's: the same answer, so ids leak nothing.
    #[error("no such site")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("report query failed")]
    Database(#[from] mongodb::error::Error),
}

impl From<PeriodError> for ReportError {
    fn from(e: PeriodError) -> Self {
        ReportError::BadRequest(e.to_string())
    }
}

impl ResponseError for ReportError {
    fn status_code(&self) -> StatusCode {
        match self {
            ReportError::NotFound => StatusCode::NOT_FOUND,
            ReportError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ReportError::Auth(e) => e.status_code(),
            ReportError::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        match self {
            ReportError::NotFound => error_page(
                StatusCode::NOT_FOUND,
                "Not found",
                "There is no such site among yours.",
            ),
            ReportError::BadRequest(message) => {
                error_page(StatusCode::BAD_REQUEST, "Cannot show that", message)
            }
            ReportError::Auth(e) => e.error_response(),
            ReportError::Database(e) => {
                tracing::error!(error = %chain(e), "report query failed");
                error_page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Reports unavailable",
                    "The database did not answer. Please try again in a moment.",
                )
            }
        }
    }
}

/// The query string every report page and export accepts.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReportQuery {
    range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    res: Option<String>,
    /// Page report: the page's path.
    path: Option<String>,
    /// Dashboard: filter for top pages (part of the path).
    q: Option<String>,
    /// Dashboard: page of the top-pages list, from 1.
    p: Option<String>,
    /// Page report: the minute whose seconds are shown.
    minute: Option<String>,
}

impl ReportQuery {
    fn range(&self) -> RangeQuery {
        RangeQuery {
            range: self.range.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            res: self.res.clone(),
        }
    }

    /// The range parameters as a query string, for links and exports.
    fn range_params(&self) -> String {
        [
            ("range", &self.range),
            ("from", &self.from),
            ("to", &self.to),
            ("res", &self.res),
        ]
        .iter()
        .filter_map(|(k, v)| {
            v.as_deref()
                .filter(|v| !v.is_empty())
                .map(|v| format!("{k}={}", fmt::query(v)))
        })
        .collect::<Vec<_>>()
        .join("&")
    }

    /// The top-pages filter (part of a path), at most 200 characters.
    fn page_filter(&self) -> Result<String, ReportError> {
        let filter = self.q.as_deref().unwrap_or_default().trim().to_owned();
        if filter.len() > 200 {
            return Err(ReportError::BadRequest(
                "the page filter is at most 200 characters".into(),
            ));
        }
        Ok(filter)
    }

    fn path(&self) -> Result<PagePath, ReportError> {
        let raw = self.path.as_deref().unwrap_or("/");
        PagePath::parse(raw).map_err(|e| ReportError::BadRequest(format!("path: {e}")))
    }

    fn minute(&self) -> Result<Option<DateTime<Utc>>, ReportError> {
        match self.minute.as_deref().filter(|m| !m.is_empty()) {
            None => Ok(None),
            Some(raw) => NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M")
                .map(|t| Some(t.and_utc()))
                .map_err(|_| {
                    ReportError::BadRequest("minute must be YYYY-MM-DDTHH:MM (UTC)".into())
                }),
        }
    }
}

/// The top pages whose path contains `filter`, ignoring case: the same
/// rows on the dashboard and in `pages.csv`.
fn matching_pages<'a>(top: &'a [(Page, i64)], filter: &str) -> Vec<&'a (Page, i64)> {
    let needle = filter.to_lowercase();
    top.iter()
        .filter(|(page, _)| needle.is_empty() || page.path().to_lowercase().contains(&needle))
        .collect()
}

fn join(base: &str, params: &str, extra: &[(&str, &str)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !params.is_empty() {
        parts.push(params.to_owned());
    }
    parts.extend(extra.iter().map(|(k, v)| format!("{k}={}", fmt::query(v))));
    if parts.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", parts.join("&"))
    }
}

/// The site `id` names, if this viewer may see it.
fn visible_site(state: &WebState, viewer: &Viewer, id: &str) -> Result<Arc<Site>, ReportError> {
    let id = SiteId::parse(id).map_err(|_| ReportError::NotFound)?;
    let site = state.directory.by_id(&id).ok_or(ReportError::NotFound)?;
    if viewer.can_see(&site) {
        Ok(site)
    } else {
        Err(ReportError::NotFound)
    }
}

/// How fresh report figures are, given where they are read from.
pub fn freshness(state: &WebState) -> String {
    use mongodb::options::ReadPreference;
    let pref = state.store.read_preference();
    let staleness = match pref {
        ReadPreference::Primary => None,
        ReadPreference::Secondary { options }
        | ReadPreference::SecondaryPreferred { options }
        | ReadPreference::PrimaryPreferred { options }
        | ReadPreference::Nearest { options } => options.as_ref().and_then(|o| o.max_staleness),
        _ => None,
    };
    let name = crate::storage::read_preference_name(pref);
    let has_secondaries = match state.store.topology() {
        Topology::Standalone => false,
        Topology::ReplicaSet { members, .. } => *members > 1,
        Topology::Sharded => true,
    };
    if matches!(pref, ReadPreference::Primary) || !has_secondaries {
        format!("Read from the primary (read preference {name}; no secondary to read from): figures include every stored view.")
    } else if let Some(s) = staleness {
        format!(
            "Read from a secondary when one is available (read preference {name}): figures may be up to {} seconds behind.",
            s.as_secs()
        )
    } else {
        format!("Read from a secondary when one is available (read preference {name}): figures may lag the newest views by the replication delay, usually under a second.")
    }
}

/// Range presets, custom bounds and resolution, as the form shows them.
pub struct Controls {
    pub action: String,
    pub hidden: Vec<(String, String)>,
    /// The current range, for other forms on the page to keep it.
    pub range_hidden: Vec<(String, String)>,
    pub presets: Vec<(String, String, bool)>,
    pub custom: bool,
    pub from: String,
    pub to: String,
    pub res: String,
    pub summary: String,
}

fn controls(action: &str, hidden: &[(&str, &str)], q: &ReportQuery, period: &Period) -> Controls {
    let hidden_params: Vec<(&str, &str)> = hidden.to_vec();
    Controls {
        action: action.to_owned(),
        hidden: hidden
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        range_hidden: [
            ("range", &q.range),
            ("from", &q.from),
            ("to", &q.to),
            ("res", &q.res),
        ]
        .into_iter()
        .filter_map(|(k, v)| {
            v.clone()
                .filter(|v| !v.is_empty())
                .map(|v| (k.to_owned(), v))
        })
        .collect(),
        presets: Preset::ALL
            .iter()
            .map(|p| {
                let mut extra = hidden_params.clone();
                extra.insert(0, ("range", p.key()));
                (
                    p.label().to_owned(),
                    join(action, "", &extra),
                    period.preset == Some(*p),
                )
            })
            .collect(),
        custom: period.preset.is_none(),
        from: fmt::input_minute(&period.from),
        to: fmt::input_minute(&period.to),
        res: q.res.clone().unwrap_or_else(|| "auto".into()),
        summary: format!(
            "{} to {}, {} points by {}",
            fmt::utc(&period.from),
            fmt::utc(&period.to),
            period.point_count(),
            period.resolution.as_str()
        ),
    }
}

/// A series as its chart and its table.
pub struct SeriesView {
    pub chart: String,
    pub rows: Vec<(String, i64)>,
    pub total: i64,
}

fn series_view(points: &[Point], resolution: Resolution, title: &str) -> SeriesView {
    SeriesView {
        chart: chart::bars(points, resolution, title),
        rows: points
            .iter()
            .map(|p| (chart::label(p.at, resolution), p.views))
            .collect(),
        total: queries::total(points),
    }
}

fn timed(state: &WebState, started: Instant) {
    state
        .report_seconds
        .observe(started.elapsed().as_secs_f64());
}

// ---------------------------------------------------------------- sites list

pub struct SiteRow {
    pub id: String,
    pub name: String,
    pub domain: String,
    pub today: i64,
    pub week: i64,
    pub month: i64,
    pub sparkline: String,
}

#[derive(Template)]
#[template(path = "sites.html")]
struct SitesPage {
    nav: Option<Nav>,
    rows: Vec<SiteRow>,
    is_admin: bool,
}

pub async fn sites(
    state: web::Data<WebState>,
    viewer: Viewer,
) -> Result<HttpResponse, ReportError> {
    let started = Instant::now();
    let now = state.clock.now();
    let mut visible: Vec<Arc<Site>> = state
        .directory
        .all()
        .into_iter()
        .filter(|s| viewer.can_see(s))
        .collect();
    visible.sort_by_key(|s| s.name.to_lowercase());
    let summaries = futures::future::try_join_all(
        visible
            .iter()
            .map(|site| queries::site_summary(&state.store, &site.domain, now)),
    )
    .await?;
    let rows = visible
        .iter()
        .zip(summaries)
        .map(|(site, s)| SiteRow {
            id: site.id.to_string(),
            name: site.name.clone(),
            domain: site.domain.to_string(),
            today: s.today,
            week: s.last_7_days,
            month: s.last_30_days,
            sparkline: chart::sparkline(
                &s.daily,
                &format!("{}: views per day, last 30 days", site.name),
            ),
        })
        .collect();
    let page = SitesPage {
        nav: Some(viewer.nav()),
        rows,
        is_admin: viewer.user.is_admin(),
    };
    timed(&state, started);
    Ok(render(StatusCode::OK, &page))
}

// ----------------------------------------------------------------- dashboard

pub struct PageRow {
    pub path: String,
    pub views: i64,
    pub share: String,
    pub href: String,
}

#[derive(Template)]
#[template(path = "dashboard.html")]
struct DashboardPage {
    nav: Option<Nav>,
    site: Arc<Site>,
    controls: Controls,
    series: SeriesView,
    headline: Headline,
    pages: Vec<PageRow>,
    pages_matching: usize,
    filter: String,
    page_no: usize,
    prev_href: Option<String>,
    next_href: Option<String>,
    csv_series: String,
    csv_pages: String,
    freshness: String,
}

/// The period's total against the previous period's, shown atop the
/// dashboard and the page report (`partials/headline.html`).
struct Headline {
    previous: i64,
    change: String,
    /// CSS class: `up`, `down`, or empty when equal.
    class: &'static str,
}

impl Headline {
    fn new(current: &[queries::Point], previous: &[queries::Point]) -> Self {
        let (total, previous) = (queries::total(current), queries::total(previous));
        Headline {
            previous,
            change: fmt::change(total, previous),
            class: match total.cmp(&previous) {
                std::cmp::Ordering::Greater => "up",
                std::cmp::Ordering::Less => "down",
                std::cmp::Ordering::Equal => "",
            },
        }
    }
}

pub async fn dashboard(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, ReportError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let period = Period::resolve(&q.range(), state.clock.now())?;
    let scope = Scope::Site(&site.domain);
    let before = period.previous();
    let ((current, top), previous) = tokio::try_join!(
        queries::site_overview(&state.store, &site.domain, &period),
        queries::series(&state.store, &scope, &before),
    )?;
    let filter = q.page_filter()?;
    let page_no: usize = match q.p.as_deref().filter(|p| !p.is_empty()) {
        None => 1,
        Some(raw) => raw
            .parse()
            .ok()
            .filter(|n| *n >= 1 && *n <= 100_000)
            .ok_or_else(|| ReportError::BadRequest("p must be a page number from 1".into()))?,
    };
    let total = queries::total(&current);
    let base = format!("/sites/{}", site.id);
    let params = q.range_params();
    let matching = matching_pages(&top, &filter);
    let pages = matching
        .iter()
        .skip((page_no - 1) * PAGES_PER_SCREEN)
        .take(PAGES_PER_SCREEN)
        .map(|(page, views)| PageRow {
            path: page.path().to_owned(),
            views: *views,
            share: fmt::share(*views, total),
            href: join(&format!("{base}/page"), &params, &[("path", page.path())]),
        })
        .collect();
    let screen = |n: usize| join(&base, &params, &[("q", &filter), ("p", &n.to_string())]);
    let page = DashboardPage {
        nav: Some(viewer.nav()),
        controls: controls(&base, &[], &q, &period),
        series: series_view(
            &current,
            period.resolution,
            &format!("Views of {} by {}", site.domain, period.resolution.as_str()),
        ),
        headline: Headline::new(&current, &previous),
        pages_matching: matching.len(),
        pages,
        prev_href: (page_no > 1).then(|| screen(page_no - 1)),
        next_href: (page_no * PAGES_PER_SCREEN < matching.len()).then(|| screen(page_no + 1)),
        filter: filter.clone(),
        page_no,
        csv_series: join(&format!("{base}/series.csv"), &params, &[]),
        csv_pages: join(&format!("{base}/pages.csv"), &params, &[("q", &filter)]),
        freshness: freshness(&state),
        site,
    };
    timed(&state, started);
    Ok(render(StatusCode::OK, &page))
}

// --------------------------------------------------------------- page report

#[derive(Template)]
#[template(path = "page.html")]
struct PageReport {
    nav: Option<Nav>,
    site: Arc<Site>,
    path: String,
    controls: Controls,
    series: SeriesView,
    headline: Headline,
    minute: String,
    minute_label: String,
    seconds: SeriesView,
    realtime: SeriesView,
    current_minute: SeriesView,
    csv_series: String,
    csv_seconds: String,
    csv_realtime: String,
    csv_current: String,
    freshness: String,
}

fn seconds_points(minute: DateTime<Utc>, seconds: &[i64; 60]) -> Vec<Point> {
    seconds
        .iter()
        .enumerate()
        .map(|(s, views)| Point {
            at: minute + TimeDelta::seconds(s as i64),
            views: *views,
        })
        .collect()
}

fn realtime_period(now: DateTime<Utc>) -> Period {
    let to = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
    Period {
        from: to - TimeDelta::minutes(60),
        to,
        resolution: Resolution::Minute,
        preset: None,
    }
}

pub async fn page_report(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, ReportError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let path = q.path()?;
    let page = Page::new(&site.domain, &path);
    let now = state.clock.now();
    let period = Period::resolve(&q.range(), now)?;
    let scope = Scope::Page(&page);
    let this_minute = Resolution::Minute.floor(now);
    let (before, last_hour) = (period.previous(), realtime_period(now));
    let chosen = q.minute()?;
    // The breakdown's minute is either chosen or looked up; either way it
    // runs alongside the other queries rather than before them.
    let breakdown = async {
        let minute = match chosen {
            Some(m) => m,
            None => queries::latest_minute(&state.store, &page, period.to)
                .await?
                .unwrap_or(this_minute),
        };
        let seconds = queries::seconds_of(&state.store, &page, minute).await?;
        Ok::<_, mongodb::error::Error>((minute, seconds))
    };
    let (current, previous, (minute, seconds), realtime, current_seconds) = tokio::try_join!(
        queries::series(&state.store, &scope, &period),
        queries::series(&state.store, &scope, &before),
        breakdown,
        queries::series(&state.store, &scope, &last_hour),
        queries::seconds_of(&state.store, &page, this_minute),
    )?;
    let base = format!("/sites/{}/page", site.id);
    let params = q.range_params();
    let minute_value = fmt::input_minute(&minute);
    let csv =
        |name: &str, extra: &[(&str, &str)]| join(&format!("/sites/{}/{name}", site.id), "", extra);
    let report = PageReport {
        nav: Some(viewer.nav()),
        path: path.as_str().to_owned(),
        controls: controls(&base, &[("path", path.as_str())], &q, &period),
        series: series_view(
            &current,
            period.resolution,
            &format!("Views of {page} by {}", period.resolution.as_str()),
        ),
        headline: Headline::new(&current, &previous),
        minute_label: fmt::utc(&minute),
        seconds: series_view(
            &seconds_points(minute, &seconds),
            Resolution::Minute,
            &format!("Views of {page} in each second of {}", fmt::utc(&minute)),
        ),
        realtime: series_view(
            &realtime,
            Resolution::Minute,
            &format!("Views of {page} in the last 60 minutes"),
        ),
        current_minute: series_view(
            &seconds_points(this_minute, &current_seconds),
            Resolution::Minute,
            &format!("Views of {page} this minute, by second"),
        ),
        csv_series: join(
            &format!("/sites/{}/series.csv", site.id),
            &params,
            &[("path", path.as_str())],
        ),
        csv_seconds: csv(
            "seconds.csv",
            &[("path", path.as_str()), ("minute", &minute_value)],
        ),
        csv_realtime: csv("realtime.csv", &[("path", path.as_str())]),
        csv_current: csv(
            "seconds.csv",
            &[
                ("path", path.as_str()),
                ("minute", &fmt::input_minute(&this_minute)),
            ],
        ),
        minute: minute_value,
        freshness: freshness(&state),
        site,
    };
    timed(&state, started);
    Ok(render(StatusCode::OK, &report))
}

// ----------------------------------------------------------------- settings

#[derive(Template)]
#[template(path = "site_settings.html")]
struct SettingsPage {
    nav: Option<Nav>,
    site: Arc<Site>,
    script: String,
    pixel: String,
    cap: crate::ingest::page_cap::CapStatus,
    overflow_path: &'static str,
}

pub async fn site_settings(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
) -> Result<HttpResponse, ReportError> {
    let site = visible_site(&state, &viewer, &id)?;
    let s = snippets::for_site(&state.public_url, &site.id);
    let cap = state
        .ingest
        .page_cap
        .status(site.domain.as_str(), state.clock.now());
    Ok(render(
        StatusCode::OK,
        &SettingsPage {
            nav: Some(viewer.nav()),
            site,
            script: s.script,
            pixel: s.pixel,
            cap,
            overflow_path: crate::ingest::page_cap::OVERFLOW_PATH,
        },
    ))
}

// ---------------------------------------------------------------------- CSV

fn csv_response(filename: &str, body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{filename}\""),
        ))
        .body(body)
}

fn file_stem(site: &Site) -> String {
    site.domain.as_str().replace('.', "_")
}

/// The series of the dashboard (no `path`) or of a page report (`path`).
pub async fn series_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, ReportError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let period = Period::resolve(&q.range(), state.clock.now())?;
    let points = match &q.path {
        Some(_) => {
            let page = Page::new(&site.domain, &q.path()?);
            queries::series(&state.store, &Scope::Page(&page), &period).await?
        }
        None => queries::series(&state.store, &Scope::Site(&site.domain), &period).await?,
    };
    timed(&state, started);
    Ok(csv_response(
        &format!("{}-{}.csv", file_stem(&site), period.resolution.as_str()),
        csv::series(&points),
    ))
}

pub async fn pages_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, ReportError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let period = Period::resolve(&q.range(), state.clock.now())?;
    let top = queries::top_pages(&state.store, &site.domain, &period).await?;
    let total: i64 = top.iter().map(|(_, v)| v).sum();
    let filter = q.page_filter()?;
    let rows = matching_pages(&top, &filter)
        .into_iter()
        .map(|(page, views)| {
            vec![
                page.path().to_owned(),
                views.to_string(),
                fmt::share(*views, total),
            ]
        });
    let body = csv::table(&["path", "views", "share"], rows);
    timed(&state, started);
    Ok(csv_response(
        &format!("{}-pages.csv", file_stem(&site)),
        body,
    ))
}

pub async fn seconds_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, ReportError> {
    let site = visible_site(&state, &viewer, &id)?;
    let page = Page::new(&site.domain, &q.path()?);
    let minute = q
        .minute()?
        .ok_or_else(|| ReportError::BadRequest("minute is required".into()))?;
    let seconds = queries::seconds_of(&state.store, &page, minute).await?;
    Ok(csv_response(
        &format!("{}-seconds.csv", file_stem(&site)),
        csv::series(&seconds_points(minute, &seconds)),
    ))
}

pub async fn realtime_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, ReportError> {
    let site = visible_site(&state, &viewer, &id)?;
    let page = Page::new(&site.domain, &q.path()?);
    let points = queries::series(
        &state.store,
        &Scope::Page(&page),
        &realtime_period(state.clock.now()),
    )
    .await?;
    Ok(csv_response(
        &format!("{}-last-hour.csv", file_stem(&site)),
        csv::series(&points),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_range_and_encode_values() {
        let q = ReportQuery {
            range: Some("custom".into()),
            from: Some("2026-11-01".into()),
            to: Some("".into()),
            ..Default::default()
        };
        assert_eq!(q.range_params(), "range=custom&from=2026%2D11%2D01");
        assert_eq!(
            join("/x", &q.range_params(), &[("path", "/a b")]),
            "/x?range=custom&from=2026%2D11%2D01&path=%2Fa%20b"
        );
        assert_eq!(join("/x", "", &[]), "/x");
    }
}

//! Report pages and CSV exports for site owners (and admins).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use askama::Template;
use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Instant;

use super::auth::Viewer;
use super::error::{see_other, JsonError, WebError};
use super::fmt;
use super::pages::{render, Nav};
use super::snippets;
use super::state::WebState;
use crate::domain::{Page, PagePath, SiteId};
use crate::reports::period::Preset;
use crate::reports::{
    chart, csv, queries, Period, PeriodError, Point, RangeQuery, Resolution, Scope,
};
use crate::storage::sites::Site;
use crate::storage::Topology;

const PAGES_PER_SCREEN: usize = 25;

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
    /// Dashboard: `1` when reloaded while waiting for a site's first view.
    waiting: Option<String>,
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
    fn page_filter(&self) -> Result<String, WebError> {
        let filter = self.q.as_deref().unwrap_or_default().trim().to_owned();
        if filter.len() > 200 {
            return Err(WebError::Invalid(
                "The page filter is at most 200 characters.".into(),
            ));
        }
        Ok(filter)
    }

    fn path(&self) -> Result<PagePath, WebError> {
        let raw = self.path.as_deref().unwrap_or("/");
        PagePath::parse(raw)
            .map_err(|e| WebError::Invalid(format!("That page cannot be shown: {e}.")))
    }

    fn minute(&self) -> Result<Option<DateTime<Utc>>, WebError> {
        match self.minute.as_deref().filter(|m| !m.is_empty()) {
            None => Ok(None),
            Some(raw) => NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M")
                .map(|t| Some(t.and_utc()))
                .map_err(|_| {
                    WebError::Invalid(
                        "The minute must be a UTC date and time (YYYY-MM-DDTHH:MM).".into(),
                    )
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
fn visible_site(state: &WebState, viewer: &Viewer, id: &str) -> Result<Arc<Site>, WebError> {
    let id = SiteId::parse(id).map_err(|_| WebError::NotFound)?;
    let site = state.directory.by_id(&id).ok_or(WebError::NotFound)?;
    if viewer.can_see(&site) {
        Ok(site)
    } else {
        Err(WebError::NotFound)
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
    let has_secondaries = match state.store.topology() {
        Topology::Standalone => false,
        Topology::ReplicaSet { members, .. } => *members > 1,
        Topology::Sharded => true,
    };
    // Plain words for site owners; the admin system page names the setting.
    if matches!(pref, ReadPreference::Primary) || !has_secondaries {
        "These figures include every view stored so far.".to_owned()
    } else if let Some(s) = staleness {
        format!(
            "These figures come from a copy of the database and may be up to {} seconds behind.",
            s.as_secs()
        )
    } else {
        "These figures come from a copy of the database and may miss views of the last second or so.".to_owned()
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
    /// A refused range: the message, and the field it is about.
    pub error: Option<String>,
    pub error_field: &'static str,
}

/// The period the query asks for; a refused one falls back to the default
/// range, with the reason kept for the form (the page still shows).
fn resolve_or_default(q: &ReportQuery, now: DateTime<Utc>) -> (Period, Option<PeriodError>) {
    match Period::resolve(&q.range(), now) {
        Ok(p) => (p, None),
        Err(e) => (
            Period::resolve(&RangeQuery::default(), now).expect("the default range is valid"),
            Some(e),
        ),
    }
}

fn controls(
    action: &str,
    hidden: &[(&str, &str)],
    q: &ReportQuery,
    period: &Period,
    error: Option<&PeriodError>,
) -> Controls {
    let hidden_params: Vec<(&str, &str)> = hidden.to_vec();
    let kept = |v: &Option<String>| v.clone().unwrap_or_default();
    Controls {
        action: action.to_owned(),
        hidden: hidden
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        range_hidden: if error.is_some() {
            Vec::new()
        } else {
            [
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
            .collect()
        },
        presets: Preset::ALL
            .iter()
            .map(|p| {
                let mut extra = hidden_params.clone();
                extra.insert(0, ("range", p.key()));
                (
                    p.label().to_owned(),
                    join(action, "", &extra),
                    error.is_none() && period.preset == Some(*p),
                )
            })
            .collect(),
        custom: error.is_some() || period.preset.is_none(),
        // A refused range is shown as typed, to be corrected.
        from: if error.is_some() {
            kept(&q.from)
        } else {
            fmt::input_minute(&period.from)
        },
        to: if error.is_some() {
            kept(&q.to)
        } else {
            fmt::input_minute(&period.to)
        },
        res: q
            .res
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "auto".into()),
        summary: format!(
            "{} to {}, {} by {}",
            fmt::utc(&period.from),
            fmt::utc(&period.to),
            fmt::plural(&period.point_count(), "point"),
            period.resolution.as_str()
        ),
        error: error.map(|e| e.to_string()),
        error_field: error.map_or("", PeriodError::field),
    }
}

/// A series as its chart and its table.
pub struct SeriesView {
    /// Prefix of the ids in the chart and its table, unique on the page.
    pub id: String,
    pub chart: String,
    /// Label, views, whether the bucket covers only part of its time.
    pub rows: Vec<(String, i64, bool)>,
    pub total: i64,
}

fn series_view(
    id: &str,
    points: &[Point],
    unit: chart::Unit,
    title: &str,
    partial: impl Fn(DateTime<Utc>) -> bool,
) -> SeriesView {
    let bars: Vec<chart::Bar> = points
        .iter()
        .map(|p| chart::Bar {
            at: p.at,
            views: p.views,
            partial: partial(p.at),
        })
        .collect();
    SeriesView {
        id: id.to_owned(),
        chart: chart::bars(&bars, unit, title, id),
        rows: bars
            .iter()
            .map(|b| (chart::label(b.at, unit), b.views, b.partial))
            .collect(),
        total: queries::total(points),
    }
}

/// The series of a period: bars still counting or cut by the range's
/// edges are marked partial.
fn period_view(
    id: &str,
    period: &Period,
    read: &[Point],
    now: DateTime<Utc>,
    title: &str,
) -> SeriesView {
    series_view(
        id,
        &queries::rollup(period, read),
        period.resolution.into(),
        title,
        |at| period.is_partial(at, now),
    )
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
    /// This viewer may add a site.
    can_add: bool,
}

pub async fn sites(state: web::Data<WebState>, viewer: Viewer) -> Result<HttpResponse, WebError> {
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
                &format!(
                    "{}: views per day, last 30 days (today still counting)",
                    site.name
                ),
                true,
            ),
        })
        .collect();
    let page = SitesPage {
        nav: Some(viewer.nav()),
        rows,
        can_add: viewer.user.is_admin() || state.owners_add_sites,
    };
    timed(&state, started);
    Ok(render(StatusCode::OK, &page))
}

// ----------------------------------------------------------------- dashboard

pub struct PageRow {
    pub path: String,
    pub views: i64,
    /// Share of the period's total, in percent.
    pub share: String,
    pub href: String,
}

/// What a site's dashboard says when the period has no views.
pub enum Empty {
    /// Views were shown: nothing to say.
    No,
    /// The site has never had a view: how to start.
    NeverSeen,
    /// This period has none, others do.
    Period,
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
    pages_count: i64,
    filter: String,
    page_no: usize,
    page_count: usize,
    prev_href: Option<String>,
    next_href: Option<String>,
    csv_series: String,
    csv_pages: String,
    freshness: String,
    empty: Empty,
    /// The first view arrived while the owner was waiting for it.
    first_view: bool,
    snippet: String,
    /// Where the waiting page asks, and where it goes once the first view
    /// has arrived.
    status_href: String,
    refresh_href: String,
}

/// The period's total against the previous period's, shown atop the
/// dashboard and the page report (`partials/headline.html`).
///
/// Like is compared with like: while the period's last bucket is still
/// counting, the change covers only its complete buckets and the same
/// stretch of the previous period (e.g. 23 complete hours of "last 24
/// hours" against the first 23 hours of the 24 before).
struct Headline {
    previous: i64,
    change: String,
    /// CSS class: `up`, `down`, or empty when equal.
    class: &'static str,
    /// What the previous figure covers, in words.
    basis: String,
}

impl Headline {
    fn new(period: &Period, current: &[Point], previous: &[Point], now: DateTime<Utc>) -> Self {
        let cut = period.complete_until(now);
        let (total, previous) = if cut < period.to {
            let offset = period.span();
            (
                current.iter().filter(|p| p.at < cut).map(|p| p.views).sum(),
                previous
                    .iter()
                    .filter(|p| p.at + offset < cut)
                    .map(|p| p.views)
                    .sum(),
            )
        } else {
            (queries::total(current), queries::total(previous))
        };
        let basis = if cut >= period.to {
            "in the previous period".to_owned()
        } else if cut <= period.from {
            format!(
                "(no complete {} in this period yet, so no change to show)",
                period.read.as_str()
            )
        } else {
            format!(
                "in the same {} of the previous period (the current {} is still counting and left out of the change; {} views so far in the complete part)",
                fmt::duration(cut - period.from),
                period.read.as_str(),
                fmt::thousands(&total)
            )
        };
        Headline {
            previous,
            change: if cut <= period.from && cut < period.to {
                "—".to_owned()
            } else {
                fmt::change(total, previous)
            },
            class: match total.cmp(&previous) {
                std::cmp::Ordering::Greater => "up",
                std::cmp::Ordering::Less => "down",
                std::cmp::Ordering::Equal => "",
            },
            basis,
        }
    }
}

/// Says whether any view of a site was ever stored (day buckets, which
/// every view reaches).
async fn ever_seen(state: &WebState, site: &Site) -> Result<bool, WebError> {
    Ok(queries::has_views(&state.store, &Scope::Site(&site.domain)).await?)
}

pub async fn dashboard(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, WebError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let now = state.clock.now();
    let (period, range_error) = resolve_or_default(&q, now);
    let scope = Scope::Site(&site.domain);
    let before = period.previous();
    let ((current, top), previous) = tokio::try_join!(
        queries::site_overview(&state.store, &site.domain, &period),
        queries::read_series(&state.store, &scope, &before),
    )?;
    let filter = q.page_filter()?;
    let page_no: usize = match q.p.as_deref().filter(|p| !p.is_empty()) {
        None => 1,
        Some(raw) => raw
            .parse()
            .ok()
            .filter(|n| *n >= 1 && *n <= 100_000)
            .ok_or_else(|| {
                WebError::Invalid("The list page must be a whole number from 1.".into())
            })?,
    };
    let total = queries::total(&current);
    let base = format!("/sites/{}", site.id);
    let params = if range_error.is_some() {
        String::new()
    } else {
        q.range_params()
    };
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
    let empty = if total > 0 {
        Empty::No
    } else if ever_seen(&state, &site).await? {
        Empty::Period
    } else {
        Empty::NeverSeen
    };
    let waiting = matches!(empty, Empty::NeverSeen);
    let hidden: Vec<(&str, &str)> = if filter.is_empty() {
        vec![]
    } else {
        vec![("q", filter.as_str())]
    };
    let status = if range_error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let page = DashboardPage {
        nav: Some(viewer.nav()),
        controls: controls(&base, &hidden, &q, &period, range_error.as_ref()),
        series: period_view(
            "series",
            &period,
            &current,
            now,
            &format!("Views of {} by {}", site.domain, period.resolution.as_str()),
        ),
        headline: Headline::new(&period, &current, &previous, now),
        pages_count: matching.len() as i64,
        page_count: matching.len().div_ceil(PAGES_PER_SCREEN).max(1),
        pages,
        prev_href: (page_no > 1).then(|| screen(page_no - 1)),
        next_href: (page_no * PAGES_PER_SCREEN < matching.len()).then(|| screen(page_no + 1)),
        filter: filter.clone(),
        page_no,
        csv_series: join(&format!("{base}/series.csv"), &params, &[]),
        csv_pages: join(&format!("{base}/pages.csv"), &params, &[("q", &filter)]),
        freshness: freshness(&state),
        first_view: q.waiting.as_deref() == Some("1") && !waiting,
        snippet: snippets::for_site(&state.public_url, &site.id).script,
        status_href: format!("{base}/status.json"),
        refresh_href: join(&base, &params, &[("waiting", "1")]),
        empty,
        site,
    };
    timed(&state, started);
    Ok(render(status, &page))
}

/// `GET /sites/<id>/status.json`: `{"seen": true}` once the site has had a
/// view (polled by the waiting dashboard). JSON errors, 401 without a
/// session.
pub async fn status_json(
    state: web::Data<WebState>,
    viewer: Result<Viewer, WebError>,
    id: web::Path<String>,
) -> Result<HttpResponse, JsonError> {
    let site = visible_site(&state, &viewer?, &id)?;
    let seen = ever_seen(&state, &site).await?;
    Ok(HttpResponse::Ok()
        .insert_header(super::pages::no_store())
        .json(serde_json::json!({ "seen": seen })))
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
    /// The site's dashboard, in the same range.
    back_href: String,
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
    Period::aligned(to - TimeDelta::minutes(60), to, Resolution::Minute)
}

pub async fn page_report(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, WebError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let path = q.path()?;
    let page = Page::new(&site.domain, &path);
    let now = state.clock.now();
    let (period, range_error) = resolve_or_default(&q, now);
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
        queries::read_series(&state.store, &scope, &period),
        queries::read_series(&state.store, &scope, &before),
        breakdown,
        queries::read_series(&state.store, &scope, &last_hour),
        queries::seconds_of(&state.store, &page, this_minute),
    )?;
    let base = format!("/sites/{}/page", site.id);
    let params = if range_error.is_some() {
        String::new()
    } else {
        q.range_params()
    };
    let minute_value = fmt::input_minute(&minute);
    let csv =
        |name: &str, extra: &[(&str, &str)]| join(&format!("/sites/{}/{name}", site.id), "", extra);
    // A second still to come (or running) in the current minute.
    let second_partial = |at: DateTime<Utc>| at + TimeDelta::seconds(1) > now;
    let status = if range_error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let report = PageReport {
        nav: Some(viewer.nav()),
        path: path.as_str().to_owned(),
        controls: controls(
            &base,
            &[("path", path.as_str())],
            &q,
            &period,
            range_error.as_ref(),
        ),
        series: period_view(
            "series",
            &period,
            &current,
            now,
            &format!("Views of {page} by {}", period.resolution.as_str()),
        ),
        headline: Headline::new(&period, &current, &previous, now),
        minute_label: fmt::utc(&minute),
        seconds: series_view(
            "seconds",
            &seconds_points(minute, &seconds),
            chart::Unit::Second,
            &format!("Views of {page} in each second of {}", fmt::utc(&minute)),
            second_partial,
        ),
        realtime: period_view(
            "realtime",
            &last_hour,
            &realtime,
            now,
            &format!("Views of {page} in the last 60 minutes"),
        ),
        current_minute: series_view(
            "this-minute",
            &seconds_points(this_minute, &current_seconds),
            chart::Unit::Second,
            &format!("Views of {page} this minute, by second"),
            second_partial,
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
        back_href: join(&format!("/sites/{}", site.id), &params, &[]),
        minute: minute_value,
        freshness: freshness(&state),
        site,
    };
    timed(&state, started);
    Ok(render(status, &report))
}

// ----------------------------------------------------------------- settings

#[derive(Template)]
#[template(path = "site_settings.html")]
struct SettingsPage {
    nav: Option<Nav>,
    site: Arc<Site>,
    script: String,
    pixel: String,
    /// What the confirmation says (`?done=site-added` or `site-saved`).
    done: Option<&'static str>,
    /// The name and aliases as typed, and what was wrong with them.
    name: String,
    aliases: String,
    error: Option<super::admin::FormError>,
    /// The new-page cap and this hour's figures (issue 13).
    cap: crate::ingest::page_cap::CapStatus,
    overflow_path: &'static str,
}

#[derive(Deserialize)]
pub struct SettingsQuery {
    done: Option<String>,
}

fn aliases_text(site: &Site) -> String {
    site.aliases
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn settings_page(
    state: &WebState,
    viewer: &Viewer,
    site: Arc<Site>,
    done: Option<&'static str>,
    typed: Option<(String, String, super::admin::FormError)>,
) -> HttpResponse {
    let s = snippets::for_site(&state.public_url, &site.id);
    let cap = state
        .ingest
        .page_cap
        .status(site.domain.as_str(), state.clock.now());
    let (name, aliases, error, status) = match typed {
        Some((name, aliases, error)) => (name, aliases, Some(error), StatusCode::BAD_REQUEST),
        None => (site.name.clone(), aliases_text(&site), None, StatusCode::OK),
    };
    render(
        status,
        &SettingsPage {
            nav: Some(viewer.nav()),
            site,
            script: s.script,
            pixel: s.pixel,
            done,
            name,
            aliases,
            error,
            cap,
            overflow_path: crate::ingest::page_cap::OVERFLOW_PATH,
        },
    )
}

pub async fn site_settings(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<SettingsQuery>,
) -> Result<HttpResponse, WebError> {
    let site = visible_site(&state, &viewer, &id)?;
    let done = match q.done.as_deref() {
        Some("site-added") => Some("The site was added. Embed one of these snippets; its dashboard then shows the views as they arrive."),
        Some("site-saved") => Some("The site was saved."),
        _ => None,
    };
    Ok(settings_page(&state, &viewer, site, done, None))
}

#[derive(Deserialize)]
pub struct SiteSettingsForm {
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    aliases: String,
}

/// An owner (or admin) renames their site or changes its aliases; the
/// owners stay as they are (admins change them under Admin).
pub async fn save_site_settings(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    form: web::Form<SiteSettingsForm>,
) -> Result<HttpResponse, WebError> {
    viewer.check_csrf(&form.csrf)?;
    let site = visible_site(&state, &viewer, &id)?;
    let again = |error: super::admin::FormError| {
        settings_page(
            &state,
            &viewer,
            site.clone(),
            None,
            Some((form.name.clone(), form.aliases.clone(), error)),
        )
    };
    let aliases = match super::admin::parse_hosts(&form.aliases) {
        Ok(a) => a,
        Err(e) => return Ok(again(e)),
    };
    let changes = crate::storage::sites::SiteChanges {
        name: form.name.clone(),
        aliases,
        owners: site.owners.clone(),
    };
    use crate::storage::sites::SiteError;
    match crate::storage::sites::update(&state.store, &site, changes).await {
        Ok(_) => {}
        Err(SiteError::Database(e)) => return Err(e.into()),
        Err(e @ SiteError::NameTooLong) => {
            return Ok(again(super::admin::FormError::new("name", e)))
        }
        Err(e) => return Ok(again(super::admin::FormError::new("aliases", e))),
    }
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, "site settings saved");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=site-saved",
        site.id
    )))
}

#[derive(Template)]
#[template(path = "site_new.html")]
struct NewSitePage {
    nav: Option<Nav>,
    domain: String,
    name: String,
    error: Option<super::admin::FormError>,
}

fn may_add_sites(state: &WebState, viewer: &Viewer) -> Result<(), WebError> {
    if viewer.user.is_admin() || state.owners_add_sites {
        Ok(())
    } else {
        Err(WebError::Forbidden)
    }
}

pub async fn new_site_form(
    state: web::Data<WebState>,
    viewer: Viewer,
) -> Result<HttpResponse, WebError> {
    may_add_sites(&state, &viewer)?;
    Ok(render(
        StatusCode::OK,
        &NewSitePage {
            nav: Some(viewer.nav()),
            domain: String::new(),
            name: String::new(),
            error: None,
        },
    ))
}

#[derive(Deserialize)]
pub struct NewSiteForm {
    csrf: String,
    domain: String,
    #[serde(default)]
    name: String,
}

/// An owner adds a site of their own, when the operator allows it.
pub async fn add_site(
    state: web::Data<WebState>,
    viewer: Viewer,
    form: web::Form<NewSiteForm>,
) -> Result<HttpResponse, WebError> {
    viewer.check_csrf(&form.csrf)?;
    may_add_sites(&state, &viewer)?;
    let again = |error: super::admin::FormError| {
        render(
            StatusCode::BAD_REQUEST,
            &NewSitePage {
                nav: Some(viewer.nav()),
                domain: form.domain.clone(),
                name: form.name.clone(),
                error: Some(error),
            },
        )
    };
    let domain = match crate::domain::DomainName::from_input(&form.domain) {
        Ok(d) => d,
        Err(e) => return Ok(again(super::admin::FormError::new("domain", e))),
    };
    let new = crate::storage::sites::NewSite {
        domain,
        aliases: vec![],
        name: Some(form.name.trim().to_owned()).filter(|n| !n.is_empty()),
        owners: vec![viewer.user.id],
    };
    use crate::storage::sites::SiteError;
    let site = match crate::storage::sites::insert(&state.store, new, state.clock.now()).await {
        Ok(site) => site,
        Err(SiteError::Database(e)) => return Err(e.into()),
        Err(e @ SiteError::NameTooLong) => {
            return Ok(again(super::admin::FormError::new("name", e)))
        }
        Err(e) => return Ok(again(super::admin::FormError::new("domain", e))),
    };
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, "site added by its owner");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=site-added",
        site.id
    )))
}

// ---------------------------------------------------------------------- CSV

fn csv_response(filename: &str, body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header(super::pages::no_store())
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{filename}\""),
        ))
        .body(body)
}

/// A file name part from free text: letters and digits kept, anything
/// else one `-`, at most 80 characters.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    out.chars().take(80).collect()
}

/// `<domain>[_<page>]_<from>_<to>[_<resolution>]`, e.g.
/// `example_com_blog-hello_2026-11-21T1100_2026-11-22T1100_hour`: the file
/// says what it holds once downloaded.
fn file_stem(
    site: &Site,
    path: Option<&PagePath>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> String {
    let mut stem = site.domain.as_str().replace('.', "_");
    if let Some(path) = path {
        let page = slug(path.as_str());
        stem.push('_');
        stem.push_str(if page.is_empty() { "home" } else { &page });
    }
    stem.push_str(&format!(
        "_{}_{}",
        from.format("%Y-%m-%dT%H%M"),
        to.format("%Y-%m-%dT%H%M")
    ));
    stem
}

/// The series of the dashboard (no `path`) or of a page report (`path`).
pub async fn series_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, WebError> {
    let started = Instant::now();
    let site = visible_site(&state, &viewer, &id)?;
    let period = Period::resolve(&q.range(), state.clock.now())?;
    let path = q.path.as_ref().map(|_| q.path()).transpose()?;
    let points = match &path {
        Some(path) => {
            let page = Page::new(&site.domain, path);
            queries::series(&state.store, &Scope::Page(&page), &period).await?
        }
        None => queries::series(&state.store, &Scope::Site(&site.domain), &period).await?,
    };
    timed(&state, started);
    Ok(csv_response(
        &format!(
            "{}_{}.csv",
            file_stem(&site, path.as_ref(), period.from, period.to),
            period.resolution.as_str()
        ),
        csv::series(&points),
    ))
}

pub async fn pages_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, WebError> {
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
                fmt::percent(*views, total),
            ]
        });
    let body = csv::table(&["path", "views", "share_percent"], rows);
    timed(&state, started);
    Ok(csv_response(
        &format!(
            "{}_pages.csv",
            file_stem(&site, None, period.from, period.to)
        ),
        body,
    ))
}

pub async fn seconds_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, WebError> {
    let site = visible_site(&state, &viewer, &id)?;
    let path = q.path()?;
    let page = Page::new(&site.domain, &path);
    let minute = q
        .minute()?
        .ok_or_else(|| WebError::Invalid("Choose a minute (YYYY-MM-DDTHH:MM, UTC).".into()))?;
    let seconds = queries::seconds_of(&state.store, &page, minute).await?;
    let minute = Resolution::Minute.floor(minute);
    Ok(csv_response(
        &format!(
            "{}_seconds.csv",
            file_stem(&site, Some(&path), minute, minute + TimeDelta::minutes(1))
        ),
        csv::series(&seconds_points(minute, &seconds)),
    ))
}

pub async fn realtime_csv(
    state: web::Data<WebState>,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Result<HttpResponse, WebError> {
    let site = visible_site(&state, &viewer, &id)?;
    let path = q.path()?;
    let page = Page::new(&site.domain, &path);
    let period = realtime_period(state.clock.now());
    let points = queries::series(&state.store, &Scope::Page(&page), &period).await?;
    Ok(csv_response(
        &format!(
            "{}_minute.csv",
            file_stem(&site, Some(&path), period.from, period.to)
        ),
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
        assert_eq!(slug("/Blog/Hello World.html"), "blog-hello-world-html");
        assert_eq!(slug("/"), "");
    }

    #[test]
    fn the_change_compares_the_same_complete_stretch() {
        use chrono::TimeZone;
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap();
        let q = RangeQuery {
            range: Some("24h".into()),
            ..Default::default()
        };
        let period = Period::resolve(&q, now).unwrap();
        let points = |p: &Period, views: &dyn Fn(usize) -> i64| -> Vec<Point> {
            p.read_points()
                .enumerate()
                .map(|(i, at)| Point {
                    at,
                    views: views(i),
                })
                .collect()
        };
        // 10 a complete hour now; the running hour has 500 so far. The
        // previous 24 hours: 5 an hour, and 1,000 in their last hour.
        let current = points(&period, &|i| if i == 23 { 500 } else { 10 });
        let previous = points(&period.previous(), &|i| if i == 23 { 1000 } else { 5 });
        let h = Headline::new(&period, &current, &previous, now);
        assert_eq!((h.previous, h.change.as_str()), (115, "+100.0%"));
        assert!(h
            .basis
            .starts_with("in the same 23 hours of the previous period"));
        // Once the period is over, all of both count.
        let later = period.to + TimeDelta::hours(1);
        let h = Headline::new(&period, &current, &previous, later);
        assert_eq!((h.previous, h.change.as_str()), (1115, "−34.5%"));
        assert_eq!(h.basis, "in the previous period");
        // Before its first bucket is complete there is nothing to compare.
        let h = Headline::new(&period, &current, &previous, period.from);
        assert_eq!(h.change, "—");
    }
}

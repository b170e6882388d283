//! A site's dashboard: its first line with the changes, its chart, and its
//! top pages.

use actix_web::HttpResponse;
use askama::Template;
use std::sync::Arc;

use super::*;
use crate::reports::request::ReportRequest;
use crate::reports::{compared, notes, queries, Scope};
use crate::storage::sites::Site;
use crate::web::error::{JsonError, WebError};
use crate::web::fmt;
use crate::web::pages::{render, Nav};
use crate::web::snippets;
use crate::web::state::WebState;

pub(super) const PAGES_PER_SCREEN: usize = 25;

pub struct PageRow {
    pub path: String,
    /// The link that filters the dashboard by visits that viewed it.
    pub filter_href: Option<String>,
    pub views: i64,
    /// Unique visitors ("—" where unknown), visits that entered on the
    /// page, visits that left from it.
    pub visitors: String,
    pub entries: i64,
    pub exits: i64,
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
pub(super) struct DashboardPage {
    nav: Option<Nav>,
    /// The active filters (none here: a filtered dashboard is its own
    /// page) and where the site's funnels are.
    chips: super::shared::FilterChips,
    funnels_href: Option<String>,
    /// Through a share link (no tracking code, settings or exports).
    shared: bool,
    base: String,
    site: Arc<Site>,
    controls: Controls,
    chart: super::visit_line::ChartView,
    visits: super::visit_line::VisitLine,
    pages: Vec<PageRow>,
    pages_count: i64,
    filter: String,
    page_no: usize,
    page_count: usize,
    prev_href: Option<String>,
    next_href: Option<String>,
    csv_series: String,
    csv_pages: String,
    sources: super::sources::SourcesView,
    breakdowns: super::shared::BreakdownsView,
    goals: super::goals::GoalsView,
    sources_action: String,
    sources_hidden: Vec<(&'static str, String)>,
    freshness: String,
    /// How far behind the write-behind is, when more than a few seconds.
    behind: Option<String>,
    /// More than 1 % of the range's views are under the overflow page:
    /// the note, and where the cap is set (signed-in views only).
    overflow: Option<(String, Option<String>)>,
    empty: Empty,
    /// The first view arrived while the owner was waiting for it.
    first_view: bool,
    snippet: String,
    /// Why the snippets cannot count visitors' views, if they cannot.
    url_warning: Option<String>,
    /// Views of the last few minutes, and where the page asks for them
    /// again (none through a share link, which has no session to ask with).
    now_views: i64,
    now_href: Option<String>,
    /// Where the waiting page asks, and where it goes once the first view
    /// has arrived.
    status_href: String,
    refresh_href: String,
}

/// Says whether any view of a site was ever stored (day buckets, which
/// every view reaches).
pub(super) async fn ever_seen(state: &WebState, site: &Site) -> Result<bool, WebError> {
    Ok(queries::has_views(&state.store, &Scope::of_site(site)).await?)
}

/// When more than 1 % of a range's views went to the overflow page (new
/// pages beyond the cap), the note that says so.
fn overflow_note(
    site: &Site,
    top: &[(crate::domain::Page, i64)],
    total: i64,
    shared: bool,
) -> Option<(String, Option<String>)> {
    let path = crate::ingest::page_cap::OVERFLOW_PATH;
    let under: i64 = top
        .iter()
        .filter(|(page, _)| page.path() == path)
        .map(|(_, views)| views)
        .sum();
    (total > 0 && under * 100 > total).then(|| {
        (
            format!(
                "{} of these views ({}) are counted under {path}: pages that were new while the site's new-page cap was reached, before they were viewed again.",
                fmt::thousands(&under),
                fmt::share(under, total)
            ),
            (!shared).then(|| format!("/sites/{}/settings#page-cap", site.id)),
        )
    })
}

pub async fn dashboard(r: SiteRequest, q: Query) -> Answer {
    let audience = Audience::signed_in(&r);
    show_dashboard(&r.state, &q, r.site, audience).await
}

/// The dashboard of `site` as `audience` sees it (signed in, or through a
/// share link). A long range of a site whose totals are still being built
/// says what is being prepared instead of failing.
pub async fn show_dashboard(
    state: &WebState,
    q: &ReportQuery,
    site: Arc<Site>,
    audience: Audience,
) -> Answer {
    let of = site.clone();
    dashboard_of(state, q, site, audience)
        .await
        .map_err(|e| e.unless_preparing(&of))
}

async fn dashboard_of(
    state: &WebState,
    q: &ReportQuery,
    site: Arc<Site>,
    audience: Audience,
) -> Answer {
    // Filtered: every figure from the visit store.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered::dashboard(state, q, site, audience, filters, None).await;
    }
    let started = audience.started;
    let now = state.clock.now();
    let (period, range_error, coarsened) =
        resolve_or_default(q, now, &state.retention, site.time_zone.tz());
    let scope = Scope::of_site(&site);
    let before = period.previous();
    let source_filter = q.source_filter()?;
    let metric = q.chart_metric()?;
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
    let params = if range_error.is_some() {
        String::new()
    } else {
        q.range_params()
    };
    let source_scope = crate::reports::sources::SourceScope::Site(&site);
    let goal_events = super::goals::event_names(&site);
    let request = ReportRequest::new(&state.store, source_scope, &period, now);
    // The sources come with the other breakdowns, in one pass.
    // The visit line's counters need no views: they are read beside them.
    let ((current, top), previous, breakdowns, now_views, line) = tokio::try_join!(
        queries::site_overview(&state.store, &scope, &period),
        queries::read_series(&state.store, &scope, &before),
        compared::breakdowns(&request, &goal_events),
        queries::views_now(&state.store, &scope, now),
        super::visit_line::read_line(state, &scope, &period, now),
    )?;
    // The pages with entries or exits and no views follow, as in `pages.csv`.
    let (top, _) = crate::reports::visits::listed_pages(&state.store, &site, &period, top).await?;
    let source_buckets = compared::sources_of(&breakdowns, &period);
    let chart = super::visit_line::chart_view(
        &state.store,
        &scope,
        &period,
        metric,
        &current,
        now,
        site.domain.as_str(),
        false,
        |m| {
            join(
                &audience.base,
                &params,
                &[("metric", m.key()), ("q", q.q.as_deref().unwrap_or(""))],
            )
        },
    );
    let sources = compared::source_shares(
        &request,
        source_buckets,
        Some((queries::total(&current), queries::total(&previous))),
    );
    let goals = super::goals::view(
        state,
        &site,
        &period,
        (&breakdowns.now, &breakdowns.before),
        (!audience.shared).then(|| format!("/sites/{}/settings#goals", site.id)),
        audience.export(join(&format!("{}/goals.csv", audience.base), &params, &[])),
        |path| {
            join(
                &format!("{}/page", audience.base),
                &params,
                &[("path", path)],
            )
        },
    );
    let total = queries::total(&current);
    let matching = matching_pages(&top, &filter);
    let shown: Vec<&(crate::domain::Page, i64)> = matching
        .iter()
        .skip((page_no - 1) * PAGES_PER_SCREEN)
        .take(PAGES_PER_SCREEN)
        .copied()
        .collect();
    // The shown rows' visit figures: whole days from the kept page-days,
    // the rest one read of these pages' buckets, not a scan of the site.
    // They need only the top pages, so they are read beside the panels
    // rather than after them (a request waits for its slowest stage).
    let names: Vec<&crate::domain::Page> = shown.iter().map(|(page, _)| page).collect();
    let figures = crate::reports::visits::page_rows(&state.store, &scope, &names, &period, now);
    let mut visits = line.line(&current, &previous);
    let (chart, sources_read, goals, figures) = tokio::try_join!(chart, sources, goals, figures)?;
    visits.basis = change_basis(&period, &current, now, &state.retention);
    visits.csv = audience.export(join(&format!("{}/visits.csv", audience.base), &params, &[]));
    let overflow = overflow_note(&site, &top, total, audience.shared);
    let base = audience.base.clone();
    let pages = shown
        .into_iter()
        .zip(figures)
        .map(|((page, views), f)| PageRow {
            filter_href: q.add_filter_link(
                &base,
                crate::domain::FilterDimension::Page,
                page.path(),
            ),
            path: page.path().to_owned(),
            views: *views,
            visitors: f
                .visitors
                .map_or_else(|| "—".to_owned(), |v| fmt::thousands(&v)),
            entries: f.visits,
            exits: f.exits.unwrap_or(0),
            share: fmt::share(*views, total),
            href: join(&format!("{base}/page"), &params, &[("path", page.path())]),
        })
        .collect();
    let screen = |n: usize| join(&base, &params, &[("q", &filter), ("p", &n.to_string())]);
    // A shared view never shows the tracking code, so it never waits.
    let empty = if total > 0 {
        Empty::No
    } else if audience.shared || ever_seen(state, &site).await? {
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
    let status = status_of(range_error.as_ref());
    let add = |d: crate::domain::FilterDimension, value: &str| q.add_filter_link(&base, d, value);
    let mut breakdowns_view =
        super::breakdowns::view(state, &breakdowns, &period, sources_read.now.views, |d| {
            audience.export(join(
                &format!("{base}/breakdown.csv"),
                &params,
                &[("dimension", d.key())],
            ))
        });
    breakdowns_view.link_rows(|d, v| add(crate::domain::FilterDimension::of_breakdown(d), v));
    let mut sources_view = super::sources::view(
        &sources_read,
        &period,
        source_filter.clone(),
        audience.export(join(
            &format!("{base}/sources.csv"),
            &params,
            &[("src", &source_filter)],
        )),
    );
    for row in &mut sources_view.rows {
        row.href = add(crate::domain::FilterDimension::Source, &row.name);
    }
    let chips = super::shared::FilterChips::of(q, &base, &filters);
    let page = DashboardPage {
        chips,
        funnels_href: Some(join(&format!("{base}/funnels"), &params, &[])),
        nav: audience.nav.clone(),
        shared: audience.shared,
        base: base.clone(),
        controls: Controls {
            coarsened: coarsened.map(|c| c.to_string()),
            daily_only: notes::daily_only_note(&state.store, &site, &period).await?,
            ..controls(&base, &hidden, q, &period, range_error.as_ref())
        },
        visits,
        chart,
        pages_count: matching.len() as i64,
        page_count: matching.len().div_ceil(PAGES_PER_SCREEN).max(1),
        pages,
        prev_href: (page_no > 1).then(|| screen(page_no - 1)),
        next_href: (page_no * PAGES_PER_SCREEN < matching.len()).then(|| screen(page_no + 1)),
        filter: filter.clone(),
        page_no,
        csv_series: audience.export(join(&format!("{base}/series.csv"), &params, &[])),
        csv_pages: audience.export(join(
            &format!("{base}/pages.csv"),
            &params,
            &[("q", &filter)],
        )),
        sources: sources_view,
        breakdowns: breakdowns_view,
        goals,
        sources_action: base.clone(),
        sources_hidden: if filter.is_empty() {
            vec![]
        } else {
            vec![("q", filter.clone())]
        },
        freshness: freshness(state),
        behind: behind(state),
        overflow,
        first_view: q.waiting.as_deref() == Some("1") && !waiting,
        snippet: snippets::for_site(&state.public_url, &site.id).script,
        url_warning: snippets::url_warning(&state.public_url),
        now_views,
        now_href: (!audience.shared).then(|| format!("{base}/now.json")),
        status_href: format!("{base}/status.json"),
        refresh_href: join(&base, &params, &[("waiting", "1")]),
        empty,
        site,
    };
    timed(state, started);
    Ok(render(status, &page))
}

/// `GET /sites/<id>/now.json`: `{"views": n, "minutes": 5}`, the views of
/// the last five minutes (polled by the dashboard's "right now" figure).
/// JSON errors, 401 without a session.
pub async fn now_json(r: Result<SiteRequest, WebError>) -> Result<HttpResponse, JsonError> {
    let r = r?;
    let now = r.state.clock.now();
    let views = queries::views_now(&r.state.store, &Scope::of_site(&r.site), now).await?;
    Ok(HttpResponse::Ok()
        .insert_header(crate::web::pages::no_store())
        .json(serde_json::json!({ "views": views, "minutes": queries::NOW_MINUTES })))
}

/// `GET /sites/<id>/status.json`: `{"seen": true}` once the site has had a
/// view (polled by the waiting dashboard). JSON errors, 401 without a
/// session.
pub async fn status_json(r: Result<SiteRequest, WebError>) -> Result<HttpResponse, JsonError> {
    let r = r?;
    let (state, site) = (r.state, r.site);
    let seen = ever_seen(&state, &site).await?;
    Ok(HttpResponse::Ok()
        .insert_header(crate::web::pages::no_store())
        .json(serde_json::json!({ "seen": seen })))
}

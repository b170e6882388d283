//! A site's dashboard: its first line with the changes, its chart, and its
//! top pages.

use actix_web::HttpResponse;
use askama::Template;
use std::sync::Arc;

use super::*;
use crate::domain::FilterDimension;
use crate::reports::engine::Report;
use crate::reports::request::ReportRequest;
use crate::reports::{notes, queries, Scope};
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
    /// The links that filter by visits that entered or left there.
    pub entry_href: Option<String>,
    pub exit_href: Option<String>,
    pub views: i64,
    /// Unique visitors ("—" where unknown), visits that entered on the
    /// page, visits that left from it.
    pub visitors: String,
    pub entries: i64,
    pub exits: i64,
    /// Mean time on page ("—" without a timed view or under a filter),
    /// and what it is measured by, said on hover.
    pub time_on_page: String,
    pub time_kind: &'static str,
    /// Mean of each engaged view's greatest scroll depth ("—" without one).
    pub scroll_depth: String,
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
    /// The active filters and where the site's funnels are.
    chips: super::shared::FilterChips,
    /// With filters: what the filtered figures count, sampled, imported.
    notes: Vec<String>,
    funnels_href: Option<String>,
    /// The custom properties' page, with the range and the filters.
    properties_href: String,
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
    under: i64,
    total: i64,
    shared: bool,
) -> Option<(String, Option<String>)> {
    let path = crate::ingest::page_cap::OVERFLOW_PATH;
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
    let filters = q.filters()?;
    let started = audience.started;
    let now = state.clock.now();
    let (period, range_error, coarsened) =
        resolve_or_default(q, now, &state.retention, site.time_zone.tz());
    let scope = Scope::of_site(&site);
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
    // A bad range shows the default one: its links keep the filters only.
    let params = if range_error.is_some() {
        q.filter_params()
            .into_iter()
            .map(|(k, v)| format!("{k}={}", fmt::query(&v)))
            .collect::<Vec<_>>()
            .join("&")
    } else {
        q.range_params()
    };
    let source_scope = crate::reports::sources::SourceScope::Site(&site);
    let request = ReportRequest::new(&state.store, source_scope, &period, now).filtered(&filters);
    // Every panel from one report: each store is read once for all of them.
    let report = Report::new(state.reads(), &site, request, &state.retention);
    let window = ((page_no - 1) * PAGES_PER_SCREEN, PAGES_PER_SCREEN);
    let overflow_path = crate::ingest::page_cap::OVERFLOW_PATH;
    let (line, chart, pages, (sources, panels), (goals, _), now_views, overflow_views) =
        tokio::try_join!(
            report.line(),
            report.chart(metric),
            report.pages(&filter, window),
            report.panels(&super::breakdowns::PANELS),
            report.goals(),
            async { Ok(queries::views_now(&state.store, &scope, now).await?) },
            report.views_of_page(overflow_path),
        )
        .map_err(WebError::from)?;
    // How far behind the streams are, once the figures are read.
    let lags = lags(state);
    let base = audience.base.clone();
    let said = &line.said;
    let mut visits = super::visit_line::build(&line.figures, &period, false);
    visits.basis = change_basis(
        &period,
        line.figures.compared.map_or(0, |(part, _)| part.views),
        now,
        &state.retention,
        said.is_filtered(),
    );
    visits.csv = audience.export(join(&format!("{base}/visits.csv"), &params, &[]));
    let chart =
        super::visit_line::chart_view(&chart, &period, now, site.domain.as_str(), false, |m| {
            join(&base, &params, &[("metric", m.key()), ("q", &filter)])
        });
    let goals = super::goals::view(
        &goals,
        (!audience.shared).then(|| format!("/sites/{}/settings#goals", site.id)),
        audience.export(join(&format!("{base}/goals.csv"), &params, &[])),
        |path| join(&format!("{base}/page"), &params, &[("path", path)]),
    );
    let total = pages.total;
    let add = |d: FilterDimension, value: &str| q.add_filter_link(&base, d, value);
    let rows = pages
        .rows
        .iter()
        .map(|p| PageRow {
            filter_href: add(FilterDimension::Page, &p.path),
            entry_href: (p.entries > 0)
                .then(|| add(FilterDimension::Entry, &p.path))
                .flatten(),
            exit_href: (p.exits > 0)
                .then(|| add(FilterDimension::Exit, &p.path))
                .flatten(),
            path: p.path.clone(),
            views: p.views,
            visitors: p
                .visitors
                .map_or_else(|| "—".to_owned(), |v| fmt::thousands(&v)),
            entries: p.entries,
            exits: p.exits,
            time_on_page: super::visit_line::time_on_page(p.engagement.as_ref()).0,
            time_kind: super::visit_line::time_on_page(p.engagement.as_ref()).1,
            scroll_depth: super::visit_line::scroll_depth(p.engagement.as_ref()),
            share: fmt::share(p.views, total),
            href: join(&format!("{base}/page"), &params, &[("path", &p.path)]),
        })
        .collect();
    let overflow = overflow_note(&site, overflow_views, total, audience.shared);
    let screen = |n: usize| join(&base, &params, &[("q", &filter), ("p", &n.to_string())]);
    // A shared view never shows the tracking code, so it never waits.
    let empty = if total > 0 || said.is_filtered() {
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
    let mut breakdowns_view = super::breakdowns::view(&lags, &panels, &period, |d| {
        audience.export(join(
            &format!("{base}/breakdown.csv"),
            &params,
            &[("dimension", d.key())],
        ))
    });
    // An outbound link's, a download's or a 404's event row opens the
    // URLs or paths it was sent with; any other row filters on its name.
    let with_filters = q.filters().unwrap_or_default();
    breakdowns_view.link_rows(
        |d, v| match (d, crate::domain::properties::extension_key(v)) {
            (crate::domain::Dimension::Event, Some(key)) => {
                let event = crate::domain::Filter::new(FilterDimension::Event, v).ok()?;
                Some(q.filtered_link_with(
                    &format!("{base}/properties"),
                    &[("key", key)],
                    &with_filters.with(event),
                ))
            }
            _ => add(FilterDimension::of_breakdown(d), v),
        },
    );
    let mut sources_view = super::sources::view(
        &sources,
        &period,
        source_filter.clone(),
        audience.export(join(
            &format!("{base}/sources.csv"),
            &params,
            &[("src", &source_filter)],
        )),
    );
    for row in &mut sources_view.rows {
        row.href = add(FilterDimension::Source, &row.name);
    }
    let notes = if said.is_filtered() {
        std::iter::once(FILTERED_NOTE.to_owned())
            .chain(said.notes())
            .collect()
    } else {
        Vec::new()
    };
    let daily_only = if said.is_filtered() {
        None
    } else {
        notes::daily_only_note(&state.store, &site, &period).await?
    };
    let page = DashboardPage {
        chips: super::shared::FilterChips::of(q, &base, &filters),
        notes,
        funnels_href: Some(join(&format!("{base}/funnels"), &params, &[])),
        properties_href: q.filtered_link(&format!("{base}/properties"), &filters),
        nav: audience.nav.clone(),
        shared: audience.shared,
        base: base.clone(),
        controls: Controls {
            coarsened: coarsened.map(|c| c.to_string()),
            daily_only,
            ..controls(&base, &hidden, q, &period, range_error.as_ref())
        },
        visits,
        chart,
        pages_count: pages.matching as i64,
        page_count: pages.matching.div_ceil(PAGES_PER_SCREEN).max(1),
        pages: rows,
        prev_href: (page_no > 1).then(|| screen(page_no - 1)),
        next_href: (page_no * PAGES_PER_SCREEN < pages.matching).then(|| screen(page_no + 1)),
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
        behind: behind(&lags, said),
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

/// What a filtered figure counts, said once above the filtered figures.
pub(super) const FILTERED_NOTE: &str = "Filtered figures count the visits that pass every filter: a visit in the period it started in, a view in the period it happened in (with a page filter, only that page's views); changes compare them with the whole previous period.";

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

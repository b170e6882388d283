//! The dashboard with filters: every figure from the visit store
//! (`reports::filtered`), the active filters as removable chips, every
//! row a link that adds its own; and the filter chips the unfiltered
//! pages show (none) and their rows' links.

use askama::Template;
use std::sync::Arc;

use super::shared::{country_label, BreakdownRow, BreakdownTable, BreakdownsView, FilterChips};
use super::visit_line::{ChartMetric, ChartView, Totals, VisitLine};
use super::*;
use crate::domain::filter::{FilterDimension, Filters};
use crate::domain::Page;
use crate::domain::{Dimension, Goal};
use crate::reports::engine;
use crate::reports::filtered::Figures;
use crate::reports::filtered_read;
use crate::reports::request::ReportRequest;
use crate::reports::sources::SourceScope;
use crate::reports::visits::VisitFigures;
use crate::reports::{chart, Period, Point};
use crate::storage::sites::Site;
use crate::web::fmt;
use crate::web::pages::{render, Nav};

pub struct FilteredPageRow {
    pub path: String,
    pub href: Option<String>,
    pub visitors: i64,
    pub views: i64,
    pub entries: i64,
    pub entry_href: Option<String>,
    pub exits: i64,
    pub exit_href: Option<String>,
    pub share: String,
}

pub struct FilteredSourceRow {
    pub name: String,
    pub href: Option<String>,
    pub views: i64,
    pub share: String,
    pub change: String,
}

pub struct FilteredGoalRow {
    pub kind: &'static str,
    pub name: String,
    pub visits: i64,
    pub rate: String,
    pub href: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard_filtered.html")]
struct FilteredDashboard {
    nav: Option<Nav>,
    shared: bool,
    site: Arc<Site>,
    controls: Controls,
    chips: FilterChips,
    chart: ChartView,
    visits: VisitLine,
    csv_series: String,
    csv_pages: String,
    csv_sources: String,
    pages: Vec<FilteredPageRow>,
    sources: Vec<FilteredSourceRow>,
    breakdowns: BreakdownsView,
    goals: Vec<FilteredGoalRow>,
    funnels_href: Option<String>,
    /// Sampled, imported figures counted or left out: what the figures are.
    notes: Vec<String>,
    freshness: String,
}

/// Rows shown per panel on the page; the CSVs have them all.
const SHOWN: usize = 25;

/// The filtered dashboard of `site`, or with `page` its page report.
pub(super) async fn dashboard(
    state: &WebState,
    q: &ReportQuery,
    site: Arc<Site>,
    audience: Audience,
    asked: Filters,
    page: Option<&Page>,
) -> Answer {
    let now = state.clock.now();
    let (period, range_error, coarsened) =
        resolve_or_default(q, now, &state.retention, site.time_zone.tz());
    let metric = q.chart_metric()?;
    let filters = match page {
        Some(p) => super::shared::with_page(&asked, p.path())?,
        None => asked.clone(),
    };
    let ((current, imported), previous) = state
        .reads()
        .figures_and_before(&site, &filters, &period)
        .await?;
    let base = audience.base.clone();
    let params = if range_error.is_some() {
        q.filter_params()
            .into_iter()
            .map(|(k, v)| format!("{k}={}", fmt::query(&v)))
            .collect::<Vec<_>>()
            .join("&")
    } else {
        q.range_params()
    };
    let add = |d: FilterDimension, value: &str| q.add_filter_link(&base, d, value);
    let mut line = match page {
        None => visit_line(totals(&current), totals(&previous), &period),
        // A page's visits are those that entered there ([`engine::line`]).
        Some(page) => {
            let request = ReportRequest::new(&state.store, SourceScope::Page(page), &period, now)
                .filtered(&asked);
            let (is, was) = engine::line_and_before(&state.reads(), &site, &request).await?;
            visit_line(line_totals(&is), line_totals(&was), &period)
        }
    };
    line.csv = audience.export(join(&format!("{base}/visits.csv"), &params, &[]));
    let chart = chart_of(&current, &period, metric, now, site.domain.as_str(), |m| {
        join(&base, &params, &[("metric", m.key())])
    });
    let pages = current
        .top_pages()
        .into_iter()
        .take(SHOWN)
        .map(|(path, f)| FilteredPageRow {
            path: path.to_owned(),
            href: add(FilterDimension::Page, path),
            visitors: f.visitors(),
            views: f.views,
            entries: f.entries,
            entry_href: (f.entries > 0)
                .then(|| add(FilterDimension::Entry, path))
                .flatten(),
            exits: f.exits,
            exit_href: (f.exits > 0)
                .then(|| add(FilterDimension::Exit, path))
                .flatten(),
            share: fmt::share(f.views, current.views),
        })
        .collect();
    let was = |d: Dimension, name: &str| {
        previous
            .breakdowns
            .get(&d)
            .and_then(|m| m.get(name))
            .copied()
            .unwrap_or(0)
    };
    let sources = current
        .top(Dimension::Source)
        .into_iter()
        .take(SHOWN)
        .map(|(name, views)| FilteredSourceRow {
            name: name.to_owned(),
            href: add(FilterDimension::Source, name),
            views,
            share: fmt::share(views, current.views),
            change: fmt::row_change(views, views, was(Dimension::Source, name)),
        })
        .collect();
    let table = |d: Dimension| -> BreakdownTable {
        let rows = current.top(d);
        let total: i64 = rows.iter().map(|(_, c)| c).sum();
        let of = if d.covers_every_view() || d == Dimension::Event {
            total
        } else {
            current.views.max(total)
        };
        BreakdownTable {
            key: d.key(),
            title: d.title(),
            names: rows.len(),
            rows: rows
                .into_iter()
                .take(super::shared::SHOWN)
                .map(|(name, count)| BreakdownRow {
                    name: match d {
                        Dimension::Country => country_label(name),
                        _ => name.to_owned(),
                    },
                    value: name.to_owned(),
                    href: add(FilterDimension::of_breakdown(d), name),
                    count,
                    share: fmt::share(count, of),
                    change: fmt::row_change(count, count, was(d, name)),
                })
                .collect(),
            total,
            csv: audience.export(join(
                &format!("{base}/breakdown.csv"),
                &params,
                &[("dimension", d.key())],
            )),
        }
    };
    let breakdowns = BreakdownsView {
        devices: vec![
            table(Dimension::Device),
            table(Dimension::Browser),
            table(Dimension::Os),
        ],
        countries: vec![table(Dimension::Country)],
        campaigns: vec![table(Dimension::Medium), table(Dimension::Campaign)],
        events: vec![table(Dimension::Event)],
        widened: None,
        lag: None,
    };
    let goals = goal_rows(&site, &current, &add);
    let mut notes = vec![
        "Filtered figures count the visits that pass every filter: a visit in the period it started in, a view in the period it happened in (with a page filter, only that page's views); changes compare them with the whole previous period.".to_owned(),
    ];
    notes.extend(filtered_read::sample_words(current.sampled));
    notes.extend(imported.map(|i| i.note()));
    let hidden: Vec<(&str, &str)> = vec![];
    let page = FilteredDashboard {
        nav: audience.nav.clone(),
        shared: audience.shared,
        controls: Controls {
            coarsened: coarsened.map(|c| c.to_string()),
            ..controls(&base, &hidden, q, &period, range_error.as_ref())
        },
        chips: FilterChips::of(q, &base, &filters),
        chart,
        visits: line,
        csv_series: audience.export(join(&format!("{base}/series.csv"), &params, &[])),
        csv_pages: audience.export(join(&format!("{base}/pages.csv"), &params, &[])),
        csv_sources: audience.export(join(&format!("{base}/sources.csv"), &params, &[])),
        pages,
        sources,
        breakdowns,
        goals,
        funnels_href: Some(join(&format!("{base}/funnels"), &params, &[])),
        notes,
        freshness: freshness(state),
        site,
    };
    timed(state, audience.started);
    Ok(render(status_of(range_error.as_ref()), &page))
}

/// The first line: the same figures as unfiltered, compared with the whole
/// previous period.
fn visit_line(now: Totals, was: Totals, period: &Period) -> VisitLine {
    super::visit_line::build(&now, Some(&(now, was)), Some(period.from), period, false)
}

fn totals(f: &Figures) -> Totals {
    Totals {
        views: f.views,
        visits: VisitFigures {
            visitors: Some(f.visitors()),
            visits: f.visits,
            non_bounces: f.non_bounces(),
            duration_secs: f.duration_secs,
            exits: None,
        },
    }
}

fn line_totals(l: &engine::Line) -> Totals {
    Totals {
        views: l.views,
        visits: VisitFigures {
            visitors: l.visitors,
            visits: l.visits,
            non_bounces: l.visits - l.bounces,
            duration_secs: l.duration_secs,
            exits: None,
        },
    }
}

fn chart_of(
    f: &Figures,
    period: &Period,
    metric: ChartMetric,
    now: chrono::DateTime<chrono::Utc>,
    of: &str,
    href: impl Fn(ChartMetric) -> String,
) -> ChartView {
    let points: Vec<Point> = f
        .series
        .iter()
        .map(|p| Point {
            at: p.at,
            views: match metric {
                ChartMetric::Views => p.views,
                ChartMetric::Visits => p.visits,
                ChartMetric::Visitors => p.visitors(),
            },
        })
        .collect();
    let caption = match metric {
        ChartMetric::Views => "Views",
        ChartMetric::Visitors => "Visitors",
        ChartMetric::Visits => "Visits",
    };
    let noun = metric.noun();
    ChartView {
        series: series_view_of(
            "series",
            &points,
            chart::Unit::from(period.resolution),
            period.zone,
            &format!(
                "{caption} of {of} (filtered) by {}",
                period.resolution.as_str()
            ),
            |at| period.is_partial(at, now),
            noun,
        ),
        tabs: ChartMetric::ALL
            .into_iter()
            .map(|m| {
                let label = match m {
                    ChartMetric::Views => "Views",
                    ChartMetric::Visitors => "Visitors",
                    ChartMetric::Visits => "Visits",
                };
                (label, href(m), m == metric)
            })
            .collect(),
        caption,
        empty: format!("No {} in this period with these filters.", noun.many),
        note: None,
    }
}

/// The site's goals among the filtered visits: visits that sent the event
/// or viewed the page, and their share of the visits.
fn goal_rows(
    site: &Site,
    f: &Figures,
    add: &dyn Fn(FilterDimension, &str) -> Option<String>,
) -> Vec<FilteredGoalRow> {
    site.goals
        .iter()
        .map(|g| {
            let (kind, visits, href) = match g {
                Goal::Event(name) => (
                    "event",
                    f.converting_events.get(name).copied().unwrap_or(0),
                    add(FilterDimension::Event, name),
                ),
                Goal::Page(path) => (
                    "page",
                    f.converting_pages.get(path.as_str()).copied().unwrap_or(0),
                    add(FilterDimension::Page, path.as_str()),
                ),
            };
            FilteredGoalRow {
                kind,
                name: g.name().to_owned(),
                visits,
                rate: fmt::share(visits, f.visits),
                href,
            }
        })
        .collect()
}

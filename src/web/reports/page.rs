//! A page's report: its series, a minute by second, and the realtime panels.

use askama::Template;
use chrono::{DateTime, TimeDelta, Utc};
use std::sync::Arc;

use super::*;

use crate::reports::engine::{self, Report};
use crate::reports::request::ReportRequest;
use crate::reports::{chart, notes, queries, Period, Resolution};
use crate::storage::sites::Site;
use crate::web::fmt;
use crate::web::pages::{render, Nav};

#[derive(Template)]
#[template(path = "page.html")]
pub(super) struct PageReport {
    nav: Option<Nav>,
    /// The page report's own address (`…/page`), for its minute form.
    base: String,
    /// Through a share link.
    shared: bool,
    site: Arc<Site>,
    sources: super::sources::SourcesView,
    breakdowns: super::shared::BreakdownsView,
    sources_action: String,
    sources_hidden: Vec<(&'static str, String)>,
    path: String,
    /// The active filters, each removable, and what filtered figures count.
    chips: super::shared::FilterChips,
    notes: Vec<String>,
    controls: Controls,
    chart: super::visit_line::ChartView,
    visits: super::visit_line::VisitLine,
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
    /// When the realtime panels were read, in the site's zone.
    realtime_as_of: String,
    /// How far behind the write-behind is, when more than a few seconds.
    behind: Option<String>,
    /// The site's dashboard, in the same range.
    back_href: String,
}

pub async fn page_report(r: SiteRequest, q: Query) -> Answer {
    let audience = Audience::signed_in(&r);
    show_page_report(&r.state, r.site, audience, &q).await
}

/// A page report of `site` as `audience` sees it (what is being prepared,
/// for a long range of a site whose totals are still being built).
pub async fn show_page_report(
    state: &WebState,
    site: Arc<Site>,
    audience: Audience,
    q: &ReportQuery,
) -> Answer {
    let of = site.clone();
    page_report_of(state, site, audience, q)
        .await
        .map_err(|e| e.unless_preparing(&of))
}

async fn page_report_of(
    state: &WebState,
    site: Arc<Site>,
    audience: Audience,
    q: &ReportQuery,
) -> Answer {
    let (path, page) = q.page_of(&site)?;
    let filters = q.filters()?;
    let started = audience.started;
    let now = state.clock.now();
    let zone = site.time_zone.tz();
    let (period, range_error, coarsened) = resolve_or_default(q, now, &state.retention, zone);
    let this_minute = Resolution::Minute.floor(now);
    let last_hour = Period::last_hour(now, zone);
    let chosen = q.minute(zone)?;
    let source_filter = q.source_filter()?;
    let metric = q.chart_metric()?;
    let params = if range_error.is_some() {
        String::new()
    } else {
        q.range_params()
    };
    let source_scope = crate::reports::sources::SourceScope::Page(&page);
    let request = ReportRequest::new(&state.store, source_scope, &period, now).filtered(&filters);
    let report = Report::new(state.reads(), &site, request, &state.retention);
    let reads = state.reads();
    let hour_request = ReportRequest {
        period: &last_hour,
        ..request
    };
    // The breakdown's minute is either chosen or looked up; either way it
    // runs alongside the other queries rather than before them.
    let breakdown = async {
        let minute = match chosen {
            Some(m) => m,
            None => queries::latest_minute(&state.store, &page, period.to)
                .await?
                .unwrap_or(this_minute),
        };
        let seconds = engine::seconds(&reads, &site, &request, minute).await?;
        Ok::<_, crate::reports::costly::ReadError>((minute, seconds))
    };
    let (line, chart, (sources, panels), (minute, seconds), (realtime, current), time) =
        tokio::try_join!(
            report.line(),
            report.chart(metric),
            report.panels(&super::breakdowns::PANELS),
            breakdown,
            engine::realtime(&reads, &site, &hour_request, this_minute),
            engine::page_time(&request),
        )
        .map_err(WebError::from)?;
    // How far behind the streams are, once the figures are read.
    let lags = lags(state);
    let said = line.said.clone();
    let page_name = page.to_string();
    let site_base = audience.base.clone();
    let base = format!("{site_base}/page");
    let chart = super::visit_line::chart_view(&chart, &period, now, &page_name, true, |m| {
        join(
            &base,
            &params,
            &[("path", path.as_str()), ("metric", m.key())],
        )
    });
    let mut visits = super::visit_line::build(&line.figures, &period, true);
    super::visit_line::add_time_on_page(&mut visits, time.as_ref());
    visits.basis = change_basis(
        &period,
        line.figures.compared.map_or(0, |(part, _)| part.views),
        now,
        &state.retention,
        said.is_filtered(),
    );
    visits.csv = audience.export(join(
        &format!("{site_base}/visits.csv"),
        &params,
        &[("path", path.as_str())],
    ));
    let minute_value = fmt::input_minute_in(&minute, zone);
    // The per-second and realtime exports keep the filters, not the range.
    let filter_params = q
        .filter_params()
        .into_iter()
        .map(|(k, v)| format!("{k}={}", fmt::query(&v)))
        .collect::<Vec<_>>()
        .join("&");
    let csv = |name: &str, extra: &[(&str, &str)]| {
        audience.export(join(&format!("{site_base}/{name}"), &filter_params, extra))
    };
    // A second still to come (or running) in the current minute.
    let second_partial = |at: DateTime<Utc>| at + TimeDelta::seconds(1) > now;
    let status = status_of(range_error.as_ref());
    let mut breakdowns = super::breakdowns::view(&lags, &panels, &period, |d| {
        audience.export(join(
            &format!("{site_base}/breakdown.csv"),
            &params,
            &[("path", path.as_str()), ("dimension", d.key())],
        ))
    });
    // Each row filters the site's dashboard by visits that viewed this
    // page (and pass this report's filters) and have that name.
    let on_page = super::shared::with_page(&filters, path.as_str())?;
    breakdowns.link_rows(|d, v| {
        let f =
            crate::domain::Filter::new(crate::domain::FilterDimension::of_breakdown(d), v).ok()?;
        Some(q.filtered_link(&site_base, &on_page.with(f)))
    });
    let filtered = if said.is_filtered() {
        " (filtered)"
    } else {
        ""
    };
    let mut notes: Vec<String> = said.notes();
    if said.is_filtered() {
        notes.insert(0, super::dashboard::FILTERED_NOTE.to_owned());
    }
    let daily_only = if said.is_filtered() {
        None
    } else {
        notes::daily_only_note(&state.store, &site, &period).await?
    };
    let report = PageReport {
        nav: audience.nav.clone(),
        shared: audience.shared,
        base: base.clone(),
        path: path.as_str().to_owned(),
        chips: super::shared::FilterChips::keeping(q, &base, &[("path", path.as_str())], &filters),
        notes,
        controls: Controls {
            coarsened: coarsened.map(|c| c.to_string()),
            daily_only,
            ..controls(
                &base,
                &[("path", path.as_str())],
                q,
                &period,
                range_error.as_ref(),
            )
        },
        visits,
        chart,
        minute_label: fmt::local(&minute, zone),
        seconds: series_view(
            "seconds",
            &seconds.points,
            chart::Unit::Second,
            zone,
            &format!(
                "Views of {page}{filtered} in each second of {}",
                fmt::local(&minute, zone)
            ),
            second_partial,
        ),
        realtime: series_view(
            "realtime",
            &realtime.points,
            chart::Unit::from(last_hour.resolution),
            zone,
            &format!("Views of {page}{filtered} in the last 60 minutes"),
            |at| last_hour.is_partial(at, now),
        ),
        current_minute: series_view(
            "this-minute",
            &current.points,
            chart::Unit::Second,
            zone,
            &format!("Views of {page}{filtered} this minute, by second"),
            second_partial,
        ),
        csv_series: audience.export(join(
            &format!("{site_base}/series.csv"),
            &params,
            &[("path", path.as_str())],
        )),
        csv_seconds: csv(
            "seconds.csv",
            &[("path", path.as_str()), ("minute", &minute_value)],
        ),
        csv_realtime: csv("realtime.csv", &[("path", path.as_str())]),
        csv_current: csv(
            "seconds.csv",
            &[
                ("path", path.as_str()),
                ("minute", &fmt::input_minute_in(&this_minute, zone)),
            ],
        ),
        sources: super::sources::view(
            &sources,
            &period,
            source_filter.clone(),
            audience.export(join(
                &format!("{site_base}/sources.csv"),
                &params,
                &[("path", path.as_str()), ("src", &source_filter)],
            )),
        ),
        breakdowns,
        sources_action: base.clone(),
        sources_hidden: vec![("path", path.as_str().to_owned())],
        back_href: join(&site_base, &params, &[]),
        minute: minute_value,
        realtime_as_of: now.with_timezone(&zone).format("%H:%M:%S %Z").to_string(),
        freshness: freshness(state),
        behind: behind(&lags, &said),
        site,
    };
    timed(state, started);
    Ok(render(status, &report))
}

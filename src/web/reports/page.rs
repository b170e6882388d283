//! A page's report: its series, a minute by second, and the realtime panels.

use askama::Template;
use chrono::{DateTime, TimeDelta, Utc};
use std::sync::Arc;

use super::*;

use crate::reports::request::ReportRequest;
use crate::reports::{chart, compared, notes, queries, Period, Point, Resolution, Scope};
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

pub(super) fn seconds_points(minute: DateTime<Utc>, seconds: &[i64; 60]) -> Vec<Point> {
    seconds
        .iter()
        .enumerate()
        .map(|(s, views)| Point {
            at: minute + TimeDelta::seconds(s as i64),
            views: *views,
        })
        .collect()
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
    // Filtered: the filtered dashboard of the page (its views, and the
    // visits that entered there, as without filters).
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered::dashboard(state, q, site, audience, filters, Some(&page)).await;
    }
    let started = audience.started;
    let now = state.clock.now();
    let zone = site.time_zone.tz();
    let (period, range_error, coarsened) = resolve_or_default(q, now, &state.retention, zone);
    let scope = Scope::Page(&page);
    let this_minute = Resolution::Minute.floor(now);
    let (before, last_hour) = (period.previous(), Period::last_hour(now, zone));
    let chosen = q.minute(zone)?;
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
    let source_filter = q.source_filter()?;
    let metric = q.chart_metric()?;
    let params = if range_error.is_some() {
        String::new()
    } else {
        q.range_params()
    };
    let source_scope = crate::reports::sources::SourceScope::Page(&page);
    // The sources come with the other breakdowns, in one pass.
    let request = ReportRequest::new(&state.store, source_scope, &period, now);
    let names = compared::breakdowns(&request, &[]);
    // The visit line's counters need no views: they are read beside them.
    let (current, previous, (minute, seconds), realtime, current_seconds, names, line) = tokio::try_join!(
        queries::read_series(&state.store, &scope, &period),
        queries::read_series(&state.store, &scope, &before),
        breakdown,
        queries::realtime_series(&state.store, &scope, &last_hour),
        queries::realtime_seconds(&state.store, &page, this_minute),
        names,
        super::visit_line::read_line(state, &scope, &period, now),
    )?;
    let sources = compared::sources_of(&names, &period);
    let page_name = page.to_string();
    let chart = super::visit_line::chart_view(
        &state.store,
        &scope,
        &period,
        metric,
        &current,
        now,
        &page_name,
        true,
        |m| {
            join(
                &format!("{}/page", audience.base),
                &params,
                &[("path", path.as_str()), ("metric", m.key())],
            )
        },
    );
    let sources = compared::source_shares(
        &request,
        sources,
        Some((queries::total(&current), queries::total(&previous))),
    );
    let mut visits = line.line(&current, &previous);
    let (chart, sources) = tokio::try_join!(chart, sources)?;
    visits.basis = change_basis(&period, &current, now, &state.retention);
    let site_base = audience.base.clone();
    let base = format!("{site_base}/page");
    visits.csv = audience.export(join(
        &format!("{site_base}/visits.csv"),
        &params,
        &[("path", path.as_str())],
    ));
    let minute_value = fmt::input_minute_in(&minute, zone);
    let csv = |name: &str, extra: &[(&str, &str)]| {
        audience.export(join(&format!("{site_base}/{name}"), "", extra))
    };
    // A second still to come (or running) in the current minute.
    let second_partial = |at: DateTime<Utc>| at + TimeDelta::seconds(1) > now;
    let status = status_of(range_error.as_ref());
    // Each row filters the dashboard by visits that viewed this page and
    // have that name.
    let mut breakdowns = super::breakdowns::view(state, &names, &period, sources.now.views, |d| {
        audience.export(join(
            &format!("{site_base}/breakdown.csv"),
            &params,
            &[("path", path.as_str()), ("dimension", d.key())],
        ))
    });
    breakdowns.link_rows(|d, v| {
        let f =
            crate::domain::Filter::new(crate::domain::FilterDimension::of_breakdown(d), v).ok()?;
        let page =
            crate::domain::Filter::new(crate::domain::FilterDimension::Page, path.as_str()).ok()?;
        let filters = crate::domain::Filters::of(vec![page, f]).ok()?;
        Some(q.filtered_link(&site_base, &filters))
    });
    let report = PageReport {
        nav: audience.nav.clone(),
        shared: audience.shared,
        base: base.clone(),
        path: path.as_str().to_owned(),
        controls: Controls {
            coarsened: coarsened.map(|c| c.to_string()),
            daily_only: notes::daily_only_note(&state.store, &site, &period).await?,
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
            &seconds_points(minute, &seconds),
            chart::Unit::Second,
            zone,
            &format!(
                "Views of {page} in each second of {}",
                fmt::local(&minute, zone)
            ),
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
            zone,
            &format!("Views of {page} this minute, by second"),
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
        behind: behind(state),
        site,
    };
    timed(state, started);
    Ok(render(status, &report))
}

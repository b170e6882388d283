//! CSV exports of the series, top pages, a minute's seconds and the last
//! hour (`sources.csv` is beside its panel). Their refusals are plain text
//! ([`CsvError`](crate::web::error::CsvError)).

use chrono::TimeDelta;

use super::shared::{file_stem, report_csv, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::Page;
use crate::reports::engine;
use crate::reports::request::ReportRequest;
use crate::reports::sources::SourceScope;
use crate::reports::{csv, Period, Resolution};
use crate::web::error::WebError;
use crate::web::fmt;

/// The series of the dashboard (no `path`) or of a page report (`path`).
pub async fn series_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // A long range of a site whose totals are being built: what is being
    // prepared, not a 503.
    let site = r.site.clone();
    series_csv_of(CsvRequest(r), q)
        .await
        .map_err(|e| e.unless_preparing(&site))
}

async fn series_csv_of(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site, started) = (r.state, r.site, r.started);
    let filters = q.filters()?;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let path = q.path.as_ref().map(|_| q.path()).transpose()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let request =
        ReportRequest::new(&state.store, scope, &period, state.clock.now()).filtered(&filters);
    let series = engine::series(&state.reads(), &site, &request)
        .await
        .map_err(WebError::from)?;
    timed(&state, started);
    let stem = file_stem(&site, path.as_ref(), period.from, period.to);
    Ok(report_csv(
        &state,
        &stem,
        &series.said,
        period.resolution.as_str(),
        csv::series_in(&series.points, site.time_zone.tz()),
    ))
}

/// Visitors, visits, views, bounces and the visits' duration per shown
/// bucket, of the dashboard (no `path`) or of a page report (`path`: its
/// visits are those that entered there).
pub async fn visits_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // A long range of a site whose totals are being built: what is being
    // prepared, not a 503.
    let site = r.site.clone();
    visits_csv_of(CsvRequest(r), q)
        .await
        .map_err(|e| e.unless_preparing(&site))
}

async fn visits_csv_of(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site, started) = (r.state, r.site, r.started);
    let filters = q.filters()?;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let path = q.path.as_ref().map(|_| q.path()).transpose()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let request =
        ReportRequest::new(&state.store, scope, &period, state.clock.now()).filtered(&filters);
    let (points, said) = engine::visit_series(&state.reads(), &site, &request)
        .await
        .map_err(WebError::from)?;
    let tz = site.time_zone.tz();
    let rows = points.iter().map(|p| {
        vec![
            p.at.with_timezone(&tz)
                .format(if tz == chrono_tz::Tz::UTC {
                    "%Y-%m-%dT%H:%M:%SZ"
                } else {
                    "%Y-%m-%dT%H:%M:%S%:z"
                })
                .to_string(),
            p.visitors.map_or_else(String::new, |v| v.to_string()),
            p.visits.to_string(),
            p.views.to_string(),
            p.bounces.to_string(),
            p.duration_secs.to_string(),
        ]
    });
    let body = csv::table(
        &[
            "timestamp",
            "visitors",
            "visits",
            "views",
            "bounces",
            "visit_duration_seconds",
        ],
        rows,
    );
    timed(&state, started);
    let stem = file_stem(&site, path.as_ref(), period.from, period.to);
    let what = format!("{}_visits", period.resolution.as_str());
    Ok(report_csv(&state, &stem, &said, &what, body))
}

pub async fn pages_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // A long range of a site whose totals are being built: what is being
    // prepared, not a 503.
    let site = r.site.clone();
    pages_csv_of(CsvRequest(r), q)
        .await
        .map_err(|e| e.unless_preparing(&site))
}

async fn pages_csv_of(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site, started) = (r.state, r.site, r.started);
    let filters = q.filters()?;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let needle = q.page_filter()?;
    let request = ReportRequest::new(
        &state.store,
        SourceScope::Site(&site),
        &period,
        state.clock.now(),
    )
    .filtered(&filters);
    // Every matching page: the pages viewed, then those with entries or
    // exits only, at 0 views.
    let pages = engine::pages(&state.reads(), &site, &request, &needle, (0, usize::MAX))
        .await
        .map_err(WebError::from)?;
    let total = pages.total;
    // Entries, exits and visitors after the columns this file always had, so that
    // scripts reading those by position go on working. Sent a thousand
    // rows at a time as they are made: a site of 100,000 pages is never
    // one string.
    // Time on page last: its mean in seconds, what it is measured by
    // (`engaged` or `until_next_view`), and the views it is the mean of;
    // then the mean scroll depth and the engaged views; empty under a
    // filter.
    let rows = pages.rows.into_iter().map(move |p| {
        let time = p.engagement.and_then(|e| e.time_on_page());
        vec![
            p.path,
            p.views.to_string(),
            fmt::percent(p.views, total),
            p.entries.to_string(),
            p.exits.to_string(),
            p.visitors.map_or_else(String::new, |v| v.to_string()),
            time.map_or_else(String::new, |(secs, _)| format!("{secs:.1}")),
            time.map_or_else(String::new, |(_, kind)| kind.as_str().to_owned()),
            p.engagement
                .map_or_else(String::new, |e| e.time_views().to_string()),
            p.engagement
                .and_then(|e| e.scroll_depth())
                .map_or_else(String::new, |d| format!("{d:.1}")),
            p.engagement
                .map_or_else(String::new, |e| e.engaged_views.to_string()),
        ]
    });
    let pieces = csv::table_pieces(
        &[
            "path",
            "views",
            "share_percent",
            "entries",
            "exits",
            "visitors",
            "time_on_page_seconds",
            "time_kind",
            "timed_views",
            "scroll_depth_percent",
            "engaged_views",
        ],
        rows,
        1_000,
    );
    timed(&state, started);
    let stem = file_stem(&site, None, period.from, period.to);
    let mut answer = super::shared::report_csv_header(&state, &stem, &pages.said, "pages");
    Ok(answer.streaming(futures::stream::iter(
        pieces.map(|p| Ok::<_, std::convert::Infallible>(web::Bytes::from(p))),
    )))
}

pub async fn seconds_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site) = (r.state, r.site);
    let filters = q.filters()?;
    let (path, page) = q.page_of(&site)?;
    let minute = q.minute(site.time_zone.tz())?.ok_or_else(|| {
        WebError::Invalid(format!(
            "Choose a minute (minute=YYYY-MM-DDTHH:MM, {} time).",
            site.time_zone.name()
        ))
    })?;
    // The request's period only gives the zone: the minute is the read.
    let now = state.clock.now();
    let period = Period::last_hour(now, site.time_zone.tz());
    let request =
        ReportRequest::new(&state.store, SourceScope::Page(&page), &period, now).filtered(&filters);
    let seconds = engine::seconds(&state.reads(), &site, &request, minute)
        .await
        .map_err(WebError::from)?;
    let minute = Resolution::Minute.floor(minute);
    let stem = file_stem(&site, Some(&path), minute, minute + TimeDelta::minutes(1));
    Ok(report_csv(
        &state,
        &stem,
        &seconds.said,
        "seconds",
        csv::series_in(&seconds.points, site.time_zone.tz()),
    ))
}

pub async fn realtime_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site) = (r.state, r.site);
    let filters = q.filters()?;
    let (path, page) = q.page_of(&site)?;
    let now = state.clock.now();
    let period = Period::last_hour(now, site.time_zone.tz());
    let request =
        ReportRequest::new(&state.store, SourceScope::Page(&page), &period, now).filtered(&filters);
    let (hour, _) = engine::realtime(&state.reads(), &site, &request, now)
        .await
        .map_err(WebError::from)?;
    let stem = file_stem(&site, Some(&path), period.from, period.to);
    Ok(report_csv(
        &state,
        &stem,
        &hour.said,
        "realtime",
        csv::series_in(&hour.points, site.time_zone.tz()),
    ))
}

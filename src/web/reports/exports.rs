//! CSV exports of the series, top pages, a minute's seconds and the last
//! hour (`sources.csv` is beside its panel). Their refusals are plain text
//! ([`CsvError`](crate::web::error::CsvError)).

use chrono::TimeDelta;

use super::shared::{csv_header, csv_response, file_stem, report_csv, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::Page;
use crate::reports::engine;
use crate::reports::request::ReportRequest;
use crate::reports::sources::SourceScope;
use crate::reports::{csv, queries, Period, Resolution, Scope};
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
    // Filtered: the same columns from the visit store.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered_csv::visits(r, &q, &filters).await;
    }
    use crate::reports::visits;
    let state = r.state;
    let site = r.site;
    let started = r.started;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let path = q.path.as_ref().map(|_| q.path()).transpose()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = match &page {
        Some(page) => Scope::Page(page),
        None => Scope::of_site(&site),
    };
    let store = &state.store;
    let (views, visitors, started_visits, non_bounces, duration) = tokio::try_join!(
        queries::series(store, &scope, &period),
        visits::visitors_series(store, &scope, &period),
        visits::counter_series(store, &scope, &period, visits::VISITS),
        visits::counter_series(store, &scope, &period, visits::NON_BOUNCES),
        visits::counter_series(store, &scope, &period, visits::DURATION),
    )?;
    let tz = site.time_zone.tz();
    let rows = views.iter().enumerate().map(|(i, p)| {
        let n = |points: &[crate::reports::Point]| points.get(i).map_or(0, |p| p.views);
        let visits = n(&started_visits);
        vec![
            p.at.with_timezone(&tz)
                .format(if tz == chrono_tz::Tz::UTC {
                    "%Y-%m-%dT%H:%M:%SZ"
                } else {
                    "%Y-%m-%dT%H:%M:%S%:z"
                })
                .to_string(),
            visitors
                .as_deref()
                .map_or_else(String::new, |v| n(v).to_string()),
            visits.to_string(),
            p.views.to_string(),
            (visits - n(&non_bounces)).max(0).to_string(),
            n(&duration).to_string(),
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
    Ok(csv_response(
        &format!(
            "{}_{}_visits.csv",
            file_stem(&site, path.as_ref(), period.from, period.to),
            period.resolution.as_str()
        ),
        body,
    ))
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
    // Filtered: the same columns from the visit store.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered_csv::pages(r, &q, &filters).await;
    }
    let state = r.state;
    let site = r.site;
    let started = r.started;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    use crate::reports::visits;
    let store = &state.store;
    let scope = Scope::of_site(&site);
    // The pages viewed, then those with entries or exits only, at 0 views.
    let top = queries::top_pages(store, &scope, &period).await?;
    let (top, [entries, exits]) = visits::listed_pages(store, &site, &period, top).await?;
    let total: i64 = top.iter().map(|(_, v)| v).sum();
    let needle = q.page_filter()?.to_lowercase();
    let top: Vec<(Page, i64)> = top
        .into_iter()
        .filter(|(page, _)| crate::reports::page_search::matches(page, &needle))
        .collect();
    // Visitors as the table and the API give them (`page_rows`), a
    // thousand pages per read.
    let now = state.clock.now();
    let mut visitors: Vec<Option<i64>> = Vec::with_capacity(top.len());
    for chunk in top.chunks(1_000) {
        let names: Vec<&Page> = chunk.iter().map(|(page, _)| page).collect();
        let rows = visits::page_rows(store, &scope, &names, &period, now).await?;
        visitors.extend(rows.iter().map(|f| f.visitors));
    }
    let of = move |counts: &std::collections::HashMap<String, i64>, page: &Page| {
        counts.get(page.as_str()).copied().unwrap_or(0).to_string()
    };
    // Entries, exits and visitors after the columns this file always had, so that
    // scripts reading those by position go on working. Sent a thousand
    // rows at a time as they are made: a site of 100,000 pages is never
    // one string.
    let rows = top
        .into_iter()
        .zip(visitors)
        .map(move |((page, views), visitors)| {
            vec![
                page.path().to_owned(),
                views.to_string(),
                fmt::percent(views, total),
                of(&entries, &page),
                of(&exits, &page),
                visitors.map_or_else(String::new, |v| v.to_string()),
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
        ],
        rows,
        1_000,
    );
    timed(&state, started);
    let filename = format!(
        "{}_pages.csv",
        file_stem(&site, None, period.from, period.to)
    );
    Ok(csv_header(&filename).streaming(futures::stream::iter(
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
        &stem,
        &seconds.said,
        "seconds",
        csv::series_in(&seconds.points, site.time_zone.tz()),
    ))
}

pub async fn realtime_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // Filtered: the same columns from the visit store.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered_csv::realtime(r, &q, &filters).await;
    }
    let state = r.state;
    let site = r.site;
    let (path, page) = q.page_of(&site)?;
    let period = Period::last_hour(state.clock.now(), site.time_zone.tz());
    let read = queries::realtime_series(&state.store, &Scope::Page(&page), &period).await?;
    let points = queries::rollup(&period, &read);
    Ok(csv_response(
        &format!(
            "{}_realtime.csv",
            file_stem(&site, Some(&path), period.from, period.to)
        ),
        csv::series_in(&points, site.time_zone.tz()),
    ))
}

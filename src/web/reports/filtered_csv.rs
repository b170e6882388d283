//! The CSV exports with `filter`: the same columns, read from the visit
//! store (`reports::filtered`); the file name says it is filtered.

use chrono::{DateTime, TimeDelta, Utc};

use super::shared::{csv_response, file_stem, with_page, CsvAnswer};
use super::*;
use crate::domain::{Dimension, Filters, Goal, PagePath};
use crate::reports::filtered::Figures;
use crate::reports::{csv, Period, Point, Resolution};
use crate::storage::sites::Site;
use crate::web::error::WebError;
use crate::web::fmt;

/// The filters of the report (with `path`: its page's too).
fn scoped(q: &ReportQuery, filters: &Filters) -> Result<(Filters, Option<PagePath>), WebError> {
    let path = q.optional_path()?;
    Ok(match &path {
        Some(p) => (with_page(filters, p.as_str())?, path),
        None => (filters.clone(), None),
    })
}

fn name(site: &Site, path: Option<&PagePath>, period: &Period, what: &str) -> String {
    format!(
        "{}_filtered_{what}.csv",
        file_stem(site, path, period.from, period.to)
    )
}

fn stamp(at: DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    at.with_timezone(&tz)
        .format(if tz == chrono_tz::Tz::UTC {
            "%Y-%m-%dT%H:%M:%SZ"
        } else {
            "%Y-%m-%dT%H:%M:%S%:z"
        })
        .to_string()
}

async fn read(
    r: &SiteRequest,
    q: &ReportQuery,
    f: &Filters,
) -> Result<(Period, Figures), WebError> {
    let period = resolve_kept(q, &r.state, r.site.time_zone.tz())?;
    let (figures, _) = r.state.reads().figures(&r.site, f, &period).await?;
    Ok((period, figures))
}

pub(super) async fn series(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (f, path) = scoped(q, filters)?;
    let (period, figures) = read(&r, q, &f).await?;
    let points: Vec<Point> = figures
        .series
        .iter()
        .map(|p| Point {
            at: p.at,
            views: p.views,
        })
        .collect();
    timed(&r.state, r.started);
    Ok(csv_response(
        &name(&r.site, path.as_ref(), &period, period.resolution.as_str()),
        csv::series_in(&points, r.site.time_zone.tz()),
    ))
}

pub(super) async fn visits(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (f, path) = scoped(q, filters)?;
    let (period, figures) = read(&r, q, &f).await?;
    let tz = r.site.time_zone.tz();
    let rows = figures.series.iter().map(|p| {
        vec![
            stamp(p.at, tz),
            p.visitors().to_string(),
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
    timed(&r.state, r.started);
    let what = format!("{}_visits", period.resolution.as_str());
    Ok(csv_response(
        &name(&r.site, path.as_ref(), &period, &what),
        body,
    ))
}

pub(super) async fn pages(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let needle = q.page_filter()?.to_lowercase();
    let (period, figures) = read(&r, q, filters).await?;
    let rows = figures
        .top_pages()
        .into_iter()
        .filter(|(p, _)| needle.is_empty() || p.to_lowercase().contains(&needle))
        .map(|(path, f)| {
            vec![
                path.to_owned(),
                f.views.to_string(),
                fmt::percent(f.views, figures.views),
                f.entries.to_string(),
                f.exits.to_string(),
                f.visitors().to_string(),
            ]
        })
        .collect::<Vec<_>>();
    let body = csv::table(
        &[
            "path",
            "views",
            "share_percent",
            "entries",
            "exits",
            "visitors",
        ],
        rows,
    );
    timed(&r.state, r.started);
    Ok(csv_response(&name(&r.site, None, &period, "pages"), body))
}

/// A dimension's rows with the previous period's counts.
async fn dimension_rows(
    r: &SiteRequest,
    q: &ReportQuery,
    f: &Filters,
    d: Dimension,
) -> Result<(Period, Figures, Vec<(String, i64, i64)>), WebError> {
    let (period, now) = read(r, q, f).await?;
    let (before, _) = r
        .state
        .reads()
        .figures(&r.site, f, &period.previous())
        .await?;
    let was = |n: &str| {
        before
            .breakdowns
            .get(&d)
            .and_then(|m| m.get(n))
            .copied()
            .unwrap_or(0)
    };
    let rows = now
        .top(d)
        .into_iter()
        .map(|(n, c)| (n.to_owned(), c, was(n)))
        .collect();
    Ok((period, now, rows))
}

pub(super) async fn sources(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (f, path) = scoped(q, filters)?;
    let needle = q.source_filter()?.to_lowercase();
    let (period, now, rows) = dimension_rows(&r, q, &f, Dimension::Source).await?;
    let rows = rows
        .into_iter()
        .filter(|(n, _, _)| needle.is_empty() || n.to_lowercase().contains(&needle))
        .map(|(n, c, was)| {
            vec![
                n,
                c.to_string(),
                fmt::percent(c, now.views),
                c.to_string(),
                was.to_string(),
            ]
        })
        .collect::<Vec<_>>();
    let body = csv::table(
        &[
            "source",
            "views",
            "share_percent",
            "compared_views",
            "previous_period_views",
        ],
        rows,
    );
    timed(&r.state, r.started);
    Ok(csv_response(
        &name(&r.site, path.as_ref(), &period, "sources"),
        body,
    ))
}

pub(super) async fn breakdown(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let dimension = q.dimension()?;
    let (f, path) = scoped(q, filters)?;
    let (period, now, rows) = dimension_rows(&r, q, &f, dimension).await?;
    let total: i64 = rows.iter().map(|(_, c, _)| c).sum();
    let of = if dimension.covers_every_view() || dimension == Dimension::Event {
        total
    } else {
        now.views.max(total)
    };
    let count_column = if dimension == Dimension::Event {
        "events"
    } else {
        "views"
    };
    let rows = rows
        .into_iter()
        .map(|(n, c, was)| {
            vec![
                n,
                c.to_string(),
                fmt::percent(c, of),
                c.to_string(),
                was.to_string(),
            ]
        })
        .collect::<Vec<_>>();
    let body = csv::table(
        &[
            dimension.key(),
            count_column,
            "share_percent",
            &format!("compared_{count_column}"),
            &format!("previous_period_{count_column}"),
        ],
        rows,
    );
    timed(&r.state, r.started);
    Ok(csv_response(
        &name(&r.site, path.as_ref(), &period, dimension.key()),
        body,
    ))
}

pub(super) async fn goals(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (period, f) = read(&r, q, filters).await?;
    let rows = r
        .site
        .goals
        .iter()
        .map(|g| {
            let visits = match g {
                Goal::Event(n) => f.converting_events.get(n).copied().unwrap_or(0),
                Goal::Page(p) => f.converting_pages.get(p.as_str()).copied().unwrap_or(0),
            };
            vec![
                g.kind().to_owned(),
                g.name().to_owned(),
                visits.to_string(),
                fmt::percent(visits, f.visits),
            ]
        })
        .collect::<Vec<_>>();
    let body = csv::table(
        &[
            "kind",
            "goal",
            "converting_visits",
            "conversion_rate_percent",
        ],
        rows,
    );
    timed(&r.state, r.started);
    Ok(csv_response(&name(&r.site, None, &period, "goals"), body))
}

/// Views of the counted pages by `step` from `from` to `to`, from the
/// visits that may hold them: those that started on `from`'s UTC day or
/// later (a visit never crosses a UTC day).
async fn views_between(
    r: &SiteRequest,
    f: &Filters,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: TimeDelta,
) -> Result<Vec<Point>, WebError> {
    let counts = r
        .state
        .reads()
        .views_by_step(&r.site, f, (from, to), step)
        .await?;
    Ok(counts
        .into_iter()
        .enumerate()
        .map(|(i, views)| Point {
            at: from + step * i as i32,
            views,
        })
        .collect())
}

pub(super) async fn seconds(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (path, _) = q.page_of(&r.site)?;
    let f = with_page(filters, path.as_str())?;
    let minute = q.minute(r.site.time_zone.tz())?.ok_or_else(|| {
        WebError::Invalid(format!(
            "Choose a minute (minute=YYYY-MM-DDTHH:MM, {} time).",
            r.site.time_zone.name()
        ))
    })?;
    let minute = Resolution::Minute.floor(minute);
    let end = minute + TimeDelta::minutes(1);
    let points = views_between(&r, &f, minute, end, TimeDelta::seconds(1)).await?;
    Ok(csv_response(
        &format!(
            "{}_filtered_seconds.csv",
            file_stem(&r.site, Some(&path), minute, end)
        ),
        csv::series_in(&points, r.site.time_zone.tz()),
    ))
}

pub(super) async fn realtime(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (path, _) = q.page_of(&r.site)?;
    let f = with_page(filters, path.as_str())?;
    let period = Period::last_hour(r.state.clock.now(), r.site.time_zone.tz());
    let points = views_between(&r, &f, period.from, period.to, TimeDelta::minutes(1)).await?;
    Ok(csv_response(
        &format!(
            "{}_filtered_realtime.csv",
            file_stem(&r.site, Some(&path), period.from, period.to)
        ),
        csv::series_in(&points, r.site.time_zone.tz()),
    ))
}

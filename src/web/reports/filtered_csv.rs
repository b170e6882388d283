//! The CSV exports with `filter`: the same columns, read from the visit
//! store (`reports::filtered`); the file name says it is filtered.

use chrono::{DateTime, TimeDelta, Utc};

use super::shared::{csv_response, file_stem, with_page, CsvAnswer};
use super::*;
use crate::domain::{Filters, Goal, PagePath};
use crate::reports::filtered::Figures;
use crate::reports::{csv, Period, Point};
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

/// The file's name: filtered, and sampled when the counts are estimates
/// (`sampled`: the share of visitors read).
fn name(site: &Site, path: Option<&PagePath>, period: &Period, what: &str, sampled: f64) -> String {
    let sample = if sampled < 1.0 { "_sampled" } else { "" };
    format!(
        "{}_filtered{sample}_{what}.csv",
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
        &name(&r.site, path.as_ref(), &period, &what, figures.sampled),
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
    Ok(csv_response(
        &name(&r.site, None, &period, "pages", figures.sampled),
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
    Ok(csv_response(
        &name(&r.site, None, &period, "goals", f.sampled),
        body,
    ))
}

/// Views of the counted pages by `step` from `from` to `to`, from the
/// visits that may hold them: those that started on `from`'s UTC day or
/// later (a visit never crosses a UTC day); and the share of visitors read.
async fn views_between(
    r: &SiteRequest,
    f: &Filters,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: TimeDelta,
) -> Result<(Vec<Point>, f64), WebError> {
    let (counts, sampled) = r
        .state
        .reads()
        .views_by_step(&r.site, f, (from, to), step)
        .await?;
    let points = counts
        .into_iter()
        .enumerate()
        .map(|(i, views)| Point {
            at: from + step * i as i32,
            views,
        })
        .collect();
    Ok((points, sampled))
}

pub(super) async fn realtime(r: SiteRequest, q: &ReportQuery, filters: &Filters) -> CsvAnswer {
    let (path, _) = q.page_of(&r.site)?;
    let f = with_page(filters, path.as_str())?;
    let period = Period::last_hour(r.state.clock.now(), r.site.time_zone.tz());
    let (points, sampled) =
        views_between(&r, &f, period.from, period.to, TimeDelta::minutes(1)).await?;
    Ok(csv_response(
        &name(&r.site, Some(&path), &period, "realtime", sampled),
        csv::series_in(&points, r.site.time_zone.tz()),
    ))
}

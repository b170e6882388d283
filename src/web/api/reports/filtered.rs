//! The report endpoints with `filter`: the same bodies, read from the
//! visit store (`reports::filtered`) instead of the buckets, and the
//! funnel endpoint. What a filtered figure counts is said in
//! docs/segments.md; `period.filtered` says which filters and whether the
//! visits were sampled.

use chrono::TimeDelta;
use serde::Serialize;

use super::*;
use crate::domain::filter::Filters;
use crate::domain::Dimension;
use crate::reports::filtered::Figures;
use crate::reports::filtered_imported::Imported;
use crate::reports::filtered_read;

/// `period.filtered`: the filters applied, and the share of visitors read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FilteredBody {
    filters: Vec<String>,
    /// The share of visitors whose visits were read, 0 to 1 (1: all of
    /// them); counts are scaled up by its inverse.
    sampled: f64,
    /// Set when the site has imports: whether their figures count under
    /// these filters, and if not why (docs/segments.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    imported: Option<String>,
    /// With `imported`: whether imported figures are in the counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    imported_counted: Option<bool>,
}

/// What `period.filtered` says of imports.
enum ImportedSaid {
    /// A filtered report's: what it did with them.
    Report(Option<Imported>),
    /// A funnel's: imports are always left out.
    Funnel,
}

async fn period_body(
    state: &WebState,
    site: &Site,
    q: &Q,
    filters: &Filters,
    sampled: f64,
    imported: ImportedSaid,
) -> Result<(Period, PeriodBody), ApiError> {
    let (period, coarsened) = q.period(state, site)?;
    let (imported, imported_counted) = match imported {
        ImportedSaid::Report(i) => (
            i.as_ref().map(Imported::note),
            i.as_ref().map(Imported::counted),
        ),
        ImportedSaid::Funnel => {
            let note = filtered_read::imported_note(&state.store, site).await?;
            let counted = note.as_ref().map(|_| false);
            (note, counted)
        }
    };
    let body = PeriodBody {
        filtered: Some(FilteredBody {
            filters: filters.iter().map(ToString::to_string).collect(),
            sampled,
            imported,
            imported_counted,
        }),
        ..PeriodBody::new(&period, coarsened.as_ref())
    };
    Ok((period, body))
}

/// `filters` and the page `path` names (a report of one page).
fn with_page(filters: &Filters, path: &NamedPath) -> Result<Option<Filters>, ApiError> {
    let NamedPath::Page(p) = path else {
        return Ok(None);
    };
    let filters = crate::reports::request::with_page(filters, p.as_str()).map_err(|e| {
        ApiError::BadParameter {
            parameter: "path",
            message: format!("That page cannot be filtered on: {e}."),
        }
    })?;
    Ok(Some(filters))
}

/// The figures of `filters` over the asked period (none for a path no page
/// can have), what was done with imported figures, and the previous
/// period's figures.
async fn read_both(
    state: &WebState,
    site: &Site,
    q: &Q,
    filters: Option<&Filters>,
) -> Result<(Figures, Option<Imported>, Figures), ApiError> {
    let (period, _) = q.period(state, site)?;
    let before = period.previous();
    match filters {
        None => Ok((
            Figures::none(&period.points()),
            None,
            Figures::none(&before.points()),
        )),
        Some(f) => {
            let ((now, imported), before) =
                state.reads().figures_and_before(site, f, &period).await?;
            Ok((now, imported, before))
        }
    }
}

fn series_of(figures: &Figures, period: &Period, now: DateTime<Utc>) -> (i64, Vec<PointBody>) {
    let points = figures
        .series
        .iter()
        .map(|p| PointBody {
            at: p.at,
            views: p.views,
            partial: period.is_partial(p.at, now),
        })
        .collect::<Vec<_>>();
    (points.iter().map(|p| p.views).sum(), points)
}

pub(super) async fn site_series(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let (period, _) = q.period(state, site)?;
    let (figures, imported) = state.reads().figures(site, filters, &period).await?;
    let said = ImportedSaid::Report(imported);
    let (_, body) = period_body(state, site, q, filters, figures.sampled, said).await?;
    let (total, points) = series_of(&figures, &period, state.clock.now());
    Ok(ok(&SeriesBody {
        site: site.id.to_string(),
        path: None,
        period: body,
        total,
        points,
    }))
}

pub(super) async fn page_series(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let path = q.path()?;
    let (period, _) = q.period(state, site)?;
    let (figures, imported) = match with_page(filters, &path)? {
        Some(f) => state.reads().figures(site, &f, &period).await?,
        None => (Figures::none(&period.points()), None),
    };
    let said = ImportedSaid::Report(imported);
    let (_, body) = period_body(state, site, q, filters, figures.sampled, said).await?;
    let (total, points) = series_of(&figures, &period, state.clock.now());
    Ok(ok(&SeriesBody {
        site: site.id.to_string(),
        path: Some(path.shown().to_owned()),
        period: body,
        total,
        points,
    }))
}

/// One minute of a page by second: the visits that may hold a view in it
/// started on the same UTC day (a visit never crosses one), before its end.
pub(super) async fn page_seconds(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let path = q.path()?;
    let minute = Resolution::Minute.floor(q.minute()?);
    let end = minute + TimeDelta::minutes(1);
    let mut seconds = [0i64; 60];
    if let Some(f) = with_page(filters, &path)? {
        let counts = state
            .reads()
            .views_by_step(site, &f, (minute, end), TimeDelta::seconds(1))
            .await?;
        for (s, n) in seconds.iter_mut().zip(counts) {
            *s = n;
        }
    }
    Ok(ok(&SecondsBody {
        site: site.id.to_string(),
        path: path.shown().to_owned(),
        minute,
        total: seconds.iter().sum(),
        points: seconds
            .iter()
            .enumerate()
            .map(|(s, views)| SecondPoint {
                at: minute + TimeDelta::seconds(s as i64),
                views: *views,
            })
            .collect(),
    }))
}

pub(super) async fn top_pages(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let needle = q.page_filter()?.to_lowercase();
    let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = q.offset()?;
    let (period, _) = q.period(state, site)?;
    let (figures, imported) = state.reads().figures(site, filters, &period).await?;
    let said = ImportedSaid::Report(imported);
    let (_, body) = period_body(state, site, q, filters, figures.sampled, said).await?;
    let matching: Vec<_> = figures
        .top_pages()
        .into_iter()
        .filter(|(path, _)| needle.is_empty() || path.to_lowercase().contains(&needle))
        .collect();
    let pages = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(path, f)| PageEntry {
            path: (*path).to_owned(),
            views: f.views,
            share: share(f.views, figures.views),
            visitors: Some(f.visitors()),
            entries: f.entries,
            exits: f.exits,
        })
        .collect();
    Ok(ok(&PagesBody {
        site: site.id.to_string(),
        period: body,
        total: figures.views,
        matching: matching.len(),
        pages,
    }))
}

/// What a filtered report's changes compare: the whole period with the
/// whole period before (no hours to widen to).
fn compared(period: &Period) -> (Covered, ComparedBody) {
    let before = period.previous();
    (
        Covered {
            from: period.from,
            to: period.to,
        },
        ComparedBody {
            from: period.from,
            to: period.to,
            previous_from: before.from,
            previous_to: before.to,
        },
    )
}

/// The filters of a report of the site or (with `path`) of one page;
/// `None` for a path no page can have.
fn scoped(filters: &Filters, path: Option<&NamedPath>) -> Result<Option<Filters>, ApiError> {
    match path {
        None => Ok(Some(filters.clone())),
        Some(p) => with_page(filters, p),
    }
}

pub(super) async fn top_sources(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let path = q.optional_path()?;
    let needle = q.source_filter()?.to_lowercase();
    let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = q.offset()?;
    let (period, _) = q.period(state, site)?;
    let scope = scoped(filters, path.as_ref())?;
    let (now, imported, before) = read_both(state, site, q, scope.as_ref()).await?;
    let said = ImportedSaid::Report(imported);
    let (_, body) = period_body(state, site, q, filters, now.sampled, said).await?;
    let rows = now.top(Dimension::Source);
    let was = before.top(Dimension::Source);
    let was_of = |name: &str| was.iter().find(|(n, _)| *n == name).map_or(0, |(_, c)| *c);
    let total: i64 = rows.iter().map(|(_, c)| c).sum();
    let total_before: i64 = was.iter().map(|(_, c)| c).sum();
    let matching: Vec<_> = rows
        .iter()
        .filter(|(n, _)| needle.is_empty() || n.to_lowercase().contains(&needle))
        .collect();
    let sources = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(name, views)| SourceEntry {
            source: (*name).to_owned(),
            views: *views,
            share: share(*views, now.views),
            compared_views: *views,
            previous_period_views: was_of(name),
        })
        .collect();
    let (covered, compared) = compared(&period);
    Ok(ok(&SourcesBody {
        site: site.id.to_string(),
        path: path.as_ref().map(|p| p.shown().to_owned()),
        period: body,
        covered,
        compared,
        views: now.views,
        total,
        other: 0,
        none: NoSource {
            views: now.views - total,
            share: share(now.views - total, now.views),
            compared_views: now.views - total,
            previous_period_views: before.views - total_before,
        },
        matching: matching.len(),
        sources,
    }))
}

pub(super) async fn breakdown(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let dimension = q.dimension()?;
    let path = q.optional_path()?;
    let limit = q.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = q.offset()?;
    let (period, _) = q.period(state, site)?;
    let scope = scoped(filters, path.as_ref())?;
    let (now, imported, before) = read_both(state, site, q, scope.as_ref()).await?;
    let said = ImportedSaid::Report(imported);
    let (_, body) = period_body(state, site, q, filters, now.sampled, said).await?;
    let rows = now.top(dimension);
    let was = before.top(dimension);
    let was_of = |name: &str| was.iter().find(|(n, _)| *n == name).map_or(0, |(_, c)| *c);
    let total: i64 = rows.iter().map(|(_, c)| c).sum();
    let of = if dimension.covers_every_view() || dimension == Dimension::Event {
        total
    } else {
        now.views.max(total)
    };
    let entries = rows
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(name, count)| BreakdownEntry {
            name: (*name).to_owned(),
            count: *count,
            share: share(*count, of),
            compared_count: *count,
            previous_period_count: was_of(name),
        })
        .collect();
    let (covered, compared) = compared(&period);
    Ok(ok(&BreakdownBody {
        site: site.id.to_string(),
        path: path.as_ref().map(|p| p.shown().to_owned()),
        period: body,
        dimension: dimension.key(),
        covered,
        compared,
        of,
        total,
        other: 0,
        matching: rows.len(),
        entries,
    }))
}

pub(super) async fn visits(state: &WebState, site: &Site, q: &Q, filters: &Filters) -> Reply {
    let path = q.optional_path()?;
    let (period, _) = q.period(state, site)?;
    let scope = scoped(filters, path.as_ref())?;
    let (figures, imported) = match &scope {
        Some(f) => state.reads().figures(site, f, &period).await?,
        None => (Figures::none(&[]), None),
    };
    let said = ImportedSaid::Report(imported);
    let (_, body) = period_body(state, site, q, filters, figures.sampled, said).await?;
    let visits = figures.visits;
    let ratio = |n: i64| (visits > 0).then(|| n as f64 / visits as f64);
    Ok(ok(&VisitsBody {
        site: site.id.to_string(),
        path: path.as_ref().map(|p| p.shown().to_owned()),
        period: body,
        visitors: Some(figures.visitors()),
        visits,
        views: figures.views,
        bounces: figures.bounces,
        duration_seconds: figures.duration_secs,
        exits: match &path {
            Some(p) => Some(figures.pages.get(p.shown()).map_or(0, |f| f.exits)),
            None => None,
        },
        views_per_visit: ratio(figures.views),
        bounce_rate: ratio(figures.bounces),
        visit_duration: ratio(figures.duration_secs),
        counted_since: None,
    }))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunnelBody {
    site: String,
    period: PeriodBody,
    steps: Vec<FunnelStepBody>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunnelStepBody {
    step: String,
    /// Visits that reached this step after every step before it, in order,
    /// within the visit.
    visits: i64,
    /// Of the previous step's visits, 0 to 1 (the first step: 1, or null
    /// without visits).
    conversion_from_previous: Option<f64>,
    /// Of the first step's visits, 0 to 1.
    conversion_from_start: Option<f64>,
    /// The previous step's visits that did not reach this one.
    drop_off: i64,
}

/// `GET /api/v1/sites/{id}/funnel?step=/pricing&step=event:Signup`: an
/// ad-hoc funnel of 2 to 8 steps over the period, with the filters.
pub async fn funnel(state: Data, client: ApiClient, id: Id, q: Q) -> Reply {
    let site = client.site(&state, &id)?;
    let filters = q.filters()?;
    let steps = q.funnel_steps()?;
    let (period, _) = q.period(&state, &site)?;
    let figures = state
        .reads()
        .funnel(&site, &filters, &steps, &period)
        .await?;
    let said = ImportedSaid::Funnel;
    let (_, body) = period_body(&state, &site, &q, &filters, figures.sampled, said).await?;
    Ok(ok(&FunnelBody {
        site: site.id.to_string(),
        period: body,
        steps: (0..figures.steps.len())
            .map(|i| FunnelStepBody {
                step: figures.steps[i].step.clone(),
                visits: figures.steps[i].visits,
                conversion_from_previous: figures.from_previous(i),
                conversion_from_start: figures.from_start(i),
                drop_off: figures.drop_off(i),
            })
            .collect(),
    }))
}

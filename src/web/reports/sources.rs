//! "Top sources" on the dashboard and the page report, and its CSV.

use super::exports::{csv_response, file_stem, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::Page;
use crate::reports::sources::{
    covered_views, matching, top_sources, SourceScope, SourceShares, SourceTotals, NONE_ROW,
};
use crate::reports::{csv, Period};
use crate::web::fmt;
use chrono::{DateTime, Utc};

pub struct SourceRow {
    pub name: String,
    /// The link that adds it as a filter (named sources only).
    pub href: Option<String>,
    pub views: i64,
    /// Share of every view of the hours the sources cover.
    pub share: String,
    /// Against the same source (or row) in the previous period.
    pub change: String,
}

/// The panel: rows matching the filter, and what they were read from.
pub struct SourcesView {
    pub rows: Vec<SourceRow>,
    /// Without a filter: the views of sources beyond a bucket's cap and
    /// those without a known source, when there are any.
    pub rest: Vec<SourceRow>,
    /// Every view of the hours the sources cover.
    pub views: i64,
    /// Views with a known source in them.
    pub total: i64,
    pub filter: String,
    pub csv: String,
    /// Set when the sources cover more than the range (whole hours).
    pub widened: Option<String>,
}

/// The sources of a period, and of the stretches its rows' changes
/// compare (`breakdowns::Stretches`).
pub(crate) struct ComparedTotals {
    pub now: SourceTotals,
    /// The complete part of a running period; `None`: all of it.
    pub compared: Option<SourceTotals>,
    pub before: SourceTotals,
}

/// [`ComparedTotals`] with the views of the hours each covers.
pub(crate) struct ComparedShares {
    pub now: SourceShares,
    compared: Option<SourceShares>,
    pub before: SourceShares,
}

impl ComparedShares {
    /// No sources and no views (a page that does not exist).
    pub fn nothing(period: &Period, now: DateTime<Utc>) -> Self {
        let stretches = super::breakdowns::Stretches::of(period, now);
        let none = |(from, to)| SourceShares::new(SourceTotals::none(from, to), 0);
        ComparedShares {
            now: none((period.from, period.to)),
            compared: stretches.running.then(|| none(stretches.current)),
            before: none(stretches.previous),
        }
    }

    /// The current side of each row's change.
    pub fn compared_now(&self) -> &SourceShares {
        self.compared.as_ref().unwrap_or(&self.now)
    }
}

/// Sources over `[from, to)`; none for an empty stretch.
async fn sources_in(
    state: &WebState,
    scope: SourceScope<'_>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<SourceTotals, mongodb::error::Error> {
    if from >= to {
        return Ok(SourceTotals::none(from, to));
    }
    top_sources(&state.store, scope, from, to).await
}

/// Sources of the period and of the stretches its rows compare, read
/// together (the buckets alone: [`shares`] adds the views of the same
/// hours).
pub(crate) async fn read(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
) -> Result<ComparedTotals, mongodb::error::Error> {
    let stretches = super::breakdowns::Stretches::of(period, state.clock.now());
    let compared = async {
        if stretches.running {
            sources_in(state, scope, stretches.current).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let (now, compared, before) = tokio::try_join!(
        sources_in(state, scope, (period.from, period.to)),
        compared,
        sources_in(state, scope, stretches.previous),
    )?;
    Ok(ComparedTotals {
        now,
        compared,
        before,
    })
}

/// Every view of the hours `totals` covers (none for an empty stretch).
async fn views_in(
    state: &WebState,
    scope: SourceScope<'_>,
    totals: &SourceTotals,
) -> Result<i64, mongodb::error::Error> {
    if totals.from >= totals.to {
        return Ok(0);
    }
    covered_views(&state.store, &scope.views(), (totals.from, totals.to)).await
}

/// The views of the hours `totals` covers: `known`, the report's own count
/// of `period`, when those are the period's hours (an hour-aligned range),
/// else read.
async fn views_of(
    state: &WebState,
    scope: SourceScope<'_>,
    totals: &SourceTotals,
    period: &Period,
    known: Option<i64>,
) -> Result<i64, mongodb::error::Error> {
    match known {
        Some(views) if (totals.from, totals.to) == (period.from, period.to) => Ok(views),
        _ => covered_views(&state.store, &scope.views(), (totals.from, totals.to)).await,
    }
}

/// [`read`]'s sources with the views of the same hours. `known` holds the
/// views of the period and of the previous one where the report has read
/// them already, so an hour-aligned range costs no further read.
pub(crate) async fn shares(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
    read: ComparedTotals,
    known: Option<(i64, i64)>,
) -> Result<ComparedShares, mongodb::error::Error> {
    let before = period.previous();
    let compared_views = async {
        match &read.compared {
            Some(totals) => views_in(state, scope, totals).await.map(Some),
            None => Ok(None),
        }
    };
    let (now, compared, then) = tokio::try_join!(
        views_of(state, scope, &read.now, period, known.map(|k| k.0)),
        compared_views,
        views_of(state, scope, &read.before, &before, known.map(|k| k.1)),
    )?;
    Ok(ComparedShares {
        now: SourceShares::new(read.now, now),
        compared: read
            .compared
            .zip(compared)
            .map(|(totals, views)| SourceShares::new(totals, views)),
        before: SourceShares::new(read.before, then),
    })
}

/// Sources and views of the period and the stretches its rows compare,
/// all read together (`sources.csv` and the API, which read no series of
/// their own).
pub(crate) async fn read_shares(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
) -> Result<ComparedShares, mongodb::error::Error> {
    let read = read(state, scope, period).await?;
    shares(state, scope, period, read, None).await
}

/// The rows after the named sources when no filter is set, each when it
/// has views: the sources beyond the cap (named `other`) and [`NONE_ROW`],
/// as (name, views, the compared views now and before).
fn rest_rows<'a>(read: &ComparedShares, other: &'a str) -> Vec<(&'a str, i64, i64, i64)> {
    let (current, compared, previous) = (&read.now, read.compared_now(), &read.before);
    [
        (
            other,
            current.sources.other,
            compared.sources.other,
            previous.sources.other,
        ),
        (
            NONE_ROW,
            current.without_source(),
            compared.without_source(),
            previous.without_source(),
        ),
    ]
    .into_iter()
    .filter(|(_, views, _, _)| *views > 0)
    .collect()
}

/// At most this many rows on a page; the CSV has them all.
const SHOWN: usize = 20;

pub(super) fn view(
    read: &ComparedShares,
    period: &Period,
    filter: String,
    csv: String,
) -> SourcesView {
    let (current, compared, previous) = (&read.now, read.compared_now(), &read.before);
    let row = |name: String, views: i64, (is, was): (i64, i64)| SourceRow {
        name,
        href: None,
        views,
        share: fmt::share(views, current.views),
        change: fmt::row_change(views, is, was),
    };
    let rows = matching(&current.sources, &filter)
        .into_iter()
        .take(SHOWN)
        .map(|(source, views)| {
            row(
                source.to_string(),
                *views,
                (
                    compared.sources.views_of(source),
                    previous.sources.views_of(source),
                ),
            )
        })
        .collect();
    // A filter matches names; these rows have none.
    let rest = if filter.is_empty() {
        rest_rows(read, "(other sources)")
            .into_iter()
            .map(|(name, views, is, was)| row(name.to_owned(), views, (is, was)))
            .collect()
    } else {
        Vec::new()
    };
    let (from, to) = (current.sources.from, current.sources.to);
    let widened = (from < period.from || to > period.to).then(|| {
        format!(
            "Sources are kept by the hour: these figures cover {} to {}.",
            fmt::local(&from, period.zone),
            fmt::local(&to, period.zone)
        )
    });
    SourcesView {
        rows,
        rest,
        views: current.views,
        total: current.sources.total,
        filter,
        csv,
        widened,
    }
}

/// `GET /sites/{id}/sources.csv` (site, or page with `path`): every
/// source of the range, with share and the previous period's views.
pub async fn sources_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // A long range of a site whose totals are being built: what is being
    // prepared, not a 503.
    let site = r.site.clone();
    sources_csv_of(CsvRequest(r), q)
        .await
        .map_err(|e| e.unless_preparing(&site))
}

async fn sources_csv_of(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // Filtered: the same columns from the visit store.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered_csv::sources(r, &q, &filters).await;
    }
    let (state, site, started) = (r.state, r.site, r.started);
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let filter = q.source_filter()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let read = read_shares(&state, scope, &period).await?;
    let (current, compared, previous) = (&read.now, read.compared_now(), &read.before);
    let named = matching(&current.sources, &filter)
        .into_iter()
        .map(|(source, views)| {
            (
                source.as_str(),
                *views,
                compared.sources.views_of(source),
                previous.sources.views_of(source),
            )
        });
    let rest = if filter.is_empty() {
        rest_rows(&read, "(other)")
    } else {
        Vec::new()
    };
    let rows = named.chain(rest).map(|(name, views, is, before)| {
        vec![
            name.to_owned(),
            views.to_string(),
            fmt::percent(views, current.views),
            is.to_string(),
            before.to_string(),
        ]
    });
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
    timed(&state, started);
    Ok(csv_response(
        &format!(
            "{}_sources.csv",
            file_stem(&site, path.as_ref(), period.from, period.to)
        ),
        body,
    ))
}

//! "Top sources" on the dashboard and the page report, and its CSV.

use super::exports::{csv_response, file_stem, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::Page;
use crate::reports::sources::{
    covered, covered_views, matching, top_sources, SourceScope, SourceShares, SourceTotals,
    NONE_ROW,
};
use crate::reports::{csv, Period};
use crate::web::fmt;

pub struct SourceRow {
    pub name: String,
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

/// Sources of the period and the previous one, read together (the buckets
/// alone: [`shares`] adds the views of the same hours).
pub(crate) async fn read(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
) -> Result<(SourceTotals, SourceTotals), mongodb::error::Error> {
    let before = period.previous();
    tokio::try_join!(
        top_sources(&state.store, scope, period.from, period.to),
        top_sources(&state.store, scope, before.from, before.to),
    )
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
    (current, previous): (SourceTotals, SourceTotals),
    known: Option<(i64, i64)>,
) -> Result<(SourceShares, SourceShares), mongodb::error::Error> {
    let before = period.previous();
    let (now, then) = tokio::try_join!(
        views_of(state, scope, &current, period, known.map(|k| k.0)),
        views_of(state, scope, &previous, &before, known.map(|k| k.1)),
    )?;
    Ok((
        SourceShares::new(current, now),
        SourceShares::new(previous, then),
    ))
}

/// Sources and views of the period and the previous one, all read
/// together (`sources.csv` and the API, which read no series of their own).
pub(crate) async fn read_shares(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
) -> Result<(SourceShares, SourceShares), mongodb::error::Error> {
    let before = period.previous();
    let views = scope.views();
    let ((current, previous), now, then) = tokio::try_join!(
        read(state, scope, period),
        covered_views(&state.store, &views, covered(period.from, period.to)),
        covered_views(&state.store, &views, covered(before.from, before.to)),
    )?;
    Ok((
        SourceShares::new(current, now),
        SourceShares::new(previous, then),
    ))
}

/// The rows after the named sources when no filter is set, each when it
/// has views: the sources beyond the cap (named `other`) and [`NONE_ROW`],
/// as (name, views, the previous period's views).
fn rest_rows<'a>(
    current: &SourceShares,
    previous: &SourceShares,
    other: &'a str,
) -> Vec<(&'a str, i64, i64)> {
    [
        (other, current.sources.other, previous.sources.other),
        (
            NONE_ROW,
            current.without_source(),
            previous.without_source(),
        ),
    ]
    .into_iter()
    .filter(|(_, views, _)| *views > 0)
    .collect()
}

/// At most this many rows on a page; the CSV has them all.
const SHOWN: usize = 20;

pub(super) fn view(
    current: &SourceShares,
    previous: &SourceShares,
    period: &Period,
    filter: String,
    csv: String,
) -> SourcesView {
    let row = |name: String, views: i64, before: i64| SourceRow {
        name,
        views,
        share: fmt::share(views, current.views),
        change: fmt::change(views, before),
    };
    let rows = matching(&current.sources, &filter)
        .into_iter()
        .take(SHOWN)
        .map(|(source, views)| {
            row(
                source.to_string(),
                *views,
                previous.sources.views_of(source),
            )
        })
        .collect();
    // A filter matches names; these rows have none.
    let rest = if filter.is_empty() {
        rest_rows(current, previous, "(other sources)")
            .into_iter()
            .map(|(name, views, before)| row(name.to_owned(), views, before))
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
    let (state, site, started) = (r.state, r.site, r.started);
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let filter = q.source_filter()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let (current, previous) = read_shares(&state, scope, &period).await?;
    let named = matching(&current.sources, &filter)
        .into_iter()
        .map(|(source, views)| (source.as_str(), *views, previous.sources.views_of(source)));
    let rest = if filter.is_empty() {
        rest_rows(&current, &previous, "(other)")
    } else {
        Vec::new()
    };
    let rows = named.chain(rest).map(|(name, views, before)| {
        vec![
            name.to_owned(),
            views.to_string(),
            fmt::percent(views, current.views),
            before.to_string(),
        ]
    });
    let body = csv::table(
        &["source", "views", "share_percent", "previous_period_views"],
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

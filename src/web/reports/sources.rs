//! "Top sources" on the dashboard and the page report, and its CSV.

use super::exports::{csv_response, file_stem, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::Page;
use crate::reports::sources::{matching, top_sources, SourceScope, SourceTotals};
use crate::reports::{csv, Period};
use crate::web::fmt;

pub struct SourceRow {
    pub name: String,
    pub views: i64,
    /// Share of the views with a known source.
    pub share: String,
    /// Against the same source in the previous period.
    pub change: String,
}

/// The panel: rows matching the filter, and what they were read from.
pub struct SourcesView {
    pub rows: Vec<SourceRow>,
    /// Views of sources beyond a bucket's cap.
    pub other: i64,
    /// Views with a known source in the period.
    pub total: i64,
    pub filter: String,
    pub csv: String,
    /// Set when the sources cover more than the range (whole hours).
    pub widened: Option<String>,
}

/// Sources of the period and the previous one, read together.
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

/// At most this many rows on a page; the CSV has them all.
const SHOWN: usize = 20;

pub(super) fn view(
    current: &SourceTotals,
    previous: &SourceTotals,
    period: &Period,
    filter: String,
    csv: String,
) -> SourcesView {
    let rows = matching(current, &filter)
        .into_iter()
        .take(SHOWN)
        .map(|(source, views)| SourceRow {
            name: source.to_string(),
            views: *views,
            share: fmt::share(*views, current.total),
            change: fmt::change(*views, previous.views_of(source)),
        })
        .collect();
    let widened = (current.from < period.from || current.to > period.to).then(|| {
        format!(
            "Sources are kept by the hour: they cover {} to {}.",
            fmt::local(&current.from, period.zone),
            fmt::local(&current.to, period.zone)
        )
    });
    SourcesView {
        rows,
        other: current.other,
        total: current.total,
        filter,
        csv,
        widened,
    }
}

/// `GET /sites/{id}/sources.csv` (site, or page with `path`): every
/// source of the range, with share and the previous period's views.
pub async fn sources_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site, started) = (r.state, r.site, r.started);
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let filter = q.source_filter()?;
    // Empty is absent, as in the API: the whole site.
    let path = match q.path.as_deref() {
        Some(p) if !p.is_empty() => Some(q.path()?),
        _ => None,
    };
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = match &page {
        Some(page) => SourceScope::Page(page),
        None => SourceScope::Site(&site.domain),
    };
    let (current, previous) = read(&state, scope, &period).await?;
    let mut rows: Vec<Vec<String>> = matching(&current, &filter)
        .into_iter()
        .map(|(source, views)| {
            vec![
                source.to_string(),
                views.to_string(),
                fmt::percent(*views, current.total),
                previous.views_of(source).to_string(),
            ]
        })
        .collect();
    if current.other > 0 && filter.is_empty() {
        rows.push(vec![
            "(other)".into(),
            current.other.to_string(),
            fmt::percent(current.other, current.total),
            previous.other.to_string(),
        ]);
    }
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

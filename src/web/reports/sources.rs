//! "Top sources" on the dashboard and the page report, and its CSV.

use super::shared::{file_stem, report_csv, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::Page;
use crate::reports::engine::{self, Panel};
use crate::reports::request::ReportRequest;
use crate::reports::sources::{SourceScope, NONE_ROW};
use crate::reports::{csv, Period};
use crate::web::fmt;

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
    /// Named sources matching the filter, shown or not: beyond the top
    /// [`SHOWN`] the panel links the whole list (its CSV).
    pub names: usize,
    pub csv: String,
    /// Set when the sources cover more than the range (whole hours).
    pub widened: Option<String>,
}

/// At most this many rows on a page; the CSV has them all.
const SHOWN: usize = 20;

/// The panel from the engine's sources panel: the rows matching `filter`
/// and, without a filter, the views of sources beyond a bucket's cap and
/// those without a known source ([`NONE_ROW`]), when there are any.
pub(super) fn view(panel: &Panel, period: &Period, filter: String, csv: String) -> SourcesView {
    let row = |name: String, r: &engine::Row| SourceRow {
        name,
        href: None,
        views: r.count,
        share: fmt::share(r.count, panel.of),
        change: fmt::row_change(r.count, r.compared, r.previous),
    };
    let named = panel.matching(&filter);
    let names = named.len();
    let rows = named
        .into_iter()
        .take(SHOWN)
        .map(|r| row(r.name.clone(), r))
        .collect();
    // A filter matches names; these rows have none.
    let rest = [
        ("(other sources)", &panel.other),
        (NONE_ROW, &panel.unnamed),
    ]
    .into_iter()
    .filter(|(_, r)| filter.is_empty() && r.count > 0)
    .map(|(name, r)| row(name.to_owned(), r))
    .collect();
    let (from, to) = panel.covered;
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
        views: panel.views,
        total: panel.total,
        filter,
        names,
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
    let filters = q.filters()?;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let filter = q.source_filter()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let request =
        ReportRequest::new(&state.store, scope, &period, state.clock.now()).filtered(&filters);
    let panel = engine::sources(&state.reads(), &site, &request)
        .await
        .map_err(WebError::from)?;
    let named = panel
        .matching(&filter)
        .into_iter()
        .map(|r| (r.name.as_str(), r.count, r.compared, r.previous));
    let rest = [("(other)", &panel.other), (NONE_ROW, &panel.unnamed)]
        .into_iter()
        .filter(|(_, r)| filter.is_empty() && r.count > 0)
        .map(|(name, r)| (name, r.count, r.compared, r.previous));
    let rows = named.chain(rest).map(|(name, views, is, before)| {
        vec![
            name.to_owned(),
            views.to_string(),
            fmt::percent(views, panel.of),
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
    let stem = file_stem(&site, path.as_ref(), period.from, period.to);
    Ok(report_csv(&state, &stem, &panel.said, "sources", body))
}

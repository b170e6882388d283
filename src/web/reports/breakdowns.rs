//! The breakdown panels of the dashboard and the page report (devices,
//! countries, campaigns, events), and `breakdown.csv`.

use super::shared::{
    country_label, file_stem, report_csv, BreakdownRow, BreakdownTable, BreakdownsView, CsvAnswer,
    CsvRequest,
};
use super::*;
use crate::domain::{Dimension, Page};
use crate::ingest::freshness::Lags;
use crate::reports::engine::{self, Panel};
use crate::reports::request::ReportRequest;
use crate::reports::sources::SourceScope;
use crate::reports::{csv, Period};
use crate::storage::progress::Stream;
use crate::web::fmt;

use super::shared::SHOWN;

/// A dimension's panel: its top rows (the "(other)" row of the names
/// beyond a bucket's cap last), each with its share and change.
fn table(dimension: Dimension, panel: &Panel, csv: String) -> BreakdownTable {
    let row = |name: String, r: &engine::Row| BreakdownRow {
        value: name.clone(),
        href: None,
        name: match dimension {
            Dimension::Country => country_label(&name),
            _ => name,
        },
        count: r.count,
        share: fmt::share(r.count, panel.of),
        change: fmt::row_change(r.count, r.compared, r.previous),
    };
    let mut rows: Vec<BreakdownRow> = panel
        .rows
        .iter()
        .take(SHOWN)
        .map(|r| row(r.name.clone(), r))
        .collect();
    if panel.other.count > 0 {
        // No filter names the names beyond the cap.
        rows.push(row("(other)".to_owned(), &panel.other));
    }
    BreakdownTable {
        key: dimension.key(),
        title: dimension.title(),
        rows,
        total: panel.total,
        names: panel.rows.len(),
        csv,
    }
}

/// The dimensions of the panels, in the order they are read.
pub(super) use crate::reports::compared::PANELS;

/// The panels, from the engine's panels of [`PANELS`] (in that order);
/// `csv`: the address of a dimension's CSV (empty: none).
pub(super) fn view(
    lags: &Lags,
    panels: &[Panel],
    period: &Period,
    csv: impl Fn(Dimension) -> String,
) -> BreakdownsView {
    let mut t = PANELS
        .iter()
        .zip(panels)
        .map(|(d, panel)| table(*d, panel, csv(*d)));
    let mut next = |n: usize| t.by_ref().take(n).collect::<Vec<_>>();
    let (devices, countries, campaigns, events) = (next(3), next(1), next(2), next(1));
    let widened = panels.first().and_then(|p| {
        let (from, to) = p.covered;
        (from < period.from || to > period.to).then(|| {
            format!(
                "Breakdowns are kept by the hour: these figures cover {} to {}.",
                fmt::local(&from, period.zone),
                fmt::local(&to, period.zone)
            )
        })
    });
    BreakdownsView {
        devices,
        countries,
        campaigns,
        events,
        widened,
        lag: lag(lags, panels),
    }
}

/// How far the breakdowns (and sources) trail the views, when their
/// stream is past its window. Behind for another stream (the hours and
/// days, or the visit store of filtered panels) is said at the top of the
/// report, once.
pub fn lag(lags: &Lags, panels: &[Panel]) -> Option<String> {
    let behind = lags.behind(panels.first()?.said.streams)?;
    (behind.stream == Stream::Sources).then(|| behind_words(behind))
}

/// `GET /sites/{id}/breakdown.csv?dimension=<key>` (site, or page with
/// `path`): every name of one dimension over the range, with its share and
/// the previous period's count.
pub async fn breakdown_csv(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    // A long range of a site whose totals are being built: what is being
    // prepared, not a 503.
    let site = r.site.clone();
    breakdown_csv_of(CsvRequest(r), q)
        .await
        .map_err(|e| e.unless_preparing(&site))
}

async fn breakdown_csv_of(CsvRequest(r): CsvRequest, q: Query) -> CsvAnswer {
    let (state, site, started) = (r.state, r.site, r.started);
    let filters = q.filters()?;
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let dimension = q.dimension()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let request =
        ReportRequest::new(&state.store, scope, &period, state.clock.now()).filtered(&filters);
    let panel = engine::dimension(&state.reads(), &site, &request, dimension)
        .await
        .map_err(WebError::from)?;
    let named = panel
        .rows
        .iter()
        .map(|r| (r.name.as_str(), r.count, r.compared, r.previous));
    let other = (panel.other.count > 0).then_some((
        "(other)",
        panel.other.count,
        panel.other.compared,
        panel.other.previous,
    ));
    let rows = named.chain(other).map(|(name, count, is, before)| {
        vec![
            name.to_owned(),
            count.to_string(),
            fmt::percent(count, panel.of),
            is.to_string(),
            before.to_string(),
        ]
    });
    let count_column = if dimension == Dimension::Event {
        "events"
    } else {
        "views"
    };
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
    timed(&state, started);
    let stem = file_stem(&site, path.as_ref(), period.from, period.to);
    Ok(report_csv(
        &state,
        &stem,
        &panel.said,
        dimension.key(),
        body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn countries_show_their_name_beside_the_code() {
        assert_eq!(country_label("DE"), "Germany (DE)");
        assert_eq!(country_label("unknown"), "unknown");
        assert_eq!(country_label("de"), "de");
    }
}

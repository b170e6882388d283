//! The breakdown panels of the dashboard and the page report (devices,
//! countries, campaigns, events; issue 20), and `breakdown.csv`.

use super::exports::{csv_response, file_stem, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::{Dimension, Page};
use crate::reports::breakdowns::{self, Breakdown, NameTotals};
use crate::reports::sources::{covered, covered_views, SourceScope};
use crate::reports::{csv, Period};
use crate::web::fmt;

pub struct BreakdownRow {
    pub name: String,
    pub count: i64,
    pub share: String,
    pub change: String,
}

/// One dimension's table.
pub struct BreakdownTable {
    pub key: &'static str,
    pub title: &'static str,
    pub rows: Vec<BreakdownRow>,
    /// Views (events, for events) counted in it.
    pub total: i64,
    pub csv: String,
}

/// Every panel's tables, and what they cover.
pub struct BreakdownsView {
    pub devices: Vec<BreakdownTable>,
    pub countries: Vec<BreakdownTable>,
    pub campaigns: Vec<BreakdownTable>,
    pub events: Vec<BreakdownTable>,
    /// Set when the figures cover more than the range (whole hours).
    pub widened: Option<String>,
    /// Set when the breakdowns trail the views by more than a few seconds.
    pub lag: Option<String>,
}

/// At most this many rows per table on a page; the CSV has them all.
const SHOWN: usize = 10;

/// Every dimension a report reads: the panels' and the sources', in one
/// pass over the buckets.
const READ_DIMENSIONS: [Dimension; 8] = [
    Dimension::Source,
    Dimension::Device,
    Dimension::Browser,
    Dimension::Os,
    Dimension::Country,
    Dimension::Medium,
    Dimension::Campaign,
    Dimension::Event,
];

/// The breakdowns (sources included) of the period and the previous one,
/// read together, with the converting visitors of the events named in
/// `converted`.
pub(crate) async fn read(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
    converted: &[&str],
) -> Result<(Breakdown, Breakdown), mongodb::error::Error> {
    let before = period.previous();
    let dims = &READ_DIMENSIONS;
    tokio::try_join!(
        breakdowns::read(&state.store, scope, dims, converted, period.from, period.to),
        breakdowns::read(&state.store, scope, dims, converted, before.from, before.to),
    )
}

/// One dimension over the period and the previous one, and what its
/// shares are of ([`denominator`]): `breakdown.csv` and the API.
pub(crate) async fn read_one(
    state: &WebState,
    scope: SourceScope<'_>,
    dimension: Dimension,
    period: &Period,
) -> Result<(NameTotals, NameTotals, i64), mongodb::error::Error> {
    let before = period.previous();
    let (one, views_scope) = ([dimension], scope.views());
    let (current, previous, views) = tokio::try_join!(
        breakdowns::read(&state.store, scope, &one, &[], period.from, period.to),
        breakdowns::read(&state.store, scope, &one, &[], before.from, before.to),
        covered_views(&state.store, &views_scope, covered(period.from, period.to)),
    )?;
    let (now, was) = (current.of(dimension), previous.of(dimension));
    let of = denominator(dimension, &now, views);
    Ok((now, was, of))
}

/// The denominator of a name's share: its dimension's own total where
/// every view has a name in it, else every view of the covered hours
/// (`views`), so a campaign's share is of all views, as a source's is.
pub(crate) fn denominator(dimension: Dimension, totals: &NameTotals, views: i64) -> i64 {
    if dimension.covers_every_view() || dimension == Dimension::Event {
        totals.total
    } else {
        views.max(totals.total)
    }
}

/// A country's code with its flag (regional indicator letters), or the
/// name as it is.
pub fn country_label(code: &str) -> String {
    let flag: Option<String> = (code.len() == 2 && code.bytes().all(|b| b.is_ascii_uppercase()))
        .then(|| {
            code.bytes()
                .filter_map(|b| char::from_u32(0x1F1E6 + u32::from(b - b'A')))
                .collect()
        });
    match flag {
        Some(flag) => format!("{flag} {code}"),
        None => code.to_owned(),
    }
}

fn table(
    dimension: Dimension,
    current: &Breakdown,
    previous: &Breakdown,
    views: i64,
    csv: String,
) -> BreakdownTable {
    let now = current.of(dimension);
    let before = previous.of(dimension);
    let of = denominator(dimension, &now, views);
    let row = |name: String, count: i64, was: i64| BreakdownRow {
        name: match dimension {
            Dimension::Country => country_label(&name),
            _ => name,
        },
        count,
        share: fmt::share(count, of),
        change: fmt::change(count, was),
    };
    let mut rows: Vec<BreakdownRow> = now
        .names
        .iter()
        .take(SHOWN)
        .map(|(name, count)| row(name.clone(), *count, before.of(name)))
        .collect();
    if now.other > 0 {
        rows.push(row("(other)".to_owned(), now.other, before.other));
    }
    BreakdownTable {
        key: dimension.key(),
        title: dimension.title(),
        rows,
        total: now.total,
        csv,
    }
}

/// The panels. `views`: every view of the covered hours (the sources
/// panel's); `csv`: the address of a dimension's CSV (empty: none).
/// The sources of [`read`]'s two periods, for the sources panel.
pub(super) fn sources_of(
    (now, before): (&Breakdown, &Breakdown),
    period: &Period,
) -> (
    crate::reports::sources::SourceTotals,
    crate::reports::sources::SourceTotals,
) {
    use crate::reports::sources::SourceTotals;
    let previous = period.previous();
    (
        SourceTotals::of(now, period.from, period.to),
        SourceTotals::of(before, previous.from, previous.to),
    )
}

pub(super) fn view(
    state: &WebState,
    (current, previous): (&Breakdown, &Breakdown),
    period: &Period,
    views: i64,
    csv: impl Fn(Dimension) -> String,
) -> BreakdownsView {
    let t = |d: Dimension| table(d, current, previous, views, csv(d));
    let (from, to) = covered(period.from, period.to);
    let widened = (from < period.from || to > period.to).then(|| {
        format!(
            "Breakdowns are kept by the hour: these figures cover {} to {}.",
            fmt::local(&from, period.zone),
            fmt::local(&to, period.zone)
        )
    });
    BreakdownsView {
        devices: vec![
            t(Dimension::Device),
            t(Dimension::Browser),
            t(Dimension::Os),
        ],
        countries: vec![t(Dimension::Country)],
        campaigns: vec![t(Dimension::Medium), t(Dimension::Campaign)],
        events: vec![t(Dimension::Event)],
        widened,
        lag: lag(state),
    }
}

/// How far the breakdowns (and sources) trail the views, when more than
/// [`crate::ingest::stats::FRESH_SECS`].
pub fn lag(state: &WebState) -> Option<String> {
    use crate::storage::progress::Stream;
    let secs = state
        .journal
        .lag_secs(Stream::Sources.index(), state.clock.now());
    (secs > crate::ingest::stats::FRESH_SECS).then(|| {
        format!(
            "Sources and breakdowns are {} s behind the views: the newest views count in them as the database catches up.",
            secs.ceil() as i64
        )
    })
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
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let dimension = q.dimension()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let (now, was, of) = read_one(&state, scope, dimension, &period).await?;
    let named = now
        .names
        .iter()
        .map(|(name, count)| (name.as_str(), *count, was.of(name)));
    let other = (now.other > 0).then_some(("(other)", now.other, was.other));
    let rows = named.chain(other).map(|(name, count, before)| {
        vec![
            name.to_owned(),
            count.to_string(),
            fmt::percent(count, of),
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
            &format!("previous_period_{count_column}"),
        ],
        rows,
    );
    timed(&state, started);
    Ok(csv_response(
        &format!(
            "{}_{}.csv",
            file_stem(&site, path.as_ref(), period.from, period.to),
            dimension.key()
        ),
        body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn countries_show_their_flag_and_code() {
        assert_eq!(country_label("DE"), "\u{1F1E9}\u{1F1EA} DE");
        assert_eq!(country_label("unknown"), "unknown");
        assert_eq!(country_label("de"), "de");
    }

    #[test]
    fn shares_are_of_the_dimension_or_of_every_view() {
        let totals = NameTotals {
            names: vec![("x".into(), 3)],
            other: 1,
            total: 4,
        };
        assert_eq!(denominator(Dimension::Browser, &totals, 100), 4);
        assert_eq!(denominator(Dimension::Campaign, &totals, 100), 100);
        assert_eq!(denominator(Dimension::Campaign, &totals, 2), 4);
    }
}

//! The breakdown panels of the dashboard and the page report (devices,
//! countries, campaigns, events), and `breakdown.csv`.

use super::exports::{csv_response, file_stem, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::{Dimension, Page};
use crate::reports::compared::{denominator, one_dimension, Compared};
use crate::reports::request::ReportRequest;
use crate::reports::sources::{covered, SourceScope};
use crate::reports::{csv, Period};
use crate::web::fmt;

pub struct BreakdownRow {
    pub name: String,
    /// The name as stored (a country's code), and the link that adds it as
    /// a filter (none for "(other)").
    pub value: String,
    pub href: Option<String>,
    pub count: i64,
    pub share: String,
    pub change: String,
}

impl BreakdownsView {
    /// Makes each named row a link: `link(dimension, name)`.
    pub fn link_rows(&mut self, link: impl Fn(Dimension, &str) -> Option<String>) {
        for t in self
            .devices
            .iter_mut()
            .chain(&mut self.countries)
            .chain(&mut self.campaigns)
            .chain(&mut self.events)
        {
            let Some(d) = Dimension::parse(t.key) else {
                continue;
            };
            for row in &mut t.rows {
                if row.value != "(other)" {
                    row.href = link(d, &row.value);
                }
            }
        }
    }
}

/// One dimension's table.
pub struct BreakdownTable {
    pub key: &'static str,
    pub title: &'static str,
    pub rows: Vec<BreakdownRow>,
    /// Views (events, for events) counted in it.
    pub total: i64,
    /// How many names it has in all: more than [`SHOWN`] are cut to the
    /// top ones, and the panel links the whole list (its CSV).
    pub names: usize,
    pub csv: String,
}

impl BreakdownTable {
    /// The names not shown (beyond the top [`SHOWN`]).
    pub fn more(&self) -> usize {
        self.names.saturating_sub(SHOWN)
    }

    /// The names shown.
    pub fn shown(&self) -> usize {
        self.names.min(SHOWN)
    }
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
pub(super) const SHOWN: usize = 10;

/// A country's name beside its code ("Germany (DE)"), or the name as it
/// is (unknown, or a code the table does not have). No flag emoji: without
/// an emoji font they are two empty boxes.
pub fn country_label(code: &str) -> String {
    match crate::domain::countries::name(code) {
        Some(name) => format!("{name} ({code})"),
        None => code.to_owned(),
    }
}

fn table(dimension: Dimension, read: &Compared, views: i64, csv: String) -> BreakdownTable {
    let now = read.now.of(dimension);
    let compared = read.compared_now().of(dimension);
    let before = read.compared_before().of(dimension);
    let of = denominator(dimension, &now, views);
    let row = |name: String, count: i64, (is, was): (i64, i64)| BreakdownRow {
        value: name.clone(),
        href: None,
        name: match dimension {
            Dimension::Country => country_label(&name),
            _ => name,
        },
        count,
        share: fmt::share(count, of),
        change: fmt::row_change(count, is, was),
    };
    let mut rows: Vec<BreakdownRow> = now
        .names
        .iter()
        .take(SHOWN)
        .map(|(name, count)| row(name.clone(), *count, (compared.of(name), before.of(name))))
        .collect();
    if now.other > 0 {
        // No filter names the names beyond the cap.
        rows.push(row(
            "(other)".to_owned(),
            now.other,
            (compared.other, before.other),
        ));
    }
    BreakdownTable {
        key: dimension.key(),
        title: dimension.title(),
        rows,
        total: now.total,
        names: now.names.len(),
        csv,
    }
}

/// The panels. `views`: every view of the covered hours (the sources
/// panel's); `csv`: the address of a dimension's CSV (empty: none).
pub(super) fn view(
    state: &WebState,
    read: &Compared,
    period: &Period,
    views: i64,
    csv: impl Fn(Dimension) -> String,
) -> BreakdownsView {
    let t = |d: Dimension| table(d, read, views, csv(d));
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
    // Filtered: the same columns from the visit store.
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered_csv::breakdown(r, &q, &filters).await;
    }
    let (state, site, started) = (r.state, r.site, r.started);
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let dimension = q.dimension()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let request = ReportRequest::new(&state.store, scope, &period, state.clock.now());
    let (now, compared, was, of) = one_dimension(&request, dimension).await?;
    let named = now
        .names
        .iter()
        .map(|(name, count)| (name.as_str(), *count, compared.of(name), was.of(name)));
    let other = (now.other > 0).then_some(("(other)", now.other, compared.other, was.other));
    let rows = named.chain(other).map(|(name, count, is, before)| {
        vec![
            name.to_owned(),
            count.to_string(),
            fmt::percent(count, of),
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
    fn countries_show_their_name_beside_the_code() {
        assert_eq!(country_label("DE"), "Germany (DE)");
        assert_eq!(country_label("unknown"), "unknown");
        assert_eq!(country_label("de"), "de");
    }
}

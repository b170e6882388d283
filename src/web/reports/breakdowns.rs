//! The breakdown panels of the dashboard and the page report (devices,
//! countries, campaigns, events), and `breakdown.csv`.

use super::exports::{csv_response, file_stem, CsvAnswer, CsvRequest};
use super::*;
use crate::domain::{Dimension, Page};
use crate::reports::breakdowns::{self, Breakdown, NameTotals};
use crate::reports::sources::{covered, covered_views, SourceScope};
use crate::reports::{csv, Period};
use crate::web::fmt;
use chrono::{DateTime, Utc};

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

/// What a row's change compares. While the period runs, its complete
/// hours (breakdowns are kept by the hour) with the same stretch of the
/// period before, as the first line compares its complete buckets with
/// the same stretch; once it is over, the whole of both. A row never
/// compares today so far with all of yesterday.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stretches {
    pub current: (DateTime<Utc>, DateTime<Utc>),
    pub previous: (DateTime<Utc>, DateTime<Utc>),
    /// Whether `current` is only the complete part of the period.
    pub running: bool,
}

impl Stretches {
    pub(crate) fn of(period: &Period, now: DateTime<Utc>) -> Self {
        let before = period.previous();
        if now >= period.to {
            return Stretches {
                current: (period.from, period.to),
                previous: (before.from, before.to),
                running: false,
            };
        }
        // max/min rather than clamp: never a panic, whatever the bounds.
        let cut = crate::reports::Resolution::Hour
            .floor(now)
            .max(period.from)
            .min(period.to);
        let end = cut
            .checked_sub_signed(period.shift())
            .unwrap_or(before.from)
            .max(before.from)
            .min(before.to);
        Stretches {
            current: (period.from, cut),
            previous: (before.from, end),
            running: true,
        }
    }
}

/// The breakdowns of a period and of the period before, and what the
/// rows' changes compare ([`Stretches`]).
pub(crate) struct Compared {
    pub now: Breakdown,
    /// The whole period before (the goals' rates compare it).
    pub before: Breakdown,
    /// The compared stretches of both, while the period runs.
    part: Option<(Breakdown, Breakdown)>,
    pub stretches: Stretches,
}

impl Compared {
    /// The current side of each row's change.
    pub fn compared_now(&self) -> &Breakdown {
        self.part.as_ref().map_or(&self.now, |p| &p.0)
    }

    /// The previous side of each row's change.
    pub fn compared_before(&self) -> &Breakdown {
        self.part.as_ref().map_or(&self.before, |p| &p.1)
    }
}

/// A breakdown over `[from, to)`; nothing for an empty stretch.
async fn read_span(
    state: &WebState,
    scope: SourceScope<'_>,
    dims: &[Dimension],
    converted: &[&str],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Breakdown, mongodb::error::Error> {
    if from >= to {
        return Ok(Breakdown::default());
    }
    breakdowns::read(&state.store, scope, dims, converted, from, to).await
}

/// The breakdowns (sources included) of the period and the previous one,
/// read together, with the converting visitors of the events named in
/// `converted`, and the stretches the rows compare.
pub(crate) async fn read(
    state: &WebState,
    scope: SourceScope<'_>,
    period: &Period,
    converted: &[&str],
) -> Result<Compared, mongodb::error::Error> {
    let before = period.previous();
    let stretches = Stretches::of(period, state.clock.now());
    let dims = &READ_DIMENSIONS;
    let part = async {
        if !stretches.running {
            return Ok(None);
        }
        let (a, b) = tokio::try_join!(
            read_span(state, scope, dims, &[], stretches.current),
            read_span(state, scope, dims, &[], stretches.previous),
        )?;
        Ok::<_, mongodb::error::Error>(Some((a, b)))
    };
    let (now, before, part) = tokio::try_join!(
        read_span(state, scope, dims, converted, (period.from, period.to)),
        read_span(state, scope, dims, converted, (before.from, before.to)),
        part,
    )?;
    Ok(Compared {
        now,
        before,
        part,
        stretches,
    })
}

/// One dimension over the period and the previous one: its totals, the
/// rows' compared counts now and before ([`Stretches`]), and what its
/// shares are of ([`denominator`]): `breakdown.csv` and the API.
pub(crate) async fn read_one(
    state: &WebState,
    scope: SourceScope<'_>,
    dimension: Dimension,
    period: &Period,
) -> Result<(NameTotals, NameTotals, NameTotals, i64), mongodb::error::Error> {
    let stretches = Stretches::of(period, state.clock.now());
    let (one, views_scope) = ([dimension], scope.views());
    let compared_now = async {
        if stretches.running {
            read_span(state, scope, &one, &[], stretches.current)
                .await
                .map(Some)
        } else {
            Ok(None)
        }
    };
    let (current, previous, part, views) = tokio::try_join!(
        read_span(state, scope, &one, &[], (period.from, period.to)),
        read_span(state, scope, &one, &[], stretches.previous),
        compared_now,
        covered_views(&state.store, &views_scope, covered(period.from, period.to)),
    )?;
    let now = current.of(dimension);
    let compared = part.as_ref().unwrap_or(&current).of(dimension);
    let was = previous.of(dimension);
    let of = denominator(dimension, &now, views);
    Ok((now, compared, was, of))
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
        csv,
    }
}

/// The panels. `views`: every view of the covered hours (the sources
/// panel's); `csv`: the address of a dimension's CSV (empty: none).
/// The sources of [`read`]'s period and of the stretches its rows
/// compare, for the sources panel.
pub(super) fn sources_of(read: &Compared, period: &Period) -> super::sources::ComparedTotals {
    use crate::reports::sources::SourceTotals;
    let (current, previous) = (read.stretches.current, read.stretches.previous);
    super::sources::ComparedTotals {
        now: SourceTotals::of(&read.now, period.from, period.to),
        compared: read
            .stretches
            .running
            .then(|| SourceTotals::of(read.compared_now(), current.0, current.1)),
        before: SourceTotals::of(read.compared_before(), previous.0, previous.1),
    }
}

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
    let (state, site, started) = (r.state, r.site, r.started);
    let period = resolve_kept(&q, &state, site.time_zone.tz())?;
    let dimension = q.dimension()?;
    let path = q.optional_path()?;
    let page = path.as_ref().map(|p| Page::new(&site.domain, p));
    let scope = SourceScope::of(&site, page.as_ref());
    let (now, compared, was, of) = read_one(&state, scope, dimension, &period).await?;
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

//! A report's breakdowns and sources over its period and the one before,
//! and the stretches each row's change compares: read once here for the
//! report pages, their CSV files and the JSON API alike.

use chrono::{DateTime, Utc};

use super::breakdowns::{self as stored, Breakdown, NameTotals};
use super::hours::covered;
use super::request::ReportRequest;
use super::sources::{covered_views, top_sources, SourceScope, SourceShares, SourceTotals};
use super::{Period, Resolution};
use crate::domain::Dimension;
use crate::storage::Store;

/// Every dimension a report reads: the panels' and the sources', in one
/// pass over the buckets.
const READ_DIMENSIONS: [Dimension; 8] = [
    Dimension::Source,
    PANELS[0],
    PANELS[1],
    PANELS[2],
    PANELS[3],
    PANELS[4],
    PANELS[5],
    PANELS[6],
];

/// The dimensions of the report pages' panels, in the order they show
/// them (the sources have their own table).
pub const PANELS: [Dimension; 7] = [
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
pub struct Stretches {
    pub current: (DateTime<Utc>, DateTime<Utc>),
    pub previous: (DateTime<Utc>, DateTime<Utc>),
    /// Whether `current` is only the complete part of the period.
    pub running: bool,
}

impl Stretches {
    pub fn of(period: &Period, now: DateTime<Utc>) -> Self {
        let before = period.previous();
        if now >= period.to {
            return Stretches {
                current: (period.from, period.to),
                previous: (before.from, before.to),
                running: false,
            };
        }
        // max/min rather than clamp: never a panic, whatever the bounds.
        let cut = Resolution::Hour.floor(now).max(period.from).min(period.to);
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
pub struct Compared {
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
    store: &Store,
    scope: SourceScope<'_>,
    dims: &[Dimension],
    converted: &[&str],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Breakdown, mongodb::error::Error> {
    if from >= to {
        return Ok(Breakdown::default());
    }
    stored::read(store, scope, dims, converted, from, to).await
}

/// The breakdowns (sources included) of the period and the previous one,
/// read together, with the converting visitors of the events named in
/// `converted`, and the stretches the rows compare.
pub async fn breakdowns(
    req: &ReportRequest<'_>,
    converted: &[&str],
) -> Result<Compared, mongodb::error::Error> {
    let (store, scope, period) = (req.store, req.scope, req.period);
    let before = period.previous();
    let stretches = Stretches::of(period, req.now);
    let dims = &READ_DIMENSIONS;
    let part = async {
        if !stretches.running {
            return Ok(None);
        }
        let (a, b) = tokio::try_join!(
            read_span(store, scope, dims, &[], stretches.current),
            read_span(store, scope, dims, &[], stretches.previous),
        )?;
        Ok::<_, mongodb::error::Error>(Some((a, b)))
    };
    let (now, before, part) = tokio::try_join!(
        read_span(store, scope, dims, converted, (period.from, period.to)),
        read_span(store, scope, dims, converted, (before.from, before.to)),
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
/// rows' compared counts now and before ([`Stretches`]), and every view of
/// the covered hours, of which the panel takes its shares' [`denominator`]:
/// `breakdown.csv` and the API.
pub async fn one_dimension(
    req: &ReportRequest<'_>,
    dimension: Dimension,
) -> Result<(NameTotals, NameTotals, NameTotals, i64), mongodb::error::Error> {
    let (store, scope, period) = (req.store, req.scope, req.period);
    let stretches = Stretches::of(period, req.now);
    let (one, views_scope) = ([dimension], scope.views());
    let compared_now = async {
        if stretches.running {
            read_span(store, scope, &one, &[], stretches.current)
                .await
                .map(Some)
        } else {
            Ok(None)
        }
    };
    let (current, previous, part, views) = tokio::try_join!(
        read_span(store, scope, &one, &[], (period.from, period.to)),
        read_span(store, scope, &one, &[], stretches.previous),
        compared_now,
        covered_views(store, &views_scope, covered(period.from, period.to)),
    )?;
    let now = current.of(dimension);
    let compared = part.as_ref().unwrap_or(&current).of(dimension);
    let was = previous.of(dimension);
    Ok((now, compared, was, views))
}

/// The denominator of a name's share: its dimension's own total where
/// every view has a name in it, else every view of the covered hours
/// (`views`), so a campaign's share is of all views, as a source's is.
pub fn denominator(dimension: Dimension, totals: &NameTotals, views: i64) -> i64 {
    if dimension.covers_every_view() || dimension == Dimension::Event {
        totals.total
    } else {
        views.max(totals.total)
    }
}

/// The sources of [`breakdowns`]'s period and of the stretches its rows
/// compare, for the sources panel.
pub fn sources_of(read: &Compared, period: &Period) -> ComparedTotals {
    let (current, previous) = (read.stretches.current, read.stretches.previous);
    ComparedTotals {
        now: SourceTotals::of(&read.now, period.from, period.to),
        compared: read
            .stretches
            .running
            .then(|| SourceTotals::of(read.compared_now(), current.0, current.1)),
        before: SourceTotals::of(read.compared_before(), previous.0, previous.1),
    }
}

/// The sources of a period, and of the stretches its rows' changes
/// compare (`breakdowns::Stretches`).
pub struct ComparedTotals {
    pub now: SourceTotals,
    /// The complete part of a running period; `None`: all of it.
    pub compared: Option<SourceTotals>,
    pub before: SourceTotals,
}

/// [`ComparedTotals`] with the views of the hours each covers.
pub struct ComparedShares {
    pub now: SourceShares,
    compared: Option<SourceShares>,
    pub before: SourceShares,
}

impl ComparedShares {
    /// No sources and no views (a page that does not exist).
    pub fn nothing(period: &Period, now: DateTime<Utc>) -> Self {
        let stretches = Stretches::of(period, now);
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
    store: &Store,
    scope: SourceScope<'_>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<SourceTotals, mongodb::error::Error> {
    if from >= to {
        return Ok(SourceTotals::none(from, to));
    }
    top_sources(store, scope, from, to).await
}

/// Sources of the period and of the stretches its rows compare, read
/// together (the buckets alone: [`shares`] adds the views of the same
/// hours).
pub async fn sources(req: &ReportRequest<'_>) -> Result<ComparedTotals, mongodb::error::Error> {
    let (store, scope, period) = (req.store, req.scope, req.period);
    let stretches = Stretches::of(period, req.now);
    let compared = async {
        if stretches.running {
            sources_in(store, scope, stretches.current).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let (now, compared, before) = tokio::try_join!(
        sources_in(store, scope, (period.from, period.to)),
        compared,
        sources_in(store, scope, stretches.previous),
    )?;
    Ok(ComparedTotals {
        now,
        compared,
        before,
    })
}

/// Every view of the hours `totals` covers (none for an empty stretch).
async fn views_in(
    store: &Store,
    scope: SourceScope<'_>,
    totals: &SourceTotals,
) -> Result<i64, mongodb::error::Error> {
    if totals.from >= totals.to {
        return Ok(0);
    }
    covered_views(store, &scope.views(), (totals.from, totals.to)).await
}

/// The views of the hours `totals` covers: `known`, the report's own count
/// of `period`, when those are the period's hours (an hour-aligned range),
/// else read.
async fn views_of(
    store: &Store,
    scope: SourceScope<'_>,
    totals: &SourceTotals,
    period: &Period,
    known: Option<i64>,
) -> Result<i64, mongodb::error::Error> {
    match known {
        Some(views) if (totals.from, totals.to) == (period.from, period.to) => Ok(views),
        _ => covered_views(store, &scope.views(), (totals.from, totals.to)).await,
    }
}

/// [`read`]'s sources with the views of the same hours. `known` holds the
/// views of the period and of the previous one where the report has read
/// them already, so an hour-aligned range costs no further read.
pub async fn source_shares(
    req: &ReportRequest<'_>,
    read: ComparedTotals,
    known: Option<(i64, i64)>,
) -> Result<ComparedShares, mongodb::error::Error> {
    let (store, scope, period) = (req.store, req.scope, req.period);
    let before = period.previous();
    let compared_views = async {
        match &read.compared {
            Some(totals) => views_in(store, scope, totals).await.map(Some),
            None => Ok(None),
        }
    };
    let (now, compared, then) = tokio::try_join!(
        views_of(store, scope, &read.now, period, known.map(|k| k.0)),
        compared_views,
        views_of(store, scope, &read.before, &before, known.map(|k| k.1)),
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
pub async fn read_source_shares(
    req: &ReportRequest<'_>,
) -> Result<ComparedShares, mongodb::error::Error> {
    let read = sources(req).await?;
    source_shares(req, read, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! The first line of a report over the buckets and day counters: visitors,
//! visits, views, bounces and duration of the period, and what its changes
//! compare under the honest-change rules of the views' headline (only the
//! complete part of a running period, against the same stretch of the
//! period before, and nothing against a period past the retention).

use chrono::{DateTime, Utc};

use super::queries::{self, Point, Scope};
use super::visits::{self, VisitFigures};
use super::{Period, Resolution};
use crate::domain::Retention;
use crate::storage::Store;

/// The figures of one range, views included.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub views: i64,
    pub visits: VisitFigures,
}

/// A first line: the period's figures, the two sides its changes compare
/// (none: no change to show), and from when visitors are counted.
#[derive(Debug, Clone, Copy)]
pub struct LineFigures {
    pub shown: Totals,
    pub compared: Option<(Totals, Totals)>,
    /// The first UTC day with visitors; `None`: none counted yet.
    pub since: Option<DateTime<Utc>>,
}

/// Whether the period before can be compared with: within the retention
/// of the level it is read at (else its figures would be missing the
/// expired buckets, not lower).
pub fn comparable(before: &Period, retention: &Retention, now: DateTime<Utc>) -> bool {
    retention
        .kept(before.read)
        .is_none_or(|kept| before.from >= now - kept)
}

/// What the line reads: its counters and visitors do not depend on the
/// views, so a report reads them beside its series and builds the line
/// once both are in ([`LineReads::figures`]).
pub struct LineReads {
    units: visits::CounterUnits,
    units_before: visits::CounterUnits,
    visitors: Option<Vec<i64>>,
    since: Option<DateTime<Utc>>,
    cut: DateTime<Utc>,
    offset: chrono::TimeDelta,
    complete: bool,
    compare: bool,
}

/// Reads what the line compares; [`LineReads::figures`] builds it from the
/// views' units of the period and of the one before it.
///
/// The counters of each period are read once, as units, and the complete
/// part of a running period is summed from them; the visitors of every
/// range compared are read together (one plan of day and hour sketches).
pub async fn read(
    store: &Store,
    retention: &Retention,
    scope: &Scope<'_>,
    period: &Period,
    now: DateTime<Utc>,
) -> Result<LineReads, mongodb::error::Error> {
    let before = period.previous();
    let comparable = comparable(&before, retention, now);
    let cut = period.complete_until(now);
    let offset = period.shift();
    let complete = cut >= period.to;
    let partial = !complete && cut > period.from;
    let compare = comparable && (complete || partial);
    // Nothing is stored after `now`: the shown range may be read to the
    // end of today (a whole day for the visitors) whatever its zone.
    let end = visits::reach(period.to, now);
    let mut ranges = vec![(period.from, end)];
    if compare && complete {
        ranges.push((before.from, before.to));
    } else if compare {
        ranges.push((period.from, cut));
        ranges.push((before.from, cut - offset));
    }
    // Totals only: each range read as UTC hours, so that only its own
    // edges are read by minute (not every local bucket's start, as a
    // Europe/Berlin year's 365 cut hours would be).
    let read = |from: DateTime<Utc>, to: DateTime<Utc>| async move {
        if from >= to {
            return Ok(visits::CounterUnits::default());
        }
        let hours = Period::aligned_in(from, to, Resolution::Hour, chrono_tz::Tz::UTC);
        visits::read_units(store, scope, &hours).await
    };
    // The shown period in two parts (before and after `cut`) when its
    // complete part is compared, else whole; and what it is compared with.
    let split = if compare && !complete { cut } else { end };
    let earlier = if !compare {
        None
    } else if complete {
        Some(before.to)
    } else {
        Some(cut - offset)
    };
    let read_earlier = async {
        match earlier {
            Some(until) => read(before.from, until).await,
            None => Ok(visits::CounterUnits::default()),
        }
    };
    let (head, tail, units_before, visitors, since) = tokio::try_join!(
        read(period.from, split),
        read(split, end),
        read_earlier,
        visits::visitors(store, scope, &ranges),
        visits::counted_since(store, scope),
    )?;
    Ok(LineReads {
        units: head.joined(tail),
        units_before,
        visitors,
        since,
        cut,
        offset,
        complete,
        compare,
    })
}

impl LineReads {
    /// The line's figures, from these reads and the views of the period
    /// and the one before.
    pub fn figures(self, current: &[Point], previous: &[Point]) -> LineFigures {
        let LineReads {
            units,
            units_before,
            visitors,
            since,
            cut,
            offset,
            complete,
            compare,
        } = self;
        let visitors = |i: usize| visitors.as_ref().and_then(|v| v.get(i).copied());
        let views_until = |points: &[Point], until: DateTime<Utc>| -> i64 {
            points
                .iter()
                .filter(|p| p.at < until)
                .map(|p| p.views)
                .sum()
        };
        let shown = Totals {
            views: queries::total(current),
            visits: units.figures(None, visitors(0)),
        };
        let compared = if !compare {
            None
        } else if complete {
            let prev = Totals {
                views: queries::total(previous),
                visits: units_before.figures(None, visitors(1)),
            };
            Some((shown, prev))
        } else {
            let part = Totals {
                views: views_until(current, cut),
                visits: units.figures(Some(cut), visitors(1)),
            };
            // `units_before` holds only the part before `cut - offset`.
            let part_before = Totals {
                views: views_until(previous, cut - offset),
                visits: units_before.figures(Some(cut - offset), visitors(2)),
            };
            Some((part, part_before))
        };
        LineFigures {
            shown,
            compared,
            since,
        }
    }
}

//! The first line of an unfiltered report (visitors, visits, views,
//! bounces, duration) over its period, and the figures its changes
//! compare: read once here for the dashboard, the page report and the
//! email reports, so that a change says the same wherever it is shown.
//!
//! Like is compared with like: while the period's last read bucket is
//! still counting, the changes cover only its complete buckets and the
//! same stretch of the period before ([`Period::complete_until`]); no
//! change is compared with a period before that reaches past the
//! retention of the level it is read at ([`comparable`]).

use chrono::{DateTime, Utc};

use super::queries::{self, Point, Scope};
use super::visits::{self, VisitFigures};
use super::{Period, Resolution};
use crate::domain::Retention;
use crate::storage::Store;

/// The figures of one range, views included.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub views: i64,
    pub visits: VisitFigures,
}

/// Whether the period before can be compared with: not when it reaches
/// past the retention of the level it is read at (its figures would be
/// missing the expired buckets, not lower).
pub fn comparable(before: &Period, retention: &Retention, now: DateTime<Utc>) -> bool {
    retention
        .kept(before.read)
        .is_none_or(|kept| before.from >= now - kept)
}

/// What the line reads: its counters and visitors do not depend on the
/// views, so a report reads them beside its series and builds the line
/// once both are in ([`LineReads::compared`]).
pub struct LineReads {
    units: visits::CounterUnits,
    units_before: visits::CounterUnits,
    visitors: Option<Vec<i64>>,
    pub since: Option<DateTime<Utc>>,
    pub period: Period,
    cut: DateTime<Utc>,
    offset: chrono::TimeDelta,
    complete: bool,
    compare: bool,
    pub page: bool,
}

/// The line's figures: the whole period's, and the pair its changes
/// compare (`None`: no change is shown).
#[derive(Debug, Clone, Copy)]
pub struct Compared {
    pub shown: Totals,
    pub compared: Option<(Totals, Totals)>,
}

/// Reads what the line compares; [`LineReads::compared`] finishes it from
/// the views' units of the period and of the one before.
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
        period: *period,
        cut,
        offset,
        complete,
        compare,
        page: matches!(scope, Scope::Page(_)),
    })
}

impl LineReads {
    /// The figures, from these reads and the views of the period and the
    /// one before.
    pub fn compared(&self, current: &[Point], previous: &[Point]) -> Compared {
        let visitors = |i: usize| self.visitors.as_ref().and_then(|v| v.get(i).copied());
        let views_until = |points: &[Point], until: DateTime<Utc>| -> i64 {
            points
                .iter()
                .filter(|p| p.at < until)
                .map(|p| p.views)
                .sum()
        };
        let shown = Totals {
            views: queries::total(current),
            visits: self.units.figures(None, visitors(0)),
        };
        let compared = if !self.compare {
            None
        } else if self.complete {
            let prev = Totals {
                views: queries::total(previous),
                visits: self.units_before.figures(None, visitors(1)),
            };
            Some((shown, prev))
        } else {
            let before_cut = self.cut - self.offset;
            let part = Totals {
                views: views_until(current, self.cut),
                visits: self.units.figures(Some(self.cut), visitors(1)),
            };
            // `units_before` holds only the part before `cut - offset`.
            let part_before = Totals {
                views: views_until(previous, before_cut),
                visits: self.units_before.figures(Some(before_cut), visitors(2)),
            };
            Some((part, part_before))
        };
        Compared { shown, compared }
    }
}

/// The line of `scope` over `period` read whole: its views' series of
/// both periods and [`read`], for a surface that shows no chart (the
/// email reports).
pub async fn read_whole(
    store: &Store,
    retention: &Retention,
    scope: &Scope<'_>,
    period: &Period,
    now: DateTime<Utc>,
) -> Result<Compared, mongodb::error::Error> {
    let before = period.previous();
    let (current, previous, reads) = tokio::try_join!(
        queries::read_series(store, scope, period),
        queries::read_series(store, scope, &before),
        read(store, retention, scope, period, now),
    )?;
    Ok(reads.compared(&current, &previous))
}

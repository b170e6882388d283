//! Visitors and visits read back.
//!
//! The visit counters (`storage::buckets::VisitFields`) are sums like the
//! views and are read the same way ([`queries::read_counter`]).
//!
//! Unique visitors are not a sum: they are the union of the visitor
//! sketches of the buckets a range covers. A visitor's id changes with the
//! UTC day (its salt), so one person is one visitor per UTC day and the
//! visitors of a range are the sum over its UTC days of each day's union:
//! a whole UTC day reads its day bucket's sketch, a part of one reads the
//! sketches of the hour buckets it touches (a range edge inside a UTC hour,
//! as at +05:30, counts that whole hour's visitors).

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::collections::{BTreeMap, BTreeSet};

use super::period::{Period, Resolution};
use super::queries::{self, Point, Scope, Slots};
use crate::domain::sketch::Sketch;
use crate::storage::buckets::VisitFields;
use crate::storage::{Store, Subject};

pub const VISITS: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::VISITS]);
pub const NON_BOUNCES: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::NON_BOUNCES]);
pub const DURATION: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::DURATION]);
pub const EXITS: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::EXITS]);

/// A range's visit figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VisitFigures {
    /// `None` where the stored data cannot say (a site whose totals are
    /// not backfilled: its visitors would be the union of every page's).
    pub visitors: Option<i64>,
    /// Visits started in the range (on a page: visits that entered there).
    pub visits: i64,
    pub non_bounces: i64,
    /// Seconds between the hits of those visits.
    pub duration_secs: i64,
    /// Visits that left from this page (a page's figures only).
    pub exits: Option<i64>,
}

impl VisitFigures {
    pub fn bounces(&self) -> i64 {
        (self.visits - self.non_bounces).max(0)
    }

    /// Bounces per visit, 0 to 1; `None` without visits.
    pub fn bounce_rate(&self) -> Option<f64> {
        (self.visits > 0).then(|| self.bounces() as f64 / self.visits as f64)
    }

    /// Average seconds per visit; `None` without visits.
    pub fn average_duration(&self) -> Option<f64> {
        (self.visits > 0).then(|| self.duration_secs as f64 / self.visits as f64)
    }

    /// Views per visit; `None` without visits.
    pub fn views_per_visit(&self, views: i64) -> Option<f64> {
        (self.visits > 0).then(|| views as f64 / self.visits as f64)
    }
}

/// The visit figures of a scope over a period.
pub async fn figures(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<VisitFigures, mongodb::error::Error> {
    let sum = |points: Vec<Point>| points.iter().map(|p| p.views).sum::<i64>();
    let whole = [(period.from, period.to)];
    let exits = async {
        match scope {
            Scope::Page(_) => queries::read_counter(store, scope, period, EXITS)
                .await
                .map(Some),
            _ => Ok(None),
        }
    };
    let (visits, non_bounces, duration, visitors, exits) = tokio::try_join!(
        queries::read_counter(store, scope, period, VISITS),
        queries::read_counter(store, scope, period, NON_BOUNCES),
        queries::read_counter(store, scope, period, DURATION),
        visitors(store, scope, &whole),
        exits,
    )?;
    Ok(VisitFigures {
        visitors: visitors.map(|v| v[0]),
        visits: sum(visits),
        non_bounces: sum(non_bounces),
        duration_secs: sum(duration),
        exits: exits.map(sum),
    })
}

/// A page's visitors, entries and exits over a period (a top-pages row).
pub async fn page_row(
    store: &Store,
    page: &crate::domain::Page,
    period: &Period,
) -> Result<VisitFigures, mongodb::error::Error> {
    let scope = Scope::Page(page);
    let sum = |points: Vec<Point>| points.iter().map(|p| p.views).sum::<i64>();
    let whole = [(period.from, period.to)];
    let (visits, exits, visitors) = tokio::try_join!(
        queries::read_counter(store, &scope, period, VISITS),
        queries::read_counter(store, &scope, period, EXITS),
        visitors(store, &scope, &whole),
    )?;
    Ok(VisitFigures {
        visitors: visitors.map(|v| v[0]),
        visits: sum(visits),
        exits: Some(sum(exits)),
        ..VisitFigures::default()
    })
}

/// A counter per shown bucket of the period (as `queries::series`).
pub async fn counter_series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    slots: Slots,
) -> Result<Vec<Point>, mongodb::error::Error> {
    let units = queries::read_counter(store, scope, period, slots).await?;
    Ok(queries::rollup(period, &units))
}

/// Unique visitors per shown bucket of the period; `None` where the
/// stored data cannot say (see [`VisitFigures::visitors`]).
pub async fn visitors_series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Option<Vec<Point>>, mongodb::error::Error> {
    let starts = period.points();
    let ranges: Vec<(DateTime<Utc>, DateTime<Utc>)> = starts
        .iter()
        .map(|&at| (at.max(period.from), period.end_of(at).min(period.to)))
        .collect();
    Ok(visitors(store, scope, &ranges).await?.map(|counts| {
        starts
            .into_iter()
            .zip(counts)
            .map(|(at, views)| Point { at, views })
            .collect()
    }))
}

/// What reading a range's visitors takes: the UTC days it covers whole,
/// and the UTC hours of the days it covers in part.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    days: BTreeSet<DateTime<Utc>>,
    hours: BTreeSet<DateTime<Utc>>,
}

/// A part of a range within one UTC day: the day, and `None` when the
/// range covers it whole, else the UTC hours of it the range touches.
type Piece = (DateTime<Utc>, Option<Vec<DateTime<Utc>>>);

/// A range's pieces, one per UTC day it touches.
fn pieces(from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Piece> {
    let (day, hour) = (Resolution::Day, Resolution::Hour);
    let mut out = Vec::new();
    let mut d = day.floor(from);
    while d < to {
        let next = d + TimeDelta::days(1);
        let (a, b) = (from.max(d), to.min(next));
        if a == d && b == next {
            out.push((d, None));
        } else if a < b {
            let mut hours = Vec::new();
            let mut h = hour.floor(a);
            while h < b {
                hours.push(h);
                h += TimeDelta::hours(1);
            }
            out.push((d, Some(hours)));
        }
        d = next;
    }
    out
}

/// Unique visitors of each range; `None` for a scope whose sketches are
/// not kept as one (a site read from its page buckets).
pub async fn visitors(
    store: &Store,
    scope: &Scope<'_>,
    ranges: &[(DateTime<Utc>, DateTime<Utc>)],
) -> Result<Option<Vec<i64>>, mongodb::error::Error> {
    if matches!(scope, Scope::Site(_)) {
        return Ok(None);
    }
    let mut plan = Plan::default();
    let split: Vec<_> = ranges.iter().map(|&(a, b)| pieces(a, b)).collect();
    for (day, hours) in split.iter().flatten() {
        match hours {
            None => {
                plan.days.insert(*day);
            }
            Some(hours) => plan.hours.extend(hours.iter().copied()),
        }
    }
    let (by_day, by_hour) = tokio::try_join!(
        sketches(store, scope, Resolution::Day, &plan.days),
        sketches(store, scope, Resolution::Hour, &plan.hours),
    )?;
    let count = |(day, hours): &Piece| match hours {
        None => by_day.get(day).map_or(0, Sketch::estimate_count),
        Some(hours) => {
            let mut union = Sketch::default();
            for sketch in hours.iter().filter_map(|h| by_hour.get(h)) {
                union.merge(sketch);
            }
            union.estimate_count()
        }
    };
    Ok(Some(
        split
            .iter()
            .map(|pieces| pieces.iter().map(count).sum::<u64>() as i64)
            .collect(),
    ))
}

/// The sketches of a scope's buckets at `g` starting at `times`, merged per
/// start (a site's parts, one per writer).
async fn sketches(
    store: &Store,
    scope: &Scope<'_>,
    g: Resolution,
    times: &BTreeSet<DateTime<Utc>>,
) -> Result<BTreeMap<DateTime<Utc>, Sketch>, mongodb::error::Error> {
    let mut out: BTreeMap<DateTime<Utc>, Sketch> = BTreeMap::new();
    let (Some(first), Some(last)) = (times.first(), times.last()) else {
        return Ok(out);
    };
    let (coll, mut matcher) = match scope {
        Scope::SiteTotals(site) => (
            Subject::Site.collection(g),
            doc! {"site": site.domain.as_str()},
        ),
        Scope::Page(page) => (g.collection(), doc! {"page": page.as_str()}),
        Scope::Site(_) => return Ok(out),
    };
    // A dense list (a chart's every hour) is read as a range; a sparse one
    // (the two edges of a long range) point by point.
    let span = (*last - *first).num_seconds() / g.step().num_seconds() + 1;
    if times.len() as i64 * 4 > span {
        matcher.insert(
            "timestamp",
            doc! {"$gte": bson::DateTime::from_chrono(*first), "$lte": bson::DateTime::from_chrono(*last)},
        );
    } else {
        let list: Vec<bson::DateTime> = times
            .iter()
            .map(|t| bson::DateTime::from_chrono(*t))
            .collect();
        matcher.insert("timestamp", doc! {"$in": list});
    }
    let mut cursor = store
        .reports()
        .collection::<Document>(coll)
        .find(matcher)
        .projection(doc! {"_id": 0, "timestamp": 1, VisitFields::VISITORS: 1})
        .max_time(store.report_max_time())
        .await?;
    while let Some(d) = cursor.try_next().await? {
        let (Ok(at), Ok(stored)) = (
            d.get_datetime("timestamp"),
            d.get_document(VisitFields::VISITORS),
        ) else {
            continue;
        };
        let at = at.to_chrono();
        if !times.contains(&at) {
            continue;
        }
        let sketch = out.entry(at).or_default();
        if let Err(e) = sketch.merge_stored(stored) {
            tracing::warn!(error = %e, at = %at, "a visitors sketch of an unknown format is skipped");
        }
    }
    Ok(out)
}

/// The first UTC day from which a scope has visitors (data written before
/// visitors has none): `None` when it has none yet.
pub async fn counted_since(
    store: &Store,
    scope: &Scope<'_>,
) -> Result<Option<DateTime<Utc>>, mongodb::error::Error> {
    let (coll, mut matcher) = match scope {
        Scope::SiteTotals(site) => (
            Subject::Site.collection(Resolution::Day),
            doc! {"site": site.domain.as_str()},
        ),
        Scope::Site(domain) => (
            Resolution::Day.collection(),
            doc! {"page": crate::storage::buckets::site_pages(domain)},
        ),
        Scope::Page(page) => (Resolution::Day.collection(), doc! {"page": page.as_str()}),
    };
    matcher.insert(
        VisitFields::COUNTERS[VisitFields::VISITS],
        doc! {"$exists": true},
    );
    let found = store
        .reports()
        .collection::<Document>(coll)
        .find_one(matcher)
        .sort(doc! {"timestamp": 1})
        .projection(doc! {"_id": 0, "timestamp": 1})
        .max_time(store.report_max_time())
        .await?;
    Ok(found.and_then(|d| d.get_datetime("timestamp").ok().map(|t| t.to_chrono())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap()
    }

    #[test]
    fn a_range_is_whole_utc_days_and_the_hours_of_its_edges() {
        // A Berlin day: 23:00 the day before to 23:00.
        let p = pieces(t(24, 23, 0), t(25, 23, 0));
        assert_eq!(p.len(), 2);
        assert_eq!(p[0], (t(24, 0, 0), Some(vec![t(24, 23, 0)])));
        assert_eq!(p[1].1.as_ref().map(Vec::len), Some(23));
        // Three UTC days: the middle one whole.
        let p = pieces(t(23, 12, 0), t(25, 1, 0));
        assert_eq!(p[1], (t(24, 0, 0), None));
        assert_eq!(p[2], (t(25, 0, 0), Some(vec![t(25, 0, 0)])));
        // An edge inside an hour (+05:30) takes that whole hour.
        let p = pieces(t(24, 18, 30), t(24, 19, 30));
        assert_eq!(
            p,
            vec![(t(24, 0, 0), Some(vec![t(24, 18, 0), t(24, 19, 0)]))]
        );
        assert!(pieces(t(24, 0, 0), t(24, 0, 0)).is_empty());
    }

    #[test]
    fn rates_need_visits() {
        let none = VisitFigures::default();
        assert_eq!(none.bounce_rate(), None);
        let f = VisitFigures {
            visitors: Some(2),
            visits: 4,
            non_bounces: 1,
            duration_secs: 300,
            exits: None,
        };
        assert_eq!(f.bounces(), 3);
        assert_eq!(f.bounce_rate(), Some(0.75));
        assert_eq!(f.average_duration(), Some(75.0));
        assert_eq!(f.views_per_visit(10), Some(2.5));
    }
}

//! Visitors and visits read back.
//!
//! The visit counters (`storage::buckets::VisitFields`) are sums like the
//! views and are read the same way ([`queries::read_counter`]).
//!
//! Unique visitors are not a sum: they are the union of the visitor
//! sketches of the buckets a range covers. A visitor's id changes with the
//! UTC day (its salt), so one person is one visitor per UTC day and the
//! visitors of a range are the sum over its UTC days of each day's union:
//! a whole UTC day reads its day bucket's sketch, a part of one the
//! sketches of the whole UTC hours it covers and of the minutes of the
//! hours it cuts (an edge inside an hour, as "last hour" or at +05:30), so
//! a range counts exactly who viewed in it, whatever its edges.

use chrono::{DateTime, TimeDelta, Timelike, Utc};
use std::collections::{BTreeSet, HashMap};

use super::period::{Period, Resolution};
use super::queries::{self, Point, Scope, Slots};
use crate::domain::sketch::Sketch;
use crate::storage::buckets::VisitFields;
use crate::storage::day_visitors::{Hours, WHOLE_DAY};
use crate::storage::Store;

pub use crate::storage::report_reads::estimate_stored;
pub use crate::storage::visit_reads::counted_since;
use crate::storage::visit_reads::{day_totals, sketches, Read, Whose};

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

/// A scope's visit counters over a period as read units (as
/// `queries::read_series` reads the views): a range's figures, and those
/// of any part of it cut at a shown bucket's start, add up from them.
#[derive(Debug, Default)]
pub struct CounterUnits {
    visits: Vec<Point>,
    non_bounces: Vec<Point>,
    duration: Vec<Point>,
    /// A page's only.
    exits: Option<Vec<Point>>,
}

impl CounterUnits {
    /// The units of two ranges that do not overlap, together.
    pub fn joined(mut self, other: CounterUnits) -> CounterUnits {
        self.visits.extend(other.visits);
        self.non_bounces.extend(other.non_bounces);
        self.duration.extend(other.duration);
        self.exits = match (self.exits, other.exits) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        self
    }

    /// The figures of the units before `until` (all of them with `None`),
    /// with the visitors read for the same range.
    pub fn figures(&self, until: Option<DateTime<Utc>>, visitors: Option<i64>) -> VisitFigures {
        let sum = |points: &[Point]| {
            points
                .iter()
                .filter(|p| until.is_none_or(|u| p.at < u))
                .map(|p| p.views)
                .sum::<i64>()
        };
        VisitFigures {
            visitors,
            visits: sum(&self.visits),
            non_bounces: sum(&self.non_bounces),
            duration_secs: sum(&self.duration),
            exits: self.exits.as_deref().map(sum),
        }
    }
}

/// Reads a scope's visit counters over a period, in one pass over its
/// buckets.
pub async fn read_units(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<CounterUnits, mongodb::error::Error> {
    let page = matches!(scope, Scope::Page(_));
    let fields: &[Slots] = if page {
        &[VISITS, NON_BOUNCES, DURATION, EXITS]
    } else {
        &[VISITS, NON_BOUNCES, DURATION]
    };
    let mut read = queries::read_counters(store, scope, period, fields)
        .await?
        .into_iter();
    let mut next = || read.next().unwrap_or_default();
    Ok(CounterUnits {
        visits: next(),
        non_bounces: next(),
        duration: next(),
        exits: page.then(next),
    })
}

/// The visit figures of a scope over a period.
pub async fn figures(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<VisitFigures, mongodb::error::Error> {
    let whole = [(period.from, period.to)];
    let (units, visitors) = tokio::try_join!(
        read_units(store, scope, period),
        visitors(store, scope, &whole),
    )?;
    Ok(units.figures(None, visitors.map(|v| v[0])))
}

/// The most pages whose visitors are read by naming them.
const PAGES_NAMED: usize = 1_000;

/// The visitors of each page named (a screen of top pages, or a whole
/// list) over a period, in their order; their entries and exits are
/// [`entries_and_exits`]'s, read once for every page. A site whose totals
/// are complete takes its settled UTC days from the page summaries (the
/// same ones its top pages come from); the rest, and every range of other
/// sites, is one read of buckets per level: the named pages', or for more
/// than [`PAGES_NAMED`] the site's pages' (see `visit_reads::Whose`).
pub async fn page_visitors(
    store: &Store,
    scope: &Scope<'_>,
    pages: &[&crate::domain::Page],
    period: &Period,
    now: DateTime<Utc>,
) -> Result<Vec<i64>, mongodb::error::Error> {
    let mut rows: HashMap<&str, i64> = pages.iter().map(|p| (p.as_str(), 0)).collect();
    let whose = match scope {
        Scope::SiteTotals(site) if pages.len() > PAGES_NAMED => {
            Whose::SitePages(&site.domain, pages)
        }
        Scope::Site(domain) if pages.len() > PAGES_NAMED => Whose::SitePages(domain, pages),
        _ => Whose::Pages(pages),
    };
    let day = Resolution::Day;
    let to = reach(period.to, now);
    let first_day = day.ceil(period.from);
    // Days not yet settled (today) are read for the pages named: the
    // summaries give them without visitors.
    let last_day = super::page_totals::settled_days_end(day.floor(to));
    let mut rest = vec![(period.from, to)];
    if let Scope::SiteTotals(site) = scope {
        if first_day < last_day && !pages.is_empty() {
            let whole = super::page_totals::whole_days(store, site, (first_day, last_day)).await?;
            for (page, visitors) in rows.iter_mut() {
                if let Some(p) = whole.get(*page) {
                    *visitors += p.visitors;
                }
            }
            rest = vec![(period.from, first_day), (last_day, to)];
        }
    }
    for (from, to) in rest.into_iter().filter(|(a, b)| a < b) {
        let read = visitors_of_pages(store, whose, (from, to)).await?;
        for (page, visitors) in rows.iter_mut() {
            *visitors += read.get(*page).copied().unwrap_or(0);
        }
    }
    Ok(pages
        .iter()
        .map(|p| rows.get(p.as_str()).copied().unwrap_or(0))
        .collect())
}

/// Where reading a range that ends at `to` may stop instead: nothing is
/// stored after `now` (a hit is stamped when it arrives), so a range that
/// reaches past it may be read to the end of the current UTC day, which
/// makes today one whole day (its day buckets, its kept figures) rather
/// than its hours, as a Europe/Berlin "today" ending at 23:00 UTC would be.
pub fn reach(to: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    if to >= now {
        to.max(Resolution::Day.ceil(now))
    } else {
        to
    }
}

/// Entries and exits of every page of a site over a period (`pages.csv`):
/// whole UTC days, and the other whole UTC hours, from the page summaries
/// when its totals are complete; the rest from its page buckets.
pub async fn entries_and_exits(
    store: &Store,
    site: &crate::storage::sites::Site,
    period: &Period,
) -> Result<[HashMap<String, i64>; 2], mongodb::error::Error> {
    let mut out = [HashMap::new(), HashMap::new()];
    let mut rest = vec![(period.from, period.to)];
    if let Scope::SiteTotals(site) = Scope::of_site(site) {
        let split = super::page_totals::summarised(store, site, (period.from, period.to)).await?;
        for whole in &split.answers {
            for (page, p) in whole.iter() {
                for (counts, n) in out.iter_mut().zip([p.entries, p.exits]) {
                    if n != 0 {
                        *counts.entry(page.clone()).or_default() += n;
                    }
                }
            }
        }
        rest = split.rest;
    }
    for (from, to) in rest.into_iter().filter(|(a, b)| a < b) {
        let edge = Period::aligned_in(from, to, Resolution::Hour, chrono_tz::Tz::UTC);
        let read = queries::counters_by_page(store, &site.domain, &edge, &[VISITS, EXITS]).await?;
        for (counts, read) in out.iter_mut().zip(read) {
            for (page, n) in read {
                *counts.entry(page).or_default() += n;
            }
        }
    }
    Ok(out)
}

/// The pages a site's pages reports list over a period, alike on the
/// dashboard, in the API and in `pages.csv`: `top`, the pages viewed
/// ([`queries::top_pages`]), then the pages with entries or exits and no
/// views, by name, at 0 views. Those are an imported day's entry and exit
/// pages that have no pages row: without them the entries and exits of
/// the rows would not add up to the site's. Also every page's entries and
/// exits ([`entries_and_exits`]), read after `top` so that its whole days
/// are found kept rather than read again.
pub async fn listed_pages(
    store: &Store,
    site: &crate::storage::sites::Site,
    period: &Period,
    top: Vec<(crate::domain::Page, i64)>,
) -> Result<(Vec<(crate::domain::Page, i64)>, [HashMap<String, i64>; 2]), mongodb::error::Error> {
    let counts = entries_and_exits(store, site, period).await?;
    Ok((with_unviewed(top, &counts), counts))
}

/// `top` followed by the pages of `counts` (entries, exits) that are not
/// in it and have some, by name, at 0 views.
fn with_unviewed(
    mut top: Vec<(crate::domain::Page, i64)>,
    counts: &[HashMap<String, i64>; 2],
) -> Vec<(crate::domain::Page, i64)> {
    let listed: std::collections::HashSet<&str> = top.iter().map(|(p, _)| p.as_str()).collect();
    let mut more: Vec<&String> = counts
        .iter()
        .flatten()
        .filter(|(page, n)| **n != 0 && !listed.contains(page.as_str()))
        .map(|(page, _)| page)
        .collect();
    more.sort_unstable();
    more.dedup();
    let more: Vec<_> = more
        .into_iter()
        .map(|page| (crate::domain::Page::from_stored(page.clone()), 0))
        .collect();
    top.extend(more);
    top
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
/// the UTC hours it covers whole in the other days, and the minutes of
/// the hours it cuts.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    days: BTreeSet<DateTime<Utc>>,
    hours: BTreeSet<DateTime<Utc>>,
    minutes: BTreeSet<DateTime<Utc>>,
}

/// A part of a range within one UTC day covered in part: its whole UTC
/// hours and the minutes of the hours it cuts.
#[derive(Debug, Clone, Default, PartialEq)]
struct Part {
    hours: Vec<DateTime<Utc>>,
    minutes: Vec<DateTime<Utc>>,
}

/// A part of a range within one UTC day: the day, and `None` when the
/// range covers it whole.
type Piece = (DateTime<Utc>, Option<Part>);

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
            let mut part = Part::default();
            let mut t = Resolution::Minute.floor(a);
            while t < b {
                if hour.floor(t) == t && t + TimeDelta::hours(1) <= b {
                    part.hours.push(t);
                    t += TimeDelta::hours(1);
                } else {
                    part.minutes.push(t);
                    t += TimeDelta::minutes(1);
                }
            }
            out.push((d, Some(part)));
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
    let key = match scope {
        Scope::Site(_) => return Ok(None),
        Scope::SiteTotals(site) => format!("site:{}", site.domain),
        Scope::Page(page) => format!("page:{page}"),
    };
    let split: Vec<_> = ranges.iter().map(|&(a, b)| pieces(a, b)).collect();
    let days: BTreeSet<DateTime<Utc>> = split.iter().flatten().map(|(d, _)| *d).collect();
    let totals = day_totals(store, scope, &days).await?;
    // Each distinct part once: kept, nothing that day, or to be read.
    let kept = store.day_visitors();
    let mut known: HashMap<(DateTime<Utc>, Hours), u64> = HashMap::new();
    let mut missing: Vec<&Piece> = Vec::new();
    let mut queued: std::collections::HashSet<(DateTime<Utc>, Hours)> = Default::default();
    let mut cut: Vec<&Piece> = Vec::new();
    for piece in split.iter().flatten() {
        // A piece cut inside an hour is read each time (its minutes are
        // the recent ones, which hits still change).
        let Some(hours) = hours_of(piece) else {
            cut.push(piece);
            continue;
        };
        let part = (piece.0, hours);
        if known.contains_key(&part) || queued.contains(&part) {
            continue;
        }
        let total = totals.get(&piece.0).copied().unwrap_or(0);
        let found = if total == 0 {
            Some(0)
        } else {
            kept.get(&key, part.0, part.1, total)
        };
        match found {
            Some(n) => {
                known.insert(part, n);
            }
            None => {
                queued.insert(part);
                missing.push(piece);
            }
        }
    }
    let mut counted_cut: HashMap<(DateTime<Utc>, Vec<DateTime<Utc>>), u64> = HashMap::new();
    if !missing.is_empty() || !cut.is_empty() {
        let read: Vec<Piece> = missing.iter().chain(&cut).map(|p| (*p).clone()).collect();
        let plan = plan_of(&[read]);
        let (by_day, by_hour, by_minute) = tokio::try_join!(
            sketches(store, Whose::Scope(scope), Resolution::Day, &plan.days),
            sketches(store, Whose::Scope(scope), Resolution::Hour, &plan.hours),
            sketches(
                store,
                Whose::Scope(scope),
                Resolution::Minute,
                &plan.minutes
            ),
        )?;
        let read = Reads {
            by_day,
            by_hour,
            by_minute,
        };
        for piece in missing {
            let n = count_piece("", piece, &read);
            let Some(hours) = hours_of(piece) else {
                continue;
            };
            let day = piece.0;
            let total = totals.get(&day).copied().unwrap_or(0);
            kept.keep(&key, day, hours, total, n);
            known.insert((day, hours), n);
        }
        for piece in cut {
            counted_cut.insert(cut_key(piece), count_piece("", piece, &read));
        }
    }
    let count = |p: &Piece| match hours_of(p) {
        Some(hours) => known.get(&(p.0, hours)).copied().unwrap_or(0),
        None => counted_cut.get(&cut_key(p)).copied().unwrap_or(0),
    };
    Ok(Some(
        split
            .iter()
            .map(|pieces| pieces.iter().map(count).sum::<u64>() as i64)
            .collect(),
    ))
}

/// The hours of its UTC day a piece covers; `None` for one cut inside an
/// hour.
fn hours_of((_, part): &Piece) -> Option<Hours> {
    match part {
        None => Some(WHOLE_DAY),
        Some(part) if part.minutes.is_empty() => {
            Some(part.hours.iter().fold(0, |mask, h| mask | 1 << h.hour()))
        }
        Some(_) => None,
    }
}

/// What tells a piece cut inside an hour from another: its day, hours
/// and minutes.
fn cut_key((day, part): &Piece) -> (DateTime<Utc>, Vec<DateTime<Utc>>) {
    let mut starts = Vec::new();
    if let Some(part) = part {
        starts.extend(part.hours.iter().chain(&part.minutes).copied());
    }
    (*day, starts)
}

/// Unique visitors of each page named over a range.
async fn visitors_of_pages(
    store: &Store,
    whose: Whose<'_>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<String, i64>, mongodb::error::Error> {
    let pages = match whose {
        Whose::Pages(pages) | Whose::SitePages(_, pages) => pages,
        Whose::Scope(_) => &[],
    };
    let split = pieces(from, to);
    let plan = plan_of(std::slice::from_ref(&split));
    let (by_day, by_hour, by_minute) = tokio::try_join!(
        sketches(store, whose, Resolution::Day, &plan.days),
        sketches(store, whose, Resolution::Hour, &plan.hours),
        sketches(store, whose, Resolution::Minute, &plan.minutes),
    )?;
    let read = Reads {
        by_day,
        by_hour,
        by_minute,
    };
    Ok(pages
        .iter()
        .map(|p| {
            let count = |piece: &Piece| count_piece(p.as_str(), piece, &read);
            (
                p.as_str().to_owned(),
                split.iter().map(count).sum::<u64>() as i64,
            )
        })
        .collect())
}

/// The days and hours the pieces of some ranges read.
fn plan_of(split: &[Vec<Piece>]) -> Plan {
    let mut plan = Plan::default();
    for (day, part) in split.iter().flatten() {
        match part {
            None => {
                plan.days.insert(*day);
            }
            Some(part) => {
                plan.hours.extend(part.hours.iter().copied());
                plan.minutes.extend(part.minutes.iter().copied());
            }
        }
    }
    plan
}

/// The sketches read at each level.
struct Reads {
    by_day: Read,
    by_hour: Read,
    by_minute: Read,
}

/// The visitors of one piece of a range: its day's sketch when it covers
/// the day whole, else the union of its hours' and minutes'.
fn count_piece(page: &str, (day, part): &Piece, read: &Reads) -> u64 {
    match part {
        None => read
            .by_day
            .get(page)
            .and_then(|days| days.get(day))
            .map_or(0, Sketch::estimate_count),
        Some(part) => {
            let mut union = Sketch::default();
            for (level, starts) in [
                (&read.by_hour, &part.hours),
                (&read.by_minute, &part.minutes),
            ] {
                if let Some(read) = level.get(page) {
                    for sketch in starts.iter().filter_map(|t| read.get(t)) {
                        union.merge(sketch);
                    }
                }
            }
            union.estimate_count()
        }
    }
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
        let hours = |p: &Piece| p.1.as_ref().map(|part| part.hours.clone());
        assert_eq!(hours(&p[0]), Some(vec![t(24, 23, 0)]));
        assert_eq!(hours(&p[1]).map(|h| h.len()), Some(23));
        // Three UTC days: the middle one whole.
        let p = pieces(t(23, 12, 0), t(25, 1, 0));
        assert_eq!(p[1], (t(24, 0, 0), None));
        assert_eq!(hours(&p[2]), Some(vec![t(25, 0, 0)]));
        // An edge inside an hour (+05:30) reads the minutes it covers.
        let p = pieces(t(24, 18, 30), t(24, 19, 30));
        let minutes: Vec<_> = (30..60)
            .map(|m| t(24, 18, m))
            .chain((0..30).map(|m| t(24, 19, m)))
            .collect();
        assert_eq!(
            p,
            vec![(
                t(24, 0, 0),
                Some(Part {
                    hours: vec![],
                    minutes
                })
            )]
        );
        // Whole hours between cut ones are read as hours.
        let p = pieces(t(24, 9, 58), t(24, 11, 1));
        let part = p[0].1.clone().unwrap();
        assert_eq!(part.hours, vec![t(24, 10, 0)]);
        assert_eq!(part.minutes, vec![t(24, 9, 58), t(24, 9, 59), t(24, 11, 0)]);
        assert!(pieces(t(24, 0, 0), t(24, 0, 0)).is_empty());
    }

    #[test]
    fn a_range_past_now_is_read_to_the_end_of_today() {
        let now = t(25, 8, 10);
        // Berlin's today ends at 23:00 UTC: read as the whole UTC day.
        assert_eq!(reach(t(25, 23, 0), now), t(26, 0, 0));
        // Already past the end of today: unchanged.
        assert_eq!(reach(t(27, 0, 0), now), t(27, 0, 0));
        // Ending before now: what comes after it is stored, unchanged.
        assert_eq!(reach(t(25, 8, 0), now), t(25, 8, 0));
        assert_eq!(reach(t(24, 23, 0), now), t(24, 23, 0));
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

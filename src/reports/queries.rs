//! Report queries: what a report reads for a period (which units, at
//! which level) and how the numbers add up into what it shows. The reads
//! themselves (collections, filters, indexes) are `storage::report_reads`.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{BTreeSet, HashMap};

use super::period::{Period, Resolution};
use crate::domain::{DomainName, Page};
use crate::storage::report_reads::{add_slots, add_views, add_whole_day_views, time_filter};
use crate::storage::report_reads::{BucketFind, Freshness};
use crate::storage::Store;

pub use crate::storage::report_reads::{
    has_views, latest_minute, number, page_units, pages_at, realtime_seconds, seconds_of,
    site_day_range, site_day_totals, site_totals, site_totals_guarded, site_visits, Scope,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub at: DateTime<Utc>,
    pub views: i64,
}

/// Views per shown bucket over the period, one point per local bucket,
/// 0 where there were none.
pub async fn series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    Ok(rollup(period, &read_series(store, scope, period).await?))
}

/// The period's views as units (see [`Period`]): whole UTC hours where no
/// bucket boundary cuts them, minutes elsewhere; only those with views,
/// oldest first. [`rollup`] adds them up into the shown buckets; the change
/// against the previous period compares them directly.
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "series", scope = ?scope, from = %period.from, to = %period.to, read = period.read.as_str()))]
pub async fn read_series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    read_series_from(store, scope, period, Freshness::Report).await
}

/// [`read_series`] for a realtime panel: read from the primary when it
/// answers, so the last minutes are not missing on a lagging secondary.
pub async fn realtime_series(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<Point>, mongodb::error::Error> {
    read_series_from(store, scope, period, Freshness::Realtime).await
}

async fn read_series_from(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    freshness: Freshness,
) -> Result<Vec<Point>, mongodb::error::Error> {
    let units = read_units(store, scope, period, false, freshness).await?;
    Ok(Units::points(units.by_time))
}

/// What a read found: views per unit, and per page for a site read from
/// its page buckets.
#[derive(Default)]
struct Units {
    by_time: HashMap<DateTime<Utc>, i64>,
    by_page: HashMap<String, i64>,
}

impl Units {
    fn add(&mut self, at: DateTime<Utc>, page: Option<&str>, views: i64) {
        if views == 0 {
            return;
        }
        *self.by_time.entry(at).or_default() += views;
        if let Some(page) = page {
            add_views(&mut self.by_page, page, views);
        }
    }

    /// The units in time order.
    fn points(by_time: HashMap<DateTime<Utc>, i64>) -> Vec<Point> {
        let mut points: Vec<Point> = by_time
            .into_iter()
            .map(|(at, views)| Point { at, views })
            .collect();
        points.sort_by_key(|p| p.at);
        points
    }
}

/// Reads a period as units: the hour buckets' `minutes` slots for every
/// hour when shown by minute, else only for the UTC hours a boundary cuts
/// (the range's edges, local hours or days starting inside a UTC hour); the
/// day buckets' `hours` slots for every other whole hour.
async fn read_units(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    by_page: bool,
    freshness: Freshness,
) -> Result<Units, mongodb::error::Error> {
    let target = Target::Scope(scope, by_page);
    let mut units = read_units_of(store, target, period, freshness, &[VIEWS]).await?;
    Ok(units.pop().unwrap_or_default())
}

/// Which slot maps of the hour and day buckets a read adds up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    pub hour: &'static str,
    pub day: &'static str,
}

/// The views: `minutes` of hour buckets, `hours` of day buckets.
pub const VIEWS: Slots = Slots {
    hour: "minutes",
    day: "hours",
};

impl Slots {
    /// A visit counter (`storage::buckets::VisitFields`): the same name at
    /// both levels, its slots minutes in hour buckets and hours in day
    /// buckets like the views'.
    pub const fn counter(name: &'static str) -> Self {
        Slots {
            hour: name,
            day: name,
        }
    }
}

/// A counter's units over a period, as [`read_series`] reads the views.
pub async fn read_counter(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    slots: Slots,
) -> Result<Vec<Point>, mongodb::error::Error> {
    let mut read = read_counters(store, scope, period, &[slots]).await?;
    Ok(read.pop().unwrap_or_default())
}

/// Several counters' units over a period, read together: one pass over
/// the buckets instead of one per counter (on secantusd-rs a read costs
/// per bucket it returns, whatever it projects).
pub async fn read_counters(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    fields: &[Slots],
) -> Result<Vec<Vec<Point>>, mongodb::error::Error> {
    let target = Target::Scope(scope, false);
    let units = read_units_of(store, target, period, Freshness::Report, fields).await?;
    Ok(units
        .into_iter()
        .map(|u| Units::points(u.by_time))
        .collect())
}

/// Counters per page of a site (the site's page buckets) over a period,
/// read together.
pub async fn counters_by_page(
    store: &Store,
    domain: &DomainName,
    period: &Period,
    fields: &[Slots],
) -> Result<Vec<HashMap<String, i64>>, mongodb::error::Error> {
    let site = Scope::Site(domain);
    let target = Target::Scope(&site, true);
    let units = read_units_of(store, target, period, Freshness::Report, fields).await?;
    Ok(units.into_iter().map(|u| u.by_page).collect())
}

/// Counters per page of the pages named (a screen of top pages) over a
/// period: one read of their buckets per level, whatever their number.
pub async fn counters_of_pages(
    store: &Store,
    pages: &[&Page],
    period: &Period,
    fields: &[Slots],
) -> Result<Vec<HashMap<String, i64>>, mongodb::error::Error> {
    if pages.is_empty() {
        return Ok(vec![HashMap::new(); fields.len()]);
    }
    let units = read_units_of(
        store,
        Target::Pages(pages),
        period,
        Freshness::Report,
        fields,
    )
    .await?;
    Ok(units.into_iter().map(|u| u.by_page).collect())
}

/// At most this many whole hours of a UTC day are read from its hour
/// buckets instead of its day buckets (see `read_units_of`).
const FEW_HOURS: usize = 6;

/// Whose buckets a read adds up: a scope's (`true`: kept apart by page),
/// or those of the pages named.
#[derive(Clone, Copy)]
enum Target<'a> {
    Scope(&'a Scope<'a>, bool),
    Pages(&'a [&'a Page]),
}

async fn read_units_of(
    store: &Store,
    target: Target<'_>,
    period: &Period,
    freshness: Freshness,
    fields: &[Slots],
) -> Result<Vec<Units>, mongodb::error::Error> {
    let (from, to) = (period.from, period.to);
    let hour = Resolution::Hour;
    let (h0, h1) = (hour.floor(from), hour.ceil(to));
    let all_minutes = period.resolution == Resolution::Minute;
    let mut cut: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    if !all_minutes {
        for b in period.points().into_iter().chain([from, to]) {
            if !hour.aligned(b) {
                cut.insert(hour.floor(b));
            }
        }
    }
    let key_field = match target {
        Target::Scope(Scope::Site(_), true) | Target::Pages(_) => Some("page"),
        _ => None,
    };
    let find = |g: Resolution, times: Document| match target {
        Target::Scope(scope, _) => BucketFind::new(store, freshness, scope, g, times),
        Target::Pages(pages) => BucketFind::of_pages(store, freshness, pages, g, times),
    };
    // A UTC day of which a range wants only a few whole hours (the hour
    // before a Europe/Berlin midnight, the first hours of today) is read
    // from those hours' buckets, a page-hour each, rather than from the
    // day's buckets, one per page active at any time that day.
    let (first, last) = (hour.ceil(from), hour.floor(to));
    if !all_minutes {
        let mut day = Resolution::Day.floor(first);
        while day < last {
            let next = day + TimeDelta::days(1);
            let (a, b) = (first.max(day), last.min(next));
            let wanted: Vec<DateTime<Utc>> = (0..(b - a).num_hours())
                .map(|h| a + TimeDelta::hours(h))
                .filter(|h| !cut.contains(h))
                .collect();
            if wanted.len() <= FEW_HOURS {
                cut.extend(wanted);
            }
            day = next;
        }
    }
    let mut units: Vec<Units> = fields.iter().map(|_| Units::default()).collect();
    let hours = (h1 - h0).num_hours();
    if all_minutes || !cut.is_empty() {
        // A long list of cut hours (every local hour at +05:30) is read
        // as a range and filtered here.
        let times = if all_minutes || cut.len() as i64 * 4 > hours {
            time_filter(h0, h1)
        } else {
            let list: Vec<bson::DateTime> = cut
                .iter()
                .map(|t| bson::DateTime::from_chrono(*t))
                .collect();
            doc! {"$in": list}
        };
        let keep = |start, at| (all_minutes || cut.contains(&start)) && at >= from && at < to;
        let slots: Vec<&str> = fields.iter().map(|f| f.hour).collect();
        let buckets = find(Resolution::Hour, times);
        let width = TimeDelta::minutes(1);
        add_slots(
            store,
            buckets,
            (&slots, width),
            key_field,
            keep,
            |i, at, page, n| units[i].add(at, page, n),
        )
        .await?;
    }
    // The days whose hours are not all cut: the first and last may be.
    let day = Resolution::Day;
    let mut left = std::iter::successors(Some(first), |h| Some(*h + TimeDelta::hours(1)))
        .take_while(|h| *h < last)
        .filter(|h| !cut.contains(h));
    if let (false, Some(a)) = (all_minutes, left.next()) {
        let b = left.last().unwrap_or(a);
        let times = time_filter(day.floor(a), (day.floor(b) + TimeDelta::days(1)).min(last));
        let keep = |_, at| at >= first && at < last && !cut.contains(&at);
        let slots: Vec<&str> = fields.iter().map(|f| f.day).collect();
        let buckets = find(Resolution::Day, times);
        let width = TimeDelta::hours(1);
        add_slots(
            store,
            buckets,
            (&slots, width),
            key_field,
            keep,
            |i, at, page, n| units[i].add(at, page, n),
        )
        .await?;
    }
    Ok(units)
}

/// Units added up into the shown (local) buckets.
pub fn rollup(period: &Period, units: &[Point]) -> Vec<Point> {
    let starts = period.points();
    let mut shown: Vec<Point> = starts.iter().map(|&at| Point { at, views: 0 }).collect();
    for u in units {
        let i = starts.partition_point(|s| *s <= u.at);
        if i > 0 {
            if let Some(slot) = shown.get_mut(i - 1) {
                slot.views += u.views;
            }
        }
    }
    shown
}

/// Pages with views, most viewed first, ties by page.
fn ranked(pages: impl IntoIterator<Item = (Page, i64)>) -> Vec<(Page, i64)> {
    let mut pages: Vec<(Page, i64)> = pages.into_iter().filter(|(_, v)| *v > 0).collect();
    pages.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    pages
}

fn ranked_pages(by_page: HashMap<String, i64>) -> Vec<(Page, i64)> {
    ranked(
        by_page
            .into_iter()
            .map(|(page, views)| (Page::from_stored(page), views)),
    )
}

/// A site's series (units, as [`read_series`]) and its pages ranked, as
/// [`top_pages`]: from the site's totals and one projected scan of its page
/// buckets when its totals are complete, else from that one scan alone.
pub async fn site_overview(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<(Vec<Point>, Vec<(Page, i64)>), mongodb::error::Error> {
    match scope {
        Scope::SiteTotals(_) => {
            let (series, pages) = tokio::try_join!(
                read_series(store, scope, period),
                top_pages(store, scope, period)
            )?;
            Ok((series, pages))
        }
        _ => {
            let units = read_units(store, scope, period, true, Freshness::Report).await?;
            Ok((Units::points(units.by_time), ranked_pages(units.by_page)))
        }
    }
}

pub fn total(points: &[Point]) -> i64 {
    points.iter().map(|p| p.views).sum()
}

/// Every page of a site with views in the period, most viewed first (ties
/// by page), counting exactly the views of the series so the page totals
/// add up to the site total shown beside them.
///
/// A page's total does not care when in the range a view was: whole UTC
/// days inside the range are read as the day buckets' `totalViews`, and
/// only the edges before the first and after the last whole day as units.
/// With the site's totals complete ([`Scope::SiteTotals`]) the whole days
/// and the edges' whole UTC hours come from the page summaries
/// ([`super::page_totals`]), checked against the site's day and hour
/// totals; else they are summed by `$group` on MongoDB and in the app on
/// secantusd-rs (see `Grouping`).
#[tracing::instrument(name = "report_query", level = "debug", skip_all, fields(query = "top_pages", from = %period.from, to = %period.to))]
pub async fn top_pages(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
) -> Result<Vec<(Page, i64)>, mongodb::error::Error> {
    let domain = match scope {
        Scope::Site(domain) => *domain,
        Scope::SiteTotals(site) => &site.domain,
        Scope::Page(page) => {
            let units = read_units(store, scope, period, false, Freshness::Report).await?;
            let views = units.by_time.values().sum();
            return Ok(ranked([((*page).clone(), views)]));
        }
    };
    let pages_of_site = Scope::Site(domain);
    let (first_day, last_day) = (
        Resolution::Day.ceil(period.from),
        Resolution::Day.floor(period.to),
    );
    let complete = match scope {
        Scope::SiteTotals(site) => Some(*site),
        _ => None,
    };
    if period.resolution == Resolution::Minute || (first_day >= last_day && complete.is_none()) {
        let units = read_units(store, &pages_of_site, period, true, Freshness::Report).await?;
        return Ok(ranked_pages(units.by_page));
    }
    let mut by_page: HashMap<String, i64> = HashMap::new();
    // Whole UTC days and hours of a site with complete totals from the
    // page summaries; minutes only where an edge cuts an hour.
    let edges = match complete {
        Some(site) => {
            let split =
                super::page_totals::summarised(store, site, (period.from, period.to)).await?;
            for whole in &split.answers {
                for (page, f) in whole.iter() {
                    add_views(&mut by_page, page, f.views);
                }
            }
            split.rest
        }
        None if first_day < last_day => vec![(period.from, first_day), (last_day, period.to)],
        None => vec![(period.from, period.to)],
    };
    for (from, to) in edges.into_iter().filter(|(a, b)| a < b) {
        let edge = Period::aligned_in(from, to, Resolution::Hour, chrono_tz::Tz::UTC);
        let units = read_units(store, &pages_of_site, &edge, true, Freshness::Report).await?;
        for (page, views) in units.by_page {
            *by_page.entry(page).or_default() += views;
        }
    }
    if complete.is_none() && first_day < last_day {
        add_whole_day_views(store, domain, (first_day, last_day), &mut by_page).await?;
    }
    Ok(ranked_pages(by_page))
}

/// How many minutes "right now" covers: this one and the four before.
pub const NOW_MINUTES: i64 = 5;

/// A scope's views of the last [`NOW_MINUTES`] minutes, the current one
/// included, read from the primary like the realtime panels.
pub async fn views_now(
    store: &Store,
    scope: &Scope<'_>,
    now: DateTime<Utc>,
) -> Result<i64, mongodb::error::Error> {
    let from = Resolution::Minute.floor(now) - TimeDelta::minutes(NOW_MINUTES - 1);
    let to = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
    let period = Period::aligned_in(from, to, Resolution::Minute, chrono_tz::Tz::UTC);
    Ok(total(&realtime_series(store, scope, &period).await?))
}

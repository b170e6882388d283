//! Filtered figures, computed from the stored visits (one record per visit
//! with its dimensions and its ordered pages and events) rather than from
//! the buckets, which keep no dimension beside another.
//!
//! What a filtered report counts (docs/segments.md says it to users):
//! - the visits that pass every filter (a filter looks at the whole
//!   visit: a `page` filter selects the visits that viewed the page);
//! - of those, as the unfiltered reports count at every edge of a range:
//!   a visit, its bounce (a visit of one view) and its entry in the
//!   period it started in; a view, its share of the visit's duration (the
//!   seconds since the visit's previous view), its exit (the visit's last
//!   view) and its visitor in the period it happened in; an event in the
//!   period it was sent in; so a range starting at 10:15 counts the views
//!   after 10:15 of a visit that started at 10:00, and not the visit;
//! - with a `page` filter only the views of the pages it names count, as
//!   in Plausible;
//! - visitors as the union of the visits' sketch registers per UTC day,
//!   summed over the days, as the unfiltered reports count them.
//!
//! This module is the computation alone, over [`VisitRecord`]s: the read
//! of the store and the pages around it are elsewhere, so it is tested
//! with plain values.

use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::domain::filter::{Condition, Filter, FilterDimension, Filters};
use crate::domain::revenue::{self, RevenueTotal};
use crate::domain::sketch::{Sketch, REGISTERS};
use crate::domain::{Currency, Dimension, FunnelSteps, Goal};
use crate::storage::imported_properties::ImportedRange;

pub use crate::domain::visit::{Step, VisitRecord};

/// Whether a visit passes every filter.
pub fn admits(filters: &Filters, visit: &VisitRecord) -> bool {
    filters.iter().all(|f| holds(f, visit))
}

fn holds(filter: &Filter, visit: &VisitRecord) -> bool {
    let page = |path: Option<&str>| match filter.condition() {
        Condition::Page(m) => path.is_some_and(|p| m.matches(p)),
        Condition::Name(_) | Condition::Property { .. } => false,
    };
    match filter.dimension() {
        FilterDimension::Page => visit.views().any(|p| page(Some(p))),
        FilterDimension::Entry => page(visit.entry()),
        FilterDimension::Exit => page(visit.exit()),
        FilterDimension::Event => visit
            .steps
            .iter()
            .filter_map(Step::event)
            .any(|e| filter.names(e)),
        FilterDimension::Property => filter
            .condition()
            .property()
            .is_some_and(|(key, value)| visit.property(key).any(|(_, v)| v == value)),
        other => other
            .breakdown()
            .and_then(|d| visit.labels.get(&d))
            .is_some_and(|name| filter.names(name)),
    }
}

/// The views of an admitted visit that count: all of them, or with page
/// filters only those of pages every page filter names.
pub fn counted_views<'a>(
    filters: &'a Filters,
    visit: &'a VisitRecord,
) -> impl Iterator<Item = &'a str> + 'a {
    visit
        .views()
        .filter(move |p| filters.pages().all(|m| m.matches(p)))
}

/// The figures of one page of the pages panel.
#[derive(Debug, Clone, Default)]
pub struct PageFigures {
    pub views: i64,
    /// Admitted visits that entered or left on it.
    pub entries: i64,
    pub exits: i64,
    visitors: DaySketches,
}

impl PageFigures {
    pub fn visitors(&self) -> i64 {
        self.visitors.estimate()
    }
}

/// Visitors as the unfiltered reports count them: a sketch per UTC day
/// (a visitor's id changes with the day), the estimates added up.
#[derive(Debug, Clone)]
pub struct DaySketches {
    days: BTreeMap<NaiveDate, Sketch>,
    /// The share of visitors read, to scale the estimate up by.
    share: f64,
    /// The visits added, per UTC day: each visitor counted has at least
    /// one of them, so no day's estimate may exceed them (a sketch's
    /// error, or its scaling from a sample, would otherwise show more
    /// visitors than visits).
    visits: BTreeMap<NaiveDate, i64>,
    /// The visit added last, so that one visit counts once.
    last: Option<(usize, NaiveDate)>,
}

impl Default for DaySketches {
    fn default() -> Self {
        DaySketches {
            days: BTreeMap::new(),
            share: 1.0,
            visits: BTreeMap::new(),
            last: None,
        }
    }
}

/// A count read from a sample, scaled up by the share read: the one
/// rounding every filtered count gets, visits and their visitors' bound
/// alike, so the two can be compared after it.
fn scaled(n: i64, share: f64) -> i64 {
    if share >= 1.0 {
        n
    } else {
        (n as f64 / share).round() as i64
    }
}

impl DaySketches {
    /// The visitor of visit number `visit` (visits are added one after
    /// the other), seen at `at`.
    fn add(&mut self, visit: usize, at: DateTime<Utc>, register: Option<(u16, u8)>) {
        let day = at.date_naive();
        if self.last != Some((visit, day)) {
            self.last = Some((visit, day));
            *self.visits.entry(day).or_default() += 1;
        }
        if let Some((index, rank)) = register {
            self.days.entry(day).or_default().raise(index, rank);
        }
    }

    pub fn estimate(&self) -> i64 {
        // A sample keeps the visitors of the first registers only: each
        // day's sketch is estimated over those registers and scaled up.
        let kept = (self.share * REGISTERS as f64).round() as usize;
        let n: i64 = self
            .days
            .iter()
            .map(|(day, sketch)| {
                let estimate = if self.share >= 1.0 {
                    i64::try_from(sketch.estimate_count()).unwrap_or(i64::MAX)
                } else {
                    sketch.estimate_sampled(kept).round() as i64
                };
                let bound = scaled(self.visits.get(day).copied().unwrap_or(0), self.share);
                estimate.min(bound)
            })
            .sum();
        n
    }
}

/// Everything a filtered report shows, for one period.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub views: i64,
    pub visits: i64,
    pub bounces: i64,
    pub duration_secs: i64,
    visitors: DaySketches,
    /// Per page path.
    pub pages: HashMap<String, PageFigures>,
    /// Per dimension, views per name (events: events per name).
    pub breakdowns: BTreeMap<Dimension, HashMap<String, i64>>,
    /// Visits that viewed each page (any of their views, whatever the page
    /// filters), and visits that sent each event: the goals' conversions.
    pub converting_pages: HashMap<String, i64>,
    pub converting_events: HashMap<String, i64>,
    /// Per event name and currency: the revenue its events carried (in
    /// ten-thousandths) and how many carried one.
    pub revenue: HashMap<String, HashMap<Currency, (i128, i64)>>,
    /// Per goal on an event with a property value ([`compute_for_goals`]):
    /// its events that carried the value, the visits that sent one, and
    /// their revenue.
    pub event_properties: HashMap<EventProperty, EventPropertyFigures>,
    /// Per shown bucket (the period's points): views, visits, bounces,
    /// duration, visitors.
    pub series: Vec<SeriesPoint>,
    /// The share of visitors read (1: all of them); the counts above are
    /// already scaled back up by its inverse.
    pub sampled: f64,
}

/// An event's name and one property it carried.
pub type EventProperty = (Arc<str>, Arc<str>, Arc<str>);

/// What the events of one name carrying one property value count.
#[derive(Debug, Clone, Default)]
pub struct EventPropertyFigures {
    pub events: i64,
    pub visits: i64,
    pub revenue: HashMap<Currency, (i128, i64)>,
}

#[derive(Debug, Clone, Default)]
pub struct SeriesPoint {
    pub at: DateTime<Utc>,
    pub views: i64,
    pub visits: i64,
    /// Of the visits that started in it.
    pub bounces: i64,
    /// The seconds its views add to their visits' durations.
    pub duration_secs: i64,
    visitors: DaySketches,
}

impl SeriesPoint {
    pub fn visitors(&self) -> i64 {
        self.visitors.estimate()
    }
}

impl Figures {
    /// The revenue the event `name` carried, per currency (most used
    /// first).
    pub fn revenue_of(&self, name: &str) -> Vec<RevenueTotal> {
        self.revenue.get(name).map_or_else(Vec::new, |by| {
            revenue::totals(by.iter().map(|(c, (s, n))| (*c, *s, *n)))
        })
    }

    pub fn visitors(&self) -> i64 {
        self.visitors.estimate()
    }

    pub fn non_bounces(&self) -> i64 {
        self.visits - self.bounces
    }

    /// The pages by views, most first, then by path.
    pub fn top_pages(&self) -> Vec<(&str, &PageFigures)> {
        let mut rows: Vec<(&str, &PageFigures)> = self
            .pages
            .iter()
            .filter(|(_, f)| f.views > 0)
            .map(|(p, f)| (p.as_str(), f))
            .collect();
        rows.sort_by(|a, b| b.1.views.cmp(&a.1.views).then(a.0.cmp(b.0)));
        rows
    }

    /// A dimension's names by count, most first, then by name.
    pub fn top(&self, d: Dimension) -> Vec<(&str, i64)> {
        let mut rows: Vec<(&str, i64)> = self
            .breakdowns
            .get(&d)
            .map(|m| m.iter().map(|(n, c)| (n.as_str(), *c)).collect())
            .unwrap_or_default();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        rows
    }
}

/// The figures of the visits that pass `filters` over `[from, to)`,
/// bucketed at `points` (the starts of the period's shown buckets,
/// ascending; a time before the first is in none). As the unfiltered
/// reports count them: a visit, its bounce and its entry where it started;
/// a view, its share of the duration (the seconds since the visit's
/// previous view), its exit (a visit's last view) and its visitor where it
/// happened; an event where it happened. So `visits` must hold every visit
/// that started in the range, and every visit that started before it on
/// the UTC day of `from` (a visit never crosses a UTC day), for the views
/// they have in the range; visits starting at or after `to` add nothing.
/// `sampled` is the share of visitors the visits are (1: all): every
/// count, visitors included (a sample keeps or drops each visitor whole),
/// is scaled back up by its inverse.
pub fn compute<'a>(
    filters: &Filters,
    visits: impl IntoIterator<Item = &'a VisitRecord>,
    range: (DateTime<Utc>, DateTime<Utc>),
    points: &[DateTime<Utc>],
    sampled: f64,
) -> Figures {
    compute_for_goals(filters, visits, range, points, sampled, &[])
}

/// [`compute`], and for each of `goals` on an event with a property value
/// its figures (`Figures::event_properties`).
pub fn compute_for_goals<'a>(
    filters: &Filters,
    visits: impl IntoIterator<Item = &'a VisitRecord>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    points: &[DateTime<Utc>],
    sampled: f64,
    goals: &[Goal],
) -> Figures {
    let wanted = |name: &str, key: &str, value: &str| {
        goals
            .iter()
            .any(|g| g.event() == Some(name) && g.property() == Some((key, value)))
    };
    let mut f = Figures::none(points);
    f.sampled = if sampled > 0.0 && sampled < 1.0 {
        sampled
    } else {
        1.0
    };
    let in_range = |at: DateTime<Utc>| at >= from && at < to;
    let point_of = |at: DateTime<Utc>| points.partition_point(|p| *p <= at).checked_sub(1);
    let page_filtered = filters.pages().next().is_some();
    for (number, visit) in visits.into_iter().enumerate() {
        if visit.start >= to || !admits(filters, visit) {
            continue;
        }
        let started = in_range(visit.start);
        let last_view = visit.steps.iter().rposition(|s| s.path().is_some());
        let mut previous: Option<u32> = None;
        let (mut views, mut duration, mut kept_views) = (0i64, 0i64, 0i64);
        let mut seen: Vec<&str> = Vec::new();
        let mut sent: Vec<&str> = Vec::new();
        let mut carried: Vec<EventProperty> = Vec::new();
        for (i, step) in visit.steps.iter().enumerate() {
            let at = visit.start + chrono::TimeDelta::seconds(i64::from(step.offset()));
            match step {
                Step::View { offset, path } => {
                    kept_views += 1;
                    let gap = previous.map_or(0, |p| offset.saturating_sub(p));
                    previous = Some(*offset);
                    if !in_range(at) {
                        continue;
                    }
                    duration += i64::from(gap);
                    let point = point_of(at);
                    if let Some(p) = point {
                        f.series[p].duration_secs += i64::from(gap);
                    }
                    seen.push(path);
                    if Some(i) == last_view {
                        slot(&mut f.pages, path).exits += 1;
                    }
                    if !filters.pages().all(|m| m.matches(path)) {
                        continue;
                    }
                    views += 1;
                    let page = slot(&mut f.pages, path);
                    page.views += 1;
                    page.visitors.add(number, at, visit.register);
                    f.visitors.add(number, at, visit.register);
                    if let Some(p) = point {
                        f.series[p].views += 1;
                        f.series[p].visitors.add(number, at, visit.register);
                    }
                }
                Step::Event { name, .. } => {
                    if in_range(at) {
                        let revenue = visit.revenue_at(i);
                        for (_, key, value) in visit
                            .props
                            .iter()
                            .filter(|(s, k, v)| *s as usize == i && wanted(name, k, v))
                        {
                            let triple = (name.clone(), key.clone(), value.clone());
                            let figures = f.event_properties.entry(triple.clone()).or_default();
                            figures.events += 1;
                            if let Some(r) = revenue {
                                let (sum, n) = figures.revenue.entry(r.currency).or_default();
                                *sum += i128::from(r.amount.scaled());
                                *n += 1;
                            }
                            if !carried.contains(&triple) {
                                carried.push(triple);
                                figures.visits += 1;
                            }
                        }
                        sent.push(name);
                        if let Some(r) = visit.revenue_at(i) {
                            let (sum, n) = f
                                .revenue
                                .entry(name.to_string())
                                .or_default()
                                .entry(r.currency)
                                .or_default();
                            *sum += i128::from(r.amount.scaled());
                            *n += 1;
                        }
                    }
                }
            }
        }
        if started {
            f.visits += 1;
            f.visitors.add(number, visit.start, visit.register);
            let point = point_of(visit.start);
            if let Some(p) = point {
                f.series[p].visits += 1;
                f.series[p]
                    .visitors
                    .add(number, visit.start, visit.register);
            }
            if visit.bounced() {
                f.bounces += 1;
                if let Some(p) = point {
                    f.series[p].bounces += 1;
                }
            }
            if let Some(entry) = visit.entry() {
                slot(&mut f.pages, entry).entries += 1;
            }
            // Views past the steps a visit keeps are counted, not kept:
            // where it started, and only without a page filter (their
            // pages are unknown); so is the duration past its last kept
            // view.
            if !page_filtered && visit.views > kept_views {
                let extra = visit.views - kept_views;
                let more = (visit.duration - i64::from(previous.unwrap_or(0))).max(0);
                views += extra;
                duration += more;
                if let Some(p) = point {
                    f.series[p].views += extra;
                    f.series[p].duration_secs += more;
                }
            }
        }
        f.views += views;
        f.duration_secs += duration;
        for (d, name) in &visit.labels {
            // The breakdowns count views under each name, as the
            // unfiltered ones do.
            if views > 0 {
                *slot(f.breakdowns.entry(*d).or_default(), name) += views;
            }
        }
        for name in &sent {
            *slot(f.breakdowns.entry(Dimension::Event).or_default(), name) += 1;
        }
        seen.sort_unstable();
        seen.dedup();
        for path in seen {
            *slot(&mut f.converting_pages, path) += 1;
        }
        sent.sort_unstable();
        sent.dedup();
        for name in sent {
            *slot(&mut f.converting_events, name) += 1;
        }
    }
    if f.sampled < 1.0 {
        f.scale_up();
    }
    f
}

/// Most property keys one report lists, and most values of the chosen
/// key: the site's budget (`ingest::event_cap`) bounds what is stored, this
/// bounds what a page or an answer carries.
pub const MAX_PROPERTY_ROWS: usize = 1_000;

/// One value of a custom property over a range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropertyRow {
    pub value: String,
    /// Admitted visits with a counted step carrying it.
    pub visits: i64,
    /// Counted views carrying it.
    pub views: i64,
    /// Events carrying it.
    pub events: i64,
}

/// The custom properties of the visits passing the filters over a range.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PropertyFigures {
    /// Every key seen, with the visits carrying it, most first (ties by
    /// key).
    pub keys: Vec<(String, i64)>,
    /// The key whose values `rows` are (`None`: none was chosen, and no
    /// visit carries any).
    pub key: Option<String>,
    /// The values of the chosen key, most visits first (ties by value).
    pub rows: Vec<PropertyRow>,
    /// Admitted visits with a counted step in the range: what a row's
    /// share is of.
    pub visits: i64,
    /// The share of visitors read (1: all), as [`Figures::sampled`].
    pub sampled: f64,
    /// Whether imported days' properties and visits are counted in
    /// ([`PropertyFigures::with_imported`]).
    pub imported: bool,
}

impl PropertyFigures {
    /// These figures (read without filters) with what imports brought to
    /// the range: each imported value's events, and its visitors as
    /// visits, added to its key's visits and, for the chosen key, to its
    /// row; the imported days' visits to the visits a share is of. An
    /// import keeps a value's views (Umami's) and visits per day and event,
    /// so a visitor of two values or events counts in each.
    pub fn with_imported(mut self, imported: &ImportedRange) -> Self {
        if imported.is_empty() {
            return self;
        }
        let mut rows: HashMap<String, PropertyRow> =
            self.rows.drain(..).map(|r| (r.value.clone(), r)).collect();
        let chosen = imported
            .properties
            .iter()
            .filter(|p| self.key.as_deref() == Some(p.key.as_str()));
        for p in chosen {
            let row = slot(&mut rows, &p.value);
            row.value.clone_from(&p.value);
            row.visits = row.visits.saturating_add(p.visits);
            row.views = row.views.saturating_add(p.views);
            row.events = row.events.saturating_add(p.events);
        }
        self.keys = sorted_keys(self.keys_with(imported));
        self.rows = sorted_rows(rows.into_values().collect());
        self.visits = self.visits.saturating_add(imported.visits);
        self.imported = true;
        self
    }

    /// The key most visits carry, imported ones included: the one whose
    /// values a report shows when none is chosen.
    pub fn top_key_with(&self, imported: &ImportedRange) -> Option<String> {
        sorted_keys(self.keys_with(imported))
            .into_iter()
            .next()
            .map(|(k, _)| k)
    }

    /// Every key's visits, the imported values' added.
    fn keys_with(&self, imported: &ImportedRange) -> HashMap<String, i64> {
        let mut keys: HashMap<String, i64> = self.keys.iter().cloned().collect();
        for p in &imported.properties {
            let visits = slot(&mut keys, &p.key);
            *visits = visits.saturating_add(p.visits);
        }
        keys
    }

    /// Each row with its value's visits in `before` (the period before it),
    /// 0 where the value had none: what its change compares.
    pub fn rows_with_previous<'a>(
        &'a self,
        before: &PropertyFigures,
    ) -> Vec<(&'a PropertyRow, i64)> {
        let previous: HashMap<&str, i64> = before
            .rows
            .iter()
            .map(|r| (r.value.as_str(), r.visits))
            .collect();
        self.rows
            .iter()
            .map(|r| (r, previous.get(r.value.as_str()).copied().unwrap_or(0)))
            .collect()
    }
}

/// The custom properties of the admitted visits' steps in `[from, to)`:
/// a view counts where it counts in [`compute`] (in the range, of the
/// pages the page filters name), an event where it was sent in the range.
/// For `key`, each value's visits, views and events; every key's visits;
/// and the admitted visits with any counted step in the range (unlike
/// [`compute`]'s visits, which are those that started in it). `sampled`
/// scales every count back up.
pub fn properties<'a>(
    filters: &Filters,
    key: Option<&str>,
    visits: impl IntoIterator<Item = &'a VisitRecord>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    sampled: f64,
) -> PropertyFigures {
    let share = if sampled > 0.0 && sampled < 1.0 {
        sampled
    } else {
        1.0
    };
    let mut keys: HashMap<String, i64> = HashMap::new();
    let mut rows: HashMap<String, PropertyRow> = HashMap::new();
    let mut total = 0i64;
    for visit in visits {
        if visit.start >= to || !admits(filters, visit) {
            continue;
        }
        let counted = |i: usize| {
            let Some(step) = visit.steps.get(i) else {
                return false;
            };
            let at = visit.start + chrono::TimeDelta::seconds(i64::from(step.offset()));
            at >= from
                && at < to
                && step
                    .path()
                    .is_none_or(|p| filters.pages().all(|m| m.matches(p)))
        };
        if !(0..visit.steps.len()).any(counted) {
            continue;
        }
        total += 1;
        let mut seen_keys: Vec<&str> = Vec::new();
        let mut seen_values: Vec<&str> = Vec::new();
        for (i, k, v) in &visit.props {
            if !counted(*i as usize) {
                continue;
            }
            seen_keys.push(k);
            if Some(&**k) != key {
                continue;
            }
            let row = slot(&mut rows, v);
            match visit.steps[*i as usize] {
                Step::View { .. } => row.views += 1,
                Step::Event { .. } => row.events += 1,
            }
            seen_values.push(v);
        }
        seen_keys.sort_unstable();
        seen_keys.dedup();
        for k in seen_keys {
            *slot(&mut keys, k) += 1;
        }
        seen_values.sort_unstable();
        seen_values.dedup();
        for v in seen_values {
            slot(&mut rows, v).visits += 1;
        }
    }
    let up = |n: i64| scaled(n, share);
    let keys = sorted_keys(keys.into_iter().map(|(k, n)| (k, up(n))).collect());
    let rows = rows
        .into_iter()
        .map(|(value, r)| PropertyRow {
            value,
            visits: up(r.visits),
            views: up(r.views),
            events: up(r.events),
        })
        .collect();
    PropertyFigures {
        keys,
        key: key.map(str::to_owned),
        rows: sorted_rows(rows),
        visits: up(total),
        sampled: share,
        imported: false,
    }
}

/// Keys with their visits, most first (ties by key), the first
/// [`MAX_PROPERTY_ROWS`].
fn sorted_keys(keys: HashMap<String, i64>) -> Vec<(String, i64)> {
    let mut keys: Vec<(String, i64)> = keys.into_iter().collect();
    keys.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    keys.truncate(MAX_PROPERTY_ROWS);
    keys
}

/// Values, most visits first, then most views and events (ties by
/// value), the first [`MAX_PROPERTY_ROWS`].
fn sorted_rows(mut rows: Vec<PropertyRow>) -> Vec<PropertyRow> {
    rows.sort_by(|a, b| {
        (b.visits, b.views + b.events)
            .cmp(&(a.visits, a.views + a.events))
            .then_with(|| a.value.cmp(&b.value))
    });
    rows.truncate(MAX_PROPERTY_ROWS);
    rows
}

/// The entry of `key`, made only when it is not there yet: most names
/// repeat, and a `String` per view would be most of the computation's
/// allocations.
fn slot<'m, T: Default>(map: &'m mut HashMap<String, T>, key: &str) -> &'m mut T {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), T::default());
    }
    map.get_mut(key).expect("just inserted")
}

impl Figures {
    /// The figures of no visit, at `points`: for a report that reads
    /// nothing (a path no page can have).
    pub fn none(points: &[DateTime<Utc>]) -> Self {
        Figures {
            series: points
                .iter()
                .map(|at| SeriesPoint {
                    at: *at,
                    ..SeriesPoint::default()
                })
                .collect(),
            sampled: 1.0,
            ..Figures::default()
        }
    }

    /// Every count divided by the share of visitors read.
    fn scale_up(&mut self) {
        let share = self.sampled;
        let up = |n: &mut i64| *n = scaled(*n, share);
        for n in [
            &mut self.views,
            &mut self.visits,
            &mut self.bounces,
            &mut self.duration_secs,
        ] {
            up(n);
        }
        self.visitors.share = share;
        for p in self.pages.values_mut() {
            up(&mut p.views);
            up(&mut p.entries);
            up(&mut p.exits);
            p.visitors.share = share;
        }
        for names in self.breakdowns.values_mut() {
            names.values_mut().for_each(up);
        }
        self.converting_pages.values_mut().for_each(up);
        self.converting_events.values_mut().for_each(up);
        for p in self.event_properties.values_mut() {
            up(&mut p.events);
            up(&mut p.visits);
            for (sum, n) in p.revenue.values_mut() {
                *sum = (*sum as f64 / share).round() as i128;
                up(n);
            }
        }
        for by in self.revenue.values_mut() {
            for (sum, n) in by.values_mut() {
                // An estimate, like every sampled figure.
                *sum = (*sum as f64 / share).round() as i128;
                up(n);
            }
        }
        for p in &mut self.series {
            up(&mut p.views);
            up(&mut p.visits);
            up(&mut p.bounces);
            up(&mut p.duration_secs);
            p.visitors.share = share;
        }
    }
}

/// A funnel's figures: per step, the visits that reached it, having
/// reached every step before it in order within the visit.
#[derive(Debug, Clone, PartialEq)]
pub struct FunnelFigures {
    pub steps: Vec<FunnelStepFigures>,
    /// The share of visitors read (1: all of them).
    pub sampled: f64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunnelStepFigures {
    pub step: String,
    pub visits: i64,
}

impl FunnelFigures {
    /// Visits of step `i` per visit of the step before, 0 to 1 (the first
    /// step: 1 when it has visits).
    pub fn from_previous(&self, i: usize) -> Option<f64> {
        let before = if i == 0 {
            self.steps.first()?.visits
        } else {
            self.steps.get(i - 1)?.visits
        };
        (before > 0).then(|| self.steps[i].visits as f64 / before as f64)
    }

    /// Visits of step `i` per visit of the first step, 0 to 1.
    pub fn from_start(&self, i: usize) -> Option<f64> {
        let start = self.steps.first()?.visits;
        (start > 0).then(|| self.steps.get(i).map_or(0, |s| s.visits) as f64 / start as f64)
    }

    /// Visits of the step before that did not reach step `i`.
    pub fn drop_off(&self, i: usize) -> i64 {
        if i == 0 {
            return 0;
        }
        self.steps[i - 1].visits - self.steps[i].visits
    }
}

/// How far a visit went along `funnel`: each of its steps, in order,
/// advances at most one funnel step, when it is the next one.
pub fn reached(funnel: &FunnelSteps, visit: &VisitRecord) -> usize {
    let wanted = funnel.steps();
    let mut next = 0;
    for step in &visit.steps {
        if next == wanted.len() {
            break;
        }
        if wanted[next].matches(step.path(), step.event()) {
            next += 1;
        }
    }
    next
}

pub fn funnel<'a>(
    filters: &Filters,
    funnel: &FunnelSteps,
    visits: impl IntoIterator<Item = &'a VisitRecord>,
    sampled: f64,
) -> FunnelFigures {
    let sampled = if sampled > 0.0 && sampled < 1.0 {
        sampled
    } else {
        1.0
    };
    let mut counts = vec![0i64; funnel.steps().len()];
    for visit in visits {
        if !admits(filters, visit) {
            continue;
        }
        for c in counts.iter_mut().take(reached(funnel, visit)) {
            *c += 1;
        }
    }
    for c in &mut counts {
        *c = (*c as f64 / sampled).round() as i64;
    }
    FunnelFigures {
        steps: funnel
            .steps()
            .iter()
            .zip(counts)
            .map(|(s, visits)| FunnelStepFigures {
                step: s.to_string(),
                visits,
            })
            .collect(),
        sampled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::sync::Arc;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, h, m, 0).unwrap()
    }

    /// The sample's whole UTC day.
    const DAY: (DateTime<Utc>, DateTime<Utc>) = (
        DateTime::from_timestamp(1_772_409_600, 0).unwrap(),
        DateTime::from_timestamp(1_772_496_000, 0).unwrap(),
    );

    fn view(offset: u32, path: &str) -> Step {
        Step::View {
            offset,
            path: path.into(),
        }
    }

    fn event(offset: u32, name: &str) -> Step {
        Step::Event {
            offset,
            name: name.into(),
        }
    }

    fn visit(start: DateTime<Utc>, country: &str, steps: Vec<Step>, reg: u16) -> VisitRecord {
        let mut labels = BTreeMap::new();
        labels.insert(Dimension::Country, country.into());
        labels.insert(Dimension::Device, "desktop".into());
        let mut steps = steps;
        steps.sort_by_key(Step::offset);
        VisitRecord::new(start, labels, steps, Some((reg, 1)))
    }

    fn filters(raw: &[&str]) -> Filters {
        Filters::parse(raw.iter().copied()).unwrap()
    }

    fn sample() -> Vec<VisitRecord> {
        vec![
            visit(
                at(10, 0),
                "DE",
                vec![view(60, "/b"), view(0, "/a"), event(30, "Signup")],
                1,
            ),
            visit(at(10, 5), "DE", vec![view(0, "/b")], 2),
            visit(at(11, 0), "FR", vec![view(0, "/a"), view(100, "/c")], 3),
        ]
    }

    #[test]
    fn steps_are_put_in_order_and_give_entry_exit_duration() {
        let v = &sample()[0];
        assert_eq!(v.entry(), Some("/a"));
        assert_eq!(v.exit(), Some("/b"));
        assert_eq!(v.duration, 60);
        assert!(!v.bounced());
        assert!(sample()[1].bounced());
    }

    #[test]
    fn visit_dimensions_select_visits_with_all_their_views() {
        let f = compute(
            &filters(&["country:DE"]),
            &sample(),
            DAY,
            &[at(10, 0), at(11, 0)],
            1.0,
        );
        assert_eq!(
            (f.views, f.visits, f.bounces, f.duration_secs),
            (3, 2, 1, 60)
        );
        assert_eq!(f.visitors(), 2);
        assert_eq!(f.pages["/b"].views, 2);
        assert_eq!(f.pages["/a"].entries, 1);
        assert_eq!(f.pages["/b"].exits, 2);
        assert_eq!(f.top(Dimension::Country), [("DE", 3)]);
        assert_eq!(f.top(Dimension::Event), [("Signup", 1)]);
        assert_eq!(f.converting_pages["/b"], 2);
        assert_eq!(f.converting_events["Signup"], 1);
        assert_eq!(f.series[0].views, 3);
        assert_eq!(f.series[1].visits, 0);
    }

    /// The sample with properties: the first visit's views by Jane, its
    /// event on the pro plan; the third's first view by Li.
    fn with_props() -> Vec<VisitRecord> {
        let mut visits = sample();
        let p = |i: u32, k: &str, v: &str| (i, Arc::from(k), Arc::from(v));
        visits[0] = visits[0].clone().with_props(vec![
            p(0, "author", "Jane"),
            p(1, "plan", "pro"),
            p(2, "author", "Jane"),
        ]);
        visits[2] = visits[2].clone().with_props(vec![p(0, "author", "Li")]);
        visits
    }

    #[test]
    fn a_property_counts_its_visits_views_and_events() {
        let f = properties(&Filters::default(), Some("author"), &with_props(), DAY, 1.0);
        assert_eq!(f.visits, 3);
        assert_eq!(f.keys, [("author".to_owned(), 2), ("plan".to_owned(), 1)]);
        let rows: Vec<(&str, i64, i64, i64)> = f
            .rows
            .iter()
            .map(|r| (r.value.as_str(), r.visits, r.views, r.events))
            .collect();
        assert_eq!(rows, [("Jane", 1, 2, 0), ("Li", 1, 1, 0)]);
        let plan = properties(&Filters::default(), Some("plan"), &with_props(), DAY, 1.0);
        assert_eq!((plan.rows[0].visits, plan.rows[0].events), (1, 1));
        // A range from 10:00:45 holds the first visit's second view only.
        let late = (at(10, 0) + chrono::TimeDelta::seconds(45), DAY.1);
        let f = properties(
            &Filters::default(),
            Some("author"),
            &with_props(),
            late,
            1.0,
        );
        assert_eq!(f.rows[0].value, "Jane");
        assert_eq!(f.rows[0].views, 1);
        // A page filter counts only its pages' views.
        let f = properties(
            &filters(&["page:/a"]),
            Some("author"),
            &with_props(),
            DAY,
            1.0,
        );
        let rows: Vec<(&str, i64)> = f.rows.iter().map(|r| (r.value.as_str(), r.views)).collect();
        assert_eq!(rows, [("Jane", 1), ("Li", 1)]);
        // Sampled: scaled back up.
        let f = properties(&Filters::default(), Some("author"), &with_props(), DAY, 0.5);
        assert_eq!((f.visits, f.rows[0].visits), (6, 2));
    }

    #[test]
    fn a_property_filter_keeps_the_visits_carrying_it_with_all_their_views() {
        let f = compute(
            &filters(&["prop:plan:pro"]),
            &with_props(),
            DAY,
            &[at(0, 0)],
            1.0,
        );
        assert_eq!((f.visits, f.views), (1, 2));
        let f = compute(
            &filters(&["prop:author:Li"]),
            &with_props(),
            DAY,
            &[at(0, 0)],
            1.0,
        );
        assert_eq!((f.visits, f.views), (1, 2));
        let f = compute(
            &filters(&["prop:author:li"]),
            &with_props(),
            DAY,
            &[at(0, 0)],
            1.0,
        );
        assert_eq!(f.visits, 0, "values match exactly");
    }

    #[test]
    fn a_page_filter_keeps_visits_that_include_it_and_only_its_views() {
        let f = compute(&filters(&["page:/a"]), &sample(), DAY, &[at(0, 0)], 1.0);
        assert_eq!((f.views, f.visits), (2, 2));
        assert_eq!(f.top_pages().len(), 1);
        // Their entries and exits are the visits', whatever the page.
        assert_eq!(f.pages["/c"].exits, 1);
    }

    #[test]
    fn entry_exit_and_event_filters_look_at_the_visit() {
        let count = |raw: &[&str]| compute(&filters(raw), &sample(), DAY, &[], 1.0).visits;
        assert_eq!(count(&["entry:/a"]), 2);
        assert_eq!(count(&["exit:/b"]), 2);
        assert_eq!(count(&["exit:/*"]), 3);
        assert_eq!(count(&["event:Signup"]), 1);
        assert_eq!(count(&["event:Signup", "country:FR"]), 0);
        assert_eq!(count(&["browser:Firefox"]), 0);
        assert_eq!(count(&[]), 3);
    }

    #[test]
    fn the_day_constant_is_the_samples_day() {
        assert_eq!(DAY, (at(0, 0), at(0, 0) + chrono::TimeDelta::days(1)));
    }

    #[test]
    fn a_visit_counts_where_it_started_and_a_view_where_it_happened() {
        // Visit one starts at 10:00 with /a, views /b at 10:01, sends
        // Signup at 10:00:30: a range from 10:00:45 has its /b view (its
        // exit, 60 − 0 seconds of duration) and not the visit, its entry,
        // its bounce or its event.
        let from = at(10, 0) + chrono::TimeDelta::seconds(45);
        let f = compute(
            &filters(&["country:DE"]),
            &sample(),
            (from, at(10, 5)),
            &[from],
            1.0,
        );
        assert_eq!(
            (f.views, f.visits, f.bounces, f.duration_secs),
            (1, 0, 0, 60)
        );
        assert_eq!(f.pages["/b"].views, 1);
        assert_eq!(f.pages["/b"].exits, 1);
        assert_eq!(f.pages["/b"].entries, 0);
        assert!(!f.pages.contains_key("/a"));
        assert_eq!(f.top(Dimension::Event), []);
        assert_eq!(f.top(Dimension::Country), [("DE", 1)]);
        assert_eq!(f.visitors(), 1);
        assert_eq!((f.series[0].views, f.series[0].visits), (1, 0));
        // Up to 10:05 (excluded) the same range has nothing of visit two,
        // which starts at 10:05; from 10:05 on it has visit two whole and
        // nothing of visit one.
        let g = compute(
            &filters(&["country:DE"]),
            &sample(),
            (at(10, 5), at(11, 0)),
            &[at(10, 5)],
            1.0,
        );
        assert_eq!(
            (g.views, g.visits, g.bounces, g.duration_secs),
            (1, 1, 1, 0)
        );
        assert_eq!((g.series[0].bounces, g.series[0].duration_secs), (1, 0));
    }

    #[test]
    fn a_range_cut_inside_a_visit_splits_its_duration_and_adds_up() {
        let whole = compute(&Filters::default(), &sample(), DAY, &[], 1.0);
        for cut in [
            at(10, 0) + chrono::TimeDelta::seconds(30),
            at(10, 1),
            at(11, 1),
        ] {
            let a = compute(&Filters::default(), &sample(), (DAY.0, cut), &[], 1.0);
            let b = compute(&Filters::default(), &sample(), (cut, DAY.1), &[], 1.0);
            assert_eq!(a.views + b.views, whole.views, "{cut}");
            assert_eq!(a.visits + b.visits, whole.visits, "{cut}");
            assert_eq!(
                a.duration_secs + b.duration_secs,
                whole.duration_secs,
                "{cut}"
            );
        }
    }

    #[test]
    fn a_sample_is_scaled_back_up() {
        let f = compute(&Filters::default(), &sample()[..1], DAY, &[], 0.1);
        assert_eq!((f.views, f.visits, f.visitors()), (20, 10, 10));
    }

    #[test]
    fn no_figure_has_more_visitors_than_visits() {
        // Every visitor of one visit, in one UTC day: the visitors are
        // the visits, whether every visitor was read or a sample of them
        // (scaled up, estimated from the sample's registers).
        for share in [1.0, 0.9, 0.75, 0.6, 0.45, 0.3, 0.2, 0.1, 0.05] {
            let kept = ((share * REGISTERS as f64).round() as u64).max(1);
            for n in [1u64, 2, 3, 7, 40, 174, 600] {
                let visits: Vec<VisitRecord> = (0..n)
                    .map(|i| {
                        let mut v = visit(at(10, (i % 50) as u32), "DE", vec![view(0, "/a")], 0);
                        let rank = 1 + (i * 7 % 5) as u8;
                        v.register = Some(((i * 7919 % kept) as u16, rank));
                        v
                    })
                    .collect();
                let f = compute(&Filters::default(), &visits, DAY, &[DAY.0], share);
                assert!(
                    f.visitors() <= f.visits,
                    "{n} visits at {share}: {} visitors, {} visits",
                    f.visitors(),
                    f.visits
                );
                assert!(
                    f.series[0].visitors() <= f.series[0].visits,
                    "{n} visits at {share}: a point's {} visitors, {} visits",
                    f.series[0].visitors(),
                    f.series[0].visits
                );
                assert!(
                    f.pages["/a"].visitors() <= f.pages["/a"].entries,
                    "{n} visits at {share}: a page's {} visitors, {} entries",
                    f.pages["/a"].visitors(),
                    f.pages["/a"].entries
                );
            }
        }
    }

    #[test]
    fn a_funnel_counts_visits_reaching_each_step_in_order() {
        let steps = FunnelSteps::parse(["/a", "event:Signup", "/b"]).unwrap();
        let f = funnel(&Filters::default(), &steps, &sample(), 1.0);
        let visits: Vec<i64> = f.steps.iter().map(|s| s.visits).collect();
        assert_eq!(visits, [2, 1, 1]);
        assert_eq!(f.drop_off(1), 1);
        assert_eq!(f.from_previous(1), Some(0.5));
        assert_eq!(f.from_start(2), Some(0.5));
        // Out of order is not reached: /b came before /a in no visit, and
        // a /b first does not count towards a funnel starting at /a.
        let back = FunnelSteps::parse(["/b", "/a"]).unwrap();
        assert_eq!(
            funnel(&Filters::default(), &back, &sample(), 1.0).steps[1].visits,
            0
        );
        // Filters choose the visits.
        let fr = funnel(&filters(&["country:FR"]), &steps, &sample(), 1.0);
        assert_eq!(fr.steps[0].visits, 1);
        assert_eq!(fr.steps[1].visits, 0);
    }

    #[test]
    fn one_hit_advances_one_step() {
        let steps = FunnelSteps::parse(["/*", "/a"]).unwrap();
        let only_a = visit(at(1, 0), "DE", vec![view(0, "/a")], 9);
        assert_eq!(reached(&steps, &only_a), 1);
    }

    fn imported(rows: &[(&str, &str, i64, i64)], visits: i64) -> ImportedRange {
        use crate::storage::imported_properties::ImportedProperty;
        ImportedRange {
            properties: rows
                .iter()
                .map(|&(key, value, events, visits)| ImportedProperty {
                    key: key.into(),
                    value: value.into(),
                    views: 0,
                    events,
                    visits,
                })
                .collect(),
            visits,
        }
    }

    #[test]
    fn an_imported_values_views_add_to_its_rows_views() {
        let tracked = PropertyFigures {
            keys: vec![("author".into(), 2)],
            key: Some("author".into()),
            rows: vec![PropertyRow {
                value: "Jane".into(),
                visits: 2,
                views: 3,
                events: 0,
            }],
            visits: 10,
            sampled: 1.0,
            imported: false,
        };
        let mut imported = imported(&[("author", "Jane", 0, 4)], 20);
        imported.properties[0].views = 7;
        let got = tracked.with_imported(&imported);
        assert_eq!(
            got.rows,
            vec![PropertyRow {
                value: "Jane".into(),
                visits: 6,
                views: 10,
                events: 0,
            }]
        );
        assert_eq!((got.keys, got.visits), (vec![("author".into(), 6)], 30));
    }

    #[test]
    fn imported_values_add_their_events_and_visitors_to_their_key_and_rows() {
        let tracked = PropertyFigures {
            keys: vec![("url".into(), 5), ("plan".into(), 3)],
            key: Some("url".into()),
            rows: vec![PropertyRow {
                value: "https://a.example/".into(),
                visits: 5,
                views: 0,
                events: 6,
            }],
            visits: 20,
            sampled: 1.0,
            imported: false,
        };
        let got = tracked.clone().with_imported(&imported(
            &[
                ("url", "https://a.example/", 4, 2),
                ("url", "https://b.example/", 9, 7),
                ("path", "/gone", 1, 1),
            ],
            30,
        ));
        assert!(got.imported);
        assert_eq!(got.visits, 50, "imported days' visits are of the share");
        assert_eq!(
            got.keys,
            vec![("url".into(), 14), ("plan".into(), 3), ("path".into(), 1)]
        );
        let rows: Vec<(&str, i64, i64, i64)> = got
            .rows
            .iter()
            .map(|r| (r.value.as_str(), r.visits, r.views, r.events))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("https://a.example/", 7, 0, 10),
                ("https://b.example/", 7, 0, 9)
            ],
            "most visits first, then most events"
        );
        // Nothing imported in the range: the figures as they were.
        assert_eq!(
            tracked.clone().with_imported(&ImportedRange::default()),
            tracked
        );
    }

    #[test]
    fn the_top_key_counts_imported_visits() {
        let tracked = PropertyFigures {
            keys: vec![("plan".into(), 3)],
            ..PropertyFigures::default()
        };
        assert_eq!(
            tracked.top_key_with(&ImportedRange::default()).as_deref(),
            Some("plan")
        );
        let more = imported(
            &[
                ("url", "https://a.example/", 1, 2),
                ("url", "https://b.example/", 1, 2),
            ],
            0,
        );
        assert_eq!(tracked.top_key_with(&more).as_deref(), Some("url"));
    }
}

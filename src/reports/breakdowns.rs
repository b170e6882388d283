//! A site's or a page's breakdowns over a range, from the
//! breakdown buckets (`storage::breakdowns`): whole UTC days from the day
//! buckets, the edges from the hour buckets, every dimension asked for in
//! the same read ([`hours::plan`] decides the stretches, as for sources).
//!
//! What the stored data answers exactly: one dimension at a time, for the
//! whole site or for one page, over whole hours. It cannot answer two
//! dimensions together (the browsers of German visitors) nor the pages of
//! one name (the pages Firefox users viewed): each dimension is counted on
//! its own, per page. The reports offer nothing else.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::hours::{self, SourceScope};
use super::queries::number;
use crate::domain::dimension::{field_name, from_field_name, Dimension};
use crate::domain::revenue::{self, Currency, RevenueTotal};
use crate::domain::sketch::Sketch;
use crate::storage::breakdown_reads;
use crate::storage::breakdowns::{
    collection, CONVERTED, GENERATION, REVENUE, REVENUE_SPLIT, WRITES,
};
use crate::storage::kept_breakdowns::{KeptCounts, KeptKey};
use crate::storage::{Resolution, Store};

/// One dimension's counts over a stretch of time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameTotals {
    /// Per name, most first (ties by name).
    pub names: Vec<(String, i64)>,
    /// Counts of names beyond a bucket's cap.
    pub other: i64,
    /// The named counts plus `other`.
    pub total: i64,
}

impl NameTotals {
    pub fn of(&self, name: &str) -> i64 {
        self.names
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }
}

/// The dimensions read over a stretch, and what it covers.
#[derive(Debug, Clone, Default)]
pub struct Breakdown {
    pub by: HashMap<Dimension, NameTotals>,
    /// Per event name and UTC day, its converting visitors (site scopes
    /// only), for the days not read through a kept answer.
    pub converted: HashMap<String, HashMap<DateTime<Utc>, Sketch>>,
    /// Per event name, the converting visitors of the days read through
    /// a kept answer (already estimated, day by day).
    pub kept_converted: HashMap<String, i64>,
    /// Per event name, the revenue its events carried, per currency (read
    /// with the event breakdown or the goals' events, site scopes only).
    pub revenue: HashMap<String, Vec<RevenueTotal>>,
    /// The whole hours read.
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

impl Breakdown {
    pub fn of(&self, dimension: Dimension) -> NameTotals {
        self.by.get(&dimension).cloned().unwrap_or_default()
    }

    /// The unique visitors who sent the event `name`: each UTC day's, added
    /// up, as the site's visitors are (a visitor id lives one UTC day).
    pub fn converting_visitors(&self, name: &str) -> i64 {
        let read = self.converted.get(name).map_or(0, |days| {
            days.values().map(|s| s.estimate_count() as i64).sum()
        });
        read + self.kept_converted.get(name).copied().unwrap_or(0)
    }

    /// The revenue the event `name` carried, per currency (most used
    /// first; empty when none).
    pub fn revenue_of(&self, name: &str) -> &[RevenueTotal] {
        self.revenue.get(name).map_or(&[], Vec::as_slice)
    }
}

/// `dimensions` of `scope` over `[from, to)` (widened to whole hours),
/// with the events' converting visitors when `converted` names events.
///
/// The whole days that have settled are read through
/// [`KeptBreakdowns`](crate::storage::kept_breakdowns::KeptBreakdowns): their buckets' write counters first (a small
/// projection), and the buckets themselves only when no answer is kept
/// for those counters.
pub async fn read(
    store: &Store,
    scope: SourceScope<'_>,
    dimensions: &[Dimension],
    converted: &[&str],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Breakdown, mongodb::error::Error> {
    let (hours, days) = hours::plan(from, to);
    let mut read = Reader::new(dimensions, converted);
    for (f, t) in hours {
        read.buckets(store, scope, Resolution::Hour, (f, t)).await?;
    }
    if let Some((f, t)) = days {
        let day = Resolution::Day;
        let settled = day.floor(Utc::now() - SETTLING).clamp(f, t);
        if f < settled {
            let kept = kept_days(store, scope, dimensions, converted, (f, settled)).await?;
            read.add_kept(&kept);
        }
        if settled < t {
            read.buckets(store, scope, day, (settled, t)).await?;
        }
    }
    Ok(read.finish(from, to))
}

/// Days that ended less than this long ago are read from their buckets
/// each time: their last records may still be on their way, and an
/// answer kept for them would be replaced at once.
const SETTLING: TimeDelta = super::page_totals::SETTLING;

/// The breakdowns of the whole days `[first, end)`, kept by the
/// fingerprint of their buckets' write counters.
async fn kept_days(
    store: &Store,
    scope: SourceScope<'_>,
    dimensions: &[Dimension],
    converted: &[&str],
    (first, end): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Arc<KeptCounts>, mongodb::error::Error> {
    let subject = scope.subject();
    let coll = collection(subject, Resolution::Day);
    let mut dims = dimensions.to_vec();
    dims.sort();
    dims.dedup();
    let mut events: Vec<String> = converted.iter().map(|e| (*e).to_owned()).collect();
    events.sort();
    events.dedup();
    let key = |fingerprint| -> KeptKey {
        (
            format!("{coll}:{}", scope.key()),
            dims.clone(),
            events.clone(),
            day_number(first),
            day_number(end),
            fingerprint,
        )
    };
    // Read as the key says (each dimension once), so that one answer
    // serves every caller asking the same.
    if store.kept_breakdowns().too_big(&key(0)) {
        let mut read = Reader::new(&dims, converted);
        read.buckets(store, scope, Resolution::Day, (first, end))
            .await?;
        return Ok(Arc::new(read.into_kept()));
    }
    let mut writes = Writes::default();
    let counters = doc! {"_id": 0, "timestamp": 1, "part": 1, WRITES: 1, GENERATION: 1};
    let span = (first, end);
    breakdown_reads::each_bucket(
        store,
        scope.subject(),
        scope.key(),
        Resolution::Day,
        span,
        counters,
        |d| writes.add(d),
    )
    .await?;
    if let Some(kept) = store.kept_breakdowns().get(&key(writes.fingerprint())) {
        return Ok(kept);
    }
    let mut read = Reader::new(&dims, converted);
    // Kept by the counters read with the counts, bucket by bucket, so
    // the answer is exactly the buckets' state it is kept for.
    let fingerprint = read
        .buckets(store, scope, Resolution::Day, (first, end))
        .await?;
    let kept = Arc::new(read.into_kept());
    store.kept_breakdowns().keep(key(fingerprint), kept.clone());
    Ok(kept)
}

fn day_number(day: DateTime<Utc>) -> i64 {
    crate::storage::page_summaries::day_number(day)
}

/// Each bucket's write counter and generation, by time and writer part
/// (a bucket written before the counter existed counts 0 until it is
/// written).
#[derive(Default)]
struct Writes(BTreeMap<(i64, i32), (i64, i64)>);

impl Writes {
    fn add(&mut self, d: &Document) {
        let at = d
            .get_datetime("timestamp")
            .map_or(0, |t| t.timestamp_millis());
        let part = d.get_i32("part").unwrap_or(0);
        let entry = self.0.entry((at, part)).or_default();
        entry.0 += number(d.get(WRITES));
        entry.1 ^= number(d.get(GENERATION));
    }

    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.0.hash(&mut h);
        h.finish()
    }
}

/// Adds up breakdown buckets.
struct Reader<'a> {
    dimensions: &'a [Dimension],
    converted: Vec<(String, &'a str)>,
    projection: Document,
    counts: HashMap<Dimension, (HashMap<String, i64>, i64)>,
    sketches: HashMap<String, HashMap<DateTime<Utc>, Sketch>>,
    kept_converted: HashMap<String, i64>,
    /// Per event field name and currency.
    revenue: HashMap<String, HashMap<Currency, (i128, i64)>>,
}

impl<'a> Reader<'a> {
    fn new(dimensions: &'a [Dimension], converted: &[&'a str]) -> Self {
        let mut projection = doc! {"_id": 0, "timestamp": 1, "part": 1, WRITES: 1, GENERATION: 1};
        for d in dimensions {
            projection.insert(d.field(), 1);
            projection.insert(d.other_field(), 1);
        }
        let converted: Vec<(String, &str)> = converted
            .iter()
            .map(|name| (field_name(name), *name))
            .collect();
        for (field, _) in &converted {
            projection.insert(format!("{CONVERTED}.{field}"), 1);
        }
        if dimensions.contains(&Dimension::Event) || !converted.is_empty() {
            projection.insert(REVENUE, 1);
        }
        Reader {
            dimensions,
            converted,
            projection,
            counts: HashMap::new(),
            sketches: HashMap::new(),
            kept_converted: HashMap::new(),
            revenue: HashMap::new(),
        }
    }

    /// Adds the buckets of `scope` at `g` in `[from, to)`, and gives the
    /// fingerprint of their write counters.
    async fn buckets(
        &mut self,
        store: &Store,
        scope: SourceScope<'_>,
        g: Resolution,
        span: (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<u64, mongodb::error::Error> {
        let mut writes = Writes::default();
        let projection = self.projection.clone();
        breakdown_reads::each_bucket(
            store,
            scope.subject(),
            scope.key(),
            g,
            span,
            projection,
            |d| {
                writes.add(d);
                self.add(d);
            },
        )
        .await?;
        Ok(writes.fingerprint())
    }

    fn add(&mut self, d: &Document) {
        for dimension in self.dimensions {
            let (names, other) = self.counts.entry(*dimension).or_default();
            *other += number(d.get(dimension.other_field()));
            if let Ok(map) = d.get_document(dimension.field()) {
                for (field, n) in map {
                    let n = number(Some(n));
                    match names.get_mut(field) {
                        Some(v) => *v += n,
                        None => {
                            names.insert(field.clone(), n);
                        }
                    }
                }
            }
        }
        if let Ok(stored) = d.get_document(REVENUE) {
            for (field, by) in stored {
                let Some(by) = by.as_document() else { continue };
                for (code, figures) in by {
                    // A code this build does not know counts nowhere
                    // rather than failing the report.
                    let (Ok(currency), Some(figures)) =
                        (Currency::parse(code), figures.as_document())
                    else {
                        continue;
                    };
                    let (sum, n) = self
                        .revenue
                        .entry(field.clone())
                        .or_default()
                        .entry(currency)
                        .or_default();
                    *sum += i128::from(number(figures.get("h"))) * i128::from(REVENUE_SPLIT)
                        + i128::from(number(figures.get("l")));
                    *n += number(figures.get("n"));
                }
            }
        }
        let day = d
            .get_datetime("timestamp")
            .map(|t| Resolution::Day.floor(t.to_chrono()));
        if let (Ok(stored), Ok(day)) = (d.get_document(CONVERTED), day) {
            for (field, name) in &self.converted {
                if let Ok(sketch) = stored.get_document(field) {
                    // A damaged sketch counts nobody rather than failing
                    // the report.
                    let _ = self
                        .sketches
                        .entry((*name).to_owned())
                        .or_default()
                        .entry(day)
                        .or_default()
                        .merge_stored(sketch);
                }
            }
        }
    }

    fn add_kept(&mut self, kept: &KeptCounts) {
        for (dimension, (names, other)) in &kept.by {
            let (all, all_other) = self.counts.entry(*dimension).or_default();
            *all_other += other;
            for (field, n) in names {
                *all.entry(field.clone()).or_default() += n;
            }
        }
        for (name, n) in &kept.converted {
            *self.kept_converted.entry(name.clone()).or_default() += n;
        }
        for (field, by) in &kept.revenue {
            let all = self.revenue.entry(field.clone()).or_default();
            for (currency, (sum, n)) in by {
                let (s, c) = all.entry(*currency).or_default();
                *s += sum;
                *c += n;
            }
        }
    }

    /// What was read, to keep: the converting visitors as each day's
    /// estimate, added up (what [`Breakdown::converting_visitors`] gives).
    fn into_kept(self) -> KeptCounts {
        let mut converted = self.kept_converted;
        for (name, days) in self.sketches {
            *converted.entry(name).or_default() += days
                .values()
                .map(|s| s.estimate_count() as i64)
                .sum::<i64>();
        }
        KeptCounts {
            by: self.counts,
            converted,
            revenue: self.revenue,
        }
    }

    fn finish(self, from: DateTime<Utc>, to: DateTime<Utc>) -> Breakdown {
        let (counts, sketches, kept_converted) = (self.counts, self.sketches, self.kept_converted);
        let revenue = self
            .revenue
            .into_iter()
            .map(|(field, by)| {
                let totals = revenue::totals(by.into_iter().map(|(c, (s, n))| (c, s, n)));
                (from_field_name(&field), totals)
            })
            .filter(|(_, totals)| !totals.is_empty())
            .collect();
        let by = counts
            .into_iter()
            .map(|(dimension, (names, other))| {
                let mut names: Vec<(String, i64)> = names
                    .into_iter()
                    .filter(|(_, v)| *v > 0)
                    .map(|(field, v)| (from_field_name(&field), v))
                    .collect();
                names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let total = names.iter().map(|(_, v)| v).sum::<i64>() + other;
                let totals = NameTotals {
                    names,
                    other,
                    total,
                };
                (dimension, totals)
            })
            .collect();
        let (covered_from, covered_to) = hours::covered(from, to);
        Breakdown {
            by,
            converted: sketches,
            kept_converted,
            revenue,
            from: Some(covered_from),
            to: Some(covered_to),
        }
    }
}

//! A site's or a page's breakdowns over a range (issue 20), from the
//! breakdown buckets (`storage::breakdowns`): whole UTC days from the day
//! buckets, the edges from the hour buckets, every dimension asked for in
//! the same read ([`sources::plan`] decides the stretches, as for sources).
//!
//! What the stored data answers exactly: one dimension at a time, for the
//! whole site or for one page, over whole hours. It cannot answer two
//! dimensions together (the browsers of German visitors) nor the pages of
//! one name (the pages Firefox users viewed): each dimension is counted on
//! its own, per page. The reports offer nothing else.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::HashMap;

use super::queries::number;
use super::sources::{self, SourceScope};
use crate::domain::dimension::{field_name, from_field_name, Dimension};
use crate::domain::sketch::Sketch;
use crate::storage::breakdowns::{collection, CONVERTED};
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
    /// only).
    pub converted: HashMap<String, HashMap<DateTime<Utc>, Sketch>>,
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
        self.converted.get(name).map_or(0, |days| {
            days.values().map(|s| s.estimate_count() as i64).sum()
        })
    }
}

/// `dimensions` of `scope` over `[from, to)` (widened to whole hours),
/// with the events' converting visitors when `converted` names events.
pub async fn read(
    store: &Store,
    scope: SourceScope<'_>,
    dimensions: &[Dimension],
    converted: &[&str],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Breakdown, mongodb::error::Error> {
    let (hours, days) = sources::plan(from, to);
    let mut reads: Vec<(Resolution, DateTime<Utc>, DateTime<Utc>)> = hours
        .iter()
        .map(|&(f, t)| (Resolution::Hour, f, t))
        .collect();
    if let Some((f, t)) = days {
        reads.push((Resolution::Day, f, t));
    }
    let mut projection = doc! {"_id": 0, "timestamp": 1};
    for d in dimensions {
        projection.insert(d.field(), 1);
        projection.insert(d.other_field(), 1);
    }
    let converted_fields: Vec<(String, &str)> = converted
        .iter()
        .map(|name| (field_name(name), *name))
        .collect();
    for (field, _) in &converted_fields {
        projection.insert(format!("{CONVERTED}.{field}"), 1);
    }
    let mut counts: HashMap<Dimension, (HashMap<String, i64>, i64)> = HashMap::new();
    let mut sketches: HashMap<String, HashMap<DateTime<Utc>, Sketch>> = HashMap::new();
    let subject = scope.subject();
    for (g, f, t) in reads {
        let mut cursor = store
            .reports()
            .collection::<Document>(collection(subject, g))
            .find(doc! {
                subject.key_field(): scope.key(),
                "timestamp": {"$gte": bson::DateTime::from_chrono(f), "$lt": bson::DateTime::from_chrono(t)},
            })
            .projection(projection.clone())
            .await?;
        while let Some(d) = cursor.try_next().await? {
            for dimension in dimensions {
                let (names, other) = counts.entry(*dimension).or_default();
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
            let day = d
                .get_datetime("timestamp")
                .map(|t| Resolution::Day.floor(t.to_chrono()));
            if let (Ok(stored), Ok(day)) = (d.get_document(CONVERTED), day) {
                for (field, name) in &converted_fields {
                    if let Ok(sketch) = stored.get_document(field) {
                        // A damaged sketch counts nobody rather than
                        // failing the report.
                        let _ = sketches
                            .entry((*name).to_owned())
                            .or_default()
                            .entry(day)
                            .or_default()
                            .merge_stored(sketch);
                    }
                }
            }
        }
    }
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
            (
                dimension,
                NameTotals {
                    names,
                    other,
                    total,
                },
            )
        })
        .collect();
    let (covered_from, covered_to) = sources::covered(from, to);
    Ok(Breakdown {
        by,
        converted: sketches,
        from: Some(covered_from),
        to: Some(covered_to),
    })
}

//! The three bucket collections and the arithmetic that maps a hit's time to
//! a bucket and a slot inside it.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};

use crate::domain::Resolution;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// A preallocated bucket: every slot present with 0, so the document has
/// its final size from the start (seed 004).
pub fn zero_filled(resolution: Resolution, page: &str, start: DateTime<Utc>) -> Document {
    let slots: Document = (0..resolution.slot_count())
        .map(|i| (i.to_string(), Bson::Int32(0)))
        .collect();
    doc! {
        "page": page,
        "timestamp": bson::DateTime::from_chrono(start),
        "totalViews": 0_i64,
        resolution.slots_field(): slots,
    }
}

/// One bucket per page and start time, at every level: the upsert's
/// target and the shard key's prefix.
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    Resolution::ALL
        .into_iter()
        .map(|r| {
            super::schema::IndexSpec::new(
                r.collection(),
                "page_timestamp",
                super::schema::bucket_key(),
            )
            .unique()
        })
        .collect()
}

/// A bucket as read back. Upserted buckets carry only the slots that were
/// incremented; a missing slot is 0.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Bucket {
    pub page: String,
    pub timestamp: bson::DateTime,
    #[serde(rename = "totalViews")]
    pub total_views: i64,
    #[serde(alias = "seconds", alias = "minutes", alias = "hours", default)]
    pub slots: BTreeMap<String, i64>,
}

impl Bucket {
    pub fn slot(&self, index: usize) -> i64 {
        self.slots.get(&index.to_string()).copied().unwrap_or(0)
    }
}

/// Hits merged per bucket: for each (page, bucket start) the count per slot.
/// N hits on one page-minute become one statement.
#[derive(Debug)]
pub struct Increments {
    resolution: Resolution,
    buckets: HashMap<(String, DateTime<Utc>), Vec<u32>>,
}

impl Increments {
    pub fn new(resolution: Resolution) -> Self {
        Self {
            resolution,
            buckets: HashMap::new(),
        }
    }

    pub fn add(&mut self, page: &str, at: DateTime<Utc>) {
        let g = self.resolution;
        let key = (page.to_owned(), g.floor(at));
        let slots = self
            .buckets
            .entry(key)
            .or_insert_with(|| vec![0; g.slot_count()]);
        slots[g.slot(at)] += 1;
    }

    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// One upsert statement per bucket for an `update` command:
    /// `{q: {page, timestamp}, u: {$inc: {totalViews, "<slots>.<i>"...}}, upsert: true}`.
    pub fn statements(&self) -> Vec<Document> {
        let field = self.resolution.slots_field();
        self.buckets
            .iter()
            .map(|((page, start), slots)| {
                let total: i64 = slots.iter().map(|&n| i64::from(n)).sum();
                let mut inc = doc! { "totalViews": total };
                for (slot, &n) in slots.iter().enumerate().filter(|(_, &n)| n > 0) {
                    inc.insert(format!("{field}.{slot}"), Bson::Int32(n as i32));
                }
                doc! {
                    "q": { "page": page.as_str(), "timestamp": bson::DateTime::from_chrono(*start) },
                    "u": { "$inc": inc },
                    "upsert": true,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, m, s).unwrap()
    }

    #[test]
    fn merges_hits_on_one_bucket_into_one_statement() {
        let mut inc = Increments::new(Resolution::Minute);
        inc.add("example.com/a", at(10, 1, 7));
        inc.add("example.com/a", at(10, 1, 7));
        inc.add("example.com/a", at(10, 1, 9));
        inc.add("example.com/b", at(10, 1, 9));
        let mut statements = inc.statements();
        statements.sort_by_key(|s| {
            s.get_document("q")
                .unwrap()
                .get_str("page")
                .unwrap()
                .to_owned()
        });
        assert_eq!(statements.len(), 2);
        assert_eq!(
            statements[0],
            doc! {
                "q": {"page": "example.com/a", "timestamp": bson::DateTime::from_chrono(at(10, 1, 0))},
                "u": {"$inc": {"totalViews": 3_i64, "seconds.7": 2, "seconds.9": 1}},
                "upsert": true,
            }
        );
    }

    #[test]
    fn zero_filled_buckets_have_every_slot() {
        let d = zero_filled(Resolution::Day, "example.com/", at(0, 0, 0));
        assert_eq!(d.get_document("hours").unwrap().len(), 24);
        assert_eq!(d.get_i64("totalViews").unwrap(), 0);
        let m = zero_filled(Resolution::Minute, "example.com/", at(10, 1, 0));
        assert_eq!(m.get_document("seconds").unwrap().get_i32("59").unwrap(), 0);
    }
}

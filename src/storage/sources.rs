//! Traffic sources, counted in bounded bucket documents per page and per
//! site, by hour and by day:
//!
//! ```text
//! sources_hour / sources_day            {page, timestamp, totalViews, sources: {"google%2Ecom": 3, ...}, other}
//! site_sources_hour / site_sources_day  {site, part, timestamp, totalViews, sources: {...}, other}
//! ```
//!
//! A bucket holds at most [`MAX_SOURCES_PER_BUCKET`] distinct sources; the
//! views of any further source count in `other`, so a flood of made-up
//! `utm_source` values cannot grow a document without bound. Which sources
//! a bucket already has is read inside the applying transaction, so the cap
//! is exact: the snapshot read and the write commit together or conflict
//! and are retried whole. Site buckets are split by writer part like the
//! site totals (`buckets::Subject`), so the cap holds per part: a site's
//! hour holds at most the cap times the journal's lanes sources.
//!
//! Only views with a known source are counted here (the script's, or a URL
//! with `utm_source`); a pixel without the script cannot know its referrer.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};

use super::buckets::{Subject, Target};
use crate::domain::Resolution;
use crate::domain::Source;

pub const MAX_SOURCES_PER_BUCKET: usize = 50;

/// The levels sources are kept at: hours for the edges of a range, days
/// for the rest of it.
pub const LEVELS: [Resolution; 2] = [Resolution::Hour, Resolution::Day];

pub fn collection(subject: Subject, g: Resolution) -> &'static str {
    match (subject, g) {
        (Subject::Page, Resolution::Day) => "sources_day",
        (Subject::Page, _) => "sources_hour",
        (Subject::Site, Resolution::Day) => "site_sources_day",
        (Subject::Site, _) => "site_sources_hour",
    }
}

/// Every source collection, for indexes and site deletion.
pub fn collections() -> impl Iterator<Item = (Subject, &'static str)> {
    [Subject::Page, Subject::Site]
        .into_iter()
        .flat_map(|s| LEVELS.into_iter().map(move |g| (s, collection(s, g))))
}

/// One bucket per page (or site and writer part) and time; and by time
/// first, for the writer's lookup on secantusd-rs (see
/// [`SourceIncrements::lookup`]).
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    let by_time = collections().map(|(subject, collection)| {
        let (name, keys) = match subject {
            Subject::Page => ("timestamp_page", doc! {"timestamp": 1, "page": 1}),
            Subject::Site => ("timestamp_site", doc! {"timestamp": 1, "site": 1}),
        };
        super::schema::IndexSpec::new(collection, name, keys)
    });
    collections()
        .map(|(subject, collection)| match subject {
            Subject::Page => super::schema::IndexSpec::new(
                collection,
                "page_timestamp",
                doc! {"page": 1, "timestamp": 1},
            )
            .unique(),
            Subject::Site => super::schema::IndexSpec::new(
                collection,
                "site_timestamp_part",
                doc! {"site": 1, "timestamp": 1, "part": 1},
            )
            .unique(),
        })
        .chain(by_time)
        .collect()
}

type Key = (String, DateTime<Utc>);

/// Views per page, hour and source: what a batch of the sources applier
/// holds while it gathers, so a batch of many seconds stays as small as
/// the buckets it touches. Sources are kept by hour and day, so an hour's
/// start stands for its hits. The applier ends a batch at
/// [`Self::is_full`], which bounds both its memory and its transaction.
#[derive(Debug, Default)]
pub struct SourceCounts {
    // The keys are made up by whoever sends hits (pages, `utm_source`):
    // hashed with the standard, per-map keyed SipHash, so nobody can craft
    // names that collide (with an unkeyed hash a batch of them turns every
    // lookup into a scan).
    views: HashMap<(String, DateTime<Utc>), HashMap<String, u32>>,
    entries: usize,
}

/// Most page-hours in one sources batch (the applier may pass it by one
/// read of 4,096 hits): with their days and the site's, at most about
/// 16,000 statements (a views batch of 20,000 hits may write 60,000), and
/// the lookup's list of pages (765 bytes at most each) stays under 7 MiB.
pub const MAX_PAGE_HOURS_PER_BATCH: usize = 4_000;
/// Most (page, hour, source) counts in one sources batch, against a flood
/// of made-up `utm_source` values: about 100 bytes each.
pub const MAX_COUNTS_PER_BATCH: usize = 200_000;

impl SourceCounts {
    pub fn add(&mut self, page: String, at: DateTime<Utc>, source: String) {
        let by_source = self
            .views
            .entry((page, Resolution::Hour.floor(at)))
            .or_default();
        let n = by_source.entry(source).or_insert_with(|| {
            self.entries += 1;
            0
        });
        *n += 1;
    }

    /// The batch should be applied now, whatever its window says.
    pub fn is_full(&self) -> bool {
        self.views.len() >= MAX_PAGE_HOURS_PER_BATCH || self.entries >= MAX_COUNTS_PER_BATCH
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, DateTime<Utc>, &str, u32)> {
        self.views.iter().flat_map(|((page, hour), by_source)| {
            by_source
                .iter()
                .map(move |(source, &n)| (page.as_str(), *hour, source.as_str(), n))
        })
    }
}

/// A batch's views per bucket and source (by field name).
#[derive(Debug)]
pub struct SourceIncrements {
    target: Target,
    buckets: HashMap<Key, HashMap<String, u32>>,
}

impl SourceIncrements {
    /// Page buckets.
    pub fn for_pages(resolution: Resolution) -> Self {
        Self::to(Target::pages(resolution))
    }

    /// Site buckets, written as `part`.
    pub fn for_site(resolution: Resolution, part: i32) -> Self {
        Self::to(Target::site(resolution, part))
    }

    fn to(target: Target) -> Self {
        Self {
            target,
            buckets: HashMap::new(),
        }
    }

    pub fn add(&mut self, page: &str, at: DateTime<Utc>, source: &Source) {
        self.add_views(page, at, source, 1);
    }

    /// `views` views of `page` at `at` from `source`.
    pub fn add_views(&mut self, page: &str, at: DateTime<Utc>, source: &Source, views: u32) {
        *self
            .buckets
            .entry(self.target.bucket_of(page, at))
            .or_default()
            .entry(source.field_name())
            .or_default() += views;
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub fn collection(&self) -> &'static str {
        collection(self.target.subject, self.target.resolution)
    }

    /// The query that finds the buckets this batch touches (and perhaps a
    /// few more of the same keys and times: the caller ignores those).
    ///
    /// On MongoDB by keys and times. secantusd-rs scans `{page: {$in}, timestamp:
    /// {$in}}` over the unique key at a cost that grows with every bucket
    /// the pages ever had (1.4 s for 1,000 pages with a year stored, probed
    /// on the year bench's data), which halved the write path's rate with
    /// sources; by the times alone, through the `timestamp_*` index, it
    /// reads only this hour's and day's buckets. [`Self::existing`] keeps
    /// the batch's own.
    pub fn lookup(&self, by_time_only: bool) -> Document {
        let times: HashSet<DateTime<Utc>> = self.buckets.keys().map(|(_, t)| *t).collect();
        let mut q = doc! {
            "timestamp": {"$in": times.into_iter().map(bson::DateTime::from_chrono).collect::<Vec<_>>()},
        };
        if !by_time_only {
            let keys: HashSet<&str> = self.buckets.keys().map(|(k, _)| k.as_str()).collect();
            q.insert(
                self.target.subject.key_field(),
                doc! {"$in": keys.into_iter().collect::<Vec<_>>()},
            );
            if let Some(part) = self.target.part {
                q.insert("part", part);
            }
        }
        q
    }

    pub fn projection(&self) -> Document {
        doc! {"_id": 0, self.target.subject.key_field(): 1, "timestamp": 1, "part": 1, "sources": 1}
    }

    /// The source field names each found bucket already holds.
    pub fn existing(&self, found: &[Document]) -> HashMap<Key, HashSet<String>> {
        found
            .iter()
            .filter(|d| self.target.part.is_none_or(|p| d.get_i32("part") == Ok(p)))
            .filter_map(|d| {
                let key = d.get_str(self.target.subject.key_field()).ok()?.to_owned();
                let at = d.get_datetime("timestamp").ok()?.to_chrono();
                let names = d
                    .get_document("sources")
                    .map(|s| s.keys().cloned().collect())
                    .unwrap_or_default();
                Some(((key, at), names))
            })
            .collect()
    }

    /// One upsert per bucket. A source the bucket already has, or that
    /// still fits under the cap, gets its own counter; the rest go to
    /// `other`. Within a batch the most viewed new sources take the free
    /// places first (ties by name, so a retry decides the same way).
    pub fn statements(&self, existing: &HashMap<Key, HashSet<String>>) -> Vec<Document> {
        let none = HashSet::new();
        self.buckets
            .iter()
            .map(|((key, start), counts)| {
                let known = existing.get(&(key.clone(), *start)).unwrap_or(&none);
                let mut room = MAX_SOURCES_PER_BUCKET.saturating_sub(known.len());
                let mut ordered: Vec<(&String, u32)> =
                    counts.iter().map(|(name, &n)| (name, n)).collect();
                ordered.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
                let total: i64 = ordered.iter().map(|(_, n)| i64::from(*n)).sum();
                let mut inc = doc! {"totalViews": total};
                let mut other = 0i64;
                for (name, n) in ordered {
                    if known.contains(name) {
                        inc.insert(format!("sources.{name}"), Bson::Int64(i64::from(n)));
                    } else if room > 0 {
                        room -= 1;
                        inc.insert(format!("sources.{name}"), Bson::Int64(i64::from(n)));
                    } else {
                        other += i64::from(n);
                    }
                }
                if other > 0 {
                    inc.insert("other", other);
                }
                doc! {
                    "q": self.target.bucket_query(key, *start),
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

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, 5, 0).unwrap()
    }

    fn source(s: &str) -> Source {
        Source::from_stored(s.to_owned())
    }

    #[test]
    fn site_sources_merge_pages_and_encode_dots() {
        let mut inc = SourceIncrements::for_site(Resolution::Day, 0);
        inc.add("example.com/a", at(1), &source("google.com"));
        inc.add("example.com/b", at(2), &source("google.com"));
        inc.add("example.com/b", at(3), &source("direct"));
        let s = inc.statements(&HashMap::new());
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].get_document("u")
                .unwrap()
                .get_document("$inc")
                .unwrap(),
            &doc! {"totalViews": 3_i64, "sources.google%2Ecom": 2_i64, "sources.direct": 1_i64}
        );
        assert_eq!(inc.collection(), "site_sources_day");
    }

    #[test]
    fn beyond_the_cap_new_sources_count_as_other() {
        let mut inc = SourceIncrements::for_pages(Resolution::Hour);
        let page = "example.com/a";
        // The bucket already holds the cap less one: one new source fits,
        // the most viewed one; a source it already has keeps counting.
        let mut known: HashSet<String> = (0..MAX_SOURCES_PER_BUCKET - 1)
            .map(|i| format!("s{i}"))
            .collect();
        known.insert("old".into());
        known.remove("s0");
        for _ in 0..3 {
            inc.add(page, at(1), &source("big"));
        }
        inc.add(page, at(1), &source("small"));
        inc.add(page, at(1), &source("tiny"));
        inc.add(page, at(1), &source("old"));
        let start = Resolution::Hour.floor(at(1));
        let existing = HashMap::from([((page.to_owned(), start), known)]);
        let s = inc.statements(&existing);
        assert_eq!(
            s[0].get_document("u")
                .unwrap()
                .get_document("$inc")
                .unwrap(),
            &doc! {"totalViews": 6_i64, "sources.big": 3_i64, "sources.old": 1_i64, "other": 2_i64}
        );
    }

    #[test]
    fn existing_reads_the_field_names_of_found_buckets() {
        let inc = SourceIncrements::for_pages(Resolution::Hour);
        let t = Resolution::Hour.floor(at(1));
        let found = vec![doc! {
            "page": "example.com/a",
            "timestamp": bson::DateTime::from_chrono(t),
            "sources": {"google%2Ecom": 1_i64, "direct": 2_i64},
        }];
        let e = inc.existing(&found);
        assert_eq!(e[&("example.com/a".to_owned(), t)].len(), 2);
    }

    #[test]
    fn a_lookup_by_time_alone_keeps_only_this_writers_part() {
        let mut inc = SourceIncrements::for_site(Resolution::Hour, 1);
        inc.add("example.com/a", at(1), &source("google.com"));
        let lookup = inc.lookup(true);
        assert_eq!(lookup.len(), 1, "the times alone: {lookup}");
        let full = inc.lookup(false);
        assert_eq!(full.get_i32("part"), Ok(1));
        assert!(full.contains_key("site"));
        let t = Resolution::Hour.floor(at(1));
        let bucket = |part: i32, name: &str| {
            doc! {"site": "example.com", "timestamp": bson::DateTime::from_chrono(t), "part": part, "sources": {name: 1_i64}}
        };
        let e = inc.existing(&[bucket(0, "other%2Epart"), bucket(1, "mine")]);
        let names = &e[&("example.com".to_owned(), t)];
        assert!(
            names.contains("mine") && !names.contains("other%2Epart"),
            "{names:?}"
        );
    }

    #[test]
    fn counts_merge_per_page_hour_and_source() {
        let mut counts = SourceCounts::default();
        let t = |h, m| Utc.with_ymd_and_hms(2026, 11, 22, h, m, 0).unwrap();
        counts.add("a.test/".into(), t(10, 1), "x".into());
        counts.add("a.test/".into(), t(10, 59), "x".into());
        counts.add("a.test/".into(), t(11, 0), "x".into());
        counts.add("a.test/".into(), t(10, 5), "y".into());
        let mut got: Vec<_> = counts.iter().collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("a.test/", t(10, 0), "x", 2),
                ("a.test/", t(10, 0), "y", 1),
                ("a.test/", t(11, 0), "x", 1),
            ]
        );
        assert!(!counts.is_full());
    }

    #[test]
    fn the_counts_are_hashed_with_a_key_of_their_own() {
        // Issue 24, item 14: with an unkeyed hash (FxHash) every batch
        // placed the same names the same way, so colliding names could be
        // computed once and sent to any instance. Keyed per map, two
        // batches of the same 1,000 names keep them in different orders.
        let names: Vec<String> = (0..1000).map(|i| format!("source-{i}")).collect();
        let order = || {
            let mut counts = SourceCounts::default();
            for name in &names {
                counts.add("example.com/".into(), at(1), name.clone());
            }
            counts
                .iter()
                .map(|(_, _, source, _)| source.to_owned())
                .collect::<Vec<_>>()
        };
        assert_ne!(order(), order());
    }

    #[test]
    fn a_batch_is_full_at_its_page_hours_or_its_counts() {
        let mut pages = SourceCounts::default();
        for i in 0..MAX_PAGE_HOURS_PER_BATCH {
            assert!(!pages.is_full(), "{i}");
            pages.add(format!("a.test/{i}"), at(1), "x".into());
        }
        assert!(pages.is_full());
        // One page-hour and a flood of made-up sources.
        let mut names = SourceCounts::default();
        for i in 0..MAX_COUNTS_PER_BATCH {
            assert!(!names.is_full(), "{i}");
            names.add("a.test/".into(), at(1), format!("s{i}"));
        }
        assert!(names.is_full());
    }
}

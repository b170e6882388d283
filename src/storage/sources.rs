//! Traffic sources, counted inside the hour and day buckets that already
//! count the views: a page's in its `views_hour` / `views_day` documents,
//! a site's in its `site_views_hour` / `site_views_day` parts.
//!
//! ```text
//! {page, timestamp, totalViews, minutes: {...},
//!  sources: {"google%2Ecom": 3, "direct": 9, ...}, otherSources: 2, sourceNames: 2}
//! ```
//!
//! Kept in the view buckets rather than in collections of their own so a
//! hit with a source costs no statement more than one without: the
//! source fields ride in the `$inc` the bucket gets anyway. Measured on
//! secantusd-rs (docs/benchmarks.md), each into its own database: as
//! separate buckets the write path kept 0.48-0.50 of its rate without
//! sources, inside the view buckets 0.68-0.72. They also expire, and are
//! deleted with their site, with the views.
//!
//! A bucket holds at most [`MAX_SOURCES_PER_BUCKET`] distinct sources; the
//! views of any further source count in `otherSources`, so a flood of
//! made-up `utm_source` values cannot grow a document without bound. Site
//! buckets are split by writer part (`buckets::Subject`), so the cap holds
//! per part.
//!
//! The writer knows which names a bucket holds from what it last read or
//! wrote (`source_names`), so deciding the cap costs no read in most
//! transactions. `sourceNames` counts the names added: a statement that
//! adds names matches only while it is what the writer saw, so if another
//! writer added names meanwhile, the upsert meets the unique key instead,
//! the transaction aborts, and the writer reads the bucket again. The cap
//! is exact whoever writes.
//!
//! Only views with a known source are counted here (the script's, or a URL
//! with `utm_source`); a pixel without the script cannot know its referrer.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};

use super::buckets::Target;
use crate::domain::{Resolution, Source};

pub const MAX_SOURCES_PER_BUCKET: usize = 50;

/// The levels sources are kept at: hours for the edges of a range, days
/// for the rest of it.
pub const LEVELS: [Resolution; 2] = [Resolution::Hour, Resolution::Day];

/// Views per source, by field name (`Source::field_name`).
pub const SOURCES: &str = "sources";
/// Views of sources beyond the cap.
pub const OTHER: &str = "otherSources";
/// How many names `sources` was given by guarded statements (see the
/// module's comment).
pub const NAMES: &str = "sourceNames";

/// A bucket of a batch: its key (page or site, borrowed from the hits) and
/// start.
pub type Key<'a> = (&'a str, DateTime<Utc>);

/// A batch's source field names (`Source::field_name`), each worked out
/// once and then referred to by its index.
#[derive(Debug, Default)]
pub struct FieldNames<'a> {
    index: HashMap<&'a str, u32>,
    names: Vec<String>,
}

impl<'a> FieldNames<'a> {
    /// The index of a stored source value's field name.
    pub fn of(&mut self, source: &'a str) -> u32 {
        if let Some(&i) = self.index.get(source) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names
            .push(Source::from_stored(source.to_owned()).field_name());
        self.index.insert(source, i);
        i
    }

    pub fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }
}

/// What a writer knows of a bucket's sources: the names it holds and the
/// `sourceNames` it was last seen (or written) with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known {
    pub names: HashSet<String>,
    pub stored_count: i64,
}

impl Known {
    /// From a bucket as read (projected to `sources` and `sourceNames`).
    pub fn of_bucket(d: &Document) -> Self {
        Known {
            names: d
                .get_document(SOURCES)
                .map(|s| s.keys().cloned().collect())
                .unwrap_or_default(),
            stored_count: super::values::number(d.get(NAMES)).unwrap_or(0),
        }
    }
}

/// What one bucket's statement adds.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceUpdate {
    /// Source fields for the statement's `$inc`.
    pub inc: Document,
    /// Names new to the bucket; when any, the statement must match only
    /// while `sourceNames` is `expected`.
    pub added: Vec<String>,
    pub expected: i64,
}

impl SourceUpdate {
    /// The condition a statement that adds names puts in its filter. A
    /// bucket never given a name has no `sourceNames` (preallocated, or
    /// written by views without a source).
    pub fn guard(&self) -> Option<(&'static str, Bson)> {
        if self.added.is_empty() {
            return None;
        }
        let expected = if self.expected == 0 {
            Bson::Document(doc! {"$in": [Bson::Null, 0_i64]})
        } else {
            Bson::Int64(self.expected)
        };
        Some((NAMES, expected))
    }
}

/// A batch's views per bucket and source (by field name index), for one
/// target.
#[derive(Debug)]
pub struct SourceIncrements<'a> {
    target: Target,
    buckets: HashMap<Key<'a>, HashMap<u32, u32>>,
}

impl<'a> SourceIncrements<'a> {
    pub fn new(target: Target) -> Self {
        Self {
            target,
            buckets: HashMap::new(),
        }
    }

    pub fn target(&self) -> Target {
        self.target
    }

    /// Counts a view of `page` at `at` from the source whose field name
    /// is `field` (a [`FieldNames`] index).
    pub fn add(&mut self, page: &'a str, at: DateTime<Utc>, field: u32) {
        *self
            .buckets
            .entry(self.target.bucket_of(page, at))
            .or_default()
            .entry(field)
            .or_default() += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = Key<'a>> + '_ {
        self.buckets.keys().copied()
    }

    /// Each bucket's source fields, given what is known of it ([`fields`];
    /// nothing known: no names).
    pub fn updates<'k>(
        &self,
        names: &FieldNames,
        known: impl Fn(Key<'a>) -> Option<&'k Known>,
    ) -> HashMap<Key<'a>, SourceUpdate> {
        let none = Known::default();
        self.buckets
            .iter()
            .map(|(&key, counts)| {
                let counts = counts
                    .iter()
                    .map(|(&field, &n)| (names.name(field), i64::from(n)));
                (key, fields(known(key).unwrap_or(&none), counts, 0))
            })
            .collect()
    }
}

/// The source fields that add `counts` (by field name) and `other` to a
/// bucket holding `known`. A source the bucket already has, or that still
/// fits under the cap, gets its own counter; the rest go to
/// `otherSources`. The most viewed new sources take the free places first
/// (ties by name, so a retry decides the same way).
pub fn fields<'a>(
    known: &Known,
    counts: impl Iterator<Item = (&'a str, i64)>,
    other: i64,
) -> SourceUpdate {
    let mut room = MAX_SOURCES_PER_BUCKET.saturating_sub(known.names.len());
    let mut ordered: Vec<(&str, i64)> = counts.collect();
    ordered.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut inc = Document::new();
    let mut added = Vec::new();
    let mut other = other;
    for (name, n) in ordered {
        if known.names.contains(name) {
            inc.insert(format!("{SOURCES}.{name}"), n);
        } else if room > 0 {
            room -= 1;
            inc.insert(format!("{SOURCES}.{name}"), n);
            added.push(name.to_owned());
        } else {
            other += n;
        }
    }
    if other > 0 {
        inc.insert(OTHER, other);
    }
    if !added.is_empty() {
        inc.insert(NAMES, added.len() as i64);
    }
    SourceUpdate {
        inc,
        added,
        expected: known.stored_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, 5, 0).unwrap()
    }

    /// `(page, source)` views into one target.
    fn batch<'a>(
        target: Target,
        names: &mut FieldNames<'a>,
        views: &[(&'a str, u32, &'a str)],
    ) -> SourceIncrements<'a> {
        let mut inc = SourceIncrements::new(target);
        for &(page, h, source) in views {
            inc.add(page, at(h), names.of(source));
        }
        inc
    }

    fn only(u: HashMap<Key, SourceUpdate>) -> SourceUpdate {
        assert_eq!(u.len(), 1, "{u:?}");
        u.into_values().next().unwrap()
    }

    #[test]
    fn field_names_encode_dots_once_per_source() {
        let mut names = FieldNames::default();
        let a = names.of("google.com");
        assert_eq!(names.of("google.com"), a);
        assert_ne!(names.of("direct"), a);
        assert_eq!(names.name(a), "google%2Ecom");
    }

    #[test]
    fn site_sources_merge_pages_and_encode_dots() {
        let mut names = FieldNames::default();
        let inc = batch(
            Target::site(Resolution::Day, 0),
            &mut names,
            &[
                ("example.com/a", 1, "google.com"),
                ("example.com/b", 2, "google.com"),
                ("example.com/b", 3, "direct"),
            ],
        );
        let u = inc.updates(&names, |_| None);
        assert_eq!(u.keys().next().unwrap().0, "example.com");
        let update = only(u);
        assert_eq!(
            update.inc,
            doc! {"sources.google%2Ecom": 2_i64, "sources.direct": 1_i64, "sourceNames": 2_i64}
        );
        // A bucket never given a name: missing or 0.
        assert_eq!(
            update.guard(),
            Some((NAMES, Bson::Document(doc! {"$in": [Bson::Null, 0_i64]})))
        );
    }

    #[test]
    fn beyond_the_cap_new_sources_count_as_other() {
        let page = "example.com/a";
        // The bucket already holds the cap less one: one new source fits,
        // the most viewed one; a source it already has keeps counting.
        let mut held: HashSet<String> = (0..MAX_SOURCES_PER_BUCKET - 1)
            .map(|i| format!("s{i}"))
            .collect();
        held.insert("old".into());
        held.remove("s0");
        let mut names = FieldNames::default();
        let inc = batch(
            Target::pages(Resolution::Hour),
            &mut names,
            &[
                (page, 1, "big"),
                (page, 1, "big"),
                (page, 1, "big"),
                (page, 1, "small"),
                (page, 1, "tiny"),
                (page, 1, "old"),
            ],
        );
        let known = Known {
            names: held,
            stored_count: 49,
        };
        let update = only(inc.updates(&names, |_| Some(&known)));
        assert_eq!(
            update.inc,
            doc! {"sources.big": 3_i64, "sources.old": 1_i64, "otherSources": 2_i64, "sourceNames": 1_i64}
        );
        assert_eq!(update.added, ["big"]);
        assert_eq!(update.guard(), Some((NAMES, Bson::Int64(49))));
    }

    #[test]
    fn known_names_alone_need_no_guard() {
        let mut names = FieldNames::default();
        let inc = batch(
            Target::pages(Resolution::Day),
            &mut names,
            &[("example.com/a", 1, "direct")],
        );
        let known = Known {
            names: HashSet::from(["direct".to_owned()]),
            stored_count: 1,
        };
        let update = only(inc.updates(&names, |_| Some(&known)));
        assert_eq!(update.inc, doc! {"sources.direct": 1_i64});
        assert_eq!(update.guard(), None);
    }

    #[test]
    fn a_full_bucket_sends_every_new_source_to_other() {
        let mut names = FieldNames::default();
        let inc = batch(
            Target::pages(Resolution::Day),
            &mut names,
            &[("example.com/a", 1, "late")],
        );
        let known = Known {
            names: (0..MAX_SOURCES_PER_BUCKET)
                .map(|i| format!("s{i}"))
                .collect(),
            stored_count: MAX_SOURCES_PER_BUCKET as i64,
        };
        let update = only(inc.updates(&names, |_| Some(&known)));
        assert_eq!(update.inc, doc! {"otherSources": 1_i64});
        assert_eq!(update.guard(), None);
    }

    #[test]
    fn old_counts_and_other_fold_in_under_the_cap() {
        let known = Known {
            names: (1..MAX_SOURCES_PER_BUCKET)
                .map(|i| format!("n{i}"))
                .collect(),
            stored_count: 49,
        };
        let update = fields(&known, [("x", 3), ("y", 2), ("n1", 4)].into_iter(), 1);
        assert_eq!(
            update.inc,
            doc! {"sources.n1": 4_i64, "sources.x": 3_i64, "otherSources": 3_i64, "sourceNames": 1_i64}
        );
    }

    #[test]
    fn known_reads_the_names_and_the_stored_count() {
        let d = doc! {
            "page": "example.com/a",
            "sources": {"google%2Ecom": 1_i64, "direct": 2_i64},
            "sourceNames": 2_i32,
        };
        let k = Known::of_bucket(&d);
        assert_eq!(k.names.len(), 2);
        assert_eq!(k.stored_count, 2);
        assert_eq!(Known::of_bucket(&doc! {"page": "x"}), Known::default());
    }
}

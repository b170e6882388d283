//! What a bucket writer knows of the source names its buckets hold, so
//! that deciding the cap (`sources`) costs no read in most transactions.
//!
//! A bucket is read once, inside the transaction that first writes a
//! source to it; after that the writer adds the names it commits. Names
//! are only ever added to a bucket, so what is known here is at most
//! behind: a name another writer added. That is what the `sourceNames`
//! guard catches (the statement meets the unique key, the transaction
//! aborts). Whatever the failure, the batch's buckets are forgotten and
//! the next attempt reads them again in its own snapshot.
//!
//! On secantusd-rs a bucket is looked up by its time alone (the
//! `timestamp_*` indexes): bounds on both fields of a compound index, or
//! `{page: {$in}}`, cost it hundreds of milliseconds however little they
//! return (1.4 s for 1,000 pages with a year stored, probed on the year
//! bench's data). Such a read returns every bucket of those times, so they
//! are all kept, and the times marked complete: a bucket absent from it
//! had no names. On MongoDB the read names the batch's buckets.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};

use super::buckets::Target;
use super::sources::{Key, Known, SourceIncrements, SourceUpdate, NAMES, SOURCES};

/// Buckets remembered before everything is forgotten: an hour's and a
/// day's buckets for tens of thousands of pages. A forgotten bucket costs
/// one read.
const MAX_ENTRIES: usize = 100_000;

/// Which buckets: a collection and, for site buckets, the writer's part.
type Slot = (&'static str, Option<i32>);

/// The buckets of one slot and time that are known.
#[derive(Debug, Default)]
struct Time {
    /// Every bucket of the time was read: one not here had no names.
    complete: bool,
    buckets: HashMap<String, Known>,
}

#[derive(Debug, Default)]
pub struct SourceNames {
    times: HashMap<(Slot, DateTime<Utc>), Time>,
    entries: usize,
}

fn slot(target: Target) -> Slot {
    (target.collection(), target.part)
}

impl SourceNames {
    /// The batch's buckets nothing is known of.
    pub fn missing<'a>(&self, inc: &SourceIncrements<'a>) -> Vec<Key<'a>> {
        let s = slot(inc.target());
        inc.keys()
            .filter(|(key, at)| {
                self.times
                    .get(&(s, *at))
                    .is_none_or(|t| !t.complete && !t.buckets.contains_key(*key))
            })
            .collect()
    }

    /// What is known of a bucket (`None`: no names).
    pub fn known(&self, target: Target, (key, at): Key) -> Option<&Known> {
        self.times.get(&(slot(target), at))?.buckets.get(key)
    }

    /// The query that finds `missing` (and, by time alone, every other
    /// bucket of their times).
    pub fn lookup(target: Target, missing: &[Key], by_time_only: bool) -> Document {
        let times: HashSet<DateTime<Utc>> = missing.iter().map(|(_, t)| *t).collect();
        let mut q = doc! {
            "timestamp": {"$in": times.into_iter().map(bson::DateTime::from_chrono).collect::<Vec<_>>()},
        };
        if !by_time_only {
            let keys: HashSet<&str> = missing.iter().map(|(k, _)| *k).collect();
            q.insert(
                target.subject.key_field(),
                doc! {"$in": keys.into_iter().collect::<Vec<_>>()},
            );
            if let Some(part) = target.part {
                q.insert("part", part);
            }
        }
        q
    }

    pub fn projection(target: Target) -> Document {
        doc! {"_id": 0, target.subject.key_field(): 1, "timestamp": 1, "part": 1, SOURCES: 1, NAMES: 1}
    }

    fn set(&mut self, s: Slot, (key, at): Key, known: Known) {
        let time = self.times.entry((s, at)).or_default();
        if time.buckets.insert(key.to_owned(), known).is_none() {
            self.entries += 1;
        }
    }

    /// Keeps what a lookup for `missing` found, read in a transaction's
    /// snapshot; a missing bucket not found had no names then.
    pub fn load(
        &mut self,
        target: Target,
        missing: &[Key],
        found: &[Document],
        by_time_only: bool,
    ) {
        if self.entries + missing.len() + found.len() > MAX_ENTRIES {
            self.times.clear();
            self.entries = 0;
        }
        let s = slot(target);
        for &key in missing {
            self.set(s, key, Known::default());
            if by_time_only {
                self.times.entry((s, key.1)).or_default().complete = true;
            }
        }
        let field = target.subject.key_field();
        for d in found {
            if target.part.is_some_and(|p| d.get_i32("part") != Ok(p)) {
                continue;
            }
            let (Ok(key), Ok(at)) = (d.get_str(field), d.get_datetime("timestamp")) else {
                continue;
            };
            self.set(s, (key, at.to_chrono()), Known::of_bucket(d));
        }
    }

    /// After a commit: the names the batch added are in.
    pub fn committed(&mut self, target: Target, updates: &HashMap<Key, SourceUpdate>) {
        let s = slot(target);
        for (&(key, at), update) in updates.iter().filter(|(_, u)| !u.added.is_empty()) {
            let time = self.times.entry((s, at)).or_default();
            let known = match time.buckets.get_mut(key) {
                Some(known) => known,
                None => {
                    self.entries += 1;
                    time.buckets.entry(key.to_owned()).or_default()
                }
            };
            known.names.extend(update.added.iter().cloned());
            known.stored_count = update.expected + update.added.len() as i64;
        }
    }

    /// After a failure: the batch's buckets are read again next time.
    pub fn forget(&mut self, inc: &SourceIncrements) {
        let s = slot(inc.target());
        for (key, at) in inc.keys() {
            if let Some(time) = self.times.get_mut(&(s, at)) {
                time.complete = false;
                if time.buckets.remove(key).is_some() {
                    self.entries -= 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Resolution;
    use crate::storage::sources::FieldNames;
    use chrono::TimeZone;

    fn hour() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap()
    }

    fn batch<'a>(
        target: Target,
        names: &mut FieldNames<'a>,
        pages: &[&'a str],
    ) -> SourceIncrements<'a> {
        let mut inc = SourceIncrements::new(target);
        for p in pages {
            inc.add(p, hour(), names.of("direct"));
        }
        inc
    }

    #[test]
    fn a_read_by_time_alone_answers_for_every_bucket_of_that_time() {
        let target = Target::pages(Resolution::Hour);
        let mut known = SourceNames::default();
        let mut names = FieldNames::default();
        let first = batch(target, &mut names, &["a.test/1"]);
        let missing = known.missing(&first);
        assert_eq!(missing.len(), 1);
        let found = vec![doc! {
            "page": "a.test/2", "timestamp": bson::DateTime::from_chrono(hour()),
            "sources": {"direct": 4_i64}, "sourceNames": 1_i64,
        }];
        known.load(target, &missing, &found, true);
        // A page of the same hour not in the read had no names then.
        let later = batch(target, &mut names, &["a.test/1", "a.test/2", "a.test/3"]);
        assert!(known.missing(&later).is_empty());
        let two = known.known(target, ("a.test/2", hour())).unwrap();
        assert_eq!(two.stored_count, 1);
        assert!(two.names.contains("direct"));
        assert_eq!(known.known(target, ("a.test/3", hour())), None);
    }

    #[test]
    fn a_read_by_keys_answers_only_for_them() {
        let target = Target::pages(Resolution::Hour);
        let mut known = SourceNames::default();
        let mut names = FieldNames::default();
        let first = batch(target, &mut names, &["a.test/1"]);
        known.load(target, &known.missing(&first), &[], false);
        let later = batch(target, &mut names, &["a.test/1", "a.test/2"]);
        assert_eq!(known.missing(&later), vec![("a.test/2", hour())]);
    }

    #[test]
    fn site_buckets_of_other_parts_are_not_this_writers() {
        let target = Target::site(Resolution::Hour, 1);
        let mut known = SourceNames::default();
        let mut names = FieldNames::default();
        let inc = batch(target, &mut names, &["a.test/1"]);
        let at = bson::DateTime::from_chrono(hour());
        let found = vec![
            doc! {"site": "a.test", "timestamp": at, "part": 0, "sources": {"x": 1_i64}, "sourceNames": 1},
            doc! {"site": "a.test", "timestamp": at, "part": 1, "sources": {"y": 1_i64}, "sourceNames": 1},
        ];
        known.load(target, &known.missing(&inc), &found, true);
        let mine = known.known(target, ("a.test", hour())).unwrap();
        assert!(mine.names.contains("y") && !mine.names.contains("x"));
    }

    #[test]
    fn commits_add_names_and_failures_forget_the_batch() {
        let target = Target::pages(Resolution::Day);
        let mut known = SourceNames::default();
        let mut names = FieldNames::default();
        let inc = batch(target, &mut names, &["a.test/1"]);
        known.load(target, &known.missing(&inc), &[], true);
        let updates = inc.updates(&names, |k| known.known(target, k));
        known.committed(target, &updates);
        let key = ("a.test/1", Resolution::Day.floor(hour()));
        let now = known.known(target, key).unwrap();
        assert_eq!(now.stored_count, 1);
        assert!(now.names.contains("direct"));
        known.forget(&inc);
        assert_eq!(known.missing(&inc), vec![key]);
    }
}

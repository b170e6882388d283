//! The kept answers of long ranges' breakdowns: what a year of day
//! buckets added up to, held in memory (shared by every request through
//! `Store::kept_breakdowns`) while the write counters of its buckets say
//! nothing has changed. `reports::breakdowns` reads the counters, asks
//! here, and keeps what it read; the buckets themselves, and how they are
//! written, are `storage::breakdowns`.

use std::collections::HashMap;

use crate::domain::{Currency, Dimension};

/// A long range's breakdowns as read from its whole days' buckets, kept
/// in memory by [`KeptBreakdowns`].
#[derive(Debug, Default)]
pub struct KeptCounts {
    /// Per dimension, the counts by field name and the `other` count.
    pub by: HashMap<Dimension, (HashMap<String, i64>, i64)>,
    /// Per event name, its converting visitors summed over the days.
    pub converted: HashMap<String, i64>,
    /// Per event field name and currency, its revenue (ten-thousandths)
    /// and the events that carried it.
    pub revenue: HashMap<String, HashMap<Currency, (i128, i64)>>,
}

/// What a kept answer is for: the collection and the site's or page's
/// key, the dimensions and events read, the first and end day (UTC day
/// numbers), and a fingerprint of every bucket's
/// [`WRITES`](super::breakdowns::WRITES) and
/// [`GENERATION`](super::breakdowns::GENERATION) over them.
pub type KeptKey = (String, Vec<Dimension>, Vec<String>, i64, i64, u64);

/// Whether two keys ask for the same thing (all but the fingerprint).
fn same_question(a: &KeptKey, b: &KeptKey) -> bool {
    (&a.0, &a.1, &a.2, a.3, a.4) == (&b.0, &b.1, &b.2, b.3, b.4)
}

/// The last answers of long ranges' breakdowns: a year is a year of day
/// buckets holding every dimension's names (97 ms a 12-month dashboard
/// at 1,000 pages), yet its past days rarely change. An answer
/// is used only while the fingerprint of its buckets'
/// [`WRITES`](super::breakdowns::WRITES) is the one it was read with, so
/// a late record (a replayed journal, an import) is seen at once.
#[derive(Debug, Default)]
pub struct KeptBreakdowns {
    inner: std::sync::Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// The most recently used last.
    answers: Vec<(KeptKey, std::sync::Arc<KeptCounts>)>,
    /// Questions whose answers are too big to keep: asked again, they go
    /// straight to the buckets instead of reading the counters first.
    too_big: Vec<KeptKey>,
}

/// Most answers kept, and most bytes over all of them.
const MAX_KEPT: usize = 64;
const MAX_KEPT_BYTES: usize = 32 << 20;

impl KeptCounts {
    /// About what the answer takes in memory: each name's text, its map
    /// entry and slack.
    fn bytes(&self) -> usize {
        let names: usize = self
            .by
            .values()
            .flat_map(|(names, _)| names.keys())
            .map(|name| name.len() + 64)
            .sum();
        let revenue: usize = self
            .revenue
            .iter()
            .map(|(e, by)| e.len() + 64 + by.len() * 48)
            .sum();
        names + revenue + self.converted.keys().map(|e| e.len() + 64).sum::<usize>() + 256
    }
}

impl KeptBreakdowns {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: &KeptKey) -> Option<std::sync::Arc<KeptCounts>> {
        let mut kept = self.lock();
        let i = kept.answers.iter().position(|(k, _)| k == key)?;
        let entry = kept.answers.remove(i);
        let counts = entry.1.clone();
        kept.answers.push(entry);
        Some(counts)
    }

    /// Whether the answer to `key`'s question was too big to keep.
    pub fn too_big(&self, key: &KeptKey) -> bool {
        self.lock().too_big.iter().any(|k| same_question(k, key))
    }

    /// Keeps an answer, in place of any other to the same question (its
    /// buckets have been written since: it cannot be asked for again).
    pub fn keep(&self, key: KeptKey, counts: std::sync::Arc<KeptCounts>) {
        let mut kept = self.lock();
        kept.answers.retain(|(k, _)| !same_question(k, &key));
        if counts.bytes() > MAX_KEPT_BYTES / 4 {
            if !kept.too_big.iter().any(|k| same_question(k, &key)) {
                if kept.too_big.len() >= MAX_KEPT {
                    kept.too_big.remove(0);
                }
                kept.too_big.push(key);
            }
            return;
        }
        kept.answers.push((key, counts));
        while kept.answers.len() > MAX_KEPT
            || kept.answers.iter().map(|(_, c)| c.bytes()).sum::<usize>() > MAX_KEPT_BYTES
        {
            kept.answers.remove(0);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().answers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(names: usize, len: usize) -> std::sync::Arc<KeptCounts> {
        let names = (0..names).map(|i| (format!("{i:0len$}"), 1_i64)).collect();
        std::sync::Arc::new(KeptCounts {
            by: HashMap::from([(Dimension::Browser, (names, 0))]),
            converted: HashMap::new(),
            revenue: HashMap::new(),
        })
    }

    fn question(site: &str, fingerprint: u64) -> KeptKey {
        (
            site.into(),
            vec![Dimension::Browser],
            vec![],
            10,
            375,
            fingerprint,
        )
    }

    #[test]
    fn a_kept_answer_is_found_only_by_its_fingerprint_and_replaces_the_older_one() {
        let kept = KeptBreakdowns::default();
        kept.keep(question("a", 1), answer(3, 4));
        assert!(kept.get(&question("a", 1)).is_some());
        assert!(kept.get(&question("a", 2)).is_none());
        assert!(kept.get(&question("b", 1)).is_none());
        kept.keep(question("a", 2), answer(4, 4));
        assert!(kept.get(&question("a", 1)).is_none(), "superseded");
        assert_eq!(
            kept.get(&question("a", 2)).unwrap().by[&Dimension::Browser]
                .0
                .len(),
            4
        );
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn kept_answers_stay_within_their_count_and_bytes_and_too_big_ones_are_remembered() {
        let kept = KeptBreakdowns::default();
        for i in 0..(MAX_KEPT + 10) {
            kept.keep(question(&format!("s{i}"), 1), answer(2, 4));
        }
        assert_eq!(kept.len(), MAX_KEPT);
        assert!(
            kept.get(&question("s0", 1)).is_none(),
            "the oldest went first"
        );
        assert!(kept
            .get(&question(&format!("s{}", MAX_KEPT + 9), 1))
            .is_some());
        // Answers of a few MB each: the bytes bound the rest.
        for i in 0..8 {
            kept.keep(question(&format!("big{i}"), 1), answer(30_000, 100));
        }
        let bytes: usize = kept.lock().answers.iter().map(|(_, c)| c.bytes()).sum();
        assert!(bytes <= MAX_KEPT_BYTES, "{bytes}");
        // One over a quarter of the bound is not kept, and is remembered.
        kept.keep(question("huge", 1), answer(100_000, 100));
        assert!(kept.get(&question("huge", 1)).is_none());
        assert!(kept.too_big(&question("huge", 7)));
        assert!(!kept.too_big(&question("big1", 1)));
    }
}

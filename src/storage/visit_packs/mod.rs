//! Day packs: a read model of the visit store for closed UTC days, so a
//! filtered report or funnel over a month reads a few hundred compact
//! binary documents instead of one BSON document per visit (decoding
//! ~400,000 stored visits cannot answer in 500 ms on two cores).
//!
//! **Chunks.** A site's day is split by the visitor's sketch register into
//! [`CHUNKS`] chunks (chunk k: registers `[k·R/N, (k+1)·R/N)`), each
//! stored as one document or, past [`MAX_PART_BYTES`], a few (`part`).
//! The register is a hash of the visitor, so a sample of the first
//! registers (`visit_log::Sample`, what the stored visits' sample
//! means) is the first chunks, the last one filtered by register; visits
//! without a register go in chunk 0 and are left out of any sample, as
//! the documents' `reg < n` leaves them out.
//!
//! ```text
//! { _id: "example.com 20414 3 0",   // site, day number, chunk, part
//!   site: "example.com", day: ISODate(midnight UTC),
//!   chunk: 3, part: 0, parts: 1,
//!   build: NumberLong(random),      // the parts of one build go together
//!   counter: {hits: 1234, visits: 456},  // the day's `visit_days`, absent if it had none
//!   visits: 37,                     // visits in this part
//!   data: BinData(...) }            // `codec`
//! ```
//!
//! **Exact, never stale.** A pack records the day's counter (`visit_days`,
//! written in the visits applier's transactions) as read BEFORE the day's
//! visits were read: a batch landing in between can only make the pack
//! look stale, never wrong. A pack is used only while the counter still
//! has that value; otherwise the day is read from the stored visits.
//!
//! **Who builds.** Nothing on the write path: a closed day (its end more
//! than the visits window ago) is packed by the app's background task
//! (`app`, "visit packs"): the days a filtered read found without a valid
//! pack, queued here by the read after it answered, and each night
//! yesterday's days of every site.

pub mod codec;

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::mpsc;

use super::page_summaries::day_start;
use super::schema::IndexSpec;
use super::visit_days::{self, DayCount};
use super::visit_log::{self, VisitQuery};
use super::Store;
use crate::clock::SharedClock;
use crate::domain::sketch::REGISTERS;
use crate::domain::visit::VisitRecord;
pub use codec::{PackError, Want};

pub const COLLECTION: &str = "visit_packs";

/// Chunks per day: a sample is read in steps of 1/16 of the visitors at
/// the least, and a day's pack is 16 documents or a few more.
pub const CHUNKS: u16 = 16;

const REGISTERS_PER_CHUNK: u16 = (REGISTERS / CHUNKS as usize) as u16;

/// A part larger than this is split: well inside the 16 MiB document.
pub const MAX_PART_BYTES: usize = 4 << 20;

pub fn shard_key() -> Document {
    doc! {"site": 1, "day": 1}
}

pub fn indexes() -> Vec<IndexSpec> {
    vec![IndexSpec::new(
        COLLECTION,
        "site_1_day_1_chunk_1",
        doc! {"site": 1, "day": 1, "chunk": 1},
    )]
}

/// The chunk of a visitor's register.
pub fn chunk_of(register: Option<(u16, u8)>) -> u16 {
    register.map_or(0, |(index, _)| {
        (index / REGISTERS_PER_CHUNK).min(CHUNKS - 1)
    })
}

/// The chunks a sample of the first `registers` registers reads.
pub fn chunks_for(registers: Option<u16>) -> u16 {
    registers.map_or(CHUNKS, |n| n.div_ceil(REGISTERS_PER_CHUNK).clamp(1, CHUNKS))
}

fn id(site: &str, day: i64, chunk: u16, part: usize) -> String {
    format!("{site} {day} {chunk} {part}")
}

fn counter_doc(counter: Option<DayCount>) -> Bson {
    match counter {
        Some(c) => Bson::Document(doc! {"hits": c.hits, "visits": c.visits}),
        None => Bson::Null,
    }
}

fn counter_of(d: &Document) -> Option<DayCount> {
    d.get_document("counter").ok().map(DayCount::from_document)
}

/// One stored part, without its data.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    day: i64,
    chunk: u16,
    part: u32,
    parts: u32,
    build: i64,
    counter: Option<DayCount>,
    visits: u64,
}

impl Header {
    fn of(d: &Document) -> Option<Self> {
        let num = |k: &str| super::values::number(d.get(k));
        Some(Header {
            day: visit_days::day_of(d.get_datetime("day").ok()?.to_chrono()),
            chunk: u16::try_from(num("chunk")?).ok().filter(|c| *c < CHUNKS)?,
            part: u32::try_from(num("part")?).ok()?,
            parts: u32::try_from(num("parts")?).ok()?,
            build: num("build")?,
            counter: counter_of(d),
            visits: u64::try_from(num("visits")?).ok()?,
        })
    }
}

/// The days of a read that have a valid pack: per day, its build and the
/// visits it holds.
#[derive(Debug, Clone, Default)]
pub struct PackedDays {
    days: BTreeMap<i64, (i64, u64)>,
}

impl PackedDays {
    pub fn contains(&self, day: i64) -> bool {
        self.days.contains_key(&day)
    }

    /// Visits in the pack of `day`.
    pub fn visits(&self, day: i64) -> u64 {
        self.days.get(&day).map_or(0, |d| d.1)
    }

    pub fn days(&self) -> impl Iterator<Item = i64> + '_ {
        self.days.keys().copied()
    }

    pub fn len(&self) -> usize {
        self.days.len()
    }

    pub fn is_empty(&self) -> bool {
        self.days.is_empty()
    }
}

/// What the headers of one build of one day say.
struct BuildSeen {
    /// Per chunk: the parts seen, and the parts its documents say it has.
    parts: Vec<HashSet<u32>>,
    expected: Vec<Option<u32>>,
    visits: u64,
    /// Every part agrees with the counter and with the others.
    consistent: bool,
}

/// The builds of whole packs in `headers` whose counter is `counters`'
/// (or, for a day without a counter, a pack built without one).
fn valid(headers: &[Header], counters: &BTreeMap<i64, DayCount>) -> PackedDays {
    let mut seen: BTreeMap<(i64, i64), BuildSeen> = BTreeMap::new();
    for h in headers {
        let b = seen.entry((h.day, h.build)).or_insert_with(|| BuildSeen {
            parts: vec![HashSet::new(); CHUNKS as usize],
            expected: vec![None; CHUNKS as usize],
            visits: 0,
            consistent: true,
        });
        let chunk = usize::from(h.chunk);
        if h.counter != counters.get(&h.day).copied()
            || b.expected[chunk].is_some_and(|p| p != h.parts)
            || h.part >= h.parts
        {
            b.consistent = false;
        }
        b.expected[chunk] = Some(h.parts);
        if b.parts[chunk].insert(h.part) {
            b.visits += h.visits;
        }
    }
    let mut out = PackedDays::default();
    for ((day, build), b) in seen {
        let whole = b.consistent
            && b.parts
                .iter()
                .zip(&b.expected)
                .all(|(got, want)| want.is_some_and(|n| got.len() == n as usize));
        if whole && !out.contains(day) {
            out.days.insert(day, (build, b.visits));
        }
    }
    out
}

/// The days of `[first, end)` (day numbers) of `site` with a valid pack,
/// against the counters read just before (`visit_days::counts`).
pub async fn packed_days(
    store: &Store,
    site: &str,
    first: i64,
    end: i64,
    counters: &BTreeMap<i64, DayCount>,
) -> Result<PackedDays, mongodb::error::Error> {
    let mut cursor = collection(store)
        .find(doc! {
            "site": site,
            "day": {"$gte": bson::DateTime::from_chrono(day_start(first)),
                    "$lt": bson::DateTime::from_chrono(day_start(end))},
        })
        .projection(doc! {"data": 0})
        .max_time(store.report_max_time())
        .await?;
    let mut headers = Vec::new();
    while let Some(d) = cursor.try_next().await? {
        headers.extend(Header::of(&d));
    }
    Ok(valid(&headers, counters))
}

fn collection(store: &Store) -> mongodb::Collection<Document> {
    // The primary, like the counters: a pack is checked against a counter
    // read there.
    store.db().collection(COLLECTION)
}

/// One day's parts as a read finds them.
struct DayRead {
    /// Per chunk read: the parts its documents say it has, and found.
    expected: Vec<Option<u32>>,
    seen: Vec<u32>,
    visits: Vec<VisitRecord>,
    ok: bool,
}

/// What reading the packs of some days gave: the visits `want` may take,
/// and the days that could not be read from their packs (rebuilt or
/// removed since they were found valid, or damaged), to read from the
/// stored visits instead.
#[derive(Debug, Default)]
pub struct PackRead {
    pub visits: Vec<VisitRecord>,
    pub unread: Vec<i64>,
}

/// Reads the packed `days` (as [`packed_days`] found them) of `site`: the
/// chunks a sample of `want.registers` needs, the visits `want` may take.
pub async fn read(
    store: &Store,
    site: &str,
    packed: &PackedDays,
    days: &[i64],
    want: &Want<'_>,
) -> Result<PackRead, mongodb::error::Error> {
    let mut out = PackRead::default();
    if days.is_empty() {
        return Ok(out);
    }
    let chunks = chunks_for(want.registers);
    let list: Vec<bson::DateTime> = days
        .iter()
        .map(|d| bson::DateTime::from_chrono(day_start(*d)))
        .collect();
    let mut cursor = collection(store)
        .find(doc! {"site": site, "day": {"$in": list}, "chunk": {"$lt": i32::from(chunks)}})
        .max_time(store.report_max_time())
        .await?;
    let mut got: BTreeMap<i64, DayRead> = days
        .iter()
        .map(|d| {
            (
                *d,
                DayRead {
                    expected: vec![None; chunks as usize],
                    seen: vec![0; chunks as usize],
                    visits: Vec::new(),
                    ok: true,
                },
            )
        })
        .collect();
    while let Some(d) = cursor.try_next().await? {
        let Some(h) = Header::of(&d) else { continue };
        let Some(entry) = got.get_mut(&h.day) else {
            continue;
        };
        if packed.days.get(&h.day).map(|b| b.0) != Some(h.build) || !entry.ok {
            continue;
        }
        let chunk = usize::from(h.chunk);
        entry.expected[chunk] = Some(h.parts);
        entry.seen[chunk] += 1;
        let data = match d.get("data") {
            Some(Bson::Binary(b)) => b.bytes.as_slice(),
            _ => &[],
        };
        if let Err(e) = codec::decode(data, day_start(h.day), want, &mut entry.visits) {
            tracing::warn!(site, day = %day_start(h.day).date_naive(), chunk, error = %e,
                "a damaged visit pack: the day is read from the stored visits");
            entry.ok = false;
        }
    }
    for (day, d) in got {
        if !d.ok {
            // Damaged: removed, so the day is packed anew (a valid-looking
            // pack would otherwise be kept until its counter moves).
            if let Some((build, _)) = packed.days.get(&day) {
                let at = bson::DateTime::from_chrono(day_start(day));
                collection(store)
                    .delete_many(doc! {"site": site, "day": at, "build": build})
                    .await?;
            }
        }
        let whole = d.ok
            && d.expected
                .iter()
                .zip(&d.seen)
                .all(|(want, got)| want.is_some_and(|n| n == *got));
        if whole {
            out.visits.extend(d.visits);
        } else {
            out.unread.push(day);
        }
    }
    Ok(out)
}

/// What one build made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Built {
    pub visits: u64,
    pub documents: u64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
    #[error("the day's visits cannot be packed")]
    Encode(#[from] PackError),
}

/// Packs `site`'s day `day` (its number) from its stored visits: the
/// counter first, then the visits, so a batch applied in between makes the
/// pack look stale rather than wrong. Replaces any earlier pack of the day.
pub async fn build_day(store: &Store, site: &str, day: i64) -> Result<Built, BuildError> {
    let counter = visit_days::counts(store, site, day, day + 1)
        .await?
        .get(&day)
        .copied();
    let query = VisitQuery::new(site, day_start(day), day_start(day + 1));
    let mut by_chunk: Vec<Vec<VisitRecord>> = vec![Vec::new(); CHUNKS as usize];
    let records =
        visit_log::records_held(
            store,
            &query,
            false,
            |_| Ok::<(), mongodb::error::Error>(()),
        )
        .await?;
    for record in records {
        by_chunk[usize::from(chunk_of(record.register))].push(record);
    }
    let build = uuid::Uuid::new_v4().as_u64_pair().0 as i64;
    let at = bson::DateTime::from_chrono(day_start(day));
    let mut built = Built::default();
    let mut ids = Vec::new();
    for (chunk, visits) in by_chunk.iter().enumerate() {
        let refs: Vec<&VisitRecord> = visits.iter().collect();
        let parts = codec::encode(day_start(day), &refs, MAX_PART_BYTES)?;
        let n = parts.len();
        // Visits per part, for the read's sampling decision.
        let mut counts = Vec::with_capacity(n);
        for p in &parts {
            let mut none = Vec::new();
            let held = codec::decode(p, day_start(day), &Want::default(), &mut none)?;
            counts.push(held);
        }
        for (part, (data, held)) in parts.into_iter().zip(counts).enumerate() {
            let chunk = chunk as u16;
            let key = id(site, day, chunk, part);
            built.bytes += data.len() as u64;
            built.documents += 1;
            built.visits += held;
            let document = doc! {
                "_id": &key,
                "site": site,
                "day": at,
                "chunk": i32::from(chunk),
                "part": part as i32,
                "parts": n as i32,
                "build": build,
                "counter": counter_doc(counter),
                "visits": held as i64,
                "data": Binary { subtype: BinarySubtype::Generic, bytes: data },
            };
            collection(store)
                .replace_one(doc! {"_id": &key, "site": site, "day": at}, document)
                .upsert(true)
                .await?;
            ids.push(key);
        }
    }
    // The earlier build's parts this one did not replace.
    collection(store)
        .delete_many(doc! {"site": site, "day": at, "_id": {"$nin": ids}})
        .await?;
    Ok(built)
}

/// Packs the day unless a valid pack is there; whether it built one.
pub async fn ensure_day(store: &Store, site: &str, day: i64) -> Result<Option<Built>, BuildError> {
    let counters = visit_days::counts(store, site, day, day + 1).await?;
    if packed_days(store, site, day, day + 1, &counters)
        .await?
        .contains(day)
    {
        return Ok(None);
    }
    build_day(store, site, day).await.map(Some)
}

/// `TICKERTAPE_VISIT_RETENTION_DAYS` for the visits (`visit_log`), and
/// for their day counters and packs: a TTL on their `day` (the day's
/// midnight), so they go no later than the day's first visit. Returns
/// what was done.
pub async fn apply_retention(
    store: &Store,
    days: Option<u32>,
) -> Result<String, mongodb::error::Error> {
    let mut lines = vec![visit_log::apply_retention(store, days).await?];
    for collection in [visit_days::COLLECTION, COLLECTION] {
        lines.push(super::retention::ttl_on(store, collection, "day", "days", days).await?);
    }
    Ok(lines.join("; "))
}

/// Removes a site's packs (its purge).
pub async fn delete_site(store: &Store, site: &str) -> Result<u64, mongodb::error::Error> {
    Ok(collection(store)
        .delete_many(doc! {"site": site})
        .await?
        .deleted_count)
}

/// The packs the reads ask for, shared by the store's clones: the reads
/// queue the closed days they found without a valid pack, the app's
/// background task builds them. Without the task (the command line, a
/// test without the app) nothing is queued.
#[derive(Debug, Default)]
pub struct PackQueue {
    inner: Mutex<QueueInner>,
}

#[derive(Debug, Default)]
struct QueueInner {
    sender: Option<mpsc::UnboundedSender<(String, i64)>>,
    queued: HashSet<(String, i64)>,
    clock: Option<SharedClock>,
    /// How long after a day's end its last visits may still be applied
    /// (`TICKERTAPE_VISITS_WINDOW_MS`): a day is closed after that.
    window: Duration,
}

impl PackQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts taking requests: the receiver is the builder's.
    pub fn open(
        &self,
        clock: SharedClock,
        window: Duration,
    ) -> mpsc::UnboundedReceiver<(String, i64)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.lock();
        inner.sender = Some(tx);
        inner.clock = Some(clock);
        inner.window = window;
        inner.queued.clear();
        rx
    }

    /// The first day (number) that is not closed yet, by the app's clock;
    /// `None` without a builder.
    pub fn first_open_day(&self) -> Option<i64> {
        let inner = self.lock();
        let now = inner.clock.as_ref()?.now();
        let window = chrono::TimeDelta::from_std(inner.window).unwrap_or_default();
        // Day d is closed once its end, plus the window, has passed.
        Some(visit_days::day_of(now - window))
    }

    /// Queues `site`'s day `day` to be packed (once, while queued).
    pub fn request(&self, site: &str, day: i64) {
        let mut inner = self.lock();
        let key = (site.to_owned(), day);
        if inner.queued.contains(&key) {
            return;
        }
        let sent = inner
            .sender
            .as_ref()
            .is_some_and(|tx| tx.send(key.clone()).is_ok());
        if sent {
            inner.queued.insert(key);
        }
    }

    /// The builder is done with a request (built or failed): it may be
    /// queued again.
    pub fn done(&self, site: &str, day: i64) {
        self.lock().queued.remove(&(site.to_owned(), day));
    }

    pub fn clock_now(&self) -> Option<DateTime<Utc>> {
        self.lock().clock.as_ref().map(|c| c.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(day: i64, chunk: u16, part: u32, parts: u32, build: i64) -> Header {
        Header {
            day,
            chunk,
            part,
            parts,
            build,
            counter: Some(DayCount { hits: 5, visits: 2 }),
            visits: 1,
        }
    }

    fn whole(day: i64, build: i64) -> Vec<Header> {
        (0..CHUNKS).map(|c| header(day, c, 0, 1, build)).collect()
    }

    #[test]
    fn chunks_follow_the_registers_and_a_sample_reads_the_first() {
        assert_eq!(chunk_of(None), 0);
        assert_eq!(chunk_of(Some((0, 1))), 0);
        assert_eq!(chunk_of(Some((REGISTERS_PER_CHUNK - 1, 1))), 0);
        assert_eq!(chunk_of(Some((REGISTERS_PER_CHUNK, 1))), 1);
        assert_eq!(chunk_of(Some(((REGISTERS - 1) as u16, 1))), CHUNKS - 1);
        assert_eq!(chunks_for(None), CHUNKS);
        assert_eq!(chunks_for(Some(1)), 1);
        assert_eq!(chunks_for(Some(REGISTERS_PER_CHUNK)), 1);
        assert_eq!(chunks_for(Some(REGISTERS_PER_CHUNK + 1)), 2);
        assert_eq!(chunks_for(Some(REGISTERS as u16)), CHUNKS);
    }

    #[test]
    fn a_pack_is_valid_only_whole_and_at_its_days_counter() {
        let counters: BTreeMap<i64, DayCount> =
            [(7, DayCount { hits: 5, visits: 2 })].into_iter().collect();
        let ok = valid(&whole(7, 1), &counters);
        assert!(ok.contains(7));
        assert_eq!(ok.visits(7), u64::from(CHUNKS));
        // The counter moved on: stale.
        let moved: BTreeMap<i64, DayCount> =
            [(7, DayCount { hits: 6, visits: 2 })].into_iter().collect();
        assert!(!valid(&whole(7, 1), &moved).contains(7));
        // No counter now, a pack built with one (or the other way).
        assert!(!valid(&whole(7, 1), &BTreeMap::new()).contains(7));
        // A chunk missing, or a part of a split chunk missing.
        let mut missing = whole(7, 1);
        missing.pop();
        assert!(!valid(&missing, &counters).contains(7));
        let mut split = whole(7, 1);
        split[3] = header(7, 3, 0, 2, 1);
        assert!(!valid(&split, &counters).contains(7));
        split.push(header(7, 3, 1, 2, 1));
        assert!(valid(&split, &counters).contains(7));
        // Two builds' parts mixed: neither is whole, nothing is used.
        let mut mixed = whole(7, 1);
        mixed[5].build = 2;
        assert!(!valid(&mixed, &counters).contains(7));
        // A whole build beside a stray part of another: the whole one.
        let mut stray = whole(7, 1);
        stray.push(header(7, 9, 1, 2, 3));
        assert!(valid(&stray, &counters).contains(7));
    }
}

//! Page summaries: each page's views, entries, exits, visitors and time
//! on page and scroll depth counters over an aligned span of whole UTC
//! days, one document per site and span, so that
//! a long range's top pages read a few documents instead of one bucket per
//! page and day (a year of 10,000 pages is 3.65 million page-day buckets:
//! 13–21 s a dashboard).
//!
//! **Spans.** A span is 2^level UTC days starting at a day number (days
//! since 1970-01-01) that is a multiple of 2^level, for levels 0 to
//! [`MAX_LEVEL`]. Any run of whole days is covered by at most two spans per
//! level ([`Span::cover`]): a year by about 14, thirty days by about 8,
//! whatever the site's pages. A span of level L is the sum of its two
//! halves of level L − 1, and a span of level 0 is one day's page-day
//! buckets.
//!
//! **Exact without being written by the write path.** A summary carries
//! `total`, the site's views over its days when it was made (the site's
//! day totals, `site_views_day`), and is used only while that total is
//! still the site's. Every view reaches the site's totals in the same
//! transaction as its page buckets, and a visit's credits (entries, exits,
//! durations, visitor registers) ride on a view of that site and day, or,
//! for the exit and bounce a later view moves back to an earlier hour or
//! day, raise that site bucket's `takenBack` (compared with the total), so
//! an unchanged total means unchanged pages; a late view (a journal
//! replayed after an outage) changes it, and the summary is made again
//! from its halves.
//!
//! **Time on page and scroll depth.** A page's `timedViews` and
//! `timedSeconds` are credited to a view's slot when its visit's next view
//! arrives, like its exit: in the same unit that view moves the total, in
//! an earlier one it raises `takenBack` there. Engagements arrive without
//! a view, often after their view's day has ended, so the site's buckets
//! carry them too (`buckets::Increments::add_engagement`, in the same
//! transaction as the page's) and a summary also carries `engaged`, the
//! site's engaged views, scroll sum and engaged milliseconds over its span
//! when it was made: each only grows, so equal sums mean no engagement
//! since. Summaries stored before these counters (codec format 1, no
//! `engaged`) are not used, and made again.
//!
//! **Hours.** The parts of days a range covers (today, the last 24 hours,
//! the hours before a zone's midnight) are summarised the same way in
//! spans of 2^level whole UTC hours ([`Grain::Hour`], levels 0 to
//! [`MAX_HOUR_LEVEL`]) in their own collection, checked against the site's
//! hour totals and expiring with the hour buckets. A visitor id is a
//! day's, so hours do not add up to visitors: hour summaries carry none,
//! and a caller that shows visitors reads them for the pages it shows.
//!
//! **Compact.** The pages travel as one binary field (`data`): sorted by
//! name, each name stored as the length it shares with the previous one
//! and the rest, each figure a zigzag varint. A day of 10,000 pages is
//! about 190 KB with time on page and engagement (150 KB without), and
//! decoding it costs no BSON parsing per page.

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::sync::Mutex;

use super::schema::IndexSpec;
use super::Store;
use crate::domain::SiteId;

pub const COLLECTION: &str = "page_summaries";
pub const HOUR_COLLECTION: &str = "page_hour_summaries";

/// The longest span: 2^9 = 512 days, so a year is a handful of spans.
pub const MAX_LEVEL: u32 = 9;
/// The longest span of hours: 16, so a day's hours are a few spans.
pub const MAX_HOUR_LEVEL: u32 = 4;

/// What a span counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grain {
    Day,
    Hour,
}

impl Grain {
    pub fn seconds(self) -> i64 {
        match self {
            Grain::Day => 86_400,
            Grain::Hour => 3_600,
        }
    }

    pub fn max_level(self) -> u32 {
        match self {
            Grain::Day => MAX_LEVEL,
            Grain::Hour => MAX_HOUR_LEVEL,
        }
    }

    pub fn collection(self) -> &'static str {
        match self {
            Grain::Day => COLLECTION,
            Grain::Hour => HOUR_COLLECTION,
        }
    }

    /// The buckets a span of one unit is read from.
    pub fn resolution(self) -> super::Resolution {
        match self {
            Grain::Day => super::Resolution::Day,
            Grain::Hour => super::Resolution::Hour,
        }
    }

    /// The unit's number of a start (units since 1970-01-01 00:00 UTC).
    pub fn number(self, at: DateTime<Utc>) -> i64 {
        at.timestamp().div_euclid(self.seconds())
    }

    pub fn start(self, number: i64) -> DateTime<Utc> {
        number
            .checked_mul(self.seconds())
            .and_then(|secs| DateTime::from_timestamp(secs, 0))
            .unwrap_or_default()
    }
}

/// A summary larger than this is not stored (its halves are read
/// instead): well inside MongoDB's 16 MiB document limit.
const MAX_DATA_BYTES: usize = 12 << 20;

/// The codec's version, the first byte of `data`. Format 1 had no time on
/// page nor scroll depth: such a summary is made again.
const FORMAT: u8 = 2;

/// Summaries this close to their first day's expiry are not used: the TTL
/// monitor runs on the server's clock, which may be ahead of ours.
const EXPIRY_MARGIN: TimeDelta = TimeDelta::hours(1);

/// One page's figures over a span (or a range): views; visits that
/// entered on it; exits; visitors, the sum of each UTC day's estimate
/// (a visitor id is one day's, so days add up); and the sums its time on
/// page and scroll depth are made of (`buckets::VisitFields`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub views: i64,
    pub entries: i64,
    pub exits: i64,
    pub visitors: i64,
    /// Views followed by another view of their visit (`timedViews`).
    pub timed_views: i64,
    /// The seconds from each of those to the next (`timedSeconds`).
    pub timed_secs: i64,
    /// Views a tracker sent engagements for (`engagedViews`).
    pub engaged_views: i64,
    /// Their greatest scroll depths, in percent, added up (`scrollSum`).
    pub scroll_sum: i64,
    /// Their engaged milliseconds (`engagedMs`).
    pub engaged_ms: i64,
}

/// How many figures a page has in the codec.
const FIGURES: usize = 9;

impl PageCounts {
    /// Saturating: stored counts may be anything (a hand edit, an old
    /// import), and a background task must not panic on them.
    pub fn add(&mut self, other: &PageCounts) {
        let mut sum = self.figures();
        for (a, b) in sum.iter_mut().zip(other.figures()) {
            *a = a.saturating_add(b);
        }
        *self = Self::of_figures(sum);
    }

    /// In the codec's order.
    fn figures(&self) -> [i64; FIGURES] {
        [
            self.views,
            self.entries,
            self.exits,
            self.visitors,
            self.timed_views,
            self.timed_secs,
            self.engaged_views,
            self.scroll_sum,
            self.engaged_ms,
        ]
    }

    fn of_figures(f: [i64; FIGURES]) -> Self {
        PageCounts {
            views: f[0],
            entries: f[1],
            exits: f[2],
            visitors: f[3],
            timed_views: f[4],
            timed_secs: f[5],
            engaged_views: f[6],
            scroll_sum: f[7],
            engaged_ms: f[8],
        }
    }

    /// Whether it has any figure at all.
    pub fn is_empty(&self) -> bool {
        self.figures() == [0; FIGURES]
    }
}

/// 2^level units (UTC days, or hours) from unit number `index << level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub level: u32,
    pub index: i64,
}

/// The day number of a UTC midnight (days since 1970-01-01).
pub fn day_number(day: DateTime<Utc>) -> i64 {
    Grain::Day.number(day)
}

pub fn day_start(number: i64) -> DateTime<Utc> {
    Grain::Day.start(number)
}

impl Span {
    pub fn first(self) -> i64 {
        self.index << self.level
    }

    /// The unit after its last.
    pub fn end(self) -> i64 {
        (self.index + 1) << self.level
    }

    pub fn halves(self) -> Option<[Span; 2]> {
        (self.level > 0).then(|| {
            let level = self.level - 1;
            [
                Span {
                    level,
                    index: self.index * 2,
                },
                Span {
                    level,
                    index: self.index * 2 + 1,
                },
            ]
        })
    }

    /// The fewest aligned spans of days that cover days `[first, end)`.
    pub fn cover(first: i64, end: i64) -> Vec<Span> {
        Self::cover_in(Grain::Day, first, end)
    }

    /// The fewest aligned spans that cover units `[first, end)` exactly,
    /// oldest first: from each unit, the longest span that starts there
    /// and fits.
    pub fn cover_in(grain: Grain, first: i64, end: i64) -> Vec<Span> {
        let mut spans = Vec::new();
        let mut day = first;
        while day < end {
            let mut level = 0;
            while level < grain.max_level()
                && day.rem_euclid(1 << (level + 1)) == 0
                && day + (1 << (level + 1)) <= end
            {
                level += 1;
            }
            spans.push(Span {
                level,
                index: day >> level,
            });
            day += 1 << level;
        }
        spans
    }

    fn id(self, site: &str) -> String {
        format!("{site}/{}/{}", self.level, self.index)
    }
}

/// A site's pages over a span, sorted by page, and the site's total over
/// the span they add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub span: Span,
    pub total: i64,
    /// The site buckets' `takenBack` over the span when it was made: with
    /// `total`, what says the summary is still right (a deletion, or a
    /// visit's exit moved back into the span, changes it without views).
    pub taken_back: i64,
    /// The site buckets' engaged views, scroll sum and engaged
    /// milliseconds over the span when it was made: engagements change a
    /// view's page without a view, so `total` cannot tell (see the
    /// module's note).
    pub engaged: [i64; 3],
    pub pages: Vec<(String, PageCounts)>,
}

impl Summary {
    /// The summary of a span from its two halves' (each sorted by page).
    pub fn merged(span: Span, a: &Summary, b: &Summary) -> Summary {
        let (mut i, mut j) = (0, 0);
        let (x, y) = (&a.pages, &b.pages);
        let mut pages = Vec::with_capacity(x.len().max(y.len()));
        while i < x.len() || j < y.len() {
            let order = match (x.get(i), y.get(j)) {
                (Some(p), Some(q)) => p.0.cmp(&q.0),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    pages.push(x[i].clone());
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    pages.push(y[j].clone());
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let mut f = x[i].1;
                    f.add(&y[j].1);
                    pages.push((x[i].0.clone(), f));
                    i += 1;
                    j += 1;
                }
            }
        }
        Summary {
            span,
            total: a.total.saturating_add(b.total),
            taken_back: a.taken_back.saturating_add(b.taken_back),
            engaged: add3(a.engaged, b.engaged),
            pages,
        }
    }
}

/// Three sums added up, saturating.
pub fn add3(a: [i64; 3], b: [i64; 3]) -> [i64; 3] {
    [
        a[0].saturating_add(b[0]),
        a[1].saturating_add(b[1]),
        a[2].saturating_add(b[2]),
    ]
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a page summary's data is damaged or of another format")]
pub struct DecodeError;

/// `pages` (sorted by page) as the `data` field's bytes.
pub fn encode(pages: &[(String, PageCounts)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + pages.len() * 16);
    out.push(FORMAT);
    put_varint(&mut out, pages.len() as u64);
    let mut previous: &[u8] = &[];
    for (page, f) in pages {
        let name = page.as_bytes();
        let shared = name
            .iter()
            .zip(previous)
            .take_while(|(a, b)| a == b)
            .count();
        put_varint(&mut out, shared as u64);
        put_varint(&mut out, (name.len() - shared) as u64);
        out.extend_from_slice(&name[shared..]);
        for n in f.figures() {
            put_varint(&mut out, zigzag(n));
        }
        previous = name;
    }
    out
}

pub fn decode(data: &[u8]) -> Result<Vec<(String, PageCounts)>, DecodeError> {
    let mut r = Reader { data, at: 0 };
    if r.byte()? != FORMAT {
        return Err(DecodeError);
    }
    let count = r.varint()? as usize;
    // Each page takes at least eleven bytes: a count beyond that is damage.
    if count > data.len() {
        return Err(DecodeError);
    }
    let mut pages: Vec<(String, PageCounts)> = Vec::with_capacity(count);
    let mut name: Vec<u8> = Vec::new();
    for _ in 0..count {
        let shared = r.varint()? as usize;
        let rest = r.varint()? as usize;
        if shared > name.len() {
            return Err(DecodeError);
        }
        name.truncate(shared);
        name.extend_from_slice(r.bytes(rest)?);
        let mut f = [0_i64; FIGURES];
        for n in &mut f {
            *n = unzigzag(r.varint()?);
        }
        let page = std::str::from_utf8(&name).map_err(|_| DecodeError)?;
        pages.push((page.to_owned(), PageCounts::of_figures(f)));
    }
    if r.at != data.len() {
        return Err(DecodeError);
    }
    Ok(pages)
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.data.get(self.at).ok_or(DecodeError)?;
        self.at += 1;
        Ok(b)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).ok_or(DecodeError)?;
        let out = self.data.get(self.at..end).ok_or(DecodeError)?;
        self.at = end;
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n = 0_u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError)
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// `{site, timestamp}`: a site's summaries are one range (the purge, and
/// the shard key, see docs/architecture.md); reads go by `_id`.
pub fn indexes() -> Vec<IndexSpec> {
    [COLLECTION, HOUR_COLLECTION]
        .map(|c| IndexSpec::new(c, "site_timestamp", doc! {"site": 1, "timestamp": 1}))
        .into()
}

/// The stored summaries of `spans` of site `site` (its id), as stored:
/// whether each is still right is for the caller to check against the
/// site's totals. A summary that does not decode is left out (made again).
pub async fn read(
    store: &Store,
    grain: Grain,
    site: &str,
    spans: &[Span],
) -> Result<Vec<Summary>, mongodb::error::Error> {
    if spans.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = spans.iter().map(|s| s.id(site)).collect();
    let mut cursor = store
        .reports()
        .collection::<Document>(grain.collection())
        .find(doc! {"_id": {"$in": ids}})
        .projection(doc! {"_id": 0, "level": 1, "index": 1, "total": 1, "takenBack": 1, "engaged": 1, "data": 1})
        .max_time(store.report_max_time())
        .await?;
    let mut out = Vec::with_capacity(spans.len());
    while let Some(d) = cursor.try_next().await? {
        let (Ok(level), Ok(index), Ok(total), Ok(data)) = (
            d.get_i32("level"),
            d.get_i64("index"),
            d.get_i64("total"),
            d.get_binary_generic("data"),
        ) else {
            continue;
        };
        // Only the spans asked for: a stored level or index edited by hand
        // (a level past 63 would overflow the span's shifts) is made again.
        let span = Span {
            level: u32::try_from(level).unwrap_or(u32::MAX),
            index,
        };
        if !spans.contains(&span) {
            continue;
        }
        // Made before summaries carried time on page and scroll depth:
        // nothing says whether an engagement came since, so it is made
        // again (and replaced), quietly, as the backfill does for all.
        let engaged = stored_engaged(&d);
        let (Some(engaged), Some(&FORMAT)) = (engaged, data.first()) else {
            tracing::debug!(
                site,
                ?span,
                "a page summary of an earlier format: made again"
            );
            continue;
        };
        match decode(data) {
            Ok(pages) => out.push(Summary {
                span,
                total,
                // Summaries stored before the field: as if nothing was
                // taken back (one whose span was is made again).
                taken_back: d.get_i64("takenBack").unwrap_or(0),
                engaged,
                pages,
            }),
            Err(e) => tracing::warn!(site, ?span, "{e}: it will be made again"),
        }
    }
    Ok(out)
}

/// A stored summary's `engaged`: three integers, or `None` (made before
/// the field, or edited).
fn stored_engaged(d: &Document) -> Option<[i64; 3]> {
    let list = d.get_array("engaged").ok()?;
    let mut out = [0; 3];
    if list.len() != out.len() {
        return None;
    }
    for (n, v) in out.iter_mut().zip(list) {
        *n = v.as_i64()?;
    }
    Some(out)
}

/// Stores `summary` for `site` (replacing what was there). Two readers
/// may store the same span at once: each stores a summary that is right
/// for the total it carries, and a reader uses only the one whose total
/// is the site's.
///
/// A summary must not outlive its site's purge, which deletes the site's
/// document and then its summaries: the site is checked live before the
/// write and again after it, and a write that finds it gone takes its
/// summary back. Either the purge's delete comes after the write (and
/// removes it) or the second check comes after the purge's delete of the
/// site (and sees it gone). Returns whether the summary stays.
pub async fn write(
    store: &Store,
    grain: Grain,
    site: &SiteId,
    summary: &Summary,
) -> Result<bool, mongodb::error::Error> {
    let data = encode(&summary.pages);
    if data.len() > MAX_DATA_BYTES || !super::sites::is_live(store, site).await? {
        return Ok(false);
    }
    let key = site.to_string();
    let span = summary.span;
    let id = span.id(&key);
    let summaries = store.db().collection::<Document>(grain.collection());
    let units = match grain {
        Grain::Day => "days",
        Grain::Hour => "hours",
    };
    summaries
        .replace_one(
            doc! {"_id": &id},
            doc! {
                "_id": &id,
                "site": &key,
                "level": span.level as i32,
                "index": span.index,
                "timestamp": bson::DateTime::from_chrono(grain.start(span.first())),
                units: 1_i32 << span.level,
                "total": summary.total,
                "takenBack": summary.taken_back,
                "engaged": summary.engaged.to_vec(),
                "pages": summary.pages.len() as i64,
                "data": Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: data }),
            },
        )
        .upsert(true)
        .await?;
    if super::sites::is_live(store, site).await? {
        return Ok(true);
    }
    summaries.delete_one(doc! {"_id": &id}).await?;
    Ok(false)
}

/// Removes every summary of a site (its id), of days and of hours: a
/// deleted site's purge.
pub async fn delete_site(store: &Store, site: &str) -> Result<u64, mongodb::error::Error> {
    let mut removed = 0;
    for grain in [Grain::Day, Grain::Hour] {
        removed += store
            .db()
            .collection::<Document>(grain.collection())
            .delete_many(doc! {"site": site})
            .write_concern(store.commit_write_concern())
            .await?
            .deleted_count;
    }
    Ok(removed)
}

/// How long page-day and page-hour buckets are kept, which bounds what a
/// summary may stand for: a span whose first unit's buckets are gone (or
/// about to go) is not used, since its figures could no longer be read
/// from them. The summaries' own TTL indexes expire them with the buckets
/// (`retention::apply`).
#[derive(Debug, Default)]
pub struct SummaryRetention {
    /// Days' and hours' retention (`None`: kept for ever).
    kept: Mutex<[Option<TimeDelta>; 2]>,
}

impl SummaryRetention {
    /// Follows the day and hour buckets' retention.
    pub fn set(&self, days: Option<TimeDelta>, hours: Option<TimeDelta>) {
        *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = [days, hours];
    }

    fn kept(&self, grain: Grain) -> Option<TimeDelta> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())[grain as usize]
    }

    /// Whether the page buckets of the unit starting at `at` are past
    /// retention: the TTL index deletes a bucket once its `timestamp` is
    /// that old.
    pub fn expired(&self, grain: Grain, at: DateTime<Utc>) -> bool {
        self.kept(grain).is_some_and(|kept| at + kept <= Utc::now())
    }

    /// The first unit whose buckets are safely kept (none: every one).
    pub fn first_usable(&self, grain: Grain) -> Option<DateTime<Utc>> {
        self.kept(grain)
            .map(|kept| grain.resolution().ceil(Utc::now() - kept + EXPIRY_MARGIN))
    }
}

/// The last answers of the top pages' whole days, kept in memory by site,
/// days and the site's day totals over them: a dashboard asks twice (its
/// top pages, then the shown rows' visit figures), `pages.csv` likewise,
/// and a reader who pages through the list or reloads asks again. Equal
/// day totals mean equal pages (see the module's note), so a kept answer
/// is the buckets' own; today's pages, read from their buckets, are only
/// kept when they add up to today's total (read as of one state).
#[derive(Debug, Default)]
pub struct KeptAnswers {
    inner: Mutex<Vec<(AnswerKey, std::sync::Arc<Answer>)>>,
}

/// Site (its id), first and end day, and a fingerprint of the site's day
/// totals over them.
pub type AnswerKey = (String, i64, i64, u64);

pub type Answer = std::collections::HashMap<String, PageCounts>;

/// Most answers kept, and most page entries over all of them (about 100
/// bytes each): a few dashboards of sites of 100,000 pages.
const MAX_ANSWERS: usize = 16;
const MAX_ANSWER_PAGES: usize = 400_000;

impl KeptAnswers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(AnswerKey, std::sync::Arc<Answer>)>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: &AnswerKey) -> Option<std::sync::Arc<Answer>> {
        let mut kept = self.lock();
        let i = kept.iter().position(|(k, _)| k == key)?;
        // The most recently used last, so the oldest goes first.
        let entry = kept.remove(i);
        let answer = entry.1.clone();
        kept.push(entry);
        Some(answer)
    }

    pub fn keep(&self, key: AnswerKey, answer: std::sync::Arc<Answer>) {
        if answer.len() > MAX_ANSWER_PAGES {
            return;
        }
        let mut kept = self.lock();
        kept.retain(|(k, _)| k != &key);
        kept.push((key, answer));
        while kept.len() > MAX_ANSWERS
            || kept.iter().map(|(_, a)| a.len()).sum::<usize>() > MAX_ANSWER_PAGES
        {
            kept.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn figures(views: i64) -> PageCounts {
        PageCounts {
            views,
            entries: views / 2,
            exits: -1,
            visitors: views,
            timed_views: views / 3,
            timed_secs: views * 7,
            engaged_views: views / 4,
            scroll_sum: views * 10,
            engaged_ms: views * 1_000,
        }
    }

    #[test]
    fn a_span_of_level_l_holds_2_to_the_l_days_aligned() {
        let s = Span { level: 3, index: 5 };
        assert_eq!((s.first(), s.end()), (40, 48));
        let [a, b] = s.halves().unwrap();
        assert_eq!((a.first(), a.end(), b.end()), (40, 44, 48));
        assert!(Span { level: 0, index: 7 }.halves().is_none());
        let day = Utc.with_ymd_and_hms(2026, 11, 25, 0, 0, 0).unwrap();
        assert_eq!(day_start(day_number(day)), day);
    }

    #[test]
    fn a_year_is_covered_by_a_handful_of_spans() {
        let first = day_number(Utc.with_ymd_and_hms(2025, 11, 26, 0, 0, 0).unwrap());
        let spans = Span::cover(first, first + 365);
        assert!(spans.len() <= 2 * MAX_LEVEL as usize + 2, "{spans:?}");
        assert!(Span::cover(5, 5).is_empty());
        assert_eq!(Span::cover(8, 16), [Span { level: 3, index: 1 }]);
    }

    proptest! {
        #[test]
        fn a_cover_is_exact_aligned_and_short(first in -2000_i64..2000, len in 0_i64..3000) {
            let spans = Span::cover(first, first + len);
            let mut day = first;
            for s in &spans {
                prop_assert_eq!(s.first(), day);
                prop_assert!(s.level <= MAX_LEVEL);
                day = s.end();
            }
            prop_assert_eq!(day, first + len);
            // At most two per level, plus full spans of the top level.
            let top = len >> MAX_LEVEL;
            prop_assert!(spans.len() as i64 <= 2 * (MAX_LEVEL as i64 + 1) + top);
        }

        #[test]
        fn pages_round_trip(mut names in proptest::collection::btree_set("[a-z./é%]{0,40}", 0..50),
                            n in any::<i64>()) {
            names.insert(String::new());
            let pages: Vec<(String, PageCounts)> = names
                .into_iter()
                .enumerate()
                .map(|(i, p)| (p, PageCounts { views: n.wrapping_add(i as i64), entries: -n, exits: i as i64, visitors: n / 3, timed_views: n / 5, timed_secs: n.wrapping_mul(3), engaged_views: i as i64 + 1, scroll_sum: n / 7, engaged_ms: n.wrapping_sub(i as i64) }))
                .collect();
            prop_assert_eq!(decode(&encode(&pages)).unwrap(), pages);
        }

        #[test]
        fn damaged_data_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&data);
        }
    }

    #[test]
    fn a_truncated_or_extended_summary_is_refused() {
        let pages = vec![
            ("s.test/a".to_owned(), figures(3)),
            ("s.test/ab".to_owned(), figures(300)),
        ];
        let data = encode(&pages);
        for cut in 0..data.len() {
            assert_eq!(decode(&data[..cut]), Err(DecodeError), "cut at {cut}");
        }
        let mut longer = data.clone();
        longer.push(0);
        assert_eq!(decode(&longer), Err(DecodeError));
        let mut other = data;
        other[0] = FORMAT + 1;
        assert_eq!(decode(&other), Err(DecodeError));
        // Format 1 (views, entries, exits and visitors only) is refused,
        // however its bytes would read.
        other[0] = 1;
        assert_eq!(decode(&other), Err(DecodeError));
    }

    #[test]
    fn names_share_their_prefix_so_a_day_of_10_000_pages_is_small() {
        // A busy day's figures: every view timed but the visit's last,
        // a fifth of them engaged, as with a tracker that sends them.
        let day = |i: i64| {
            let views = 1 + i % 200;
            let engaged = views / 5;
            PageCounts {
                views,
                entries: views / 2,
                exits: views / 2,
                visitors: views,
                timed_views: views / 2,
                timed_secs: views / 2 * 45,
                engaged_views: engaged,
                scroll_sum: engaged * 60,
                engaged_ms: engaged * 30_000,
            }
        };
        let pages: Vec<(String, PageCounts)> = (0..10_000)
            .map(|i| (format!("example.com/blog/post-{i:05}"), day(i)))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        let data = encode(&pages);
        assert!(data.len() < 250_000, "{}", data.len());
        // Without time on page nor engagement, as most small sites.
        let plain: Vec<(String, PageCounts)> = pages
            .iter()
            .map(|(p, f)| {
                let f = PageCounts {
                    views: f.views,
                    entries: f.entries,
                    exits: f.exits,
                    visitors: f.visitors,
                    ..PageCounts::default()
                };
                (p.clone(), f)
            })
            .collect();
        assert!(encode(&plain).len() < 200_000, "{}", encode(&plain).len());
    }

    #[test]
    fn halves_merge_by_page() {
        let span = Span { level: 1, index: 0 };
        let [a, b] = span.halves().unwrap();
        let left = Summary {
            span: a,
            total: 5,
            taken_back: 1,
            engaged: [1, 50, 2_000],
            pages: vec![("s/a".into(), figures(2)), ("s/c".into(), figures(3))],
        };
        let right = Summary {
            span: b,
            total: 4,
            taken_back: 2,
            engaged: [2, 70, 9_000],
            pages: vec![("s/b".into(), figures(1)), ("s/c".into(), figures(3))],
        };
        let both = Summary::merged(span, &left, &right);
        assert_eq!(
            (both.total, both.taken_back, both.engaged),
            (9, 3, [3, 120, 11_000])
        );
        let mut c = figures(3);
        c.add(&figures(3));
        assert_eq!(
            (
                c.timed_views,
                c.timed_secs,
                c.engaged_views,
                c.scroll_sum,
                c.engaged_ms
            ),
            (2, 42, 0, 60, 6_000),
            "time on page and scroll depth add up too"
        );
        assert_eq!(
            both.pages,
            vec![
                ("s/a".to_owned(), figures(2)),
                ("s/b".to_owned(), figures(1)),
                ("s/c".to_owned(), c)
            ]
        );
    }

    #[test]
    fn kept_answers_are_found_by_their_totals_and_bounded() {
        let kept = KeptAnswers::default();
        let answer = |n: usize| {
            std::sync::Arc::new(
                (0..n)
                    .map(|i| (format!("s/{i}"), figures(1)))
                    .collect::<Answer>(),
            )
        };
        let key = |totals: u64| ("site".to_owned(), 1, 9, totals);
        kept.keep(key(5), answer(3));
        assert_eq!(kept.get(&key(5)).unwrap().len(), 3);
        assert!(kept.get(&key(6)).is_none(), "a late view moved the totals");
        for t in 0..MAX_ANSWERS as u64 {
            kept.keep(key(100 + t), answer(1));
        }
        assert!(kept.get(&key(5)).is_none(), "the oldest went first");
        kept.keep(key(7), answer(MAX_ANSWER_PAGES / 2 + 1));
        kept.keep(key(8), answer(MAX_ANSWER_PAGES / 2 + 1));
        assert!(kept.get(&key(7)).is_none(), "bounded by pages");
        assert!(kept.get(&key(8)).is_some());
        kept.keep(key(9), answer(MAX_ANSWER_PAGES + 1));
        assert!(kept.get(&key(9)).is_none(), "too large to keep");
    }

    #[test]
    fn units_past_their_buckets_retention_are_not_used() {
        let kept = SummaryRetention::default();
        assert!(kept.first_usable(Grain::Day).is_none());
        kept.set(Some(TimeDelta::days(5)), Some(TimeDelta::days(2)));
        let first = kept.first_usable(Grain::Day).unwrap();
        assert!(first > Utc::now() - TimeDelta::days(5));
        assert!(first <= Utc::now() - TimeDelta::days(3));
        assert!(kept.expired(Grain::Day, Utc::now() - TimeDelta::days(6)));
        assert!(!kept.expired(Grain::Day, Utc::now() - TimeDelta::days(4)));
        let first_hour = kept.first_usable(Grain::Hour).unwrap();
        assert!(first_hour > Utc::now() - TimeDelta::days(2));
        assert!(first_hour <= Utc::now() - TimeDelta::days(2) + TimeDelta::hours(2));
        assert!(kept.expired(Grain::Hour, Utc::now() - TimeDelta::days(3)));
    }

    #[test]
    fn hours_are_covered_by_spans_of_at_most_sixteen() {
        let first = Grain::Hour.number(Utc.with_ymd_and_hms(2026, 11, 25, 11, 0, 0).unwrap());
        let spans = Span::cover_in(Grain::Hour, first, first + 24);
        assert!(spans.iter().all(|s| s.level <= MAX_HOUR_LEVEL));
        assert!(
            spans.len() <= 2 * (MAX_HOUR_LEVEL as usize + 1),
            "{spans:?}"
        );
        assert_eq!(spans.first().unwrap().first(), first);
        assert_eq!(spans.last().unwrap().end(), first + 24);
        let at = Utc.with_ymd_and_hms(2026, 11, 25, 11, 0, 0).unwrap();
        assert_eq!(Grain::Hour.start(Grain::Hour.number(at)), at);
    }
}

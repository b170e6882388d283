//! The binary encoding of one part of a day pack: a chunk's visits (or a
//! share of them, when a chunk is split), self-contained.
//!
//! ```text
//! format    u8 = 3 (2: no revenue; 1: no properties either)
//! names     varint n, then n × (varint byte length, UTF-8 bytes)
//! visits    varint n, then n × visit, in the order of their start:
//!   start     varint ms after the previous visit's start (the first:
//!             after the day's midnight)
//!   register  varint index + 1 (0: none), then u8 rank when there is one
//!   views     zigzag varint
//!   duration  zigzag varint
//!   labels    u8 mask over LABELS (bit i: LABELS[i] present), then a
//!             varint name index per label present
//!   steps     varint byte length of what follows, then varint n and
//!             n × (varint offset << 1 | 1 for an event, varint name index),
//!             then (format 2) varint m and m × (varint step index,
//!             varint key's name index, varint value's name index): the
//!             steps' custom properties, then (format 3) varint r and
//!             r × (varint step index, varint currency's name index,
//!             zigzag varint amount in ten-thousandths): the events'
//!             revenue
//! ```
//!
//! Names (pages, events, label values) are stored once per part and
//! decoded once into `Arc<str>`, which every visit of the part shares. The
//! byte length of a visit's steps lets a visit whose labels do not pass
//! the read's conditions be skipped without reading its steps.
//!
//! Decoding never trusts the bytes: a truncated or damaged part, or one
//! naming a name it does not hold, is an error, never a panic, and no
//! allocation is larger than what the bytes could hold.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::domain::sketch::REGISTERS;
use crate::domain::visit::{Step, VisitRecord};
use crate::domain::{Amount, Currency, Dimension, Revenue};

pub const FORMAT: u8 = 3;
/// Parts written before revenue: still read, their events without any.
const FORMAT_NO_REVENUE: u8 = 2;
/// Parts written before properties: still read, their steps without any.
const FORMAT_NO_PROPERTIES: u8 = 1;

/// The visit-level dimensions a visit carries, in the mask's bit order.
pub const LABELS: [Dimension; 7] = [
    Dimension::Source,
    Dimension::Medium,
    Dimension::Campaign,
    Dimension::Browser,
    Dimension::Os,
    Dimension::Device,
    Dimension::Country,
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    #[error("the pack ends inside a value")]
    Truncated,
    #[error("unknown pack format {0}")]
    Format(u8),
    #[error("a varint longer than 64 bits")]
    Overflow,
    #[error("a name that is not UTF-8")]
    NotUtf8,
    #[error("name {0} is not in the pack's names")]
    NoSuchName(u64),
    #[error("a register outside the sketch, or a label of no dimension")]
    OutOfRange,
    #[error("a visit's steps do not fill their stated length")]
    StepsLength,
    #[error("bytes left after the last visit")]
    Trailing,
    #[error("a visit starts before its day, or visits are out of order")]
    Start,
}

/// What a read wants of a part: conditions every one of which a wanted
/// visit meets (the exact checks run after, on what comes back).
#[derive(Debug, Clone, Default)]
pub struct Want<'a> {
    /// Visits starting in `[from, to)`.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// A sample: only visitors whose register index is below this (visits
    /// without a register are left out, as the documents' `reg < n` does).
    pub registers: Option<u16>,
    /// A label's exact name.
    pub labels: Vec<(Dimension, &'a str)>,
    /// The entry page's exact path.
    pub entry: Option<&'a str>,
    /// Pages the visit viewed, events it sent.
    pub pages: Vec<&'a str>,
    pub events: Vec<&'a str>,
}

impl Want<'_> {
    pub fn all(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Want {
            from,
            to,
            ..Want::default()
        }
    }
}

struct Writer {
    names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u64>,
    body: Vec<u8>,
    visits: u64,
    last_ms: i64,
}

/// Encodes `visits` (all of one UTC day starting at `day`) into parts of
/// about `max_bytes` at most (a part closes after the visit that passes
/// it). A visit outside its day is refused.
pub fn encode(
    day: DateTime<Utc>,
    visits: &[&VisitRecord],
    max_bytes: usize,
) -> Result<Vec<Vec<u8>>, PackError> {
    let day_ms = day.timestamp_millis();
    let end_ms = day_ms + 86_400_000;
    let mut sorted: Vec<&VisitRecord> = visits.to_vec();
    // Fully ordered, so the same visits always make the same bytes.
    sorted.sort();
    let mut parts = Vec::new();
    let mut w = Writer::new(day_ms);
    for v in sorted {
        let ms = v.start.timestamp_millis();
        if ms < day_ms || ms >= end_ms {
            return Err(PackError::Start);
        }
        w.visit(v);
        if w.size() >= max_bytes {
            parts.push(std::mem::replace(&mut w, Writer::new(day_ms)).finish());
        }
    }
    if w.visits > 0 || parts.is_empty() {
        parts.push(w.finish());
    }
    Ok(parts)
}

impl Writer {
    fn new(day_ms: i64) -> Self {
        Writer {
            names: Vec::new(),
            index: HashMap::new(),
            body: Vec::new(),
            visits: 0,
            last_ms: day_ms,
        }
    }

    fn size(&self) -> usize {
        self.body.len() + self.names.iter().map(|n| n.len() + 2).sum::<usize>()
    }

    fn name(&mut self, name: &Arc<str>) -> u64 {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        let i = self.names.len() as u64;
        self.names.push(name.clone());
        self.index.insert(name.clone(), i);
        i
    }

    fn visit(&mut self, v: &VisitRecord) {
        let ms = v.start.timestamp_millis();
        put(&mut self.body, (ms - self.last_ms) as u64);
        self.last_ms = ms;
        match v.register {
            Some((index, rank)) => {
                put(&mut self.body, u64::from(index) + 1);
                self.body.push(rank);
            }
            None => put(&mut self.body, 0),
        }
        put(&mut self.body, zigzag(v.views));
        put(&mut self.body, zigzag(v.duration));
        let mut mask = 0u8;
        let mut ids = Vec::new();
        for (bit, d) in LABELS.iter().enumerate() {
            if let Some(name) = v.labels.get(d) {
                mask |= 1 << bit;
                ids.push(self.name(name));
            }
        }
        self.body.push(mask);
        for id in ids {
            put(&mut self.body, id);
        }
        let mut steps = Vec::new();
        put(&mut steps, v.steps.len() as u64);
        for s in &v.steps {
            let (offset, event, name) = match s {
                Step::View { offset, path } => (*offset, 0, path),
                Step::Event { offset, name } => (*offset, 1, name),
            };
            put(&mut steps, (u64::from(offset) << 1) | event);
            let id = self.name(name);
            put(&mut steps, id);
        }
        put(&mut steps, v.props.len() as u64);
        for (i, k, value) in &v.props {
            put(&mut steps, u64::from(*i));
            let (k, value) = (self.name(k), self.name(value));
            put(&mut steps, k);
            put(&mut steps, value);
        }
        put(&mut steps, v.revenue.len() as u64);
        for (i, revenue) in &v.revenue {
            put(&mut steps, u64::from(*i));
            let code: Arc<str> = Arc::from(revenue.currency.as_str());
            let code = self.name(&code);
            put(&mut steps, code);
            put(&mut steps, zigzag(revenue.amount.scaled()));
        }
        put(&mut self.body, steps.len() as u64);
        self.body.extend_from_slice(&steps);
        self.visits += 1;
    }

    fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size() + 16);
        out.push(FORMAT);
        put(&mut out, self.names.len() as u64);
        for n in &self.names {
            put(&mut out, n.len() as u64);
            out.extend_from_slice(n.as_bytes());
        }
        put(&mut out, self.visits);
        out.extend_from_slice(&self.body);
        out
    }
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, PackError> {
        let b = *self.bytes.get(self.at).ok_or(PackError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, PackError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(PackError::Overflow);
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(PackError::Overflow)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], PackError> {
        let n = usize::try_from(n).map_err(|_| PackError::Truncated)?;
        if n > self.left() {
            return Err(PackError::Truncated);
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }
}

fn name_at(names: &[Arc<str>], id: u64) -> Result<&Arc<str>, PackError> {
    usize::try_from(id)
        .ok()
        .and_then(|i| names.get(i))
        .ok_or(PackError::NoSuchName(id))
}

/// The name index of `wanted` in `names`, if the part holds it.
fn find(names: &[Arc<str>], wanted: &str) -> Option<u64> {
    names.iter().position(|n| &**n == wanted).map(|i| i as u64)
}

/// Decodes a part whose day starts at `day`, adding the visits `want`
/// may take to `out`. Counts the visits it holds (taken or not).
pub fn decode(
    data: &[u8],
    day: DateTime<Utc>,
    want: &Want<'_>,
    out: &mut Vec<VisitRecord>,
) -> Result<u64, PackError> {
    let mut r = Reader { bytes: data, at: 0 };
    let format = r.byte()?;
    if ![FORMAT, FORMAT_NO_REVENUE, FORMAT_NO_PROPERTIES].contains(&format) {
        return Err(PackError::Format(format));
    }
    let count = r.varint()?;
    // Each name takes at least its length byte.
    let mut names: Vec<Arc<str>> = Vec::with_capacity(bounded(count, r.left()));
    for _ in 0..count {
        let len = r.varint()?;
        let bytes = r.take(len)?;
        let name = std::str::from_utf8(bytes).map_err(|_| PackError::NotUtf8)?;
        names.push(Arc::from(name));
    }
    let visits = r.varint()?;
    // What the conditions are in this part's names: a name it does not
    // hold is a condition no visit of it meets.
    let mut labels = Vec::with_capacity(want.labels.len());
    let mut missing = false;
    for (d, name) in &want.labels {
        let bit = LABELS.iter().position(|l| l == d);
        match (bit, find(&names, name)) {
            (Some(bit), Some(id)) => labels.push((bit, id)),
            _ => missing = true,
        }
    }
    let mut find_all = |wanted: &[&str]| -> Vec<u64> {
        wanted
            .iter()
            .filter_map(|w| {
                let id = find(&names, w);
                missing |= id.is_none();
                id
            })
            .collect()
    };
    let pages = find_all(&want.pages);
    let events = find_all(&want.events);
    let entry = want.entry.map(|e| find_all(&[e]));
    if missing {
        // Nothing here passes; the bytes are still checked, so a damaged
        // part is found whatever the read asks.
        walk(&mut r, visits, &names, day)?;
        return Ok(visits);
    }
    let day_ms = day.timestamp_millis();
    let (from_ms, to_ms) = (want.from.timestamp_millis(), want.to.timestamp_millis());
    let mut last_ms = day_ms;
    for _ in 0..visits {
        let head = head(&mut r, &mut last_ms, &names)?;
        let steps_len = r.varint()?;
        let steps = r.take(steps_len)?;
        let sampled_out = match want.registers {
            Some(n) => head.register.is_none_or(|(i, _)| i >= n),
            None => false,
        };
        let passes = !sampled_out
            && (from_ms..to_ms).contains(&head.ms)
            && labels
                .iter()
                .all(|(bit, id)| head.label_ids[*bit] == Some(*id));
        if !passes {
            continue;
        }
        let mut s = Reader {
            bytes: steps,
            at: 0,
        };
        let n = s.varint()?;
        // Each step takes at least two bytes.
        let mut ids: Vec<(u64, u64)> = Vec::with_capacity(bounded(n, s.left() / 2));
        for _ in 0..n {
            ids.push((s.varint()?, s.varint()?));
        }
        let mut props = Vec::new();
        if format >= FORMAT_NO_REVENUE {
            let m = s.varint()?;
            // Each property takes at least three bytes.
            props.reserve(bounded(m, s.left() / 3));
            for _ in 0..m {
                let step = s.varint()?;
                if step >= n {
                    return Err(PackError::OutOfRange);
                }
                let key = name_at(&names, s.varint()?)?.clone();
                let value = name_at(&names, s.varint()?)?.clone();
                props.push((step as u32, key, value));
            }
        }
        let mut revenue = Vec::new();
        if format >= FORMAT {
            let m = s.varint()?;
            // Each revenue takes at least three bytes.
            revenue.reserve(bounded(m, s.left() / 3));
            for _ in 0..m {
                let step = s.varint()?;
                if step >= n {
                    return Err(PackError::OutOfRange);
                }
                // The code exactly as written, as the journal holds it.
                let code = name_at(&names, s.varint()?)?;
                let currency = Currency::parse(code)
                    .ok()
                    .filter(|c| c.as_str() == &**code)
                    .ok_or(PackError::OutOfRange)?;
                let amount =
                    Amount::from_scaled(unzigzag(s.varint()?)).ok_or(PackError::OutOfRange)?;
                revenue.push((step as u32, Revenue { currency, amount }));
            }
        }
        if s.left() != 0 {
            return Err(PackError::StepsLength);
        }
        let has = |event: u64, id: u64| ids.iter().any(|&(k, i)| k & 1 == event && i == id);
        let first_view = ids.iter().find(|(k, _)| k & 1 == 0).map(|&(_, i)| i);
        let keep = pages.iter().all(|&p| has(0, p))
            && events.iter().all(|&e| has(1, e))
            && entry
                .as_ref()
                .is_none_or(|e| e.iter().all(|&e| first_view == Some(e)));
        if !keep {
            continue;
        }
        let mut record_steps = Vec::with_capacity(ids.len());
        for (k, id) in ids {
            let offset = u32::try_from(k >> 1).map_err(|_| PackError::OutOfRange)?;
            let name = name_at(&names, id)?.clone();
            record_steps.push(if k & 1 == 1 {
                Step::Event { offset, name }
            } else {
                Step::View { offset, path: name }
            });
        }
        let mut labels = BTreeMap::new();
        for (bit, id) in head.label_ids.iter().enumerate() {
            if let Some(id) = id {
                labels.insert(LABELS[bit], name_at(&names, *id)?.clone());
            }
        }
        out.push(VisitRecord {
            start: DateTime::from_timestamp_millis(head.ms).ok_or(PackError::Start)?,
            labels,
            steps: record_steps,
            register: head.register,
            views: head.views,
            duration: head.duration,
            props,
            revenue,
        });
    }
    if r.left() != 0 {
        return Err(PackError::Trailing);
    }
    Ok(visits)
}

fn bounded(count: u64, left: usize) -> usize {
    usize::try_from(count).unwrap_or(usize::MAX).min(left)
}

struct Head {
    ms: i64,
    register: Option<(u16, u8)>,
    views: i64,
    duration: i64,
    label_ids: [Option<u64>; 7],
}

fn head(r: &mut Reader<'_>, last_ms: &mut i64, names: &[Arc<str>]) -> Result<Head, PackError> {
    let delta = r.varint()?;
    let ms = i64::try_from(delta)
        .ok()
        .and_then(|d| last_ms.checked_add(d))
        .ok_or(PackError::Start)?;
    *last_ms = ms;
    let register = match r.varint()? {
        0 => None,
        i => {
            let index = u16::try_from(i - 1).map_err(|_| PackError::OutOfRange)?;
            if usize::from(index) >= REGISTERS {
                return Err(PackError::OutOfRange);
            }
            Some((index, r.byte()?))
        }
    };
    let views = unzigzag(r.varint()?);
    let duration = unzigzag(r.varint()?);
    let mask = r.byte()?;
    if mask >> LABELS.len() != 0 {
        return Err(PackError::OutOfRange);
    }
    let mut label_ids = [None; 7];
    for (bit, slot) in label_ids.iter_mut().enumerate() {
        if mask & (1 << bit) != 0 {
            let id = r.varint()?;
            name_at(names, id)?;
            *slot = Some(id);
        }
    }
    Ok(Head {
        ms,
        register,
        views,
        duration,
        label_ids,
    })
}

/// Reads every visit without keeping any: checks the bytes.
fn walk(
    r: &mut Reader<'_>,
    visits: u64,
    names: &[Arc<str>],
    day: DateTime<Utc>,
) -> Result<(), PackError> {
    let mut last_ms = day.timestamp_millis();
    for _ in 0..visits {
        head(r, &mut last_ms, names)?;
        let len = r.varint()?;
        r.take(len)?;
    }
    if r.left() != 0 {
        return Err(PackError::Trailing);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, TimeZone};

    fn day() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 0, 0, 0).unwrap()
    }

    fn visit(i: u64) -> VisitRecord {
        let pages = ["/", "/pricing", "/blog/ünïcode", "/signup"];
        let mut labels = BTreeMap::new();
        if i % 3 != 0 {
            labels.insert(
                Dimension::Country,
                Arc::from(["DE", "US", "FR"][(i / 3 % 3) as usize]),
            );
        }
        if i % 2 == 0 {
            labels.insert(Dimension::Source, Arc::from("google.com"));
            labels.insert(Dimension::Browser, Arc::from("Firefox"));
        }
        let mut steps = Vec::new();
        for k in 0..(i % 5) {
            steps.push(Step::View {
                offset: (k * 40) as u32,
                path: Arc::from(pages[((i + k) % 4) as usize]),
            });
            if (i + k) % 4 == 1 {
                steps.push(Step::Event {
                    offset: (k * 40 + 3) as u32,
                    name: Arc::from("Signup"),
                });
            }
        }
        let mut v = VisitRecord::new(
            day() + TimeDelta::milliseconds((i * 7_919_993 % 86_400_000) as i64),
            labels,
            steps,
            (i % 7 != 0).then_some(((i * 977 % REGISTERS as u64) as u16, (i % 9) as u8 + 1)),
        );
        if i % 4 == 1 && !v.steps.is_empty() {
            let last = v.steps.len() as u32 - 1;
            v = v.with_props(vec![
                (
                    0,
                    Arc::from("author"),
                    Arc::from(["Jane", "Li"][(i % 2) as usize]),
                ),
                (last, Arc::from("plan"), Arc::from("pro")),
            ]);
        }
        if i % 5 == 2 && !v.steps.is_empty() {
            let currency = ["EUR", "JPY"][(i % 2) as usize];
            v = v.with_revenue(vec![(
                0,
                Revenue {
                    currency: Currency::parse(currency).unwrap(),
                    amount: Amount::from_scaled(i as i64 * 1_234 - 50_000).unwrap(),
                },
            )]);
        }
        // Views past the kept steps still count.
        if i % 11 == 0 {
            v.views += 2_001;
            v.duration = i64::MAX;
        }
        v
    }

    fn visits(n: u64) -> Vec<VisitRecord> {
        (0..n).map(visit).collect()
    }

    fn decode_all(parts: &[Vec<u8>], want: &Want<'_>) -> Vec<VisitRecord> {
        let mut out = Vec::new();
        for p in parts {
            decode(p, day(), want, &mut out).unwrap();
        }
        out.sort();
        out
    }

    fn everything() -> Want<'static> {
        Want::all(day(), day() + TimeDelta::days(1))
    }

    #[test]
    fn visits_come_back_as_they_went_in() {
        let mut vs = visits(500);
        let refs: Vec<&VisitRecord> = vs.iter().collect();
        let parts = encode(day(), &refs, usize::MAX).unwrap();
        assert_eq!(parts.len(), 1);
        vs.sort();
        assert_eq!(decode_all(&parts, &everything()), vs);
        // An empty chunk is one small part that decodes to nothing.
        let empty = encode(day(), &[], usize::MAX).unwrap();
        assert_eq!(empty, vec![vec![FORMAT, 0, 0]]);
        assert!(vs.iter().any(|v| !v.props.is_empty()));
        assert!(vs.iter().any(|v| !v.revenue.is_empty()));
        assert!(decode_all(&empty, &everything()).is_empty());
    }

    #[test]
    fn a_part_written_before_properties_is_still_read() {
        // format 1, no names, one visit: at midnight, no register, one
        // view, no duration, no label, no step.
        let part = [1, 0, 1, 0, 0, 2, 0, 0, 1, 0];
        let mut out = Vec::new();
        assert_eq!(decode(&part, day(), &everything(), &mut out), Ok(1));
        assert_eq!(out[0].views, 1);
        assert!(out[0].props.is_empty());
    }

    #[test]
    fn a_part_written_before_revenue_is_still_read() {
        // format 2, one name, one visit of one view with no property.
        let part = [2, 1, 1, b'/', 1, 0, 0, 2, 0, 0, 4, 1, 0, 0, 0];
        let mut out = Vec::new();
        assert_eq!(decode(&part, day(), &everything(), &mut out), Ok(1));
        assert_eq!(out[0].steps.len(), 1);
        assert!(out[0].revenue.is_empty());
    }

    #[test]
    fn revenue_in_no_currency_or_of_no_step_is_damage() {
        // format 3, names "/" and "ABC", one visit of one view, no
        // property, one revenue in "ABC" (not a currency) of step 0.
        let part = [
            3, 2, 1, b'/', 3, b'A', b'B', b'C', 1, 0, 0, 2, 0, 0, 7, 1, 0, 0, 0, 1, 0, 1, 2,
        ];
        let mut out = Vec::new();
        assert_eq!(
            decode(&part, day(), &everything(), &mut out),
            Err(PackError::OutOfRange)
        );
        // The same revenue in "/"'s place names step 1 of a visit of one.
        let part = [
            3, 2, 1, b'/', 3, b'E', b'U', b'R', 1, 0, 0, 2, 0, 0, 7, 1, 0, 0, 0, 1, 1, 1, 2,
        ];
        assert_eq!(
            decode(&part, day(), &everything(), &mut out),
            Err(PackError::OutOfRange)
        );
    }

    #[test]
    fn a_property_of_no_step_is_damage() {
        // format 2, one name, one visit of no step with a property of
        // step 0.
        let part = [2, 1, 1, b'k', 1, 0, 0, 2, 0, 0, 5, 0, 1, 0, 0, 0];
        let mut out = Vec::new();
        assert_eq!(
            decode(&part, day(), &everything(), &mut out),
            Err(PackError::OutOfRange)
        );
    }

    #[test]
    fn each_name_is_stored_once_per_part() {
        let vs: Vec<VisitRecord> = (0..1_000).map(|_| visit(4)).collect();
        let refs: Vec<&VisitRecord> = vs.iter().collect();
        let part = &encode(day(), &refs, usize::MAX).unwrap()[0];
        let times = part.windows(8).filter(|w| w == b"/pricing").count();
        assert_eq!(times, 1);
        // About 25 bytes a visit of four views and an event.
        assert!(part.len() < 1_000 * 32, "{} bytes", part.len());
        // The visits share the name rather than each holding a copy.
        let back = decode_all(std::slice::from_ref(part), &everything());
        let (a, b) = (&back[0].steps[0], &back[999].steps[0]);
        match (a, b) {
            (Step::View { path: a, .. }, Step::View { path: b, .. }) => {
                assert!(Arc::ptr_eq(a, b))
            }
            _ => panic!("views expected"),
        }
    }

    #[test]
    fn a_large_chunk_is_split_into_self_contained_parts() {
        let mut vs = visits(3_000);
        let refs: Vec<&VisitRecord> = vs.iter().collect();
        let parts = encode(day(), &refs, 4_096).unwrap();
        assert!(parts.len() > 3, "{} parts", parts.len());
        assert!(parts.iter().all(|p| p.len() < 4_096 + 200));
        vs.sort();
        assert_eq!(decode_all(&parts, &everything()), vs);
    }

    #[test]
    fn a_visit_outside_the_day_is_refused() {
        let mut v = visit(1);
        v.start = day() - TimeDelta::milliseconds(1);
        assert_eq!(encode(day(), &[&v], usize::MAX), Err(PackError::Start));
        v.start = day() + TimeDelta::days(1);
        assert_eq!(encode(day(), &[&v], usize::MAX), Err(PackError::Start));
    }

    #[test]
    fn the_read_s_conditions_keep_exactly_the_visits_that_meet_them() {
        let vs = visits(2_000);
        let refs: Vec<&VisitRecord> = vs.iter().collect();
        let parts = encode(day(), &refs, 20_000).unwrap();
        let check = |want: Want<'_>, keep: &dyn Fn(&VisitRecord) -> bool| {
            let mut expected: Vec<VisitRecord> = vs.iter().filter(|v| keep(v)).cloned().collect();
            expected.sort();
            assert!(!expected.is_empty());
            assert_eq!(decode_all(&parts, &want), expected);
        };
        let (from, to) = (day() + TimeDelta::hours(3), day() + TimeDelta::hours(20));
        check(Want::all(from, to), &|v| v.start >= from && v.start < to);
        check(
            Want {
                registers: Some(4_000),
                ..everything()
            },
            &|v| v.register.is_some_and(|(i, _)| i < 4_000),
        );
        check(
            Want {
                labels: vec![(Dimension::Country, "DE")],
                ..everything()
            },
            &|v| {
                v.labels
                    .get(&Dimension::Country)
                    .is_some_and(|c| &**c == "DE")
            },
        );
        check(
            Want {
                pages: vec!["/signup"],
                events: vec!["Signup"],
                ..everything()
            },
            &|v| {
                v.views().any(|p| p == "/signup")
                    && v.steps.iter().any(|s| s.event() == Some("Signup"))
            },
        );
        check(
            Want {
                entry: Some("/pricing"),
                ..everything()
            },
            &|v| v.entry() == Some("/pricing"),
        );
        // A name the pack does not hold: nothing.
        let want = Want {
            labels: vec![(Dimension::Country, "JP")],
            ..everything()
        };
        assert!(decode_all(&parts, &want).is_empty());
    }

    #[test]
    fn a_damaged_or_hostile_pack_is_an_error_never_a_panic() {
        let vs = visits(60);
        let refs: Vec<&VisitRecord> = vs.iter().collect();
        let part = encode(day(), &refs, usize::MAX).unwrap().remove(0);
        let mut out = Vec::new();
        // Every truncation.
        for end in 0..part.len() {
            assert!(
                decode(&part[..end], day(), &everything(), &mut out).is_err(),
                "{end}"
            );
        }
        // Every byte changed (errors or other visits, never a panic).
        for at in 0..part.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = part.clone();
                bad[at] ^= flip;
                let _ = decode(&bad, day(), &everything(), &mut out);
                let _ = decode(
                    &bad,
                    day(),
                    &Want {
                        labels: vec![(Dimension::Country, "ZZ")],
                        ..everything()
                    },
                    &mut out,
                );
            }
        }
        // Counts far beyond the bytes, names out of range, other formats.
        let huge = [FORMAT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(
            decode(&huge, day(), &everything(), &mut out),
            Err(PackError::Truncated)
        );
        let overflow = [
            FORMAT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        assert_eq!(
            decode(&overflow, day(), &everything(), &mut out),
            Err(PackError::Overflow)
        );
        // One visit of one step naming name 5 of none, no property and no
        // revenue.
        let unnamed = [FORMAT, 0, 1, 0, 0, 2, 0, 0, 5, 1, 0, 5, 0, 0];
        assert_eq!(
            decode(&unnamed, day(), &everything(), &mut out),
            Err(PackError::NoSuchName(5))
        );
        assert_eq!(
            decode(&[9], day(), &everything(), &mut out),
            Err(PackError::Format(9))
        );
        let mut trailing = encode(day(), &[], usize::MAX).unwrap().remove(0);
        trailing.push(0);
        assert_eq!(
            decode(&trailing, day(), &everything(), &mut out),
            Err(PackError::Trailing)
        );
    }
}

//! The open visits: what the pixel needs to know of a visitor's previous
//! hit to say what a new hit changes of its visit.
//!
//! A visit is a visitor's hits with gaps under [`GAP`] (30 minutes), within
//! one UTC day (the id changes with the day's salt). The table is bounded in
//! entries and in bytes; beyond either, the visits touched longest ago are
//! forgotten first (their next hit, if any, starts a new visit), and visits
//! idle for a whole gap are dropped as they can only end. A restart starts
//! with an empty table: visits open at that moment end there, and a visitor
//! who comes back within the gap starts a second visit (one more visit, one
//! more bounce when it has a single view).
//!
//! Each hit takes away only what it changes (`journal::Visit`), so every
//! report metric stays a sum the write-behind applies exactly once.

use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::domain::{Properties, Revenue};
use crate::journal::{Engagement, Visit, VisitPlace, MAX_ENGAGED_MS};
use crate::storage::visit_log::{step_bytes, MAX_STEPS, MAX_STEP_BYTES};

/// Longest gap between two hits of one visit.
pub const GAP: TimeDelta = TimeDelta::minutes(30);

#[derive(Debug, Clone, Copy)]
pub struct VisitsConfig {
    /// Most open visits kept.
    pub max_open: usize,
    /// Most bytes they may take (entries and their pages), about.
    pub max_bytes: usize,
}

impl Default for VisitsConfig {
    fn default() -> Self {
        Self {
            max_open: 200_000,
            max_bytes: 64 << 20,
        }
    }
}

#[derive(Debug)]
pub struct OpenVisits {
    config: VisitsConfig,
    inner: Mutex<Inner>,
    pub evicted: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    visits: HashMap<u64, Open>,
    /// Visitors in the order they were last touched, with the stamp of
    /// that touch; a stale pair (touched again since) is skipped.
    order: VecDeque<(u64, u64)>,
    next_stamp: u64,
    bytes: usize,
}

#[derive(Debug)]
struct Open {
    /// The visit's id in the visit store, drawn at random when it opens.
    id: u64,
    start: DateTime<Utc>,
    /// The next hit's step: hits (views and events) taken so far, or at
    /// least [`MAX_STEPS`] once a step did not fit in the visit store's
    /// byte budget ([`Open::next_step`]).
    steps: u32,
    /// What the steps kept in the visit store take ([`step_bytes`]).
    kept_bytes: usize,
    last_at: DateTime<Utc>,
    entry: Box<str>,
    previous: Box<str>,
    views: u32,
    stamp: u64,
    /// The visit's latest view (its page is `previous`) and the one
    /// before it, with what their engagements have sent so far: an
    /// engagement only adds what is new, and the view before the latest
    /// still takes one that arrives after the next view (a tracker sends
    /// the last engagement of a page as it sends the next page's view,
    /// and the two may cross).
    view: ViewEngagement,
    before: Option<(Box<str>, ViewEngagement)>,
}

/// What a view's engagements have sent so far.
#[derive(Debug, Clone, Copy)]
struct ViewEngagement {
    at: DateTime<Utc>,
    depth: u8,
    engaged: bool,
    engaged_ms: u32,
}

impl ViewEngagement {
    fn new(at: DateTime<Utc>) -> Self {
        Self {
            at,
            depth: 0,
            engaged: false,
            engaged_ms: 0,
        }
    }

    /// What an engagement at `now` saying the view's greatest scroll depth
    /// is `depth` (if said) and adding `ms` engaged milliseconds adds:
    /// the increase of the depth, whether it is the view's first, and the
    /// time, bounded so the view's engaged time never passes the time
    /// since it was made (a view is engaged at most while it is open).
    fn engage(&mut self, depth: Option<u8>, ms: u64, now: DateTime<Utc>) -> Engagement {
        let depth = depth.map_or(self.depth, |d| d.min(100));
        let added = depth.saturating_sub(self.depth);
        self.depth = self.depth.max(depth);
        let first = !self.engaged;
        self.engaged = true;
        let open_ms = u64::try_from((now - self.at).num_milliseconds()).unwrap_or(0);
        let room = open_ms
            .min(u64::from(MAX_ENGAGED_MS))
            .saturating_sub(u64::from(self.engaged_ms));
        let ms = ms.min(room) as u32;
        self.engaged_ms += ms;
        Engagement {
            view_at: self.at,
            depth_added: added,
            first,
            engaged_ms: ms,
        }
    }

    /// Takes back what `e` added (it was not journaled), so that what the
    /// view has sent stays the sum of what was journaled, and the view's
    /// next engagement sends it again.
    fn undo(&mut self, e: &Engagement) {
        self.depth = self.depth.saturating_sub(e.depth_added);
        self.engaged_ms = self.engaged_ms.saturating_sub(e.engaged_ms);
        if e.first {
            self.engaged = false;
        }
    }
}

impl Open {
    fn bytes(&self) -> usize {
        ENTRY_OVERHEAD
            + self.entry.len()
            + self.previous.len()
            + self.before.as_ref().map_or(0, |(page, _)| page.len())
    }

    /// The place of the visit's next step, which takes `bytes` in the
    /// visit store. The store keeps a visit's steps up to the first that
    /// passes its count or its bytes; from that one on every step is
    /// placed at or past [`MAX_STEPS`], where it is counted, not kept. Said
    /// here, where a visit's hits come in order, so a later small step
    /// never fills a gap the lanes' order would make arbitrary.
    fn next_step(&mut self, bytes: usize) -> u32 {
        if self.steps < MAX_STEPS {
            if self.kept_bytes + bytes <= MAX_STEP_BYTES {
                self.kept_bytes += bytes;
            } else {
                self.steps = MAX_STEPS;
            }
        }
        let step = self.steps;
        self.steps = self.steps.saturating_add(1);
        step
    }
}

/// What an entry costs besides its pages: the map's slot and the queue's.
const ENTRY_OVERHEAD: usize = 96;

/// Says which touch a hit made, so that a hit that could not be journaled
/// can be taken back ([`OpenVisits::forget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch {
    visitor: u64,
    stamp: u64,
}

impl OpenVisits {
    pub fn new(config: VisitsConfig) -> Self {
        Self {
            config,
            inner: Mutex::default(),
            evicted: AtomicU64::new(0),
        }
    }

    /// What a hit of `visitor` on `page` at `at` changes of its visit,
    /// recorded as the visit's latest hit.
    pub fn hit(
        &self,
        visitor: u64,
        page: &str,
        props: &Properties,
        at: DateTime<Utc>,
    ) -> (Visit, Touch) {
        let mut inner = self.inner.lock().expect("visits lock");
        inner.expire(at);
        inner.next_stamp += 1;
        let stamp = inner.next_stamp;
        let continued = match inner.visits.get_mut(&visitor) {
            Some(open) if at - open.last_at < GAP => {
                // The difference of the whole-second clocks: the writer finds
                // the previous hit's second from it (`buckets::VisitFields`).
                let gap = (at.timestamp() - open.last_at.timestamp()).clamp(0, i64::from(u32::MAX))
                    as u32;
                let visit = Visit {
                    visitor,
                    duration_secs: gap,
                    entry: Some(open.entry.to_string()),
                    previous: Some(open.previous.to_string()),
                    second_view: open.views == 1,
                    place: Some(VisitPlace {
                        id: open.id,
                        start: open.start,
                        step: open.next_step(step_bytes(page, None, props, None)),
                    }),
                };
                let before = open.bytes();
                open.views = open.views.saturating_add(1);
                open.last_at = open.last_at.max(at);
                let latest = std::mem::replace(&mut open.previous, page.into());
                open.before = Some((latest, open.view));
                open.view = ViewEngagement::new(at);
                open.stamp = stamp;
                let after = open.bytes();
                inner.bytes = inner.bytes - before + after;
                Some(visit)
            }
            _ => None,
        };
        let visit = match continued {
            Some(visit) => visit,
            None => {
                let id = new_visit_id();
                let open = Open {
                    id,
                    start: at,
                    steps: 1,
                    kept_bytes: step_bytes(page, None, props, None),
                    last_at: at,
                    entry: page.into(),
                    previous: page.into(),
                    views: 1,
                    stamp,
                    view: ViewEngagement::new(at),
                    before: None,
                };
                inner.bytes += open.bytes();
                if let Some(old) = inner.visits.insert(visitor, open) {
                    inner.bytes -= old.bytes();
                }
                Visit {
                    visitor,
                    place: Some(VisitPlace {
                        id,
                        start: at,
                        step: 0,
                    }),
                    ..Visit::default()
                }
            }
        };
        inner.order.push_back((visitor, stamp));
        let evicted = inner.bound(self.config);
        if evicted > 0 {
            self.evicted.fetch_add(evicted, Relaxed);
        }
        inner.compact();
        (visit, Touch { visitor, stamp })
    }

    /// The place of an event named `name` on `page` of `visitor` at `at`
    /// in its open visit, if it has one: the event takes the next step
    /// number and changes nothing else of the visit (it is not a view: no
    /// duration, no exit, and it does not keep the visit open). `None`: the
    /// event is outside any visit, and the visit store does not keep it.
    pub fn event(
        &self,
        visitor: u64,
        page: &str,
        name: &str,
        props: &Properties,
        revenue: Option<Revenue>,
        at: DateTime<Utc>,
    ) -> Option<VisitPlace> {
        let mut inner = self.inner.lock().expect("visits lock");
        let open = inner.visits.get_mut(&visitor)?;
        if at - open.last_at >= GAP {
            return None;
        }
        let step = open.next_step(step_bytes(page, Some(name), props, revenue));
        Some(VisitPlace {
            id: open.id,
            start: open.start,
            step,
        })
    }

    /// What an engagement with the view of `page` by `visitor` at `at`
    /// adds (`depth`: the view's greatest scroll depth so far, if the
    /// tracker said it; `ms`: engaged milliseconds since its last
    /// engagement), when that view is its open visit's latest or the one
    /// before. `None`: no view to credit (the visit ended, was forgotten
    /// at a bound or a restart, or the page is another's): not counted, as
    /// a depth or time without its view would be a mean of nothing. An
    /// engagement neither keeps the visit open nor takes a step in it.
    pub fn engage(
        &self,
        visitor: u64,
        page: &str,
        depth: Option<u8>,
        ms: u64,
        at: DateTime<Utc>,
    ) -> Option<Engagement> {
        let mut inner = self.inner.lock().expect("visits lock");
        let open = inner.visits.get_mut(&visitor)?;
        if at - open.last_at >= GAP {
            return None;
        }
        if *open.previous == *page {
            return Some(open.view.engage(depth, ms, at));
        }
        match &mut open.before {
            Some((before, view)) if **before == *page => Some(view.engage(depth, ms, at)),
            _ => None,
        }
    }

    /// Takes back an engagement of the view of `page` that was not
    /// journaled (see [`Self::engage`]), if that view is still open.
    pub fn disengage(&self, visitor: u64, page: &str, e: &Engagement) {
        let mut inner = self.inner.lock().expect("visits lock");
        let Some(open) = inner.visits.get_mut(&visitor) else {
            return;
        };
        if *open.previous == *page && open.view.at == e.view_at {
            open.view.undo(e);
        } else if let Some((before, view)) = &mut open.before {
            if **before == *page && view.at == e.view_at {
                view.undo(e);
            }
        }
    }

    /// Takes back a touch whose hit was not journaled: its visit is
    /// forgotten (unless a later hit touched it since), so no later hit
    /// credits a visit that was never counted.
    pub fn forget(&self, touch: Touch) {
        let mut inner = self.inner.lock().expect("visits lock");
        if inner
            .visits
            .get(&touch.visitor)
            .is_some_and(|o| o.stamp == touch.stamp)
        {
            if let Some(old) = inner.visits.remove(&touch.visitor) {
                inner.bytes -= old.bytes();
            }
        }
    }

    /// Open visits, and the bytes they take (about).
    pub fn size(&self) -> (usize, usize) {
        let inner = self.inner.lock().expect("visits lock");
        (inner.visits.len(), inner.bytes)
    }

    pub fn config(&self) -> VisitsConfig {
        self.config
    }
}

/// A random visit id: never derived from the visitor or the address. The
/// system's generator; without one (it cannot fail on Linux), a clock and
/// counter mix still tells visits apart.
fn new_visit_id() -> u64 {
    static FALLBACK: AtomicU64 = AtomicU64::new(0);
    getrandom::u64().unwrap_or_else(|_| {
        let nanos = Utc::now().timestamp_nanos_opt().unwrap_or(0) as u64;
        crate::domain::sketch::mix(nanos ^ FALLBACK.fetch_add(1, Relaxed).rotate_left(40))
    })
}

impl Inner {
    /// Drops the visits idle for a whole gap before `now`: they can only
    /// end. The queue is in touch order, so it stops at the first live one.
    fn expire(&mut self, now: DateTime<Utc>) {
        while let Some(&(visitor, stamp)) = self.order.front() {
            match self.visits.get(&visitor) {
                Some(open) if open.stamp == stamp => {
                    if now - open.last_at < GAP {
                        return;
                    }
                    let bytes = open.bytes();
                    self.visits.remove(&visitor);
                    self.bytes -= bytes;
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    /// Forgets the least recently touched visits while over a bound;
    /// returns how many.
    fn bound(&mut self, config: VisitsConfig) -> u64 {
        let mut evicted = 0;
        while self.visits.len() > config.max_open.max(1) || self.bytes > config.max_bytes {
            let Some((visitor, stamp)) = self.order.pop_front() else {
                break;
            };
            if self.visits.get(&visitor).is_some_and(|o| o.stamp == stamp) {
                if let Some(old) = self.visits.remove(&visitor) {
                    self.bytes -= old.bytes();
                }
                evicted += 1;
            }
        }
        evicted
    }

    /// Rebuilds the queue from the live entries once stale pairs
    /// outnumber them, so it stays within twice the table.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.visits.len() + 1024 {
            return;
        }
        let mut live: Vec<(u64, u64)> = self.visits.iter().map(|(&v, o)| (v, o.stamp)).collect();
        live.sort_unstable_by_key(|&(_, stamp)| stamp);
        self.order = live.into();
    }
}

#[cfg(test)]
mod tests {
    const P0: Properties = Properties::EMPTY;
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, h, m, 0).unwrap()
    }

    fn table() -> OpenVisits {
        OpenVisits::new(VisitsConfig::default())
    }

    #[test]
    fn a_first_hit_starts_a_visit_and_the_second_ends_its_bounce() {
        let t = table();
        let (first, _) = t.hit(1, "a.com/", &P0, at(10, 0));
        assert!(first.starts());
        assert_eq!(first.duration_secs, 0);
        let (second, _) = t.hit(1, "a.com/b", &P0, at(10, 2));
        assert_eq!(second.entry.as_deref(), Some("a.com/"));
        assert_eq!(second.previous.as_deref(), Some("a.com/"));
        assert!(second.second_view);
        assert_eq!(second.duration_secs, 120);
        let (third, _) = t.hit(1, "a.com/c", &P0, at(10, 3));
        assert_eq!(third.entry.as_deref(), Some("a.com/"));
        assert_eq!(third.previous.as_deref(), Some("a.com/b"));
        assert!(!third.second_view);
        assert_eq!(third.duration_secs, 60);
    }

    #[test]
    fn each_hit_takes_the_next_step_of_its_visit_and_a_new_visit_a_new_id() {
        let t = table();
        let (first, _) = t.hit(1, "a.com/", &P0, at(10, 0));
        let place = first.place.unwrap();
        assert_eq!((place.start, place.step), (at(10, 0), 0));
        let event = t.event(1, "a.com/", "Play", &P0, None, at(10, 1)).unwrap();
        assert_eq!((event.id, event.step), (place.id, 1));
        let (second, _) = t.hit(1, "a.com/b", &P0, at(10, 2));
        let second = second.place.unwrap();
        assert_eq!(
            (second.id, second.start, second.step),
            (place.id, at(10, 0), 2)
        );
        // Another visitor's visit has another id; an event outside any
        // visit has no place.
        let other = t.hit(2, "a.com/", &P0, at(10, 2)).0.place.unwrap();
        assert_ne!(other.id, place.id);
        assert_eq!(t.event(3, "a.com/", "Play", &P0, None, at(10, 2)), None);
        // An event does not keep a visit open.
        assert_eq!(t.event(1, "a.com/", "Play", &P0, None, at(10, 40)), None);
    }

    #[test]
    fn a_visit_keeps_steps_up_to_the_first_past_the_byte_budget() {
        let t = table();
        let long = format!("a.com/{}", "x".repeat(505));
        let fit = MAX_STEP_BYTES / step_bytes(&long, None, &P0, None);
        let mut kept = 0;
        let mut places = Vec::new();
        for i in 0..2 * fit {
            let (visit, _) = t.hit(1, &long, &P0, at(10, 0) + TimeDelta::seconds(i as i64));
            places.push(visit.place.unwrap().step);
        }
        for (i, &step) in places.iter().enumerate() {
            if step < MAX_STEPS {
                assert_eq!(step as usize, i, "kept steps are the visit's first");
                kept += 1;
            }
        }
        assert_eq!(kept, fit, "as many steps as the budget holds");
        assert!(kept * step_bytes(&long, None, &P0, None) <= MAX_STEP_BYTES);
        // Past the budget every step, a short one or an event too, is
        // placed past the cap: the store keeps no step after a gap.
        let (short, _) = t.hit(1, "a.com/", &P0, at(10, 20));
        assert!(short.place.unwrap().step > MAX_STEPS);
        let event = t.event(1, "a.com/", "Go", &P0, None, at(10, 21)).unwrap();
        assert!(event.step > MAX_STEPS);
        assert!(places[fit..].windows(2).all(|w| w[1] == w[0] + 1));
        // Short pages: the step count is the bound.
        let (first, _) = t.hit(2, "a.com/", &P0, at(10, 0));
        let mut last = first.place.unwrap().step;
        for i in 1..MAX_STEPS + 10 {
            let (v, _) = t.hit(
                2,
                "a.com/",
                &P0,
                at(10, 0) + TimeDelta::milliseconds(i as i64),
            );
            last = v.place.unwrap().step;
            assert_eq!(last, i, "places follow the hits");
        }
        assert_eq!(last, MAX_STEPS + 9);
        assert!(MAX_STEPS as usize * step_bytes("a.com/", None, &P0, None) <= MAX_STEP_BYTES);
    }

    #[test]
    fn an_engagement_adds_only_what_is_new_to_its_view() {
        let t = table();
        t.hit(1, "a.test/x", &P0, at(10, 0));
        let later = |m: u32, s: i64| at(10, m) + TimeDelta::seconds(s);
        let e = t
            .engage(1, "a.test/x", Some(40), 5_000, later(0, 10))
            .unwrap();
        assert_eq!(
            (e.view_at, e.depth_added, e.first, e.engaged_ms),
            (at(10, 0), 40, true, 5_000)
        );
        // Deeper: only the increase; shallower or unsaid: none; never
        // past 100, never more time than since the view.
        let e = t.engage(1, "a.test/x", Some(250), 0, later(0, 20)).unwrap();
        assert_eq!((e.depth_added, e.first), (60, false));
        let e = t
            .engage(1, "a.test/x", Some(10), 1_000_000, later(0, 30))
            .unwrap();
        assert_eq!((e.depth_added, e.engaged_ms), (0, 25_000));
        assert_eq!(
            t.engage(1, "a.test/x", None, 9, later(0, 30))
                .unwrap()
                .engaged_ms,
            0
        );
        // The next view: the one before still takes its late engagement,
        // the new one starts afresh; another page gets none.
        t.hit(1, "a.test/y", &P0, at(10, 2));
        let e = t.engage(1, "a.test/y", Some(30), 0, later(2, 1)).unwrap();
        assert_eq!((e.view_at, e.depth_added, e.first), (at(10, 2), 30, true));
        let e = t.engage(1, "a.test/x", Some(100), 0, later(2, 1)).unwrap();
        assert_eq!((e.view_at, e.depth_added, e.first), (at(10, 0), 0, false));
        assert_eq!(t.engage(1, "a.test/z", Some(50), 0, later(2, 1)), None);
        // No visit, or one over its gap: nothing to credit.
        assert_eq!(t.engage(2, "a.test/x", Some(50), 0, later(2, 1)), None);
        assert_eq!(t.engage(1, "a.test/y", Some(50), 0, at(10, 32)), None);
    }

    #[test]
    fn an_engagement_not_journaled_is_sent_again_by_the_next() {
        let t = table();
        t.hit(1, "a.test/x", &P0, at(10, 0));
        let later = |s: i64| at(10, 0) + TimeDelta::seconds(s);
        let lost = t.engage(1, "a.test/x", Some(40), 5_000, later(10)).unwrap();
        t.disengage(1, "a.test/x", &lost);
        // The next one is the view's first again, with the depth and the
        // time the lost one would have added.
        let e = t.engage(1, "a.test/x", Some(50), 1_000, later(20)).unwrap();
        assert_eq!((e.depth_added, e.first, e.engaged_ms), (50, true, 1_000));
        // A later loss after a journaled one takes back only its own part.
        let lost = t.engage(1, "a.test/x", Some(80), 2_000, later(30)).unwrap();
        assert_eq!((lost.depth_added, lost.first), (30, false));
        t.disengage(1, "a.test/x", &lost);
        let e = t.engage(1, "a.test/x", Some(80), 0, later(40)).unwrap();
        assert_eq!((e.depth_added, e.first), (30, false));
        // The view before the latest: the same.
        t.hit(1, "a.test/y", &P0, at(10, 2));
        let lost = t.engage(1, "a.test/x", Some(100), 0, at(10, 3)).unwrap();
        t.disengage(1, "a.test/x", &lost);
        let e = t.engage(1, "a.test/x", Some(100), 0, at(10, 3)).unwrap();
        assert_eq!(e.depth_added, 20);
        // Another view of the page (another time) is left alone.
        let stale = Engagement {
            view_at: at(9, 0),
            ..e
        };
        t.disengage(1, "a.test/x", &stale);
        let e = t.engage(1, "a.test/x", Some(100), 0, at(10, 3)).unwrap();
        assert_eq!(e.depth_added, 0);
    }

    #[test]
    fn a_gap_of_30_minutes_starts_another_visit() {
        let t = table();
        t.hit(1, "a.com/", &P0, at(10, 0));
        assert!(!t.hit(1, "a.com/", &P0, at(10, 29)).0.starts());
        assert!(t.hit(1, "a.com/", &P0, at(10, 59)).0.starts());
        // Another visitor is another visit.
        assert!(t.hit(2, "a.com/", &P0, at(10, 59)).0.starts());
    }

    #[test]
    fn idle_visits_are_dropped_and_the_table_keeps_its_bounds() {
        let t = OpenVisits::new(VisitsConfig {
            max_open: 100,
            max_bytes: 1 << 20,
        });
        for v in 0..1000 {
            t.hit(v, "a.com/", &P0, at(10, 0));
        }
        assert_eq!(t.size().0, 100);
        assert_eq!(t.evicted.load(Relaxed), 900);
        // The newest are kept: the 999th continues its visit.
        assert!(!t.hit(999, "a.com/", &P0, at(10, 1)).0.starts());
        assert!(t.hit(0, "a.com/", &P0, at(10, 1)).0.starts());
        // An hour later every visit has ended.
        t.hit(5000, "a.com/", &P0, at(11, 5));
        assert_eq!(t.size().0, 1);
        let by_bytes = OpenVisits::new(VisitsConfig {
            max_open: 1000,
            max_bytes: 10 * (ENTRY_OVERHEAD + 12),
        });
        for v in 0..100 {
            by_bytes.hit(v, "a.com/", &P0, at(10, 0));
        }
        let (open, bytes) = by_bytes.size();
        assert!(
            open <= 10 && bytes <= 10 * (ENTRY_OVERHEAD + 12),
            "{open} {bytes}"
        );
    }

    #[test]
    fn the_queue_stays_within_twice_the_table() {
        let t = OpenVisits::new(VisitsConfig {
            max_open: 10,
            max_bytes: 1 << 20,
        });
        for i in 0..100_000 {
            t.hit(
                i % 5,
                "a.com/",
                &P0,
                at(10, 0) + TimeDelta::milliseconds(i as i64),
            );
        }
        let inner = t.inner.lock().unwrap();
        assert!(inner.order.len() <= 2 * inner.visits.len() + 1025);
        assert_eq!(inner.visits.len(), 5);
    }

    #[test]
    fn a_forgotten_touch_leaves_no_visit_to_credit() {
        let t = table();
        let (_, touch) = t.hit(1, "a.com/", &P0, at(10, 0));
        t.forget(touch);
        assert!(t.hit(1, "a.com/b", &P0, at(10, 1)).0.starts());
        // A later touch is not undone by an older one.
        let (_, old) = t.hit(2, "a.com/", &P0, at(10, 0));
        t.hit(2, "a.com/b", &P0, at(10, 1));
        t.forget(old);
        assert!(!t.hit(2, "a.com/c", &P0, at(10, 2)).0.starts());
    }
}

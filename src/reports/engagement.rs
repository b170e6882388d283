//! Time on page and scroll depth, read back.
//!
//! Where a tracker sends engagements (Plausible's tracker, `tt.js`), each
//! view it engaged with is counted once (`engagedViews`), with the
//! increases of its greatest scroll depth (`scrollSum`) and its engaged
//! milliseconds (`engagedMs`), in the view's own slot: a range's scroll
//! depth is the mean of each engaged view's greatest depth, its engaged
//! time the mean of their engaged time. A page's time on page is that
//! engaged time when the range has engaged views, otherwise the time
//! until the next view below, and says which ([`TimeKind`]).
//!
//! A view followed by another view of its visit is *timed*: the seconds
//! until that next view are credited to its page where it was made
//! (`storage::buckets::VisitFields`, `timedViews` and `timedSeconds`), so a
//! page's time on page over a range is the mean over the range's timed
//! views of their time until the next view. A visit's last view has no
//! next view and is left out (as Plausible's time on page left it out
//! before its engagement events), rather than counted as 0 s, which would
//! pull each page's mean down by its exits.
//!
//! These are sums like the views, read from the page buckets over the
//! whole range (never the page summaries, which keep views, entries,
//! exits and visitors only): one read per level for a screen of pages,
//! whatever their number.

use chrono::{DateTime, Utc};
use std::collections::HashMap;

use super::period::{Period, Resolution};
use super::queries::{self, Slots};
use crate::domain::Page;
use crate::storage::buckets::VisitFields;
use crate::storage::Store;

pub const TIMED_VIEWS: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::TIMED_VIEWS]);
pub const TIMED_SECONDS: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::TIMED_SECONDS]);
pub const ENGAGED_VIEWS: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::ENGAGED_VIEWS]);
pub const SCROLL_SUM: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::SCROLL_SUM]);
pub const ENGAGED_MS: Slots = Slots::counter(VisitFields::COUNTERS[VisitFields::ENGAGED_MS]);

/// What a page's time on page is made of over a range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Engagement {
    /// Views followed by another view of their visit.
    pub timed_views: i64,
    /// The seconds from each of those views to the next, in all.
    pub timed_secs: i64,
    /// Views a tracker sent engagements for.
    pub engaged_views: i64,
    /// The sum of those views' greatest scroll depths, in percent.
    pub scroll_sum: i64,
    /// Their engaged milliseconds, in all.
    pub engaged_ms: i64,
}

/// Where a time on page comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeKind {
    /// The engaged time the tracker sent for each engaged view.
    Engaged,
    /// The gap from each view to its visit's next view.
    UntilNextView,
}

impl TimeKind {
    /// Its name in the API and the CSV files.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeKind::Engaged => "engaged",
            TimeKind::UntilNextView => "until_next_view",
        }
    }
}

impl Engagement {
    /// The mean time on page in seconds, and what it is measured by:
    /// the engaged time where the range has engaged views, else the time
    /// until the next view; `None` with neither.
    pub fn time_on_page(&self) -> Option<(f64, TimeKind)> {
        if self.engaged_views > 0 {
            let ms = self.engaged_ms.max(0) as f64 / self.engaged_views as f64;
            return Some((ms / 1000.0, TimeKind::Engaged));
        }
        (self.timed_views > 0).then(|| {
            (
                self.timed_secs.max(0) as f64 / self.timed_views as f64,
                TimeKind::UntilNextView,
            )
        })
    }

    /// The views the time on page is the mean of.
    pub fn time_views(&self) -> i64 {
        if self.engaged_views > 0 {
            self.engaged_views
        } else {
            self.timed_views
        }
    }

    /// The mean of each engaged view's greatest scroll depth, in percent;
    /// `None` without an engaged view.
    pub fn scroll_depth(&self) -> Option<f64> {
        (self.engaged_views > 0).then(|| {
            self.scroll_sum.clamp(0, 100 * self.engaged_views) as f64 / self.engaged_views as f64
        })
    }

    fn of(read: &[HashMap<String, i64>], page: &str) -> Self {
        let get = |i: usize| read.get(i).and_then(|m| m.get(page)).copied().unwrap_or(0);
        Engagement {
            timed_views: get(0),
            timed_secs: get(1),
            engaged_views: get(2),
            scroll_sum: get(3),
            engaged_ms: get(4),
        }
    }
}

const FIELDS: [Slots; 5] = [
    TIMED_VIEWS,
    TIMED_SECONDS,
    ENGAGED_VIEWS,
    SCROLL_SUM,
    ENGAGED_MS,
];

/// The range read as whole UTC hours (minutes only where an edge cuts
/// one), up to `now`'s day when it reaches past it (`visits::reach`).
fn read_period(period: &Period, now: DateTime<Utc>) -> Period {
    let to = super::visits::reach(period.to, now);
    Period::aligned_in(period.from, to, Resolution::Hour, chrono_tz::Tz::UTC)
}

/// The time on page of each page named (a screen of the pages panel),
/// in their order.
pub async fn of_pages(
    store: &Store,
    pages: &[&Page],
    period: &Period,
    now: DateTime<Utc>,
) -> Result<Vec<Engagement>, mongodb::error::Error> {
    let read = queries::counters_of_pages(store, pages, &read_period(period, now), &FIELDS).await?;
    Ok(pages
        .iter()
        .map(|p| Engagement::of(&read, p.as_str()))
        .collect())
}

/// The time on page of one page.
pub async fn of_page(
    store: &Store,
    page: &Page,
    period: &Period,
    now: DateTime<Utc>,
) -> Result<Engagement, mongodb::error::Error> {
    Ok(of_pages(store, &[page], period, now)
        .await?
        .pop()
        .unwrap_or_default())
}

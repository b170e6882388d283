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
//! These are sums like the views, and read like them. For a site whose
//! totals are complete, the whole UTC days and hours of a range come from
//! the page summaries (`storage::page_summaries`), the same ones its top
//! pages, entries and exits come from, so that every page's time on page
//! over a year (`pages.csv`, the API's pages) costs a few summaries, not
//! one bucket per page and day; only the minutes where a range's edge
//! cuts an hour, and hours past the hour buckets' retention, are read
//! from the named pages' buckets. The summaries stay exact although these
//! counters change a closed day without a view (an engagement arriving
//! after its view's day, a next view timing the one before it): see
//! `storage::page_summaries`. Other sites, and one page's line, read the
//! named pages' buckets over the whole range: one read per level,
//! whatever their number.

use chrono::{DateTime, Utc};
use std::collections::HashMap;

use super::period::{Period, Resolution};
use super::queries::{self, Scope, Slots};
use crate::domain::Page;
use crate::storage::buckets::VisitFields;
use crate::storage::page_summaries::PageCounts;
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

    /// Adds a page's counters from a summary.
    pub fn add_counts(&mut self, f: &PageCounts) {
        self.add(&Engagement {
            timed_views: f.timed_views,
            timed_secs: f.timed_secs,
            engaged_views: f.engaged_views,
            scroll_sum: f.scroll_sum,
            engaged_ms: f.engaged_ms,
        });
    }

    /// Saturating, as stored counts may be anything (a hand edit).
    pub fn add(&mut self, other: &Engagement) {
        self.timed_views = self.timed_views.saturating_add(other.timed_views);
        self.timed_secs = self.timed_secs.saturating_add(other.timed_secs);
        self.engaged_views = self.engaged_views.saturating_add(other.engaged_views);
        self.scroll_sum = self.scroll_sum.saturating_add(other.scroll_sum);
        self.engaged_ms = self.engaged_ms.saturating_add(other.engaged_ms);
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

/// The time on page of each page named (a screen of the pages panel, or
/// every row of `pages.csv`), in their order: from the page summaries for
/// a site whose totals are complete (`scope` is [`Scope::SiteTotals`]),
/// one merge of the range's summaries whatever the pages; else from the
/// named pages' buckets.
pub async fn of_pages(
    store: &Store,
    scope: &Scope<'_>,
    pages: &[&Page],
    period: &Period,
    now: DateTime<Utc>,
) -> Result<Vec<Engagement>, mongodb::error::Error> {
    let Scope::SiteTotals(site) = scope else {
        return of_buckets(store, pages, &read_period(period, now)).await;
    };
    let mut sums: HashMap<&str, Engagement> = pages
        .iter()
        .map(|p| (p.as_str(), Engagement::default()))
        .collect();
    if sums.is_empty() {
        return Ok(Vec::new());
    }
    // The same whole days and hours as every page's entries and exits
    // (`visits::entries_and_exits`, which the pages reports read first)
    // and the top pages, so that their answers are found kept: to the
    // range's end, not to the end of today as its buckets are read
    // (nothing is stored after now, so the sums are the same). Engagement
    // sums add up over hours, unlike visitors.
    let split = super::page_totals::summarised(store, site, (period.from, period.to)).await?;
    for whole in &split.answers {
        for (page, sum) in sums.iter_mut() {
            if let Some(f) = whole.get(*page) {
                sum.add_counts(f);
            }
        }
    }
    for (from, to) in split.rest {
        let edge = Period::aligned_in(from, to, Resolution::Hour, chrono_tz::Tz::UTC);
        for (page, e) in pages.iter().zip(of_buckets(store, pages, &edge).await?) {
            if let Some(sum) = sums.get_mut(page.as_str()) {
                sum.add(&e);
            }
        }
    }
    Ok(pages
        .iter()
        .map(|p| sums.get(p.as_str()).copied().unwrap_or_default())
        .collect())
}

/// The time on page of each page named over `period`, from their
/// buckets: a thousand pages per read (a read names each page).
async fn of_buckets(
    store: &Store,
    pages: &[&Page],
    period: &Period,
) -> Result<Vec<Engagement>, mongodb::error::Error> {
    let mut out = Vec::with_capacity(pages.len());
    for chunk in pages.chunks(1_000) {
        let read = queries::counters_of_pages(store, chunk, period, &FIELDS).await?;
        out.extend(chunk.iter().map(|p| Engagement::of(&read, p.as_str())));
    }
    Ok(out)
}

/// The time on page of one page, from its buckets (one page's are few:
/// its summaries would be a whole site's).
pub async fn of_page(
    store: &Store,
    page: &Page,
    period: &Period,
    now: DateTime<Utc>,
) -> Result<Engagement, mongodb::error::Error> {
    Ok(of_buckets(store, &[page], &read_period(period, now))
        .await?
        .pop()
        .unwrap_or_default())
}

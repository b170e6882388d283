//! Synthetic traffic for a demo site, written through the real write path:
//! a daily and weekly rhythm, and a long tail of pages with Zipf-like
//! popularity. Views come in visits, as the pixel makes them
//! (`ingest::visits`): each is a journal record carrying its [`Visit`] and
//! its place in the visit, with a source and the visitor's browser, OS,
//! device and country, so the appliers fill every store from it (minutes,
//! hours and days, breakdowns, the visit store and its day counters; the
//! page summaries and day packs follow from those) and filters and funnels
//! show the demo as they show real traffic. Deterministic for a given
//! seed.

use chrono::{DateTime, Datelike, TimeDelta, Timelike, Utc, Weekday};
use std::f64::consts::PI;
use tokio::time::Duration;

use crate::domain::{Dimension, DomainName, Labels, Page, PagePath, Properties, Resolution};
use crate::journal::{Accepted, AppendError, Appender, Record, SubmitError, Visit, VisitPlace};
use crate::storage::sites::{self, NewSite, Site};
use crate::storage::Store;

pub const DEFAULT_DOMAIN: &str = "demo.tickertape.test";

/// Views planned before they are journaled.
const DEMO_BATCH: usize = 2_000;

/// The demo's custom properties: its blog posts' authors, and the plan a
/// sign-up chose.
const DEMO_AUTHORS: [&str; 3] = ["Ada", "Grace", "Linus"];
const DEMO_PLANS: [&str; 3] = ["team", "pro", "pro"];

/// A sign-up's first payment, by its plan (`DEMO_PLANS`: team, pro,
/// pro), in the two currencies the demo's customers pay in, so the Goals
/// table shows revenue per currency.
fn demo_revenue(visitor: u64) -> Option<crate::domain::Revenue> {
    use crate::domain::{Amount, Currency, Revenue};
    let amount = ["49.00", "9.99", "9.99"][(visitor % 3) as usize];
    let currency = if visitor % 5 == 0 { "USD" } else { "EUR" };
    Some(Revenue {
        currency: Currency::parse(currency).expect("an ISO 4217 code"),
        amount: Amount::parse(amount).expect("a plain decimal"),
    })
}

fn demo_props(key: &str, value: &str) -> Properties {
    Properties::of(
        vec![(key.to_owned(), value.to_owned())],
        crate::domain::properties::Rules::Strict,
    )
    .expect("the demo's properties are within the rules")
}

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub domain: DomainName,
    pub days: u32,
    pub daily_views: u32,
    pub seed: u64,
}

#[derive(Debug)]
pub struct DemoReport {
    pub site: Site,
    pub hits: u64,
    pub skipped: bool,
}

/// xorshift64*: small, fast and reproducible; not for secrets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A Poisson draw (Knuth's method; λ here is small).
    fn poisson(&mut self, lambda: f64) -> u32 {
        let limit = (-lambda).exp();
        let (mut k, mut p) = (0, 1.0);
        loop {
            p *= self.unit();
            if p <= limit {
                return k;
            }
            k += 1;
        }
    }
}

pub fn demo_paths() -> Vec<String> {
    let mut paths: Vec<String> = [
        "/",
        "/pricing",
        "/blog/",
        "/docs/getting-started",
        "/docs/install",
        "/about",
        "/blog/bucket-pattern",
        "/blog/why-self-host",
        "/docs/configuration",
        "/contact",
        "/changelog",
        "/docs/api",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    paths.extend((1..=48).map(|i| format!("/blog/2026/post-{i}")));
    paths
}

/// Views per minute at this time: busiest around 14:00 UTC, quieter at
/// weekends.
fn rate(at: DateTime<Utc>, daily_views: f64) -> f64 {
    let hour = f64::from(at.hour()) + f64::from(at.minute()) / 60.0;
    let daily = 0.4 + 1.2 * ((2.0 * PI * (hour - 14.0) / 24.0).cos() + 1.0) / 2.0;
    let weekly = match at.weekday() {
        Weekday::Sat | Weekday::Sun => 0.7,
        _ => 1.12,
    };
    daily_views / 1440.0 * daily * weekly
}

/// Weights of a visit's number of views, 1 to 5: half the visits are
/// single-view bounces, as on a small blog.
const VISIT_VIEWS: [u64; 5] = [50, 20, 14, 9, 7];

/// Views per visit on average, so that visits started at `rate / this`
/// keep the views the demo has always written.
fn mean_visit_views() -> f64 {
    let total: u64 = VISIT_VIEWS.iter().sum();
    let views: u64 = (1..).zip(VISIT_VIEWS).map(|(n, w)| n * w).sum();
    views as f64 / total as f64
}

/// Share of a day's visits made by someone who already came that day (and
/// left more than [`VISIT_GAP`] ago): visitors are fewer than visits.
const RETURNING: f64 = 0.2;

/// The pixel's rule: a gap this long ends a visit.
const VISIT_GAP: TimeDelta = TimeDelta::minutes(30);

/// Seconds between two views of a visit: 10 s to 5 min, short ones more
/// often.
fn view_gap(rng: &mut Rng) -> TimeDelta {
    let u = rng.unit();
    TimeDelta::seconds(10 + (u * u * 290.0) as i64)
}

/// Pages drawn by Zipf weights 1/(rank+1), from a cumulative table.
struct Popularity {
    cumulative: Vec<f64>,
    sum: f64,
}

impl Popularity {
    fn new(pages: usize) -> Self {
        let mut cumulative = Vec::with_capacity(pages);
        let mut sum = 0.0;
        for rank in 0..pages {
            sum += 1.0 / (rank as f64 + 1.0);
            cumulative.push(sum);
        }
        Self { cumulative, sum }
    }

    fn pick(&self, rng: &mut Rng) -> usize {
        let pick = rng.unit() * self.sum;
        self.cumulative
            .partition_point(|c| *c < pick)
            .min(self.cumulative.len() - 1)
    }
}

/// One planned view: its page (an index into the demo's pages), when, and
/// what it changes of its visit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PlannedView {
    page: usize,
    at: DateTime<Utc>,
    visit: Visit,
}

/// The views of one visit by `visitor` starting at `start`, as the pixel
/// would describe them: the first starts the visit, the second undoes its
/// bounce, each later one adds the seconds since the one before and moves
/// the exit from the previous page to its own. Views at or after `limit`
/// are not made (the present, or the next UTC day, whose salt makes the
/// same person another visitor).
fn plan_visit(
    rng: &mut Rng,
    popularity: &Popularity,
    pages: &[Page],
    visitor: u64,
    start: DateTime<Utc>,
    limit: DateTime<Utc>,
) -> Vec<PlannedView> {
    let mut roll = rng.next() % VISIT_VIEWS.iter().sum::<u64>();
    let views = 1 + VISIT_VIEWS
        .iter()
        .position(|w| {
            let hit = roll < *w;
            roll = roll.saturating_sub(*w);
            hit
        })
        .unwrap_or(0);
    let entry = popularity.pick(rng);
    // Drawn at random, as the pixel draws a visit's id when it opens.
    let id = rng.next();
    let place = |step: u32| VisitPlace { id, start, step };
    let mut planned = vec![PlannedView {
        page: entry,
        at: start,
        visit: Visit {
            visitor,
            place: Some(place(0)),
            ..Visit::default()
        },
    }];
    let (mut previous, mut at) = (entry, start);
    for view in 1..views {
        let gap = view_gap(rng);
        if at + gap >= limit {
            break;
        }
        at += gap;
        // A reader seldom reloads the page they are on: the next one along.
        let mut page = popularity.pick(rng);
        if page == previous {
            page = (page + 1) % pages.len();
        }
        planned.push(PlannedView {
            page,
            at,
            visit: Visit {
                visitor,
                duration_secs: gap.num_seconds() as u32,
                entry: Some(pages[entry].as_str().to_owned()),
                previous: Some(pages[previous].as_str().to_owned()),
                second_view: view == 1,
                place: Some(place(view as u32)),
            },
        });
        previous = page;
    }
    planned
}

/// The visitors of one UTC day and when each was last seen, to let some
/// come back.
#[derive(Default)]
struct DayVisitors {
    day: Option<DateTime<Utc>>,
    seen: Vec<(u64, DateTime<Utc>)>,
}

impl DayVisitors {
    /// Who starts a visit at `start`: now and then someone seen earlier
    /// that day whose last visit is over, otherwise a new visitor. Returns
    /// the index into `seen`, for [`Self::saw`].
    fn visitor_at(&mut self, rng: &mut Rng, start: DateTime<Utc>) -> usize {
        let day = Resolution::Day.floor(start);
        if self.day != Some(day) {
            self.day = Some(day);
            self.seen.clear();
        }
        if !self.seen.is_empty() && rng.unit() < RETURNING {
            let i = (rng.next() % self.seen.len() as u64) as usize;
            if start - self.seen[i].1 >= VISIT_GAP {
                return i;
            }
        }
        self.seen.push((rng.next(), start));
        self.seen.len() - 1
    }

    fn id(&self, i: usize) -> u64 {
        self.seen[i].0
    }

    fn saw(&mut self, i: usize, last: DateTime<Utc>) {
        self.seen[i].1 = last;
    }
}

/// How far [`generate_reporting`] is: the day it has journaled, of how
/// many, and the views so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub day: u32,
    pub days: u32,
    pub hits: u64,
}

/// Creates the demo site and journals `days` days of its traffic up to
/// `now` into `journal`, whose appliers then write it like any backlog.
/// With `if_empty`, does nothing when the demo site already exists: its
/// traffic may still be waiting in a journal, and would be counted twice.
pub async fn generate(
    store: &Store,
    journal: &Appender,
    options: &DemoOptions,
    now: DateTime<Utc>,
    if_empty: bool,
) -> anyhow::Result<DemoReport> {
    generate_reporting(store, journal, options, now, if_empty, &mut |_| {}).await
}

/// The demo site's goals (its sign-up event and its pricing page) and one
/// funnel from the home page to a sign-up, so the goals panel and the
/// funnels page of a fresh `make run` show figures, as the breakdowns do.
async fn add_goals_and_funnel(
    store: &Store,
    site: &Site,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    use crate::domain::{FunnelSteps, Goal};
    for (kind, name) in [("event", "Signup"), ("page", "/pricing")] {
        sites::add_goal(store, &site.id, &Goal::parse(kind, name)?).await?;
    }
    let steps = FunnelSteps::parse(["/", "/pricing", "event:Signup"])?;
    crate::storage::funnels::add(store, &site.id, "Home to sign-up", &steps, now).await?;
    Ok(())
}

/// [`generate`], calling `progress` after each day is journaled.
pub async fn generate_reporting(
    store: &Store,
    journal: &Appender,
    options: &DemoOptions,
    now: DateTime<Utc>,
    if_empty: bool,
    progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<DemoReport> {
    let existing = sites::list(store)
        .await?
        .into_iter()
        .find(|s| s.domain == options.domain);
    let site = match existing {
        Some(site) if if_empty => {
            return Ok(DemoReport {
                site,
                hits: 0,
                skipped: true,
            })
        }
        Some(site) => site,
        None => {
            let new = NewSite {
                domain: options.domain.clone(),
                aliases: vec![],
                name: Some("Demo site".into()),
                owners: vec![],
                time_zone: crate::domain::TimeZone::UTC,
            };
            let site = sites::insert(store, new, now).await?;
            add_goals_and_funnel(store, &site, now).await?;
            sites::list(store)
                .await?
                .into_iter()
                .find(|s| s.id == site.id)
                .unwrap_or(site)
        }
    };
    let pages: Vec<Page> = demo_paths()
        .iter()
        .map(|p| {
            Page::new(
                &site.domain,
                &PagePath::parse(p).expect("demo paths are valid"),
            )
        })
        .collect();
    let popularity = Popularity::new(pages.len());
    let mut rng = Rng(options.seed.max(1));
    // Where the demo's visits come from: a third typed the address, the
    // rest followed links (weights roughly as for a small blog). Every
    // view of a visit is given its entry's source.
    const SOURCES: [(&str, u64); 7] = [
        ("direct", 34),
        ("google.com", 30),
        ("duckduckgo.com", 9),
        ("news.ycombinator.com", 8),
        ("newsletter", 8),
        ("mastodon.social", 6),
        ("github.com", 5),
    ];
    let source_total: u64 = SOURCES.iter().map(|(_, w)| w).sum();
    // Who the visitors are (browser, system, device, country), and one
    // visit in twenty signs up on its last page: the breakdown panels and
    // the goals of a fresh `make run` have something to show.
    let profiles: Vec<(Labels, u64)> = DEMO_PROFILES
        .iter()
        .map(|&(browser, os, device, country, w)| {
            let labels = Labels::default()
                .with(Dimension::Browser, browser)
                .with(Dimension::Os, os)
                .with(Dimension::Device, device)
                .with(Dimension::Country, country);
            (labels, w)
        })
        .collect();
    let profile_total: u64 = profiles.iter().map(|(_, w)| w).sum();
    let newsletter = |labels: &Labels| {
        labels
            .clone()
            .with(Dimension::Medium, "email")
            .with(Dimension::Campaign, "november")
    };
    let signup = Labels::default().with(Dimension::Event, "Signup");
    // A visit's views are planned when it starts, later ones minutes
    // ahead: every figure is a sum, so the order they are written in does
    // not matter.
    let mut batch: Vec<(PlannedView, usize, Labels, bool)> = Vec::with_capacity(DEMO_BATCH + 100);
    let mut visitors = DayVisitors::default();
    let mut journaling = Journaling::new(journal);
    let mut hits = 0u64;
    let per_visit = mean_visit_views();
    let end = Resolution::Minute.floor(now);
    let days = options.days.max(1);
    let mut minute = Resolution::Day.floor(now) - TimeDelta::days(i64::from(days) - 1);
    let mut day = 0;
    while minute <= end {
        let n = rng.poisson(rate(minute, f64::from(options.daily_views)) / per_visit);
        let last_second = if minute == end { now.second() } else { 59 };
        let limit = (Resolution::Day.floor(minute) + TimeDelta::days(1)).min(now);
        for _ in 0..n {
            let second = (rng.next() % (u64::from(last_second) + 1)) as i64;
            let start = minute + TimeDelta::seconds(second);
            let mut roll = rng.next() % source_total;
            let source = SOURCES
                .iter()
                .position(|(_, w)| {
                    let hit = roll < *w;
                    roll = roll.saturating_sub(*w);
                    hit
                })
                .unwrap_or(0);
            let who = visitors.visitor_at(&mut rng, start);
            let visit = plan_visit(
                &mut rng,
                &popularity,
                &pages,
                visitors.id(who),
                start,
                limit,
            );
            visitors.saw(who, visit.last().map_or(start, |v| v.at));
            let mut roll = rng.next() % profile_total;
            let (labels, _) = profiles
                .iter()
                .find(|(_, w)| {
                    let hit = roll < *w;
                    roll = roll.saturating_sub(*w);
                    hit
                })
                .unwrap_or(&profiles[0]);
            let labels = match SOURCES[source].0 {
                "newsletter" => newsletter(labels),
                _ => labels.clone(),
            };
            let signs_up = rng.next() % 20 == 0;
            let last = visit.len().saturating_sub(1);
            batch.extend(
                visit
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (v, source, labels.clone(), signs_up && i == last)),
            );
        }
        if batch.len() >= DEMO_BATCH || (minute == end && !batch.is_empty()) {
            // A month of sparse traffic is one bucket per few views: given
            // all at once, the appliers' batches would each span thousands
            // of buckets. Kept a few batches ahead of them instead, as the
            // pixel's hits would be.
            journaling.wait_for_appliers(2 * DEMO_BATCH as u64).await;
            hits += batch.len() as u64;
            // In time order, as the pixel would have journaled them.
            batch.sort_by_key(|(v, ..)| v.at);
            for (v, s, labels, signs_up) in batch.drain(..) {
                let page = pages[v.page].as_str().to_owned();
                // The sign-up is the visit's next step, at its last view.
                let event = signs_up.then(|| Record {
                    page: page.clone(),
                    at: v.at,
                    source: None,
                    visit: Some(Visit {
                        visitor: v.visit.visitor,
                        place: v.visit.place.map(|p| VisitPlace {
                            step: p.step + 1,
                            ..p
                        }),
                        ..Visit::default()
                    }),
                    labels: signup.clone(),
                    props: demo_props("plan", DEMO_PLANS[(v.visit.visitor % 3) as usize]),
                    revenue: demo_revenue(v.visit.visitor),
                    engagement: None,
                });
                // A blog post names its author, as a `data-prop-author`
                // on its script tag would.
                let props = match page.split_once("/blog/") {
                    Some((_, post)) if !post.is_empty() => {
                        demo_props("author", DEMO_AUTHORS[post.len() % DEMO_AUTHORS.len()])
                    }
                    _ => Properties::EMPTY,
                };
                let view = Record {
                    page,
                    at: v.at,
                    source: Some(SOURCES[s].0.to_owned()),
                    visit: Some(v.visit),
                    labels,
                    props,
                    revenue: None,
                    engagement: None,
                };
                journaling.submit(view).await?;
                if let Some(event) = event {
                    journaling.submit(event).await?;
                }
            }
        }
        minute += TimeDelta::minutes(1);
        // Views written so far: those of the day's last batch, still
        // gathering, count in the next line.
        if (minute.hour() == 0 && minute.minute() == 0) || minute > end {
            day += 1;
            progress(Progress { day, days, hits });
        }
    }
    journaling.committed().await?;
    Ok(DemoReport {
        site,
        hits,
        skipped: false,
    })
}

/// Journals records, waiting while the writers' queues are full. A lane
/// commits in order, so its last answer says every record before it is in
/// the journal: [`Journaling::committed`] waits for those.
struct Journaling<'a> {
    journal: &'a Appender,
    last: std::collections::HashMap<usize, tokio::sync::oneshot::Receiver<Result<(), AppendError>>>,
}

impl<'a> Journaling<'a> {
    fn new(journal: &'a Appender) -> Self {
        Self {
            journal,
            last: Default::default(),
        }
    }

    async fn submit(&mut self, record: Record) -> anyhow::Result<()> {
        let lane = self.journal.lane_of(&record.page);
        loop {
            match self.journal.submit(record.clone()) {
                Ok(Accepted::Pending(answer)) => {
                    self.last.insert(lane, answer);
                    return Ok(());
                }
                Ok(Accepted::Queued) => return Ok(()),
                Err(SubmitError::QueueFull) => tokio::time::sleep(Duration::from_millis(2)).await,
                Err(e) => anyhow::bail!("journaling the demo's traffic: {e:?}"),
            }
        }
    }

    /// Waits while more than `ahead` hits wait for an applier.
    async fn wait_for_appliers(&self, ahead: u64) {
        while self.journal.unapplied() > ahead {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until what was submitted is committed (`durable` acks; in
    /// `fast` mode closing the journal commits it).
    async fn committed(self) -> anyhow::Result<()> {
        for (_, answer) in self.last {
            answer
                .await
                .map_err(|_| anyhow::anyhow!("the journal closed"))?
                .map_err(|e| anyhow::anyhow!("journaling the demo's traffic: {e}"))?;
        }
        Ok(())
    }
}

/// Browser, system, device, country and weight of the demo's visitors.
const DEMO_PROFILES: [(&str, &str, &str, &str, u64); 9] = [
    ("Chrome", "Windows", "desktop", "US", 22),
    ("Chrome", "Android", "mobile", "IN", 14),
    ("Safari", "iOS", "mobile", "US", 14),
    ("Firefox", "Linux", "desktop", "DE", 10),
    ("Safari", "macOS", "desktop", "GB", 10),
    ("Edge", "Windows", "desktop", "FR", 8),
    ("Samsung Internet", "Android", "mobile", "KR", 6),
    ("Safari", "iPadOS", "tablet", "JP", 5),
    ("Chrome", "macOS", "desktop", "BR", 11),
];

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_rhythm_peaks_in_the_afternoon_and_dips_at_weekends() {
        let weekday_peak = Utc.with_ymd_and_hms(2026, 11, 18, 14, 0, 0).unwrap();
        let weekday_night = Utc.with_ymd_and_hms(2026, 11, 18, 2, 0, 0).unwrap();
        let weekend_peak = Utc.with_ymd_and_hms(2026, 11, 21, 14, 0, 0).unwrap();
        assert!(rate(weekday_peak, 1440.0) > 3.0 * rate(weekday_night, 1440.0));
        assert!(rate(weekend_peak, 1440.0) < rate(weekday_peak, 1440.0));
    }

    #[test]
    fn poisson_draws_average_to_lambda() {
        let mut rng = Rng(42);
        let n = 20_000;
        let mean = (0..n).map(|_| f64::from(rng.poisson(2.5))).sum::<f64>() / f64::from(n);
        assert!((mean - 2.5).abs() < 0.1, "{mean}");
    }

    fn demo_pages() -> Vec<Page> {
        let domain = DomainName::parse("demo.test").unwrap();
        demo_paths()
            .iter()
            .map(|p| Page::new(&domain, &PagePath::parse(p).unwrap()))
            .collect()
    }

    /// Each planned view describes its visit as the pixel would: the first
    /// starts it, the second undoes the bounce, each later one carries the
    /// entry, the page before and the seconds since it.
    #[test]
    fn planned_visits_read_as_the_pixel_writes_them() {
        let pages = demo_pages();
        let popularity = Popularity::new(pages.len());
        let mut rng = Rng(3);
        let start = Utc.with_ymd_and_hms(2026, 11, 18, 14, 0, 0).unwrap();
        let limit = start + TimeDelta::hours(1);
        let (mut visits, mut views, mut bounces) = (0u32, 0u32, 0u32);
        for visitor in 0..20_000u64 {
            let planned = plan_visit(&mut rng, &popularity, &pages, visitor, start, limit);
            assert!((1..=VISIT_VIEWS.len()).contains(&planned.len()));
            visits += 1;
            views += planned.len() as u32;
            bounces += u32::from(planned.len() == 1);
            let first = &planned[0];
            assert_eq!(first.at, start);
            assert!(first.visit.starts());
            assert_eq!(first.visit.duration_secs, 0);
            assert!(!first.visit.second_view);
            for (i, pair) in planned.windows(2).enumerate() {
                let (before, view) = (&pair[0], &pair[1]);
                let v = &view.visit;
                assert_eq!(v.visitor, visitor);
                assert_eq!(v.entry.as_deref(), Some(pages[first.page].as_str()));
                assert_eq!(v.previous.as_deref(), Some(pages[before.page].as_str()));
                assert_eq!(v.second_view, i == 0);
                let gap = (view.at - before.at).num_seconds();
                assert_eq!(i64::from(v.duration_secs), gap);
                assert!((10..=300).contains(&gap), "{gap}");
                assert_ne!(view.page, before.page);
            }
        }
        let bounce_rate = f64::from(bounces) / f64::from(visits);
        assert!((0.45..0.55).contains(&bounce_rate), "{bounce_rate}");
        // Visits start at the views' rate over this: the demo writes the
        // views it always did.
        let per_visit = f64::from(views) / f64::from(visits);
        assert!(
            (per_visit / mean_visit_views() - 1.0).abs() < 0.03,
            "{per_visit}"
        );
    }

    /// A visit stops before the next UTC day (another salt, another
    /// visitor) and before the present.
    #[test]
    fn a_visit_ends_at_its_limit() {
        let pages = demo_pages();
        let popularity = Popularity::new(pages.len());
        let mut rng = Rng(9);
        let start = Utc.with_ymd_and_hms(2026, 11, 18, 23, 59, 50).unwrap();
        let midnight = Utc.with_ymd_and_hms(2026, 11, 19, 0, 0, 0).unwrap();
        for visitor in 0..1000 {
            let planned = plan_visit(&mut rng, &popularity, &pages, visitor, start, midnight);
            assert_eq!(planned.len(), 1, "the shortest gap is 10 s");
        }
    }

    /// Some visitors come back later the same day, never while their last
    /// visit could still be open, and never on another day.
    #[test]
    fn visitors_return_after_their_visit_and_only_the_same_day() {
        let mut rng = Rng(5);
        let mut visitors = DayVisitors::default();
        let day = Utc.with_ymd_and_hms(2026, 11, 18, 0, 0, 0).unwrap();
        let mut last_seen = std::collections::HashMap::new();
        let mut visits = 0;
        for minute in 0..2 * 1440 {
            let start = day + TimeDelta::minutes(minute);
            let who = visitors.visitor_at(&mut rng, start);
            let id = visitors.id(who);
            if let Some((seen_day, last)) = last_seen.get(&id) {
                assert_eq!(
                    *seen_day,
                    Resolution::Day.floor(start),
                    "returns the same day"
                );
                assert!(start - *last >= VISIT_GAP, "after the visit is over");
            }
            let last = start + TimeDelta::minutes(minute % 20);
            visitors.saw(who, last);
            last_seen.insert(id, (Resolution::Day.floor(start), last));
            visits += 1;
        }
        let share = 1.0 - last_seen.len() as f64 / f64::from(visits);
        assert!((0.1..RETURNING).contains(&share), "{share}");
    }

    #[test]
    fn demo_paths_are_valid_and_distinct() {
        let paths = demo_paths();
        assert_eq!(paths.len(), 60);
        for p in &paths {
            assert!(PagePath::parse(p).is_ok(), "{p}");
        }
        let mut sorted = paths.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), paths.len());
    }
}

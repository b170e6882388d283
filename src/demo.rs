//! Synthetic traffic for a demo site, written through the same
//! `BucketWriter` as real hits: a daily and weekly rhythm, and a long tail
//! of pages with Zipf-like popularity. Deterministic for a given seed.

use chrono::{DateTime, Datelike, TimeDelta, Timelike, Utc, Weekday};
use std::f64::consts::PI;
use tokio::time::{Duration, Instant};

use crate::domain::{DomainName, Page, PagePath, Resolution};
use crate::storage::bucket_writer::BucketWriter;
use crate::storage::sites::{self, NewSite, Site};
use crate::storage::Store;

pub const DEFAULT_DOMAIN: &str = "demo.tickertape.test";

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

/// Creates the demo site if needed and fills `days` days up to `now`.
/// With `if_empty`, does nothing when the site already has views.
pub async fn generate(
    store: &Store,
    options: &DemoOptions,
    now: DateTime<Utc>,
    if_empty: bool,
) -> anyhow::Result<DemoReport> {
    let site = match sites::list(store)
        .await?
        .into_iter()
        .find(|s| s.domain == options.domain)
    {
        Some(site) => site,
        None => {
            let new = NewSite {
                domain: options.domain.clone(),
                aliases: vec![],
                name: Some("Demo site".into()),
                owners: vec![],
                time_zone: crate::domain::TimeZone::UTC,
            };
            sites::insert(store, new, now).await?
        }
    };
    if if_empty {
        let filter = bson::doc! {"page": site.domain.pages_filter()};
        if store
            .buckets(Resolution::Day)
            .count_documents(filter)
            .limit(1)
            .await?
            > 0
        {
            return Ok(DemoReport {
                site,
                hits: 0,
                skipped: true,
            });
        }
    }
    let pages: Vec<Page> = demo_paths()
        .iter()
        .map(|p| {
            Page::new(
                &site.domain,
                &PagePath::parse(p).expect("demo paths are valid"),
            )
        })
        .collect();
    // Zipf weights 1/(rank+1), as a cumulative table.
    let mut cumulative = Vec::with_capacity(pages.len());
    let mut sum = 0.0;
    for rank in 0..pages.len() {
        sum += 1.0 / (rank as f64 + 1.0);
        cumulative.push(sum);
    }
    let mut rng = Rng(options.seed.max(1));
    let writer = BucketWriter::new(store);
    // Where the demo's visitors come from: a third typed the address,
    // the rest followed links (weights roughly as for a small blog).
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
    let mut batch: Vec<(usize, DateTime<Utc>, usize)> = Vec::with_capacity(20_000);
    let mut hits = 0u64;
    let end = Resolution::Minute.floor(now);
    let mut minute =
        Resolution::Day.floor(now) - TimeDelta::days(i64::from(options.days.max(1)) - 1);
    while minute <= end {
        let n = rng.poisson(rate(minute, f64::from(options.daily_views)));
        let last_second = if minute == end { now.second() } else { 59 };
        for _ in 0..n {
            let pick = rng.unit() * sum;
            let page = cumulative
                .partition_point(|c| *c < pick)
                .min(pages.len() - 1);
            let second = (rng.next() % (u64::from(last_second) + 1)) as i64;
            let mut roll = rng.next() % source_total;
            let source = SOURCES
                .iter()
                .position(|(_, w)| {
                    let hit = roll < *w;
                    roll = roll.saturating_sub(*w);
                    hit
                })
                .unwrap_or(0);
            batch.push((page, minute + TimeDelta::seconds(second), source));
        }
        if batch.len() >= 20_000 || (minute == end && !batch.is_empty()) {
            hits += batch.len() as u64;
            let deadline = Instant::now() + Duration::from_secs(60);
            let hits: Vec<_> = batch
                .drain(..)
                .map(|(p, at, s)| (pages[p].as_str(), at, Some(SOURCES[s].0)))
                .collect();
            writer.apply_direct(&hits, deadline).await?;
        }
        minute += TimeDelta::minutes(1);
    }
    Ok(DemoReport {
        site,
        hits,
        skipped: false,
    })
}

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

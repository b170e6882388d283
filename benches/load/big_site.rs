//! Reports of big sites. A site of P pages with D days of
//! traffic (BENCH_BIG, default `1000x365,10000x365`; e.g. `100000x30`),
//! Zipf views (BENCH_BIG_DAILY a day over all pages, default 190,000: the
//! 69.5 million views a year of the measurement), loaded as the
//! issue measured it: page-day buckets written directly (one per page and
//! day with views, with their `hours` slots) and the site's day and hour
//! totals beside them; the page-hour buckets too on the days the presets'
//! parts of days fall on (the last 62 days and the first two), which is
//! what the hour summaries read. Then `tickertape backfill-page-summaries` (timed),
//! the first request after a start, every dashboard preset, the page
//! report, `pages.csv` and the 20th screen of top pages, p50 and p99, in
//! UTC and Europe/Berlin, and the app's peak RSS. BENCH_BIG_KEEP=1 keeps
//! the loaded site, BENCH_BIG_REUSE=1 measures a kept one again.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use std::process::Command;
use std::time::Instant;
use tickertape::domain::TimeZone;
use tickertape::reports::Resolution;
use tickertape::storage::buckets::PART_DIRECT;
use tickertape::storage::sites;

use crate::report_latency::{login, measure};
use crate::roles::Database;
use crate::{repo, Rng, Server, SITE_DOMAIN};

const DATABASE: &str = "bench_big";

pub async fn run(db: &Database) -> anyhow::Result<()> {
    let specs = std::env::var("BENCH_BIG").unwrap_or_else(|_| "1000x365,10000x365".into());
    let daily: u64 = crate::env_or("BENCH_BIG_DAILY", 190_000);
    println!(
        "\n## Big sites: top pages from page summaries ({daily} views a day, Zipf over the pages; page-day buckets loaded directly; 50 sequential requests each after one warm-up, loopback)\n"
    );
    for spec in specs.split(',').filter(|s| !s.trim().is_empty()) {
        let (pages, days) = spec
            .trim()
            .split_once('x')
            .and_then(|(p, d)| Some((p.parse::<usize>().ok()?, d.parse::<i64>().ok()?)))
            .ok_or_else(|| anyhow::anyhow!("BENCH_BIG: {spec:?} is not PAGESxDAYS"))?;
        one(db, pages, days, daily).await?;
    }
    Ok(())
}

/// `views` spread over the first `open` hours of a day (24, or today's
/// hours so far: a site has no views in hours still to come).
fn hours_of(views: i64, open: i64) -> Document {
    (0..open)
        .filter_map(|h| {
            let n = views / open + i64::from(h < views % open);
            (n > 0).then(|| (h.to_string(), Bson::Int64(n)))
        })
        .collect()
}

async fn insert(
    store: &tickertape::storage::Store,
    coll: &str,
    docs: Vec<Document>,
) -> anyhow::Result<()> {
    if !docs.is_empty() {
        store
            .db()
            .collection::<Document>(coll)
            .insert_many(docs)
            .ordered(false)
            .await?;
    }
    Ok(())
}

/// `BENCH_BIG_REUSE=1`: measure the site a previous run loaded (its
/// database kept in target/bench-db, the load and backfill skipped).
pub fn reuse() -> bool {
    std::env::var("BENCH_BIG_REUSE").is_ok_and(|v| v == "1")
}

async fn one(db: &Database, pages: usize, days: i64, daily: u64) -> anyhow::Result<()> {
    if reuse() {
        let store = db.store(DATABASE).await?;
        let site = sites::list(&store)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("BENCH_BIG_REUSE: no site loaded"))?;
        let count = |c: &'static str| {
            let store = store.clone();
            async move {
                store
                    .db()
                    .collection::<Document>(c)
                    .count_documents(doc! {})
                    .await
            }
        };
        println!(
            "\n### {pages} pages × {days} days, reused: {} page-day and {} page-hour buckets, {} summaries of days and {} of hours\n",
            count("views_day").await?,
            count("views_hour").await?,
            count(tickertape::storage::page_summaries::COLLECTION).await?,
            count(tickertape::storage::page_summaries::HOUR_COLLECTION).await?,
        );
        return measure_site(db, &store, &site, (pages, days)).await;
    }
    let started = Instant::now();
    let (store, site_id) = db.fresh(DATABASE).await?;
    // The TTL indexes first, as a deployment has them from its first
    // start: built over millions of loaded buckets, `serve` would spend
    // many minutes starting.
    tickertape::storage::retention::apply(&store, &Default::default()).await?;
    let now = Utc::now();
    let first = Resolution::Day.floor(now) - TimeDelta::days(days - 1);
    let harmonic: f64 = (1..=pages).map(|k| 1.0 / k as f64).sum();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut total, mut buckets, mut hour_buckets) = (0_i64, 0_u64, 0_u64);
    for d in 0..days {
        let day: DateTime<Utc> = first + TimeDelta::days(d);
        let with_hours = d < 2 || d >= days - 62;
        let mut hour_docs = Vec::new();
        let mut docs = Vec::with_capacity(pages);
        let mut site_hours = [0_i64; 24];
        // Today has views up to the current hour only, as on a real site
        // (views in later hours would make today's unsettled hours, which
        // are read from their buckets, many instead of one or two).
        let open = if d == days - 1 {
            i64::from(now.hour()) + 1
        } else {
            24
        };
        for k in 1..=pages {
            let expected = daily as f64 / harmonic / k as f64;
            let views = (expected * (0.5 + rng.unit())).round() as i64 * open / 24;
            if views == 0 {
                continue;
            }
            for (h, n) in site_hours.iter_mut().enumerate().take(open as usize) {
                *n += views / open + i64::from((h as i64) < views % open);
            }
            total += views;
            let page = format!("{SITE_DOMAIN}/p/{k}");
            if with_hours {
                for (h, n) in hours_of(views, open) {
                    let n = n.as_i64().unwrap_or(0);
                    let at = day + TimeDelta::hours(h.parse::<i64>().unwrap_or(0));
                    hour_docs.push(doc! {
                        "page": &page,
                        "timestamp": bson::DateTime::from_chrono(at),
                        "totalViews": n,
                        "minutes": {"0": n},
                    });
                }
                if hour_docs.len() >= 10_000 {
                    hour_buckets += hour_docs.len() as u64;
                    insert(&store, "views_hour", std::mem::take(&mut hour_docs)).await?;
                }
            }
            docs.push(doc! {
                "page": page,
                "timestamp": bson::DateTime::from_chrono(day),
                "totalViews": views,
                "hours": hours_of(views, open),
            });
            if docs.len() == 10_000 {
                buckets += docs.len() as u64;
                insert(&store, "views_day", std::mem::take(&mut docs)).await?;
            }
        }
        buckets += docs.len() as u64;
        insert(&store, "views_day", docs).await?;
        hour_buckets += hour_docs.len() as u64;
        insert(&store, "views_hour", hour_docs).await?;
        let day_total: i64 = site_hours.iter().sum();
        let hours: Document = site_hours
            .iter()
            .enumerate()
            .map(|(h, n)| (h.to_string(), Bson::Int64(*n)))
            .collect();
        insert(
            &store,
            "site_views_day",
            vec![doc! {"site": SITE_DOMAIN, "timestamp": bson::DateTime::from_chrono(day), "part": PART_DIRECT, "totalViews": day_total, "hours": hours}],
        )
        .await?;
        let site_hour_docs = site_hours
            .iter()
            .enumerate()
            .take(open as usize)
            .map(|(h, n)| {
                doc! {"site": SITE_DOMAIN, "timestamp": bson::DateTime::from_chrono(day + TimeDelta::hours(h as i64)), "part": PART_DIRECT, "totalViews": *n}
            })
            .collect();
        insert(&store, "site_views_hour", site_hour_docs).await?;
    }
    let site = sites::list(&store)
        .await?
        .into_iter()
        .next()
        .expect("bench site");
    sites::mark_totals_complete(&store, &site).await?;
    crate::report_latency::create_admin(&store, now).await?;
    eprintln!(
        "big site {pages} pages × {days} days: {total} views in {buckets} page-day buckets and {hour_buckets} page-hour buckets, loaded in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let status = Command::new(repo().join("target/release/tickertape"))
        .arg("backfill-page-summaries")
        .env("MONGODB_URI", &db.uri)
        .env("TICKERTAPE_DATABASE", DATABASE)
        .env("RUST_LOG", "warn")
        .status()?;
    anyhow::ensure!(status.success(), "backfill-page-summaries failed");
    let backfill = t.elapsed().as_secs_f64();
    let stats = store
        .db()
        .run_command(doc! {"collStats": tickertape::storage::page_summaries::COLLECTION})
        .await?;
    let size = tickertape::storage::values::count(stats.get("size"));
    let count = tickertape::storage::values::count(stats.get("count"));
    let hour_count = store
        .db()
        .collection::<Document>(tickertape::storage::page_summaries::HOUR_COLLECTION)
        .count_documents(doc! {})
        .await?;
    let day_stats = store
        .db()
        .run_command(doc! {"collStats": "views_day"})
        .await?;
    let day_size = tickertape::storage::values::count(day_stats.get("size"));
    println!(
        "\n### {pages} pages × {days} days: {total} views, {buckets} page-day buckets\n\n\
         - `tickertape backfill-page-summaries`: {backfill:.1} s; {count} summaries of days, {:.1} MiB ({:.2} B per view; the page-day buckets: {:.1} MiB), and {hour_count} of hours (the last 48)\n",
        size as f64 / 1048576.0,
        size as f64 / total as f64,
        day_size as f64 / 1048576.0
    );

    let _ = site_id;
    measure_site(db, &store, &site, (pages, days)).await?;
    // BENCH_BIG_KEEP=1 leaves the site for BENCH_BIG_REUSE=1 (profiling).
    if !std::env::var("BENCH_BIG_KEEP").is_ok_and(|v| v == "1") {
        store.db().drop().await?;
    }
    Ok(())
}

/// Every preset, the page report and `pages.csv`, repeated and under
/// traffic, in UTC and Europe/Berlin.
async fn measure_site(
    db: &Database,
    store: &tickertape::storage::Store,
    site: &sites::Site,
    (pages, days): (usize, i64),
) -> anyhow::Result<()> {
    let base = format!("/sites/{}", site.id);
    let presets = [
        "1h",
        "24h",
        "today",
        "yesterday",
        "7d",
        "30d",
        "month",
        "lastmonth",
        "12mo",
    ];
    for zone in ["UTC", "Europe/Berlin"] {
        sites::set_time_zone(store, site, TimeZone::parse(zone)?).await?;
        let server = start(db)?;
        let http = login(&server.address).await?;
        // The first request after a start: nothing of the app's is warm.
        let t = Instant::now();
        let r = http
            .get(format!("{}{base}?range=12mo", server.address))
            .send()
            .await?;
        anyhow::ensure!(r.status() == 200, "first request: {}", r.status());
        r.bytes().await?;
        let first_ms = t.elapsed().as_secs_f64() * 1000.0;
        let mut cases: Vec<(String, String)> = presets
            .iter()
            .map(|p| (format!("dashboard {p}"), format!("{base}?range={p}")))
            .collect();
        cases.push((
            "page report /p/1, 12 months".into(),
            format!("{base}/page?path=/p/1&range=12mo"),
        ));
        cases.push((
            "pages.csv, 12 months".into(),
            format!("{base}/pages.csv?range=12mo"),
        ));
        cases.push((
            "dashboard 12 months, top pages screen 20".into(),
            format!("{base}?range=12mo&p=20"),
        ));
        println!("#### {pages} pages × {days} days, site in {zone}\n");
        println!("first request after a start (dashboard, 12 months): {first_ms:.0} ms\n");
        println!("| report | p50 ms | p99 ms | bytes |");
        println!("|---|---:|---:|---:|");
        for (name, path) in &cases {
            let (p50, p99, bytes) = measure(&http, &server.address, name, path).await?;
            println!("| {name} | {p50:.1} | {p99:.1} | {bytes} |");
        }
        // Under traffic: a view of today lands before each request, so the
        // site's totals move and no kept answer serves (as on a site that
        // is being viewed).
        println!("\nUnder traffic (a new view of today before each request):\n");
        println!("| report | p50 ms | p99 ms |");
        println!("|---|---:|---:|");
        for (name, path) in cases.iter().filter(|(n, _)| {
            n.ends_with(" 7d")
                || n.ends_with(" 12mo")
                || n.ends_with("yesterday")
                || n.starts_with("pages.csv")
        }) {
            let (p50, p99) = under_traffic(&http, &server.address, path, store, pages).await?;
            println!("| {name} | {p50:.1} | {p99:.1} |");
        }
        println!("\napp peak RSS: {:.0} MiB\n", server.peak_rss_mib());
        server.stop()?;
    }
    Ok(())
}

/// p50 and p99 in ms of 20 requests, each after one new view of today
/// written through the product's writer (not timed).
async fn under_traffic(
    http: &reqwest::Client,
    address: &str,
    path: &str,
    store: &tickertape::storage::Store,
    pages: usize,
) -> anyhow::Result<(f64, f64)> {
    let writer = tickertape::storage::bucket_writer::BucketWriter::new(store);
    let mut times = Vec::new();
    for i in 0..20 {
        let page = format!("{SITE_DOMAIN}/p/{}", 1 + (i * 7919) % pages);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        writer
            .apply_direct(&[(page.as_str(), Utc::now())], deadline)
            .await?;
        let t = Instant::now();
        let r = http.get(format!("{address}{path}")).send().await?;
        anyhow::ensure!(r.status() == 200, "{path}: {}", r.status());
        r.bytes().await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[times.len() * 99 / 100]))
}

fn start(db: &Database) -> anyhow::Result<Server> {
    crate::serve_release(db, DATABASE)
}

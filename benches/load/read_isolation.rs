//! The pixel beside costly reads: a site of `BENCH_ISOLATION_VISITS`
//! visits over the past year (default 150,000; quick 15,000), of which 100
//! are crafted as one client flooding the pixel makes them (2,000 views of
//! 511-byte paths each), written directly as visit documents. The release
//! server is started on it; eight clients, signed in as the admin, read
//! the 12-month dashboard filtered by a pattern (`page:/blog/*`) again and
//! again, while `BENCH_ISOLATION_PIXEL_CLIENTS` clients (default 16) send
//! pixel hits for `BENCH_DURATION` seconds. Reported: the pixel's hits,
//! p50, p99 and maximum, its non-200 answers and failed requests (resets),
//! the reads' answers by status, and the app's peak RSS. Target (issue of
//! the read side): pixel p99 < 50 ms, no non-200, no reset.
//!
//! `BENCH_ISOLATION=0` skips it, `BENCH_ISOLATION_ONLY=1` runs only it.

use bson::doc;
use chrono::{TimeDelta, Utc};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickertape::storage::visit_log::{self, StoredVisit};

use crate::report_latency::{create_admin, login};
use crate::roles::Database;
use crate::{Options, SITE_DOMAIN};

const DATABASE: &str = "bench_isolation";
const CRAFTED: i64 = 100;
const READERS: usize = 8;

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let visits: i64 = crate::env_or(
        "BENCH_ISOLATION_VISITS",
        if quick { 15_000 } else { 150_000 },
    );
    let pixel_clients: usize = crate::env_or("BENCH_ISOLATION_PIXEL_CLIENTS", 16);
    let (store, site) = db.fresh(DATABASE).await?;
    let now = Utc::now();
    create_admin(&store, now).await?;
    let loading = Instant::now();
    seed(&store, visits, now).await?;
    println!(
        "\n## The pixel beside costly reads ({visits} visits over 12 months, {CRAFTED} of them 2,000 views of 511-byte paths; {READERS} clients reading the 12-month dashboard filtered by `page:/blog/*`, {pixel_clients} pixel clients, {} s, loopback; loaded in {:.0} s)\n",
        options.duration,
        loading.elapsed().as_secs_f64()
    );
    let server = crate::serve_release(db, DATABASE)?;
    let address = server.address.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let http = login(&address).await?;
        let (address, site, stop) = (address.clone(), site.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut answers: BTreeMap<String, u64> = BTreeMap::new();
            let path = format!("{address}/sites/{site}?range=12mo&filter=page%3A%2Fblog%2F*");
            while !stop.load(Ordering::Relaxed) {
                let answer = match http.get(&path).send().await {
                    Ok(r) => {
                        let status = r.status().as_u16().to_string();
                        let _ = r.bytes().await;
                        status
                    }
                    Err(e) => format!("error: {e}"),
                };
                *answers.entry(answer).or_default() += 1;
            }
            answers
        }));
    }
    // The readers are under way before the pixel is timed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let until = Instant::now() + Duration::from_secs(options.duration);
    let pixel = reqwest::Client::builder()
        .user_agent("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
        .build()?;
    let mut clients = Vec::new();
    for c in 0..pixel_clients {
        let (pixel, address, site) = (pixel.clone(), address.clone(), site.clone());
        clients.push(tokio::spawn(async move {
            let (mut times, mut non_200, mut failed) = (Vec::new(), 0u64, 0u64);
            let mut i = 0u64;
            while Instant::now() < until {
                i += 1;
                let t = Instant::now();
                match pixel
                    .get(format!(
                        "{address}/pixel.gif?site={site}&page=/p/{c}-{}",
                        i % 500
                    ))
                    .send()
                    .await
                {
                    Ok(r) if r.status() == 200 => {
                        let _ = r.bytes().await;
                        times.push(t.elapsed().as_secs_f64() * 1000.0);
                    }
                    Ok(_) => non_200 += 1,
                    Err(_) => failed += 1,
                }
            }
            (times, non_200, failed)
        }));
    }
    let (mut times, mut non_200, mut failed) = (Vec::new(), 0, 0);
    for c in clients {
        let (t, n, f) = c.await?;
        times.extend(t);
        non_200 += n;
        failed += f;
    }
    stop.store(true, Ordering::Relaxed);
    let mut reads: BTreeMap<String, u64> = BTreeMap::new();
    for r in readers {
        for (k, v) in r.await? {
            *reads.entry(k).or_default() += v;
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| {
        times
            .get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!("| pixel hits answered 200 | p50 ms | p99 ms | max ms | non-200 | failed (reset) | reads by answer | app peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {:.1} | {:.1} | {:.1} | {non_200} | {failed} | {} | {:.0} |",
        times.len(),
        at(0.5),
        at(0.99),
        times.last().copied().unwrap_or(f64::NAN),
        reads
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        server.peak_rss_mib()
    );
    let met = at(0.99) < 50.0 && non_200 == 0 && failed == 0;
    println!(
        "\ntarget (p99 < 50 ms, no non-200, no reset): {}\n",
        if met { "met" } else { "NOT met" }
    );
    server.stop()?;
    Ok(())
}

/// `visits` visit documents of the bench site over the past year, the
/// first [`CRAFTED`] of 2,000 views of 511-byte paths, the others of one
/// to four views, a third of them on `/blog/…`.
async fn seed(
    store: &tickertape::storage::Store,
    visits: i64,
    now: chrono::DateTime<Utc>,
) -> anyhow::Result<()> {
    let long_path = format!("/blog/{}", "x".repeat(505));
    let visit = |id: i64| {
        let start = now - TimeDelta::seconds(1 + id * 365 * 86_400 / visits.max(1));
        let crafted = id < CRAFTED;
        let steps = if crafted { 2_000 } else { 1 + id % 4 };
        StoredVisit {
            id: id + 1,
            site: SITE_DOMAIN.into(),
            start: bson::DateTime::from_chrono(start),
            entry: Some("/".into()),
            source: None,
            medium: None,
            campaign: None,
            browser: Some("Firefox".into()),
            os: Some("Linux".into()),
            device: Some("desktop".into()),
            country: Some("DE".into()),
            reg: Some((id % 16_384) as i32),
            rank: Some(1 + (id % 7) as i32),
            views: steps,
            duration: steps * 10,
            steps: (0..steps)
                .map(|n| visit_log::Step {
                    n: n as i32,
                    t: (n * 10) as i32,
                    p: if crafted {
                        long_path.clone()
                    } else if n == 0 {
                        "/".into()
                    } else if id % 3 == 0 {
                        format!("/blog/post-{}", (id + n) % 200)
                    } else {
                        format!("/page-{}", (id + n) % 50)
                    },
                    e: None,
                    pr: Vec::new(),
                    rv: None,
                })
                .collect(),
        }
    };
    let coll = visit_log::collection(store, false);
    let mut batch = Vec::new();
    for id in 0..visits {
        batch.push(visit(id));
        if batch.len() >= if id < CRAFTED { 5 } else { 2_000 } {
            coll.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        coll.insert_many(batch).await?;
    }
    anyhow::ensure!(
        coll.count_documents(doc! {"site": SITE_DOMAIN}).await? as i64 == visits,
        "the visits were not all written"
    );
    Ok(())
}

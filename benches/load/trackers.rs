//! The peers' endpoints (Plausible's `/api/event`, Umami's
//! `/api/send`, GoatCounter's `/count`) under wrk, side by side with the
//! pixel on one durable server, in alternating rounds so that the machine's
//! drift hits every route alike; the median round of each against the
//! pixel's. Every answer 2xx must be one stored view.
//!
//! Options: BENCH_TRACKERS_SECS per run (default 20; quick 4),
//! BENCH_TRACKERS_ROUNDS (3), BENCH_TRACKERS=0 skips,
//! BENCH_TRACKERS_ONLY=1 runs only this.

use anyhow::{bail, Context};
use std::process::Command;

use super::{env_or, page_cap::drained, repo, roles, Options, WrkResult, WRK_THREADS};
use tickertape::storage::Resolution;

const ROUTES: [&str; 4] = ["pixel", "plausible", "umami", "goatcounter"];

fn wrk(
    address: &str,
    site: &str,
    route: &str,
    seconds: u64,
    pages: u32,
) -> anyhow::Result<WrkResult> {
    let output = Command::new("wrk")
        .args([
            &format!("-t{WRK_THREADS}"),
            "-c64",
            &format!("-d{seconds}s"),
            "--latency",
            "--timeout",
            "10s",
        ])
        .arg("-s")
        .arg(repo().join("benches/trackers.lua"))
        .arg(address)
        .args(["--", site, &pages.to_string(), route])
        .output()
        .context("running wrk (install Debian's wrk: make bench does)")?;
    super::wrk_result(&output)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub async fn run(db: &roles::Database, options: &Options) -> anyhow::Result<()> {
    let seconds: u64 = env_or("BENCH_TRACKERS_SECS", if options.quick { 4 } else { 20 });
    let rounds: usize = env_or("BENCH_TRACKERS_ROUNDS", 3).max(1);
    let db_name = "bench_trackers";
    let (store, site) = db.fresh(db_name).await?;
    let server = roles::product(db, db_name, &[])?;
    let address = server.address.clone();
    let mut results: Vec<Vec<WrkResult>> = vec![Vec::new(); ROUTES.len()];
    for _ in 0..rounds {
        for (i, route) in ROUTES.iter().enumerate() {
            let result = tokio::task::spawn_blocking({
                let (address, site, pages) = (address.clone(), site.clone(), options.pages);
                move || wrk(&address, &site, route, seconds, pages)
            })
            .await??;
            eprintln!("{route}: {:.0} hits/s", result.rate());
            results[i].push(result);
            drained(&address).await?;
        }
    }
    let ok: u64 = results
        .iter()
        .flatten()
        .map(|r| r.requests - r.not_ok())
        .sum();
    // The server's own count of views answered as counted: wrk leaves out
    // the answers in flight when each run stops (up to one a connection).
    let metrics = roles::get_text(&format!("{address}/metrics")).await?;
    let counted = ["counted", "page-cap"]
        .iter()
        .filter_map(|o| {
            roles::metric(
                &metrics,
                &format!("tickertape_hits_total{{outcome=\"{o}\"}} "),
            )
        })
        .sum::<u64>();
    let stored = roles::stored(&store, Resolution::Minute).await?;
    println!("\n## The peers' trackers beside the pixel\n");
    println!(
        "one durable server; wrk, {WRK_THREADS} threads, 64 connections, {seconds} s per run, {rounds} rounds of the four routes in turn, {} pages (uniform), real browsers' User-Agents\n",
        options.pages
    );
    println!("| route | hits/s per round | median | × pixel | p99 ms (median round) | not 2xx |");
    println!("|---|---|---:|---:|---:|---:|");
    let pixel = median(results[0].iter().map(WrkResult::rate).collect());
    for (route, runs) in ROUTES.iter().zip(&results) {
        let rates: Vec<f64> = runs.iter().map(WrkResult::rate).collect();
        let m = median(rates.clone());
        let p99 = median(runs.iter().map(|r| r.p99_us as f64 / 1000.0).collect());
        println!(
            "| {route} | {} | {m:.0} | {:.2} | {p99:.1} | {} |",
            rates
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            m / pixel,
            runs.iter().map(WrkResult::not_ok).sum::<u64>()
        );
    }
    println!(
        "\nanswered as counted (the server's count): {counted}; views stored at minute level: {stored}; difference {} (wrk saw {ok} answers 2xx)",
        stored - counted as i64
    );
    server.stop()?;
    store.db().drop().await?;
    if stored != counted as i64 {
        bail!("the peers' endpoints lost or added views: {counted} answered, {stored} stored");
    }
    Ok(())
}

//! Report latency: 30 days of Zipf traffic over 1,000 pages, then 50
//! requests of each report to the release server, timed on loopback.

use chrono::{TimeDelta, Utc};
use std::process::Command;
use std::time::Instant;
use tickertape::accounts::password::NewPassword;
use tickertape::accounts::{users, Role};
use tickertape::domain::Email;
use tickertape::reports::Resolution;

use crate::roles::{load_hits, stored, Database};
use crate::{repo, Options, Server, SITE_DOMAIN};

const DAYS: i64 = 30;
const REQUESTS: usize = 50;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    let daily: u64 = crate::env_or(
        "BENCH_REPORT_DAILY",
        if options.quick { 3_000 } else { 100_000 },
    );
    let (store, site) = db.fresh("bench_reports").await?;
    let started = Instant::now();
    // Zipf over 1,000 pages, uniform over time: `daily` views a day.
    let pages = 1000usize;
    let mut cdf = Vec::with_capacity(pages);
    let mut sum = 0.0;
    for k in 1..=pages {
        sum += 1.0 / k as f64;
        cdf.push(sum);
    }
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let now = Utc::now();
    let start = Resolution::Day.floor(now) - TimeDelta::days(DAYS - 1);
    let seconds_total = (now - start).num_seconds().max(1) as u64;
    let total = daily * DAYS as u64;
    let names: Vec<String> = (1..=pages)
        .map(|k| format!("{SITE_DOMAIN}/p/{k}"))
        .collect();
    let generated = std::iter::repeat_with(|| {
        let r = (next() >> 11) as f64 / (1u64 << 53) as f64 * sum;
        let page = cdf.partition_point(|c| *c < r).min(pages - 1);
        let at = start + TimeDelta::seconds((next() % seconds_total) as i64);
        (names[page].as_str(), at)
    });
    load_hits(&store, generated.take(total as usize)).await?;
    let docs = store
        .buckets(Resolution::Minute)
        .estimated_document_count()
        .await?;
    eprintln!(
        "report data: {total} views, {docs} minute buckets, written in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    anyhow::ensure!(
        stored(&store, Resolution::Day).await? == total as i64,
        "report data incomplete"
    );

    create_admin(&store, now).await?;
    let server = start_server(db, "auto")?;
    let http = login(&server.address).await?;
    let day = |d: chrono::DateTime<Utc>| d.format("%Y-%m-%d").to_string();
    let (from30, today) = (day(start), day(now));
    let from24 = (now - TimeDelta::hours(24))
        .format("%Y-%m-%dT%H:%M")
        .to_string();
    let to24 = now.format("%Y-%m-%dT%H:%M").to_string();
    let from12 = day(now - TimeDelta::days(364));
    let base = format!("/sites/{site}");
    let mut cases = vec![
        (
            "page report, 24 h by minute",
            format!("{base}/page?path=/p/1&range=custom&from={from24}&to={to24}&res=minute"),
        ),
        (
            "page report, 30 days by hour",
            format!("{base}/page?path=/p/1&range=custom&from={from30}&to={today}&res=hour"),
        ),
        (
            "page report, 12 months by day",
            format!("{base}/page?path=/p/1&range=custom&from={from12}&to={today}&res=day"),
        ),
        (
            "site dashboard + top pages, 30 days",
            format!("{base}?range=custom&from={from30}&to={today}"),
        ),
        (
            "CSV export, page, 30 days by hour",
            format!("{base}/series.csv?path=/p/1&range=custom&from={from30}&to={today}&res=hour"),
        ),
        (
            "CSV export, site, 30 days by day",
            format!("{base}/series.csv?range=custom&from={from30}&to={today}&res=day"),
        ),
    ];
    // Every dashboard preset (target: each under 50 ms p50); "last hour"
    // reads minute buckets, and must cost what its window holds, not what
    // the site has stored.
    for (name, key) in [
        ("site dashboard, preset last hour", "1h"),
        ("site dashboard, preset last 24 hours", "24h"),
        ("site dashboard, preset last 7 days", "7d"),
        ("site dashboard, preset last 30 days", "30d"),
        ("site dashboard, preset last 12 months", "12mo"),
    ] {
        cases.push((name, format!("{base}?range={key}")));
    }
    // Every hour bucket of every page: about a second a request, so only
    // in the full run.
    if !options.quick {
        cases.push((
            "CSV export, site, 30 days by hour",
            format!("{base}/series.csv?range=custom&from={from30}&to={today}&res=hour"),
        ));
    }
    println!("\n## Report latency ({total} views over {DAYS} days and {pages} pages; {docs} minute buckets; {REQUESTS} sequential requests each, loopback)\n");
    println!("| report | p50 ms | p99 ms | bytes |");
    println!("|---|---:|---:|---:|");
    let mut app_p50 = Vec::new();
    for (name, path) in &cases {
        let (p50, p99, bytes) = measure(&http, &server.address, name, path).await?;
        println!("| {name} | {p50:.1} | {p99:.1} | {bytes} |");
        app_p50.push(p50);
    }
    server.stop()?;

    // The same site reports with `$group` on the server, as on MongoDB:
    // keep the app-side sums on secantusd-rs only where they
    // are measured faster.
    let server = start_server(db, "server")?;
    let http = login(&server.address).await?;
    println!("\n### Site reports: sums in the app (auto on secantusd-rs) vs `$group` on the server (same data, same run)\n");
    println!("| report | p50 ms, app | p50 ms, server | server / app |");
    println!("|---|---:|---:|---:|");
    for ((name, path), app) in cases.iter().zip(&app_p50) {
        if !(name.starts_with("site dashboard") || name.starts_with("page report")) {
            continue;
        }
        let (p50, _, _) = measure(&http, &server.address, name, path).await?;
        println!("| {name} | {app:.1} | {p50:.1} | {:.2} |", p50 / app);
    }
    server.stop()?;
    store.db().drop().await?;
    Ok(())
}

pub(crate) fn start_server(db: &Database, grouping: &str) -> anyhow::Result<Server> {
    let mut cmd = Command::new(repo().join("target/release/tickertape"));
    cmd.arg("serve")
        .env("MONGODB_URI", &db.uri)
        .env("TICKERTAPE_DATABASE", "bench_reports")
        .env("TICKERTAPE_LISTEN", "127.0.0.1:0")
        .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
        .env("TICKERTAPE_REPORT_GROUPING", grouping)
        .env("RUST_LOG", "warn");
    Server::start(cmd)
}

/// The admin the report benches sign in as ([`login`]).
pub(crate) async fn create_admin(
    store: &tickertape::storage::Store,
    now: chrono::DateTime<Utc>,
) -> anyhow::Result<()> {
    users::create(
        store,
        Email::parse(EMAIL)?,
        &NewPassword::parse(PASSWORD)?,
        Role::Admin,
        now,
    )
    .await?;
    Ok(())
}

pub(crate) const EMAIL: &str = "bench@localhost";
pub(crate) const PASSWORD: &str = "bench password 123";

pub(crate) async fn login(address: &str) -> anyhow::Result<reqwest::Client> {
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let login = http
        .get(format!("{}/login", address))
        .send()
        .await?
        .text()
        .await?;
    let csrf = login
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .map(|s| s[..64].to_owned())
        .unwrap_or_default();
    let r = http
        .post(format!("{}/login", address))
        .form(&[("email", EMAIL), ("password", PASSWORD), ("csrf", &csrf)])
        .send()
        .await?;
    anyhow::ensure!(r.status() == 303, "bench login failed: {}", r.status());

    Ok(http)
}

/// p50 and p99 in ms of `REQUESTS` sequential requests after one warm-up,
/// and the size of the answer.
pub(crate) async fn measure(
    http: &reqwest::Client,
    address: &str,
    name: &str,
    path: &str,
) -> anyhow::Result<(f64, f64, usize)> {
    measure_n(http, address, name, path, REQUESTS).await
}

/// [`measure`] with `requests` sequential requests: reports that take
/// seconds each are timed fewer times.
pub(crate) async fn measure_n(
    http: &reqwest::Client,
    address: &str,
    name: &str,
    path: &str,
    requests: usize,
) -> anyhow::Result<(f64, f64, usize)> {
    let url = format!("{address}{path}");
    let mut times = Vec::with_capacity(requests);
    let mut bytes = 0;
    http.get(&url).send().await?.bytes().await?;
    for _ in 0..requests.max(1) {
        let t = Instant::now();
        let r = http.get(&url).send().await?;
        anyhow::ensure!(r.status() == 200, "{name}: {}", r.status());
        bytes = r.bytes().await?.len();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok((percentile(&times, 0.5), percentile(&times, 0.99), bytes))
}

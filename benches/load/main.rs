//! `make bench`: ingestion scenarios side by side, each against a fresh
//! database on this machine's local server, with Debian's `wrk` as the load
//! generator and a no-loss check after every ingestion run.
//!
//! Scenarios: the HTTP ceiling (a bench-only sink that classifies the hit
//! and answers without database work), the seed's naive pattern (a
//! bench-only server doing one `update_one($inc, upsert)` per hit), the
//! product in `durable` and `fast` mode, and `durable` into preallocated
//! buckets. Servers run as separate processes (this binary re-executed with
//! `TT_BENCH_ROLE`, or the release `tickertape`), so each has its own peak
//! RSS.
//!
//! Options (environment): BENCH_DURATION seconds (default 30; quick 4),
//! BENCH_CONNECTIONS (64), BENCH_PAGES (1000), BENCH_QUICK=1,
//! BENCH_SCENARIOS=comma list, BENCH_STORAGE_HITS (default 5,000,000;
//! quick 50,000), BENCH_REPORTS=0 to skip report latency, BENCH_YEAR=0 to
//! skip the year of traffic with sources (BENCH_YEAR_DAILY views a day;
//! BENCH_PAGE_CAP=0 to skip the page cap's loads, BENCH_SUSTAINED=0 to
//! skip the sustained rate (see `sustained.rs` for its
//! options), BENCH_YEAR_REUSE=1 keeps target/bench-db and the year's data from the
//! last run when it holds the same number of views, to time reports again
//! without the 11-minute load), BENCH_BIG=PAGESxDAYS,… for the big-site
//! reports (default `1000x365,10000x365`; 0 skips; see `big_site.rs`),
//! BENCH_BIG_ONLY=1 (`make bench-big`) to run only those; BENCH_TRACKERS=0
//! skips the peers' endpoints beside the pixel, BENCH_TRACKERS_ONLY=1 runs
//! only them (see `trackers.rs`); BENCH_IMPORTS=0 skips the import speed,
//! BENCH_IMPORTS_ONLY=1 runs only it (see `imports.rs`); BENCH_VISIT_STORE=0
//! skips the visit store's write-path cost, BENCH_VISIT_STORE_ONLY=1 runs
//! only it (see `visit_store.rs`); BENCH_SEGMENTS=0 skips the filter and
//! funnel reports, BENCH_SEGMENTS_ONLY=1 runs only them (see
//! `segments.rs` for their sizes); BENCH_ISOLATION=0 skips the pixel
//! beside costly filtered reads, BENCH_ISOLATION_ONLY=1 runs only it (see
//! `read_isolation.rs`); BENCH_WRITE_PATH=0 skips the write path's
//! targets at saturation, BENCH_WRITE_PATH_ONLY=1 runs only them (see
//! `write_path.rs`); BENCH_SERVE_BIN
//! serves the report benches from another build of `tickertape` (a
//! before), BENCH_YEAR_INGEST=0 skips the year bench's write-path rounds.
//!
//! A scenario is `kind[@connections][~rate]`: `durable@2048` runs the
//! durable server with 2,048 connections; `fast@256~20000` sends 20,000
//! requests/s in total over 256 connections on a fixed schedule (wrk's
//! `delay()` hook, `benches/pace.lua`), to read latency at a given rate
//! rather than at saturation.

use anyhow::{bail, Context};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod big_site;
mod imports;
mod page_cap;
mod read_isolation;
mod report_latency;
mod roles;
mod segments;
mod site_year;
mod statement_cost;
mod storage_table;
mod sustained;
mod trackers;
mod visit_store;
mod write_path;

pub const SITE_DOMAIN: &str = "bench.test";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Debug, Clone)]
pub struct Options {
    pub duration: u64,
    pub connections: u32,
    pub pages: u32,
    /// How pages are picked (`benches/pixel.lua`): `zipf`, `uniform`, or
    /// `junk` (a new random path every request, over the comma-separated
    /// sites given).
    pub popularity: &'static str,
    pub quick: bool,
    pub scenarios: Vec<String>,
    pub storage_hits: u64,
    pub reports: bool,
    /// A year over 1,000 pages with sources (`BENCH_YEAR=0` skips).
    pub year: bool,
    /// The sustained rate (`BENCH_SUSTAINED=0` skips).
    pub sustained: bool,
    /// The new-page cap's two loads (`BENCH_PAGE_CAP=0` skips).
    pub page_cap: bool,
    /// How many visitors `pixel.lua` sends as, where a run sets it
    /// (otherwise `BENCH_VISITORS`, default 100,000).
    pub visitors: Option<u32>,
    /// `pixel.lua` sends two custom properties with every view.
    pub props: bool,
}

/// xorshift64: the same data for the same seed, with no crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Options {
    fn from_env() -> Self {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
        let all = "ceiling,naive,durable,fast,preallocated,\
                   ceiling@2048,naive@2048,durable@2048,fast@2048,\
                   durable@256~20000,outage@64~5000";
        Options {
            duration: env_or("BENCH_DURATION", if quick { 4 } else { 30 }),
            connections: env_or("BENCH_CONNECTIONS", 64),
            pages: env_or("BENCH_PAGES", 1000),
            popularity: "zipf",
            quick,
            scenarios: std::env::var("BENCH_SCENARIOS")
                .unwrap_or_else(|_| all.into())
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            storage_hits: env_or("BENCH_STORAGE_HITS", if quick { 50_000 } else { 5_000_000 }),
            reports: std::env::var("BENCH_REPORTS").map_or(true, |v| v != "0"),
            year: std::env::var("BENCH_YEAR").map_or(true, |v| v != "0"),
            sustained: std::env::var("BENCH_SUSTAINED").map_or(true, |v| v != "0"),
            page_cap: std::env::var("BENCH_PAGE_CAP").map_or(true, |v| v != "0"),
            visitors: None,
            props: false,
        }
    }
}

/// One scenario of the ingestion table: what serves the pixel, and how it
/// is loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// As written, e.g. `durable@2048`; the row's label.
    pub label: String,
    /// `ceiling`, `naive`, `durable`, `fast` or `preallocated`.
    pub kind: String,
    pub connections: u32,
    /// Total requests per second to pace wrk at; `None` saturates.
    pub rate: Option<u32>,
}

impl Spec {
    pub fn parse(label: &str, default_connections: u32) -> anyhow::Result<Self> {
        let (rest, rate) = match label.split_once('~') {
            Some((rest, rate)) => (rest, Some(rate.parse().context("rate after ~")?)),
            None => (label, None),
        };
        let (kind, connections) = match rest.split_once('@') {
            Some((kind, c)) => (kind, c.parse().context("connections after @")?),
            None => (rest, default_connections),
        };
        if ![
            "ceiling",
            "naive",
            "durable",
            "fast",
            "preallocated",
            "outage",
        ]
        .contains(&kind)
        {
            bail!("unknown scenario {label:?}");
        }
        if connections == 0 || rate == Some(0) {
            bail!("scenario {label:?}: connections and rate must be positive");
        }
        Ok(Spec {
            label: label.to_owned(),
            kind: kind.to_owned(),
            connections,
            rate,
        })
    }

    /// Seconds of load: paced runs and the outage run last at least 60 s
    /// (backlog over time, and 30 s of outage with load before and after).
    pub fn duration(&self, options: &Options) -> u64 {
        if self.kind == "outage" || self.rate.is_some() && !options.quick {
            options.duration.max(60)
        } else {
            options.duration
        }
    }

    /// For a paced run, the interval between two requests of one wrk
    /// thread, in milliseconds (see `benches/pace.lua`).
    pub fn interval_ms(&self) -> Option<f64> {
        self.rate
            .map(|r| f64::from(WRK_THREADS) * 1000.0 / f64::from(r))
    }
}

/// The release `tickertape serve` on `db`'s database `database`, on a free
/// port, without the preallocation schedule (the report benches);
/// `BENCH_SERVE_BIN` names another build, to time a before and an after on
/// the same data.
pub fn serve_release(db: &roles::Database, database: &str) -> anyhow::Result<Server> {
    let binary = std::env::var_os("BENCH_SERVE_BIN")
        .map_or_else(|| repo().join("target/release/tickertape"), PathBuf::from);
    let mut cmd = Command::new(binary);
    cmd.arg("serve")
        .env("MONGODB_URI", &db.uri)
        .env("TICKERTAPE_DATABASE", database)
        .env("TICKERTAPE_LISTEN", "127.0.0.1:0")
        .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
        .env("RUST_LOG", "warn");
    Server::start(cmd)
}

/// wrk threads: one per core of this machine's two, sharing them with the
/// app and the database.
pub const WRK_THREADS: u32 = 2;

/// A server process and its address.
pub struct Server {
    child: Child,
    pub address: String,
}

impl Server {
    /// Starts `command` and waits for its "listening on http://…" line.
    pub fn start(mut command: Command) -> anyhow::Result<Self> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.split("listening on ").nth(1) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(url.trim().to_owned());
                    }
                }
            }
        });
        let address = rx
            // Long enough for a start that builds a TTL index over
            // millions of loaded buckets (the big-site bench).
            .recv_timeout(Duration::from_secs(900))
            .context("server did not report its address")?;
        Ok(Server { child, address })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory (VmHWM) so far, in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// SIGTERM (graceful: the product drains its queue) and wait.
    pub fn stop(mut self) -> anyhow::Result<()> {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                self.child.kill()?;
                bail!("server did not stop");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct WrkResult {
    pub requests: u64,
    pub duration_us: u64,
    pub status_errors: u64,
    pub connect_errors: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub timeouts: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl WrkResult {
    pub fn rate(&self) -> f64 {
        self.requests as f64 / (self.duration_us as f64 / 1e6)
    }

    pub fn not_ok(&self) -> u64 {
        self.status_errors
            + self.connect_errors
            + self.read_errors
            + self.write_errors
            + self.timeouts
    }
}

pub fn wrk(address: &str, site: &str, spec: &Spec, options: &Options) -> anyhow::Result<WrkResult> {
    // A paced run adds wrk's delay() hook; a saturating run must not have
    // it at all, since wrk then schedules every request through a timer.
    let script = match spec.interval_ms() {
        None => repo().join("benches/pixel.lua"),
        Some(_) => {
            let path = repo().join("target/bench-pixel-paced.lua");
            let text = std::fs::read_to_string(repo().join("benches/pixel.lua"))?
                + &std::fs::read_to_string(repo().join("benches/pace.lua"))?;
            std::fs::write(&path, text)?;
            path
        }
    };
    let interval = spec
        .interval_ms()
        .map_or("0".to_owned(), |d| format!("{d:.4}"));
    let mut command = Command::new("wrk");
    if let Some(visitors) = options.visitors {
        command.env("BENCH_VISITORS", visitors.to_string());
    }
    if options.props {
        command.env("BENCH_PROPS", "1");
    }
    let output = command
        .args([
            &format!("-t{WRK_THREADS}"),
            &format!("-c{}", spec.connections),
            &format!("-d{}s", spec.duration(options)),
            "--latency",
            "--timeout",
            "10s",
        ])
        .arg("-s")
        .arg(script)
        .arg(address)
        .args([
            "--",
            site,
            &options.pages.to_string(),
            &interval,
            options.popularity,
        ])
        .output()
        .context("running wrk (install Debian's wrk: make bench does)")?;
    wrk_result(&output)
}

/// The `BENCH {…}` line a bench Lua script's `done()` prints.
pub fn wrk_result(output: &std::process::Output) -> anyhow::Result<WrkResult> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("BENCH "))
        .with_context(|| format!("wrk printed no result: {stdout}"))?;
    Ok(serde_json::from_str(line)?)
}

pub struct Row {
    pub spec: Spec,
    pub wrk: WrkResult,
    pub rss_mib: f64,
    pub served_ok: Option<u64>,
    /// Per collection (minute, hour, day): stored views minus 200s.
    pub difference: Option<[i64; 3]>,
    /// The product's journal backlog over the run: (seconds, hits).
    pub backlog: Vec<(f64, u64)>,
    /// Outage runs: from the database's return to an empty backlog.
    pub drain: Option<Duration>,
    /// From the end of the load to an empty backlog.
    pub after_load_drain: Option<Duration>,
}

fn main() -> anyhow::Result<()> {
    if let Ok(role) = std::env::var("TT_BENCH_ROLE") {
        return roles::serve(&role);
    }
    let options = Options::from_env();
    // Reject a mistyped scenario before minutes of setup.
    for label in &options.scenarios {
        Spec::parse(label, options.connections)?;
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run(options))
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown CPU")
        .trim()
        .to_owned();
    format!("{cores} cores ({cpu}), {mem:.0} GiB memory")
}

async fn run(options: Options) -> anyhow::Result<()> {
    let started = Instant::now();
    println!("# Tickertape benchmark");
    println!("date: {}", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
    println!("machine: {}", machine());
    println!(
        "load: wrk, {WRK_THREADS} threads, {} connections unless the scenario says @N, {} s per scenario, {} pages (Zipf); database, app and wrk on this machine",
        options.connections, options.duration, options.pages
    );
    let mut db = roles::Database::start().await?;
    println!("database: {}\n", db.describe);
    let big = std::env::var("BENCH_BIG").map_or(true, |v| v != "0");
    if std::env::var("BENCH_TRACKERS_ONLY").is_ok_and(|v| v == "1") {
        trackers::run(&db, &options).await?;
        db.stop();
        return Ok(());
    }
    if std::env::var("BENCH_IMPORTS_ONLY").is_ok_and(|v| v == "1") {
        imports::run(&db, &options).await?;
        db.stop();
        return Ok(());
    }
    if std::env::var("BENCH_VISIT_STORE_ONLY").is_ok_and(|v| v == "1") {
        visit_store::run(&mut db, &options).await?;
        db.stop();
        return Ok(());
    }
    if std::env::var("BENCH_WRITE_PATH_ONLY").is_ok_and(|v| v == "1") {
        write_path::run(&mut db, &options).await?;
        db.stop();
        return Ok(());
    }
    if std::env::var("BENCH_ISOLATION_ONLY").is_ok_and(|v| v == "1") {
        read_isolation::run(&db, &options).await?;
        db.stop();
        return Ok(());
    }
    if std::env::var("BENCH_SEGMENTS_ONLY").is_ok_and(|v| v == "1") {
        segments::run(&db, &options).await?;
        db.stop();
        return Ok(());
    }
    if std::env::var("BENCH_BIG_ONLY").is_ok_and(|v| v == "1") {
        big_site::run(&db).await?;
        db.stop();
        return Ok(());
    }

    let mut rows = Vec::new();
    for label in &options.scenarios {
        let spec = Spec::parse(label, options.connections)?;
        let row = roles::scenario(&mut db, &spec, &options)
            .await
            .with_context(|| format!("scenario {label}"))?;
        eprintln!(
            "{label}: {:.0} hits/s, p99 {:.1} ms",
            row.wrk.rate(),
            row.wrk.p99_us as f64 / 1000.0
        );
        rows.push(row);
    }
    print_ingestion(&rows);
    print_backlog(&rows);
    if options.sustained {
        sustained::run(&mut db, &options).await?;
    }
    if std::env::var("BENCH_VISIT_STORE").map_or(true, |v| v != "0") {
        visit_store::run(&mut db, &options).await?;
    }
    if std::env::var("BENCH_WRITE_PATH").map_or(true, |v| v != "0") {
        write_path::run(&mut db, &options).await?;
    }
    if options.page_cap {
        page_cap::run(&db, &options).await?;
    }
    if std::env::var("BENCH_TRACKERS").map_or(true, |v| v != "0") {
        trackers::run(&db, &options).await?;
    }
    if std::env::var("BENCH_IMPORTS").map_or(true, |v| v != "0") {
        imports::run(&db, &options).await?;
    }
    statement_cost::run(&db, options.quick).await?;
    let lost: Vec<&Row> = rows
        .iter()
        .filter(|r| r.difference.is_some_and(|d| d != [0, 0, 0]))
        .collect();

    if options.storage_hits > 0 {
        storage_table::run(&db, &options).await?;
    }
    if options.reports {
        report_latency::run(&db, &options).await?;
    }
    if options.year {
        site_year::run(&db, &options).await?;
    }
    if std::env::var("BENCH_SEGMENTS").map_or(true, |v| v != "0") {
        segments::run(&db, &options).await?;
    }
    if std::env::var("BENCH_ISOLATION").map_or(true, |v| v != "0") {
        read_isolation::run(&db, &options).await?;
    }
    if big {
        big_site::run(&db).await?;
    }
    println!(
        "\ntotal bench time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    db.stop();
    if !lost.is_empty() {
        bail!("{} scenario(s) lost or added hits", lost.len());
    }
    Ok(())
}

fn print_backlog(rows: &[Row]) {
    let shown: Vec<&Row> = rows
        .iter()
        .filter(|r| r.spec.rate.is_some() && !r.backlog.is_empty())
        .collect();
    if shown.is_empty() {
        return;
    }
    println!("\n## Journal backlog over time (paced runs)\n");
    for r in shown {
        let peak = r.backlog.iter().map(|(_, b)| *b).max().unwrap_or(0);
        let series: Vec<String> = r
            .backlog
            .iter()
            .map(|(t, b)| format!("{t:.0}s:{b}"))
            .collect();
        println!(
            "- **{}**: peak backlog {peak} hits; drained {:.1} s after the load{}; samples {}",
            r.spec.label,
            r.after_load_drain.map_or(0.0, |d| d.as_secs_f64()),
            r.drain.map_or(String::new(), |d| format!(
                ", {:.1} s after the database returned",
                d.as_secs_f64()
            )),
            series.join(" ")
        );
    }
}

fn print_ingestion(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    println!("\n## Ingestion\n");
    println!("| scenario | hits/s | p50 ms | p90 ms | p99 ms | non-200 | peak RSS MiB | 200s sent | stored − 200s (minute/hour/day) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let ms = |us: u64| us as f64 / 1000.0;
    for r in rows {
        let difference = match r.difference {
            None => "n/a".to_owned(),
            Some([0, 0, 0]) => "0 / 0 / 0 (no loss)".to_owned(),
            Some(d) => format!("{} / {} / {} (LOST OR EXTRA)", d[0], d[1], d[2]),
        };
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {:.0} | {} | {} |",
            r.spec.label,
            r.wrk.rate(),
            ms(r.wrk.p50_us),
            ms(r.wrk.p90_us),
            ms(r.wrk.p99_us),
            r.wrk.not_ok(),
            r.rss_mib,
            r.served_ok.map_or("n/a".into(), |n| n.to_string()),
            difference
        );
    }
    // Ratios only between saturating runs at the same concurrency.
    let rate = |kind: &str, connections: u32| {
        rows.iter()
            .find(|r| {
                r.spec.kind == kind && r.spec.connections == connections && r.spec.rate.is_none()
            })
            .map(|r| r.wrk.rate())
    };
    let mut levels: Vec<u32> = rows.iter().map(|r| r.spec.connections).collect();
    levels.sort_unstable();
    levels.dedup();
    println!();
    for c in levels {
        let ratio = |a: &str, b: &str| Some(rate(a, c)? / rate(b, c)?);
        if let Some(x) = ratio("durable", "naive") {
            println!("{c} connections: durable / naive {x:.1}x");
        }
        if let Some(x) = ratio("durable", "ceiling") {
            println!("{c} connections: durable / ceiling {:.0}%", x * 100.0);
        }
        if let Some(x) = ratio("fast", "ceiling") {
            println!("{c} connections: fast / ceiling {:.0}%", x * 100.0);
        }
        if let Some(x) = ratio("preallocated", "durable") {
            println!("{c} connections: preallocated / upsert-created (durable) {x:.2}x");
        }
    }
}

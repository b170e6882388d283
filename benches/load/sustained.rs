//! The sustained rate. The release `tickertape serve` (durable
//! acks) over 1,000, 10,000 and 100,000 pages, loaded by wrk for minutes,
//! with the app's own `/metrics` read every second: what it acknowledged,
//! what it applied, how far each write-behind stream lags, what each
//! statement costs, and how long the backlog takes to drain afterwards.
//!
//! A run *keeps up* when the minutes' lag stays under 5 s at p99 and the
//! load ends with less than 5 s of lag. The *sustained rate* is the
//! applied rate of the saturating run when it keeps up; otherwise paced
//! runs step down from it until one does.
//!
//! Options (environment):
//! - `BENCH_SUSTAINED=0` skips it; `BENCH_SUSTAINED_RUNS` lists the runs,
//!   each `pages[u][+VAR=value...]`: `u` for uniform popularity instead of
//!   Zipf, and `+` settings passed to the server as `TICKERTAPE_<VAR>`
//!   (to measure alternatives side by side, e.g. `10000+ROLLUPS_WINDOW_MS=1000`),
//!   and `pages@rate` for one run paced at that rate alone (e.g. `1000@8000`).
//!   Default `1000,10000,100000,100000u`.
//! - `BENCH_SUSTAINED_SECS` per run (default 300; quick 20),
//!   `BENCH_SUSTAINED_CONNECTIONS` (64), and `BENCH_SUSTAINED_STEPS`, the
//!   paced runs tried at most below a saturating run that falls behind (3).

use anyhow::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::roles::{self, Database};
use crate::{env_or, wrk, Options, Spec};

/// The minutes' lag a run may reach and still keep up (README: "minutes
/// within 5 s").
const FRESH_SECS: f64 = 5.0;

#[derive(Debug, Clone)]
pub(crate) struct RunSpec {
    label: String,
    pages: u32,
    uniform: bool,
    /// `pages@rate`: one run paced at this rate instead of a saturating one.
    pace: Option<u32>,
    /// `+VISITORS=n`: how many visitors `pixel.lua` sends as (wrk's, not
    /// the server's setting); `1` is one client flooding the pixel.
    visitors: Option<u32>,
    /// `+PROPS=1`: every view carries two custom properties (wrk's).
    props: bool,
    env: Vec<(String, String)>,
}

impl RunSpec {
    pub fn parse(label: &str) -> anyhow::Result<Self> {
        let mut parts = label.split('+');
        let head = parts.next().unwrap_or_default();
        let (head, pace) = match head.split_once('@') {
            Some((h, rate)) => (
                h,
                Some(rate.parse().with_context(|| format!("rate in {label:?}"))?),
            ),
            None => (head, None),
        };
        let (digits, uniform) = match head.strip_suffix('u') {
            Some(d) => (d, true),
            None => (head, false),
        };
        let pages = digits
            .parse()
            .with_context(|| format!("pages in {label:?}"))?;
        let mut visitors = None;
        let mut props = false;
        let mut env = Vec::new();
        for kv in parts {
            let (k, v) = kv
                .split_once('=')
                .with_context(|| format!("VAR=value in {label:?}"))?;
            if k == "PROPS" {
                props = v == "1";
            } else if k == "VISITORS" {
                visitors = Some(
                    v.parse()
                        .with_context(|| format!("visitors in {label:?}"))?,
                );
            } else {
                env.push((format!("TICKERTAPE_{k}"), v.to_owned()));
            }
        }
        Ok(RunSpec {
            label: label.to_owned(),
            pages,
            uniform,
            pace,
            visitors,
            props,
            env,
        })
    }
}

/// One reading of `/metrics`.
#[derive(Debug, Clone, Default)]
struct Sample {
    at: f64,
    committed: f64,
    applied: f64,
    backlog: [f64; 4],
    lag: [f64; 4],
    /// Per stream, in the order of `STREAMS` (a run's totals are their sums).
    statements: [f64; 4],
    transaction_secs: [f64; 4],
    journal_bytes: f64,
    rss_mib: f64,
    /// CPU seconds (user + system) of the app and of the database server.
    app_cpu: f64,
    db_cpu: f64,
    /// The visits stream's open visits held in memory.
    open_visits_bytes: f64,
}

/// The streams as `/metrics` labels them, in the order of `Sample`'s arrays.
pub(crate) const STREAMS: [&str; 4] = ["views", "rollups", "sources", "visits"];

fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A process's CPU seconds (user + system) from `/proc/<pid>/stat`.
pub(crate) fn cpu_secs(pid: Option<u32>) -> f64 {
    let Some(pid) = pid else { return 0.0 };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis: utime and stime
    // are the 12th and 13th of them, in clock ticks.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

async fn sample(address: &str, pid: u32, db_pid: Option<u32>, started: Instant) -> Option<Sample> {
    let text = reqwest::get(format!("{address}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let per_stream =
        |name: &str| STREAMS.map(|s| value(&text, &format!("{name}{{stream=\"{s}\"}}")));
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0);
    Some(Sample {
        at: started.elapsed().as_secs_f64(),
        committed: value(&text, "tickertape_journal_committed_hits_total"),
        applied: value(&text, "tickertape_applied_hits_total"),
        backlog: [
            value(&text, "tickertape_journal_backlog_hits"),
            value(&text, "tickertape_journal_rollups_backlog_hits"),
            value(&text, "tickertape_journal_sources_backlog_hits"),
            value(&text, "tickertape_journal_visits_backlog_hits"),
        ],
        lag: per_stream("tickertape_write_behind_lag_seconds"),
        statements: per_stream("tickertape_apply_statements_total"),
        transaction_secs: per_stream("tickertape_apply_transaction_seconds_total"),
        journal_bytes: value(&text, "tickertape_journal_bytes"),
        rss_mib: rss,
        app_cpu: cpu_secs(Some(pid)),
        db_cpu: cpu_secs(db_pid),
        open_visits_bytes: value(&text, "tickertape_open_visits_bytes"),
    })
}

/// One stream's share of a run's work.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamProfile {
    pub statements_per_hit: f64,
    pub micros_per_statement: f64,
    /// Seconds in this stream's transactions per second of load.
    pub transaction_share: f64,
    pub lag_p99: f64,
    /// From the end of the load until this stream's backlog was empty.
    pub drained_secs: f64,
}

pub(crate) struct Outcome {
    pub label: String,
    rate: Option<u32>,
    pub acked_rate: f64,
    pub applied_rate: f64,
    p99_ms: f64,
    lag_p50: f64,
    pub lag_p99: f64,
    lag_max: f64,
    rollups_p99: f64,
    sources_p99: f64,
    /// The visit store's lag (p99, s), and its `collStats` size and count
    /// at the end of the run.
    pub visits_p99: f64,
    pub visit_storage: (i64, i64),
    /// The run's visits read back: how many, and the median ms of a read
    /// from the parts and from the same visits as visit documents.
    pub visit_reads: Option<(usize, f64, f64)>,
    end_backlog: f64,
    end_lag: f64,
    drain_secs: f64,
    statements_per_hit: f64,
    micros_per_statement: f64,
    pub peak_rss: f64,
    peak_journal_mib: f64,
    difference: [i64; 3],
    over_time: Vec<Sample>,
    /// The hits counted over the load and the drain that followed: the
    /// rate at which every stream applied them.
    pub all_applied_rate: f64,
    /// Per stream, in the order of `STREAMS`.
    pub streams: [StreamProfile; 4],
    /// CPU time per applied hit over the load and the drain (µs).
    pub app_cpu_per_hit_us: f64,
    pub db_cpu_per_hit_us: f64,
    pub peak_open_visits_mib: f64,
}

impl Outcome {
    pub fn keeps_up(&self) -> bool {
        self.lag_p99 < FRESH_SECS && self.end_lag < FRESH_SECS
    }
}

/// The run's visits read as a filtered report reads a day without a pack
/// (from the parts, merged per visit), and the same visits written as
/// visit documents (one per visit, what releases before parts stored) in
/// a scratch database and read from there: three reads of each,
/// alternating; the medians.
async fn visit_reads(
    db: &Database,
    store: &tickertape::storage::Store,
) -> anyhow::Result<Option<(usize, f64, f64)>> {
    use tickertape::storage::visit_log::{self, VisitQuery};
    let now = chrono::Utc::now();
    let query = VisitQuery::new(
        crate::SITE_DOMAIN,
        now - chrono::TimeDelta::days(1),
        now + chrono::TimeDelta::minutes(1),
    );
    // A build from before parts (a run's `SERVE_BIN`) wrote documents.
    let parts = store
        .db()
        .collection::<bson::Document>(visit_log::PARTS)
        .estimated_document_count()
        .await?;
    let visits = visit_log::visits_on(store, &query, false).await?;
    if visits.is_empty() || parts == 0 {
        return Ok(None);
    }
    let scratch = db.store("bench_visit_documents").await?;
    scratch.db().drop().await?;
    tickertape::indexes::ensure(&scratch).await?;
    let documents = visit_log::collection(&scratch, false);
    for chunk in visits.chunks(1_000) {
        documents.insert_many(chunk).await?;
    }
    let (mut from_parts, mut from_documents) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let t = Instant::now();
        let a = visit_log::visits(store, &query).await?;
        from_parts.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let b = visit_log::visits(&scratch, &query).await?;
        from_documents.push(t.elapsed().as_secs_f64() * 1e3);
        // The steps in the order they happened: the order a visit's
        // entries arrive in may differ between two reads.
        let ordered = |visits: Vec<visit_log::StoredVisit>| -> Vec<_> {
            visits
                .into_iter()
                .map(|mut v| {
                    v.steps.sort_by_key(|s| s.n);
                    v
                })
                .collect()
        };
        anyhow::ensure!(
            ordered(a) == ordered(b),
            "the parts and the documents read differently"
        );
    }
    scratch.db().drop().await?;
    Ok(Some((
        visits.len(),
        percentile(&from_parts, 0.5),
        percentile(&from_documents, 0.5),
    )))
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

pub(crate) async fn run_one(
    db: &Database,
    spec: &RunSpec,
    rate: Option<u32>,
    seconds: u64,
    connections: u32,
    options: &Options,
) -> anyhow::Result<Outcome> {
    let db_name = "bench_sustained";
    let (store, site) = db.fresh(db_name).await?;
    // Every page on its own buckets: the cap is not what is measured.
    let mut env = vec![("TICKERTAPE_NEW_PAGES_PER_HOUR".to_owned(), "0".to_owned())];
    env.extend(spec.env.iter().cloned());
    let server = roles::product(db, db_name, &env)?;
    let pid = server.pid();
    let db_pid = db.server_pid();
    let address = server.address.clone();
    let started = Instant::now();
    let loading = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (address, loading) = (address.clone(), loading.clone());
        tokio::spawn(async move {
            let mut samples = Vec::new();
            while loading.load(Ordering::Relaxed) {
                if let Some(s) = sample(&address, pid, db_pid, started).await {
                    samples.push(s);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            samples
        })
    };
    let wrk_spec = Spec {
        label: spec.label.clone(),
        kind: "durable".into(),
        connections,
        rate,
    };
    let wrk_options = Options {
        duration: seconds,
        pages: spec.pages,
        popularity: if spec.uniform { "uniform" } else { "zipf" },
        visitors: spec.visitors.or(options.visitors),
        props: spec.props,
        ..options.clone()
    };
    let result = tokio::task::spawn_blocking({
        let (address, site) = (address.clone(), site.clone());
        move || wrk(&address, &site, &wrk_spec, &wrk_options)
    })
    .await??;
    let load_secs = started.elapsed().as_secs_f64();
    loading.store(false, Ordering::Relaxed);
    let samples = sampler.await?;
    let at_end = sample(&address, pid, db_pid, started)
        .await
        .context("metrics at the end of the load")?;
    // Drain: every stream empty, each stream's time noted as it empties.
    let drain_started = Instant::now();
    let mut last = at_end.clone();
    let mut drained = at_end.backlog.map(|b| (b <= 0.0).then_some(0.0));
    let deadline = drain_started + Duration::from_secs(900);
    while last.backlog.iter().any(|&b| b > 0.0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(s) = sample(&address, pid, db_pid, started).await {
            last = s;
        }
        for (i, d) in drained.iter_mut().enumerate() {
            if d.is_none() && last.backlog[i] <= 0.0 {
                *d = Some(drain_started.elapsed().as_secs_f64());
            }
        }
    }
    let drain_secs = drain_started.elapsed().as_secs_f64();
    let text = reqwest::get(format!("{address}/metrics"))
        .await?
        .text()
        .await?;
    let counted = value(&text, "tickertape_hits_total{outcome=\"counted\"}") as i64;
    let peak_rss = server.peak_rss_mib();
    server.stop()?;
    let mut difference = [0i64; 3];
    for (i, g) in tickertape::storage::Resolution::ALL.iter().enumerate() {
        difference[i] = roles::stored(&store, *g).await? - counted;
    }
    let visit_storage = tickertape::storage::visit_log::storage(&store)
        .await
        .unwrap_or((0, 0));
    let visit_reads = visit_reads(db, &store).await?;
    store.db().drop().await?;
    let first = samples.first().cloned().unwrap_or_default();
    let during: Vec<&Sample> = samples.iter().filter(|s| s.at >= 5.0).collect();
    let lags = |i: usize| during.iter().map(|s| s.lag[i]).collect::<Vec<f64>>();
    let total = |v: &[f64; 4]| v.iter().sum::<f64>();
    let statements = total(&last.statements) - total(&first.statements);
    let applied_all = last.applied - first.applied;
    let streams = std::array::from_fn(|i| {
        let statements = last.statements[i] - first.statements[i];
        let secs = last.transaction_secs[i] - first.transaction_secs[i];
        StreamProfile {
            statements_per_hit: statements / applied_all.max(1.0),
            micros_per_statement: secs * 1e6 / statements.max(1.0),
            transaction_share: secs / (last.at - first.at).max(1.0),
            lag_p99: percentile(&lags(i), 0.99),
            drained_secs: drained[i].unwrap_or(f64::INFINITY),
        }
    });
    Ok(Outcome {
        all_applied_rate: counted as f64 / (load_secs + drain_secs).max(1.0),
        streams,
        app_cpu_per_hit_us: (last.app_cpu - first.app_cpu) * 1e6 / applied_all.max(1.0),
        db_cpu_per_hit_us: (last.db_cpu - first.db_cpu) * 1e6 / applied_all.max(1.0),
        peak_open_visits_mib: samples
            .iter()
            .map(|s| s.open_visits_bytes)
            .fold(0.0, f64::max)
            / (1 << 20) as f64,
        label: spec.label.clone(),
        rate,
        acked_rate: result.rate(),
        applied_rate: (at_end.applied - first.applied) / (load_secs - first.at).max(1.0),
        p99_ms: result.p99_us as f64 / 1000.0,
        lag_p50: percentile(&lags(0), 0.5),
        lag_p99: percentile(&lags(0), 0.99),
        lag_max: percentile(&lags(0), 1.0),
        rollups_p99: percentile(&lags(1), 0.99),
        sources_p99: percentile(&lags(2), 0.99),
        visits_p99: percentile(&lags(3), 0.99),
        visit_storage,
        visit_reads,
        end_backlog: at_end.backlog[0],
        end_lag: at_end.lag[0],
        drain_secs,
        statements_per_hit: statements / applied_all.max(1.0),
        micros_per_statement: (total(&last.transaction_secs) - total(&first.transaction_secs))
            * 1e6
            / statements.max(1.0),
        peak_rss,
        peak_journal_mib: samples.iter().map(|s| s.journal_bytes).fold(0.0, f64::max)
            / (1 << 20) as f64,
        difference,
        over_time: samples,
    })
}

pub async fn run(db: &mut Database, options: &Options) -> anyhow::Result<()> {
    let quick = options.quick;
    let seconds: u64 = env_or("BENCH_SUSTAINED_SECS", if quick { 20 } else { 300 });
    let connections: u32 = env_or("BENCH_SUSTAINED_CONNECTIONS", 64);
    let steps: usize = env_or("BENCH_SUSTAINED_STEPS", 3);
    let runs: Vec<RunSpec> = std::env::var("BENCH_SUSTAINED_RUNS")
        .unwrap_or_else(|_| "1000,10000,100000,100000u".into())
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(RunSpec::parse)
        .collect::<anyhow::Result<_>>()?;
    println!("\n## Sustained rate\n");
    println!(
        "durable acks, wrk with {connections} connections (paced runs 256), {seconds} s per run, `/metrics` read every second; a run keeps up when the minutes' lag stays under {FRESH_SECS} s (p99) and ends under it\n"
    );
    // The bare HTTP ceiling, in this run.
    let ceiling = roles::scenario(db, &Spec::parse("ceiling", connections)?, options).await?;
    println!(
        "HTTP ceiling (bench-only server, no database work): {:.0} hits/s",
        ceiling.wrk.rate()
    );
    print_header();
    let mut outcomes = Vec::new();
    let mut summary = Vec::new();
    for spec in &runs {
        if let Some(rate) = spec.pace {
            // A paced run alone: how the streams lag at a rate that is
            // not this machine's ceiling.
            let paced = run_one(db, spec, Some(rate), seconds, 256, options).await?;
            print_row(&paced);
            outcomes.push(paced);
            continue;
        }
        let saturating = run_one(db, spec, None, seconds, connections, options).await?;
        eprintln!(
            "sustained {}: acked {:.0}/s applied {:.0}/s lag p99 {:.1} s",
            spec.label, saturating.acked_rate, saturating.applied_rate, saturating.lag_p99
        );
        print_row(&saturating);
        let mut sustained = saturating.keeps_up().then_some(saturating.applied_rate);
        let mut rate = saturating.applied_rate * 0.9;
        outcomes.push(saturating);
        // Step down until a paced run keeps up (at most `steps` steps).
        for _ in 0..steps {
            if sustained.is_some() {
                break;
            }
            let paced = run_one(db, spec, Some(rate as u32), seconds, 256, options).await?;
            eprintln!(
                "sustained {} paced {:.0}: applied {:.0}/s lag p99 {:.1} s",
                spec.label, rate, paced.applied_rate, paced.lag_p99
            );
            print_row(&paced);
            if paced.keeps_up() {
                sustained = Some(paced.acked_rate);
            }
            outcomes.push(paced);
            rate *= 0.75;
        }
        let line = format!(
            "- **{}**: sustained rate {}",
            spec.label,
            sustained.map_or(
                format!("not found within {steps} paced steps"),
                |r| format!(
                    "{r:.0} hits/s ({:.0} % of the ceiling)",
                    r / ceiling.wrk.rate() * 100.0
                )
            )
        );
        eprintln!("{line}");
        summary.push(line);
    }
    println!();
    for line in &summary {
        println!("{line}");
    }
    print_over_time(&outcomes);
    let bad: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.difference != [0, 0, 0])
        .collect();
    anyhow::ensure!(
        bad.is_empty(),
        "{} sustained run(s) lost or added hits",
        bad.len()
    );
    Ok(())
}

fn print_header() {
    println!("\n| run | paced at | acked hits/s | applied hits/s (during the load) | p99 answer ms | minutes lag p50 / p99 / max s | hours+days lag p99 s | sources lag p99 s | backlog at the end (hits, lag s) | drain s | statements per hit | µs per statement (in transactions) | peak RSS MiB | peak journal MiB | keeps up | stored − 200s (minute/hour/day) |");
    println!("|---|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|");
}

/// One row of the table, printed as soon as its run is over (a long bench
/// that is stopped keeps what it measured).
fn print_row(o: &Outcome) {
    {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.1} | {:.1} / {:.1} / {:.1} | {:.1} | {:.1} | {:.0}, {:.1} | {:.1} | {:.3} | {:.0} | {:.0} | {:.0} | {} | {} |",
            o.label,
            o.rate.map_or("saturating".into(), |r| r.to_string()),
            o.acked_rate,
            o.applied_rate,
            o.p99_ms,
            o.lag_p50,
            o.lag_p99,
            o.lag_max,
            o.rollups_p99,
            o.sources_p99,
            o.end_backlog,
            o.end_lag,
            o.drain_secs,
            o.statements_per_hit,
            o.micros_per_statement,
            o.peak_rss,
            o.peak_journal_mib,
            if o.keeps_up() { "yes" } else { "no" },
            match o.difference {
                [0, 0, 0] => "0 / 0 / 0 (no loss)".to_owned(),
                d => format!("{} / {} / {} (LOST OR EXTRA)", d[0], d[1], d[2]),
            }
        );
    }
}

fn print_over_time(outcomes: &[Outcome]) {
    println!("\nOver time (every 30 s: acked/s, applied/s over the last 30 s, minutes backlog in hits, minutes lag s, hours+days lag s, app RSS MiB, journal MiB):\n");
    for o in outcomes {
        let mut marks = Vec::new();
        let mut prev: Option<&Sample> = None;
        for s in &o.over_time {
            if prev.is_none_or(|p| s.at - p.at >= 30.0) {
                if let Some(p) = prev {
                    let dt = s.at - p.at;
                    marks.push(format!(
                        "{:.0}s: {:.0}/{:.0}/{:.0}/{:.1}/{:.1}/{:.0}/{:.0}",
                        s.at,
                        (s.committed - p.committed) / dt,
                        (s.applied - p.applied) / dt,
                        s.backlog[0],
                        s.lag[0],
                        s.lag[1],
                        s.rss_mib,
                        s.journal_bytes / (1 << 20) as f64
                    ));
                }
                prev = Some(s);
            }
        }
        println!(
            "- {}{}: {}",
            o.label,
            o.rate.map_or(String::new(), |r| format!(" paced {r}")),
            marks.join(" · ")
        );
    }
}

//! The write path's targets, side by side in one run: the release server
//! at 10,000 pages of real-variety traffic (`pixel.lua`: 100,000 visitors,
//! six browsers, referrers and campaigns), saturated by wrk for
//! `BENCH_WRITE_PATH_SECS` (90; quick 15) with only the views' streams
//! (`BREAKDOWNS=false`, `VISIT_STORE=false`) and with every stream; then
//! paced at 70 % of the saturating rate (the every-stream run's
//! all-streams rate); then one client's flood (one
//! User-Agent and address); then 1,000 pages; beside the HTTP ceiling.
//!
//! Each run prints a profile per stream (statements per hit, µs per
//! statement, the share of the wall clock in its transactions, its lag
//! p99 and when it drained after the load) and the CPU per hit of the app
//! and of the database server, which is what `docs/design/applier.md`'s
//! profile is read from.
//!
//! Targets (each printed met or MISSED):
//! - every stream drained within 30 s of the end of the saturating load;
//! - at 70 % of the saturating rate, every stream's lag under 5 s at p99;
//! - with every stream on, the rate applied to every stream at least 0.8×
//!   the views-only rate;
//! - one client's flood at least 0.9× the many-client rate;
//! - the app's peak RSS under 300 MB at 10,000 pages, 200 MB at 1,000;
//! - at 1,000 pages, every view carrying two custom properties, at least
//!   0.9× the rate without them (the `small` run beside it).
//!
//! "The rate applied to every stream" is the hits counted over the load
//! and the drain that followed it: a run whose breakdowns trail by minutes
//! is not credited with its acknowledged rate.
//!
//! Options: `BENCH_WRITE_PATH=0` skips it, `BENCH_WRITE_PATH_ONLY=1` runs
//! only it; `BENCH_WRITE_PATH_SECS`; `BENCH_WRITE_PATH_RUNS` to run a
//! subset (`views,every,paced,flood,small,props`);
//! `BENCH_WRITE_PATH_BEFORE=<a release binary>` runs the every-stream run
//! again with that build right after this one's, and prints the ratio;
//! `BENCH_WRITE_PATH_VARIANT=+NAME=value[+…]` runs it again with those
//! settings (`TICKERTAPE_NAME`), e.g. `+APPLY_MAX_BUCKETS=40000`, beside it.

use crate::roles::{self, Database};
use crate::sustained::{run_one, Outcome, RunSpec, STREAMS};
use crate::{env_or, Options, Spec};

const DRAIN_TARGET_SECS: f64 = 30.0;
const PACED_SHARE: f64 = 0.7;
const PACED_LAG_TARGET_SECS: f64 = 5.0;
const EVERY_STREAM_TARGET: f64 = 0.8;
const FLOOD_TARGET: f64 = 0.9;
const RSS_TARGET_MB_10K: f64 = 300.0;
const RSS_TARGET_MB_1K: f64 = 200.0;
const PROPS_TARGET: f64 = 0.9;

pub async fn run(db: &mut Database, options: &Options) -> anyhow::Result<()> {
    let seconds: u64 = env_or("BENCH_WRITE_PATH_SECS", if options.quick { 15 } else { 90 });
    let connections: u32 = 64;
    let wanted = std::env::var("BENCH_WRITE_PATH_RUNS")
        .unwrap_or_else(|_| "views,every,paced,flood,small,props".into());
    let wants = |name: &str| wanted.split(',').any(|w| w.trim() == name);
    println!("\n## The write path: every stream at saturation\n");
    println!(
        "durable acks, wrk with {connections} connections (paced 256), {seconds} s per run, Zipf pages, real visitors unless said; \
         all-streams rate = hits counted ÷ (load + drain of the slowest stream)\n"
    );
    let ceiling = roles::scenario(db, &Spec::parse("ceiling", connections)?, options).await?;
    let ceiling_rate = ceiling.wrk.rate();
    println!("HTTP ceiling (bench-only server, no database work): {ceiling_rate:.0} hits/s\n");
    println!("| run | acked hits/s | ÷ ceiling | all-streams hits/s | minutes / hours+days / breakdowns / visits lag p99 s | drained after the load s (same order) | peak RSS MB | app / database CPU µs per hit | open visits peak MiB |");
    println!("|---|---:|---:|---:|---|---|---:|---|---:|");
    let mut runs: Vec<(&str, Outcome)> = Vec::new();
    let db: &Database = db;
    let go = |label: String, rate: Option<u32>| async move {
        let spec = RunSpec::parse(&label)?;
        let outcome = run_one(
            db,
            &spec,
            rate,
            seconds,
            if rate.is_some() { 256 } else { connections },
            options,
        )
        .await?;
        print_row(&outcome, ceiling_rate, rate);
        anyhow::Ok(outcome)
    };
    if wants("views") {
        runs.push((
            "views",
            go("10000+BREAKDOWNS=false+VISIT_STORE=false".into(), None).await?,
        ));
    }
    if wants("every") {
        runs.push(("every", go("10000".into(), None).await?));
        if let Ok(before) = std::env::var("BENCH_WRITE_PATH_BEFORE") {
            runs.push((
                "before",
                go(format!("10000+SERVE_BIN={before}"), None).await?,
            ));
        }
        if let Ok(variant) = std::env::var("BENCH_WRITE_PATH_VARIANT") {
            runs.push(("variant", go(format!("10000{variant}"), None).await?));
        }
    }
    if wants("paced") {
        // The saturating rate with every stream on is the rate every stream
        // applies (the all-streams rate), not what the pixel acknowledges
        // while the streams fall behind: pacing at a share of the latter
        // would load the streams past what they can take at saturation.
        if let Some(saturating) = find(&runs, "every").map(|o| o.all_applied_rate) {
            let rate = (saturating * PACED_SHARE) as u32;
            runs.push(("paced", go("10000".into(), Some(rate)).await?));
        }
    }
    if wants("flood") {
        runs.push(("flood", go("10000+VISITORS=1".into(), None).await?));
    }
    if wants("small") {
        runs.push(("small", go("1000".into(), None).await?));
    }
    if wants("props") {
        runs.push(("props", go("1000+PROPS=1".into(), None).await?));
    }
    println!("\nProfile per stream (statements per hit, µs per statement in transactions, seconds in transactions per second of load):\n");
    println!("| run | {} |", STREAMS.join(" | "));
    println!("|---|{}", "---|".repeat(STREAMS.len()));
    for (name, o) in &runs {
        let cells: Vec<String> = o
            .streams
            .iter()
            .map(|s| {
                format!(
                    "{:.3} · {:.0} µs · {:.2}",
                    s.statements_per_hit, s.micros_per_statement, s.transaction_share
                )
            })
            .collect();
        println!("| {name} ({}) | {} |", o.label, cells.join(" | "));
    }
    println!();
    for (name, o) in &runs {
        if let Some((visits, parts, documents)) = o.visit_reads {
            println!(
                "- {name}: its {visits} visits read back as a day without a pack is read, median of 3: from the parts {parts:.0} ms, from the same visits as visit documents {documents:.0} ms ({:.2}×)",
                parts / documents.max(0.001)
            );
        }
    }
    println!();
    let get = |name: &str| find(&runs, name);
    if let Some(every) = get("every") {
        let slowest = every
            .streams
            .iter()
            .map(|s| s.drained_secs)
            .fold(0.0, f64::max);
        println!(
            "- every stream drained {slowest:.1} s after a {seconds} s saturating load, 10,000 pages (target ≤ {DRAIN_TARGET_SECS} s): {}",
            verdict(slowest <= DRAIN_TARGET_SECS)
        );
        rss_line("10,000", every, RSS_TARGET_MB_10K);
        if let Some(views) = get("views") {
            ratio_line(
                "every stream ÷ views only",
                every,
                views,
                EVERY_STREAM_TARGET,
            );
        }
        if let Some(before) = get("before") {
            ratio_line(
                "every stream, this build ÷ the build before",
                every,
                before,
                1.0,
            );
        }
        if let Some(variant) = get("variant") {
            ratio_line(
                "every stream, the variant's settings ÷ the defaults",
                variant,
                every,
                1.0,
            );
        }
        if let Some(flood) = get("flood") {
            ratio_line(
                "one client's flood ÷ many clients",
                flood,
                every,
                FLOOD_TARGET,
            );
        }
    }
    if let Some(paced) = get("paced") {
        let worst = paced.streams.iter().map(|s| s.lag_p99).fold(0.0, f64::max);
        println!(
            "- at {:.0} % of the saturating rate, the most lagging stream's p99: {worst:.1} s (target < {PACED_LAG_TARGET_SECS} s): {}",
            PACED_SHARE * 100.0,
            verdict(worst < PACED_LAG_TARGET_SECS)
        );
    }
    if let Some(small) = get("small") {
        rss_line("1,000", small, RSS_TARGET_MB_1K);
        if let Some(props) = get("props") {
            ratio_line(
                "two custom properties on every view and a purchase with revenue in 20 hits ÷ none, 1,000 pages",
                props,
                small,
                PROPS_TARGET,
            );
        }
    }
    Ok(())
}

fn find<'a>(runs: &'a [(&str, Outcome)], name: &str) -> Option<&'a Outcome> {
    runs.iter().find(|(n, _)| *n == name).map(|(_, o)| o)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

/// Peak RSS in MB (the outcome's is in MiB).
fn peak_rss_mb(o: &Outcome) -> f64 {
    o.peak_rss * 1.048_576
}

fn rss_line(pages: &str, o: &Outcome, target_mb: f64) {
    let mb = peak_rss_mb(o);
    println!(
        "- app peak RSS at {pages} pages, every stream: {mb:.0} MB (target < {target_mb} MB): {}",
        verdict(mb < target_mb)
    );
}

/// `a`'s all-streams rate as a share of `b`'s, against its target.
fn ratio_line(what: &str, a: &Outcome, b: &Outcome, target: f64) {
    let ratio = a.all_applied_rate / b.all_applied_rate.max(1.0);
    println!(
        "- {what}, all-streams rate: {ratio:.2}× ({:.0} against {:.0} hits/s; acked {:.2}×) (target ≥ {target}×): {}",
        a.all_applied_rate,
        b.all_applied_rate,
        a.acked_rate / b.acked_rate.max(1.0),
        verdict(ratio >= target)
    );
}

fn print_row(o: &Outcome, ceiling: f64, rate: Option<u32>) {
    let join = |f: &dyn Fn(&crate::sustained::StreamProfile) -> f64| {
        o.streams
            .iter()
            .map(|s| {
                let v = f(s);
                if v.is_finite() {
                    format!("{v:.1}")
                } else {
                    "not drained".into()
                }
            })
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!(
        "| {}{} | {:.0} | {:.2} | {:.0} | {} | {} | {:.0} | {:.0} / {:.0} | {:.1} |",
        o.label,
        rate.map_or(String::new(), |r| format!(" paced at {r}/s")),
        o.acked_rate,
        o.acked_rate / ceiling.max(1.0),
        o.all_applied_rate,
        join(&|s| s.lag_p99),
        join(&|s| s.drained_secs),
        peak_rss_mb(o),
        o.app_cpu_per_hit_us,
        o.db_cpu_per_hit_us,
        o.peak_open_visits_mib,
    );
    eprintln!(
        "write path {}: acked {:.0}/s, all streams {:.0}/s, drained {}",
        o.label,
        o.acked_rate,
        o.all_applied_rate,
        join(&|s| s.drained_secs)
    );
}

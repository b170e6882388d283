//! What one bucket write costs the database: the latency of a flush of a
//! single hit (the commit floor every durable answer pays) and the server
//! CPU per update statement in a large flush (what bounds durable
//! throughput once batches are as merged as the traffic allows).

use chrono::{TimeDelta, Utc};
use std::time::Instant;
use tickertape::storage::bucket_writer::BucketWriter;

use crate::roles::Database;
use crate::SITE_DOMAIN;

/// CPU seconds (user + system) a process has used, from /proc.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / per_second)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub async fn run(db: &Database, quick: bool) -> anyhow::Result<()> {
    let rounds: usize = if quick { 10 } else { 20 };
    let (store, _) = db.fresh("bench_statements").await?;
    let writer = BucketWriter::new(&store);
    let deadline = || tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let minute = Utc::now() - TimeDelta::minutes(5);
    let names: Vec<String> = (1..=1000).map(|k| format!("{SITE_DOMAIN}/p/{k}")).collect();
    println!("\n## Cost of a bucket write ({rounds} transactions each, into existing buckets)\n");
    println!("| flush | update statements | wall ms p50 | server CPU µs per statement |");
    println!("|---|---:|---:|---:|");
    for pages in [1usize, 1000] {
        // Create the buckets first, so every measured statement is an
        // update of an existing bucket, as in steady traffic.
        let first: Vec<_> = names[..pages]
            .iter()
            .map(|n| (n.as_str(), minute))
            .collect();
        writer.apply_direct(&first, deadline()).await?;
        let mut walls = Vec::with_capacity(rounds);
        let cpu_before = db.server_pid().and_then(cpu_seconds);
        for round in 0..rounds {
            let at = minute + TimeDelta::seconds(round as i64 % 60);
            let hits: Vec<_> = names[..pages].iter().map(|n| (n.as_str(), at)).collect();
            let t = Instant::now();
            writer.apply_direct(&hits, deadline()).await?;
            walls.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let statements = 3 * pages;
        let cpu = match (cpu_before, db.server_pid().and_then(cpu_seconds)) {
            (Some(a), Some(b)) => format!("{:.0}", (b - a) * 1e6 / (rounds * statements) as f64),
            _ => "n/a (external server)".into(),
        };
        println!(
            "| {pages} page(s) × 1 hit | {statements} | {:.2} | {cpu} |",
            median(walls)
        );
    }
    store.db().drop().await?;
    Ok(())
}

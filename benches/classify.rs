//! Time per hit of classification at the pixel: the User-Agent
//! classifier over the table of real User-Agents, answered from its cache
//! and parsed anew, and the country lookup over a set of addresses in the
//! shipped database. `make bench` runs it; docs/benchmarks.md has results.

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tickertape::classify::{country, CountryDb, UserAgentClassifier};

fn user_agents() -> Vec<(&'static str, Option<u32>)> {
    include_str!("../src/classify/user_agents.tsv")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            (fields[0], fields[4].parse().ok())
        })
        .collect()
}

fn classify(c: &mut Criterion) {
    let classifier = UserAgentClassifier::new();
    let table = user_agents();
    let mut group = c.benchmark_group("user_agent");
    group.throughput(Throughput::Elements(table.len() as u64));
    group.bench_function("classify_cached", |b| {
        b.iter(|| {
            for (ua, width) in &table {
                black_box(classifier.classify(black_box(ua), *width));
            }
        })
    });
    // Each round sends strings never seen before, so every call parses:
    // the cost for a new browser version or a rare client.
    let mut round = 0u64;
    let mut fresh: Vec<String> = Vec::with_capacity(table.len());
    group.bench_function("classify_uncached", |b| {
        b.iter_batched_ref(
            || {
                round += 1;
                fresh.clear();
                fresh.extend(table.iter().map(|(ua, _)| format!("{ua} r{round}")));
                fresh.clone()
            },
            |uas| {
                for ua in uas.iter() {
                    black_box(classifier.classify(black_box(ua), None));
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn lookup(c: &mut Criterion) {
    let path = country::default_db_path();
    let db = CountryDb::open(&path)
        .unwrap_or_else(|e| panic!("{e}: `make setup` installs the country database"));
    let addresses: Vec<IpAddr> = [
        "8.8.8.8",
        "1.1.1.1",
        "9.9.9.9",
        "193.99.144.80",
        "133.242.0.3",
        "81.2.69.142",
        "41.203.64.1",
        "200.160.2.3",
        "203.0.178.191",
        "5.255.255.5",
        "2001:4860:4860::8888",
        "2a00:1450:4001:80b::200e",
        "2400:cb00::1",
        "2c0f:fb50:4003::1",
        "::ffff:8.8.4.4",
        "192.168.1.1",
    ]
    .iter()
    .map(|a| a.parse().expect("an address"))
    .collect();
    let mut group = c.benchmark_group("country");
    group.throughput(Throughput::Elements(addresses.len() as u64));
    group.bench_function("lookup", |b| {
        b.iter(|| {
            for ip in &addresses {
                black_box(db.lookup(black_box(*ip)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, classify, lookup);
criterion_main!(benches);

//! A year of traffic over 1,000 pages with sources, read through
//! site totals, source buckets and local days; and the write path's rate
//! with sources against the same hits without them, in the same run.
//!
//! BENCH_YEAR_DAILY (default 1,000; quick 300) views a day for 365 days,
//! Zipf over 1,000 pages, sources Zipf over 40 names (a third "direct").

use chrono::{DateTime, TimeDelta, Utc};
use std::time::{Duration, Instant};
use tickertape::domain::TimeZone;
use tickertape::journal::record::Record;
use tickertape::journal::segment::FORMAT;
use tickertape::reports::Resolution;
use tickertape::storage::breakdowns::BreakdownCounts;
use tickertape::storage::bucket_writer::{BucketWriter, Hit};
use tickertape::storage::progress::{self, Advance, Stream};
use tickertape::storage::sites;

use crate::report_latency::{login, measure};
use crate::roles::{stored, Database};
use crate::{Options, Rng, Server, SITE_DOMAIN};

const PAGES: usize = 1000;
const DATABASE: &str = "bench_year";

pub(crate) fn zipf_cdf(n: usize) -> Vec<f64> {
    let mut sum = 0.0;
    (1..=n)
        .map(|k| {
            sum += 1.0 / k as f64;
            sum
        })
        .collect()
}

pub(crate) fn pick(cdf: &[f64], rng: &mut Rng) -> usize {
    let r = rng.unit() * cdf.last().copied().unwrap_or(1.0);
    cdf.partition_point(|c| *c < r).min(cdf.len() - 1)
}

/// Browser, system, device, country and sometimes a campaign: 60 mixes.
pub(crate) fn profiles() -> Vec<tickertape::domain::Labels> {
    use tickertape::domain::{Dimension, Labels};
    let browsers = [
        ("Chrome", "Windows", "desktop"),
        ("Safari", "iOS", "mobile"),
        ("Firefox", "Linux", "desktop"),
        ("Chrome", "Android", "mobile"),
        ("Safari", "iPadOS", "tablet"),
    ];
    let countries = ["US", "DE", "FR", "JP", "BR", "IN"];
    let mut out = Vec::new();
    for (i, (browser, os, device)) in browsers.into_iter().enumerate() {
        for (j, country) in countries.into_iter().enumerate() {
            for campaign in [None, Some(format!("c{}", (i + j) % 7))] {
                let mut labels = Labels::default()
                    .with(Dimension::Browser, browser)
                    .with(Dimension::Os, os)
                    .with(Dimension::Device, device)
                    .with(Dimension::Country, country);
                if let Some(c) = campaign {
                    labels.set(Dimension::Medium, "email");
                    labels.set(Dimension::Campaign, c);
                }
                out.push(labels);
            }
        }
    }
    out
}

pub(crate) fn source_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "direct",
        "google.com",
        "duckduckgo.com",
        "news.ycombinator.com",
        "bing.com",
        "reddit.com",
        "github.com",
        "newsletter",
        "mastodon.social",
        "lobste.rs",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    names.extend((0..30).map(|i| format!("blog{i}.example")));
    names
}

fn start(db: &Database) -> anyhow::Result<Server> {
    crate::serve_release(db, DATABASE)
}

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    if std::env::var("BENCH_YEAR_INGEST_ONLY").is_ok_and(|v| v == "1") {
        return ingestion_with_and_without_sources(db, options).await;
    }
    let daily: u64 = std::env::var("BENCH_YEAR_DAILY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if options.quick { 300 } else { 1_000 });
    let started = Instant::now();
    let now = Utc::now();
    let start_day = Resolution::Day.floor(now) - TimeDelta::days(364);
    let total = daily * 365;
    let reused = if crate::roles::reuse_year() {
        let store = db.store(DATABASE).await?;
        let site = sites::list(&store).await?.into_iter().next();
        match site {
            Some(site) if stored(&store, Resolution::Day).await? == total as i64 => {
                tickertape::indexes::ensure(&store).await?;
                eprintln!("year data: reusing the last run's {total} views");
                Some((store, site.id.to_string()))
            }
            _ => None,
        }
    } else {
        None
    };
    let loaded = reused.is_some();
    let (store, site_id) = match reused {
        Some(kept) => kept,
        None => db.fresh(DATABASE).await?,
    };
    let names: Vec<String> = (1..=PAGES)
        .map(|k| format!("{SITE_DOMAIN}/p/{k}"))
        .collect();
    let sources = source_names();
    let (page_cdf, source_cdf) = (zipf_cdf(PAGES), zipf_cdf(sources.len()));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let writer = BucketWriter::new(&store);
    let profiles = profiles();
    // Day by day, as the applier sees traffic (a batch covers a short
    // stretch of time): a batch spanning the whole year made the source
    // lookup's `$in` of bucket times huge and timed the transaction out.
    for day in (0..365).filter(|_| !loaded) {
        let from = start_day + TimeDelta::days(day);
        let span = (now - from).num_seconds().clamp(1, 86_400) as u64;
        let batch: Vec<(usize, DateTime<Utc>, usize)> = (0..daily)
            .map(|_| {
                (
                    pick(&page_cdf, &mut rng),
                    from + TimeDelta::seconds((rng.next_u64() % span) as i64),
                    pick(&source_cdf, &mut rng),
                )
            })
            .collect();
        let visits = if with_visits() {
            visits_of(&batch, daily, &names, &mut rng)
        } else {
            vec![None; batch.len()]
        };
        // Every view with its breakdowns: one of the profiles,
        // picked by the source's draw so no extra randomness moves the rest.
        let hits: Vec<Hit<'_>> = batch
            .iter()
            .zip(&visits)
            .map(|(&(p, at, s), visit)| Hit {
                page: names[p].as_str(),
                at,
                source: Some(sources[s].as_str()),
                visit: visit.as_ref(),
                labels: Some(&profiles[(p + s) % profiles.len()]),
            })
            .collect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        writer.apply_direct(&hits, deadline).await?;
    }
    anyhow::ensure!(
        stored(&store, Resolution::Day).await? == total as i64,
        "year data incomplete"
    );
    let day_docs = store
        .buckets(Resolution::Day)
        .estimated_document_count()
        .await?;
    let hour_docs = store
        .buckets(Resolution::Hour)
        .estimated_document_count()
        .await?;
    if !loaded {
        eprintln!(
            "year data: {total} views, {day_docs} page-day and {hour_docs} page-hour buckets, written in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    // What the hour and day buckets take per view, with or without
    // visitors and visits (BENCH_YEAR_VISITS=0 for the before).
    let mut storage = Vec::new();
    for coll in [
        "views_hour",
        "views_day",
        "site_views_hour",
        "site_views_day",
        "sources_hour",
        "sources_day",
        "site_sources_hour",
        "site_sources_day",
    ] {
        let stats = store
            .db()
            .run_command(bson::doc! {"collStats": coll})
            .await?;
        let size = tickertape::storage::values::count(stats.get("size"));
        let on_disk = tickertape::storage::values::count(stats.get("storageSize"));
        storage.push(format!(
            "{coll}: {:.1} B/view ({:.1} on disk)",
            size as f64 / total as f64,
            on_disk as f64 / total as f64
        ));
    }
    println!(
        "\nYear data storage ({}): {}\n",
        if with_visits() {
            "with visitors and visits"
        } else {
            "views only (BENCH_YEAR_VISITS=0)"
        },
        storage.join("; ")
    );
    if !loaded {
        crate::report_latency::create_admin(&store, now).await?;
    }

    let base = format!("/sites/{site_id}");
    let presets = [
        ("last hour", "1h"),
        ("last 24 hours", "24h"),
        ("today", "today"),
        ("yesterday", "yesterday"),
        ("last 7 days", "7d"),
        ("last 30 days", "30d"),
        ("this month", "month"),
        ("last month", "lastmonth"),
        ("last 12 months", "12mo"),
    ];
    println!(
        "\n## A year of traffic: site totals, sources, zones ({total} views over 365 days, {PAGES} pages, {} sources; {day_docs} page-day and {hour_docs} page-hour buckets; 50 sequential requests each, loopback)\n",
        sources.len()
    );
    for zone in ["UTC", "Europe/Berlin"] {
        let site = sites::list(&store)
            .await?
            .into_iter()
            .next()
            .expect("the bench site");
        sites::set_time_zone(&store, &site, TimeZone::parse(zone)?).await?;
        let server = start(db)?;
        let http = login(&server.address).await?;
        let mut cases: Vec<(String, String)> = vec![
            (
                "site dashboard, 12 months (target < 50 ms)".into(),
                format!("{base}?range=12mo"),
            ),
            (
                "site dashboard, 30 days (target < 30 ms)".into(),
                format!("{base}?range=30d"),
            ),
            (
                "site CSV by hour, 30 days (target < 100 ms)".into(),
                format!("{base}/series.csv?range=30d&res=hour"),
            ),
            (
                "page report /p/1, 12 months (target < 30 ms in Europe/Berlin)".into(),
                format!("{base}/page?path=/p/1&range=12mo"),
            ),
            (
                "top sources CSV, 12 months (target < 50 ms)".into(),
                format!("{base}/sources.csv?range=12mo"),
            ),
            (
                "browser CSV, 12 months (target < 50 ms)".into(),
                format!("{base}/breakdown.csv?range=12mo&dimension=browser"),
            ),
            (
                "device CSV, 12 months (target < 50 ms)".into(),
                format!("{base}/breakdown.csv?range=12mo&dimension=device"),
            ),
            (
                "country CSV, 12 months (target < 50 ms)".into(),
                format!("{base}/breakdown.csv?range=12mo&dimension=country"),
            ),
            (
                "campaign CSV, 12 months (target < 50 ms)".into(),
                format!("{base}/breakdown.csv?range=12mo&dimension=campaign"),
            ),
            ("sites list".into(), "/sites".into()),
            (
                "visitors chart, 12 months (target < 50 ms)".into(),
                format!("{base}?range=12mo&metric=visitors"),
            ),
            (
                "visitors chart, 30 days (target < 50 ms)".into(),
                format!("{base}?range=30d&metric=visitors"),
            ),
            (
                "visits CSV, 30 days by day".into(),
                format!("{base}/visits.csv?range=30d"),
            ),
        ];
        for (label, key) in presets {
            cases.push((
                format!("dashboard preset: {label}"),
                format!("{base}?range={key}"),
            ));
        }
        println!("\n### Site in {zone}\n");
        println!("| report | p50 ms | p99 ms | bytes |");
        println!("|---|---:|---:|---:|");
        for (name, path) in &cases {
            let (p50, p99, bytes) = measure(&http, &server.address, name, path).await?;
            println!("| {name} | {p50:.1} | {p99:.1} | {bytes} |");
        }
        server.stop()?;
    }
    if !crate::roles::reuse_year() {
        store.db().drop().await?;
    }
    if std::env::var("BENCH_YEAR_INGEST").is_ok_and(|v| v == "0") {
        return Ok(());
    }
    ingestion_with_and_without_sources(db, options).await
}

/// The write path as a lane's appliers send it, with the same hits once
/// with sources and once without (each into its own database on the same
/// server), alternating rounds so both see the same server state: one
/// views transaction per batch (a second of traffic), and with sources one
/// sources transaction per [`SOURCES_EVERY`] batches (the sources
/// applier's default batch), its hits decoded from journal records as that
/// applier reads them, each with its progress document like the appliers'.
async fn ingestion_with_and_without_sources(
    db: &Database,
    options: &Options,
) -> anyhow::Result<()> {
    // Each variant has its own database, so the hits without sources
    // write buckets that never held any (as in a world without them).
    let (plain, _) = db.fresh("bench_sources_ingest_plain").await?;
    let (store, _) = db.fresh("bench_sources_ingest").await?;
    let writers = [BucketWriter::new(&plain), BucketWriter::new(&store)];
    let journal = uuid::Uuid::new_v4().to_string();
    for s in [&plain, &store] {
        progress::ensure_lane(s, &journal, 0, 0).await?;
    }
    // Each variant's positions: views, sources, rollups.
    let mut positions = [[0u64; 3]; 2];
    let names: Vec<String> = (1..=PAGES)
        .map(|k| format!("{SITE_DOMAIN}/p/{k}"))
        .collect();
    let sources = source_names();
    let (page_cdf, source_cdf) = (zipf_cdf(PAGES), zipf_cdf(sources.len()));
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    // A round holds whole sources batches.
    let (rounds, batches, per_batch) = if options.quick {
        (2, 3, 5_000)
    } else {
        (5, sources_every().max(10), 20_000)
    };
    let mut minute = Resolution::Minute.floor(Utc::now()) - TimeDelta::days(2);
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // CPU per hit, µs: the server's and this process's (the writer's side).
    let mut server_cpu: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut writer_cpu: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let cpu = |pid: Option<u32>| pid.and_then(crate::statement_cost::cpu_seconds);
    for _ in 0..rounds {
        for (i, with_sources) in [false, true].into_iter().enumerate() {
            let mut hits_sent = 0usize;
            let mut spent = Duration::ZERO;
            let (server_before, writer_before) =
                (cpu(db.server_pid()), cpu(Some(std::process::id())));
            let mut journaled: Vec<u8> = Vec::new();
            for b in 0..batches {
                // A batch is about one second of traffic: one minute's
                // buckets, like an applier's.
                minute += TimeDelta::minutes(1);
                let batch: Vec<(usize, DateTime<Utc>, usize)> = (0..per_batch)
                    .map(|_| {
                        (
                            pick(&page_cdf, &mut rng),
                            minute + TimeDelta::seconds((rng.next_u64() % 60) as i64),
                            pick(&source_cdf, &mut rng),
                        )
                    })
                    .collect();
                let t = Instant::now();
                let views: Vec<Hit<'_>> = batch
                    .iter()
                    .map(|&(p, at, s)| Hit {
                        page: names[p].as_str(),
                        at,
                        source: with_sources.then(|| sources[s].as_str()),
                        visit: None,
                        labels: Default::default(),
                    })
                    .collect();
                // The minutes, then the hours and days, each with its
                // stream's advance (the appliers write them apart).
                for stream in [Stream::Views, Stream::Rollups] {
                    let step = advance(&journal, &mut positions[i], stream, views.len());
                    writers[i].apply(views.iter().copied(), Some(&step)).await?;
                }
                spent += t.elapsed();
                hits_sent += views.len();
                if with_sources {
                    // The sources applier reads its hits back from the
                    // journal's files: encoded here, decoded in the timing.
                    for hit in &views {
                        Record {
                            page: hit.page.to_owned(),
                            at: hit.at,
                            source: hit.source.map(str::to_owned),
                            visit: None,
                            labels: Default::default(),
                            props: Default::default(),
                            revenue: None,
                            engagement: None,
                        }
                        .encode_into(&mut journaled);
                    }
                    if (b + 1) % sources_every() == 0 || b + 1 == batches {
                        let t = Instant::now();
                        let records = decode_all(&std::mem::take(&mut journaled))?;
                        let n = records.len();
                        let mut counts = BreakdownCounts::default();
                        for r in &records {
                            counts.add_record(r);
                        }
                        // The applier would have cut a fuller batch short.
                        anyhow::ensure!(!counts.is_full(), "a sources batch past its bounds");
                        let step = advance(&journal, &mut positions[i], Stream::Sources, n);
                        writers[i].apply_breakdowns(counts.iter(), n, &step).await?;
                        spent += t.elapsed();
                    }
                }
            }
            rates[i].push(hits_sent as f64 / spent.as_secs_f64());
            let per_hit = |before: Option<f64>, after: Option<f64>| {
                before
                    .zip(after)
                    .map(|(b, a)| (a - b) * 1e6 / hits_sent as f64)
            };
            server_cpu[i].extend(per_hit(server_before, cpu(db.server_pid())));
            writer_cpu[i].extend(per_hit(writer_before, cpu(Some(std::process::id()))));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (without, with) = (median(&mut rates[0]), median(&mut rates[1]));
    let cpu_cell = |v: &mut Vec<f64>| {
        if v.is_empty() {
            "n/a".to_owned()
        } else {
            format!("{:.1}", median(v))
        }
    };
    println!(
        "\n### Write path with and without sources ({rounds} alternating rounds of {batches} batches × {} hits over {PAGES} pages, one minute's buckets per batch, sources applied every {} batches; median of rounds)\n",
        per_batch,
        sources_every()
    );
    println!("| hits | hits/s (median) | server CPU µs per hit | writer CPU µs per hit |");
    println!("|---|---:|---:|---:|");
    for (i, (label, rate)) in [("without sources", without), ("with sources", with)]
        .into_iter()
        .enumerate()
    {
        println!(
            "| {label} | {rate:.0} | {} | {} |",
            cpu_cell(&mut server_cpu[i]),
            cpu_cell(&mut writer_cpu[i])
        );
    }
    println!("\nwith / without: {:.3} (target ≥ 0.90)", with / without);
    store.db().drop().await?;
    plain.db().drop().await?;
    Ok(())
}

/// Views batches per sources batch: the sources applier's default batch
/// (600,000 hits, or 30 s of traffic) over the views applier's (20,000
/// hits, or 1 s). BENCH_SOURCES_EVERY=n sets another, to see the trade-off.
const SOURCES_EVERY: usize = 30;

/// Whether the year data carries visitors and visits (BENCH_YEAR_VISITS,
/// default 1).
fn with_visits() -> bool {
    std::env::var("BENCH_YEAR_VISITS").map_or(true, |v| v != "0")
}

/// Visits for a day's hits as the pixel would make them: the day's views
/// come from about a third as many visitors; a visitor's hits in time
/// order make visits, a gap of 30 minutes or more starting a new one.
fn visits_of(
    batch: &[(usize, DateTime<Utc>, usize)],
    daily: u64,
    names: &[String],
    rng: &mut Rng,
) -> Vec<Option<tickertape::journal::Visit>> {
    let pool = (daily / 3).max(1);
    let day = batch.first().map_or(0, |h| h.1.timestamp() / 86_400) as u64;
    let who: Vec<u64> = batch.iter().map(|_| rng.next_u64() % pool).collect();
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by_key(|&i| (who[i], batch[i].1));
    let mut out = vec![None; batch.len()];
    let mut open: Option<(u64, DateTime<Utc>, usize, usize, u32)> = None;
    for i in order {
        let (page, at, _) = batch[i];
        let visitor = (day << 32) ^ who[i].wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let visit = match open {
            Some((v, last, entry, previous, views))
                if v == who[i] && at - last < TimeDelta::minutes(30) =>
            {
                open = Some((v, at, entry, page, views + 1));
                tickertape::journal::Visit {
                    visitor,
                    duration_secs: (at - last).num_seconds().max(0) as u32,
                    entry: Some(names[entry].clone()),
                    previous: Some(names[previous].clone()),
                    second_view: views == 1,
                    place: None,
                }
            }
            _ => {
                open = Some((who[i], at, page, page, 1));
                tickertape::journal::Visit {
                    visitor,
                    ..Default::default()
                }
            }
        };
        out[i] = Some(visit);
    }
    out
}

fn sources_every() -> usize {
    std::env::var("BENCH_SOURCES_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(SOURCES_EVERY)
}

/// Records as a lane's files hold them, decoded as the applier reads them.
fn decode_all(mut bytes: &[u8]) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    while !bytes.is_empty() {
        let (record, len) = Record::decode(bytes, FORMAT)?;
        records.push(record);
        bytes = &bytes[len..];
    }
    Ok(records)
}

/// The next applier transaction's advance of `stream`, moving its
/// (made-up) journal position by the batch's hits as a lane's would; the
/// batch fails the bench if it does not commit.
fn advance<'a>(
    journal: &'a str,
    positions: &mut [u64; 3],
    stream: Stream,
    hits: usize,
) -> Advance<'a> {
    let from = positions[stream.index()];
    positions[stream.index()] = from + hits as u64;
    Advance {
        journal,
        lane: 0,
        stream,
        from,
        to: from + hits as u64,
    }
}

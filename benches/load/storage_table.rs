//! Seed 000's comparison: the same hits stored one document per hit (with
//! an index on {page, timestamp}) and as buckets, at a low and a high
//! density of views per page-minute.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::time::Instant;
use tickertape::storage::values::count as number;
use tickertape::storage::{Resolution, Store};

use crate::roles::{load_hits, Database};
use crate::{repo, Options};

const PAGES: u64 = 1000;
const DAYS: i64 = 7;

/// The hits of one density: `per_minute` views on each chosen page-minute,
/// spread over 7 days and 1,000 pages, `total` in all.
fn hits(total: u64, per_minute: u64) -> impl Iterator<Item = (String, DateTime<Utc>)> {
    let start = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
    let page_minutes = total / per_minute;
    let minutes = (DAYS * 1440) as u64;
    let pages_per_minute = page_minutes.div_ceil(minutes).clamp(1, PAGES);
    (0..page_minutes).flat_map(move |i| {
        let minute = start + TimeDelta::minutes((i / pages_per_minute) as i64);
        let page = format!(
            "{}/p/{}",
            crate::SITE_DOMAIN,
            (i % pages_per_minute) * (PAGES / pages_per_minute).max(1) + 1
        );
        (0..per_minute).map(move |k| {
            (
                page.clone(),
                minute + TimeDelta::seconds((k * 60 / per_minute) as i64),
            )
        })
    })
}

fn dir_bytes(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

async fn settle(store: &Store) {
    // Ask for a checkpoint so files on disk reflect the data; not every
    // server supports it, and the figure is then only approximate.
    let _ = store
        .client()
        .database("admin")
        .run_command(doc! {"fsync": 1})
        .await;
}

struct Measured {
    layout: &'static str,
    density: u64,
    hits: u64,
    docs: i64,
    size: i64,
    storage: i64,
    index: i64,
    disk: Option<i64>,
    seconds: f64,
}

async fn stats(store: &Store, collections: &[&str]) -> (i64, i64, i64, i64) {
    let (mut docs, mut size, mut storage, mut index) = (0, 0, 0, 0);
    for c in collections {
        let s = store
            .db()
            .run_command(doc! {"collStats": *c})
            .await
            .unwrap_or_default();
        docs += number(s.get("count"));
        size += number(s.get("size"));
        storage += number(s.get("storageSize"));
        index += number(s.get("totalIndexSize"));
    }
    (docs, size, storage, index)
}

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    let data_dir = std::env::var("MONGODB_URI")
        .is_err()
        .then(|| repo().join("target/bench-db"));
    let disk = || data_dir.as_deref().map(dir_bytes);
    let total = options.storage_hits;
    let mut rows = Vec::new();
    for density in [1u64, 30] {
        // One document per hit.
        let store = db.store(&format!("bench_storage_raw_{density}")).await?;
        store.db().drop().await?;
        let raw = store.db().collection::<Document>("hits");
        raw.create_index(
            mongodb::IndexModel::builder()
                .keys(doc! {"page": 1, "timestamp": 1})
                .build(),
        )
        .await?;
        settle(&store).await;
        let before = disk();
        let started = Instant::now();
        let mut batch = Vec::with_capacity(10_000);
        for (page, at) in hits(total, density) {
            batch.push(doc! {"page": page, "timestamp": bson::DateTime::from_chrono(at)});
            if batch.len() == 10_000 {
                raw.insert_many(std::mem::take(&mut batch))
                    .ordered(false)
                    .await?;
            }
        }
        if !batch.is_empty() {
            raw.insert_many(batch).ordered(false).await?;
        }
        let seconds = started.elapsed().as_secs_f64();
        settle(&store).await;
        let (docs, size, storage, index) = stats(&store, &["hits"]).await;
        rows.push(Measured {
            layout: "one document per hit",
            density,
            hits: total,
            docs,
            size,
            storage,
            index,
            disk: before.zip(disk()).map(|(b, a)| a as i64 - b as i64),
            seconds,
        });
        store.db().drop().await?;

        // Buckets, through the product's writer.
        let store = db
            .store(&format!("bench_storage_buckets_{density}"))
            .await?;
        store.db().drop().await?;
        tickertape::indexes::ensure(&store).await?;
        settle(&store).await;
        let before = disk();
        let started = Instant::now();
        load_hits(&store, hits(total, density)).await?;
        let seconds = started.elapsed().as_secs_f64();
        settle(&store).await;
        let names: Vec<&str> = Resolution::ALL.iter().map(|g| g.collection()).collect();
        let (docs, size, storage, index) = stats(&store, &names).await;
        rows.push(Measured {
            layout: "buckets (minute + hour + day)",
            density,
            hits: total,
            docs,
            size,
            storage,
            index,
            disk: before.zip(disk()).map(|(b, a)| a as i64 - b as i64),
            seconds,
        });
        let minute = stats(&store, &["views_minute"]).await;
        rows.push(Measured {
            layout: "  of which views_minute",
            density,
            hits: total,
            docs: minute.0,
            size: minute.1,
            storage: minute.2,
            index: minute.3,
            disk: None,
            seconds: 0.0,
        });
        store.db().drop().await?;
    }
    println!(
        "\n## Storage ({} hits over {DAYS} days and {PAGES} pages; collStats bytes)\n",
        total
    );
    println!("| layout | views per page-minute | documents | data size | storage size | index size | disk growth | bytes per hit (data+index) | load time s |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            r.layout,
            r.density,
            r.docs,
            r.size,
            r.storage,
            r.index,
            r.disk.map_or("n/a".into(), |d| d.to_string()),
            (r.size + r.index) as f64 / r.hits as f64,
            if r.seconds > 0.0 {
                format!("{:.1}", r.seconds)
            } else {
                String::new()
            }
        );
    }
    preallocation_cost(db, options).await
}

/// What preallocation adds per day: pages at the default
/// threshold's traffic (one view a minute), a day of it written by upserts
/// alone, and the same day into buckets preallocated for all 24 hours.
async fn preallocation_cost(db: &Database, options: &Options) -> anyhow::Result<()> {
    use tickertape::preallocation::{self, PreallocRequest, Scope, Trigger};
    let pages: u64 = if options.quick { 20 } else { 200 };
    let day = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    let traffic = move || {
        (0..1440u64).flat_map(move |m| {
            (1..=pages).map(move |p| {
                (
                    format!("{}/p/{p}", crate::SITE_DOMAIN),
                    day + TimeDelta::minutes(m as i64) + TimeDelta::seconds((p % 60) as i64),
                )
            })
        })
    };
    let names: Vec<&str> = Resolution::ALL.iter().map(|g| g.collection()).collect();
    let mut rows = Vec::new();
    for preallocated in [false, true] {
        let store = db
            .store(&format!("bench_prealloc_cost_{preallocated}"))
            .await?;
        store.db().drop().await?;
        tickertape::indexes::ensure(&store).await?;
        if preallocated {
            for p in 1..=pages {
                let page =
                    tickertape::domain::Page::parse(&format!("{}/p/{p}", crate::SITE_DOMAIN))?;
                let request = PreallocRequest {
                    scope: Scope::Page(page),
                    from: day,
                    hours: 24,
                    threshold: preallocation::DEFAULT_THRESHOLD,
                };
                preallocation::run(&store, &request, Trigger::Cli, "bench", day).await?;
            }
        }
        load_hits(&store, traffic()).await?;
        settle(&store).await;
        let (docs, size, storage, index) = stats(&store, &names).await;
        rows.push((preallocated, docs, size, storage, index));
        store.db().drop().await?;
    }
    println!(
        "\n## What preallocation adds per day ({pages} pages at one view a minute, the default threshold; 24 hours preallocated vs upserts only; collStats bytes)\n"
    );
    println!("| buckets | documents | data size | storage size | index size | data + index per page-day |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (preallocated, docs, size, storage, index) in &rows {
        println!(
            "| {} | {docs} | {size} | {storage} | {index} | {:.0} |",
            if *preallocated {
                "preallocated, then counted"
            } else {
                "upserted by the hits"
            },
            (size + index) as f64 / pages as f64
        );
    }
    if let [(_, _, s0, _, i0), (_, _, s1, _, i1)] = rows.as_slice() {
        println!(
            "\nPreallocation adds {:.0} bytes (data + index) per page per day ({:.2}×).",
            ((s1 + i1) - (s0 + i0)) as f64 / pages as f64,
            (s1 + i1) as f64 / (s0 + i0).max(1) as f64
        );
    }
    Ok(())
}

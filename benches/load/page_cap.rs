//! The new-page cap against its two loads, under the default
//! settings. A real big site (Zipf, s = 1, over 10,000 and 100,000 pages,
//! saturating): the share of views counted under `/(other)` in the first
//! minute and in the next. A junk flood (unique random paths at full rate,
//! to one site, then spread over 20): the bucket documents it creates, the
//! pages the app remembers and its memory.
//!
//! `BENCH_PAGE_CAP=0` skips it; `BENCH_PAGE_CAP_SECS` (default 60; quick
//! 10) is the length of each round.

use bson::doc;

use crate::roles::{self, Database};
use crate::{env_or, wrk, Options, Spec, SITE_DOMAIN};
use tickertape::domain::DomainName;
use tickertape::storage::sites::{self, NewSite};
use tickertape::storage::{Resolution, Store};

async fn metrics(address: &str) -> anyhow::Result<String> {
    Ok(reqwest::get(format!("{address}/metrics"))
        .await?
        .text()
        .await?)
}

fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Waits until every stream has applied everything.
pub async fn drained(address: &str) -> anyhow::Result<()> {
    for _ in 0..3000 {
        let m = metrics(address).await?;
        let left: f64 = ["", "_rollups", "_sources"]
            .iter()
            .map(|s| value(&m, &format!("tickertape_journal{s}_backlog_hits")))
            .sum();
        if left == 0.0 {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    anyhow::bail!("the backlog did not drain")
}

/// Views stored under `domain/(other)`, and in all, at minute level.
async fn overflow(store: &Store, domain: &str) -> anyhow::Result<(i64, i64)> {
    let all = roles::stored(store, Resolution::Minute).await?;
    let page = format!("{domain}{}", tickertape::ingest::page_cap::OVERFLOW_PATH);
    let docs: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        store
            .db()
            .collection::<bson::Document>(Resolution::Minute.collection())
            .aggregate([
                doc! {"$match": {"page": page}},
                doc! {"$group": {"_id": null, "n": {"$sum": "$totalViews"}}},
            ])
            .await?,
    )
    .await?;
    let under = docs
        .first()
        .map_or(0, |d| tickertape::storage::values::count(d.get("n")));
    Ok((under, all))
}

async fn documents(store: &Store) -> anyhow::Result<u64> {
    let mut n = 0;
    for g in Resolution::ALL {
        n += store
            .db()
            .collection::<bson::Document>(g.collection())
            .count_documents(doc! {})
            .await?;
    }
    Ok(n)
}

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    let seconds: u64 = env_or("BENCH_PAGE_CAP_SECS", if options.quick { 10 } else { 60 });
    println!("\n## The new-page cap\n");
    println!(
        "default settings (1,000 pages a site an hour at first sight, then at the second view up to 100,000 a site and 1,000,000 an instance); wrk, 64 connections, {seconds} s rounds\n"
    );
    println!("| load | round | hits/s | views | under /(other) | share |");
    println!("|---|---|---:|---:|---:|---:|");
    for pages in [10_000u32, 100_000] {
        let db_name = "bench_page_cap";
        let (store, site) = db.fresh(db_name).await?;
        let server = roles::product(db, db_name, &[])?;
        let address = server.address.clone();
        let mut before = (0, 0);
        for round in ["first", "second"] {
            let spec = Spec::parse("durable", 64)?;
            let opts = Options {
                duration: seconds,
                pages,
                ..options.clone()
            };
            let result = tokio::task::spawn_blocking({
                let (address, site) = (address.clone(), site.clone());
                move || wrk(&address, &site, &spec, &opts)
            })
            .await??;
            drained(&address).await?;
            let now = overflow(&store, SITE_DOMAIN).await?;
            let (under, all) = (now.0 - before.0, now.1 - before.1);
            println!(
                "| Zipf s=1, {pages} pages | {round} {seconds} s | {:.0} | {all} | {under} | {:.3} % |",
                result.rate(),
                under as f64 * 100.0 / all.max(1) as f64
            );
            before = now;
        }
        server.stop()?;
        store.db().drop().await?;
    }
    // The junk flood: one site, then twenty.
    let db_name = "bench_page_cap_junk";
    let (store, site) = db.fresh(db_name).await?;
    let mut ids = vec![site];
    for i in 1..20 {
        let new = NewSite {
            domain: DomainName::parse(&format!("junk{i}.test"))?,
            aliases: vec![],
            name: None,
            owners: vec![],
            time_zone: tickertape::domain::TimeZone::UTC,
        };
        ids.push(
            sites::insert(&store, new, chrono::Utc::now())
                .await?
                .id
                .to_string(),
        );
    }
    let server = roles::product(db, db_name, &[])?;
    let address = server.address.clone();
    println!("\n| junk flood | hits/s | new bucket documents | pages remembered | refused by the instance budget | app peak RSS MiB |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (label, chosen) in [("1 site", &ids[..1]), ("20 sites", &ids[..])] {
        let docs_before = documents(&store).await?;
        let spec = Spec::parse("durable", 64)?;
        let opts = Options {
            duration: seconds,
            popularity: "junk",
            ..options.clone()
        };
        let result = tokio::task::spawn_blocking({
            let (address, sites) = (address.clone(), chosen.join(","));
            move || wrk(&address, &sites, &spec, &opts)
        })
        .await??;
        drained(&address).await?;
        let m = metrics(&address).await?;
        println!(
            "| {label}, {seconds} s of unique random paths | {:.0} | {} | {:.0} | {:.0} | {:.0} |",
            result.rate(),
            documents(&store).await? - docs_before,
            value(&m, "tickertape_page_cap_known_pages"),
            value(&m, "tickertape_page_cap_instance_refusals_total"),
            server.peak_rss_mib()
        );
    }
    server.stop()?;
    store.db().drop().await?;
    Ok(())
}

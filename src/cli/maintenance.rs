//! `tickertape setup`, `preallocate`, the backfills and `demo`: the
//! operator's commands.

use anyhow::Context;
use clap::Args;

use super::{sites_named, with_store, DatabaseArgs};
use crate::demo::{self, DemoOptions};
use crate::domain::DomainName;
use crate::ingest::standalone::Standalone;
use crate::preallocation::{self, PreallocForm, Trigger};
use crate::settings::Settings;
use crate::storage::{sharding, site_totals, sites, stored_dates};
use std::sync::atomic::Ordering::Relaxed;

pub(super) async fn backfill_site_totals(args: BackfillArgs) -> anyhow::Result<()> {
    let BackfillArgs { site, all, db } = args;
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let chosen: Vec<_> = sites_named(&store, site.as_deref())
            .await?
            .into_iter()
            .filter(|s| all || site.is_some() || !s.totals_complete)
            .collect();
        if chosen.is_empty() {
            eprintln!("Every site's totals are complete; nothing to do (--all recomputes them).");
        }
        // A site that fails is reported and the next goes on; the
        // command fails at the end if any did.
        let mut failed = Vec::new();
        for s in chosen {
            let started = std::time::Instant::now();
            let r = match stored_dates::guarded(site_totals::backfill(&store, &s)).await {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{}: failed: {e:#}", s.domain);
                    failed.push(s.domain.to_string());
                    continue;
                }
            };
            println!(
                "{}: {} views; site buckets written: {} day, {} hour, {} minute ({:.1} s)",
                s.domain,
                r.views,
                r.buckets[2],
                r.buckets[1],
                r.buckets[0],
                started.elapsed().as_secs_f64()
            );
            if r.skipped > 0 {
                println!(
                    "{}: {} page-day bucket(s) dated outside 1990 to the day after tomorrow left out",
                    s.domain, r.skipped
                );
            }
        }
        if !failed.is_empty() {
            anyhow::bail!("the backfill failed for {}", failed.join(", "));
        }
        Ok(())
    })
    .await
}

pub(super) async fn backfill_page_summaries(args: SummariesArgs) -> anyhow::Result<()> {
    let SummariesArgs { site, db } = args;
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        // A site that fails is reported and the next goes on; the
        // command fails at the end if any did.
        let mut failed = Vec::new();
        for s in sites_named(&store, site.as_deref()).await? {
            if !s.totals_complete {
                println!(
                    "{}: skipped, its site totals are not complete yet (run backfill-site-totals)",
                    s.domain
                );
                continue;
            }
            let started = std::time::Instant::now();
            let skipped_before = store.background().skipped_buckets.load(Relaxed);
            let backfill = crate::reports::page_totals::backfill(&store, &s);
            let days = match stored_dates::guarded(backfill).await {
                Ok(days) => days,
                Err(e) => {
                    eprintln!("{}: failed: {e:#}", s.domain);
                    failed.push(s.domain.to_string());
                    continue;
                }
            };
            println!(
                "{}: {days} days with views summarised ({:.1} s)",
                s.domain,
                started.elapsed().as_secs_f64()
            );
            let skipped =
                (store.background().skipped_buckets.load(Relaxed)).saturating_sub(skipped_before);
            if skipped > 0 {
                println!(
                    "{}: {skipped} day(s) dated outside 1990 to the day after tomorrow left out",
                    s.domain
                );
            }
        }
        if !failed.is_empty() {
            anyhow::bail!("the backfill failed for {}", failed.join(", "));
        }
        Ok(())
    })
    .await
}

pub(super) async fn setup(args: SetupArgs) -> anyhow::Result<()> {
    let SetupArgs {
        shard,
        db,
        retention,
    } = args;
    let retention = retention.retention().context("retention settings")?;
    with_store(&db, |store| async move {
        let report = crate::indexes::ensure(&store).await?;
        for line in &report.indexes {
            println!("{line}");
        }
        for line in crate::storage::retention::apply(&store, &retention).await? {
            println!("{line}");
        }
        if shard {
            for line in sharding::shard(&store).await? {
                println!("{line}");
            }
        } else {
            for warning in sharding::warnings(&store).await {
                eprintln!("warning: {warning}");
            }
        }
        Ok(())
    })
    .await
}

pub(super) async fn preallocate(args: PreallocateArgs) -> anyhow::Result<()> {
    let PreallocateArgs {
        site,
        page,
        from,
        hours,
        threshold,
        db,
    } = args;
    let form = PreallocForm {
        scope: None,
        site,
        page,
        from,
        hours,
    };
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let now = chrono::Utc::now();
        let all: Vec<_> = sites::list(&store)
            .await?
            .into_iter()
            .map(std::sync::Arc::new)
            .collect();
        let request = form.validate(threshold, &all, now)?;
        let who = std::env::var("USER").unwrap_or_else(|_| "cli".into());
        let run = preallocation::run(&store, &request, Trigger::Cli, &who, now).await?;
        println!(
            "{}: {} page(s), {} hour(s) from {}: {} inserted, {} already present, {} ms",
            run.scope,
            run.pages,
            run.hours,
            run.from_hour.to_chrono().format("%Y-%m-%d %H:%M UTC"),
            run.inserted,
            run.already_present,
            run.duration_ms
        );
        for e in &run.errors {
            eprintln!("error: {e}");
        }
        anyhow::ensure!(run.errors.is_empty(), "the run had errors");
        Ok(())
    })
    .await
}

pub(super) async fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let DemoArgs {
        days,
        daily_views,
        domain,
        if_empty,
        db,
    } = args;
    let domain = DomainName::parse(&domain).with_context(|| format!("--domain {domain:?}"))?;
    let options = DemoOptions {
        domain,
        days,
        daily_views,
        seed: 20261122,
    };
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let started = std::time::Instant::now();
        // Through a journal and appliers of its own: every store gets the
        // demo as it gets the pixel's hits.
        let journal = Standalone::open(&store, Settings::defaults().ingest.apply_config()).await?;
        let report = demo::generate(
            &store,
            journal.appender(),
            &options,
            chrono::Utc::now(),
            if_empty,
        )
        .await?;
        journal.finish(std::time::Duration::from_secs(600)).await?;
        if report.skipped {
            eprintln!(
                "The demo site {} already exists; nothing written.",
                report.site.domain
            );
        } else {
            eprintln!(
                "Wrote {} views over {} days for the demo site {} in {:.1} s.",
                report.hits,
                days,
                report.site.domain,
                started.elapsed().as_secs_f64()
            );
        }
        Ok(())
    })
    .await
}

#[derive(Args)]
pub(super) struct SetupArgs {
    /// Shard views_minute, views_hour and views_day on {page: 1,
    /// timestamp: 1}, pre-splitting empty ones over the shards.
    #[arg(long)]
    shard: bool,
    #[command(flatten)]
    db: DatabaseArgs,
    #[command(flatten)]
    retention: crate::settings::RetentionSettings,
}

#[derive(Args)]
pub(super) struct PreallocateArgs {
    /// Only the active pages of this site (a domain).
    #[arg(long, conflicts_with = "page")]
    site: Option<String>,
    /// Only this page, written domain/path (preallocated even if idle).
    #[arg(long)]
    page: Option<String>,
    /// The first hour, YYYY-MM-DDTHH:00 (UTC); default: the next hour.
    #[arg(long)]
    from: Option<String>,
    /// How many hours, 1 to 48.
    #[arg(long)]
    hours: Option<String>,
    /// Views in the current hour that make a page active.
    #[arg(long, env = "TICKERTAPE_PREALLOC_THRESHOLD", default_value_t = crate::preallocation::DEFAULT_THRESHOLD)]
    threshold: i64,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct DemoArgs {
    /// Days of traffic, ending now.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=400))]
    days: u32,
    /// Average views per day.
    #[arg(long, default_value_t = 4000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    daily_views: u32,
    /// The demo site's domain.
    #[arg(long, default_value = crate::demo::DEFAULT_DOMAIN)]
    domain: String,
    /// Do nothing if the demo site already exists.
    #[arg(long)]
    if_empty: bool,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct SummariesArgs {
    /// Only this site (its domain); default: every site.
    #[arg(long)]
    site: Option<String>,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct BackfillArgs {
    /// Only this site (its domain); default: every site not done yet.
    #[arg(long)]
    site: Option<String>,
    /// Recompute sites already done too.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    db: DatabaseArgs,
}

//! The `tickertape` command line.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::app::serve::{has_local_database, local_uri_file, start_local, stop_local};
use crate::domain::SiteId;
use crate::settings::{DatabaseSettings, LocalDbSettings};
use crate::storage::{sites, Store};

mod email;
mod imports;
mod maintenance;
mod serve;
mod site;
mod user;

use imports::ImportCommand;
use maintenance::{BackfillArgs, DemoArgs, PreallocateArgs, SetupArgs, SummariesArgs};
use serve::ServeArgs;
use site::SiteCommand;
use user::UserCommand;

#[derive(Parser)]
#[command(
    name = "tickertape",
    version,
    about = "Self-hosted page-view analytics on MongoDB"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the pixel and the web app; the only command that creates the
    /// embedded database.
    Serve(Box<ServeArgs>),
    /// Create indexes and apply the retention (TTL indexes); with --shard,
    /// shard the bucket collections (mongos only).
    Setup(SetupArgs),
    /// Manage sites.
    #[command(subcommand)]
    Site(SiteCommand),
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Preallocate the zero-filled buckets of coming hours.
    Preallocate(PreallocateArgs),
    /// Recompute the site totals (site_views_*) of sites whose page
    /// buckets predate them; idempotent and exact, safe while serving.
    /// `serve` runs it at start for every site not done yet.
    BackfillSiteTotals(BackfillArgs),
    /// Make and store the page summaries (each page's figures over aligned
    /// spans of whole past days) that long-range reports read, for sites
    /// whose totals are complete; idempotent, safe while serving. `serve`
    /// runs it at start and every hour; reports make missing ones as
    /// they need them.
    BackfillPageSummaries(SummariesArgs),
    /// Create a demo site and fill it with synthetic traffic.
    Demo(DemoArgs),
    /// Import a peer's history into a site: validated whole first (a bad
    /// row names its file, line and column, and nothing is written), then
    /// applied exactly once (a second run, or a run after a crash, adds
    /// only what is not in yet).
    #[command(subcommand)]
    Import(ImportCommand),
    /// Email reports: send one now (docs/email.md).
    #[command(subcommand)]
    Email(email::EmailCommand),
}

#[derive(Args)]
struct DatabaseArgs {
    #[command(flatten)]
    database: DatabaseSettings,
    #[command(flatten)]
    local_db: LocalDbSettings,
}

pub fn main() -> ExitCode {
    crate::telemetry::init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::serve(*args).await,
        Command::Setup(args) => maintenance::setup(args).await,
        Command::Site(SiteCommand::Add(args)) => site::add_site(args).await,
        Command::User(UserCommand::Add(args)) => user::add_user(args).await,
        Command::User(UserCommand::ResetLogin(args)) => user::reset_login(args).await,
        Command::Preallocate(args) => maintenance::preallocate(args).await,
        Command::Demo(args) => maintenance::demo(args).await,
        Command::Site(SiteCommand::List(args)) => site::list_sites(args).await,
        Command::Site(SiteCommand::SetTimeZone(args)) => site::set_time_zone(args).await,
        Command::Site(SiteCommand::SetPageCap(args)) => site::set_page_cap(args).await,
        Command::BackfillSiteTotals(args) => maintenance::backfill_site_totals(args).await,
        Command::BackfillPageSummaries(args) => maintenance::backfill_page_summaries(args).await,
        Command::Import(command) => imports::run(command).await,
        Command::Email(command) => email::run(command).await,
    }
}

/// A site by its id or its domain.
async fn site_by_id_or_domain(store: &Store, given: &str) -> anyhow::Result<sites::Site> {
    match SiteId::parse(&given.to_ascii_lowercase()) {
        Ok(id) => sites::list(store)
            .await?
            .into_iter()
            .find(|s| s.id == id)
            .with_context(|| format!("no site has the id {given}")),
        Err(_) => site_by_domain(store, given).await,
    }
}

async fn site_by_domain(store: &Store, domain: &str) -> anyhow::Result<sites::Site> {
    sites::list(store)
        .await?
        .into_iter()
        .find(|s| s.domain.as_str() == domain)
        .with_context(|| format!("no site has the domain {domain:?}"))
}

/// Every site, or the one with domain `site` (an error when there is none).
async fn sites_named(store: &Store, site: Option<&str>) -> anyhow::Result<Vec<sites::Site>> {
    let chosen: Vec<_> = sites::list(store)
        .await?
        .into_iter()
        .filter(|s| site.is_none_or(|d| s.domain.as_str() == d))
        .collect();
    if let (Some(d), true) = (site, chosen.is_empty()) {
        anyhow::bail!("no site has the domain {d:?}");
    }
    Ok(chosen)
}

/// Runs `f` with a store: `MONGODB_URI` if set, else the embedded database
/// of a running `serve`, else `serve`'s embedded database started for the
/// command. Never a new one: a command run from another directory would
/// otherwise write to a database `serve` never reads.
async fn with_store<F, Fut>(args: &DatabaseArgs, f: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let db = &args.database;
    let options = &db.store_options()?;
    let connect = |uri: String| async move { Store::connect(options, &uri).await };
    if let Some(uri) = db.uri() {
        return f(connect(uri.to_owned()).await?).await;
    }
    if let Ok(uri) = std::fs::read_to_string(local_uri_file(&args.local_db)) {
        let quick = tokio::time::timeout(
            std::time::Duration::from_secs(3),
            connect(uri.trim().to_owned()),
        );
        if let Ok(Ok(store)) = quick.await {
            return f(store).await;
        }
    }
    let db_dir = args.local_db.data_dir.join("db");
    if !has_local_database(&db_dir) {
        let shown = |p: PathBuf| std::path::absolute(&p).unwrap_or(p).display().to_string();
        anyhow::bail!(
            "no database found: MONGODB_URI is not set, no running `serve` is recorded in {}, \
             and {} holds no embedded database. Only `serve` creates one. Set TICKERTAPE_DATA_DIR \
             to the data directory `serve` uses (its default is ./data, relative to where it runs), \
             or MONGODB_URI to the database it uses.",
            shown(local_uri_file(&args.local_db)),
            shown(db_dir)
        );
    }
    let local = start_local(&args.local_db).await?;
    let result = async { f(connect(local.uri().to_owned()).await?).await }.await;
    stop_local(local).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }
}

//! The `tickertape` command line.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::clock;
use crate::domain::DomainName;
use crate::localdb::{self, LocalDb, LocalDbOptions};
use crate::settings::{public_url_or, DatabaseSettings, LocalDbSettings, Settings};
use crate::startup::Application;
use crate::storage::{schema, sites, Store};
use crate::web::snippets;

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
    /// Serve the pixel and the web app.
    Serve(Settings),
    /// Create indexes, and shard the bucket collections when connected to a mongos.
    Setup(DatabaseArgs),
    /// Manage sites.
    #[command(subcommand)]
    Site(SiteCommand),
}

#[derive(Args)]
struct DatabaseArgs {
    #[command(flatten)]
    database: DatabaseSettings,
    #[command(flatten)]
    local_db: LocalDbSettings,
}

#[derive(Subcommand)]
enum SiteCommand {
    /// Add a site and print its id and the snippets to embed.
    Add {
        /// The site's canonical domain, e.g. example.com.
        #[arg(long)]
        domain: String,
        /// Another host whose pages count for this site (repeatable).
        #[arg(long = "alias")]
        aliases: Vec<String>,
        /// A display name (default: the domain).
        #[arg(long = "name", id = "site_name")]
        name: Option<String>,
        /// The URL browsers reach Tickertape at, for the snippets.
        #[arg(
            long,
            env = "TICKERTAPE_PUBLIC_URL",
            default_value = "http://127.0.0.1:8000"
        )]
        public_url: String,
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// List sites.
    List {
        #[command(flatten)]
        db: DatabaseArgs,
    },
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
        Command::Serve(settings) => serve(settings).await,
        Command::Setup(args) => {
            with_store(&args, |store| async move {
                let report = schema::ensure_schema(&store).await?;
                for line in report.indexes.iter().chain(&report.sharding) {
                    println!("{line}");
                }
                Ok(())
            })
            .await
        }
        Command::Site(SiteCommand::Add {
            domain,
            aliases,
            name,
            public_url,
            db,
        }) => {
            let domain =
                DomainName::parse(&domain).with_context(|| format!("--domain {domain:?}"))?;
            let aliases = aliases
                .iter()
                .map(|a| DomainName::parse(a).with_context(|| format!("--alias {a:?}")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            with_store(&db, |store| async move {
                schema::ensure_schema(&store).await?;
                let new = sites::NewSite {
                    domain,
                    aliases,
                    name,
                    owners: vec![],
                };
                let site = sites::insert(&store, new, chrono::Utc::now()).await?;
                let s = snippets::for_site(&public_url, &site.id);
                println!("{}", site.id);
                eprintln!(
                    "Added {} ({}). Embed one of these on its pages:",
                    site.domain, site.name
                );
                eprintln!("\n  Script (counts each page's path):\n    {}", s.script);
                eprintln!(
                    "\n  Pixel only (no JavaScript; page from the Referer):\n    {}\n",
                    s.pixel
                );
                Ok(())
            })
            .await
        }
        Command::Site(SiteCommand::List { db }) => {
            with_store(&db, |store| async move {
                for site in sites::list(&store).await? {
                    let aliases: Vec<_> = site.aliases.iter().map(|a| a.to_string()).collect();
                    println!(
                        "{}\t{}\t{}\t{}",
                        site.id,
                        site.domain,
                        site.name,
                        aliases.join(",")
                    );
                }
                Ok(())
            })
            .await
        }
    }
}

/// Where a running `serve` records its embedded database, so that CLI
/// commands run beside it use the same server instead of a second one
/// (which could not open the locked data directory).
fn local_uri_file(local: &LocalDbSettings) -> PathBuf {
    local.data_dir.join("localdb.uri")
}

async fn start_local(local: &LocalDbSettings) -> anyhow::Result<LocalDb> {
    let binary = localdb::locate(local.localdb_bin.as_deref())?;
    let db = LocalDb::start(
        &binary,
        &local.data_dir.join("db"),
        &LocalDbOptions::default(),
    )
    .await?;
    Ok(db)
}

async fn stop_local(db: LocalDb) {
    let _ = tokio::task::spawn_blocking(move || db.stop()).await;
}

/// Runs `f` with a store: `MONGODB_URI` if set, else the embedded database
/// of a running `serve`, else a temporary embedded one.
async fn with_store<F, Fut>(args: &DatabaseArgs, f: F) -> anyhow::Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let db = &args.database;
    let connect = |uri: String| async move {
        Store::connect(&uri, &db.name, &db.write_concern, db.write_timeout()).await
    };
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
    let local = start_local(&args.local_db).await?;
    let result = async { f(connect(local.uri().to_owned()).await?).await }.await;
    stop_local(local).await;
    result
}

/// A start-up line on stdout. A server must not die because nobody reads
/// its console, so a closed stdout is ignored (`println!` would panic).
fn announce(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

async fn serve(mut settings: Settings) -> anyhow::Result<()> {
    let local = match settings.database.uri() {
        Some(_) => None,
        None => {
            let db = start_local(&settings.local_db).await?;
            std::fs::write(local_uri_file(&settings.local_db), db.uri())?;
            announce(&format!(
                "embedded database pid {} at {}",
                db.pid(),
                db.uri()
            ));
            Some(db)
        }
    };
    let result = async {
        let uri = match &local {
            Some(db) => db.uri().to_owned(),
            None => settings.database.uri().unwrap_or_default().to_owned(),
        };
        let db = &settings.database;
        let store = Store::connect(&uri, &db.name, &db.write_concern, db.write_timeout()).await?;
        tracing::info!(topology = ?store.topology(), database = %db.name, "connected");
        schema::ensure_schema(&store).await?;
        let app = Application::build(&settings, store, clock::system()).await?;
        settings.listen.set_port(app.port());
        announce(&format!(
            "tickertape listening on http://{}",
            settings.listen
        ));
        announce(&format!(
            "embed snippets use {} (set TICKERTAPE_PUBLIC_URL to change)",
            public_url_or(settings.public_url.as_deref(), settings.listen)
        ));
        app.run_until_stopped().await
    }
    .await;
    if let Some(db) = local {
        let _ = std::fs::remove_file(local_uri_file(&settings.local_db));
        stop_local(db).await;
    }
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

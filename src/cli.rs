//! The `tickertape` command line.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::accounts::password::NewPassword;
use crate::accounts::{users, Role};
use crate::clock;
use crate::demo::{self, DemoOptions};
use crate::domain::{DomainName, Email, SiteId, TimeZone};
use crate::localdb::{self, LocalDb, LocalDbOptions};
use crate::preallocation::{self, PreallocForm, Trigger};
use crate::settings::{public_url_or, DatabaseSettings, LocalDbSettings, Settings};
use crate::startup::Application;
use crate::storage::{sharding, site_totals, sites, stored_dates, Store};
use crate::web::snippets;
use std::sync::atomic::Ordering::Relaxed;

mod email;

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

#[derive(Subcommand)]
enum ImportCommand {
    /// GoatCounter's CSV export (format version 2), plain or gzipped: one
    /// row per view, counted at its own time.
    Goatcounter(ImportArgs),
    /// Umami's `website_event` rows as `psql \copy … CSV HEADER` writes
    /// them (README, "Switching from Umami"), ordered by `created_at`,
    /// with the `session` rows for browsers, systems, devices and
    /// countries: views and events at their own time, Umami's visits.
    Umami(UmamiArgs),
    /// Plausible CE's CSV export, the zip or its files in a directory:
    /// days' figures of views, visitors, visits, pages, entries, exits,
    /// sources, countries, devices, browsers, systems and events, counted
    /// at each day's first instant in the site's zone.
    Plausible(ImportArgs),
    /// Takes an import's figures back, exactly, and forgets it: its file
    /// is read again (from where the import read it, or `--file`) and must
    /// be the same. A delete killed midway and run again completes.
    Delete(DeleteImport),
    /// The imports run so far: key, kind, site, file, rows, skipped days,
    /// state; tab-separated.
    List(ListImports),
}

#[derive(Args)]
struct DeleteImport {
    /// The import's key, as `import list` shows it.
    key: String,
    /// The export, if it has moved since the import.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Umami's session file, if it has moved since the import.
    #[arg(long)]
    sessions: Option<PathBuf>,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct ListImports {
    #[command(flatten)]
    db: DatabaseArgs,
}

/// What an import does with rows on days the site already has views on
/// (decided when it first starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Overlap {
    /// Leave those days as they are: their rows are skipped and counted in
    /// the summary.
    Skip,
    /// Add the rows to what the days have.
    Add,
    /// Clear what the days have, then apply the rows: the days show the
    /// import's figures alone. Only days already over (and, for a zone off
    /// UTC, a zone whose midnight is on a UTC hour); other days are skipped.
    Replace,
}

#[derive(Args)]
struct ImportArgs {
    /// The site: its id or its domain.
    #[arg(long)]
    site: String,
    /// The export file.
    file: PathBuf,
    /// Rows on days the site already has views on (decided by the first
    /// run of an import; a rerun keeps that decision).
    #[arg(long, value_enum, default_value = "skip")]
    overlap: Overlap,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct UmamiArgs {
    #[command(flatten)]
    import: ImportArgs,
    /// The `session` rows (session_id, browser, os, device, country); up
    /// to 10 million sessions, 21 bytes each in memory. Without it the
    /// views' browser, system, device and country are "unknown".
    #[arg(long)]
    sessions: Option<PathBuf>,
    /// The Umami website (its `website_id`) whose rows to import, when it
    /// is not the site's own id; rows of other websites are skipped and
    /// counted. Without it, a row of a website other than the site's id
    /// is refused.
    #[arg(long, value_name = "WEBSITE_ID")]
    from_website: Option<String>,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    settings: Settings,
    /// Before serving, create the demo site with 30 days of synthetic
    /// traffic unless it already has views (`make run`).
    #[arg(long)]
    demo_if_empty: bool,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Add a user; the password is read from the first line of stdin.
    Add(AddUser),
    /// Give a user a new one-time password (printed; it works for 7 days,
    /// only to choose their own), turn off their two-factor login and end
    /// their sessions and API tokens: the way back in for a locked-out admin.
    ResetLogin(ResetLogin),
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
    Add(AddSite),
    /// List sites: id, domain, name, time zone and aliases, tab-separated.
    List(ListSites),
    /// Set the IANA time zone a site's reports are in.
    SetTimeZone(SetTimeZone),
    /// Set a site's own new-page cap: `default`, `none` or new pages per hour.
    SetPageCap(SetPageCap),
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
        Command::Serve(args) => {
            let ServeArgs {
                settings,
                demo_if_empty,
            } = *args;
            serve(settings, demo_if_empty).await
        }
        Command::Setup(args) => setup(args).await,
        Command::Site(SiteCommand::Add(args)) => add_site(args).await,
        Command::User(UserCommand::Add(args)) => add_user(args).await,
        Command::User(UserCommand::ResetLogin(args)) => reset_login(args).await,
        Command::Preallocate(args) => preallocate(args).await,
        Command::Demo(args) => demo(args).await,
        Command::Site(SiteCommand::List(args)) => list_sites(args).await,
        Command::Site(SiteCommand::SetTimeZone(args)) => set_time_zone(args).await,
        Command::Site(SiteCommand::SetPageCap(args)) => set_page_cap(args).await,
        Command::BackfillSiteTotals(args) => backfill_site_totals(args).await,
        Command::BackfillPageSummaries(args) => backfill_page_summaries(args).await,
        Command::Import(ImportCommand::Goatcounter(args)) => import_goatcounter(args).await,
        Command::Import(ImportCommand::Umami(args)) => import_umami(args).await,
        Command::Import(ImportCommand::Plausible(args)) => import_plausible(args).await,
        Command::Import(ImportCommand::List(args)) => list_imports(args).await,
        Command::Import(ImportCommand::Delete(args)) => delete_import(args).await,
        Command::Email(command) => email::run(command).await,
    }
}

async fn list_imports(args: ListImports) -> anyhow::Result<()> {
    with_store(&args.db, |store| async move {
        let sites = sites::list(&store).await?;
        for i in crate::storage::imports::list(&store, None).await? {
            let domain = sites
                .iter()
                .find(|s| s.id.to_string() == i.site)
                .map_or("(deleted site)".to_owned(), |s| s.domain.to_string());
            let state = match i.finished_at {
                Some(at) => format!(
                    "done {} ({} views, {} events)",
                    at.to_rfc3339(),
                    i.views,
                    i.events
                ),
                None if i.deleting => {
                    "being deleted: run `import delete` again to finish".to_owned()
                }
                None => "incomplete: run it again to finish, or `import delete` it".to_owned(),
            };
            let days: Vec<String> = i.skipped_days.iter().map(|d| d.to_string()).collect();
            let replaced: Vec<String> = i.replaced.iter().map(|r| r.day.to_string()).collect();
            println!(
                "{}\t{}\t{domain}\t{}\t{} rows\tskipped days: {}{}\t{state}",
                i.key,
                i.kind,
                i.file,
                i.rows,
                if days.is_empty() {
                    "none".to_owned()
                } else {
                    days.join(" ")
                },
                if replaced.is_empty() {
                    String::new()
                } else {
                    format!("\treplaced days: {}", replaced.join(" "))
                }
            );
        }
        Ok(())
    })
    .await
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

/// What decides where an import's rows land besides its file: the
/// site's hosts (sources, pages given as addresses), for Plausible's days
/// its zone, and the version, whose User-Agent rules name browsers and
/// systems. `import delete` must run under the same.
fn import_context(kind: &str, site: &sites::Site) -> String {
    let mut hosts: Vec<String> = std::iter::once(&site.domain)
        .chain(&site.aliases)
        .map(|h| h.to_string())
        .collect();
    hosts.sort();
    let zone = match kind {
        crate::import::plausible::KIND => site.time_zone.name(),
        _ => "-",
    };
    format!(
        "hosts={} zone={zone} version={}",
        hosts.join(","),
        env!("CARGO_PKG_VERSION")
    )
}

fn refuse_while_deleting(record: &crate::storage::imports::ImportRecord) -> anyhow::Result<()> {
    anyhow::ensure!(
        !record.deleting,
        "import {} is being deleted: run `tickertape import delete {}` to finish first",
        record.key,
        record.key
    );
    Ok(())
}

/// A file's path as an import records it: absolute, so that `import
/// delete` finds it from anywhere.
fn recorded_path(path: &std::path::Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_owned())
        .display()
        .to_string()
}

async fn delete_import(args: DeleteImport) -> anyhow::Result<()> {
    use crate::import::{self, goatcounter, plausible, umami};
    use crate::storage::imports;
    with_store(&args.db, |store| async move {
        let record = imports::get(&store, &args.key).await?.with_context(|| {
            format!(
                "no import has the key {}: `tickertape import list` shows them",
                args.key
            )
        })?;
        // An import that never completed (killed, or refused on a rerun
        // by rules newer than it) is taken back as far as each of its
        // streams got: its file is read that far, and rows after it need
        // not pass today's rules.
        let until = match record.finished_at {
            Some(_) => None,
            None => {
                let mut until = [0u64; 3];
                for stream in crate::storage::progress::Stream::ALL {
                    until[stream.index()] =
                        crate::storage::progress::position(&store, &record.key, 0, stream)
                            .await?
                            .unwrap_or(0);
                }
                Some(until)
            }
        };
        let limit = until.map_or(u64::MAX, |u| u.into_iter().max().unwrap_or(0));
        let site = site_by_id_or_domain(&store, &record.site).await?;
        let now = import_context(&record.kind, &site);
        anyhow::ensure!(
            record.context.is_empty() || record.context == now,
            "import {} ran with {} and the site now has {now}: its rows would not land \
             where they did, so it cannot be taken back exactly (set the site back, or \
             run the Tickertape version it ran with)",
            record.key,
            record.context
        );
        // A replacing import that has not cleared its days yet may clear
        // some of this one's rows after they are taken back here.
        if let Some(replacing) = imports::list(&store, Some(&record.site))
            .await?
            .into_iter()
            .find(|o| o.key != record.key && !o.replaced.is_empty() && !o.cleared)
        {
            anyhow::bail!(
                "import {} replaces days of this site and has not cleared them yet: \
                 run it again to complete it first",
                replacing.key
            );
        }
        let file = args
            .file
            .clone()
            .unwrap_or_else(|| record.file.clone().into());
        let name = file.display().to_string();
        let open = |path: &std::path::Path| {
            import::open(path).with_context(|| format!("reading {}", path.display()))
        };
        // The deletion's own progress: a delete killed midway resumes, and
        // one of a later import of the same file is another.
        let delete_key = format!(
            "delete/{}/{}",
            record.key,
            record.started_at.timestamp_millis()
        );
        let not_the_file = || {
            anyhow::anyhow!(
                "{name} is not the file import {} read (its content differs): \
                 give that file with --file",
                record.key
            )
        };
        let summary = match record.kind.as_str() {
            plausible::KIND => {
                let export = plausible::Export::open(&file)?;
                if import::key(plausible::KIND, &site.id, &export.content()?) != record.key {
                    return Err(not_the_file());
                }
                // Every row it read checked, as far as it got.
                let mut count = 0u64;
                for row in export.rows(&site)?.take(limit_rows(limit)) {
                    let _counted_or_skipped = row?;
                    count += 1;
                }
                let rows = export
                    .rows(&site)?
                    .take(limit_rows(limit))
                    .map_while(Result::ok);
                // From here the import may be half taken back: it must not
                // run again until the delete ends.
                imports::mark_deleting(&store, &record.key).await?;
                let summary = apply_checked(
                    &store,
                    &record,
                    (&delete_key, -1, until),
                    (&name, count),
                    rows,
                )
                .await?;
                anyhow::ensure!(summary.rows == count, "{name} changed while it was read");
                summary
            }
            kind @ (goatcounter::KIND | umami::KIND) => {
                let user_agents = crate::classify::UserAgentClassifier::new();
                let (sessions, also) = match (
                    kind,
                    args.sessions
                        .clone()
                        .or(record.also_file.clone().map(Into::into)),
                ) {
                    (umami::KIND, Some(path)) => {
                        let shown = path.display().to_string();
                        let (read, hasher) = import::Hashing::new(open(&path)?);
                        let sessions = umami::Sessions::load(read, &shown)?;
                        let hash = hasher.borrow().finalize();
                        (sessions, Some(hash))
                    }
                    _ => (umami::Sessions::default(), None),
                };
                let websites = match record.from_website.as_deref() {
                    Some(id) => umami::Websites::From(
                        uuid::Uuid::try_parse(id)
                            .with_context(|| format!("the import's website {id:?}"))?,
                    ),
                    None => umami::Websites::Any,
                };
                let rows = |read: Box<dyn std::io::Read>| -> Result<
                    Box<
                        dyn Iterator<Item = Result<crate::import::Row, crate::import::RowError>>
                            + '_,
                    >,
                    crate::import::RowError,
                > {
                    Ok(match kind {
                        goatcounter::KIND => {
                            Box::new(goatcounter::rows(read, &name, site.clone(), &user_agents)?)
                        }
                        _ => Box::new(umami::rows(read, &name, site.clone(), &sessions, websites)?),
                    })
                };
                // The content as the import hashed it, read whole.
                let (mut read, hasher) = import::Hashing::new(open(&file)?);
                std::io::copy(&mut read, &mut std::io::sink())
                    .with_context(|| format!("reading {name}"))?;
                let content = umami_content(hasher.borrow().clone(), also, &record.from_website);
                if import::key(kind, &site.id, &content) != record.key {
                    return Err(not_the_file());
                }
                let mut count = 0u64;
                for row in rows(open(&file)?)?.take(limit_rows(limit)) {
                    let _counted_or_skipped = row?;
                    count += 1;
                }
                let checked = rows(open(&file)?)?
                    .take(limit_rows(limit))
                    .map_while(Result::ok);
                // From here the import may be half taken back: it must not
                // run again until the delete ends.
                imports::mark_deleting(&store, &record.key).await?;
                let summary = apply_checked(
                    &store,
                    &record,
                    (&delete_key, -1, until),
                    (&name, count),
                    checked,
                )
                .await?;
                anyhow::ensure!(summary.rows == count, "{name} changed while it was read");
                summary
            }
            other => anyhow::bail!("import {} is of an unknown kind {other:?}", record.key),
        };
        if let (Some(first), Some(last)) = (summary.first, summary.last) {
            imports::drop_emptied_sketches(&store, site.domain.as_str(), first, last).await?;
        }
        imports::forget(&store, &record, &delete_key).await?;
        println!(
            "deleted import {}{}: {} rows taken back: {} views, {} events",
            record.key,
            if until.is_some() {
                " (incomplete: the rows it had written)"
            } else {
                ""
            },
            summary.rows,
            summary.views,
            summary.events
        );
        Ok(())
    })
    .await
}

/// Rows as far as `limit` (an incomplete import's furthest stream).
fn limit_rows(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// An import's content from the hash of its rows' file, with what else
/// decides its rows: the sessions file's hash, and Umami's
/// `--from-website` (imports without it keep the key they had before it
/// existed).
fn umami_content(
    mut hasher: blake3::Hasher,
    also: Option<blake3::Hash>,
    from_website: &Option<String>,
) -> blake3::Hash {
    if let Some(other) = also {
        hasher.update(other.as_bytes());
    }
    if let Some(website) = from_website {
        hasher.update(b"from-website ");
        hasher.update(website.as_bytes());
    }
    hasher.finalize()
}

async fn import_goatcounter(args: ImportArgs) -> anyhow::Result<()> {
    use crate::import::goatcounter;
    // The User-Agent rules before the database: the first pass needs no
    // database, and a bad file should not wait for one.
    let user_agents = crate::classify::UserAgentClassifier::new();
    run_import(
        &args,
        goatcounter::KIND,
        Beside::default(),
        |read, file, site| goatcounter::rows(read, file, site, &user_agents),
    )
    .await
}

async fn import_umami(args: UmamiArgs) -> anyhow::Result<()> {
    use crate::import::{self, umami};
    // The sessions before the database, as the first pass: a bad file
    // should not wait for one. Their content is part of the import's key.
    let (sessions, sessions_hash) = match &args.sessions {
        Some(path) => {
            let shown = path.display().to_string();
            let (read, hasher) = import::Hashing::new(
                import::open(path).with_context(|| format!("reading {shown}"))?,
            );
            let sessions = umami::Sessions::load(read, &shown)?;
            let hash = hasher.borrow().finalize();
            (sessions, Some((hash, recorded_path(path))))
        }
        None => (umami::Sessions::default(), None),
    };
    let from = match &args.from_website {
        Some(id) => Some(
            uuid::Uuid::try_parse(id)
                .with_context(|| format!("--from-website {id:?}: not an Umami website id"))?,
        ),
        None => None,
    };
    let websites = from.map_or(umami::Websites::TheSites, umami::Websites::From);
    let from_website = from.map(|id| id.to_string());
    // The events by their ids (with the website read): the same events
    // read again with other sessions are recognised as another import's.
    let shown = args.import.file.display().to_string();
    let rows_key = umami::event_ids(
        import::open(&args.import.file).with_context(|| format!("reading {shown}"))?,
        &shown,
    )?
    .map(|ids| {
        let mut key = blake3::Hasher::new();
        key.update(ids.as_bytes());
        if let Some(website) = &from_website {
            key.update(website.as_bytes());
        }
        key.finalize().to_hex()[..24].to_owned()
    });
    run_import(
        &args.import,
        umami::KIND,
        Beside {
            also_hashed: sessions_hash,
            from_website,
            rows_key,
        },
        |read, file, site| umami::rows(read, file, site, &sessions, websites),
    )
    .await
}

/// What decides an import's rows besides its file, and what recognises
/// them (Umami's).
#[derive(Default)]
struct Beside {
    /// Another file's hash the rows depend on (Umami's sessions), and its
    /// path as recorded.
    also_hashed: Option<(blake3::Hash, String)>,
    /// Umami's `--from-website`.
    from_website: Option<String>,
    /// What identifies the rows whatever the other files (Umami's event
    /// ids): another import of the site with the same is refused.
    rows_key: Option<String>,
}

async fn import_plausible(args: ImportArgs) -> anyhow::Result<()> {
    use crate::import::{self, plausible};
    let name = args.file.display().to_string();
    let export = plausible::Export::open(&args.file)?;
    let args = &args;
    with_store(&args.db, |store| async move {
        let site = site_by_id_or_domain(&store, &args.site).await?;
        // First pass: every file's rows checked, each file hashed; nothing
        // written.
        let plausible::Checked {
            rows: count,
            days,
            content,
            notes,
        } = export.check(&site)?;
        let key = import::key(plausible::KIND, &site.id, &content);
        let tz = site.time_zone.tz();
        let midnight = |d: chrono::NaiveDate| crate::reports::local::midnight(d, tz);
        // A rerun keeps the first run's decision: nothing to decide.
        let first_run = crate::storage::imports::get(&store, &key).await?.is_none();
        let live = match args.overlap {
            _ if !first_run => Vec::new(),
            Overlap::Skip | Overlap::Replace => {
                crate::storage::imports::local_days_with_views(
                    &store,
                    site.domain.as_str(),
                    tz,
                    &days,
                    midnight,
                )
                .await?
            }
            Overlap::Add => Vec::new(),
        };
        let (live, replaced) = overlapping_days(args.overlap, live, |d| {
            (midnight(d), midnight(d.succ_opt().unwrap_or(d)))
        })?;
        let daily = days.first().zip(days.last()).map(|(first, last)| {
            (
                crate::reports::local::midnight(*first, tz),
                crate::reports::local::midnight(last.succ_opt().unwrap_or(*last), tz),
            )
        });
        let record = start_import(
            &store,
            &site,
            crate::storage::imports::ImportRecord {
                skipped_days: live,
                daily,
                replaced,
                ..new_record(plausible::KIND, &site, args, &key, count)
            },
        )
        .await?;
        // Second pass: the files again, in the same order.
        let mut unreadable = None;
        let checked = export
            .rows(&site)?
            .map_while(|row| row.map_err(|e| unreadable = Some(e)).ok());
        let summary =
            apply_checked(&store, &record, (&key, 1, None), (&name, count), checked).await?;
        if let Some(e) = unreadable {
            anyhow::bail!("{name} changed while it was imported: {e}");
        }
        for file in &export.ignored {
            println!("note: {file} is no table of Plausible's export: not read");
        }
        let missing = export.missing();
        if missing.contains(&plausible::Table::Pages.name()) {
            println!(
                "note: no pages file: the site's visits, visitors, bounces and visit \
                 durations are imported, its page views are not (a day's views are its \
                 pages' views)"
            );
        }
        if !missing.is_empty() {
            println!(
                "note: no file for {}: those figures stay empty",
                missing.join(", ")
            );
        }
        for note in &notes {
            println!("note: {note}");
        }
        finish_import(&store, &name, count, &summary, &record).await
    })
    .await
}

/// Runs an import of `args.file`: the first pass checks every row
/// (`rows` reads them from a fresh reader, for the file's name and the
/// site) and hashes the content (with `also_hashed`, another file's hash
/// the rows depend on), then the rows are applied exactly once and the
/// summary printed.
async fn run_import<I>(
    args: &ImportArgs,
    kind: &str,
    beside: Beside,
    rows: impl Fn(Box<dyn std::io::Read>, &str, sites::Site) -> Result<I, crate::import::RowError>,
) -> anyhow::Result<()>
where
    I: Iterator<Item = Result<crate::import::Row, crate::import::RowError>>,
{
    with_store(&args.db, |store| async move {
        let site = site_by_id_or_domain(&store, &args.site).await?;
        apply_import(&store, &site, kind, args, beside, |read| {
            rows(read, &args.file.display().to_string(), site.clone())
        })
        .await
    })
    .await
}

/// [`run_import`] once the site is found: both passes, the record in
/// `imports`, and the summary.
async fn apply_import<I>(
    store: &Store,
    site: &sites::Site,
    kind: &str,
    args: &ImportArgs,
    Beside {
        also_hashed,
        from_website,
        rows_key,
    }: Beside,
    rows: impl Fn(Box<dyn std::io::Read>) -> Result<I, crate::import::RowError>,
) -> anyhow::Result<()>
where
    I: Iterator<Item = Result<crate::import::Row, crate::import::RowError>>,
{
    use crate::import;
    let name = args.file.display().to_string();
    let open = || import::open(&args.file).with_context(|| format!("reading {name}"));
    // First pass: every row checked, the content hashed; nothing written.
    let (read, hasher) = import::Hashing::new(open()?);
    let mut count = 0u64;
    let mut days = std::collections::BTreeSet::new();
    for row in rows(Box::new(read))? {
        if let Ok(hit) = row? {
            days.insert(hit.at.date_naive());
        }
        count += 1;
    }
    let content = umami_content(
        hasher.borrow().clone(),
        also_hashed.as_ref().map(|(hash, _)| *hash),
        &from_website,
    );
    let key = import::key(kind, &site.id, &content);
    // A rerun keeps the first run's decision: nothing to decide.
    let first_run = crate::storage::imports::get(store, &key).await?.is_none();
    if let (true, Some(rows_key)) = (first_run, &rows_key) {
        let site_id = site.id.to_string();
        if let Some(other) = crate::storage::imports::list(store, Some(&site_id))
            .await?
            .into_iter()
            .find(|o| o.rows_key.as_ref() == Some(rows_key) && o.key != key)
        {
            anyhow::bail!(
                "{name} holds the same events (by their ids) as import {} of {}, which \
                 read them with other files beside it (sessions): they would count \
                 twice, or their days be skipped as taken. To import them this way, \
                 `tickertape import delete {}` first",
                other.key,
                other.file,
                other.key
            );
        }
    }
    let live = match args.overlap {
        _ if !first_run => Vec::new(),
        Overlap::Skip | Overlap::Replace => {
            crate::storage::imports::days_with_views(store, site.domain.as_str(), days).await?
        }
        Overlap::Add => Vec::new(),
    };
    let utc_day = |d: chrono::NaiveDate| d.and_time(chrono::NaiveTime::MIN).and_utc();
    let (live, replaced) = overlapping_days(args.overlap, live, |d| {
        (utc_day(d), utc_day(d.succ_opt().unwrap_or(d)))
    })?;
    // A rerun keeps the first run's days: its own rows are not live.
    let record = start_import(
        store,
        site,
        crate::storage::imports::ImportRecord {
            also_file: also_hashed.as_ref().map(|(_, file)| file.clone()),
            from_website,
            rows_key,
            skipped_days: live,
            replaced,
            ..new_record(kind, site, args, &key, count)
        },
    )
    .await?;
    // Second pass: the same rows, applied in batches.
    let mut unreadable = None;
    let checked = rows(open()?)?.map_while(|row| row.map_err(|e| unreadable = Some(e)).ok());
    let summary = apply_checked(store, &record, (&key, 1, None), (&name, count), checked).await?;
    if let Some(e) = unreadable {
        anyhow::bail!("{name} changed while it was imported: {e}");
    }
    finish_import(store, &name, count, &summary, &record).await
}

/// The record of an import of `args.file` into `site` starting now, with
/// nothing skipped, replaced or counted yet.
fn new_record(
    kind: &str,
    site: &sites::Site,
    args: &ImportArgs,
    key: &str,
    rows: u64,
) -> crate::storage::imports::ImportRecord {
    let now = chrono::Utc::now();
    crate::storage::imports::ImportRecord {
        key: key.to_owned(),
        kind: kind.into(),
        site: site.id.to_string(),
        file: recorded_path(&args.file),
        also_file: None,
        rows,
        skipped_days: Vec::new(),
        started_at: now,
        finished_at: None,
        views: 0,
        events: 0,
        daily: None,
        context: import_context(kind, site),
        deleting: false,
        replaced: Vec::new(),
        cleared: false,
        cleared_by_others: Vec::new(),
        part: crate::storage::buckets::PART_IMPORT,
        from_website: None,
        skip_after: Some(now),
        rows_key: None,
    }
}

/// Records the import's start (a rerun gets the first run's record),
/// refuses it while a delete of it runs, and clears the days it replaces;
/// returns the record in force.
async fn start_import(
    store: &Store,
    site: &sites::Site,
    record: crate::storage::imports::ImportRecord,
) -> anyhow::Result<crate::storage::imports::ImportRecord> {
    let record = crate::storage::imports::begin(store, &record).await?;
    refuse_while_deleting(&record)?;
    clear_replaced(store, &record, site).await?;
    Ok(record)
}

/// Splits the days that have live figures into those skipped and those
/// replaced, as `overlap` says: `span` gives a day's first instant and the
/// next day's. Only a day already over is replaced (live hits may still
/// come on one that is not), and only over whole UTC hours.
fn overlapping_days(
    overlap: Overlap,
    live: Vec<chrono::NaiveDate>,
    span: impl Fn(chrono::NaiveDate) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
) -> anyhow::Result<(
    Vec<chrono::NaiveDate>,
    Vec<crate::storage::imports::ReplacedDay>,
)> {
    use crate::storage::imports::ReplacedDay;
    if overlap != Overlap::Replace {
        return Ok((live, Vec::new()));
    }
    let now = chrono::Utc::now();
    let mut skipped = Vec::new();
    let mut replaced = Vec::new();
    for day in live {
        let (from, to) = span(day);
        let whole_hours = [from, to]
            .iter()
            .all(|t| crate::storage::Resolution::Hour.aligned(*t));
        anyhow::ensure!(
            whole_hours,
            "--overlap replace: {day} does not start on a whole UTC hour in the site's zone; \
             use --overlap skip or add"
        );
        if to <= now {
            replaced.push(ReplacedDay { day, from, to });
        } else {
            println!("note: {day} is not over yet: its rows are skipped, not replaced");
            skipped.push(day);
        }
    }
    Ok((skipped, replaced))
}

/// Clears the days `record` replaces, unless done: before any row is
/// applied, so a rerun after a crash clears again what it may have half
/// cleared, and never what the import added.
async fn clear_replaced(
    store: &Store,
    record: &crate::storage::imports::ImportRecord,
    site: &sites::Site,
) -> anyhow::Result<()> {
    if record.cleared || record.replaced.is_empty() {
        return Ok(());
    }
    // Other imports of the site learn the spans first: a delete of one
    // of them must not take back again what the clear takes out.
    let spans: Vec<_> = record.replaced.iter().map(|r| (r.from, r.to)).collect();
    if let Err(why) =
        crate::storage::imports::hand_over_spans(store, &record.key, &record.site, &spans).await?
    {
        anyhow::bail!("--overlap replace: {why}");
    }
    for r in &record.replaced {
        crate::storage::clear::clear_span(store, &site.domain, &record.site, r.from, r.to)
            .await
            .with_context(|| format!("clearing {} to replace it", r.day))?;
    }
    crate::storage::imports::mark_cleared(store, &record.key).await?;
    Ok(())
}

/// The second pass: `rows`, every one checked by the first, applied in
/// batches as `record` says (its part, its skipped days and spans) under
/// `key`, with `sign` −1 taking them back; `until`, for an import that
/// never completed, how far each of its streams got. A progress line on a
/// terminal.
async fn apply_checked<T: crate::import::Counted>(
    store: &Store,
    record: &crate::storage::imports::ImportRecord,
    (key, sign, until): (&str, i32, Option<[u64; 3]>),
    (name, count): (&str, u64),
    rows: impl Iterator<Item = Result<T, crate::import::Skipped>>,
) -> anyhow::Result<crate::import::Summary> {
    use std::io::IsTerminal;
    let batch_rows = std::env::var("TICKERTAPE_IMPORT_BATCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(crate::import::BATCH_ROWS);
    let terminal = std::io::stderr().is_terminal();
    let skips = crate::import::Skips::of(record);
    let pass = crate::import::Pass {
        key,
        skips: &skips,
        batch_rows,
        sign,
        part: record.part,
        until,
    };
    let summary = crate::import::apply(store, &pass, rows, |done| {
        if terminal {
            eprint!("\r{name}: {done} of {count} rows");
        }
    })
    .await?;
    if terminal {
        eprintln!();
    }
    Ok(summary)
}

/// Checks that the second pass read what the first did, marks the import
/// complete and prints its summary.
async fn finish_import(
    store: &Store,
    name: &str,
    count: u64,
    summary: &crate::import::Summary,
    record: &crate::storage::imports::ImportRecord,
) -> anyhow::Result<()> {
    let key = &record.key;
    anyhow::ensure!(
        summary.rows == count,
        "{name} changed while it was imported: {count} rows checked, {} read",
        summary.rows
    );
    crate::storage::imports::finish(
        store,
        key,
        summary.views,
        summary.events,
        chrono::Utc::now(),
    )
    .await?;
    // A stored page summary is kept while its span's views stand; an
    // import may add entries and exits to days whose views it leaves as
    // they are (days without pages rows): the site's are made again.
    crate::storage::page_summaries::delete_site(store, &record.site).await?;
    print_summary(name, summary, record);
    Ok(())
}

fn print_summary(
    name: &str,
    summary: &crate::import::Summary,
    record: &crate::storage::imports::ImportRecord,
) {
    let key = &record.key;
    let skipped_days = &record.skipped_days;
    let skipped: Vec<String> = summary
        .skipped
        .iter()
        .map(|(why, n)| format!("{n} {why}"))
        .collect();
    println!("import {key}");
    let visits = match summary.visits {
        0 => String::new(),
        n => format!(" in {n} visits"),
    };
    let days = match summary.days {
        0 => String::new(),
        n => format!(
            "{n} days, {} visitors (added up by day), ",
            summary.visitors
        ),
    };
    println!(
        "{name}: {} rows: {days}{} views{visits}, {} events, skipped {}; {} to {}",
        summary.rows,
        summary.views,
        summary.events,
        if skipped.is_empty() {
            "none".to_owned()
        } else {
            skipped.join(", ")
        },
        summary.first.map_or("-".into(), |t| t.to_rfc3339()),
        summary.last.map_or("-".into(), |t| t.to_rfc3339()),
    );
    if !skipped_days.is_empty() {
        let days: Vec<String> = skipped_days.iter().map(|d| d.to_string()).collect();
        println!(
            "skipped days with live figures (--overlap add imports them too): {}",
            days.join(", ")
        );
    }
    if !record.replaced.is_empty() {
        let days: Vec<String> = record.replaced.iter().map(|r| r.day.to_string()).collect();
        println!(
            "replaced days (their live figures cleared): {}",
            days.join(", ")
        );
    }
    // What was really written: rows counted in batches applied now.
    let skipped_now = match summary.applied_rows - summary.written {
        0 => String::new(),
        n => format!(" ({n} more skipped)"),
    };
    if summary.applied_rows == 0 {
        println!("already imported: nothing was written");
    } else if summary.applied_rows < summary.rows {
        println!(
            "{} rows written now{skipped_now}; the {} before them were in from an earlier run",
            summary.written,
            summary.rows - summary.applied_rows
        );
    } else {
        println!("{} rows written{skipped_now}", summary.written);
    }
    if let Some(last) = summary.last_row {
        println!(
            "note: a CSV file cannot show that it is whole: its last row counted is of {}; \
             if the export was cut short, the rows after it are missing",
            last.to_rfc3339()
        );
    }
}

async fn set_time_zone(args: SetTimeZone) -> anyhow::Result<()> {
    let SetTimeZone {
        domain,
        time_zone,
        db,
    } = args;
    let zone = TimeZone::parse(&time_zone).with_context(|| format!("--time-zone {time_zone:?}"))?;
    with_store(&db, |store| async move {
        let site = site_by_domain(&store, &domain).await?;
        sites::set_time_zone(&store, &site, zone).await?;
        eprintln!("{}: reports are now in {zone}.", site.domain);
        Ok(())
    })
    .await
}

async fn site_by_domain(store: &Store, domain: &str) -> anyhow::Result<sites::Site> {
    sites::list(store)
        .await?
        .into_iter()
        .find(|s| s.domain.as_str() == domain)
        .with_context(|| format!("no site has the domain {domain:?}"))
}

async fn set_page_cap(args: SetPageCap) -> anyhow::Result<()> {
    let SetPageCap {
        domain,
        page_cap,
        db,
    } = args;
    let cap = crate::domain::PageCapSetting::parse(&page_cap)
        .with_context(|| format!("--page-cap {page_cap:?}"))?;
    with_store(&db, |store| async move {
        let site = site_by_domain(&store, &domain).await?;
        sites::set_page_cap(&store, &site, cap).await?;
        eprintln!(
            "{}: new-page cap {cap} (serve picks it up at its next site refresh).",
            site.domain
        );
        Ok(())
    })
    .await
}

async fn backfill_site_totals(args: BackfillArgs) -> anyhow::Result<()> {
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

async fn backfill_page_summaries(args: SummariesArgs) -> anyhow::Result<()> {
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

async fn setup(args: SetupArgs) -> anyhow::Result<()> {
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

async fn add_site(args: AddSite) -> anyhow::Result<()> {
    let AddSite {
        domain,
        aliases,
        name,
        time_zone,
        id,
        public_url,
        listen,
        db,
    } = args;
    let public_url = public_url_or(public_url.as_deref(), listen);
    let time_zone =
        TimeZone::parse(&time_zone).with_context(|| format!("--time-zone {time_zone:?}"))?;
    let domain = DomainName::parse(&domain).with_context(|| format!("--domain {domain:?}"))?;
    let id = id
        .map(|id| SiteId::parse(&id.to_ascii_lowercase()).with_context(|| format!("--id {id:?}")))
        .transpose()?;
    let aliases = aliases
        .iter()
        .map(|a| DomainName::parse(a).with_context(|| format!("--alias {a:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let new = sites::NewSite {
            domain,
            aliases,
            name,
            owners: vec![],
            time_zone,
        };
        let site = match id {
            Some(id) => sites::insert_with_id(&store, new, id, chrono::Utc::now()).await?,
            None => sites::insert(&store, new, chrono::Utc::now()).await?,
        };
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
        if let Some(warning) = snippets::url_warning(&public_url) {
            eprintln!("warning: {warning}");
        }
        Ok(())
    })
    .await
}

async fn add_user(args: AddUser) -> anyhow::Result<()> {
    let AddUser { email, admin, db } = args;
    let email = Email::parse(&email).with_context(|| format!("--email {email:?}"))?;
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password =
        NewPassword::parse(line.trim_end_matches(['\n', '\r'])).context("the password on stdin")?;
    let role = if admin { Role::Admin } else { Role::Owner };
    with_store(&db, |store| async move {
        crate::indexes::ensure(&store).await?;
        let user = users::create(&store, email, &password, role, chrono::Utc::now()).await?;
        println!("{}", user.id);
        eprintln!("Added {} ({}).", user.email, role.as_str());
        Ok(())
    })
    .await
}

async fn reset_login(args: ResetLogin) -> anyhow::Result<()> {
    let ResetLogin { email, db } = args;
    let email = Email::parse(&email).with_context(|| format!("--email {email:?}"))?;
    with_store(&db, |store| async move {
        let user = users::find_by_email(&store, &email)
            .await?
            .with_context(|| format!("no user {email}: `tickertape user add` adds one"))?;
        let password = NewPassword::generate();
        let now = chrono::Utc::now();
        users::set_one_time_password(&store, user.id, &password, now).await?;
        // As an admin's reset on the users page: whoever held the account
        // is out, and a lost second factor no longer locks the owner out.
        crate::accounts::totp::disable(&store, user.id).await?;
        crate::accounts::sessions::delete_for_user(&store, user.id, None).await?;
        crate::accounts::api_tokens::delete_for_user(&store, user.id).await?;
        println!(
            "log in as {email} with password {} (one-time: it works until {}, only to choose your own; two-factor login is off, sessions and API tokens ended)",
            password.expose(),
            (now + users::ONE_TIME_PASSWORD_LIFETIME).format("%Y-%m-%d %H:%M UTC")
        );
        Ok(())
    })
    .await
}

async fn preallocate(args: PreallocateArgs) -> anyhow::Result<()> {
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

async fn demo(args: DemoArgs) -> anyhow::Result<()> {
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
        let report = demo::generate(&store, &options, chrono::Utc::now(), if_empty).await?;
        if report.skipped {
            eprintln!(
                "The demo site {} already has views; nothing written.",
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

async fn list_sites(args: ListSites) -> anyhow::Result<()> {
    let ListSites { db } = args;
    with_store(&db, |store| async move {
        for site in sites::list(&store).await? {
            let aliases: Vec<_> = site.aliases.iter().map(|a| a.to_string()).collect();
            // The zone before the aliases: every site has one, and its
            // reports (days, "today") are counted in it.
            println!(
                "{}\t{}\t{}\t{}\t{}",
                site.id,
                site.domain,
                site.name,
                site.time_zone,
                aliases.join(",")
            );
        }
        Ok(())
    })
    .await
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

/// Whether `serve` has created its embedded database in `dir`.
fn has_local_database(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
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

/// The first admin `serve` creates on a database without users.
const FIRST_ADMIN: &str = "admin@localhost";

/// What `serve` tells about the first admin's login at start.
enum FirstLogin {
    /// A one-time password to print, and when it stops working.
    Password {
        email: Email,
        password: String,
        until: chrono::DateTime<chrono::Utc>,
    },
    /// The first admin's one-time password ran out before anyone chose a
    /// password of their own.
    Expired(Email),
}

/// On a database without users, creates the first admin with a one-time
/// password. While the first admin is the only user, has never chosen
/// their own password and the one-time password still works, each start
/// replaces it with a new one (same end) to print: the one printed by an earlier start may never have
/// been seen, and a password hash cannot be printed again.
async fn first_admin_login(store: &Store) -> anyhow::Result<Option<FirstLogin>> {
    let email = Email::parse(FIRST_ADMIN).context("the first admin's e-mail")?;
    let now = chrono::Utc::now();
    let password = NewPassword::generate();
    let users = users::count(store).await?;
    if users == 0 {
        match users::create(store, email.clone(), &password, Role::Admin, now).await {
            Ok(user) => {
                users::require_password_change(store, user.id, now).await?;
                return Ok(Some(FirstLogin::Password {
                    email,
                    password: password.expose().to_owned(),
                    until: now + users::ONE_TIME_PASSWORD_LIFETIME,
                }));
            }
            // Another process created it first.
            Err(users::UserError::EmailTaken(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Only while the console is still the one way in: once there are other
    // users, an admin resets a password on the users page (or with
    // `user reset-login`), and a restart must not replace it.
    if users > 1 {
        return Ok(None);
    }
    let Some(user) = users::find_by_email(store, &email).await? else {
        return Ok(None);
    };
    if !user.must_change_password {
        return Ok(None);
    }
    match users::replace_one_time_password(store, user.id, &password, now).await? {
        Some(until) => Ok(Some(FirstLogin::Password {
            email,
            password: password.expose().to_owned(),
            until,
        })),
        None => Ok(Some(FirstLogin::Expired(email))),
    }
}

/// A start-up line on stdout. A server must not die because nobody reads
/// its console, so a closed stdout is ignored (`println!` would panic).
fn announce(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

async fn serve(mut settings: Settings, demo_if_empty: bool) -> anyhow::Result<()> {
    // The port before anything else: a start that cannot serve creates
    // nothing (no first admin whose password is never printed, no demo
    // written for minutes before failing).
    let listener = crate::startup::bind(&settings)?;
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
        let store = Store::connect(&db.store_options()?, &uri).await?;
        tracing::info!(topology = ?store.topology(), database = %db.name, "connected");
        crate::startup::check_store(&store)?;
        crate::indexes::ensure(&store).await?;
        for warning in sharding::warnings(&store).await {
            tracing::warn!("{warning}");
        }
        let first_admin = first_admin_login(&store).await?;
        if demo_if_empty {
            let options = DemoOptions {
                domain: DomainName::parse(demo::DEFAULT_DOMAIN).context("the demo domain")?,
                days: 30,
                daily_views: 4000,
                seed: 20261122,
            };
            // A minute or two on a small machine: a line per few days says
            // it is working.
            let mut progress = |p: demo::Progress| {
                if p.day % 5 == 0 || p.day == p.days {
                    announce(&format!(
                        "writing the demo: day {} of {}, {} views so far",
                        p.day, p.days, p.hits
                    ));
                }
            };
            let report =
                demo::generate_reporting(&store, &options, chrono::Utc::now(), true, &mut progress)
                    .await?;
            if !report.skipped {
                announce(&format!(
                    "wrote {} demo views over 30 days for {}",
                    report.hits, report.site.domain
                ));
            }
        }
        let app = Application::build_on(&settings, store, clock::system(), listener).await?;
        settings.listen.set_port(app.port());
        let public = public_url_or(settings.public_url.as_deref(), settings.listen);
        if let Some(warning) = snippets::url_warning(&public) {
            tracing::warn!("{warning}");
            announce(&format!("warning: {warning}"));
        }
        announce(&format!("tickertape listening on http://{}", settings.listen));
        announce(&format!("embed snippets use {public} (set TICKERTAPE_PUBLIC_URL to change)"));
        match first_admin {
            Some(FirstLogin::Password { email, password, until }) => announce(&format!(
                "first run: log in at {public}/login as {email} with password {password} (one-time, only to choose your own; it works until {}, and each start prints a new one until you have chosen yours)",
                until.format("%Y-%m-%d %H:%M UTC")
            )),
            Some(FirstLogin::Expired(email)) => announce(&format!(
                "the first admin's one-time password expired unused: `tickertape user reset-login --email {email}` prints a new one"
            )),
            None => {}
        }
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

#[derive(Args)]
struct SetupArgs {
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
struct PreallocateArgs {
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
struct DemoArgs {
    /// Days of traffic, ending now.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=400))]
    days: u32,
    /// Average views per day.
    #[arg(long, default_value_t = 4000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    daily_views: u32,
    /// The demo site's domain.
    #[arg(long, default_value = crate::demo::DEFAULT_DOMAIN)]
    domain: String,
    /// Do nothing if the demo site already has views.
    #[arg(long)]
    if_empty: bool,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct AddUser {
    #[arg(long)]
    email: String,
    /// Make the user an admin (default: site owner).
    #[arg(long)]
    admin: bool,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct ResetLogin {
    #[arg(long)]
    email: String,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct AddSite {
    /// The site's canonical domain, e.g. example.com.
    #[arg(long)]
    domain: String,
    /// Another host whose pages count for this site (repeatable).
    #[arg(long = "alias")]
    aliases: Vec<String>,
    /// A display name (default: the domain).
    #[arg(long = "name", id = "site_name")]
    name: Option<String>,
    /// The IANA time zone of its reports, e.g. Europe/Berlin.
    #[arg(long, default_value = "UTC")]
    time_zone: String,
    /// The site's id (a UUID) instead of a new one: an Umami website id,
    /// so that the snippets' `data-website-id` stays as it is.
    #[arg(long)]
    id: Option<String>,
    /// The URL browsers reach Tickertape at, for the snippets (default:
    /// `http://` + the listen address, as `serve` does).
    #[arg(long, env = "TICKERTAPE_PUBLIC_URL")]
    public_url: Option<String>,
    /// The address `serve` listens on; used for the snippets when no
    /// public URL is set, so they match what `serve` prints.
    #[arg(long, env = "TICKERTAPE_LISTEN", default_value = "127.0.0.1:8000")]
    listen: std::net::SocketAddr,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct ListSites {
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct SetTimeZone {
    /// The site's domain.
    #[arg(long)]
    domain: String,
    /// e.g. Europe/Berlin, Asia/Kolkata, UTC.
    #[arg(long)]
    time_zone: String,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct SetPageCap {
    /// The site's domain.
    #[arg(long)]
    domain: String,
    /// `default` (the instance's budgets), `none`, or new pages per hour.
    #[arg(long)]
    page_cap: String,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct SummariesArgs {
    /// Only this site (its domain); default: every site.
    #[arg(long)]
    site: Option<String>,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
struct BackfillArgs {
    /// Only this site (its domain); default: every site not done yet.
    #[arg(long)]
    site: Option<String>,
    /// Recompute sites already done too.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    db: DatabaseArgs,
}

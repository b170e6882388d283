//! `tickertape import …`: the flags of each source, and what an import or
//! a delete prints.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::{site_by_id_or_domain, with_store, DatabaseArgs};
use crate::import::workflow::{self, Deleted, Imported, Importer, Watch};
use crate::import::{goatcounter, plausible, umami};
use crate::storage::sites;

#[derive(Subcommand)]
pub(super) enum ImportCommand {
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
pub(super) struct DeleteImport {
    /// The import's key, as `import list` shows it.
    key: String,
    /// The export, if it has moved since the import.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Umami's session file, if it has moved since the import.
    #[arg(long)]
    sessions: Option<PathBuf>,
    /// Umami's event data file, if it has moved since the import.
    #[arg(long)]
    event_data: Option<PathBuf>,
    #[command(flatten)]
    db: DatabaseArgs,
}

#[derive(Args)]
pub(super) struct ListImports {
    #[command(flatten)]
    db: DatabaseArgs,
}

/// What an import does with rows on days the site already has views on
/// (decided when it first starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Overlap {
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
pub(super) struct ImportArgs {
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
pub(super) struct UmamiArgs {
    #[command(flatten)]
    import: ImportArgs,
    /// The `session` rows (session_id, browser, os, device, country); up
    /// to 10 million sessions, 21 bytes each in memory. Without it the
    /// views' browser, system, device and country are "unknown".
    #[arg(long)]
    sessions: Option<PathBuf>,
    /// The `event_data` rows (website_event_id, data_key, string_value,
    /// number_value, date_value, data_type): the views' and events' custom
    /// properties and revenue; up to 256 MiB of keys and values in memory.
    #[arg(long)]
    event_data: Option<PathBuf>,
    /// The Umami website (its `website_id`) whose rows to import, when it
    /// is not the site's own id; rows of other websites are skipped and
    /// counted. Without it, a row of a website other than the site's id
    /// is refused.
    #[arg(long, value_name = "WEBSITE_ID")]
    from_website: Option<String>,
}

/// Runs one `import` subcommand.
pub(super) async fn run(command: ImportCommand) -> anyhow::Result<()> {
    match command {
        ImportCommand::Goatcounter(args) => import_goatcounter(args).await,
        ImportCommand::Umami(args) => import_umami(args).await,
        ImportCommand::Plausible(args) => import_plausible(args).await,
        ImportCommand::List(args) => list_imports(args).await,
        ImportCommand::Delete(args) => delete_import(args).await,
    }
}

pub(super) async fn list_imports(args: ListImports) -> anyhow::Result<()> {
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

async fn delete_import(args: DeleteImport) -> anyhow::Result<()> {
    let DeleteImport {
        key,
        file,
        sessions,
        event_data,
        db,
    } = args;
    with_store(&db, |store| async move {
        let deleted = crate::import::delete(
            &store,
            &key,
            file.as_deref(),
            workflow::Moved {
                sessions: sessions.as_deref(),
                event_data: event_data.as_deref(),
            },
            &mut Console::new(),
        )
        .await?;
        let Deleted {
            record,
            summary,
            incomplete,
        } = deleted;
        println!(
            "deleted import {}{}: {} rows taken back: {} views, {} events",
            record.key,
            if incomplete {
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

async fn import_goatcounter(args: ImportArgs) -> anyhow::Result<()> {
    let source = goatcounter::Export::new(&args.file);
    import(&args, source).await
}

async fn import_umami(args: UmamiArgs) -> anyhow::Result<()> {
    let source = umami::Export::open(
        &args.import.file,
        workflow::Moved {
            sessions: args.sessions.as_deref(),
            event_data: args.event_data.as_deref(),
        },
        args.from_website.as_deref(),
    )?;
    import(&args.import, source).await
}

async fn import_plausible(args: ImportArgs) -> anyhow::Result<()> {
    let source = plausible::Export::open(&args.file)?;
    import(&args, source).await
}

/// Imports `source` (opened from `args.file`, before any database) into
/// the site `args` names, and prints the summary.
async fn import<S: Importer>(args: &ImportArgs, source: S) -> anyhow::Result<()> {
    with_store(&args.db, |store| async move {
        let site = site_by_id_or_domain(&store, &args.site).await?;
        let overlap = match args.overlap {
            Overlap::Skip => workflow::Overlap::Skip,
            Overlap::Add => workflow::Overlap::Add,
            Overlap::Replace => workflow::Overlap::Replace,
        };
        let Imported {
            name,
            summary,
            record,
        } = workflow::import(
            &store,
            &site,
            &source,
            &args.file,
            overlap,
            &mut Console::new(),
        )
        .await?;
        print_summary(&name, &summary, &record);
        Ok(())
    })
    .await
}

/// What the workflow tells, on the console: notes on stdout, and a
/// progress line on stderr when it is a terminal.
struct Console {
    terminal: bool,
}

impl Console {
    fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            terminal: std::io::stderr().is_terminal(),
        }
    }
}

impl Watch for Console {
    fn note(&mut self, note: &str) {
        println!("note: {note}");
    }

    fn progress(&mut self, file: &str, done: u64, count: u64) {
        if self.terminal {
            eprint!("\r{file}: {done} of {count} rows");
        }
    }

    fn pass_done(&mut self) {
        if self.terminal {
            eprintln!();
        }
    }
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

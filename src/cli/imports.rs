//! `tickertape import …`: the flags of each source, and what an import or
//! a delete prints.

use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::{site_by_id_or_domain, with_store, DatabaseArgs};
use crate::storage::{sites, Store};

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

/// What decides where an import's rows land besides its file: the
/// site's hosts (sources, pages given as addresses), for Plausible's days
/// its zone, and the version, whose User-Agent rules name browsers and
/// systems. `import delete` must run under the same.
pub(super) fn import_context(kind: &str, site: &sites::Site) -> String {
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

pub(super) fn refuse_while_deleting(
    record: &crate::storage::imports::ImportRecord,
) -> anyhow::Result<()> {
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
pub(super) fn recorded_path(path: &std::path::Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_owned())
        .display()
        .to_string()
}

pub(super) async fn delete_import(args: DeleteImport) -> anyhow::Result<()> {
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
pub(super) fn limit_rows(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// An import's content from the hash of its rows' file, with what else
/// decides its rows: the sessions file's hash, and Umami's
/// `--from-website` (imports without it keep the key they had before it
/// existed).
pub(super) fn umami_content(
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

pub(super) async fn import_goatcounter(args: ImportArgs) -> anyhow::Result<()> {
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

pub(super) async fn import_umami(args: UmamiArgs) -> anyhow::Result<()> {
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
pub(super) struct Beside {
    /// Another file's hash the rows depend on (Umami's sessions), and its
    /// path as recorded.
    also_hashed: Option<(blake3::Hash, String)>,
    /// Umami's `--from-website`.
    from_website: Option<String>,
    /// What identifies the rows whatever the other files (Umami's event
    /// ids): another import of the site with the same is refused.
    rows_key: Option<String>,
}

pub(super) async fn import_plausible(args: ImportArgs) -> anyhow::Result<()> {
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
pub(super) async fn run_import<I>(
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
pub(super) async fn apply_import<I>(
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
pub(super) fn new_record(
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
pub(super) async fn start_import(
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
pub(super) fn overlapping_days(
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
pub(super) async fn clear_replaced(
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
pub(super) async fn apply_checked<T: crate::import::Counted>(
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
pub(super) async fn finish_import(
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

pub(super) fn print_summary(
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

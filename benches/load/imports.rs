//! Import speed. A generated export is imported by the release
//! `tickertape import <format>` as a child process on a fresh database,
//! and the run gives its wall time, rows per second for the validating
//! pass and the applying pass, the importer's peak RSS and CPU time, the
//! database server's CPU time and the database's growth; then the stored
//! figures are checked against what the file holds, exactly.
//!
//! The two passes are told apart without changing the command: the
//! import's record (`imports`) gets its `startedAt` when the first pass
//! ends and its `finishedAt` when the last batch is in.
//!
//! Each database gets the default retention's TTL indexes first (minutes
//! 90 days, hours 2 years), as the server and `tickertape setup` make
//! them: the import reads them, and leaves out the buckets of rows already
//! past a level's retention.
//!
//! Formats: GoatCounter's CSV export (version 2), plain and gzipped; and
//! Plausible CE's CSV export, as the directory of its files
//! (`imported_<table>_<from>_<to>.csv`, every table), a year of days'
//! figures of N pages.
//!
//! Options: BENCH_IMPORT_FORMATS (default `goatcounter,plausible`),
//! BENCH_IMPORT_ROWS (GoatCounter; default 200,000, quick 20,000),
//! BENCH_IMPORT_GZIP_ONLY=1 times only the gzipped GoatCounter file,
//! BENCH_IMPORT_PLAUSIBLE_PAGES (default 1,000, quick 50), BENCH_IMPORTS=0
//! skips, BENCH_IMPORTS_ONLY=1 runs only this. The generated files stay in
//! `target/bench-imports` and are reused while the generator and the row
//! (page) count are the same. BENCH_IMPORT_BIN runs another build of the
//! command (an older one, to compare) instead of `target/release/tickertape`.

use anyhow::{bail, Context};
use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use tickertape::domain::Dimension;
use tickertape::storage::values::count as number;
use tickertape::storage::{Resolution, Store};

use crate::roles::Database;
use crate::{env_or, repo, Options, Rng, SITE_DOMAIN};

const DATABASE: &str = "bench_imports";

/// Bumped whenever the generator's output changes, so that a kept file is
/// never taken for another.
const GENERATOR: u32 = 2;
/// The same, for the Plausible export.
const PLAUSIBLE_GENERATOR: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    GoatCounter,
    Plausible,
}

impl Format {
    fn subcommand(self) -> &'static str {
        match self {
            Format::GoatCounter => "goatcounter",
            Format::Plausible => "plausible",
        }
    }

    /// What the command's summary says of `e`.
    fn summary(self, e: &Expected) -> Vec<String> {
        match self {
            Format::GoatCounter => vec![format!(
                "{} rows: {} views, {} events, skipped {} bot",
                e.rows, e.views, e.events, e.bots
            )],
            Format::Plausible => vec![
                format!("{} rows: ", e.rows),
                format!(" {} views in ", e.views),
                format!(", {} events, skipped none", e.events),
            ],
        }
    }
}

/// What a generated file holds, as the import must count it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Expected {
    rows: u64,
    views: u64,
    events: u64,
    bots: u64,
}

impl Expected {
    fn line(&self) -> String {
        format!("{} {} {} {}", self.rows, self.views, self.events, self.bots)
    }

    fn parse(line: &str) -> Option<Self> {
        let n: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        match n[..] {
            [rows, views, events, bots] => Some(Expected {
                rows,
                views,
                events,
                bots,
            }),
            _ => None,
        }
    }
}

/// One file to import.
struct Case {
    format: Format,
    label: String,
    path: PathBuf,
    expected: Expected,
}

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    let rows: u64 = env_or(
        "BENCH_IMPORT_ROWS",
        if options.quick { 20_000 } else { 200_000 },
    );
    let pages: u32 = env_or(
        "BENCH_IMPORT_PLAUSIBLE_PAGES",
        // About 10,000 visitors a day: sketches of ~7,500 registers, the
        // case that needs `$max` in parts (docs/benchmarks.md, imports).
        if options.quick { 50 } else { 1_000 },
    );
    let formats =
        std::env::var("BENCH_IMPORT_FORMATS").unwrap_or_else(|_| "goatcounter,plausible".into());
    let formats: Vec<&str> = formats.split(',').map(str::trim).collect();
    let gzip_only = std::env::var("BENCH_IMPORT_GZIP_ONLY").is_ok_and(|v| v == "1");
    let dir = repo().join("target/bench-imports");
    std::fs::create_dir_all(&dir)?;
    let mut cases = Vec::new();
    if formats.contains(&"goatcounter") {
        let t = Instant::now();
        let (plain, gzipped, expected) = goatcounter_files(&dir, rows)?;
        eprintln!(
            "imports: GoatCounter export of {rows} rows ready in {:.0} s",
            t.elapsed().as_secs_f64()
        );
        if !gzip_only {
            cases.push(Case {
                format: Format::GoatCounter,
                label: "GoatCounter CSV".into(),
                path: plain,
                expected,
            });
        }
        cases.push(Case {
            format: Format::GoatCounter,
            label: "GoatCounter CSV, gzipped".into(),
            path: gzipped,
            expected,
        });
    }
    if formats.contains(&"plausible") {
        let t = Instant::now();
        let (path, expected) = plausible_files(&dir, pages)?;
        eprintln!(
            "imports: Plausible export of a year of {pages} pages ({} rows) ready in {:.0} s",
            expected.rows,
            t.elapsed().as_secs_f64()
        );
        cases.push(Case {
            format: Format::Plausible,
            label: format!("Plausible CSV export (directory), {pages} pages"),
            path,
            expected,
        });
    }

    println!("\n## Imports\n");
    println!(
        "`tickertape import <format>` (release) as a child process, each file into a fresh database on the bench server with the default retention's TTL indexes (minutes 90 days, hours 2 years); GoatCounter: {rows} rows over 365 days in order, 1,000 pages (Zipf), ~1% events, ~0.3% bots; Plausible: 365 days of {pages} pages (Zipf; a page's row on the days it has views), entry and exit pages, 8 sources, 16 countries, 3 devices, 8 browsers, 6 systems, 3 events a day\n"
    );
    println!("| file | rows | file MiB | wall s | rows/s | validate s | validate rows/s | apply s | apply rows/s | importer peak RSS MiB | importer CPU s | database CPU s | database growth MiB (data / on disk) | stored views, events vs file |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
    let mut wrong = Vec::new();
    for case in &cases {
        let result = import(db, case)
            .await
            .with_context(|| format!("importing {}", case.path.display()))?;
        let m = &result;
        let per_s = |secs: f64| case.expected.rows as f64 / secs;
        let check = if m.wrong.is_empty() {
            format!("{} views, {} events: exact", m.views, m.events)
        } else {
            format!("WRONG: {}", m.wrong.join("; "))
        };
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} / {:.0} | {check} |",
            case.label,
            case.expected.rows,
            size_of(&case.path)? as f64 / 1048576.0,
            m.wall,
            per_s(m.wall),
            m.validate,
            per_s(m.validate),
            m.apply,
            per_s(m.apply),
            m.peak_rss_mib,
            m.cpu,
            m.db_cpu,
            m.data_growth_mib,
            m.disk_growth_mib,
        );
        if !m.wrong.is_empty() {
            wrong.push(case.label.clone());
        }
    }
    println!(
        "\nvalidate: from the start of the process to the import's record (the first pass reads, checks and hashes every row and writes nothing); apply: the second pass, batches of 2,000 rows through the bucket writes of live hits, each in its own transaction per stream, rows past a level's retention not written at that level. Stored: the views in the page-day and site-day buckets and the events in the site's day breakdowns, against the file's rows that are not bots (views: not events; Plausible: the pages file's pageviews and the custom events file's events)."
    );
    if !wrong.is_empty() {
        bail!("imports stored other figures than the file holds: {wrong:?}");
    }
    Ok(())
}

/// What one import run measured, and what it stored.
struct Measured {
    wall: f64,
    validate: f64,
    apply: f64,
    peak_rss_mib: f64,
    cpu: f64,
    db_cpu: f64,
    data_growth_mib: f64,
    disk_growth_mib: f64,
    views: i64,
    events: i64,
    /// Every way the stored figures differ from the file's.
    wrong: Vec<String>,
}

async fn import(db: &Database, case: &Case) -> anyhow::Result<Measured> {
    let (store, _site) = db.fresh(DATABASE).await?;
    // The TTL indexes a deployment has (the server makes them on start).
    tickertape::storage::retention::apply(&store, &tickertape::domain::Retention::default())
        .await?;
    let before = db_size(&store).await?;
    let db_cpu_before = db.server_pid().map(cpu_seconds);
    let spawned_at = Utc::now();
    let t = Instant::now();
    // BENCH_IMPORT_BIN: another build of the command, to compare.
    let binary = std::env::var_os("BENCH_IMPORT_BIN")
        .map_or_else(|| repo().join("target/release/tickertape"), PathBuf::from);
    let mut child = Command::new(binary)
        .args(["import", case.format.subcommand(), "--site", SITE_DOMAIN])
        .arg(&case.path)
        .env("MONGODB_URI", &db.uri)
        .env("TICKERTAPE_DATABASE", DATABASE)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting target/release/tickertape (make bench builds it)")?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().expect("piped");
    // The child is reaped by wait4 below, for its own rusage: the
    // children's total (RUSAGE_CHILDREN) would include every server and
    // wrk this bench ran before.
    drop(child);
    let (status, usage, output) = tokio::task::spawn_blocking(move || {
        let mut output = String::new();
        let read = stdout.read_to_string(&mut output);
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own unreaped child, into locals.
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        read.map(|_| ())?;
        if waited != pid {
            return Err(std::io::Error::last_os_error());
        }
        Ok((status, usage, output))
    })
    .await??;
    let wall = t.elapsed().as_secs_f64();
    let db_cpu = match (db_cpu_before, db.server_pid().map(cpu_seconds)) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    };
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        bail!("the import failed (wait status {status}): {output}");
    }
    eprintln!("{}: {wall:.1} s\n{}", case.label, output.trim_end());
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    let peak_rss_mib = usage.ru_maxrss as f64 / 1024.0;

    let record = store
        .db()
        .collection::<Document>(tickertape::storage::imports::COLLECTION)
        .find_one(doc! {})
        .await?
        .context("no import record")?;
    let started = record.get_datetime("startedAt")?.to_chrono();
    let finished = record.get_datetime("finishedAt")?.to_chrono();
    let validate = (started - spawned_at).as_seconds_f64();
    let apply = (finished - started).as_seconds_f64();

    let after = db_size(&store).await?;
    let e = case.expected;
    let views = crate::roles::stored(&store, Resolution::Day).await?;
    let site_views = sum(&store, "site_views_day", "totalViews").await?;
    let events = events(&store).await?;
    let mut wrong = Vec::new();
    for (what, got, want) in [
        ("views in the page-day buckets", views, e.views),
        ("views in the site-day buckets", site_views, e.views),
        ("events in the site's day breakdowns", events, e.events),
    ] {
        if got != want as i64 {
            wrong.push(format!("{what}: {got}, the file has {want}"));
        }
    }
    for part in case.format.summary(&e) {
        if !output.contains(&part) {
            wrong.push(format!("the command's summary does not say {part:?}"));
        }
    }
    store.db().drop().await?;
    Ok(Measured {
        wall,
        validate,
        apply,
        peak_rss_mib,
        cpu,
        db_cpu,
        data_growth_mib: (after.0 - before.0) / 1048576.0,
        disk_growth_mib: (after.1 - before.1) / 1048576.0,
        views,
        events,
        wrong,
    })
}

/// A file's size, or a directory's files' together.
fn size_of(path: &Path) -> anyhow::Result<u64> {
    if !path.is_dir() {
        return Ok(std::fs::metadata(path)?.len());
    }
    let mut total = 0;
    for entry in std::fs::read_dir(path)? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// A process's user and system CPU seconds so far (`/proc/<pid>/stat`).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; the fields after it do not.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // utime and stime are the stat's 14th and 15th fields; `rest` starts
    // at the 3rd.
    match (ticks(11), ticks(12)) {
        (Some(u), Some(s)) => (u + s) / hz,
        _ => f64::NAN,
    }
}

/// The database's data size and its size on disk (collections and
/// indexes), in bytes.
async fn db_size(store: &Store) -> anyhow::Result<(f64, f64)> {
    let stats = store.db().run_command(doc! {"dbStats": 1}).await?;
    let n = |k: &str| number(stats.get(k)) as f64;
    Ok((n("dataSize"), n("storageSize") + n("indexSize")))
}

async fn sum(store: &Store, collection: &str, field: &str) -> anyhow::Result<i64> {
    let docs: Vec<Document> = store
        .db()
        .collection::<Document>(collection)
        .aggregate([doc! {"$group": {"_id": null, "n": {"$sum": format!("${field}")}}}])
        .await?
        .try_collect()
        .await?;
    Ok(docs.first().map_or(0, |d| number(d.get("n"))))
}

/// Events counted in the site's day breakdowns, all names together.
async fn events(store: &Store) -> anyhow::Result<i64> {
    let mut cursor = store
        .db()
        .collection::<Document>("site_sources_day")
        .find(doc! {Dimension::Event.field(): {"$exists": true}})
        .await?;
    let mut total = 0;
    while let Some(d) = cursor.try_next().await? {
        if let Ok(names) = d.get_document(Dimension::Event.field()) {
            total += names.values().map(|v| number(Some(v))).sum::<i64>();
        }
    }
    Ok(total)
}

/// The plain and gzipped export of `rows` rows in `dir` (the same rows),
/// made unless kept from an earlier run, and what they hold.
fn goatcounter_files(dir: &Path, rows: u64) -> anyhow::Result<(PathBuf, PathBuf, Expected)> {
    let stem = dir.join(format!("goatcounter-v{GENERATOR}-{rows}"));
    let plain = stem.with_extension("csv");
    let gzipped = stem.with_extension("csv.gz");
    let sidecar = stem.with_extension("expected");
    // The sidecar is written last: with it, both files are whole.
    if let Some(e) = std::fs::read_to_string(&sidecar)
        .ok()
        .and_then(|s| Expected::parse(&s))
    {
        if plain.exists() && gzipped.exists() {
            return Ok((plain, gzipped, e));
        }
    }
    let _ = std::fs::remove_file(&sidecar);
    let mut plain_out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&plain)?);
    let mut gz_out = flate2::write::GzEncoder::new(
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&gzipped)?),
        flate2::Compression::default(),
    );
    let start = Resolution::Day.floor(Utc::now()) - TimeDelta::days(365);
    let expected = goatcounter_export(rows, start, |chunk| {
        plain_out.write_all(chunk)?;
        gz_out.write_all(chunk)
    })?;
    plain_out.flush()?;
    gz_out.finish()?.flush()?;
    for file in [&plain, &gzipped] {
        let counted = recount(file)?;
        anyhow::ensure!(
            counted == expected,
            "{} holds {counted:?}, the generator counted {expected:?}",
            file.display()
        );
    }
    std::fs::write(&sidecar, expected.line())?;
    Ok((plain, gzipped, expected))
}

const HEADER: &str = "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n";

/// Real browsers' User-Agents, with GoatCounter's own reading of each
/// (which the import does not use: it classifies the User-Agent itself).
const BROWSERS: [(&str, &str, &str); 8] = [
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome 131", "Windows 10"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", "Safari 18.1", "macOS 10.15"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox 133", "Linux"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "Safari 18.1", "iOS 18.1"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36", "Chrome 131", "Android 14"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.70", "Edge 131", "Windows 10"),
    ("Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36", "Samsung Internet 26", "Android 14"),
    ("Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1", "Safari 17.6", "iOS 17.6"),
];

const BOTS: [(&str, u32); 3] = [
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", 150),
    ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", 150),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36", 4),
];

/// Referrer and GoatCounter's scheme for it: `h` a host and path, `g` a
/// name GoatCounter made, `c` a campaign; most views have none.
const REFERRERS: [(&str, &str); 10] = [
    ("www.google.com/", "h"),
    ("duckduckgo.com/", "h"),
    ("news.ycombinator.com/item", "h"),
    ("www.reddit.com/r/selfhosted/comments/1abcde/", "h"),
    ("github.com/tickertape/tickertape", "h"),
    ("t.co/", "h"),
    ("Hacker News", "g"),
    ("Google", "g"),
    ("newsletter-2026-03", "c"),
    ("mastodon", "c"),
];

const SCREENS: [&str; 6] = [
    "\"1920,1080,1\"",
    "\"1440,900,2\"",
    "\"2560,1440,1\"",
    "\"390,844,3\"",
    "\"412,915,2.625\"",
    "\"820,1180,2\"",
];

const LOCATIONS: [&str; 16] = [
    "US", "US", "US-CA", "DE", "DE-BE", "GB", "NL", "FR", "IN", "BR", "CA", "JP", "PL", "SE", "AU",
    "",
];

const EVENTS: [&str; 3] = ["signup", "download/whitepaper.pdf", "newsletter:subscribe"];

/// A site's 1,000 paths: a few top-level pages, then blog posts, docs and
/// changelog entries.
fn paths() -> Vec<String> {
    paths_of(1000)
}

/// `n` paths, as [`paths`] makes them.
fn paths_of(n: usize) -> Vec<String> {
    let top = ["/", "/pricing", "/docs", "/blog", "/about"];
    let mut paths: Vec<String> = top.iter().take(n).map(|p| (*p).to_owned()).collect();
    let mut k = 0;
    while paths.len() < n {
        k += 1;
        paths.push(match k % 3 {
            0 => format!("/blog/2026/{k}-notes-on-buckets"),
            1 => format!("/docs/guide/section-{k}"),
            _ => format!("/changelog/v{}.{}", k / 10, k % 10),
        });
    }
    paths
}

#[derive(Default)]
struct Session {
    id: u128,
    browser: (&'static str, &'static str, &'static str),
    screen: &'static str,
    location: &'static str,
}

/// Writes `rows` rows (after the header) in time order over the 365 days
/// from `start`, in chunks to `out`, and counts what they hold.
fn goatcounter_export(
    rows: u64,
    start: DateTime<Utc>,
    mut out: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> anyhow::Result<Expected> {
    let paths = paths();
    let mut cdf: Vec<f64> = Vec::with_capacity(paths.len());
    let mut total = 0.0;
    for k in 1..=paths.len() {
        total += 1.0 / k as f64;
        cdf.push(total);
    }
    let span = 365 * 86_400_u64;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut expected = Expected::default();
    let mut session = Session::default();
    let mut text = String::from(HEADER);
    for i in 0..rows {
        let at = start + TimeDelta::seconds((i * span / rows.max(1)) as i64);
        // A session spans a few rows in a row, from one browser, screen
        // and place.
        if session.id == 0 || rng.below(3) == 0 {
            session = Session {
                id: u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()),
                browser: rng.pick(&BROWSERS),
                screen: rng.pick(&SCREENS),
                location: rng.pick(&LOCATIONS),
            };
        }
        let bot = rng.below(1000) < 3;
        let event = !bot && rng.below(100) == 0;
        let (ua, browser, system, bot_code) = if bot {
            let (ua, code) = rng.pick(&BOTS);
            (ua, "", "", code)
        } else {
            let (ua, b, s) = session.browser;
            (ua, b, s, 0)
        };
        let (path, title) = if event {
            let name = rng.pick(&EVENTS);
            (name.to_owned(), name.to_owned())
        } else {
            let u = rng.unit() * total;
            let k = cdf.partition_point(|c| *c < u).min(paths.len() - 1);
            (paths[k].clone(), format!("Page {k}, Example Inc."))
        };
        let (referrer, scheme) = if rng.below(10) < 4 {
            rng.pick(&REFERRERS)
        } else {
            ("", "")
        };
        match (bot, event) {
            (true, _) => expected.bots += 1,
            (false, true) => expected.events += 1,
            (false, false) => expected.views += 1,
        }
        expected.rows += 1;
        writeln!(
            text,
            "{path},\"{title}\",{event},\"{ua}\",{browser},{system},{:08x}-{:04x}-{:04x}-{:04x}-{:012x},{bot_code},{referrer},{scheme},{},{},{},{}",
            session.id >> 96,
            (session.id >> 80) & 0xffff,
            (session.id >> 64) & 0xffff,
            (session.id >> 48) & 0xffff,
            session.id & 0xffff_ffff_ffff,
            session.screen,
            session.location,
            rng.below(4) == 0,
            at.format("%Y-%m-%dT%H:%M:%SZ"),
        )?;
        if text.len() >= 1 << 16 {
            out(text.as_bytes())?;
            text.clear();
        }
    }
    out(text.as_bytes())?;
    Ok(expected)
}

/// The rows of a written export counted again from the file, by column
/// name: the generator's own tally is checked before it is trusted.
fn recount(path: &Path) -> anyhow::Result<Expected> {
    let mut reader = csv::Reader::from_reader(tickertape::import::reading::open(path)?);
    let header = reader.headers()?.clone();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("no column {name}"))
    };
    let (event, bot) = (column("Event")?, column("Bot")?);
    let mut expected = Expected::default();
    for record in reader.records() {
        let record = record?;
        expected.rows += 1;
        match (
            record.get(bot) != Some("0"),
            record.get(event) == Some("true"),
        ) {
            (true, _) => expected.bots += 1,
            (false, true) => expected.events += 1,
            (false, false) => expected.views += 1,
        }
    }
    Ok(expected)
}

/// Plausible's tables, in the order the import applies them, each with the
/// header its export writes (Plausible CE 2.1 and later).
const PLAUSIBLE_TABLES: [(&str, &str); 10] = [
    ("visitors", "date,visitors,pageviews,bounces,visits,visit_duration"),
    ("entry_pages", "date,entry_page,visitors,entrances,visit_duration,bounces,pageviews"),
    ("exit_pages", "date,exit_page,visitors,visit_duration,exits,bounces,pageviews"),
    ("sources", "date,source,referrer,utm_source,utm_medium,utm_campaign,utm_content,utm_term,pageviews,visitors,visits,visit_duration,bounces"),
    ("locations", "date,country,region,city,visitors,visits,visit_duration,bounces,pageviews"),
    ("devices", "date,device,visitors,visits,visit_duration,bounces,pageviews"),
    ("browsers", "date,browser,browser_version,visitors,visits,visit_duration,bounces,pageviews"),
    ("operating_systems", "date,operating_system,operating_system_version,visitors,visits,visit_duration,bounces,pageviews"),
    ("custom_events", "date,name,link_url,path,visitors,events"),
    ("pages", "date,hostname,page,visits,visitors,pageviews,total_scroll_depth,total_scroll_depth_visits,total_time_on_page,total_time_on_page_visits"),
];

/// Sources as Plausible names them, with a referrer, medium and campaign.
const PLAUSIBLE_SOURCES: [(&str, &str, &str, &str); 8] = [
    ("Direct / None", "", "", ""),
    ("Google", "www.google.com", "", ""),
    ("DuckDuckGo", "duckduckgo.com", "", ""),
    ("Hacker News", "news.ycombinator.com", "", ""),
    ("GitHub", "github.com", "", ""),
    ("Reddit", "www.reddit.com", "social", ""),
    ("newsletter", "", "email", "2026-03"),
    ("Bing", "www.bing.com", "", ""),
];
const PLAUSIBLE_COUNTRIES: [&str; 16] = [
    "US", "DE", "GB", "NL", "FR", "IN", "BR", "CA", "JP", "PL", "SE", "AU", "ES", "IT", "CH", "ZZ",
];
const PLAUSIBLE_DEVICES: [&str; 3] = ["Desktop", "Mobile", "Tablet"];
const PLAUSIBLE_BROWSERS: [&str; 8] = [
    "Chrome",
    "Safari",
    "Firefox",
    "Microsoft Edge",
    "Samsung Browser",
    "Opera",
    "Mobile Safari",
    "Chrome Webview",
];
const PLAUSIBLE_SYSTEMS: [&str; 6] = ["Windows", "Mac", "GNU/Linux", "iOS", "Android", "Chrome OS"];
const PLAUSIBLE_EVENTS: [&str; 3] = ["Signup", "File Download", "Outbound Link: Click"];

/// The directory of a Plausible export of a year of `pages` pages, made
/// unless kept from an earlier run, and what it holds.
fn plausible_files(dir: &Path, pages: u32) -> anyhow::Result<(PathBuf, Expected)> {
    let out = dir.join(format!("plausible-v{PLAUSIBLE_GENERATOR}-{pages}"));
    let sidecar = out.with_extension("expected");
    if let Some(e) = std::fs::read_to_string(&sidecar)
        .ok()
        .and_then(|s| Expected::parse(&s))
    {
        if out.is_dir() {
            return Ok((out, e));
        }
    }
    let _ = std::fs::remove_file(&sidecar);
    let _ = std::fs::remove_dir_all(&out);
    let partial = out.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)?;
    // The 365 whole days before today (UTC, the bench site's zone).
    let first = (Resolution::Day.floor(Utc::now()) - TimeDelta::days(365)).date_naive();
    let last = first + TimeDelta::days(364);
    let stamp = |d: chrono::NaiveDate| d.format("%Y%m%d").to_string();
    let mut writers = Vec::new();
    for (table, header) in PLAUSIBLE_TABLES {
        let name = format!("imported_{table}_{}_{}.csv", stamp(first), stamp(last));
        let mut w =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(partial.join(name))?);
        writeln!(w, "{header}")?;
        writers.push(w);
    }
    let expected = plausible_export(pages as usize, first, &mut writers)?;
    for mut w in writers {
        w.flush()?;
    }
    let counted = plausible_recount(&partial)?;
    anyhow::ensure!(
        counted == expected,
        "{} holds {counted:?}, the generator counted {expected:?}",
        partial.display()
    );
    std::fs::rename(&partial, &out)?;
    std::fs::write(&sidecar, expected.line())?;
    Ok((out, expected))
}

/// Writes a year of days from `first` into the tables' writers (in
/// [`PLAUSIBLE_TABLES`] order) and counts the rows, the pages' views and
/// the events.
fn plausible_export(
    pages: usize,
    first: chrono::NaiveDate,
    w: &mut [std::io::BufWriter<std::fs::File>],
) -> anyhow::Result<Expected> {
    let paths = paths_of(pages);
    let harmonic: f64 = (1..=pages).map(|k| 1.0 / k as f64).sum();
    // About 20 views a page a day, shared out by Zipf: the tail's pages
    // have a view or two on most days.
    let daily = 20.0 * pages as f64;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut e = Expected::default();
    let mut rows = [0u64; 10];
    for d in 0..365 {
        let day = (first + TimeDelta::days(d)).format("%F").to_string();
        let (mut views, mut visits, mut visitors) = (0u64, 0u64, 0u64);
        for (k, path) in paths.iter().enumerate() {
            let mean = daily / ((k + 1) as f64 * harmonic);
            let n = (mean * (0.5 + rng.unit())) as u64;
            if n == 0 {
                continue;
            }
            let people = (n * 2 / 3).max(1);
            let entrances = n / 3;
            let exits = n / 3;
            writeln!(
                w[9],
                "{day},{SITE_DOMAIN},{path},{entrances},{people},{n},0,0,{},{}",
                n * 30,
                n / 2
            )?;
            rows[9] += 1;
            if entrances > 0 {
                writeln!(
                    w[1],
                    "{day},{path},{entrances},{entrances},{},{},{entrances}",
                    entrances * 45,
                    entrances / 2
                )?;
                rows[1] += 1;
            }
            if exits > 0 {
                writeln!(
                    w[2],
                    "{day},{path},{exits},{},{exits},{},{exits}",
                    exits * 45,
                    exits / 2
                )?;
                rows[2] += 1;
            }
            views += n;
            visits += entrances;
            visitors += people;
        }
        e.views += views;
        writeln!(
            w[0],
            "{day},{},{views},{},{visits},{}",
            visitors * 3 / 4,
            visits / 2,
            visits * 60
        )?;
        rows[0] += 1;
        // The day's views shared out over each breakdown's names.
        let share = |i: usize, of: usize| (views / of as u64 + (i as u64 % 3)).max(1);
        for (i, (source, referrer, medium, campaign)) in PLAUSIBLE_SOURCES.iter().enumerate() {
            let n = share(i, PLAUSIBLE_SOURCES.len());
            writeln!(
                w[3],
                "{day},{source},{referrer},,{medium},{campaign},,,{n},{},{},{},{}",
                n / 2,
                n / 2,
                n * 20,
                n / 4
            )?;
            rows[3] += 1;
        }
        let breakdown = |w: &mut std::io::BufWriter<std::fs::File>,
                         names: &[&str],
                         version: bool|
         -> std::io::Result<u64> {
            for (i, name) in names.iter().enumerate() {
                let n = share(i, names.len());
                let version = if version { "1.0," } else { "" };
                writeln!(
                    w,
                    "{day},{name},{version}{},{},{},{},{n}",
                    n / 2,
                    n / 2,
                    n * 20,
                    n / 4
                )?;
            }
            Ok(names.len() as u64)
        };
        // Locations carry a region and a city.
        for (i, country) in PLAUSIBLE_COUNTRIES.iter().enumerate() {
            let n = share(i, PLAUSIBLE_COUNTRIES.len());
            writeln!(
                w[4],
                "{day},{country},,0,{},{},{},{},{n}",
                n / 2,
                n / 2,
                n * 20,
                n / 4
            )?;
            rows[4] += 1;
        }
        rows[5] += breakdown(&mut w[5], &PLAUSIBLE_DEVICES, false)?;
        rows[6] += breakdown(&mut w[6], &PLAUSIBLE_BROWSERS, true)?;
        rows[7] += breakdown(&mut w[7], &PLAUSIBLE_SYSTEMS, true)?;
        for (i, name) in PLAUSIBLE_EVENTS.iter().enumerate() {
            let n = (views / 100 + i as u64 + rng.below(5) as u64).max(1);
            writeln!(w[8], "{day},{name},,,{},{n}", (n / 2).max(1))?;
            rows[8] += 1;
            e.events += n;
        }
    }
    e.rows = rows.iter().sum();
    Ok(e)
}

/// The rows of a written Plausible export counted again from its files,
/// by column name.
fn plausible_recount(dir: &Path) -> anyhow::Result<Expected> {
    let mut e = Expected::default();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut reader = csv::Reader::from_path(&path)?;
        let header = reader.headers()?.clone();
        let column = |name: &str| header.iter().position(|h| h == name);
        let summed = if name.starts_with("imported_pages_") {
            column("pageviews")
        } else if name.starts_with("imported_custom_events_") {
            column("events")
        } else {
            None
        };
        for record in reader.records() {
            let record = record?;
            e.rows += 1;
            if let Some(i) = summed {
                let n: u64 = record.get(i).unwrap_or_default().parse()?;
                if name.starts_with("imported_pages_") {
                    e.views += n;
                } else {
                    e.events += n;
                }
            }
        }
    }
    Ok(e)
}

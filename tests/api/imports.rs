//! `tickertape import` (issue 27): a peer's export, validated whole before
//! anything is written, then applied exactly once, also across a rerun
//! and a `kill -9`.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output};
use tickertape::domain::Dimension;
use tickertape::storage::Resolution;

use crate::helpers::*;

const HEADER: &str = "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date";
const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";

/// One export row: path, event?, bot, referrer, scheme, location, time.
struct Line {
    path: String,
    event: bool,
    bot: u32,
    referrer: &'static str,
    scheme: &'static str,
    location: &'static str,
    at: DateTime<Utc>,
}

impl Line {
    fn csv(&self, i: usize) -> String {
        let ua = if i % 3 == 0 { IPHONE } else { FIREFOX };
        format!(
            "{},\"A title, with a comma\",{},\"{ua}\",Firefox 133,Linux,{},{},{},{},\"1440,900,1\",{},{},{}",
            self.path,
            self.event,
            uuid::Uuid::new_v4(),
            self.bot,
            self.referrer,
            self.scheme,
            self.location,
            i % 7 == 0,
            self.at.to_rfc3339()
        )
    }
}

/// `n` rows over three days and four pages, with events, bots, referrers
/// of each scheme and countries.
fn export(n: usize) -> Vec<Line> {
    let start = Resolution::Day.floor(t0()) - TimeDelta::days(40);
    (0..n)
        .map(|i| Line {
            path: if i % 10 == 9 {
                "Signup".into()
            } else {
                format!("/docs/{}", i % 4)
            },
            event: i % 10 == 9,
            bot: if i % 17 == 0 { 150 } else { 0 },
            referrer: ["", "news.example/post", "weekly", "Hacker News"][i % 4],
            scheme: ["", "h", "c", "g"][i % 4],
            location: ["NL", "US-CA", "", "de"][i % 4],
            at: start + TimeDelta::seconds((i as i64 * 3 * 86_400) / n as i64),
        })
        .collect()
}

fn file_text(lines: &[Line]) -> String {
    let mut text = String::from(HEADER);
    text.push('\n');
    for (i, l) in lines.iter().enumerate() {
        text.push_str(&l.csv(i));
        text.push('\n');
    }
    text
}

/// What the file holds: views per page and day, and events per name.
fn expected(
    domain: &str,
    lines: &[Line],
) -> (BTreeMap<(String, String), i64>, BTreeMap<String, i64>) {
    let mut views = BTreeMap::new();
    let mut events = BTreeMap::new();
    for l in lines.iter().filter(|l| l.bot == 0) {
        if l.event {
            *events.entry(l.path.clone()).or_default() += 1;
        } else {
            let day = Resolution::Day.floor(l.at).format("%F").to_string();
            *views
                .entry((format!("{domain}{}", l.path), day))
                .or_default() += 1;
        }
    }
    (views, events)
}

/// Views per page and day, from the minute buckets and from the day
/// buckets (which must agree).
async fn stored(app: &TestApp) -> BTreeMap<(String, String), i64> {
    let mut by_minute = BTreeMap::new();
    for b in app.buckets(Resolution::Minute).await {
        let day = Resolution::Day
            .floor(b.timestamp.to_chrono())
            .format("%F")
            .to_string();
        *by_minute.entry((b.page, day)).or_default() += b.total_views;
    }
    let mut by_day = BTreeMap::new();
    for b in app.buckets(Resolution::Day).await {
        let day = b.timestamp.to_chrono().format("%F").to_string();
        *by_day.entry((b.page, day)).or_default() += b.total_views;
    }
    by_minute.retain(|_, v| *v != 0);
    by_day.retain(|_, v| *v != 0);
    assert_eq!(by_minute, by_day, "minute and day buckets agree");
    by_minute
}

fn import_command(app: &TestApp, site: &str, file: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.args(["import", "goatcounter", "--site", site])
        .arg(file)
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("RUST_LOG", "warn");
    cmd
}

fn import(app: &TestApp, site: &str, file: &std::path::Path) -> Output {
    import_command(app, site, file).output().unwrap()
}

#[tokio::test]
async fn a_goatcounter_export_lands_exactly_once_plain_or_gzipped() {
    let app = spawn_app().await;
    let site = app.add_site("docs.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let lines = export(3_000);
    let plain = dir.path().join("export.csv");
    let text = file_text(&lines);
    std::fs::write(&plain, &text).unwrap();
    let out = import(&app, "docs.test", &plain);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (views, want_events) = expected("docs.test", &lines);
    let bots = lines.iter().filter(|l| l.bot != 0).count();
    assert!(
        stdout.contains(&format!(
            "3000 rows: {} views, {} events, skipped {bots} bot",
            views.values().sum::<i64>(),
            want_events.values().sum::<i64>()
        )),
        "{stdout}"
    );
    assert_eq!(stored(&app).await, views);
    assert_eq!(site_day_counts(&app, Dimension::Event).await, want_events);
    // The countries and devices came with the views.
    let countries = app
        .store
        .db()
        .collection::<Document>("site_sources_day")
        .count_documents(doc! {"country": {"$exists": true}})
        .await
        .unwrap();
    assert!(countries > 0);
    // A second run (by id this time) writes nothing.
    let again = import(&app, &site.id.to_string(), &plain);
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already imported"),
        "{again:?}"
    );
    assert_eq!(stored(&app).await, views);
    assert_eq!(site_day_counts(&app, Dimension::Event).await, want_events);
    // The same rows gzipped are the same import.
    let gz = dir.path().join("export.csv.gz");
    let mut encoder =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap();
    let gzipped = import(&app, "docs.test", &gz);
    assert!(gzipped.status.success(), "{gzipped:?}");
    assert!(
        String::from_utf8_lossy(&gzipped.stdout).contains("already imported"),
        "{gzipped:?}"
    );
    assert_eq!(stored(&app).await, views);
    // The site's settings page lists it.
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text(&format!("/sites/{}/settings", site.id)).await;
    assert_eq!(status, 200);
    let table = html
        .split("<table id=\"imports-list\">")
        .nth(1)
        .expect("the imports table");
    assert!(
        table.contains("<td>goatcounter</td>") && table.contains("export.csv"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            ">{}</td>",
            tickertape::web::fmt::thousands(&views.values().sum::<i64>())
        )),
        "{table}"
    );
    // `import list` shows it once, done, with what it counted.
    let listed = Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args(["import", "list"])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(
        listed.contains("\tgoatcounter\tdocs.test\t")
            && listed.contains("\t3000 rows\tskipped days: none\tdone ")
            && listed.contains(&format!(
                "({} views, {} events)",
                views.values().sum::<i64>(),
                want_events.values().sum::<i64>()
            )),
        "{listed}"
    );
}

/// Rows on days the site already has views on are skipped (and said),
/// unless `--overlap add`; a rerun skips the same days although the
/// import's own rows are on the others by then.
#[tokio::test]
async fn days_with_live_figures_are_skipped_unless_asked() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let lines = export(900);
    let middle = Resolution::Day.floor(lines[450].at);
    app.write_hits(&[("docs.test/live", middle + TimeDelta::hours(5))])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.csv");
    std::fs::write(&file, file_text(&lines)).unwrap();
    let out = import(&app, "docs.test", &file);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let day = middle.format("%F").to_string();
    assert!(
        stdout.contains(&format!(
            "skipped days with live figures (--overlap add imports them too): {day}"
        )),
        "{stdout}"
    );
    let (mut views, _) = expected("docs.test", &lines);
    let on_day = lines
        .iter()
        .filter(|l| l.bot == 0 && Resolution::Day.floor(l.at) == middle)
        .count();
    assert!(
        stdout.contains(&format!("{on_day} on days with live figures")),
        "{stdout}"
    );
    views.retain(|(_, d), _| *d != day);
    views.insert(("docs.test/live".into(), day.clone()), 1);
    assert_eq!(stored(&app).await, views);
    // Run again: the same day is skipped, nothing is written.
    let again = import(&app, "docs.test", &file);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already imported"),
        "{again:?}"
    );
    assert_eq!(stored(&app).await, views);
    // On another site, `--overlap add` adds to the live day.
    app.add_site("add.test", &[]).await;
    app.write_hits(&[("add.test/live", middle + TimeDelta::hours(5))])
        .await;
    let other = dir.path().join("other.csv");
    std::fs::write(&other, file_text(&lines)).unwrap();
    let out = import_command(&app, "add.test", &other)
        .args(["--overlap", "add"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (added, _) = expected("add.test", &lines);
    let stored_add: i64 = stored(&app)
        .await
        .iter()
        .filter(|((p, _), _)| p.starts_with("add.test/"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(stored_add, added.values().sum::<i64>() + 1);
}

#[tokio::test]
async fn every_bad_export_is_named_by_line_and_column_and_writes_nothing() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let good = file_text(&export(20));
    let nth_line = |text: &str, n: usize, f: &dyn Fn(&str) -> String| {
        text.lines()
            .enumerate()
            .map(|(i, l)| if i == n { f(l) } else { l.to_owned() })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a CSV that is not GoatCounter's",
            good.replacen("2Path", "Path", 1),
            "2Path",
        ),
        (
            "a missing column",
            good.replacen(",Date", ",When", 1),
            "column \"Date\": this required column is missing",
        ),
        (
            "a bad date",
            nth_line(&good, 3, &|l| {
                l.rsplit_once(',').unwrap().0.to_owned() + ",yesterday"
            }),
            ":4: column \"Date\"",
        ),
        (
            "a page that breaks the page rules",
            nth_line(&good, 2, &|l| l.replacen("/docs/", "docs/", 1)),
            ":3: column \"2Path\"",
        ),
        (
            "a country that is not a code",
            nth_line(&good, 4, &|l| {
                l.replacen(",NL,", ",Netherlands,", 1)
                    .replacen(",US-CA,", ",Netherlands,", 1)
                    .replacen(",,false", ",Netherlands,false", 1)
                    .replacen(",de,", ",Netherlands,", 1)
            }),
            ":5: column \"Location\"",
        ),
        (
            "a bot flag that is not a number",
            nth_line(&good, 5, &|l| {
                l.replacen(",0,", ",no,", 1).replacen(",150,", ",no,", 1)
            }),
            ":6: column \"Bot\"",
        ),
        (
            "a row with a missing field",
            nth_line(&good, 6, &|l| l.rsplit_once(',').unwrap().0.to_owned()),
            "not CSV",
        ),
    ];
    for (what, text, says) in cases {
        let file = dir.path().join("bad.csv");
        std::fs::write(&file, &text).unwrap();
        let out = import(&app, "docs.test", &file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: {out:?}");
        assert!(
            stderr.contains("bad.csv") && stderr.contains(says),
            "{what}: {stderr}"
        );
        assert_eq!(app.bucket_count().await, 0, "{what}");
        let progress = app
            .store
            .db()
            .collection::<Document>(tickertape::storage::progress::COLLECTION)
            .count_documents(doc! {"journal": {"$regex": "^import/"}})
            .await
            .unwrap();
        assert_eq!(progress, 0, "{what}");
        let imports = app
            .store
            .db()
            .collection::<Document>(tickertape::storage::imports::COLLECTION)
            .count_documents(doc! {})
            .await
            .unwrap();
        assert_eq!(imports, 0, "{what}");
    }
    // An unknown site, and a file that is not there.
    let file = dir.path().join("good.csv");
    std::fs::write(&file, &good).unwrap();
    let out = import(&app, "nobody.test", &file);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no site"),
        "{out:?}"
    );
    let out = import(&app, "docs.test", &dir.path().join("missing.csv"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing.csv"),
        "{out:?}"
    );
    assert_eq!(app.bucket_count().await, 0);
}

#[tokio::test]
async fn an_import_killed_midway_and_run_again_ends_with_the_files_figures() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let lines = export(30_000);
    let file = dir.path().join("export.csv");
    std::fs::write(&file, file_text(&lines)).unwrap();
    let mut child = import_command(&app, "docs.test", &file)
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Killed once some batches are in and the rest are not.
    let progress = app
        .store
        .db()
        .collection::<Document>(tickertape::storage::progress::COLLECTION);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let done = progress
            .find_one(doc! {"stream": "views", "journal": {"$regex": "^import/"}})
            .await
            .unwrap()
            .and_then(|d| d.get_i64("position").ok())
            .unwrap_or(0);
        if done >= 2_500 {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            panic!("the import ended before it was killed: {stderr}");
        }
        assert!(std::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (views, want_events) = expected("docs.test", &lines);
    let partial = app.total_views(Resolution::Minute).await;
    assert!(
        partial < views.values().sum::<i64>(),
        "killed before the end"
    );
    let out = import_command(&app, "docs.test", &file)
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("were in from an earlier run"),
        "{out:?}"
    );
    assert_eq!(stored(&app).await, views);
    assert_eq!(site_day_counts(&app, Dimension::Event).await, want_events);
}

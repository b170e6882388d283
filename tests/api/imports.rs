//! `tickertape import`: a peer's export, validated whole before
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

/// A CSV file: `header`, then `lines`, each ended by a newline.
fn csv_text(header: &str, lines: impl Iterator<Item = String>) -> String {
    let mut text = String::from(header);
    text.push('\n');
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

fn file_text(lines: &[Line]) -> String {
    csv_text(HEADER, lines.iter().enumerate().map(|(i, l)| l.csv(i)))
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
    import_command_of(app, "goatcounter", site, file)
}

/// `tickertape import <kind> --site <site> <file>` against the test's
/// database.
pub(crate) fn import_command_of(
    app: &TestApp,
    kind: &str,
    site: &str,
    file: &std::path::Path,
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.args(["import", kind, "--site", site])
        .arg(file)
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("RUST_LOG", "warn");
    cmd
}

fn import(app: &TestApp, site: &str, file: &std::path::Path) -> Output {
    import_command(app, site, file).output().unwrap()
}

/// `text` with its line `n` (from 0) changed by `f`.
fn nth_line(text: &str, n: usize, f: &dyn Fn(&str) -> String) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| if i == n { f(l) } else { l.to_owned() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `tickertape import list`'s lines.
fn import_list(app: &TestApp) -> String {
    let listed = Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args(["import", "list"])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .output()
        .unwrap();
    String::from_utf8_lossy(&listed.stdout).into_owned()
}

/// The imports table of the site's settings page, seen by an admin.
pub(crate) async fn imports_table(
    admin: &Login,
    site: &tickertape::storage::sites::Site,
) -> String {
    let (status, html) = admin.text(&format!("/sites/{}/settings", site.id)).await;
    assert_eq!(status, 200);
    html.split("<table id=\"imports-list\">")
        .nth(1)
        .expect("the imports table")
        .to_owned()
}

/// Asserts that a refused import left no bucket, progress or record.
async fn assert_nothing_written(app: &TestApp, what: &str) {
    assert_eq!(app.bucket_count().await, 0, "{what}");
    let db = app.store.db();
    let progress = db
        .collection::<Document>(tickertape::storage::progress::COLLECTION)
        .count_documents(doc! {"journal": {"$regex": "^import/"}})
        .await
        .unwrap();
    assert_eq!(progress, 0, "{what}");
    let imports = db
        .collection::<Document>(tickertape::storage::imports::COLLECTION)
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(imports, 0, "{what}");
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
        .collection::<Document>("site_breakdowns_day")
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
    let table = imports_table(&admin, &site).await;
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
    let listed = import_list(&app);
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
    // And `--overlap replace` clears the live day first: the file's alone.
    app.add_site("replace.test", &[]).await;
    app.write_hits(&[("replace.test/live", middle + TimeDelta::hours(5))])
        .await;
    let out = import_command(&app, "replace.test", &other)
        .args(["--overlap", "replace"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "replaced days (their live figures cleared): {day}"
        )),
        "{out:?}"
    );
    let (replaced, _) = expected("replace.test", &lines);
    let mut stored_replace = stored(&app).await;
    stored_replace.retain(|(p, _), v| p.starts_with("replace.test/") && *v != 0);
    assert_eq!(stored_replace, replaced);
    assert!(
        import_list(&app).contains(&format!("\treplaced days: {day}\tdone ")),
        "{}",
        import_list(&app)
    );
}

/// An import that replaces days another import filled: deleting the
/// first one afterwards takes back only what is left of it, so the days
/// show the second import's figures alone.
#[tokio::test]
async fn deleting_an_import_whose_days_another_replaced_leaves_the_replacements() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let lines = export(900);
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.csv");
    std::fs::write(&first, file_text(&lines)).unwrap();
    let out = import(&app, "docs.test", &first);
    assert!(out.status.success(), "{out:?}");
    let first_key = printed_key(&out);
    let later = &lines[300..700];
    let second = dir.path().join("second.csv");
    std::fs::write(&second, file_text(later)).unwrap();
    let out = import_command(&app, "docs.test", &second)
        .args(["--overlap", "replace"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (mut want, _) = expected("docs.test", &lines);
    let (replacing, _) = expected("docs.test", later);
    let replaced_days: std::collections::BTreeSet<&String> =
        replacing.keys().map(|(_, d)| d).collect();
    want.retain(|(_, d), _| !replaced_days.contains(d));
    want.extend(replacing.clone());
    let mut held = stored(&app).await;
    held.retain(|_, v| *v != 0);
    assert_eq!(held, want);
    let deleted = delete_command(&app, &first_key).output().unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    let mut held = stored(&app).await;
    held.retain(|_, v| *v != 0);
    assert_eq!(held, replacing, "the replacing import's figures alone");
}

#[tokio::test]
async fn every_bad_export_is_named_by_line_and_column_and_writes_nothing() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let good = file_text(&export(20));
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
        (
            "a date in the year 0",
            nth_line(&good, 3, &|l| {
                l.rsplit_once(',').unwrap().0.to_owned() + ",0000-01-01T10:00:00Z"
            }),
            ":4: column \"Date\"",
        ),
        (
            "a date before 1990",
            nth_line(&good, 3, &|l| {
                l.rsplit_once(',').unwrap().0.to_owned() + ",1989-12-31T23:00:00Z"
            }),
            ":4: column \"Date\"",
        ),
        (
            "a date after tomorrow",
            nth_line(&good, 3, &|l| {
                l.rsplit_once(',').unwrap().0.to_owned() + ",2099-01-01T00:00:00Z"
            }),
            ":4: column \"Date\"",
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
        assert_nothing_written(&app, what).await;
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

/// Runs `import()` in batches of 250 rows, kills it (SIGKILL) once
/// `stream` has 2,500 rows in and before the file's `views` are, then
/// runs it again to its end.
pub(crate) async fn kill_midway_then_rerun(
    app: &TestApp,
    import: impl Fn() -> Command,
    stream: &str,
    views: i64,
) {
    let mut child = import()
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let progress = app
        .store
        .db()
        .collection::<Document>(tickertape::storage::progress::COLLECTION);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let done = progress
            .find_one(doc! {"stream": stream, "journal": {"$regex": "^import/"}})
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
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        app.total_views(Resolution::Minute).await < views,
        "killed before the end"
    );
    let out = import()
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("were in from an earlier run"),
        "{out:?}"
    );
}

#[tokio::test]
async fn an_import_killed_midway_and_run_again_ends_with_the_files_figures() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let lines = export(30_000);
    let file = dir.path().join("export.csv");
    std::fs::write(&file, file_text(&lines)).unwrap();
    let (views, want_events) = expected("docs.test", &lines);
    let import = || import_command(&app, "docs.test", &file);
    kill_midway_then_rerun(&app, import, "views", views.values().sum()).await;
    assert_eq!(stored(&app).await, views);
    assert_eq!(site_day_counts(&app, Dimension::Event).await, want_events);
}

/// `psql \copy (SELECT * FROM website_event …) … CSV HEADER`'s header, as
/// Umami 3's schema has it.
const UMAMI_EVENTS: &str = "event_id,website_id,session_id,visit_id,created_at,url_path,url_query,utm_source,utm_medium,utm_campaign,utm_content,utm_term,referrer_path,referrer_query,referrer_domain,page_title,gclid,fbclid,msclkid,ttclid,li_fat_id,twclid,event_type,event_name,tag,hostname,lcp,inp,cls,fcp,ttfb";
const UMAMI_SESSIONS: &str = "session_id,website_id,browser,os,device,screen,language,country,region,city,distinct_id,created_at";
const UMAMI_WEBSITE: &str = "94db1cb1-74f4-4a40-ad6c-962362670409";
/// Sessions in an export; the first is not in the session file.
const UMAMI_SESSION_COUNT: u128 = 50;

/// One `website_event` row.
#[derive(Clone)]
struct UmamiRow {
    session: u128,
    visit: u128,
    at: DateTime<Utc>,
    path: String,
    /// 1 a view, 2 a custom event, 5 a web-vitals measurement.
    kind: u8,
    name: &'static str,
    referrer: &'static str,
    utm: bool,
}

impl UmamiRow {
    fn csv(&self, i: usize) -> String {
        let (source, medium) = if self.utm {
            ("newsletter", "email")
        } else {
            ("", "")
        };
        format!(
            "{},{UMAMI_WEBSITE},{},{},{},{},{},{source},{medium},,,,/post,,{},\"A title, with a comma\",,,,,,,{},{},,umami.test,,,,,",
            uuid::Uuid::from_u128(i as u128 + 1),
            uuid::Uuid::from_u128(self.session),
            uuid::Uuid::from_u128(self.visit),
            // As psql writes a timestamptz.
            self.at.format("%Y-%m-%d %H:%M:%S%.6f+00"),
            self.path,
            if self.utm { "utm_source=newsletter&utm_medium=email" } else { "" },
            self.referrer,
            self.kind,
            self.name,
        )
    }
}

/// Three days of `per_day` visits over five pages, ordered by
/// `created_at`: visits of one to four views four minutes apart (so they
/// interleave), a Signup event in every third, a web-vitals row in every
/// tenth, and each day's last visit going past midnight.
fn umami_export(per_day: usize) -> Vec<UmamiRow> {
    let start = Resolution::Day.floor(t0()) - TimeDelta::days(40);
    let mut rows = Vec::new();
    for d in 0..3 {
        let day = start + TimeDelta::days(d as i64);
        for v in 0..per_day {
            let visit = ((d * per_day + v) as u128) << 64 | 0xabc;
            let session = ((v * 7 + d * 3) as u128 % UMAMI_SESSION_COUNT) + 1;
            let begins = if v + 1 == per_day {
                day + TimeDelta::minutes(23 * 60 + 55)
            } else {
                day + TimeDelta::seconds((v * 86_000 / per_day) as i64)
            };
            let row = |j: usize, kind: u8, name: &'static str| UmamiRow {
                session,
                visit,
                at: begins + TimeDelta::seconds(j as i64 * 240 + i64::from(kind == 5) * 30),
                path: format!("/docs/{}", (v + j) % 5),
                kind,
                name,
                referrer: match (j, v % 4) {
                    (0, 1) => "news.example",
                    (0, 2) => "search.example",
                    (0, _) => "",
                    _ => "umami.test",
                },
                utm: j == 0 && v % 5 == 0,
            };
            for j in 0..1 + v % 4 {
                rows.push(row(j, 1, ""));
            }
            if v % 3 == 0 {
                rows.push(UmamiRow {
                    at: begins + TimeDelta::seconds(60),
                    ..row(0, 2, "Signup")
                });
            }
            if v % 10 == 0 {
                rows.push(row(0, 5, ""));
            }
        }
    }
    rows.sort_by_key(|r| r.at);
    rows
}

fn umami_text(rows: &[UmamiRow]) -> String {
    csv_text(UMAMI_EVENTS, rows.iter().enumerate().map(|(i, r)| r.csv(i)))
}

const UMAMI_COUNTRIES: [&str; 5] = ["DE", "US", "", "NL", "FR"];

fn umami_sessions_text() -> String {
    let sessions = (2..=UMAMI_SESSION_COUNT).map(|s| {
        let i = s as usize % 5;
        format!(
            "{},{UMAMI_WEBSITE},{},{},{},1920x1080,en-US,{},,,,2026-10-01 00:00:00+00",
            uuid::Uuid::from_u128(s),
            ["chrome", "firefox", "crios", "safari", "edge-chromium"][i],
            ["Windows 10", "Mac OS", "iOS", "Linux", "Android OS"][i],
            ["desktop", "laptop", "mobile", "tablet", "desktop"][i],
            UMAMI_COUNTRIES[i],
        )
    });
    csv_text(UMAMI_SESSIONS, sessions)
}

/// What an Umami export holds, summed from its rows as Tickertape counts
/// them: a visit is a `visit_id` within a UTC day (its views are never
/// 30 minutes apart here), a visitor a session within a UTC day.
#[derive(Debug, Default, PartialEq)]
struct UmamiFigures {
    views: BTreeMap<(String, String), i64>,
    events: BTreeMap<String, i64>,
    countries: BTreeMap<String, i64>,
    /// Per day: visitors, visits, bounces.
    days: BTreeMap<String, [i64; 3]>,
    /// Per day and page: entries, exits.
    pages: BTreeMap<(String, String), [i64; 2]>,
}

fn umami_expected(domain: &str, rows: &[UmamiRow]) -> UmamiFigures {
    let mut f = UmamiFigures::default();
    let mut visits: BTreeMap<(String, u128), Vec<&UmamiRow>> = BTreeMap::new();
    let mut visitors: BTreeMap<String, std::collections::BTreeSet<u128>> = BTreeMap::new();
    for r in rows {
        let day = r.at.format("%F").to_string();
        match r.kind {
            1 => {
                *f.views
                    .entry((format!("{domain}{}", r.path), day.clone()))
                    .or_default() += 1;
                let country = match r.session {
                    1 => "unknown",
                    s => match UMAMI_COUNTRIES[s as usize % 5] {
                        "" => "unknown",
                        c => c,
                    },
                };
                *f.countries.entry(country.into()).or_default() += 1;
                visitors.entry(day.clone()).or_default().insert(r.session);
                visits.entry((day, r.visit)).or_default().push(r);
            }
            2 => *f.events.entry(r.name.into()).or_default() += 1,
            _ => {}
        }
    }
    for ((day, _), views) in &visits {
        let figures = f.days.entry(day.clone()).or_default();
        figures[1] += 1;
        figures[2] += i64::from(views.len() == 1);
        let first = views.first().unwrap();
        let last = views.last().unwrap();
        f.pages
            .entry((day.clone(), first.path.clone()))
            .or_default()[0] += 1;
        f.pages.entry((day.clone(), last.path.clone())).or_default()[1] += 1;
    }
    for (day, sessions) in visitors {
        f.days.entry(day).or_default()[0] = sessions.len() as i64;
    }
    f
}

/// The visit figures the day buckets hold: per day, [0, visits, visits
/// without a second view]; per day and page, entries and exits. Visitors
/// are left to the reports (they are estimates).
async fn umami_stored_visits(
    app: &TestApp,
) -> (
    BTreeMap<String, [i64; 3]>,
    BTreeMap<(String, String), [i64; 2]>,
) {
    let sum = |d: &Document, name: &str| -> i64 {
        d.get_document(name)
            .map(|slots| slots.iter().map(|(_, v)| v.as_i64().unwrap()).sum())
            .unwrap_or(0)
    };
    let docs = |collection: &'static str| async move {
        let found: Vec<Document> = futures::TryStreamExt::try_collect(
            app.store
                .db()
                .collection::<Document>(collection)
                .find(doc! {})
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        found
    };
    let day_of = |d: &Document| {
        let at = d.get_datetime("timestamp").unwrap().to_chrono();
        at.format("%F").to_string()
    };
    let mut days = BTreeMap::new();
    for d in docs("site_views_day").await {
        let day = day_of(&d);
        let visits = sum(&d, "visits");
        let entry: &mut [i64; 3] = days.entry(day).or_default();
        entry[1] += visits;
        entry[2] += visits - sum(&d, "nonBounces");
    }
    let mut pages = BTreeMap::new();
    for d in docs("views_day").await {
        let day = day_of(&d);
        let page = d.get_str("page").unwrap();
        let path = page[page.find('/').unwrap()..].to_owned();
        let entry: &mut [i64; 2] = pages.entry((day, path)).or_default();
        entry[0] += sum(&d, "visits");
        entry[1] += sum(&d, "exits");
    }
    pages.retain(|_, v| *v != [0, 0]);
    (days, pages)
}

/// Asserts that the buckets hold `want`'s views, events, countries and
/// visits (visitors are left to the reports: they are estimates).
async fn assert_umami_figures_stored(app: &TestApp, want: &UmamiFigures) {
    assert_eq!(stored(app).await, want.views);
    assert_eq!(site_day_counts(app, Dimension::Event).await, want.events);
    assert_eq!(
        site_day_counts(app, Dimension::Country).await,
        want.countries
    );
    let (mut days, pages) = umami_stored_visits(app).await;
    // A day of live views without visits.
    days.retain(|_, f| *f != [0, 0, 0]);
    let without_visitors: BTreeMap<_, _> = want
        .days
        .iter()
        .map(|(d, f)| (d.clone(), [0, f[1], f[2]]))
        .collect();
    assert_eq!(days, without_visitors);
    assert_eq!(pages, want.pages);
}

fn umami_files(
    dir: &std::path::Path,
    rows: &[UmamiRow],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let events = dir.join("website_event.csv");
    std::fs::write(&events, umami_text(rows)).unwrap();
    let sessions = dir.join("session.csv");
    std::fs::write(&sessions, umami_sessions_text()).unwrap();
    (events, sessions)
}

fn umami_import(
    app: &TestApp,
    site: &str,
    events: &std::path::Path,
    sessions: &std::path::Path,
) -> Command {
    let mut cmd = import_command_of(app, "umami", site, events);
    cmd.arg("--sessions")
        .arg(sessions)
        .args(["--from-website", UMAMI_WEBSITE]);
    cmd
}

#[tokio::test]
async fn an_umami_export_of_another_website_is_refused_unless_named_with_from_website() {
    let app = spawn_app().await;
    let site = app.add_site("umami.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(4);
    let (events, sessions) = umami_files(dir.path(), &rows);
    // Its website id is not the site's: refused, and the message says
    // how to import it anyway.
    let out = import_command_of(&app, "umami", "umami.test", &events)
        .arg("--sessions")
        .arg(&sessions)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("website_event.csv:2: column \"website_id\"")
            && stderr.contains(&format!("--from-website {UMAMI_WEBSITE}"))
            && stderr.contains(&site.id.to_string()),
        "{stderr}"
    );
    assert_nothing_written(&app, "another website").await;

    // Named, its rows are imported and another website's rows in the
    // same file are skipped and counted.
    let other = "5f4dcc3b-5aa7-4d61-8b6f-000000000000";
    let text = std::fs::read_to_string(&events).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let others: Vec<String> = lines[1..4]
        .iter()
        .map(|l| l.replacen(UMAMI_WEBSITE, other, 1))
        .collect();
    for (i, l) in others.into_iter().enumerate() {
        lines.insert(2 + 2 * i, l);
    }
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    let out = umami_import(&app, "umami.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("3 of other websites"), "{stdout}");
    assert_umami_figures_stored(&app, &umami_expected("umami.test", &rows)).await;
    // Its site figures are the import's part, never a live lane's.
    let parts = crate::imports_plausible::site_documents_by_part(&app).await;
    assert_eq!(
        parts.keys().copied().collect::<Vec<_>>(),
        vec![tickertape::storage::buckets::PART_IMPORT],
        "{parts:?}"
    );
    // Deleting it takes back the rows it imported, by the website it
    // named.
    let key = printed_key(&out);
    let deleted = delete_command(&app, &key).output().unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    let mut left = everything_counted(&app).await;
    left.retain(|k, _| !k.ends_with(" takenBack"));
    assert_eq!(left, BTreeMap::new());
}

#[tokio::test]
async fn an_umami_export_lands_exactly_once_with_its_visits_in_every_report() {
    let app = spawn_app().await;
    let site = app.add_site("umami.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(60);
    let (events, sessions) = umami_files(dir.path(), &rows);
    let out = umami_import(&app, "umami.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let want = umami_expected("umami.test", &rows);
    let views: i64 = want.views.values().sum();
    let visits: i64 = want.days.values().map(|d| d[1]).sum();
    let vitals = rows.iter().filter(|r| r.kind == 5).count();
    assert!(
        stdout.contains(&format!(
            "{} rows: {views} views in {visits} visits, {} events, skipped {vitals} neither a view nor an event",
            rows.len(),
            want.events.values().sum::<i64>(),
        )),
        "{stdout}"
    );
    assert_umami_figures_stored(&app, &want).await;
    let browsers = site_day_counts(&app, Dimension::Browser).await;
    assert!(
        browsers.contains_key("Chrome") && browsers.contains_key("Edge"),
        "{browsers:?}"
    );
    let sources = site_day_counts(&app, Dimension::Source).await;
    assert!(
        sources.contains_key("newsletter") && sources.contains_key("news.example"),
        "{sources:?}"
    );
    // The reports say the same, day by day.
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    for (day, [visitors, visits, bounces]) in &want.days {
        let start = chrono::NaiveDate::parse_from_str(day, "%F").unwrap();
        let range = format!(
            "range=custom&from={start}T00:00&to={}T00:00",
            start.succ_opt().unwrap()
        );
        let report = |name: &str| {
            let path = format!("/api/v1/sites/{}/{name}?{range}", site.id);
            let (app, token) = (&app, &token);
            async move {
                let a = crate::json_api::get(app, token, &path).await;
                assert_eq!(a.status, 200, "{}", a.json);
                a.json
            }
        };
        let visits_report = report("visits").await;
        let day_views: i64 = want
            .views
            .iter()
            .filter(|((_, d), _)| d == day)
            .map(|(_, v)| v)
            .sum();
        assert_eq!(
            (
                visits_report["visits"].as_i64(),
                visits_report["bounces"].as_i64(),
                visits_report["views"].as_i64()
            ),
            (Some(*visits), Some(*bounces), Some(day_views)),
            "{day}: {visits_report}"
        );
        let got = visits_report["visitors"].as_i64().unwrap();
        assert!(
            (got - visitors).abs() <= 1,
            "{day}: {got} visitors, {visitors} sessions"
        );
        let shown: BTreeMap<(String, String), [i64; 2]> = report("pages").await["pages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    (day.clone(), p["path"].as_str().unwrap().to_owned()),
                    [p["entries"].as_i64().unwrap(), p["exits"].as_i64().unwrap()],
                )
            })
            .filter(|(_, v)| *v != [0, 0])
            .collect();
        let expected: BTreeMap<_, _> = want
            .pages
            .iter()
            .filter(|((d, _), _)| d == day)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(shown, expected, "{day}");
    }
    // A second run writes nothing.
    let again = umami_import(&app, &site.id.to_string(), &events, &sessions)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already imported"),
        "{again:?}"
    );
    assert_eq!(stored(&app).await, want.views);
    assert_eq!(umami_stored_visits(&app).await.1, want.pages);
    // `import list` and the settings page show it.
    let listed = import_list(&app);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(
        listed.contains("\tumami\tumami.test\t") && listed.contains(&format!("({views} views, ")),
        "{listed}"
    );
    let table = imports_table(&admin, &site).await;
    assert!(
        table.contains("<td>umami</td>") && table.contains("website_event.csv"),
        "{table}"
    );
}

#[tokio::test]
async fn an_umami_import_killed_midway_and_run_again_ends_with_the_files_figures() {
    let app = spawn_app().await;
    app.add_site("umami.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(3_000);
    let (events, sessions) = umami_files(dir.path(), &rows);
    let want = umami_expected("umami.test", &rows);
    // Killed in the rollups stream, which carries the visits.
    let import = || umami_import(&app, "umami.test", &events, &sessions);
    kill_midway_then_rerun(&app, import, "rollups", want.views.values().sum()).await;
    assert_umami_figures_stored(&app, &want).await;
}

/// A site in Europe/Berlin reads the same rows in its own days: over a
/// range holding them all, the reports give the file's totals.
#[tokio::test]
async fn an_umami_export_into_a_berlin_site_gives_the_files_totals() {
    let app = spawn_app().await;
    let site = app.add_site_in("berlin.test", &[], "Europe/Berlin").await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(30);
    let (events, sessions) = umami_files(dir.path(), &rows);
    let out = umami_import(&app, "berlin.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let want = umami_expected("berlin.test", &rows);
    assert_umami_figures_stored(&app, &want).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let first = rows[0].at.date_naive().pred_opt().unwrap();
    let path = format!(
        "/api/v1/sites/{}/visits?range=custom&from={first}T00:00&to={}T00:00",
        site.id,
        first + chrono::Days::new(6)
    );
    let a = crate::json_api::get(&app, &token, &path).await;
    assert_eq!(a.status, 200, "{}", a.json);
    let sum = |i: usize| want.days.values().map(|d| d[i]).sum::<i64>();
    assert_eq!(
        (
            a.json["views"].as_i64(),
            a.json["visits"].as_i64(),
            a.json["bounces"].as_i64()
        ),
        (Some(want.views.values().sum()), Some(sum(1)), Some(sum(2))),
        "{}",
        a.json
    );
    // A visitor is a session's UTC day: the range's sketch is their union.
    let visitors = a.json["visitors"].as_f64().unwrap();
    let day_visitors = sum(0) as f64;
    assert!(
        (visitors - day_visitors).abs() <= day_visitors * 0.02,
        "{visitors} visitors, {day_visitors} session days"
    );
}

/// A day with live figures is skipped whole: its visits with it (the
/// visit going past the midnight before it goes on as the day's own).
#[tokio::test]
async fn an_umami_day_with_live_figures_is_skipped_with_its_visits() {
    let app = spawn_app().await;
    app.add_site("umami.test", &[]).await;
    let rows = umami_export(40);
    let live_day = Resolution::Day.floor(rows[0].at) + TimeDelta::days(1);
    app.write_hits(&[("umami.test/live", live_day + TimeDelta::hours(5))])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (events, sessions) = umami_files(dir.path(), &rows);
    let out = umami_import(&app, "umami.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let on_day = rows
        .iter()
        .filter(|r| r.kind != 5 && Resolution::Day.floor(r.at) == live_day)
        .count();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains(&format!("{on_day} on days with live figures")),
        "{stdout}"
    );
    let kept: Vec<UmamiRow> = rows
        .iter()
        .filter(|r| Resolution::Day.floor(r.at) != live_day)
        .cloned()
        .collect();
    let mut want = umami_expected("umami.test", &kept);
    want.views.insert(
        ("umami.test/live".into(), live_day.format("%F").to_string()),
        1,
    );
    assert_umami_figures_stored(&app, &want).await;
}

#[tokio::test]
async fn every_bad_umami_export_is_named_by_file_line_and_column_and_writes_nothing() {
    let app = spawn_app().await;
    app.add_site("umami.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(4);
    let good = umami_text(&rows);
    let sessions = umami_sessions_text();
    let swap = |text: &str, n: usize| {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.swap(n, n + 1);
        lines.join("\n")
    };
    let cases: Vec<(&str, String, String, &str)> = vec![
        (
            "a missing column",
            good.replacen(",visit_id", ",visit", 1),
            sessions.clone(),
            "website_event.csv:1: column \"visit_id\": this required column is missing",
        ),
        (
            "a bad date",
            nth_line(&good, 3, &|l| l.replacen(",2026-", ",26.10.", 1)),
            sessions.clone(),
            "website_event.csv:4: column \"created_at\"",
        ),
        (
            "a date before the common era",
            nth_line(&good, 1, &|l| l.replacen(",2026-", ",-0044-", 1)),
            sessions.clone(),
            "website_event.csv:2: column \"created_at\"",
        ),
        (
            "a date in the year 0",
            nth_line(&good, 1, &|l| l.replacen(",2026-", ",0000-", 1)),
            sessions.clone(),
            "website_event.csv:2: column \"created_at\"",
        ),
        (
            "a date in the year 262142",
            nth_line(&good, 1, &|l| l.replacen(",2026-", ",+262142-", 1)),
            sessions.clone(),
            "website_event.csv:2: column \"created_at\"",
        ),
        (
            "rows out of order",
            swap(&good, 4),
            sessions.clone(),
            "website_event.csv:6: column \"created_at\"",
        ),
        (
            "an unknown event type",
            nth_line(&good, 4, &|l| {
                l.replacen(",1,,,umami.test", ",9,,,umami.test", 1)
            }),
            sessions.clone(),
            "website_event.csv:5: column \"event_type\"",
        ),
        (
            "a page that breaks the page rules",
            nth_line(&good, 4, &|l| l.replacen(",/docs/", ",docs/", 1)),
            sessions.clone(),
            "website_event.csv:5: column \"url_path\"",
        ),
        (
            "a country that is not a code",
            good.clone(),
            nth_line(&sessions, 3, &|l| {
                l.replacen(",en-US,", ",en-US,Germany", 1)
            }),
            "session.csv:4: column \"country\"",
        ),
        (
            "a session file without its country column",
            good.clone(),
            sessions.replacen(",country,", ",land,", 1),
            "session.csv:1: column \"country\": this required column is missing",
        ),
    ];
    for (what, events_text, sessions_text, says) in cases {
        let events = dir.path().join("website_event.csv");
        std::fs::write(&events, &events_text).unwrap();
        let session_file = dir.path().join("session.csv");
        std::fs::write(&session_file, &sessions_text).unwrap();
        let out = umami_import(&app, "umami.test", &events, &session_file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: {out:?}");
        assert!(stderr.contains(says), "{what}: {stderr}");
        assert_nothing_written(&app, what).await;
    }
}

/// A site in Europe/Berlin shows the export's rows on its own local days:
/// the chart by day and the top pages give, day by day and page by page,
/// what the file holds, across local midnights (23:00 or 22:00 UTC).
#[tokio::test]
async fn a_goatcounter_export_into_a_berlin_site_gives_its_local_days_the_files_views() {
    let app = spawn_app().await;
    let site = app.add_site_in("berlin.test", &[], "Europe/Berlin").await;
    let dir = tempfile::tempdir().unwrap();
    let lines = export(2_000);
    let file = dir.path().join("export.csv");
    std::fs::write(&file, file_text(&lines)).unwrap();
    let out = import(&app, "berlin.test", &file);
    assert!(out.status.success(), "{out:?}");
    let berlin = chrono_tz::Europe::Berlin;
    let mut by_day: BTreeMap<chrono::NaiveDate, i64> = BTreeMap::new();
    let mut by_page: BTreeMap<String, i64> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.bot == 0 && !l.event) {
        *by_day
            .entry(l.at.with_timezone(&berlin).date_naive())
            .or_default() += 1;
        *by_page.entry(l.path.clone()).or_default() += 1;
    }
    assert!(by_day.len() >= 4, "the rows cross local midnights");
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let (first, last) = (
        *by_day.keys().next().unwrap(),
        *by_day.keys().last().unwrap(),
    );
    let range = format!("range=custom&from={first}&to={last}");
    let series = crate::json_api::get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/series?{range}&res=day", site.id),
    )
    .await;
    assert_eq!(series.status, 200, "{}", series.json);
    let shown: BTreeMap<chrono::NaiveDate, i64> = series.json["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let at: DateTime<Utc> = p["at"].as_str().unwrap().parse().unwrap();
            (
                at.with_timezone(&berlin).date_naive(),
                p["views"].as_i64().unwrap(),
            )
        })
        .filter(|(_, v)| *v != 0)
        .collect();
    assert_eq!(shown, by_day, "{}", series.json);
    let pages = crate::json_api::get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/pages?{range}", site.id),
    )
    .await;
    assert_eq!(pages.status, 200, "{}", pages.json);
    let listed: BTreeMap<String, i64> = pages.json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["views"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, by_page, "{}", pages.json);
}

/// `tickertape import delete <key>` against the test's database.
pub(crate) fn delete_command(app: &TestApp, key: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.args(["import", "delete", key])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("RUST_LOG", "warn");
    cmd
}

/// The key an import printed.
pub(crate) fn printed_key(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("import ").map(str::to_owned))
        .expect("the import's key")
}

/// What a site's buckets hold of every counter, zeros left out: views
/// per page and day at each level, visit counters, breakdown counts.
pub(crate) async fn everything_counted(app: &TestApp) -> BTreeMap<String, i64> {
    app.settle().await;
    let mut all = BTreeMap::new();
    let db = app.store.db();
    for name in db.list_collection_names().await.unwrap() {
        if !(name.starts_with("views_")
            || name.starts_with("site_")
            || name.starts_with("sources_"))
        {
            continue;
        }
        let docs: Vec<Document> = futures::TryStreamExt::try_collect(
            db.collection::<Document>(&name)
                .find(doc! {})
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        for d in docs {
            let key = d
                .get_str("page")
                .or_else(|_| d.get_str("site"))
                .unwrap_or("?")
                .to_owned();
            let at = d
                .get_datetime("timestamp")
                .map(|t| t.timestamp_millis())
                .unwrap_or(0);
            for (field, value) in &d {
                let counters: Vec<(String, i64)> = match value {
                    bson::Bson::Int32(n) => vec![(field.clone(), i64::from(*n))],
                    bson::Bson::Int64(n) => vec![(field.clone(), *n)],
                    bson::Bson::Document(inner) if field != "visitors" && field != "converted" => {
                        inner
                            .iter()
                            .filter_map(|(k, v)| match v {
                                bson::Bson::Int32(n) => {
                                    Some((format!("{field}.{k}"), i64::from(*n)))
                                }
                                bson::Bson::Int64(n) => Some((format!("{field}.{k}"), *n)),
                                _ => None,
                            })
                            .collect()
                    }
                    _ => vec![],
                };
                for (field, n) in counters {
                    // Not counts of views: bookkeeping (a deletion raises
                    // `takenBack`, which guards kept answers).
                    if matches!(field.as_str(), "part" | "writes" | "gen" | "takenBack") {
                        continue;
                    }
                    *all.entry(format!("{name} {key} {at} {field}")).or_default() += n;
                }
            }
        }
    }
    all.retain(|_, n| *n != 0);
    all
}

/// Whether any hour or day bucket of views still has a visitors' sketch.
pub(crate) async fn sketches_left(app: &TestApp) -> Vec<String> {
    let db = app.store.db();
    let mut left = Vec::new();
    for name in [
        "views_hour",
        "views_day",
        "site_views_hour",
        "site_views_day",
    ] {
        let docs: Vec<Document> = futures::TryStreamExt::try_collect(
            db.collection::<Document>(name)
                .find(doc! {"visitors": {"$exists": true}})
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        left.extend(docs.iter().map(|d| format!("{name} {d}")));
    }
    left
}

#[tokio::test]
async fn a_deleted_import_leaves_exactly_what_was_there_and_can_be_run_again() {
    let app = spawn_app().await;
    app.add_site("umami.test", &[]).await;
    app.write_hits(&[("umami.test/live", t0() - TimeDelta::hours(3))])
        .await;
    let before = everything_counted(&app).await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(300);
    let (events, sessions) = umami_files(dir.path(), &rows);
    let out = umami_import(&app, "umami.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let key = printed_key(&out);
    assert!(
        rows.len() > 1_000,
        "{} rows: enough to kill a delete midway",
        rows.len()
    );
    assert_ne!(everything_counted(&app).await, before);
    // A file that is not the one imported is refused; nothing changes.
    let changed = dir.path().join("changed.csv");
    std::fs::write(&changed, umami_text(&rows[..rows.len() - 1])).unwrap();
    let imported = everything_counted(&app).await;
    let refused = delete_command(&app, &key)
        .arg("--file")
        .arg(&changed)
        .output()
        .unwrap();
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not the file import"),
        "{refused:?}"
    );
    assert_eq!(everything_counted(&app).await, imported);
    // Deleted in batches of 250, killed once 250 rows of views are back,
    // then run again: exactly what was there before.
    let mut child = delete_command(&app, &key)
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let progress = app
        .store
        .db()
        .collection::<Document>(tickertape::storage::progress::COLLECTION);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let done = progress
            .find_one(doc! {"stream": "views", "journal": {"$regex": "^delete/"}})
            .await
            .unwrap()
            .and_then(|d| d.get_i64("position").ok())
            .unwrap_or(0);
        if done >= 250 || child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let _ = child.kill();
    child.wait().unwrap();
    assert!(import_list(&app).contains(&key), "killed before its end");
    assert_ne!(
        everything_counted(&app).await,
        before,
        "killed before its end"
    );
    let out = delete_command(&app, &key)
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rows taken back"),
        "{out:?}"
    );
    let mut after = everything_counted(&app).await;
    after.retain(|k, _| !k.ends_with(" takenBack"));
    assert_eq!(after, before);
    // The live view's own registers stay; the imported days' are gone.
    let live_at = t0() - TimeDelta::hours(3);
    let live_hour = bson::DateTime::from_chrono(Resolution::Hour.floor(live_at)).to_string();
    let live_day = bson::DateTime::from_chrono(Resolution::Day.floor(live_at)).to_string();
    let left = sketches_left(&app).await;
    assert!(
        left.iter()
            .all(|d| d.contains(&live_hour) || d.contains(&live_day)),
        "{left:?}"
    );
    assert!(!import_list(&app).contains(&key), "{}", import_list(&app));
    // Forgotten: the same files import again.
    let again = umami_import(&app, "umami.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    assert!(
        !String::from_utf8_lossy(&again.stdout).contains("already imported"),
        "{again:?}"
    );
    assert_eq!(everything_counted(&app).await, imported);
}

/// Views per page and UTC day, from `g`'s page buckets.
async fn per_page_day(app: &TestApp, g: Resolution) -> BTreeMap<(String, String), i64> {
    let mut by = BTreeMap::new();
    for b in app.buckets(g).await {
        let day = Resolution::Day
            .floor(b.timestamp.to_chrono())
            .format("%F")
            .to_string();
        *by.entry((b.page, day)).or_default() += b.total_views;
    }
    by.retain(|_, v| *v != 0);
    by
}

/// The documents of a site bucket collection and the views they hold,
/// with the oldest bucket's time.
async fn site_buckets(app: &TestApp, g: Resolution) -> (u64, i64, Option<DateTime<Utc>>) {
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>(&format!("site_views_{}", g.as_str()))
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let views = docs
        .iter()
        .map(|d| tickertape::storage::values::count(d.get("totalViews")))
        .sum();
    let oldest = docs
        .iter()
        .filter_map(|d| d.get_datetime("timestamp").ok())
        .map(|t| t.to_chrono())
        .min();
    (docs.len() as u64, views, oldest)
}

#[tokio::test]
async fn rows_past_a_levels_retention_skip_its_buckets_yet_hours_and_days_are_exact_and_a_rerun_is_a_no_op(
) {
    // Minutes kept 90 days, hours 120, days for ever: the TTL indexes the
    // import reads.
    let retention = tickertape::domain::Retention::parse(90, 120, 0).unwrap();
    let app = spawn_app_with(|s| s.retention.set(retention)).await;
    app.add_site("old.test", &[]).await;
    let now = Utc::now();
    // 200 rows over two days each: 200 days ago (past the minutes' and the
    // hours' retention), 100 days ago (past the minutes'), 10 days ago
    // (within both), in time order.
    let groups = [200, 100, 10];
    let per = 200usize;
    let mut lines = Vec::new();
    for (g, days_ago) in groups.iter().enumerate() {
        let start = Resolution::Day.floor(now) - TimeDelta::days(*days_ago);
        for j in 0..per {
            let i = g * per + j;
            lines.push(Line {
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
                at: start + TimeDelta::seconds((j as i64 * 2 * 86_400) / per as i64),
            });
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.csv");
    std::fs::write(&file, file_text(&lines)).unwrap();
    // Batches of 50: whole batches past both retentions, past the
    // minutes' only, and within both.
    let run = || {
        import_command(&app, "old.test", &file)
            .env("TICKERTAPE_IMPORT_BATCH_ROWS", "50")
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{out:?}");
    // What was written: the rows counted, the bots skipped.
    let bots = lines.iter().filter(|l| l.bot != 0).count();
    assert!(bots > 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(
            "{} rows written ({bots} more skipped)",
            600 - bots
        )),
        "{out:?}"
    );

    let (all_views, want_events) = expected("old.test", &lines);
    let newer_than = |days: i64| {
        let cut = (Resolution::Day.floor(now) - TimeDelta::days(days))
            .format("%F")
            .to_string();
        all_views
            .iter()
            .filter(|((_, day), _)| *day >= cut)
            .map(|(k, v)| (k.clone(), *v))
            .collect::<BTreeMap<_, _>>()
    };
    let within_hours = newer_than(100);
    let within_minutes = newer_than(10);
    assert!(all_views.len() > within_hours.len() && within_hours.len() > within_minutes.len());
    let check = |what: &'static str| {
        let (all_views, within_hours, within_minutes, want_events) = (
            all_views.clone(),
            within_hours.clone(),
            within_minutes.clone(),
            want_events.clone(),
        );
        let app = &app;
        async move {
            // Days: every row, exactly, in the pages' buckets and the site's.
            assert_eq!(
                per_page_day(app, Resolution::Day).await,
                all_views,
                "{what}: days"
            );
            let total: i64 = all_views.values().sum();
            assert_eq!(site_buckets(app, Resolution::Day).await.1, total, "{what}");
            // Hours: the rows within the hours' retention, exactly; none before.
            assert_eq!(
                per_page_day(app, Resolution::Hour).await,
                within_hours,
                "{what}: hours"
            );
            let (_, site_hours, oldest) = site_buckets(app, Resolution::Hour).await;
            assert_eq!(site_hours, within_hours.values().sum::<i64>(), "{what}");
            assert!(oldest.unwrap() >= now - TimeDelta::days(121), "{what}");
            // Minutes: only the rows within the minutes' retention.
            assert_eq!(
                per_page_day(app, Resolution::Minute).await,
                within_minutes,
                "{what}: minutes"
            );
            let (_, site_minutes, oldest) = site_buckets(app, Resolution::Minute).await;
            assert_eq!(site_minutes, within_minutes.values().sum::<i64>(), "{what}");
            assert!(oldest.unwrap() >= now - TimeDelta::days(91), "{what}");
            let old_minutes = app
                .store
                .buckets(Resolution::Minute)
                .count_documents(doc! {"timestamp": {"$lt": bson::DateTime::from_chrono(now - TimeDelta::days(90))}})
                .await
                .unwrap();
            assert_eq!(old_minutes, 0, "{what}: no minute bucket past retention");
            // Breakdowns have no retention: every event is in.
            assert_eq!(
                site_day_counts(app, Dimension::Event).await,
                want_events,
                "{what}: events"
            );
        }
    };
    check("first run").await;
    // Every stream's progress moved over every batch, those that wrote
    // nothing included.
    let positions: Vec<i64> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>(tickertape::storage::progress::COLLECTION)
            .find(doc! {"journal": {"$regex": "^import/"}})
            .await
            .unwrap(),
    )
    .await
    .map(|docs: Vec<Document>| {
        docs.iter()
            .map(|d| tickertape::storage::values::count(d.get("position")))
            .collect()
    })
    .unwrap();
    assert_eq!(
        positions,
        vec![600; 3],
        "views, rollups and sources at the end"
    );

    // A rerun applies nothing and changes nothing.
    let again = run();
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already imported: nothing was written"),
        "{again:?}"
    );
    check("rerun").await;
}

#[tokio::test]
async fn a_current_goatcounter_export_keeps_browsers_and_systems_from_its_own_columns_and_says_where_it_ends(
) {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let start = Resolution::Day.floor(t0()) - TimeDelta::days(40);
    // GoatCounter's current export: `UserAgent` always blank, its own
    // reading in `Browser` and `System`.
    let seen = [
        ("Chrome 86", "Windows 7"),
        ("Firefox 133", "Linux"),
        ("Safari 18.1", "macOS 15.1"),
        ("Chrome 131", "Android 14"),
        ("Edge 131", "Windows 10"),
        ("Netscape 4", "BeOS"),
    ];
    let last = start + TimeDelta::minutes(seen.len() as i64 - 1);
    let text = csv_text(
        HEADER,
        seen.iter().enumerate().map(|(i, (browser, system))| {
            format!(
                "/docs/{i},A title,false,,{browser},{system},{},0,,,\"1440,900,1\",NL,true,{}",
                uuid::Uuid::new_v4(),
                (start + TimeDelta::minutes(i as i64)).to_rfc3339()
            )
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.csv");
    std::fs::write(&file, text).unwrap();
    let out = import(&app, "docs.test", &file);
    assert!(out.status.success(), "{out:?}");
    let count = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    assert_eq!(
        site_day_counts(&app, Dimension::Browser).await,
        count(&[
            ("Chrome", 2),
            ("Edge", 1),
            ("Firefox", 1),
            ("Safari", 1),
            ("unknown", 1)
        ])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Os).await,
        count(&[
            ("Android", 1),
            ("Linux", 1),
            ("Windows", 2),
            ("macOS", 1),
            ("unknown", 1)
        ])
    );
    // A file cut at a line end cannot tell: the summary says so, with its
    // last row's time.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("cannot show that it is whole")
            && stdout.contains(&format!("last row counted is of {}", last.to_rfc3339())),
        "{stdout}"
    );
}

#[tokio::test]
async fn umami_rows_later_than_the_import_are_held_back_and_the_same_events_with_other_sessions_are_recognised(
) {
    let app = spawn_app().await;
    app.add_site("umami.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let rows = umami_export(4);
    // Two views after the export was made (an hour from now).
    let mut with_later = rows.clone();
    for k in 0..2 {
        with_later.push(UmamiRow {
            session: 2,
            visit: 0xfeed,
            at: Utc::now() + TimeDelta::hours(1) + TimeDelta::minutes(k),
            path: "/docs/1".into(),
            kind: 1,
            name: "",
            referrer: "",
            utm: false,
        });
    }
    let (events, sessions) = umami_files(dir.path(), &with_later);
    let out = umami_import(&app, "umami.test", &events, &sessions)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("2 later than the import's start"),
        "{stdout}"
    );
    // What it says it wrote is what it wrote: the views and events, not
    // the rows it skipped.
    let skipped = rows.iter().filter(|r| r.kind == 5).count() + 2;
    assert!(
        stdout.contains(&format!(
            "{} rows written ({skipped} more skipped)",
            with_later.len() - skipped
        )),
        "{stdout}"
    );
    let want = umami_expected("umami.test", &rows);
    assert_umami_figures_stored(&app, &want).await;
    let before = everything_counted(&app).await;

    // The same events with another session file: recognised as the
    // import before, refused, nothing written.
    let other_sessions = dir.path().join("session-2.csv");
    std::fs::write(
        &other_sessions,
        umami_sessions_text().replacen(",firefox,", ",chrome,", 1),
    )
    .unwrap();
    let key = printed_key(&out);
    let again = umami_import(&app, "umami.test", &events, &other_sessions)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success(), "{again:?}");
    assert!(
        stderr.contains("holds the same events") && stderr.contains(&key),
        "{stderr}"
    );
    assert_eq!(everything_counted(&app).await, before);
}

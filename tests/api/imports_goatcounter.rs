//! `tickertape import goatcounter`: a GoatCounter export, validated whole
//! before anything is written, then applied exactly once, also across a
//! rerun and a `kill -9`.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output};
use tickertape::domain::Dimension;
use tickertape::storage::Resolution;

use crate::helpers::*;
use crate::imports::*;

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

fn import_command(app: &TestApp, site: &str, file: &std::path::Path) -> Command {
    import_command_of(app, "goatcounter", site, file)
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

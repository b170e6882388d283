//! What the import tests of every source share: running `tickertape
//! import`, reading what the buckets and the imports table hold, killing
//! an import midway. Each source's tests are their own module
//! (`imports_goatcounter`, `imports_umami`, `imports_plausible`), and
//! hostile files are `imports_hostile`.

use bson::{doc, Document};
use std::collections::BTreeMap;
use std::process::{Command, Output};
use tickertape::storage::Resolution;

use crate::helpers::*;

/// A CSV file: `header`, then `lines`, each ended by a newline.
pub(crate) fn csv_text(header: &str, lines: impl Iterator<Item = String>) -> String {
    let mut text = String::from(header);
    text.push('\n');
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Views per page and day, from the minute buckets and from the day
/// buckets (which must agree).
pub(crate) async fn stored(app: &TestApp) -> BTreeMap<(String, String), i64> {
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

/// `text` with its line `n` (from 0) changed by `f`.
pub(crate) fn nth_line(text: &str, n: usize, f: &dyn Fn(&str) -> String) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| if i == n { f(l) } else { l.to_owned() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `tickertape import list`'s lines.
pub(crate) fn import_list(app: &TestApp) -> String {
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
pub(crate) async fn assert_nothing_written(app: &TestApp, what: &str) {
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
            || name.starts_with("sources_")
            || name == tickertape::storage::imported_properties::COLLECTION)
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
            // Imported properties by document: one per value and day.
            let key = d
                .get_str("page")
                .or_else(
                    |_| match name == tickertape::storage::imported_properties::COLLECTION {
                        true => d.get_str("_id"),
                        false => d.get_str("site"),
                    },
                )
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

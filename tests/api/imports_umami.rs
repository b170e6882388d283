//! `tickertape import umami`: an Umami export (its events and sessions),
//! validated whole before anything is written, then applied exactly once
//! with its visits, also across a rerun and a `kill -9`.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::process::Command;
use tickertape::domain::Dimension;
use tickertape::storage::Resolution;

use crate::helpers::*;
use crate::imports::*;

/// `psql \copy (SELECT * FROM website_event …) … CSV HEADER`'s header, as
/// Umami 3's schema has it.
const UMAMI_EVENTS: &str = "event_id,website_id,session_id,visit_id,created_at,url_path,url_query,utm_source,utm_medium,utm_campaign,utm_content,utm_term,referrer_path,referrer_query,referrer_domain,page_title,gclid,fbclid,msclkid,ttclid,li_fat_id,twclid,event_type,event_name,tag,hostname,lcp,inp,cls,fcp,ttfb";

const UMAMI_SESSIONS: &str = "session_id,website_id,browser,os,device,screen,language,country,region,city,distinct_id,created_at";

const UMAMI_WEBSITE: &str = "94db1cb1-74f4-4a40-ad6c-962362670409";

/// `psql \copy (SELECT * FROM event_data …) … CSV HEADER`'s header.
const UMAMI_EVENT_DATA: &str = "event_data_id,website_id,website_event_id,data_key,string_value,number_value,date_value,data_type,created_at";

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

/// One `event_data` row: its key, `string_value`, `number_value` and
/// `data_type`, as Umami writes them.
type UmamiData = (&'static str, String, String, u8);

/// What the `i`th row's event data holds, and what of it Tickertape keeps:
/// authors on the views of two pages (an email address on a third, and a
/// list, both left out), a plan, a team and, on "pro" signups, revenue in
/// euros or dollars; web-vitals rows carry some too (skipped with them).
fn umami_data(r: &UmamiRow) -> (Vec<UmamiData>, Vec<(String, String)>) {
    let text = |k, v: &str| (k, v.to_owned(), String::new(), 1);
    let number = |k, v: &str| (k, v.to_owned(), v.to_owned(), 2);
    let sent: Vec<UmamiData> = match (r.kind, r.path.as_str()) {
        (1 | 5, "/docs/0") => vec![text("author", "Jane")],
        (1, "/docs/1") => vec![text("author", "Ann"), text("tags", "[\"a\"]")],
        (1, "/docs/2") => vec![text("author", "jane@example.com")],
        (2, _) => {
            let visit = (r.visit >> 64) as u64;
            let mut d = vec![text("user.team", "blue")];
            if visit % 2 == 0 {
                d.push(text("plan", "pro"));
                if visit % 4 == 0 {
                    d.extend([number("revenue", "5.5000"), text("currency", "USD")]);
                } else {
                    d.extend([number("revenue", "19.9900"), text("currency", "EUR")]);
                }
            } else {
                d.push(text("plan", "free"));
            }
            d
        }
        _ => Vec::new(),
    };
    let mut kept: Vec<(String, String)> = sent
        .iter()
        .filter(|(k, v, _, kind)| *kind != 5 && *k != "tags" && !v.contains('@'))
        .map(|(k, v, n, _)| {
            let v = match n.as_str() {
                "5.5000" => "5.5",
                "19.9900" => "19.99",
                _ => v,
            };
            (k.to_string(), v.to_owned())
        })
        .collect();
    kept.sort();
    let sent = sent
        .into_iter()
        .map(|(k, v, n, kind)| match k {
            "tags" => (k, format!("\"{}\"", v.replace('"', "\"\"")), n, 5),
            _ => (k, v, n, kind),
        })
        .collect();
    (sent, kept)
}

/// The export's `event_data` file: every row's data, by its event id.
fn umami_event_data_text(rows: &[UmamiRow]) -> String {
    let lines = rows.iter().enumerate().flat_map(|(i, r)| {
        let event = uuid::Uuid::from_u128(i as u128 + 1);
        let at = r.at.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string();
        umami_data(r)
            .0
            .into_iter()
            .enumerate()
            .map(move |(j, (key, string, number, kind))| {
                format!(
                    "{},{UMAMI_WEBSITE},{event},{key},{string},{number},,{kind},{at}",
                    uuid::Uuid::from_u128((i as u128 + 1) << 32 | j as u128),
                )
            })
    });
    csv_text(UMAMI_EVENT_DATA, lines)
}

/// What the event data gives, summed from the rows as Tickertape counts
/// it: per day of `tz`, view or event (`""` a view), key and value, its
/// views or events and its visits (a visit is a `visit_id` within a UTC
/// day, once per day, view or event, key and value); each day's visits
/// (with any view or event that day); and the revenue per event and
/// currency, in ten-thousandths, with its events.
#[derive(Debug, Default, PartialEq)]
struct UmamiProperties {
    values: BTreeMap<(String, String, String, String), [i64; 2]>,
    days: BTreeMap<String, i64>,
    revenue: BTreeMap<String, (i64, i64)>,
}

fn umami_expected_properties(rows: &[UmamiRow], tz: chrono_tz::Tz) -> UmamiProperties {
    let mut want = UmamiProperties::default();
    let mut seen = std::collections::BTreeSet::new();
    for r in rows.iter().filter(|r| r.kind == 1 || r.kind == 2) {
        let day = r.at.with_timezone(&tz).format("%F").to_string();
        let visit = (r.visit, r.at.date_naive());
        if seen.insert((day.clone(), visit, None)) {
            *want.days.entry(day.clone()).or_default() += 1;
        }
        let event = if r.kind == 2 { r.name } else { "" };
        let kept = umami_data(r).1;
        for (k, v) in &kept {
            let figures = want
                .values
                .entry((day.clone(), event.into(), k.clone(), v.clone()))
                .or_default();
            figures[0] += 1;
            let value = Some((event, k.clone(), v.clone()));
            if seen.insert((day.clone(), visit, value)) {
                figures[1] += 1;
            }
        }
        let get = |key: &str| kept.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        if let (2, Some(amount), Some(currency)) = (r.kind, get("revenue"), get("currency")) {
            let scaled = match amount.as_str() {
                "5.5" => 55_000,
                "19.99" => 199_900,
                other => panic!("{other}"),
            };
            let sum = want
                .revenue
                .entry(format!("{} {currency}", r.name))
                .or_default();
            sum.0 += scaled;
            sum.1 += 1;
        }
    }
    want
}

/// What `imported_properties` holds, in [`UmamiProperties`]' shape (the
/// revenue from the site's day buckets).
async fn umami_stored_properties(app: &TestApp, tz: chrono_tz::Tz) -> UmamiProperties {
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>(tickertape::storage::imported_properties::COLLECTION)
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut got = UmamiProperties::default();
    for d in docs {
        let at = d.get_datetime("timestamp").unwrap().to_chrono();
        let day = at.with_timezone(&tz).format("%F").to_string();
        let count = |name: &str| d.get_i64(name).unwrap_or(0);
        match (d.get_str("event"), d.get_str("key"), d.get_str("value")) {
            (Ok(event), Ok(key), Ok(value)) => {
                let hits = count("views") + count("events");
                if hits != 0 || count("visits") != 0 {
                    let k = (day, event.into(), key.into(), value.into());
                    got.values.insert(k, [hits, count("visits")]);
                }
            }
            _ if count("visits") != 0 => *got.days.entry(day).or_default() += count("visits"),
            _ => {}
        }
    }
    got.revenue = crate::revenue::stored_revenue(app).await;
    got
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

/// The export's files: its events, its sessions and, beside them, its
/// event data (which [`umami_import`] reads).
fn umami_files(
    dir: &std::path::Path,
    rows: &[UmamiRow],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let events = dir.join("website_event.csv");
    std::fs::write(&events, umami_text(rows)).unwrap();
    let sessions = dir.join("session.csv");
    std::fs::write(&sessions, umami_sessions_text()).unwrap();
    std::fs::write(dir.join("event_data.csv"), umami_event_data_text(rows)).unwrap();
    (events, sessions)
}

/// `import umami` of `events`, with `sessions` and the event data beside
/// them.
fn umami_import(
    app: &TestApp,
    site: &str,
    events: &std::path::Path,
    sessions: &std::path::Path,
) -> Command {
    let mut cmd = import_command_of(app, "umami", site, events);
    let data = sessions.with_file_name("event_data.csv");
    cmd.arg("--sessions")
        .arg(sessions)
        .args(["--from-website", UMAMI_WEBSITE]);
    if data.exists() {
        cmd.arg("--event-data").arg(data);
    }
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
    let props = umami_expected_properties(&rows, chrono_tz::UTC);
    assert_eq!(umami_stored_properties(&app, chrono_tz::UTC).await, props);
    assert_eq!(props.revenue.len(), 2, "{props:?}");
    assert!(
        stdout.contains("event_data.csv: ") && stdout.contains(" left out: lists"),
        "{stdout}"
    );
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
        // Visitors are a sketch's estimate, and the import's visitor ids
        // are keyed by the site's id, new in every run. At 50 visitors the
        // estimate is the number of registers set: one fewer for each
        // visitor beyond the first in a register. Of 200,000 simulated
        // days of 50, 7 % were one short, 0.24 % two, 0.006 % three, none
        // more.
        let got = visits_report["visitors"].as_i64().unwrap();
        assert!(
            (*visitors - 3..=*visitors).contains(&got),
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
    // The event data in the API: each value's views and events, and its
    // visits, over the imported days' visits; the revenue per goal.
    let first = rows[0].at.date_naive();
    let range = format!(
        "range=custom&from={first}T00:00&to={}T00:00",
        first + chrono::Days::new(4)
    );
    for key in ["author", "plan", "user.team", "revenue"] {
        let path = format!(
            "/api/v1/sites/{}/breakdown?{range}&dimension=prop:{key}&limit=1000",
            site.id
        );
        let a = crate::json_api::get(&app, &token, &path).await;
        assert_eq!(a.status, 200, "{}", a.json);
        let got: BTreeMap<String, [i64; 3]> = a.json["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let n = |f: &str| r[f].as_i64().unwrap_or(0);
                let name = r["name"].as_str().unwrap().to_owned();
                (name, [n("views"), n("events"), n("count")])
            })
            .collect();
        let mut want_rows: BTreeMap<String, [i64; 3]> = BTreeMap::new();
        for ((_, event, k, v), [hits, visits]) in &props.values {
            if k == key {
                let row = want_rows.entry(v.clone()).or_default();
                row[if event.is_empty() { 0 } else { 1 }] += hits;
                row[2] += visits;
            }
        }
        assert!(!want_rows.is_empty(), "{key}");
        assert_eq!(got, want_rows, "{key}: {}", a.json);
        assert_eq!(
            a.json["of"].as_i64(),
            Some(props.days.values().sum()),
            "{}",
            a.json
        );
    }
    tickertape::storage::sites::add_goal(
        &app.store,
        &site.id,
        &tickertape::domain::Goal::parse("event", "Signup").unwrap(),
    )
    .await
    .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    let goals = format!("/api/v1/sites/{}/goals?{range}", site.id);
    let a = crate::json_api::get(&app, &token, &goals).await;
    assert_eq!(a.status, 200, "{}", a.json);
    let shown: BTreeMap<String, (String, i64)> = a.json["goals"][0]["revenue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!("Signup {}", r["currency"].as_str().unwrap()),
                (
                    r["amount"].as_str().unwrap().to_owned(),
                    r["events"].as_i64().unwrap(),
                ),
            )
        })
        .collect();
    let want_revenue: BTreeMap<String, (String, i64)> = props
        .revenue
        .iter()
        .map(|(k, (sum, n))| {
            (
                k.clone(),
                (format!("{}.{:02}", sum / 10_000, sum % 10_000 / 100), *n),
            )
        })
        .collect();
    assert_eq!(shown, want_revenue, "{}", a.json);
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
    // The event data, which goes with the breakdowns, exactly once too.
    assert_eq!(
        umami_stored_properties(&app, chrono_tz::UTC).await,
        umami_expected_properties(&rows, chrono_tz::UTC)
    );
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
    // The event data goes to Berlin's days.
    let berlin = chrono_tz::Europe::Berlin;
    assert_eq!(
        umami_stored_properties(&app, berlin).await,
        umami_expected_properties(&rows, berlin)
    );
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
    // Bad event data, beside good events and sessions.
    let data = umami_event_data_text(&rows);
    let first_line =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap();
    let revenue_line = first_line(&data, ",revenue,");
    let events_without_ids: String = good
        .lines()
        .map(|l| &l[l.find(',').unwrap() + 1..])
        .collect::<Vec<_>>()
        .join("\n");
    let data_cases: Vec<(&str, String, String, String)> = vec![
        (
            "an unknown data type",
            good.clone(),
            nth_line(&data, 1, &|l| l.replacen(",,1,", ",,7,", 1)),
            "event_data.csv:2: column \"data_type\"".into(),
        ),
        (
            "an amount with an exponent",
            good.clone(),
            nth_line(&data, revenue_line, &|l| {
                let mut cells: Vec<&str> = l.split(',').collect();
                cells[5] = "1.999e1";
                cells.join(",")
            }),
            format!(
                "event_data.csv:{}: column \"number_value\"",
                revenue_line + 1
            ),
        ),
        (
            "an event id that is not a UUID",
            good.clone(),
            nth_line(&data, 2, &|l| {
                let mut cells: Vec<&str> = l.split(',').collect();
                cells[2] = "event-2";
                cells.join(",")
            }),
            "event_data.csv:3: column \"website_event_id\"".into(),
        ),
        (
            "events without the ids their data names",
            events_without_ids,
            data.clone(),
            "website_event.csv:1: column \"event_id\"".into(),
        ),
    ];
    for (what, events_text, data_text, says) in data_cases {
        let events = dir.path().join("website_event.csv");
        std::fs::write(&events, &events_text).unwrap();
        let session_file = dir.path().join("session.csv");
        std::fs::write(&session_file, &sessions).unwrap();
        std::fs::write(dir.path().join("event_data.csv"), &data_text).unwrap();
        let out = umami_import(&app, "umami.test", &events, &session_file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: {out:?}");
        assert!(stderr.contains(&says), "{what}: {stderr}");
        assert_nothing_written(&app, what).await;
    }
}

#[tokio::test]
async fn a_deleted_import_leaves_exactly_what_was_there_and_can_be_run_again() {
    let app = spawn_app().await;
    app.add_site("umami.test", &[]).await;
    app.write_hits(&[("umami.test/live", t0() - TimeDelta::hours(3))])
        .await;
    let before = everything_counted(&app).await;
    let revenue_before = crate::revenue::stored_revenue(&app).await;
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
    assert_ne!(crate::revenue::stored_revenue(&app).await, revenue_before);
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
    // Its revenue is taken back to nothing, and its properties' documents
    // are gone.
    let mut revenue_after = crate::revenue::stored_revenue(&app).await;
    revenue_after.retain(|_, sum| *sum != (0, 0));
    assert_eq!(revenue_after, revenue_before);
    assert_eq!(
        umami_stored_properties(&app, chrono_tz::UTC)
            .await
            .values
            .len(),
        0
    );
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

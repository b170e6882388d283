//! `tickertape import plausible`: Plausible CE's CSV export,
//! days' figures landing at each day's first instant in the site's zone,
//! so every report adds them up; validated first, applied exactly once.

use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use tickertape::domain::Dimension;
use tickertape::storage::Resolution;

use crate::helpers::*;

const PAGES: [&str; 4] = ["/", "/pricing", "/blog/a", "/docs"];

/// The export's first day: recent enough that every level of bucket is
/// still kept (minutes: 90 days).
fn first_day() -> NaiveDate {
    (t0() - chrono::TimeDelta::days(40)).date_naive()
}

/// The files of an export of `days` days from [`first_day`], over
/// [`PAGES`] and `more_pages` others, with Plausible's new column set
/// (`pages` with visits and scroll depth), or its old one (`pages` with
/// exits and time on page; breakdowns without `pageviews`), columns in
/// their order or reversed.
struct Export {
    files: BTreeMap<String, String>,
    views: BTreeMap<(String, NaiveDate), i64>,
    visits: i64,
    bounces: i64,
    duration: i64,
    visitors: i64,
    entries: BTreeMap<String, i64>,
    exits: BTreeMap<String, i64>,
    countries: BTreeMap<String, i64>,
    browsers: BTreeMap<String, i64>,
    devices: BTreeMap<String, i64>,
    systems: BTreeMap<String, i64>,
    sources: BTreeMap<String, i64>,
    events: BTreeMap<String, i64>,
    /// The custom events' link URLs (`url`) and paths (`path`): per key
    /// and value, events and visitors.
    props: BTreeMap<(String, String), [i64; 2]>,
}

fn table(header: &[&str], rows: &[Vec<String>], reversed: bool) -> String {
    let order: Vec<usize> = if reversed {
        (0..header.len()).rev().collect()
    } else {
        (0..header.len()).collect()
    };
    let mut text = order
        .iter()
        .map(|&i| header[i])
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    for row in rows {
        text += &order
            .iter()
            .map(|&i| row[i].clone())
            .collect::<Vec<_>>()
            .join(",");
        text += "\n";
    }
    text
}

fn export(days: u32, more_pages: usize, old_columns: bool, reversed: bool) -> Export {
    let first = first_day();
    let pages_list: Vec<String> = PAGES
        .iter()
        .map(|p| p.to_string())
        .chain((0..more_pages).map(|k| format!("/p/{k}")))
        .collect();
    let mut e = Export {
        files: BTreeMap::new(),
        views: BTreeMap::new(),
        visits: 0,
        bounces: 0,
        duration: 0,
        visitors: 0,
        entries: BTreeMap::new(),
        exits: BTreeMap::new(),
        countries: BTreeMap::new(),
        browsers: BTreeMap::new(),
        devices: BTreeMap::new(),
        systems: BTreeMap::new(),
        sources: BTreeMap::new(),
        events: BTreeMap::new(),
        props: BTreeMap::new(),
    };
    let (mut visitors, mut pages, mut entry, mut exit) = (vec![], vec![], vec![], vec![]);
    let (mut sources, mut locations, mut browsers, mut events) = (vec![], vec![], vec![], vec![]);
    let (mut devices, mut systems) = (vec![], vec![]);
    for d in 0..days {
        let day = first + chrono::Days::new(d.into());
        let date = day.to_string();
        let n = i64::from(d);
        let day_visits = 40 + n;
        let day_bounces = 10 + n % 7;
        let day_visitors = 30 + n;
        let duration = 1_000 + 13 * n;
        let mut day_views = 0;
        for (i, page) in pages_list.iter().enumerate() {
            let views = 5 + (n * 3 + i as i64 * 7) % 23;
            day_views += views;
            *e.views.entry((page.to_string(), day)).or_default() += views;
            let page_visitors = (views / 2).max(1);
            pages.push(if old_columns {
                vec![
                    date.clone(),
                    "plausible.test".into(),
                    page.to_string(),
                    page_visitors.to_string(),
                    views.to_string(),
                    "3".into(),
                    "120".into(),
                ]
            } else {
                vec![
                    date.clone(),
                    "plausible.test".into(),
                    page.to_string(),
                    "4".into(),
                    page_visitors.to_string(),
                    views.to_string(),
                    "".into(),
                    "2".into(),
                ]
            });
            let entrances = day_visits / 4 + i64::from(i == 0) * (day_visits % 4);
            let bounces = (day_bounces / 4 + i64::from(i == 0) * (day_bounces % 4)).min(entrances);
            entry.push(vec![
                date.clone(),
                page.to_string(),
                "9".into(),
                entrances.to_string(),
                "250".into(),
                bounces.to_string(),
                "11".into(),
            ]);
            *e.entries.entry(page.to_string()).or_default() += entrances;
            let exits = 3 + i as i64;
            exit.push(vec![
                date.clone(),
                page.to_string(),
                "8".into(),
                "100".into(),
                exits.to_string(),
                "1".into(),
                "9".into(),
            ]);
            *e.exits.entry(page.to_string()).or_default() += exits;
        }
        e.visits += day_visits;
        e.bounces += day_bounces;
        e.duration += duration;
        e.visitors += day_visitors;
        visitors.push(vec![
            date.clone(),
            day_visitors.to_string(),
            (day_views + 1).to_string(),
            day_bounces.to_string(),
            day_visits.to_string(),
            duration.to_string(),
        ]);
        // Breakdowns count `pageviews`, or in the old set `visits`.
        for (source, referrer, medium, n_views) in [
            ("Google", "google.com", "", 7 + n),
            ("Direct / None", "", "", 5),
            ("Newsletter", "", "email", 2),
        ] {
            let counted = n_views;
            sources.push(vec![
                date.clone(),
                source.into(),
                referrer.into(),
                "".into(),
                medium.into(),
                "".into(),
                "".into(),
                "".into(),
                counted.to_string(),
                "3".into(),
                counted.to_string(),
                "60".into(),
                "1".into(),
            ]);
            let ours = match source {
                "Google" => "google",
                "Direct / None" => "direct",
                _ => "newsletter",
            };
            *e.sources.entry(ours.into()).or_default() += counted;
        }
        for (country, region, n_views) in [
            ("DE", "DE-BE", 4 + n),
            ("DE", "DE-BY", 2),
            ("US", "US-CA", 3),
            ("", "", 1),
        ] {
            locations.push(vec![
                date.clone(),
                country.into(),
                region.into(),
                "0".into(),
                "2".into(),
                n_views.to_string(),
                "30".into(),
                "0".into(),
                n_views.to_string(),
            ]);
            let ours = if country.is_empty() {
                "unknown"
            } else {
                country
            };
            *e.countries.entry(ours.into()).or_default() += n_views;
        }
        for (browser, ours, n_views) in [
            ("Chrome", "Chrome", 6 + n),
            ("Microsoft Edge", "Edge", 2),
            ("Netscape", "unknown", 1),
        ] {
            browsers.push(vec![
                date.clone(),
                browser.into(),
                "1.0".into(),
                "2".into(),
                n_views.to_string(),
                "30".into(),
                "0".into(),
                n_views.to_string(),
            ]);
            *e.browsers.entry(ours.into()).or_default() += n_views;
        }
        for (device, ours, n_views) in [
            ("Desktop", "desktop", 5 + n),
            ("Laptop", "desktop", 1),
            ("Mobile", "mobile", 3),
            ("", "unknown", 1),
        ] {
            devices.push(vec![
                date.clone(),
                device.into(),
                "2".into(),
                n_views.to_string(),
                "30".into(),
                "0".into(),
                n_views.to_string(),
            ]);
            *e.devices.entry(ours.into()).or_default() += n_views;
        }
        for (system, ours, n_views) in [
            ("Mac", "macOS", 4 + n),
            ("GNU/Linux", "Linux", 2),
            ("Windows", "Windows", 3),
        ] {
            systems.push(vec![
                date.clone(),
                system.into(),
                "14".into(),
                "2".into(),
                n_views.to_string(),
                "30".into(),
                "0".into(),
                n_views.to_string(),
            ]);
            *e.systems.entry(ours.into()).or_default() += n_views;
        }
        // Plausible writes a row per event, link and path: the script's
        // extensions send an outbound link's or a download's `url`, a
        // 404's `path`. A link that is an email address is no property.
        let outbound = "Outbound Link: Click";
        for (name, link, path, visitors, n_events) in [
            ("Signup", "", "", 1, 2 + n % 3),
            (outbound, "https://a.example/x?y=1", "", 2, 3),
            (outbound, "https://b.example/", "", 1, 1 + n % 2),
            (outbound, "mailto:jane@example.com", "", 1, 1),
            ("File Download", "https://plausible.test/a.pdf", "", 1, 2),
            ("404", "", "/gone", 1 + n % 2, 2 + n % 3),
        ] {
            events.push(vec![
                date.clone(),
                name.into(),
                link.into(),
                path.into(),
                visitors.to_string(),
                n_events.to_string(),
            ]);
            *e.events.entry(name.into()).or_default() += n_events;
            for (key, value) in [("url", link), ("path", path)] {
                if !value.is_empty() && !value.contains('@') {
                    let p = e.props.entry((key.into(), value.into())).or_default();
                    p[0] += n_events;
                    p[1] += visitors;
                }
            }
        }
    }
    let stamp = format!(
        "_{}_{}",
        first.format("%Y%m%d"),
        (first + chrono::Days::new(u64::from(days) - 1)).format("%Y%m%d")
    );
    let name = |t: &str| format!("imported_{t}{stamp}.csv");
    e.files.insert(
        name("visitors"),
        table(
            &[
                "date",
                "visitors",
                "pageviews",
                "bounces",
                "visits",
                "visit_duration",
            ],
            &visitors,
            reversed,
        ),
    );
    let pages_header: &[&str] = if old_columns {
        &[
            "date",
            "hostname",
            "page",
            "visitors",
            "pageviews",
            "exits",
            "time_on_page",
        ]
    } else {
        &[
            "date",
            "hostname",
            "page",
            "visits",
            "visitors",
            "pageviews",
            "scroll_depth",
            "pageleave_visitors",
        ]
    };
    e.files
        .insert(name("pages"), table(pages_header, &pages, reversed));
    e.files.insert(
        name("entry_pages"),
        table(
            &[
                "date",
                "entry_page",
                "visitors",
                "entrances",
                "visit_duration",
                "bounces",
                "pageviews",
            ],
            &entry,
            reversed,
        ),
    );
    e.files.insert(
        name("exit_pages"),
        table(
            &[
                "date",
                "exit_page",
                "visitors",
                "visit_duration",
                "exits",
                "bounces",
                "pageviews",
            ],
            &exit,
            reversed,
        ),
    );
    let (count_column, drop_last) = if old_columns {
        ("visits", true)
    } else {
        ("pageviews", false)
    };
    let strip = |rows: &[Vec<String>]| -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| {
                if drop_last {
                    r[..r.len() - 1].to_vec()
                } else {
                    r.clone()
                }
            })
            .collect()
    };
    let with_count = |cols: &[&'static str]| -> Vec<&'static str> {
        let mut c = cols.to_vec();
        if !drop_last {
            c.push("pageviews");
        }
        c
    };
    let _ = count_column;
    // The sources header puts pageviews first, as Plausible's does.
    let sources_header: &[&str] = &[
        "date",
        "source",
        "referrer",
        "utm_source",
        "utm_medium",
        "utm_campaign",
        "utm_content",
        "utm_term",
        "pageviews",
        "visitors",
        "visits",
        "visit_duration",
        "bounces",
    ];
    let sources_rows: Vec<Vec<String>> = if old_columns {
        sources
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.remove(8);
                r
            })
            .collect()
    } else {
        sources.clone()
    };
    let sources_header: Vec<&str> = if old_columns {
        sources_header
            .iter()
            .copied()
            .filter(|c| *c != "pageviews")
            .collect()
    } else {
        sources_header.to_vec()
    };
    e.files.insert(
        name("sources"),
        table(&sources_header, &sources_rows, reversed),
    );
    e.files.insert(
        name("locations"),
        table(
            &with_count(&[
                "date",
                "country",
                "region",
                "city",
                "visitors",
                "visits",
                "visit_duration",
                "bounces",
            ]),
            &strip(&locations),
            reversed,
        ),
    );
    e.files.insert(
        name("browsers"),
        table(
            &with_count(&[
                "date",
                "browser",
                "browser_version",
                "visitors",
                "visits",
                "visit_duration",
                "bounces",
            ]),
            &strip(&browsers),
            reversed,
        ),
    );
    e.files.insert(
        name("devices"),
        table(
            &with_count(&[
                "date",
                "device",
                "visitors",
                "visits",
                "visit_duration",
                "bounces",
            ]),
            &strip(&devices),
            reversed,
        ),
    );
    e.files.insert(
        name("operating_systems"),
        table(
            &with_count(&[
                "date",
                "operating_system",
                "operating_system_version",
                "visitors",
                "visits",
                "visit_duration",
                "bounces",
            ]),
            &strip(&systems),
            reversed,
        ),
    );
    e.files.insert(
        name("custom_events"),
        table(
            &["date", "name", "link_url", "path", "visitors", "events"],
            &events,
            reversed,
        ),
    );
    e
}

fn write_dir(dir: &Path, e: &Export) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in &e.files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

fn write_zip(file: &Path, e: &Export) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(file).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in &e.files {
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
    }
    zip.finish().unwrap();
}

fn plausible(app: &TestApp, site: &str, path: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.args(["import", "plausible", "--site", site])
        .arg(path)
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("RUST_LOG", "warn");
    cmd
}

/// Views per page and local day from the page hour buckets (the day's
/// figures sit at its first instant, which is in the hour bucket of that
/// instant), and the totals of the page day buckets, which must agree.
async fn stored_views(app: &TestApp, tz: chrono_tz::Tz) -> BTreeMap<(String, NaiveDate), i64> {
    let mut by_hour = BTreeMap::new();
    for b in app.buckets(Resolution::Hour).await {
        let day = b.timestamp.to_chrono().with_timezone(&tz).date_naive();
        let path = b
            .page
            .split_once('/')
            .map(|(_, p)| format!("/{p}"))
            .unwrap();
        *by_hour.entry((path, day)).or_default() += b.total_views;
    }
    by_hour.retain(|_, v| *v != 0);
    let minute: i64 = app.total_views(Resolution::Minute).await;
    let day: i64 = app.total_views(Resolution::Day).await;
    assert_eq!(minute, by_hour.values().sum::<i64>(), "minute buckets");
    assert_eq!(day, minute, "day buckets");
    by_hour
}

async fn assert_reports_show(
    app: &TestApp,
    site: &tickertape::storage::sites::Site,
    e: &Export,
    days: u32,
) {
    let tz = site.time_zone.tz();
    assert_eq!(stored_views(app, tz).await, e.views);
    assert_eq!(site_day_counts(app, Dimension::Country).await, e.countries);
    assert_eq!(site_day_counts(app, Dimension::Browser).await, e.browsers);
    assert_eq!(site_day_counts(app, Dimension::Device).await, e.devices);
    assert_eq!(site_day_counts(app, Dimension::Os).await, e.systems);
    assert_eq!(site_day_counts(app, Dimension::Source).await, e.sources);
    assert_eq!(site_day_counts(app, Dimension::Event).await, e.events);
    assert_eq!(
        site_day_counts(app, Dimension::Medium).await,
        BTreeMap::from([("email".to_owned(), 2 * i64::from(days))])
    );
    // The JSON API over the export's local days: its figures, exactly.
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let first = first_day();
    let range = format!(
        "range=custom&from={first}T00:00&to={}T00:00",
        first + chrono::Days::new(days.into())
    );
    let path = format!("/api/v1/sites/{}/visits?{range}", site.id);
    let a = crate::json_api::get(app, &token, &path).await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(
        a.json["views"].as_i64(),
        Some(e.views.values().sum()),
        "{}",
        a.json
    );
    assert_eq!(a.json["visits"].as_i64(), Some(e.visits), "{}", a.json);
    assert_eq!(a.json["bounces"].as_i64(), Some(e.bounces), "{}", a.json);
    assert_eq!(
        a.json["durationSeconds"].as_i64(),
        Some(e.duration),
        "{}",
        a.json
    );
    let visitors = a.json["visitors"].as_f64().unwrap();
    assert!(
        (visitors - e.visitors as f64).abs() <= e.visitors as f64 * 0.02,
        "{visitors} visitors, the files' days add up to {}",
        e.visitors
    );
    for (page, want) in &e.entries {
        let p = crate::json_api::get(app, &token, &format!("{path}&path={page}")).await;
        assert_eq!(
            p.json["visits"].as_i64(),
            Some(*want),
            "entries of {page}: {}",
            p.json
        );
        assert_eq!(
            p.json["exits"].as_i64(),
            Some(e.exits[page]),
            "exits of {page}: {}",
            p.json
        );
    }
    // The custom events' link URLs and paths, in the API's property
    // breakdown, the Properties page and its file: each value's events,
    // and its visitors as visits, out of every imported visit.
    for key in ["url", "path"] {
        let breakdown = format!(
            "/api/v1/sites/{}/breakdown?{range}&dimension=prop:{key}&limit=1000",
            site.id
        );
        let a = crate::json_api::get(app, &token, &breakdown).await;
        assert_eq!(a.status, 200, "{}", a.json);
        let got: BTreeMap<(String, String), [i64; 2]> = a.json["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    (key.to_owned(), r["name"].as_str().unwrap().to_owned()),
                    [r["events"].as_i64().unwrap(), r["count"].as_i64().unwrap()],
                )
            })
            .collect();
        let want: BTreeMap<_, _> = e
            .props
            .iter()
            .filter(|((k, _), _)| k == key)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want, "{key}: {}", a.json);
        assert_eq!(a.json["of"].as_i64(), Some(e.visits), "{}", a.json);
        assert_eq!(
            a.json["period"]["filtered"]["importedCounted"], true,
            "{}",
            a.json
        );
        // A filter leaves imported days out: they keep no visits.
        let a = crate::json_api::get(app, &token, &format!("{breakdown}&filter=country:US")).await;
        assert_eq!(a.status, 200, "{}", a.json);
        assert_eq!(a.json["entries"].as_array().map(Vec::len), Some(0));
        assert_eq!(a.json["period"]["filtered"]["importedCounted"], false);
    }
    let properties = format!("/sites/{}/properties?{range}&key=url", site.id);
    let (status, html) = admin.text(&properties).await;
    assert_eq!(status, 200);
    assert!(html.contains("b.example"), "{html}");
    assert!(
        !html.contains("jane@example.com"),
        "an email is no property"
    );
    assert!(html.contains("Imported days are counted"), "{html}");
    let (status, csv) = admin
        .text(&format!(
            "/sites/{}/properties.csv?{range}&key=path",
            site.id
        ))
        .await;
    assert_eq!(status, 200);
    let gone = e.props[&("path".to_owned(), "/gone".to_owned())];
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("/gone,{},", gone[1]))),
        "value, visits: {csv}"
    );
    // The API's series says the same as the report finer than a day.
    for (res, note) in [("hour", true), ("day", false)] {
        let series = format!("/api/v1/sites/{}/series?{range}&res={res}", site.id);
        let a = crate::json_api::get(app, &token, &series).await;
        assert_eq!(a.status, 200, "{}", a.json);
        let said = a.json["period"]["dailyOnly"].as_str();
        assert_eq!(said.is_some(), note, "{res}: {}", a.json["period"]);
        if let Some(said) = said {
            assert!(said.starts_with("imported: daily figures only"), "{said}");
        }
    }
    // Each local day's views in the dashboard's day chart.
    let base = format!("/sites/{}", site.id);
    let (status, csv) = admin
        .text(&format!("{base}/series.csv?{range}&res=day"))
        .await;
    assert_eq!(status, 200);
    let by_day: Vec<i64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let mut want_by_day = BTreeMap::<NaiveDate, i64>::new();
    for ((_, day), v) in &e.views {
        *want_by_day.entry(*day).or_default() += v;
    }
    assert_eq!(
        by_day,
        want_by_day.values().copied().collect::<Vec<_>>(),
        "{csv}"
    );
    // Finer than a day, the report says what the figures are.
    let (status, html) = admin.text(&format!("{base}?{range}&res=hour")).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("id=\"daily-only\""),
        "no daily-figures note at hour resolution"
    );
    assert!(html.contains("imported: daily figures only"));
    let (_, html) = admin.text(&format!("{base}?{range}&res=day")).await;
    assert!(
        !html.contains("id=\"daily-only\""),
        "a note at day resolution"
    );
}

#[tokio::test]
async fn a_plausible_export_lands_in_every_report_exactly_once() {
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let e = export(6, 0, false, false);
    let files = dir.path().join("export");
    write_dir(&files, &e);
    std::fs::write(files.join("README.txt"), "not a table").unwrap();
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{} views", e.views.values().sum::<i64>())),
        "{stdout}"
    );
    assert!(stdout.contains("6 days"), "{stdout}");
    assert!(stdout.contains("README.txt is no table"), "{stdout}");
    assert!(!stdout.contains("no file for"), "{stdout}");
    assert_reports_show(&app, &site, &e, 6).await;

    // The same files again, as a directory or zipped: nothing more.
    let zipped = dir.path().join("export.zip");
    write_zip(&zipped, &e);
    for again in [&files, &zipped] {
        let out = plausible(&app, "plausible.test", again).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("already imported: nothing was written"),
            "{out:?}"
        );
    }
    assert_reports_show(&app, &site, &e, 6).await;
}

#[tokio::test]
async fn an_old_plausible_export_zipped_into_a_berlin_site_gives_its_local_days() {
    let app = spawn_app().await;
    let site = app
        .add_site_in("plausible.test", &[], "Europe/Berlin")
        .await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let e = export(6, 0, true, true);
    let zipped = dir.path().join("plausible-export.zip");
    write_zip(&zipped, &e);
    let out = plausible(&app, &site.id.to_string(), &zipped)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("no pageviews column"), "{stdout}");
    assert_reports_show(&app, &site, &e, 6).await;
}

#[tokio::test]
async fn every_bad_plausible_export_is_named_by_file_line_and_column_and_writes_nothing() {
    let app = spawn_app().await;
    app.add_site("plausible.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let good = export(2, 0, false, false);
    let name = |t: &str| {
        let first = first_day();
        format!(
            "imported_{t}_{}_{}.csv",
            first.format("%Y%m%d"),
            first.succ_opt().unwrap().format("%Y%m%d")
        )
    };
    let (pages, visitors) = (&name("pages"), &name("visitors"));
    let (locations, entry) = (&name("locations"), &name("entry_pages"));
    let edit = |file: &str, line: usize, f: &dyn Fn(&str) -> String| {
        let mut e = export(2, 0, false, false);
        let text = e.files[file]
            .lines()
            .enumerate()
            .map(|(i, l)| if i == line { f(l) } else { l.to_owned() })
            .collect::<Vec<_>>()
            .join("\n");
        e.files.insert(file.to_owned(), text);
        e
    };
    let cases: Vec<(&str, Export, &str)> = vec![
        (
            "a missing column",
            edit(pages, 0, &|l| l.replace("pageviews", "views")),
            "pageviews",
        ),
        (
            "a negative figure",
            edit(visitors, 1, &|l| l.replacen(",40", ",-40", 1)),
            ":2: column \"visits\": not a whole number of 0 or more: \"-40\"",
        ),
        (
            "a figure that is no number",
            edit(pages, 1, &|l| {
                let mut cells: Vec<&str> = l.split(',').collect();
                cells[5] = "12a";
                cells.join(",")
            }),
            ":2: column \"pageviews\": not a whole number",
        ),
        (
            "a bad date",
            edit(locations, 3, &|l| {
                l.replacen(&first_day().to_string(), "2026-02-30", 1)
            }),
            ":4: column \"date\"",
        ),
        (
            "a page that breaks the page rules",
            edit(entry, 1, &|l| l.replacen(",/,", ",no-slash,", 1)),
            ":2: column \"entry_page\"",
        ),
        (
            "a country that is no code",
            edit(locations, 1, &|l| l.replacen("DE", "Germany", 1)),
            ":2: column \"country\"",
        ),
        (
            "more bounces than visits",
            edit(visitors, 1, &|l| l.replacen(",10,", ",4000,", 1)),
            ":2: column \"bounces\"",
        ),
    ];
    for (what, e, said) in cases {
        let files = dir.path().join(what.replace(' ', "-"));
        write_dir(&files, &e);
        let out = plausible(&app, "plausible.test", &files).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: {out:?}");
        assert!(stderr.contains(said), "{what}: {stderr}");
        assert_eq!(app.bucket_count().await, 0, "{what}");
        assert_eq!(app.total_views(Resolution::Day).await, 0, "{what}");
    }
    // Without its visitors file, or not an export at all.
    let mut e = export(2, 0, false, false);
    e.files.remove(visitors);
    let files = dir.path().join("no-visitors");
    write_dir(&files, &e);
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no visitors file"),
        "{out:?}"
    );
    let junk = dir.path().join("junk.zip");
    std::fs::write(&junk, "not a zip").unwrap();
    let out = plausible(&app, "plausible.test", &junk).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a readable zip"),
        "{out:?}"
    );
    assert_eq!(app.bucket_count().await, 0);
    drop(good);
}

#[tokio::test]
async fn a_plausible_import_killed_midway_and_run_again_ends_with_the_files_figures() {
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let dir = tempfile::tempdir().unwrap();
    // 40 days of 64 pages: 5,800 rows before the pages file's 2,560.
    let e = export(40, 60, false, false);
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let import = || plausible(&app, "plausible.test", &files);
    crate::imports::kill_midway_then_rerun(&app, import, "views", e.views.values().sum()).await;
    assert_eq!(stored_views(&app, site.time_zone.tz()).await, e.views);
    assert_eq!(site_day_counts(&app, Dimension::Event).await, e.events);
    assert_eq!(stored_properties(&app).await, e.props);
    assert_eq!(site_day_counts(&app, Dimension::Country).await, e.countries);
}

/// A local day with live figures is skipped whole, found by the site's
/// zone: a live view at 00:30 in Berlin is on the UTC day before.
#[tokio::test]
async fn a_local_day_with_live_figures_is_skipped_whole() {
    let app = spawn_app().await;
    let site = app
        .add_site_in("plausible.test", &[], "Europe/Berlin")
        .await;
    let e = export(4, 0, false, false);
    let live_day = first_day().succ_opt().unwrap();
    let tz = site.time_zone.tz();
    let live_at =
        tickertape::reports::local::midnight(live_day, tz) + chrono::TimeDelta::minutes(30);
    assert_ne!(
        live_at.date_naive(),
        live_day,
        "the live view is on the UTC day before"
    );
    app.write_hits(&[("plausible.test/live", live_at)]).await;
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "skipped days with live figures (--overlap add imports them too): {live_day}"
        )),
        "{stdout}"
    );
    let mut want = e.views.clone();
    want.retain(|(_, d), _| *d != live_day);
    want.insert(("/live".into(), live_day), 1);
    assert_eq!(stored_views(&app, tz).await, want);
    let again = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already imported"),
        "{again:?}"
    );
    assert_eq!(stored_views(&app, tz).await, want);
}

/// `site_day_counts` without the names a clear left at 0.
async fn site_day_counts_held(app: &TestApp, d: Dimension) -> BTreeMap<String, i64> {
    let mut counts = site_day_counts(app, d).await;
    counts.retain(|_, n| *n != 0);
    counts
}

#[tokio::test]
async fn overlap_replace_clears_a_local_days_live_figures_and_keeps_the_hours_around_it() {
    let app = spawn_app().await;
    let site = app
        .add_site_in("plausible.test", &[], "Europe/Berlin")
        .await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let e = export(4, 0, false, false);
    let tz = site.time_zone.tz();
    let first = first_day();
    let midnight = tickertape::reports::local::midnight(first, tz);
    let hour = chrono::TimeDelta::hours;
    // Live views on the export's first local day, on both UTC days it
    // spans, and one just before it: the same UTC day bucket, another
    // local day, not in the export.
    let live_early = midnight + chrono::TimeDelta::minutes(30);
    let live_noon = midnight + hour(12);
    let keep_at = midnight - chrono::TimeDelta::minutes(30);
    assert_ne!(live_early.date_naive(), live_noon.date_naive());
    assert_eq!(keep_at.date_naive(), live_early.date_naive());
    app.write_hits(&[
        ("plausible.test/live", live_early, Some("live.example")),
        ("plausible.test/live", live_noon, Some("live.example")),
        ("plausible.test/", live_noon, Some("live.example")),
        ("plausible.test/keep", keep_at, Some("keep.example")),
    ])
    .await;
    // The pages report over those days, read once: its kept summaries
    // hold the live pages, and must not outlive the clear.
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "replace", None).await;
    assert_eq!(
        api_pages(&app, &token, &site, 4).await,
        BTreeMap::from([("/".to_owned(), 1), ("/live".to_owned(), 2)])
    );
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let replace = || {
        plausible(&app, "plausible.test", &files)
            .args(["--overlap", "replace"])
            .output()
            .unwrap()
    };
    let out = replace();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "replaced days (their live figures cleared): {first}"
        )),
        "{stdout}"
    );
    let mut want = e.views.clone();
    let before = first.pred_opt().unwrap();
    want.insert(("/keep".into(), before), 1);
    let mut sources = e.sources.clone();
    sources.insert("keep.example".into(), 1);
    for _ in 0..2 {
        assert_eq!(stored_views(&app, tz).await, want);
        assert_eq!(site_day_counts_held(&app, Dimension::Source).await, sources);
        // The site's totals agree with its pages at every level.
        for level in Resolution::ALL {
            assert_eq!(
                app.site_total_views(level).await,
                app.total_views(level).await,
                "{level:?}"
            );
        }
        // The dashboard's day chart: the export's days alone.
        let (status, csv) = admin
            .text(&format!(
                "/sites/{}/series.csv?range=custom&from={before}T00:00&to={}T00:00&res=day",
                site.id,
                first + chrono::Days::new(4)
            ))
            .await;
        assert_eq!(status, 200);
        let by_day: Vec<i64> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        let mut want_by_day = BTreeMap::<NaiveDate, i64>::from([(before, 1)]);
        for ((_, day), v) in &e.views {
            *want_by_day.entry(*day).or_default() += v;
        }
        assert_eq!(by_day, want_by_day.values().copied().collect::<Vec<_>>());
        let mut per_page = BTreeMap::<String, i64>::new();
        for ((page, _), v) in &e.views {
            *per_page.entry(page.clone()).or_default() += v;
        }
        assert_eq!(api_pages(&app, &token, &site, 4).await, per_page);
        let table = crate::imports::imports_table(&admin, &site).await;
        assert!(table.contains(&format!("replaced {first}")), "{table}");
        // A rerun is a no-op: the clear is not done again.
        let again = replace();
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("already imported"),
            "{again:?}"
        );
    }
}

#[tokio::test]
async fn replacing_days_of_a_zone_off_whole_hours_is_refused_and_writes_nothing() {
    let app = spawn_app().await;
    let site = app.add_site_in("plausible.test", &[], "Asia/Kolkata").await;
    let e = export(3, 0, false, false);
    let live_at = tickertape::reports::local::midnight(first_day(), site.time_zone.tz())
        + chrono::TimeDelta::hours(3);
    app.write_hits(&[("plausible.test/live", live_at)]).await;
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let out = plausible(&app, "plausible.test", &files)
        .args(["--overlap", "replace"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not start on a whole UTC hour"),
        "{out:?}"
    );
    assert_eq!(
        app.total_views(Resolution::Day).await,
        1,
        "the live view alone"
    );
    let records = app
        .store
        .db()
        .collection::<bson::Document>(tickertape::storage::imports::COLLECTION)
        .count_documents(bson::doc! {})
        .await
        .unwrap();
    assert_eq!(records, 0);
}

/// An import replacing days another import brought leaves only its own
/// properties there, and takes nothing of them back when the other is
/// deleted.
#[tokio::test]
async fn a_replacing_imports_properties_are_the_only_ones_on_its_days() {
    let app = spawn_app().await;
    app.add_site("plausible.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let first = export(3, 0, false, false);
    write_dir(&dir.path().join("first"), &first);
    let out = plausible(&app, "plausible.test", &dir.path().join("first"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let first_key = crate::imports::printed_key(&out);
    assert_eq!(stored_properties(&app).await, first.props);
    // The same days with another link in place of one.
    let mut second = export(3, 0, false, false);
    for (name, text) in second.files.iter_mut() {
        if name.contains("custom_events") {
            *text = text.replace("https://b.example/", "https://c.example/");
        }
    }
    let moved = second
        .props
        .remove(&("url".to_owned(), "https://b.example/".to_owned()))
        .unwrap();
    second
        .props
        .insert(("url".to_owned(), "https://c.example/".to_owned()), moved);
    write_dir(&dir.path().join("second"), &second);
    let out = plausible(&app, "plausible.test", &dir.path().join("second"))
        .args(["--overlap", "replace"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stored_properties(&app).await, second.props);
    // The first import's delete skips the days it lost: nothing of the
    // second's is taken back.
    let out = crate::imports::delete_command(&app, &first_key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stored_properties(&app).await, second.props);
}

#[tokio::test]
async fn clearing_a_local_day_twice_leaves_what_clearing_it_once_does() {
    let app = spawn_app().await;
    let site = app
        .add_site_in("plausible.test", &[], "Europe/Berlin")
        .await;
    let tz = site.time_zone.tz();
    let day = first_day();
    let from = tickertape::reports::local::midnight(day, tz);
    let to = tickertape::reports::local::midnight(day.succ_opt().unwrap(), tz);
    let hour = chrono::TimeDelta::hours;
    app.write_hits(&[
        ("plausible.test/a", from - hour(2), Some("before.example")),
        ("plausible.test/a", from + hour(1), Some("inside.example")),
        ("plausible.test/a", from + hour(1), Some("before.example")),
        ("plausible.test/b", from + hour(20), Some("inside.example")),
        ("plausible.test/b", to + hour(1), Some("after.example")),
    ])
    .await;
    let outside = BTreeMap::from([
        ("after.example".to_owned(), 1),
        ("before.example".to_owned(), 1),
    ]);
    for _ in 0..2 {
        tickertape::storage::clear::clear_span(
            &app.store,
            &site.domain,
            &site.id.to_string(),
            from,
            to,
        )
        .await
        .unwrap();
        assert_eq!(site_day_counts_held(&app, Dimension::Source).await, outside);
        for level in Resolution::ALL {
            assert_eq!(app.total_views(level).await, 2, "{level:?}");
            assert_eq!(app.site_total_views(level).await, 2, "{level:?}");
        }
    }
}

#[tokio::test]
async fn a_replacing_import_killed_while_clearing_clears_again_and_ends_with_the_files_figures() {
    use bson::{doc, Document};
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    let e = export(4, 0, false, false);
    let live_day = first_day().succ_opt().unwrap();
    let start = live_day.and_time(chrono::NaiveTime::MIN).and_utc();
    // A day of live views, one a minute on each of ten pages: enough
    // buckets that the clear takes a while.
    let pages: Vec<String> = (0..10).map(|i| format!("plausible.test/l{i}")).collect();
    let hits: Vec<(&str, chrono::DateTime<chrono::Utc>, Option<&str>)> = (0..1440)
        .flat_map(|m| {
            let at = start + chrono::TimeDelta::minutes(m);
            pages
                .iter()
                .map(move |p| (p.as_str(), at, Some("live.example")))
        })
        .collect();
    for chunk in hits.chunks(2_000) {
        app.write_hits(chunk).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let replace = || {
        let mut cmd = plausible(&app, "plausible.test", &files);
        cmd.args(["--overlap", "replace"]);
        cmd
    };
    let mut child = replace()
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let db = app.store.db();
    let minutes = db.collection::<Document>(Resolution::Minute.collection());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let clearing = minutes
            .find_one(doc! {tickertape::storage::buckets::TAKEN_BACK: {"$gt": 0}})
            .await
            .unwrap();
        if clearing.is_some() {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before it was killed"
        );
        assert!(std::time::Instant::now() < deadline, "no clearing seen");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let record = db
        .collection::<Document>(tickertape::storage::imports::COLLECTION)
        .find_one(doc! {})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.get_bool("cleared"),
        Ok(false),
        "killed while clearing"
    );
    assert!(
        app.total_views(Resolution::Minute).await > 0,
        "live views left to clear"
    );
    let out = replace().output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stored_views(&app, site.time_zone.tz()).await, e.views);
    assert_eq!(
        site_day_counts_held(&app, Dimension::Source).await,
        e.sources
    );
    for level in Resolution::ALL {
        assert_eq!(
            app.site_total_views(level).await,
            app.total_views(level).await,
            "{level:?}"
        );
    }
}

/// Views per page over the export's days, as the JSON API's pages answer.
async fn api_pages(
    app: &TestApp,
    token: &str,
    site: &tickertape::storage::sites::Site,
    days: u32,
) -> BTreeMap<String, i64> {
    let first = first_day();
    let path = format!(
        "/api/v1/sites/{}/pages?range=custom&from={first}T00:00&to={}T00:00&limit=100",
        site.id,
        first + chrono::Days::new(days.into())
    );
    let a = crate::json_api::get(app, token, &path).await;
    assert_eq!(a.status, 200, "{}", a.json);
    a.json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["views"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_deleted_plausible_import_takes_every_figure_back() {
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    let live_at = t0() - chrono::TimeDelta::hours(2);
    app.write_hits(&[("plausible.test/live", live_at)]).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let before = crate::imports::everything_counted(&app).await;
    let dir = tempfile::tempdir().unwrap();
    let e = export(5, 0, false, false);
    let zipped = dir.path().join("export.zip");
    write_zip(&zipped, &e);
    let out = plausible(&app, "plausible.test", &zipped).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let key = crate::imports::printed_key(&out);
    let imported = crate::imports::everything_counted(&app).await;
    assert!(!crate::imports::sketches_left(&app).await.is_empty());
    let first = first_day();
    let hourly = format!(
        "/sites/{}?range=custom&from={first}T00:00&to={}T00:00&res=hour",
        site.id,
        first + chrono::Days::new(2)
    );
    let (_, html) = admin.text(&hourly).await;
    assert!(html.contains("id=\"daily-only\""));
    // The server keeps this answer while the days' totals stand.
    let pages = api_pages(&app, &token, &site, 5).await;
    assert_eq!(
        pages["/pricing"],
        e.views
            .iter()
            .filter(|((p, _), _)| p == "/pricing")
            .map(|(_, v)| v)
            .sum::<i64>()
    );

    // Under another zone the rows would not land where they did: refused,
    // nothing changed, and the import is not half deleted.
    let berlin = tickertape::domain::TimeZone::parse("Europe/Berlin").unwrap();
    tickertape::storage::sites::set_time_zone(&app.store, &site, berlin)
        .await
        .unwrap();
    let refused = crate::imports::delete_command(&app, &key).output().unwrap();
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cannot be taken back exactly"),
        "{refused:?}"
    );
    assert_eq!(crate::imports::everything_counted(&app).await, imported);
    tickertape::storage::sites::set_time_zone(&app.store, &site, site.time_zone)
        .await
        .unwrap();

    let out = crate::imports::delete_command(&app, &key).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut after = crate::imports::everything_counted(&app).await;
    after.retain(|k, _| !k.ends_with(" takenBack"));
    assert_eq!(after, before);
    // No imported day keeps visitor registers (the live view has none:
    // it carries no visit), while before the delete they had them.
    let live_hour = bson::DateTime::from_chrono(Resolution::Hour.floor(live_at)).to_string();
    let live_day = bson::DateTime::from_chrono(Resolution::Day.floor(live_at)).to_string();
    let left = crate::imports::sketches_left(&app).await;
    assert!(
        left.iter()
            .all(|d| d.contains(&live_hour) || d.contains(&live_day)),
        "{left:?}"
    );
    let (_, html) = admin.text(&hourly).await;
    assert!(
        !html.contains("id=\"daily-only\""),
        "nothing imported is left"
    );

    // Another export with the same day totals but other pages: the
    // answer kept for the first is not taken for it.
    let mut other = export(5, 0, false, false);
    let pages_file = other
        .files
        .keys()
        .find(|k| k.contains("_pages_") && !k.contains("entry") && !k.contains("exit"))
        .unwrap()
        .clone();
    let swapped = other.files[&pages_file]
        .replace(",/pricing,", ",/SWAP,")
        .replace(",/docs,", ",/pricing,")
        .replace(",/SWAP,", ",/docs,");
    other.files.insert(pages_file, swapped);
    let zipped_other = dir.path().join("other.zip");
    write_zip(&zipped_other, &other);
    let out = plausible(&app, "plausible.test", &zipped_other)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let again = api_pages(&app, &token, &site, 5).await;
    assert_eq!(
        again["/pricing"], pages["/docs"],
        "{again:?} after {pages:?}"
    );
    assert_eq!(
        again["/docs"], pages["/pricing"],
        "{again:?} after {pages:?}"
    );
}

/// The imported properties as stored: per key and value, events and
/// visits, all days together.
async fn stored_properties(app: &TestApp) -> BTreeMap<(String, String), [i64; 2]> {
    use tickertape::storage::imported_properties::COLLECTION;
    let docs: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<bson::Document>(COLLECTION)
            .find(bson::doc! {"key": {"$exists": true}})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut all: BTreeMap<(String, String), [i64; 2]> = BTreeMap::new();
    for d in docs {
        let slot = all
            .entry((
                d.get_str("key").unwrap().to_owned(),
                d.get_str("value").unwrap().to_owned(),
            ))
            .or_default();
        slot[0] += d.get_i64("events").unwrap();
        slot[1] += d.get_i64("visits").unwrap();
    }
    all.retain(|_, v| *v != [0, 0]);
    all
}

/// Runs `cmd` to its end, or kills it (by its id) after `limit`: an
/// import must never hang on what a file holds.
pub(crate) fn output_within(
    mut cmd: std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = child.id();
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match outcome.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &id.to_string()])
                .status();
            panic!("still running after {limit:?}: killed")
        }
    }
}

/// The export of [`export`] with one cell of the visitors file's first
/// row (line 2) set to `value`; and that file's name.
fn with_visitors_cell(column: &str, value: &str) -> (Export, String) {
    let mut e = export(2, 0, false, false);
    let name = e
        .files
        .keys()
        .find(|k| k.starts_with("imported_visitors"))
        .unwrap()
        .clone();
    let text = e.files[&name].clone();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let i = lines[0].split(',').position(|c| c == column).unwrap();
    let mut cells: Vec<String> = lines[1].split(',').map(str::to_owned).collect();
    cells[i] = value.to_owned();
    lines[1] = cells.join(",");
    e.files.insert(name.clone(), lines.join("\n") + "\n");
    (e, name)
}

#[tokio::test]
async fn every_imported_figure_and_date_is_bounded_and_a_row_past_a_bound_is_refused_by_file_line_and_column(
) {
    let app = spawn_app().await;
    app.add_site("plausible.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let in_three_days = (chrono::Utc::now() + chrono::TimeDelta::days(3))
        .date_naive()
        .to_string();
    let cases = [
        // A day of visits is at most a day each: one such row once
        // overflowed a live site bucket and stopped a journal lane.
        ("visit_duration", "9223372036854775000"),
        ("visit_duration", "18446744073709551615"),
        ("visit_duration", "3456001"),
        // Visitors are made-up ids added one by one: 10^12 never ended.
        ("visitors", "1000000000000"),
        ("visitors", "41"),
        ("pageviews", "99999999999"),
        ("date", "+262142-12-31"),
        ("date", "-0001-01-01"),
        ("date", "0000-01-01"),
        ("date", "2026-1-5"),
        ("date", "1989-12-31"),
        ("date", &in_three_days),
    ];
    for (column, value) in cases {
        let (e, file) = with_visitors_cell(column, value);
        let files = dir.path().join(format!("{column}-{value}"));
        write_dir(&files, &e);
        let out = output_within(
            plausible(&app, "plausible.test", &files),
            std::time::Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{column} {value}");
        assert!(!out.status.success(), "{what}: {out:?}");
        assert!(
            stderr.contains(&format!("{file}:2: column \"{column}\"")),
            "{what}: {stderr}"
        );
        assert_eq!(app.bucket_count().await, 0, "{what}");
        let records = app
            .store
            .db()
            .collection::<bson::Document>(tickertape::storage::imports::COLLECTION)
            .count_documents(bson::doc! {})
            .await
            .unwrap();
        assert_eq!(records, 0, "{what}");
    }
    // A row short of a field names the field it lacks, by its header.
    let (mut e, file) = with_visitors_cell("visit_duration", "1000");
    let text = e.files[&file].replacen(",1000\n", "\n", 1);
    e.files.insert(file.clone(), text);
    let files = dir.path().join("short-row");
    write_dir(&files, &e);
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains(&format!("{file}:2: column \"visit_duration\"")),
        "{stderr}"
    );
    assert_eq!(app.bucket_count().await, 0);
    // At the bounds, the file is taken: 40 visits of a day each.
    let (e, _) = with_visitors_cell("visit_duration", "3456000");
    let files = dir.path().join("at-the-bound");
    write_dir(&files, &e);
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Views per writer part over the site buckets of every level.
pub(crate) async fn site_views_by_part(app: &TestApp) -> BTreeMap<i32, i64> {
    let mut parts = BTreeMap::new();
    for g in Resolution::ALL {
        let name = tickertape::storage::buckets::Subject::Site.collection(g);
        let docs: Vec<bson::Document> = futures::TryStreamExt::try_collect(
            app.store
                .db()
                .collection::<bson::Document>(name)
                .find(bson::doc! {})
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        for d in docs {
            let views = match d.get("totalViews") {
                Some(bson::Bson::Int32(n)) => i64::from(*n),
                Some(bson::Bson::Int64(n)) => *n,
                _ => 0,
            };
            *parts.entry(d.get_i32("part").unwrap()).or_default() += views;
        }
    }
    parts
}

/// How many site documents (views and breakdowns) each part has.
pub(crate) async fn site_documents_by_part(app: &TestApp) -> BTreeMap<i32, u64> {
    let mut parts = BTreeMap::new();
    let db = app.store.db();
    for name in db.list_collection_names().await.unwrap() {
        if !name.starts_with("site_") {
            continue;
        }
        let docs: Vec<bson::Document> = futures::TryStreamExt::try_collect(
            db.collection::<bson::Document>(&name)
                .find(bson::doc! {"part": {"$exists": true}})
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        for d in docs {
            *parts.entry(d.get_i32("part").unwrap()).or_default() += 1;
        }
    }
    parts
}

#[tokio::test]
async fn an_imports_site_figures_land_in_a_part_of_their_own_and_an_older_imports_are_taken_back_from_lane_zeros(
) {
    use tickertape::storage::buckets::PART_IMPORT;
    let app = spawn_app().await;
    app.add_site("plausible.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let e = export(3, 0, false, false);
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let key = crate::imports::printed_key(&out);
    // Every site document the import wrote is the import's part: none is
    // a live lane's.
    let documents = site_documents_by_part(&app).await;
    assert_eq!(
        documents.keys().copied().collect::<Vec<_>>(),
        vec![PART_IMPORT],
        "{documents:?}"
    );
    let views: i64 = e.views.values().sum();
    assert_eq!(
        site_views_by_part(&app).await,
        BTreeMap::from([(PART_IMPORT, 3 * views)]),
        "minute, hour and day"
    );
    let record = app
        .store
        .db()
        .collection::<bson::Document>(tickertape::storage::imports::COLLECTION)
        .find_one(bson::doc! {"_id": &key})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.get_i32("part"), Ok(PART_IMPORT));

    // An import from before imports had a part: its site figures are in
    // lane 0's part and its record names none. Its delete takes them back
    // from there, exactly.
    let db = app.store.db();
    for name in db.list_collection_names().await.unwrap() {
        if name.starts_with("site_") {
            db.collection::<bson::Document>(&name)
                .update_many(
                    bson::doc! {"part": PART_IMPORT},
                    bson::doc! {"$set": {"part": 0}},
                )
                .await
                .unwrap();
        }
    }
    db.collection::<bson::Document>(tickertape::storage::imports::COLLECTION)
        .update_one(
            bson::doc! {"_id": &key},
            bson::doc! {"$unset": {"part": ""}},
        )
        .await
        .unwrap();
    let out = crate::imports::delete_command(&app, &key).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        site_views_by_part(&app).await,
        BTreeMap::from([(0, 0)]),
        "lane 0's part back to nothing, and nothing written to another"
    );
    let mut left = crate::imports::everything_counted(&app).await;
    left.retain(|k, _| !k.ends_with(" takenBack"));
    assert_eq!(left, BTreeMap::new());
}

#[tokio::test]
async fn an_import_killed_midway_can_be_deleted_and_takes_back_exactly_what_it_wrote() {
    let app = spawn_app().await;
    app.add_site("plausible.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let e = export(40, 60, false, false);
    let files = dir.path().join("export");
    write_dir(&files, &e);
    let mut child = plausible(&app, "plausible.test", &files)
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let progress = app
        .store
        .db()
        .collection::<bson::Document>(tickertape::storage::progress::COLLECTION);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let done = progress
            .find_one(bson::doc! {"stream": "views", "journal": {"$regex": "^import/"}})
            .await
            .unwrap()
            .and_then(|d| d.get_i64("position").ok())
            .unwrap_or(0);
        if done >= 1_000 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "ended before the kill");
        assert!(std::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!crate::imports::everything_counted(&app).await.is_empty());
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args(["import", "list"])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("or `import delete` it"), "{listed}");
    let key = listed.split('\t').next().unwrap().to_owned();
    let out = crate::imports::delete_command(&app, &key)
        .env("TICKERTAPE_IMPORT_BATCH_ROWS", "250")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("incomplete"),
        "{out:?}"
    );
    let mut left = crate::imports::everything_counted(&app).await;
    left.retain(|k, _| !k.ends_with(" takenBack"));
    assert_eq!(left, BTreeMap::new());
    // Forgotten: the same export imports again, whole.
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        app.total_views(Resolution::Day).await,
        e.views.values().sum::<i64>()
    );
}

/// A CSV table as Plausible's exporter writes it: its header, then a row
/// per line.
fn plausible_table(header: &str, rows: &[String]) -> String {
    let mut text = format!("{header}\n");
    for row in rows {
        text += row;
        text += "\n";
    }
    text
}

/// The JSON API's figures of `site` (and `path`) over the days `from` to
/// `to` (exclusive).
async fn api_visits(
    app: &TestApp,
    token: &str,
    site: &tickertape::storage::sites::Site,
    (from, to): (NaiveDate, NaiveDate),
    path: Option<&str>,
) -> serde_json::Value {
    let mut query = format!(
        "/api/v1/sites/{}/visits?range=custom&from={from}T00:00&to={to}T00:00",
        site.id
    );
    if let Some(path) = path {
        query += &format!("&path={path}");
    }
    let a = crate::json_api::get(app, token, &query).await;
    assert_eq!(a.status, 200, "{}", a.json);
    a.json
}

#[tokio::test]
async fn days_and_pages_without_page_rows_keep_their_visitors_entries_and_exits_and_rows_of_one_page_add_up(
) {
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    let only = app.add_site("only.test", &[]).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let d1 = first_day();
    let d2 = d1.succ_opt().unwrap();
    let d3 = d2.succ_opt().unwrap();
    let stamp = format!("{}_{}", d1.format("%Y%m%d"), d2.format("%Y%m%d"));
    let visitors = plausible_table(
        "date,visitors,pageviews,bounces,visits,visit_duration",
        &[
            format!("{d1},10,12,4,12,600"),
            // A day with visits and no pages rows.
            format!("{d2},11,20,3,13,400"),
        ],
    );
    // One page and day on three hostnames: their visitors add up.
    let pages = plausible_table(
        "date,hostname,page,visits,visitors,pageviews,total_scroll_depth,total_scroll_depth_visits,total_time_on_page,total_time_on_page_visits",
        &[
            format!("{d1},a.plausible.test,/,2,1,2,0,0,0,0"),
            format!("{d1},b.plausible.test,/,1,1,1,0,0,0,0"),
            format!("{d1},plausible.test,/,7,6,9,0,0,0,0"),
        ],
    );
    // Entries and exits of a page that has no pages row that day.
    let entries = plausible_table(
        "date,entry_page,entrances,visitors,visit_duration,bounces,pageviews",
        &[
            format!("{d1},/,12,10,600,4,12"),
            format!("{d2},/landing,5,5,100,1,9"),
        ],
    );
    let exits = plausible_table(
        "date,exit_page,exits,visitors,visit_duration,bounces,pageviews",
        &[
            format!("{d1},/,12,10,600,4,12"),
            format!("{d2},/landing,4,4,80,1,6"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("export");
    std::fs::create_dir(&files).unwrap();
    for (table, text) in [
        ("visitors", &visitors),
        ("pages", &pages),
        ("entry_pages", &entries),
        ("exit_pages", &exits),
    ] {
        std::fs::write(files.join(format!("imported_{table}_{stamp}.csv")), text).unwrap();
    }
    let out = plausible(&app, "plausible.test", &files).output().unwrap();
    assert!(out.status.success(), "{out:?}");

    let both = api_visits(&app, &token, &site, (d1, d3), None).await;
    assert_eq!(both["visits"].as_i64(), Some(25), "{both}");
    let visitors_of = |json: &serde_json::Value| json["visitors"].as_f64().unwrap().round() as i64;
    assert_eq!(visitors_of(&both), 21, "{both}");
    let second = api_visits(&app, &token, &site, (d2, d3), None).await;
    assert_eq!(
        visitors_of(&second),
        11,
        "a day without pages rows: {second}"
    );
    assert_eq!(second["visits"].as_i64(), Some(13), "{second}");
    let home = api_visits(&app, &token, &site, (d1, d2), Some("/")).await;
    assert_eq!(home["views"].as_i64(), Some(12), "{home}");
    assert_eq!(visitors_of(&home), 8, "rows of 1, 1 and 6 visitors: {home}");
    let landing = api_visits(&app, &token, &site, (d2, d3), Some("/landing")).await;
    assert_eq!(landing["visits"].as_i64(), Some(5), "entries: {landing}");
    assert_eq!(landing["exits"].as_i64(), Some(4), "exits: {landing}");
    // The pages report lists it with its entries and exits, and every
    // entry and exit of the days.
    let (status, csv) = admin
        .text(&format!(
            "/sites/{}/pages.csv?range=custom&from={d1}T00:00&to={d3}T00:00",
            site.id
        ))
        .await;
    assert_eq!(status, 200);
    let landing_row = csv.lines().find(|l| l.starts_with("/landing,"));
    assert!(
        landing_row.is_some_and(|l| l.starts_with("/landing,0,0.0,5,4,")),
        "{csv}"
    );
    let column = |i: usize| -> i64 {
        csv.lines()
            .skip(1)
            .map(|l| l.split(',').nth(i).unwrap().parse::<i64>().unwrap())
            .sum()
    };
    assert_eq!((column(3), column(4)), (17, 16), "entries, exits: {csv}");

    // A visitors-only export is taken: the site's figures, no pages.
    let alone = dir.path().join("visitors-only");
    std::fs::create_dir(&alone).unwrap();
    std::fs::write(
        alone.join(format!("imported_visitors_{stamp}.csv")),
        &visitors,
    )
    .unwrap();
    let out = plausible(&app, "only.test", &alone).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("note: no pages file"),
        "{out:?}"
    );
    let figures = api_visits(&app, &token, &only, (d1, d3), None).await;
    assert_eq!(figures["visits"].as_i64(), Some(25), "{figures}");
    assert_eq!(figures["bounces"].as_i64(), Some(7), "{figures}");
    assert_eq!(figures["durationSeconds"].as_i64(), Some(1000), "{figures}");
    assert_eq!(visitors_of(&figures), 21, "{figures}");
}

#[tokio::test]
async fn entry_and_exit_pages_without_a_pages_row_are_rows_of_0_views_on_the_dashboard_in_the_api_and_the_csv(
) {
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let d1 = first_day();
    let d2 = d1.succ_opt().unwrap();
    let stamp = format!("{}_{}", d1.format("%Y%m%d"), d1.format("%Y%m%d"));
    let visitors = plausible_table(
        "date,visitors,pageviews,bounces,visits,visit_duration",
        &[format!("{d1},10,12,4,12,600")],
    );
    let pages = plausible_table(
        "date,hostname,page,visits,visitors,pageviews,total_scroll_depth,total_scroll_depth_visits,total_time_on_page,total_time_on_page_visits",
        &[format!("{d1},plausible.test,/,7,6,9,0,0,0,0")],
    );
    // `/landing` is entered and `/gone` left on a day neither has a
    // pages row (Plausible's own tables hold such rows).
    let entries = plausible_table(
        "date,entry_page,entrances,visitors,visit_duration,bounces,pageviews",
        &[
            format!("{d1},/,7,6,500,3,9"),
            format!("{d1},/landing,5,4,100,1,3"),
        ],
    );
    let exits = plausible_table(
        "date,exit_page,exits,visitors,visit_duration,bounces,pageviews",
        &[
            format!("{d1},/,8,7,500,3,9"),
            format!("{d1},/gone,4,3,100,1,3"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    for (table, text) in [
        ("visitors", &visitors),
        ("pages", &pages),
        ("entry_pages", &entries),
        ("exit_pages", &exits),
    ] {
        std::fs::write(
            dir.path().join(format!("imported_{table}_{stamp}.csv")),
            text,
        )
        .unwrap();
    }
    let out = plausible(&app, "plausible.test", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let range = format!("range=custom&from={d1}T00:00&to={d2}T00:00");
    // Views, entries and exits of each page, as each surface gives them.
    let expected = [("/", 9, 7, 8), ("/gone", 0, 0, 4), ("/landing", 0, 5, 0)];

    let (status, csv) = admin
        .text(&format!("/sites/{}/pages.csv?{range}", site.id))
        .await;
    assert_eq!(status, 200, "{csv}");
    let from_csv: Vec<(String, i64, i64, i64)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let n = |i: usize| c[i].parse::<i64>().unwrap();
            (c[0].to_owned(), n(1), n(3), n(4))
        })
        .collect();

    let api = crate::json_api::get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/pages?{range}", site.id),
    )
    .await;
    assert_eq!(api.status, 200, "{}", api.json);
    assert_eq!(api.json["matching"].as_u64(), Some(3), "{}", api.json);
    let from_api: Vec<(String, i64, i64, i64)> = api.json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let n = |k: &str| p[k].as_i64().unwrap();
            (
                p["path"].as_str().unwrap().to_owned(),
                n("views"),
                n("entries"),
                n("exits"),
            )
        })
        .collect();

    let (status, html) = admin.text(&format!("/sites/{}?{range}", site.id)).await;
    assert_eq!(status, 200);
    let from_page: Vec<(String, i64, i64, i64)> = expected
        .iter()
        .filter_map(|(path, ..)| {
            let at = html.find(&format!(">{path}</a></td>"))?;
            let row = &html[at..at + html[at..].find("</tr>").unwrap()];
            // Visitors, views, entries, exits, share.
            let cells = num_cells(row);
            let n = |i: usize| cells[i].replace(',', "").parse::<i64>().unwrap();
            Some(((*path).to_owned(), n(1), n(2), n(3)))
        })
        .collect();

    let expected: Vec<(String, i64, i64, i64)> = expected
        .iter()
        .map(|(p, v, e, x)| ((*p).to_owned(), *v, *e, *x))
        .collect();
    assert_eq!(from_csv, expected, "pages.csv: {csv}");
    assert_eq!(from_api, expected, "API: {}", api.json);
    assert_eq!(from_page, expected, "dashboard");
}

/// On a day a replacing import took over, its properties are the day's:
/// a visit tracked there with a property is left out of the Properties
/// figures (the values and the visits they are a share of), as it is of
/// every unfiltered figure; one tracked on a day the import did not
/// cover still counts beside the imported values.
#[tokio::test]
async fn a_property_tracked_on_a_replaced_day_gives_way_to_the_imports() {
    let app = spawn_app().await;
    let site = app.add_site("plausible.test", &[]).await;
    let id = site.id.to_string();
    let days = 2;
    let e = export(days, 0, false, false);
    let first = first_day();
    let noon = |d: NaiveDate| d.and_hms_opt(12, 0, 0).unwrap().and_utc();
    let live = "https://live.example/";
    let props = urlencode(&format!(r#"{{"url":"{live}"}}"#));
    // One visit on the import's first day, one the day after its last.
    let after = first + chrono::Days::new(days.into());
    for (day, browser) in [(first, 0), (after, 1)] {
        app.clock.set(noon(day));
        let r = app
            .pixel_with(
                &format!("site={id}&page=%2Fa&props={props}"),
                &[("user-agent", crate::traffic::BROWSERS[browser].0)],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &e);
    let out = plausible(&app, "plausible.test", dir.path())
        .args(["--overlap", "replace"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    app.clock.set(noon(after + chrono::Days::new(2)));
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "import", None).await;
    let range = format!(
        "range=custom&from={first}T00:00&to={}T00:00",
        after + chrono::Days::new(1)
    );
    let a = crate::json_api::get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/breakdown?{range}&dimension=prop:url&limit=1000"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.json);
    let got: BTreeMap<String, [i64; 2]> = a.json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                [r["events"].as_i64().unwrap(), r["count"].as_i64().unwrap()],
            )
        })
        .collect();
    let mut want: BTreeMap<String, [i64; 2]> = e
        .props
        .iter()
        .filter(|((k, _), _)| k == "url")
        .map(|((_, v), n)| (v.clone(), *n))
        .collect();
    // The day after: a view carrying it, in one visit. The replaced day's
    // visit is not counted.
    want.insert(live.to_owned(), [0, 1]);
    assert_eq!(got, want, "{}", a.json);
    assert_eq!(a.json["of"].as_i64(), Some(e.visits + 1), "{}", a.json);
}

//! Visitors and visits: a scripted set of visitors with known answers on
//! every level (buckets, pages, API), the daily salts' rotation, the open
//! visits' bound, and a journal written by the release before visitors.

use bson::{doc, Document};
use chrono::{DateTime, TimeZone, Utc};
use futures::TryStreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use tickertape::accounts::Role;
use tickertape::domain::sketch::Sketch;

use crate::helpers::*;
use crate::json_api::{create_token, get};

fn at(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap()
}

const ALICE: &str = "Mozilla/5.0 (X11; Linux x86_64; Alice) Gecko/20100101 Firefox/133.0";
const BOB: &str = "Mozilla/5.0 (Macintosh; Bob) AppleWebKit/605.1.15 Version/18.1 Safari/605.1.15";

/// Sends one view of `path` by the visitor with `user_agent` at `when`.
async fn view(app: &TestApp, site: &str, path: &str, user_agent: &str, when: DateTime<Utc>) {
    app.clock.set(when);
    let r = app
        .pixel_with(
            &format!("site={site}&page={path}"),
            &[("user-agent", user_agent)],
        )
        .await;
    assert_eq!(r.status(), 200, "{path} at {when}");
}

/// Sums of the visit counters of the documents of `collection` matching
/// `filter`: visits, nonBounces, duration, exits, totalViews; and the union
/// of their visitor sketches.
async fn sums(app: &TestApp, collection: &str, filter: Document) -> ([i64; 5], Sketch) {
    let docs: Vec<Document> = app
        .store
        .db()
        .collection::<Document>(collection)
        .find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out = [0; 5];
    let mut sketch = Sketch::default();
    for d in &docs {
        for (i, name) in ["visits", "nonBounces", "duration", "exits"]
            .iter()
            .enumerate()
        {
            if let Ok(slots) = d.get_document(name) {
                out[i] += slots.iter().map(|(_, v)| v.as_i64().unwrap()).sum::<i64>();
            }
        }
        out[4] += d.get_i64("totalViews").unwrap_or(0);
        if let Ok(stored) = d.get_document("visitors") {
            sketch.merge_stored(stored).unwrap();
        }
    }
    (out, sketch)
}

fn day(d: u32) -> Document {
    doc! {"timestamp": bson::DateTime::from_chrono(at(d, 0, 0))}
}

fn hour(d: u32, h: u32) -> Document {
    doc! {"timestamp": bson::DateTime::from_chrono(at(d, h, 0))}
}

fn with(mut filter: Document, key: &str, value: &str) -> Document {
    filter.insert(key, value);
    filter
}

#[tokio::test]
async fn a_scripted_day_of_two_visitors_gives_the_known_figures_on_every_level() {
    let mut app = spawn_app().await;
    let site = app.add_site("visits.test", &[]).await;
    let id = site.id.to_string();
    // Visit 1 (Alice): / → /b → /c, 20 minutes, not a bounce.
    view(&app, &id, "/", ALICE, at(22, 10, 0)).await;
    view(&app, &id, "/b", ALICE, at(22, 10, 5)).await;
    view(&app, &id, "/c", ALICE, at(22, 10, 20)).await;
    // Visit 3 (Bob): /b alone, a bounce.
    view(&app, &id, "/b", BOB, at(22, 10, 30)).await;
    // Visit 2 (Alice again, 31 minutes later: a new visit): / → /b,
    // across the hour boundary.
    view(&app, &id, "/", ALICE, at(22, 10, 51)).await;
    view(&app, &id, "/b", ALICE, at(22, 11, 10)).await;
    // Alice on the next UTC day: a new visitor (another salt).
    view(&app, &id, "/", ALICE, at(23, 9, 0)).await;
    app.settle().await;

    // The buckets, level by level: [visits, nonBounces, duration, exits, views].
    let site_day = |d| with(day(d), "site", "visits.test");
    let (s22, v22) = sums(&app, "site_views_day", site_day(22)).await;
    assert_eq!(s22, [3, 2, 1200 + 1140, 0, 6], "site, 22nd, by day");
    assert_eq!(v22.estimate_count(), 2, "Alice and Bob");
    let (s23, v23) = sums(&app, "site_views_day", site_day(23)).await;
    assert_eq!(s23, [1, 0, 0, 0, 1], "site, 23rd");
    assert_eq!(v23.estimate_count(), 1);
    let site_hour = |h| with(hour(22, h), "site", "visits.test");
    let (h10, v10) = sums(&app, "site_views_hour", site_hour(10)).await;
    // Visit 2's second view (11:10) undoes its bounce where it started
    // (10:51), so each hour's bounces are of the visits it counts.
    assert_eq!(h10, [3, 2, 300 + 900, 0, 5], "site, 10:00");
    assert_eq!(v10.estimate_count(), 2);
    let (h11, v11) = sums(&app, "site_views_hour", site_hour(11)).await;
    assert_eq!(h11, [0, 0, 1140, 0, 1], "site, 11:00");
    assert_eq!(v11.estimate_count(), 1);
    // Pages: a visit counts on its entry page; exits on the last page.
    let page_day = |p: &str| with(day(22), "page", p);
    let (root, vr) = sums(&app, "views_day", page_day("visits.test/")).await;
    assert_eq!(root, [2, 2, 2340, 0, 2], "/: entered twice, left never");
    assert_eq!(vr.estimate_count(), 1);
    let (b, vb) = sums(&app, "views_day", page_day("visits.test/b")).await;
    assert_eq!(b, [1, 0, 0, 2, 3], "/b: Bob's bounce, two exits");
    assert_eq!(vb.estimate_count(), 2);
    let (c, _) = sums(&app, "views_day", page_day("visits.test/c")).await;
    assert_eq!(c, [0, 0, 0, 1, 1], "/c: one exit");
    // Hours add up to days, page by page.
    for page in ["visits.test/", "visits.test/b", "visits.test/c"] {
        let (hours, _) = sums(
            &app,
            "views_hour",
            doc! {"page": page, "timestamp": {"$lt": bson::DateTime::from_chrono(at(23, 0, 0))}},
        )
        .await;
        let (days, _) = sums(&app, "views_day", page_day(page)).await;
        assert_eq!(hours, days, "{page}");
    }

    // The API, over the day, an hour, and both days.
    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "visits", None).await;
    let api = |q: &str| format!("/api/v1/sites/{id}/visits?{q}");
    let a = get(
        &app,
        &token,
        &api("range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.json);
    let j = &a.json;
    assert_eq!(
        (
            j["visitors"].as_i64(),
            j["visits"].as_i64(),
            j["views"].as_i64(),
            j["bounces"].as_i64(),
            j["durationSeconds"].as_i64()
        ),
        (Some(2), Some(3), Some(6), Some(1), Some(2340)),
        "{j}"
    );
    assert_eq!(j["bounceRate"].as_f64(), Some(1.0 / 3.0));
    assert_eq!(j["visitDuration"].as_f64(), Some(780.0));
    assert_eq!(j["viewsPerVisit"].as_f64(), Some(2.0));
    assert_eq!(j["countedSince"].as_str(), Some("2026-11-22T00:00:00Z"));
    let a = get(
        &app,
        &token,
        &api("range=custom&from=2026-11-22T00:00&to=2026-11-24T00:00"),
    )
    .await;
    assert_eq!(
        (a.json["visitors"].as_i64(), a.json["visits"].as_i64()),
        (Some(3), Some(4)),
        "a visitor per UTC day: Alice twice, Bob once"
    );
    let a = get(
        &app,
        &token,
        &api("range=custom&from=2026-11-22T11:00&to=2026-11-22T12:00&res=hour"),
    )
    .await;
    assert_eq!(
        (
            a.json["visitors"].as_i64(),
            a.json["visits"].as_i64(),
            a.json["views"].as_i64()
        ),
        (Some(1), Some(0), Some(1)),
        "11:00 alone: Alice's second view of visit 2"
    );
    let a = get(
        &app,
        &token,
        &api("path=/b&range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"),
    )
    .await;
    let j = &a.json;
    assert_eq!(
        (
            j["visitors"].as_i64(),
            j["visits"].as_i64(),
            j["bounces"].as_i64(),
            j["exits"].as_i64()
        ),
        (Some(2), Some(1), Some(1), Some(2)),
        "{j}"
    );

    // The dashboard's first line says the same.
    let (status, html) = login
        .text(&format!(
            "/sites/{id}?range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"
        ))
        .await;
    assert_eq!(status, 200);
    for (fig, value) in [
        ("visitors", "2"),
        ("visits", "3"),
        ("views", "6"),
        ("views-per-visit", "2.00"),
        ("bounce-rate", "33%"),
        ("visit-duration", "13m 00s"),
    ] {
        assert_eq!(figure(&html, fig), value, "{fig}");
    }
    let (_, page) = login
        .text(&format!(
            "/sites/{id}/page?path=/b&range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"
        ))
        .await;
    let at = page
        .find("id=\"fig-exits\"")
        .expect("exits on the page report");
    assert!(page[at..at + 200].contains("<span class=\"big\">2</span>"));
    // Top pages: visitors, entries and exits per page.
    let row = |html: &str, path: &str| {
        let at = html
            .find(&format!(">{path}</a></td>"))
            .unwrap_or_else(|| panic!("{path} listed"));
        let end = at + html[at..].find("</tr>").unwrap();
        num_cells(&html[at..end])
    };
    // Time on page until the visit's next view: / for 300 s (10:00 to
    // 10:05) and 1,140 s (10:51 to 11:10), /b for 900 s (10:05 to 10:20);
    // the visits' last views (/c, Bob's /b, Alice's /b at 11:10) untimed.
    assert_eq!(
        row(&html, "/b"),
        ["2", "3", "1", "2", "15m 00s", "—", "50.0%"],
        "visitors, views, entries, exits, time on page, scroll depth, share"
    );
    assert_eq!(
        row(&html, "/"),
        ["1", "2", "2", "0", "12m 00s", "—", "33.3%"]
    );
    assert_eq!(row(&html, "/c")[4], "—", "a last view is not timed");
    let a = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/pages?range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"),
    )
    .await;
    let times: Vec<(String, Value, Value, Value)> = a.json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["timeOnPage"].clone(),
                p["timeKind"].clone(),
                p["timedViews"].clone(),
            )
        })
        .collect();
    assert_eq!(
        times,
        [
            (
                "/b".into(),
                json!(900.0),
                json!("until_next_view"),
                json!(1)
            ),
            ("/".into(), json!(720.0), json!("until_next_view"), json!(2)),
            ("/c".into(), Value::Null, Value::Null, json!(0)),
        ],
        "{}",
        a.json
    );
    // The page report, and the API's line of a page, say the same.
    assert_eq!(figure(&page, "time-on-page"), "15m 00s");
    let a = get(
        &app,
        &token,
        &api("path=/&range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"),
    )
    .await;
    assert_eq!(
        (
            a.json["timeOnPage"].as_f64(),
            a.json["timeKind"].as_str(),
            a.json["timedViews"].as_i64()
        ),
        (Some(720.0), Some("until_next_view"), Some(2)),
        "{}",
        a.json
    );
    // The chart shows visitors per hour when asked.
    let (_, chart) = login
        .text(&format!(
            "/sites/{id}?range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00&res=hour&metric=visitors"
        ))
        .await;
    assert!(
        chart.contains("aria-current=\"true\" class=\"current\" id=\"chart-visitors\""),
        "the visitors tab is current"
    );
    let cell = |html: &str, row: &str| {
        let at = html.find(&format!("id=\"{row}\"")).unwrap();
        let end = at + html[at..].find("</tr>").unwrap();
        html[at..end]
            .rsplit("<td class=\"num\">")
            .next()
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(cell(&chart, "series-r10"), "2", "two visitors at 10:00");
    assert_eq!(cell(&chart, "series-r11"), "1");
    let (status, _) = login.text(&format!("/sites/{id}?metric=bounces")).await;
    assert_eq!(status, 400, "an unknown chart metric is refused");
    // visits.csv: by hour over the day.
    let (status, csv) = login
        .text(&format!(
            "/sites/{id}/visits.csv?range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00&res=hour"
        ))
        .await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "timestamp,visitors,visits,views,bounces,visit_duration_seconds"
    );
    assert_eq!(lines[11], "2026-11-22T10:00:00Z,2,3,5,1,1200");
    assert_eq!(lines[12], "2026-11-22T11:00:00Z,1,0,1,0,1140");
    assert_eq!(lines.len(), 25);
    let (_, csv) = login
        .text(&format!(
            "/sites/{id}/visits.csv?path=/b&range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00&res=day"
        ))
        .await;
    assert_eq!(csv.lines().nth(1), Some("2026-11-22T00:00:00Z,2,1,3,1,0"));
    // pages.csv: entries, exits and visitors after the views and the share.
    let (_, csv) = login
        .text(&format!(
            "/sites/{id}/pages.csv?range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"
        ))
        .await;
    assert_eq!(
        csv.lines().collect::<Vec<_>>(),
        [
            "path,views,share_percent,entries,exits,visitors,time_on_page_seconds,time_kind,timed_views,scroll_depth_percent,engaged_views",
            "/b,3,50.0,1,2,2,900.0,until_next_view,1,,0",
            "/,2,33.3,2,0,1,720.0,until_next_view,2,,0",
            "/c,1,16.7,0,1,1,,,0,,0"
        ]
    );
    // The API's top pages carry the same per page.
    let a = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/pages?range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00"),
    )
    .await;
    let rows: Vec<_> = a.json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["visitors"].as_i64(),
                p["entries"].as_i64(),
                p["exits"].as_i64(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("/b".to_owned(), Some(2), Some(1), Some(2)),
            ("/".to_owned(), Some(1), Some(2), Some(0)),
            ("/c".to_owned(), Some(1), Some(0), Some(1)),
        ],
        "{}",
        a.json
    );
    // The sites list: visitors over the last 30 days (the clock is on the
    // 23rd): Alice and Bob on the 22nd, Alice on the 23rd.
    let (_, list) = login.text("/sites").await;
    let at = list.find("visits.test").unwrap();
    let end = at + list[at..].find("</tr>").unwrap();
    assert!(
        list[at..end].contains("data-label=\"Visitors, 30 days\">3</td>"),
        "{}",
        &list[at..end]
    );
    let a = get(&app, &token, "/api/v1/sites").await;
    assert_eq!(a.json["sites"][0]["visitors30Days"].as_i64(), Some(3));
    // Stopped before its database is dropped: an applier's open
    // transaction would hold the drop for a minute.
    app.stop().await;
}

#[tokio::test]
async fn before_visitors_were_counted_the_pages_say_so_instead_of_zeros() {
    let mut app = spawn_app().await;
    let site = app.add_site("old-views.test", &[]).await;
    // Views written as before visitors: no visit counters.
    let hits: Vec<(&str, _)> = (0..5).map(|_| ("old-views.test/", t0())).collect();
    app.write_hits(&hits).await;
    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let (_, html) = login.text(&format!("/sites/{}?range=today", site.id)).await;
    assert!(html.contains("id=\"visitors-since\""), "the note is shown");
    let at = html.find("id=\"fig-visitors\"").unwrap();
    assert!(html[at..at + 200].contains("<span class=\"big\">—</span>"));
    // Stopped before its database is dropped: an applier's open
    // transaction would hold the drop for a minute.
    app.stop().await;
}

#[tokio::test]
async fn a_new_site_speaks_of_no_upgrade_and_its_realtime_panel_says_when_it_was_read() {
    let mut app = spawn_app().await;
    let site = app.add_site("brand-new.test", &[]).await;
    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let (_, html) = login.text(&format!("/sites/{}?range=today", site.id)).await;
    assert!(
        !html.contains("id=\"visitors-since\"") && !html.contains("upgrade"),
        "a site without a view has nothing to explain"
    );
    let (_, page) = login
        .text(&format!("/sites/{}/page?path=/&range=today", site.id))
        .await;
    assert!(!page.contains("Reload the page"), "no chore for the reader");
    assert!(
        page.contains("id=\"realtime-as-of\">Figures as of 10:01:07 UTC."),
        "the panel says when it was read"
    );
    app.stop().await;
}

#[tokio::test]
async fn salts_rotate_at_the_utc_day_and_are_deleted_two_days_later() {
    let mut app = spawn_app().await;
    let salts = app.store.db().collection::<Document>("salts");
    let days = || async {
        let mut d: Vec<String> = salts
            .find(doc! {})
            .await
            .unwrap()
            .try_collect::<Vec<Document>>()
            .await
            .unwrap()
            .iter()
            .map(|d| d.get_str("_id").unwrap().to_owned())
            .collect();
        d.sort();
        d
    };
    let wait_for = |want: Vec<&'static str>| {
        let days = &days;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let got = days().await;
                if got == want {
                    return;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "salts {got:?}, want {want:?}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    wait_for(vec!["2026-11-22", "2026-11-23"]).await;
    let visitors = &app.ingest.visitors;
    let salt_22 = visitors.salts.of(at(22, 12, 0));
    assert_eq!(salt_22, visitors.salts.of(at(22, 23, 59)), "one salt a day");
    assert_ne!(salt_22, visitors.salts.of(at(23, 0, 0)), "another the next");
    // The stored salt is the one in use (every instance shares it).
    let stored = salts
        .find_one(doc! {"_id": "2026-11-22"})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.get_binary_generic("salt").unwrap().as_slice(),
        salt_22
    );
    app.clock.set(at(24, 0, 30));
    // The 22nd's salt is gone two days later; the 23rd's stays a day more.
    wait_for(vec!["2026-11-23", "2026-11-24", "2026-11-25"]).await;
    // Stopped before its database is dropped: an applier's open
    // transaction would hold the drop for a minute.
    app.stop().await;
}

#[tokio::test]
async fn the_open_visits_stay_within_their_bound() {
    let mut app = spawn_app_with(|s| s.ingest.open_visits = 50).await;
    let site = app.add_site("bound.test", &[]).await;
    for i in 0..200 {
        let ua = format!("{BROWSER_UA} visitor/{i}");
        view(&app, &site.id.to_string(), "/", &ua, t0()).await;
    }
    let (open, _) = app.ingest.visitors.open.size();
    assert_eq!(open, 50);
    let m = app.metrics().await;
    assert!(m.contains("tickertape_open_visits 50"), "{m}");
    assert!(
        m.contains("tickertape_open_visits_evicted_total 150"),
        "{m}"
    );
    app.stop().await;
}

/// The visitor ids of every record of a journal directory's files.
fn journal_visitors(dir: &std::path::Path) -> Vec<Option<u64>> {
    use tickertape::journal::record::Record;
    use tickertape::journal::segment::FORMAT;
    let mut out = Vec::new();
    for lane in std::fs::read_dir(dir).unwrap().flatten() {
        if !lane.path().is_dir() {
            continue;
        }
        for seg in std::fs::read_dir(lane.path()).unwrap().flatten() {
            let bytes = std::fs::read(seg.path()).unwrap();
            let mut at = 48;
            while let Ok((record, len)) = Record::decode(&bytes[at..], FORMAT) {
                out.push(record.visit.map(|v| v.visitor));
                at += len;
            }
        }
    }
    out
}

#[tokio::test]
async fn a_visitor_has_one_id_a_day_and_another_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let mut app = spawn_app_with(move |s| {
        s.ingest.journal_dir = Some(path);
        s.ingest.journal_lanes = 1;
    })
    .await;
    let site = app.add_site("ids.test", &[]).await;
    let id = site.id.to_string();
    view(&app, &id, "/", ALICE, at(22, 10, 0)).await;
    view(&app, &id, "/", ALICE, at(22, 23, 0)).await;
    view(&app, &id, "/", BOB, at(22, 23, 0)).await;
    view(&app, &id, "/", ALICE, at(23, 0, 1)).await;
    let ids = journal_visitors(dir.path());
    assert_eq!(ids.len(), 4);
    let ids: Vec<u64> = ids.into_iter().map(Option::unwrap).collect();
    assert_eq!(ids[0], ids[1], "Alice, same day");
    assert_ne!(ids[0], ids[2], "Bob");
    assert_ne!(ids[0], ids[3], "Alice, the next UTC day");
    // Stopped before its database is dropped: an applier's open
    // transaction would hold the drop for a minute.
    app.stop().await;
}

#[tokio::test]
async fn a_journal_written_by_the_release_before_visitors_replays_after_the_upgrade() {
    // tests/fixtures/journal-v2: seven hits journaled (format 2) by the
    // release build before this one, never applied (see its README).
    let fixture = repo_root().join("tests/fixtures/journal-v2");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture.join("journal.meta"),
        dir.path().join("journal.meta"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("lane-0")).unwrap();
    for f in std::fs::read_dir(fixture.join("lane-0")).unwrap().flatten() {
        std::fs::copy(f.path(), dir.path().join("lane-0").join(f.file_name())).unwrap();
    }
    let site_id = "66f18ff5-8964-4e3e-ac9b-e31a27aebd8b";
    // The site as that release stored it, before the app starts (its
    // directory is loaded at start, and the appliers skip unknown sites'
    // hits only when deleted).
    let mut settings = test_settings();
    let path = dir.path().to_owned();
    settings.ingest.journal_dir = Some(path);
    let direct = connect(database_uri(), &settings).await;
    direct
        .db()
        .collection::<Document>("sites")
        .insert_one(doc! {
            "_id": bson::Uuid::parse_str(site_id).unwrap(),
            "domain": "fixture.test", "name": "fixture.test",
            "aliases": [], "owners": [], "timeZone": "UTC",
            "createdAt": bson::DateTime::now(), "siteTotals": true,
        })
        .await
        .unwrap();
    let mut app = spawn_app_on(database_uri(), settings).await;
    app.settle().await;
    let views: HashMap<String, i64> = app
        .buckets(tickertape::storage::Resolution::Day)
        .await
        .into_iter()
        .map(|b| (b.page, b.total_views))
        .collect();
    assert_eq!(views.get("fixture.test/p1"), Some(&3), "{views:?}");
    assert_eq!(views.get("fixture.test/p0"), Some(&2));
    assert_eq!(views.get("fixture.test/old"), Some(&1));
    assert_eq!(views.get("fixture.test/plain"), Some(&1));
    // Their sources came through; they had no visitor, so no visits.
    let (counters, sketch) = sums(&app, "site_views_day", doc! {"site": "fixture.test"}).await;
    assert_eq!(counters, [0, 0, 0, 0, 7]);
    assert!(sketch.is_empty());
    let sources: Vec<Document> = app
        .store
        .db()
        .collection::<Document>("site_breakdowns_day")
        .find(doc! {"site": "fixture.test"})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let named: i64 = sources
        .iter()
        .flat_map(|d| {
            d.get_document("sources")
                .unwrap()
                .iter()
                .map(|(_, v)| v.as_i64().unwrap())
        })
        .sum();
    assert_eq!(named, 6, "five from news.ycombinator.com, one newsletter");
    // New hits go on in format 3 behind them, with visits.
    let r = app.pixel(&format!("site={site_id}&page=/p0")).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let (counters, _) = sums(&app, "site_views_day", doc! {"site": "fixture.test"}).await;
    assert_eq!(counters[0], 1, "a visit");
    assert_eq!(counters[4], 8);
    // Stopped before its database is dropped: an applier's open
    // transaction would hold the drop for a minute.
    app.stop().await;
}

/// splitmix64: a well-mixed id per (day, visitor), like the keyed hash.
fn mixed(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[tokio::test]
async fn unique_visitors_are_within_two_percent_at_p95_over_ranges_from_an_hour_to_a_year() {
    // A year of generated traffic with a known exact count: on day d,
    // n(d) visitors (20 to 2,000) each view /a at 12:xx UTC, and every
    // second one /b as well.
    let mut app = spawn_app().await;
    let site = app.add_site("accuracy.test", &[]).await;
    let first = at(1, 0, 0) - chrono::TimeDelta::days(364);
    let n = |d: i64| 20 + (d * 7919 % 1981) as u64;
    let days = 365;
    let mut batch: Vec<(String, DateTime<Utc>, tickertape::journal::Visit)> = Vec::new();
    for d in 0..days {
        for v in 0..n(d) {
            let when = first
                + chrono::TimeDelta::days(d)
                + chrono::TimeDelta::hours(12)
                + chrono::TimeDelta::seconds((v % 3600) as i64);
            let visit = tickertape::journal::Visit {
                visitor: mixed(((d as u64) << 32) | v),
                ..Default::default()
            };
            batch.push(("accuracy.test/a".into(), when, visit.clone()));
            if v % 2 == 0 {
                batch.push(("accuracy.test/b".into(), when, visit));
            }
        }
        if d % 30 == 29 || d == days - 1 {
            let hits: Vec<tickertape::storage::bucket_writer::Hit<'_>> = batch
                .iter()
                .map(
                    |(page, at, visit)| tickertape::storage::bucket_writer::Hit {
                        page,
                        at: *at,
                        source: None,
                        visit: Some(visit),
                        labels: None,
                    },
                )
                .collect();
            app.write_hits(&hits).await;
            batch.clear();
        }
    }
    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "accuracy", None).await;
    let fmt = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M").to_string();
    let mut errors = Vec::new();
    for anchor in [3_i64, 40, 77, 150, 200, 251, 300, 333] {
        let day0 = first + chrono::TimeDelta::days(anchor);
        // (from, to, the exact count of /a and of /b: each UTC day's
        // visitors, summed over the days the range touches at 12:xx).
        let span = |from_day: i64, to_day: i64| -> (u64, u64) {
            (from_day..to_day)
                .filter(|d| (0..days).contains(d))
                .map(|d| (n(d), n(d).div_ceil(2)))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let noon = chrono::TimeDelta::hours(12);
        let ranges = [
            // One hour, the hour of the day's views.
            (
                day0 + noon,
                day0 + noon + chrono::TimeDelta::hours(1),
                span(anchor, anchor + 1),
            ),
            // 24 hours across UTC midnight: the next day's views only.
            (
                day0 + chrono::TimeDelta::hours(13),
                day0 + chrono::TimeDelta::hours(37),
                span(anchor + 1, anchor + 2),
            ),
            (
                day0,
                day0 + chrono::TimeDelta::days(1),
                span(anchor, anchor + 1),
            ),
            (
                day0,
                day0 + chrono::TimeDelta::days(7),
                span(anchor, anchor + 7),
            ),
            (
                day0 + noon,
                day0 + chrono::TimeDelta::days(30),
                span(anchor, anchor + 30),
            ),
            (
                day0,
                day0 + chrono::TimeDelta::days(90),
                span(anchor, anchor + 90),
            ),
        ];
        for (from, to, (exact_a, exact_b)) in ranges {
            let to = to.min(first + chrono::TimeDelta::days(days));
            for (path, exact) in [
                (None, exact_a),
                (Some("/a"), exact_a),
                (Some("/b"), exact_b),
            ] {
                let q = format!(
                    "/api/v1/sites/{}/visits?range=custom&from={}&to={}{}",
                    site.id,
                    fmt(from),
                    fmt(to),
                    path.map_or(String::new(), |p| format!("&path={p}"))
                );
                let a = get(&app, &token, &q).await;
                assert_eq!(a.status, 200, "{q}: {}", a.json);
                let got = a.json["visitors"].as_f64().unwrap();
                if exact > 0 {
                    errors.push(((got - exact as f64) / exact as f64).abs());
                }
            }
        }
    }
    // The whole year, site and pages.
    let year = format!(
        "range=custom&from={}&to={}",
        fmt(first),
        fmt(first + chrono::TimeDelta::days(days))
    );
    let (all_a, all_b) = (0..days).fold((0u64, 0u64), |s, d| (s.0 + n(d), s.1 + n(d).div_ceil(2)));
    for (path, exact) in [("", all_a), ("&path=/a", all_a), ("&path=/b", all_b)] {
        let a = get(
            &app,
            &token,
            &format!("/api/v1/sites/{}/visits?{year}{path}", site.id),
        )
        .await;
        let got = a.json["visitors"].as_f64().unwrap();
        errors.push(((got - exact as f64) / exact as f64).abs());
    }
    errors.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p95 = errors[(errors.len() * 95).div_ceil(100) - 1];
    let p50 = errors[errors.len() / 2];
    eprintln!(
        "visitors over {} ranges: relative error p50 {:.3} %, p95 {:.3} %, max {:.3} %",
        errors.len(),
        p50 * 100.0,
        p95 * 100.0,
        errors.last().unwrap() * 100.0
    );
    assert!(p95 <= 0.02, "p95 {p95}");
    app.stop().await;
}

/// The figure `id` of a report's first line, as shown.
fn figure(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"fig-{id}\""))
        .unwrap_or_else(|| panic!("{id} shown"));
    // The views figure's span also carries the page's total id.
    let big = at + html[at..].find("<span class=\"big\"").unwrap();
    let big = big + html[big..].find('>').unwrap() + 1;
    html[big..big + html[big..].find('<').unwrap()].replace(',', "")
}

/// The visitors, entries and exits of a top-pages row.
fn top_row(html: &str, path: &str) -> Option<[String; 3]> {
    let at = html.find(&format!(">{path}</a></td>"))?;
    let end = at + html[at..].find("</tr>").unwrap();
    let cells: Vec<String> = num_cells(&html[at..end])
        .into_iter()
        .map(|c| c.replace(',', ""))
        .collect();
    Some([cells[0].clone(), cells[2].clone(), cells[3].clone()])
}

/// Top pages over long ranges take whole UTC days from the kept page-days
/// and the site's visitors from kept estimates: in every zone and over
/// ranges with ragged edges they show what a page-by-page read of the
/// buckets gives (the API's per-page figures), and a hit arriving late on
/// a past day (a journal replayed after an outage) changes them at once.
#[tokio::test]
async fn kept_page_days_and_visitor_estimates_agree_with_the_buckets_and_follow_late_hits() {
    let mut app = spawn_app().await;
    let zones = ["UTC", "Europe/Berlin", "Asia/Kolkata"];
    let mut sites = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let site = app.add_site_in(&format!("kept{i}.test"), &[], zone).await;
        sites.push(site.id.to_string());
    }
    let agents: Vec<String> = (0..6)
        .map(|v| format!("Mozilla/5.0 (X11; Linux; visitor {v}) Gecko/20100101 Firefox/133.0"))
        .collect();
    let paths = ["/", "/a", "/b", "/c"];
    let mut hits = Vec::new();
    for d in 19..=23u32 {
        for k in 0..14u32 {
            let when = at(d, (k * 2 + d) % 24, (k * 13) % 60);
            hits.push((when, (d + k) as usize % 6, (k * 7 + d) as usize % 4));
        }
    }
    hits.sort();
    for (when, v, p) in &hits {
        for id in &sites {
            view(&app, id, paths[*p], &agents[*v], *when).await;
        }
    }
    app.clock.set(at(24, 12, 0));
    app.settle().await;
    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "kept", None).await;
    let ranges = [
        "range=custom&from=2026-11-19T00:00&to=2026-11-24T00:00",
        "range=custom&from=2026-11-19T05:00&to=2026-11-23T17:00",
        "range=custom&from=2026-11-20T00:00&to=2026-11-22T00:00",
        "range=7d",
        "range=30d",
    ];
    let check = |label: &'static str| {
        let (login, token, sites) = (&login, &token, &sites);
        let app = &app;
        async move {
            let mut seen = 0;
            for id in sites {
                for range in ranges {
                    let (status, html) = login.text(&format!("/sites/{id}?{range}")).await;
                    assert_eq!(status, 200);
                    let site = get(app, token, &format!("/api/v1/sites/{id}/visits?{range}")).await;
                    let j = &site.json;
                    for (fig, key) in [
                        ("visitors", "visitors"),
                        ("visits", "visits"),
                        ("views", "views"),
                    ] {
                        assert_eq!(
                            figure(&html, fig),
                            j[key].as_i64().unwrap().to_string(),
                            "{label}: site {fig}, {id} {range}"
                        );
                    }
                    for path in paths {
                        let api = get(
                            app,
                            token,
                            &format!("/api/v1/sites/{id}/visits?path={path}&{range}"),
                        )
                        .await;
                        let j = &api.json;
                        let expected = [
                            j["visitors"].as_i64().unwrap().to_string(),
                            j["visits"].as_i64().unwrap().to_string(),
                            j["exits"].as_i64().unwrap().to_string(),
                        ];
                        match top_row(&html, path) {
                            Some(row) => {
                                seen += 1;
                                assert_eq!(row, expected, "{label}: {path}, {id} {range}")
                            }
                            None => assert_eq!(j["views"].as_i64(), Some(0), "{path} listed"),
                        }
                    }
                }
            }
            assert!(seen > 40, "rows compared: {seen}");
        }
    };
    check("first read").await;
    // Read again: now from the kept days and estimates.
    check("kept").await;
    let api_of = |id: &str, path: &str| {
        format!("/api/v1/sites/{id}/visits?path={path}&range=custom&from=2026-11-19T00:00&to=2026-11-24T00:00")
    };
    let before = get(&app, &token, &api_of(&sites[0], "/a")).await.json;
    // A new visitor on a past day, as a replayed journal would bring it.
    for id in &sites {
        view(
            &app,
            id,
            "/a",
            "Late/1.0 (a visitor replayed)",
            at(21, 15, 0),
        )
        .await;
    }
    app.clock.set(at(24, 12, 0));
    app.settle().await;
    let after = get(&app, &token, &api_of(&sites[0], "/a")).await.json;
    for key in ["visitors", "visits", "views", "exits"] {
        assert_eq!(
            after[key].as_i64().unwrap(),
            before[key].as_i64().unwrap() + 1,
            "{key} of /a after the late hit"
        );
    }
    check("after a late hit").await;
    app.stop().await;
}

/// A list of more pages than a screen (the API's) is read by naming its
/// pages in one query, and a whole list of more than a thousand (a CSV)
/// as its site's pages: each page's views and visitors are still its
/// own, over today (read from its buckets), settled days (from the
/// summaries) and ranges cut inside an hour.
#[tokio::test]
async fn a_long_list_of_pages_gives_each_page_its_own_visitors() {
    use chrono::TimeDelta;
    use std::collections::{BTreeMap, BTreeSet};
    use tickertape::storage::bucket_writer::Hit;
    use tickertape::storage::Resolution;
    let mut app = spawn_app().await;
    let site = app.add_site("many.test", &[]).await;
    // A neighbour whose pages sort just after this site's: a read of
    // this site's pages leaves them out.
    app.add_site("many.test0", &[]).await;
    let id = site.id.to_string();
    let today = Resolution::Day.floor(Utc::now());
    let earlier = today - TimeDelta::days(3);
    // 1,500 pages, 6 readers, 2 days: a reader views a page on a day, once
    // or twice, when their mixed number says so, at minutes spread over
    // the day; a reader is one visitor a UTC day (the salt rotates).
    let mut sent: Vec<(String, u64, DateTime<Utc>)> = Vec::new();
    for (d, day) in [earlier, today].into_iter().enumerate() {
        for v in 0..6_u64 {
            for p in 0..1_500_u64 {
                let x = mixed(((d as u64) << 40) | (v << 20) | p);
                if x % 3 != 0 {
                    continue;
                }
                for r in 0..=(x >> 8) % 2 {
                    let minute = (v * 97 + p * 13 + r * 5 + (x >> 16) % 11) % 1_440;
                    sent.push((format!("/p{p}"), v, day + TimeDelta::minutes(minute as i64)));
                }
            }
        }
    }
    let visits: Vec<_> = sent
        .iter()
        .map(|(_, v, when)| tickertape::journal::Visit {
            visitor: mixed((*v << 32) | (when.timestamp() as u64 / 86_400)),
            ..Default::default()
        })
        .collect();
    let pages: Vec<String> = sent
        .iter()
        .map(|(p, _, _)| format!("many.test{p}"))
        .collect();
    let mut hits: Vec<Hit<'_>> = (0..sent.len())
        .map(|i| Hit {
            page: &pages[i],
            at: sent[i].2,
            source: None,
            visit: Some(&visits[i]),
            labels: None,
        })
        .collect();
    let next_door = tickertape::journal::Visit::default();
    hits.push(Hit {
        page: "many.test0/p1",
        at: today,
        source: None,
        visit: Some(&next_door),
        labels: None,
    });
    app.write_hits(&hits).await;
    app.settle().await;
    app.clock
        .set(today + TimeDelta::hours(23) + TimeDelta::minutes(59));
    let wanted = |from: DateTime<Utc>, to: DateTime<Utc>| {
        let mut views: BTreeMap<String, i64> = BTreeMap::new();
        let mut visitors: BTreeSet<(&str, u64, DateTime<Utc>)> = BTreeSet::new();
        for (path, v, when) in sent.iter().filter(|s| from <= s.2 && s.2 < to) {
            *views.entry(path.clone()).or_default() += 1;
            visitors.insert((path, *v, Resolution::Day.floor(*when)));
        }
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for (path, _, _) in visitors {
            *counts.entry(path).or_default() += 1;
        }
        views
            .into_iter()
            .map(|(path, views)| {
                let n = counts[path.as_str()];
                (path, (views, n))
            })
            .collect::<BTreeMap<_, _>>()
    };

    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "pages", None).await;
    let minute = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M").to_string();
    let cut = earlier + TimeDelta::hours(2) + TimeDelta::minutes(30);
    for (from, to) in [
        (today, today + TimeDelta::days(1)),
        (earlier, today + TimeDelta::days(1)),
        (cut, today + TimeDelta::days(1)),
        (cut, earlier + TimeDelta::hours(20) + TimeDelta::minutes(10)),
    ] {
        let want = wanted(from, to);
        let range = format!("range=custom&from={}&to={}", minute(from), minute(to));
        assert!(want.len() > 1_000, "{range}: {} pages", want.len());
        let (status, csv) = login.text(&format!("/sites/{id}/pages.csv?{range}")).await;
        assert_eq!(status, 200, "{csv}");
        let got: BTreeMap<String, (i64, i64)> = csv
            .lines()
            .skip(1)
            .map(|line| {
                let cells: Vec<&str> = line.split(',').collect();
                let n = |i: usize| cells[i].parse::<i64>().unwrap();
                (cells[0].to_owned(), (n(1), n(5)))
            })
            .collect();
        assert_eq!(got, want, "pages.csv over {range}");
        // The API's first hundred: each page's own figures.
        let a = get(
            &app,
            &token,
            &format!("/api/v1/sites/{id}/pages?{range}&limit=100"),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.json);
        let rows = a.json["pages"].as_array().unwrap();
        assert_eq!(rows.len(), 100);
        for p in rows {
            let path = p["path"].as_str().unwrap();
            let n = |k: &str| p[k].as_i64().unwrap();
            assert_eq!(
                Some(&(n("views"), n("visitors"))),
                want.get(path),
                "{path} over {range}"
            );
        }
    }
    app.stop().await;
}

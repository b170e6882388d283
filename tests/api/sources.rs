//! Traffic sources: derived by the pixel, carried by the journal, counted
//! in bounded buckets, shown and exported.

use bson::{doc, Document};
use std::io::Write;
use tickertape::accounts::Role;
use tickertape::journal::record::FORMAT_V1;
use tickertape::journal::segment::{self, SegmentHeader};
use tickertape::journal::Record;
use tickertape::storage::breakdowns::MAX_SOURCES_PER_BUCKET;

use crate::helpers::*;

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The `sources` sub-document (decoded names) and `other` of every
/// bucket of `coll` matching `filter`, added up.
async fn sources_in(app: &TestApp, coll: &str, filter: Document) -> (Vec<(String, i64)>, i64, i64) {
    app.settle().await;
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>(coll)
            .find(filter)
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut by: std::collections::BTreeMap<String, i64> = Default::default();
    let (mut other, mut total) = (0, 0);
    for d in docs {
        total += d.get_i64("totalViews").unwrap();
        other += d.get_i64("other").unwrap_or(0);
        for (k, v) in d.get_document("sources").unwrap() {
            let name = tickertape::domain::Source::from_field_name(k).into_string();
            *by.entry(name).or_default() += v.as_i64().unwrap();
        }
    }
    (by.into_iter().collect(), other, total)
}

#[tokio::test]
async fn the_pixel_records_the_referring_host_utm_source_or_direct() {
    let app = spawn_app().await;
    let site = app.add_site("src.test", &["www.src.test"]).await;
    let view = |page: &str, referrer: Option<&str>| {
        let mut q = format!("site={}&page={}", site.id, enc(page));
        if let Some(r) = referrer {
            q.push_str(&format!("&ref={}", enc(r)));
        }
        q
    };
    let long = format!("https://evil.example/{}", "a".repeat(3000));
    for (page, referrer) in [
        ("/a", Some("https://WWW.Google.com/search?q=secret")),
        ("/a", Some("https://news.ycombinator.com/item?id=1")),
        ("/b?utm_source=Newsletter&x=1", Some("https://google.com/")),
        ("/b", Some("https://www.src.test/other")), // own site: direct
        ("/b", Some("")),                           // no referrer: direct
        ("/b", Some("not a url")),                  // ignored: direct
        ("/b", Some("https://evil.example/\u{7}")), // control character
        ("/b", Some(long.as_str())),                // oversized
        ("https://src.test/c?utm_source=mastodon", None), // pixel only, with utm
        ("/d", None),                               // pixel only: no source
    ] {
        let r = app.pixel(&view(page, referrer)).await;
        assert_eq!(
            r.status(),
            200,
            "{page} {referrer:?}: a bad ref never rejects"
        );
    }
    let (site_sources, other, total) =
        sources_in(&app, "site_breakdowns_day", doc! {"site": "src.test"}).await;
    assert_eq!(
        site_sources,
        vec![
            ("direct".into(), 5),
            ("google.com".into(), 1),
            ("mastodon".into(), 1),
            ("news.ycombinator.com".into(), 1),
            ("newsletter".into(), 1),
        ]
    );
    assert_eq!((other, total), (0, 9), "the pixel-only /d has no source");
    let (page_b, _, _) = sources_in(&app, "breakdowns_hour", doc! {"page": "src.test/b"}).await;
    assert_eq!(page_b, vec![("direct".into(), 5), ("newsletter".into(), 1)]);
    // Never a path or query of the referrer anywhere.
    let raw = format!(
        "{:?}",
        app.store
            .db()
            .collection::<Document>("breakdowns_day")
            .find_one(doc! {"page": "src.test/a"})
            .await
            .unwrap()
    );
    assert!(!raw.contains("secret") && !raw.contains("item"), "{raw}");
    // The views themselves all counted.
    assert_eq!(
        app.total_views(tickertape::storage::Resolution::Day).await,
        10
    );
}

#[tokio::test]
async fn a_bucket_keeps_at_most_the_cap_of_sources_and_counts_the_rest_as_other() {
    let app = spawn_app().await;
    let site = app.add_site("cap.test", &[]).await;
    let n = MAX_SOURCES_PER_BUCKET + 10;
    for i in 0..n {
        let r = app
            .pixel(&format!(
                "site={}&page=%2Fx%3Futm_source%3Dcampaign{i}&ref=",
                site.id
            ))
            .await;
        assert_eq!(r.status(), 200);
        // Some batches, so the cap is applied against what is stored too.
        if i % 17 == 0 {
            app.settle().await;
        }
    }
    app.settle().await;
    for (coll, filter) in [
        ("breakdowns_hour", doc! {"page": "cap.test/x"}),
        ("breakdowns_day", doc! {"page": "cap.test/x"}),
    ] {
        let docs: Vec<Document> = futures::TryStreamExt::try_collect(
            app.store
                .db()
                .collection::<Document>(coll)
                .find(filter.clone())
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(docs.len(), 1, "{coll}");
        let d = &docs[0];
        assert_eq!(
            d.get_document("sources").unwrap().len(),
            MAX_SOURCES_PER_BUCKET,
            "{coll}"
        );
        assert_eq!(d.get_i64("other").unwrap(), 10, "{coll}");
        assert_eq!(d.get_i64("totalViews").unwrap(), n as i64, "{coll}");
    }
    // A source the bucket already holds keeps its own counter.
    app.pixel(&format!(
        "site={}&page=%2Fx%3Futm_source%3Dcampaign0&ref=",
        site.id
    ))
    .await;
    let (sources, other, _) = sources_in(&app, "breakdowns_day", doc! {"page": "cap.test/x"}).await;
    assert_eq!(other, 10);
    assert!(sources.contains(&("campaign0".into(), 2)), "{sources:?}");
}

#[tokio::test]
async fn the_dashboard_shows_top_sources_with_share_and_change_and_exports_them() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("show.test", &[]).await;
    let at = |s: i64| t0() + chrono::TimeDelta::seconds(s);
    // Previous 24 hours: google 2; this 24 hours: google 3, duck 1.
    let hits = [
        ("show.test/a", at(-30 * 3600), Some("google.com")),
        ("show.test/a", at(-30 * 3600), Some("google.com")),
        ("show.test/a", at(-3600), Some("google.com")),
        ("show.test/a", at(-3600), Some("google.com")),
        ("show.test/b", at(-3600), Some("google.com")),
        ("show.test/b", at(-60), Some("duckduckgo.com")),
    ];
    app.write_hits(&hits).await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text(&format!("/sites/{}?range=24h", site.id)).await;
    assert_eq!(status, 200);
    let table = &html[html.find("id=\"sources\"").expect("a sources table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(
        table.contains("data-filter=\"source:google.com\">google.com</a></td><td class=\"num\">3</td><td class=\"num hide-small\">75.0%</td><td class=\"num\">+50.0%</td>"),
        "{table}"
    );
    assert!(
        table.contains("data-filter=\"source:duckduckgo.com\">duckduckgo.com</a></td><td class=\"num\">1</td><td class=\"num hide-small\">25.0%</td><td class=\"num\">new</td>"),
        "{table}"
    );
    // Filtered.
    let (_, html) = admin
        .text(&format!("/sites/{}?range=24h&src=duck", site.id))
        .await;
    let table = &html[html.find("id=\"sources\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("duckduckgo.com") && !table.contains("google.com"));
    // The page report has its own.
    let (_, html) = admin
        .text(&format!("/sites/{}/page?path=/b&range=24h", site.id))
        .await;
    let table = &html[html.find("id=\"sources\"").unwrap()..];
    assert!(table.contains(
        "<td>google.com</td><td class=\"num\">1</td><td class=\"num hide-small\">50.0%</td>"
    ));
    // CSV.
    let r = admin
        .get(&format!("/sites/{}/sources.csv?range=24h", site.id))
        .await;
    assert_eq!(r.status(), 200);
    let cd = r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cd.ends_with("_sources.csv\""), "{cd}");
    let body = r.text().await.unwrap();
    assert_eq!(
        body,
        "source,views,share_percent,compared_views,previous_period_views\r\ngoogle.com,3,75.0,3,2\r\nduckduckgo.com,1,25.0,0,0\r\n"
    );
    // A filter too long is refused with a clear answer.
    let r = admin
        .get(&format!("/sites/{}?src={}", site.id, "x".repeat(101)))
        .await;
    assert_eq!(r.status(), 400);
}

/// The rows of the `#sources` table as (source, views, share, change).
fn source_rows(html: &str) -> Vec<[String; 4]> {
    table_rows(html, "sources")
}

/// Percent values that should add up to 100, each rounded to one decimal.
fn adds_up(shares: &[f64]) -> bool {
    (shares.iter().sum::<f64>() - 100.0).abs() <= 0.05 * shares.len() as f64
}

#[tokio::test]
async fn views_without_a_source_count_under_none_so_the_shares_add_up() {
    // Pixel-only views write no source bucket; the
    // panel, sources.csv and the API count them as "(none)", over exactly
    // the whole hours the sources cover, and the shares are of every view.
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("none.test", &[]).await;
    let at = |h: u32, m: u32, s: u32| {
        chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 22, h, m, s).unwrap()
    };
    // Now is 10:01:07. "Last hour" is 09:02 to 10:02, its sources cover
    // 09:00 to 11:00: the pixel-only view at 09:01 is outside the range
    // but inside those hours; the period before covers 08:00 to 10:00.
    let mut hits = Vec::new();
    for (page, when, source, n) in [
        ("none.test/a", at(10, 0, 30), Some("google.com"), 4),
        ("none.test/a", at(10, 0, 40), Some("direct"), 2),
        ("none.test/b", at(10, 0, 45), Some("news.example"), 2),
        ("none.test/b", at(10, 0, 50), None, 1),
        ("none.test/b", at(9, 1, 0), None, 1),
    ] {
        hits.extend(std::iter::repeat_n((page, when, source), n));
    }
    app.write_hits(&hits).await;
    let admin = app.login("admin@example.com").await;
    let base = format!("/sites/{}", site.id);
    let token = crate::json_api::create_token(&admin, "none", None).await;
    let api = |path: String| {
        let (http, address, token) = (app.http.clone(), app.address.clone(), token.clone());
        async move {
            let r = http
                .get(format!("{address}/api/v1/sites/{}/sources?{path}", site.id))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{path}");
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    let row =
        |s: &str, v: &str, share: &str, change: &str| [s, v, share, change].map(str::to_owned);
    // Each change compares the complete hours (to 10:00) with the same
    // stretch before: the 09:01 view without a source is in the compared
    // part, nothing before it.
    let (none_compared, none_before) = (1, 0);
    for (range, none_change) in [("1h", "new"), ("24h", "new")] {
        let (status, html) = admin.text(&format!("{base}?range={range}")).await;
        assert_eq!(status, 200);
        let rows = source_rows(&html);
        assert_eq!(
            rows,
            [
                row("google.com", "4", "40.0%", "new"),
                row("direct", "2", "20.0%", "new"),
                row("news.example", "2", "20.0%", "new"),
                row("(none)", "2", "20.0%", none_change),
            ],
            "{range}"
        );
        let shares: Vec<f64> = rows
            .iter()
            .map(|r| r[2].trim_end_matches('%').parse().unwrap())
            .collect();
        assert!(adds_up(&shares), "{range}: {shares:?}");
        assert!(
            html.contains("id=\"sources-count\">10 views, 8 with a known source"),
            "{range}"
        );
        // The whole hours are said where they are more than the range.
        assert_eq!(
            html.contains("Sources are kept by the hour: these figures cover 2026-11-22 09:00 UTC to 2026-11-22 11:00 UTC."),
            range == "1h",
            "{range}"
        );
        let (_, csv) = admin
            .text(&format!("{base}/sources.csv?range={range}"))
            .await;
        assert_eq!(
            csv,
            format!(
                "source,views,share_percent,compared_views,previous_period_views\r\ngoogle.com,4,40.0,0,0\r\ndirect,2,20.0,0,0\r\nnews.example,2,20.0,0,0\r\n(none),2,20.0,{none_compared},{none_before}\r\n"
            ),
            "{range}"
        );
        let json = api(format!("range={range}")).await;
        assert_eq!(
            (&json["views"], &json["total"], &json["other"]),
            (&10.into(), &8.into(), &0.into()),
            "{range}: {json}"
        );
        assert_eq!(
            json["none"],
            serde_json::json!({"views": 2, "share": 20.0, "comparedViews": none_compared, "previousPeriodViews": none_before}),
            "{range}"
        );
        let mut shares: Vec<f64> = json["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["share"].as_f64().unwrap())
            .collect();
        shares.push(json["none"]["share"].as_f64().unwrap());
        assert!(adds_up(&shares), "{range}: {shares:?}");
    }
    // The page report of /b: its own views, half of them without a source.
    let (_, html) = admin.text(&format!("{base}/page?path=/b&range=1h")).await;
    assert_eq!(
        source_rows(&html),
        [
            row("news.example", "2", "50.0%", "new"),
            row("(none)", "2", "50.0%", "new"),
        ]
    );
    let (_, csv) = admin
        .text(&format!("{base}/sources.csv?range=1h&path=/b"))
        .await;
    assert!(
        csv.ends_with("news.example,2,50.0,0,0\r\n(none),2,50.0,1,0\r\n"),
        "{csv}"
    );
    let json = api("range=1h&path=/b".into()).await;
    assert_eq!((&json["views"], &json["total"]), (&4.into(), &2.into()));
    assert_eq!(json["none"]["share"], 50.0);
    // A filter picks sources by name; the row without one is not among
    // them, and like every row it links nowhere.
    let (_, html) = admin.text(&format!("{base}?range=1h&src=goo")).await;
    assert_eq!(source_rows(&html), [row("google.com", "4", "40.0%", "new")]);
    let (_, csv) = admin
        .text(&format!("{base}/sources.csv?range=1h&src=goo"))
        .await;
    assert!(!csv.contains("(none)"), "{csv}");
}

#[tokio::test]
async fn a_journal_of_the_previous_format_is_replayed_into_the_buckets() {
    // Hits journaled by the version before sources (format 1), not yet
    // applied when it stopped.
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4();
    std::fs::write(
        dir.path().join("journal.meta"),
        format!("tickertape-journal\nformat=1\nid={id}\nlanes=1\n"),
    )
    .unwrap();
    let lane = dir.path().join("lane-0");
    std::fs::create_dir_all(&lane).unwrap();
    let header = SegmentHeader {
        format: FORMAT_V1,
        lane: 0,
        start: 0,
        journal: id,
    };
    let (mut file, _) = segment::create(&lane, &header).unwrap();
    let mut body = Vec::new();
    for i in 0..7 {
        Record {
            page: format!("old.test/p{}", i % 2),
            at: t0(),
            source: None,
            visit: None,
            labels: Default::default(),
            props: Default::default(),
            revenue: None,
            engagement: None,
        }
        .encode_v1_into(&mut body);
    }
    file.write_all(&body).unwrap();
    drop(file);
    let path = dir.path().to_owned();
    let app = spawn_app_with(move |s| {
        s.ingest.journal_dir = Some(path);
        s.ingest.journal_lanes = 1;
    })
    .await;
    let site = app.add_site("old.test", &[]).await;
    // New hits with a source go on in format 2 behind them.
    let r = app
        .pixel(&format!(
            "site={}&page=/p0&ref=https%3A%2F%2Fgoogle.com%2F",
            site.id
        ))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        app.total_views(tickertape::storage::Resolution::Minute)
            .await,
        8
    );
    let (sources, _, total) =
        sources_in(&app, "site_breakdowns_day", doc! {"site": "old.test"}).await;
    assert_eq!((sources, total), (vec![("google.com".into(), 1)], 1));
}

#[tokio::test]
async fn sources_that_cannot_be_written_make_the_app_degraded_and_wait_in_the_journal() {
    let app = spawn_app().await;
    let site = app.add_site("stuck.test", &[]).await;
    // The page sources collection takes no write (a validator no bucket
    // passes, as an operator's mistake would set): the sources batch fails
    // whole, the views do not. (A single bucket the server refuses for
    // what it holds is set aside instead: see `stored_extremes`.)
    let validator = |rule: Document| {
        doc! {"collMod": "breakdowns_hour", "validator": rule, "validationAction": "error"}
    };
    app.store
        .db()
        .run_command(validator(doc! {"page": {"$type": "int"}}))
        .await
        .unwrap();
    let ready = || async {
        let r = app
            .http
            .get(format!("{}/readyz", app.address))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!(ready().await.0, 200);
    for referrer in ["https://a.example/", "https://b.example/", ""] {
        let q = format!("site={}&page=/&ref={}", site.id, enc(referrer));
        assert_eq!(app.pixel(&q).await.status(), 200);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (status, body) = loop {
        let (status, body) = ready().await;
        if status == 503 {
            break (status, body);
        }
        assert!(std::time::Instant::now() < deadline, "never degraded");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(status, 503);
    assert!(body.contains("sources write-behind failing"), "{body}");
    assert!(app.journal.stats().sources_backlog() > 0);
    // The views are in meanwhile (read directly: `settle` would wait for
    // the sources too).
    while app.journal.stats().backlog() > 0 {
        assert!(std::time::Instant::now() < deadline, "views not applied");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The day bucket comes with the rollups stream, which may trail the
    // minutes' backlog by a batch: wait for it within the deadline.
    let day = loop {
        let found = app
            .store
            .buckets(tickertape::storage::Resolution::Day)
            .find_one(doc! {"page": "stuck.test/"})
            .await
            .unwrap();
        match found {
            Some(day) if day.total_views == 3 => break day,
            _ => {
                assert!(std::time::Instant::now() < deadline, "the day bucket");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(day.total_views, 3);
    // Once the buckets can be written, the sources come from the journal,
    // each once, and the app is ready again.
    app.store
        .db()
        .run_command(validator(doc! {}))
        .await
        .unwrap();
    app.settle().await;
    assert_eq!(ready().await.0, 200);
    for (coll, filter) in [
        ("breakdowns_hour", doc! {"page": "stuck.test/"}),
        ("breakdowns_day", doc! {"page": "stuck.test/"}),
        ("site_breakdowns_day", doc! {"site": "stuck.test"}),
    ] {
        let (by_name, other, total) = sources_in(&app, coll, filter).await;
        assert_eq!(
            by_name,
            vec![
                ("a.example".into(), 1),
                ("b.example".into(), 1),
                ("direct".into(), 1)
            ],
            "{coll}"
        );
        assert_eq!((other, total), (0, 3), "{coll}");
    }
}

/// Every report reads views from the hour and day buckets, which the
/// rollups applier writes a window after the hit: the freshness note says
/// so (the longest stream's window, plus the time a batch may take), and
/// never that the minutes show within a second (they took 5 s).
#[tokio::test]
async fn the_freshness_note_states_when_the_reports_show_a_view() {
    let app = spawn_app_with(|s| {
        s.ingest.apply_window_ms = 1_000;
        s.ingest.sources_window_ms = 2_000;
        s.ingest.rollups_window_ms = 5_000;
    })
    .await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("note.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let (_, html) = admin.text(&format!("/sites/{}", site.id)).await;
    assert!(
        html.contains("New views show here within about 7 seconds"),
        "{html}"
    );
    assert!(!html.contains("within about a second"), "{html}");
}

/// The breakdowns applier gathers over a shorter window than the rollups,
/// but a report never shows more views with a known source than views:
/// read one after the other (sources first, so a race could only favour
/// the views), the sources' total never exceeds the series' at any moment
/// while a view is on its way.
#[tokio::test]
async fn a_report_never_shows_more_views_with_a_source_than_views() {
    let app = spawn_app_with(|s| {
        s.ingest.apply_window_ms = 10;
        s.ingest.sources_window_ms = 10;
        s.ingest.rollups_window_ms = 3_000;
    })
    .await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("ahead.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let token = crate::json_api::create_token(&admin, "ahead", None).await;
    let get = |path: String| {
        let (http, address, token) = (app.http.clone(), app.address.clone(), token.clone());
        async move {
            let r = http
                .get(format!("{address}{path}"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{path}");
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    // The hit's time is now, so each applier waits its window.
    app.clock.set(chrono::Utc::now());
    let r = app
        .pixel(&format!(
            "site={}&page=/post&ref=https://news.ycombinator.com/item",
            site.id
        ))
        .await;
    assert_eq!(r.status(), 200);
    let started = std::time::Instant::now();
    let mut polls = 0;
    loop {
        let sources = get(format!("/api/v1/sites/{}/sources?range=today", site.id)).await;
        let series = get(format!("/api/v1/sites/{}/series?range=today", site.id)).await;
        let (sourced, views) = (
            sources["total"].as_i64().unwrap(),
            series["total"].as_i64().unwrap(),
        );
        assert!(
            sourced <= views,
            "after {:?}: {sourced} views with a known source beside {views} views",
            started.elapsed()
        );
        polls += 1;
        if sourced == 1 && views == 1 {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the view and its source arrive"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(polls > 1, "the view was read while on its way");
}

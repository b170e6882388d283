//! Report numbers against known hits, at every resolution and range edge;
//! read preference; metrics; demo data.

use chrono::{TimeZone, Utc};
use mongodb::options::{ReadPreference, SelectionCriteria};
use std::time::Duration;
use tickertape::accounts::Role;
use tickertape::demo::{self, DemoOptions};
use tickertape::domain::{DomainName, Page};
use tickertape::preallocation::{self, PreallocRequest, Scope, Trigger};
use tickertape::storage::Resolution;

use crate::helpers::*;

fn at(d: u32, h: u32, m: u32, s: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, m, s).unwrap()
}

/// Site r.test with hits whose every total is worked out by hand:
/// /a: 22 10:01:07 ×3, 22 10:01:09 ×1, 22 09:59:59 ×2, 21 23:59:59 ×1, 22 00:00:00 ×1
/// /b: 22 10:01:07 ×2, 20 12:00:00 ×5
async fn reports_world() -> (TestApp, Login, String) {
    reports_world_grouped("auto").await
}

/// The same world with site reports grouped on the server or in the app
/// (`TICKERTAPE_REPORT_GROUPING`): both must give the same numbers.
async fn reports_world_grouped(grouping: &str) -> (TestApp, Login, String) {
    let app = spawn_app_with(|s| s.database.report_grouping = grouping.to_owned()).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("r.test", &[]).await;
    let mut hits = Vec::new();
    for (page, t, n) in [
        ("r.test/a", at(22, 10, 1, 7), 3),
        ("r.test/a", at(22, 10, 1, 9), 1),
        ("r.test/a", at(22, 9, 59, 59), 2),
        ("r.test/a", at(21, 23, 59, 59), 1),
        ("r.test/a", at(22, 0, 0, 0), 1),
        ("r.test/b", at(22, 10, 1, 7), 2),
        ("r.test/b", at(20, 12, 0, 0), 5),
    ] {
        hits.extend(std::iter::repeat_n((page, t), n));
    }
    app.write_hits(&hits).await;
    let admin = app.login("admin@example.com").await;
    let base = format!("/sites/{}", site.id);
    (app, admin, base)
}

async fn csv(login: &Login, path: &str) -> Vec<String> {
    let r = login.get(path).await;
    assert_eq!(r.status(), 200, "{path}");
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    r.text().await.unwrap().lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn series_totals_pages_and_seconds_match_the_hits_at_every_resolution() {
    let (_app, admin, base) = reports_world().await;

    // Minute resolution.
    let rows = csv(
        &admin,
        &format!(
            "{base}/series.csv?range=custom&from=2026-11-22T09:59&to=2026-11-22T10:02&res=minute"
        ),
    )
    .await;
    assert_eq!(
        rows,
        [
            "timestamp,views",
            "2026-11-22T09:59:00Z,2",
            "2026-11-22T10:00:00Z,0",
            "2026-11-22T10:01:00Z,6"
        ]
    );

    // Hour resolution: 12 hours, zeros filled in.
    let rows = csv(
        &admin,
        &format!(
            "{base}/series.csv?range=custom&from=2026-11-21T23:00&to=2026-11-22T11:00&res=hour"
        ),
    )
    .await;
    assert_eq!(rows.len(), 13);
    assert_eq!(rows[1], "2026-11-21T23:00:00Z,1");
    assert_eq!(rows[2], "2026-11-22T00:00:00Z,1");
    assert_eq!(rows[3], "2026-11-22T01:00:00Z,0");
    assert_eq!(rows[11], "2026-11-22T09:00:00Z,2");
    assert_eq!(rows[12], "2026-11-22T10:00:00Z,6");

    // Day resolution; a date as `to` includes that day.
    let rows = csv(
        &admin,
        &format!("{base}/series.csv?range=custom&from=2026-11-20&to=2026-11-22&res=day"),
    )
    .await;
    assert_eq!(
        rows,
        [
            "timestamp,views",
            "2026-11-20T00:00:00Z,5",
            "2026-11-21T00:00:00Z,1",
            "2026-11-22T00:00:00Z,9"
        ]
    );

    // Range edges: `from` is included, `to` is not.
    let rows = csv(
        &admin,
        &format!(
            "{base}/series.csv?range=custom&from=2026-11-22T00:00&to=2026-11-22T09:59&res=minute"
        ),
    )
    .await;
    let total: i64 = rows[1..]
        .iter()
        .map(|r| r.rsplit(',').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, 1, "00:00:00 is in, 09:59 is out");
    let rows = csv(
        &admin,
        &format!(
            "{base}/series.csv?range=custom&from=2026-11-21T23:59&to=2026-11-22T00:01&res=minute"
        ),
    )
    .await;
    assert_eq!(
        rows[1..],
        ["2026-11-21T23:59:00Z,1", "2026-11-22T00:00:00Z,1"]
    );

    // One page's series.
    let rows = csv(
        &admin,
        &format!("{base}/series.csv?range=custom&from=2026-11-21&to=2026-11-22&res=day&path=/a"),
    )
    .await;
    assert_eq!(
        rows[1..],
        ["2026-11-21T00:00:00Z,1", "2026-11-22T00:00:00Z,7"]
    );

    // Top pages with their share.
    let rows = csv(
        &admin,
        &format!("{base}/pages.csv?range=custom&from=2026-11-20&to=2026-11-22&res=day"),
    )
    .await;
    assert_eq!(
        rows,
        [
            "path,views,share_percent,entries,exits,visitors,time_on_page_seconds,time_kind,timed_views,scroll_depth_percent,engaged_views",
            "/a,8,53.3,0,0,0,,,0,,0",
            "/b,7,46.7,0,0,0,,,0,,0"
        ]
    );
    let rows = csv(
        &admin,
        &format!("{base}/pages.csv?range=custom&from=2026-11-20&to=2026-11-22&res=day&q=B"),
    )
    .await;
    assert_eq!(
        rows,
        [
            "path,views,share_percent,entries,exits,visitors,time_on_page_seconds,time_kind,timed_views,scroll_depth_percent,engaged_views",
            "/b,7,46.7,0,0,0,,,0,,0"
        ]
    );

    // The seconds of one minute.
    let rows = csv(
        &admin,
        &format!("{base}/seconds.csv?path=/a&minute=2026-11-22T10:01"),
    )
    .await;
    assert_eq!(rows.len(), 61);
    assert_eq!(rows[8], "2026-11-22T10:01:07Z,3");
    assert_eq!(rows[10], "2026-11-22T10:01:09Z,1");
    let sum: i64 = rows[1..]
        .iter()
        .map(|r| r.rsplit(',').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(sum, 4);

    // The last hour (the clock is at 10:01:07).
    let rows = csv(&admin, &format!("{base}/realtime.csv?path=/a")).await;
    assert_eq!(rows.len(), 61);
    assert_eq!(rows.last().unwrap(), "2026-11-22T10:01:00Z,4");
    assert_eq!(rows[59], "2026-11-22T10:00:00Z,0");
    assert_eq!(rows[58], "2026-11-22T09:59:00Z,2");
}

#[tokio::test]
async fn dashboard_and_page_report_show_the_same_numbers() {
    for grouping in ["app", "server"] {
        dashboard_and_page_report_agree(grouping).await;
    }
}

async fn dashboard_and_page_report_agree(grouping: &str) {
    let (_app, admin, base) = reports_world_grouped(grouping).await;
    // The 22nd alone (hourly): 9 views, against 1 on the 21st.
    let (status, html) = admin
        .text(&format!(
            "{base}?range=custom&from=2026-11-22&to=2026-11-22"
        ))
        .await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"total\">9<"), "total");
    // The 22nd is still running at 10:01:07: its 10 complete hours (3
    // views) are compared with the first 10 hours of the 21st (none): a
    // compact "new" beside the total, the stretches on demand below.
    assert!(
        html.contains("class=\"change up\" id=\"change\" title=\"Before: 0\">new<"),
        "change: {html}"
    );
    assert!(
        html.contains(
            "the complete part, 2026-11-22 00:00 to 2026-11-22 10:00 (3 views so far), \
             with the same stretch of the previous period, 2026-11-21 00:00 to 2026-11-21 10:00."
        ),
        "basis"
    );
    assert!(
        html.contains("<svg class=\"chart\"") && html.contains("<table"),
        "chart and table"
    );
    assert!(html.contains("2026-11-22 10:00 UTC: 6 views"), "bar title");
    // Path, visitors, views, entries, exits, share.
    let row = |path: &str, views: &str, share: &str| {
        let at = html
            .find(&format!(">{path}</a></td>"))
            .unwrap_or_else(|| panic!("{path} row"));
        let row = &html[at..at + html[at..].find("</tr>").unwrap()];
        assert!(
            row.contains(&format!("data-label=\"Views\">{views}</td>"))
                && row.contains(&format!("data-label=\"Share\">{share}</td>")),
            "{row}"
        );
        at
    };
    let a = row("/a", "7", "77.8%");
    let b = row("/b", "2", "22.2%");
    assert!(a < b, "most viewed first");
    assert!(
        html.contains("These figures include every view stored so far."),
        "states freshness in plain words"
    );

    let (status, html) = admin.text(&format!("{base}/page?path=/a&range=custom&from=2026-11-22&to=2026-11-22&minute=2026-11-22T10:01")).await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"total\">7<"));
    assert!(html.contains("4 views in 2026-11-22 10:01 UTC"));
    assert!(html.contains("Last 60 minutes: 6 views"));
    assert!(html.contains("This minute: 4 views"));
    // Without a minute, the breakdown shows the latest minute with views.
    let (_, html) = admin.text(&format!("{base}/page?path=/a")).await;
    assert!(html.contains("4 views in 2026-11-22 10:01 UTC"));
}

#[tokio::test]
async fn the_latest_minute_with_views_skips_preallocated_empty_buckets() {
    for grouping in ["app", "server"] {
        latest_minute_skips_empty_buckets(grouping).await;
    }
}

async fn latest_minute_skips_empty_buckets(grouping: &str) {
    let (app, admin, base) = reports_world_grouped(grouping).await;
    // Zero-filled buckets for 10:00-11:59 of /a: those after its last view
    // (10:01) are newer, and within the day the default minute is looked up
    // in when the period ends at midnight.
    let request = PreallocRequest {
        scope: Scope::Page(Page::parse("r.test/a").unwrap()),
        from: at(22, 10, 0, 0),
        hours: 2,
        threshold: 1,
    };
    let run = preallocation::run(&app.store, &request, Trigger::Cli, "test", at(22, 10, 1, 7))
        .await
        .unwrap();
    assert!(run.inserted >= 118, "{run:?}");
    let (status, html) = admin
        .text(&format!(
            "{base}/page?path=/a&range=custom&from=2026-11-22&to=2026-11-22"
        ))
        .await;
    assert_eq!(status, 200);
    assert!(html.contains("4 views in 2026-11-22 10:01 UTC"));
}

#[tokio::test]
async fn the_site_header_links_the_funnels_filtered_or_not() {
    let (_app, admin, base) = reports_world().await;
    for query in ["?range=24h", "?range=24h&filter=page:/a"] {
        let (status, html) = admin.text(&format!("{base}{query}")).await;
        assert_eq!(status, 200, "{query}");
        let link = html.find("id=\"funnels-link\"");
        let figures = html.find("class=\"period\"");
        assert!(
            link.is_some() && link < figures,
            "{query}: the funnels in the header, before the figures"
        );
    }
}

#[tokio::test]
async fn the_filtered_dashboard_links_its_visits_csv() {
    let (_app, admin, base) = reports_world().await;
    let (status, html) = admin
        .text(&format!("{base}?range=24h&filter=page:/a"))
        .await;
    assert_eq!(status, 200);
    let at = html.find("id=\"visits-csv\"").expect("the visits CSV link");
    let link = &html[html[..at].rfind("href=\"").unwrap()..at];
    assert!(
        link.contains("/visits.csv?") && link.contains("filter=page"),
        "{link}"
    );
}

#[tokio::test]
async fn breakdown_text_says_rows_filter_and_filters_combine() {
    let (_app, admin, base) = reports_world().await;
    let (status, html) = admin.text(&format!("{base}?range=24h")).await;
    assert_eq!(status, 200);
    assert!(!html.contains("cannot be combined"), "stale breakdown text");
    assert!(html.contains("filters combine"), "breakdown text");
    let embedding = std::fs::read_to_string(repo_root().join("docs/embedding.md")).unwrap();
    assert!(
        !embedding.contains("cannot be combined") && !embedding.contains("rows are not links"),
        "docs/embedding.md"
    );
}

#[tokio::test]
async fn malformed_report_parameters_get_a_clear_400() {
    let (_app, admin, base) = reports_world().await;
    for (query, says) in [
        (
            "?range=2y",
            "Unknown range “2y”: choose 1h, 24h, today, yesterday, 7d, 30d, month, lastmonth or 12mo, or custom",
        ),
        ("?res=second", "Unknown resolution"),
        ("?range=custom", "needs both a start and an end"),
        (
            "?range=custom&from=2026-11-22&to=2026-11-01",
            "The end must be after the start.",
        ),
        (
            "?range=custom&from=yesterday&to=2026-11-01",
            "The start must be a date (YYYY-MM-DD)",
        ),
        ("?range=12mo&res=minute", "more than 1,500"),
        ("?p=0", "whole number from 1"),
        ("/page?path=relative", "cannot be shown"),
        ("/page?path=/a&minute=noon", "The minute must be"),
        ("/seconds.csv?path=/a", "Choose a minute"),
    ] {
        let (status, html) = admin.text(&format!("{base}{query}")).await;
        assert_eq!(status, 400, "{query}");
        assert!(html.contains(says), "{query}: {says}");
    }
    let long = "x".repeat(300);
    assert_eq!(admin.get(&format!("{base}?q={long}")).await.status(), 400);
    assert_eq!(
        admin
            .get(&format!("{base}/pages.csv?q={long}"))
            .await
            .status(),
        400
    );
}

/// An export's refusal is the reason in plain text (not an
/// HTML page a browser would save as `.csv`), for every export and every
/// kind of refusal; signing in stays a redirect.
#[tokio::test]
async fn csv_exports_refuse_in_plain_text() {
    let (app, admin, base) = reports_world().await;
    let long = "x".repeat(300);
    let refusals = [
        (
            "/seconds.csv?path=/a",
            400,
            "Choose a minute (minute=YYYY-MM-DDTHH:MM, UTC time).",
        ),
        (
            "/seconds.csv?path=/a&minute=noon",
            400,
            "The minute must be",
        ),
        (
            "/realtime.csv?path=relative",
            400,
            "That page cannot be shown",
        ),
        (
            "/series.csv?range=2y",
            400,
            "Unknown range “2y”: choose 1h, 24h, today, yesterday, 7d, 30d, month, lastmonth or 12mo, or custom",
        ),
        (
            "/visits.csv?range=custom",
            400,
            "needs both a start and an end",
        ),
        ("/sources.csv?range=12mo&res=minute", 400, "more than 1,500"),
        (&format!("/pages.csv?q={long}"), 400, "at most"),
        ("/series.csv?range=24h&range=7d", 400, "malformed parameter"),
    ];
    let unknown = "/sites/00000000-0000-0000-0000-000000000000/pages.csv".to_owned();
    let mut cases: Vec<(String, u16, &str)> = refusals
        .iter()
        .map(|(q, status, says)| (format!("{base}{q}"), *status, *says))
        .collect();
    cases.push((unknown, 404, "There is no such thing among yours."));
    for (path, status, says) in cases {
        let r = admin.get(&path).await;
        assert_eq!(r.status(), status, "{path}");
        let headers = r.headers().clone();
        assert_eq!(
            headers["content-type"], "text/plain; charset=utf-8",
            "{path}"
        );
        assert_eq!(headers["cache-control"], "no-store", "{path}");
        assert!(headers.get("content-disposition").is_none(), "{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains(says) && !body.contains('<'), "{path}: {body}");
    }
    // Signed out, an export link still leads to the login.
    let r = app.anonymous().get(&format!("{base}/pages.csv")).await;
    assert_eq!(r.status(), 303);
    assert!(r.headers()["location"]
        .to_str()
        .unwrap()
        .starts_with("/login?next="));
}

#[tokio::test]
async fn report_handles_carry_the_configured_read_preference_and_writes_do_not() {
    let mut settings = test_settings();
    settings.database.read_preference = "secondaryPreferred".into();
    let store = connect(database_uri(), &settings).await;
    assert!(matches!(
        store.reports().selection_criteria(),
        Some(SelectionCriteria::ReadPreference(
            ReadPreference::SecondaryPreferred { .. }
        ))
    ));
    assert!(
        matches!(
            store.db().selection_criteria(),
            Some(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        ),
        "writes and application reads use the primary"
    );

    settings.database.read_preference = "nearest".into();
    settings.database.max_staleness_secs = Some(120);
    let store = connect(database_uri(), &settings).await;
    match store.reports().selection_criteria() {
        Some(SelectionCriteria::ReadPreference(ReadPreference::Nearest { options })) => {
            assert_eq!(
                options.as_ref().unwrap().max_staleness,
                Some(Duration::from_secs(120))
            );
        }
        other => panic!("{other:?}"),
    }

    // The system page says what is in force.
    let app = spawn_app_with(|s| s.database.read_preference = "secondaryPreferred".into()).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let (_, html) = app
        .login("admin@example.com")
        .await
        .text("/admin/system")
        .await;
    assert!(html.contains("read preference <strong>secondaryPreferred</strong>"));
    assert!(
        html.contains("views_minute")
            && html.contains("Backlog (hits not yet in the database)")
            && html.contains("Topology")
    );
    // The sizes say when they were measured (at most once a
    // minute, see `storage::...collection_sizes_are_kept_a_minute...`).
    assert!(
        html.contains("<span id=\"sizes-at\">measured 2026-11-22 10:01 UTC</span>"),
        "{html}"
    );
}

#[tokio::test]
async fn metrics_health_and_readiness() {
    let app = spawn_app().await;
    let site = app.add_site("m.test", &[]).await;
    assert_eq!(
        app.pixel(&format!("site={}&page=/", site.id))
            .await
            .status(),
        200
    );
    app.pixel("site=bad").await;
    app.settle().await;
    let text = app.metrics().await;
    assert!(
        text.contains("tickertape_hits_total{outcome=\"counted\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("tickertape_hits_total{outcome=\"invalid-site\"} 1\n"));
    assert!(
        text.contains("tickertape_apply_seconds_count 1\n"),
        "{text}"
    );
    assert!(text.contains("tickertape_apply_batch_size_bucket{le=\"1\"} 1\n"));
    assert!(text.contains("tickertape_journal_committed_hits_total 1\n"));
    assert!(text.contains("tickertape_applied_hits_total 1\n"));
    assert!(text.contains("tickertape_journal_backlog_hits 0\n"));
    assert!(text.contains("# TYPE tickertape_report_seconds histogram"));
    assert!(text.contains("tickertape_queue_depth 0\n"));
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            app.http
                .get(format!("{}{path}", app.address))
                .send()
                .await
                .unwrap()
                .status(),
            200,
            "{path}"
        );
    }
}

#[tokio::test]
async fn demo_data_lands_in_all_three_levels_once() {
    let app = spawn_app().await;
    let options = DemoOptions {
        domain: DomainName::parse("demo.test").unwrap(),
        days: 2,
        daily_views: 800,
        seed: 7,
    };
    let report = demo::generate(&app.store, app.journal.appender(), &options, t0(), false)
        .await
        .unwrap();
    app.settle().await;
    assert!(report.hits > 500, "{}", report.hits);
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, report.hits as i64, "{g:?}");
    }
    // Every demo view has a source, so Top sources has something to show.
    let with_source: i64 = futures::TryStreamExt::try_collect::<Vec<bson::Document>>(
        app.store
            .db()
            .collection::<bson::Document>("site_breakdowns_day")
            .find(bson::doc! {"site": "demo.test"})
            .await
            .unwrap(),
    )
    .await
    .unwrap()
    .iter()
    .map(|d| d.get_i64("totalViews").unwrap())
    .sum();
    assert_eq!(with_source, report.hits as i64);
    // Through the real write path, the visit store holds every view too,
    // so a filter (what a newcomer clicks first) shows the demo's figures.
    use tickertape::storage::visit_log::{self, VisitQuery};
    let ever = VisitQuery::new(
        "demo.test",
        chrono::DateTime::UNIX_EPOCH,
        Utc::now() + chrono::TimeDelta::days(1),
    );
    let visits = visit_log::visits(&app.store, &ever).await.unwrap();
    assert!(visits.len() > 100, "{} visits", visits.len());
    assert_eq!(
        visits.iter().map(|v| v.views).sum::<i64>(),
        report.hits as i64,
        "every demo view is a step of its visit"
    );
    app.ingest.directory.reload(&app.store).await.unwrap();
    app.add_user("admin@example.com", Role::Admin).await;
    let login = app.login("admin@example.com").await;
    let id = report.site.id;
    let (status, html) = login
        .text(&format!("/sites/{id}?range=7d&filter=country%3ADE"))
        .await;
    assert_eq!(status, 200);
    assert!(
        !html.contains("in this period with these filters"),
        "the filtered demo has views"
    );
    let again = demo::generate(&app.store, app.journal.appender(), &options, t0(), true)
        .await
        .unwrap();
    assert!(again.skipped);
    app.settle().await;
    assert_eq!(app.total_views(Resolution::Day).await, report.hits as i64);
}

/// Every report query carries `maxTimeMS`: with a limit of 1 ms, a scan of
/// 60,000 buckets is stopped by the server (MaxTimeMSExpired, code 50)
/// instead of running on; with the default it answers.
#[tokio::test]
async fn report_queries_are_bounded_by_max_time_ms() {
    use tickertape::reports::{queries, Period};
    let mut settings = test_settings();
    let store = connect(database_uri(), &settings).await;
    tickertape::indexes::ensure(&store).await.unwrap();
    let start = Resolution::Hour.floor(t0()) - chrono::TimeDelta::days(1);
    // Minute figures are read from the hour buckets' minute slots:
    // 60,000 page-hours with one view each.
    let docs: Vec<bson::Document> = (0..60_000)
        .map(|i| {
            bson::doc! {
                "page": format!("slow.test/p/{}", i % 1000),
                "timestamp": bson::DateTime::from_chrono(start + chrono::TimeDelta::hours(i / 1000)),
                "totalViews": 1_i64,
                "minutes": {"0": 1_i64},
            }
        })
        .collect();
    store
        .db()
        .collection::<bson::Document>(Resolution::Hour.collection())
        .insert_many(docs)
        .await
        .unwrap();
    let domain = DomainName::parse("slow.test").unwrap();
    let site = queries::Scope::Site(&domain);
    let period = Period::aligned(
        start,
        start + chrono::TimeDelta::hours(60),
        Resolution::Minute,
    );
    let pages = queries::top_pages(&store, &site, &period).await.unwrap();
    assert_eq!(pages.iter().map(|(_, v)| v).sum::<i64>(), 60_000);
    assert_eq!(pages.len(), 1000);

    settings.database.report_max_time_ms = 1;
    let hurried = connect(database_uri(), &settings).await;
    assert_eq!(hurried.report_max_time(), Duration::from_millis(1));
    let err = queries::top_pages(&hurried, &site, &period)
        .await
        .expect_err("a 1 ms limit stops a 60,000-bucket scan");
    assert!(
        matches!(&*err.kind, mongodb::error::ErrorKind::Command(c) if c.code == 50),
        "{err}"
    );
    store.db().drop().await.unwrap();
}

/// A site's top pages are its own whichever side adds them up and however
/// they are read (its totals complete or not), with another site's views at
/// the same times: on secantusd-rs the buckets are found by their times
/// alone and the site's pages kept by prefix.
#[tokio::test]
async fn a_sites_top_pages_never_include_another_sites_at_the_same_times() {
    use tickertape::reports::queries::{self, Scope};
    for grouping in ["app", "server"] {
        let app = spawn_app_with(|s| s.database.report_grouping = grouping.to_owned()).await;
        let one = app.add_site("one.test", &[]).await;
        app.add_site("two.test", &[]).await;
        let hits = [
            ("one.test/a", t0()),
            ("two.test/b", t0()),
            ("two.test/b", t0() - chrono::TimeDelta::days(3)),
            ("one.test/a", t0() - chrono::TimeDelta::days(3)),
        ];
        app.write_hits(&hits).await;
        for range in ["12mo", "24h", "1h", "7d"] {
            let period = tickertape::reports::Period::resolve(
                &tickertape::reports::RangeQuery {
                    range: Some(range.into()),
                    ..Default::default()
                },
                t0(),
            )
            .unwrap();
            for scope in [Scope::Site(&one.domain), Scope::of_site(&one)] {
                let pages = queries::top_pages(&app.store, &scope, &period)
                    .await
                    .unwrap();
                let paths: Vec<&str> = pages.iter().map(|(p, _)| p.as_str()).collect();
                assert_eq!(paths, ["one.test/a"], "{grouping}, {range}");
            }
        }
    }
}

#[tokio::test]
async fn hours_and_days_behind_by_more_than_their_window_are_said_by_every_report_that_reads_them()
{
    // The hour buckets take no write: the rollups stream stalls for real,
    // its hit waiting in the journal, while the minutes and the visit
    // store go on. The report's clock then moves on 45 s.
    let app = spawn_app().await;
    let start = Utc::now();
    app.clock.set(start);
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("lag.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let base = format!("/sites/{}", site.id);
    let (_, fresh) = admin.text(&base).await;
    assert!(!fresh.contains("id=\"behind\""), "nothing behind yet");
    assert!(
        fresh.contains("New views show here within about 2 seconds"),
        "the freshness the reports have is stated: {fresh}"
    );
    app.refuse_writes(Resolution::Hour.collection(), "page", true)
        .await;
    let r = app.pixel(&format!("site={}&page=/late", site.id)).await;
    assert_eq!(r.status(), 200);
    app.clock.set(start + chrono::TimeDelta::seconds(45));
    app.wait_for_lag("rollups", 45.0).await;
    // Each stream's lag and window on /metrics: the minutes go in (on a
    // busy machine, maybe only after the clock moved: waited for).
    app.wait_for_lag("views", 0.0).await;
    let window = app.stream_seconds("window", "rollups").await;
    assert!((window - 2.01).abs() < 1e-6, "{window}");
    let said = "Figures are 45 s behind the views received";
    let (_, late) = admin.text(&base).await;
    assert!(
        late.contains(said),
        "the dashboard says how far behind: {late}"
    );
    let (_, page) = admin.text(&format!("{base}/page?path=%2Flate")).await;
    assert!(page.contains(said), "and the page report");
    let r = admin.get(&format!("{base}/series.csv?range=24h")).await;
    assert_eq!(
        r.headers()["tickertape-behind-seconds"],
        "45",
        "and the CSV"
    );
    let token = crate::json_api::create_token(&admin, "lag", None).await;
    let a = crate::json_api::get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/series?range=24h", site.id),
    )
    .await;
    assert_eq!(
        a.json["period"]["behindSeconds"], 45,
        "and the API: {}",
        a.json
    );
    // Filtered figures read the visit store, which is not behind.
    let (_, filtered) = admin.text(&format!("{base}?filter=page%3A%2Flate")).await;
    assert!(!filtered.contains("id=\"behind\""), "{filtered}");
    // Once the hours can be written, the reports are fresh again.
    app.refuse_writes(Resolution::Hour.collection(), "page", false)
        .await;
    app.settle().await;
    let (_, caught_up) = admin.text(&base).await;
    assert!(!caught_up.contains("id=\"behind\""), "{caught_up}");
    let r = admin.get(&format!("{base}/series.csv?range=24h")).await;
    assert!(r.headers().get("tickertape-behind-seconds").is_none());
}

#[tokio::test]
async fn the_visit_store_behind_by_more_than_its_window_is_said_by_filtered_figures_and_funnels() {
    // The visit store takes no write: the visits stream stalls for real
    // while the buckets and breakdowns go on.
    let app = spawn_app().await;
    let start = Utc::now();
    app.clock.set(start);
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("visitlag.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let base = format!("/sites/{}", site.id);
    app.refuse_writes("visit_parts", "site", true).await;
    let r = app.pixel(&format!("site={}&page=/late", site.id)).await;
    assert_eq!(r.status(), 200);
    app.clock.set(start + chrono::TimeDelta::seconds(45));
    app.wait_for_lag("visits", 45.0).await;
    let said = "Filtered figures and funnels are 45 s behind the views";
    let filter = "filter=page%3A%2Flate";
    let (_, filtered) = admin.text(&format!("{base}?{filter}")).await;
    assert!(
        filtered.contains(said),
        "the filtered dashboard: {filtered}"
    );
    let (_, funnels) = admin.text(&format!("{base}/funnels")).await;
    assert!(funnels.contains(said), "the funnels: {funnels}");
    let (_, whole) = admin.text(&base).await;
    assert!(
        !whole.contains("id=\"behind\""),
        "the unfiltered figures are not behind: {whole}"
    );
    let csv = |q: String| {
        let (admin, base) = (&admin, &base);
        async move {
            let r = admin
                .get(&format!(
                    "{base}/breakdown.csv?range=24h&dimension=browser{q}"
                ))
                .await;
            r.headers()
                .get("tickertape-behind-seconds")
                .map(|v| v.to_str().unwrap().to_owned())
        }
    };
    assert_eq!(csv(format!("&{filter}")).await.as_deref(), Some("45"));
    assert_eq!(csv(String::new()).await, None);
    let token = crate::json_api::create_token(&admin, "lag", None).await;
    let api = |q: &str| {
        let (app, token) = (&app, &token);
        let path = format!(
            "/api/v1/sites/{}/breakdown?range=24h&dimension=browser{q}",
            site.id
        );
        async move { crate::json_api::get(app, token, &path).await.json }
    };
    assert_eq!(
        api(&format!("&{filter}")).await["period"]["behindSeconds"],
        45
    );
    assert!(api("").await["period"].get("behindSeconds").is_none());
    app.refuse_writes("visit_parts", "site", false).await;
    app.settle().await;
    let (_, caught_up) = admin.text(&format!("{base}?{filter}")).await;
    assert!(!caught_up.contains("id=\"behind\""), "{caught_up}");
}

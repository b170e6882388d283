//! Retention: TTL indexes on `timestamp` per bucket collection, created at
//! start, changed with `collMod`, dropped for "for ever"; the database
//! expiring old buckets itself; reports switching to a kept level.

use bson::{doc, Document};
use chrono::{TimeZone, Utc};
use tickertape::accounts::Role;
use tickertape::domain::{Resolution, Retention};
use tickertape::storage::retention;

use crate::helpers::*;

/// The `retention` index of a collection as `listIndexes` returns it.
async fn ttl_index(app: &TestApp, collection: &str) -> Option<Document> {
    let reply = app
        .store
        .db()
        .run_command(doc! {"listIndexes": collection})
        .await
        .unwrap();
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .filter_map(|i| i.as_document())
        .find(|i| i.get_str("name") == Ok("retention"))
        .cloned()
}

fn expire_after(index: &Document) -> i64 {
    tickertape::storage::values::count(index.get("expireAfterSeconds"))
}

#[tokio::test]
async fn ttl_indexes_have_the_configured_values_and_follow_a_change() {
    // The defaults: minutes 90 days, hours 2 years, days for ever.
    let app = spawn_app_with(|s| s.retention.set(Retention::default())).await;
    let minute = ttl_index(&app, "views_minute")
        .await
        .expect("minute TTL index");
    assert_eq!(minute.get_document("key").unwrap(), &doc! {"timestamp": 1});
    assert_eq!(expire_after(&minute), 90 * 86_400);
    let hour = ttl_index(&app, "views_hour").await.expect("hour TTL index");
    assert_eq!(expire_after(&hour), 730 * 86_400);
    assert!(
        ttl_index(&app, "views_day").await.is_none(),
        "days for ever"
    );

    // A change is applied in place with collMod, and a new TTL created.
    let changed = Retention::parse(30, 365, 3650).unwrap();
    let report = retention::apply(&app.store, &changed).await.unwrap();
    assert!(report[0].contains("collMod"), "{report:?}");
    assert!(report[2].contains("created"), "{report:?}");
    assert_eq!(
        expire_after(&ttl_index(&app, "views_minute").await.unwrap()),
        30 * 86_400
    );
    assert_eq!(
        expire_after(&ttl_index(&app, "views_hour").await.unwrap()),
        365 * 86_400
    );
    assert_eq!(
        expire_after(&ttl_index(&app, "views_day").await.unwrap()),
        3650 * 86_400
    );
    // Page summaries stand for their days' page buckets: they go with them.
    assert_eq!(
        expire_after(&ttl_index(&app, "page_summaries").await.unwrap()),
        3650 * 86_400
    );
    // Applying it again changes nothing; "for ever" drops the index.
    let again = retention::apply(&app.store, &changed).await.unwrap();
    assert!(again.iter().all(|l| l.contains("already")), "{again:?}");
    retention::apply(&app.store, &Retention::parse(30, 0, 0).unwrap())
        .await
        .unwrap();
    assert!(ttl_index(&app, "views_hour").await.is_none());
    assert!(ttl_index(&app, "views_day").await.is_none());
    assert!(ttl_index(&app, "page_summaries").await.is_none());
    assert_eq!(
        expire_after(&ttl_index(&app, "views_minute").await.unwrap()),
        30 * 86_400
    );

    // The system page shows the retention in force and each collection's bytes.
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (status, page) = admin.text("/admin/system").await;
    assert_eq!(status, 200);
    assert!(page.contains("views_minute") && page.contains("expireAfterSeconds 2,592,000"));
    assert!(page.contains("Kept for") && page.contains("Storage size"));
}

#[tokio::test]
async fn a_start_with_an_impossible_retention_is_refused() {
    let mut settings = test_settings();
    settings.retention.retain_minute_days = 90;
    settings.retention.retain_hour_days = 30;
    let store = connect(database_uri(), &settings).await;
    let clock = tickertape::clock::ManualClock::new(t0());
    let dir = tempfile::tempdir().unwrap();
    settings.ingest.journal_dir = Some(dir.path().to_owned());
    let err = tickertape::app::Application::build(&settings, store, clock)
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("hour buckets must be kept at least as long as minute buckets"),
        "{err}"
    );
}

#[tokio::test]
async fn the_database_expires_buckets_older_than_their_retention() {
    // A server of its own: its TTL monitor is made to run every second,
    // which on the shared server would also expire other tests' sessions
    // (they are dated by the tests' pinned clock, in the past).
    let dir = tempfile::tempdir().unwrap();
    let options = tickertape::localdb::LocalDbOptions {
        cache_size: "64M".into(),
        log_file_max: "16MB".into(),
        ..Default::default()
    };
    let db = tickertape::localdb::LocalDb::start(&localdb_binary(), dir.path(), &options)
        .await
        .expect("start a local database");
    let settings = test_settings();
    let store = connect(db.uri(), &settings).await;
    store
        .client()
        .database("admin")
        .run_command(doc! {"setParameter": 1, "ttlMonitorSleepSecs": 1})
        .await
        .unwrap();
    retention::apply(&store, &Retention::parse(1, 1, 0).unwrap())
        .await
        .unwrap();
    let old = Utc.with_ymd_and_hms(2020, 1, 1, 10, 0, 5).unwrap();
    let recent = Utc::now();
    tickertape::storage::bucket_writer::BucketWriter::new(&store)
        .apply_direct(
            &[("old.test/a", old), ("old.test/a", recent)],
            tokio::time::Instant::now() + std::time::Duration::from_secs(30),
        )
        .await
        .unwrap();
    let count = |level: Resolution| {
        let coll = store.buckets(level);
        async move { coll.count_documents(doc! {}).await.unwrap() }
    };
    assert_eq!(count(Resolution::Minute).await, 2);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count(Resolution::Minute).await > 1 || count(Resolution::Hour).await > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the old minute and hour buckets were not expired within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The recent buckets stay, and day buckets are kept for ever.
    let minute: Vec<tickertape::storage::Bucket> = futures::TryStreamExt::try_collect(
        store
            .buckets(Resolution::Minute)
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(minute.len(), 1);
    assert_eq!(
        minute[0].timestamp.to_chrono(),
        Resolution::Minute.floor(recent)
    );
    assert_eq!(count(Resolution::Hour).await, 1);
    assert_eq!(count(Resolution::Day).await, 2);
    drop(store);
    db.stop();
}

#[tokio::test]
async fn a_range_beyond_the_minute_retention_is_shown_by_hour_and_says_why() {
    // Minutes kept 7 days (hours and days for ever): 3 views on 1 November
    // are 21 days before the test's clock.
    let app = spawn_app_with(|s| s.retention.set(Retention::parse(7, 0, 0).unwrap())).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("kept.test", &[]).await;
    let at = Utc.with_ymd_and_hms(2026, 11, 1, 10, 15, 30).unwrap();
    app.write_hits(&[
        ("kept.test/a", at),
        ("kept.test/a", at),
        ("kept.test/b", at),
    ])
    .await;
    let admin = app.login("admin@example.com").await;
    let range = "range=custom&from=2026-11-01T10:00&to=2026-11-01T11:00&res=minute";
    let base = format!("/sites/{}", site.id);
    let (status, dashboard) = admin.text(&format!("{base}?{range}")).await;
    assert_eq!(status, 200);
    assert!(
        dashboard.contains(
            "Shown by hour: minute buckets are kept for 7 days, and this range starts before that."
        ),
        "the dashboard says why"
    );
    assert!(dashboard.contains("id=\"total\">3<"));
    assert!(dashboard.contains("1 point by hour"), "shown by hour");
    let (_, report) = admin.text(&format!("{base}/page?path=/a&{range}")).await;
    assert!(report.contains("id=\"retention-note\"") && report.contains("id=\"total\">2<"));
    let (_, csv) = admin.text(&format!("{base}/series.csv?{range}")).await;
    assert_eq!(
        csv.lines().skip(1).collect::<Vec<_>>().len(),
        1,
        "the export reads the same hour: {csv}"
    );
    // The API reads the same hour and says why.
    let token = crate::json_api::create_token(&admin, "retention", None).await;
    let api = crate::json_api::get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/series?{range}", site.id),
    )
    .await;
    assert_eq!(api.status, 200);
    assert_eq!(api.json["period"]["resolution"], "hour");
    assert_eq!(api.json["total"], 3);
    assert!(api.json["period"]["coarsened"]
        .as_str()
        .unwrap()
        .starts_with("Shown by hour"));
    // Within the retention nothing changes.
    let (_, recent) = admin
        .text(&format!(
            "{base}?range=custom&from=2026-11-20T10:00&to=2026-11-20T11:00&res=minute"
        ))
        .await;
    assert!(!recent.contains("retention-note") && recent.contains("60 points by minute"));
}

//! Bucket documents, the update command and the schema, on the real server.

use bson::{doc, Bson, Document};
use chrono::TimeDelta;
use std::collections::BTreeMap;
use tickertape::storage::bucket_writer::BucketWriter;
use tickertape::storage::{schema, Granularity};
use tokio::time::{Duration, Instant};

use crate::helpers::*;
use crate::proxy::{write_target, Mode, Proxy};

#[tokio::test]
async fn one_view_at_07_seconds_lands_in_all_three_buckets_in_the_seeds_shape() {
    let app = spawn_app().await;
    let site = app.add_site("example.com", &[]).await;
    // t0 is 10:01:07
    let r = app
        .pixel(&format!("site={}&page=/blog/hello", site.id))
        .await;
    assert_eq!(r.status(), 200);

    let raw = |coll: &'static str| {
        let db = app.store.db().clone();
        async move {
            db.collection::<Document>(coll)
                .find_one(doc! {})
                .projection(doc! {"_id": 0})
                .await
                .unwrap()
                .unwrap()
        }
    };
    let ts = |h, m| {
        Bson::DateTime(bson::DateTime::from_chrono(
            t0().date_naive().and_hms_opt(h, m, 0).unwrap().and_utc(),
        ))
    };
    let minute = raw("views_minute").await;
    let keys: Vec<&str> = minute
        .keys()
        .map(String::as_str)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(keys, ["page", "seconds", "timestamp", "totalViews"]);
    assert_eq!(minute.get_str("page").unwrap(), "example.com/blog/hello");
    assert_eq!(minute.get("timestamp"), Some(&ts(10, 1)));
    // NumberLong, as in the seed.
    assert_eq!(minute.get("totalViews"), Some(&Bson::Int64(1)));
    assert_eq!(minute.get_document("seconds").unwrap(), &doc! {"7": 1});
    let hour = raw("views_hour").await;
    assert_eq!(hour.get("timestamp"), Some(&ts(10, 0)));
    assert_eq!(hour.get_document("minutes").unwrap(), &doc! {"1": 1});
    assert_eq!(hour.get_i64("totalViews").unwrap(), 1);
    let day = raw("views_day").await;
    assert_eq!(day.get("timestamp"), Some(&ts(0, 0)));
    assert_eq!(day.get_document("hours").unwrap(), &doc! {"10": 1});
    assert_eq!(day.get_i64("totalViews").unwrap(), 1);
}

#[tokio::test]
async fn schema_setup_is_idempotent_and_creates_unique_bucket_indexes() {
    let app = spawn_app().await;
    schema::ensure_schema(&app.store).await.unwrap();
    let report = schema::ensure_schema(&app.store).await.unwrap();
    assert_eq!(report.indexes.len(), 6);
    for g in Granularity::ALL {
        let indexes = app
            .store
            .db()
            .collection::<Document>(g.collection())
            .list_index_names()
            .await
            .unwrap();
        assert!(
            indexes.contains(&"page_timestamp".to_owned()),
            "{indexes:?}"
        );
    }
    // A second bucket for the same page and minute is refused.
    let coll = app.store.db().collection::<Document>("views_minute");
    let bucket = Granularity::Minute.zero_filled("example.com/", t0());
    coll.insert_one(bucket.clone()).await.unwrap();
    assert!(coll.insert_one(bucket).await.is_err());
}

#[tokio::test]
async fn concurrent_writers_on_one_new_bucket_lose_no_increment() {
    // Pages are partitioned so the app never does this; preallocation and
    // other processes can. Racing upserts may hit duplicate keys, which are
    // retried.
    let app = spawn_app().await;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let store = app.store.clone();
        tasks.push(tokio::spawn(async move {
            let mut writer = BucketWriter::new(&store).await.unwrap();
            for i in 0..20 {
                let at = t0() + TimeDelta::seconds(i % 3);
                let deadline = Instant::now() + Duration::from_secs(30);
                writer.apply([("race.test/", at)], deadline).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let minute = app.buckets(Granularity::Minute).await;
    assert_eq!(minute.len(), 1);
    assert_eq!(minute[0].total_views, 120);
    // i % 3 over 0..20 is 0 seven times, 1 seven times, 2 six times; six tasks.
    assert_eq!(
        (minute[0].slot(7), minute[0].slot(8), minute[0].slot(9)),
        (42, 42, 36)
    );
    assert_eq!(app.total_views(Granularity::Hour).await, 120);
    assert_eq!(app.total_views(Granularity::Day).await, 120);
}

#[tokio::test]
async fn a_lost_reply_is_resent_and_counted_exactly_once() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.database.write_timeout_ms = 300; // an attempt gives up after 1.3 s
    let app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("example.com", &[]).await;
    // Warm the connection pool: a flush sends three commands at once, and
    // connections opened while replies are lost would hang in their
    // handshake (the driver's connect timeout), not in the update.
    let warm = app.pixel(&format!("site={}&page=/warm", site.id)).await;
    assert_eq!(warm.status(), 200);

    proxy.set(Mode::LoseReplies);
    let query = format!("site={}&page=/once", site.id);
    let hit = {
        let http = app.http.clone();
        let url = format!("{}/pixel.gif?{query}", app.address);
        tokio::spawn(async move { http.get(url).send().await.unwrap().status() })
    };
    // The update reaches the server and is applied; its reply is dropped.
    tokio::time::sleep(Duration::from_millis(600)).await;
    proxy.set(Mode::Pass);

    assert_eq!(hit.await.unwrap(), 200);
    let resent = app
        .ingest
        .stats
        .resent_commands
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(resent >= 1, "the command should have been resent");
    for g in Granularity::ALL {
        let once: i64 = app
            .buckets(g)
            .await
            .iter()
            .filter(|b| b.page == "example.com/once")
            .map(|b| b.total_views)
            .sum();
        assert_eq!(once, 1, "{g:?}");
    }
}

#[tokio::test]
async fn bucket_slots_read_missing_keys_as_zero() {
    let app = spawn_app().await;
    let site = app.add_site("example.com", &[]).await;
    app.pixel(&format!("site={}&page=/", site.id)).await;
    let b = &app.buckets(Granularity::Minute).await[0];
    let slots: BTreeMap<_, _> = (0..60)
        .map(|i| (i, b.slot(i)))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(slots, BTreeMap::from([(7, 1)]));
}

#[tokio::test]
async fn writers_created_one_after_another_never_reuse_a_transaction_number() {
    // Regression: server sessions are pooled; a writer created after another
    // was dropped (or after the driver's own retryable writes) must still
    // send increasing transaction numbers (else: TransactionTooOld).
    let app = spawn_app().await;
    let coll = app.store.db().collection::<Document>("scratch");
    for round in 0..4 {
        coll.insert_one(doc! {"round": round}).await.unwrap();
        let mut writer = BucketWriter::new(&app.store).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        writer.apply([("seq.test/", t0())], deadline).await.unwrap();
    }
    assert_eq!(app.total_views(Granularity::Minute).await, 4);
}

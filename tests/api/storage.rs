//! Bucket documents, the update command and the schema, on the real server.

use bson::{doc, Bson, Document};
use chrono::TimeDelta;
use futures::TryStreamExt;
use std::collections::BTreeMap;
use tickertape::storage::bucket_writer::{ApplyError, BucketWriter};
use tickertape::storage::progress::{self, Stream};
use tickertape::storage::{sharding, zero_filled, Resolution, Subject};
use tokio::time::{Duration, Instant};

use crate::helpers::*;

#[tokio::test]
async fn one_view_at_07_seconds_lands_in_all_three_buckets_in_the_seeds_shape() {
    let app = spawn_app().await;
    let site = app.add_site("example.com", &[]).await;
    // t0 is 10:01:07
    let r = app
        .pixel(&format!("site={}&page=/blog/hello", site.id))
        .await;
    assert_eq!(r.status(), 200);
    app.settle().await;

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
    // The seed's fields, and the visitors' sketch of the minute (so a
    // range cut inside an hour counts its visitors), as the hour and day
    // buckets keep theirs.
    assert_eq!(
        keys,
        ["page", "seconds", "timestamp", "totalViews", "visitors"]
    );
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
    tickertape::indexes::ensure(&app.store).await.unwrap();
    let report = tickertape::indexes::ensure(&app.store).await.unwrap();
    assert_eq!(report.indexes.len(), tickertape::indexes::all().len());
    assert!(report
        .indexes
        .iter()
        .any(|l| l.starts_with("views_minute: page_timestamp") && l.ends_with("unique")));
    for g in Resolution::ALL {
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
    let bucket = zero_filled(Resolution::Minute, "example.com/", t0());
    coll.insert_one(bucket.clone()).await.unwrap();
    assert!(coll.insert_one(bucket).await.is_err());
}

#[tokio::test]
async fn concurrent_writers_on_one_new_bucket_lose_no_increment() {
    // Pages are partitioned over lanes so the app rarely does this;
    // preallocation and other processes can. Racing transactions conflict
    // (or hit duplicate keys) and are retried whole.
    let app = spawn_app().await;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let store = app.store.clone();
        tasks.push(tokio::spawn(async move {
            let writer = BucketWriter::new(&store);
            for i in 0..20 {
                let at = t0() + TimeDelta::seconds(i % 3);
                let deadline = Instant::now() + Duration::from_secs(30);
                writer
                    .apply_direct(&[("race.test/", at)], deadline)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let minute = app.buckets(Resolution::Minute).await;
    assert_eq!(minute.len(), 1);
    assert_eq!(minute[0].total_views, 120);
    // i % 3 over 0..20 is 0 seven times, 1 seven times, 2 six times; six tasks.
    assert_eq!(
        (minute[0].slot(7), minute[0].slot(8), minute[0].slot(9)),
        (42, 42, 36)
    );
    assert_eq!(app.total_views(Resolution::Hour).await, 120);
    assert_eq!(app.total_views(Resolution::Day).await, 120);
}

#[tokio::test]
async fn bucket_slots_read_missing_keys_as_zero() {
    let app = spawn_app().await;
    let site = app.add_site("example.com", &[]).await;
    app.pixel(&format!("site={}&page=/", site.id)).await;
    let b = &app.buckets(Resolution::Minute).await[0];
    let slots: BTreeMap<_, _> = (0..60)
        .map(|i| (i, b.slot(i)))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(slots, BTreeMap::from([(7, 1)]));
}

#[tokio::test]
async fn a_batch_commits_with_its_progress_at_most_once() {
    // The progress update matches only the batch's first position: sending
    // the same batch again (as after an unknown outcome) changes nothing.
    let app = spawn_app().await;
    let journal = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        progress::ensure_lane(&app.store, &journal, 0, 0)
            .await
            .unwrap(),
        0
    );
    let writer = BucketWriter::new(&app.store);
    let advance = |stream| progress::Advance {
        journal: &journal,
        lane: 0,
        stream,
        from: 0,
        to: 40,
    };
    let hits = [
        ("once.test/", t0(), Some("a.example")),
        ("once.test/", t0(), None),
    ];
    let views = advance(Stream::Views);
    let report = writer
        .apply(hits.iter().map(|&h| h.into()), Some(&views))
        .await
        .unwrap();
    // The views stream writes the page and site minutes only.
    assert_eq!((report.hits, report.statements()), (2, 2));
    let again = writer
        .apply(hits.iter().map(|&h| h.into()), Some(&views))
        .await;
    assert!(matches!(again, Err(ApplyError::ProgressMoved)), "{again:?}");
    assert_eq!(app.total_views(Resolution::Minute).await, 2);
    assert_eq!(app.total_views(Resolution::Hour).await, 0);
    assert_eq!(app.total_views(Resolution::Day).await, 0);
    // The rollups stream: the hours and days, at its own position, at
    // most once.
    let rollups = advance(Stream::Rollups);
    let report = writer
        .apply(hits.iter().map(|&h| h.into()), Some(&rollups))
        .await
        .unwrap();
    assert_eq!((report.hits, report.statements()), (2, 4));
    let again = writer
        .apply(hits.iter().map(|&h| h.into()), Some(&rollups))
        .await;
    assert!(matches!(again, Err(ApplyError::ProgressMoved)), "{again:?}");
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, 2, "{g:?}");
    }
    let source_buckets = |subject| {
        let coll =
            app.store
                .db()
                .collection::<Document>(tickertape::storage::breakdowns::collection(
                    subject,
                    Resolution::Day,
                ));
        async move { coll.count_documents(doc! {}).await.unwrap() }
    };
    assert_eq!(source_buckets(Subject::Page).await, 0);
    // The sources stream has its own position in the same lane and writes
    // the sources only, also at most once.
    let sources = advance(Stream::Sources);
    let report = writer
        .apply(hits.iter().map(|&h| h.into()), Some(&sources))
        .await
        .unwrap();
    assert_eq!((report.hits, report.statements()), (2, 4));
    let again = writer
        .apply(hits.iter().map(|&h| h.into()), Some(&sources))
        .await;
    assert!(matches!(again, Err(ApplyError::ProgressMoved)), "{again:?}");
    assert_eq!(source_buckets(Subject::Page).await, 1);
    assert_eq!(source_buckets(Subject::Site).await, 1);
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, 2, "{g:?}");
    }
    for stream in Stream::ALL {
        assert_eq!(
            progress::position(&app.store, &journal, 0, stream)
                .await
                .unwrap(),
            Some(40),
            "{stream:?}"
        );
    }
    // `ensure` never moves a lane the database already knows.
    assert_eq!(
        progress::ensure_lane(&app.store, &journal, 0, 0)
            .await
            .unwrap(),
        40
    );
}

#[tokio::test]
async fn a_lane_from_before_the_sources_and_rollups_streams_starts_them_at_its_views() {
    // Before sources, hours and days had streams of their own they were
    // written with the views: a lane the database knows only by its views
    // position must not apply them before it again.
    let app = spawn_app().await;
    let journal = uuid::Uuid::new_v4().to_string();
    progress::ensure(&app.store, &journal, 3, Stream::Views, 0)
        .await
        .unwrap();
    let writer = BucketWriter::new(&app.store);
    let advance = progress::Advance {
        journal: &journal,
        lane: 3,
        stream: Stream::Views,
        from: 0,
        to: 512,
    };
    writer
        .apply(
            [("old.test/", t0())].iter().map(|&h| h.into()),
            Some(&advance),
        )
        .await
        .unwrap();
    assert_eq!(
        progress::ensure_lane(&app.store, &journal, 3, 0)
            .await
            .unwrap(),
        512
    );
    for stream in [Stream::Sources, Stream::Rollups] {
        assert_eq!(
            progress::position(&app.store, &journal, 3, stream)
                .await
                .unwrap(),
            Some(512),
            "{stream:?}"
        );
    }
}

#[tokio::test]
async fn the_application_handle_reads_the_primary_whatever_the_uri_says() {
    use mongodb::options::{ReadPreference, SelectionCriteria};
    // An operator's URI asking for secondary reads must not send session
    // and user lookups to a lagging secondary.
    let base = database_uri();
    let sep = match (base.contains('?'), base.ends_with('/')) {
        (true, _) => "&",
        (false, true) => "?",
        (false, false) => "/?",
    };
    let uri = format!("{base}{sep}readPreference=secondaryPreferred");
    let store = connect(&uri, &test_settings()).await;
    assert!(matches!(
        store.db().selection_criteria(),
        Some(SelectionCriteria::ReadPreference(ReadPreference::Primary))
    ));
    assert!(matches!(
        store.realtime().selection_criteria(),
        Some(SelectionCriteria::ReadPreference(
            ReadPreference::PrimaryPreferred { .. }
        ))
    ));
    match store.reports().selection_criteria() {
        Some(SelectionCriteria::ReadPreference(ReadPreference::SecondaryPreferred { options })) => {
            assert_eq!(
                options.as_ref().unwrap().max_staleness,
                Some(Duration::from_secs(90)),
                "secondary report reads are bounded by default"
            )
        }
        other => panic!("{other:?}"),
    }
    // And reading right after writing works through it.
    let coll = store.db().collection::<Document>("scratch");
    coll.insert_one(doc! {"k": 1}).await.unwrap();
    assert!(coll.find_one(doc! {"k": 1}).await.unwrap().is_some());
}

#[tokio::test]
async fn sharding_is_an_explicit_step_that_a_replica_set_refuses() {
    let app = spawn_app().await;
    // Start-up and `setup` never shard; on a replica set there is nothing
    // to warn about either.
    assert!(sharding::warnings(&app.store).await.is_empty());
    let err = sharding::shard(&app.store).await.unwrap_err();
    assert!(matches!(err, sharding::ShardError::NotMongos(_)), "{err}");
    assert!(err.to_string().contains("not a mongos"), "{err}");
}

/// The system page's figures: with the database away, `collStats` and the
/// member list are shown as failures, not as empty collections.
#[tokio::test]
async fn failed_stats_are_reported_as_failures_not_zeros() {
    use crate::proxy::{write_target, Mode, Proxy};
    use tickertape::storage::system;
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.database.db_timeout_ms = 300;
    let store = connect(&proxy.uri(), &settings).await;
    let up = system::bucket_sizes(&store).await;
    assert!(up.iter().all(|c| c.error.is_none()), "{up:?}");
    assert!(up.iter().all(|c| c.count == 0), "not created yet: zeros");

    proxy.set(Mode::Down);
    let down = system::bucket_sizes(&store).await;
    assert_eq!(down.len(), 3);
    for c in &down {
        assert_eq!(
            c.error.as_deref(),
            Some("the database did not answer"),
            "{}",
            c.name
        );
    }
    let topology = system::topology(&store).await;
    if matches!(store.topology(), tickertape::storage::Topology::Standalone) {
        assert!(topology.error.is_none());
    } else {
        assert!(topology.error.is_some(), "{topology:?}");
        assert!(topology.members.is_empty());
    }
}

/// `collStats` scans every document on the embedded server, so
/// the system page shows sizes measured at most once a minute: a view
/// within the minute reads no size, one after it shows the last sizes and
/// measures again in the background, and a failed measurement is tried
/// again at the next view.
#[tokio::test]
async fn collection_sizes_are_kept_a_minute_and_measured_again_in_the_background() {
    use crate::proxy::{write_target, Mode, Proxy};
    use std::sync::Arc;
    use tickertape::clock::SharedClock;
    use tickertape::storage::system::{SizeCache, Sizes};
    let minute = |s: &Sizes| {
        let c = &s.collections[0];
        assert_eq!(c.level, Some(Resolution::Minute));
        c.count
    };
    let app = spawn_app().await;
    let clock: SharedClock = app.clock.clone();
    let site = app.add_site("sizes.test", &[]).await;
    let view = |page: &'static str| {
        let app = &app;
        let query = format!("site={}&page={page}", site.id);
        async move {
            assert_eq!(app.pixel(&query).await.status(), 200);
            app.settle().await;
        }
    };
    view("/a").await;

    let kept = Arc::new(SizeCache::default());
    let first = kept.read(&app.store, &clock).await;
    assert_eq!(minute(&first), 1);
    view("/b").await;
    let again = kept.read(&app.store, &clock).await;
    assert_eq!((minute(&again), again.at), (1, first.at), "kept a minute");

    // Past its freshness: the view gets the last sizes at once, and the
    // next measurement arrives in the background.
    let stale = Arc::new(SizeCache::new(std::time::Duration::ZERO));
    assert_eq!(minute(&stale.read(&app.store, &clock).await), 2);
    view("/c").await;
    assert_eq!(
        minute(&stale.read(&app.store, &clock).await),
        2,
        "last sizes"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while minute(&stale.read(&app.store, &clock).await) != 3 {
        assert!(Instant::now() < deadline, "no new measurement");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A failure is shown once and measured again at the next view, however
    // fresh.
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.database.name = app.store.db().name().to_owned();
    settings.database.db_timeout_ms = 300;
    let store = connect(&proxy.uri(), &settings).await;
    let failing = Arc::new(SizeCache::default());
    proxy.set(Mode::Down);
    let down = failing.read(&store, &clock).await;
    assert!(
        down.collections.iter().all(|c| c.error.is_some()),
        "{down:?}"
    );
    proxy.set(Mode::Pass);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sizes = failing.read(&store, &clock).await;
        if sizes.collections.iter().all(|c| c.error.is_none()) {
            assert_eq!(minute(&sizes), 3);
            break;
        }
        assert!(Instant::now() < deadline, "not measured again: {sizes:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_direct_batch_too_large_for_the_servers_cache_goes_in_as_halves() {
    // A server of its own with a cache far too small for the batch in one
    // transaction: sent again whole it would fail until the deadline.
    if std::env::var_os("MONGODB_URI").is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = tickertape::localdb::LocalDbOptions {
        cache_size: "8M".into(),
        log_file_max: "16MB".into(),
        ..Default::default()
    };
    let db = tickertape::localdb::LocalDb::start(&localdb_binary(), dir.path(), &options)
        .await
        .expect("start a local database");
    let store = connect(db.uri(), &test_settings()).await;
    let pages: Vec<String> = (0..1000).map(|i| format!("big.test/p{i}")).collect();
    let hits: Vec<(&str, chrono::DateTime<chrono::Utc>)> =
        pages.iter().map(|p| (p.as_str(), t0())).collect();
    let writer = BucketWriter::new(&store);
    let whole = writer.apply(hits.iter().map(|&h| h.into()), None).await;
    assert!(
        matches!(&whole, Err(ApplyError::NotApplied(e)) if !e.is_transient()),
        "the server should refuse this batch whole: {whole:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let report = writer.apply_direct(&hits, deadline).await.unwrap();
    assert_eq!(report.hits, 1000);
    // Every hit once: the halves are disjoint and each went in whole.
    for level in Resolution::ALL {
        let views: i64 = store
            .buckets(level)
            .find(doc! {})
            .await
            .unwrap()
            .try_collect::<Vec<tickertape::storage::Bucket>>()
            .await
            .unwrap()
            .iter()
            .map(|b| b.total_views)
            .sum();
        assert_eq!(views, 1000, "{level:?}");
    }
}

//! The visit store (`storage::visit_log`): random visits (several pages,
//! gaps around the 30-minute rule, sources, campaigns, browsers,
//! countries, events inside and outside visits) sent through the real
//! server, and the stored visits compared with a plain computation over
//! the hits sent: steps in order, dimensions, views, duration, bounce,
//! exit. Also: the store switched off writes nothing, a site's purge takes
//! its visits, the visit retention (its TTL index, and the database
//! deleting old visits), and visit documents of the releases before parts
//! read beside the parts.
//!
//! `VISIT_LOG_SEED=<n>` replays a run; a failure prints its seed.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use tickertape::domain::sketch::Sketch;
use tickertape::storage::visit_log::{self, StoredVisit, VisitQuery};

use crate::helpers::*;
use crate::traffic::*;

/// A step's path, its event's name, and its properties sorted by key.
type ExpectedStep = (String, Option<String>, Vec<(String, String)>);

/// A visit as the hits say it should be stored: comparable field by field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Expected {
    start_ms: i64,
    entry: String,
    exit: Option<String>,
    views: i64,
    duration: i64,
    bounced: bool,
    /// (path, event, its properties sorted by key) in order.
    steps: Vec<ExpectedStep>,
    source: Option<String>,
    medium: Option<String>,
    campaign: Option<String>,
    browser: Option<String>,
    os: Option<String>,
    country: Option<String>,
}

/// The plain computation ([`visits_of`]): a person's views 30 minutes
/// apart or more are two visits; an event belongs to the visit open at its
/// time (within 30 minutes of that visit's last view), or to none.
fn expected_visits(persons: &[Person], hits: &[Hit]) -> Vec<Expected> {
    let mut out: Vec<Expected> = visits_of(hits)
        .into_iter()
        .map(|visit| {
            let (start, hits) = (visit.start, visit.hits);
            let first = hits[0];
            let person = &persons[first.person];
            let views: Vec<&&Hit> = hits.iter().filter(|h| h.event.is_none()).collect();
            let duration = views
                .iter()
                .map(|h| (h.at.timestamp() - start.timestamp()).max(0))
                .max()
                .unwrap_or(0);
            let (_, browser, os) = BROWSERS[person.user_agent];
            Expected {
                start_ms: start.timestamp_millis(),
                entry: first.path.to_owned(),
                exit: views.last().map(|h| h.path.to_owned()),
                views: views.len() as i64,
                duration,
                bounced: views.len() == 1,
                steps: hits
                    .iter()
                    .map(|h| {
                        let mut props: Vec<(String, String)> = h
                            .props
                            .iter()
                            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                            .collect();
                        props.sort();
                        (h.path.to_owned(), h.event.map(str::to_owned), props)
                    })
                    .collect(),
                source: REFERRERS[first.referrer].1.map(str::to_owned),
                medium: first.campaign.map(|c| CAMPAIGNS[c].0.to_owned()),
                campaign: first.campaign.map(|c| CAMPAIGNS[c].1.to_owned()),
                browser: Some(browser.to_owned()),
                os: Some(os.to_owned()),
                country: Some(person.country.to_owned()),
            }
        })
        .collect();
    out.sort();
    out
}

fn stored_as_expected(v: &StoredVisit) -> Expected {
    Expected {
        start_ms: v.start.timestamp_millis(),
        entry: v.entry.clone().unwrap_or_default(),
        exit: v.exit().map(str::to_owned),
        views: v.views,
        duration: v.duration,
        bounced: v.bounced(),
        steps: v
            .ordered_steps()
            .iter()
            .map(|s| (s.p.clone(), s.e.clone(), s.pr.clone()))
            .collect(),
        source: v.source.clone(),
        medium: v.medium.clone(),
        campaign: v.campaign.clone(),
        browser: v.browser.clone(),
        os: v.os.clone(),
        country: v.country.clone(),
    }
}

async fn all_visits(app: &TestApp, site: &str) -> Vec<StoredVisit> {
    let from = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
    let to = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
    visit_log::visits(&app.store, &VisitQuery::new(site, from, to))
        .await
        .unwrap()
}

#[tokio::test]
async fn random_visits_are_stored_as_a_plain_computation_over_the_hits_says() {
    let seed = std::env::var("VISIT_LOG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_127u64);
    let mut rng = Rng(seed);
    // The test's client stands for many people: its forwarded addresses
    // are theirs.
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let site = app.add_site("store.test", &[]).await;
    let start = Utc.with_ymd_and_hms(2026, 11, 22, 8, 0, 0).unwrap();
    app.clock.set(start);
    salt_ready(&app, "2026-11-22").await;
    let (persons, hits) = traffic(&mut rng, 40, start, &Shape::AT_THE_EDGE);
    send(&app, &site.id.to_string(), &persons, &hits).await;
    app.settle().await;

    let expected = expected_visits(&persons, &hits);
    let stored = all_visits(&app, "store.test").await;
    let mut got: Vec<Expected> = stored.iter().map(stored_as_expected).collect();
    got.sort();
    assert_eq!(got.len(), expected.len(), "visits (seed {seed})");
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e, "seed {seed}");
    }
    // Each step has its own number, from 0, and the first is the entry.
    for v in &stored {
        let numbers: Vec<i32> = v.ordered_steps().iter().map(|s| s.n).collect();
        let mut unique = numbers.clone();
        unique.dedup();
        assert_eq!(numbers, unique, "seed {seed}");
        assert_eq!(numbers[0], 0);
    }
    // The registers estimate the people as the buckets' sketch does.
    let mut sketch = Sketch::default();
    for v in &stored {
        let (index, rank) = v.register().expect("a register");
        sketch.raise(index, rank);
    }
    // The figures the buckets hold for the day, summed from the visits.
    let visits = stored.len() as i64;
    let views: i64 = stored.iter().map(|v| v.views).sum();
    let bounces = stored.iter().filter(|v| v.bounced()).count() as i64;
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>("site_views_day")
            .find(doc! {"site": "store.test"})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut buckets = Sketch::default();
    for d in &docs {
        if let Ok(visitors) = d.get_document("visitors") {
            buckets.merge_stored(visitors).unwrap();
        }
    }
    assert_eq!(
        sketch.estimate_count(),
        buckets.estimate_count(),
        "seed {seed}"
    );
    // Two people may share a register (about 1 run in 20 for 40
    // people): the estimate is the people's within the sketch's error.
    let people = persons.len() as u64;
    assert!(
        sketch.estimate_count().abs_diff(people) <= people / 20 + 1,
        "{} for {people} people (seed {seed})",
        sketch.estimate_count()
    );
    let sum = |name: &str| -> i64 {
        docs.iter()
            .filter_map(|d| d.get_document(name).ok())
            .flat_map(|slots| slots.iter().map(|(_, v)| v.as_i64().unwrap()))
            .sum()
    };
    let bucket_views: i64 = docs.iter().map(|d| d.get_i64("totalViews").unwrap()).sum();
    assert_eq!(views, bucket_views, "views (seed {seed})");
    assert_eq!(visits, sum("visits"), "visits (seed {seed})");
    assert_eq!(visits - bounces, sum("nonBounces"), "bounces (seed {seed})");
    let duration: i64 = stored.iter().map(|v| v.duration).sum();
    assert_eq!(duration, sum("duration"), "duration (seed {seed})");

    // Reads: a half-open range of starts, a filter, a sample, no steps.
    let first = got[0].start_ms;
    let from = DateTime::<Utc>::from_timestamp_millis(first).unwrap();
    let one = VisitQuery::new("store.test", from, from + TimeDelta::milliseconds(1));
    assert_eq!(visit_log::count(&app.store, &one).await.unwrap(), 1);
    let after = VisitQuery::new(
        "store.test",
        from + TimeDelta::milliseconds(1),
        start + TimeDelta::days(1),
    );
    assert_eq!(
        visit_log::count(&app.store, &after).await.unwrap(),
        stored.len() as u64 - 1
    );
    let us = VisitQuery {
        filter: doc! {"country": "US"},
        steps: false,
        ..VisitQuery::new("store.test", start, start + TimeDelta::days(1))
    };
    let found = visit_log::visits(&app.store, &us).await.unwrap();
    assert_eq!(
        found.len(),
        expected
            .iter()
            .filter(|e| e.country.as_deref() == Some("US"))
            .count()
    );
    assert!(found.iter().all(|v| v.steps.is_empty() && v.views > 0));
    let half = VisitQuery {
        sample: Some(visit_log::Sample::rate(0.5)),
        ..VisitQuery::new("store.test", start, start + TimeDelta::days(1))
    };
    let sampled = visit_log::visits(&app.store, &half).await.unwrap();
    assert!(sampled.len() < stored.len());
    assert!(sampled.iter().all(|v| v.reg.unwrap() < 8192));
}

/// A visit open across the upgrade: its first steps in a visit document
/// (as releases before parts upserted them), its later ones in a part, as
/// stored (`{site, start, v: [entries]}`); and a visit of parts only. A
/// read gives each once, merged.
#[tokio::test]
async fn a_visit_document_of_an_earlier_release_is_read_with_its_parts() {
    let app = spawn_app().await;
    let start = Utc.with_ymd_and_hms(2026, 11, 20, 10, 0, 0).unwrap();
    let at = bson::DateTime::from_chrono(start);
    let step = |n: i32, t: i32, p: &str| visit_log::Step {
        n,
        t,
        p: p.into(),
        e: None,
        pr: Vec::new(),
        rv: None,
    };
    let legacy = StoredVisit {
        id: 7,
        site: "upgrade.test".into(),
        start: at,
        entry: Some("/".into()),
        source: Some("google.com".into()),
        medium: None,
        campaign: None,
        browser: Some("Firefox".into()),
        os: None,
        device: None,
        country: Some("DE".into()),
        reg: Some(12),
        rank: Some(3),
        views: 2,
        duration: 40,
        steps: vec![step(0, 0, "/"), step(1, 40, "/a")],
    };
    visit_log::collection(&app.store, false)
        .insert_one(&legacy)
        .await
        .unwrap();
    app.store
        .db()
        .collection::<Document>(visit_log::PARTS)
        .insert_one(doc! {
            "site": "upgrade.test",
            "start": at,
            "v": [
                {"i": 7i64, "s": at, "g": 12, "w": 1i64, "d": 80i64,
                 "st": [{"n": 2, "t": 80, "p": "/b"}]},
                {"i": 8i64, "s": at, "g": 99, "w": 1i64, "d": 0i64,
                 "f": {"entry": "/x", "country": "US", "reg": 99, "rank": 1},
                 "st": [{"n": 0, "t": 0, "p": "/x"}]},
            ],
        })
        .await
        .unwrap();
    let visits = all_visits(&app, "upgrade.test").await;
    assert_eq!(visits.len(), 2, "{visits:?}");
    let mut want = legacy;
    want.views = 3;
    want.duration = 80;
    want.steps.push(step(2, 80, "/b"));
    assert_eq!(visits[0], want);
    assert_eq!(visits[0].exit(), Some("/b"));
    assert_eq!((visits[1].id, visits[1].entry.as_deref()), (8, Some("/x")));
    assert_eq!(visits[1].register(), Some((99, 1)));
    // A filter on a dimension holds on the merged visit.
    let us = VisitQuery {
        filter: doc! {"country": "US"},
        ..VisitQuery::new("upgrade.test", start, start + TimeDelta::days(1))
    };
    let found = visit_log::visits(&app.store, &us).await.unwrap();
    assert_eq!(found.iter().map(|v| v.id).collect::<Vec<_>>(), [8]);
}

#[tokio::test]
async fn the_store_switched_off_writes_no_visit_and_the_buckets_are_the_same() {
    let app = spawn_app_with(|s| s.ingest.visit_store = false).await;
    let site = app.add_site("off.test", &[]).await;
    let id = site.id.to_string();
    for path in ["/", "/a", "/b"] {
        let r = app.pixel(&format!("site={id}&page={path}")).await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;
    assert!(all_visits(&app, "off.test").await.is_empty());
    assert_eq!(
        app.site_total_views(tickertape::domain::Resolution::Day)
            .await,
        3
    );
    // Its progress still moved: nothing waits in the journal for it.
    assert_eq!(app.journal.stats().visits_backlog(), 0);
}

#[tokio::test]
async fn a_purged_site_loses_its_visits_their_day_packs_and_imported_properties() {
    let app = spawn_app().await;
    let site = app.add_site("gone.test", &[]).await;
    let r = app.pixel(&format!("site={}&page=/", site.id)).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    assert_eq!(all_visits(&app, "gone.test").await.len(), 1);
    // Its day packed too: the purge takes the pack and the counter.
    use tickertape::storage::{visit_days, visit_packs};
    let day = visit_days::day_of(tickertape::clock::Clock::now(&*app.clock));
    visit_packs::build_day(&app.store, "gone.test", day)
        .await
        .unwrap();
    let left = |collection: &'static str| {
        let coll = app.store.db().collection::<bson::Document>(collection);
        async move {
            coll.count_documents(doc! {"site": "gone.test"})
                .await
                .unwrap()
        }
    };
    assert_eq!(left(visit_days::COLLECTION).await, 1);
    assert_eq!(left(visit_log::PARTS).await, 1);
    assert_eq!(
        left(visit_packs::COLLECTION).await,
        u64::from(visit_packs::CHUNKS)
    );
    // And what an import brought of its properties.
    use tickertape::storage::imported_properties as imported;
    app.store
        .db()
        .collection::<bson::Document>(imported::COLLECTION)
        .insert_one(doc! {"_id": "x", "site": "gone.test", "event": "404", "key": "path", "value": "/a", "events": 1i64, "visits": 1i64})
        .await
        .unwrap();
    tickertape::storage::sites::mark_deleted(&app.store, &site, Utc::now())
        .await
        .unwrap();
    let purged = tickertape::storage::site_purge::purge_due(
        &app.store,
        Utc::now() + TimeDelta::seconds(1),
        TimeDelta::zero(),
    )
    .await
    .unwrap();
    assert_eq!(purged.len(), 1);
    assert!(all_visits(&app, "gone.test").await.is_empty());
    assert_eq!(left(visit_days::COLLECTION).await, 0);
    assert_eq!(left(visit_packs::COLLECTION).await, 0);
    assert_eq!(left(visit_log::PARTS).await, 0);
    assert_eq!(left(imported::COLLECTION).await, 0);
}

/// The `retention` index of the visits, as `listIndexes` returns it: the
/// same on their documents and their parts.
async fn visit_ttl(store: &tickertape::storage::Store) -> Option<i64> {
    let ttl = ttl_of(store, visit_log::COLLECTION).await;
    assert_eq!(ttl_of(store, visit_log::PARTS).await, ttl, "the parts' TTL");
    ttl
}

/// The `retention` index of `collection`, as `listIndexes` returns it.
async fn ttl_of(store: &tickertape::storage::Store, collection: &str) -> Option<i64> {
    let reply = store
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
        .map(|i| tickertape::storage::values::count(i.get("expireAfterSeconds")))
}

#[tokio::test]
async fn visit_retention_is_its_own_setting_and_follows_a_change() {
    let app = spawn_app_with(|s| s.retention.visit_retention_days = 30).await;
    assert_eq!(visit_ttl(&app.store).await, Some(30 * 86_400));
    // The day counters and packs go with their day's visits.
    use tickertape::storage::{visit_days, visit_packs};
    for collection in [visit_days::COLLECTION, visit_packs::COLLECTION] {
        assert_eq!(
            ttl_of(&app.store, collection).await,
            Some(30 * 86_400),
            "{collection}"
        );
    }
    let all = visit_packs::apply_retention(&app.store, Some(9))
        .await
        .unwrap();
    for collection in [
        visit_log::COLLECTION,
        visit_log::PARTS,
        visit_days::COLLECTION,
        visit_packs::COLLECTION,
    ] {
        assert_eq!(
            ttl_of(&app.store, collection).await,
            Some(9 * 86_400),
            "{all}"
        );
    }
    let changed = visit_log::apply_retention(&app.store, Some(7))
        .await
        .unwrap();
    assert!(changed.contains("collMod"), "{changed}");
    assert_eq!(visit_ttl(&app.store).await, Some(7 * 86_400));
    let dropped = visit_log::apply_retention(&app.store, None).await.unwrap();
    assert!(dropped.contains("dropped"), "{dropped}");
    assert_eq!(visit_ttl(&app.store).await, None);
}

#[tokio::test]
async fn visit_retention_deletes_old_visits() {
    // A server of its own, its TTL monitor every second (see the buckets'
    // retention test).
    let dir = tempfile::tempdir().unwrap();
    let options = tickertape::localdb::LocalDbOptions {
        cache_size: "64M".into(),
        log_file_max: "16MB".into(),
        ..Default::default()
    };
    let db = tickertape::localdb::LocalDb::start(&localdb_binary(), dir.path(), &options)
        .await
        .expect("start a local database");
    let store = connect(db.uri(), &test_settings()).await;
    store
        .client()
        .database("admin")
        .run_command(doc! {"setParameter": 1, "ttlMonitorSleepSecs": 1})
        .await
        .unwrap();
    visit_log::apply_retention(&store, Some(1)).await.unwrap();
    let visit = |id: i64, start: DateTime<Utc>| StoredVisit {
        id,
        site: "old.test".into(),
        start: bson::DateTime::from_chrono(start),
        entry: Some("/".into()),
        source: None,
        medium: None,
        campaign: None,
        browser: None,
        os: None,
        device: None,
        country: None,
        reg: Some(1),
        rank: Some(1),
        views: 1,
        duration: 0,
        steps: vec![],
    };
    let coll = visit_log::collection(&store, false);
    coll.insert_many([
        visit(1, Utc.with_ymd_and_hms(2020, 1, 1, 10, 0, 0).unwrap()),
        visit(2, Utc::now()),
    ])
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while coll.count_documents(doc! {}).await.unwrap() > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the old visit was not expired within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let left = coll.find_one(doc! {}).await.unwrap().unwrap();
    assert_eq!(left.id, 2);
    // The parts go by their visits' day.
    let parts = store.db().collection::<Document>(visit_log::PARTS);
    let old = Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap();
    let today = Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    parts
        .insert_many([
            doc! {"site": "old.test", "start": bson::DateTime::from_chrono(old + TimeDelta::hours(10)),
                  "day": bson::DateTime::from_chrono(old), "v": []},
            doc! {"site": "old.test", "start": bson::DateTime::now(),
                  "day": bson::DateTime::from_chrono(today), "v": []},
        ])
        .await
        .unwrap();
    while parts.count_documents(doc! {}).await.unwrap() > 1 {
        assert!(
            std::time::Instant::now() < deadline + std::time::Duration::from_secs(60),
            "the old part was not expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    drop(store);
    db.stop();
}

/// One client far past a visit's step limit, with the longest paths the
/// pixel takes: its visit stays within the byte budget (its document grew
/// to about 1 MB when only the step count bounded it), keeps the first
/// steps that fit and no later one, and still counts every view; the
/// buckets count the views and the visit once.
#[tokio::test]
async fn a_flood_of_long_paths_keeps_its_visit_within_the_byte_budget() {
    use tickertape::storage::visit_log::{step_bytes, MAX_STEPS, MAX_STEP_BYTES};
    let app = spawn_app().await;
    let site = app.add_site("flood.test", &[]).await;
    app.clock.set(t0());
    // 40 pages of 511 bytes (the longest, with the leading slash, is 512).
    let path = |i: u32| format!("/{:03}{}", i % 40, "x".repeat(507));
    let views = MAX_STEPS + 500;
    for i in 0..views {
        // One event halfway, past the budget: counted as an event, not
        // kept as a step.
        let event = if i == views / 2 { "&e=Play" } else { "" };
        if !event.is_empty() {
            let q = format!("site={}&page={}{event}", site.id, path(i));
            assert_eq!(app.pixel(&q).await.status(), 200);
        }
        let r = app
            .pixel(&format!("site={}&page={}", site.id, path(i)))
            .await;
        assert_eq!(r.status(), 200, "view {i}");
    }
    app.settle().await;

    let visits = all_visits(&app, "flood.test").await;
    assert_eq!(visits.len(), 1, "one visit");
    let visit = visits[0].clone();
    let bytes = bson::to_vec(&visit).unwrap().len();
    assert!(
        bytes <= MAX_STEP_BYTES + 2_048,
        "the visit takes {bytes} bytes, past the budget of {MAX_STEP_BYTES}"
    );
    assert_eq!(visit.views, i64::from(views), "every view counted");
    let fit = MAX_STEP_BYTES
        / step_bytes(
            &format!("flood.test{}", path(0)),
            None,
            &tickertape::domain::Properties::EMPTY,
            None,
        );
    let kept: Vec<i32> = visit.ordered_steps().iter().map(|s| s.n).collect();
    assert_eq!(
        kept,
        (0..fit as i32).collect::<Vec<_>>(),
        "the first steps that fit, no later one"
    );
    assert!(visit.steps.iter().all(|s| s.is_view()));
    assert_eq!(visit.entry.as_deref(), Some(path(0).as_str()));
    // The buckets: every view, one visit (over the site's writer parts).
    let days: Vec<Document> = {
        use futures::TryStreamExt;
        app.store
            .db()
            .collection::<Document>(
                tickertape::storage::buckets::Subject::Site
                    .collection(tickertape::domain::Resolution::Day),
            )
            .find(doc! {})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    let count = tickertape::storage::values::count;
    let views_counted: i64 = days.iter().map(|d| count(d.get("totalViews"))).sum();
    // `visits` is a map of the day's hour slots to visits started.
    let visits_counted: i64 = days
        .iter()
        .filter_map(|d| d.get_document("visits").ok())
        .flat_map(|slots| slots.values().map(|v| count(Some(v))))
        .sum();
    assert_eq!((views_counted, visits_counted), (i64::from(views), 1));
    let counts = tickertape::storage::visit_days::counts(
        &app.store,
        "flood.test",
        tickertape::storage::visit_days::day_of(t0()),
        tickertape::storage::visit_days::day_of(t0()) + 1,
    )
    .await
    .unwrap();
    let count = counts.values().next().copied().unwrap_or_default();
    assert_eq!((count.hits, count.visits), (i64::from(views) + 1, 1));
}

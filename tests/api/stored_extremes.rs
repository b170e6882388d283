//! Buckets holding what no live write makes (a count near the largest
//! NumberLong, a date in year +262142 or −1), as a hand edit or an import
//! from before imports were bounded leaves them: the write-behind sets the
//! statements the database refuses aside and goes on with the rest of the
//! lane, and the backfills leave the far-out dates out and go on with the
//! next site. Nothing stops another site's figures.

use bson::{doc, Document};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tickertape::reports::page_totals;
use tickertape::storage::bucket_writer::BucketWriter;
use tickertape::storage::progress::{self, Stream};
use tickertape::storage::sites::{self, NewSite, Site};
use tickertape::storage::{site_totals, Resolution, Store, Subject};

use crate::helpers::*;

/// The largest NumberLong: one more view can never be added. (The probe
/// left one view short of it, two imported rows of 9223372036854775000
/// and 806, and two views in one batch overflowed; at the largest any
/// view does, however the hits are batched.)
const FULL: i64 = i64::MAX;

/// One sample of a labelled metric, e.g. `name{stream="rollups"}`.
async fn labelled_metric(app: &TestApp, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{{labels}}} ");
    app.metrics()
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("{name}{{{labels}}} missing from /metrics"))
        .parse()
        .unwrap()
}

async fn sum_views(store: &Store, collection: &str, filter: Document) -> i64 {
    use futures::TryStreamExt;
    let docs: Vec<Document> = store
        .db()
        .collection::<Document>(collection)
        .find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    docs.iter()
        .map(|d| tickertape::storage::values::count(d.get("totalViews")))
        .sum()
}

/// Waits (a bounded time: on a lane stuck retrying it never happens)
/// until every journaled hit's hours and days are applied.
async fn rollups_drained(app: &TestApp, within: Duration) {
    let deadline = Instant::now() + within;
    let stats = app.journal.stats();
    while stats.backlog() > 0 || stats.rollups_backlog() > 0 || stats.sources_backlog() > 0 {
        assert!(
            Instant::now() < deadline,
            "the lane is stuck: {} hits' hours and days, {} hits' sources not applied after {within:?}",
            stats.rollups_backlog(),
            stats.sources_backlog(),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_bucket_the_database_refuses_is_set_aside_and_the_rest_of_the_lane_goes_on() {
    // One lane: both sites' hits share it, as the probe's two tenants did
    // on lane 0.
    let app = spawn_app_with(|s| s.ingest.journal_lanes = 1).await;
    let poisoned = app.add_site("poisoned.test", &[]).await;
    let healthy = app.add_site("healthy.test", &[]).await;
    let hour = Resolution::Hour.floor(t0());
    let at = bson::DateTime::from_chrono(hour);
    // The shape the probe left: the site's hour bucket of the live lane's
    // part, and its home page's hour bucket, full.
    app.store
        .db()
        .collection::<Document>(Subject::Site.collection(Resolution::Hour))
        .insert_one(doc! {
            "site": "poisoned.test", "timestamp": at, "part": 0_i32,
            "totalViews": FULL, "minutes": {"1": FULL},
        })
        .await
        .unwrap();
    app.store
        .db()
        .collection::<Document>(Resolution::Hour.collection())
        .insert_one(doc! {
            "page": "poisoned.test/", "timestamp": at,
            "totalViews": FULL, "minutes": {"1": FULL},
        })
        .await
        .unwrap();
    // Its home page's minute bucket with a slot map of another type (a
    // hand edit), which no `$inc` of a slot can go into.
    app.store
        .db()
        .collection::<Document>(Resolution::Minute.collection())
        .insert_one(doc! {
            "page": "poisoned.test/",
            "timestamp": bson::DateTime::from_chrono(Resolution::Minute.floor(t0())),
            "totalViews": 0_i64, "seconds": "not a document",
        })
        .await
        .unwrap();
    // And the site's sources of that hour: its views' total there.
    app.store
        .db()
        .collection::<Document>("site_breakdowns_hour")
        .insert_one(doc! {
            "site": "poisoned.test", "timestamp": at, "part": 0_i32,
            "totalViews": FULL, "sources": {"search.test": FULL},
        })
        .await
        .unwrap();
    let position = |stream| {
        let store = app.store.clone();
        let journal = app.journal.id().to_string();
        async move {
            progress::position(&store, &journal, 0, stream)
                .await
                .unwrap()
        }
    };

    // Two views from one visitor on the poisoned site (the second one's
    // visit credits go to the same page), and views on the healthy one,
    // on the same lane; each from a search engine, so the sources count
    // them.
    for (site, page) in [
        (&poisoned, "/"),
        (&healthy, "/"),
        (&poisoned, "/"),
        (&healthy, "/pricing"),
    ] {
        let r = app
            .pixel(&format!(
                "site={}&page={page}&ref=https%3A%2F%2Fsearch.test%2F",
                site.id
            ))
            .await;
        assert_eq!(r.status(), 200);
    }
    rollups_drained(&app, Duration::from_secs(20)).await;

    // The healthy site's hours and days are in.
    let healthy_site = doc! {"site": "healthy.test"};
    for g in [Resolution::Hour, Resolution::Day] {
        assert_eq!(
            sum_views(
                &app.store,
                Subject::Site.collection(g),
                healthy_site.clone()
            )
            .await,
            2,
            "{g:?}"
        );
    }
    // The poisoned site's other buckets are in too: its minutes and its
    // days. Only its two refused hour buckets are left as they were.
    let poisoned_site = doc! {"site": "poisoned.test"};
    assert_eq!(
        sum_views(
            &app.store,
            Subject::Site.collection(Resolution::Day),
            poisoned_site.clone()
        )
        .await,
        2
    );
    assert_eq!(
        sum_views(
            &app.store,
            Subject::Site.collection(Resolution::Minute),
            poisoned_site.clone()
        )
        .await,
        2
    );
    assert_eq!(
        sum_views(
            &app.store,
            Subject::Site.collection(Resolution::Hour),
            poisoned_site
        )
        .await,
        FULL
    );
    // Counted: the site's hour bucket and its page's, once per batch that
    // carried the poisoned site's views (one or two), two views in each.
    let statements = labelled_metric(
        &app,
        "tickertape_applier_statements_set_aside_total",
        "stream=\"rollups\"",
    )
    .await;
    assert!((2.0..=4.0).contains(&statements), "{statements}");
    assert_eq!(
        labelled_metric(
            &app,
            "tickertape_applier_hits_set_aside_total",
            "stream=\"rollups\""
        )
        .await,
        4.0
    );
    // The minutes likewise: the page's minute is set aside, its site's
    // minute (above) and the other site's pages are in.
    assert_eq!(
        sum_views(
            &app.store,
            Resolution::Minute.collection(),
            doc! {"page": {"$in": ["healthy.test/", "healthy.test/pricing"]}}
        )
        .await,
        2
    );
    let statements = labelled_metric(
        &app,
        "tickertape_applier_statements_set_aside_total",
        "stream=\"views\"",
    )
    .await;
    assert!((1.0..=2.0).contains(&statements), "{statements}");
    assert_eq!(
        labelled_metric(
            &app,
            "tickertape_applier_hits_set_aside_total",
            "stream=\"views\""
        )
        .await,
        2.0
    );
    // The sources likewise: the healthy site's are in, the poisoned
    // site's hour is set aside (its page's with it: they are one hit's).
    assert_eq!(
        sum_views(&app.store, "site_breakdowns_day", healthy_site.clone()).await,
        2
    );
    let statements = labelled_metric(
        &app,
        "tickertape_applier_statements_set_aside_total",
        "stream=\"sources\"",
    )
    .await;
    assert!((1.0..=2.0).contains(&statements), "{statements}");
    assert_eq!(
        labelled_metric(
            &app,
            "tickertape_applier_hits_set_aside_total",
            "stream=\"sources\""
        )
        .await,
        2.0
    );
    // The rollups' progress is where the minutes' is: past every hit.
    let views_at = position(Stream::Views).await;
    assert!(views_at.is_some_and(|p| p > 0));
    assert_eq!(position(Stream::Rollups).await, views_at);
    assert_eq!(position(Stream::Sources).await, views_at);
    // Ready, and later hits go in as usual.
    let ready = app
        .http
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let r = app.pixel(&format!("site={}&page=/later", healthy.id)).await;
    assert_eq!(r.status(), 200);
    rollups_drained(&app, Duration::from_secs(20)).await;
    assert_eq!(
        sum_views(
            &app.store,
            Subject::Site.collection(Resolution::Day),
            healthy_site
        )
        .await,
        3
    );
}

/// Year +262142's last day (chrono's last: the day after it overflows)
/// and year −1's first, as imports used to accept them.
fn far_out_days() -> [DateTime<Utc>; 2] {
    [(262_142, 12, 31), (-1, 1, 1)].map(|(y, m, d)| {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
    })
}

/// Page-day and site-day buckets of `domain`'s home page on the far-out
/// days, as an old import wrote them.
async fn write_far_out_buckets(store: &Store, domain: &str) {
    for day in far_out_days() {
        let at = bson::DateTime::from_chrono(day);
        store
            .db()
            .collection::<Document>(Resolution::Day.collection())
            .insert_one(doc! {"page": format!("{domain}/"), "timestamp": at, "totalViews": 5_i64, "hours": {"0": 5_i64}})
            .await
            .unwrap();
        store
            .db()
            .collection::<Document>(Subject::Site.collection(Resolution::Day))
            .insert_one(doc! {"site": domain, "timestamp": at, "part": 0_i32, "totalViews": 5_i64, "hours": {"0": 5_i64}})
            .await
            .unwrap();
    }
}

async fn add_site(store: &Store, domain: &str) -> Site {
    let new = NewSite {
        time_zone: tickertape::domain::TimeZone::parse("UTC").unwrap(),
        domain: tickertape::domain::DomainName::parse(domain).unwrap(),
        aliases: vec![],
        name: None,
        owners: vec![],
    };
    sites::insert(store, new, Utc::now()).await.unwrap()
}

/// Fourteen views on three past days of each site (every level, and the
/// site totals, as the write path writes them).
async fn write_past_views(store: &Store, domains: &[&str]) {
    let pages: Vec<String> = domains
        .iter()
        .flat_map(|d| [format!("{d}/"), format!("{d}/a")])
        .collect();
    let hits: Vec<(&str, DateTime<Utc>)> = (0..28)
        .map(|i| {
            (
                pages[i % pages.len()].as_str(),
                t0() - TimeDelta::days(3) + TimeDelta::hours(i as i64 * 2),
            )
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    BucketWriter::new(store)
        .apply_direct(&hits, deadline)
        .await
        .unwrap();
}

/// How many page summaries (of days) the site has.
async fn summaries_of(store: &Store, site: &Site) -> u64 {
    store
        .db()
        .collection::<Document>(tickertape::storage::page_summaries::COLLECTION)
        .count_documents(doc! {"site": site.id.to_string()})
        .await
        .unwrap()
}

async fn unset_site_totals(store: &Store, site: &Site) {
    store
        .db()
        .collection::<Document>("sites")
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$unset": {"siteTotals": ""}},
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_backfills_leave_far_out_dates_out_and_go_on_with_the_next_site() {
    let app = spawn_app().await;
    // Sites are backfilled in the order of their domains: the far-out
    // dates' site first.
    let far = app.add_site("a-far.test", &[]).await;
    let fine = app.add_site("b-fine.test", &[]).await;
    write_past_views(&app.store, &["a-far.test", "b-fine.test"]).await;
    write_far_out_buckets(&app.store, "a-far.test").await;

    // Page summaries, as `serve` makes them every hour.
    let done = page_totals::backfill_all(&app.store).await.unwrap();
    let days = |domain: &str| done.iter().find(|(d, _)| d == domain).map(|(_, n)| *n);
    assert_eq!(days("b-fine.test"), Some(3), "{done:?}");
    assert_eq!(days("a-far.test"), Some(3), "its sane days: {done:?}");
    assert!(summaries_of(&app.store, &fine).await > 0);
    assert!(summaries_of(&app.store, &far).await > 0);
    // Counted on the store that ran it (`serve`'s own is on its
    // /metrics: see the next test).
    let background = app.store.background();
    let skipped = background.skipped_buckets.load(Relaxed);
    assert_eq!(skipped, 2, "the two far-out site-day buckets");
    assert_eq!(background.failed_sites.load(Relaxed), 0);

    // Site totals, as at the upgrade: both sites to do.
    for site in [&far, &fine] {
        unset_site_totals(&app.store, site).await;
    }
    let done = site_totals::backfill_missing(&app.store).await.unwrap();
    let domains: Vec<&str> = done.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(domains, ["a-far.test", "b-fine.test"]);
    assert_eq!(done[0].1.skipped, 2);
    assert_eq!(done[1].1.views, 14);
    // The far-out site's sane days still add up: its live part's 14, and
    // the two far-out site-day buckets it already had.
    assert_eq!(done[0].1.views, 14 + 10);

    // The commands, on the same database.
    let command = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
            .args(args)
            .env("MONGODB_URI", database_uri())
            .env("TICKERTAPE_DATABASE", app.store.db().name())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    for args in [
        &["backfill-site-totals", "--all"][..],
        &["backfill-page-summaries"][..],
    ] {
        let out = command(args);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "{args:?}: {:?}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stdout.contains("b-fine.test: "), "{args:?}: {stdout}");
        assert!(
            stdout.contains("a-far.test: 2 "),
            "the far-out buckets are reported: {args:?}: {stdout}"
        );
    }
}

#[tokio::test]
async fn the_hourly_backfill_in_serve_goes_on_past_a_site_with_far_out_dates() {
    // The database as `serve` finds it at start.
    let settings = test_settings();
    let store = connect(database_uri(), &settings).await;
    tickertape::indexes::ensure(&store).await.unwrap();
    let far = add_site(&store, "a-far.test").await;
    let fine = add_site(&store, "b-fine.test").await;
    write_past_views(&store, &["a-far.test", "b-fine.test"]).await;
    write_far_out_buckets(&store, "a-far.test").await;
    assert_eq!(summaries_of(&store, &fine).await, 0);

    let app = spawn_app_on(database_uri(), settings).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while summaries_of(&app.store, &fine).await == 0 {
        assert!(
            Instant::now() < deadline,
            "the background backfill never summarised the site after the far-out one"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(summaries_of(&app.store, &far).await > 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while app
        .metric("tickertape_backfill_skipped_buckets_total")
        .await
        < 2.0
    {
        assert!(Instant::now() < deadline, "the far-out buckets not counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

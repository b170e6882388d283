//! The write path under load, back-pressure, outages and shutdown.

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use tickertape::journal::AckMode;
use tickertape::storage::Resolution;

use crate::helpers::*;
use crate::proxy::{write_target, Mode, Proxy};

const PAGES: usize = 20;
const HITS: usize = 2_000;

async fn exact_totals_under_concurrency(mode: AckMode) {
    let mut app = spawn_app_with(|s| {
        s.ingest.ack_mode = mode;
        s.ingest.journal_lanes = 4;
    })
    .await;
    let site = app.add_site("load.test", &[]).await;
    let start = t0() - TimeDelta::seconds(7) - TimeDelta::minutes(1); // 10:00:00
    let mut expected: HashMap<(String, DateTime<Utc>), i64> = HashMap::new();
    let mut next = 0usize;
    for (minute, count) in [667usize, 667, 666].into_iter().enumerate() {
        let minute_start = start + TimeDelta::minutes(minute as i64);
        app.clock.set(minute_start);
        // Seconds tick by while the requests are in flight.
        let clock = app.clock.clone();
        let ticker = tokio::spawn(async move {
            for s in 1..60 {
                tokio::time::sleep(Duration::from_millis(4)).await;
                clock.set(minute_start + TimeDelta::seconds(s));
            }
        });
        let requests: Vec<String> = (next..next + count)
            .map(|i| format!("site={}&page=/p/{}", site.id, i % PAGES))
            .collect();
        for i in next..next + count {
            *expected
                .entry((format!("load.test/p/{}", i % PAGES), minute_start))
                .or_default() += 1;
        }
        next += count;
        let answers: Vec<Result<u16, String>> = futures::stream::iter(requests)
            .map(|q| {
                let app = &app;
                async move {
                    let url = format!("{}/pixel.gif?{q}", app.address);
                    match app.http.get(url).send().await {
                        Ok(r) => Ok(r.status().as_u16()),
                        // The chain names the cause ("connection reset by
                        // peer", an incomplete message).
                        Err(e) => Err(format!("{:?}", anyhow::Error::from(e))),
                    }
                }
            })
            .buffer_unordered(256)
            .collect()
            .await;
        ticker.await.unwrap();
        let failed: Vec<&String> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
        assert!(
            failed.is_empty(),
            "{mode:?}: {} requests got no answer (a reset connection is a lost view); the first: {}",
            failed.len(),
            failed[0]
        );
        assert!(
            answers.iter().all(|a| a == &Ok(200)),
            "{mode:?}: not all counted"
        );
    }
    // Fast mode answered on enqueue: stopping drains the queue.
    app.stop().await;

    let minutes = app.buckets(Resolution::Minute).await;
    let hours = app.buckets(Resolution::Hour).await;
    let days = app.buckets(Resolution::Day).await;
    let got: HashMap<_, _> = minutes
        .iter()
        .map(|b| ((b.page.clone(), b.timestamp.to_chrono()), b.total_views))
        .collect();
    assert_eq!(got, expected, "{mode:?}: per page-minute totals");
    for b in &minutes {
        assert_eq!(
            b.slots.values().sum::<i64>(),
            b.total_views,
            "seconds add up"
        );
    }
    assert_eq!(hours.len(), PAGES);
    for h in &hours {
        for m in 0..3 {
            let minute_total = got[&(h.page.clone(), start + TimeDelta::minutes(m as i64))];
            assert_eq!(h.slot(m), minute_total, "{}: minutes.{m}", h.page);
        }
        assert_eq!(h.total_views, (HITS / PAGES) as i64);
    }
    assert_eq!(days.len(), PAGES);
    for d in &days {
        assert_eq!(d.slot(10), (HITS / PAGES) as i64);
        assert_eq!(d.total_views, (HITS / PAGES) as i64);
    }
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, HITS as i64, "{mode:?} {g:?}");
    }
    let stats = &app.ingest.stats;
    let batches = stats.batches.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        batches < HITS as u64,
        "hits were merged into fewer flushes ({batches})"
    );
}

#[tokio::test]
async fn two_thousand_concurrent_hits_give_exact_totals_in_durable_mode() {
    exact_totals_under_concurrency(AckMode::Durable).await;
}

#[tokio::test]
async fn two_thousand_concurrent_hits_give_exact_totals_in_fast_mode() {
    exact_totals_under_concurrency(AckMode::Fast).await;
}

/// The pixel's listener queues a burst of 2,000 new connections while
/// nothing accepts them (its workers busy on a loaded machine): with
/// std's backlog of 128 the rest of the burst waited on dropped SYNs,
/// seconds each, and a client gave up or was reset.
#[tokio::test]
async fn the_listener_queues_a_burst_of_two_thousand_connections() {
    let listener = tickertape::app::bind(&test_settings()).unwrap();
    let address = listener.local_addr().unwrap();
    // Nothing accepts: every handshake the kernel completes is queued.
    let connects = futures::stream::iter(0..2_000)
        .map(|_| async move {
            tokio::time::timeout(
                Duration::from_secs(20),
                tokio::net::TcpStream::connect(address),
            )
            .await
        })
        .buffer_unordered(2_000)
        .collect::<Vec<_>>()
        .await;
    let waited = connects.iter().filter(|c| c.is_err()).count();
    let failed = connects.iter().filter(|c| matches!(c, Ok(Err(_)))).count();
    assert_eq!(
        (waited, failed),
        (0, 0),
        "connections left waiting past 20 s, refused or reset"
    );
    drop(listener);
}

/// A page path of about 500 bytes, so a few thousand hits fill 1 MiB.
fn long_path(i: usize) -> String {
    format!("/{}/{i}", "x".repeat(480))
}

#[tokio::test]
async fn with_the_database_away_hits_are_answered_from_the_journal_and_applied_when_it_returns() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.database.write_timeout_ms = 300;
    settings.ingest.ready_max_backlog_secs = 3600;
    let app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("example.com", &[]).await;
    let ready = || async {
        app.http
            .get(format!("{}/readyz", app.address))
            .send()
            .await
            .unwrap()
    };
    assert_eq!(ready().await.status(), 200);

    proxy.set(Mode::Down);
    for i in 0..200 {
        let r = app
            .pixel(&format!("site={}&page=/down/{}", site.id, i % 7))
            .await;
        assert_eq!(r.status(), 200, "answered from the journal");
    }
    // The applier keeps failing: not ready, and the backlog is visible.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = ready().await;
    assert_eq!(r.status(), 503);
    assert!(app.metric("tickertape_journal_backlog_hits").await >= 200.0);
    assert!(app.metric("tickertape_apply_failures_total").await >= 1.0);

    proxy.set(Mode::Pass);
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, 200, "{g:?}");
    }
    assert_eq!(app.metric("tickertape_journal_backlog_hits").await, 0.0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ready().await.status() != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "ready again after the drain"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_full_journal_answers_503_journal_full_and_keeps_what_it_accepted() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.database.write_timeout_ms = 300;
    settings.ingest.journal_budget_mb = 1;
    // Segments close after 2 s, so that applied ones can be deleted while
    // the test runs (the 16 MiB default segment never fills here).
    settings.ingest.journal_segment_secs = 2;
    let mut app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("example.com", &[]).await;

    proxy.set(Mode::Down); // nothing is applied, so nothing is freed
    let mut accepted = 0;
    let mut refused = 0;
    for i in 0..3_000 {
        // A visitor each: a visit's later hits also name its entry and
        // previous pages, which would make these long records three times
        // as long.
        let visitor = format!("{BROWSER_UA} v/{i}");
        let r = app
            .pixel_with(
                &format!("site={}&page={}", site.id, long_path(i % 40)),
                &[("user-agent", &visitor)],
            )
            .await;
        match r.status().as_u16() {
            200 => accepted += 1,
            503 => {
                assert_eq!(r.headers()["x-tickertape-reason"], "journal-full");
                assert_eq!(r.headers()["retry-after"], "1");
                assert_eq!(r.bytes().await.unwrap().len(), 43);
                refused += 1;
            }
            s => panic!("unexpected status {s}"),
        }
    }
    assert!(refused > 0, "the journal never filled");
    assert!((1_000..3_000).contains(&accepted), "accepted {accepted}");

    proxy.set(Mode::Pass);
    // Every stream drains its backlog, however busy the machine: a
    // condition with a bound far past what it takes (a second or two
    // here), not the helpers' minute.
    let stats = app.journal.stats();
    let drain = std::time::Instant::now() + Duration::from_secs(300);
    while stats.backlog()
        + stats.rollups_backlog()
        + stats.sources_backlog()
        + stats.visits_backlog()
        > 0
    {
        assert!(
            std::time::Instant::now() < drain,
            "not drained: {} hits, {} hours and days, {} sources, {} visits",
            stats.backlog(),
            stats.rollups_backlog(),
            stats.sources_backlog(),
            stats.visits_backlog()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, accepted, "{g:?}");
    }
    // Applied segments are deleted (once every stream, the visit store's
    // too, has applied them, and the segment has closed): room again.
    // (Before records carried their place in a visit, the last small hit
    // fitted in what the long ones left of the budget, so this passed
    // without any deletion.)
    app.settle().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = app.pixel(&format!("site={}&page=/after", site.id)).await;
        if r.status() == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no room after the drain: {}",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.stop().await;
}

async fn lost_replies_are_resolved_by_the_progress_document(mode: Mode) -> TestApp {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.database.write_timeout_ms = 300; // an attempt gives up after 1.3 s
    settings.ingest.journal_lanes = 1;
    let app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("example.com", &[]).await;
    // Warm the connection pool, so no handshake is caught by the loss.
    assert_eq!(
        app.pixel(&format!("site={}&page=/warm", site.id))
            .await
            .status(),
        200
    );
    app.settle().await;

    proxy.set(mode);
    let r = app.pixel(&format!("site={}&page=/once", site.id)).await;
    assert_eq!(r.status(), 200, "answered from the journal");
    let failures = || {
        app.ingest
            .stats
            .flush_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while failures() == 0 {
        assert!(std::time::Instant::now() < deadline, "no attempt failed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.set(Mode::Pass);

    for g in Resolution::ALL {
        let once: i64 = app
            .buckets(g)
            .await
            .iter()
            .filter(|b| b.page == "example.com/once")
            .map(|b| b.total_views)
            .sum();
        assert_eq!(once, 1, "{g:?}");
    }
    app
}

#[tokio::test]
async fn a_lost_commit_reply_is_resolved_by_the_progress_document_and_counted_once() {
    let app = lost_replies_are_resolved_by_the_progress_document(Mode::LoseCommitReplies).await;
    // The commit was applied; only the progress document could tell.
    let resolved = app
        .ingest
        .stats
        .resolved_by_progress
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(resolved, 1);
}

#[tokio::test]
async fn lost_replies_inside_a_batch_leave_nothing_half_applied() {
    lost_replies_are_resolved_by_the_progress_document(Mode::LoseReplies).await;
}

#[tokio::test]
async fn graceful_shutdown_in_fast_mode_persists_every_accepted_hit() {
    let mut app = spawn_app_with(fast).await;
    let site = app.add_site("example.com", &[]).await;
    let statuses: Vec<u16> = futures::stream::iter(0..HITS)
        .map(|i| {
            let app = &app;
            let q = format!("site={}&page=/s/{}", site.id, i % 50);
            async move { app.pixel(&q).await.status().as_u16() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let accepted = statuses.iter().filter(|&&s| s == 200).count() as i64;
    assert_eq!(accepted, HITS as i64);
    app.stop().await; // straight after the last answer
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, accepted, "{g:?}");
    }
    let r = app
        .http
        .get(format!("{}/healthz", app.address))
        .send()
        .await;
    assert!(r.is_err(), "the server is stopped");
}

#[tokio::test]
async fn a_counted_hit_gets_the_gif_without_cookies_or_caching() {
    let app = spawn_app().await;
    let site = app.add_site("example.com", &[]).await;
    let r = app.pixel(&format!("site={}&page=/", site.id)).await;
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "image/gif");
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["cross-origin-resource-policy"], "cross-origin");
    assert!(h.get("set-cookie").is_none());
    assert!(h.get("x-tickertape-reason").is_none());
    let body = r.bytes().await.unwrap();
    assert_eq!(body.as_ref(), tickertape::web::pixel::GIF.as_slice());
}

#[tokio::test]
async fn a_damaged_journal_is_replayed_up_to_the_damage_and_reported() {
    use tickertape::journal::{Accepted, Journal, Record};
    let journal_dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.ingest.journal_dir = Some(journal_dir.path().to_owned());
    settings.ingest.journal_lanes = 1;
    // A previous run journaled ten hits and died before applying them; then
    // a bit of the fourth record rotted on disk.
    {
        let (journal, _feeds) = Journal::open(&settings.journal_config()).unwrap();
        for i in 0..10 {
            let record = Record {
                page: format!("example.com/r/{i}"),
                at: t0(),
                source: None,
                visit: None,
                labels: Default::default(),
                props: Default::default(),
                revenue: None,
                engagement: None,
            };
            let Ok(Accepted::Pending(synced)) = journal.appender().submit(record) else {
                panic!("durable mode");
            };
            synced.await.unwrap().unwrap();
        }
        journal.close_writers().await;
    }
    let lane = journal_dir.path().join("lane-0");
    let segment = std::fs::read_dir(&lane)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&segment).unwrap();
    let one = Record {
        page: "example.com/r/0".into(),
        at: t0(),
        source: None,
        visit: None,
        labels: Default::default(),
        props: Default::default(),
        revenue: None,
        engagement: None,
    }
    .encoded_len();
    bytes[48 + 3 * one + 20] ^= 0x10;
    std::fs::write(&segment, &bytes).unwrap();

    let app = spawn_app_on(database_uri(), settings).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    // The three records before the damage are applied, nothing after it.
    app.settle().await;
    let pages: Vec<String> = app
        .buckets(Resolution::Minute)
        .await
        .into_iter()
        .map(|b| b.page)
        .collect();
    assert_eq!(
        pages,
        ["example.com/r/0", "example.com/r/1", "example.com/r/2"]
    );
    assert_eq!(app.metric("tickertape_journal_corrupt_segments").await, 1.0);
    let (_, html) = app
        .login("admin@example.com")
        .await
        .text("/admin/system")
        .await;
    assert!(html.contains("id=\"corrupt-segments\""), "{html}");
    assert!(html.contains("record checksum mismatch"), "{html}");
    // Once what preceded the damage is applied, the file is kept aside.
    assert!(!segment.exists());
    let aside: Vec<_> = std::fs::read_dir(journal_dir.path().join("quarantine"))
        .unwrap()
        .collect();
    assert_eq!(aside.len(), 1);
}

#[tokio::test]
async fn shutdown_with_the_database_away_leaves_the_backlog_for_the_next_start() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let journal_dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings();
    settings.database.write_timeout_ms = 300;
    settings.ingest.shutdown_drain_secs = 1;
    settings.ingest.journal_dir = Some(journal_dir.path().to_owned());
    let name = settings.database.name.clone();
    let mut app = spawn_app_on(&proxy.uri(), settings.clone()).await;
    let site = app.add_site("example.com", &[]).await;
    proxy.set(Mode::Down);
    for i in 0..50 {
        let r = app
            .pixel(&format!("site={}&page=/later/{}", site.id, i % 5))
            .await;
        assert_eq!(r.status(), 200);
    }
    let started = std::time::Instant::now();
    app.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "shutdown waits at most the drain time (plus an attempt): {:?}",
        started.elapsed()
    );
    assert_eq!(app.journal.stats().backlog(), 50, "left in the journal");
    // Gone with the process in real life: the journal's lock, and (here) the
    // test database, which the next start finds empty.
    drop(app);

    // The next start, on the same journal, applies them.
    proxy.set(Mode::Pass);
    let next = spawn_app_on(database_uri(), settings).await;
    for g in Resolution::ALL {
        assert_eq!(next.total_views(g).await, 50, "{g:?}");
    }
    assert_eq!(next.store.db().name(), name);
    assert!(
        next.journal
            .stats()
            .replayed_records
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 50
    );
}

#[tokio::test]
async fn many_pages_in_small_batches_drain_exact_on_every_level() {
    // More pages than a batch may hold buckets: the minutes and the hours
    // and days go in many bounded batches each, on streams of their own,
    // and every level, page and site, ends exact.
    const PAGES: usize = 1_500;
    const HITS: usize = 3_000;
    let app = spawn_app_with(|s| {
        s.ingest.journal_lanes = 2;
        s.ingest.apply_max_buckets = 120;
        s.ingest.apply_max_hits = 400;
        s.ingest.rollups_max_hits = 900;
        s.security.new_pages_per_hour = 10_000;
    })
    .await;
    let site = app.add_site("many.test", &[]).await;
    let statuses: Vec<u16> = futures::stream::iter(0..HITS)
        .map(|i| {
            let (app, site) = (&app, &site);
            async move {
                let q = format!("site={}&page=/p/{}", site.id, (i * 7) % PAGES);
                app.pixel(&q).await.status().as_u16()
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(statuses.iter().all(|&s| s == 200), "all counted");
    app.settle().await;
    let mut expected: HashMap<String, i64> = HashMap::new();
    for i in 0..HITS {
        *expected
            .entry(format!("many.test/p/{}", (i * 7) % PAGES))
            .or_default() += 1;
    }
    for g in Resolution::ALL {
        let mut got: HashMap<String, i64> = HashMap::new();
        for b in app.buckets(g).await {
            *got.entry(b.page).or_default() += b.total_views;
        }
        assert_eq!(got, expected, "{g:?}: every page exact");
        let site_total: i64 = app
            .store
            .db()
            .collection::<bson::Document>(tickertape::storage::Subject::Site.collection(g))
            .find(bson::doc! {"site": "many.test"})
            .await
            .unwrap()
            .map(|d| d.unwrap().get_i64("totalViews").unwrap())
            .collect::<Vec<i64>>()
            .await
            .iter()
            .sum();
        assert_eq!(site_total, HITS as i64, "{g:?}: the site's total");
    }
    // The bounds held: the minutes needed many batches, each of at most
    // 120 buckets, hence far more batches than hits / max hits.
    let batches = app.metric("tickertape_apply_batch_size_count").await;
    assert!(batches >= (PAGES / 120) as f64, "{batches} minutes batches");
    let statements = app
        .metrics()
        .await
        .lines()
        .filter_map(|l| l.strip_prefix("tickertape_apply_statements_total{stream=\"rollups\"} "))
        .map(|v| v.parse::<f64>().unwrap())
        .next()
        .unwrap();
    // Every page's hour and day, page and site, at least once.
    assert!(
        statements >= (2 * PAGES) as f64,
        "{statements} rollups statements"
    );
}

#[tokio::test]
async fn over_the_page_cap_the_pixel_never_waits_on_the_database() {
    // New pages beyond the first-sight budget used to
    // cost a database lookup each (up to 2 s with the database away). The
    // admission is decided in memory now: with the database down, thirty
    // new pages over the cap are answered at once from the journal (the
    // old lookup would have taken about a minute).
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.security.new_pages_per_hour = 2;
    settings.ingest.ready_max_backlog_secs = 3600;
    let app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("away.test", &[]).await;
    proxy.set(Mode::Down);
    let started = std::time::Instant::now();
    let mut overflowed = 0;
    for i in 0..32 {
        let r = app.pixel(&format!("site={}&page=/new/{i}", site.id)).await;
        assert_eq!(r.status(), 200, "answered from the journal");
        if r.headers().get("x-tickertape-reason").is_some() {
            overflowed += 1;
        }
    }
    assert_eq!(overflowed, 30, "beyond the budget, under /(other)");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no lookup per new page: {:?}",
        started.elapsed()
    );
    proxy.set(Mode::Pass);
    assert_eq!(app.total_views(Resolution::Day).await, 32);
}

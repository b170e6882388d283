//! The write path under load, back-pressure, outages and shutdown.

use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use tickertape::settings::AckMode;
use tickertape::storage::Granularity;

use crate::helpers::*;
use crate::proxy::{write_target, Mode, Proxy};

const PAGES: usize = 20;
const HITS: usize = 2_000;

async fn exact_totals_under_concurrency(mode: AckMode) {
    let mut app = spawn_app_with(|s| {
        s.ingest.ack_mode = mode;
        s.ingest.writers = 4;
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
        let statuses: Vec<u16> = futures::stream::iter(requests)
            .map(|q| {
                let app = &app;
                async move { app.pixel(&q).await.status().as_u16() }
            })
            .buffer_unordered(256)
            .collect()
            .await;
        ticker.await.unwrap();
        assert!(
            statuses.iter().all(|&s| s == 200),
            "{mode:?}: not all counted"
        );
    }
    // Fast mode answered on enqueue: stopping drains the queue.
    app.stop().await;

    let minutes = app.buckets(Granularity::Minute).await;
    let hours = app.buckets(Granularity::Hour).await;
    let days = app.buckets(Granularity::Day).await;
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
    for g in Granularity::ALL {
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

#[tokio::test]
async fn a_full_queue_answers_503_and_keeps_what_it_accepted() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    fast(&mut settings);
    settings.ingest.writers = 1;
    settings.ingest.queue_capacity = 4;
    settings.ingest.store_retry_ms = 60_000;
    let mut app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("example.com", &[]).await;

    proxy.set(Mode::Down); // the writer blocks retrying its first batch
    let mut accepted = 0;
    let mut refused = 0;
    for i in 0..20 {
        let r = app.pixel(&format!("site={}&page=/q/{i}", site.id)).await;
        match r.status().as_u16() {
            200 => accepted += 1,
            503 => {
                assert_eq!(r.headers()["x-tickertape-reason"], "queue-full");
                assert_eq!(r.headers()["retry-after"], "1");
                assert_eq!(r.bytes().await.unwrap().len(), 43);
                refused += 1;
            }
            s => panic!("unexpected status {s}"),
        }
    }
    assert!(refused > 0, "the queue never filled");
    assert!((4..20).contains(&accepted), "accepted {accepted}");

    proxy.set(Mode::Pass);
    app.stop().await;
    assert_eq!(app.total_views(Granularity::Minute).await, accepted);
    assert_eq!(app.total_views(Granularity::Day).await, accepted);
}

#[tokio::test]
async fn an_unreachable_database_answers_503_after_the_retry_budget() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    settings.ingest.store_retry_ms = 1_500;
    settings.database.write_timeout_ms = 300;
    let app = spawn_app_on(&proxy.uri(), settings).await;
    let site = app.add_site("example.com", &[]).await;

    proxy.set(Mode::Down);
    let started = std::time::Instant::now();
    let r = app.pixel(&format!("site={}&page=/down", site.id)).await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["x-tickertape-reason"], "store-failed");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );

    proxy.set(Mode::Pass);
    let r = app.pixel(&format!("site={}&page=/up", site.id)).await;
    assert_eq!(r.status(), 200, "recovers once the database is back");
    let pages: Vec<_> = app
        .buckets(Granularity::Minute)
        .await
        .into_iter()
        .map(|b| b.page)
        .collect();
    assert_eq!(pages, ["example.com/up"], "the refused hit was not stored");
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
    for g in Granularity::ALL {
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
    assert_eq!(body.as_ref(), tickertape::ingest::pixel::GIF.as_slice());
}

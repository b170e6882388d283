//! The costly reads (filtered reports, funnels) apart from the pixel: a
//! read over the concurrency limits is answered 503 with `Retry-After`
//! (the API, the pages and the CSVs); one past its time budget is stopped
//! and answered 503; one whose client leaves is stopped; and while costly
//! reads run the pixel answers every hit 200.
//!
//! A read is held in flight by a proxy that drops the replies to the
//! visit store's first query (`find` on the day counters), so the tests
//! wait for conditions (the `/metrics` gauges), never for a time.

use bson::doc;
use chrono::TimeDelta;
use std::time::Duration;
use tickertape::accounts::Role;
use tickertape::storage::visit_log::{self, StoredVisit};

use crate::helpers::*;
use crate::json_api::create_token;
use crate::proxy::{write_target, Mode, Proxy};

/// The start of `{find: "visit_days", …}` as it goes on the wire (BSON: a
/// string element `find`, the name's length with its NUL, the name).
const FIND_DAY_COUNTERS: &[u8] = b"\x02find\x00\x0b\x00\x00\x00visit_days\x00";

const FILTERED: &str = "range=12mo&filter=page%3A%2Fblog%2F*";

/// Waits until `/metrics` shows `name` at `want` (60 s at most).
async fn metric_reaches(app: &TestApp, name: &str, want: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = app.metric(name).await;
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} stayed at {got}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Held {
    app: TestApp,
    proxy: Proxy,
    site: String,
    token: String,
    login: Login,
    owner: uuid::Uuid,
}

/// An app whose database connection goes through a proxy, a site, an
/// owner signed in and an API token.
async fn held_app(configure: impl FnOnce(&mut tickertape::settings::Settings)) -> Held {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let mut settings = test_settings();
    configure(&mut settings);
    let app = spawn_app_on(&proxy.uri(), settings).await;
    let owner = app.add_user("o@example.com", Role::Owner).await;
    let site = app.add_site("held.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let login = app.login("o@example.com").await;
    let token = create_token(&login, "t", None).await;
    Held {
        site: site.id.to_string(),
        app,
        proxy,
        token,
        login,
        owner: owner.id,
    }
}

/// A filtered API read of `site`, with its own client and a timeout that
/// only stops a test that would otherwise hang.
async fn api_read(
    app: &TestApp,
    token: &str,
    site: &str,
    timeout: Duration,
) -> reqwest::Result<reqwest::Response> {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .unwrap()
        .get(format!(
            "{}/api/v1/sites/{site}/visits?{FILTERED}",
            app.address
        ))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
}

fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()
        .get("retry-after")
        .expect("a Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn filtered_reads_over_the_limits_are_answered_503_with_retry_after() {
    let held = held_app(|s| {
        s.database.report_concurrency = 1;
        s.database.report_site_concurrency = 1;
        s.database.report_queue_ms = 100;
    })
    .await;
    let (app, site) = (&held.app, held.site.clone());
    held.proxy.set(Mode::LoseRepliesAfter(FIND_DAY_COUNTERS));
    let first = {
        let (address, token, site) = (app.address.clone(), held.token.clone(), site.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("{address}/api/v1/sites/{site}/visits?{FILTERED}"))
                .header("authorization", format!("Bearer {token}"))
                .send()
                .await
        })
    };
    metric_reaches(app, "tickertape_report_reads_running", 1.0).await;

    // The API: the same site, and (the limit in all) another site.
    let r = api_read(app, &held.token, &site, Duration::from_secs(30))
        .await
        .expect("answered, not held");
    assert_eq!(r.status(), 503);
    assert!(retry_after(&r) >= 1);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "reports_busy");
    let other = app.add_site("other.test", &[]).await;
    app.set_owners(&other, &[held.owner]).await;
    let r = api_read(
        app,
        &held.token,
        &other.id.to_string(),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 503, "the limit in all");
    // The pages and the CSVs, through their own error types.
    for path in [
        format!("/sites/{site}?{FILTERED}"),
        format!("/sites/{site}/pages.csv?{FILTERED}"),
        format!("/sites/{site}/funnels?{FILTERED}"),
    ] {
        let r = held.login.get(&path).await;
        assert_eq!(r.status(), 503, "{path}");
        assert!(retry_after(&r) >= 1, "{path}");
    }
    assert!(
        app.metric("tickertape_report_reads_refused_busy_total")
            .await
            >= 5.0
    );
    // The unfiltered reports are not limited.
    let r = held.login.get(&format!("/sites/{site}?range=12mo")).await;
    assert_eq!(r.status(), 200);
    first.abort();
    held.proxy.set(Mode::Pass);
}

#[tokio::test]
async fn a_read_past_its_time_budget_is_stopped_and_answered_503() {
    let held = held_app(|s| s.database.report_max_time_ms = 1_000).await;
    let app = &held.app;
    held.proxy.set(Mode::LoseRepliesAfter(FIND_DAY_COUNTERS));
    // The database never answers; the budget does (before: no answer).
    let r = api_read(app, &held.token, &held.site, Duration::from_secs(60))
        .await
        .expect("answered within its budget");
    assert_eq!(r.status(), 503);
    assert_eq!(retry_after(&r), 30);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "report_out_of_time");
    assert_eq!(
        app.metric("tickertape_report_reads_out_of_time_total")
            .await,
        1.0
    );
    // The work itself has stopped, not only its answer.
    metric_reaches(app, "tickertape_report_reads_running", 0.0).await;
    held.proxy.set(Mode::Pass);
}

#[tokio::test]
async fn a_client_that_leaves_stops_its_read() {
    let held = held_app(|_| {}).await;
    let app = &held.app;
    held.proxy.set(Mode::LoseRepliesAfter(FIND_DAY_COUNTERS));
    let gone = {
        let (address, token, site) = (app.address.clone(), held.token.clone(), held.site.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("{address}/api/v1/sites/{site}/visits?{FILTERED}"))
                .header("authorization", format!("Bearer {token}"))
                .send()
                .await
        })
    };
    metric_reaches(app, "tickertape_report_reads_running", 1.0).await;
    // The client goes away: its connection closes.
    gone.abort();
    metric_reaches(app, "tickertape_report_reads_abandoned_total", 1.0).await;
    metric_reaches(app, "tickertape_report_reads_running", 0.0).await;
    held.proxy.set(Mode::Pass);
}

/// Visits of `site` over the past year: `plain` short ones, and `crafted`
/// ones of 2,000 views of 500-byte paths each (about 1 MB to read each).
async fn seed_visits(app: &TestApp, site: &str, plain: i64, crafted: i64) {
    let now = t0();
    let long_path = format!("/blog/{}", "x".repeat(494));
    let visit = |id: i64| {
        let start = now - TimeDelta::minutes(id * 365 * 24 * 60 / (plain + crafted).max(1));
        let steps = if id < crafted { 2_000 } else { 3 };
        StoredVisit {
            id: id + 1,
            site: site.into(),
            start: bson::DateTime::from_chrono(start),
            entry: Some("/".into()),
            source: None,
            medium: None,
            campaign: None,
            browser: Some("Firefox".into()),
            os: None,
            device: None,
            country: Some("DE".into()),
            reg: Some((id % 1000) as i32),
            rank: Some(1),
            views: steps,
            duration: steps,
            steps: (0..steps)
                .map(|n| visit_log::Step {
                    n: n as i32,
                    t: n as i32,
                    p: if id < crafted {
                        long_path.clone()
                    } else if n == 1 {
                        "/blog/a".into()
                    } else {
                        "/".into()
                    },
                    e: None,
                    pr: Vec::new(),
                    rv: None,
                })
                .collect(),
        }
    };
    let coll = visit_log::collection(&app.store, false);
    let mut batch = Vec::new();
    for id in 0..plain + crafted {
        batch.push(visit(id));
        if batch.len() == 500 {
            coll.insert_many(std::mem::take(&mut batch)).await.unwrap();
        }
    }
    if !batch.is_empty() {
        coll.insert_many(batch).await.unwrap();
    }
    assert!(coll.count_documents(doc! {"site": site}).await.unwrap() > 0);
}

#[tokio::test]
async fn the_pixel_answers_every_hit_while_costly_reads_run() {
    let app = spawn_app().await;
    let owner = app.add_user("o@example.com", Role::Owner).await;
    let site = app.add_site("busy.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let login = app.login("o@example.com").await;
    let token = create_token(&login, "t", None).await;
    seed_visits(&app, "busy.test", 20_000, 20).await;

    // Eight clients read the year, filtered by a pattern, again and again
    // until the pixel's hits are all answered.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (address, token, id, stop) = (
                app.address.clone(),
                token.clone(),
                site.id.to_string(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut statuses = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = http
                        .get(format!("{address}/api/v1/sites/{id}/visits?{FILTERED}"))
                        .header("authorization", format!("Bearer {token}"))
                        .send()
                        .await
                        .expect("a read is answered, never reset");
                    statuses.push(r.status().as_u16());
                }
                statuses
            })
        })
        .collect();
    metric_reaches(&app, "tickertape_report_reads_running", 2.0).await;
    let started = app.metric("tickertape_report_reads_started_total").await;

    // Meanwhile 400 hits from eight clients: every one answered 200.
    let pixel = reqwest::Client::builder()
        .user_agent(BROWSER_UA)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let hits = futures::future::join_all((0..8).map(|c| {
        let (pixel, address, id) = (pixel.clone(), app.address.clone(), site.id.to_string());
        async move {
            let mut answers = Vec::new();
            for i in 0..50 {
                let r = pixel
                    .get(format!("{address}/pixel.gif?site={id}&page=/p{c}-{i}"))
                    .send()
                    .await;
                answers.push(r.map(|r| r.status().as_u16()).map_err(|e| e.to_string()));
            }
            answers
        }
    }))
    .await;
    // The reads were running all along, not done before the hits.
    let running = app.metric("tickertape_report_reads_running").await;
    let finished = app.metric("tickertape_report_reads_started_total").await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answers: Vec<_> = hits.into_iter().flatten().collect();
    let bad: Vec<_> = answers.iter().filter(|a| **a != Ok(200)).collect();
    assert!(bad.is_empty(), "pixel answers other than 200: {bad:?}");
    assert_eq!(answers.len(), 400);
    assert!(
        running > 0.0 || finished > started,
        "no costly read ran beside the pixel"
    );
    for reader in readers {
        for status in reader.await.unwrap() {
            assert!(status == 200 || status == 503, "a read answered {status}");
        }
    }
}

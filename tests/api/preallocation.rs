//! Preallocation: what it inserts, idempotency, racing live traffic, equal
//! report numbers, the scheduler, and the admin page, JSON endpoint and CLI.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, TimeZone, Timelike, Utc};
use futures::{StreamExt, TryStreamExt};
use tickertape::accounts::Role;
use tickertape::domain::Page;
use tickertape::preallocation::scheduler::Scheduler;
use tickertape::preallocation::{self, runs, PreallocRequest, Scope, Trigger};
use tickertape::reports::{queries, Period, Resolution};

use crate::helpers::*;

fn at(d: u32, h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, m, s).unwrap()
}

fn request(scope: Scope, from: DateTime<Utc>, hours: u32, threshold: i64) -> PreallocRequest {
    PreallocRequest {
        scope,
        from,
        hours,
        threshold,
    }
}

async fn docs_of(app: &TestApp, g: Resolution, page: &str) -> Vec<Document> {
    app.store
        .db()
        .collection::<Document>(g.collection())
        .find(doc! {"page": page})
        .sort(doc! {"timestamp": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_active_page_gets_61_zero_filled_buckets_and_an_idle_one_none() {
    let app = spawn_app().await;
    // Current hour 10:00 (t0 is 10:01:07): /busy has 3 views, /quiet 1.
    app.write_hits(&[
        ("p.test/busy", t0()),
        ("p.test/busy", t0()),
        ("p.test/busy", t0()),
        ("p.test/quiet", t0()),
    ])
    .await;
    let run = preallocation::run(
        &app.store,
        &request(Scope::AllActive, at(22, 11, 0, 0), 1, 2),
        Trigger::Cli,
        "test",
        t0(),
    )
    .await
    .unwrap();
    assert_eq!((run.pages, run.inserted, run.already_present), (1, 61, 0));
    assert!(run.errors.is_empty(), "{:?}", run.errors);

    let next_hour =
        |d: &Document| d.get_datetime("timestamp").unwrap().to_chrono() >= at(22, 11, 0, 0);
    let minutes: Vec<_> = docs_of(&app, Resolution::Minute, "p.test/busy")
        .await
        .into_iter()
        .filter(next_hour)
        .collect();
    assert_eq!(minutes.len(), 60);
    for (i, m) in minutes.iter().enumerate() {
        assert_eq!(
            m.get_datetime("timestamp").unwrap().to_chrono(),
            at(22, 11, i as u32, 0)
        );
        assert_eq!(m.get("totalViews"), Some(&Bson::Int64(0)));
        let seconds = m.get_document("seconds").unwrap();
        assert_eq!(seconds.len(), 60);
        assert!(seconds.iter().all(|(_, v)| *v == Bson::Int32(0)));
    }
    let hours: Vec<_> = docs_of(&app, Resolution::Hour, "p.test/busy")
        .await
        .into_iter()
        .filter(next_hour)
        .collect();
    assert_eq!(hours.len(), 1);
    assert_eq!(hours[0].get_document("minutes").unwrap().len(), 60);
    assert_eq!(
        docs_of(&app, Resolution::Day, "p.test/busy").await.len(),
        1,
        "no new day bucket mid-day"
    );
    assert!(
        docs_of(&app, Resolution::Minute, "p.test/quiet")
            .await
            .iter()
            .all(|d| !next_hour(d)),
        "below threshold"
    );

    // Twice: nothing new, everything already there.
    let again = preallocation::run(
        &app.store,
        &request(Scope::AllActive, at(22, 11, 0, 0), 1, 2),
        Trigger::Cli,
        "test",
        t0(),
    )
    .await
    .unwrap();
    assert_eq!((again.inserted, again.already_present), (0, 61));
    assert_eq!(
        runs::recent(&app.store, 10).await.unwrap().len(),
        2,
        "both runs recorded"
    );
}

#[tokio::test]
async fn the_first_hour_of_a_day_also_gets_the_day_bucket() {
    let app = spawn_app().await;
    let late = at(22, 23, 30, 0);
    app.write_hits(&[("p.test/", late)]).await;
    let run = preallocation::run(
        &app.store,
        &request(Scope::AllActive, at(23, 0, 0, 0), 1, 1),
        Trigger::Cli,
        "test",
        late,
    )
    .await
    .unwrap();
    assert_eq!(run.inserted, 62);
    let days = docs_of(&app, Resolution::Day, "p.test/").await;
    assert_eq!(days.len(), 2);
    assert_eq!(
        days[1].get_datetime("timestamp").unwrap().to_chrono(),
        at(23, 0, 0, 0)
    );
    assert_eq!(days[1].get_document("hours").unwrap().len(), 24);
    assert_eq!(days[1].get("totalViews"), Some(&Bson::Int64(0)));
}

#[tokio::test]
async fn preallocation_racing_live_traffic_loses_nothing_and_duplicates_nothing() {
    let app = spawn_app_with(|s| s.ingest.journal_lanes = 4).await;
    let site = app.add_site("race.test", &[]).await;
    let pages: Vec<String> = (0..20).map(|i| format!("/r/{i}")).collect();
    for p in &pages {
        assert_eq!(
            app.pixel(&format!("site={}&page={p}", site.id))
                .await
                .status(),
            200
        );
    }
    app.settle().await;
    // Preallocate this hour and the next while 1,000 hits arrive in it.
    let store = app.store.clone();
    let prealloc = tokio::spawn(async move {
        preallocation::run(
            &store,
            &request(Scope::AllActive, at(22, 10, 0, 0), 2, 1),
            Trigger::Cli,
            "test",
            t0(),
        )
        .await
    });
    let clock = app.clock.clone();
    let ticker = tokio::spawn(async move {
        for s in 0..240 {
            clock.set(t0() + TimeDelta::seconds(s));
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    });
    let statuses: Vec<u16> = futures::stream::iter(0..1000)
        .map(|i| {
            let app = &app;
            let q = format!("site={}&page={}", site.id, pages[i % pages.len()]);
            async move { app.pixel(&q).await.status().as_u16() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    ticker.await.unwrap();
    let run = prealloc.await.unwrap().unwrap();
    assert!(statuses.iter().all(|&s| s == 200));
    assert!(run.errors.is_empty(), "{:?}", run.errors);
    assert_eq!(run.pages, 20);
    assert_eq!(run.inserted + run.already_present, 20 * 2 * 61);
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, 1020, "{g:?}");
        let dupes: Vec<Document> = app
            .store
            .db()
            .collection::<Document>(g.collection())
            .aggregate([
                doc! {"$group": {"_id": {"p": "$page", "t": "$timestamp"}, "n": {"$sum": 1}}},
                doc! {"$match": {"n": {"$gt": 1}}},
            ])
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert!(dupes.is_empty(), "{g:?}: {dupes:?}");
    }
    let minute_docs = app
        .store
        .buckets(Resolution::Minute)
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(
        minute_docs,
        20 * 120,
        "every minute of both hours exists once per page"
    );
}

#[tokio::test]
async fn preallocated_and_upserted_buckets_give_the_same_report_numbers() {
    let app = spawn_app().await;
    let pre = Page::parse("same.test/pre").unwrap();
    let up = Page::parse("same.test/up").unwrap();
    preallocation::run(
        &app.store,
        &request(Scope::Page(pre.clone()), at(22, 10, 0, 0), 2, 1),
        Trigger::Cli,
        "test",
        t0(),
    )
    .await
    .unwrap();
    let times = [
        at(22, 10, 1, 7),
        at(22, 10, 1, 7),
        at(22, 10, 30, 59),
        at(22, 11, 59, 0),
    ];
    let hits: Vec<(&str, DateTime<Utc>)> = times
        .iter()
        .flat_map(|t| [(pre.as_str(), *t), (up.as_str(), *t)])
        .collect();
    app.write_hits(&hits).await;
    for resolution in [Resolution::Minute, Resolution::Hour, Resolution::Day] {
        let period = Period::aligned(at(22, 0, 0, 0), at(23, 0, 0, 0), resolution);
        let a = queries::series(&app.store, &tickertape::reports::Scope::Page(&pre), &period)
            .await
            .unwrap();
        let b = queries::series(&app.store, &tickertape::reports::Scope::Page(&up), &period)
            .await
            .unwrap();
        assert_eq!(a, b, "{resolution:?}");
        assert_eq!(queries::total(&a), 4);
    }
    assert_eq!(
        queries::seconds_of(&app.store, &pre, at(22, 10, 1, 0))
            .await
            .unwrap(),
        queries::seconds_of(&app.store, &up, at(22, 10, 1, 0))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn the_scheduler_runs_ahead_of_each_hour_across_day_boundaries() {
    let app = spawn_app().await;
    app.write_hits(&[("s.test/", at(22, 10, 1, 0))]).await;
    app.clock.set(at(22, 10, 45, 0));
    let scheduler = Scheduler::new(
        app.store.clone(),
        app.clock.clone(),
        TimeDelta::minutes(10),
        1,
    );
    assert_eq!(scheduler.next_due(), at(22, 10, 50, 0));
    assert!(scheduler.tick().await.is_none(), "not due yet");

    app.clock.set(at(22, 10, 50, 0));
    let run = scheduler.tick().await.expect("due at 10:50");
    assert_eq!(run.from_hour.to_chrono(), at(22, 11, 0, 0));
    assert_eq!(
        (run.pages, run.inserted, run.trigger.as_str()),
        (1, 61, "schedule")
    );
    assert!(scheduler.tick().await.is_none(), "once per hour");
    assert_eq!(scheduler.next_due(), at(22, 11, 50, 0));

    // The page is active in the 23:00 hour; the run before midnight adds
    // the new day's bucket.
    app.write_hits(&[("s.test/", at(22, 23, 10, 0))]).await;
    app.clock.set(at(22, 23, 51, 0));
    let run = scheduler.tick().await.expect("due at 23:50");
    assert_eq!(run.from_hour.to_chrono(), at(23, 0, 0, 0));
    assert_eq!(run.inserted, 62);
    assert_eq!(scheduler.next_due(), at(23, 0, 50, 0));

    // Started inside the lead window, the coming hour is still done.
    app.clock.set(at(23, 5, 55, 0));
    let late = Scheduler::new(
        app.store.clone(),
        app.clock.clone(),
        TimeDelta::minutes(10),
        1,
    );
    assert_eq!(late.next_due(), at(23, 5, 50, 0));
}

/// Two instances share the database, each with its scheduler: one of
/// them preallocates the hour (the lease), the other skips it, also when
/// it fires after the first has finished.
#[tokio::test]
async fn one_instance_runs_each_scheduled_preallocation() {
    let app = spawn_app().await;
    app.write_hits(&[("s.test/", at(22, 10, 1, 0))]).await;
    app.clock.set(at(22, 10, 50, 0));
    let instance = || {
        Scheduler::new(
            app.store.clone(),
            app.clock.clone(),
            TimeDelta::minutes(10),
            1,
        )
    };
    let (a, b) = (instance(), instance());
    let (ra, rb) = tokio::join!(a.tick(), b.tick());
    assert_eq!(
        ra.is_some() as u8 + rb.is_some() as u8,
        1,
        "exactly one ran: {ra:?} {rb:?}"
    );
    let late = instance();
    app.clock.set(at(22, 10, 51, 0));
    assert!(late.tick().await.is_none(), "the hour is done");
    let runs = tickertape::preallocation::runs::recent(&app.store, 10)
        .await
        .unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    // The next hour is taken again, by whichever comes first.
    app.clock.set(at(22, 11, 50, 0));
    assert!(late.tick().await.is_some());
}

async fn admin_world() -> (TestApp, Login, Login) {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    app.add_user("owner@example.com", Role::Owner).await;
    app.add_site("w.test", &[]).await;
    app.write_hits(&[("w.test/a", t0())]).await;
    let admin = app.login("admin@example.com").await;
    let owner = app.login("owner@example.com").await;
    (app, admin, owner)
}

async fn api(login: &Login, app: &TestApp, csrf: &str, body: &str) -> reqwest::Response {
    login
        .http
        .post(format!("{}/admin/api/preallocate", app.address))
        .header("x-csrf-token", csrf)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn admins_trigger_from_the_page_and_the_json_endpoint() {
    let (app, admin, _) = admin_world().await;
    let r = admin
        .post(
            "/admin/preallocation",
            &[
                ("csrf", &admin.csrf),
                ("scope", "site"),
                ("site", "w.test"),
                ("page", ""),
                ("from", "2026-11-22T11:00"),
                ("hours", "2"),
            ],
        )
        .await;
    // The run goes on in the background; its page refreshes until done.
    assert_eq!(r.status(), 303);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let html = loop {
        let (_, html) = admin.text(&location).await;
        if !html.contains("http-equiv=\"refresh\"") {
            break html;
        }
        assert!(html.contains("This page refreshes until it is done"));
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        html.contains("122 buckets inserted, 0 already present"),
        "result shown"
    );
    assert!(html.contains("admin@example.com"), "who, in the history");

    // The JSON endpoint answers 202 at once, with where to poll.
    let r = api(
        &admin,
        &app,
        &admin.csrf,
        r#"{"page": "w.test/new", "from": "2026-11-22T11:00", "hours": 1}"#,
    )
    .await;
    assert_eq!(r.status(), 202);
    let status_url = r.headers()["location"].to_str().unwrap().to_owned();
    let json: serde_json::Value = r.json().await.unwrap();
    assert_eq!(json["scope"], "page w.test/new");
    assert!(status_url.ends_with(json["id"].as_str().unwrap()));
    let json = loop {
        let json: serde_json::Value = admin.get(&status_url).await.json().await.unwrap();
        if json["status"] != "running" {
            break json;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(json["status"], "done");
    assert_eq!(
        (
            json["inserted"].as_u64(),
            json["pages"].as_u64(),
            json["documents"].as_u64()
        ),
        (Some(61), Some(1), Some(61))
    );
    let r = admin
        .get("/admin/api/preallocate/00000000-0000-0000-0000-000000000000")
        .await;
    assert_eq!(r.status(), 404);

    let (_, html) = admin.text("/admin/system").await;
    assert!(
        html.contains("Next scheduled run") && html.contains("Last run"),
        "system page"
    );
    assert_eq!(runs::recent(&app.store, 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn bad_input_owners_strangers_and_forged_posts_change_nothing() {
    let (app, admin, owner) = admin_world().await;
    let bad_forms: Vec<Vec<(&str, &str)>> = vec![
        vec![("hours", "0")],
        vec![("hours", "49")],
        vec![("scope", "site"), ("site", "nowhere.test")],
        vec![("scope", "page"), ("page", "not a page")],
        vec![("scope", "page"), ("page", "nowhere.test/a")],
        vec![("from", "2026-11-22T11:30")],
        vec![("from", "tomorrow")],
        vec![("from", "2026-10-01T00:00")],
        vec![("scope", "everything")],
    ];
    for form in &bad_forms {
        let mut f = form.clone();
        f.push(("csrf", &admin.csrf));
        let r = admin.post("/admin/preallocation", &f).await;
        assert_eq!(r.status(), 400, "{form:?}");
    }
    for body in [
        r#"{"hours": 49}"#,
        r#"{"site": "nowhere.test"}"#,
        r#"{"from": "noon"}"#,
        "not json",
        r#"{"site": "w.test", "page": "w.test/a"}"#,
    ] {
        let r = api(&admin, &app, &admin.csrf, body).await;
        assert_eq!(r.status(), 400, "{body}");
        let json = r.json::<serde_json::Value>().await.unwrap();
        assert_eq!(json["error"]["code"], "invalid", "{body}");
        assert!(json["error"]["message"].is_string());
    }
    // Forged: no or wrong CSRF token.
    assert_eq!(
        admin
            .post("/admin/preallocation", &[("csrf", &"0".repeat(64))])
            .await
            .status(),
        403
    );
    assert_eq!(api(&admin, &app, "", "{}").await.status(), 403);
    // Owners: 403; strangers: to the login page.
    assert_eq!(owner.get("/admin/preallocation").await.status(), 403);
    assert_eq!(
        owner
            .post("/admin/preallocation", &[("csrf", &owner.csrf)])
            .await
            .status(),
        403
    );
    assert_eq!(api(&owner, &app, &owner.csrf, "{}").await.status(), 403);
    let anonymous = app.anonymous();
    // The JSON endpoint answers a script in JSON, not with a redirect.
    let r = api(&anonymous, &app, "x", "{}").await;
    assert_eq!(r.status(), 401);
    let json = r.json::<serde_json::Value>().await.unwrap();
    assert_eq!(json["error"]["code"], "login_required");
    for r in [
        anonymous.get("/admin/preallocation").await,
        anonymous
            .post("/admin/preallocation", &[("csrf", "x")])
            .await,
    ] {
        assert_eq!(r.status(), 303);
        assert!(r.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/login"));
    }
    assert!(
        runs::recent(&app.store, 10).await.unwrap().is_empty(),
        "no run recorded"
    );
    assert_eq!(
        app.store
            .buckets(Resolution::Minute)
            .count_documents(doc! {})
            .await
            .unwrap(),
        1,
        "nothing inserted"
    );
}

#[tokio::test]
async fn the_cli_preallocates_and_refuses_bad_input() {
    let app = spawn_app().await;
    app.add_site("c.test", &[]).await;
    let db_name = app.store.db().name().to_owned();
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
            .arg("preallocate")
            .args(args)
            .env("MONGODB_URI", database_uri())
            .env("TICKERTAPE_DATABASE", &db_name)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    let first = Resolution::Hour.floor(Utc::now()) + TimeDelta::hours(1);
    let from = first.format("%Y-%m-%dT%H:00").to_string();
    // Two hours of minute and hour buckets, plus a day bucket when one of the
    // hours starts a UTC day (run at 22:xx or 23:xx UTC).
    let day_buckets = (0..2)
        .filter(|h| (first + TimeDelta::hours(*h)).hour() == 0)
        .count();
    let expected = format!("{} inserted, 0 already present", 122 + day_buckets);
    let out = cli(&["--page", "c.test/x", "--from", &from, "--hours", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&expected), "{stdout}");
    for bad in [
        vec!["--hours", "0"],
        vec!["--site", "nowhere.test"],
        vec!["--page", "c.test/x", "--from", "later"],
    ] {
        let out = cli(&bad);
        assert!(!out.status.success(), "{bad:?}");
        assert!(!out.stderr.is_empty());
    }
    let recorded = runs::recent(&app.store, 10).await.unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].trigger, "cli");
}

//! What a probe of the running app broke, each as a regression
//! test: racing the login limit, a burst of password checks, open redirects,
//! security headers, a missing database, unbounded pages, HEAD and OPTIONS,
//! and a reverse proxy.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tickertape::accounts::Role;
use tickertape::ingest::pixel::Outcome;
use tickertape::storage::Resolution;

use crate::helpers::*;
use crate::proxy::{write_target, Mode, Proxy};

/// A fresh browser that has loaded the login form: its client (holding the
/// form's CSRF cookie) and the form's token.
async fn login_form(app: &TestApp) -> (reqwest::Client, String) {
    let http = cookie_client();
    let page = app.page_text(&http, "/login").await;
    (http, csrf_in(&page).expect("the login form has a token"))
}

async fn post_login(
    app: &TestApp,
    http: &reqwest::Client,
    csrf: &str,
    email: &str,
    password: &str,
    next: &str,
) -> reqwest::Response {
    http.post(format!("{}/login", app.address))
        .form(&[
            ("email", email),
            ("password", password),
            ("csrf", csrf),
            ("next", next),
        ])
        .send()
        .await
        .unwrap()
}

// ------------------------------------------------------------ 1. the race

#[tokio::test]
async fn concurrent_logins_cannot_race_past_the_rate_limit() {
    // Enough password-check slots that only the rate limit can stop the
    // burst (the bound on checks is tested below).
    let app = spawn_app_with(|s| s.security.password_checks = Some(256)).await;
    app.add_user("a@example.com", Role::Owner).await;
    // 200 browsers, each with its own login form and CSRF cookie...
    let mut forms = Vec::new();
    for _ in 0..200 {
        forms.push(login_form(&app).await);
    }
    // ...released together: 199 wrong passwords and one right one.
    let app = Arc::new(app);
    let start = Arc::new(tokio::sync::Barrier::new(forms.len()));
    let tasks: Vec<_> = forms
        .into_iter()
        .enumerate()
        .map(|(i, (http, csrf))| {
            let (app, start) = (app.clone(), start.clone());
            tokio::spawn(async move {
                let password = if i == 100 { PASSWORD } else { "wrong password" };
                start.wait().await;
                post_login(&app, &http, &csrf, "a@example.com", password, "/sites")
                    .await
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        *statuses.entry(t.await.unwrap()).or_default() += 1;
    }
    let checked =
        statuses.get(&401).copied().unwrap_or(0) + statuses.get(&303).copied().unwrap_or(0);
    assert!(
        checked <= 5,
        "at most 5 passwords may be checked, got {statuses:?}"
    );
    assert!(checked >= 1, "{statuses:?}");
    assert_eq!(
        statuses.get(&429).copied().unwrap_or(0),
        200 - checked,
        "{statuses:?}"
    );
}

// -------------------------------------------- 2. bounded password checks

/// The resident set size of this process (the app runs in it), in bytes.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[tokio::test]
async fn a_burst_of_failed_logins_stays_within_bounded_memory() {
    let app = spawn_app_with(|s| {
        s.security.password_checks = Some(2);
        // The rate limit would stop the burst first; this test is about
        // what happens when it does not (many clients, many accounts).
        s.accounts.login_max_failures = 10_000;
    })
    .await;
    app.add_user("a@example.com", Role::Owner).await;
    let mut forms = Vec::new();
    for _ in 0..100 {
        forms.push(login_form(&app).await);
    }
    let before = rss_bytes();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(before));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let app = Arc::new(app);
    let start = Arc::new(tokio::sync::Barrier::new(forms.len()));
    let tasks: Vec<_> = forms
        .into_iter()
        .enumerate()
        .map(|(i, (http, csrf))| {
            let (app, start) = (app.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                let began = Instant::now();
                let email = format!("nobody{i}@example.com");
                let r = post_login(&app, &http, &csrf, &email, "wrong password", "/sites").await;
                (r.status().as_u16(), began.elapsed())
            })
        })
        .collect();
    let mut failed = 0;
    let mut busy = 0;
    for t in tasks {
        let (status, took) = t.await.unwrap();
        match status {
            401 => failed += 1,
            503 => {
                busy += 1;
                assert!(took < Duration::from_secs(5), "a refusal took {took:?}");
            }
            other => panic!("unexpected status {other}"),
        }
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let grew = peak
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_sub(before);
    // Unbounded, 100 checks of ~19 MiB each took the process up by almost
    // 2 GiB; two at a time need about 40 MiB.
    assert!(
        grew < 400 * 1024 * 1024,
        "the process grew by {} MiB",
        grew / 1024 / 1024
    );
    assert!(failed >= 2, "some passwords were checked ({failed} × 401)");
    assert!(
        busy > 0,
        "the burst exceeded the bound, so some were refused"
    );
}

// ----------------------------------------------------- 3. open redirects

#[tokio::test]
async fn the_redirect_after_login_stays_on_this_site() {
    let app = spawn_app_with(|s| s.accounts.login_max_failures = 1_000).await;
    app.add_user("a@example.com", Role::Owner).await;
    let cases: &[(&str, &str)] = &[
        ("/sites/x?range=7d", "/sites/x?range=7d"),
        ("/account/password", "/account/password"),
        ("/", "/"),
        ("/\t/127.0.0.1:18960/pwned", "/sites"),
        ("\t//127.0.0.1:18960/pwned", "/sites"),
        ("//127.0.0.1:18960/pwned", "/sites"),
        ("/\\127.0.0.1:18960/pwned", "/sites"),
        ("\\\\127.0.0.1:18960/pwned", "/sites"),
        ("https://127.0.0.1:18960/pwned", "/sites"),
        ("http:/127.0.0.1:18960", "/sites"),
        ("javascript:alert(1)", "/sites"),
        ("/\r/127.0.0.1:18960", "/sites"),
        ("/\n/127.0.0.1:18960", "/sites"),
        ("/a\r\nSet-Cookie: x=1", "/sites"),
        ("/\u{b}/127.0.0.1:18960", "/sites"),
        ("/\u{c}/127.0.0.1:18960", "/sites"),
        ("/\u{0}/127.0.0.1:18960", "/sites"),
        ("/\u{7f}/127.0.0.1:18960", "/sites"),
        ("/ /127.0.0.1:18960", "/sites"),
        ("/\u{a0}/127.0.0.1:18960", "/sites"),
        ("/\u{2028}/127.0.0.1:18960", "/sites"),
        ("", "/sites"),
    ];
    for (next, expected) in cases {
        // The login form carries `next` on into its hidden field...
        let http = cookie_client();
        let form = http
            .get(format!("{}/login", app.address))
            .query(&[("next", next)])
            .send()
            .await
            .unwrap();
        assert_eq!(form.status(), 200, "{next:?}");
        let html = form.text().await.unwrap();
        assert!(
            html.contains(&format!("name=\"next\" value=\"{expected}\"")),
            "{next:?}: form"
        );
        // ...and the login itself redirects only on-site.
        let csrf = csrf_in(&html).unwrap();
        let r = post_login(&app, &http, &csrf, "a@example.com", PASSWORD, next).await;
        assert_eq!(r.status(), 303, "{next:?}");
        assert_eq!(r.headers()["location"], *expected, "{next:?}");
    }
}

// -------------------------------------------------- 4. security headers

async fn security_world(https: bool) -> (TestApp, Login, String) {
    let app = spawn_app_with(|s| {
        if https {
            s.public_url = Some("https://stats.example.com".into());
        }
    })
    .await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("example.com", &[]).await;
    app.write_hits(&[("example.com/a", t0())]).await;
    let admin = if https {
        // Secure cookies are not sent back over plain http: no session.
        app.anonymous()
    } else {
        app.login("admin@example.com").await
    };
    (app, admin, site.id.to_string())
}

/// Every GET route, one per line of the router, with a real id.
fn get_routes(site: &str) -> Vec<String> {
    let mut routes: Vec<String> = [
        "/",
        "/login",
        "/tt.js",
        "/static/style.css",
        "/healthz",
        "/readyz",
        "/metrics",
        "/account/password",
        "/sites",
        "/admin",
        "/admin/sites",
        "/admin/users",
        "/admin/system",
        "/admin/preallocation",
        "/no/such/route",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for suffix in [
        "",
        "/page?path=/a",
        "/settings",
        "/series.csv?range=24h",
        "/pages.csv?range=24h",
        "/seconds.csv?path=/a&minute=2026-11-22T10:01",
        "/realtime.csv?path=/a",
    ] {
        routes.push(format!("/sites/{site}{suffix}"));
    }
    routes.push(format!("/admin/sites/{site}"));
    routes.push(format!("/admin/sites/{site}/delete"));
    routes.push(format!("/pixel.gif?site={site}&page=/a"));
    routes
}

fn assert_security_headers(r: &reqwest::Response, what: &str, https: bool) {
    let h = r.headers();
    let csp = h
        .get("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no CSP"))
        .to_str()
        .unwrap();
    assert!(
        csp.contains("default-src 'self'")
            && csp.contains("frame-ancestors 'none'")
            && !csp.contains("unsafe-inline"),
        "{what}: {csp}"
    );
    assert_eq!(h["x-frame-options"], "DENY", "{what}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(h["referrer-policy"], "same-origin", "{what}");
    assert_eq!(
        h.contains_key("strict-transport-security"),
        https,
        "{what}: HSTS only when the public URL is https"
    );
}

#[tokio::test]
async fn every_route_family_carries_the_security_headers() {
    let (app, admin, site) = security_world(false).await;
    for path in get_routes(&site) {
        let r = admin.get(&path).await;
        assert!(r.status().as_u16() < 500, "{path}: {}", r.status());
        assert_security_headers(&r, &path, false);
        if path.starts_with("/pixel.gif") {
            assert_eq!(r.headers()["cross-origin-resource-policy"], "cross-origin");
            assert_eq!(r.status(), 200);
        }
    }
    // Answers to forms and errors too: a POST with a bad token, a login.
    let r = admin.post("/admin/sites", &[("csrf", "bad")]).await;
    assert!(r.status().is_client_error());
    assert_security_headers(&r, "POST /admin/sites", false);
    let (http, csrf) = login_form(&app).await;
    let r = post_login(&app, &http, &csrf, "admin@example.com", "wrong", "/").await;
    assert_eq!(r.status(), 401);
    assert_security_headers(&r, "POST /login", false);
}

#[tokio::test]
async fn over_https_every_answer_also_carries_hsts() {
    let (app, anonymous, site) = security_world(true).await;
    for path in [
        "/login",
        "/sites",
        "/healthz",
        &format!("/pixel.gif?site={site}&page=/a"),
    ] {
        let r = anonymous.get(path).await;
        assert_security_headers(&r, path, true);
        assert_eq!(r.headers()["strict-transport-security"], "max-age=31536000");
    }
    drop(app);
}

// ------------------------------------------------------ 5. database down

#[tokio::test]
async fn with_the_database_down_pages_and_login_answer_503_within_seconds() {
    let proxy = Proxy::start(write_target(database_uri()).await).await;
    let settings = test_settings();
    let app = spawn_app_on(&proxy.uri(), settings).await;
    app.add_user("a@example.com", Role::Admin).await;
    let site = app.add_site("example.com", &[]).await;
    let user = app.login("a@example.com").await;
    let (http, csrf) = login_form(&app).await;
    assert_eq!(user.get("/sites").await.status(), 200);

    proxy.set(Mode::Down);
    let pages = [
        "/sites".to_owned(),
        format!("/sites/{}", site.id),
        "/account/password".to_owned(),
        "/admin/users".to_owned(),
    ];
    for path in &pages {
        let began = Instant::now();
        let r = user.get(path).await;
        let took = began.elapsed();
        assert_eq!(r.status(), 503, "{path}");
        assert!(took < Duration::from_secs(8), "{path} took {took:?}");
        let body = r.text().await.unwrap();
        assert!(body.contains("try again"), "{path}: a short page");
    }
    let began = Instant::now();
    let r = post_login(&app, &http, &csrf, "a@example.com", PASSWORD, "/sites").await;
    assert_eq!(r.status(), 503);
    assert!(began.elapsed() < Duration::from_secs(8));
    assert!(r
        .headers()
        .get("set-cookie")
        .is_none_or(|c| !c.to_str().unwrap().contains("tt_session=")));

    proxy.set(Mode::Pass);
}

// ------------------------------------------------------ 6. the page cap

#[tokio::test]
async fn new_pages_beyond_the_first_sight_budget_need_a_second_view() {
    let app = spawn_app_with(|s| {
        s.security.new_pages_per_hour = 3;
        s.security.repeat_pages_per_hour = 4;
    })
    .await;
    app.add_user("a@example.com", Role::Admin).await;
    let site = app.add_site("example.com", &[]).await;
    // A page with views from yesterday: known from the database at start
    // (loaded in the background; here called directly after the write).
    app.write_hits(&[("example.com/old", t0() - chrono::TimeDelta::days(1))])
        .await;
    let loaded = app
        .ingest
        .page_cap
        .load_known(&app.store, tickertape::clock::Clock::now(&*app.clock))
        .await
        .unwrap();
    assert_eq!(loaded, 1);
    let hit = |page: String| {
        let app = &app;
        let id = site.id;
        async move { app.pixel(&format!("site={id}&page={page}")).await }
    };
    let reason = |r: &reqwest::Response| {
        r.headers()
            .get("x-tickertape-reason")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    // The first-sight budget: three pages at their first view.
    for i in 0..3 {
        let r = hit(format!("/new/{i}")).await;
        assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    }
    // Beyond it, a first view counts under /(other)...
    for i in 3..10 {
        let r = hit(format!("/new/{i}")).await;
        assert_eq!(r.status(), 200, "still counted");
        assert_eq!(reason(&r).as_deref(), Some("page-cap"));
    }
    // ...and a second view gets the page its own buckets, within the
    // repeat budget of four.
    for i in 3..10 {
        let r = hit(format!("/new/{i}")).await;
        let expected = if i < 7 { None } else { Some("page-cap") };
        assert_eq!(reason(&r).as_deref(), expected, "/new/{i}");
    }
    // Known pages keep counting as themselves, the old one included.
    for page in ["/new/0", "/old", "/new/3"] {
        let r = hit(page.into()).await;
        assert_eq!(reason(&r), None, "{page}");
    }
    let mut pages: Vec<(String, i64)> = app
        .buckets(Resolution::Hour)
        .await
        .into_iter()
        .filter(|b| b.timestamp.to_chrono() >= t0() - chrono::TimeDelta::hours(1))
        .map(|b| (b.page, b.total_views))
        .collect();
    pages.sort();
    let mut expected = vec![("example.com/(other)".to_owned(), 10)];
    expected.push(("example.com/new/0".to_owned(), 2));
    expected.push(("example.com/new/1".to_owned(), 1));
    expected.push(("example.com/new/2".to_owned(), 1));
    expected.push(("example.com/new/3".to_owned(), 2));
    for i in 4..7 {
        expected.push((format!("example.com/new/{i}"), 1));
    }
    expected.push(("example.com/old".to_owned(), 1));
    assert_eq!(pages, expected);
    assert_eq!(app.ingest.stats.count(Outcome::PageCap), 10);
    let metrics = app.metrics().await;
    for line in [
        "tickertape_page_cap_admitted_total{how=\"first-sight\"} 3",
        "tickertape_page_cap_admitted_total{how=\"repeat\"} 4",
        "tickertape_page_cap_overflow_views_total 10",
    ] {
        assert!(metrics.contains(line), "{line}");
    }
    // The settings page tells the owner: the rule, this hour, today.
    let admin = app.login("a@example.com").await;
    let settings = format!("/sites/{}/settings", site.id);
    let (_, html) = admin.text(&settings).await;
    assert!(
        html.contains("at its first view while fewer than <strong>3</strong>")
            && html.contains(
                "This hour: 3 pages admitted at their first view, 4 at a later one; 10 views under"
            )
            && html.contains("Today (UTC): 10 views under"),
        "{html}"
    );
    // The dashboard says so when over 1 % of a range's views are there.
    let (_, dashboard) = admin.text(&format!("/sites/{}", site.id)).await;
    assert!(dashboard.contains("id=\"overflow\""), "{dashboard}");
    assert!(dashboard.contains("/settings#page-cap"));
    // The next hour brings new budgets.
    app.clock.advance(chrono::TimeDelta::hours(1));
    let r = hit("/new/7".into()).await;
    assert_eq!(reason(&r), None);
}

#[tokio::test]
async fn an_admin_sets_a_sites_own_page_cap_and_bad_input_changes_nothing() {
    let app = spawn_app_with(|s| s.security.new_pages_per_hour = 1).await;
    app.add_user("a@example.com", Role::Admin).await;
    let owner = app.add_user("o@example.com", Role::Owner).await;
    let site = app.add_site("capped.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let path = format!("/sites/{}/page-cap", site.id);
    let admin = app.login("a@example.com").await;
    let settings = format!("/sites/{}/settings", site.id);
    let (_, page) = admin.text(&settings).await;
    let csrf = csrf_in(&page).unwrap();
    // Bad input: a clear answer, nothing stored.
    for bad in ["-5", "lots", "0", "99999999999"] {
        let r = admin
            .post(&path, &[("csrf", &csrf), ("page_cap", bad)])
            .await;
        assert_eq!(r.status(), 400, "{bad}");
        let html = r.text().await.unwrap();
        assert!(
            html.contains("the page cap is `default`, `none` or a whole number"),
            "{bad}"
        );
    }
    // A forged form (no or a wrong token) changes nothing.
    let r = admin
        .post(&path, &[("csrf", "forged"), ("page_cap", "none")])
        .await;
    assert_eq!(r.status(), 403);
    // An owner may not set it.
    let o = app.login("o@example.com").await;
    let (_, page) = o.text(&settings).await;
    assert!(!page.contains("name=\"page_cap\""), "no form for owners");
    let r = o
        .post(
            &path,
            &[("csrf", &csrf_in(&page).unwrap()), ("page_cap", "none")],
        )
        .await;
    assert_eq!(r.status(), 403);
    let stored = |app: &TestApp| {
        let store = app.store.clone();
        let id = site.id;
        async move {
            tickertape::storage::sites::list(&store)
                .await
                .unwrap()
                .into_iter()
                .find(|s| s.id == id)
                .unwrap()
                .page_cap
        }
    };
    assert_eq!(
        stored(&app).await,
        tickertape::domain::PageCapSetting::Default
    );
    // None: every new page counts on its own at once.
    let r = admin
        .post(&path, &[("csrf", &csrf), ("page_cap", "none")])
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        stored(&app).await,
        tickertape::domain::PageCapSetting::Unlimited
    );
    for i in 0..5 {
        let r = app.pixel(&format!("site={}&page=/free/{i}", site.id)).await;
        assert!(r.headers().get("x-tickertape-reason").is_none());
    }
    // The CLI sets it too, by domain.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args([
            "site",
            "set-page-cap",
            "--domain",
            "capped.test",
            "--page-cap",
            "250",
        ])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stored(&app).await,
        tickertape::domain::PageCapSetting::PerHour(250)
    );
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args([
            "site",
            "set-page-cap",
            "--domain",
            "capped.test",
            "--page-cap",
            "many",
        ])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--page-cap"));
    assert_eq!(
        stored(&app).await,
        tickertape::domain::PageCapSetting::PerHour(250)
    );
}

// ------------------------------------------------ 7. HEAD, OPTIONS, API

#[tokio::test]
async fn head_answers_like_get_on_every_get_route() {
    let (app, admin, site) = security_world(false).await;
    for path in get_routes(&site) {
        let get = admin.get(&path).await;
        let head = admin
            .http
            .head(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), get.status(), "HEAD {path}");
        assert_eq!(
            head.headers().get("content-type"),
            get.headers().get("content-type"),
            "HEAD {path}"
        );
        assert!(
            head.bytes().await.unwrap().is_empty(),
            "HEAD {path} has no body"
        );
    }
    // Signed in, HEAD /sites is the page, not a 404.
    let head = admin
        .http
        .head(format!("{}/sites", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
}

#[tokio::test]
async fn head_and_options_on_the_pixel_count_nothing() {
    let mut app = spawn_app().await;
    let site = app.add_site("example.com", &[]).await;
    let url = format!("{}/pixel.gif?site={}&page=/a", app.address, site.id);
    let head = app.http.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-type"], "image/gif");
    assert_eq!(
        head.headers()["cross-origin-resource-policy"],
        "cross-origin"
    );
    // A HEAD that would be refused says why, like a GET.
    let foreign = app
        .http
        .head(format!(
            "{}/pixel.gif?site={}&page=https%3A%2F%2Fevil.com%2F",
            app.address, site.id
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert_eq!(foreign.headers()["x-tickertape-reason"], "foreign-host");
    let options = app
        .http
        .request(reqwest::Method::OPTIONS, &url)
        .send()
        .await
        .unwrap();
    assert_eq!(options.status(), 204);
    assert_eq!(options.headers()["allow"], "GET, HEAD, OPTIONS");
    app.stop().await;
    assert_eq!(app.bucket_count().await, 0);
    assert_eq!(app.ingest.stats.count(Outcome::Counted), 0);
}

#[tokio::test]
async fn an_owner_calling_the_preallocation_api_gets_json() {
    let app = spawn_app().await;
    app.add_user("owner@example.com", Role::Owner).await;
    let owner = app.login("owner@example.com").await;
    let r = owner
        .http
        .post(format!("{}/admin/api/preallocate", app.address))
        .header("x-csrf-token", &owner.csrf)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let json: serde_json::Value = r.json().await.unwrap();
    assert_eq!(json["error"]["code"], "forbidden");
}

// --------------------------------------------------- 8. reverse proxies

#[tokio::test]
async fn behind_a_trusted_proxy_each_client_has_its_own_login_limit() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    app.add_user("a@example.com", Role::Owner).await;
    app.add_user("b@example.com", Role::Owner).await;
    let attempt = |client: &'static str, email: &'static str, password: &'static str| {
        let app = &app;
        async move {
            let (http, csrf) = login_form(app).await;
            http.post(format!("{}/login", app.address))
                .header("x-forwarded-for", format!("198.51.100.7, {client}"))
                .form(&[
                    ("email", email),
                    ("password", password),
                    ("csrf", &csrf),
                    ("next", "/"),
                ])
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    for _ in 0..5 {
        assert_eq!(attempt("203.0.113.1", "a@example.com", "wrong").await, 401);
    }
    // That client is paused, also for another account...
    assert_eq!(attempt("203.0.113.1", "b@example.com", PASSWORD).await, 429);
    // ...but another client behind the same proxy is not: the address
    // comes from X-Forwarded-For, from the right.
    assert_eq!(attempt("203.0.113.2", "b@example.com", PASSWORD).await, 303);
}

#[tokio::test]
async fn without_trusted_proxies_x_forwarded_for_is_ignored() {
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    app.add_user("b@example.com", Role::Owner).await;
    for i in 0..5 {
        let (http, csrf) = login_form(&app).await;
        let r = http
            .post(format!("{}/login", app.address))
            // A guesser rotating a header it controls gains nothing.
            .header("x-forwarded-for", format!("203.0.113.{i}"))
            .form(&[
                ("email", "a@example.com"),
                ("password", "wrong"),
                ("csrf", &csrf),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    let (http, csrf) = login_form(&app).await;
    let r = http
        .post(format!("{}/login", app.address))
        .header("x-forwarded-for", "203.0.113.99")
        .form(&[
            ("email", "b@example.com"),
            ("password", PASSWORD),
            ("csrf", &csrf),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
}

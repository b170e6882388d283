//! A real browser (headless Chromium) loads pages that embed the snippets,
//! and the views appear in the buckets.

use actix_web::{web, App, HttpResponse, HttpServer};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use tickertape::ingest::pixel::Outcome;
use tickertape::storage::Granularity;
use tickertape::web::snippets;

use crate::helpers::*;

fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        path.is_file(),
        "{} is missing: `make test` installs Debian's chromium",
        path.display()
    );
    path
}

/// Loads `url` in headless Chromium and returns once the page and its
/// subresources are done. `user_agent: None` keeps Chromium's own
/// (HeadlessChrome) User-Agent.
fn load_in_browser(url: &str, user_agent: Option<&str>) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--no-first-run",
        // Runs the page until its network is idle (or 10 s of page time).
        "--virtual-time-budget=10000",
        "--dump-dom",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    if let Some(ua) = user_agent {
        cmd.arg(format!("--user-agent={ua}"));
    }
    let mut child = cmd
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish loading {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn minute_views(app: &TestApp, page: &str) -> i64 {
    app.buckets(Granularity::Minute)
        .await
        .into_iter()
        .filter(|b| b.page == page)
        .map(|b| b.total_views)
        .sum()
}

/// Waits (bounded) until a page's count reaches `want`.
async fn wait_for_views(app: &TestApp, page: &str, want: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = minute_views(app, page).await;
        if got >= want || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_embedding_the_snippets_is_counted_in_a_real_browser() {
    let app = spawn_app().await;
    // The test pages are served from 127.0.0.1, which the pixel-only snippet
    // reports through the Referer.
    let site = app.add_site("blog.test", &["127.0.0.1"]).await;
    let s = snippets::for_site(&app.address, &site.id);
    let page = |title: &str, snippet: &str| {
        format!("<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{snippet}</body></html>")
    };
    let script_page = page("With the script", &s.script);
    let pixel_page = page("With the pixel", &s.pixel);
    let server = HttpServer::new(move || {
        let script_page = script_page.clone();
        let pixel_page = pixel_page.clone();
        App::new()
            .route(
                "/blog/post.html",
                web::get().to(move || {
                    let body = script_page.clone();
                    async move { HttpResponse::Ok().content_type("text/html").body(body) }
                }),
            )
            .route(
                "/headless.html",
                web::get().to({
                    let body = pixel_page.clone();
                    move || {
                        let body = body.clone();
                        async move { HttpResponse::Ok().content_type("text/html").body(body) }
                    }
                }),
            )
            .route(
                "/pixel-only.html",
                web::get().to(move || {
                    let body = pixel_page.clone();
                    async move { HttpResponse::Ok().content_type("text/html").body(body) }
                }),
            )
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let origin = format!("http://127.0.0.1:{}", server.addrs()[0].port());
    let server = server.run();
    let handle = server.handle();
    tokio::spawn(server);

    let url = format!("{origin}/blog/post.html");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    assert_eq!(
        wait_for_views(&app, "blog.test/blog/post.html", 1).await,
        1,
        "script snippet"
    );

    let url = format!("{origin}/pixel-only.html");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    assert_eq!(
        wait_for_views(&app, "blog.test/pixel-only.html", 1).await,
        1,
        "pixel snippet"
    );

    // Chromium's own headless User-Agent is a bot's: not counted.
    let url = format!("{origin}/headless.html");
    tokio::task::spawn_blocking(move || load_in_browser(&url, None))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.ingest.stats.count(Outcome::Bot) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.ingest.stats.count(Outcome::Bot), 1);
    assert_eq!(minute_views(&app, "blog.test/headless.html").await, 0);
    assert_eq!(app.ingest.stats.count(Outcome::Counted), 2);
    handle.stop(true).await;
}

/// Logs in through the form, opens the dashboard and a page report of a
/// demo site, checks the charts and tables, and saves screenshots under
/// `target/screenshots/` for people to look at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_logs_in_and_reads_the_reports_in_a_real_browser() {
    use crate::webdriver::Browser;
    use tickertape::accounts::Role;
    use tickertape::demo::{self, DemoOptions};
    use tickertape::domain::DomainName;

    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let options = DemoOptions {
        domain: DomainName::parse("demo.test").unwrap(),
        days: 3,
        daily_views: 3000,
        seed: 11,
    };
    let report = demo::generate(&app.store, &options, t0(), false)
        .await
        .unwrap();
    let site = report.site;
    let changes = tickertape::storage::sites::SiteChanges {
        name: "Demo site".into(),
        aliases: vec![],
        owners: vec![owner.id],
    };
    tickertape::storage::sites::update(&app.store, &site, changes)
        .await
        .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();

    let browser = Browser::start(BROWSER_UA).await;
    browser.goto(&format!("{}/sites", app.address)).await;
    assert!(
        browser.url().await.contains("/login?next="),
        "anonymous is sent to the login page"
    );
    browser.type_into("#email", "owner@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.screenshot("login").await;
    browser.click("form button[type=submit]").await;
    assert!(
        browser.url().await.ends_with("/sites"),
        "{}",
        browser.url().await
    );
    assert_eq!(browser.count("svg.spark").await, 1);
    browser.screenshot("sites").await;

    browser
        .click(&format!("a[href='/sites/{}']", site.id))
        .await;
    assert_eq!(browser.count("svg.chart").await, 1, "dashboard chart");
    assert!(
        browser.count("#pages tbody tr").await >= 10,
        "top pages table"
    );
    let expected = tickertape::reports::queries::series(
        &app.store,
        &tickertape::reports::Scope::Site(&site.domain),
        &tickertape::reports::Period::resolve(&Default::default(), t0()).unwrap(),
    )
    .await
    .unwrap();
    let total = tickertape::reports::queries::total(&expected);
    assert_eq!(
        browser.text("#total").await,
        tickertape::web::fmt::thousands(&total)
    );
    browser.screenshot("dashboard").await;

    browser.click("#pages tbody tr:first-child a").await;
    assert!(
        browser.url().await.contains("/page?"),
        "{}",
        browser.url().await
    );
    assert_eq!(
        browser.count("svg.chart").await,
        4,
        "series, seconds, last hour, this minute"
    );
    assert_eq!(
        browser.count("details table").await,
        4,
        "each chart has its table"
    );
    browser.screenshot("page-report").await;
    // The security headers' CSP (no inline script or style) refused
    // nothing on any of these pages.
    let refused: Vec<String> = browser
        .console()
        .await
        .into_iter()
        .filter(|m| m.contains("Content Security Policy") || m.contains("Refused to"))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    browser.quit().await;
}

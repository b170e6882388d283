//! A real browser (headless Chromium) loads pages that embed the snippets,
//! and the views appear in the buckets.

use actix_web::{web, App, HttpResponse, HttpServer};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use tickertape::ingest::pixel::Outcome;
use tickertape::storage::Resolution;
use tickertape::web::snippets;

use crate::helpers::*;

/// A site's own web server on a free loopback port, as a site embedding the
/// snippets would have: `pages` by path, and `fallback` for every other
/// path (a single-page app's shell). Returns its port and a handle to stop
/// it.
pub fn site_server(
    pages: Vec<(&'static str, String)>,
    fallback: Option<String>,
) -> (u16, actix_web::dev::ServerHandle) {
    let html = |body: String| HttpResponse::Ok().content_type("text/html").body(body);
    let server = HttpServer::new(move || {
        let mut app = App::new();
        for (path, body) in pages.clone() {
            // Scripts by their type: a module is refused as text/html.
            let kind = if path.ends_with(".js") {
                "text/javascript"
            } else {
                "text/html"
            };
            app = app.route(
                path,
                web::get().to(move || {
                    let body = body.clone();
                    async move { HttpResponse::Ok().content_type(kind).body(body) }
                }),
            );
        }
        if let Some(body) = fallback.clone() {
            app = app.default_service(web::to(move || {
                let body = body.clone();
                async move { html(body) }
            }));
        }
        app
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    tokio::spawn(server);
    (port, handle)
}

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
pub fn load_in_browser(url: &str, user_agent: Option<&str>) {
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
    app.buckets(Resolution::Minute)
        .await
        .into_iter()
        .filter(|b| b.page == page)
        .map(|b| b.total_views)
        .sum()
}

/// Waits (bounded) until a page's count reaches `want`. The browser has
/// exited by then, so its hits are journaled or were never sent; the bound
/// is for the write-behind, which a busy machine (the whole suite on two
/// cores) can slow well past its usual second: 10 s once saw 0 of 1.
async fn wait_for_views(app: &TestApp, page: &str, want: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
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
    let (port, handle) = site_server(
        vec![
            ("/blog/post.html", script_page),
            ("/headless.html", pixel_page.clone()),
            ("/pixel-only.html", pixel_page),
        ],
        None,
    );
    let origin = format!("http://127.0.0.1:{port}");

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

/// A single-page app's navigations count, and a browser
/// flagged with `#tt-ignore` counts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_counts_single_page_app_navigations_and_can_ignore_a_browser() {
    let app = spawn_app().await;
    let site = app.add_site("spa.test", &["127.0.0.1"]).await;
    let s = snippets::for_site(&app.address, &site.id);
    // After load: pushState to /two, then Back to /one (popstate).
    let body = format!(
        "<!doctype html><html><head><title>SPA</title></head><body>{}<script>\
         setTimeout(function(){{history.pushState({{}},'','/two');}},300);\
         setTimeout(function(){{history.back();}},600);</script></body></html>",
        s.script
    );
    let (port, handle) = site_server(vec![], Some(body));
    let origin = format!("http://127.0.0.1:{port}");
    let url = format!("{origin}/one");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    assert_eq!(
        wait_for_views(&app, "spa.test/two", 1).await,
        1,
        "pushState"
    );
    assert_eq!(
        wait_for_views(&app, "spa.test/one", 2).await,
        2,
        "load and Back"
    );
    // The owner's browser, flagged: nothing is sent.
    let url = format!("{origin}/ignored#tt-ignore");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(minute_views(&app, "spa.test/ignored").await, 0);
    assert_eq!(
        minute_views(&app, "spa.test/two").await,
        1,
        "ignored navigations too"
    );
    handle.stop(true).await;
}

/// The script sends the referrer; a page on another local origin
/// (`localhost`) links to a tracked page (`127.0.0.1`), and the view's
/// source is `localhost`; `utm_source` in the address wins; a page opened
/// directly is "direct".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_reports_the_referring_site_and_utm_source_in_a_real_browser() {
    let app = spawn_app().await;
    let site = app.add_site("ref.test", &["127.0.0.1"]).await;
    let s = snippets::for_site(&app.address, &site.id);
    let tracked = format!(
        "<!doctype html><html><head><title>Landing</title></head><body><h1>Landing</h1>{}</body></html>",
        s.script
    );
    let (port, tracked_handle) = site_server(vec![], Some(tracked));
    let tracked_origin = format!("http://127.0.0.1:{port}");

    // The referring site: another origin, whose page follows a link.
    let link = format!(
        "<!doctype html><html><head><title>Elsewhere</title></head><body>\
         <a id=\"go\" href=\"{tracked_origin}/landing\">a link</a>\
         <script>setTimeout(function(){{document.getElementById('go').click();}},100);</script>\
         </body></html>"
    );
    let (port, referrer_handle) = site_server(vec![], Some(link));
    let referrer_url = format!("http://localhost:{port}/links.html");

    tokio::task::spawn_blocking(move || load_in_browser(&referrer_url, Some(BROWSER_UA)))
        .await
        .unwrap();
    assert_eq!(wait_for_views(&app, "ref.test/landing", 1).await, 1);
    let url = format!("{tracked_origin}/campaign?utm_source=Newsletter&secret=1");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    assert_eq!(wait_for_views(&app, "ref.test/campaign", 1).await, 1);
    let url = format!("{tracked_origin}/typed");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    assert_eq!(wait_for_views(&app, "ref.test/typed", 1).await, 1);

    app.settle().await;
    let source_of = |page: &'static str| {
        let db = app.store.db().clone();
        async move {
            let d = db
                .collection::<bson::Document>("breakdowns_day")
                .find_one(bson::doc! {"page": page})
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{page} has a source"));
            d.get_document("sources").unwrap().clone()
        }
    };
    assert_eq!(
        source_of("ref.test/landing").await,
        bson::doc! {"localhost": 1_i64}
    );
    assert_eq!(
        source_of("ref.test/campaign").await,
        bson::doc! {"newsletter": 1_i64}
    );
    assert_eq!(
        source_of("ref.test/typed").await,
        bson::doc! {"direct": 1_i64}
    );
    tracked_handle.stop(true).await;
    referrer_handle.stop(true).await;
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
    let report = demo::generate(&app.store, app.journal.appender(), &options, t0(), false)
        .await
        .unwrap();
    app.settle().await;
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
    browser.click_and_load("form button[type=submit]").await;
    let url = browser.wait_for_url(|u| u.ends_with("/sites")).await;
    assert!(url.ends_with("/sites"), "{url}");
    assert_eq!(browser.count("svg.spark").await, 1);
    browser.screenshot("sites").await;

    browser
        .click_and_load(&format!("a[href='/sites/{}']", site.id))
        .await;
    assert_eq!(browser.count("svg.chart").await, 1, "dashboard chart");
    assert!(
        browser.count("#pages tbody tr").await >= 10,
        "top pages table"
    );
    // The demo's sign-ups pay in two currencies: the Goals table says so.
    let goals = browser.text("#goals-table").await;
    assert!(
        goals.contains(" EUR") && goals.contains(" USD"),
        "the demo's revenue: {goals}"
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
    let dashboard = browser.screenshot("dashboard").await;
    // The README's picture of a populated dashboard (1280 px wide), saved
    // when asked: `make screenshots`.
    let update = std::env::var_os("TICKERTAPE_UPDATE_SCREENSHOTS").is_some();
    let images = crate::helpers::repo_root().join("docs/images");
    if update {
        std::fs::create_dir_all(&images).unwrap();
        std::fs::copy(&dashboard, images.join("dashboard.png")).unwrap();
    }
    // The demo's visits feed the filters: its first country filters the
    // dashboard to figures, not zeros (the README's second picture).
    let dashboard_url = browser.url().await;
    browser
        .click_and_load("#breakdown-country tbody tr:first-child a.add-filter")
        .await;
    browser.wait_for_url(|u| u.contains("filter=country")).await;
    assert_eq!(browser.count("#filters .chip").await, 1);
    let filtered = crate::reference_model::int(&browser.text("#total").await);
    assert!(filtered > 0 && filtered < total, "{filtered} of {total}");
    let shot = browser.screenshot("filtered-dashboard").await;
    if update {
        std::fs::copy(&shot, images.join("filtered-dashboard.png")).unwrap();
    }
    // And its funnel shows visits at every step (the third picture).
    browser
        .goto(&format!("{}/sites/{}/funnels", app.address, site.id))
        .await;
    assert_eq!(browser.count(".funnel-table tbody tr").await, 3);
    assert_eq!(
        browser.count("svg.funnel-bars rect.bar").await,
        3,
        "a bar per step"
    );
    let signed_up = browser
        .text("#funnel-table-1 tbody tr:last-child td.num")
        .await;
    assert!(
        crate::reference_model::int(&signed_up) > 0,
        "visits reach the funnel's last step: {signed_up}"
    );
    let shot = browser.screenshot("funnel").await;
    if update {
        std::fs::copy(&shot, images.join("funnel.png")).unwrap();
    }
    browser.goto(&dashboard_url).await;

    browser
        .click_and_load("#pages tbody tr:first-child a")
        .await;
    let url = browser.wait_for_url(|u| u.contains("/page?")).await;
    assert!(url.contains("/page?"), "{url}");
    // The page's series and its latest minute with views always have a
    // chart; the realtime panels have one when the demo data put views in
    // the last hour and this minute, else their empty note.
    for id in ["series", "seconds"] {
        assert_eq!(browser.count(&format!("#{id}-empty")).await, 0, "{id}");
    }
    let charts = browser.count("svg.chart").await;
    assert_eq!(
        charts + browser.count("p.empty").await,
        4,
        "series, seconds, last hour, this minute: a chart or its empty note each"
    );
    assert_eq!(
        browser.count("details table").await,
        charts,
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

/// Every page at 1366×900 and 390×844 in Chromium, with axe-core
/// finding no serious or critical violation, and the fixes checked where a
/// person would see them. Screenshots go to `target/screenshots/pages-*`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_reads_right_on_a_desktop_and_a_phone() {
    use crate::webdriver::Browser;
    use serde_json::json;
    use tickertape::accounts::Role;
    use tickertape::demo::{self, DemoOptions};
    use tickertape::domain::DomainName;

    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let options = DemoOptions {
        domain: DomainName::parse("demo.test").unwrap(),
        days: 2,
        daily_views: 800,
        seed: 5,
    };
    let site = demo::generate(&app.store, app.journal.appender(), &options, t0(), false)
        .await
        .unwrap()
        .site;
    app.settle().await;
    // A run, so the runs table has a row to fit on a phone.
    tickertape::preallocation::run(
        &app.store,
        &tickertape::preallocation::PreallocRequest {
            scope: tickertape::preallocation::Scope::Site(site.domain.clone()),
            from: tickertape::domain::Resolution::Hour.floor(t0()) + chrono::TimeDelta::hours(1),
            hours: 2,
            threshold: 1,
        },
        tickertape::preallocation::Trigger::Cli,
        "admin@example.com",
        t0(),
    )
    .await
    .unwrap();
    let fresh = app.add_site("fresh.test", &[]).await;
    app.ingest.directory.reload(&app.store).await.unwrap();
    let page = tickertape::reports::queries::top_pages(
        &app.store,
        &tickertape::reports::Scope::of_site(&site),
        &tickertape::reports::Period::resolve(&Default::default(), t0()).unwrap(),
    )
    .await
    .unwrap()
    .first()
    .map(|(p, _)| p.path().to_owned())
    .unwrap();
    let minute = tickertape::reports::queries::latest_minute(
        &app.store,
        &tickertape::domain::Page::parse(&format!("demo.test{page}")).unwrap(),
        t0(),
    )
    .await
    .unwrap()
    .unwrap()
    .format("%Y-%m-%dT%H:%M")
    .to_string();

    let browser = Browser::start(BROWSER_UA).await;
    let base = app.address.clone();
    browser.goto(&format!("{base}/login")).await;
    assert_eq!(browser.count("a.skip[href='#main']").await, 1, "skip link");
    // The first Tab reaches the skip link, shown with a focus ring
    // of at least 3:1 against the white page.
    browser.press_tab().await;
    let ring = browser
        .execute(
            "const e = document.activeElement, s = getComputedStyle(e); \
             return [e.className, s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor];",
            json!([]),
        )
        .await;
    assert_eq!(ring[0], "skip", "{ring}");
    assert_eq!(ring[1], "solid", "{ring}");
    assert!(ring[2].as_f64().unwrap() >= 2.0, "{ring}");
    let rgb: Vec<f64> = ring[3]
        .as_str()
        .unwrap()
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|c| c.trim().parse().unwrap())
        .collect();
    let lum = |c: f64| {
        let c = c / 255.0;
        if c <= 0.03928 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lum(rgb[0]) + 0.7152 * lum(rgb[1]) + 0.0722 * lum(rgb[2]);
    let contrast = 1.05 / (l + 0.05);
    assert!(
        contrast >= 3.0,
        "focus ring {rgb:?} has {contrast:.1}:1 on white"
    );
    browser.type_into("#email", "admin@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click_and_load("form button[type=submit]").await;
    let dash = format!("/sites/{}", site.id);
    let query = |p: &str| tickertape::web::fmt::query(p);
    let pages: Vec<(&str, String)> = vec![
        ("sites", "/sites".into()),
        ("dashboard", dash.clone()),
        ("dashboard-24h-by-day", format!("{dash}?range=24h&res=day")),
        ("dashboard-7d", format!("{dash}?range=7d")),
        ("dashboard-7d-by-hour", format!("{dash}?range=7d&res=hour")),
        ("dashboard-12mo", format!("{dash}?range=12mo")),
        (
            "dashboard-bad-range",
            format!("{dash}?range=custom&from=2026-11-22T10:00&to=2026-11-21T10:00"),
        ),
        (
            "page-report",
            format!("{dash}/page?path={}&minute={minute}", query(&page)),
        ),
        ("waiting-site", format!("/sites/{}", fresh.id)),
        ("tracking-code", format!("/sites/{}/settings", site.id)),
        ("admin-sites", "/admin/sites".into()),
        ("admin-users", "/admin/users".into()),
        ("admin-preallocation", "/admin/preallocation".into()),
        ("admin-system", "/admin/system".into()),
        ("account", "/account/password".into()),
        ("two-factor", "/account/totp".into()),
        ("tokens", "/account/tokens".into()),
        ("share-links", format!("/sites/{}/share", site.id)),
        ("properties", format!("{dash}/properties?range=24h")),
        ("site-new", "/sites/new".into()),
        ("admin-site", format!("/admin/sites/{}", site.id)),
        ("not-found", "/no/such/page".into()),
    ];
    let (mut violations, mut too_wide) = (Vec::new(), Vec::new());
    for (size, width, height) in [("desktop", 1366, 900), ("phone", 390, 844)] {
        browser.resize(width, height).await;
        for (name, path) in &pages {
            browser.goto(&format!("{base}{path}")).await;
            for v in browser.axe_violations().await {
                violations.push(format!("{size} {name}: {v}"));
            }
            browser.screenshot(&format!("pages-{size}-{name}")).await;
            // Every y label sits on its gridline and
            // ends left of the plot, clear of the first bar.
            let misplaced = browser
                .execute(
                    "const out = []; \
                     for (const box of document.querySelectorAll('.chart-box')) { \
                       const svg = box.querySelector('svg.chart').getBoundingClientRect(); \
                       const lines = [...box.querySelectorAll('line.grid')].map(l => l.getBoundingClientRect()); \
                       for (let i = 0; i < lines.length; i++) { \
                         const label = box.querySelector('.y-axis .y' + i).getBoundingClientRect(); \
                         const centre = label.top + label.height / 2, line = lines[i].top + lines[i].height / 2; \
                         if (Math.abs(centre - line) > 2 || label.right > svg.left) out.push([i, centre, line, label.right, svg.left]); \
                       } \
                       if (lines.length !== 5) out.push(['gridlines', lines.length]); \
                     } \
                     return out;",
                    json!([]),
                )
                .await;
            assert_eq!(
                misplaced,
                json!([]),
                "{size} {name}: y labels off their gridlines"
            );
            // X labels never run into each other.
            let overlapping = browser
                .execute(
                    "const out = []; \
                     for (const axis of document.querySelectorAll('.x-axis')) { \
                       const r = [...axis.querySelectorAll('span')].filter(e => e.offsetParent).map(e => [e.textContent, e.getBoundingClientRect()]); \
                       for (let i = 1; i < r.length; i++) if (r[i][1].left < r[i - 1][1].right + 4) out.push([r[i - 1][0], r[i][0]]); \
                     } \
                     return out;",
                    json!([]),
                )
                .await;
            assert_eq!(overlapping, json!([]), "{size} {name}: x labels collide");
            if matches!(
                *name,
                "dashboard"
                    | "dashboard-7d"
                    | "dashboard-12mo"
                    | "dashboard-bad-range"
                    | "page-report"
                    | "waiting-site"
            ) {
                period_and_changes_read_right(&browser, size, name).await;
            }
            match *name {
                "page-report" => {
                    // Seconds are labelled with the second.
                    let row = browser
                        .execute(
                            "return document.querySelector('#seconds-r7 td').textContent;",
                            json!([]),
                        )
                        .await;
                    assert!(
                        row.as_str().unwrap().ends_with(":07"),
                        "{size}: second 7 reads {row}"
                    );
                    // Axis text keeps a readable size on every screen.
                    let px = browser
                        .execute(
                            "return [...document.querySelectorAll('.y-axis span, .x-axis span')].filter(e => e.offsetParent).map(e => e.getBoundingClientRect().height);",
                            json!([]),
                        )
                        .await;
                    let heights: Vec<f64> = px
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap())
                        .collect();
                    assert!(!heights.is_empty());
                    assert!(
                        heights.iter().all(|h| *h >= 11.0),
                        "{size}: axis text heights {heights:?}"
                    );
                }
                "dashboard" => {
                    if size == "phone" {
                        // The folded custom form leaves the chart in view.
                        let top = browser
                            .execute(
                                "return document.querySelector('svg.chart').getBoundingClientRect().top < window.innerHeight;",
                                json!([]),
                            )
                            .await;
                        assert_eq!(top, true, "the chart starts above the fold");
                        // The sources' Change column is in view.
                        let change = browser
                            .execute(
                                "const th = document.querySelector('#sources thead th:last-child'); \
                                 return [th.textContent, th.getBoundingClientRect().right <= document.documentElement.clientWidth];",
                                json!([]),
                            )
                            .await;
                        assert_eq!(change, json!(["Change", true]), "{change}");
                    }
                    for v in bar_tooltips_keep_the_reader_on_the_chart(&browser, size).await {
                        violations.push(format!(
                            "{size} {name} with a tooltip and a target row: {v}"
                        ));
                    }
                }
                "dashboard-24h-by-day" => {
                    // The range is kept; both days are partial.
                    assert_eq!(browser.count("rect.bar.partial").await, 2, "{size}");
                    // What the changes compare is said
                    // on demand, as times (never "8,749 hours").
                    let basis = browser
                        .execute(
                            "const d = document.querySelector('details#compare'); \
                             return [d.open, document.querySelector('#change-basis').textContent];",
                            json!([]),
                        )
                        .await;
                    assert_eq!(basis[0], false, "{size}: folded until asked: {basis}");
                    let basis = basis[1].as_str().unwrap();
                    assert!(basis.contains("still counting"), "{basis}");
                    assert!(!basis.contains(" hours of"), "{basis}");
                }
                "dashboard-7d" | "dashboard-7d-by-hour" | "dashboard-12mo" => {
                    // 7 days by day, dated labels; 12
                    // months labelled at month starts.
                    let labels = browser
                        .execute(
                            "return [...document.querySelectorAll('.x-axis span')].map(e => e.textContent);",
                            json!([]),
                        )
                        .await;
                    let labels: Vec<&str> = labels
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| l.as_str().unwrap())
                        .collect();
                    assert!(labels.len() >= 2, "{name}: {labels:?}");
                    let months = [
                        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                        "Nov", "Dec",
                    ];
                    let dated = |l: &&str| months.iter().any(|m| l.starts_with(m));
                    match *name {
                        "dashboard-7d" => {
                            assert_eq!(
                                browser.count("tr[id^='series-r']").await,
                                7,
                                "7 days by day"
                            );
                            assert!(labels.iter().all(dated), "{labels:?}");
                        }
                        "dashboard-7d-by-hour" => {
                            assert!(
                                labels.iter().filter(|l| dated(l)).count() >= 2,
                                "{labels:?}"
                            );
                        }
                        _ => assert!(
                            labels.iter().all(|l| l.len() == 8
                                && l.ends_with(|c: char| c.is_ascii_digit())
                                && dated(l)),
                            "month and year: {labels:?}"
                        ),
                    }
                }
                "dashboard-bad-range" => {
                    assert_eq!(
                        browser.text("#range-error").await,
                        "The end must be after the start. Showing the last 24 hours instead."
                    );
                    // The period shown instead is marked, in the
                    // pills and in the phone's select.
                    let marked = browser
                        .execute(
                            "return [[...document.querySelectorAll('nav.presets a[aria-current=true]')].map(a => a.textContent), \
                                     document.querySelector('select#period').value];",
                            json!([]),
                        )
                        .await;
                    assert_eq!(marked, json!([["Last 24 hours"], "24h"]), "{size}");
                }
                "sites" => {
                    // The sparkline is shown whole on
                    // every screen (in its card on a phone), and each site
                    // says its zone.
                    let spark = browser
                        .execute(
                            "const s = document.querySelector('svg.spark'), r = s.getBoundingClientRect(); \
                             return [r.width > 50, r.left >= 0 && r.right <= document.documentElement.clientWidth, \
                                     document.querySelector('td .zone').textContent];",
                            json!([]),
                        )
                        .await;
                    assert_eq!(spark, json!([true, true, "UTC"]), "{size}: {spark}");
                }
                "waiting-site" => {
                    assert_eq!(browser.count("#waiting pre").await, 1, "{size}");
                }
                "two-factor" => {
                    // The QR code is drawn square and
                    // whole within the window, the key beside it; the bar
                    // marks Account and the account links this page.
                    let qr = browser
                        .execute(
                            "const s = document.querySelector('#totp-qr svg.qr'), r = s.getBoundingClientRect(); \
                             return [s instanceof SVGSVGElement, Math.round(r.width), Math.round(r.height), \
                                     r.left >= 0 && r.right <= document.documentElement.clientWidth, \
                                     document.querySelector('nav[aria-label=Main] a[aria-current=page]').textContent, \
                                     document.querySelector('nav.subnav a[aria-current=page]').textContent, \
                                     document.querySelector('#totp-secret').textContent.length > 0];",
                            json!([]),
                        )
                        .await;
                    assert_eq!(qr[0], true, "{size}: {qr}");
                    assert!(qr[1].as_f64().unwrap() >= 150.0, "{size}: {qr}");
                    assert_eq!(qr[1], qr[2], "{size}: {qr}");
                    assert_eq!(
                        qr.as_array().unwrap()[3..],
                        [
                            json!(true),
                            json!("Account"),
                            json!("Two-factor login"),
                            json!(true)
                        ],
                        "{size}: {qr}"
                    );
                }
                "admin-sites" | "admin-users" | "admin-preallocation" | "admin-system" => {
                    // The admin links mark the page shown and
                    // read as tabs, unlike the range presets' pills.
                    let links = browser
                        .execute(
                            "const all = [...document.querySelectorAll('nav.subnav[aria-label=Admin] a')]; \
                             const cur = all.filter(a => a.getAttribute('aria-current') === 'page'); \
                             const s = getComputedStyle(cur[0]), other = getComputedStyle(all.find(a => !a.hasAttribute('aria-current'))); \
                             return [cur.length, cur[0].textContent.toLowerCase(), s.borderTopLeftRadius, s.borderBottomWidth, \
                                     s.fontWeight, other.fontWeight, s.backgroundColor];",
                            json!([]),
                        )
                        .await;
                    assert_eq!(
                        links,
                        json!([
                            1,
                            name.trim_start_matches("admin-"),
                            "0px",
                            "3px",
                            "700",
                            "400",
                            "rgba(0, 0, 0, 0)"
                        ]),
                        "{size} {name}"
                    );
                }
                "not-found" => {
                    assert_eq!(browser.count("nav[aria-label=Main] a").await, 3, "{size}");
                }
                _ => {}
            }
            // Every table fits the window (a phone
            // too); nothing, the page included, scrolls sideways.
            for wide in browser.sideways().await {
                too_wide.push(format!("{size} {name}: {wide}"));
            }
        }
    }
    assert!(too_wide.is_empty(), "wider than the window: {too_wide:#?}");
    assert!(violations.is_empty(), "axe-core: {violations:#?}");

    // A dark system scheme darkens the pages, and they
    // keep their contrast.
    browser.resize(1366, 900).await;
    browser.color_scheme("dark").await;
    for (name, path) in [("sites", "/sites".to_owned()), ("dashboard", dash.clone())] {
        browser.goto(&format!("{base}{path}")).await;
        let colours = browser
            .execute(
                "const s = getComputedStyle(document.body); \
                 return [matchMedia('(prefers-color-scheme: dark)').matches, s.backgroundColor, s.color];",
                json!([]),
            )
            .await;
        assert_eq!(colours[0], true, "{colours}");
        let channels = |v: &serde_json::Value| -> f64 {
            v.as_str()
                .unwrap()
                .trim_start_matches("rgb(")
                .trim_end_matches(')')
                .split(',')
                .map(|c| c.trim().parse::<f64>().unwrap())
                .sum::<f64>()
                / 3.0
        };
        assert!(
            channels(&colours[1]) < 60.0,
            "{name}: dark background {colours}"
        );
        assert!(
            channels(&colours[2]) > 180.0,
            "{name}: light text {colours}"
        );
        let dark = browser.axe_violations().await;
        assert!(dark.is_empty(), "axe-core, dark {name}: {dark:#?}");
        browser.screenshot(&format!("dark-{name}")).await;
    }
    browser.color_scheme("light").await;

    // The waiting dashboard notices the first view by itself.
    browser.goto(&format!("{base}/sites/{}", fresh.id)).await;
    app.write_hits(&[("fresh.test/", t0())]).await;
    let deadline = Instant::now() + Duration::from_secs(25);
    while browser.count("#first-view").await == 0 {
        assert!(Instant::now() < deadline, "the first view was not shown");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    browser.screenshot("first-view").await;
    // A new site's first views are "new" beside the
    // total, as in the sources panel, never "±0%".
    assert_eq!(browser.text("#total").await, "1");
    assert_eq!(browser.text("#change").await, "new");
    assert!(!browser
        .execute("return document.body.textContent;", json!([]))
        .await
        .as_str()
        .unwrap()
        .contains('±'));
    // The "right now" figure follows new views without
    // a reload.
    assert_eq!(browser.text("#now-views").await, "1");
    assert_eq!(browser.text("#now-noun").await, "view");
    app.write_hits(&[("fresh.test/", t0()), ("fresh.test/", t0())])
        .await;
    let deadline = Instant::now() + Duration::from_secs(25);
    while browser.text("#now-views").await != "3" {
        assert!(Instant::now() < deadline, "the now figure did not follow");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(browser.text("#now-noun").await, "views");
    assert!(browser.count("#first-view").await == 1, "not reloaded");

    // After logging out, Back does not show the dashboard from cache.
    browser.goto(&format!("{base}{dash}")).await;
    browser
        .click_and_load("form[action='/logout'] button")
        .await;
    assert!(browser.url().await.contains("/login?signed_out=1"));
    assert_eq!(browser.text("#signed-out").await, "You are signed out.");
    browser.back().await;
    assert!(
        browser.url().await.contains("/login"),
        "Back after logout: {}",
        browser.url().await
    );
    browser.screenshot("back-after-logout").await;
    browser.quit().await;
}

/// On a report page as it is loaded: the period
/// is one compact control (pills on a desktop, a select on a phone), so
/// the total comes high on a phone; every figure's change is compact
/// ("+12.5%", "−3.0%", "±0%", "new" or "—"), and what it compares is
/// folded below the figures. No footer repeats the zones.
async fn period_and_changes_read_right(
    browser: &crate::webdriver::Browser,
    size: &str,
    name: &str,
) {
    use serde_json::json;
    let seen = browser
        .execute(
            "const shown = e => !!e && e.offsetParent !== null; \
             const total = document.querySelector('#total'); \
             return [shown(document.querySelector('nav.presets')), shown(document.querySelector('select#period')), \
                     Math.round(total.getBoundingClientRect().top), \
                     [...document.querySelectorAll('.figures .change')].map(c => c.textContent), \
                     document.querySelector('details#compare').open, \
                     document.querySelector('#change-basis').textContent.length > 20, \
                     document.querySelectorAll('footer').length, \
                     Math.round(document.querySelector('.figures').getBoundingClientRect().top) < \
                       Math.round((document.querySelector('svg.chart, p.empty') || document.body).getBoundingClientRect().top)];",
            json!([]),
        )
        .await;
    let phone = size == "phone";
    assert_eq!(
        seen[0], !phone,
        "{size} {name}: pills only on a wide screen: {seen}"
    );
    assert_eq!(
        seen[1], phone,
        "{size} {name}: the select only on a phone: {seen}"
    );
    let top = seen[2].as_i64().unwrap();
    // A refused custom range keeps its form open, the error in view; a
    // site without views shows its tracking code first.
    if phone && !matches!(name, "dashboard-bad-range" | "waiting-site") {
        assert!(
            top < 300,
            "{size} {name}: the total starts at y={top}: {seen}"
        );
    }
    let compact = |c: &str| {
        c == "new"
            || c == "—"
            || c == "±0%"
            || c.ends_with(" pts")
            || ((c.starts_with('+') || c.starts_with('−'))
                && c.ends_with('%')
                && c[c.char_indices().nth(1).unwrap().0..c.len() - 1]
                    .parse::<f64>()
                    .is_ok())
    };
    for c in seen[3].as_array().unwrap() {
        let c = c.as_str().unwrap();
        assert!(
            compact(c),
            "{size} {name}: {c:?} is no compact change: {seen}"
        );
    }
    assert_eq!(
        seen[4], false,
        "{size} {name}: the basis is on demand: {seen}"
    );
    assert_eq!(seen[5], true, "{size} {name}: the basis is said: {seen}");
    assert_eq!(seen[6], 0, "{size} {name}: no footer sentence: {seen}");
    assert_eq!(
        seen[7], true,
        "{size} {name}: the figures come before the chart: {seen}"
    );
}

/// On the dashboard's chart as it is loaded: pointing
/// at a bar, or reaching it with Tab, shows its time and value over the
/// chart; clicking it keeps the page where it is; the tooltip's link opens
/// the table at the bar's row, highlighted as the target. Returns axe-core's
/// serious violations with a tooltip open and the row targeted.
async fn bar_tooltips_keep_the_reader_on_the_chart(
    browser: &crate::webdriver::Browser,
    size: &str,
) -> Vec<String> {
    use serde_json::json;
    let bars = browser
        .execute(
            "return [...document.querySelectorAll('.tips .col[tabindex=\"0\"]')].map(c => c.getAttribute('aria-labelledby'));",
            json!([]),
        )
        .await;
    let bars: Vec<&str> = bars
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(bars.len() >= 2, "{size}: bars with views {bars:?}");
    let (first, last) = (bars[0], bars[bars.len() - 1]);
    let col = |label: &str| format!(".tips .col[aria-labelledby='{label}']");
    // What the reader sees: the shown tooltips (text, whether inside the
    // window and above its column), and the row of that bar in the table.
    let shown = |label: &str| {
        let script = format!(
            "const shown = [...document.querySelectorAll('.tips .tip')].filter(t => getComputedStyle(t).display !== 'none'); \
             const col = document.querySelector(\"{}\"), row = document.getElementById('{}'.replace('-t', '-r')); \
             return [shown.map(t => {{ const r = t.getBoundingClientRect(); \
               return [t.querySelector('span').textContent, r.left >= 0 && r.right <= document.documentElement.clientWidth, r.bottom <= col.getBoundingClientRect().top + 1]; }}), \
               [...row.cells].map(c => c.textContent)];",
            col(label),
            label
        );
        async move { browser.execute(&script, json!([])).await }
    };
    let check = |what: &str, seen: &serde_json::Value| {
        let tips = seen[0].as_array().unwrap();
        assert_eq!(tips.len(), 1, "{size} {what}: one tooltip shown: {seen}");
        let text = tips[0][0].as_str().unwrap();
        let (time, views) = (
            seen[1][0].as_str().unwrap().trim_end_matches(" (partial)"),
            seen[1][1].as_str().unwrap(),
        );
        assert!(
            text.starts_with(time) && text.contains(&format!(": {views} view")),
            "{size} {what}: the tooltip says the row's time and value: {seen}"
        );
        assert_eq!(tips[0][1], true, "{size} {what}: inside the window: {seen}");
        assert_eq!(tips[0][2], true, "{size} {what}: above the bar: {seen}");
    };
    // Nothing shown until the reader asks.
    browser.hover("h1").await;
    let none = browser
        .execute(
            "return [...document.querySelectorAll('.tips .tip')].filter(t => getComputedStyle(t).display !== 'none').length;",
            json!([]),
        )
        .await;
    assert_eq!(none, 0, "{size}: no tooltip before pointing or focusing");
    browser.hover(&col(last)).await;
    check("hover", &shown(last).await);
    browser.hover("h1").await;
    // The keyboard: Tab from the chart's last tab reaches the first bar
    // with views.
    browser
        .execute(
            "document.querySelector('nav.tabs a:last-of-type').focus(); return null;",
            json!([]),
        )
        .await;
    browser.press_tab().await;
    let focused = browser
        .execute(
            "return document.activeElement.getAttribute('aria-labelledby');",
            json!([]),
        )
        .await;
    assert_eq!(focused, first, "{size}: Tab reaches the first bar");
    check("focus", &shown(first).await);
    // A click (a tap) shows the value and stays on the chart.
    let before = browser
        .execute("return [location.hash, window.scrollY];", json!([]))
        .await;
    browser.click(&col(last)).await;
    check("click", &shown(last).await);
    let after = browser
        .execute("return [location.hash, window.scrollY];", json!([]))
        .await;
    assert_eq!(
        before, after,
        "{size}: a click on a bar keeps the page still"
    );
    browser.screenshot(&format!("tooltip-{size}")).await;
    // The tooltip's link: the table opens at the bar's row, highlighted.
    browser.click(&format!("{} .tip a", col(last))).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let target = browser
        .execute(
            "const row = document.querySelector(location.hash), other = row.parentElement.querySelector('tr:not(:target)'); \
             const bg = r => getComputedStyle(r.cells[0]).backgroundColor; \
             const tint = getComputedStyle(document.documentElement).getPropertyValue('--target').trim(); \
             const probe = document.createElement('i'); probe.style.color = tint; document.body.append(probe); \
             const want = getComputedStyle(probe).color; probe.remove(); \
             return [location.hash, row.matches(':target'), row.closest('details').open, bg(row), want, bg(other)];",
            json!([]),
        )
        .await;
    assert_eq!(
        target[0],
        format!("#{}", last.replace("-t", "-r")),
        "{size}: {target}"
    );
    assert_eq!(target[1], true, "{size}: {target}");
    assert_eq!(
        target[2], true,
        "{size}: the table opened at the row: {target}"
    );
    assert_eq!(
        target[3], target[4],
        "{size}: the row is highlighted: {target}"
    );
    assert_ne!(target[3], target[5], "{size}: only that row: {target}");
    browser.axe_violations().await
}

/// Whatever the addresses hold, `tt.js` sends no query
/// string nor fragment but `utm_source` (and medium and campaign), and of
/// a referrer only its
/// origin: after a single-page navigation away from
/// `/start?reset_token=…#access_token=…`, after a full in-app navigation
/// (whose `document.referrer` is the previous page's whole address), and
/// from another site whose `Referrer-Policy: unsafe-url` hands over its
/// own query. The script talks to a recording stand-in for Tickertape, so
/// every byte it sends is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_never_sends_a_query_string_or_fragment_in_a_real_browser() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let page = |extra: &str| {
        format!(
            "<!doctype html><html><head><title>Tracked</title></head><body>\
             <script async src=\"/tt.js\" data-site=\"6f1c2d3e-1111-4222-8333-444455556666\"></script>\
             {extra}</body></html>"
        )
    };
    let start = page(
        "<script>\
         setTimeout(function(){history.pushState({},'','/next?q=QSECRET#FRAGSECRET');},300);\
         setTimeout(function(){location.href='/full?z=ZSECRET#HASHSECRET';},700);\
         </script>",
    );
    let plain = page("");
    // An event from the API and one from a `data-tt-event`
    // click (on an element inside the marked one).
    let events = page(
        "<button data-tt-event=\"Download PDF\"><span id=\"inner\">get</span></button>\
         <script>setTimeout(function(){tickertape.track('Signup');\
         document.getElementById('inner').click();},400);</script>",
    );
    let recorder = seen.clone();
    let server = HttpServer::new(move || {
        let recorder = recorder.clone();
        let (start, plain, events) = (start.clone(), plain.clone(), events.clone());
        App::new()
            .route(
                "/tt.js",
                web::get().to(|| async {
                    HttpResponse::Ok()
                        .content_type("text/javascript")
                        .body(tickertape::web::assets::TRACKING_SCRIPT)
                }),
            )
            .route(
                "/pixel.gif",
                web::get().to(move |req: actix_web::HttpRequest| {
                    recorder.lock().unwrap().push(req.uri().to_string());
                    async {
                        HttpResponse::Ok()
                            .content_type("image/gif")
                            .body(tickertape::web::pixel::GIF.as_slice())
                    }
                }),
            )
            .route(
                "/start",
                web::get().to(move || {
                    let body = start.clone();
                    async move { HttpResponse::Ok().content_type("text/html").body(body) }
                }),
            )
            .route(
                "/events",
                web::get().to(move || {
                    let body = events.clone();
                    async move { HttpResponse::Ok().content_type("text/html").body(body) }
                }),
            )
            .default_service(web::to(move || {
                let body = plain.clone();
                async move { HttpResponse::Ok().content_type("text/html").body(body) }
            }))
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    tokio::spawn(server);
    let origin = format!("http://127.0.0.1:{port}");

    // Another site, handing its whole address over as the referrer.
    let link = format!(
        "<!doctype html><html><head><title>Elsewhere</title>\
         <meta name=\"referrer\" content=\"unsafe-url\"></head><body>\
         <a id=\"go\" href=\"{origin}/landing?token=LSECRET#LFRAG\">a link</a>\
         <script>setTimeout(function(){{document.getElementById('go').click();}},100);</script>\
         </body></html>"
    );
    let (other_port, other_handle) = site_server(vec![], Some(link));
    let other_origin = format!("http://localhost:{other_port}");

    // Through WebDriver: headless Chromium's `--dump-dom` never finishes a
    // page that navigates within its own origin.
    let browser = crate::webdriver::Browser::start(BROWSER_UA).await;
    let sent_for = |page: &'static str| {
        let seen = seen.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !seen
                .lock()
                .unwrap()
                .iter()
                .any(|u| u.contains(&format!("page=%2F{page}&")))
            {
                assert!(Instant::now() < deadline, "no view of /{page} was sent");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    browser
        .goto(&format!(
            "{origin}/start?reset_token=SECRET123#access_token=XYZ"
        ))
        .await;
    sent_for("next").await;
    sent_for("full").await;
    browser
        .goto(&format!("{other_origin}/links.html?k=REFSECRET#RFRAG"))
        .await;
    sent_for("landing").await;
    browser.goto(&format!("{origin}/events")).await;
    sent_for("events").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen
        .lock()
        .unwrap()
        .iter()
        .filter(|u| u.contains("&e="))
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "events not sent: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    browser.quit().await;

    let seen = seen.lock().unwrap().clone();
    let (events, seen): (Vec<String>, Vec<String>) =
        seen.into_iter().partition(|u| u.contains("&e="));
    // Each view's engagement (its scroll depth and visible time, sent as
    // the script leaves it) carries the view's page and nothing more.
    let (engagements, seen): (Vec<String>, Vec<String>) =
        seen.into_iter().partition(|u| u.contains("&sd="));
    for uri in &engagements {
        for secret in ["SECRET", "XYZ", "FRAG", "HASH", "token", "%3F", "%23"] {
            assert!(!uri.contains(secret), "{secret} sent: {uri}");
        }
        let query = uri.split_once('?').map_or("", |(_, q)| q);
        let params: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
        let sent: std::collections::BTreeSet<&str> = params.keys().map(String::as_str).collect();
        assert_eq!(
            sent,
            ["et", "page", "sd", "site", "t", "w"].into_iter().collect(),
            "{uri}"
        );
        let depth: u32 = params["sd"].parse().unwrap();
        assert!(depth <= 100, "{uri}");
        params["et"].parse::<u64>().unwrap();
    }
    assert!(
        engagements.iter().any(|u| u.contains("page=%2Fstart&")),
        "the first page's engagement is sent as the app navigates: {engagements:?}"
    );
    let mut names: Vec<(String, String)> = events
        .iter()
        .map(|uri| {
            let query = uri.split_once('?').map_or("", |(_, q)| q);
            let params: std::collections::HashMap<String, String> =
                url::form_urlencoded::parse(query.as_bytes())
                    .into_owned()
                    .collect();
            let sent: std::collections::BTreeSet<&str> =
                params.keys().map(String::as_str).collect();
            assert_eq!(
                sent,
                ["e", "page", "site", "t", "w"].into_iter().collect(),
                "{uri}"
            );
            (params["e"].clone(), params["page"].clone())
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("Download PDF".to_owned(), "/events".to_owned()),
            ("Signup".to_owned(), "/events".to_owned())
        ]
    );
    let mut pages = Vec::new();
    for uri in &seen {
        for secret in [
            "SECRET", "XYZ", "FRAG", "HASH", "token", "%3F", "%23", "?q=", "?z=",
        ] {
            assert!(!uri.contains(secret), "{secret} sent: {uri}");
        }
        let query = uri.split_once('?').map_or("", |(_, q)| q);
        let params: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect();
        let referrer = params.get("ref").expect("ref is always sent");
        assert!(
            [String::new(), origin.clone(), other_origin.clone()].contains(referrer),
            "ref {referrer:?} is no origin: {uri}"
        );
        let sent: std::collections::BTreeSet<&str> = params.keys().map(String::as_str).collect();
        assert_eq!(
            sent,
            ["page", "ref", "site", "t", "w"].into_iter().collect(),
            "{uri}"
        );
        pages.push((params["page"].clone(), referrer.clone()));
    }
    pages.sort();
    assert_eq!(
        pages,
        vec![
            ("/events".to_owned(), String::new()),
            ("/full".to_owned(), origin.clone()),
            ("/landing".to_owned(), other_origin.clone()),
            ("/next".to_owned(), origin.clone()),
            ("/start".to_owned(), String::new()),
        ],
        "every view sent once: {seen:?}"
    );
    handle.stop(true).await;
    other_handle.stop(true).await;
}

/// A real page sends events to Tickertape itself, from
/// `tickertape.track` and from a click inside a `data-tt-event` element:
/// each counts once as an event of the page and of the site, never as a
/// view, and the dashboard's goal of that event shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_from_a_real_page_count_as_events_and_never_as_views() {
    use tickertape::domain::{Dimension, Goal};
    let app = spawn_app().await;
    let site = app.add_site("events.test", &["127.0.0.1"]).await;
    let s = snippets::for_site(&app.address, &site.id);
    let body = format!(
        "<!doctype html><html><head><title>Events</title></head><body>{}\
         <button data-tt-event=\"Download PDF\"><span id=\"inner\">get</span></button>\
         <script>setTimeout(function(){{tickertape.track('Signup');\
         document.getElementById('inner').click();}},400);</script></body></html>",
        s.script
    );
    let (port, handle) = site_server(vec![("/pricing", body)], None);
    let url = format!("http://127.0.0.1:{port}/pricing");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    let want: std::collections::BTreeMap<String, i64> =
        [("Download PDF".to_owned(), 1), ("Signup".to_owned(), 1)].into();
    let deadline = Instant::now() + Duration::from_secs(10);
    let site_events = loop {
        app.settle().await;
        let got = breakdown_counts(
            &app,
            "site_breakdowns_day",
            bson::doc! {"site": "events.test"},
            Dimension::Event,
        )
        .await;
        if got == want || Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(site_events, want, "the site's events");
    assert_eq!(
        breakdown_counts(
            &app,
            "breakdowns_day",
            bson::doc! {"page": "events.test/pricing"},
            Dimension::Event
        )
        .await,
        want,
        "the page's events"
    );
    assert_eq!(
        minute_views(&app, "events.test/pricing").await,
        1,
        "the load is the page's one view; its events are none"
    );
    // An owner who marks the event as a goal sees its conversion.
    let goal = Goal::parse("event", "Signup").unwrap();
    tickertape::storage::sites::add_goal(&app.store, &site.id, &goal)
        .await
        .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    app.add_user("owner@example.com", tickertape::accounts::Role::Admin)
        .await;
    let owner = app.login("owner@example.com").await;
    let (status, html) = owner.text(&format!("/sites/{}?range=24h", site.id)).await;
    assert_eq!(status, 200);
    let goals = table_rows(&html, "goals-table");
    assert_eq!(
        goals[0][..2],
        ["Signup".to_owned(), "1".to_owned()],
        "{goals:?}"
    );
    handle.stop(true).await;
}

/// Filters and funnels in a real browser: a country row of the dashboard
/// filters it (a chip says so, and the figures are the filtered ones), the
/// chip's × removes it; a funnel defined on the settings page is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_country_row_filters_the_dashboard_and_a_funnel_is_shown_in_a_real_browser() {
    use crate::webdriver::Browser;
    use tickertape::accounts::Role;

    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let site = app.add_site("filters.test", &[]).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    app.set_owners(&site, &[owner.id]).await;
    // Visits from the US (a public address) and from nowhere known (a
    // private one): pages, a source, an event.
    let start = t0() - chrono::TimeDelta::hours(2);
    let salts = app.store.db().collection::<bson::Document>("salts");
    app.clock.set(start);
    let day = start.format("%Y-%m-%d").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while salts
        .count_documents(bson::doc! {"_id": &day})
        .await
        .unwrap()
        == 0
    {
        assert!(Instant::now() < deadline, "no salt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut us_views = 0;
    for person in 0..12u32 {
        let ip = if person % 3 == 0 {
            format!("10.9.0.{}", person + 1)
        } else {
            format!("8.8.8.{}", person + 1)
        };
        let paths: &[&str] = match person % 4 {
            0 => &["/", "/pricing", "/signup"],
            1 => &["/", "/pricing"],
            2 => &["/blog/one"],
            _ => &["/", "/docs", "/pricing", "/signup"],
        };
        for (i, path) in paths.iter().enumerate() {
            app.clock
                .set(start + chrono::TimeDelta::minutes(i64::from(person) * 5 + i as i64));
            let mut query = format!("site={}&page={}", site.id, path.replace('/', "%2F"));
            if i == 0 && person % 2 == 0 {
                query.push_str("&ref=https%3A%2F%2Fwww.google.com%2F");
            }
            let r = app
                .pixel_with(
                    &query,
                    &[("user-agent", BROWSER_UA), ("x-forwarded-for", &ip)],
                )
                .await;
            assert_eq!(r.status(), 200);
            if person % 3 != 0 {
                us_views += 1;
            }
            if *path == "/signup" {
                let e = format!("site={}&page=%2Fsignup&e=Signup", site.id);
                app.pixel_with(&e, &[("user-agent", BROWSER_UA), ("x-forwarded-for", &ip)])
                    .await;
            }
        }
    }
    app.clock.set(t0());
    app.settle().await;

    let browser = Browser::start(BROWSER_UA).await;
    browser.goto(&format!("{}/login", app.address)).await;
    browser.type_into("#email", "owner@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click_and_load("form button[type=submit]").await;
    browser.wait_for_url(|u| u.ends_with("/sites")).await;
    let dashboard = format!("{}/sites/{}?range=24h", app.address, site.id);
    browser.goto(&dashboard).await;
    assert_eq!(browser.count("#filters").await, 0, "no chip unfiltered");
    let all = browser.text("#total").await;
    // The country panel's row of the United States.
    browser
        .click_and_load("#breakdown-country a.add-filter[data-filter='country:US']")
        .await;
    let url = browser.wait_for_url(|u| u.contains("filter=country")).await;
    assert!(url.contains("filter=country%3AUS"), "{url}");
    assert_eq!(browser.count("#filters .chip").await, 1, "one chip");
    assert!(browser
        .text("#filters .chip")
        .await
        .contains("United States"));
    assert_eq!(
        browser.text("#total").await,
        tickertape::web::fmt::thousands(&us_views),
        "the views of the US visits"
    );
    browser.screenshot("filters-test-dashboard").await;
    // The chip's × takes the filter away: the dashboard as before.
    browser.click_and_load("#filters .chip-remove").await;
    let url = browser.wait_for_url(|u| !u.contains("filter=")).await;
    assert!(!url.contains("filter="), "{url}");
    assert_eq!(browser.count("#filters").await, 0);
    assert_eq!(browser.text("#total").await, all);

    // A funnel defined on the settings page, then its report.
    browser
        .goto(&format!("{}/sites/{}/settings", app.address, site.id))
        .await;
    browser.type_into("#funnel_name", "Pricing to signup").await;
    browser.type_into("#funnel_step1", "/").await;
    browser.type_into("#funnel_step2", "/pricing").await;
    browser.type_into("#funnel_step3", "/signup").await;
    browser.type_into("#funnel_step4", "event:Signup").await;
    browser
        .click_and_load("#funnel-form button[type=submit]")
        .await;
    browser.wait_for_url(|u| u.contains("funnel-added")).await;
    assert_eq!(browser.count("#funnels-list tbody tr").await, 1);
    browser
        .goto(&format!(
            "{}/sites/{}/funnels?range=24h",
            app.address, site.id
        ))
        .await;
    assert_eq!(browser.count(".funnel-table tbody tr").await, 4);
    assert!(browser.text("#funnel-table-1").await.contains("/pricing"));
    browser.screenshot("filters-test-funnel").await;
    browser.quit().await;
}

//! Peers' trackers, unchanged: Plausible's `POST /api/event`,
//! Umami's `POST /api/send` and GoatCounter's `/count` count like the
//! pixel, with its rules, and every bad request changes nothing.

use std::collections::BTreeMap;
use tickertape::domain::Dimension;
use tickertape::storage::Resolution;
use tickertape::web::pixel::REASON_HEADER;

use crate::helpers::*;

async fn views_by_page(app: &TestApp) -> BTreeMap<String, i64> {
    app.settle().await;
    let mut by = BTreeMap::new();
    for b in app.buckets(Resolution::Minute).await {
        *by.entry(b.page).or_default() += b.total_views;
    }
    by
}

fn map(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

fn reason(r: &reqwest::Response) -> Option<String> {
    r.headers()
        .get(REASON_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
}

async fn plausible(app: &TestApp, body: &str, ua: Option<&str>) -> reqwest::Response {
    let mut request = app
        .http
        .post(format!("{}/api/event", app.address))
        .header("content-type", "text/plain")
        .body(body.to_owned());
    if let Some(ua) = ua {
        request = request.header("user-agent", ua);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn plausible_bodies_count_views_and_events_and_bad_ones_change_nothing() {
    let app = spawn_app().await;
    app.add_site("blog.test", &["www.blog.test"]).await;
    // A view (the domain found in a comma list, utm fields from the URL),
    // an event under the long field names, and an engagement.
    let counted = [
        r#"{"n":"pageview","u":"https://blog.test/a?utm_source=news&utm_campaign=spring&x=1","d":"other.test, blog.test","r":"https://www.google.com/search?q=x","v":36}"#,
        r#"{"name":"Signup","url":"https://www.blog.test/a","domain":"blog.test","referrer":null,"props":{"plan":"pro"}}"#,
        r#"{"n":"engagement","sd":40,"d":"blog.test","u":"https://blog.test/a","e":1200,"v":36}"#,
    ];
    for body in counted {
        let r = plausible(&app, body, None).await;
        assert_eq!(r.status(), 202, "{body}");
        assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "*");
        assert_eq!(r.text().await.unwrap(), "ok");
    }
    // A body that is not Plausible's is refused, whatever its domain.
    let long = format!(
        r#"{{"n":"pageview","u":"https://blog.test/{}","d":"blog.test"}}"#,
        "x".repeat(20_000)
    );
    let refused: [(&str, u16, Option<&str>); 3] = [
        ("n=pageview", 400, Some("invalid-body")),
        (
            r#"{"n":"pageview","d":"blog.test"}"#,
            400,
            Some("invalid-body"),
        ),
        (&long, 413, None),
    ];
    for (body, status, why) in refused {
        let r = plausible(&app, body, None).await;
        assert_eq!(r.status(), status, "{}", &body[..body.len().min(80)]);
        assert_eq!(
            reason(&r).as_deref(),
            why,
            "{}",
            &body[..body.len().min(80)]
        );
    }
    // Every readable body that is not counted is answered exactly as a
    // counted one, for a tracked domain as for one nobody tracks, so that
    // nobody learns which domains are tracked here; the reason is in the
    // metrics only. Nothing is counted.
    let before = app.metrics().await;
    let uncounted: [(&str, Option<&str>, &str); 5] = [
        (
            r#"{"n":"pageview","u":"https://evil.test/x","d":"blog.test"}"#,
            None,
            "foreign-host",
        ),
        (
            r#"{"n":"<b>","u":"https://blog.test/x","d":"blog.test"}"#,
            None,
            "invalid-event",
        ),
        (
            r#"{"n":"pageview","u":"https://blog.test/%FF","d":"blog.test"}"#,
            None,
            "invalid-utf8",
        ),
        (
            r#"{"n":"pageview","u":"https://blog.test/x","d":"blog.test"}"#,
            Some("Googlebot/2.1 (+http://www.google.com/bot.html)"),
            "bot",
        ),
        (
            r#"{"n":"pageview","u":"https://nobody.test/x","d":"nobody.test"}"#,
            None,
            "unknown-site",
        ),
    ];
    let answer = |r: reqwest::Response| async move {
        let headers: Vec<(String, String)> = r
            .headers()
            .iter()
            .filter(|(k, _)| *k != "date" && *k != "content-length")
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        (r.status().as_u16(), headers, r.text().await.unwrap())
    };
    let counted_answer = answer(plausible(&app, counted[2], None).await).await;
    for (body, ua, why) in uncounted {
        let got = answer(plausible(&app, body, ua).await).await;
        assert_eq!(got, counted_answer, "{body}");
        let metric = |m: &str| {
            m.lines()
                .find_map(|l| {
                    l.strip_prefix(&format!("tickertape_hits_total{{outcome=\"{why}\"}} "))
                })
                .map(|v| v.parse::<f64>().unwrap())
                .unwrap_or(0.0)
        };
        let after = app.metrics().await;
        assert_eq!(
            metric(&after),
            metric(&before) + 1.0,
            "{why} counted in /metrics"
        );
    }
    assert_eq!(views_by_page(&app).await, map(&[("blog.test/a", 1)]));
    assert_eq!(
        site_day_counts(&app, Dimension::Event).await,
        map(&[("Signup", 1)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("news", 1)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Campaign).await,
        map(&[("spring", 1)])
    );
}

#[tokio::test]
async fn umami_bodies_count_views_and_events_and_bad_ones_change_nothing() {
    let app = spawn_app().await;
    let site = app.add_site("shop.test", &[]).await;
    let id = site.id.to_string();
    let send = |body: serde_json::Value| {
        let request = app
            .http
            .post(format!("{}/api/send", app.address))
            .json(&body);
        async move { request.send().await.unwrap() }
    };
    let view = serde_json::json!({"type": "event", "payload": {
        "website": id, "hostname": "shop.test", "url": "/cart?utm_medium=email",
        "referrer": "https://news.example/", "title": "Cart", "screen": "390x844", "language": "de-DE"}});
    let event = serde_json::json!({"type": "event", "payload": {
        "website": id, "url": "/cart", "name": "Checkout", "data": {"total": 12}}});
    let server_event =
        serde_json::json!({"type": "event", "payload": {"website": id, "name": "Refund"}});
    let identify = serde_json::json!({"type": "identify", "payload": {"website": id, "data": {"plan": "pro"}}});
    for body in [view, event, server_event, identify] {
        let r = send(body.clone()).await;
        assert_eq!(r.status(), 200, "{body}");
        assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "*");
        assert_eq!(
            r.json::<serde_json::Value>().await.unwrap(),
            serde_json::json!({})
        );
    }
    let unknown = tickertape::domain::SiteId::new().to_string();
    let refused = [
        (serde_json::json!({"type": "event"}), 400, "invalid-body"),
        (
            serde_json::json!({"type": "other", "payload": {"website": id, "url": "/"}}),
            400,
            "invalid-body",
        ),
        (
            serde_json::json!({"type": "event", "payload": {"website": "not-a-uuid", "url": "/"}}),
            400,
            "invalid-site",
        ),
        (
            serde_json::json!({"type": "event", "payload": {"website": unknown, "url": "/"}}),
            404,
            "unknown-site",
        ),
        (
            serde_json::json!({"type": "event", "payload": {"website": id, "url": "https://evil.test/"}}),
            403,
            "foreign-host",
        ),
        (
            serde_json::json!({"type": "event", "payload": {"website": id, "url": "/", "name": "a\u{7}b"}}),
            400,
            "invalid-event",
        ),
        // A view that names no page and comes with no Referer.
        (
            serde_json::json!({"type": "event", "payload": {"website": id}}),
            400,
            "no-page",
        ),
    ];
    for (body, status, why) in refused {
        let r = send(body.clone()).await;
        assert_eq!(r.status(), status, "{body}");
        assert_eq!(reason(&r).as_deref(), Some(why), "{body}");
        assert_eq!(
            r.json::<serde_json::Value>().await.unwrap(),
            serde_json::json!({ "error": why })
        );
    }
    let r = app
        .http
        .post(format!("{}/api/send", app.address))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), reason(&r).as_deref()),
        (400, Some("invalid-body"))
    );
    // The preflight of a JSON post from another origin.
    let r = app
        .http
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/api/send", app.address),
        )
        .header("origin", "https://shop.test")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(r.headers().get("access-control-allow-origin").unwrap(), "*");
    assert!(r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("content-type"));
    assert_eq!(views_by_page(&app).await, map(&[("shop.test/cart", 1)]));
    assert_eq!(
        site_day_counts(&app, Dimension::Event).await,
        map(&[("Checkout", 1), ("Refund", 1)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Medium).await,
        map(&[("email", 1)])
    );
}

#[tokio::test]
async fn goatcounter_counts_count_like_the_pixel_and_bad_ones_change_nothing() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let count = |method: reqwest::Method, query: &str, referer: Option<&str>| {
        let mut request = app
            .http
            .request(method, format!("{}/count?{query}", app.address));
        if let Some(r) = referer {
            request = request.header("referer", r);
        }
        async move { request.send().await.unwrap() }
    };
    let page = Some("https://docs.test/");
    let counted = [
        (reqwest::Method::GET, "p=%2Fguide&r=https%3A%2F%2Fnews.example%2F&t=Guide&q=%3Futm_campaign%3Dlaunch&s=1920%2C1080%2C1&b=0&rnd=k2", page),
        // count.js sends with navigator.sendBeacon when it can: a POST.
        (reqwest::Method::POST, "p=%2Fguide&rnd=k3", page),
        (reqwest::Method::GET, "p=Download&e=true&rnd=k4", Some("https://docs.test/guide")),
        // The first `p` wins, as for the pixel: an event named "/x".
        (reqwest::Method::GET, "p=%2Fx&e=true&p=1", page),
    ];
    for (method, query, referer) in counted {
        let r = count(method, query, referer).await;
        assert_eq!(r.status(), 200, "{query}");
        assert_eq!(r.headers()["content-type"], "image/gif");
        assert_eq!(reason(&r), None, "{query}");
    }
    let refused = [
        ("p=%2Fx&b=150", page, 403, Some("bot")),
        ("p=%2Fx", None, 400, Some("no-site")),
        ("p=x", page, 400, Some("invalid-page")),
        ("p=%3Cb%3E&e=true", page, 400, Some("invalid-event")),
        // A host nobody tracks: answered like a count, nothing kept.
        ("p=%2Fx", Some("https://nobody.test/"), 200, None),
    ];
    for (query, referer, status, why) in refused {
        let r = count(reqwest::Method::GET, query, referer).await;
        assert_eq!(r.status(), status, "{query}");
        assert_eq!(reason(&r).as_deref(), why, "{query}");
    }
    // A HEAD is answered like a GET and counts nothing.
    let r = count(reqwest::Method::HEAD, "p=%2Fhead", page).await;
    assert_eq!(r.status(), 200);
    // Nor is a HEAD count.js calls a bot counted in the stats.
    let bots = app
        .ingest
        .stats
        .count(tickertape::ingest::pixel::Outcome::Bot);
    let r = count(reqwest::Method::HEAD, "p=%2Fhead&b=150", page).await;
    assert_eq!(
        (r.status().as_u16(), reason(&r).as_deref()),
        (403, Some("bot"))
    );
    assert_eq!(
        app.ingest
            .stats
            .count(tickertape::ingest::pixel::Outcome::Bot),
        bots
    );
    assert_eq!(views_by_page(&app).await, map(&[("docs.test/guide", 2)]));
    assert_eq!(
        site_day_counts(&app, Dimension::Event).await,
        map(&[("/x", 1), ("Download", 1)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Campaign).await,
        map(&[("launch", 1)])
    );
}

/// The npm packages `make test` installs (`PEER_TRACKERS` in the Makefile).
fn npm_package_file(path: &str) -> std::path::PathBuf {
    let file = repo_root().join("target/npm/node_modules").join(path);
    assert!(
        file.is_file(),
        "{} is missing: `make test-deps` installs the peers' trackers from npm",
        file.display()
    );
    file
}

/// Pages with each peer's snippet pointed at Tickertape, and a page with
/// Plausible's own npm tracker, in headless Chromium: every view and event
/// is counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_snippets_and_plausibles_own_tracker_count_in_a_real_browser() {
    use crate::browser::{load_in_browser, site_server};
    let app = spawn_app().await;
    // The pages are served from 127.0.0.1, which Plausible's `u` and
    // GoatCounter's Referer name.
    let site = app.add_site("blog.test", &["127.0.0.1"]).await;
    let a = &app.address;
    let id = site.id;
    let page = |title: &str, body: String| {
        format!("<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>")
    };
    // A click once the page has loaded, for the no-code events.
    let click = r#"<script>addEventListener("load",function(){setTimeout(function(){document.getElementById("go").click()},50)})</script>"#;
    let tracker = std::fs::read_to_string(npm_package_file(
        "@plausible-analytics/tracker/plausible.js",
    ))
    .unwrap();
    let pages = vec![
        // Plausible's snippet, with its queue stub called before the
        // script is there.
        (
            "/plausible.html",
            page(
                "Plausible",
                format!(
                    r#"<script defer data-domain="blog.test" src="{a}/js/script.js"></script>
<script>window.plausible=window.plausible||function(){{(window.plausible.q=window.plausible.q||[]).push(arguments)}};plausible("Signup")</script>"#
                ),
            ),
        ),
        (
            "/umami.html",
            page(
                "Umami",
                format!(
                    r#"<script defer src="{a}/script.js" data-website-id="{id}"></script>
<button id="go" data-umami-event="Buy">Buy</button>{click}"#
                ),
            ),
        ),
        (
            "/goatcounter.html",
            page(
                "GoatCounter",
                format!(
                    r#"<script data-goatcounter="{a}/count" async src="{a}/count.js"></script>
<button id="go" data-goatcounter-click="Download">Get it</button>{click}"#
                ),
            ),
        ),
        (
            "/npm-plausible.html",
            page(
                "Plausible from npm",
                format!(
                    r#"<script type="module">import {{init, track}} from "/plausible.js";
init({{domain: "blog.test", endpoint: "{a}/api/event", captureOnLocalhost: true}});
track("Trial", {{props: {{plan: "pro"}}, revenue: {{amount: 19.99, currency: "EUR"}}}});</script>"#
                ),
            ),
        ),
        ("/plausible.js", tracker),
    ];
    let (port, handle) = site_server(pages, None);
    for path in ["plausible", "umami", "goatcounter", "npm-plausible"] {
        let url = format!("http://127.0.0.1:{port}/{path}.html");
        tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
            .await
            .unwrap();
    }
    let want_views = map(&[
        ("blog.test/goatcounter.html", 1),
        ("blog.test/npm-plausible.html", 1),
        ("blog.test/plausible.html", 1),
        ("blog.test/umami.html", 1),
    ]);
    let want_events = map(&[("Buy", 1), ("Download", 1), ("Signup", 1), ("Trial", 1)]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (views, events) = (
            views_by_page(&app).await,
            site_day_counts(&app, Dimension::Event).await,
        );
        if (views == want_views && events == want_events) || std::time::Instant::now() > deadline {
            assert_eq!(views, want_views);
            assert_eq!(events, want_events);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Plausible's npm tracker sent `props` and `revenue` with its event:
    // kept on it, the amount exactly.
    app.settle().await;
    assert_eq!(
        crate::properties::stored_props(&app, "blog.test").await,
        map(&[("plan=pro", 1)])
    );
    assert_eq!(
        crate::revenue::stored_revenue(&app).await,
        BTreeMap::from([("Trial EUR".to_owned(), (199_900, 1))])
    );
    handle.stop(true).await;
}

/// A page's engagement counters in its day buckets: engaged views, the sum
/// of their greatest scroll depths, engaged milliseconds.
async fn engagement_of(app: &TestApp, page: &str) -> [i64; 3] {
    use futures::TryStreamExt;
    let docs: Vec<bson::Document> = app
        .store
        .db()
        .collection::<bson::Document>("views_day")
        .find(bson::doc! {"page": page})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out = [0; 3];
    for d in &docs {
        for (i, field) in ["engagedViews", "scrollSum", "engagedMs"]
            .iter()
            .enumerate()
        {
            if let Ok(slots) = d.get_document(field) {
                out[i] += slots
                    .values()
                    .map(|v| v.as_i64().or(v.as_i32().map(i64::from)).unwrap_or(0))
                    .sum::<i64>();
            }
        }
    }
    out
}

/// Plausible's own npm tracker in Chromium, unchanged: a reader scrolls a
/// long page to its end and the app navigates on; the tracker's
/// `engagement` event for the first page (its `sd` and `e`) counts that
/// view once, at 100 % scroll depth, with the time it was shown, and
/// neither page gets a view more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plausibles_tracker_sends_scroll_depth_and_engaged_time_in_a_real_browser() {
    use crate::browser::site_server;
    let app = spawn_app().await;
    app.add_site("blog.test", &["127.0.0.1"]).await;
    let tracker = std::fs::read_to_string(npm_package_file(
        "@plausible-analytics/tracker/plausible.js",
    ))
    .unwrap();
    // `__plausible`: the tracker ignores a browser driven by WebDriver
    // unless the page says it is meant to count.
    let long = format!(
        r#"<!doctype html><html><head><title>Long</title></head><body>
<div style="height:6000px">A long read</div>
<script type="module">window.__plausible = true;
import {{init}} from "/plausible.js";
init({{domain: "blog.test", endpoint: "{a}/api/event", captureOnLocalhost: true}});
setTimeout(function(){{ window.scrollTo(0, document.body.scrollHeight); }}, 400);
setTimeout(function(){{ history.pushState({{}}, "", "/second.html"); }}, 4000);</script>
</body></html>"#,
        a = app.address
    );
    let (port, handle) = site_server(vec![("/long.html", long), ("/plausible.js", tracker)], None);
    let browser = crate::webdriver::Browser::start(BROWSER_UA).await;
    browser
        .goto(&format!("http://127.0.0.1:{port}/long.html"))
        .await;
    // The test's clock stands still: once the first view is in, it moves
    // on, so the time since the view (which bounds its engaged time) is
    // the reader's 4 s and more.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while views_by_page(&app).await.get("blog.test/long.html") != Some(&1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the first view is counted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    app.clock.set(t0() + chrono::TimeDelta::seconds(60));
    let want_views = map(&[("blog.test/long.html", 1), ("blog.test/second.html", 1)]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let engaged = loop {
        let (views, engaged) = (
            views_by_page(&app).await,
            engagement_of(&app, "blog.test/long.html").await,
        );
        if (views == want_views && engaged[0] == 1) || std::time::Instant::now() > deadline {
            assert_eq!(views, want_views);
            break engaged;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    browser.quit().await;
    let [views, depth, ms] = engaged;
    assert_eq!(
        (views, depth),
        (1, 100),
        "one engaged view, scrolled to its end"
    );
    // Shown about 4 s before the navigation: the time the tracker
    // measured, within the time since the view.
    assert!((1_000..=60_000).contains(&ms), "engaged ms {ms}");
    handle.stop(true).await;
}

/// Umami's node client, as a site's server would run it.
#[tokio::test]
async fn umamis_node_client_counts_views_and_events() {
    let app = spawn_app().await;
    let site = app.add_site("api.test", &[]).await;
    let client = npm_package_file("@umami/node/dist/index.js");
    let script = format!(
        r#"const umami = require({client:?}).default;
umami.init({{websiteId: "{id}", hostUrl: "{a}"}});
(async () => {{
  for (const r of [
    await umami.track({{url: "/docs", hostname: "api.test", title: "Docs"}}),
    await umami.track({{url: "/docs", name: "Copy"}}),
    await umami.track("Signup", {{plan: "pro", revenue: 9.5, currency: "USD"}}),
    await umami.identify({{plan: "pro"}}),
  ]) console.log(r.status, await r.text());
}})().catch(e => {{ console.error(e); process.exit(1); }});"#,
        client = client.display().to_string(),
        id = site.id,
        a = app.address,
    );
    let output = tokio::process::Command::new("node")
        .arg("-e")
        .arg(&script)
        .output()
        .await
        .expect("node (make test-deps installs nodejs)");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "200 {}\n200 {}\n200 {}\n200 {}\n"
    );
    assert_eq!(views_by_page(&app).await, map(&[("api.test/docs", 1)]));
    assert_eq!(
        site_day_counts(&app, Dimension::Event).await,
        map(&[("Copy", 1), ("Signup", 1)])
    );
    // Its event data is the event's properties, and its revenue and
    // currency, as Umami's revenue report reads them, its revenue too.
    assert_eq!(
        crate::properties::stored_props(&app, "api.test").await,
        map(&[("currency=USD", 1), ("plan=pro", 1), ("revenue=9.5", 1)])
    );
    assert_eq!(
        crate::revenue::stored_revenue(&app).await,
        BTreeMap::from([("Signup USD".to_owned(), (95_000, 1))])
    );
}

/// What GoatCounter's own count.js requests for a page opened without a
/// referrer: written from reading its `get_data` and `urlencode`
/// (GoatCounter's `public/count.js`; the file is not copied here). `p` is
/// `pathname + search`, `q` is `location.search` again, empty values (`r`
/// when `document.referrer` is empty, `e` when false) are left out, `b`
/// is its bot check (0) and `rnd` five random characters, in that order.
fn count_js_view(path: &str, search: &str, title: &str, screen: &str) -> String {
    let e = |s: &str| {
        url::form_urlencoded::byte_serialize(s.as_bytes())
            .collect::<String>()
            .replace('+', "%20")
    };
    let mut query = format!(
        "p={}&t={}&s={}&b=0",
        e(&format!("{path}{search}")),
        e(title),
        e(screen)
    );
    if !search.is_empty() {
        query.push_str(&format!("&q={}", e(search)));
    }
    query + "&rnd=k2x9a"
}

#[tokio::test]
async fn count_js_keeps_every_campaign_field_of_a_page_with_a_query() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let query = count_js_view(
        "/guide",
        "?utm_source=Newsletter&utm_medium=email&utm_campaign=nov",
        "Guide",
        "1920,1080,1",
    );
    let r = app
        .http
        .get(format!("{}/count?{query}", app.address))
        // A cross-origin image request carries the page's origin.
        .header("referer", "https://docs.test/")
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None), "{query}");
    assert_eq!(views_by_page(&app).await, map(&[("docs.test/guide", 1)]));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("newsletter", 1)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Medium).await,
        map(&[("email", 1)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Campaign).await,
        map(&[("nov", 1)])
    );
}

/// One rule for every way in: a view whose script ran and found no
/// referrer is `direct`; a view where nothing could know the referrer
/// (the bare pixel, GoatCounter's `<noscript>` image) has no source and
/// counts under the reports' "(none)".
#[tokio::test]
async fn a_view_without_a_referrer_is_direct_from_every_script_and_sourceless_from_a_bare_image() {
    let app = spawn_app().await;
    let site = app.add_site("web.test", &[]).await;
    let id = site.id.to_string();
    let gc = |query: String| {
        let request = app
            .http
            .get(format!("{}/count?{query}", app.address))
            .header("referer", "https://web.test/");
        async move { request.send().await.unwrap() }
    };
    let mut views = BTreeMap::new();
    let mut step = |page: &str| {
        views.insert(format!("web.test{page}"), 1);
        views.clone()
    };

    // The pixel alone: nothing knows the page's referrer.
    let r = app.pixel(&format!("site={id}&page=%2Fbare")).await;
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(views_by_page(&app).await, step("/bare"));
    assert_eq!(site_day_counts(&app, Dimension::Source).await, map(&[]));

    // tt.js sends `ref` even when empty.
    let r = app
        .pixel(&format!("site={id}&page=%2Ftt&ref=&w=1280"))
        .await;
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(views_by_page(&app).await, step("/tt"));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("direct", 1)])
    );

    // Plausible's tracker sends `r: null` without a referrer.
    let r = plausible(
        &app,
        r#"{"n":"pageview","u":"https://web.test/plausible","d":"web.test","r":null}"#,
        None,
    )
    .await;
    assert_eq!(r.status(), 202);
    assert_eq!(views_by_page(&app).await, step("/plausible"));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("direct", 2)])
    );

    // Umami's tracker sends `referrer: ""` (its `src/tracker/index.js`).
    let r = app
        .http
        .post(format!("{}/api/send", app.address))
        .json(&serde_json::json!({"type": "event", "payload": {
            "website": id, "screen": "1920x1080", "language": "en-US", "title": "Umami",
            "hostname": "web.test", "url": "https://web.test/umami", "referrer": ""}}))
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(views_by_page(&app).await, step("/umami"));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("direct", 3)])
    );

    // GoatCounter's count.js leaves `r` out without a referrer.
    let r = gc(count_js_view(
        "/goatcounter",
        "",
        "GoatCounter",
        "1920,1080,1",
    ))
    .await;
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(views_by_page(&app).await, step("/goatcounter"));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("direct", 4)])
    );

    // Tickertape's own count.js sends `r` empty.
    let r = gc("p=%2Fcountjs&r=&s=1920%2C1080%2C1&rnd=x1".into()).await;
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(views_by_page(&app).await, step("/countjs"));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("direct", 5)])
    );

    // GoatCounter's `<noscript>` image: no script ran.
    let r = gc("p=%2Fnoscript".into()).await;
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(views_by_page(&app).await, step("/noscript"));
    assert_eq!(
        site_day_counts(&app, Dimension::Source).await,
        map(&[("direct", 5)])
    );
}

/// A desktop browser in a narrow window: GoatCounter's `s` and Umami's
/// `screen` carry an 800-px width, and the User-Agent (desktop Chrome on
/// Linux) decides the class.
#[tokio::test]
async fn a_desktop_browser_on_a_narrow_screen_is_a_desktop_through_every_tracker() {
    let app = spawn_app().await;
    let site = app.add_site("narrow.test", &[]).await;
    let id = site.id.to_string();
    let r = app
        .http
        .get(format!(
            "{}/count?{}",
            app.address,
            count_js_view("/gc", "", "GoatCounter", "800,600,1")
        ))
        .header("user-agent", BROWSER_UA)
        .header("referer", "https://narrow.test/")
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    let r = app
        .http
        .post(format!("{}/api/send", app.address))
        .header("user-agent", BROWSER_UA)
        .json(&serde_json::json!({"type": "event", "payload": {
            "website": id, "screen": "800x600", "hostname": "narrow.test",
            "url": "https://narrow.test/umami", "referrer": ""}}))
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    let r = app.pixel(&format!("site={id}&page=%2Ftt&ref=&w=800")).await;
    assert_eq!((r.status().as_u16(), reason(&r)), (200, None));
    assert_eq!(
        views_by_page(&app).await,
        map(&[
            ("narrow.test/gc", 1),
            ("narrow.test/tt", 1),
            ("narrow.test/umami", 1)
        ])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Device).await,
        map(&[("desktop", 3)])
    );
    assert_eq!(
        site_day_counts(&app, Dimension::Os).await,
        map(&[("Linux", 3)])
    );
}

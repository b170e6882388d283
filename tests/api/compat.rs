//! Peers' trackers, unchanged (issue 27): Plausible's `POST /api/event`,
//! Umami's `POST /api/send` and GoatCounter's `/count` count like the
//! pixel, with its rules, and every bad request changes nothing.

use bson::{doc, Document};
use std::collections::BTreeMap;
use tickertape::domain::dimension::from_field_name;
use tickertape::domain::Dimension;
use tickertape::ingest::pixel::REASON_HEADER;
use tickertape::storage::Resolution;

use crate::helpers::*;

/// A dimension's counts over the site's day breakdown buckets.
async fn site_counts(app: &TestApp, dimension: Dimension) -> BTreeMap<String, i64> {
    app.settle().await;
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>("site_sources_day")
            .find(doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut by = BTreeMap::new();
    for d in docs {
        if let Ok(names) = d.get_document(dimension.field()) {
            for (k, v) in names {
                *by.entry(from_field_name(k)).or_default() += v.as_i64().unwrap();
            }
        }
    }
    by
}

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
    // Every bad request: its status and reason, and nothing counted.
    let long = format!(
        r#"{{"n":"pageview","u":"https://blog.test/{}","d":"blog.test"}}"#,
        "x".repeat(20_000)
    );
    let refused: [(&str, Option<&str>, u16, Option<&str>); 8] = [
        ("n=pageview", None, 400, Some("invalid-body")),
        (
            r#"{"n":"pageview","d":"blog.test"}"#,
            None,
            400,
            Some("invalid-body"),
        ),
        (
            r#"{"n":"pageview","u":"https://evil.test/x","d":"blog.test"}"#,
            None,
            403,
            Some("foreign-host"),
        ),
        (
            r#"{"n":"<b>","u":"https://blog.test/x","d":"blog.test"}"#,
            None,
            400,
            Some("invalid-event"),
        ),
        (
            r#"{"n":"pageview","u":"https://blog.test/%FF","d":"blog.test"}"#,
            None,
            400,
            Some("invalid-utf8"),
        ),
        (
            r#"{"n":"pageview","u":"https://blog.test/x","d":"blog.test"}"#,
            Some("Googlebot/2.1 (+http://www.google.com/bot.html)"),
            403,
            Some("bot"),
        ),
        // A domain nobody tracks is answered like a count (as the pixel
        // answers a Referer nobody tracks): nothing is learnt, nothing kept.
        (
            r#"{"n":"pageview","u":"https://nobody.test/x","d":"nobody.test"}"#,
            None,
            202,
            None,
        ),
        (&long, None, 413, None),
    ];
    for (body, ua, status, why) in refused {
        let r = plausible(&app, body, ua).await;
        assert_eq!(r.status(), status, "{}", &body[..body.len().min(80)]);
        assert_eq!(
            reason(&r).as_deref(),
            why,
            "{}",
            &body[..body.len().min(80)]
        );
    }
    assert_eq!(views_by_page(&app).await, map(&[("blog.test/a", 1)]));
    assert_eq!(
        site_counts(&app, Dimension::Event).await,
        map(&[("Signup", 1)])
    );
    assert_eq!(
        site_counts(&app, Dimension::Source).await,
        map(&[("news", 1)])
    );
    assert_eq!(
        site_counts(&app, Dimension::Campaign).await,
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
        site_counts(&app, Dimension::Event).await,
        map(&[("Checkout", 1), ("Refund", 1)])
    );
    assert_eq!(
        site_counts(&app, Dimension::Medium).await,
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
    assert_eq!(views_by_page(&app).await, map(&[("docs.test/guide", 2)]));
    assert_eq!(
        site_counts(&app, Dimension::Event).await,
        map(&[("/x", 1), ("Download", 1)])
    );
    assert_eq!(
        site_counts(&app, Dimension::Campaign).await,
        map(&[("launch", 1)])
    );
}

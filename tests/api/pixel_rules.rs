//! Every rule of the pixel: what is counted under which page, and every
//! refusal with its status and reason, writing nothing.

use tickertape::ingest::pixel::Outcome;
use tickertape::storage::Resolution;

use crate::helpers::*;

struct Case {
    name: &'static str,
    query: String,
    headers: Vec<(&'static str, String)>,
    status: u16,
    reason: &'static str,
}

#[tokio::test]
async fn every_refusal_returns_the_gif_with_its_status_and_reason_and_writes_nothing() {
    let mut app = spawn_app().await;
    let site = app.add_site("example.com", &["www.example.com"]).await;
    let id = site.id.to_string();
    let long = "a".repeat(600);
    let case = |name, query: String, headers: Vec<(&'static str, String)>, status, reason| Case {
        name,
        query,
        headers,
        status,
        reason,
    };
    let cases = vec![
        case(
            "bot",
            format!("site={id}&page=/"),
            vec![(
                "user-agent",
                "Mozilla/5.0 (compatible; Googlebot/2.1)".into(),
            )],
            403,
            "bot",
        ),
        case(
            "no user agent",
            format!("site={id}&page=/"),
            vec![("user-agent", "".into())],
            403,
            "bot",
        ),
        case(
            "headless browser",
            format!("site={id}&page=/"),
            vec![("user-agent", "Mozilla/5.0 HeadlessChrome/131.0.0.0".into())],
            403,
            "bot",
        ),
        case(
            "prefetch",
            format!("site={id}&page=/"),
            vec![("sec-purpose", "prefetch".into())],
            403,
            "prefetch",
        ),
        case(
            "prerender",
            format!("site={id}&page=/"),
            vec![("sec-purpose", "prefetch;prerender".into())],
            403,
            "prefetch",
        ),
        case(
            "legacy prefetch",
            format!("site={id}&page=/"),
            vec![("purpose", "prefetch".into())],
            403,
            "prefetch",
        ),
        case(
            "unknown site",
            "site=00000000-0000-4000-8000-000000000000&page=/".into(),
            vec![],
            404,
            "unknown-site",
        ),
        case(
            "malformed site",
            "site=example.com&page=/".into(),
            vec![],
            400,
            "invalid-site",
        ),
        case(
            "operator as site",
            "site=%7B%22%24gt%22%3A%22%22%7D&page=/".into(),
            vec![],
            400,
            "invalid-site",
        ),
        case(
            "no site, no referer",
            "page=/".into(),
            vec![],
            400,
            "no-site",
        ),
        case(
            "foreign host in a full URL",
            format!("site={id}&page=https%3A%2F%2Fevil.com%2Fx"),
            vec![],
            403,
            "foreign-host",
        ),
        case(
            "look-alike host",
            format!("site={id}&page=https%3A%2F%2Fexample.com.evil.com%2Fx"),
            vec![],
            403,
            "foreign-host",
        ),
        case(
            "referer of another host",
            format!("site={id}"),
            vec![("referer", "https://evil.com/x".into())],
            403,
            "foreign-host",
        ),
        case(
            "page over 512 bytes",
            format!("site={id}&page=/{long}"),
            vec![],
            400,
            "page-too-long",
        ),
        case(
            "invalid UTF-8",
            format!("site={id}&page=/caf%E9"),
            vec![],
            400,
            "invalid-utf8",
        ),
        case(
            "escaped invalid UTF-8 in the path",
            format!("site={id}&page=/a%25FF"),
            vec![],
            400,
            "invalid-utf8",
        ),
        case(
            "newline",
            format!("site={id}&page=/a%0Ab"),
            vec![],
            400,
            "control-character",
        ),
        case(
            "NUL",
            format!("site={id}&page=/a%00"),
            vec![],
            400,
            "control-character",
        ),
        case(
            "operator as page",
            format!("site={id}&page=%7B%22%24gt%22%3A%22%22%7D"),
            vec![],
            400,
            "invalid-page",
        ),
        case(
            "dotted operator as page",
            format!("site={id}&page=%24inc.totalViews"),
            vec![],
            400,
            "invalid-page",
        ),
        case(
            "relative page",
            format!("site={id}&page=blog"),
            vec![],
            400,
            "invalid-page",
        ),
        case(
            "no page, and a Referer that is not a URL",
            format!("site={id}"),
            vec![("referer", "not a url".into())],
            400,
            "invalid-page",
        ),
        case(
            "zero-width space",
            format!("site={id}&page=/a%E2%80%8Bb"),
            vec![],
            400,
            "invalid-page",
        ),
        case(
            "right-to-left override",
            format!("site={id}&page=/invoice%E2%80%AEfdp.exe"),
            vec![],
            400,
            "invalid-page",
        ),
        case(
            "no page, no referer",
            format!("site={id}"),
            vec![],
            400,
            "no-page",
        ),
    ];
    for c in &cases {
        let headers: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = app.pixel_with(&c.query, &headers).await;
        assert_eq!(r.status().as_u16(), c.status, "{}", c.name);
        assert_eq!(r.headers()["x-tickertape-reason"], c.reason, "{}", c.name);
        assert_eq!(r.headers()["content-type"], "image/gif", "{}", c.name);
        assert_eq!(r.headers()["cache-control"], "no-store", "{}", c.name);
        assert_eq!(r.bytes().await.unwrap().len(), 43, "{}", c.name);
    }
    // Found by the Referer alone, an untracked host is answered like a
    // counted view (nobody learns which hosts are
    // tracked), and nothing is written.
    let r = app
        .pixel_with("page=/", &[("referer", "https://other.org/x")])
        .await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("x-tickertape-reason").is_none());
    assert_eq!(r.bytes().await.unwrap().len(), 43);
    // A HEAD request (link checkers) is answered like a GET, without the
    // body, but is not a view.
    let head = app
        .http
        .head(format!("{}/pixel.gif?site={id}&page=/", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-type"], "image/gif");
    assert!(head.bytes().await.unwrap().is_empty());

    app.stop().await; // drain anything that might have been queued
    assert_eq!(app.bucket_count().await, 0, "a refused hit wrote a bucket");
    let stats = &app.ingest.stats;
    assert_eq!(stats.count(Outcome::Counted), 0);
    assert_eq!(stats.count(Outcome::Bot), 3);
    assert_eq!(stats.count(Outcome::ForeignHost), 3);
}

#[tokio::test]
async fn pages_are_normalised_and_sites_found_by_id_or_referer() {
    let app = spawn_app().await;
    let site = app.add_site("example.com", &["www.example.com"]).await;
    let id = site.id.to_string();
    let counted: Vec<(String, Vec<(&str, &str)>)> = vec![
        // query string and fragment dropped
        (
            format!("site={id}&page=%2Fblog%3Futm_source%3Dx%23top"),
            vec![],
        ),
        // full URL on an alias host
        (
            format!("site={id}&page=https%3A%2F%2FWWW.example.com%2Fblog"),
            vec![],
        ),
        // no page: the Referer's path, its host checked against the site
        (
            format!("site={id}"),
            vec![("referer", "https://www.example.com/blog?x=1")],
        ),
        // no site: found by the Referer's host
        (
            "page=/about".into(),
            vec![("referer", "https://example.com/whatever")],
        ),
        // percent-escapes decoded once: one page for both spellings
        (format!("site={id}&page=%2Fcaf%25C3%25A9"), vec![]),
        (format!("site={id}&page=%2Fcaf%C3%A9"), vec![]),
        // dot segments of a bare path resolved as in a full URL
        (format!("site={id}&page=/a/../../blog"), vec![]),
        (
            format!("site={id}&page=https%3A%2F%2Fexample.com%2Fa%2F..%2F..%2Fabout"),
            vec![],
        ),
        // $ and . are plain characters of a path, stored as a string value
        (format!("site={id}&page=%2Fprice%24.html"), vec![]),
        // curl is a visitor, not a bot
        (
            format!("site={id}&page=/cli"),
            vec![("user-agent", "curl/8.5.0")],
        ),
    ];
    for (query, headers) in &counted {
        let r = app.pixel_with(query, headers).await;
        assert_eq!(
            r.status(),
            200,
            "{query} {headers:?}: {:?}",
            r.headers().get("x-tickertape-reason")
        );
    }
    let mut pages: Vec<(String, i64)> = app
        .buckets(Resolution::Minute)
        .await
        .into_iter()
        .map(|b| (b.page, b.total_views))
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        [
            ("example.com/about".to_owned(), 2),
            ("example.com/blog".to_owned(), 4),
            ("example.com/café".to_owned(), 2),
            ("example.com/cli".to_owned(), 1),
            ("example.com/price$.html".to_owned(), 1),
        ]
    );
}

#[tokio::test]
async fn pages_of_a_site_are_one_contiguous_key_range() {
    let app = spawn_app().await;
    let a = app.add_site("example.com", &[]).await;
    let b = app.add_site("example.com.au", &[]).await;
    for (site, page) in [(&a, "/x"), (&b, "/y"), (&a, "/z")] {
        assert_eq!(
            app.pixel(&format!("site={}&page={page}", site.id))
                .await
                .status(),
            200
        );
    }
    app.settle().await;
    let in_range = app
        .store
        .buckets(Resolution::Minute)
        .count_documents(bson::doc! {"page": {"$gte": "example.com/", "$lt": "example.com0"}})
        .await
        .unwrap();
    assert_eq!(
        in_range, 2,
        "example.com.au's pages sort outside example.com's range"
    );
}

/// The median of `samples`, in milliseconds.
fn median_ms(samples: &mut [std::time::Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

/// A host nobody tracks is answered like a counted hit in content (200 and
/// the GIF, 202 "ok") and in time: a tracked host's answer waits for the
/// journal's sync, so an instant answer would tell them apart. Requests
/// of both kinds are interleaved over one connection, and the medians of
/// 200 each compared (an untracked median at least half the tracked one;
/// before the refusal waited, it was a small fraction of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_nobody_tracks_is_answered_in_the_time_of_a_count() {
    use std::time::{Duration, Instant};
    let mut app = spawn_app().await;
    app.add_site("timed.test", &[]).await;
    {
        let pixel = |host: &'static str| {
            let app = &app;
            async move {
                let started = Instant::now();
                let r = app
                    .pixel_with("page=/p", &[("referer", &format!("https://{host}/p"))])
                    .await;
                let took = started.elapsed();
                assert_eq!(r.status(), 200, "{host}");
                r.bytes().await.unwrap();
                took
            }
        };
        let event = |host: &'static str| {
            let app = &app;
            async move {
                let body =
                    format!(r#"{{"n":"pageview","u":"https://{host}/p","d":"{host}","r":null}}"#);
                let started = Instant::now();
                let r = app
                    .http
                    .post(format!("{}/api/event", app.address))
                    .header("content-type", "text/plain")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let took = started.elapsed();
                assert_eq!(r.status(), 202, "{host}");
                r.bytes().await.unwrap();
                took
            }
        };
        for kind in ["pixel", "/api/event"] {
            let (mut tracked, mut untracked): (Vec<Duration>, Vec<Duration>) = (vec![], vec![]);
            for i in 0..220 {
                let (t, u) = if kind == "pixel" {
                    (pixel("timed.test").await, pixel("nobody.test").await)
                } else {
                    (event("timed.test").await, event("nobody.test").await)
                };
                // The first ones warm up the connection and the caches.
                if i >= 20 {
                    tracked.push(t);
                    untracked.push(u);
                }
            }
            let (t, u) = (median_ms(&mut tracked), median_ms(&mut untracked));
            eprintln!("{kind}: median tracked {t:.3} ms, untracked {u:.3} ms (200 each)");
            assert!(
                u >= 0.5 * t,
                "{kind}: an untracked host answers in {u:.3} ms, a tracked one in {t:.3} ms"
            );
        }
    }
    // Drained and stopped before its database is dropped.
    app.settle().await;
    app.stop().await;
}

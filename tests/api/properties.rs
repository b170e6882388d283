//! Custom properties: random visits whose views and events carry
//! properties, sent through the real pixel to sites in three time zones,
//! and each property's values (visits, views, events) in the API, the CSV
//! and the page compared with a plain computation over the hits sent, over
//! random ranges with sub-hour edges, with filters and without; the
//! `prop:` filter's figures likewise. Also: the peers' bodies and hostile
//! properties get the peers' answer and store nothing wrong, and a site's
//! budget bounds what one client brings.
//!
//! `PROPERTIES_SEED=<n>` replays a run; a failure prints its seed.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::collections::{BTreeMap, HashSet};
use tickertape::accounts::Role;

use crate::helpers::*;
use crate::json_api::{create_token, get};
use crate::segments::figures_in;
use crate::traffic::*;

/// value → (visits, views, events)
pub(crate) type Rows = BTreeMap<String, (i64, i64, i64)>;

/// What a range counts of one key: each value's visits (passing the
/// filters, with a counted view or an event carrying it in the range),
/// views and events; and the visits with any counted view or event in the
/// range (what the shares are of).
fn property_rows(
    persons: &[Person],
    visits: &[Visit],
    filters: &[&str],
    key: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> (Rows, i64) {
    let mut rows = Rows::new();
    let mut of = 0;
    for v in visits
        .iter()
        .filter(|v| filters.iter().all(|x| passes(persons, v, x)))
    {
        // A view counts where the filtered reports count it: of the pages
        // every page filter names.
        let counted = |h: &Hit| {
            h.event.is_some()
                || filters
                    .iter()
                    .filter_map(|f| f.strip_prefix("page:"))
                    .all(|p| match p.strip_suffix('*') {
                        Some(prefix) => h.path.starts_with(prefix),
                        None => h.path == p,
                    })
        };
        let inside: Vec<&&Hit> = v
            .hits
            .iter()
            .filter(|h| h.at >= from && h.at < to && counted(h))
            .collect();
        if inside.is_empty() {
            continue;
        }
        of += 1;
        let mut seen = HashSet::new();
        for h in inside {
            for (k, value) in h.props {
                if *k != key {
                    continue;
                }
                let row = rows.entry((*value).to_owned()).or_default();
                if h.event.is_some() {
                    row.2 += 1;
                } else {
                    row.1 += 1;
                }
                if seen.insert(*value) {
                    row.0 += 1;
                }
            }
        }
    }
    (rows, of)
}

/// The values of a `breakdown?dimension=prop:<key>` answer.
pub(crate) fn api_rows(json: &serde_json::Value) -> Rows {
    json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                (
                    e["count"].as_i64().unwrap(),
                    e["views"].as_i64().unwrap(),
                    e["events"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

#[tokio::test]
async fn properties_agree_with_a_plain_computation_at_sub_hour_edges_in_several_time_zones() {
    let Seeded {
        seed,
        mut rng,
        app,
        start,
        persons,
        hits,
    } = seeded("PROPERTIES_SEED", 20_261_129u64, &Shape::VISITS_APART).await;
    let visits = visits_of(&hits);
    let zones = ["UTC", "Europe/Berlin", "Asia/Kolkata"];
    let mut sites = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        sites.push(app.add_site_in(&format!("props{i}.test"), &[], zone).await);
    }
    for site in &sites {
        send(&app, &site.id.to_string(), &persons, &hits).await;
    }
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap());
    app.settle().await;
    app.add_user("props@example.com", Role::Admin).await;
    let login = app.login("props@example.com").await;
    let token = create_token(&login, "props", None).await;

    let filter_sets: Vec<Vec<&str>> = vec![
        vec![],
        vec!["country:US"],
        vec!["prop:plan:pro"],
        vec!["page:/pricing"],
    ];
    let mut compared = 0;
    let mut nonzero = 0;
    for site in &sites {
        let id = site.id.to_string();
        let tz = site.time_zone.tz();
        for round in 0..4 {
            let from =
                start - TimeDelta::minutes(30) + TimeDelta::minutes(rng.below(11 * 60) as i64);
            let to = from + TimeDelta::minutes(10 + rng.below(24 * 60) as i64);
            let local = |at: DateTime<Utc>| at.with_timezone(&tz).format("%Y-%m-%dT%H:%M");
            let range = format!(
                "range=custom&from={}&to={}&res=hour",
                local(from),
                local(to)
            );
            for filters in &filter_sets {
                let at = format!("seed {seed}, {tz} {range}, filters {filters:?}");
                for key in ["author", "plan", "x.y$z"] {
                    let q = format!(
                        "{range}{}&dimension={}",
                        filter_params(filters),
                        urlencode(&format!("prop:{key}"))
                    );
                    let b = get(&app, &token, &format!("/api/v1/sites/{id}/breakdown?{q}")).await;
                    assert_eq!(b.status, 200, "{at}: {}", b.json);
                    let (want, of) = property_rows(&persons, &visits, filters, key, (from, to));
                    assert_eq!(api_rows(&b.json), want, "{at}: values of {key}");
                    assert_eq!(b.json["of"].as_i64().unwrap(), of, "{at}: of");
                    assert_eq!(b.json["dimension"], format!("prop:{key}"));
                    nonzero += usize::from(!want.is_empty());
                    compared += 1;
                }
                // The filter on a property: the figures of the visits
                // carrying it, as every filter counts them.
                let with_prop: Vec<&str> = filters
                    .iter()
                    .copied()
                    .chain(["prop:author:Jane"])
                    .collect();
                let q = format!("{range}{}", filter_params(&with_prop));
                let v = get(&app, &token, &format!("/api/v1/sites/{id}/visits?{q}")).await;
                assert_eq!(v.status, 200, "{at}: {}", v.json);
                let (want, _) = figures_in(&persons, &visits, &with_prop, (from, to), &[]);
                let j = &v.json;
                assert_eq!(
                    (
                        j["visits"].as_i64().unwrap(),
                        j["views"].as_i64().unwrap(),
                        j["bounces"].as_i64().unwrap(),
                        j["durationSeconds"].as_i64().unwrap(),
                    ),
                    (want.visits, want.views, want.bounces, want.duration),
                    "{at}: the prop:author:Jane filter"
                );
                compared += 1;
            }
            if round == 0 {
                // The CSV and the page say the same as the API.
                let (want, _) = property_rows(&persons, &visits, &[], "author", (from, to));
                let (status, csv) = login
                    .text(&format!("/sites/{id}/properties.csv?key=author&{range}"))
                    .await;
                assert_eq!(status, 200, "{csv}");
                let got: Rows = csv
                    .lines()
                    .skip(1)
                    .map(|l| {
                        let c: Vec<&str> = l.split(',').collect();
                        (
                            c[0].to_owned(),
                            (
                                c[1].parse().unwrap(),
                                c[2].parse().unwrap(),
                                c[3].parse().unwrap(),
                            ),
                        )
                    })
                    .collect();
                assert_eq!(got, want, "seed {seed}, {tz} {range}: properties.csv");
                let (status, html) = login
                    .text(&format!("/sites/{id}/properties?key=author&{range}"))
                    .await;
                assert_eq!(status, 200);
                if want.is_empty() {
                    assert!(
                        !html.contains("id=\"property-values\"><thead>")
                            || html.contains("<tbody>\n  \n  </tbody>")
                    );
                } else {
                    let rows: BTreeMap<String, i64> = table_rows(&html, "property-values")
                        .into_iter()
                        .map(|r| (r[0].clone(), r[1].replace(',', "").parse().unwrap()))
                        .collect();
                    let want_visits: BTreeMap<String, i64> =
                        want.iter().map(|(k, v)| (k.clone(), v.0)).collect();
                    assert_eq!(rows, want_visits, "seed {seed}, {tz} {range}: the page");
                }
                // Without a key: the values of the key most visits
                // carry, the first listed, from the same read.
                let (status, html) = login.text(&format!("/sites/{id}/properties?{range}")).await;
                assert_eq!(status, 200);
                let keys = &html[html.find("id=\"property-keys\"").expect("keys")..];
                let first = &keys[keys.find("<li>").unwrap() + 4..];
                let mark = "<strong aria-current=\"true\">";
                assert!(first.starts_with(mark), "the first key is chosen: {keys}");
                let chosen = &first[mark.len()..first.find("</strong>").unwrap()];
                let (want, _) = property_rows(&persons, &visits, &[], chosen, (from, to));
                let rows: BTreeMap<String, i64> = table_rows(&html, "property-values")
                    .into_iter()
                    .map(|r| (r[0].clone(), r[1].replace(',', "").parse().unwrap()))
                    .collect();
                let want_visits: BTreeMap<String, i64> =
                    want.iter().map(|(k, v)| (k.clone(), v.0)).collect();
                assert_eq!(rows, want_visits, "seed {seed}, {tz} {range}: no key");
                compared += 3;
            }
        }
    }
    assert!(nonzero > compared / 4, "most ranges hold properties");
}

pub(crate) async fn plausible(app: &TestApp, body: &str) -> reqwest::Response {
    app.http
        .post(format!("{}/api/event", app.address))
        .header("content-type", "text/plain")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

pub(crate) async fn umami(app: &TestApp, body: &str) -> reqwest::Response {
    app.http
        .post(format!("{}/api/send", app.address))
        .header("content-type", "application/json")
        .header(
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        )
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

pub(crate) fn reason(r: &reqwest::Response) -> String {
    r.headers()
        .get("x-tickertape-reason")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Every property stored for the site, as `key=value`, with the times
/// each was kept.
pub(crate) async fn stored_props(app: &TestApp, domain: &str) -> BTreeMap<String, i64> {
    use tickertape::storage::visit_log::{self, VisitQuery};
    let ever = VisitQuery::new(
        domain,
        chrono::DateTime::UNIX_EPOCH,
        chrono::DateTime::<chrono::Utc>::MAX_UTC,
    );
    let visits = visit_log::visits(&app.store, &ever).await.unwrap();
    let mut out = BTreeMap::new();
    for v in visits {
        for step in &v.steps {
            for (k, value) in &step.pr {
                *out.entry(format!("{k}={value}")).or_default() += 1;
            }
        }
    }
    out
}

#[tokio::test]
async fn hostile_properties_get_the_peers_answer_and_store_nothing_wrong() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let site = app.add_site("hostile.test", &[]).await;
    let id = site.id.to_string();
    let ua = BROWSERS[0].0;
    let pixel = |query: String, ip: &'static str| {
        let app = &app;
        async move {
            app.pixel_with(&query, &[("user-agent", ua), ("x-forwarded-for", ip)])
                .await
        }
    };
    let props = |json: &str| format!("site={id}&page=%2Fa&props={}", urlencode(json));
    // A view carrying properties opens the visit.
    let r = pixel(props(r#"{"author":"Jane","n":3,"ok":true}"#), "8.8.8.1").await;
    assert_eq!(r.status(), 200);
    // Refused, and nothing counted: not an object, a value or key past
    // Plausible's bounds.
    let long_value = format!(r#"{{"k":"{}"}}"#, "v".repeat(2_001));
    let long_key = format!(r#"{{"{}":"v"}}"#, "k".repeat(301));
    let large: String = format!(
        "{{{}}}",
        (0..3)
            .map(|i| format!(r#""k{i}":"{}""#, "v".repeat(1_500)))
            .collect::<Vec<_>>()
            .join(",")
    );
    let before = app
        .metric("tickertape_hits_total{outcome=\"counted\"}")
        .await;
    for bad in [
        "author=Jane".to_owned(),
        "[1,2]".to_owned(),
        "\"{}\"".to_owned(),
        long_value.clone(),
        long_key.clone(),
    ] {
        let r = pixel(props(&bad), "8.8.8.1").await;
        assert_eq!(r.status(), 400, "{}", &bad[..bad.len().min(40)]);
        assert_eq!(reason(&r), "invalid-props");
    }
    let r = pixel(format!("site={id}&page=%2Fa&props=%FF"), "8.8.8.1").await;
    assert_eq!(r.status(), 400);
    assert_eq!(
        app.metric("tickertape_hits_total{outcome=\"counted\"}")
            .await,
        before,
        "nothing refused was counted"
    );
    // Kept without what Plausible drops: nested values, lists, nulls,
    // blanks; an email address is never kept; the first 30 of many.
    let mixed = r#"{"deep":{"a":1},"list":[1],"none":null,"blank":" ","mail":"jane@example.com","plan":"pro"}"#;
    assert_eq!(pixel(props(mixed), "8.8.8.1").await.status(), 200);
    let many: String = format!(
        "{{{}}}",
        (0..60)
            .map(|i| format!(r#""m{i:02}":"x""#))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(pixel(props(&many), "8.8.8.2").await.status(), 200);
    // Past a hit's 4,096 bytes the later properties are left out; the
    // hit counts, as Plausible would count it.
    assert_eq!(pixel(props(&large), "8.8.8.4").await.status(), 200);
    // Plausible: its own answer, 400 for what it refuses, 202 for the rest.
    let r = plausible(
        &app,
        &format!(
            r#"{{"n":"pageview","u":"https://hostile.test/b","d":"hostile.test","p":{}}}"#,
            long_key
        ),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert_eq!(reason(&r), "invalid-props");
    let r = plausible(
        &app,
        r#"{"n":"pageview","u":"https://hostile.test/b","d":"hostile.test","p":"{\"from\":\"plausible\"}"}"#,
    )
    .await;
    assert_eq!(r.status(), 202);
    // Umami: nested data becomes dotted keys; what does not fit is left
    // out and the hit counted (a view, then an event of its visit).
    let r = umami(
        &app,
        &format!(
            r#"{{"type":"event","payload":{{"website":"{id}","url":"/c","data":{{"user":{{"plan":"team"}},"big":"{}","list":[1]}}}}}}"#,
            "v".repeat(2_001)
        ),
    )
    .await;
    assert_eq!(r.status(), 200);
    let r = umami(
        &app,
        &format!(r#"{{"type":"event","payload":{{"website":"{id}","url":"/c","name":"Buy","data":{{"plan":"team"}}}}}}"#),
    )
    .await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let stored = stored_props(&app, "hostile.test").await;
    let mut want: BTreeMap<String, i64> = [
        ("author=Jane", 1),
        ("n=3", 1),
        ("ok=true", 1),
        ("plan=pro", 1),
        ("from=plausible", 1),
        ("user.plan=team", 1),
        ("plan=team", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    for i in 0..30 {
        want.insert(format!("m{i:02}=x"), 1);
    }
    for k in ["k0", "k1"] {
        want.insert(format!("{k}={}", "v".repeat(1_500)), 1);
    }
    assert_eq!(stored, want);
    assert!(
        !stored.keys().any(|k| k.contains('@')),
        "no email address is stored"
    );

    // One client brings at most its share of new values to a site's day:
    // the rest are left out of its hits, which still count.
    for i in 0..40 {
        let r = pixel(props(&format!(r#"{{"junk":"j{i}"}}"#)), "8.8.8.3").await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;
    let junk = stored_props(&app, "hostile.test")
        .await
        .keys()
        .filter(|k| k.starts_with("junk="))
        .count();
    assert_eq!(junk, 30, "a client's share of new values");

    // Filters and breakdowns that can name no property are refused.
    app.add_user("hostile@example.com", Role::Admin).await;
    let login = app.login("hostile@example.com").await;
    let token = create_token(&login, "h", None).await;
    for q in [
        "dimension=prop%3A",
        "dimension=prop",
        "dimension=source&filter=prop%3Aauthor",
        "dimension=source&filter=prop%3A%3AJane",
    ] {
        let b = get(
            &app,
            &token,
            &format!("/api/v1/sites/{id}/breakdown?range=24h&{q}"),
        )
        .await;
        assert_eq!(b.status, 400, "{q}: {}", b.json);
    }
    let long = format!(
        "/api/v1/sites/{id}/breakdown?range=24h&dimension=prop%3A{}",
        "k".repeat(301)
    );
    assert_eq!(get(&app, &token, &long).await.status, 400);
    let b = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/breakdown?range=24h&dimension=prop%3Aauthor"),
    )
    .await;
    assert_eq!(b.status, 200, "{}", b.json);
    assert_eq!(api_rows(&b.json), [("Jane".to_owned(), (1, 1, 0))].into());
    let keys = b.json["keys"].as_array().unwrap();
    assert!(keys.len() >= 30 + 4, "{keys:?}");
}

/// `tt.js` in a real page: the script tag's `data-prop-*` go with the
/// view, an element's `data-tt-prop-*` with its event, and a page
/// script's `tickertape.track(name, props)` with its own; the owner's
/// properties page shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_sends_properties_from_a_real_page() {
    use crate::browser::{load_in_browser, site_server};
    let app = spawn_app().await;
    let site = app.add_site("props.test", &["127.0.0.1"]).await;
    let s = tickertape::web::snippets::for_site(&app.address, &site.id);
    let script = s.script.replacen(
        "<script ",
        "<script data-prop-author=\"Jane\" data-prop-Section=\"guides\" ",
        1,
    );
    assert!(script.contains("data-prop-author"), "{script}");
    let body = format!(
        "<!doctype html><html><head><title>Props</title></head><body>{script}\
         <button data-tt-event=\"Signup\" data-tt-prop-plan=\"pro\"><span id=\"inner\">go</span></button>\
         <script>setTimeout(function(){{tickertape.track('Download', {{file: 'a.pdf', size: 3}}, {{amount: '4.50', currency: 'EUR'}});\
         document.getElementById('inner').click();}},400);</script></body></html>"
    );
    let (port, handle) = site_server(vec![("/guide", body)], None);
    let url = format!("http://127.0.0.1:{port}/guide");
    tokio::task::spawn_blocking(move || load_in_browser(&url, Some(BROWSER_UA)))
        .await
        .unwrap();
    let want: BTreeMap<String, i64> = [
        ("author=Jane", 1),
        ("section=guides", 1),
        ("plan=pro", 1),
        ("file=a.pdf", 1),
        ("size=3", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let got = loop {
        app.settle().await;
        let got = stored_props(&app, "props.test").await;
        if got == want || std::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(got, want);
    // The third argument of `track` is the event's revenue.
    assert_eq!(
        crate::revenue::stored_revenue(&app).await,
        BTreeMap::from([("Download EUR".to_owned(), (45_000, 1))])
    );
    app.add_user("owner@example.com", Role::Admin).await;
    let owner = app.login("owner@example.com").await;
    let (status, html) = owner
        .text(&format!("/sites/{}/properties?range=24h&key=plan", site.id))
        .await;
    assert_eq!(status, 200);
    let rows = table_rows(&html, "property-values");
    assert_eq!(rows[0][..2], ["pro".to_owned(), "1".to_owned()], "{rows:?}");
    assert!(html.contains(">author</a>"), "every key is listed");
    handle.stop(true).await;
}

/// Plausible's outbound-link and 404 events: their rows in the Events
/// panel open the URLs or paths they were sent with.
#[tokio::test]
async fn plausibles_outbound_links_and_404s_show_their_urls_and_paths() {
    let app = spawn_app().await;
    let site = app.add_site("links.test", &[]).await;
    for body in [
        r#"{"n":"pageview","u":"https://links.test/","d":"links.test"}"#,
        r#"{"n":"Outbound Link: Click","u":"https://links.test/","d":"links.test","p":{"url":"https://example.org/a"}}"#,
        r#"{"n":"Outbound Link: Click","u":"https://links.test/","d":"links.test","p":{"url":"https://example.org/a"}}"#,
        r#"{"n":"404","u":"https://links.test/gone","d":"links.test","p":{"path":"/gone"}}"#,
    ] {
        let r = app
            .http
            .post(format!("{}/api/event", app.address))
            .header("content-type", "text/plain")
            .header("user-agent", BROWSER_UA)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "{body}");
    }
    app.settle().await;
    app.add_user("links@example.com", Role::Admin).await;
    let owner = app.login("links@example.com").await;
    let (status, html) = owner.text(&format!("/sites/{}?range=24h", site.id)).await;
    assert_eq!(status, 200);
    let href = format!(
        "/sites/{}/properties?range=24h&#38;key=url&#38;filter=event%3AOutbound%20Link%3A%20Click",
        site.id
    );
    assert!(
        html.contains(&href),
        "the event's row opens its URLs: {href}"
    );
    let (status, html) = owner
        .text(&format!(
            "/sites/{}/properties?range=24h&key=url&filter=event%3AOutbound%20Link%3A%20Click",
            site.id
        ))
        .await;
    assert_eq!(status, 200);
    let rows = table_rows(&html, "property-values");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0][..2],
        ["https://example.org/a".to_owned(), "1".to_owned()]
    );
    let (_, html) = owner
        .text(&format!(
            "/sites/{}/properties?range=24h&key=path&filter=event%3A404",
            site.id
        ))
        .await;
    assert_eq!(table_rows(&html, "property-values")[0][0], "/gone");
}

/// Through a share link: the properties page inside the link, read-only
/// (no CSV, no way to another site), with its filters applied.
#[tokio::test]
async fn a_share_link_shows_the_properties_read_only() {
    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("shared.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let id = site.id.to_string();
    // Two visitors (two browsers), one visit each.
    for (page, props, ua) in [
        ("/a", r#"{"author":"Jane"}"#, BROWSERS[0].0),
        ("/b", r#"{"author":"Li"}"#, BROWSERS[1].0),
    ] {
        let r = app
            .pixel_with(
                &format!("site={id}&page={page}&props={}", urlencode(props)),
                &[("user-agent", ua)],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;
    let login = app.login("owner@example.com").await;
    let link = crate::share_links::create_link(&login, &id, "props", "").await;
    let visitor = app.anonymous();
    let (status, dashboard) = visitor.text(&format!("{link}?range=24h")).await;
    assert_eq!(status, 200);
    assert!(
        dashboard.contains(&format!("href=\"{link}/properties?range=24h")),
        "the dashboard leads to the properties, inside the link"
    );
    let (status, page) = visitor
        .text(&format!("{link}/properties?range=24h&key=author"))
        .await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"shared-view\""));
    let rows = table_rows(&page, "property-values");
    let values: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(values, ["Jane", "Li"]);
    for absent in [".csv", "/sites/", "/settings", "method=\"post\""] {
        assert!(!page.contains(absent), "the shared page shows {absent}");
    }
    // Its rows add filters inside the link, and the filter applies.
    assert!(page.contains(&format!(
        "href=\"{link}?range=24h&#38;filter=prop%3Aauthor%3AJane\""
    )));
    let (_, filtered) = visitor
        .text(&format!(
            "{link}/properties?range=24h&key=author&filter=prop%3Aauthor%3ALi"
        ))
        .await;
    let rows = table_rows(&filtered, "property-values");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0], "Li");
}

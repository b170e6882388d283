//! Filters and funnels: random visits (several pages, sources, campaigns,
//! browsers, countries, events) sent through the real server, and the
//! filtered figures (one filter and several) and funnel steps of the API,
//! the CSVs and the pages compared with a plain computation over the hits
//! sent. Views, visits, bounces, duration, entries and exits exact;
//! visitors within the sketch's error. Also: bad filters and funnels are
//! refused with a clear 400 (or 404 for another owner's site) and change
//! nothing.
//!
//! `SEGMENTS_SEED=<n>` replays a run; a failure prints its seed.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::collections::{BTreeMap, HashSet};
use tickertape::accounts::Role;

use crate::helpers::*;
use crate::json_api::{create_token, get};
use crate::traffic::*;

#[derive(Debug, Default, PartialEq)]
pub(crate) struct Figures {
    pub visits: i64,
    pub views: i64,
    pub bounces: i64,
    pub duration: i64,
    pub visitors: i64,
    /// path → (views, entries, exits)
    pub pages: BTreeMap<String, (i64, i64, i64)>,
}

pub(crate) fn figures(persons: &[Person], visits: &[Visit], filters: &[&str]) -> Figures {
    let mut f = Figures::default();
    let mut people = HashSet::new();
    let page_filters: Vec<&str> = filters
        .iter()
        .filter_map(|f| f.strip_prefix("page:"))
        .collect();
    for v in visits
        .iter()
        .filter(|v| filters.iter().all(|x| passes(persons, v, x)))
    {
        f.visits += 1;
        people.insert(v.person);
        let views: Vec<&&Hit> = v.views().collect();
        f.bounces += i64::from(views.len() == 1);
        f.duration += views
            .iter()
            .map(|h| h.at.timestamp() - v.start.timestamp())
            .max()
            .unwrap_or(0);
        for h in &views {
            let counted = page_filters.iter().all(|p| match p.strip_suffix('*') {
                Some(prefix) => h.path.starts_with(prefix),
                None => h.path == *p,
            });
            if counted {
                f.views += 1;
                f.pages.entry(h.path.to_owned()).or_default().0 += 1;
            }
        }
        if let Some(first) = views.first() {
            f.pages.entry(first.path.to_owned()).or_default().1 += 1;
        }
        if let Some(last) = views.last() {
            f.pages.entry(last.path.to_owned()).or_default().2 += 1;
        }
    }
    f.visitors = people.len() as i64;
    f
}

/// Visits reaching each step in order (a hit advances at most one step).
fn funnel(persons: &[Person], visits: &[Visit], filters: &[&str], steps: &[&str]) -> Vec<i64> {
    let mut reached = vec![0i64; steps.len()];
    for v in visits
        .iter()
        .filter(|v| filters.iter().all(|x| passes(persons, v, x)))
    {
        let mut next = 0;
        for h in &v.hits {
            if next == steps.len() {
                break;
            }
            let step = steps[next];
            let hit = match (step.strip_prefix("event:"), h.event) {
                (Some(name), Some(e)) => name == e,
                (None, None) => match step.strip_suffix('*') {
                    Some(prefix) => h.path.starts_with(prefix),
                    None => h.path == step,
                },
                _ => false,
            };
            if hit {
                next += 1;
            }
        }
        for r in reached.iter_mut().take(next) {
            *r += 1;
        }
    }
    reached
}

/// The API's pages panel: path → (views, entries, exits).
async fn api_pages(
    app: &TestApp,
    token: &str,
    id: &str,
    q: &str,
) -> BTreeMap<String, (i64, i64, i64)> {
    let p = get(app, token, &format!("/api/v1/sites/{id}/pages?{q}")).await;
    assert_eq!(p.status, 200, "{q}: {}", p.json);
    p.json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                (
                    r["views"].as_i64().unwrap(),
                    r["entries"].as_i64().unwrap(),
                    r["exits"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

/// The pages a pages panel shows: those with views.
fn shown_pages(want: &Figures) -> BTreeMap<String, (i64, i64, i64)> {
    want.pages
        .iter()
        .filter(|(_, (views, _, _))| *views > 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The big figure of the report line's `id`.
fn figure(html: &str, id: &str) -> Option<i64> {
    let at = html.find(&format!("id=\"fig-{id}\""))?;
    let big = at + html[at..].find("<span class=\"big\"")?;
    let big = big + html[big..].find('>')? + 1;
    html[big..big + html[big..].find('<')?]
        .replace(',', "")
        .parse()
        .ok()
}

fn visitors_close(got: i64, want: i64) -> bool {
    // The sketch is exact in practice at these sizes; 2 % is its error.
    (got - want).abs() <= (want / 50).max(1)
}

const RANGE: &str = "range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00&res=hour";

#[tokio::test]
async fn filtered_figures_and_funnels_agree_with_a_plain_computation_over_the_hits() {
    let seed = std::env::var("SEGMENTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_127u64);
    let mut rng = Rng(seed);
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let site = app.add_site("segments.test", &[]).await;
    let id = site.id.to_string();
    let start = Utc.with_ymd_and_hms(2026, 11, 22, 1, 0, 0).unwrap();
    app.clock.set(start);
    salt_ready(&app, "2026-11-22").await;
    let (persons, hits) = traffic(&mut rng, 60, start, &Shape::VISITS_APART);
    send(&app, &id, &persons, &hits).await;
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 0, 30, 0).unwrap());
    app.settle().await;
    let visits = visits_of(&hits);

    app.add_user("seg@example.com", Role::Admin).await;
    let login = app.login("seg@example.com").await;
    let token = create_token(&login, "seg", None).await;

    let filter_sets: Vec<Vec<&str>> = vec![
        vec![],
        vec!["country:US"],
        vec!["source:google.com"],
        vec!["browser:Firefox"],
        vec!["medium:email"],
        vec!["page:/pricing"],
        vec!["entry:/"],
        vec!["exit:/docs"],
        vec!["event:Signup"],
        vec!["page:/blog/*"],
        vec!["country:US", "browser:Chrome"],
        vec!["country:US", "page:/signup", "event:Download"],
        vec!["source:direct", "entry:/pricing", "exit:/signup"],
    ];
    let funnels: Vec<Vec<&str>> = vec![
        vec!["/", "/pricing", "event:Signup"],
        vec!["/blog/*", "/signup"],
        vec!["/pricing", "/signup", "/docs", "event:Download"],
    ];
    let mut compared = 0;
    for filters in &filter_sets {
        let want = figures(&persons, &visits, filters);
        let q = format!("{RANGE}{}", filter_params(filters));
        let at = format!("seed {seed}, filters {filters:?}");
        // API: the first line.
        let v = get(&app, &token, &format!("/api/v1/sites/{id}/visits?{q}")).await;
        assert_eq!(v.status, 200, "{at}: {}", v.json);
        let j = &v.json;
        let got = (
            j["visits"].as_i64().unwrap(),
            j["views"].as_i64().unwrap(),
            j["bounces"].as_i64().unwrap(),
            j["durationSeconds"].as_i64().unwrap(),
        );
        assert_eq!(
            got,
            (want.visits, want.views, want.bounces, want.duration),
            "{at}: visits, views, bounces, duration"
        );
        let visitors = j["visitors"].as_i64().unwrap();
        assert!(
            visitors_close(visitors, want.visitors),
            "{at}: visitors {visitors}, want {}",
            want.visitors
        );
        if !filters.is_empty() {
            assert_eq!(j["period"]["filtered"]["sampled"], 1.0, "{at}");
        }
        // API: a page report's first line means the same with filters
        // and without: its visits, bounces and duration are the visits
        // that entered on the page, its views those of the page.
        let entered: Vec<&str> = filters.iter().copied().chain(["entry:/pricing"]).collect();
        let viewed: Vec<&str> = filters.iter().copied().chain(["page:/pricing"]).collect();
        let (entered, viewed) = (
            figures(&persons, &visits, &entered),
            figures(&persons, &visits, &viewed),
        );
        let v = get(
            &app,
            &token,
            &format!("/api/v1/sites/{id}/visits?{q}&path=%2Fpricing"),
        )
        .await;
        assert_eq!(v.status, 200, "{at}: {}", v.json);
        let j = &v.json;
        assert_eq!(
            (
                j["visits"].as_i64().unwrap(),
                j["views"].as_i64().unwrap(),
                j["bounces"].as_i64().unwrap(),
                j["durationSeconds"].as_i64().unwrap(),
            ),
            (
                entered.visits,
                viewed.views,
                entered.bounces,
                entered.duration
            ),
            "{at}: the page report's visits (entered), views, bounces, duration"
        );
        // API: the pages.
        let want_pages = shown_pages(&want);
        assert_eq!(
            api_pages(&app, &token, &id, &q).await,
            want_pages,
            "{at}: pages"
        );
        // CSV: the pages, the same rows (unfiltered: the buckets' file).
        if !filters.is_empty() {
            let (status, csv) = login.text(&format!("/sites/{id}/pages.csv?{q}")).await;
            assert_eq!(status, 200, "{at}");
            let rows: BTreeMap<String, (i64, i64, i64)> = csv
                .lines()
                .skip(1)
                .map(|l| {
                    let c: Vec<&str> = l.split(',').collect();
                    (
                        c[0].to_owned(),
                        (
                            c[1].parse().unwrap(),
                            c[3].parse().unwrap(),
                            c[4].parse().unwrap(),
                        ),
                    )
                })
                .collect();
            assert_eq!(rows, want_pages, "{at}: pages.csv");
            // The dashboard: its first line.
            let (status, html) = login.text(&format!("/sites/{id}?{q}")).await;
            assert_eq!(status, 200, "{at}");
            assert_eq!(figure(&html, "views"), Some(want.views), "{at}: page views");
            assert_eq!(
                figure(&html, "visits"),
                Some(want.visits),
                "{at}: page visits"
            );
            assert!(html.contains("id=\"filters\""), "{at}: chips");
        }
        for steps in &funnels {
            let want_steps = funnel(&persons, &visits, filters, steps);
            let sq: String = steps
                .iter()
                .map(|s| format!("&step={}", urlencode(s)))
                .collect();
            let f = get(&app, &token, &format!("/api/v1/sites/{id}/funnel?{q}{sq}")).await;
            assert_eq!(f.status, 200, "{at}: {}", f.json);
            let got: Vec<i64> = f.json["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["visits"].as_i64().unwrap())
                .collect();
            assert_eq!(got, want_steps, "{at}: funnel {steps:?}");
            let drops: Vec<i64> = f.json["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["dropOff"].as_i64().unwrap())
                .collect();
            for i in 1..steps.len() {
                assert_eq!(drops[i], want_steps[i - 1] - want_steps[i], "{at}");
            }
            compared += 1;
        }
        compared += 1;
    }
    // A funnel defined on the settings page: its report and its CSV.
    let r = login
        .post(
            &format!("/sites/{id}/funnels"),
            &[
                ("csrf", login.csrf.as_str()),
                ("name", "Pricing to signup"),
                ("step1", " /pricing "),
                ("step2", "/signup"),
                ("step3", ""),
                ("step4", "event:Signup"),
            ],
        )
        .await;
    assert!(
        r.status().is_success() || r.status().is_redirection(),
        "{}",
        r.status()
    );
    let want_steps = funnel(
        &persons,
        &visits,
        &["country:US"],
        &["/pricing", "/signup", "event:Signup"],
    );
    let q = format!("{RANGE}&filter=country%3AUS");
    let (status, html) = login.text(&format!("/sites/{id}/funnels?{q}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Pricing to signup"));
    let csv_at = html.find("/funnel.csv?").expect("a CSV link");
    let href_start = html[..csv_at].rfind("href=\"").unwrap() + 6;
    let href = html[href_start..csv_at + html[csv_at..].find('"').unwrap()]
        .replace("&amp;", "&")
        .replace("&#38;", "&");
    let (status, csv) = login.text(&href).await;
    assert_eq!(status, 200, "{href}");
    let got: Vec<i64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(got, want_steps, "seed {seed}: funnel.csv");
    println!(
        "segments: seed {seed}: {} visits, {compared} comparisons, all equal",
        visits.len()
    );
}

/// What a range `[from, to)` counts of the visits passing `filters`, as
/// the unfiltered reports count at every edge: a visit, its bounce and its
/// entry where it started; a view, its gap since the visit's previous view
/// (the duration), its exit and its visitor where it happened. Also the
/// views and visits per shown point (`points`: the starts, ascending).
pub(crate) fn figures_in(
    persons: &[Person],
    visits: &[Visit],
    filters: &[&str],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    points: &[DateTime<Utc>],
) -> (Figures, Vec<(i64, i64)>) {
    let mut f = Figures::default();
    let mut series = vec![(0i64, 0i64); points.len()];
    let point = |at: DateTime<Utc>| points.partition_point(|p| *p <= at).checked_sub(1);
    let inside = |at: DateTime<Utc>| at >= from && at < to;
    let mut people = HashSet::new();
    let page_filters: Vec<&str> = filters
        .iter()
        .filter_map(|f| f.strip_prefix("page:"))
        .collect();
    for v in visits
        .iter()
        .filter(|v| filters.iter().all(|x| passes(persons, v, x)))
    {
        let views: Vec<&&Hit> = v.views().collect();
        let person = (v.person, v.start.date_naive());
        if inside(v.start) {
            f.visits += 1;
            f.bounces += i64::from(views.len() == 1);
            f.pages.entry(views[0].path.to_owned()).or_default().1 += 1;
            people.insert(person);
            if let Some(p) = point(v.start) {
                series[p].1 += 1;
            }
        }
        for (i, h) in views.iter().enumerate() {
            if !inside(h.at) {
                continue;
            }
            if i > 0 {
                f.duration += h.at.timestamp() - views[i - 1].at.timestamp();
            }
            if i + 1 == views.len() {
                f.pages.entry(h.path.to_owned()).or_default().2 += 1;
            }
            let counted = page_filters.iter().all(|p| match p.strip_suffix('*') {
                Some(prefix) => h.path.starts_with(prefix),
                None => h.path == *p,
            });
            if counted {
                f.views += 1;
                f.pages.entry(h.path.to_owned()).or_default().0 += 1;
                people.insert(person);
                if let Some(p) = point(h.at) {
                    series[p].0 += 1;
                }
            }
        }
    }
    f.visitors = people.len() as i64;
    (f, series)
}

#[tokio::test]
async fn filtered_figures_are_exact_at_sub_hour_edges_in_several_time_zones() {
    let Seeded {
        seed,
        mut rng,
        app,
        start,
        persons,
        hits,
    } = seeded("SEGMENTS_SEED", 20_261_128u64, &Shape::VISITS_APART).await;
    let visits = visits_of(&hits);
    assert!(
        visits
            .iter()
            .any(|v| v.start.date_naive() != start.date_naive()),
        "some visits on the second UTC day"
    );
    let zones = ["UTC", "Europe/Berlin", "Asia/Kolkata"];
    let mut sites = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let site = app.add_site_in(&format!("edges{i}.test"), &[], zone).await;
        sites.push(site);
    }
    for site in &sites {
        send(&app, &site.id.to_string(), &persons, &hits).await;
    }
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap());
    app.settle().await;
    app.add_user("edges@example.com", Role::Admin).await;
    let login = app.login("edges@example.com").await;
    let token = create_token(&login, "edges", None).await;

    // No filter: the buckets' figures, which the filtered ones must match
    // at every edge.
    let filter_sets: Vec<Vec<&str>> = vec![
        vec![],
        vec!["country:US"],
        vec!["page:/pricing"],
        vec!["entry:/"],
        vec!["exit:/docs"],
        vec!["event:Signup"],
        vec!["page:/blog/*", "browser:Chrome"],
    ];
    let mut compared = 0;
    for site in &sites {
        let id = site.id.to_string();
        let tz = site.time_zone.tz();
        for _ in 0..5 {
            // Minutes anywhere in the traffic (and a little around it),
            // ten minutes to a day long.
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
                let q = format!("{range}{}", filter_params(filters));
                let at = format!(
                    "seed {seed}, {} {range}, filters {filters:?}",
                    site.time_zone.tz()
                );
                let s = get(&app, &token, &format!("/api/v1/sites/{id}/series?{q}")).await;
                assert_eq!(s.status, 200, "{at}: {}", s.json);
                let points: Vec<DateTime<Utc>> = s.json["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["at"].as_str().unwrap().parse().unwrap())
                    .collect();
                let (want, want_series) =
                    figures_in(&persons, &visits, filters, (from, to), &points);
                let got_series: Vec<i64> = s.json["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["views"].as_i64().unwrap())
                    .collect();
                let want_views: Vec<i64> = want_series.iter().map(|p| p.0).collect();
                assert_eq!(got_series, want_views, "{at}: views per point");

                let v = get(&app, &token, &format!("/api/v1/sites/{id}/visits?{q}")).await;
                assert_eq!(v.status, 200, "{at}: {}", v.json);
                let j = &v.json;
                let got = (
                    j["visits"].as_i64().unwrap(),
                    j["views"].as_i64().unwrap(),
                    j["bounces"].as_i64().unwrap(),
                    j["durationSeconds"].as_i64().unwrap(),
                );
                assert_eq!(
                    got,
                    (want.visits, want.views, want.bounces, want.duration),
                    "{at}: visits, views, bounces, duration"
                );
                let visitors = j["visitors"].as_i64().unwrap();
                assert!(
                    visitors_close(visitors, want.visitors),
                    "{at}: visitors {visitors}, want {}",
                    want.visitors
                );

                assert_eq!(
                    api_pages(&app, &token, &id, &q).await,
                    shown_pages(&want),
                    "{at}: pages"
                );

                // The visits CSV: its rows add up to the same figures,
                // and its visits per row are the visits started in it.
                let (status, csv) = login.text(&format!("/sites/{id}/visits.csv?{q}")).await;
                assert_eq!(status, 200, "{at}");
                let rows: Vec<Vec<i64>> = csv
                    .lines()
                    .skip(1)
                    .map(|l| l.split(',').skip(2).map(|c| c.parse().unwrap()).collect())
                    .collect();
                let sum = |i: usize| rows.iter().map(|r| r[i]).sum::<i64>();
                assert_eq!(
                    (sum(0), sum(1), sum(2), sum(3)),
                    (want.visits, want.views, want.bounces, want.duration),
                    "{at}: visits.csv"
                );
                let want_visits: Vec<i64> = want_series.iter().map(|p| p.1).collect();
                let got_visits: Vec<i64> = rows.iter().map(|r| r[0]).collect();
                assert_eq!(got_visits, want_visits, "{at}: visits.csv per row");

                // A funnel: the visits that started in the range, whole.
                let started: Vec<Visit> = visits_of(&hits)
                    .into_iter()
                    .filter(|v| v.start >= from && v.start < to)
                    .collect();
                let steps = ["/", "/pricing", "event:Signup"];
                let want_steps = funnel(&persons, &started, filters, &steps);
                let sq: String = steps
                    .iter()
                    .map(|s| format!("&step={}", urlencode(s)))
                    .collect();
                let f = get(&app, &token, &format!("/api/v1/sites/{id}/funnel?{q}{sq}")).await;
                assert_eq!(f.status, 200, "{at}: {}", f.json);
                let got_steps: Vec<i64> = f.json["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["visits"].as_i64().unwrap())
                    .collect();
                assert_eq!(got_steps, want_steps, "{at}: funnel");
                compared += 1;
            }
        }
    }
    println!(
        "segments at edges: seed {seed}: {} visits, {compared} ranges and filters, all equal",
        visits.len()
    );
}

async fn funnel_count(app: &TestApp) -> u64 {
    app.store
        .db()
        .collection::<Document>("funnels")
        .count_documents(doc! {})
        .await
        .unwrap()
}

#[tokio::test]
async fn bad_filters_and_funnels_are_refused_clearly_and_change_nothing() {
    let app = spawn_app().await;
    let site = app.add_site("bad-filters.test", &[]).await;
    let id = site.id.to_string();
    let a = app.add_user("a@example.com", Role::Owner).await;
    app.set_owners(&site, &[a.id]).await;
    app.add_user("b@example.com", Role::Owner).await;
    let owner = app.login("a@example.com").await;
    let other = app.login("b@example.com").await;
    let token = create_token(&owner, "a", None).await;
    let other_token = create_token(&other, "b", None).await;
    let long = "a".repeat(256);
    let seven: String = (0..7).map(|i| format!("&filter=source%3As{i}")).collect();
    let bad_filters = [
        ("&filter=planet%3AMars".to_owned(), "no filter dimension"),
        (seven, "at most 6 filters"),
        (format!("&filter=source%3A{long}"), "at most 255"),
        ("&filter=country%3ADEU".to_owned(), "two-letter"),
        ("&filter=page%3Apricing".to_owned(), "starting with"),
        ("&filter=country".to_owned(), "such as country:DE"),
    ];
    for (f, words) in &bad_filters {
        for op in ["visits?", "pages?", "series?", "breakdown?dimension=os&"] {
            let a = get(
                &app,
                &token,
                &format!("/api/v1/sites/{id}/{op}range=24h{f}"),
            )
            .await;
            assert_eq!(a.status, 400, "{op}{f}");
            assert_eq!(a.json["error"]["parameter"], "filter");
            let message = a.json["error"]["message"].as_str().unwrap();
            assert!(message.contains(words), "{message}");
        }
        for page in ["", "/pages.csv", "/visits.csv", "/series.csv"] {
            let (status, body) = owner.text(&format!("/sites/{id}{page}?range=24h{f}")).await;
            assert_eq!(status, 400, "{page}{f}");
            assert!(body.contains(words), "{page}: {words}");
        }
    }
    // A funnel of 9 steps, or 1, or a step that is neither a page nor an event.
    let nine: String = (0..9).map(|i| format!("&step=%2Fs{i}")).collect();
    for steps in [nine.as_str(), "&step=%2Fa", "&step=%2Fa&step=pricing"] {
        let a = get(
            &app,
            &token,
            &format!("/api/v1/sites/{id}/funnel?range=24h{steps}"),
        )
        .await;
        assert_eq!(a.status, 400, "{steps}");
        assert_eq!(a.json["error"]["parameter"], "step");
    }
    // Another owner's site: 404, with or without filters, and its funnels
    // form adds nothing.
    let a = get(
        &app,
        &other_token,
        &format!("/api/v1/sites/{id}/visits?range=24h&filter=country%3AUS"),
    )
    .await;
    assert_eq!(a.status, 404);
    let a = get(
        &app,
        &other_token,
        &format!("/api/v1/sites/{id}/funnel?range=24h&step=%2Fa&step=%2Fb"),
    )
    .await;
    assert_eq!(a.status, 404);
    let (status, _) = other
        .text(&format!("/sites/{id}?filter=country%3AUS"))
        .await;
    assert_eq!(status, 404);
    let r = other
        .post(
            &format!("/sites/{id}/funnels"),
            &[
                ("csrf", other.csrf.as_str()),
                ("name", "Theirs"),
                ("step1", "/a"),
                ("step2", "/b"),
            ],
        )
        .await;
    assert_eq!(r.status(), 404);
    // Refused funnel forms: the reason, and nothing stored.
    for (name, step1, step2, words) in [
        ("One step", "/a", "", "2 to 8 steps"),
        ("Not a path", "pricing", "/b", "starting with"),
        ("", "/a", "/b", "name the funnel"),
    ] {
        let r = owner
            .post(
                &format!("/sites/{id}/funnels"),
                &[
                    ("csrf", owner.csrf.as_str()),
                    ("name", name),
                    ("step1", step1),
                    ("step2", step2),
                ],
            )
            .await;
        assert_eq!(r.status(), 400, "{name}");
        assert!(r.text().await.unwrap().contains(words), "{name}: {words}");
    }
    assert_eq!(funnel_count(&app).await, 0);
}

/// The two days of the day-pack test: closed by the time it reads.
const PACK_RANGE: &str = "range=custom&from=2026-11-20T00:00&to=2026-11-22T00:00&res=hour";

/// Every answer the pack test compares: the first line and the pages of
/// each filter set, and each funnel with each filter set.
async fn pack_answers(app: &TestApp, token: &str, id: &str) -> Vec<serde_json::Value> {
    let filter_sets: [&[&str]; 7] = [
        &[],
        &["country:US"],
        &["source:google.com", "browser:Firefox"],
        &["page:/pricing"],
        &["entry:/", "event:Signup"],
        &["exit:/docs", "page:/blog/*"],
        &["browser:Safari", "medium:email"],
    ];
    let funnels: [&[&str]; 2] = [
        &["/", "/pricing", "event:Signup"],
        &["/blog/*", "/signup", "/docs", "event:Download"],
    ];
    let mut out = Vec::new();
    for filters in filter_sets {
        let q = format!("{PACK_RANGE}{}", filter_params(filters));
        for what in ["visits", "pages"] {
            let a = get(app, token, &format!("/api/v1/sites/{id}/{what}?{q}")).await;
            assert_eq!(a.status, 200, "{what} {filters:?}: {}", a.json);
            out.push(a.json);
        }
        for steps in funnels {
            let sq: String = steps
                .iter()
                .map(|s| format!("&step={}", urlencode(s)))
                .collect();
            let a = get(app, token, &format!("/api/v1/sites/{id}/funnel?{q}{sq}")).await;
            assert_eq!(a.status, 200, "funnel {filters:?}: {}", a.json);
            out.push(a.json);
        }
    }
    out
}

/// The days of the pack test with a valid pack.
async fn packed(app: &TestApp, site: &str) -> Vec<i64> {
    use tickertape::storage::{visit_days, visit_packs};
    let (first, end) = (
        visit_days::day_of(Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap()),
        visit_days::day_of(Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, 0).unwrap()),
    );
    let counters = visit_days::counts(&app.store, site, first, end)
        .await
        .unwrap();
    visit_packs::packed_days(&app.store, site, first, end, &counters)
        .await
        .unwrap()
        .days()
        .collect()
}

#[tokio::test]
async fn figures_read_from_day_packs_are_those_of_the_stored_visits() {
    use tickertape::storage::{visit_days, visit_log, visit_packs};
    let seed = std::env::var("SEGMENTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_120u64);
    let mut rng = Rng(seed);
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let domain = "packs.test";
    let site = app.add_site(domain, &[]).await;
    let id = site.id.to_string();
    // The same people on two UTC days: a visitor id (and visit) of each.
    let first_day = Utc.with_ymd_and_hms(2026, 11, 20, 1, 0, 0).unwrap();
    let (persons, day_one) = traffic(&mut rng, 50, first_day, &Shape::VISITS_APART);
    let mut hits = day_one.clone();
    hits.extend(day_one.iter().cloned().map(|mut h| {
        h.at += TimeDelta::days(1);
        h
    }));
    for (day, part) in [
        ("2026-11-20", &hits[..day_one.len()]),
        ("2026-11-21", &hits[day_one.len()..]),
    ] {
        app.clock.set(part[0].at);
        salt_ready(&app, day).await;
        send(&app, &id, &persons, part).await;
    }
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 22, 0, 30, 0).unwrap());
    app.settle().await;
    app.add_user("packs@example.com", Role::Admin).await;
    let login = app.login("packs@example.com").await;
    let token = create_token(&login, "packs", None).await;
    let sent = visits_of(&hits);
    let want = figures(&persons, &sent, &[]);

    // From the stored visits (their parts): no day is packed yet.
    assert!(packed(&app, domain).await.is_empty());
    let documents = pack_answers(&app, &token, &id).await;
    assert_eq!(documents[0]["visits"].as_i64(), Some(want.visits));
    assert_eq!(documents[0]["views"].as_i64(), Some(want.views));

    // The reads queued both closed days; the app's task packs them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while packed(&app, domain).await.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the days were not packed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        pack_answers(&app, &token, &id).await,
        documents,
        "seed {seed}"
    );

    // Read from the packs indeed: without the visits' parts (the counters
    // unchanged), the same answers.
    let visits = app
        .store
        .db()
        .collection::<bson::Document>(visit_log::PARTS);
    let stored: Vec<Document> =
        futures::TryStreamExt::try_collect(visits.find(doc! {"site": domain}).await.unwrap())
            .await
            .unwrap();
    visits.delete_many(doc! {"site": domain}).await.unwrap();
    assert_eq!(
        pack_answers(&app, &token, &id).await,
        documents,
        "seed {seed}"
    );
    visits.insert_many(stored).await.unwrap();

    // A sample read from the packs keeps the same visitors as from the
    // documents: every visit of the first registers, no other.
    let filters = tickertape::domain::Filters::parse(["country:US"]).unwrap();
    let (from, to) = (
        Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, 0).unwrap(),
    );
    let (first, end) = (visit_days::day_of(from), visit_days::day_of(to));
    let counters = visit_days::counts(&app.store, domain, first, end)
        .await
        .unwrap();
    let packs = visit_packs::packed_days(&app.store, domain, first, end, &counters)
        .await
        .unwrap();
    let read = |packs: visit_packs::PackedDays, sample: Option<visit_log::Sample>| {
        let (store, filters) = (app.store.clone(), filters.clone());
        async move {
            let (mut v, _) = tickertape::reports::filtered_read::read_days(
                &store, domain, &filters, from, to, &packs, sample,
            )
            .await
            .unwrap();
            v.retain(|v| tickertape::reports::filtered::admits(&filters, v));
            v.sort();
            v
        }
    };
    let all = read(visit_packs::PackedDays::default(), None).await;
    assert_eq!(read(packs.clone(), None).await, all);
    let sample = visit_log::Sample::rate(0.3);
    let sampled = read(packs.clone(), Some(sample)).await;
    let kept: Vec<_> = all
        .iter()
        .filter(|v| v.register.is_some_and(|(i, _)| i < sample.registers()))
        .cloned()
        .collect();
    assert!(
        !sampled.is_empty() && sampled.len() < all.len(),
        "{} of {}",
        sampled.len(),
        all.len()
    );
    assert_eq!(sampled, kept, "whole visitors, the same as the documents'");
    assert_eq!(
        read(visit_packs::PackedDays::default(), Some(sample)).await,
        kept
    );

    // A late hit for the first (packed) day: its counter moves, its pack is
    // no longer used, and the figures count the hit.
    let late = Hit {
        person: 0,
        at: Utc.with_ymd_and_hms(2026, 11, 20, 23, 0, 0).unwrap(),
        path: "/pricing",
        event: None,
        referrer: 1,
        campaign: None,
        props: &[],
        revenue: None,
    };
    app.clock.set(late.at);
    send(&app, &id, &persons, std::slice::from_ref(&late)).await;
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 22, 0, 30, 0).unwrap());
    app.settle().await;
    let mut with_late = hits.clone();
    with_late.push(late);
    with_late.sort_by_key(|h| (h.at, h.person));
    let sent = visits_of(&with_late);
    let now_packed = packed(&app, domain).await;
    assert_eq!(
        now_packed,
        [visit_days::day_of(from) + 1],
        "day one's pack is stale"
    );
    for filters in [&[][..], &["page:/pricing"], &["source:google.com"]] {
        let want = figures(&persons, &sent, filters);
        let q = format!("{PACK_RANGE}{}", filter_params(filters));
        let v = get(&app, &token, &format!("/api/v1/sites/{id}/visits?{q}")).await;
        let got = (
            v.json["visits"].as_i64().unwrap(),
            v.json["views"].as_i64().unwrap(),
            v.json["bounces"].as_i64().unwrap(),
            v.json["durationSeconds"].as_i64().unwrap(),
        );
        assert_eq!(
            got,
            (want.visits, want.views, want.bounces, want.duration),
            "seed {seed}, {filters:?} after a late hit"
        );
    }

    // A damaged pack: its day is read from the documents (the same
    // answers), and the pack is removed and made again.
    let answers = pack_answers(&app, &token, &id).await;
    let day_two = visit_days::day_of(from) + 1;
    let packs = app
        .store
        .db()
        .collection::<bson::Document>(visit_packs::COLLECTION);
    let damaged = packs
        .update_one(
            doc! {"site": domain, "day": bson::DateTime::from_chrono(from + TimeDelta::days(1)), "chunk": 0},
            doc! {"$set": {"data": bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![1, 0, 3, 0xff],
            }}},
        )
        .await
        .unwrap();
    assert_eq!(damaged.modified_count, 1);
    assert_eq!(
        pack_answers(&app, &token, &id).await,
        answers,
        "seed {seed}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !packed(&app, domain).await.contains(&day_two) {
        assert!(
            std::time::Instant::now() < deadline,
            "the damaged day was not packed again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let remade = packs
        .find_one(doc! {"site": domain, "day": bson::DateTime::from_chrono(from + TimeDelta::days(1)), "chunk": 0})
        .await
        .unwrap()
        .unwrap();
    assert_ne!(
        remade.get_binary_generic("data").unwrap(),
        &vec![1, 0, 3, 0xff]
    );
    assert_eq!(
        pack_answers(&app, &token, &id).await,
        answers,
        "seed {seed}"
    );
}

//! Filters over imported days: a site with an import (a GoatCounter CSV,
//! a Plausible CSV zip, through `tickertape import`) and tracked hits
//! sent through the real server. A filter on one dimension the imported
//! rows carry adds their views (an event filter: their events) to the
//! tracked figures, equal to a plain computation over the rows and the
//! hits sent; filters on two dimensions, or on a dimension the rows lack,
//! leave imported days out; the API and the page say which.
//!
//! The tracked hits are random visits (`traffic`);
//! `SEGMENTS_IMPORTED_SEED=<n>` replays a run.

use chrono::{DateTime, NaiveDate, TimeDelta, TimeZone, Utc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use tickertape::accounts::Role;

use crate::helpers::*;
use crate::imports::import_command_of;
use crate::json_api::{create_token, get};
use crate::traffic::*;

/// Every report here covers the imported days and the tracked one.
const RANGE: &str = "range=custom&from=2026-11-12T00:00&to=2026-11-23T00:00&res=day";

const FIREFOX: &str =
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";

/// The first imported day (the tracked one is 2026-11-22).
fn imported_day(n: i64) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 12).unwrap() + TimeDelta::days(n)
}

/// Seeds the tracked traffic (`SEGMENTS_IMPORTED_SEED` replays another).
fn seed() -> u64 {
    std::env::var("SEGMENTS_IMPORTED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_122)
}

/// Sends random visits (`traffic`) on 2026-11-22 from 10:00, and settles:
/// the tracked day beside the imported ones.
async fn send_tracked(app: &TestApp, site: &str) -> (Vec<Person>, Vec<Hit>) {
    let start = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
    app.clock.set(start);
    salt_ready(app, "2026-11-22").await;
    let (persons, hits) = traffic(&mut Rng(seed()), 24, start, &Shape::VISITS_APART);
    send(app, site, &persons, &hits).await;
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 0, 30, 0).unwrap());
    app.settle().await;
    (persons, hits)
}

/// The tracked figures under `filters`, computed from the hits sent (as
/// `segments` computes them): (visits, views, Signup events).
fn tracked_under(persons: &[Person], hits: &[Hit], filters: &[&str]) -> (i64, i64, i64) {
    let visits = visits_of(hits);
    let figures = crate::segments::figures(persons, &visits, filters);
    let signups = visits
        .iter()
        .filter(|v| filters.iter().all(|f| passes(persons, v, f)))
        .flat_map(|v| &v.hits)
        .filter(|h| h.event == Some("Signup"))
        .count() as i64;
    (figures.visits, figures.views, signups)
}

/// What a filtered answer says of imports.
fn said(j: &Value) -> (String, bool) {
    let f = &j["period"]["filtered"];
    (
        f["imported"].as_str().unwrap_or("(none)").to_owned(),
        f["importedCounted"].as_bool().unwrap_or(false),
    )
}

fn filter_query(filters: &[&str]) -> String {
    filters
        .iter()
        .map(|f| format!("&filter={}", urlencode(f)))
        .collect()
}

/// The API's views under `filters`, per day of the series, with what it
/// says of imports (checked to agree between endpoints).
async fn api_views(
    app: &TestApp,
    token: &str,
    id: &str,
    filters: &[&str],
) -> (i64, i64, BTreeMap<NaiveDate, i64>, (String, bool)) {
    let q = format!("{RANGE}{}", filter_query(filters));
    let v = get(app, token, &format!("/api/v1/sites/{id}/visits?{q}")).await;
    assert_eq!(v.status, 200, "{filters:?}: {}", v.json);
    let s = get(app, token, &format!("/api/v1/sites/{id}/series?{q}")).await;
    assert_eq!(s.status, 200, "{filters:?}: {}", s.json);
    assert_eq!(said(&v.json), said(&s.json), "{filters:?}");
    let days = s.json["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let at: DateTime<Utc> = p["at"].as_str().unwrap().parse().unwrap();
            (at.date_naive(), p["views"].as_i64().unwrap())
        })
        .filter(|(_, n)| *n != 0)
        .collect();
    (
        v.json["visits"].as_i64().unwrap(),
        v.json["views"].as_i64().unwrap(),
        days,
        said(&v.json),
    )
}

/// The count of `name` in the API's breakdown of `dimension` under `filters`.
async fn api_breakdown(
    app: &TestApp,
    token: &str,
    id: &str,
    dimension: &str,
    name: &str,
    filters: &[&str],
) -> i64 {
    let q = format!("{RANGE}{}&dimension={dimension}", filter_query(filters));
    let b = get(app, token, &format!("/api/v1/sites/{id}/breakdown?{q}")).await;
    assert_eq!(b.status, 200, "{}", b.json);
    b.json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .map_or(0, |e| e["count"].as_i64().unwrap())
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

/// An admin's login and an API token.
async fn reader(app: &TestApp) -> (Login, String) {
    app.add_user("imp@example.com", Role::Admin).await;
    let login = app.login("imp@example.com").await;
    let token = create_token(&login, "imp", None).await;
    (login, token)
}

/// One GoatCounter export row: (path or event name, is an event, bot,
/// location, time).
struct GoatRow {
    path: &'static str,
    event: bool,
    bot: bool,
    location: &'static str,
    at: DateTime<Utc>,
}

impl GoatRow {
    /// GoatCounter's country: the location's part before `-`.
    fn country(&self) -> &str {
        match self.location.split('-').next().unwrap() {
            "" => "unknown",
            c => c,
        }
    }

    fn counted_view(&self) -> bool {
        !self.event && !self.bot
    }
}

fn goat_rows() -> Vec<GoatRow> {
    const PATHS: [&str; 4] = ["/pricing", "/docs", "/", "/blog"];
    const LOCATIONS: [&str; 5] = ["US", "DE", "US-CA", "", "NL"];
    (0..150)
        .map(|i| {
            let day = imported_day(i as i64 % 3);
            GoatRow {
                path: if i % 7 == 6 { "Signup" } else { PATHS[i % 4] },
                event: i % 7 == 6,
                bot: i % 11 == 10,
                location: LOCATIONS[i % 5],
                at: day.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::minutes(7 * i as i64),
            }
        })
        .collect()
}

fn goat_file(rows: &[GoatRow]) -> String {
    let mut text = String::from("2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n");
    for r in rows {
        text.push_str(&format!(
            "{},A title,{},\"{FIREFOX}\",Firefox 133,Linux,{},{},,,\"1440,900,1\",{},false,{}\n",
            r.path,
            r.event,
            uuid::Uuid::new_v4(),
            if r.bot { 150 } else { 0 },
            r.location,
            r.at.to_rfc3339()
        ));
    }
    text
}

#[tokio::test]
async fn a_goatcounter_import_counts_under_a_filter_on_one_dimension_its_rows_carry() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let site = app.add_site("imported-filters.test", &[]).await;
    let id = site.id.to_string();
    let rows = goat_rows();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.csv");
    std::fs::write(&file, goat_file(&rows)).unwrap();
    let out = import_command_of(&app, "goatcounter", "imported-filters.test", &file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (persons, hits) = send_tracked(&app, &id).await;
    let (login, token) = reader(&app).await;
    let day_of = |r: &GoatRow| r.at.date_naive();
    let tracked_day = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();

    // A country: the imported rows of that country, and the tracked
    // visits from it.
    let (t_visits, t_views, _) = tracked_under(&persons, &hits, &["country:US"]);
    let mut want_days: BTreeMap<NaiveDate, i64> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.counted_view() && r.country() == "US")
    {
        *want_days.entry(day_of(r)).or_default() += 1;
    }
    let imported_us: i64 = want_days.values().sum();
    assert!(imported_us > 0 && t_views > 0);
    want_days.insert(tracked_day, t_views);
    let (got_visits, got_views, got_days, (note, counted)) =
        api_views(&app, &token, &id, &["country:US"]).await;
    assert_eq!(got_visits, t_visits, "visits are the tracked ones");
    assert_eq!(got_views, t_views + imported_us, "tracked + imported views");
    assert_eq!(got_days, want_days, "the series, day by day");
    assert_eq!(
        note,
        "Imported days count under this filter: views from the imported country rows."
    );
    assert!(counted);
    assert_eq!(
        api_breakdown(&app, &token, &id, "country", "US", &["country:US"]).await,
        t_views + imported_us,
        "the country's own panel"
    );
    // The dashboard says it, with the same views.
    let q = format!("{RANGE}&filter=country%3AUS");
    let (status, html) = login.text(&format!("/sites/{id}?{q}")).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("views from the imported country rows"),
        "the page says imported days count"
    );
    assert_eq!(
        figure(&html, "views"),
        Some(t_views + imported_us),
        "the page shows the views"
    );

    // A page: its imported views and its tracked ones.
    let (_, t_pricing, _) = tracked_under(&persons, &hits, &["page:/pricing"]);
    let imported_pricing = rows
        .iter()
        .filter(|r| r.counted_view() && r.path == "/pricing")
        .count() as i64;
    let (_, got_views, _, (note, counted)) = api_views(&app, &token, &id, &["page:/pricing"]).await;
    assert_eq!(got_views, t_pricing + imported_pricing);
    assert_eq!(
        note,
        "Imported days count under this filter: views from the imported page rows."
    );
    assert!(counted);
    let (status, csv) = login
        .text(&format!(
            "/sites/{id}/pages.csv?{RANGE}&filter=page%3A%2Fpricing"
        ))
        .await;
    assert_eq!(status, 200);
    let row = csv.lines().find(|l| l.starts_with("/pricing,")).unwrap();
    assert_eq!(
        row.split(',').nth(1).unwrap(),
        (t_pricing + imported_pricing).to_string(),
        "pages.csv"
    );

    // An event: its imported events in the events panel, no views.
    let (_, t_signup_views, t_signups) = tracked_under(&persons, &hits, &["event:Signup"]);
    let imported_signups = rows
        .iter()
        .filter(|r| r.event && !r.bot && r.path == "Signup")
        .count() as i64;
    assert_eq!(
        api_breakdown(&app, &token, &id, "event", "Signup", &["event:Signup"]).await,
        t_signups + imported_signups
    );
    let (_, got_views, _, (note, _)) = api_views(&app, &token, &id, &["event:Signup"]).await;
    assert_eq!(got_views, t_signup_views, "no imported views per event");
    assert!(
        note.starts_with(
            "Imported days count under this filter: events from the imported event rows"
        ),
        "{note}"
    );

    // Two dimensions: imported days left out, and said.
    let two = ["country:US", "browser:Firefox"];
    let (_, got_views, got_days, (note, counted)) = api_views(&app, &token, &id, &two).await;
    assert_eq!(got_views, tracked_under(&persons, &hits, &two).1);
    assert_eq!(got_days.keys().copied().collect::<Vec<_>>(), [tracked_day]);
    assert_eq!(
        note,
        "Imported days are left out: these filters are on more than one dimension, and each imported row carries one."
    );
    assert!(!counted);
    let (status, html) = login
        .text(&format!("/sites/{id}?{RANGE}{}", filter_query(&two)))
        .await;
    assert_eq!(status, 200);
    assert!(html.contains("filters are on more than one dimension"));

    // A dimension GoatCounter's rows lack.
    let (_, got_views, _, (note, counted)) =
        api_views(&app, &token, &id, &["campaign:spring"]).await;
    assert_eq!(
        got_views,
        tracked_under(&persons, &hits, &["campaign:spring"]).1,
        "the tracked views alone (seed {})",
        seed()
    );
    assert_eq!(
        note,
        "Imported days are left out: their rows carry no campaign."
    );
    assert!(!counted);
}

fn zip_of(file: &std::path::Path, files: &[(&str, String)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(file).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in files {
        zip.start_file(*name, options).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
    }
    zip.finish().unwrap();
}

#[tokio::test]
async fn a_plausible_import_counts_its_country_and_page_rows_and_says_what_it_lacks() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let site = app.add_site("plausible-filters.test", &[]).await;
    let id = site.id.to_string();
    // Two days: the site's figures, its pages and its countries.
    let mut visitors = String::from("date,visitors,pageviews,bounces,visits,visit_duration\n");
    let mut pages = String::from("date,hostname,page,visits,visitors,pageviews\n");
    let mut locations =
        String::from("date,country,region,city,visitors,visits,visit_duration,bounces,pageviews\n");
    let mut want_pricing = BTreeMap::new();
    let mut want_us = BTreeMap::new();
    let mut want_de = 0;
    for n in 0..2i64 {
        let date = imported_day(n);
        visitors.push_str(&format!("{date},20,40,5,25,900\n"));
        for (page, views) in [("/pricing", 11 + n), ("/docs", 29 - n)] {
            pages.push_str(&format!(
                "{date},plausible-filters.test,{page},9,8,{views}\n"
            ));
            if page == "/pricing" {
                want_pricing.insert(date, views);
            }
        }
        for (country, region, views) in [
            ("DE", "DE-BE", 6 + n),
            ("DE", "DE-BY", 2),
            ("US", "US-CA", 13),
        ] {
            locations.push_str(&format!("{date},{country},{region},0,3,4,60,1,{views}\n"));
            if country == "US" {
                *want_us.entry(date).or_default() += views;
            } else {
                want_de += views;
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plausible.zip");
    zip_of(
        &file,
        &[
            ("imported_visitors.csv", visitors),
            ("imported_pages.csv", pages),
            ("imported_locations.csv", locations),
        ],
    );
    let out = import_command_of(&app, "plausible", "plausible-filters.test", &file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (persons, hits) = send_tracked(&app, &id).await;
    let (_login, token) = reader(&app).await;
    let tracked_day = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();

    let (t_visits, t_views, _) = tracked_under(&persons, &hits, &["country:US"]);
    let mut want = want_us.clone();
    want.insert(tracked_day, t_views);
    let (got_visits, got_views, got_days, (note, counted)) =
        api_views(&app, &token, &id, &["country:US"]).await;
    assert_eq!(got_visits, t_visits);
    assert_eq!(got_views, t_views + want_us.values().sum::<i64>());
    assert_eq!(got_days, want, "the series, day by day");
    assert!(counted, "{note}");
    // A country with imported rows only.
    let (_, got_views, _, _) = api_views(&app, &token, &id, &["country:DE"]).await;
    assert_eq!(got_views, want_de);
    assert_eq!(
        api_breakdown(&app, &token, &id, "country", "DE", &["country:DE"]).await,
        want_de
    );
    // A page: its rows of the pages file.
    let (_, t_pricing, _) = tracked_under(&persons, &hits, &["page:/pricing"]);
    let mut want = want_pricing.clone();
    want.insert(tracked_day, t_pricing);
    let (_, got_views, got_days, (_, counted)) =
        api_views(&app, &token, &id, &["page:/pricing"]).await;
    assert!(counted);
    assert_eq!(got_views, t_pricing + want_pricing.values().sum::<i64>());
    assert_eq!(got_days, want);
    // This export has no sources file: its rows carry no source.
    let (_, got_views, _, (note, counted)) =
        api_views(&app, &token, &id, &["source:google.com"]).await;
    assert_eq!(
        got_views,
        tracked_under(&persons, &hits, &["source:google.com"]).1,
        "the tracked views alone (seed {})",
        seed()
    );
    assert_eq!(
        note,
        "Imported days are left out: their rows carry no source."
    );
    assert!(!counted);
    // A page and a country: left out.
    let (_, got_views, _, (_, counted)) =
        api_views(&app, &token, &id, &["country:US", "page:/pricing"]).await;
    assert!(!counted);
    assert_eq!(
        got_views,
        tracked_under(&persons, &hits, &["country:US", "page:/pricing"]).1
    );
}

//! Revenue: random visits whose events carry revenue in several
//! currencies (refunds and ten-thousandths among them), sent through the
//! real pixel to sites in three time zones whose events are goals, and
//! each goal's revenue per currency in the API, `goals.csv` and the
//! dashboard compared with a plain sum over the hits sent, over random
//! ranges with sub-hour edges, with filters (the visit store) and without
//! (the site's breakdowns, whole hours). Also: hostile revenue gets the
//! peers' answer and stores nothing; the email report shows it.
//!
//! `REVENUE_SEED=<n>` replays a run; a failure prints its seed.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::collections::BTreeMap;
use tickertape::accounts::Role;
use tickertape::domain::Goal;
use tickertape::storage::sites;

use crate::helpers::*;
use crate::json_api::{create_token, get};
use crate::properties::{plausible, reason, umami};
use crate::traffic::*;

/// goal → currency → (sum in ten-thousandths, events that carried it)
type Sums = BTreeMap<String, BTreeMap<String, (i128, i64)>>;

fn add(sums: &mut Sums, h: &Hit) {
    if let (Some(event), Some((currency, amount))) = (h.event, h.revenue) {
        let (sum, n) = sums
            .entry(event.to_owned())
            .or_default()
            .entry(currency.to_owned())
            .or_default();
        *sum += ten_thousandths(amount);
        *n += 1;
    }
}

/// Without filters: every event sent in the whole UTC hours the range
/// covers (the site's breakdowns are hourly), in a visit or not.
fn unfiltered(hits: &[Hit], (from, to): (DateTime<Utc>, DateTime<Utc>)) -> Sums {
    let floor = |t: DateTime<Utc>| {
        Utc.timestamp_opt(t.timestamp() - t.timestamp().rem_euclid(3_600), 0)
            .unwrap()
    };
    let ceil = |t: DateTime<Utc>| {
        let f = floor(t);
        if f == t {
            t
        } else {
            f + TimeDelta::hours(1)
        }
    };
    let (from, to) = (floor(from), ceil(to));
    let mut sums = Sums::new();
    for h in hits.iter().filter(|h| h.at >= from && h.at < to) {
        add(&mut sums, h);
    }
    sums
}

/// With filters: the events in the range of the visits that pass them
/// (an event outside any visit is in none).
fn filtered(
    persons: &[Person],
    visits: &[Visit],
    filters: &[&str],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Sums {
    let mut sums = Sums::new();
    for v in visits
        .iter()
        .filter(|v| v.start < to && filters.iter().all(|f| passes(persons, v, f)))
    {
        for h in v.hits.iter().filter(|h| h.at >= from && h.at < to) {
            add(&mut sums, h);
        }
    }
    sums
}

fn api_sums(json: &serde_json::Value) -> Sums {
    let mut sums = Sums::new();
    for g in json["goals"].as_array().unwrap() {
        for r in g["revenue"].as_array().unwrap() {
            let (sum, n) = (
                ten_thousandths(r["amount"].as_str().unwrap()),
                r["events"].as_i64().unwrap(),
            );
            if n == 0 {
                // A currency of the period before alone: none now.
                assert_eq!((sum, &r["average"]), (0, &serde_json::Value::Null), "{r}");
                continue;
            }
            // The average is the sum per event, rounded at the fourth
            // decimal.
            let average = ten_thousandths(r["average"].as_str().unwrap());
            assert!(
                (average * i128::from(n) - sum).abs() * 2 <= i128::from(n),
                "{r}"
            );
            sums.entry(g["goal"].as_str().unwrap().to_owned())
                .or_default()
                .insert(r["currency"].as_str().unwrap().to_owned(), (sum, n));
        }
    }
    sums
}

async fn with_goals(app: &TestApp, site: &tickertape::storage::sites::Site, events: &[&str]) {
    for name in events {
        sites::add_goal(&app.store, &site.id, &Goal::parse("event", name).unwrap())
            .await
            .unwrap();
    }
    app.ingest.directory.reload(&app.store).await.unwrap();
}

#[tokio::test]
async fn revenue_agrees_with_a_plain_sum_at_sub_hour_edges_in_several_time_zones() {
    let Seeded {
        seed,
        mut rng,
        app,
        start,
        persons,
        hits,
    } = seeded("REVENUE_SEED", 20_261_129u64, &Shape::AT_THE_EDGE).await;
    let visits = visits_of(&hits);
    assert!(hits.iter().filter(|h| h.revenue.is_some()).count() > 20);
    let zones = ["UTC", "Europe/Berlin", "Asia/Kolkata"];
    let mut sites = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let site = app
            .add_site_in(&format!("revenue{i}.test"), &[], zone)
            .await;
        with_goals(&app, &site, &["Signup", "Download", "Outside"]).await;
        sites.push(site);
    }
    for site in &sites {
        send(&app, &site.id.to_string(), &persons, &hits).await;
    }
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap());
    app.settle().await;
    app.add_user("revenue@example.com", Role::Admin).await;
    let login = app.login("revenue@example.com").await;
    let token = create_token(&login, "revenue", None).await;

    let filter_sets: Vec<Vec<&str>> = vec![
        vec![],
        vec!["country:US"],
        vec!["event:Signup"],
        vec!["prop:plan:pro"],
        vec!["page:/pricing"],
    ];
    let (mut compared, mut nonzero) = (0, 0);
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
                let want = if filters.is_empty() {
                    unfiltered(&hits, (from, to))
                } else {
                    filtered(&persons, &visits, filters, (from, to))
                };
                let q = format!("{range}{}", filter_params(filters));
                let g = get(&app, &token, &format!("/api/v1/sites/{id}/goals?{q}")).await;
                assert_eq!(g.status, 200, "{at}: {}", g.json);
                assert_eq!(api_sums(&g.json), want, "{at}: the API's revenue");
                nonzero += usize::from(!want.is_empty());
                compared += 1;
                if round == 0 {
                    // goals.csv says the same, a row per goal and currency.
                    let (status, csv) = login.text(&format!("/sites/{id}/goals.csv?{q}")).await;
                    assert_eq!(status, 200, "{csv}");
                    let mut got = Sums::new();
                    for line in csv.lines().skip(1) {
                        let c: Vec<&str> = line.split(',').collect();
                        // A currency of the period before alone has
                        // its row too, with nothing now.
                        if !c[5].is_empty() && c[7] != "0" {
                            got.entry(c[1].to_owned()).or_default().insert(
                                c[5].to_owned(),
                                (ten_thousandths(c[6]), c[7].parse().unwrap()),
                            );
                        }
                    }
                    assert_eq!(got, want, "{at}: goals.csv");
                    // And the dashboard's Goals table, each sum with its
                    // code.
                    let (status, html) = login.text(&format!("/sites/{id}?{q}")).await;
                    assert_eq!(status, 200);
                    let table = &html[html.find("id=\"goals-table\"").expect("goals")..];
                    let table = &table[..table.find("</table>").unwrap()];
                    for (goal, by) in &want {
                        let row = table
                            .split("<tr>")
                            .find(|r| r.starts_with(&format!("<td>{goal}</td>")))
                            .unwrap_or_else(|| panic!("{at}: no row for {goal}"));
                        let row = row.replace(',', "");
                        for (currency, (sum, _)) in by {
                            let shown = g.json["goals"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .find(|x| x["goal"] == goal.as_str())
                                .and_then(|x| {
                                    x["revenue"]
                                        .as_array()
                                        .unwrap()
                                        .iter()
                                        .find(|r| r["currency"] == currency.as_str())
                                })
                                .map(|r| r["amount"].as_str().unwrap().to_owned())
                                .unwrap();
                            assert_eq!(ten_thousandths(&shown), *sum);
                            assert!(
                                row.contains(&format!("{shown} {currency}")),
                                "{at}: {goal} {currency} on the page: {row}"
                            );
                        }
                    }
                    compared += 2;
                }
            }
        }
    }
    assert!(nonzero > compared / 4, "most ranges hold revenue");
}

/// The revenue the site's day buckets hold, per event and currency.
pub(crate) async fn stored_revenue(app: &TestApp) -> BTreeMap<String, (i64, i64)> {
    app.settle().await;
    let docs: Vec<bson::Document> = app
        .store
        .db()
        .collection::<bson::Document>("site_breakdowns_day")
        .find(bson::doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for d in docs {
        let Ok(revenue) = d.get_document("revenue") else {
            continue;
        };
        for (event, by) in revenue {
            for (currency, f) in by.as_document().unwrap() {
                let f = f.as_document().unwrap();
                let e: &mut (i64, i64) = out.entry(format!("{event} {currency}")).or_default();
                // Billions of ten-thousandths and the rest.
                e.0 += f.get_i64("h").unwrap() * 1_000_000_000 + f.get_i64("l").unwrap();
                e.1 += f.get_i64("n").unwrap();
            }
        }
    }
    out
}

use futures::TryStreamExt;

#[tokio::test]
async fn hostile_revenue_gets_the_peers_answer_and_stores_nothing() {
    let app = spawn_app().await;
    let site = app.add_site("rev.test", &[]).await;
    with_goals(&app, &site, &["Purchase"]).await;
    let id = site.id.to_string();
    let pixel = |revenue: &str| format!("site={id}&page=%2Fbuy&e=Purchase&revenue={revenue}");
    // The pixel refuses what is not an amount and an ISO 4217 code, and
    // counts nothing of the hit.
    for bad in [
        r#"{"amount":"1e3","currency":"EUR"}"#,
        r#"{"amount":1e400,"currency":"EUR"}"#,
        r#"{"amount":"10","currency":"EURO"}"#,
        r#"{"amount":"10","currency":"XXX"}"#,
        r#"{"amount":"0.00001","currency":"EUR"}"#,
        r#"{"amount":"1000000000","currency":"EUR"}"#,
        r#"{"amount":{"v":1},"currency":"EUR"}"#,
        r#"{"amount":"10"}"#,
        r#"["10","EUR"]"#,
        r#"10 EUR"#,
        "%FF",
    ] {
        let r = app.pixel(&pixel(&urlencode(bad))).await;
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(reason(&r), "invalid-revenue", "{bad}");
    }
    // Revenue on a view is not kept; the view counts.
    let r = app
        .pixel(&format!(
            "site={id}&page=%2F&revenue={}",
            urlencode(r#"{"amount":"5","currency":"EUR"}"#)
        ))
        .await;
    assert_eq!(r.status(), 200);
    // Plausible's tracker: revenue Plausible would not take is left out
    // and the event counted, as Plausible answers.
    for bad in [
        r#"{"amount":"1e3","currency":"EUR"}"#,
        r#"{"amount":"10","currency":"eu"}"#,
        r#""not json""#,
        r#"{"amount":[1],"currency":"USD"}"#,
    ] {
        let body = format!(
            r#"{{"n":"Purchase","u":"https://rev.test/buy","d":"rev.test","r":null,"$":{bad}}}"#
        );
        let r = plausible(&app, &body).await;
        assert_eq!(r.status(), 202, "{bad}");
    }
    assert!(stored_revenue(&app).await.is_empty());
    let events = site_day_counts(&app, tickertape::domain::Dimension::Event).await;
    assert_eq!(events.get("Purchase"), Some(&4), "{events:?}");

    // What each peer sends is kept exactly: Plausible's `revenue` as an
    // object with a number, `$` as a string holding one; Umami's event
    // data; the pixel's own, in lower case.
    let r = plausible(
        &app,
        r#"{"n":"Purchase","u":"https://rev.test/buy","d":"rev.test","r":null,"revenue":{"amount":19.99,"currency":"EUR"}}"#,
    )
    .await;
    assert_eq!(r.status(), 202);
    let r = plausible(
        &app,
        r#"{"n":"Purchase","u":"https://rev.test/buy","d":"rev.test","r":null,"$":"{\"amount\":\"0.01\",\"currency\":\"EUR\"}"}"#,
    )
    .await;
    assert_eq!(r.status(), 202);
    let r = umami(
        &app,
        &serde_json::json!({"type": "event", "payload": {
            "website": id, "url": "/buy", "name": "Purchase",
            "data": {"revenue": 1500, "currency": "JPY", "plan": "pro"}}})
        .to_string(),
    )
    .await;
    assert_eq!(r.status(), 200);
    let r = app
        .pixel(&pixel(&urlencode(r#"{"amount":"-2.5","currency":"usd"}"#)))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        stored_revenue(&app).await,
        BTreeMap::from([
            ("Purchase EUR".to_owned(), (200_000, 2)),
            ("Purchase JPY".to_owned(), (15_000_000, 1)),
            ("Purchase USD".to_owned(), (-25_000, 1)),
        ])
    );
}

/// A property goal's figures as the visits make them: its events in the
/// range carrying the value (in visits passing the filters), the visits
/// that sent one, their revenue, and the visits that started in the range
/// (what the rate is of).
fn property_goal(
    persons: &[Person],
    visits: &[Visit],
    filters: &[&str],
    (name, key, value): (&str, &str, &str),
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> (i64, i64, BTreeMap<String, (i128, i64)>, i64) {
    let (mut events, mut converting, mut of) = (0, 0, 0);
    let mut revenue: BTreeMap<String, (i128, i64)> = BTreeMap::new();
    for v in visits
        .iter()
        .filter(|v| v.start < to && filters.iter().all(|f| passes(persons, v, f)))
    {
        of += i64::from(v.start >= from);
        let sent: Vec<&&Hit> = v
            .hits
            .iter()
            .filter(|h| {
                h.at >= from
                    && h.at < to
                    && h.event == Some(name)
                    && h.props.contains(&(key, value))
            })
            .collect();
        events += sent.len() as i64;
        converting += i64::from(!sent.is_empty());
        for h in sent {
            if let Some((currency, amount)) = h.revenue {
                let (sum, n) = revenue.entry(currency.to_owned()).or_default();
                *sum += ten_thousandths(amount);
                *n += 1;
            }
        }
    }
    (events, converting, revenue, of)
}

#[tokio::test]
async fn a_goal_on_an_event_with_a_property_value_counts_from_the_visits() {
    let Seeded {
        seed,
        mut rng,
        app,
        start,
        persons,
        hits,
    } = seeded("REVENUE_SEED", 20_261_130u64, &Shape::AT_THE_EDGE).await;
    let visits = visits_of(&hits);
    let site = app.add_site_in("propgoal.test", &[], "Asia/Kolkata").await;
    let goals = [
        ("Signup", "plan", "pro"),
        ("Download", "author", "Jane"),
        // Sent outside any visit only: no visit keeps it.
        ("Outside", "plan", "pro"),
    ];
    for (name, key, value) in goals {
        let goal = Goal::parse_event_with(name, key, value).unwrap();
        sites::add_goal(&app.store, &site.id, &goal).await.unwrap();
    }
    with_goals(&app, &site, &["Signup"]).await;
    let id = site.id.to_string();
    send(&app, &id, &persons, &hits).await;
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap());
    app.settle().await;
    app.add_user("goals@example.com", Role::Admin).await;
    let login = app.login("goals@example.com").await;
    let token = create_token(&login, "goals", None).await;
    let tz = site.time_zone.tz();
    let mut nonzero = 0;
    for round in 0..6 {
        let from = start - TimeDelta::minutes(30) + TimeDelta::minutes(rng.below(11 * 60) as i64);
        let to = from + TimeDelta::minutes(10 + rng.below(24 * 60) as i64);
        let local = |at: DateTime<Utc>| at.with_timezone(&tz).format("%Y-%m-%dT%H:%M");
        let range = format!(
            "range=custom&from={}&to={}&res=hour",
            local(from),
            local(to)
        );
        for filters in [vec![], vec!["country:US"], vec!["page:/pricing"]] {
            let at = format!("seed {seed}, {range}, filters {filters:?}");
            let q = format!("{range}{}", filter_params(&filters));
            let g = get(&app, &token, &format!("/api/v1/sites/{id}/goals?{q}")).await;
            assert_eq!(g.status, 200, "{at}: {}", g.json);
            for (name, key, value) in goals {
                let (events, converting, revenue, of) =
                    property_goal(&persons, &visits, &filters, (name, key, value), (from, to));
                let row = g.json["goals"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["goal"] == name && r["property"]["key"] == key)
                    .unwrap_or_else(|| panic!("{at}: no row for {name}: {}", g.json));
                assert_eq!(row["property"]["value"], value);
                assert_eq!(row["convertingKind"], "visits", "{at}");
                assert_eq!(row["sampled"], 1.0, "{at}: every visit read");
                assert_eq!(row["conversions"], events, "{at}: {name}'s conversions");
                assert_eq!(row["converting"], converting, "{at}: {name}'s visits");
                let rate = row["conversionRate"].as_f64();
                let want_rate = (of > 0).then(|| (converting as f64 / of as f64).min(1.0));
                assert_eq!(
                    rate.map(|r| (r * 1e9).round()),
                    want_rate.map(|r| (r * 1e9).round()),
                    "{at}: {name}'s rate"
                );
                let got: BTreeMap<String, (i128, i64)> = row["revenue"]
                    .as_array()
                    .unwrap()
                    .iter()
                    // A currency of the period before alone: none now.
                    .filter(|r| r["events"] != 0)
                    .map(|r| {
                        (
                            r["currency"].as_str().unwrap().to_owned(),
                            (
                                ten_thousandths(r["amount"].as_str().unwrap()),
                                r["events"].as_i64().unwrap(),
                            ),
                        )
                    })
                    .collect();
                assert_eq!(got, revenue, "{at}: {name}'s revenue");
                nonzero += usize::from(events > 0);
            }
            if round == 0 && filters.is_empty() {
                // The dashboard says the property goal's converting figure
                // is visits, in a table of visitors.
                let (status, html) = login.text(&format!("/sites/{id}?{q}")).await;
                assert_eq!(status, 200);
                let (_, converting, _, _) =
                    property_goal(&persons, &visits, &[], goals[0], (from, to));
                let row = table_rows(&html, "goals-table")
                    .into_iter()
                    .find(|r| r[0] == "Signup with plan = pro")
                    .expect("the property goal's row");
                assert_eq!(row[3], format!("{converting} visits"), "{at}");
            }
        }
    }
    assert!(nonzero > 6, "most ranges hold property goals' events");
    // A site too large to read whole (its day counters say ten million
    // visits): the property goals are estimates from the visit store's
    // sample, and the API, the file and the page say so; the plain event
    // goal, from the breakdowns, is not.
    app.store
        .db()
        .collection::<bson::Document>(tickertape::storage::visit_days::COLLECTION)
        .update_many(
            bson::doc! {"site": "propgoal.test"},
            bson::doc! {"$inc": {"visits": 10_000_000i64}},
        )
        .await
        .unwrap();
    let local = |at: DateTime<Utc>| at.with_timezone(&tz).format("%Y-%m-%dT%H:%M");
    let q = format!(
        "range=custom&from={}&to={}",
        local(start - TimeDelta::hours(1)),
        local(start + TimeDelta::hours(30))
    );
    let g = get(&app, &token, &format!("/api/v1/sites/{id}/goals?{q}")).await;
    assert_eq!(g.status, 200, "{}", g.json);
    let rows = g.json["goals"].as_array().unwrap();
    assert_eq!(rows.len(), goals.len() + 1, "{}", g.json);
    for row in rows {
        let sampled = row["sampled"].as_f64().unwrap();
        if row["property"].is_null() {
            assert_eq!(sampled, 1.0, "{row}");
        } else {
            assert!(sampled > 0.0 && sampled < 1.0, "{row}");
        }
    }
    let file = login.get(&format!("/sites/{id}/goals.csv?{q}")).await;
    assert_eq!(file.status(), 200);
    let name = file.headers()["content-disposition"].to_str().unwrap();
    assert!(name.contains("_sampled_goals.csv"), "{name}");
    assert!(file.headers().contains_key("tickertape-sampled"));
    let (_, html) = login.text(&format!("/sites/{id}?{q}")).await;
    assert!(html.contains("Sampled:"), "the dashboard says it");
}

//! Every surface says the same: the reference model's site (its live
//! traffic, `reference_model::live_traffic`), read for a few periods (a
//! running one with sub-hour edges, whole days, a custom range with minute
//! edges; in UTC and Asia/Kolkata) and filter sets (none, a country, a
//! page, a source) through the dashboard, the page report, every CSV file,
//! the JSON API and an email report: the headline figures, the changes,
//! the rows and the sampling notes agree; no figure has more visitors than
//! visits; every percentage is written one way.

use serde_json::Value;
use tickertape::reports::{Period, RangeQuery};

use crate::helpers::*;
use crate::json_api::{create_token, get};
use crate::reference_model::{csv_rows, figure, int, live_traffic, Rng, FIXED_SEED};

/// The periods compared (the clock stands at 10:31:07 UTC).
const PERIODS: [&str; 3] = [
    "range=24h",
    "range=7d",
    "range=custom&from=2026-11-21T09:15&to=2026-11-22T10:20",
];

const FILTERS: [&str; 4] = [
    "",
    "&filter=country:US",
    "&filter=page:/pricing",
    "&filter=source:google.com",
];

/// What one comparison found wrong, collected so that one run says all.
#[derive(Default)]
struct Found(Vec<String>);

impl Found {
    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, a: T, b: T) {
        if a != b {
            self.0.push(format!("{what}: {a:?} ≠ {b:?}"));
        }
    }

    fn check(&mut self, what: &str, ok: bool) {
        if !ok {
            self.0.push(what.to_owned());
        }
    }
}

/// A percentage written with a space before its sign ("43.5 %"): every
/// surface writes "43.5%".
fn spaced_percent(text: &str) -> Option<String> {
    let b = text.as_bytes();
    (1..b.len().saturating_sub(1))
        .find(|&i| b[i] == b' ' && b[i + 1] == b'%' && b[i - 1].is_ascii_digit())
        .map(|i| text[i.saturating_sub(12)..(i + 2)].to_owned())
}

/// The change shown beside a first-line figure of a report page.
fn change(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"fig-{id}\""))?;
    let span = at + html[at..].find("<span class=\"change")?;
    let span = span + html[span..].find('>')? + 1;
    Some(html[span..span + html[span..].find('<')?].to_owned())
}

/// (name, count) of a CSV file's rows, first two columns.
fn named_rows(csv: &str) -> Vec<(String, i64)> {
    csv_rows(csv)
        .into_iter()
        .map(|r| (r[0].clone(), int(&r[1])))
        .collect()
}

/// (name, count) of an API answer's list.
fn api_rows(json: &Value, list: &str, name: &str, count: &str) -> Vec<(String, i64)> {
    json[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {json}"))
        .iter()
        .map(|r| {
            (
                r[name].as_str().unwrap().to_owned(),
                r[count].as_i64().unwrap(),
            )
        })
        .collect()
}

fn sampled_share(json: &Value) -> f64 {
    json["period"]["filtered"]["sampled"]
        .as_f64()
        .unwrap_or(1.0)
}

#[tokio::test]
async fn every_surface_says_the_same() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let (sites, _, _, now) = live_traffic(&app, &mut Rng(FIXED_SEED), 40).await;
    app.add_user("surfaces@example.com", tickertape::accounts::Role::Admin)
        .await;
    let login = app.login("surfaces@example.com").await;
    let token = create_token(&login, "surfaces", None).await;
    let mut found = Found::default();
    let mut compared = 0usize;
    for site in &sites {
        let id = &site.id;
        for period in PERIODS {
            for filter in FILTERS {
                let q = format!("{period}{filter}");
                let at = format!("{} {q}", site.domain);
                let api = get(&app, &token, &format!("/api/v1/sites/{id}/visits?{q}")).await;
                found.eq(&format!("{at}: API visits status"), api.status, 200);
                let api = api.json;
                let (status, dashboard) = login.text(&format!("/sites/{id}?{q}")).await;
                found.eq(&format!("{at}: dashboard status"), status, 200);
                // The headline: the API's figures are the dashboard's.
                for (fig, key) in [
                    ("views", "views"),
                    ("visits", "visits"),
                    ("visitors", "visitors"),
                ] {
                    found.eq(
                        &format!("{at}: {fig} on the dashboard and the API"),
                        figure(&dashboard, fig),
                        Some(api[key].as_i64().map_or("—".into(), |n| n.to_string())),
                    );
                }
                let visits = api["visits"].as_i64().unwrap_or(0);
                if let Some(visitors) = api["visitors"].as_i64() {
                    found.check(
                        &format!("{at}: {visitors} visitors for {visits} visits"),
                        visitors <= visits,
                    );
                }
                if visits > 0 {
                    let rate = api["bounces"].as_i64().unwrap() as f64 / visits as f64;
                    found.eq(
                        &format!("{at}: bounce rate"),
                        figure(&dashboard, "bounce-rate"),
                        Some(format!("{:.0}%", rate * 100.0)),
                    );
                }
                // Every CSV file of the same address.
                let share = sampled_share(&api);
                let csv = |name: &'static str, extra: &'static str| {
                    let (login, q, id) = (&login, &q, id);
                    async move {
                        let r = login
                            .get(&format!("/sites/{id}/{name}.csv?{q}{extra}"))
                            .await;
                        let status = r.status().as_u16();
                        let file = r
                            .headers()
                            .get("content-disposition")
                            .map(|v| v.to_str().unwrap().to_owned())
                            .unwrap_or_default();
                        let header = r
                            .headers()
                            .get("tickertape-sampled")
                            .map(|v| v.to_str().unwrap().to_owned());
                        (status, file, header, r.text().await.unwrap())
                    }
                };
                let mut files = Vec::new();
                for (name, extra) in [
                    ("visits", ""),
                    ("pages", ""),
                    ("sources", ""),
                    ("breakdown", "&dimension=country"),
                    ("series", ""),
                    ("goals", ""),
                ] {
                    let (status, file, header, body) = csv(name, extra).await;
                    found.eq(&format!("{at}: {name}.csv status"), status, 200);
                    // A sample says so in every file, and only a sample.
                    found.eq(
                        &format!("{at}: {name}.csv says it is sampled ({file})"),
                        file.contains("_sampled"),
                        share < 1.0,
                    );
                    found.eq(
                        &format!("{at}: {name}.csv's Tickertape-Sampled"),
                        header.is_some(),
                        share < 1.0,
                    );
                    files.push((name, body));
                }
                let body = |n: &str| files.iter().find(|(f, _)| *f == n).unwrap().1.clone();
                // visits.csv adds up to the headline; no row with more
                // visitors than visits where a row is a whole day.
                let rows = csv_rows(&body("visits"));
                let sum = |col: usize| rows.iter().map(|r| int(&r[col])).sum::<i64>();
                found.eq(&format!("{at}: visits.csv's visits"), sum(2), visits);
                found.eq(
                    &format!("{at}: visits.csv's views"),
                    sum(3),
                    api["views"].as_i64().unwrap(),
                );
                if period == "range=7d" {
                    for r in &rows {
                        found.check(
                            &format!(
                                "{at}: visits.csv row {} has {} visitors for {} visits",
                                r[0], r[1], r[2]
                            ),
                            int(&r[1]) <= int(&r[2]),
                        );
                    }
                }
                let series: i64 = csv_rows(&body("series")).iter().map(|r| int(&r[1])).sum();
                found.eq(
                    &format!("{at}: series.csv's views"),
                    series,
                    api["views"].as_i64().unwrap(),
                );
                // Rows: pages, sources and a breakdown on the API and in CSV.
                let pages = get(
                    &app,
                    &token,
                    &format!("/api/v1/sites/{id}/pages?{q}&limit=1000"),
                )
                .await
                .json;
                found.eq(
                    &format!("{at}: pages.csv and the API's pages"),
                    named_rows(&body("pages")),
                    api_rows(&pages, "pages", "path", "views"),
                );
                found.eq(
                    &format!("{at}: the pages' sample"),
                    sampled_share(&pages),
                    share,
                );
                let sources = get(&app, &token, &format!("/api/v1/sites/{id}/sources?{q}"))
                    .await
                    .json;
                // The API gives the views without a source apart (`none`),
                // the file as its last row.
                let mut api_sources = api_rows(&sources, "sources", "source", "views");
                if sources["other"].as_i64().unwrap_or(0) > 0 {
                    api_sources.push(("(other)".into(), sources["other"].as_i64().unwrap()));
                }
                if sources["none"]["views"].as_i64().unwrap_or(0) > 0 {
                    api_sources.push(("(none)".into(), sources["none"]["views"].as_i64().unwrap()));
                }
                found.eq(
                    &format!("{at}: sources.csv and the API's sources"),
                    named_rows(&body("sources")),
                    api_sources,
                );
                let countries = get(
                    &app,
                    &token,
                    &format!("/api/v1/sites/{id}/breakdown?{q}&dimension=country&limit=1000"),
                )
                .await
                .json;
                let mut api_countries = api_rows(&countries, "entries", "name", "count");
                if countries["other"].as_i64().unwrap_or(0) > 0 {
                    api_countries.push(("(other)".into(), countries["other"].as_i64().unwrap()));
                }
                found.eq(
                    &format!("{at}: breakdown.csv and the API's countries"),
                    named_rows(&body("breakdown")),
                    api_countries,
                );
                // The page report of /pricing: its views are the pages row's.
                let (status, page) = login
                    .text(&format!("/sites/{id}/page?path=/pricing&{q}"))
                    .await;
                found.eq(&format!("{at}: page report status"), status, 200);
                let pricing = pages["pages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["path"] == "/pricing")
                    .map_or(0, |p| p["views"].as_i64().unwrap());
                if filter.is_empty() || filter.contains("page:/pricing") {
                    found.eq(
                        &format!("{at}: the page report's views and the pages row"),
                        figure(&page, "views"),
                        Some(pricing.to_string()),
                    );
                }
                // The sampling note: on the page exactly when sampled.
                found.eq(
                    &format!("{at}: the dashboard's sampling note"),
                    dashboard.contains("Sampled:"),
                    share < 1.0,
                );
                let (_, funnels) = login.text(&format!("/sites/{id}/funnels?{q}")).await;
                for (what, text) in [
                    ("dashboard", &dashboard),
                    ("page report", &page),
                    ("funnels", &funnels),
                ] {
                    if let Some(bad) = spaced_percent(text) {
                        found.0.push(format!("{at}: the {what} writes {bad:?}"));
                    }
                }
                compared += 1;

                // The email report has no filters: the unfiltered period.
                if !filter.is_empty() {
                    continue;
                }
                let stored = tickertape::storage::sites::list(&app.store)
                    .await
                    .unwrap()
                    .into_iter()
                    .find(|s| s.id.to_string() == *id)
                    .unwrap();
                let param = |k: &str| {
                    period
                        .split('&')
                        .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                        .map(str::to_owned)
                };
                let range = RangeQuery {
                    range: param("range"),
                    from: param("from"),
                    to: param("to"),
                    res: None,
                };
                let p = Period::resolve_in(&range, now, site.zone).unwrap();
                let report = tickertape::email::report::assemble(
                    &app.store,
                    &app.address,
                    &stored,
                    &p,
                    None,
                    (now, &tickertape::domain::Retention::default()),
                )
                .await
                .unwrap();
                let email = tickertape::email::render::report(&report, "https://unsubscribe.test/");
                for (name, fig) in [
                    ("Views", "views"),
                    ("Visitors", "visitors"),
                    ("Visits", "visits"),
                    ("Bounce rate", "bounce-rate"),
                    ("Visit duration", "visit-duration"),
                ] {
                    let line = email
                        .text
                        .lines()
                        .find(|l| l.starts_with(&format!("{name}: ")))
                        .unwrap_or_default()
                        .to_owned();
                    let rest = &line[(name.len() + 2).min(line.len())..];
                    let (value, tail) = rest.split_once(" (").unwrap_or((rest, ""));
                    let shown = tail.split(';').next().unwrap_or_default();
                    found.eq(
                        &format!("{at}: the email's {name}"),
                        Some(value.replace(',', "")),
                        figure(&dashboard, fig),
                    );
                    found.eq(
                        &format!("{at}: the email's change of {name}"),
                        Some(shown.to_owned()),
                        change(&dashboard, fig),
                    );
                }
                if let Some(bad) = spaced_percent(&email.html) {
                    found.0.push(format!("{at}: the email writes {bad:?}"));
                }
            }
        }
    }
    assert!(
        found.0.is_empty(),
        "{} disagreements over {compared} addresses:\n{}",
        found.0.len(),
        found.0.join("\n")
    );
}

//! Time on page and scroll depth: random views and engagements of several
//! visitors over several pages, through the pixel (`sd`, `et`, as tt.js
//! sends them) and Plausible's `POST /api/event` (`engagement` with `sd`
//! and `e`, hostile values among them), against a plain computation over
//! the hits sent: the API's pages and a page's line, `pages.csv` and the
//! page report agree with it exactly (the pages also over parts of the
//! day and days around it, in UTC and Europe/Berlin, read from the page
//! summaries), bad engagements get Plausible's
//! answer and write nothing, and no engagement counts a view.

use chrono::{DateTime, TimeDelta, Utc};
use std::collections::{BTreeMap, HashMap};
use tickertape::accounts::Role;

use crate::helpers::*;
use crate::json_api::{create_token, get};
use crate::reference_model::{csv_rows, figure, Rng};

const PAGES: [&str; 4] = ["/", "/a", "/b", "/docs"];
const GAP: TimeDelta = TimeDelta::minutes(30);
const MAX_ENGAGED_MS: i64 = 30 * 60 * 1000;

/// `sd` as sent (JSON), and what Plausible reads it as.
const DEPTHS: [(&str, Option<i64>); 8] = [
    ("40", Some(40)),
    ("\"75\"", Some(75)),
    ("100", Some(100)),
    ("250", Some(100)),
    ("-3", None),
    ("12.5", None),
    ("\"deep\"", None),
    ("null", None),
];

/// `e` as sent (JSON), and what Plausible reads it as.
const TIMES: [(&str, Option<i64>); 8] = [
    ("1500", Some(1500)),
    ("\"2500\"", Some(2500)),
    ("99999", Some(99_999)),
    ("600000", Some(600_000)),
    ("-7", None),
    ("2592000000", None),
    ("3.5", None),
    ("null", None),
];

#[derive(Clone, Copy, Default)]
struct ViewState {
    at: Option<DateTime<Utc>>,
    depth: i64,
    engaged: bool,
    ms: i64,
}

#[derive(Default)]
struct Open {
    last_at: Option<DateTime<Utc>>,
    current: Option<(&'static str, usize)>,
    before: Option<(&'static str, usize)>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Want {
    views: i64,
    timed_views: i64,
    timed_secs: i64,
    engaged_views: i64,
    scroll_sum: i64,
    engaged_ms: i64,
}

/// The plain computation, per page, over the views made where `counts`
/// says.
fn wanted(
    views: &[ViewState],
    view_page: &[&'static str],
    timed: &[Option<i64>],
    counts: impl Fn(&ViewState) -> bool,
) -> BTreeMap<&'static str, Want> {
    let mut want: BTreeMap<&str, Want> = BTreeMap::new();
    for (i, v) in views.iter().enumerate().filter(|(_, v)| counts(v)) {
        let w = want.entry(view_page[i]).or_default();
        w.views += 1;
        if let Some(gap) = timed[i] {
            w.timed_views += 1;
            w.timed_secs += gap;
        }
        if v.engaged {
            w.engaged_views += 1;
            w.scroll_sum += v.depth;
            w.engaged_ms += v.ms;
        }
    }
    want
}

impl Want {
    fn time(&self) -> (Option<f64>, Option<&'static str>, i64) {
        let round = |x: f64| (x * 10.0).round() / 10.0;
        if self.engaged_views > 0 {
            let secs = self.engaged_ms as f64 / self.engaged_views as f64 / 1000.0;
            (Some(round(secs)), Some("engaged"), self.engaged_views)
        } else if self.timed_views > 0 {
            let secs = self.timed_secs as f64 / self.timed_views as f64;
            (Some(round(secs)), Some("until_next_view"), self.timed_views)
        } else {
            (None, None, 0)
        }
    }

    fn depth(&self) -> Option<f64> {
        (self.engaged_views > 0)
            .then(|| (self.scroll_sum as f64 / self.engaged_views as f64 * 10.0).round() / 10.0)
    }
}

#[tokio::test]
async fn time_on_page_and_scroll_depth_agree_with_a_plain_computation_over_the_hits() {
    let mut app = spawn_app().await;
    let site = app.add_site("eng.test", &[]).await;
    let id = site.id.to_string();
    let agents: Vec<String> = (0..5)
        .map(|i| {
            format!("Mozilla/5.0 (X11; Linux x86_64; person {i}) Gecko/20100101 Firefox/133.0")
        })
        .collect();
    let mut rng = Rng(0x5EED_0E46);
    let mut now = t0();
    let mut views: Vec<ViewState> = Vec::new();
    let mut view_page: Vec<&'static str> = Vec::new();
    let mut open: HashMap<usize, Open> = HashMap::new();
    let mut timed: Vec<Option<i64>> = Vec::new();
    let (mut refused, mut engagements) = (0, 0);
    for _ in 0..200 {
        // Hours of traffic within the test day, gaps around the visit rule.
        let longest = if rng.chance(5) { 2_400 } else { 240 };
        now += TimeDelta::seconds(1 + rng.below(longest) as i64);
        app.clock.set(now);
        let who = rng.below(agents.len() as u64) as usize;
        let ua = agents[who].as_str();
        let state = open.entry(who).or_default();
        if state.last_at.is_some_and(|t| now - t >= GAP) {
            *state = Open::default();
        }
        if rng.chance(45) {
            let page = *rng.pick(&PAGES);
            let r = app
                .pixel_with(&format!("site={id}&page={page}"), &[("user-agent", ua)])
                .await;
            assert_eq!(r.status(), 200);
            if let (Some(last), Some((_, v))) = (state.last_at, state.current) {
                timed[v] = Some(now.timestamp() - last.timestamp());
            }
            views.push(ViewState {
                at: Some(now),
                ..ViewState::default()
            });
            view_page.push(page);
            timed.push(None);
            state.before = state.current;
            state.current = Some((page, views.len() - 1));
            state.last_at = Some(now);
            continue;
        }
        // An engagement: mostly the current view's page, sometimes the
        // one before (it crossed the next view on the wire), sometimes
        // another page or nobody's visit.
        let page = match (rng.below(10), state.current, state.before) {
            (0..=5, Some((p, _)), _) => p,
            (6..=7, _, Some((p, _))) => p,
            _ => *rng.pick(&PAGES),
        };
        let (sd_json, sd) = *rng.pick(&DEPTHS);
        let (e_json, e) = *rng.pick(&TIMES);
        let valid = sd.is_some() || e.is_some();
        let status = if rng.chance(70) {
            let body = format!(
                r#"{{"n":"engagement","u":"https://eng.test{page}","d":"eng.test","sd":{sd_json},"e":{e_json},"v":36}}"#
            );
            let r = app
                .http
                .post(format!("{}/api/event", app.address))
                .header("content-type", "text/plain")
                .header("user-agent", ua)
                .body(body.clone())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            assert_eq!(status, if valid { 202 } else { 400 }, "{body}");
            if !valid {
                assert_eq!(
                    r.headers()
                        .get(tickertape::web::pixel::REASON_HEADER)
                        .map(|v| v.to_str().unwrap().to_owned()),
                    Some("invalid-engagement".to_owned())
                );
            }
            status
        } else {
            // tt.js's: the pixel with `sd` and `et` as query values.
            // An unreadable value is still sent (as tt.js never would), so
            // the hit stays an engagement and gets its answer.
            let q = |json: &str| json.trim_matches('"').replace("null", "none");
            let query = format!("site={id}&page={page}&sd={}&et={}", q(sd_json), q(e_json));
            let r = app.pixel_with(&query, &[("user-agent", ua)]).await;
            let status = r.status().as_u16();
            assert_eq!(status, if valid { 200 } else { 400 }, "{query}");
            status
        };
        assert!(status < 500);
        if !valid {
            refused += 1;
            continue;
        }
        engagements += 1;
        let target = match (state.current, state.before) {
            (Some((p, v)), _) if p == page => Some(v),
            (_, Some((p, v))) if p == page => Some(v),
            _ => None,
        };
        let Some(v) = target else { continue };
        let view = &mut views[v];
        let depth = sd.map_or(view.depth, |d| d.min(100));
        view.depth = view.depth.max(depth);
        view.engaged = true;
        let since = (now - view.at.unwrap()).num_milliseconds();
        let room = (since.min(MAX_ENGAGED_MS) - view.ms).max(0);
        view.ms += e.unwrap_or(0).min(room);
    }
    assert!(refused > 0 && engagements > 20, "{refused} {engagements}");
    app.settle().await;

    // The plain computation, per page.
    let want = wanted(&views, &view_page, &timed, |_| true);
    assert!(want.values().any(|w| w.engaged_views > 0));

    app.add_user("owner@example.com", Role::Admin).await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "engagement", None).await;
    let range = "range=custom&from=2026-11-22T00:00&to=2026-11-23T00:00";
    let a = get(&app, &token, &format!("/api/v1/sites/{id}/pages?{range}")).await;
    assert_eq!(a.status, 200, "{}", a.json);
    let mut got: BTreeMap<String, Want> = BTreeMap::new();
    for p in a.json["pages"].as_array().unwrap() {
        let path = p["path"].as_str().unwrap().to_owned();
        let w = want.get(path.as_str()).copied().unwrap_or_default();
        let (time, kind, of) = w.time();
        assert_eq!(p["views"].as_i64(), Some(w.views), "{path} views");
        assert_eq!(p["timeOnPage"].as_f64(), time, "{path}: {p}");
        assert_eq!(p["timeKind"].as_str(), kind, "{path}: {p}");
        assert_eq!(p["timedViews"].as_i64(), Some(of), "{path}: {p}");
        assert_eq!(p["scrollDepth"].as_f64(), w.depth(), "{path}: {p}");
        assert_eq!(
            p["engagedViews"].as_i64(),
            Some(w.engaged_views),
            "{path}: {p}"
        );
        got.insert(path, w);
    }
    assert_eq!(got.len(), want.len(), "every page viewed is listed");

    // pages.csv, row by row.
    let (status, csv) = login.text(&format!("/sites/{id}/pages.csv?{range}")).await;
    assert_eq!(status, 200);
    for row in csv_rows(&csv) {
        let w = want[row[0].as_str()];
        let (_, kind, of) = w.time();
        let (mean, scroll) = csv_means(&w);
        assert_eq!(
            (
                row[6].clone(),
                row[7].clone(),
                row[8].clone(),
                row[9].clone(),
                row[10].clone()
            ),
            (
                mean,
                kind.unwrap_or_default().to_owned(),
                of.to_string(),
                scroll,
                w.engaged_views.to_string()
            ),
            "{row:?}"
        );
    }

    // Parts of the day and a few days around it: whole hours (from hour
    // summaries), hours cut at minutes (from buckets) and whole days (from
    // day summaries), each against the plain computation over the views
    // made in it (a view's time on page and engagement are its own slot's).
    // Then in Europe/Berlin (UTC+1 in November), whose days cut UTC days
    // at 23:00: their edges are hours of hour summaries.
    let ranges = [
        ("UTC", "2026-11-22T11:00", "2026-11-22T17:00"),
        ("UTC", "2026-11-22T10:30", "2026-11-22T15:45"),
        ("UTC", "2026-11-20T00:00", "2026-11-25T00:00"),
        ("Europe/Berlin", "2026-11-22T00:00", "2026-11-23T00:00"),
        ("Europe/Berlin", "2026-11-20T00:00", "2026-11-25T00:00"),
        ("Europe/Berlin", "2026-11-22T12:15", "2026-11-22T19:00"),
    ];
    for (zone, from, to) in ranges {
        let zone = tickertape::domain::TimeZone::parse(zone).unwrap();
        tickertape::storage::sites::set_time_zone(&app.store, &site, zone)
            .await
            .unwrap();
        app.ingest.directory.reload(&app.store).await.unwrap();
        let in_range = |at: DateTime<Utc>| {
            let parse = |t: &str| {
                chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M")
                    .unwrap()
                    .and_local_timezone(zone.tz())
                    .unwrap()
                    .with_timezone(&Utc)
            };
            parse(from) <= at && at < parse(to)
        };
        let want = wanted(&views, &view_page, &timed, |v| in_range(v.at.unwrap()));
        let range = format!("range=custom&from={from}&to={to}");
        let a = get(&app, &token, &format!("/api/v1/sites/{id}/pages?{range}")).await;
        assert_eq!(a.status, 200, "{}", a.json);
        let listed = a.json["pages"].as_array().unwrap();
        for p in listed {
            let path = p["path"].as_str().unwrap();
            let w = want.get(path).copied().unwrap_or_default();
            let (time, kind, of) = w.time();
            assert_eq!(
                (
                    p["views"].as_i64(),
                    p["timeOnPage"].as_f64(),
                    p["timeKind"].as_str(),
                    p["timedViews"].as_i64(),
                    p["scrollDepth"].as_f64(),
                    p["engagedViews"].as_i64()
                ),
                (
                    Some(w.views),
                    time,
                    kind,
                    Some(of),
                    w.depth(),
                    Some(w.engaged_views)
                ),
                "{from} to {to}: {path}: {p}"
            );
        }
        assert_eq!(listed.len(), want.len(), "{from} to {to}");
        assert!(
            want.values()
                .any(|w| w.engaged_views > 0 && w.timed_views > 0),
            "{from} to {to}: the range has engaged and timed views"
        );
    }

    // A page's line in the API and its report.
    let (path, w) = want
        .iter()
        .find(|(_, w)| w.engaged_views > 0)
        .map(|(p, w)| (*p, *w))
        .unwrap();
    let a = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/visits?path={path}&{range}"),
    )
    .await;
    assert_eq!(
        (
            a.json["timeOnPage"].as_f64(),
            a.json["scrollDepth"].as_f64(),
            a.json["engagedViews"].as_i64()
        ),
        (w.time().0, w.depth(), Some(w.engaged_views)),
        "{}",
        a.json
    );
    let (status, html) = login
        .text(&format!("/sites/{id}/page?path={path}&{range}"))
        .await;
    assert_eq!(status, 200);
    let secs = w.engaged_ms as f64 / w.engaged_views as f64 / 1000.0;
    assert_eq!(
        figure(&html, "time-on-page"),
        Some(tickertape::reports::numbers::minutes_seconds(secs))
    );
    assert_eq!(
        figure(&html, "scroll-depth"),
        Some(format!(
            "{:.0}%",
            w.scroll_sum as f64 / w.engaged_views as f64
        ))
    );
    app.stop().await;
}

/// `pages.csv`'s mean time (one decimal) and mean scroll depth cells.
fn csv_means(w: &Want) -> (String, String) {
    let mean = if w.engaged_views > 0 {
        format!(
            "{:.1}",
            w.engaged_ms as f64 / w.engaged_views as f64 / 1000.0
        )
    } else if w.timed_views > 0 {
        format!("{:.1}", w.timed_secs as f64 / w.timed_views as f64)
    } else {
        String::new()
    };
    let scroll = if w.engaged_views > 0 {
        format!("{:.1}", w.scroll_sum as f64 / w.engaged_views as f64)
    } else {
        String::new()
    };
    (mean, scroll)
}

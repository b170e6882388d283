//! Random traffic for the tests that compare the server's figures with a
//! plain computation over the hits sent (`segments`, `segments_imported`,
//! `visit_log`): people with a browser, an address and its country,
//! visits of several views with sources, campaigns and events, sent
//! through the real pixel; and the visits those hits make, computed
//! independently of the server's code.

use chrono::{DateTime, NaiveDate, TimeDelta, TimeZone, Utc};
use std::collections::HashMap;

use crate::helpers::*;

/// A small seeded generator (SplitMix64): a failing run is replayed from
/// its seed.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// (the User-Agent sent, the browser and the system it counts as).
pub(crate) const BROWSERS: [(&str, &str, &str); 3] = [
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
        "Chrome",
        "Windows",
    ),
    (
        "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        "Firefox",
        "Linux",
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
        "Safari",
        "iOS",
    ),
];

/// Pages of one level and of two (a prefix filter `/blog/*` takes two).
pub(crate) const PATHS: [&str; 7] = [
    "/",
    "/pricing",
    "/blog/one",
    "/blog/two",
    "/signup",
    "/docs",
    "/x/y",
];

/// (the `ref` sent, the source it names).
pub(crate) const REFERRERS: [(Option<&str>, Option<&str>); 3] = [
    (Some(""), Some("direct")),
    (
        Some("https://www.google.com/search?q=t"),
        Some("google.com"),
    ),
    (None, None),
];

/// (medium, campaign).
pub(crate) const CAMPAIGNS: [(&str, &str); 2] = [("email", "spring"), ("social", "launch")];

pub(crate) const EVENTS: [&str; 2] = ["Signup", "Download"];

/// Custom properties a view may carry: none, an author, or an author with
/// a key holding `.` and `$` (stored as sent) and a value beyond ASCII.
pub(crate) const VIEW_PROPS: [&[(&str, &str)]; 3] = [
    &[],
    &[("author", "Jane")],
    &[("author", "Zoë"), ("x.y$z", "1")],
];

/// Revenue an event may carry: none, amounts with and without decimals,
/// a refund, a currency without decimals and a ten-thousandth.
pub(crate) const REVENUES: [Option<(&str, &str)>; 7] = [
    None,
    Some(("EUR", "9.99")),
    Some(("USD", "0.5")),
    Some(("EUR", "-5.00")),
    Some(("JPY", "1200")),
    None,
    Some(("EUR", "0.0001")),
];

/// Custom properties an event may carry.
pub(crate) const EVENT_PROPS: [&[(&str, &str)]; 3] = [
    &[],
    &[("plan", "pro")],
    &[("plan", "free"), ("author", "Jane")],
];

#[derive(Debug, Clone)]
pub(crate) struct Person {
    pub user_agent: usize,
    pub ip: String,
    /// What the pixel classifies the address as.
    pub country: &'static str,
}

#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub person: usize,
    pub at: DateTime<Utc>,
    pub path: &'static str,
    pub event: Option<&'static str>,
    /// Into [`REFERRERS`].
    pub referrer: usize,
    /// Into [`CAMPAIGNS`].
    pub campaign: Option<usize>,
    /// Its custom properties, sent as the pixel's `props`.
    pub props: &'static [(&'static str, &'static str)],
    /// An event's revenue (currency, amount), sent as the pixel's
    /// `revenue`.
    pub revenue: Option<(&'static str, &'static str)>,
}

/// How the traffic is spread: each test picks what it exercises (the
/// 30-minute rule's edge, events outside visits) and keeps its figures
/// within one UTC day.
pub(crate) struct Shape {
    /// People start within this many hours of the start.
    pub hours: u64,
    /// Visits per person, 1 to this.
    pub most_visits: u64,
    /// Views per visit, 1 to this.
    pub most_views: u64,
    /// The longest gap between two views of a visit, in seconds (under
    /// 30 minutes, so the views stay one visit).
    pub most_view_gap: u64,
    /// The shortest gap before a person's next visit, in minutes (30 or
    /// more).
    pub least_visit_gap: i64,
    /// An event follows its view by this many seconds or more (0: some
    /// share its view's second), up to 19 more.
    pub least_event_delay: i64,
    /// Percent of views with a campaign, and followed by an event.
    pub campaign_percent: u64,
    pub event_percent: u64,
    /// Percent of visits followed by an event outside any visit (a minute
    /// before the next one could start), which no visit keeps.
    pub outside_percent: u64,
}

impl Shape {
    /// Eight hours of visits clearly apart (31 minutes or more), every
    /// event inside one: what the filter and funnel tests compute over.
    pub const VISITS_APART: Shape = Shape {
        hours: 8,
        most_visits: 2,
        most_views: 5,
        most_view_gap: 900,
        least_visit_gap: 31,
        least_event_delay: 1,
        campaign_percent: 25,
        event_percent: 30,
        outside_percent: 0,
    };

    /// Ten hours of visits up to the 30-minute rule's edge, gaps of up to
    /// 25 minutes inside them, events in their view's second and outside
    /// any visit: what the visit store's test checks.
    pub const AT_THE_EDGE: Shape = Shape {
        hours: 10,
        most_visits: 3,
        most_views: 6,
        most_view_gap: 1_500,
        least_visit_gap: 30,
        least_event_delay: 0,
        campaign_percent: 20,
        event_percent: 25,
        outside_percent: 20,
    };
}

/// Random people from `start` on as `shape` says, their hits in time
/// order (one clock; a person's hits keep their order).
pub(crate) fn traffic(
    rng: &mut Rng,
    people: usize,
    start: DateTime<Utc>,
    shape: &Shape,
) -> (Vec<Person>, Vec<Hit>) {
    let persons: Vec<Person> = (0..people)
        .map(|i| {
            let (ip, country) = if rng.chance(60) {
                (format!("8.8.8.{}", 1 + i % 250), "US")
            } else {
                (format!("10.9.{}.{}", i / 250, 1 + i % 250), "unknown")
            };
            Person {
                user_agent: rng.below(BROWSERS.len() as u64) as usize,
                ip,
                country,
            }
        })
        .collect();
    let mut hits = Vec::new();
    for person in 0..people {
        let mut at = start + TimeDelta::seconds(rng.below(shape.hours * 3_600) as i64);
        for _ in 0..1 + rng.below(shape.most_visits) {
            for view in 0..1 + rng.below(shape.most_views) {
                if view > 0 {
                    at += TimeDelta::seconds(1 + rng.below(shape.most_view_gap) as i64);
                }
                hits.push(Hit {
                    person,
                    at,
                    path: PATHS[rng.below(PATHS.len() as u64) as usize],
                    event: None,
                    referrer: rng.below(REFERRERS.len() as u64) as usize,
                    campaign: rng
                        .chance(shape.campaign_percent)
                        .then(|| rng.below(CAMPAIGNS.len() as u64) as usize),
                    props: VIEW_PROPS[rng.below(VIEW_PROPS.len() as u64) as usize],
                    revenue: None,
                });
                if rng.chance(shape.event_percent) {
                    // An event a little after the view, in the same visit.
                    let delay = shape.least_event_delay + rng.below(20) as i64;
                    // Without drawing from `rng`, so that the traffic of
                    // a seed stays what it was before events had revenue.
                    let revenue = REVENUES
                        [(person + (at.timestamp() as usize) + delay as usize) % REVENUES.len()];
                    hits.push(Hit {
                        person,
                        at: at + TimeDelta::seconds(delay),
                        path: PATHS[rng.below(PATHS.len() as u64) as usize],
                        event: Some(EVENTS[rng.below(EVENTS.len() as u64) as usize]),
                        referrer: 2,
                        campaign: None,
                        props: EVENT_PROPS[rng.below(EVENT_PROPS.len() as u64) as usize],
                        revenue,
                    });
                }
            }
            at += TimeDelta::minutes(shape.least_visit_gap)
                + TimeDelta::seconds(rng.below(3_000) as i64);
            if shape.outside_percent > 0 && rng.chance(shape.outside_percent) {
                hits.push(Hit {
                    person,
                    at: at - TimeDelta::minutes(1),
                    path: "/",
                    event: Some("Outside"),
                    referrer: 2,
                    campaign: None,
                    props: &[("plan", "pro")],
                    revenue: Some(("EUR", "1")),
                });
            }
        }
    }
    hits.sort_by_key(|h| (h.at, h.person));
    (persons, hits)
}

/// Sends `hits` to `site` through the pixel, each at its time, from its
/// person's address and browser (the test's client must be a trusted
/// proxy).
pub(crate) async fn send(app: &TestApp, site: &str, persons: &[Person], hits: &[Hit]) {
    for h in hits {
        app.clock.set(h.at);
        let person = &persons[h.person];
        let mut page = h.path.to_owned();
        if let Some(c) = h.campaign {
            let (medium, campaign) = CAMPAIGNS[c];
            page = format!("{page}?utm_medium={medium}&utm_campaign={campaign}");
        }
        let mut query = format!("site={site}&page={}", urlencode(&page));
        match (h.event, REFERRERS[h.referrer].0) {
            (Some(e), _) => query.push_str(&format!("&e={e}")),
            (None, Some(r)) => query.push_str(&format!("&ref={}", urlencode(r))),
            (None, None) => {}
        }
        if !h.props.is_empty() {
            let props: serde_json::Map<String, serde_json::Value> = h
                .props
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).into()))
                .collect();
            query.push_str(&format!(
                "&props={}",
                urlencode(&serde_json::Value::Object(props).to_string())
            ));
        }
        if let Some((currency, amount)) = h.revenue {
            let revenue = serde_json::json!({"amount": amount, "currency": currency});
            query.push_str(&format!("&revenue={}", urlencode(&revenue.to_string())));
        }
        let r = app
            .pixel_with(
                &query,
                &[
                    ("user-agent", BROWSERS[person.user_agent].0),
                    ("x-forwarded-for", person.ip.as_str()),
                ],
            )
            .await;
        assert_eq!(r.status(), 200, "{query}");
    }
}

/// A visit as the hits make it: its first view's dimensions and its hits
/// in order.
pub(crate) struct Visit<'a> {
    pub start: DateTime<Utc>,
    pub hits: Vec<&'a Hit>,
    pub person: usize,
}

impl Visit<'_> {
    pub fn views(&self) -> impl Iterator<Item = &&Hit> {
        self.hits.iter().filter(|h| h.event.is_none())
    }

    pub fn dimension(&self, persons: &[Person], key: &str) -> Option<String> {
        let first = self.hits[0];
        let (_, browser, os) = BROWSERS[persons[self.person].user_agent];
        match key {
            "country" => Some(persons[self.person].country.to_owned()),
            "browser" => Some(browser.to_owned()),
            "os" => Some(os.to_owned()),
            "source" => REFERRERS[first.referrer].1.map(str::to_owned),
            "medium" => first.campaign.map(|c| CAMPAIGNS[c].0.to_owned()),
            "campaign" => first.campaign.map(|c| CAMPAIGNS[c].1.to_owned()),
            _ => None,
        }
    }
}

/// The visits the hits make: a person's views 30 minutes or less apart,
/// within one UTC day (a visitor is a new one each UTC day), and the
/// events sent while one is open (an event outside any visit is kept by
/// none).
pub(crate) fn visits_of(hits: &[Hit]) -> Vec<Visit<'_>> {
    let gap = TimeDelta::minutes(30);
    let mut open: HashMap<(usize, NaiveDate), (usize, DateTime<Utc>)> = HashMap::new();
    let mut visits: Vec<Visit> = Vec::new();
    for h in hits {
        let key = (h.person, h.at.date_naive());
        match (h.event, open.get(&key).copied()) {
            (Some(_), Some((v, last))) if h.at - last < gap => visits[v].hits.push(h),
            (Some(_), _) => {}
            (None, Some((v, last))) if h.at - last < gap => {
                visits[v].hits.push(h);
                open.insert(key, (v, h.at.max(last)));
            }
            (None, _) => {
                open.insert(key, (visits.len(), h.at));
                visits.push(Visit {
                    start: h.at,
                    hits: vec![h],
                    person: h.person,
                });
            }
        }
    }
    visits
}

/// Whether a visit passes a filter (`key:value`, a page's value ending in
/// `*` a prefix), as the test reads it, independently of the server's
/// code.
pub(crate) fn passes(persons: &[Person], v: &Visit, filter: &str) -> bool {
    let (key, value) = filter.split_once(':').unwrap();
    let page = |path: &str| match value.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => path == value,
    };
    match key {
        "page" => v.views().any(|h| page(h.path)),
        "entry" => v.views().next().is_some_and(|h| page(h.path)),
        "exit" => v.views().last().is_some_and(|h| page(h.path)),
        "event" => v.hits.iter().any(|h| h.event == Some(value)),
        "prop" => {
            let (k, value) = value.split_once(':').unwrap();
            v.hits.iter().any(|h| h.props.contains(&(k, value)))
        }
        other => v.dimension(persons, other).as_deref() == Some(value),
    }
}

/// A plain decimal amount in ten-thousandths, read without the server's
/// code.
pub(crate) fn ten_thousandths(amount: &str) -> i128 {
    let (negative, digits) = match amount.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, amount),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction = format!("{fraction:0<4}");
    let n = whole.parse::<i128>().unwrap() * 10_000 + fraction[..4].parse::<i128>().unwrap();
    if negative {
        -n
    } else {
        n
    }
}

/// A seeded test's world: its seed (the variable `env` replays another),
/// its random numbers, an app that trusts the test's client as a proxy
/// (so each person's address is theirs), the clock at 19:00 UTC on 22
/// November 2026 (across UTC midnight, which is 01:00 in Berlin and 05:30
/// in Kolkata) with that day's salt in, and forty people's traffic of
/// `shape` from then on.
pub(crate) struct Seeded {
    pub seed: u64,
    pub rng: Rng,
    pub app: TestApp,
    pub start: DateTime<Utc>,
    pub persons: Vec<Person>,
    pub hits: Vec<Hit>,
}

pub(crate) async fn seeded(env: &str, default: u64, shape: &Shape) -> Seeded {
    let seed = std::env::var(env)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let mut rng = Rng(seed);
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    let start = Utc.with_ymd_and_hms(2026, 11, 22, 19, 0, 0).unwrap();
    app.clock.set(start);
    salt_ready(&app, "2026-11-22").await;
    let (persons, hits) = traffic(&mut rng, 40, start, shape);
    Seeded {
        seed,
        rng,
        app,
        start,
        persons,
        hits,
    }
}

/// The query parameters of `filters`.
pub(crate) fn filter_params(filters: &[&str]) -> String {
    filters
        .iter()
        .map(|f| format!("&filter={}", urlencode(f)))
        .collect()
}

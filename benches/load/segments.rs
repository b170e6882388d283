//! Filters and funnels: reports read from the visit store, timed side by
//! side with the unfiltered reports that read the buckets.
//!
//! The data goes through the real write path with historic times: visits
//! are made as the pixel makes them (`ingest::visits`: the visit's entry
//! and previous page, the seconds since its previous view, its second
//! view, its place `{id, start, step}`), journaled as the pixel journals
//! them (`journal::Journal`, format 5, `fast` acks), then the release
//! server is started on that journal and applies it like any backlog:
//! minutes, hours and days, breakdowns and the visit store. The load ends
//! when every stream's backlog is empty and the stored views and visits
//! equal what was journaled (a no-loss check).
//!
//! - **30 days**: `BENCH_SEGMENTS_VIEWS` views (default 1,000,000; quick
//!   30,000) over 60 pages (Zipf, with the path `/`, `/pricing`, `/signup`,
//!   `/welcome` a funnel can follow), from a fifth as many visitors, each
//!   with 1 to 3 visits spread over the days, visits of geometric length
//!   (mean about 2.5 views, 5 to 120 s apart), a `Signup` event after half
//!   the views of `/signup`, sources (Zipf over 40, a few
//!   campaigns) and browser, OS, device and country mixes as the year
//!   bench's. Timed: the 30-day dashboard unfiltered, with one filter
//!   (`country:DE`), with three (`country:DE`, `source:google.com`,
//!   `device:desktop`), with a page filter (`page:/pricing`), the filtered
//!   `pages.csv`, the site's 4-step funnel (defined in the site's
//!   settings) and the API's ad-hoc funnel, and 7 days with one filter.
//! - **The year**: 10,000 pages × 365 days at `BENCH_SEGMENTS_YEAR_DAILY`
//!   views a day (default 200, about 80 visits a day, which loads in
//!   about 10 minutes here beside other work; quick 100; 0 skips it): the
//!   12-month dashboard with one filter, the last 6 months with the same
//!   filter, and the funnel over 12 months.
//!   Past `reports::filtered_read::MAX_VISITS_READ` visits a read is
//!   sampled (the 30 days' unfiltered funnel is, at the default size),
//!   and the same funnel over 30 and over 14 days shows what a read costs
//!   as its range grows past that bound. The page must say the sample's
//!   rate.
//!
//! Each report: `BENCH_SEGMENTS_REQUESTS` sequential requests (default
//! 10; quick 5) after one warm-up, signed in as the site's owner (the API
//! with an API token), in UTC and Europe/Berlin. `BENCH_SEGMENTS=0` skips
//! it, `BENCH_SEGMENTS_ONLY=1` runs only it, `BENCH_SEGMENTS_KEEP=1` keeps
//! the loaded databases and `BENCH_SEGMENTS_REUSE=1` times them again
//! without loading. `BENCH_SERVE_BIN` serves the reports from another
//! build (the load always uses this build's `target/release/tickertape`,
//! whose journal format the bench writes).

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tickertape::accounts::api_tokens::{self, TokenScope};
use tickertape::accounts::password::NewPassword;
use tickertape::accounts::{users, Role};
use tickertape::domain::{Dimension, Email, FunnelSteps, Goal, Label, Labels, TimeZone};
use tickertape::journal::{
    AckMode, Journal, JournalConfig, Record, SubmitError, Visit, VisitPlace,
};
use tickertape::reports::filtered_read::MAX_VISITS_READ;
use tickertape::reports::Resolution;
use tickertape::storage::sites::{self, Site, SiteChanges};
use tickertape::storage::visit_log::{self, VisitQuery};
use tickertape::storage::{funnels, Store};

use crate::report_latency::{login, measure_n, EMAIL, PASSWORD};
use crate::roles::{stored, Database};
use crate::site_year::{pick, profiles, source_names, zipf_cdf};
use crate::{env_or, repo, Options, Rng, Server, SITE_DOMAIN};

const DATABASE: &str = "bench_segments";
const YEAR_DATABASE: &str = "bench_segments_year";
const PAGES: usize = 60;
const YEAR_PAGES: usize = 10_000;
/// The bench's own note of a finished load, in the loaded database.
const LOADED: &str = "bench_loaded";

/// The most popular paths, in order; the rest are blog posts.
const NAMED: [&str; 10] = [
    "/",
    "/pricing",
    "/blog",
    "/docs",
    "/signup",
    "/features",
    "/about",
    "/welcome",
    "/changelog",
    "/contact",
];

/// The path a visit may follow, and the chance of each next step from the
/// one before (otherwise the next page is drawn by popularity).
const FUNNEL: [&str; 4] = ["/", "/pricing", "/signup", "/welcome"];
const FUNNEL_ON: [f64; 3] = [0.35, 0.30, 0.60];

/// The event sent after half the views of `/signup`.
const SIGNUP: &str = "Signup";

/// The share of visits that arrive from a newsletter campaign.
const CAMPAIGN_SHARE: f64 = 0.15;

/// `BENCH_SEGMENTS_REUSE=1`: time the databases a previous run kept.
pub fn reuse() -> bool {
    std::env::var("BENCH_SEGMENTS_REUSE").is_ok_and(|v| v == "1")
}

fn keep() -> bool {
    reuse() || std::env::var("BENCH_SEGMENTS_KEEP").is_ok_and(|v| v == "1")
}

pub async fn run(db: &Database, options: &Options) -> anyhow::Result<()> {
    let views: u64 = env_or(
        "BENCH_SEGMENTS_VIEWS",
        if options.quick { 30_000 } else { 1_000_000 },
    );
    let year_daily: u64 = env_or(
        "BENCH_SEGMENTS_YEAR_DAILY",
        if options.quick { 100 } else { 200 },
    );
    let requests: usize = env_or(
        "BENCH_SEGMENTS_REQUESTS",
        if options.quick { 5 } else { 10 },
    );
    println!(
        "\n## Filters and funnels: the visit store read side by side with the buckets\n\n\
         Loaded through the write path (visits as the pixel makes them, journaled, applied by the release server). \
         {requests} sequential requests each after one warm-up, signed in as the site's owner, loopback; \
         reports served by {}.\n",
        std::env::var("BENCH_SERVE_BIN").unwrap_or_else(|_| "target/release/tickertape".into())
    );
    let mut verdicts = Vec::new();
    let month = Shape {
        pages: PAGES,
        days: 30,
        views,
    };
    let (store, site) = prepare(db, DATABASE, &month).await?;
    verdicts.extend(measure_month(db, &store, &site, requests).await?);
    if !keep() {
        store.db().drop().await?;
    }
    if year_daily > 0 {
        let year = Shape {
            pages: YEAR_PAGES,
            days: 365,
            views: year_daily * 365,
        };
        let (store, site) = prepare(db, YEAR_DATABASE, &year).await?;
        verdicts.extend(measure_year(db, &store, &site, requests).await?);
        if !keep() {
            store.db().drop().await?;
        }
    }
    println!("\n### Filter and funnel targets\n");
    println!("| figure | target | p50 UTC ms | p50 Europe/Berlin ms | status |");
    println!("|---|---|---:|---:|---|");
    for v in &verdicts {
        println!("{v}");
    }
    Ok(())
}

/// What to load: pages, days ending today, and about how many views.
struct Shape {
    pages: usize,
    days: i64,
    views: u64,
}

/// The loaded (or kept) database and its site.
async fn prepare(db: &Database, database: &str, shape: &Shape) -> anyhow::Result<(Store, Site)> {
    if reuse() {
        let store = db.store(database).await?;
        let site = sites::list(&store).await?.into_iter().next();
        // Only a load that finished: its counts, checked again.
        let kept = store
            .db()
            .collection::<Loaded>(LOADED)
            .find_one(doc! {"_id": "load"})
            .await?;
        if let (Some(site), Some(kept)) = (site, kept) {
            let past_minutes = shape.days > 80;
            if complete(&store, &kept, past_minutes).await? {
                println!(
                    "{database}: reusing the last run's data: {} views and {} events in {} visits of {} visitors\n",
                    kept.views, kept.events, kept.visits, kept.visitors
                );
                return Ok((store, site));
            }
        }
        eprintln!("BENCH_SEGMENTS_REUSE: no complete load kept in {database}, loading it");
    }
    let (store, _) = db.fresh(database).await?;
    // The TTL indexes first, as a deployment has them from its first start.
    tickertape::storage::retention::apply(&store, &Default::default()).await?;
    let mut site = sites::list(&store)
        .await?
        .into_iter()
        .next()
        .expect("the bench site");
    let now = Utc::now();
    let owner = users::create(
        &store,
        Email::parse(EMAIL)?,
        &NewPassword::parse(PASSWORD)?,
        Role::Owner,
        now,
    )
    .await?;
    sites::update(
        &store,
        &site,
        SiteChanges {
            name: site.name.clone(),
            aliases: vec![],
            owners: vec![owner.id],
        },
    )
    .await?;
    sites::add_goal(&store, &site.id, &Goal::parse("event", SIGNUP)?).await?;
    funnels::add(
        &store,
        &site.id,
        "Home to welcome",
        &FunnelSteps::parse(FUNNEL)?,
        now,
    )
    .await?;
    site = sites::list(&store)
        .await?
        .into_iter()
        .next()
        .expect("the bench site");

    let dir = repo().join("target/bench-journal").join(database);
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    let loaded = journal(&dir, shape, now).await?;
    let journaled = started.elapsed();
    let t = Instant::now();
    apply(db, database, &dir, &store, &loaded, shape.days > 80).await?;
    // What `BENCH_SEGMENTS_REUSE` checks a kept database against.
    let mut marker = bson::to_document(&loaded)?;
    marker.insert("_id", "load");
    store
        .db()
        .collection::<Document>(LOADED)
        .insert_one(marker)
        .await?;
    let (bytes, visits) = visit_log::storage(&store).await?;
    println!(
        "{database}: {} views and {} events in {} visits of {} visitors over {} days and {} pages ({:.0} visits a day); \
         journaled in {:.0} s, applied by the release server in {:.0} s ({:.0} hits/s); visit store {:.0} bytes a visit\n",
        loaded.views,
        loaded.events,
        loaded.visits,
        loaded.visitors,
        shape.days,
        shape.pages,
        loaded.visits as f64 / shape.days as f64,
        journaled.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        (loaded.views + loaded.events) as f64 / t.elapsed().as_secs_f64(),
        bytes as f64 / visits.max(1) as f64,
    );
    Ok((store, site))
}

/// What was journaled.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Loaded {
    views: u64,
    events: u64,
    visits: u64,
    visitors: u64,
}

/// A visit to make: when it starts, whose it is, and how many views it
/// would have if the day did not end first.
struct Planned {
    start: DateTime<Utc>,
    person: u32,
    views: u8,
}

/// The visits of every visitor, in time order: each visitor 1 to 3
/// visits at random times of the range, each of geometric length.
fn plan(shape: &Shape, first: DateTime<Utc>, now: DateTime<Utc>, rng: &mut Rng) -> Vec<Planned> {
    let persons = (shape.views / 5).max(1) as u32;
    let span = (now - first).num_seconds().max(1) as u64;
    let mut planned = Vec::with_capacity(persons as usize * 2);
    for person in 0..persons {
        for _ in 0..1 + rng.below(3) {
            let mut views = 1u8;
            // Mean 2.5: another view with chance 0.6.
            while views < 60 && rng.unit() < 0.6 {
                views += 1;
            }
            planned.push(Planned {
                start: first + TimeDelta::seconds((rng.next_u64() % span) as i64),
                person,
                views,
            });
        }
    }
    planned.sort_by_key(|p| p.start);
    planned
}

/// Makes the visits' hits and journals them, a UTC day at a time in time
/// order (as the pixel would have), into a fresh journal at `dir`.
async fn journal(dir: &Path, shape: &Shape, now: DateTime<Utc>) -> anyhow::Result<Loaded> {
    let first = Resolution::Day.floor(now) - TimeDelta::days(shape.days - 1);
    let mut rng = Rng(0x5EC5_BE7C_2026_1127);
    let planned = plan(shape, first, now, &mut rng);
    let config = JournalConfig {
        dir: dir.to_owned(),
        lanes: 2,
        segment_bytes: 16 << 20,
        segment_max_age: Duration::from_secs(60),
        budget_bytes: 16 << 30,
        queue_capacity: 100_000,
        queue_bytes: 32 << 20,
        ack_mode: AckMode::Fast,
    };
    let (journal, feeds) = Journal::open(&config)?;
    // The server started later reads the lanes' files: nothing takes the
    // in-memory hand-off here.
    drop(feeds);
    let appender = journal.appender().clone();
    let maker = Maker::new(shape.pages);
    let mut loaded = Loaded {
        visitors: planned
            .iter()
            .map(|p| p.person)
            .collect::<std::collections::HashSet<_>>()
            .len() as u64,
        ..Loaded::default()
    };
    let mut day_records: Vec<Record> = Vec::new();
    let mut day = first;
    let mut planned = planned.iter().peekable();
    while day < now {
        let end = (day + TimeDelta::days(1)).min(now);
        while let Some(p) = planned.next_if(|p| p.start < end) {
            maker.visit(p, day, end, &mut rng, &mut day_records, &mut loaded);
        }
        day_records.sort_by_key(|r| r.at);
        for record in day_records.drain(..) {
            loop {
                match appender.submit(record.clone()) {
                    Ok(_) => break,
                    Err(SubmitError::QueueFull) => {
                        tokio::time::sleep(Duration::from_millis(1)).await
                    }
                    Err(e) => anyhow::bail!("journaling the bench's hits: {e:?}"),
                }
            }
        }
        day += TimeDelta::days(1);
    }
    journal.close_writers().await;
    drop(journal);
    Ok(loaded)
}

/// Makes a visit's hits as the pixel would journal them.
struct Maker {
    pages: Vec<String>,
    cdf: Vec<f64>,
    funnel: [usize; 4],
    sources: Vec<String>,
    source_cdf: Vec<f64>,
    /// Browser, OS, device and country (the year bench's mixes without
    /// their campaigns: a campaign belongs to a visit, not a visitor).
    profiles: Vec<Labels>,
}

impl Maker {
    fn new(pages: usize) -> Self {
        let paths: Vec<String> = NAMED
            .iter()
            .map(|s| s.to_string())
            .chain((NAMED.len()..pages).map(|i| format!("/blog/post-{i}")))
            .take(pages)
            .collect();
        let funnel = FUNNEL.map(|f| paths.iter().position(|p| p == f).expect("a named page"));
        let sources = source_names();
        Maker {
            pages: paths.iter().map(|p| format!("{SITE_DOMAIN}{p}")).collect(),
            cdf: zipf_cdf(pages),
            funnel,
            source_cdf: zipf_cdf(sources.len()),
            sources,
            profiles: profiles()
                .into_iter()
                .filter(|l| l.get(Dimension::Campaign).is_none())
                .collect(),
        }
    }

    /// The next page of a visit: along the funnel's path with its chance,
    /// otherwise by popularity.
    fn next_page(&self, current: usize, rng: &mut Rng) -> usize {
        match self.funnel.iter().position(|&f| f == current) {
            Some(i) if i < FUNNEL_ON.len() && rng.unit() < FUNNEL_ON[i] => self.funnel[i + 1],
            _ => pick(&self.cdf, rng),
        }
    }

    /// Appends the hits of visit `p` (views, and an event) to `out`: none
    /// at or past `end` (the visitor id changes with the UTC day, and no
    /// hit is in the future).
    fn visit(
        &self,
        p: &Planned,
        day: DateTime<Utc>,
        end: DateTime<Utc>,
        rng: &mut Rng,
        out: &mut Vec<Record>,
        loaded: &mut Loaded,
    ) {
        // The day's keyed hash of the visitor.
        let visitor = tickertape::domain::sketch::mix(
            u64::from(p.person) ^ ((day.timestamp() as u64 / 86_400) << 32),
        );
        let id = rng.next_u64();
        let profile = &self.profiles[p.person as usize % self.profiles.len()];
        let mut landing = profile.clone();
        let source = if rng.unit() < CAMPAIGN_SHARE {
            landing.set(Dimension::Medium, "email");
            landing.set(Dimension::Campaign, format!("c{}", rng.below(7)));
            "newsletter".to_owned()
        } else {
            self.sources[pick(&self.source_cdf, rng)].clone()
        };
        let mut page = pick(&self.cdf, rng);
        let entry = page;
        let mut at = p.start + TimeDelta::milliseconds(rng.below(1000) as i64);
        let (mut step, mut views) = (0u32, 0u32);
        let mut previous = page;
        let mut last_view = at;
        loaded.visits += 1;
        for k in 0..p.views {
            if k > 0 {
                at += TimeDelta::seconds(5 + rng.below(116) as i64);
                if at >= end {
                    break;
                }
                page = self.next_page(previous, rng);
            }
            let place = Some(VisitPlace {
                id,
                start: p.start,
                step,
            });
            let visit = if k == 0 {
                Visit {
                    visitor,
                    place,
                    ..Visit::default()
                }
            } else {
                Visit {
                    visitor,
                    duration_secs: (at.timestamp() - last_view.timestamp()) as u32,
                    entry: Some(self.pages[entry].clone()),
                    previous: Some(self.pages[previous].clone()),
                    second_view: views == 1,
                    place,
                }
            };
            // tt.js sends the referrer: the landing view's source; a
            // view reached from the site itself is `direct`, and the
            // campaign is in the landing page's address only.
            out.push(Record {
                page: self.pages[page].clone(),
                at,
                source: Some(if k == 0 {
                    source.clone()
                } else {
                    "direct".into()
                }),
                visit: Some(visit),
                labels: if k == 0 {
                    landing.clone()
                } else {
                    profile.clone()
                },
                props: Default::default(),
                revenue: None,
                engagement: None,
            });
            step += 1;
            views += 1;
            loaded.views += 1;
            previous = page;
            last_view = at;
            if page == self.funnel[2] && rng.unit() < 0.5 {
                let event_at = at + TimeDelta::seconds(3);
                if event_at < end {
                    out.push(Record {
                        page: self.pages[page].clone(),
                        at: event_at,
                        source: None,
                        visit: Some(Visit {
                            visitor,
                            place: Some(VisitPlace {
                                id,
                                start: p.start,
                                step,
                            }),
                            ..Visit::default()
                        }),
                        labels: Labels::default().with(Dimension::Event, SIGNUP),
                        props: Default::default(),
                        revenue: None,
                        engagement: None,
                    });
                    step += 1;
                    loaded.events += 1;
                }
            }
        }
    }
}

/// Starts this build's release server on the journal at `dir` and waits
/// until every stream has applied it all and the stored views and visits
/// equal what was journaled.
async fn apply(
    db: &Database,
    database: &str,
    dir: &Path,
    store: &Store,
    loaded: &Loaded,
    past_minute_retention: bool,
) -> anyhow::Result<()> {
    let server = loader(db, database, dir)?;
    let started = Instant::now();
    let mut reported = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let text = crate::roles::get_text(&format!("{}/metrics", server.address)).await?;
        let backlog: u64 = ["", "_rollups", "_sources", "_visits"]
            .iter()
            .map(|s| {
                crate::roles::metric(&text, &format!("tickertape_journal{s}_backlog_hits "))
                    .unwrap_or(u64::MAX / 8)
            })
            .sum();
        if reported.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "{database}: {:.0} s, {backlog} hits still to apply over the four streams",
                started.elapsed().as_secs_f64()
            );
            reported = Instant::now();
        }
        if backlog == 0 && complete(store, loaded, past_minute_retention).await? {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(4 * 3600),
            "{database}: the journal was not applied within 4 hours"
        );
    }
    server.stop()?;
    anyhow::ensure!(
        complete(store, loaded, past_minute_retention).await?,
        "{database}: stored views or visits differ from those journaled"
    );
    Ok(())
}

/// Whether the views of every level (the minutes only when none has
/// passed their retention yet) and the visits with their views are all
/// stored.
async fn complete(store: &Store, loaded: &Loaded, past_minutes: bool) -> anyhow::Result<bool> {
    for g in Resolution::ALL {
        if g == Resolution::Minute && past_minutes {
            continue;
        }
        if stored(store, g).await? != loaded.views as i64 {
            return Ok(false);
        }
    }
    let sums: Vec<Document> = store
        .db()
        .collection::<Document>(visit_log::COLLECTION)
        .aggregate([doc! {"$group": {"_id": null, "n": {"$sum": 1}, "views": {"$sum": "$views"}}}])
        .await?
        .try_collect()
        .await?;
    let count = |k: &str| {
        sums.first()
            .map_or(0, |d| tickertape::storage::values::count(d.get(k)))
    };
    Ok(count("n") == loaded.visits as i64 && count("views") == loaded.views as i64)
}

/// This build's release server on the kept journal `dir` (the bench's
/// journal format is this build's).
fn loader(db: &Database, database: &str, dir: &Path) -> anyhow::Result<Server> {
    let mut cmd = Command::new(repo().join("target/release/tickertape"));
    cmd.arg("serve")
        .env("MONGODB_URI", &db.uri)
        .env("TICKERTAPE_DATABASE", database)
        .env("TICKERTAPE_JOURNAL_DIR", dir)
        .env("TICKERTAPE_READY_MAX_BACKLOG_SECS", "86400")
        .env("TICKERTAPE_LISTEN", "127.0.0.1:0")
        .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
        .env("RUST_LOG", "warn");
    Server::start(cmd)
}

/// A report to time, and its target p50 if it has one.
struct Case {
    name: String,
    path: String,
    target_ms: Option<f64>,
    /// Read with the API token rather than the session.
    api: bool,
}

fn case(name: &str, path: String, target_ms: Option<f64>) -> Case {
    Case {
        name: name.to_owned(),
        path,
        target_ms,
        api: false,
    }
}

/// `country:DE` as a query value.
fn encode(raw: &str) -> String {
    raw.replace('%', "%25")
        .replace(':', "%3A")
        .replace('/', "%2F")
        .replace('&', "%26")
}

fn filters(list: &[&str]) -> String {
    list.iter()
        .map(|f| format!("&filter={}", encode(f)))
        .collect()
}

/// A client that sends a new API token of the site's owner.
async fn api_client(store: &Store, site: &Site) -> anyhow::Result<reqwest::Client> {
    let owner = *site.owners.first().expect("the bench site's owner");
    let (_, secret) = api_tokens::create(
        store,
        owner,
        &Label::parse("segments bench")?,
        &TokenScope::AllSites,
        false,
        Utc::now(),
    )
    .await?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", secret.expose()).parse()?,
    );
    Ok(reqwest::Client::builder()
        .default_headers(headers)
        .build()?)
}

/// One timed report in one zone.
struct Timed {
    name: String,
    target_ms: Option<f64>,
    p50: f64,
}

/// The 30-day reports, unfiltered and filtered, in both zones.
async fn measure_month(
    db: &Database,
    store: &Store,
    site: &Site,
    requests: usize,
) -> anyhow::Result<Vec<String>> {
    let base = format!("/sites/{}", site.id);
    let one = filters(&["country:DE"]);
    let three = filters(&["country:DE", "source:google.com", "device:desktop"]);
    let steps: String = ["/pricing", "/signup", "event:Signup", "/welcome"]
        .iter()
        .map(|s| format!("&step={}", encode(s)))
        .collect();
    let now = Utc::now();
    let from14 = (now - TimeDelta::days(13)).format("%Y-%m-%d");
    let today = now.format("%Y-%m-%d");
    let mut cases =
        vec![
        case("dashboard, 30 days, unfiltered", format!("{base}?range=30d"), None),
        case(
            "dashboard, 30 days, 1 filter (country:DE)",
            format!("{base}?range=30d{one}"),
            Some(500.0),
        ),
        case(
            "dashboard, 30 days, 3 filters (country:DE, source:google.com, device:desktop)",
            format!("{base}?range=30d{three}"),
            Some(1000.0),
        ),
        case(
            "dashboard, 30 days, page filter (page:/pricing)",
            format!("{base}?range=30d{}", filters(&["page:/pricing"])),
            None,
        ),
        case(
            "pages.csv, 30 days, unfiltered",
            format!("{base}/pages.csv?range=30d"),
            None,
        ),
        case(
            "pages.csv, 30 days, 1 filter (country:DE)",
            format!("{base}/pages.csv?range=30d{one}"),
            None,
        ),
        case(
            "funnel report, 30 days, 4 steps (/, /pricing, /signup, /welcome)",
            format!("{base}/funnels?range=30d"),
            Some(1000.0),
        ),
        case(
            "funnel report, last 14 days, the same funnel",
            format!("{base}/funnels?range=custom&from={from14}&to={today}"),
            None,
        ),
        Case {
            api: true,
            ..case(
                "API ad-hoc funnel, 30 days, 4 steps (/pricing, /signup, event:Signup, /welcome)",
                format!("/api/v1/sites/{}/funnel?range=30d{steps}", site.id),
                Some(1000.0),
            )
        },
        case("dashboard, 7 days, unfiltered", format!("{base}?range=7d"), None),
        case(
            "dashboard, 7 days, 1 filter (country:DE)",
            format!("{base}?range=7d{one}"),
            None,
        ),
    ];
    let month = VisitQuery::new(site.domain.as_str(), now - TimeDelta::days(30), now);
    let matched = |filter: Document| {
        let mut q = month.clone();
        q.filter = filter;
        async move { visit_log::count(store, &q).await }
    };
    println!(
        "### 30 days, {} visits stored ({} from DE, {} from DE on google.com on desktop)\n",
        matched(Document::new()).await?,
        matched(doc! {"country": "DE"}).await?,
        matched(doc! {"country": "DE", "source": "google.com", "device": "desktop"}).await?,
    );
    let fortnight = VisitQuery::new(site.domain.as_str(), now - TimeDelta::days(14), now);
    println!(
        "last 14 days: {} visits; past {MAX_VISITS_READ} visits a read is sampled\n",
        visit_log::count(store, &fortnight).await?
    );
    let timed = measure_zones(db, DATABASE, store, site, &mut cases, requests).await?;
    Ok(verdicts(&timed))
}

/// The year's 12-month and 6-month reports with one filter, in both zones.
async fn measure_year(
    db: &Database,
    store: &Store,
    site: &Site,
    requests: usize,
) -> anyhow::Result<Vec<String>> {
    let base = format!("/sites/{}", site.id);
    let now = Utc::now();
    let six = (now - TimeDelta::days(182)).format("%Y-%m-%d");
    let today = now.format("%Y-%m-%d");
    let desktop = filters(&["device:desktop"]);
    let de = filters(&["country:DE"]);
    let mut cases = vec![
        case(
            "year: dashboard, 12 months, unfiltered",
            format!("{base}?range=12mo"),
            None,
        ),
        case(
            "year: dashboard, 12 months, 1 filter (device:desktop)",
            format!("{base}?range=12mo{desktop}"),
            Some(2000.0),
        ),
        case(
            "year: dashboard, last 6 months, 1 filter (device:desktop)",
            format!("{base}?range=custom&from={six}&to={today}{desktop}"),
            None,
        ),
        case(
            "year: dashboard, 12 months, 1 filter (country:DE)",
            format!("{base}?range=12mo{de}"),
            Some(2000.0),
        ),
        case(
            "year: funnel report, 12 months, 4 steps",
            format!("{base}/funnels?range=12mo"),
            None,
        ),
    ];
    let range = |days: i64, filter: Document| {
        let mut q = VisitQuery::new(site.domain.as_str(), now - TimeDelta::days(days), now);
        q.filter = filter;
        async move { visit_log::count(store, &q).await }
    };
    let sizes = [
        ("12 months", 366, doc! {}),
        ("12 months, desktop", 366, doc! {"device": "desktop"}),
        ("6 months, desktop", 183, doc! {"device": "desktop"}),
        ("12 months, DE", 366, doc! {"country": "DE"}),
    ];
    let mut counted = Vec::new();
    for (name, days, filter) in sizes {
        let n = range(days, filter).await?;
        counted.push(format!(
            "{name}: {n}{}",
            if n > MAX_VISITS_READ {
                format!(
                    " (sampled, about 1 in {:.1})",
                    n as f64 / MAX_VISITS_READ as f64
                )
            } else {
                String::new()
            }
        ));
    }
    println!(
        "### The year, {YEAR_PAGES} pages: visits the filters select ({}; past {MAX_VISITS_READ} a read is sampled)\n",
        counted.join("; ")
    );
    let timed = measure_zones(db, YEAR_DATABASE, store, site, &mut cases, requests).await?;
    Ok(verdicts(&timed))
}

/// Every case in UTC, then in Europe/Berlin, each zone on a fresh start of
/// the serving build; prints a table per zone.
async fn measure_zones(
    db: &Database,
    database: &str,
    store: &Store,
    site: &Site,
    cases: &mut [Case],
    requests: usize,
) -> anyhow::Result<[Vec<Timed>; 2]> {
    let mut out: [Vec<Timed>; 2] = [Vec::new(), Vec::new()];
    let api = api_client(store, site).await?;
    for (z, zone) in ["UTC", "Europe/Berlin"].into_iter().enumerate() {
        sites::set_time_zone(store, site, TimeZone::parse(zone)?).await?;
        let server = crate::serve_release(db, database)?;
        let http = login(&server.address).await?;
        // The first filtered request after a start: nothing of the
        // server's is warm.
        let first = cases
            .iter()
            .find(|c| c.target_ms.is_some() && !c.api)
            .expect("a filtered case");
        let t = Instant::now();
        let r = http
            .get(format!("{}{}", server.address, first.path))
            .send()
            .await?;
        anyhow::ensure!(r.status() == 200, "first request: {}", r.status());
        r.bytes().await?;
        println!(
            "#### Site in {zone}\n\nfirst request after a start ({}): {:.0} ms\n",
            first.name,
            t.elapsed().as_secs_f64() * 1000.0
        );
        // The first read queued the closed days it read from the visit
        // documents for packing; the timed reads are those of a built
        // read model, as the unfiltered reports' are.
        let (packed, closed, waited) = packs_built(store, site).await?;
        println!(
            "closed days packed after it: {packed} of {closed}, {:.1} s after the first request ended\n",
            waited.as_secs_f64()
        );
        println!("| report | target p50 | p50 ms | p99 ms | bytes | sample shown on the page |");
        println!("|---|---:|---:|---:|---:|---|");
        for c in cases.iter() {
            let client = if c.api { &api } else { &http };
            let (p50, p99, bytes) =
                measure_n(client, &server.address, &c.name, &c.path, requests).await?;
            let body = client
                .get(format!("{}{}", server.address, c.path))
                .send()
                .await?
                .text()
                .await?;
            println!(
                "| {} | {} | {p50:.0} | {p99:.0} | {bytes} | {} |",
                c.name,
                c.target_ms
                    .map_or("–".to_owned(), |t| format!("< {t:.0} ms")),
                if c.path.contains("filter=") || c.path.contains("funnel") {
                    sample_shown(&body, c.api)
                } else {
                    "– (buckets)".to_owned()
                }
            );
            out[z].push(Timed {
                name: c.name.clone(),
                target_ms: c.target_ms,
                p50,
            });
        }
        println!("\napp peak RSS: {:.0} MiB\n", server.peak_rss_mib());
        server.stop()?;
    }
    sites::set_time_zone(store, site, TimeZone::UTC).await?;
    Ok(out)
}

/// Waits (up to five minutes) until every closed UTC day of the site with
/// visits has a valid day pack: (days packed, closed days, time waited).
async fn packs_built(store: &Store, site: &Site) -> anyhow::Result<(usize, usize, Duration)> {
    use tickertape::storage::{visit_days, visit_packs};
    let started = Instant::now();
    let today = visit_days::day_of(Utc::now());
    let domain = site.domain.as_str();
    loop {
        let counters = visit_days::counts(store, domain, today - 400, today).await?;
        let packed = visit_packs::packed_days(store, domain, today - 400, today, &counters).await?;
        if packed.len() >= counters.len() || started.elapsed() > Duration::from_secs(300) {
            return Ok((packed.len(), counters.len(), started.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the answer says of its sample: the page's rate ("1 in 12"), the
/// API's `sampled` share, or that it read every visit.
fn sample_shown(body: &str, api: bool) -> String {
    if api {
        return match body.find("\"sampled\":") {
            Some(at) => {
                let v: String = body[at + 10..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                format!("API sampled {v}")
            }
            None => "–".into(),
        };
    }
    match body.find("Sampled: the visits of about ") {
        Some(at) => {
            let rest = &body[at..];
            let rate = rest
                .find("(1 in ")
                .map(|i| {
                    rest[i + 1..]
                        .chars()
                        .take_while(|&c| c != ')')
                        .collect::<String>()
                })
                .unwrap_or_default();
            format!("yes: {rate}")
        }
        None => "no (every visit read)".into(),
    }
}

/// The targets' rows: each case with a target, its p50 in both zones.
fn verdicts(timed: &[Vec<Timed>; 2]) -> Vec<String> {
    timed[0]
        .iter()
        .zip(&timed[1])
        .filter_map(|(utc, berlin)| {
            let target = utc.target_ms?;
            let met = utc.p50 < target && berlin.p50 < target;
            Some(format!(
                "| {} | < {target:.0} ms p50 | {:.0} | {:.0} | {} |",
                utc.name,
                utc.p50,
                berlin.p50,
                if met { "met" } else { "MISSED" }
            ))
        })
        .collect()
}

//! Real processes for the tests that kill them: the release binary
//! (`tickertape serve`) and a database server of the test's own, a pixel
//! load that tallies what was answered, and the checks that every hit
//! answered 200 is counted exactly once on every level. Shared by the crash
//! tests and the fault-schedule explorer.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::TryStreamExt;
use tickertape::domain::Dimension;
use tickertape::domain::DomainName;
use tickertape::localdb::{LocalDb, LocalDbOptions};
use tickertape::storage::breakdowns::{self as sources, MAX_SOURCES_PER_BUCKET};
use tickertape::storage::page_summaries;
use tickertape::storage::sites::{self, NewSite};
use tickertape::storage::{Resolution, Subject};

use crate::helpers::*;

/// The binary under test: the release build `make test` makes
/// (`TICKERTAPE_BIN`), else the test profile's.
pub(crate) fn binary() -> PathBuf {
    std::env::var_os("TICKERTAPE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tickertape")))
}

/// A database server of this test's own, on a fixed port and directory so
/// that it can be killed and started again on the same files.
pub(crate) struct Db {
    dir: PathBuf,
    pub(crate) port: u16,
    server: Option<LocalDb>,
}

impl Db {
    pub(crate) async fn start(dir: &Path) -> Self {
        let mut db = Db {
            dir: dir.to_owned(),
            port: free_port(),
            server: None,
        };
        db.restart().await;
        db
    }

    pub(crate) async fn restart(&mut self) {
        let options = LocalDbOptions {
            cache_size: "128M".into(),
            log_file_max: "16MB".into(),
            port: self.port,
            sync_on_commit: true,
            standalone: false,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match LocalDb::start(&localdb_binary(), &self.dir, &options).await {
                Ok(server) => {
                    self.server = Some(server);
                    return;
                }
                // The killed server's port can take a moment to free.
                Err(e) if Instant::now() < deadline => {
                    eprintln!("database restart: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("restart the database: {e}"),
            }
        }
    }

    pub(crate) fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            server.kill();
        }
    }

    /// Stops the server (SIGTERM, as an operator stops it) and waits.
    pub(crate) fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }

    pub(crate) fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// `tickertape serve` as an operator runs it, on a fixed port and journal.
pub(crate) struct AppProcess {
    pub(crate) child: Option<Child>,
    pub(crate) port: u16,
    env: Vec<(String, String)>,
    /// Where its output goes (inherited when `None`).
    log: Option<PathBuf>,
}

impl AppProcess {
    pub(crate) async fn start(db_uri: &str, database: &str, journal: &Path) -> Self {
        Self::start_with(db_uri, database, journal, &[], None).await
    }

    /// With more settings, and its output (stdout and stderr) in `log`.
    pub(crate) async fn start_with(
        db_uri: &str,
        database: &str,
        journal: &Path,
        extra: &[(&str, &str)],
        log: Option<&Path>,
    ) -> Self {
        let port = free_port();
        let env = vec![
            ("MONGODB_URI".into(), db_uri.to_owned()),
            ("TICKERTAPE_DATABASE".into(), database.to_owned()),
            (
                "TICKERTAPE_JOURNAL_DIR".into(),
                journal.display().to_string(),
            ),
            ("TICKERTAPE_LISTEN".into(), format!("127.0.0.1:{port}")),
            ("TICKERTAPE_PREALLOC_SCHEDULE".into(), "false".into()),
            ("TICKERTAPE_APPLY_WINDOW_MS".into(), "200".into()),
            // Many sources batches during the load, so a kill falls between
            // (or inside) them, not only before the first.
            ("TICKERTAPE_SOURCES_WINDOW_MS".into(), "700".into()),
            // Hours and days on a window of their own, between the two, so
            // kills land inside and between all three streams' batches.
            ("TICKERTAPE_ROLLUPS_WINDOW_MS".into(), "450".into()),
            ("TICKERTAPE_WRITE_TIMEOUT_MS".into(), "2000".into()),
            ("RUST_LOG".into(), "warn".into()),
        ];
        let mut env = env;
        for (k, v) in extra {
            env.retain(|(name, _)| name != k);
            env.push(((*k).to_owned(), (*v).to_owned()));
        }
        let mut app = Self {
            child: None,
            port,
            env,
            log: log.map(Path::to_owned),
        };
        app.restart().await;
        app
    }

    pub(crate) async fn restart(&mut self) {
        let (stdout, stderr) = match &self.log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                (Stdio::from(file.try_clone().unwrap()), Stdio::from(file))
            }
            None => (Stdio::null(), Stdio::inherit()),
        };
        let child = Command::new(binary())
            .arg("serve")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn tickertape serve");
        self.child = Some(child);
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(self.url("/healthz")).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "the app did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }

    /// Sends SIGTERM (an operator's stop: the server finishes what it
    /// answers and the journal closes) and waits for the process to exit.
    pub(crate) async fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: plain syscall on a child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the app did not exit within 60 s of SIGTERM");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sets (or replaces) one of its environment's settings for the next
    /// start.
    pub(crate) fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// One of its environment's settings.
    pub(crate) fn env(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) async fn metric(&self, name: &str) -> Option<f64> {
        let text = reqwest::get(self.url("/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))?
            .parse()
            .ok()
    }

    /// Waits until the app has applied everything it journaled: minutes,
    /// hours and days, sources, and the visit store.
    pub(crate) async fn drained(&self, within: Duration) {
        if let Err(left) = self.drained_within(within).await {
            panic!("the backlog did not drain: {left}");
        }
    }

    /// As `drained`, but says what was left (by stream) when it did not
    /// drain in time.
    pub(crate) async fn drained_within(&self, within: Duration) -> Result<(), String> {
        const STREAMS: [&str; 4] = ["", "sources_", "rollups_", "visits_"];
        let deadline = Instant::now() + within;
        loop {
            let mut left = Vec::new();
            for stream in STREAMS {
                let name = format!("tickertape_journal_{stream}backlog_hits");
                let value = self.metric(&name).await;
                if value != Some(0.0) {
                    left.push(format!("{name} {value:?}"));
                }
            }
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} after {within:?}: {}",
                    self.url(""),
                    left.join(", ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for AppProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Distinct visitors in the load.
pub(crate) const VISITORS: usize = 50;

/// What the load saw, per page.
#[derive(Default, Debug)]
pub(crate) struct Tally {
    /// Answered 200: must be counted exactly once.
    pub(crate) acked: HashMap<String, i64>,
    /// Sent, but the answer was lost (the app died): counted at most once.
    pub(crate) unknown: HashMap<String, i64>,
    /// Custom events, per page, the same two ways: never views.
    pub(crate) events_acked: HashMap<String, i64>,
    pub(crate) events_unknown: HashMap<String, i64>,
    /// Engagements (scroll depth and engaged time for a view), the same
    /// two ways: never views, each crediting at most one view.
    pub(crate) engagements_acked: i64,
    pub(crate) engagements_unknown: i64,
    /// Refused with a status, or never connected: not counted.
    pub(crate) refused: i64,
    pub(crate) non_200_statuses: i64,
    /// The User-Agents that sent the hits (one visitor each: the address
    /// is the same), for the visitor counts.
    pub(crate) visitors: BTreeSet<String>,
}

impl Tally {
    /// A hit answered 200 by a visitor.
    pub(crate) fn acked(&mut self, hit: &Hit, visitor: &str) {
        if hit.engagement {
            self.engagements_acked += 1;
            return;
        }
        let acked = if hit.event {
            &mut self.events_acked
        } else {
            &mut self.acked
        };
        *acked.entry(hit.page.clone()).or_default() += 1;
        self.visitors.insert(visitor.to_owned());
    }

    /// A hit sent whose answer was lost: counted at most once.
    pub(crate) fn unknown(&mut self, hit: &Hit, visitor: &str) {
        if hit.engagement {
            self.engagements_unknown += 1;
            return;
        }
        let unknown = if hit.event {
            &mut self.events_unknown
        } else {
            &mut self.unknown
        };
        *unknown.entry(hit.page.clone()).or_default() += 1;
        self.visitors.insert(visitor.to_owned());
    }

    /// A hit refused: with a status (`Some`), or never connected.
    pub(crate) fn refused(&mut self, status: Option<u16>) {
        self.refused += 1;
        if status.is_some() {
            self.non_200_statuses += 1;
        }
    }
}

/// One pixel hit of the load: its page (as the buckets name it), its query
/// string, and whether it is a custom event rather than a view.
pub(crate) struct Hit {
    pub(crate) page: String,
    pub(crate) query: String,
    pub(crate) event: bool,
    /// An engagement with the view its visitor made before (`sd`, `et`).
    pub(crate) engagement: bool,
}

/// The load's `i`th hit on the site `site`, over `pages` pages.
pub(crate) fn hit(site: &str, i: usize, pages: usize) -> Hit {
    let k = (i * 7919) % pages;
    let path = format!("/p/{k}");
    let page = format!("crash.test{path}");
    // Every hit has a source (60 referring hosts, more than
    // a bucket's cap), so sources are checked like views.
    let referrer = format!("https%3A%2F%2Fs{}.example%2F", i % 60);
    // Every view has a medium (3) and a campaign (70, more
    // than the cap), so the campaigns are checked like the
    // sources; every eleventh hit is an event instead.
    let event = i % 11 == 0;
    // Every thirteenth other hit is an engagement with the page of its
    // visitor's hit before (a view, unless that was an event).
    if !event && i % 13 == 0 && i >= VISITORS {
        let k = ((i - VISITORS) * 7919) % pages;
        return Hit {
            page: format!("crash.test/p/{k}"),
            query: format!(
                "site={site}&page=/p/{k}&sd={}&et={}",
                (i * 37) % 101,
                (i * 997) % 5_000
            ),
            event: false,
            engagement: true,
        };
    }
    // Every hit carries a custom property its stored step can be checked
    // against ([`step_props`]), and every event the same revenue
    // ([`EVENT_REVENUE`]).
    let query = if event {
        format!(
            "site={site}&page={path}&e=Signup%20{n}&props=%7B%22plan%22%3A%22p{n}%22%7D&revenue=%7B%22amount%22%3A%221.25%22%2C%22currency%22%3A%22EUR%22%7D",
            n = i % 3
        )
    } else {
        format!(
            "site={site}&page={path}%3Futm_medium%3Dm{}%26utm_campaign%3Dc{}&ref={referrer}&w={}&props=%7B%22k7%22%3A%22{}%22%7D",
            i % 3,
            i % 70,
            [390, 800, 1440][i % 3],
            k % 7
        )
    };
    Hit {
        page,
        query,
        event,
        engagement: false,
    }
}

/// The revenue every event of the load carries: 1.25 EUR, in
/// ten-thousandths.
const EVENT_REVENUE: (&str, i64) = ("EUR", 12_500);

/// The custom properties a stored step of the load must carry: what
/// [`hit`] sent with it, found from its page or its event's name.
fn step_props(step: &tickertape::storage::visit_log::Step) -> Vec<(String, String)> {
    match &step.e {
        Some(name) => vec![(
            "plan".to_owned(),
            format!("p{}", name.trim_start_matches("Signup ")),
        )],
        None => {
            let k: usize = step.p.trim_start_matches("/p/").parse().unwrap();
            vec![("k7".to_owned(), (k % 7).to_string())]
        }
    }
}

/// The User-Agent of the load's `i`th visitor: fifty visitors, told apart
/// by their User-Agent (the address is the same); their hits make visits.
pub(crate) fn visitor(i: usize) -> String {
    format!("{BROWSER_UA} visitor/{}", i % VISITORS)
}

/// Sends pixel hits from `workers` tasks until `stop`, at most `rate` per
/// second over all of them (0: as fast as they go).
pub(crate) fn load(
    url: String,
    site: String,
    pages: usize,
    workers: usize,
    rate: u64,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Tally> {
    tokio::spawn(async move {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let http = reqwest::Client::builder()
            .user_agent(BROWSER_UA)
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        let mut tasks = Vec::new();
        for w in 0..workers {
            let (http, url, site, stop, tally) = (
                http.clone(),
                url.clone(),
                site.clone(),
                stop.clone(),
                tally.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let pause =
                    (rate > 0).then(|| Duration::from_secs_f64(workers as f64 / rate as f64));
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let hit = hit(&site, i, pages);
                    let visitor = visitor(i);
                    i += workers;
                    let sent = http
                        .get(format!("{url}/pixel.gif?{}", hit.query))
                        .header("user-agent", &visitor)
                        .send()
                        .await;
                    {
                        let mut t = tally.lock().unwrap();
                        match sent {
                            Ok(r) if r.status() == 200 => t.acked(&hit, &visitor),
                            Ok(r) => t.refused(Some(r.status().as_u16())),
                            Err(e) if e.is_connect() => t.refused(None),
                            Err(_) => t.unknown(&hit, &visitor),
                        }
                    }
                    match pause {
                        Some(p) => tokio::time::sleep(p).await,
                        // Connection refused while the app restarts: do not spin.
                        None => tokio::task::yield_now().await,
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        Arc::try_unwrap(tally).unwrap().into_inner().unwrap()
    })
}

/// Every visit `database` holds for `site`, as the reports read them (its
/// parts merged per visit).
pub(crate) async fn stored_visits(
    uri: &str,
    database: &str,
    site: &str,
) -> Vec<tickertape::storage::visit_log::StoredVisit> {
    use tickertape::storage::visit_log::{self, VisitQuery};
    let mut settings = crate::helpers::test_settings();
    settings.database.name = database.to_owned();
    let store = crate::helpers::connect(uri, &settings).await;
    let ever = VisitQuery::new(
        site,
        chrono::DateTime::UNIX_EPOCH,
        chrono::DateTime::<chrono::Utc>::MAX_UTC,
    );
    visit_log::visits_on(&store, &ever, false).await.unwrap()
}

/// Every document of a collection, on a connection of its own (the app
/// under test has been killed and restarted in between).
pub(crate) async fn all<T>(uri: &str, database: &str, collection: &str) -> Vec<T>
where
    T: serde::de::DeserializeOwned + Send + Sync,
{
    let client = mongodb::Client::with_uri_str(uri).await.unwrap();
    client
        .database(database)
        .collection(collection)
        .find(bson::doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

pub(crate) async fn totals(uri: &str, database: &str, g: Resolution) -> HashMap<String, i64> {
    let buckets: Vec<tickertape::storage::Bucket> = all(uri, database, g.collection()).await;
    let mut out = HashMap::new();
    for b in buckets {
        *out.entry(b.page).or_default() += b.total_views;
    }
    out
}

/// Per bucket key (page or site), what its hour or day breakdown buckets
/// count under one dimension (named or `other`), and the most names one
/// holds.
pub(crate) async fn dimension_totals(
    uri: &str,
    database: &str,
    subject: Subject,
    g: Resolution,
    dimension: Dimension,
) -> (HashMap<String, i64>, usize) {
    let buckets: Vec<bson::Document> = all(uri, database, sources::collection(subject, g)).await;
    let mut out = HashMap::new();
    let mut most_names = 0;
    for b in buckets {
        let names = b
            .get_document(dimension.field())
            .cloned()
            .unwrap_or_default();
        most_names = most_names.max(names.len());
        let counted: i64 = names.iter().map(|(_, v)| v.as_i64().unwrap()).sum::<i64>()
            + b.get_i64(dimension.other_field()).unwrap_or(0);
        if counted > 0 {
            *out.entry(b.get_str(subject.key_field()).unwrap().to_owned())
                .or_default() += counted;
        }
    }
    (out, most_names)
}

/// Every acknowledged event is in the event breakdown once (an answer lost
/// at most once), page and site, hour and day; none is a view.
pub(crate) async fn check_events(uri: &str, database: &str, tally: &Tally) {
    for g in [Resolution::Hour, Resolution::Day] {
        let (by_page, most) =
            dimension_totals(uri, database, Subject::Page, g, Dimension::Event).await;
        assert!(most <= MAX_SOURCES_PER_BUCKET);
        let mut pages: Vec<&String> = by_page.keys().chain(tally.events_acked.keys()).collect();
        pages.sort();
        pages.dedup();
        for page in pages {
            let acked = tally.events_acked.get(page).copied().unwrap_or(0);
            let unknown = tally.events_unknown.get(page).copied().unwrap_or(0);
            let got = by_page.get(page).copied().unwrap_or(0);
            assert!(
                acked <= got && got <= acked + unknown,
                "{g:?} {page}: {got} events stored, answered 200 {acked}, answers lost {unknown}"
            );
        }
        let (by_site, _) =
            dimension_totals(uri, database, Subject::Site, g, Dimension::Event).await;
        let events = by_site.get("crash.test").copied().unwrap_or(0);
        assert_eq!(
            events,
            by_page.values().sum::<i64>(),
            "{g:?}: the site's events are its pages'"
        );
        // Each event's revenue is counted with it, once: never lost with
        // a kill, never doubled by a replay.
        let (mut amount, mut carried) = (0_i64, 0_i64);
        let collection = tickertape::storage::breakdowns::collection(Subject::Site, g);
        for d in all::<bson::Document>(uri, database, collection).await {
            let Ok(revenue) = d.get_document("revenue") else {
                continue;
            };
            for (event, by) in revenue {
                for (currency, f) in by.as_document().unwrap() {
                    assert_eq!(currency, EVENT_REVENUE.0, "{g:?} {event}");
                    let f = f.as_document().unwrap();
                    amount += f.get_i64("h").unwrap() * 1_000_000_000 + f.get_i64("l").unwrap();
                    carried += f.get_i64("n").unwrap();
                }
            }
        }
        assert_eq!(carried, events, "{g:?}: every event's revenue, once");
        assert_eq!(amount, events * EVENT_REVENUE.1, "{g:?}: the amounts");
    }
}

/// Every acknowledged hit is in every level once; a hit whose answer was
/// lost is in every level at most once; the three levels agree; and every
/// hit's source is counted with it, page and site, under the cap.
pub(crate) async fn check_exactly_once(uri: &str, database: &str, tally: &Tally) {
    let levels = [
        totals(uri, database, Resolution::Minute).await,
        totals(uri, database, Resolution::Hour).await,
        totals(uri, database, Resolution::Day).await,
    ];
    assert_eq!(
        levels[0], levels[1],
        "minute and hour totals agree per page"
    );
    assert_eq!(levels[0], levels[2], "minute and day totals agree per page");
    let stored = &levels[0];
    let mut pages: Vec<&String> = stored.keys().chain(tally.acked.keys()).collect();
    pages.sort();
    pages.dedup();
    for page in pages {
        let acked = tally.acked.get(page).copied().unwrap_or(0);
        let unknown = tally.unknown.get(page).copied().unwrap_or(0);
        let got = stored.get(page).copied().unwrap_or(0);
        assert!(
            acked <= got && got <= acked + unknown,
            "{page}: stored {got}, answered 200 {acked}, answers lost {unknown}"
        );
    }
    let site_views: i64 = stored.values().sum();
    // The site totals, every level, equal the pages' sum (written by the
    // minutes and the rollups streams apart).
    for g in Resolution::ALL {
        let site: Vec<bson::Document> = all(uri, database, Subject::Site.collection(g)).await;
        let total: i64 = site
            .iter()
            .filter(|d| d.get_str("site") == Ok("crash.test"))
            .map(|d| d.get_i64("totalViews").unwrap())
            .sum();
        assert_eq!(total, site_views, "{g:?}: site totals equal the pages");
    }
    check_visits(uri, database, tally).await;
    check_visit_store(uri, database, tally, site_views).await;
    check_summaries(uri, database, stored).await;
    // Every view carries every dimension but the event's: each one's
    // counts equal the views, once, page and site, under the cap.
    for dimension in Dimension::ALL
        .into_iter()
        .filter(|d| *d != Dimension::Event)
    {
        for g in [Resolution::Hour, Resolution::Day] {
            let (by_page, most) =
                dimension_totals(uri, database, Subject::Page, g, dimension).await;
            assert_eq!(&by_page, stored, "{g:?} {dimension}: every view, once");
            assert!(most <= MAX_SOURCES_PER_BUCKET, "{g:?}: {most} names");
            let (by_site, most) =
                dimension_totals(uri, database, Subject::Site, g, dimension).await;
            assert_eq!(
                by_site.get("crash.test").copied(),
                Some(site_views),
                "{g:?} {dimension}"
            );
            assert!(most <= MAX_SOURCES_PER_BUCKET, "{g:?}: {most} names");
        }
    }
    check_events(uri, database, tally).await;
    check_engagements(uri, database, tally, stored).await;
}

/// Every engagement's counters were applied with it, once: hours equal
/// days page by page, no page has more engaged views than views nor a
/// mean depth past 100 %, and no more views were engaged than
/// engagements were sent.
pub(crate) async fn check_engagements(
    uri: &str,
    database: &str,
    tally: &Tally,
    views: &HashMap<String, i64>,
) {
    let mut by_level = Vec::new();
    for g in [Resolution::Hour, Resolution::Day] {
        let docs: Vec<bson::Document> = all(uri, database, Subject::Page.collection(g)).await;
        let mut by_page: HashMap<String, [i64; 3]> = HashMap::new();
        for d in docs {
            let page = d.get_str("page").unwrap().to_owned();
            for (i, name) in ["engagedViews", "scrollSum", "engagedMs"]
                .iter()
                .enumerate()
            {
                if let Ok(slots) = d.get_document(name) {
                    by_page.entry(page.clone()).or_default()[i] +=
                        slots.iter().map(|(_, v)| v.as_i64().unwrap()).sum::<i64>();
                }
            }
        }
        for (page, [engaged, depth, ms]) in &by_page {
            let viewed = views.get(page).copied().unwrap_or(0);
            assert!(
                (0..=viewed).contains(engaged),
                "{g:?} {page}: {engaged} engaged of {viewed} views"
            );
            assert!(
                (0..=100 * engaged).contains(depth),
                "{g:?} {page}: depth {depth}"
            );
            assert!(*ms >= 0, "{g:?} {page}");
        }
        let engaged: i64 = by_page.values().map(|c| c[0]).sum();
        assert!(
            engaged <= tally.engagements_acked + tally.engagements_unknown,
            "{g:?}: {engaged} engaged views of {} engagements",
            tally.engagements_acked
        );
        by_level.push(by_page);
    }
    assert_eq!(
        by_level[0], by_level[1],
        "hours and days agree, page by page"
    );
    assert!(
        tally.engagements_acked == 0 || by_level[1].values().any(|c| c[0] > 0),
        "engagements were counted"
    );
}

/// Per key (page or site), the visit counters a level's buckets hold:
/// visits, nonBounces, duration, exits; and per UTC day, the visitors of
/// the site's sketches.
pub(crate) async fn visit_totals(
    uri: &str,
    database: &str,
    subject: Subject,
    g: Resolution,
) -> (
    HashMap<String, [i64; 4]>,
    HashMap<bson::DateTime, tickertape::domain::sketch::Sketch>,
) {
    let docs: Vec<bson::Document> = all(uri, database, subject.collection(g)).await;
    let mut counters: HashMap<String, [i64; 4]> = HashMap::new();
    let mut sketches: HashMap<bson::DateTime, tickertape::domain::sketch::Sketch> = HashMap::new();
    for d in docs {
        let key = d.get_str(subject.key_field()).unwrap().to_owned();
        let entry = counters.entry(key).or_default();
        for (i, name) in ["visits", "nonBounces", "duration", "exits"]
            .iter()
            .enumerate()
        {
            if let Ok(slots) = d.get_document(name) {
                entry[i] += slots.iter().map(|(_, v)| v.as_i64().unwrap()).sum::<i64>();
            }
        }
        if let Ok(stored) = d.get_document("visitors") {
            let day = Resolution::Day.floor(d.get_datetime("timestamp").unwrap().to_chrono());
            sketches
                .entry(bson::DateTime::from_chrono(day))
                .or_default()
                .merge_stored(stored)
                .unwrap();
        }
    }
    (counters, sketches)
}

/// Every hit's visit counters were applied with it, once: the pages'
/// entries equal the site's visits on every level, hours equal days, and
/// the visitors are the load's.
///
/// Each journaled hit carries its own counters (a start: +1 visit on its
/// page and site, +1 exit on its page; a later view: its duration and the
/// undone bounce on the entry page and site, +1 exit on its page and −1 on
/// the previous one), applied in the same transaction as its views, so
/// these sums hold whatever was killed. What a crash may change is a
/// visit's shape: a hit whose answer was lost in the kill may be missing
/// while a later hit of its visit, on another lane, is not; so bounces are
/// bounded by the lost answers rather than exact.
pub(crate) async fn check_visits(uri: &str, database: &str, tally: &Tally) {
    let mut by_level = Vec::new();
    for g in [Resolution::Hour, Resolution::Day] {
        let (pages, _) = visit_totals(uri, database, Subject::Page, g).await;
        let (site, visitors) = visit_totals(uri, database, Subject::Site, g).await;
        let site = site.get("crash.test").copied().unwrap_or_default();
        let mut summed = [0i64; 4];
        for counters in pages.values() {
            for i in 0..4 {
                summed[i] += counters[i];
            }
        }
        assert!(site[0] > 0, "{g:?}: visits were counted");
        assert_eq!(summed[0], site[0], "{g:?}: entries equal visits");
        assert_eq!(summed[1], site[1], "{g:?}: non-bounces, pages and site");
        assert_eq!(summed[2], site[2], "{g:?}: durations, pages and site");
        assert_eq!(summed[3], site[0], "{g:?}: every visit exits once");
        let lost = tally.unknown.values().sum::<i64>();
        assert!(
            site[1] <= site[0] + lost,
            "{g:?}: non-bounces {} of {} visits",
            site[1],
            site[0]
        );
        if g == Resolution::Day {
            // The load's visitors (fifty, and the one client of the
            // explorer), once per UTC day it ran on, give or take the
            // sketch's error (two of fifty ids share a register about one
            // time in thirteen, which reads as 49).
            let days = visitors.len() as u64;
            let counted: u64 = visitors.values().map(|s| s.estimate_count()).sum();
            let sent = tally.visitors.len() as u64;
            let (low, high) = (sent.saturating_sub(3), sent * days + 3);
            assert!(
                (low..=high).contains(&counted),
                "{counted} visitors over {days} days"
            );
        }
        by_level.push(pages);
    }
    assert_eq!(
        by_level[0], by_level[1],
        "hours and days agree, page by page"
    );
}

/// The visit store took every hit once: its visits' views add up to the
/// buckets' (which hold every answered view once), no step of a visit is
/// there twice, each page's view steps are its answered views (and at most
/// the lost answers more), and its event steps at most its events (an
/// event outside any open visit, as after a restart, has no step); and
/// every step carries the custom property its hit sent; each day's
/// counter (`visit_days`) holds exactly that day's steps and
/// opened visits.
pub(crate) async fn check_visit_store(uri: &str, database: &str, tally: &Tally, site_views: i64) {
    use tickertape::storage::visit_log::{StoredVisit, MAX_STEPS};
    let visits = stored_visits(uri, database, "crash.test").await;
    assert!(!visits.is_empty(), "visits were stored");
    let views: i64 = visits.iter().map(|v| v.views).sum();
    assert_eq!(views, site_views, "the visits' views are the buckets'");
    let mut view_steps: HashMap<String, i64> = HashMap::new();
    let mut event_steps: HashMap<String, i64> = HashMap::new();
    let mut capped = false;
    for v in &visits {
        assert_eq!(v.site, "crash.test");
        let mut numbers: Vec<i32> = v.steps.iter().map(|s| s.n).collect();
        numbers.sort_unstable();
        let before = numbers.len();
        numbers.dedup();
        assert_eq!(numbers.len(), before, "visit {}: a step twice", v.id);
        let kept_views = v.steps.iter().filter(|s| s.is_view()).count() as i64;
        if v.steps.len() as u32 >= MAX_STEPS {
            capped = true;
        } else {
            assert_eq!(kept_views, v.views, "visit {}: a step per view", v.id);
        }
        for step in &v.steps {
            // Its properties came with it, once, through every kill.
            assert_eq!(step.pr, step_props(step), "visit {}: step {}", v.id, step.n);
            let revenue = step.rv.as_ref().map(|r| (r.c.as_str(), r.a));
            let want = (!step.is_view()).then_some(EVENT_REVENUE);
            assert_eq!(revenue, want, "visit {}: step {}'s revenue", v.id, step.n);
            let page = format!("crash.test{}", step.p);
            let counts = if step.is_view() {
                &mut view_steps
            } else {
                &mut event_steps
            };
            *counts.entry(page).or_default() += 1;
        }
    }
    let mut pages: Vec<&String> = view_steps.keys().chain(tally.acked.keys()).collect();
    pages.sort();
    pages.dedup();
    for page in pages {
        let acked = tally.acked.get(page).copied().unwrap_or(0);
        let unknown = tally.unknown.get(page).copied().unwrap_or(0);
        let got = view_steps.get(page).copied().unwrap_or(0);
        assert!(
            (capped || acked <= got) && got <= acked + unknown,
            "{page}: {got} view steps, answered 200 {acked}, answers lost {unknown}"
        );
    }
    for (page, got) in &event_steps {
        let most = tally.events_acked.get(page).copied().unwrap_or(0)
            + tally.events_unknown.get(page).copied().unwrap_or(0);
        assert!(*got <= most, "{page}: {got} event steps of at most {most}");
    }
    let events: i64 = event_steps.values().sum();
    assert!(events > 0, "events inside visits are steps");
    // The day counters commit with the visits: per day, one hit per step
    // (more past the kept steps) and one opened visit per entry.
    use tickertape::storage::visit_days;
    let counters: Vec<bson::Document> = all(uri, database, visit_days::COLLECTION).await;
    assert!(!counters.is_empty(), "day counters were stored");
    for c in &counters {
        let day = visit_days::day_of(c.get_datetime("day").unwrap().to_chrono());
        let count = visit_days::DayCount::from_document(c);
        let of_day: Vec<&StoredVisit> = visits
            .iter()
            .filter(|v| visit_days::day_of(v.start()) == day)
            .collect();
        let steps: i64 = of_day.iter().map(|v| v.steps.len() as i64).sum();
        let entries = of_day.iter().filter(|v| v.entry.is_some()).count() as i64;
        assert!(
            count.hits == steps || (capped && count.hits > steps),
            "day {day}: counter {} hits, {steps} steps stored",
            count.hits
        );
        assert_eq!(count.visits, entries, "day {day}: visits opened");
    }
}

/// Page summaries of days and of hours, made while the load
/// runs and across every kill, as reports make them: each one kept that
/// is still in force (its total, what was taken back and its engagement
/// sums are still the site's) must hold exactly the page buckets' views,
/// entries, exits and time on page and scroll depth counters, and
/// summaries made after the drain give every page's counts.
pub(crate) async fn check_summaries(uri: &str, database: &str, stored: &HashMap<String, i64>) {
    use page_summaries::{Grain, PageCounts};
    let viewed: HashMap<String, i64> = stored
        .iter()
        .filter(|(_, v)| **v != 0)
        .map(|(p, v)| (p.clone(), *v))
        .collect();
    let sum = |d: &bson::Document, name: &str| -> i64 {
        d.get_document(name)
            .map(|slots| {
                slots
                    .iter()
                    .map(|(_, v)| v.as_i64().or(v.as_i32().map(i64::from)).unwrap())
                    .sum()
            })
            .unwrap_or(0)
    };
    // A page bucket's figures as a summary holds them (visitors aside:
    // an estimate, checked with the visits).
    let counts_of = |d: &bson::Document| PageCounts {
        views: d.get_i64("totalViews").unwrap(),
        entries: sum(d, "visits"),
        exits: sum(d, "exits"),
        visitors: 0,
        timed_views: sum(d, "timedViews"),
        timed_secs: sum(d, "timedSeconds"),
        engaged_views: sum(d, "engagedViews"),
        scroll_sum: sum(d, "scrollSum"),
        engaged_ms: sum(d, "engagedMs"),
    };
    let mut checked = 0;
    let mut kept = 0;
    for (grain, name) in [(Grain::Day, "day"), (Grain::Hour, "hour")] {
        let buckets: Vec<bson::Document> = all(uri, database, &format!("views_{name}")).await;
        let mut by_unit: HashMap<(i64, String), PageCounts> = HashMap::new();
        let mut by_page: HashMap<String, PageCounts> = HashMap::new();
        for b in &buckets {
            let unit = grain.number(b.get_datetime("timestamp").unwrap().to_chrono());
            let page = b.get_str("page").unwrap().to_owned();
            let counts = counts_of(b);
            by_unit
                .entry((unit, page.clone()))
                .or_default()
                .add(&counts);
            by_page.entry(page).or_default().add(&counts);
        }
        let site_units: Vec<bson::Document> =
            all(uri, database, &format!("site_views_{name}")).await;
        // Per unit: views, taken back, engagement sums (the parts added).
        let mut site_unit: HashMap<i64, (i64, i64, [i64; 3])> = HashMap::new();
        for d in &site_units {
            let unit = grain.number(d.get_datetime("timestamp").unwrap().to_chrono());
            let u = site_unit.entry(unit).or_default();
            u.0 += d.get_i64("totalViews").unwrap();
            u.1 += d.get_i64("takenBack").unwrap_or(0);
            for (n, field) in
                u.2.iter_mut()
                    .zip(["engagedViews", "scrollSum", "engagedMs"])
            {
                *n += sum(d, field);
            }
        }
        // The site's engagement sums are its pages'.
        let mut pages_engaged: HashMap<i64, [i64; 3]> = HashMap::new();
        for ((unit, _), f) in &by_unit {
            let e = pages_engaged.entry(*unit).or_default();
            for (n, add) in e
                .iter_mut()
                .zip([f.engaged_views, f.scroll_sum, f.engaged_ms])
            {
                *n += add;
            }
        }
        for (unit, (_, _, engaged)) in &site_unit {
            assert_eq!(
                pages_engaged.get(unit).copied().unwrap_or_default(),
                *engaged,
                "{name} {unit}: the site's engagement sums are its pages'"
            );
        }
        let summaries: Vec<bson::Document> = all(uri, database, grain.collection()).await;
        kept += summaries.len();
        for d in &summaries {
            let (level, index) = (d.get_i32("level").unwrap(), d.get_i64("index").unwrap());
            let engaged: Vec<i64> = d
                .get_array("engaged")
                .unwrap()
                .iter()
                .map(|n| n.as_i64().unwrap())
                .collect();
            let in_force = site_unit.get(&index).is_some_and(|u| {
                u.0 == d.get_i64("total").unwrap()
                    && u.1 == d.get_i64("takenBack").unwrap()
                    && u.2.as_slice() == engaged.as_slice()
            });
            if level != 0 || !in_force {
                continue;
            }
            let data = d.get_binary_generic("data").unwrap();
            for (page, mut f) in page_summaries::decode(data).unwrap() {
                f.visitors = 0;
                assert_eq!(
                    Some(&f),
                    by_unit.get(&(index, page.clone())),
                    "{page}: a kept summary of {name} {index} holds the buckets' figures"
                );
            }
            checked += 1;
        }
        let store = store_of(uri, database).await;
        let site = crash_site(&store).await;
        let times = buckets
            .iter()
            .map(|b| b.get_datetime("timestamp").unwrap().to_chrono());
        let (first, last) = (times.clone().min().unwrap(), times.max().unwrap());
        let made = tickertape::reports::page_totals::summarise(
            &store,
            &site,
            grain,
            (first, last + chrono::TimeDelta::seconds(grain.seconds())),
        )
        .await
        .unwrap();
        let views: HashMap<String, i64> = made.iter().map(|(p, f)| (p.clone(), f.views)).collect();
        assert_eq!(views, viewed, "{name} summaries made after the drain");
        for (page, mut f) in made {
            f.visitors = 0;
            assert_eq!(
                Some(&f),
                by_page.get(&page),
                "{page}: {name} summaries made after the drain hold its buckets' figures"
            );
        }
    }
    eprintln!("page summaries of days and hours: {kept} stored during the run, {checked} still in force and checked");
}

pub(crate) async fn store_of(uri: &str, database: &str) -> tickertape::storage::Store {
    let mut settings = test_settings();
    settings.database.name = database.to_owned();
    connect(uri, &settings).await
}

pub(crate) async fn crash_site(store: &tickertape::storage::Store) -> sites::Site {
    sites::list(store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.domain.as_str() == "crash.test")
        .unwrap()
}

/// Makes today's page summaries again and again while the load runs, as
/// dashboards would, through every kill (errors while the database is
/// away are expected and skipped).
pub(crate) struct Summariser(tokio::task::JoinHandle<()>);

impl Summariser {
    pub(crate) async fn start(uri: &str, database: &str) -> Self {
        let store = store_of(uri, database).await;
        Summariser(tokio::spawn(async move {
            loop {
                let today = Resolution::Day.floor(Utc::now());
                let made = async {
                    let site = sites::list(&store)
                        .await?
                        .into_iter()
                        .find(|s| s.domain.as_str() == "crash.test");
                    if let Some(site) = site {
                        let span = (
                            today - chrono::TimeDelta::days(1),
                            today + chrono::TimeDelta::days(1),
                        );
                        tickertape::reports::page_totals::summarise(
                            &store,
                            &site,
                            page_summaries::Grain::Day,
                            span,
                        )
                        .await?;
                        let hour = Resolution::Hour.floor(Utc::now());
                        let hours = (
                            hour - chrono::TimeDelta::hours(2),
                            hour + chrono::TimeDelta::hours(1),
                        );
                        tickertape::reports::page_totals::summarise(
                            &store,
                            &site,
                            page_summaries::Grain::Hour,
                            hours,
                        )
                        .await?;
                    }
                    Ok::<_, mongodb::error::Error>(())
                };
                let _ = made.await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }))
    }
}

impl Drop for Summariser {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The site every load sends to, `crash.test`, with `owners`, in a
/// database of its own on `uri` whose schema is set up: its id.
pub(crate) async fn create_site(uri: &str, database: &str, owners: Vec<uuid::Uuid>) -> String {
    let store = store_of(uri, database).await;
    tickertape::indexes::ensure(&store).await.unwrap();
    let site = sites::insert(
        &store,
        NewSite {
            domain: DomainName::parse("crash.test").unwrap(),
            aliases: vec![],
            name: None,
            owners,
            time_zone: tickertape::domain::TimeZone::UTC,
        },
        Utc::now(),
    )
    .await
    .unwrap();
    site.id.to_string()
}

//! Test harness: one database server per test binary, one database and one
//! app per test.

use chrono::{DateTime, TimeZone, Utc};
use futures::TryStreamExt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use tickertape::app::Application;
use tickertape::clock::ManualClock;
use tickertape::domain::DomainName;
use tickertape::ingest::IngestState;
use tickertape::journal::AckMode;
use tickertape::localdb::{LocalDb, LocalDbOptions};
use tickertape::settings::Settings;
use tickertape::storage::sites::{self, NewSite, Site};
use tickertape::storage::{Bucket, Resolution, Store};

/// A desktop browser's User-Agent, so test hits are not taken for bots.
pub const BROWSER_UA: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn localdb_binary() -> PathBuf {
    std::env::var_os("TICKERTAPE_LOCALDB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools/bin/secantusd-rs"))
}

/// The server every test of this binary shares: `MONGODB_URI` when set,
/// else a `secantusd-rs` started on a free port with its own data directory
/// under `target/test-db/<pid>`. It stops when this process exits (the
/// local database is spawned with a parent-death signal).
pub fn database_uri() -> &'static str {
    static URI: OnceLock<String> = OnceLock::new();
    URI.get_or_init(|| {
        if let Ok(uri) = std::env::var("MONGODB_URI") {
            return uri;
        }
        let root = repo_root().join("target/test-db");
        remove_stale_data_dirs(&root);
        let dir = root.join(std::process::id().to_string());
        let binary = localdb_binary();
        assert!(
            binary.is_file(),
            "{} is missing: run `make setup` (or set MONGODB_URI)",
            binary.display()
        );
        let db = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            let options = LocalDbOptions {
                cache_size: "256M".into(),
                log_file_max: "16MB".into(),
                ..LocalDbOptions::default()
            };
            rt.block_on(LocalDb::start(&binary, &dir, &options))
        })
        .join()
        .unwrap()
        .expect("start the local database");
        let uri = db.uri().to_owned();
        // Lives as long as the process; the server dies with it.
        std::mem::forget(db);
        uri
    })
}

fn remove_stale_data_dirs(root: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let alive = name
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A port that was free a moment ago, for servers that must keep their
/// port across a restart.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// 2026-11-22 10:01:07 UTC: the clock every test starts at.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap()
}

pub fn test_settings() -> Settings {
    let mut settings = Settings::defaults();
    settings.listen = "127.0.0.1:0".parse().unwrap();
    settings.database.name = format!("test_{}", uuid::Uuid::new_v4().simple());
    settings.ingest.queue_capacity = 10_000;
    // Tests read the buckets right after the hits: apply at once.
    settings.ingest.apply_window_ms = 10;
    settings.ingest.sources_window_ms = 10;
    settings.ingest.rollups_window_ms = 10;
    settings.ingest.visits_window_ms = 10;
    settings.prealloc.prealloc_schedule = false;
    // Buckets kept for ever: tests write at a pinned date, and the server's
    // TTL monitor expires by the wall clock, so a retention would delete
    // them once that date is old enough. Retention tests set their own.
    settings
        .retention
        .set(tickertape::domain::Retention::parse(0, 0, 0).unwrap());
    // Against a real replica set (`MONGODB_URI`), reports read the primary:
    // the tests check figures right after writing them, and a secondary
    // may not have them yet. The read-preference tests set their own.
    if std::env::var_os("MONGODB_URI").is_some() {
        settings.database.read_preference = "primary".into();
    }
    // Test sites have a handful of views: any view makes a page active
    // (the default, 60 an hour, is for real traffic).
    settings.prealloc.prealloc_threshold = 1;
    settings
}

pub async fn connect(uri: &str, settings: &Settings) -> Store {
    let options = settings
        .database
        .store_options()
        .expect("the test settings are valid");
    Store::connect(&options, uri)
        .await
        .expect("connect to the test database")
}

pub struct TestApp {
    pub address: String,
    pub store: Store,
    pub clock: Arc<ManualClock>,
    pub ingest: IngestState,
    pub http: reqwest::Client,
    pub journal: Arc<tickertape::journal::Journal>,
    /// The journal's directory, removed with the app.
    _journal_dir: Option<tempfile::TempDir>,
    handle: actix_web::dev::ServerHandle,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    db_name: String,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(configure: impl FnOnce(&mut Settings)) -> TestApp {
    let mut settings = test_settings();
    configure(&mut settings);
    spawn_app_on(database_uri(), settings).await
}

/// An app whose store connects through `app_uri` (e.g. a fault-injecting
/// proxy), with the schema set up over a direct connection.
pub async fn spawn_app_on(app_uri: &str, mut settings: Settings) -> TestApp {
    // Each app its own journal, unless the test chose one.
    let journal_dir = match settings.ingest.journal_dir {
        Some(_) => None,
        None => {
            let dir = tempfile::tempdir().expect("journal dir");
            settings.ingest.journal_dir = Some(dir.path().to_owned());
            Some(dir)
        }
    };
    // Logs only when asked for (RUST_LOG=...), to keep test output quiet.
    if std::env::var_os("RUST_LOG").is_some() {
        tickertape::telemetry::init();
    }
    let direct = connect(database_uri(), &settings).await;
    tickertape::indexes::ensure(&direct).await.expect("schema");
    let store = connect(app_uri, &settings).await;
    let clock = ManualClock::new(t0());
    let app = Application::build(&settings, store, clock.clone())
        .await
        .expect("build the app");
    let address = format!("http://127.0.0.1:{}", app.port());
    let handle = app.handle();
    let ingest = app.ingest().clone();
    let journal = app.journal().clone();
    let task = tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        store: direct,
        clock,
        ingest,
        http: reqwest::Client::builder()
            .user_agent(BROWSER_UA)
            .pool_max_idle_per_host(256)
            .pool_idle_timeout(IDLE_REUSE)
            .build()
            .unwrap(),
        journal,
        _journal_dir: journal_dir,
        handle,
        task: Some(task),
        db_name: settings.database.name,
    }
}

impl TestApp {
    pub async fn add_site(&self, domain: &str, aliases: &[&str]) -> Site {
        self.add_site_in(domain, aliases, "UTC").await
    }

    /// Makes `owners` the site's owners (as the admin page does; name and
    /// aliases unchanged) and reloads the directory.
    pub async fn set_owners(&self, site: &Site, owners: &[uuid::Uuid]) {
        let changes = sites::SiteChanges {
            name: String::new(),
            aliases: vec![],
            owners: owners.to_vec(),
        };
        sites::update(&self.store, site, changes)
            .await
            .expect("update owners");
        self.ingest
            .directory
            .reload(&self.store)
            .await
            .expect("reload sites");
    }

    /// A site whose reports are in the IANA zone `zone`.
    pub async fn add_site_in(&self, domain: &str, aliases: &[&str], zone: &str) -> Site {
        let new = NewSite {
            time_zone: tickertape::domain::TimeZone::parse(zone).unwrap(),
            domain: DomainName::parse(domain).unwrap(),
            aliases: aliases
                .iter()
                .map(|a| DomainName::parse(a).unwrap())
                .collect(),
            name: None,
            owners: vec![],
        };
        let site = sites::insert(&self.store, new, Utc::now())
            .await
            .expect("insert site");
        self.ingest
            .directory
            .reload(&self.store)
            .await
            .expect("reload sites");
        site
    }

    /// `GET /pixel.gif?<query>` as a desktop browser.
    pub async fn pixel(&self, query: &str) -> reqwest::Response {
        self.pixel_with(query, &[]).await
    }

    pub async fn pixel_with(&self, query: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self.http.get(format!("{}/pixel.gif?{query}", self.address));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("pixel request")
    }

    /// Waits until every journaled hit is in the database (the write-behind
    /// applies within a few milliseconds in tests).
    pub async fn settle(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let stats = self.journal.stats();
        while stats.backlog() > 0
            || stats.sources_backlog() > 0
            || stats.rollups_backlog() > 0
            || stats.visits_backlog() > 0
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the backlog did not drain: {} hits, {} hits' sources, {} hits' hours and days, {} hits' visits",
                stats.backlog(),
                stats.sources_backlog(),
                stats.rollups_backlog(),
                stats.visits_backlog()
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// `/metrics` as text.
    pub async fn metrics(&self) -> String {
        self.page_text(&self.http, "/metrics").await
    }

    /// One unlabelled sample from `/metrics`.
    pub async fn metric(&self, name: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing from /metrics"))
            .parse()
            .unwrap()
    }

    pub async fn buckets(&self, g: Resolution) -> Vec<Bucket> {
        self.settle().await;
        self.store
            .buckets(g)
            .find(mongodb::bson::doc! {})
            .sort(mongodb::bson::doc! {"page": 1, "timestamp": 1})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    }

    pub async fn total_views(&self, g: Resolution) -> i64 {
        self.buckets(g).await.iter().map(|b| b.total_views).sum()
    }

    /// The site totals' views at `g`, every site and writer part added up.
    pub async fn site_total_views(&self, g: Resolution) -> i64 {
        let site = tickertape::storage::buckets::Subject::Site.collection(g);
        let docs: Vec<bson::Document> = self
            .store
            .db()
            .collection::<bson::Document>(site)
            .find(mongodb::bson::doc! {})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        docs.iter()
            .map(|d| tickertape::storage::values::count(d.get("totalViews")))
            .sum()
    }

    pub async fn bucket_count(&self) -> u64 {
        self.settle().await;
        let mut n = 0;
        for g in Resolution::ALL {
            n += self
                .store
                .buckets(g)
                .count_documents(mongodb::bson::doc! {})
                .await
                .unwrap();
        }
        n
    }

    /// Stops the server gracefully and waits for the queue to drain.
    pub async fn stop(&mut self) {
        self.handle.stop(true).await;
        if let Some(task) = self.task.take() {
            task.await.expect("app task").expect("app stopped cleanly");
        }
    }

    /// A graceful restart, as an operator's: this app stops (releasing its
    /// journal) and a new one starts with `settings` on the same database
    /// and journal directory (unless `settings` names another one).
    pub async fn restart(mut self, mut settings: Settings) -> TestApp {
        self.stop().await;
        settings.database.name = std::mem::take(&mut self.db_name);
        let journal_dir = self._journal_dir.take();
        if settings.ingest.journal_dir.is_none() {
            settings.ingest.journal_dir = Some(self.journal.dir().to_owned());
        }
        drop(self);
        let mut next = spawn_app_on(database_uri(), settings).await;
        next._journal_dir = journal_dir;
        next
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.db_name);
        if name.is_empty() {
            return; // handed on to the next app by `restart`
        }
        // A fresh runtime on a plain thread: Drop cannot await.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                let client = mongodb::Client::with_uri_str(database_uri()).await?;
                client.database(&name).drop().await
            })
        })
        .join();
    }
}

pub fn fast(settings: &mut Settings) {
    settings.ingest.ack_mode = AckMode::Fast;
}

/// The password every test user gets.
pub const PASSWORD: &str = "correct horse battery";

/// Test clients reuse a kept-alive connection only while it has been idle
/// for less than this, well inside the server's 5 s keep-alive: reusing one
/// the server is closing failed requests with "connection reset" or
/// "incomplete message" under the load of the whole suite.
const IDLE_REUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// A browser-like client: keeps cookies, does not follow redirects (tests
/// look at them).
pub fn cookie_client() -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent(BROWSER_UA)
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(IDLE_REUSE)
        .build()
        .unwrap()
}

/// A logged-in user's client and the CSRF token of their session.
pub struct Login {
    pub http: reqwest::Client,
    pub csrf: String,
    base: String,
}

pub fn csrf_in(html: &str) -> Option<String> {
    let start = html.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
    Some(html[start..start + 64].to_owned())
}

impl Login {
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .form(form)
            .send()
            .await
            .unwrap()
    }

    pub async fn text(&self, path: &str) -> (u16, String) {
        let r = self.get(path).await;
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

impl TestApp {
    pub async fn add_user(
        &self,
        email: &str,
        role: tickertape::accounts::Role,
    ) -> tickertape::accounts::User {
        let password = tickertape::accounts::password::NewPassword::parse(PASSWORD).unwrap();
        tickertape::accounts::users::create(
            &self.store,
            tickertape::domain::Email::parse(email).unwrap(),
            &password,
            role,
            Utc::now(),
        )
        .await
        .unwrap()
    }

    /// `GET path` with `http` (its cookies), as text.
    pub async fn page_text(&self, http: &reqwest::Client, path: &str) -> String {
        http.get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Submits the login form as a browser would; returns the response.
    pub async fn submit_login(
        &self,
        http: &reqwest::Client,
        email: &str,
        password: &str,
    ) -> reqwest::Response {
        let page = self.page_text(http, "/login").await;
        let csrf = csrf_in(&page).expect("login form carries a csrf token");
        http.post(format!("{}/login", self.address))
            .form(&[
                ("email", email),
                ("password", password),
                ("csrf", &csrf),
                ("next", "/sites"),
            ])
            .send()
            .await
            .unwrap()
    }

    pub async fn login(&self, email: &str) -> Login {
        let http = cookie_client();
        let r = self.submit_login(&http, email, PASSWORD).await;
        assert_eq!(r.status(), 303, "login of {email}");
        let mut page = http
            .get(format!("{}/account/password", self.address))
            .send()
            .await
            .unwrap();
        // An admin who must turn on two-factor login is sent to its setup,
        // which carries the token too.
        if page.status() == 303 {
            let to = page.headers()["location"].to_str().unwrap().to_owned();
            page = http
                .get(format!("{}{to}", self.address))
                .send()
                .await
                .unwrap();
        }
        let page = page.text().await.unwrap();
        Login {
            csrf: csrf_in(&page).expect("pages carry the session csrf"),
            http,
            base: self.address.clone(),
        }
    }

    pub fn anonymous(&self) -> Login {
        Login {
            http: cookie_client(),
            csrf: String::new(),
            base: self.address.clone(),
        }
    }

    /// Writes hits straight into the buckets through the product's writer.
    /// Each hit is `(page, at)` or `(page, at, source)`.
    pub async fn write_hits<'a, H>(&self, hits: &[H])
    where
        H: Copy + Into<tickertape::storage::bucket_writer::Hit<'a>>,
    {
        let writer = tickertape::storage::bucket_writer::BucketWriter::new(&self.store);
        // Generous: on a busy machine the server's write conflicts with the
        // app's own writers can go on for a while; they are retried until then.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
        writer.apply_direct(hits, deadline).await.unwrap();
    }
}

/// The values of the numeric cells (`<td class="num" data-label="…">`) in
/// a piece of a page, in order.
pub fn num_cells(html: &str) -> Vec<String> {
    html.split("<td class=\"num\" data-label=\"")
        .skip(1)
        .map(|c| {
            // The cell's text, a link in it (an entry's filter) left out.
            let inner = c.split_once('>').map_or("", |(_, rest)| rest);
            text_of(inner.split("</td>").next().unwrap_or(""))
        })
        .collect()
}

/// A cell's text: its markup (a row's link) left out.
fn text_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// The first four cells' text of each body row of the table `id`.
pub fn table_rows(html: &str, id: &str) -> Vec<[String; 4]> {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id}"));
    let table = &html[start..];
    let body = &table[table.find("<tbody>").unwrap()..table.find("</tbody>").unwrap()];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            let cells: Vec<String> = row
                .split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    text_of(&c[..c.find("</td>").unwrap()])
                })
                .collect();
            [0, 1, 2, 3].map(|i| cells[i].clone())
        })
        .collect()
}

/// One dimension's counts (decoded names) over the site day breakdown
/// buckets, once every journaled hit is in.
pub async fn site_day_counts(
    app: &TestApp,
    dimension: tickertape::domain::Dimension,
) -> std::collections::BTreeMap<String, i64> {
    app.settle().await;
    breakdown_counts(
        app,
        "site_breakdowns_day",
        mongodb::bson::doc! {},
        dimension,
    )
    .await
}

/// One dimension's counts (decoded names) over the breakdown buckets of
/// `coll` that match `filter`, as they are now.
pub async fn breakdown_counts(
    app: &TestApp,
    coll: &str,
    filter: bson::Document,
    dimension: tickertape::domain::Dimension,
) -> std::collections::BTreeMap<String, i64> {
    let docs: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<bson::Document>(coll)
            .find(filter)
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut by = std::collections::BTreeMap::new();
    for d in docs {
        if let Ok(names) = d.get_document(dimension.field()) {
            for (k, v) in names {
                *by.entry(tickertape::domain::dimension::from_field_name(k))
                    .or_default() += v.as_i64().unwrap();
            }
        }
    }
    by
}

/// A query-string value percent-encoded (unreserved characters kept).
pub fn urlencode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Waits until the day's salt is stored, so that no visitor id changes
/// within the day (the pixel lets a salt in ahead of its day).
pub async fn salt_ready(app: &TestApp, day: &str) {
    let salts = app.store.db().collection::<bson::Document>("salts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while salts
        .count_documents(mongodb::bson::doc! {"_id": day})
        .await
        .unwrap()
        == 0
    {
        assert!(std::time::Instant::now() < deadline, "no salt for {day}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

impl TestApp {
    /// Holds one write-behind stream back for real: `collection` takes no
    /// write (a validator no document passes, as an operator's mistake
    /// would set: its `key` must be an int), so the stream's batches fail
    /// whole and its hits wait in the journal while the other streams go
    /// on. `refuse: false` lifts it.
    pub async fn refuse_writes(&self, collection: &str, key: &str, refuse: bool) {
        let rule = if refuse {
            mongodb::bson::doc! {key: {"$type": "int"}}
        } else {
            mongodb::bson::doc! {}
        };
        self.store
            .db()
            .run_command(
                mongodb::bson::doc! {"collMod": collection, "validator": rule, "validationAction": "error"},
            )
            .await
            .unwrap();
    }

    /// `tickertape_write_behind_<what>_seconds{stream}` from `/metrics`.
    pub async fn stream_seconds(&self, what: &str, stream: &str) -> f64 {
        let prefix = format!("tickertape_write_behind_{what}_seconds{{stream=\"{stream}\"}} ");
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(|v| v.parse().unwrap()))
            .unwrap_or_else(|| panic!("no {prefix}"))
    }

    /// Waits until `/metrics` says `stream` is `secs` behind: its applier
    /// has gathered the held-back hits (the clock is the test's).
    pub async fn wait_for_lag(&self, stream: &str, secs: f64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let lag = self.stream_seconds("lag", stream).await;
            if (lag - secs).abs() < 0.5 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{stream}: {lag} s behind"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

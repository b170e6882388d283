//! The database of a bench run, the bench-only servers, and one scenario.

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use anyhow::Context;
use bson::doc;
use futures::TryStreamExt;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tickertape::domain::{DomainName, Page};
use tickertape::ingest::pixel::classify;
use tickertape::ingest::SiteDirectory;
use tickertape::localdb::{self, LocalDb, LocalDbOptions};
use tickertape::preallocation::{self, PreallocRequest, Scope, Trigger};
use tickertape::reports::Resolution;
use tickertape::settings::Settings;
use tickertape::storage::bucket_writer::BucketWriter;
use tickertape::storage::sites::{self, NewSite};
use tickertape::storage::Store;
use tickertape::web::pixel::GIF;

use crate::{repo, wrk, Options, Row, Server, Spec, SITE_DOMAIN};

pub struct Database {
    pub uri: String,
    pub describe: String,
    local: Option<LocalDb>,
    options: LocalDbOptions,
}

impl Database {
    pub async fn start() -> anyhow::Result<Self> {
        if let Ok(uri) = std::env::var("MONGODB_URI") {
            return Ok(Database {
                uri,
                describe: "MONGODB_URI (external server)".into(),
                local: None,
                options: LocalDbOptions::default(),
            });
        }
        let binary = localdb::locate(Some(&repo().join(".tools/bin/secantusd-rs")))?;
        let dir = repo().join("target/bench-db");
        if !reuse_year() && !crate::big_site::reuse() && !crate::segments::reuse() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        // The embedded default: every commit fsynced, so `j: true` holds.
        let sync = std::env::var("BENCH_SYNC_ON_COMMIT").map_or(true, |v| v != "0");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let options = LocalDbOptions {
            cache_size: "1G".into(),
            log_file_max: "64MB".into(),
            port,
            sync_on_commit: sync,
            standalone: false,
        };
        let db = LocalDb::start(&binary, &dir, &options).await?;
        Ok(Database {
            uri: db.uri().to_owned(),
            describe: format!(
                "{} {} (local single-node replica set, WiredTiger cache {}, {}), data in target/bench-db",
                localdb::SERVER_NAME,
                localdb::SERVER_VERSION,
                options.cache_size,
                if sync { "--sync-on-commit" } else { "no fsync on commit" }
            ),
            local: Some(db),
            options,
        })
    }

    pub async fn store(&self, name: &str) -> anyhow::Result<Store> {
        let mut settings = Settings::defaults();
        settings.database.name = name.to_owned();
        let store = Store::connect(&settings.database.store_options()?, &self.uri).await?;
        Ok(store)
    }

    /// A fresh database with the schema and the bench site.
    pub async fn fresh(&self, name: &str) -> anyhow::Result<(Store, String)> {
        let store = self.store(name).await?;
        store.db().drop().await?;
        tickertape::indexes::ensure(&store).await?;
        let new = NewSite {
            domain: DomainName::parse(SITE_DOMAIN)?,
            aliases: vec![],
            name: None,
            owners: vec![],
            time_zone: tickertape::domain::TimeZone::UTC,
        };
        let site = sites::insert(&store, new, chrono::Utc::now()).await?;
        Ok((store, site.id.to_string()))
    }

    /// Kills the local server (SIGKILL) for an outage; `None` for an
    /// external server, which the bench cannot stop.
    pub fn kill(&mut self) -> Option<()> {
        self.local.take()?.kill();
        Some(())
    }

    /// Starts the local server again on the same files and port.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        let binary = localdb::locate(Some(&repo().join(".tools/bin/secantusd-rs")))?;
        let dir = repo().join("target/bench-db");
        for _ in 0..60 {
            match LocalDb::start(&binary, &dir, &self.options).await {
                Ok(db) => {
                    self.local = Some(db);
                    return Ok(());
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        anyhow::bail!("the bench database did not restart")
    }

    /// The local server's process id (none for an external server).
    pub fn server_pid(&self) -> Option<u32> {
        self.local.as_ref().map(LocalDb::pid)
    }

    pub fn stop(self) {
        if let Some(db) = self.local {
            db.stop();
        }
    }
}

/// Hits written by the data loaders in one flush of the product's writer:
/// spread over a month of buckets nearly every hit is its own statement,
/// and on a busy machine a 50,000-statement transaction outlasted the
/// writer's 11 s per-command limit on every attempt.
const LOAD_BATCH: usize = 10_000;

/// Writes generated hits through the product's `BucketWriter`, one flush
/// per 10,000 hits: how the storage table and the report data are loaded.
pub async fn load_hits<S: AsRef<str>>(
    store: &Store,
    hits: impl IntoIterator<Item = (S, chrono::DateTime<chrono::Utc>)>,
) -> anyhow::Result<()> {
    let writer = BucketWriter::new(store);
    let mut hits = hits.into_iter();
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    loop {
        batch.extend(hits.by_ref().take(LOAD_BATCH));
        if batch.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        let refs: Vec<_> = batch.iter().map(|(p, t)| (p.as_ref(), *t)).collect();
        writer.apply_direct(&refs, deadline).await?;
        batch.clear();
    }
}

/// Sum of `totalViews` in a collection.
pub async fn stored(store: &Store, g: Resolution) -> anyhow::Result<i64> {
    let docs: Vec<bson::Document> = store
        .db()
        .collection::<bson::Document>(g.collection())
        .aggregate([doc! {"$group": {"_id": null, "n": {"$sum": "$totalViews"}}}])
        .await?
        .try_collect()
        .await?;
    Ok(docs
        .first()
        .map_or(0, |d| tickertape::storage::values::count(d.get("n"))))
}

pub fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The product's journal backlog: hits not yet in the database in every
/// stream (minutes, hours and days, sources).
async fn backlog(address: &str) -> Option<u64> {
    let text = get_text(&format!("{address}/metrics")).await.ok()?;
    let mut total = 0;
    for stream in ["", "_rollups", "_sources"] {
        total += metric(&text, &format!("tickertape_journal{stream}_backlog_hits "))?;
    }
    Some(total)
}

/// Samples the backlog every `every` while `running`; returns (seconds,
/// backlog) pairs.
fn sample_backlog(
    address: String,
    every: Duration,
    running: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(f64, u64)>> {
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut samples = Vec::new();
        while running.load(Ordering::Relaxed) {
            tokio::time::sleep(every).await;
            if let Some(b) = backlog(&address).await {
                samples.push((started.elapsed().as_secs_f64(), b));
            }
        }
        samples
    })
}

const SERVE_BIN: &str = "TICKERTAPE_SERVE_BIN";

/// The release `tickertape serve` on a fresh journal against `db_name`
/// (durable acks, no scheduled preallocation, a backlog never "not ready"),
/// with `env` on top; `TICKERTAPE_SERVE_BIN` in `env` (a run's
/// `+SERVE_BIN=path`) serves another build instead, to measure a before
/// and an after side by side.
pub fn product(db: &Database, db_name: &str, env: &[(String, String)]) -> anyhow::Result<Server> {
    let journal = repo().join("target/bench-journal").join(db_name);
    let _ = std::fs::remove_dir_all(&journal);
    let binary = env.iter().find(|(k, _)| k == SERVE_BIN).map_or_else(
        || repo().join("target/release/tickertape"),
        |(_, v)| v.into(),
    );
    let mut cmd = Command::new(binary);
    cmd.arg("serve")
        .env("MONGODB_URI", &db.uri)
        .env("TICKERTAPE_DATABASE", db_name)
        .env("TICKERTAPE_JOURNAL_DIR", &journal)
        .env("TICKERTAPE_READY_MAX_BACKLOG_SECS", "3600")
        .env("TICKERTAPE_LISTEN", "127.0.0.1:0")
        .env("TICKERTAPE_ACK_MODE", "durable")
        .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
        .env("RUST_LOG", "warn");
    for (k, v) in env.iter().filter(|(k, _)| k != SERVE_BIN) {
        cmd.env(k, v);
    }
    Server::start(cmd).context("starting target/release/tickertape (make bench builds it)")
}

pub async fn get_text(url: &str) -> anyhow::Result<String> {
    Ok(reqwest::get(url).await?.text().await?)
}

pub async fn scenario(db: &mut Database, spec: &Spec, options: &Options) -> anyhow::Result<Row> {
    let name = spec.kind.as_str();
    let db_name = format!("bench_{name}");
    let (store, site) = db.fresh(&db_name).await?;
    let server = match name {
        "ceiling" | "naive" => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.env("TT_BENCH_ROLE", name)
                .env("TT_BENCH_URI", &db.uri)
                .env("TT_BENCH_DB", &db_name);
            Server::start(cmd)?
        }
        "durable" | "fast" | "preallocated" | "outage" => {
            if name == "preallocated" {
                preallocate(&store, options).await?;
            }
            let journal = repo().join("target/bench-journal").join(&db_name);
            let _ = std::fs::remove_dir_all(&journal);
            let mut cmd = Command::new(repo().join("target/release/tickertape"));
            cmd.arg("serve")
                .env("MONGODB_URI", &db.uri)
                .env("TICKERTAPE_DATABASE", &db_name)
                .env("TICKERTAPE_JOURNAL_DIR", &journal)
                .env("TICKERTAPE_READY_MAX_BACKLOG_SECS", "3600")
                .env("TICKERTAPE_LISTEN", "127.0.0.1:0")
                .env(
                    "TICKERTAPE_ACK_MODE",
                    if name == "fast" { "fast" } else { "durable" },
                )
                .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
                .env("RUST_LOG", "warn");
            Server::start(cmd)
                .context("starting target/release/tickertape (make bench builds it)")?
        }
        other => anyhow::bail!("unknown scenario {other:?}"),
    };
    let address = server.address.clone();
    let product = !matches!(name, "ceiling" | "naive");
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = product.then(|| {
        let every = Duration::from_secs(if spec.rate.is_some() { 5 } else { 2 });
        sample_backlog(address.clone(), every, running.clone())
    });
    let load = tokio::task::spawn_blocking({
        let (address, site, spec, options) =
            (address.clone(), site.clone(), spec.clone(), options.clone());
        move || wrk(&address, &site, &spec, &options)
    });
    let mut outage = None;
    if name == "outage" {
        // A third of the run in, the database goes away for 30 s.
        let before = Duration::from_secs(spec.duration(options) / 3);
        tokio::time::sleep(before).await;
        if db.kill().is_some() {
            tokio::time::sleep(Duration::from_secs(30)).await;
            db.restart().await?;
            outage = Some(std::time::Instant::now());
        }
    }
    let result = load.await??;
    // Drain: the no-loss check compares after the backlog is applied.
    let drain_started = std::time::Instant::now();
    if product {
        let deadline = drain_started + Duration::from_secs(300);
        while backlog(&address).await != Some(0) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    } else {
        // Let requests still in flight when wrk stopped finish.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    running.store(false, Ordering::Relaxed);
    let samples = match sampler {
        Some(s) => s.await?,
        None => vec![],
    };
    let drain = outage.map(|returned| returned.elapsed());
    let rss = server.peak_rss_mib();
    let (served_ok, collections): (u64, &[Resolution]) = match name {
        "ceiling" => (
            get_text(&format!("{address}/count"))
                .await?
                .trim()
                .parse()?,
            &[],
        ),
        "naive" => (
            get_text(&format!("{address}/count"))
                .await?
                .trim()
                .parse()?,
            &[Resolution::Minute],
        ),
        _ => {
            let text = get_text(&format!("{address}/metrics")).await?;
            (
                metric(&text, "tickertape_hits_total{outcome=\"counted\"} ").unwrap_or(0),
                &Resolution::ALL,
            )
        }
    };
    server.stop()?; // the product drains its queue here
    let difference = if collections.is_empty() {
        None
    } else {
        let mut d = [0i64; 3];
        for (i, g) in Resolution::ALL.iter().enumerate() {
            if collections.contains(g) {
                d[i] = stored(&store, *g).await? - served_ok as i64;
            }
        }
        Some(d)
    };
    store.db().drop().await?;
    Ok(Row {
        spec: spec.clone(),
        wrk: result,
        rss_mib: rss,
        served_ok: Some(served_ok),
        difference,
        backlog: samples,
        drain,
        after_load_drain: product.then(|| drain_started.elapsed()),
    })
}

/// Every hour the run will touch, for every bench page, through the
/// product's preallocation: the current hour, and the next one when the run
/// may cross into it.
async fn preallocate(store: &Store, options: &Options) -> anyhow::Result<()> {
    let pages = options.pages;
    let now = chrono::Utc::now();
    let from = Resolution::Hour.floor(now);
    let end = now + chrono::TimeDelta::seconds(options.duration as i64 + 120);
    let hours = if Resolution::Hour.floor(end) > from {
        2
    } else {
        1
    };
    let started = std::time::Instant::now();
    let (mut inserted, mut errors) = (0, 0);
    for n in 1..=pages {
        let page = Page::parse(&format!("{SITE_DOMAIN}/p/{n}"))?;
        let request = PreallocRequest {
            scope: Scope::Page(page),
            from,
            hours,
            threshold: 1,
        };
        let run = preallocation::run(store, &request, Trigger::Cli, "bench", now).await?;
        inserted += run.inserted;
        errors += run.errors.len();
    }
    eprintln!(
        "preallocated {inserted} buckets for {pages} pages in {:.1} s ({errors} errors)",
        started.elapsed().as_secs_f64()
    );
    anyhow::ensure!(errors == 0, "preallocation errors");
    Ok(())
}

// ------------------------------------------------------- bench-only servers

struct RoleState {
    directory: SiteDirectory,
    minutes: Option<mongodb::Collection<bson::Document>>,
    ok: AtomicU64,
}

fn gif() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("image/gif")
        .insert_header(("cache-control", "no-store"))
        .body(GIF.as_slice())
}

/// The same request rules as the product, then either nothing (sink) or the
/// seed's per-hit `update_one($inc, upsert)` with the same write concern.
async fn hit(req: HttpRequest, state: web::Data<RoleState>) -> HttpResponse {
    let page = match classify(req.headers(), req.query_string(), &state.directory) {
        Ok(page) => page,
        Err(_) => return HttpResponse::BadRequest().finish(),
    };
    if let Some(minutes) = &state.minutes {
        let now = chrono::Utc::now();
        let filter = doc! {"page": page.as_str(), "timestamp": bson::DateTime::from_chrono(Resolution::Minute.floor(now))};
        let mut inc = doc! {"totalViews": 1_i64};
        inc.insert(format!("seconds.{}", Resolution::Minute.slot(now)), 1);
        if minutes
            .update_one(filter, doc! {"$inc": inc})
            .upsert(true)
            .await
            .is_err()
        {
            return HttpResponse::ServiceUnavailable().finish();
        }
    }
    state.ok.fetch_add(1, Ordering::Relaxed);
    gif()
}

pub fn serve(role: &str) -> anyhow::Result<()> {
    let uri = std::env::var("TT_BENCH_URI")?;
    let name = std::env::var("TT_BENCH_DB")?;
    let naive = role == "naive";
    actix_web::rt::System::new().block_on(async move {
        let mut settings = Settings::defaults();
        settings.database.name = name;
        let store = Store::connect(&settings.database.store_options()?, &uri).await?;
        let directory = SiteDirectory::default();
        directory.reload(&store).await?;
        let minutes = naive.then(|| {
            // The seed's per-hit write with the product's write concern.
            let wc = store.commit_write_concern();
            store.db().collection_with_options::<bson::Document>(
                Resolution::Minute.collection(),
                mongodb::options::CollectionOptions::builder()
                    .write_concern(wc)
                    .build(),
            )
        });
        let state = web::Data::new(RoleState {
            directory,
            minutes,
            ok: AtomicU64::new(0),
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .route("/pixel.gif", web::get().to(hit))
                .route(
                    "/count",
                    web::get().to(|s: web::Data<RoleState>| async move {
                        s.ok.load(Ordering::Relaxed).to_string()
                    }),
                )
        })
        .bind("127.0.0.1:0")?;
        println!("listening on http://{}", server.addrs()[0]);
        server.run().await?;
        anyhow::Ok(())
    })?;
    Ok(())
}

/// `BENCH_YEAR_REUSE=1`: keep the year bench's data from the last run.
pub fn reuse_year() -> bool {
    std::env::var("BENCH_YEAR_REUSE").is_ok_and(|v| v == "1")
}

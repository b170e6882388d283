//! Builds and runs the application: [`Application::build`] from settings
//! and a connected store, then [`Application::run_until_stopped`]. The
//! state the handlers share is made in [`state`], each background task is
//! started through [`tasks::Tasks`] (so stopping stops them all), and
//! `serve`'s steps before it (the embedded database, indexes, the first
//! admin, the demo) are in [`serve`].

pub mod serve;
pub mod state;
pub mod tasks;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{web, App, HttpServer};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::ingest::applier::Appliers;
use crate::ingest::{IngestState, IngestStats, SiteDirectory};
use crate::journal::Journal;
use crate::preallocation::scheduler::Scheduler;
use crate::settings::public_url_or;
use crate::settings::Settings;
use crate::storage::Store;
use crate::web::state::WebState;
use tasks::{Running, Tasks};

pub struct Application {
    port: u16,
    server: Server,
    journal: Arc<Journal>,
    appliers: Appliers,
    drain: Duration,
    tasks: Tasks,
    ingest: IngestState,
}

impl Application {
    /// Opens the journal (replaying what it holds in the background), starts
    /// the appliers, loads the sites and binds the listen address (port 0
    /// picks a free one). Serving starts with
    /// [`run_until_stopped`](Self::run_until_stopped).
    pub async fn build(
        settings: &Settings,
        store: Store,
        clock: SharedClock,
    ) -> anyhow::Result<Self> {
        let listener = bind(settings)?;
        Self::build_on(settings, store, clock, listener).await
    }

    /// [`build`](Self::build) on a listener bound beforehand: `serve` binds
    /// its port before it creates anything, so that a taken port stops it
    /// before the first admin or the demo exist.
    pub async fn build_on(
        settings: &Settings,
        store: Store,
        clock: SharedClock,
        listener: TcpListener,
    ) -> anyhow::Result<Self> {
        check_store(&store)?;
        let retention = settings
            .retention
            .retention()
            .map_err(|e| anyhow::anyhow!("retention settings: {e}"))?;
        crate::storage::retention::apply(&store, &retention).await?;
        crate::storage::visit_packs::apply_retention(&store, settings.retention.visit_retention())
            .await?;
        store.summary_retention().set(
            retention.kept(crate::domain::Resolution::Day),
            retention.kept(crate::domain::Resolution::Hour),
        );
        let stats = Arc::new(IngestStats::default());
        let (journal, feeds) = Journal::open(&settings.journal_config())?;
        let journal = Arc::new(journal);
        let directory = SiteDirectory::default();
        directory.reload(&store).await?;
        let appliers = Appliers::start(
            &store,
            journal.id(),
            feeds,
            settings.ingest.apply_config(),
            stats.clone(),
            journal.stats().clone(),
            directory.clone(),
        );
        let mut tasks = Tasks::new();
        tasks.spawn("backfills", backfills(store.clone()));
        {
            let window = settings.ingest.apply_config().visits_window;
            let requests = store.pack_queue().open(clock.clone(), window);
            tasks.spawn(
                "visit packs",
                pack_visit_days(store.clone(), clock.clone(), window, requests),
            );
        }
        let refresh = settings.ingest.site_refresh_secs.max(1);
        tasks.adopt(
            "site directory refresh",
            directory.spawn_refresher(store.clone(), Duration::from_secs(refresh)),
        );
        tasks.spawn(
            "deleted sites purge",
            purge_deleted_sites(
                store.clone(),
                clock.clone(),
                settings.ingest.site_purge_after_secs.max(3 * refresh),
            ),
        );
        let ingest = state::ingest(
            settings,
            journal.appender().clone(),
            directory,
            clock,
            stats,
        );
        ingest.visitors.salts.load(&store, ingest.clock.now()).await;
        {
            let (visitors, store, clock) =
                (ingest.visitors.clone(), store.clone(), ingest.clock.clone());
            tasks.spawn_graceful("visitor salts", |stop| async move {
                visitors.salts.keep(store, clock, stop).await
            });
        }
        {
            // Pages the database already has views of stay known across a
            // restart; the pixel never waits for this.
            let (cap, store, now) = (ingest.page_cap.clone(), store.clone(), ingest.clock.now());
            tasks.spawn("known pages", async move {
                match cap.load_known(&store, now).await {
                    Ok(n) => tracing::info!(pages = n, "page cap: known pages loaded"),
                    Err(e) => tracing::warn!(error = %crate::telemetry::chain(&e),
                        "page cap: could not load the known pages; they are admitted as they come"),
                }
            });
        }
        let bound = listener.local_addr()?;
        let port = bound.port();
        let public_url = public_url_or(settings.public_url.as_deref(), bound);
        let prealloc = &settings.prealloc;
        let scheduler = Arc::new(Scheduler::new(
            store.clone(),
            ingest.clock.clone(),
            chrono::TimeDelta::minutes(prealloc.prealloc_lead_minutes),
            prealloc.prealloc_threshold,
        ));
        if prealloc.prealloc_schedule {
            tasks.adopt("preallocation schedule", scheduler.clone().spawn());
        }
        let email = Arc::new(
            crate::email::Sender::new(
                store.clone(),
                ingest.clock.clone(),
                settings.email.email_config().map_err(anyhow::Error::msg)?,
                public_url.clone(),
            )
            .map_err(anyhow::Error::msg)?
            .with_retention(retention),
        );
        if email.enabled() {
            tasks.adopt("email", email.clone().spawn());
        }
        let web_state = state::web(
            settings,
            state::WebParts {
                store,
                ingest: ingest.clone(),
                journal: journal.clone(),
                scheduler: prealloc.prealloc_schedule.then_some(scheduler),
                retention,
                public_url,
                email,
            },
        )?;
        // The system page's sizes are measured now, not on its first view.
        web_state
            .bucket_sizes
            .refresh(web_state.store.clone(), web_state.clock.clone());
        let server = server(listener, web_state, web::Data::new(ingest.clone()))?;
        Ok(Self {
            port,
            server,
            journal,
            appliers,
            drain: Duration::from_secs(settings.ingest.shutdown_drain_secs),
            tasks,
            ingest,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server gracefully when called (tests; `serve` stops on
    /// SIGINT/SIGTERM).
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    pub fn ingest(&self) -> &IngestState {
        &self.ingest
    }

    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// The background tasks still running (none once stopped).
    pub fn tasks(&self) -> Running {
        self.tasks.running()
    }

    /// Serves until stopped; then stops every background task, commits
    /// every accepted hit to the journal, applies what the database takes
    /// within the drain time, and leaves the rest in the journal for the
    /// next start.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let served = self.server.await;
        self.tasks.stop().await;
        self.journal.close_writers().await;
        self.appliers.shutdown(self.drain).await;
        tracing::info!(
            left_in_journal = self.journal.stats().backlog(),
            sources_left_in_journal = self.journal.stats().sources_backlog(),
            hours_and_days_left_in_journal = self.journal.stats().rollups_backlog(),
            "stopped; every accepted hit is in the journal or the database"
        );
        Ok(served?)
    }
}

/// The HTTP server on `listener`: the routes and the middleware around
/// them (outermost last).
fn server(
    listener: TcpListener,
    web_state: web::Data<WebState>,
    ingest: web::Data<IngestState>,
) -> anyhow::Result<Server> {
    let https = web_state.secure_cookies;
    Ok(HttpServer::new(move || {
        App::new()
            // Inside compression: it may render an error page again.
            .wrap(actix_web::middleware::from_fn(crate::web::pages::keep_nav))
            // Pages, CSV and tt.js go out gzip-compressed to clients
            // that accept it.
            .wrap(actix_web::middleware::Compress::default())
            .wrap(actix_web::middleware::from_fn(
                crate::web::head::head_as_get,
            ))
            .wrap(crate::web::security::headers(https))
            // Innermost of these: a costly read asks whether its client
            // is still there.
            .wrap(actix_web::middleware::from_fn(
                crate::web::peer::watch_client,
            ))
            .wrap(tracing_actix_web_lite())
            .wrap(tracing_actix_web::TracingLogger::<
                crate::telemetry::RequestSpan,
            >::new())
            .app_data(ingest.clone())
            .app_data(web_state.clone())
            .configure(crate::web::routes)
    })
    .on_connect(crate::web::peer::on_connect)
    .listen(listener)?
    // A request's head and the next request on a kept-alive connection
    // may wait longer than actix's 5 s for a worker on a busy machine: a
    // timer that fires first answers 408 or closes the connection with the
    // request unread, which the client sees as "connection reset by peer"
    // (a lost view). Generous timers keep them; the worker's connection
    // limit (25,600) still bounds what slow clients can hold.
    .client_request_timeout(CLIENT_REQUEST_TIMEOUT)
    .keep_alive(KEEP_ALIVE)
    .shutdown_timeout(30)
    .run())
}

/// How long a connection may take to send a request's head.
const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an idle kept-alive connection stays open. Clients that reuse
/// connections idle for less than this never race its closing.
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Connections the kernel queues for the accept loop: std's listener asks
/// for 128, so a burst of a few hundred new connections while the workers
/// are busy overflowed it (a refused or delayed handshake). Linux caps it
/// at `net.core.somaxconn` (4,096 by default since 5.4).
pub const LISTEN_BACKLOG: i32 = 4_096;

/// Binds the listen address (port 0 picks a free one) with a backlog of
/// [`LISTEN_BACKLOG`], naming the address when it cannot be had.
pub fn bind(settings: &Settings) -> anyhow::Result<TcpListener> {
    listen(settings.listen).map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {}: {e}. Stop what uses it or set TICKERTAPE_LISTEN to another address",
            settings.listen
        )
    })
}

fn listen(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    // As std and actix do: a restarted server can bind at once although
    // its old connections linger in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// What the database must offer before anything is written to it.
pub fn check_store(store: &Store) -> anyhow::Result<()> {
    anyhow::ensure!(
        store.topology().supports_transactions(),
        "the database is a standalone server, without multi-document transactions, which \
         Tickertape needs to apply hits exactly once. Run it as a one-member replica set: \
         start mongod with --replSet rs0 and run rs.initiate() once (the embedded database \
         already is one)"
    );
    Ok(())
}

/// Request logging: path (without the query string, which can hold
/// a visitor's page), status and latency; never the client address.
fn tracing_actix_web_lite() -> actix_web::middleware::Logger {
    actix_web::middleware::Logger::new("%U %s %Dms")
        .exclude("/pixel.gif")
        .exclude("/healthz")
        // A share link's address is its secret.
        .exclude_regex("^/share/")
}

/// The upgrade to site totals: sites whose page buckets predate them get
/// them recomputed once (reports add up page buckets for a site until it
/// is done); exact while hits flow. Then the page summaries of the days
/// that ended since the last run, so that no report waits to make them;
/// at start and every hour (cheap when they are there).
async fn backfills(store: Store) {
    if let Err(e) = crate::storage::site_totals::backfill_missing(&store).await {
        tracing::error!(error = %format!("{e:#}"),
            "site totals backfill failed; run `tickertape backfill-site-totals`");
    }
    loop {
        if let Err(e) = crate::reports::page_totals::backfill_all(&store).await {
            tracing::warn!(error = %format!("{e:#}"),
                "page summaries backfill failed; reports make them as they need them");
        }
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

/// Packs closed days of the visit store (`storage::visit_packs`): the
/// days the filtered reads queued (read from the documents because they had
/// no valid pack), one at a time so the reads keep the cores; and shortly
/// after each UTC midnight (once the visits window has passed) yesterday's
/// days of every site, and the day before's, should the app have been down
/// then. At start too. A failure is logged; the day is packed at a later
/// read.
async fn pack_visit_days(
    store: Store,
    clock: SharedClock,
    window: Duration,
    mut requests: tokio::sync::mpsc::UnboundedReceiver<(String, i64)>,
) {
    use crate::storage::{page_summaries::day_start, visit_days, visit_packs};
    let window = chrono::TimeDelta::from_std(window).unwrap_or_default();
    let build = |site: String, day: i64| {
        let store = store.clone();
        async move {
            let started = std::time::Instant::now();
            match visit_packs::ensure_day(&store, &site, day).await {
                Ok(Some(built)) => tracing::info!(site, day = %day_start(day).date_naive(),
                    visits = built.visits, documents = built.documents, bytes = built.bytes,
                    ms = started.elapsed().as_millis() as u64, "visit day packed"),
                Ok(None) => {}
                Err(e) => tracing::warn!(site, day = %day_start(day).date_naive(),
                    error = %crate::telemetry::chain(&e),
                    "could not pack a visit day; it is read from the stored visits"),
            }
        }
    };
    let mut nightly = clock.now();
    loop {
        let now = clock.now();
        if now >= nightly {
            let open = visit_days::day_of(now - window);
            for day in [open - 2, open - 1] {
                match visit_days::sites_on(&store, day).await {
                    Ok(sites) => {
                        for site in sites {
                            build(site, day).await;
                        }
                    }
                    Err(e) => tracing::warn!(error = %crate::telemetry::chain(&e),
                        "could not list the sites with visits to pack; trying again tomorrow"),
                }
            }
            nightly = day_start(open + 1) + window + chrono::TimeDelta::minutes(1);
        }
        // Woken at least every ten minutes: the clock may be moved.
        let wait = (nightly - clock.now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(Duration::from_secs(600));
        tokio::select! {
            request = requests.recv() => match request {
                Some((site, day)) => {
                    build(site.clone(), day).await;
                    store.pack_queue().done(&site, day);
                }
                None => return,
            },
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Purges the sites deleted at least `after_secs` ago, checking every tenth
/// of that (and at start). A failure is logged and tried again next time.
async fn purge_deleted_sites(store: Store, clock: SharedClock, after_secs: u64) {
    let after = chrono::TimeDelta::seconds(after_secs as i64);
    let every = Duration::from_secs((after_secs / 10).clamp(1, 60));
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match crate::storage::site_purge::purge_due(&store, clock.now(), after).await {
            Ok(purged) => {
                for (domain, buckets) in purged {
                    tracing::info!(site = %domain, buckets, "deleted site purged");
                }
            }
            Err(e) => {
                tracing::warn!(error = %crate::telemetry::chain(&e), "purging deleted sites failed; trying again later")
            }
        }
    }
}

//! Builds the running application from settings and a connected store.

use actix_web::dev::{Server, ServerHandle};
use actix_web::{web, App, HttpServer};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

use crate::accounts::limiter::LoginLimiter;
use crate::clock::SharedClock;
use crate::ingest::applier::Appliers;
use crate::ingest::{IngestState, IngestStats, SiteDirectory};
use crate::journal::Journal;
use crate::metrics::Histogram;
use crate::preallocation::scheduler::Scheduler;
use crate::settings::public_url_or;
use crate::settings::Settings;
use crate::storage::Store;
use crate::web::state::WebState;

pub struct Application {
    port: u16,
    server: Server,
    journal: Arc<Journal>,
    appliers: Appliers,
    drain: Duration,
    refresher: JoinHandle<()>,
    purger: JoinHandle<()>,
    /// Keeps the visitor salts (`ingest::visitor::Salts::keep`).
    salts: (tokio::sync::watch::Sender<bool>, JoinHandle<()>),
    scheduler: Option<JoinHandle<()>>,
    /// The email sender's rounds, when SMTP is configured.
    email: Option<JoinHandle<()>>,
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
        // The upgrade to site totals: sites whose page buckets predate them
        // get them recomputed once, in the background (reports add up page
        // buckets for a site until it is done). Exact while hits flow.
        let backfill_store = store.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::storage::site_totals::backfill_missing(&backfill_store).await {
                tracing::error!(error = %format!("{e:#}"),
                    "site totals backfill failed; run `tickertape backfill-site-totals`");
            }
            // Then the page summaries of the days that ended since the
            // last run, so that no report waits to make them; at start
            // and every hour (cheap when they are there).
            loop {
                if let Err(e) = crate::reports::page_totals::backfill_all(&backfill_store).await {
                    tracing::warn!(error = %format!("{e:#}"),
                        "page summaries backfill failed; reports make them as they need them");
                }
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        });
        let refresh = settings.ingest.site_refresh_secs.max(1);
        let refresher = directory.spawn_refresher(store.clone(), Duration::from_secs(refresh));
        let purger = spawn_site_purger(
            store.clone(),
            clock.clone(),
            settings.ingest.site_purge_after_secs.max(3 * refresh),
        );
        let ingest = IngestState {
            journal: journal.appender().clone(),
            directory,
            clock,
            stats,
            page_cap: Arc::new(crate::ingest::page_cap::PageCap::new(
                settings.security.page_cap_config(),
            )),
            visitors: Arc::new(crate::ingest::visitor::Visitors::new(
                settings.ingest.visits_config(),
                crate::domain::client_ip::TrustedProxies::new(
                    settings.security.trusted_proxies.clone(),
                ),
            )),
            classifier: Arc::new(crate::ingest::classifier::Classifier::load(
                settings.ingest.geoip_db.clone(),
            )),
            event_cap: Default::default(),
            breakdowns: settings.ingest.breakdowns,
        };
        ingest.visitors.salts.load(&store, ingest.clock.now()).await;
        let (salts_stop, salts_stopped) = tokio::sync::watch::channel(false);
        let salts_keeper = {
            let (visitors, store, clock) =
                (ingest.visitors.clone(), store.clone(), ingest.clock.clone());
            tokio::spawn(async move { visitors.salts.keep(store, clock, salts_stopped).await })
        };

        {
            // Pages the database already has views of stay known across a
            // restart; the pixel never waits for this.
            let (cap, store, now) = (ingest.page_cap.clone(), store.clone(), ingest.clock.now());
            tokio::spawn(async move {
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
        let accounts = &settings.accounts;
        let prealloc = &settings.prealloc;
        let scheduler = Arc::new(Scheduler::new(
            store.clone(),
            ingest.clock.clone(),
            chrono::TimeDelta::minutes(prealloc.prealloc_lead_minutes),
            prealloc.prealloc_threshold,
        ));
        let scheduler_task = prealloc
            .prealloc_schedule
            .then(|| scheduler.clone().spawn());
        let email = Arc::new(
            crate::email::Sender::new(
                store.clone(),
                ingest.clock.clone(),
                settings.email.email_config().map_err(anyhow::Error::msg)?,
                public_url.clone(),
            )
            .map_err(anyhow::Error::msg)?,
        );
        let email_task = email.enabled().then(|| email.clone().spawn());
        let web_state = web::Data::new(WebState {
            store,
            scheduler: prealloc.prealloc_schedule.then_some(scheduler),
            prealloc_threshold: prealloc.prealloc_threshold,
            owners_add_sites: accounts.owners_add_sites,
            owner_max_sites: accounts.owner_max_sites,
            directory: ingest.directory.clone(),
            ingest: ingest.clone(),
            clock: ingest.clock.clone(),
            limiter: LoginLimiter::new(
                accounts.login_max_failures.max(1),
                Duration::from_secs(accounts.login_window_secs.max(1)),
            ),
            secure_cookies: public_url.starts_with("https://"),
            public_url,
            session_lifetime: chrono::TimeDelta::hours(accounts.session_hours.max(1)),
            report_seconds: Histogram::seconds(),
            password_checks: crate::accounts::password::PasswordChecks::new(
                settings.security.password_checks(),
            ),
            trusted_proxies: crate::web::client_ip::TrustedProxies::new(
                settings.security.trusted_proxies.clone(),
            ),
            require_admin_totp: settings.security.require_admin_totp,
            retention,
            share_limit: crate::web::rate_limit::RateLimit::new(
                settings.security.share_requests_per_minute,
                Duration::from_secs(60),
            ),
            bucket_sizes: Default::default(),
            journal: journal.clone(),
            ready_max_backlog_secs: settings.ingest.ready_max_backlog_secs,
            apply: settings.ingest.apply_config(),
            email,
        });
        // The system page's sizes are measured now, not on its first view.
        web_state
            .bucket_sizes
            .refresh(web_state.store.clone(), web_state.clock.clone());
        let ingest_data = web::Data::new(ingest.clone());
        let https = web_state.secure_cookies;
        let server = HttpServer::new(move || {
            App::new()
                // Inside compression: it may render an error page again.
                .wrap(actix_web::middleware::from_fn(crate::web::pages::keep_nav))
                // Pages, CSV and tt.js go out gzip-compressed to clients
                // that accept it (issue 14).
                .wrap(actix_web::middleware::Compress::default())
                .wrap(actix_web::middleware::from_fn(crate::head::head_as_get))
                .wrap(crate::web::security::headers(https))
                .wrap(tracing_actix_web_lite())
                .wrap(tracing_actix_web::TracingLogger::<
                    crate::telemetry::RequestSpan,
                >::new())
                .app_data(ingest_data.clone())
                .app_data(web_state.clone())
                .configure(crate::web::routes)
        })
        .listen(listener)?
        .shutdown_timeout(30)
        .run();
        Ok(Self {
            port,
            server,
            journal,
            appliers,
            drain: Duration::from_secs(settings.ingest.shutdown_drain_secs),
            refresher,
            purger,
            salts: (salts_stop, salts_keeper),
            scheduler: scheduler_task,
            email: email_task,
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

    /// Serves until stopped; then commits every accepted hit to the
    /// journal, applies what the database takes within the drain time, and
    /// leaves the rest in the journal for the next start.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let served = self.server.await;
        self.refresher.abort();
        self.purger.abort();
        let _ = self.salts.0.send(true);
        let _ = self.salts.1.await;
        if let Some(task) = self.scheduler {
            task.abort();
        }
        if let Some(task) = self.email {
            task.abort();
        }
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

/// Binds the listen address (port 0 picks a free one), naming it when it
/// cannot be had.
pub fn bind(settings: &Settings) -> anyhow::Result<TcpListener> {
    TcpListener::bind(settings.listen).map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {}: {e}. Stop what uses it or set TICKERTAPE_LISTEN to another address",
            settings.listen
        )
    })
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

/// Purges the sites deleted at least `after_secs` ago, checking every tenth
/// of that (and at start). A failure is logged and tried again next time.
fn spawn_site_purger(store: Store, clock: SharedClock, after_secs: u64) -> JoinHandle<()> {
    let after = chrono::TimeDelta::seconds(after_secs as i64);
    let every = Duration::from_secs((after_secs / 10).clamp(1, 60));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            match crate::storage::sites::purge_due(&store, clock.now(), after).await {
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
    })
}

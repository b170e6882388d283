//! The state the handlers share: the pixel's ([`IngestState`]) and the web
//! app's ([`WebState`]), each built from the settings.

use actix_web::web;
use std::sync::Arc;
use std::time::Duration;

use crate::accounts::limiter::LoginLimiter;
use crate::clock::SharedClock;
use crate::domain::Retention;
use crate::ingest::{IngestState, IngestStats, SiteDirectory};
use crate::journal::{Appender, Journal};
use crate::metrics::Histogram;
use crate::preallocation::scheduler::Scheduler;
use crate::settings::Settings;
use crate::storage::Store;
use crate::web::state::WebState;

/// The pixel's state: the journal it appends to, the sites, the caps and
/// the visitor rules.
pub fn ingest(
    settings: &Settings,
    journal: Appender,
    directory: SiteDirectory,
    clock: SharedClock,
    stats: Arc<IngestStats>,
) -> IngestState {
    IngestState {
        journal,
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
        property_cap: Arc::new(crate::ingest::event_cap::EventCap::properties()),
        breakdowns: settings.ingest.breakdowns,
        pacing: Default::default(),
    }
}

/// What the web app's state is made of besides the settings.
pub struct WebParts {
    pub store: Store,
    pub ingest: IngestState,
    pub journal: Arc<Journal>,
    /// The preallocation scheduler, when it runs on a schedule.
    pub scheduler: Option<Arc<Scheduler>>,
    pub retention: Retention,
    /// Where browsers reach the app.
    pub public_url: String,
    /// The email sender (its rounds run as a task of the application).
    pub email: Arc<crate::email::Sender>,
}

/// The web app's state: accounts, reports, preallocation, sharing.
pub fn web(settings: &Settings, parts: WebParts) -> anyhow::Result<web::Data<WebState>> {
    let WebParts {
        store,
        ingest,
        journal,
        scheduler,
        retention,
        public_url,
        email,
    } = parts;
    let accounts = &settings.accounts;
    let prealloc = &settings.prealloc;
    let costly = crate::reports::costly::CostlyReads::start(settings.database.read_limits())
        .map_err(|e| anyhow::anyhow!("cannot start the report threads: {e}"))?;
    Ok(web::Data::new(WebState {
        costly: std::sync::Arc::new(costly),
        store,
        scheduler,
        prealloc_threshold: prealloc.prealloc_threshold,
        owners_add_sites: accounts.owners_add_sites,
        owner_max_sites: accounts.owner_max_sites,
        directory: ingest.directory.clone(),
        clock: ingest.clock.clone(),
        ingest,
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
        journal,
        ready_max_backlog_secs: settings.ingest.ready_max_backlog_secs,
        apply: settings.ingest.apply_config(),
        email,
    }))
}

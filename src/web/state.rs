//! What every web handler can reach, passed in as `web::Data<WebState>`.

use chrono::TimeDelta;

use crate::accounts::limiter::LoginLimiter;
use crate::clock::SharedClock;
use crate::ingest::{IngestState, SiteDirectory};
use crate::metrics::Histogram;
use crate::storage::Store;

pub struct WebState {
    pub store: Store,
    pub directory: SiteDirectory,
    pub ingest: IngestState,
    pub clock: SharedClock,
    pub limiter: LoginLimiter,
    pub public_url: String,
    /// Cookies get `Secure` when the public URL is https.
    pub secure_cookies: bool,
    pub session_lifetime: TimeDelta,
    /// Server time of report pages and exports.
    pub report_seconds: Histogram,
    pub journal: std::sync::Arc<crate::journal::Journal>,
    /// `/readyz` fails while the oldest unapplied hit is older than this.
    pub ready_max_backlog_secs: u64,
    /// The write-behind's windows, which the report pages state as each
    /// level's freshness.
    pub apply: crate::ingest::applier::ApplyConfig,
    /// The background preallocation, when enabled (for its next run time).
    pub scheduler: Option<std::sync::Arc<crate::preallocation::scheduler::Scheduler>>,
    pub prealloc_threshold: i64,
    /// Owners may add sites (`TICKERTAPE_OWNERS_ADD_SITES`).
    pub owners_add_sites: bool,
    /// Most sites an owner may own and still add one (`TICKERTAPE_OWNER_MAX_SITES`).
    pub owner_max_sites: u64,
    /// The bound on concurrent argon2id checks.
    pub password_checks: crate::accounts::password::PasswordChecks,
    /// Whose `X-Forwarded-For` is believed for the client address.
    pub trusted_proxies: super::client_ip::TrustedProxies,
    /// Admins must have two-factor login on.
    pub require_admin_totp: bool,
    /// How long each level of buckets is kept (reports switch to a coarser
    /// level where a finer one has expired).
    pub retention: crate::domain::Retention,
    /// Requests to share links, per client address.
    pub share_limit: super::rate_limit::RateLimit,
    /// The bucket collections' sizes for the system page, measured at most
    /// once a minute.
    pub bucket_sizes: std::sync::Arc<crate::storage::system::SizeCache>,
    /// The email sender: unsubscribe links, its figures and counters.
    pub email: std::sync::Arc<crate::email::Sender>,
    /// Where the filtered reports and funnels run, apart from the pixel's
    /// workers, and their limits.
    pub costly: std::sync::Arc<crate::reports::costly::CostlyReads>,
}

impl WebState {
    /// The costly reads (filtered reports, funnels), run apart and bounded.
    pub fn reads(&self) -> crate::reports::isolated::Reads<'_> {
        crate::reports::isolated::Reads {
            store: &self.store,
            costly: Some(&self.costly),
        }
    }
}

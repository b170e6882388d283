//! Configuration, from environment variables (or the same-named flags),
//! each with a default that works on a laptop. `tickertape serve --help`
//! lists them all; the README's table is the same list.

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use secrecy::{ExposeSecret, SecretString};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::journal::AckMode;

mod email;
use crate::storage::{ConnectError, GroupingChoice, StoreOptions, WriteAck};
pub use email::EmailSettings;

/// `TICKERTAPE_ACK_MODE` names the journal's modes; each value's help is
/// what the mode does.
impl ValueEnum for AckMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[AckMode::Durable, AckMode::Fast]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            AckMode::Durable => PossibleValue::new("durable")
                .help("After the hit is synced (`fdatasync`) to the local journal"),
            AckMode::Fast => PossibleValue::new("fast").help(
                "As soon as the hit is queued for the journal (a crash of the app loses the hits of the last few milliseconds)",
            ),
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseSettings {
    /// MongoDB connection string. Unset: `serve` runs an embedded local
    /// database under the data directory.
    #[arg(long = "mongodb-uri", env = "MONGODB_URI", value_parser = parse_secret, hide_env_values = true)]
    pub uri: Option<SecretString>,

    /// Database name.
    #[arg(
        long = "database",
        env = "TICKERTAPE_DATABASE",
        default_value = "tickertape"
    )]
    pub name: String,

    /// Write concern `w` for bucket writes: `majority` or a number.
    #[arg(long, env = "TICKERTAPE_WRITE_CONCERN", default_value = "majority")]
    pub write_concern: String,

    /// How long one write may wait for its write concern, in milliseconds.
    #[arg(long, env = "TICKERTAPE_WRITE_TIMEOUT_MS", default_value_t = 10_000)]
    pub write_timeout_ms: u64,

    /// Read preference of report queries: primary, primaryPreferred,
    /// secondary, secondaryPreferred or nearest.
    #[arg(
        long,
        env = "TICKERTAPE_READ_PREFERENCE",
        default_value = "secondaryPreferred"
    )]
    pub read_preference: String,

    /// Longest replication lag a secondary may have to serve reports, in
    /// seconds (at least 90, MongoDB's minimum). Unset: 90 when the read
    /// preference allows secondaries.
    #[arg(long, env = "TICKERTAPE_MAX_STALENESS_SECS")]
    pub max_staleness_secs: Option<u64>,

    /// How long a request waits for a reachable database server (server
    /// selection) before it fails, in milliseconds; pages then answer 503.
    /// Also the connect timeout. A `serverSelectionTimeoutMS` or
    /// `connectTimeoutMS` in the URI wins. The write path retries failed
    /// batches on its own schedule, so it only sees failures sooner.
    #[arg(long, env = "TICKERTAPE_DB_TIMEOUT_MS", default_value_t = 3_000)]
    pub db_timeout_ms: u64,

    /// The longest one report query may run on the server (`maxTimeMS`),
    /// in milliseconds; a report that would take longer answers 503. Also
    /// the time budget of a whole filtered report or funnel (its reads and
    /// its computation), stopped when it runs out.
    #[arg(long, env = "TICKERTAPE_REPORT_MAX_TIME_MS", default_value_t = 15_000)]
    pub report_max_time_ms: u64,

    /// Threads that compute the filtered reports and funnels, apart from
    /// the ones that answer the pixel and the pages (at a lower CPU
    /// priority).
    #[arg(long, env = "TICKERTAPE_REPORT_THREADS", default_value_t = 2)]
    pub report_threads: usize,

    /// Filtered reports and funnels computed at once, all sites together;
    /// one more waits up to TICKERTAPE_REPORT_QUEUE_MS, then gets 503.
    #[arg(long, env = "TICKERTAPE_REPORT_CONCURRENCY", default_value_t = 4)]
    pub report_concurrency: usize,

    /// Filtered reports and funnels computed at once for one site.
    #[arg(long, env = "TICKERTAPE_REPORT_SITE_CONCURRENCY", default_value_t = 2)]
    pub report_site_concurrency: usize,

    /// How long a filtered report or funnel over a concurrency limit
    /// waits for its turn before 503, in milliseconds.
    #[arg(long, env = "TICKERTAPE_REPORT_QUEUE_MS", default_value_t = 2_000)]
    pub report_queue_ms: u64,

    /// Megabytes of visits one filtered report or funnel may hold in
    /// memory; past it the report answers 503 (a shorter range or another
    /// filter reads less).
    #[arg(long, env = "TICKERTAPE_REPORT_MAX_READ_MB", default_value_t = 128)]
    pub report_max_read_mb: u64,

    /// Where site reports add buckets up: `server` (`$group` on the
    /// database, which ships only the sums), `app` (one projected scan
    /// summed here), or `auto`: `app` on secantusd-rs, where it is measured
    /// faster (docs/benchmarks.md), `server` on MongoDB.
    #[arg(long, env = "TICKERTAPE_REPORT_GROUPING", default_value = "auto")]
    pub report_grouping: String,

    /// Connections the driver keeps per server: at most (`maxPoolSize`)
    /// and at least (`minPoolSize`). A dashboard runs up to five queries
    /// at once and each journal lane one transaction, so 32 serves about
    /// six concurrent report requests without queueing; the minimum keeps
    /// the write path's connection warm. Values in the URI win.
    #[arg(long, env = "TICKERTAPE_DB_MAX_POOL", default_value_t = 32)]
    pub max_pool_size: u32,
    #[arg(long, env = "TICKERTAPE_DB_MIN_POOL", default_value_t = 2)]
    pub min_pool_size: u32,
}

#[derive(Debug, Clone, Args)]
pub struct LocalDbSettings {
    /// Where local files live: the embedded database (`<dir>/db`) and the
    /// journal (`<dir>/journal`, unless TICKERTAPE_JOURNAL_DIR is set).
    #[arg(long, env = "TICKERTAPE_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,

    /// The local database server binary. Default: `.tools/bin/secantusd-rs`
    /// if present, else `secantusd-rs` on the PATH.
    #[arg(long, env = "TICKERTAPE_LOCALDB_BIN")]
    pub localdb_bin: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct IngestSettings {
    /// When a counted hit is answered: `durable` (after it is synced to the
    /// local journal) or `fast` (once it is queued for the journal).
    #[arg(
        long,
        env = "TICKERTAPE_ACK_MODE",
        value_enum,
        default_value = "durable"
    )]
    pub ack_mode: AckMode,

    /// The write-ahead journal's directory (default: `<data dir>/journal`).
    /// One process per directory.
    #[arg(long, env = "TICKERTAPE_JOURNAL_DIR")]
    pub journal_dir: Option<PathBuf>,

    /// Journal lanes (each with its own files, group commit and applier) of
    /// a new journal; an existing one keeps its count.
    #[arg(long, env = "TICKERTAPE_JOURNAL_LANES", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub journal_lanes: u32,

    /// Disk the journal may use, in MiB; beyond it the pixel answers 503
    /// `journal-full` (only reached when the database has been away).
    #[arg(long, env = "TICKERTAPE_JOURNAL_BUDGET_MB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub journal_budget_mb: u64,

    /// Size of one journal segment file, in MiB.
    #[arg(long, env = "TICKERTAPE_JOURNAL_SEGMENT_MB", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub journal_segment_mb: u64,

    /// Most seconds a journal segment file is appended to. An older one is
    /// closed (at the next hit, or within a quarter of this when none
    /// comes) and deleted once applied, so no applied hit stays on disk
    /// much longer than this (at most 240: the privacy promise says 5
    /// minutes).
    #[arg(long, env = "TICKERTAPE_JOURNAL_SEGMENT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=240))]
    pub journal_segment_secs: u64,

    /// Hits that may wait for the journal writers, over all lanes; beyond it
    /// the pixel answers 503 `queue-full`.
    #[arg(long, env = "TICKERTAPE_QUEUE_CAPACITY", default_value_t = 100_000)]
    pub queue_capacity: usize,

    /// MiB those hits may take as journaled (about twice that in memory),
    /// whichever bound comes first; beyond it the pixel answers 503
    /// `queue-full`.
    #[arg(long, env = "TICKERTAPE_QUEUE_MB", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub queue_mb: u64,

    /// How long the write-behind gathers hits for the minute buckets at
    /// light load, in ms (behind, a batch takes what is waiting at once).
    #[arg(long, env = "TICKERTAPE_APPLY_WINDOW_MS", default_value_t = 1000)]
    pub apply_window_ms: u64,

    /// Most hits in one applied minutes batch (a batch this large is
    /// applied at once; it also ends at TICKERTAPE_APPLY_MAX_BUCKETS buckets).
    #[arg(long, env = "TICKERTAPE_APPLY_MAX_HITS", default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub apply_max_hits: u64,

    /// How long the hour and day buckets' hits are gathered at light load,
    /// in ms: the longer, the fewer statements per hit, and the longer
    /// hours and days trail the minutes.
    #[arg(long, env = "TICKERTAPE_ROLLUPS_WINDOW_MS", default_value_t = 5_000)]
    pub rollups_window_ms: u64,

    /// Most hits in one batch of hour and day buckets.
    #[arg(long, env = "TICKERTAPE_ROLLUPS_MAX_HITS", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub rollups_max_hits: u64,

    /// Most buckets in one minutes or rollups batch (a batch this large is
    /// applied at once): bounds a transaction and the appliers' memory
    /// (about 300 bytes a bucket) whatever the pages a backlog touches.
    /// Large enough that a backlog over 10,000 pages is merged per page
    /// (docs/design/applier.md, "Measured: every stream at saturation").
    #[arg(long, env = "TICKERTAPE_APPLY_MAX_BUCKETS", default_value_t = 40_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub apply_max_buckets: u64,

    /// How long the breakdowns applier (sources, devices, countries,
    /// campaigns, events) gathers hits at light load before applying them,
    /// in ms. Behind, a batch takes everything already journaled, so the
    /// window only sets how fresh the breakdowns are when traffic is light.
    #[arg(long, env = "TICKERTAPE_SOURCES_WINDOW_MS", default_value_t = 2_000)]
    pub sources_window_ms: u64,

    /// A MaxMind-format country database (GeoLite2-Country, DB-IP, or the
    /// ip-location-db file `make` installs into `.tools/geoip`, the
    /// default). A missing or unreadable file counts countries as
    /// "unknown", with a warning on the admin system page.
    #[arg(long, env = "TICKERTAPE_GEOIP_DB")]
    pub geoip_db: Option<PathBuf>,

    /// Count views in the breakdowns (source, campaign, browser, OS,
    /// device, country). `false` journals views with none of them: the
    /// views-only path (benchmarks compare the two), or an operator who
    /// wants no classification at all. Custom events are counted either way.
    #[arg(long, env = "TICKERTAPE_BREAKDOWNS", default_value_t = true, action = clap::ArgAction::Set)]
    pub breakdowns: bool,

    /// Write the visit store (each visit's dimensions and its pages and
    /// events in order, as parts a batch writes), which filtered reports and funnels
    /// read. `false` writes nothing there (its applier only moves its
    /// journal progress): filters and funnels then have no visits for
    /// that time, and the unfiltered reports are unchanged.
    #[arg(long, env = "TICKERTAPE_VISIT_STORE", default_value_t = true, action = clap::ArgAction::Set)]
    pub visit_store: bool,

    /// How long the visit store's applier gathers hits at light load, in
    /// ms: a visit's hits within one window are one statement.
    #[arg(long, env = "TICKERTAPE_VISITS_WINDOW_MS", default_value_t = 5_000)]
    pub visits_window_ms: u64,

    /// Most hits in one batch of the visit store.
    #[arg(long, env = "TICKERTAPE_VISITS_MAX_HITS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub visits_max_hits: u64,

    /// Most hits in one batch of sources (merged per page, hour and source
    /// as they are read, so the batch holds only the buckets it touches).
    #[arg(long, env = "TICKERTAPE_SOURCES_MAX_HITS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub sources_max_hits: u64,

    /// On shutdown, how long to keep applying the backlog before leaving the
    /// rest in the journal for the next start, in seconds.
    #[arg(long, env = "TICKERTAPE_SHUTDOWN_DRAIN_SECS", default_value_t = 10)]
    pub shutdown_drain_secs: u64,

    /// `/readyz` answers 503 while the oldest unapplied hit is older than
    /// this, in seconds.
    #[arg(long, env = "TICKERTAPE_READY_MAX_BACKLOG_SECS", default_value_t = 30)]
    pub ready_max_backlog_secs: u64,

    /// How often the in-memory site directory is reloaded, in seconds.
    #[arg(long, env = "TICKERTAPE_SITE_REFRESH_SECS", default_value_t = 5)]
    pub site_refresh_secs: u64,

    /// How long after a site is deleted its buckets are purged, in seconds
    /// (at least three directory refreshes): until then every instance
    /// drops the site and its journaled hits are skipped, so no late hit
    /// re-creates a bucket.
    #[arg(long, env = "TICKERTAPE_SITE_PURGE_AFTER_SECS", default_value_t = 600)]
    pub site_purge_after_secs: u64,

    /// Most open visits the pixel keeps in memory (a visitor's last hit,
    /// for 30 minutes); beyond it the least recently seen are forgotten
    /// first, and their next hit starts a new visit.
    #[arg(long, env = "TICKERTAPE_OPEN_VISITS", default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub open_visits: u64,

    /// Most memory the open visits may take, in MiB (about: the entries
    /// and the pages they name).
    #[arg(long, env = "TICKERTAPE_OPEN_VISITS_MB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub open_visits_mb: u64,
}

#[derive(Debug, Clone, Args)]
pub struct AccountSettings {
    /// How long a login lasts, in hours.
    #[arg(long, env = "TICKERTAPE_SESSION_HOURS", default_value_t = 336)]
    pub session_hours: i64,

    /// Failed logins allowed per account and per client address within the
    /// window before further attempts are refused.
    #[arg(long, env = "TICKERTAPE_LOGIN_MAX_FAILURES", default_value_t = 5)]
    pub login_max_failures: usize,

    /// The login rate-limit window, in seconds.
    #[arg(long, env = "TICKERTAPE_LOGIN_WINDOW_SECS", default_value_t = 900)]
    pub login_window_secs: u64,

    /// Let owners add sites themselves (they become the new site's owner).
    #[arg(long, env = "TICKERTAPE_OWNERS_ADD_SITES", default_value_t = false, action = clap::ArgAction::Set)]
    pub owners_add_sites: bool,

    /// Most sites an owner may own and still add another one.
    #[arg(long, env = "TICKERTAPE_OWNER_MAX_SITES", default_value_t = 20)]
    pub owner_max_sites: u64,
}

#[derive(Debug, Clone, Args)]
pub struct PreallocSettings {
    /// Run the hourly preallocation in the background.
    #[arg(long, env = "TICKERTAPE_PREALLOC_SCHEDULE", default_value_t = true, action = clap::ArgAction::Set)]
    pub prealloc_schedule: bool,

    /// How long before each hour the next hour is preallocated, in minutes.
    #[arg(long, env = "TICKERTAPE_PREALLOC_LEAD_MINUTES", default_value_t = 10, value_parser = clap::value_parser!(i64).range(0..=59))]
    pub prealloc_lead_minutes: i64,

    /// Views in the current hour that make a page active (preallocated).
    #[arg(long, env = "TICKERTAPE_PREALLOC_THRESHOLD", default_value_t = crate::preallocation::DEFAULT_THRESHOLD, value_parser = clap::value_parser!(i64).range(1..))]
    pub prealloc_threshold: i64,
}

/// Limits that protect the web app from abuse.
#[derive(Debug, Clone, Args)]
pub struct SecuritySettings {
    /// Password checks (argon2id, about 19 MiB each) that may run at once;
    /// logins beyond it wait up to 2 s, then get 503. Default: the number of
    /// cores.
    #[arg(long, env = "TICKERTAPE_PASSWORD_CHECKS")]
    pub password_checks: Option<usize>,

    /// Reverse proxies whose `X-Forwarded-For` is believed, as a
    /// comma-separated list of IP addresses. Unset: the peer address is the
    /// client address.
    #[arg(long, env = "TICKERTAPE_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,

    /// New pages one site may gain per hour on their first view; beyond
    /// it a new page gets its own buckets on its second view (within the
    /// repeat budget), and views until then count under `/(other)`. 0: no
    /// cap at all.
    #[arg(long, env = "TICKERTAPE_NEW_PAGES_PER_HOUR", default_value_t = 1_000)]
    pub new_pages_per_hour: u64,

    /// New pages one site may gain per hour on their second view.
    #[arg(
        long,
        env = "TICKERTAPE_REPEAT_PAGES_PER_HOUR",
        default_value_t = 100_000
    )]
    pub repeat_pages_per_hour: u64,

    /// New pages the whole instance may gain per hour, over all sites.
    #[arg(
        long,
        env = "TICKERTAPE_INSTANCE_NEW_PAGES_PER_HOUR",
        default_value_t = 1_000_000
    )]
    pub instance_new_pages_per_hour: u64,

    /// Pages seen once that the instance remembers while they wait for a
    /// second view (8 bytes each).
    #[arg(long, env = "TICKERTAPE_PAGE_CANDIDATES", default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1..=(1 << 26)))]
    pub page_candidates: u64,

    /// Admitted pages the instance remembers over all sites (about 24
    /// bytes each); beyond it new pages count under `/(other)` until old
    /// ones age out (48 hours without views).
    #[arg(long, env = "TICKERTAPE_MAX_KNOWN_PAGES", default_value_t = 2_000_000)]
    pub max_known_pages: u64,

    /// Admins must turn on two-factor login (TOTP) before they can use any
    /// page but its setup.
    #[arg(long, env = "TICKERTAPE_REQUIRE_ADMIN_TOTP", default_value_t = false, action = clap::ArgAction::Set)]
    pub require_admin_totp: bool,

    /// Requests per minute one client address may make to share links
    /// (`/share/…`); beyond it, 429 until the minute is over.
    #[arg(long, env = "TICKERTAPE_SHARE_REQUESTS_PER_MINUTE", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
    pub share_requests_per_minute: u32,
}

impl SecuritySettings {
    pub fn password_checks(&self) -> usize {
        self.password_checks.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        })
    }
}

/// How long each level of buckets is kept, enforced by TTL indexes on
/// `timestamp` that the database applies itself; 0 keeps them for ever.
/// Applied (created, changed with `collMod`, or dropped) on every start and
/// by `tickertape setup`.
#[derive(Debug, Clone, Args)]
pub struct RetentionSettings {
    /// Days minute buckets (per-second detail) are kept.
    #[arg(long, env = "TICKERTAPE_RETAIN_MINUTE_DAYS", default_value_t = 90)]
    pub retain_minute_days: u32,

    /// Days hour buckets are kept (at least as long as minute buckets).
    #[arg(long, env = "TICKERTAPE_RETAIN_HOUR_DAYS", default_value_t = 730)]
    pub retain_hour_days: u32,

    /// Days day buckets are kept (at least as long as hour buckets).
    #[arg(long, env = "TICKERTAPE_RETAIN_DAY_DAYS", default_value_t = 0)]
    pub retain_day_days: u32,

    /// Days visits are kept in the visit store (filters and funnels),
    /// counted from their start; 0 keeps them for ever. Independent of
    /// the buckets: past it, filtered reports have no visits to read.
    #[arg(long, env = "TICKERTAPE_VISIT_RETENTION_DAYS", default_value_t = 400, value_parser = clap::value_parser!(u32).range(0..=36_500))]
    pub visit_retention_days: u32,
}

impl RetentionSettings {
    pub fn retention(&self) -> Result<crate::domain::Retention, crate::domain::RetentionError> {
        crate::domain::Retention::parse(
            self.retain_minute_days,
            self.retain_hour_days,
            self.retain_day_days,
        )
    }

    /// The visit store's retention: `None` for ever.
    pub fn visit_retention(&self) -> Option<u32> {
        (self.visit_retention_days > 0).then_some(self.visit_retention_days)
    }

    pub fn set(&mut self, r: crate::domain::Retention) {
        use crate::domain::Resolution;
        self.retain_minute_days = r.days(Resolution::Minute).unwrap_or(0);
        self.retain_hour_days = r.days(Resolution::Hour).unwrap_or(0);
        self.retain_day_days = r.days(Resolution::Day).unwrap_or(0);
    }
}

#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// Address the web server listens on (port 0 picks a free port).
    #[arg(long, env = "TICKERTAPE_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,

    /// The URL visitors' browsers reach this server at, used in the embed
    /// snippets (default: `http://` + the listen address).
    #[arg(long, env = "TICKERTAPE_PUBLIC_URL")]
    pub public_url: Option<String>,

    #[command(flatten)]
    pub database: DatabaseSettings,

    #[command(flatten)]
    pub local_db: LocalDbSettings,

    #[command(flatten)]
    pub ingest: IngestSettings,

    #[command(flatten)]
    pub accounts: AccountSettings,

    #[command(flatten)]
    pub prealloc: PreallocSettings,

    #[command(flatten)]
    pub security: SecuritySettings,

    #[command(flatten)]
    pub retention: RetentionSettings,

    #[command(flatten)]
    pub email: EmailSettings,
}

pub fn public_url_or(configured: Option<&str>, listen: SocketAddr) -> String {
    match configured {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{listen}"),
    }
}

fn parse_secret(raw: &str) -> Result<SecretString, String> {
    Ok(SecretString::from(raw.to_owned()))
}

impl DatabaseSettings {
    pub fn uri(&self) -> Option<&str> {
        self.uri.as_ref().map(|s| s.expose_secret())
    }

    /// What the store connects with; refuses a setting that cannot work
    /// before any server is asked.
    pub fn store_options(&self) -> Result<StoreOptions, ConnectError> {
        Ok(StoreOptions {
            database: self.name.clone(),
            write_ack: WriteAck::parse(&self.write_concern)?,
            write_timeout: Duration::from_millis(self.write_timeout_ms),
            report_reads: self
                .report_reads()
                .map_err(ConnectError::BadReadPreference)?,
            server_timeout: Duration::from_millis(self.db_timeout_ms),
            report_max_time: Duration::from_millis(self.report_max_time_ms),
            grouping: GroupingChoice::parse(&self.report_grouping)?,
            max_pool_size: self.max_pool_size,
            min_pool_size: self.min_pool_size,
        })
    }
}

impl DatabaseSettings {
    /// The bounds of the filtered reports and funnels.
    pub fn read_limits(&self) -> crate::reports::costly::ReadLimits {
        crate::reports::costly::ReadLimits {
            threads: self.report_threads.max(1),
            in_all: self.report_concurrency.max(1),
            per_site: self.report_site_concurrency.max(1),
            queue_wait: Duration::from_millis(self.report_queue_ms),
            time_budget: Duration::from_millis(self.report_max_time_ms.max(1)),
            max_bytes: self.report_max_read_mb.max(1) << 20,
        }
    }

    /// The read preference report queries use, validated.
    pub fn report_reads(&self) -> Result<mongodb::options::ReadPreference, String> {
        use mongodb::options::{ReadPreference, ReadPreferenceOptions};
        let staleness = match self.max_staleness_secs {
            Some(s) if s < 90 => {
                return Err(format!(
                    "TICKERTAPE_MAX_STALENESS_SECS must be at least 90 (MongoDB's minimum), got {s}"
                ))
            }
            Some(s) => Some(Duration::from_secs(s)),
            // A bound by default: without one, a secondary hours behind
            // would still serve reports.
            None if self.read_preference != "primary" => Some(Duration::from_secs(90)),
            None => None,
        };
        let options = ReadPreferenceOptions::builder()
            .max_staleness(staleness)
            .build();
        let options = Some(options);
        Ok(match self.read_preference.as_str() {
            "primary" if staleness.is_some() => {
                return Err("a max staleness cannot be combined with the primary read preference".into())
            }
            "primary" => ReadPreference::Primary,
            "primaryPreferred" => ReadPreference::PrimaryPreferred { options },
            "secondary" => ReadPreference::Secondary { options },
            "secondaryPreferred" => ReadPreference::SecondaryPreferred { options },
            "nearest" => ReadPreference::Nearest { options },
            other => {
                return Err(format!(
                    "unknown read preference {other:?}: use primary, primaryPreferred, secondary, secondaryPreferred or nearest"
                ))
            }
        })
    }
}

impl IngestSettings {
    pub fn visits_config(&self) -> crate::ingest::visits::VisitsConfig {
        crate::ingest::visits::VisitsConfig {
            max_open: self.open_visits as usize,
            max_bytes: (self.open_visits_mb as usize) << 20,
        }
    }

    pub fn apply_config(&self) -> crate::ingest::applier::ApplyConfig {
        crate::ingest::applier::ApplyConfig {
            window: Duration::from_millis(self.apply_window_ms),
            max_hits: self.apply_max_hits as usize,
            rollups_window: Duration::from_millis(self.rollups_window_ms),
            rollups_max_hits: self.rollups_max_hits as usize,
            sources_window: Duration::from_millis(self.sources_window_ms),
            sources_max_hits: self.sources_max_hits as usize,
            visits_window: Duration::from_millis(self.visits_window_ms),
            visits_max_hits: self.visits_max_hits as usize,
            visit_store: self.visit_store,
            max_buckets: self.apply_max_buckets as usize,
        }
    }
}

impl SecuritySettings {
    pub fn page_cap_config(&self) -> crate::ingest::page_cap::CapConfig {
        crate::ingest::page_cap::CapConfig {
            first_sight_per_hour: self.new_pages_per_hour,
            repeat_per_hour: self.repeat_pages_per_hour,
            instance_per_hour: self.instance_new_pages_per_hour,
            candidates: self.page_candidates as usize,
            max_known: self.max_known_pages,
        }
    }
}

impl Settings {
    pub fn public_url(&self) -> String {
        public_url_or(self.public_url.as_deref(), self.listen)
    }

    pub fn journal_config(&self) -> crate::journal::JournalConfig {
        let i = &self.ingest;
        crate::journal::JournalConfig {
            dir: i
                .journal_dir
                .clone()
                .unwrap_or_else(|| self.local_db.data_dir.join("journal")),
            lanes: i.journal_lanes,
            segment_bytes: i.journal_segment_mb << 20,
            segment_max_age: std::time::Duration::from_secs(i.journal_segment_secs),
            budget_bytes: i.journal_budget_mb << 20,
            queue_capacity: i.queue_capacity,
            queue_bytes: i.queue_mb << 20,
            ack_mode: i.ack_mode,
        }
    }

    /// The settings with every default, as if no variable were set; tests
    /// start from here and change what they need.
    pub fn defaults() -> Self {
        use clap::{FromArgMatches, Parser};
        #[derive(Parser)]
        struct Probe {
            #[command(flatten)]
            settings: Settings,
        }
        let cmd = <Probe as clap::CommandFactory>::command();
        // Build from defaults only: no argv, and env lookups ignored.
        let cmd = cmd
            .get_arguments()
            .map(|a| a.clone().env(None::<&str>))
            .fold(clap::Command::new("probe"), |c, a| c.arg(a));
        let matches = cmd.get_matches_from(["probe"]);
        Probe::from_arg_matches(&matches)
            .expect("defaults parse")
            .settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ignore_the_environment() {
        let s = Settings::defaults();
        assert_eq!(s.listen.port(), 8000);
        assert_eq!(s.database.name, "tickertape");
        assert!(s.database.uri.is_none());
        assert_eq!(s.ingest.ack_mode, AckMode::Durable);
        assert_eq!(s.database.write_concern, "majority");
        assert_eq!(s.prealloc.prealloc_threshold, 60, "hot pages only");
        assert_eq!(s.database.report_grouping, "auto");
        assert_eq!(
            (s.database.max_pool_size, s.database.min_pool_size),
            (32, 2)
        );
        let journal = s.journal_config();
        assert_eq!(journal.dir, PathBuf::from("data/journal"));
        assert_eq!(journal.budget_bytes, 1 << 30);
    }

    #[test]
    fn report_reads_default_to_secondary_preferred_and_check_staleness() {
        use mongodb::options::ReadPreference;
        let mut db = Settings::defaults().database;
        match db.report_reads().unwrap() {
            ReadPreference::SecondaryPreferred { options } => assert_eq!(
                options.unwrap().max_staleness,
                Some(Duration::from_secs(90)),
                "bounded by default"
            ),
            other => panic!("{other:?}"),
        }
        db.max_staleness_secs = Some(89);
        assert!(db.report_reads().unwrap_err().contains("at least 90"));
        db.max_staleness_secs = Some(120);
        match db.report_reads().unwrap() {
            ReadPreference::SecondaryPreferred { options } => {
                assert_eq!(
                    options.unwrap().max_staleness,
                    Some(Duration::from_secs(120))
                )
            }
            other => panic!("{other:?}"),
        }
        db.read_preference = "primary".into();
        assert!(db.report_reads().is_err());
        db.max_staleness_secs = None;
        assert!(matches!(db.report_reads(), Ok(ReadPreference::Primary)));
        db.read_preference = "fastest".into();
        assert!(db
            .report_reads()
            .unwrap_err()
            .contains("unknown read preference"));
    }

    #[test]
    fn store_options_refuse_what_cannot_work_before_connecting() {
        let mut db = Settings::defaults().database;
        let options = db.store_options().unwrap();
        assert_eq!(options.write_ack, WriteAck::Majority);
        assert_eq!(options.server_timeout, Duration::from_secs(3));
        assert_eq!(options.report_max_time, Duration::from_secs(15));
        assert_eq!(options.grouping, GroupingChoice::Auto);
        db.write_concern = "0".into();
        assert!(matches!(
            db.store_options(),
            Err(ConnectError::BadWriteConcern(w)) if w == "0"
        ));
        db.write_concern = "2".into();
        db.report_grouping = "fast".into();
        assert!(matches!(
            db.store_options(),
            Err(ConnectError::BadSetting(_))
        ));
        db.report_grouping = "app".into();
        db.max_staleness_secs = Some(10);
        assert!(matches!(
            db.store_options(),
            Err(ConnectError::BadReadPreference(_))
        ));
    }

    #[test]
    fn ack_mode_values_name_the_journals_modes() {
        assert_eq!(AckMode::from_str("durable", false), Ok(AckMode::Durable));
        assert_eq!(AckMode::from_str("fast", false), Ok(AckMode::Fast));
        assert!(AckMode::from_str("sometimes", false).is_err());
    }

    #[test]
    fn the_uri_is_not_printed_by_debug() {
        let mut s = Settings::defaults();
        s.database.uri = Some(SecretString::from("mongodb://user:hunter2@h/".to_owned()));
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}

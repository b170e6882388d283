//! Everything that talks to MongoDB.

pub mod api_tokens;
pub mod breakdown_reads;
pub mod breakdowns;
pub mod bucket_writer;
pub mod buckets;
pub mod clear;
pub mod day_visitors;
pub mod email;
pub mod funnels;
pub mod imported_properties;
pub mod imported_reads;
pub mod imports;
pub mod kept_breakdowns;
pub mod last_use;
pub mod page_summaries;
pub mod prealloc;
pub mod preparation;
pub mod progress;
pub mod renames;
pub mod report_reads;
pub mod retention;
pub mod salts;
pub mod schema;
pub mod sessions;
pub mod sharding;
pub mod share_links;
pub mod site_purge;
pub mod site_totals;
pub mod sites;
pub mod stored_dates;
pub mod system;
pub mod totp;
pub mod txn;
pub mod update;
pub mod users;
pub mod values;
pub mod visit_days;
pub mod visit_log;
pub mod visit_packs;
pub mod visit_reads;

use bson::{doc, Document};
use mongodb::options::{
    Acknowledgment, ClientOptions, DatabaseOptions, ReadPreference, SelectionCriteria, WriteConcern,
};
use mongodb::{Client, Database};
use std::time::Duration;

pub use crate::domain::Resolution;
pub use buckets::{zero_filled, Bucket, Increments, Subject};

/// Where site reports add buckets up (see `TICKERTAPE_REPORT_GROUPING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// `$group` on the server: only the sums cross the network.
    Server,
    /// One projected scan, summed in the app.
    App,
}

/// `TICKERTAPE_REPORT_GROUPING`: a fixed [`Grouping`], or `auto`, which
/// follows the server once connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupingChoice {
    Auto,
    Fixed(Grouping),
}

impl GroupingChoice {
    pub fn parse(setting: &str) -> Result<Self, ConnectError> {
        match setting {
            "server" => Ok(Self::Fixed(Grouping::Server)),
            "app" => Ok(Self::Fixed(Grouping::App)),
            "auto" => Ok(Self::Auto),
            other => Err(ConnectError::BadSetting(format!(
                "TICKERTAPE_REPORT_GROUPING must be auto, server or app, not {other:?}"
            ))),
        }
    }

    /// `auto` follows the server: the local server (secantusd-rs, which
    /// names itself in `buildInfo.secantusVersion`) runs a `$group` over
    /// thousands of buckets slower than it streams them.
    pub fn resolve(self, build_info: &Document) -> Grouping {
        match self {
            Self::Fixed(g) => g,
            Self::Auto if build_info.contains_key("secantusVersion") => Grouping::App,
            Self::Auto => Grouping::Server,
        }
    }
}

/// `w` of writes: `majority` or a number of nodes, at least 1. `w: 0`
/// would acknowledge nothing: an unknown outcome on every write, which the
/// write path cannot resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAck {
    Majority,
    Nodes(std::num::NonZeroU32),
}

impl WriteAck {
    pub fn parse(setting: &str) -> Result<Self, ConnectError> {
        if setting == "majority" {
            return Ok(Self::Majority);
        }
        match setting
            .parse::<u32>()
            .ok()
            .and_then(std::num::NonZeroU32::new)
        {
            Some(n) => Ok(Self::Nodes(n)),
            None => Err(ConnectError::BadWriteConcern(setting.to_owned())),
        }
    }

    fn field(self) -> bson::Bson {
        match self {
            Self::Majority => bson::Bson::String("majority".into()),
            Self::Nodes(n) => bson::Bson::Int32(n.get() as i32),
        }
    }

    fn acknowledgment(self) -> Acknowledgment {
        match self {
            Self::Majority => Acknowledgment::Majority,
            Self::Nodes(n) => Acknowledgment::Nodes(n.get()),
        }
    }

    /// The write concern of every commit: this `w` with the journal
    /// (`j: true`), so an acknowledged commit survives a crash of the server.
    fn commit_concern(self, timeout: Duration) -> WriteConcern {
        WriteConcern::builder()
            .w(self.acknowledgment())
            .journal(true)
            .w_timeout(timeout)
            .build()
    }
}

/// Everything [`Store::connect`] needs besides the URI, parsed;
/// `settings` makes it from the environment and flags.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The database's name.
    pub database: String,
    /// `w` of bucket writes and direct writes (always with `j: true`).
    pub write_ack: WriteAck,
    /// How long one write may wait for its write concern.
    pub write_timeout: Duration,
    /// The read preference of report queries.
    pub report_reads: ReadPreference,
    /// Server selection and connect timeout; a value in the URI wins.
    pub server_timeout: Duration,
    /// `maxTimeMS` of every report query.
    pub report_max_time: Duration,
    pub grouping: GroupingChoice,
    /// Connections the driver keeps per server, at most and at least;
    /// values in the URI win.
    pub max_pool_size: u32,
    pub min_pool_size: u32,
}

/// How the server we are connected to is deployed, from its `hello` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    Standalone,
    ReplicaSet { name: String, members: usize },
    Sharded,
}

impl Topology {
    pub fn from_hello(hello: &Document) -> Self {
        if hello.get_str("msg") == Ok("isdbgrid") {
            Topology::Sharded
        } else if let Ok(name) = hello.get_str("setName") {
            Topology::ReplicaSet {
                name: name.to_owned(),
                members: hello.get_array("hosts").map_or(1, Vec::len),
            }
        } else {
            Topology::Standalone
        }
    }

    /// Whether multi-document transactions are available: the write-behind
    /// needs them (buckets and journal progress commit together).
    pub fn supports_transactions(&self) -> bool {
        !matches!(self, Topology::Standalone)
    }
}

/// The read preference's name as MongoDB spells it.
pub fn read_preference_name(pref: &ReadPreference) -> &'static str {
    match pref {
        ReadPreference::Primary => "primary",
        ReadPreference::PrimaryPreferred { .. } => "primaryPreferred",
        ReadPreference::Secondary { .. } => "secondary",
        ReadPreference::SecondaryPreferred { .. } => "secondaryPreferred",
        ReadPreference::Nearest { .. } => "nearest",
        _ => "custom",
    }
}

/// A connected database: the primary handle for writes, and a separate
/// handle with the configured read preference that only reports use.
#[derive(Clone, Debug)]
pub struct Store {
    client: Client,
    db: Database,
    reports: Database,
    realtime: Database,
    /// `maxTimeMS` of every report query.
    report_max_time: Duration,
    grouping: Grouping,
    read_preference: ReadPreference,
    write_concern: Document,
    commit_write_concern: WriteConcern,
    write_timeout: Duration,
    topology: Topology,
    /// Connected to secantusd-rs (its `buildInfo` says so), whose query
    /// planner deviates from mongod where noted at each use.
    secantus: bool,
    /// How long page-day and page-hour buckets are kept, which page
    /// summaries follow.
    summary_retention: std::sync::Arc<page_summaries::SummaryRetention>,
    /// The last answers of long-range top pages, shared likewise.
    kept_answers: std::sync::Arc<page_summaries::KeptAnswers>,
    /// Visitor estimates of parts of days, shared likewise.
    day_visitors: std::sync::Arc<day_visitors::DayVisitors>,
    /// The last answers of long-range breakdowns, shared likewise.
    kept_breakdowns: std::sync::Arc<kept_breakdowns::KeptBreakdowns>,
    /// What the background backfills left out, shared likewise.
    background: std::sync::Arc<stored_dates::BackgroundStats>,
    /// The closed days the filtered reads want packed, shared likewise.
    pack_queue: std::sync::Arc<visit_packs::PackQueue>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("invalid MongoDB connection string")]
    BadUri(#[source] mongodb::error::Error),
    #[error("the database did not answer `hello`")]
    Unreachable(#[source] mongodb::error::Error),
    #[error("write concern must be `majority` or a number of at least 1, got {0:?}")]
    BadWriteConcern(String),
    #[error("{0}")]
    BadReadPreference(String),
    #[error("{0}")]
    BadSetting(String),
}

impl Store {
    pub async fn connect(config: &StoreOptions, uri: &str) -> Result<Self, ConnectError> {
        let (db_name, write_ack, write_timeout) =
            (&config.database, config.write_ack, config.write_timeout);
        let read_preference = config.report_reads.clone();
        let mut options = ClientOptions::parse(uri)
            .await
            .map_err(ConnectError::BadUri)?;
        options.app_name.get_or_insert_with(|| "tickertape".into());
        // With the database away, the driver's 30 s default selection
        // timeout kept every page hanging for half a minute before failing:
        // fail fast instead (pages answer 503). The write path retries on
        // its own schedule, so a shorter wait per attempt costs it nothing.
        let short = config.server_timeout.max(Duration::from_millis(1));
        options.server_selection_timeout.get_or_insert(short);
        options.connect_timeout.get_or_insert(short);
        options
            .max_pool_size
            .get_or_insert(config.max_pool_size.max(1));
        options.min_pool_size.get_or_insert(config.min_pool_size);
        let client = Client::with_options(options).map_err(ConnectError::BadUri)?;
        let handle = |pref: ReadPreference| {
            client.database_with_options(
                db_name,
                DatabaseOptions::builder()
                    .selection_criteria(SelectionCriteria::ReadPreference(pref))
                    .build(),
            )
        };
        // Pinned to the primary whatever the URI says: sessions, users,
        // sites and run history are read right after they are written, and
        // a lagging secondary would not have them yet (a fresh login would
        // be sent back to the login page).
        let db = handle(ReadPreference::Primary);
        let reports = handle(read_preference.clone());
        // The realtime panels show the current minute: prefer the primary,
        // fall back to a secondary only when there is none.
        let realtime = handle(ReadPreference::PrimaryPreferred { options: None });
        let hello = db
            .run_command(doc! {"hello": 1})
            .await
            .map_err(ConnectError::Unreachable)?;
        let topology = Topology::from_hello(&hello);
        let build_info = db
            .run_command(doc! {"buildInfo": 1})
            .await
            .map_err(ConnectError::Unreachable)?;
        let grouping = config.grouping.resolve(&build_info);
        let w = write_ack.field();
        Ok(Self {
            client,
            db,
            reports,
            realtime,
            read_preference,
            write_concern: doc! { "w": w, "j": true, "wtimeout": write_timeout.as_millis() as i64 },
            commit_write_concern: write_ack.commit_concern(write_timeout),
            write_timeout,
            topology,
            report_max_time: config.report_max_time.max(Duration::from_millis(1)),
            grouping,
            secantus: build_info.contains_key("secantusVersion"),
            summary_retention: Default::default(),
            kept_answers: Default::default(),
            day_visitors: Default::default(),
            kept_breakdowns: Default::default(),
            background: Default::default(),
            pack_queue: Default::default(),
        })
    }

    /// Whether the server is secantusd-rs (see the field).
    pub fn is_secantus(&self) -> bool {
        self.secantus
    }

    /// The day and hour buckets' retention, which page summaries follow.
    pub fn summary_retention(&self) -> &page_summaries::SummaryRetention {
        &self.summary_retention
    }

    pub fn background(&self) -> &stored_dates::BackgroundStats {
        &self.background
    }

    pub fn kept_answers(&self) -> &page_summaries::KeptAnswers {
        &self.kept_answers
    }

    pub fn kept_breakdowns(&self) -> &kept_breakdowns::KeptBreakdowns {
        &self.kept_breakdowns
    }

    pub fn day_visitors(&self) -> &day_visitors::DayVisitors {
        &self.day_visitors
    }

    pub fn pack_queue(&self) -> &visit_packs::PackQueue {
        &self.pack_queue
    }

    pub fn grouping(&self) -> Grouping {
        self.grouping
    }

    pub fn report_max_time(&self) -> Duration {
        self.report_max_time
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn db(&self) -> &Database {
        &self.db
    }

    /// The handle report queries go through: it carries the configured read
    /// preference (default `secondaryPreferred`). Never used for writes.
    pub fn reports(&self) -> &Database {
        &self.reports
    }

    /// The handle for the realtime panels (this minute, the last hour):
    /// `primaryPreferred`, so they are as fresh as the writes.
    pub fn realtime(&self) -> &Database {
        &self.realtime
    }

    pub fn read_preference(&self) -> &ReadPreference {
        &self.read_preference
    }

    /// The write concern of direct writes (preallocation inserts), as a
    /// command field: the configured `w` with `j: true`.
    pub fn write_concern(&self) -> &Document {
        &self.write_concern
    }

    /// The same, for transaction commits and driver helpers.
    pub fn commit_write_concern(&self) -> WriteConcern {
        self.commit_write_concern.clone()
    }

    /// How long one write command may take before its outcome is treated as
    /// unknown: the server gives up waiting for the write concern after
    /// `wtimeout`, so a reply later than that (plus slack) is not coming.
    pub fn attempt_timeout(&self) -> Duration {
        self.write_timeout + Duration::from_secs(1)
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    pub async fn ping(&self) -> Result<(), mongodb::error::Error> {
        self.db.run_command(doc! {"ping": 1}).await.map(|_| ())
    }

    pub fn buckets(&self, resolution: Resolution) -> mongodb::Collection<Bucket> {
        self.db.collection(resolution.collection())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_follows_the_setting_or_the_server() {
        let mongod = doc! {"version": "8.0.4"};
        let local = doc! {"version": "8.2.11", "secantusVersion": "0.5.3"};
        let choose = |setting| {
            GroupingChoice::parse(setting)
                .ok()
                .map(|c| c.resolve(&mongod))
        };
        assert_eq!(choose("auto"), Some(Grouping::Server));
        assert_eq!(choose("app"), Some(Grouping::App));
        let choose = |setting| {
            GroupingChoice::parse(setting)
                .ok()
                .map(|c| c.resolve(&local))
        };
        assert_eq!(choose("auto"), Some(Grouping::App));
        assert_eq!(choose("server"), Some(Grouping::Server));
        assert!(matches!(
            GroupingChoice::parse("fast"),
            Err(ConnectError::BadSetting(m)) if m.contains("auto, server or app")
        ));
    }

    #[test]
    fn write_ack_is_majority_or_at_least_one_node() {
        assert_eq!(WriteAck::parse("majority").unwrap(), WriteAck::Majority);
        let two = WriteAck::parse("2").unwrap();
        assert_eq!(two.field(), bson::Bson::Int32(2));
        assert_eq!(two.acknowledgment(), Acknowledgment::Nodes(2));
        let commit = WriteAck::Majority.commit_concern(Duration::from_secs(10));
        assert_eq!(commit.w, Some(Acknowledgment::Majority));
        assert_eq!(commit.journal, Some(true), "a commit survives a crash");
        assert_eq!(commit.w_timeout, Some(Duration::from_secs(10)));
        for bad in ["0", "-1", "all", ""] {
            assert!(
                matches!(WriteAck::parse(bad), Err(ConnectError::BadWriteConcern(b)) if b == bad),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn topology_from_hello() {
        assert_eq!(
            Topology::from_hello(&doc! {"msg": "isdbgrid", "ok": 1}),
            Topology::Sharded
        );
        assert_eq!(
            Topology::from_hello(
                &doc! {"setName": "rs0", "hosts": ["a:1", "b:1", "c:1"], "isWritablePrimary": true}
            ),
            Topology::ReplicaSet {
                name: "rs0".into(),
                members: 3
            }
        );
        assert_eq!(
            Topology::from_hello(&doc! {"isWritablePrimary": true}),
            Topology::Standalone
        );
        assert!(!Topology::Standalone.supports_transactions());
        assert!(Topology::Sharded.supports_transactions());
        assert!(Topology::ReplicaSet {
            name: "rs0".into(),
            members: 1
        }
        .supports_transactions());
    }
}

//! Everything that talks to MongoDB.

pub mod bucket_writer;
pub mod buckets;
pub mod last_use;
pub mod page_days;
pub mod progress;
pub mod retention;
pub mod schema;
pub mod share_links;
pub mod site_totals;
pub mod sites;
pub mod sources;
pub mod system;
pub mod txn;
pub mod update;
pub mod values;

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

impl Grouping {
    /// `auto` follows the server: the local server (secantusd-rs, which
    /// names itself in `buildInfo.secantusVersion`) runs a `$group` over
    /// thousands of buckets slower than it streams them.
    pub fn choose(setting: &str, build_info: &Document) -> Result<Self, String> {
        match setting {
            "server" => Ok(Grouping::Server),
            "app" => Ok(Grouping::App),
            "auto" if build_info.contains_key("secantusVersion") => Ok(Grouping::App),
            "auto" => Ok(Grouping::Server),
            other => Err(format!(
                "TICKERTAPE_REPORT_GROUPING must be auto, server or app, not {other:?}"
            )),
        }
    }
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
    /// Top pages of whole past days, shared by every clone of the store.
    page_days: std::sync::Arc<page_days::PageDays>,
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
    pub async fn connect(
        settings: &crate::settings::DatabaseSettings,
        uri: &str,
    ) -> Result<Self, ConnectError> {
        let read_preference = settings
            .report_reads()
            .map_err(ConnectError::BadReadPreference)?;
        let (db_name, write_concern, write_timeout) = (
            &settings.name,
            settings.write_concern.as_str(),
            settings.write_timeout(),
        );
        let mut options = ClientOptions::parse(uri)
            .await
            .map_err(ConnectError::BadUri)?;
        options.app_name.get_or_insert_with(|| "tickertape".into());
        // With the database away, the driver's 30 s default selection
        // timeout kept every page hanging for half a minute before failing:
        // fail fast instead (pages answer 503). The write path retries on
        // its own schedule, so a shorter wait per attempt costs it nothing.
        let short = Duration::from_millis(settings.db_timeout_ms.max(1));
        options.server_selection_timeout.get_or_insert(short);
        options.connect_timeout.get_or_insert(short);
        options
            .max_pool_size
            .get_or_insert(settings.max_pool_size.max(1));
        options.min_pool_size.get_or_insert(settings.min_pool_size);
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
        let grouping = Grouping::choose(&settings.report_grouping, &build_info)
            .map_err(ConnectError::BadSetting)?;
        // `w: 0` would acknowledge nothing: an unknown outcome on every
        // write, which the write path cannot resolve.
        let (w, ack) = match write_concern.parse::<u32>() {
            Ok(n) if n >= 1 => (bson::Bson::Int32(n as i32), Acknowledgment::Nodes(n)),
            _ if write_concern == "majority" => (
                bson::Bson::String("majority".into()),
                Acknowledgment::Majority,
            ),
            _ => return Err(ConnectError::BadWriteConcern(write_concern.to_owned())),
        };
        Ok(Self {
            client,
            db,
            reports,
            realtime,
            read_preference,
            write_concern: doc! { "w": w, "j": true, "wtimeout": write_timeout.as_millis() as i64 },
            commit_write_concern: bucket_writer::commit_write_concern(ack, write_timeout),
            write_timeout,
            topology,
            report_max_time: Duration::from_millis(settings.report_max_time_ms.max(1)),
            grouping,
            secantus: build_info.contains_key("secantusVersion"),
            page_days: Default::default(),
        })
    }

    /// Whether the server is secantusd-rs (see the field).
    pub fn is_secantus(&self) -> bool {
        self.secantus
    }

    /// Views per page of whole days, kept for the top pages.
    pub fn page_days(&self) -> &page_days::PageDays {
        &self.page_days
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
        assert_eq!(Grouping::choose("auto", &mongod), Ok(Grouping::Server));
        assert_eq!(Grouping::choose("auto", &local), Ok(Grouping::App));
        assert_eq!(Grouping::choose("server", &local), Ok(Grouping::Server));
        assert_eq!(Grouping::choose("app", &mongod), Ok(Grouping::App));
        assert!(Grouping::choose("fast", &mongod).is_err());
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

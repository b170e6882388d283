//! `journal_progress`: how far each journal lane has been applied, one
//! document per lane and [`Stream`], advanced in the same transaction as
//! what that stream writes.
//!
//! `{_id: "<journal id>/<lane>[/rollups|/sources]", journal, lane, position: NumberLong, updatedAt}`

use bson::{doc, Document};
use mongodb::options::{ReadConcern, ReadPreference, SelectionCriteria};

use super::values::number;
use super::Store;

pub const COLLECTION: &str = "journal_progress";

/// What a lane's applier writes. Each stream reads the same lane and keeps
/// its own position, so each batch of any of them commits at most once.
///
/// *Why three*: a statement costs about the same whatever it carries, and
/// every level costs one statement per distinct page in a batch. Minutes
/// are what the realtime panels read, so they go first and often; the
/// hour and day levels (read for longer ranges) are merged over a longer
/// window, so one statement carries many more hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The page and site minute buckets, applied within about a second at
    /// light load (batches grow with the backlog).
    Views,
    /// Traffic sources, gathered over a longer window so one statement per
    /// bucket carries many hits (see `ingest::applier`).
    Sources,
    /// The page and site hour and day buckets, gathered over a few seconds.
    Rollups,
    /// The visit store (`storage::visit_log`): one part per site and day
    /// a batch touches, gathered over a few seconds.
    Visits,
}

impl Stream {
    /// The streams that write buckets (what an import applies too).
    pub const ALL: [Stream; 3] = [Stream::Views, Stream::Sources, Stream::Rollups];
    /// Every applier of a journal lane: the bucket streams and the visits.
    pub const EVERY: [Stream; 4] = [
        Stream::Views,
        Stream::Sources,
        Stream::Rollups,
        Stream::Visits,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Views => "views",
            Stream::Sources => "sources",
            Stream::Rollups => "rollups",
            Stream::Visits => "visits",
        }
    }
}

/// A batch's place in its lane: it moves the lane's `stream` from `from`
/// to `to`.
#[derive(Debug, Clone)]
pub struct Advance<'a> {
    pub journal: &'a str,
    pub lane: u32,
    pub stream: Stream,
    pub from: u64,
    pub to: u64,
}

/// The views (minutes) keep the id they had when they were the only stream.
pub fn id(journal: &str, lane: u32, stream: Stream) -> String {
    match stream {
        Stream::Views => format!("{journal}/{lane}"),
        Stream::Sources => format!("{journal}/{lane}/sources"),
        Stream::Rollups => format!("{journal}/{lane}/rollups"),
        Stream::Visits => format!("{journal}/{lane}/visits"),
    }
}

/// The `update` that moves the lane forward, matching only if it is still
/// at `from`.
pub fn advance_command(a: &Advance<'_>) -> Document {
    doc! {
        "update": COLLECTION,
        "updates": [{
            "q": {"_id": id(a.journal, a.lane, a.stream), "position": a.from as i64},
            "u": {"$set": {
                "position": a.to as i64,
                "updatedAt": bson::DateTime::now(),
            }},
        }],
        "ordered": true,
    }
}

/// The lane's applied position, read from the primary with majority read
/// concern (a value that a failover cannot roll back). `None`: the database
/// has no record of this lane.
pub async fn position(
    store: &Store,
    journal: &str,
    lane: u32,
    stream: Stream,
) -> Result<Option<u64>, mongodb::error::Error> {
    let found = store
        .db()
        .collection::<Document>(COLLECTION)
        .find_one(doc! {"_id": id(journal, lane, stream)})
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .read_concern(ReadConcern::majority())
        .await?;
    Ok(found
        .and_then(|d| number(d.get("position")))
        .map(|p| p.max(0) as u64))
}

/// Records the lane's stream at `initial` unless the database already
/// knows it; returns the position in force.
pub async fn ensure(
    store: &Store,
    journal: &str,
    lane: u32,
    stream: Stream,
    initial: u64,
) -> Result<u64, mongodb::error::Error> {
    store
        .db()
        .collection::<Document>(COLLECTION)
        .update_one(
            doc! {"_id": id(journal, lane, stream)},
            doc! {"$setOnInsert": {
                "journal": journal,
                "lane": lane as i64,
                "stream": stream.as_str(),
                "position": initial as i64,
                "updatedAt": bson::DateTime::now(),
            }},
        )
        .upsert(true)
        .write_concern(store.commit_write_concern())
        .await?;
    Ok(position(store, journal, lane, stream)
        .await?
        .unwrap_or(initial))
}

/// Records every stream of a lane, before its views applier applies
/// anything. A lane the database knows from before a stream existed (when
/// sources, or the hour and day levels, were written with the views)
/// starts that stream where its views are: everything before that is in
/// already.
pub async fn ensure_lane(
    store: &Store,
    journal: &str,
    lane: u32,
    oldest: u64,
) -> Result<u64, mongodb::error::Error> {
    let views = ensure(store, journal, lane, Stream::Views, oldest).await?;
    ensure(store, journal, lane, Stream::Sources, views).await?;
    ensure(store, journal, lane, Stream::Rollups, views).await?;
    // A lane from before the visit store starts its visits where its views
    // are: hits journaled before have no place in a visit anyway.
    ensure(store, journal, lane, Stream::Visits, views).await?;
    Ok(views)
}

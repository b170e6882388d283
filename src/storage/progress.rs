//! `journal_progress`: how far each journal lane has been applied, one
//! document per lane and [`Stream`], advanced in the same transaction as
//! what that stream writes.
//!
//! `{_id: "<journal id>/<lane>[/sources]", journal, lane, position: NumberLong, updatedAt}`

use bson::{doc, Document};
use mongodb::options::{ReadConcern, ReadPreference, SelectionCriteria};

use super::values::number;
use super::Store;

pub const COLLECTION: &str = "journal_progress";

/// What a lane's applier writes. Each stream reads the same lane and keeps
/// its own position, so each batch of either commits at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The page and site view buckets, applied within about a second.
    Views,
    /// Traffic sources, gathered over a longer window so one statement per
    /// bucket carries many hits (see `ingest::applier`).
    Sources,
}

impl Stream {
    pub const ALL: [Stream; 2] = [Stream::Views, Stream::Sources];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Views => "views",
            Stream::Sources => "sources",
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

/// The views keep the id they had before sources had a stream of their own.
pub fn id(journal: &str, lane: u32, stream: Stream) -> String {
    match stream {
        Stream::Views => format!("{journal}/{lane}"),
        Stream::Sources => format!("{journal}/{lane}/sources"),
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

/// Records both streams of a lane, before its views applier applies
/// anything. A lane the database knows from before sources had a stream
/// (when they were written with the views) starts its sources where its
/// views are: everything before that has its sources in already.
pub async fn ensure_lane(
    store: &Store,
    journal: &str,
    lane: u32,
    oldest: u64,
) -> Result<u64, mongodb::error::Error> {
    let views = ensure(store, journal, lane, Stream::Views, oldest).await?;
    ensure(store, journal, lane, Stream::Sources, views).await?;
    Ok(views)
}

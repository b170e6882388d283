//! The breakdown reads: the breakdown buckets of a site or a page over a
//! stretch of time, projected as the caller asks (the write counters alone,
//! or the counts too). `reports::breakdowns` adds them up and keeps the
//! answers of settled days.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;

use super::breakdowns::collection;
use super::{Resolution, Store, Subject};

/// The filter of a site's (its domain) or a page's buckets in `[from, to)`.
fn span_filter(
    subject: Subject,
    key: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Document {
    doc! {
        subject.key_field(): key,
        "timestamp": {"$gte": bson::DateTime::from_chrono(from), "$lt": bson::DateTime::from_chrono(to)},
    }
}

/// Passes each breakdown bucket of `key` (a site's domain or a page, as
/// `subject` says) at `g` in `span` to `each`, projected by `projection`.
pub async fn each_bucket(
    store: &Store,
    subject: Subject,
    key: &str,
    g: Resolution,
    span: (DateTime<Utc>, DateTime<Utc>),
    projection: Document,
    mut each: impl FnMut(&Document),
) -> Result<(), mongodb::error::Error> {
    let mut cursor = store
        .reports()
        .collection::<Document>(collection(subject, g))
        .find(span_filter(subject, key, span))
        .projection(projection)
        .await?;
    while let Some(d) = cursor.try_next().await? {
        each(&d);
    }
    Ok(())
}

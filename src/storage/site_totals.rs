//! Site totals (`site_views_minute/hour/day`, keyed by the site's domain)
//! for sites whose page buckets predate them: the backfill.
//!
//! Live hits write site totals in the same transaction as their page
//! buckets (`bucket_writer`), each writer into its own part of the site
//! bucket, so from the upgrade on pages and totals move together. The
//! backfill makes the past match: for every bucket time of the site it SETS
//! the backfill part ([`PART_BACKFILL`]) to what the page buckets hold
//! beyond the other parts. A recomputation rather than an increment, so
//! running it twice (or after a crash half-way) gives the same totals. Each
//! window is read in one snapshot (a transaction), and a live batch adds the
//! same views to the page buckets and to its own part, so "pages minus the
//! live parts" does not change while traffic flows: exact without stopping
//! anything.
//!
//! Once a site is done, `sites.siteTotals` is set and reports read its
//! totals; until then they add up page buckets as before.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::time::Duration;

use super::buckets::{site_pages, Subject, PART_BACKFILL};
use super::sites::{self, Site};
use super::{stored_dates, Resolution, Store};
use crate::domain::DomainName;

/// Per level, the time window one transaction recomputes: about 30,000
/// page buckets for a site of 1,000 pages.
fn window(g: Resolution) -> TimeDelta {
    match g {
        Resolution::Day => TimeDelta::days(32),
        Resolution::Hour => TimeDelta::hours(36),
        Resolution::Minute => TimeDelta::minutes(30),
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BackfillReport {
    /// Site buckets written, per level (minute, hour, day).
    pub buckets: [u64; 3],
    /// Views in the site's day totals afterwards.
    pub views: i64,
    /// Page-day buckets left out for a date outside
    /// [`stored_dates::window`] (an old import's, or a hand edit's).
    pub skipped: u64,
}

/// Recomputes every site bucket of `site` from its page buckets and marks
/// its totals complete.
pub async fn backfill(store: &Store, site: &Site) -> anyhow::Result<BackfillReport> {
    let mut report = BackfillReport::default();
    let now = Utc::now();
    // Only the days a stored date may sensibly name are walked: from a
    // bucket of year +262142 the next day is past chrono's last, and from
    // year −1 to today are 700,000 windows.
    let day_pages = doc! {"page": site_pages(&site.domain)};
    report.skipped = store
        .db()
        .collection::<Document>(Resolution::Day.collection())
        .count_documents(stored_dates::outside(day_pages, now))
        .await?;
    if report.skipped > 0 {
        store.background().skipped(report.skipped);
        tracing::warn!(site = %site.domain, buckets = report.skipped,
            "page-day buckets dated outside 1990 to the day after tomorrow are left out of the site totals");
    }
    // Reports of the site say how far this is while it runs.
    let tracker = super::preparation::Tracker::start(site.domain.as_str());
    // Day level first: it tells which hours have views at all, so the hour
    // and minute levels only visit those.
    let days = first_and_last(store, &site.domain, Resolution::Day, now).await?;
    if let Some((first, last)) = days {
        let end = last
            .checked_add_signed(TimeDelta::days(1))
            .ok_or_else(|| anyhow::anyhow!("the last day {last} has no next day"))?;
        for (i, g) in Resolution::ALL.into_iter().enumerate().rev() {
            let step = window(g);
            let mut from = first;
            let windows = ((end - from).num_seconds().max(0) as u64)
                .div_ceil(step.num_seconds().max(1) as u64);
            let mut done = 0;
            while from < end {
                tracker.at(g, done, windows);
                let to = from.checked_add_signed(step).map_or(end, |t| t.min(end));
                if g == Resolution::Day || has_views(store, &site.domain, from, to).await? {
                    report.buckets[i] += recompute(store, &site.domain, g, from, to).await?;
                }
                from = to;
                done += 1;
            }
        }
    }
    report.views = store
        .db()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .find(doc! {"site": site.domain.as_str()})
        .projection(doc! {"_id": 0, "totalViews": 1})
        .await?
        .try_collect::<Vec<_>>()
        .await?
        .iter()
        .map(|d| super::values::number(d.get("totalViews")).unwrap_or(0))
        .fold(0, i64::saturating_add);
    sites::mark_totals_complete(store, site).await?;
    Ok(report)
}

/// Backfills every site whose totals are not complete yet (the upgrade).
/// A site whose backfill fails (an error, or a panic: a bug) is logged and
/// counted ([`stored_dates::BackgroundStats`]), and the next goes on; it
/// stays not done, and reports add up its page buckets.
pub async fn backfill_missing(store: &Store) -> anyhow::Result<Vec<(String, BackfillReport)>> {
    let mut done = Vec::new();
    for site in sites::list(store).await? {
        if !site.totals_complete {
            let report = match stored_dates::guarded(backfill(store, &site)).await {
                Ok(report) => report,
                Err(e) => {
                    store.background().failed();
                    tracing::error!(site = %site.domain, error = %format!("{e:#}"),
                        "site totals backfill failed for this site; going on with the next \
                         (run `tickertape backfill-site-totals --site` once it is fixed)");
                    continue;
                }
            };
            tracing::info!(site = %site.domain, views = report.views,
                minute = report.buckets[0], hour = report.buckets[1], day = report.buckets[2],
                "site totals backfilled");
            done.push((site.domain.to_string(), report));
        }
    }
    Ok(done)
}

/// The first and last page buckets of the site at `g` within
/// [`stored_dates::window`].
async fn first_and_last(
    store: &Store,
    domain: &DomainName,
    g: Resolution,
    now: DateTime<Utc>,
) -> anyhow::Result<Option<(DateTime<Utc>, DateTime<Utc>)>> {
    let filter = doc! {"page": site_pages(domain), "timestamp": stored_dates::within(now)};
    Ok(first_and_last_of(store, g.collection(), filter).await?)
}

/// The first and last `timestamp` of the documents of `collection` that
/// match `filter`, if any (two sorted `find_one`s on its index).
pub async fn first_and_last_of(
    store: &Store,
    collection: &str,
    filter: Document,
) -> Result<Option<(DateTime<Utc>, DateTime<Utc>)>, mongodb::error::Error> {
    let coll = store.db().collection::<Document>(collection);
    let mut ends = Vec::with_capacity(2);
    for order in [1, -1] {
        let found = coll
            .find_one(filter.clone())
            .sort(doc! {"timestamp": order})
            .projection(doc! {"_id": 0, "timestamp": 1})
            .await?;
        if let Some(at) = found.and_then(|d| d.get_datetime("timestamp").ok().copied()) {
            ends.push(at.to_chrono());
        }
    }
    Ok(match ends[..] {
        [first, last] => Some((first, last)),
        _ => None,
    })
}

/// Whether the site's day totals (already recomputed) show views in
/// `[from, to)`: finer levels skip the stretches without any.
async fn has_views(
    store: &Store,
    domain: &DomainName,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let day_from = Resolution::Day.floor(from);
    Ok(store
        .db()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .find_one(doc! {
            "site": domain.as_str(),
            "timestamp": {"$gte": bson::DateTime::from_chrono(day_from), "$lt": bson::DateTime::from_chrono(to)},
            "totalViews": {"$gt": 0},
        })
        .projection(doc! {"_id": 1})
        .await?
        .is_some())
}

/// Adds `sign` × a bucket's `totalViews` and slots to its time's sums.
fn add_bucket(
    sums: &mut BTreeMap<DateTime<Utc>, (i64, Vec<i64>)>,
    d: &Document,
    g: Resolution,
    field: &str,
    sign: i64,
) {
    let Ok(at) = d.get_datetime("timestamp") else {
        return;
    };
    let entry = sums
        .entry(at.to_chrono())
        .or_insert_with(|| (0, vec![0; g.slot_count()]));
    // Saturating: a stored count may be anything (a hand edit, an old
    // import's figures).
    let total = super::values::number(d.get("totalViews")).unwrap_or(0);
    entry.0 = entry.0.saturating_add(total.saturating_mul(sign));
    if let Ok(slots) = d.get_document(field) {
        for (k, v) in slots {
            if let (Ok(i), Some(n)) = (k.parse::<usize>(), super::values::number(Some(v))) {
                if let Some(slot) = entry.1.get_mut(i) {
                    *slot = slot.saturating_add(n.saturating_mul(sign));
                }
            }
        }
    }
}

/// One window in one transaction: sums the page buckets per time and slot,
/// sets each site bucket to that sum. Retried whole on a conflict.
async fn recompute(
    store: &Store,
    domain: &DomainName,
    g: Resolution,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> anyhow::Result<u64> {
    let mut backoff = Duration::from_millis(20);
    let mut attempts = 0;
    loop {
        attempts += 1;
        match recompute_once(store, domain, g, from, to).await {
            Ok(n) => return Ok(n),
            // A conflict with a live batch (or a racing upsert) is retried
            // at once; anything else a few times, then reported.
            Err(e) if attempts < 50 && (is_retryable(&e) || attempts < 5) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn is_retryable(e: &mongodb::error::Error) -> bool {
    e.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR)
        || e.contains_label(mongodb::error::UNKNOWN_TRANSACTION_COMMIT_RESULT)
        || matches!(*e.kind, mongodb::error::ErrorKind::Write(_))
}

async fn recompute_once(
    store: &Store,
    domain: &DomainName,
    g: Resolution,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<u64, mongodb::error::Error> {
    let mut session = super::txn::begin(store).await?;
    let field = g.slots_field();
    let time =
        doc! {"$gte": bson::DateTime::from_chrono(from), "$lt": bson::DateTime::from_chrono(to)};
    let mut cursor = store
        .db()
        .collection::<Document>(g.collection())
        .find(doc! {"page": site_pages(domain), "timestamp": time.clone()})
        .projection(doc! {"_id": 0, "timestamp": 1, "totalViews": 1, field: 1})
        .batch_size(10_000)
        .session(&mut session)
        .await?;
    let mut sums: BTreeMap<DateTime<Utc>, (i64, Vec<i64>)> = BTreeMap::new();
    while let Some(d) = cursor.next(&mut session).await.transpose()? {
        add_bucket(&mut sums, &d, g, field, 1);
    }
    drop(cursor);
    let site_coll = Subject::Site.collection(g);
    // The live parts of the same window, from the same snapshot.
    let mut cursor = store
        .db()
        .collection::<Document>(site_coll)
        .find(doc! {"site": domain.as_str(), "timestamp": time.clone(), "part": {"$ne": PART_BACKFILL}})
        .projection(doc! {"_id": 0, "timestamp": 1, "totalViews": 1, field: 1})
        .session(&mut session)
        .await?;
    while let Some(d) = cursor.next(&mut session).await.transpose()? {
        add_bucket(&mut sums, &d, g, field, -1);
    }
    drop(cursor);
    // The backfill part holds only what the live parts do not: replaced
    // whole in this window (none where nothing is missing).
    store
        .db()
        .collection::<Document>(site_coll)
        .delete_many(
            doc! {"site": domain.as_str(), "timestamp": time.clone(), "part": PART_BACKFILL},
        )
        .session(&mut session)
        .await?;
    let statements: Vec<Bson> = sums
        .iter()
        .filter(|(_, (total, slots))| *total != 0 || slots.iter().any(|&n| n != 0))
        .map(|(at, (total, slots))| {
            let slots: Document = slots
                .iter()
                .enumerate()
                .filter(|(_, &n)| n != 0)
                .map(|(i, &n)| (i.to_string(), Bson::Int64(n)))
                .collect();
            Bson::Document(doc! {
                "q": {"site": domain.as_str(), "timestamp": bson::DateTime::from_chrono(*at), "part": PART_BACKFILL},
                "u": {"site": domain.as_str(), "timestamp": bson::DateTime::from_chrono(*at), "part": PART_BACKFILL, "totalViews": *total, field: slots},
                "upsert": true,
            })
        })
        .collect();
    let written = statements.len() as u64;
    for chunk in statements.chunks(super::bucket_writer::MAX_STATEMENTS_PER_COMMAND) {
        let reply = store
            .db()
            .run_command(doc! {"update": site_coll, "updates": chunk.to_vec(), "ordered": false})
            .session(&mut session)
            .await?;
        if let Err(e) = super::update::check_reply(site_coll, &reply, chunk.len()) {
            let _ = session.abort_transaction().await;
            return Err(mongodb::error::Error::custom(e.to_string()));
        }
    }
    session.commit_transaction().await?;
    Ok(written)
}

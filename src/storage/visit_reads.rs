//! The visit reads of the page and site buckets: the visitor sketches a
//! range's unique visitors are merged from, the day totals that guard the
//! kept estimates (`day_visitors`), and the first day with visits.
//! `reports::visits` decides which buckets a range needs and counts.

use bson::{doc, Bson, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use mongodb::options::Hint;
use std::collections::{BTreeSet, HashMap, HashSet};

use super::buckets::{site_pages, VisitFields, BY_TIME, TAKEN_BACK};
use super::report_reads::{number, pages_at, Scope};
use super::{Resolution, Store, Subject};
use crate::domain::sketch::Sketch;
use crate::domain::{DomainName, Page};

/// A scope's views on each of `days` (UTC day starts): what guards the kept
/// visitor estimates of those days (see `storage::day_visitors`).
pub async fn day_totals(
    store: &Store,
    scope: &Scope<'_>,
    days: &BTreeSet<DateTime<Utc>>,
) -> Result<HashMap<DateTime<Utc>, i64>, mongodb::error::Error> {
    let mut out = HashMap::new();
    let (Some(first), Some(last)) = (days.first(), days.last()) else {
        return Ok(out);
    };
    let (coll, mut matcher) = match scope {
        Scope::SiteTotals(site) => (
            Subject::Site.collection(Resolution::Day),
            doc! {"site": site.domain.as_str()},
        ),
        Scope::Page(page) => (Resolution::Day.collection(), doc! {"page": page.as_str()}),
        Scope::Site(_) => return Ok(out),
    };
    matcher.insert(
        "timestamp",
        times_filter(days, *first, *last, Resolution::Day),
    );
    let visits = VisitFields::COUNTERS[VisitFields::VISITS];
    let mut cursor = store
        .reports()
        .collection::<Document>(coll)
        .find(matcher)
        .projection(doc! {"_id": 0, "timestamp": 1, "totalViews": 1, visits: 1, TAKEN_BACK: 1})
        .max_time(store.report_max_time())
        .await?;
    let mut taken_back: HashMap<DateTime<Utc>, i64> = HashMap::new();
    while let Some(d) = cursor.try_next().await? {
        if let Ok(at) = d.get_datetime("timestamp") {
            // Visits beside the views: an imported day can have visits
            // and visitors but no page views (Plausible's visitors table
            // without pages rows for the day).
            let visits: i64 = d.get_document(visits).map_or(0, |slots| {
                slots
                    .iter()
                    .map(|(_, v)| number(Some(v)))
                    .fold(0, i64::wrapping_add)
            });
            let guard = number(d.get("totalViews")).wrapping_add(visits << 20);
            let entry = out.entry(at.to_chrono()).or_default();
            *entry = entry.wrapping_add(guard);
            *taken_back.entry(at.to_chrono()).or_default() += number(d.get(TAKEN_BACK));
        }
    }
    // The guard: 0 for a day without views or visits (it has no
    // visitors), else its views and visits and, above them, the deletions
    // that took counts out of it (`buckets::TAKEN_BACK`): a day emptied and
    // filled again to the same views is not taken for the one kept.
    for (day, guard) in out.iter_mut() {
        if *guard != 0 {
            *guard = guard.wrapping_add(taken_back.get(day).copied().unwrap_or(0) << 40);
        }
    }
    Ok(out)
}

/// A filter on `timestamp` for `times` at `g`: one time as itself (a
/// range of one makes secantusd-rs read 1,000 pages' day four times
/// slower: 88 ms where the time itself takes 20), a dense list (a chart's
/// every day) as a range, a sparse one (the two edges of a long range)
/// point by point.
pub fn times_filter(
    times: &BTreeSet<DateTime<Utc>>,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    g: Resolution,
) -> Bson {
    if first == last {
        return Bson::DateTime(bson::DateTime::from_chrono(first));
    }
    let span = (last - first).num_seconds() / g.step().num_seconds() + 1;
    if times.len() as i64 * 4 > span {
        doc! {"$gte": bson::DateTime::from_chrono(first), "$lte": bson::DateTime::from_chrono(last)}
            .into()
    } else {
        let list: Vec<bson::DateTime> = times
            .iter()
            .map(|t| bson::DateTime::from_chrono(*t))
            .collect();
        doc! {"$in": list}.into()
    }
}

/// Sketches read, by page (`""` for a scope's own) and bucket start.
pub type Read = HashMap<String, HashMap<DateTime<Utc>, Sketch>>;

/// Whose sketches a read merges: a scope's own, or each named page's.
#[derive(Clone, Copy)]
pub enum Whose<'a> {
    Scope(&'a Scope<'a>),
    Pages(&'a [&'a Page]),
    /// Each named page's, read as the site's pages at those times, the
    /// others skipped: a whole list (a CSV of 10,000 pages) in one read,
    /// where naming them is one per thousand pages (today of 10,000 pages:
    /// 42 ms on secantusd-rs, where ten reads of a thousand take 300 ms).
    SitePages(&'a DomainName, &'a [&'a Page]),
}

/// The sketches at `g` starting at `times` of a scope (merged per start:
/// a site's parts, one per writer) or of each named page.
pub async fn sketches(
    store: &Store,
    whose: Whose<'_>,
    g: Resolution,
    times: &BTreeSet<DateTime<Utc>>,
) -> Result<Read, mongodb::error::Error> {
    let mut out = Read::new();
    let (Some(first), Some(last)) = (times.first(), times.last()) else {
        return Ok(out);
    };
    let (coll, mut matcher) = match whose {
        Whose::Scope(Scope::SiteTotals(site)) => (
            Subject::Site.collection(g),
            doc! {"site": site.domain.as_str()},
        ),
        Whose::Scope(Scope::Page(page)) => (g.collection(), doc! {"page": page.as_str()}),
        Whose::Scope(Scope::Site(_)) => return Ok(out),
        Whose::Pages([]) | Whose::SitePages(_, []) => return Ok(out),
        Whose::Pages(_) => (g.collection(), Document::new()),
        Whose::SitePages(domain, _) => (g.collection(), doc! {"page": site_pages(domain)}),
    };
    let by_page = !matches!(whose, Whose::Scope(_));
    let at = times_filter(times, *first, *last, g);
    let (mut hint, mut named) = (None, None);
    match whose {
        Whose::Pages(pages) => matcher = pages_at(pages, at),
        Whose::SitePages(_, pages) => {
            named = Some(pages.iter().map(|p| p.as_str()).collect::<HashSet<&str>>());
            // As a site's own reads of its page buckets (`BucketFind`):
            // secantusd-rs walks a site's every bucket for a page range
            // beside a range of times, so it reads the times alone.
            if store.is_secantus() {
                matcher = Document::new();
            } else {
                hint = Some(Hint::Name(BY_TIME.into()));
            }
            matcher.insert("timestamp", at);
        }
        Whose::Scope(_) => {
            matcher.insert("timestamp", at);
        }
    }
    let collection = store.reports().collection::<Document>(coll);
    let find = collection
        .find(matcher)
        .projection(doc! {"_id": 0, "page": 1, "timestamp": 1, VisitFields::VISITORS: 1})
        .max_time(store.report_max_time());
    let mut cursor = match hint {
        Some(hint) => find.hint(hint).await?,
        None => find.await?,
    };
    while let Some(d) = cursor.try_next().await? {
        let (Ok(at), Ok(stored)) = (
            d.get_datetime("timestamp"),
            d.get_document(VisitFields::VISITORS),
        ) else {
            continue;
        };
        let at = at.to_chrono();
        if !times.contains(&at) {
            continue;
        }
        let page = match (by_page, d.get_str("page")) {
            (false, _) => String::new(),
            (true, Ok(page)) if named.as_ref().is_none_or(|n| n.contains(page)) => page.to_owned(),
            (true, _) => continue,
        };
        let sketch = out.entry(page).or_default().entry(at).or_default();
        if let Err(e) = sketch.merge_stored(stored) {
            tracing::warn!(error = %e, at = %at, "a visitors sketch of an unknown format is skipped");
        }
    }
    Ok(out)
}

/// The first UTC day from which a scope has visitors (data written before
/// visitors has none): `None` when it has none yet.
pub async fn counted_since(
    store: &Store,
    scope: &Scope<'_>,
) -> Result<Option<DateTime<Utc>>, mongodb::error::Error> {
    let (coll, mut matcher) = match scope {
        Scope::SiteTotals(site) => (
            Subject::Site.collection(Resolution::Day),
            doc! {"site": site.domain.as_str()},
        ),
        Scope::Site(domain) => (
            Resolution::Day.collection(),
            doc! {"page": site_pages(domain)},
        ),
        Scope::Page(page) => (Resolution::Day.collection(), doc! {"page": page.as_str()}),
    };
    matcher.insert(
        VisitFields::COUNTERS[VisitFields::VISITS],
        doc! {"$exists": true},
    );
    let found = store
        .reports()
        .collection::<Document>(coll)
        .find_one(matcher)
        .sort(doc! {"timestamp": 1})
        .projection(doc! {"_id": 0, "timestamp": 1})
        .max_time(store.report_max_time())
        .await?;
    Ok(found.and_then(|d| d.get_datetime("timestamp").ok().map(|t| t.to_chrono())))
}

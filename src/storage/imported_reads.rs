//! What imports wrote, read apart from tracked hits, for filtered reports
//! (`reports::filtered_imported`).
//!
//! Where the imported part of the figures lives on its own:
//! - the site breakdowns (`site_breakdowns_hour`, `site_breakdowns_day`)
//!   are split by writer part, and imports write [`PART_IMPORT`]: its
//!   documents are exactly the imported views per source, medium,
//!   campaign, browser, system, device and country, and the imported
//!   events per name;
//! - the site totals (`site_views_*`) are split the same way, with the
//!   views of each hour in a day bucket's `hours`;
//! - the page buckets are *not* split (live hits and imports add to the
//!   same document), so a page's imported views are known only for the
//!   hours whose site views all came from imports: [`site_hours_by_part`]
//!   says which, [`page_hours`] gives the page's views in them.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;

use super::buckets::{Subject, PART_IMPORT};
use super::values::count;
use super::{Resolution, Store};
use crate::domain::Dimension;

/// One hour's views of a site, split into the import part's and every
/// other part's (tracked hits, direct writes, the backfill).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HourViews {
    pub imported: i64,
    pub other: i64,
}

fn span_of(from: DateTime<Utc>, to: DateTime<Utc>) -> Document {
    doc! {"$gte": bson::DateTime::from_chrono(from), "$lt": bson::DateTime::from_chrono(to)}
}

/// The hours of a day bucket's `hours` with a count, as instants.
fn hours_of(d: &Document) -> Vec<(DateTime<Utc>, i64)> {
    let Ok(day) = d.get_datetime("timestamp").map(|t| t.to_chrono()) else {
        return Vec::new();
    };
    let Ok(hours) = d.get_document(Resolution::Day.slots_field()) else {
        return Vec::new();
    };
    hours
        .iter()
        .filter_map(|(h, n)| {
            let h: i64 = h.parse().ok()?;
            Some((day + TimeDelta::hours(h), count(Some(n))))
        })
        .filter(|(_, n)| *n != 0)
        .collect()
}

/// Per hour of the UTC days starting in `[from, to)`, the site's views by
/// part: imported or not. Read from the day buckets (kept longest).
pub async fn site_hours_by_part(
    store: &Store,
    domain: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(DateTime<Utc>, HourViews)>, mongodb::error::Error> {
    let mut cursor = store
        .reports()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .find(doc! {"site": domain, "timestamp": span_of(from, to)})
        .projection(doc! {"_id": 0, "timestamp": 1, "part": 1, Resolution::Day.slots_field(): 1})
        .await?;
    let mut hours = std::collections::BTreeMap::<DateTime<Utc>, HourViews>::new();
    while let Some(d) = cursor.try_next().await? {
        let imported = d.get_i32("part").is_ok_and(|p| p == PART_IMPORT);
        for (at, n) in hours_of(&d) {
            let h = hours.entry(at).or_default();
            if imported {
                h.imported += n;
            } else {
                h.other += n;
            }
        }
    }
    Ok(hours.into_iter().collect())
}

/// Per hour of the UTC days starting in `[from, to)`, the views of `page`
/// (its bucket key, `domain/path`), imported and tracked together.
pub async fn page_hours(
    store: &Store,
    page: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(DateTime<Utc>, i64)>, mongodb::error::Error> {
    let mut cursor = store
        .reports()
        .collection::<Document>(Subject::Page.collection(Resolution::Day))
        .find(doc! {"page": page, "timestamp": span_of(from, to)})
        .projection(doc! {"_id": 0, "timestamp": 1, Resolution::Day.slots_field(): 1})
        .await?;
    let mut out = Vec::new();
    while let Some(d) = cursor.try_next().await? {
        out.extend(hours_of(&d));
    }
    Ok(out)
}

/// One import-part breakdown bucket's counts of a dimension.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportedNames {
    pub at: DateTime<Utc>,
    /// Per name (as shown, not as stored in a field name).
    pub names: Vec<(String, i64)>,
    /// Counts of names past the bucket's cap: which names, unknown.
    pub other: i64,
}

/// The import part's breakdown buckets of the site at `level` starting in
/// `[from, to)`, with `dimension`'s counts.
pub async fn imported_names(
    store: &Store,
    domain: &str,
    dimension: Dimension,
    level: Resolution,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ImportedNames>, mongodb::error::Error> {
    let filter = doc! {"site": domain, "part": PART_IMPORT, "timestamp": span_of(from, to)};
    each_imported(store, filter, dimension, level).await
}

/// Whether any import-part breakdown bucket of the site counts something
/// under `dimension`: whether the site's imported rows carry it.
pub async fn imports_carry(
    store: &Store,
    domain: &str,
    dimension: Dimension,
) -> Result<bool, mongodb::error::Error> {
    let filter = doc! {"site": domain, "part": PART_IMPORT};
    let all = each_imported(store, filter, dimension, Resolution::Day).await?;
    Ok(all
        .iter()
        .any(|b| b.other != 0 || b.names.iter().any(|(_, n)| *n != 0)))
}

/// Whether the import part of the site's totals counts any view: whether
/// the site's imported rows carry pages.
pub async fn imports_carry_pages(
    store: &Store,
    domain: &str,
) -> Result<bool, mongodb::error::Error> {
    let found = store
        .reports()
        .collection::<Document>(Subject::Site.collection(Resolution::Day))
        .find_one(doc! {"site": domain, "part": PART_IMPORT, "totalViews": {"$gt": 0}})
        .projection(doc! {"_id": 1})
        .await?;
    Ok(found.is_some())
}

async fn each_imported(
    store: &Store,
    filter: Document,
    dimension: Dimension,
    level: Resolution,
) -> Result<Vec<ImportedNames>, mongodb::error::Error> {
    let mut cursor = store
        .reports()
        .collection::<Document>(super::breakdowns::collection(Subject::Site, level))
        .find(filter)
        .projection(
            doc! {"_id": 0, "timestamp": 1, dimension.field(): 1, dimension.other_field(): 1},
        )
        .await?;
    let mut out = Vec::new();
    while let Some(d) = cursor.try_next().await? {
        let Ok(at) = d.get_datetime("timestamp").map(|t| t.to_chrono()) else {
            continue;
        };
        let names = d
            .get_document(dimension.field())
            .map(|m| {
                m.iter()
                    .map(|(field, n)| {
                        (
                            crate::domain::dimension::from_field_name(field),
                            count(Some(n)),
                        )
                    })
                    .filter(|(_, n)| *n != 0)
                    .collect()
            })
            .unwrap_or_default();
        out.push(ImportedNames {
            at,
            names,
            other: count(d.get(dimension.other_field())),
        });
    }
    Ok(out)
}

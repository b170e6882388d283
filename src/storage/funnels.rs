//! The funnels a site's owners define on its settings page: a name and its
//! 2 to 8 steps, one document each, listed per site in the order made.
//! Kept apart from the site's document so that the directory every hit
//! reads stays as small as it is.

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::Store;
use crate::domain::funnel::{FunnelSteps, MAX_FUNNELS_PER_SITE};
use crate::domain::SiteId;

pub const COLLECTION: &str = "funnels";

/// Listed per site in the order made.
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    vec![super::schema::IndexSpec::new(
        COLLECTION,
        "siteId_1_createdAt_1",
        doc! {"siteId": 1, "createdAt": 1},
    )]
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FunnelDoc {
    #[serde(rename = "_id")]
    id: bson::Uuid,
    #[serde(rename = "siteId")]
    site_id: bson::Uuid,
    name: String,
    steps: Vec<String>,
    #[serde(rename = "createdAt")]
    created_at: bson::DateTime,
}

/// A stored funnel, its steps parsed again (a stored step this build would
/// refuse makes the funnel unreadable: it is left out, not an error).
#[derive(Debug, Clone)]
pub struct Funnel {
    pub id: uuid::Uuid,
    pub name: String,
    pub steps: FunnelSteps,
}

#[derive(Debug, thiserror::Error)]
pub enum FunnelStoreError {
    #[error("a site has at most {MAX_FUNNELS_PER_SITE} funnels: remove one before adding another")]
    TooMany,
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
}

fn collection(store: &Store) -> mongodb::Collection<FunnelDoc> {
    store.db().collection(COLLECTION)
}

fn site_key(site: &SiteId) -> bson::Uuid {
    site.as_uuid().into()
}

/// The site's funnels, oldest first.
pub async fn list(store: &Store, site: &SiteId) -> Result<Vec<Funnel>, mongodb::error::Error> {
    let docs: Vec<FunnelDoc> = collection(store)
        .find(doc! {"siteId": site_key(site)})
        .sort(doc! {"createdAt": 1})
        .limit(MAX_FUNNELS_PER_SITE as i64)
        .await?
        .try_collect()
        .await?;
    Ok(docs
        .into_iter()
        .filter_map(|d| {
            let steps = FunnelSteps::parse(d.steps.iter().map(String::as_str)).ok()?;
            Some(Funnel {
                id: d.id.into(),
                name: d.name,
                steps,
            })
        })
        .collect())
}

/// Adds a funnel unless the site has [`MAX_FUNNELS_PER_SITE`] already.
/// Two owners adding at once may pass the count together: the bound is on
/// the work of a report, and one funnel over it is no harm (`list` reads
/// at most the bound).
pub async fn add(
    store: &Store,
    site: &SiteId,
    name: &str,
    steps: &FunnelSteps,
    now: DateTime<Utc>,
) -> Result<uuid::Uuid, FunnelStoreError> {
    let count = collection(store)
        .count_documents(doc! {"siteId": site_key(site)})
        .await?;
    if count >= MAX_FUNNELS_PER_SITE as u64 {
        return Err(FunnelStoreError::TooMany);
    }
    let id = uuid::Uuid::new_v4();
    collection(store)
        .insert_one(FunnelDoc {
            id: id.into(),
            site_id: site_key(site),
            name: name.to_owned(),
            steps: steps.stored(),
            created_at: bson::DateTime::from_chrono(now),
        })
        .await?;
    Ok(id)
}

/// Removes one of the site's funnels; another site's id removes nothing.
pub async fn remove(
    store: &Store,
    site: &SiteId,
    id: uuid::Uuid,
) -> Result<bool, mongodb::error::Error> {
    let id: bson::Uuid = id.into();
    Ok(collection(store)
        .delete_one(doc! {"_id": id, "siteId": site_key(site)})
        .await?
        .deleted_count
        == 1)
}

/// Every funnel of a site being deleted.
pub async fn delete_site(store: &Store, site: &SiteId) -> Result<u64, mongodb::error::Error> {
    Ok(collection(store)
        .delete_many(doc! {"siteId": site_key(site)})
        .await?
        .deleted_count)
}

//! Read-only share links to a site's reports. A link belongs to its site:
//! any owner of the site (or an admin) lists and revokes it, whoever made
//! it. It works only while whoever made it may still see the site (checked
//! on every use, `web::share`). The database keeps only the SHA-256 of the
//! link's secret.

use bson::doc;
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Store;
use crate::domain::{AccessToken, ExpiryDays, Label, SiteId, TokenKind};

pub const COLLECTION: &str = "share_links";

/// Links are opened by `_id` (the hash); listed per site; revoked by id.
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    use super::schema::IndexSpec;
    vec![
        IndexSpec::new(
            COLLECTION,
            "siteId_1_createdAt_-1",
            doc! {"siteId": 1, "createdAt": -1},
        ),
        IndexSpec::new(COLLECTION, "linkId_1", doc! {"linkId": 1}).unique(),
    ]
}

/// Most links one site may have (live or expired, until revoked).
pub const MAX_PER_SITE: u64 = 100;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShareLink {
    #[serde(rename = "_id")]
    pub hash: String,
    #[serde(rename = "linkId")]
    pub id: bson::Uuid,
    #[serde(rename = "siteId")]
    pub site_id: bson::Uuid,
    pub label: String,
    #[serde(rename = "createdBy")]
    pub created_by: bson::Uuid,
    #[serde(rename = "createdAt")]
    pub created_at: bson::DateTime,
    #[serde(rename = "expiresAt", default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<bson::DateTime>,
    #[serde(
        rename = "lastUsedAt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_used_at: Option<bson::DateTime>,
}

impl ShareLink {
    pub fn site(&self) -> SiteId {
        SiteId::from_uuid(self.site_id.into())
    }

    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|t| t.to_chrono() <= now)
    }
}

/// What a link's secret opens.
#[derive(Debug)]
pub enum Lookup {
    Live(ShareLink),
    Expired,
    /// Unknown or revoked.
    Unknown,
}

#[derive(Debug, thiserror::Error)]
pub enum ShareLinkError {
    #[error("this site already has {MAX_PER_SITE} links: revoke one first")]
    TooMany,
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
}

fn collection(store: &Store) -> mongodb::Collection<ShareLink> {
    store.db().collection(COLLECTION)
}

pub async fn create(
    store: &Store,
    site: &SiteId,
    created_by: Uuid,
    label: &Label,
    expiry: ExpiryDays,
    now: DateTime<Utc>,
) -> Result<(ShareLink, AccessToken), ShareLinkError> {
    let site_id: bson::Uuid = site.as_uuid().into();
    if collection(store)
        .count_documents(doc! {"siteId": site_id})
        .await?
        >= MAX_PER_SITE
    {
        return Err(ShareLinkError::TooMany);
    }
    let secret = AccessToken::generate(TokenKind::Share);
    let link = ShareLink {
        hash: secret.hash(),
        id: Uuid::new_v4().into(),
        site_id,
        label: label.as_str().to_owned(),
        created_by: created_by.into(),
        created_at: bson::DateTime::from_chrono(now),
        expires_at: expiry
            .days()
            .map(|d| bson::DateTime::from_chrono(now + TimeDelta::days(i64::from(d)))),
        last_used_at: None,
    };
    collection(store).insert_one(&link).await?;
    Ok((link, secret))
}

/// The link a secret opens, recording its use when it is live.
pub async fn open(
    store: &Store,
    secret: &AccessToken,
    now: DateTime<Utc>,
) -> Result<Lookup, mongodb::error::Error> {
    let Some(link) = collection(store)
        .find_one(doc! {"_id": secret.hash()})
        .await?
    else {
        return Ok(Lookup::Unknown);
    };
    if link.expired(now) {
        return Ok(Lookup::Expired);
    }
    super::last_use::record(&collection(store), &link.hash, link.last_used_at, now).await?;
    Ok(Lookup::Live(link))
}

/// A site's links, newest first.
pub async fn list_for_site(
    store: &Store,
    site: &SiteId,
) -> Result<Vec<ShareLink>, mongodb::error::Error> {
    collection(store)
        .find(doc! {"siteId": bson::Uuid::from(site.as_uuid())})
        .sort(doc! {"createdAt": -1})
        .await?
        .try_collect()
        .await
}

/// Revokes one of a site's links; false when the site has no such link.
pub async fn revoke(
    store: &Store,
    site: &SiteId,
    link_id: Uuid,
) -> Result<bool, mongodb::error::Error> {
    let deleted = collection(store)
        .delete_one(doc! {
            "siteId": bson::Uuid::from(site.as_uuid()),
            "linkId": bson::Uuid::from(link_id),
        })
        .await?;
    Ok(deleted.deleted_count == 1)
}

//! The `api_tokens` collection: personal API tokens, kept as the SHA-256
//! of their secret (`accounts::api_tokens` makes them and holds their
//! rules), the sites each may read and when it was last used.

use bson::doc;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Store;
use crate::domain::SiteId;

pub const COLLECTION: &str = "api_tokens";

/// Tokens are found by `_id` (the hash); listed by user; revoked by id.
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    use super::schema::IndexSpec;
    vec![
        IndexSpec::new(COLLECTION, "userId_1", doc! {"userId": 1}),
        IndexSpec::new(COLLECTION, "tokenId_1", doc! {"tokenId": 1}).unique(),
    ]
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiToken {
    /// SHA-256 of the token, hex.
    #[serde(rename = "_id")]
    pub hash: String,
    /// The public id, for the list and for revoking.
    #[serde(rename = "tokenId")]
    pub id: bson::Uuid,
    #[serde(rename = "userId")]
    pub user_id: bson::Uuid,
    pub name: String,
    /// The sites it may read; absent: every site its user may see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<Vec<bson::Uuid>>,
    /// Whether it may also list, add and remove the email subscribers of
    /// its sites; absent (every token before it, and by default): it only
    /// reads.
    #[serde(
        rename = "manageEmail",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub manage_email: bool,
    #[serde(rename = "createdAt")]
    pub created_at: bson::DateTime,
    #[serde(
        rename = "lastUsedAt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_used_at: Option<bson::DateTime>,
}

/// Which sites a token reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenScope {
    /// Every site its user may see, now and later.
    AllSites,
    /// Only these (and only while its user may still see them).
    Sites(Vec<SiteId>),
}

impl ApiToken {
    pub fn scope(&self) -> TokenScope {
        match &self.sites {
            None => TokenScope::AllSites,
            Some(ids) => TokenScope::Sites(
                ids.iter()
                    .map(|id| SiteId::from_uuid(Uuid::from(*id)))
                    .collect(),
            ),
        }
    }

    /// Whether the scope includes `site` (the user's own rights are
    /// checked separately, on every request).
    pub fn covers(&self, site: &SiteId) -> bool {
        match &self.sites {
            None => true,
            Some(ids) => ids.iter().any(|id| Uuid::from(*id) == site.as_uuid()),
        }
    }
}

fn collection(store: &Store) -> mongodb::Collection<ApiToken> {
    store.db().collection(COLLECTION)
}

/// How many tokens a user holds.
pub async fn count_for_user(store: &Store, user_id: Uuid) -> Result<u64, mongodb::error::Error> {
    collection(store)
        .count_documents(doc! {"userId": bson::Uuid::from(user_id)})
        .await
}

pub async fn insert(store: &Store, token: &ApiToken) -> Result<(), mongodb::error::Error> {
    collection(store).insert_one(token).await.map(|_| ())
}

/// The token with this hash, if it exists (not revoked); its last use is
/// recorded.
pub async fn find_and_record_use(
    store: &Store,
    hash: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<ApiToken>, mongodb::error::Error> {
    let Some(token) = collection(store).find_one(doc! {"_id": hash}).await? else {
        return Ok(None);
    };
    super::last_use::record(&collection(store), &token.hash, token.last_used_at, now).await?;
    Ok(Some(token))
}

/// A user's tokens, newest first.
pub async fn list_for_user(
    store: &Store,
    user_id: Uuid,
) -> Result<Vec<ApiToken>, mongodb::error::Error> {
    collection(store)
        .find(doc! {"userId": bson::Uuid::from(user_id)})
        .sort(doc! {"createdAt": -1})
        .await?
        .try_collect()
        .await
}

/// Revokes one of `user_id`'s tokens; false when it has no such token
/// (another user's token id changes nothing).
pub async fn revoke(
    store: &Store,
    user_id: Uuid,
    token_id: Uuid,
) -> Result<bool, mongodb::error::Error> {
    let deleted = collection(store)
        .delete_one(
            doc! {"userId": bson::Uuid::from(user_id), "tokenId": bson::Uuid::from(token_id)},
        )
        .await?;
    Ok(deleted.deleted_count == 1)
}

/// A deleted user's tokens go with them.
pub async fn delete_for_user(store: &Store, user_id: Uuid) -> Result<(), mongodb::error::Error> {
    collection(store)
        .delete_many(doc! {"userId": bson::Uuid::from(user_id)})
        .await
        .map(|_| ())
}

//! Personal API tokens: read-only bearer secrets for `/api/v1/`. The
//! database keeps only the SHA-256 of a token (shown to its user once), the
//! sites it may read (`None`: every site its user may see) and when it was
//! last used. Revoking deletes it, so the next request is refused.

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{AccessToken, Label, SiteId, TokenKind};
use crate::storage::Store;

pub const COLLECTION: &str = "api_tokens";

/// Tokens are found by `_id` (the hash); listed by user; revoked by id.
pub fn indexes() -> Vec<crate::storage::schema::IndexSpec> {
    use crate::storage::schema::IndexSpec;
    vec![
        IndexSpec::new(COLLECTION, "userId_1", doc! {"userId": 1}),
        IndexSpec::new(COLLECTION, "tokenId_1", doc! {"tokenId": 1}).unique(),
    ]
}

/// Most tokens one user may hold: enough for every script and dashboard,
/// and a bound on what one account can make the database keep.
pub const MAX_PER_USER: u64 = 50;

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

#[derive(Debug, thiserror::Error)]
pub enum ApiTokenError {
    #[error("you already have {MAX_PER_USER} tokens: revoke one first")]
    TooMany,
    #[error("choose at least one site, or all your sites")]
    NoSites,
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
}

fn collection(store: &Store) -> mongodb::Collection<ApiToken> {
    store.db().collection(COLLECTION)
}

/// Creates a token and returns it with its secret, which is never
/// readable again.
pub async fn create(
    store: &Store,
    user_id: Uuid,
    name: &Label,
    scope: &TokenScope,
    now: DateTime<Utc>,
) -> Result<(ApiToken, AccessToken), ApiTokenError> {
    let sites = match scope {
        TokenScope::AllSites => None,
        TokenScope::Sites(ids) if ids.is_empty() => return Err(ApiTokenError::NoSites),
        TokenScope::Sites(ids) => Some(ids.iter().map(|id| id.as_uuid().into()).collect()),
    };
    let held = collection(store)
        .count_documents(doc! {"userId": bson::Uuid::from(user_id)})
        .await?;
    if held >= MAX_PER_USER {
        return Err(ApiTokenError::TooMany);
    }
    let secret = AccessToken::generate(TokenKind::Api);
    let token = ApiToken {
        hash: secret.hash(),
        id: Uuid::new_v4().into(),
        user_id: user_id.into(),
        name: name.as_str().to_owned(),
        sites,
        created_at: bson::DateTime::from_chrono(now),
        last_used_at: None,
    };
    collection(store).insert_one(&token).await?;
    Ok((token, secret))
}

/// The token a request presents, if it exists (not revoked); its last use
/// is recorded.
pub async fn authenticate(
    store: &Store,
    secret: &AccessToken,
    now: DateTime<Utc>,
) -> Result<Option<ApiToken>, mongodb::error::Error> {
    let Some(token) = collection(store)
        .find_one(doc! {"_id": secret.hash()})
        .await?
    else {
        return Ok(None);
    };
    crate::storage::last_use::record(&collection(store), &token.hash, token.last_used_at, now)
        .await?;
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

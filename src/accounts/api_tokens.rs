//! Personal API tokens: read-only bearer secrets for `/api/v1/`. The
//! database keeps only the SHA-256 of a token (shown to its user once), the
//! sites it may read (`None`: every site its user may see) and when it was
//! last used. Revoking deletes it, so the next request is refused.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::{AccessToken, Label, TokenKind};
use crate::storage::api_tokens as stored;
use crate::storage::Store;

pub use crate::storage::api_tokens::{
    delete_for_user, list_for_user, revoke, ApiToken, TokenScope,
};

/// Most tokens one user may hold: enough for every script and dashboard,
/// and a bound on what one account can make the database keep.
pub const MAX_PER_USER: u64 = 50;

#[derive(Debug, thiserror::Error)]
pub enum ApiTokenError {
    #[error("you already have {MAX_PER_USER} tokens: revoke one first")]
    TooMany,
    #[error("choose at least one site, or all your sites")]
    NoSites,
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
}

/// Creates a token and returns it with its secret, which is never
/// readable again.
pub async fn create(
    store: &Store,
    user_id: Uuid,
    name: &Label,
    scope: &TokenScope,
    manage_email: bool,
    now: DateTime<Utc>,
) -> Result<(ApiToken, AccessToken), ApiTokenError> {
    let sites = match scope {
        TokenScope::AllSites => None,
        TokenScope::Sites(ids) if ids.is_empty() => return Err(ApiTokenError::NoSites),
        TokenScope::Sites(ids) => Some(ids.iter().map(|id| id.as_uuid().into()).collect()),
    };
    let held = stored::count_for_user(store, user_id).await?;
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
        manage_email,
        created_at: bson::DateTime::from_chrono(now),
        last_used_at: None,
    };
    stored::insert(store, &token).await?;
    Ok((token, secret))
}

/// The token a request presents, if it exists (not revoked); its last use
/// is recorded.
pub async fn authenticate(
    store: &Store,
    secret: &AccessToken,
    now: DateTime<Utc>,
) -> Result<Option<ApiToken>, mongodb::error::Error> {
    stored::find_and_record_use(store, &secret.hash(), now).await
}

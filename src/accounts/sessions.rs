//! Server-side sessions. The cookie holds a random token; the database
//! holds only its SHA-256, so a leaked `sessions` collection logs nobody
//! in. Expired sessions are removed by a TTL index.

use bson::doc;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::password::random_token;
use crate::storage::schema::IndexSpec;
use crate::storage::Store;

pub const COLLECTION: &str = "sessions";

/// Expired sessions are removed by the server (TTL at `expiresAt`); a
/// user's sessions are found to end them all.
pub fn indexes() -> Vec<IndexSpec> {
    vec![
        IndexSpec::new(COLLECTION, "expiry", doc! {"expiresAt": 1})
            .expire_after(std::time::Duration::ZERO),
        IndexSpec::new(COLLECTION, "userId_1", doc! {"userId": 1}),
    ]
}
pub const COOKIE: &str = "tt_session";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    #[serde(rename = "_id")]
    pub token_hash: String,
    #[serde(rename = "userId")]
    pub user_id: bson::Uuid,
    /// The CSRF token every form of this session must carry.
    pub csrf: String,
    #[serde(rename = "expiresAt")]
    pub expires_at: bson::DateTime,
    /// The password was right but the second factor is still due: such a
    /// session opens nothing but the code form.
    #[serde(
        rename = "secondFactorDue",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub second_factor_due: bool,
}

pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn collection(store: &Store) -> mongodb::Collection<Session> {
    store.db().collection(COLLECTION)
}

/// Creates a session and returns the cookie token.
pub async fn create(
    store: &Store,
    user_id: Uuid,
    now: DateTime<Utc>,
    lifetime: TimeDelta,
) -> Result<String, mongodb::error::Error> {
    insert(store, user_id, now + lifetime, false).await
}

/// How long a user has to type the second factor after the password.
pub const SECOND_FACTOR_MINUTES: i64 = 5;

/// A short session that only lets the user type their second factor.
pub async fn create_second_factor_due(
    store: &Store,
    user_id: Uuid,
    now: DateTime<Utc>,
) -> Result<String, mongodb::error::Error> {
    let until = now + TimeDelta::minutes(SECOND_FACTOR_MINUTES);
    insert(store, user_id, until, true).await
}

async fn insert(
    store: &Store,
    user_id: Uuid,
    until: DateTime<Utc>,
    second_factor_due: bool,
) -> Result<String, mongodb::error::Error> {
    let token = random_token(32);
    collection(store)
        .insert_one(Session {
            token_hash: hash_token(&token),
            user_id: user_id.into(),
            csrf: random_token(32),
            expires_at: bson::DateTime::from_chrono(until),
            second_factor_due,
        })
        .await?;
    Ok(token)
}

/// The live, fully logged-in session for a cookie token.
pub async fn find(
    store: &Store,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Option<Session>, mongodb::error::Error> {
    Ok(find_any(store, token, now)
        .await?
        .filter(|s| !s.second_factor_due))
}

/// The live session waiting for its second factor.
pub async fn find_second_factor_due(
    store: &Store,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Option<Session>, mongodb::error::Error> {
    Ok(find_any(store, token, now)
        .await?
        .filter(|s| s.second_factor_due))
}

/// Expiry is checked here too: the TTL monitor only runs about once a
/// minute.
async fn find_any(
    store: &Store,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Option<Session>, mongodb::error::Error> {
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let session = collection(store)
        .find_one(doc! {"_id": hash_token(token)})
        .await?;
    Ok(session.filter(|s| s.expires_at.to_chrono() > now))
}

pub async fn delete(store: &Store, token_hash: &str) -> Result<(), mongodb::error::Error> {
    collection(store)
        .delete_one(doc! {"_id": token_hash})
        .await
        .map(|_| ())
}

/// Logs a user out everywhere (after a password change or reset).
pub async fn delete_for_user(
    store: &Store,
    user_id: Uuid,
    except: Option<&str>,
) -> Result<(), mongodb::error::Error> {
    let mut filter = doc! {"userId": bson::Uuid::from(user_id)};
    if let Some(keep) = except {
        filter.insert("_id", doc! {"$ne": keep});
    }
    collection(store).delete_many(filter).await.map(|_| ())
}

/// Constant-time comparison for tokens.
pub fn tokens_match(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_hash_is_sha256_hex() {
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn token_comparison() {
        assert!(tokens_match("abcd", "abcd"));
        assert!(!tokens_match("abcd", "abce"));
        assert!(!tokens_match("abcd", "abc"));
        assert!(!tokens_match("", "a"));
    }
}

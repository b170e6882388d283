//! Server-side sessions. The cookie holds a random token; the database
//! holds only its SHA-256, so a leaked `sessions` collection logs nobody
//! in. Expired sessions are removed by a TTL index (`storage::sessions`).

use chrono::{DateTime, TimeDelta, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::password::random_token;
use crate::storage::sessions as stored;
use crate::storage::Store;

pub use crate::storage::sessions::Session;

pub const COOKIE: &str = "tt_session";

pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
    stored::insert(
        store,
        &Session {
            token_hash: hash_token(&token),
            user_id: user_id.into(),
            csrf: random_token(32),
            expires_at: bson::DateTime::from_chrono(until),
            second_factor_due,
        },
    )
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
    let session = stored::find(store, &hash_token(token)).await?;
    Ok(session.filter(|s| s.expires_at.to_chrono() > now))
}

pub async fn delete(store: &Store, token_hash: &str) -> Result<(), mongodb::error::Error> {
    stored::delete(store, token_hash).await
}

/// Logs a user out everywhere (after a password change or reset).
pub async fn delete_for_user(
    store: &Store,
    user_id: Uuid,
    except: Option<&str>,
) -> Result<(), mongodb::error::Error> {
    stored::delete_for_user(store, user_id, except).await
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

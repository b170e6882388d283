//! The `sessions` collection: a session is found by the SHA-256 of its
//! cookie token (`accounts::sessions` makes both); expired ones are removed
//! by a TTL index.

use bson::doc;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::schema::IndexSpec;
use super::Store;

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

fn collection(store: &Store) -> mongodb::Collection<Session> {
    store.db().collection(COLLECTION)
}

pub async fn insert(store: &Store, session: &Session) -> Result<(), mongodb::error::Error> {
    collection(store).insert_one(session).await.map(|_| ())
}

/// The session with this token hash, live or not.
pub async fn find(
    store: &Store,
    token_hash: &str,
) -> Result<Option<Session>, mongodb::error::Error> {
    collection(store).find_one(doc! {"_id": token_hash}).await
}

pub async fn delete(store: &Store, token_hash: &str) -> Result<(), mongodb::error::Error> {
    collection(store)
        .delete_one(doc! {"_id": token_hash})
        .await
        .map(|_| ())
}

/// Ends every session of a user, but the one hashed `except`.
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

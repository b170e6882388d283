//! The two-factor fields of `users` documents: the active secret with the
//! last accepted step and the recovery codes' hashes (`totp`), and the
//! secret being set up (`totpPending`). What a code is and how it is
//! checked is `accounts::totp`'s.

use bson::doc;
use serde::Deserialize;
use uuid::Uuid;

use super::Store;

#[derive(Debug, Deserialize)]
struct TotpDoc {
    secret: String,
}

/// A user's two-factor secrets as stored (unparsed).
#[derive(Debug, Deserialize)]
pub struct UserTotp {
    totp: Option<TotpDoc>,
    #[serde(rename = "totpPending")]
    pending: Option<String>,
}

impl UserTotp {
    /// The active secret, when two-factor login is on.
    pub fn active(&self) -> Option<&str> {
        self.totp.as_ref().map(|t| t.secret.as_str())
    }

    /// The secret being set up.
    pub fn pending(&self) -> Option<&str> {
        self.pending.as_deref()
    }
}

fn collection(store: &Store) -> mongodb::Collection<bson::Document> {
    store.db().collection(super::users::COLLECTION)
}

pub async fn load(store: &Store, user: Uuid) -> Result<Option<UserTotp>, mongodb::error::Error> {
    let doc = collection(store)
        .find_one(doc! {"_id": bson::Uuid::from(user)})
        .projection(doc! {"totp.secret": 1, "totpPending": 1})
        .await?;
    Ok(doc.and_then(|d| bson::from_document(d).ok()))
}

pub async fn set_pending(
    store: &Store,
    user: Uuid,
    secret: &str,
) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(user)},
            doc! {"$set": {"totpPending": secret}},
        )
        .await
        .map(|_| ())
}

/// Makes the pending secret (if it still is `secret`) the active one, with
/// `step` as the last accepted step and the recovery codes' hashes.
pub async fn enable(
    store: &Store,
    user: Uuid,
    secret: &str,
    step: u64,
    recovery_hashes: Vec<String>,
) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(user), "totpPending": secret},
            doc! {
                "$set": {"totp": {"secret": secret, "lastStep": step as i64, "recovery": recovery_hashes}},
                "$unset": {"totpPending": ""},
            },
        )
        .await
        .map(|_| ())
}

pub async fn disable(store: &Store, user: Uuid) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(user)},
            doc! {"$unset": {"totp": "", "totpPending": ""}},
        )
        .await
        .map(|_| ())
}

/// Records `step` as accepted only if no code of this or a later step was
/// accepted before: one atomic update, so two concurrent logins with the
/// same code cannot both pass.
pub async fn consume_step(
    store: &Store,
    user: Uuid,
    step: u64,
) -> Result<bool, mongodb::error::Error> {
    let r = collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(user), "totp.lastStep": {"$lt": step as i64}},
            doc! {"$set": {"totp.lastStep": step as i64}},
        )
        .await?;
    Ok(r.modified_count == 1)
}

/// Removes a recovery code's hash, if it is one of the user's unused ones.
pub async fn consume_recovery_hash(
    store: &Store,
    user: Uuid,
    hash: &str,
) -> Result<bool, mongodb::error::Error> {
    let r = collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(user), "totp.recovery": hash},
            doc! {"$pull": {"totp.recovery": hash}},
        )
        .await?;
    Ok(r.modified_count == 1)
}

//! The `users` collection: accounts, their roles and password hashes (the
//! password rules and hashing are `accounts::users`'s; the two-factor
//! fields of the same documents are `storage::totp`'s).

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::schema::IndexSpec;
use super::values::is_duplicate_key;
use super::Store;
use crate::domain::Email;

pub const COLLECTION: &str = "users";

/// One account per e-mail address.
pub fn indexes() -> Vec<IndexSpec> {
    vec![IndexSpec::new(COLLECTION, "email", doc! {"email": 1}).unique()]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sees and manages everything.
    Admin,
    /// Sees the sites listing them as an owner.
    Owner,
}

impl Role {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "admin" => Some(Role::Admin),
            "owner" => Some(Role::Owner),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Owner => "owner",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: Uuid,
    pub email: Email,
    pub role: Role,
    pub password_hash: String,
    pub created_at: DateTime<Utc>,
    /// Signed in with a one-time password (the first admin's, or one an
    /// admin reset): every page but the password form sends them there.
    pub must_change_password: bool,
    /// When that one-time password stops working.
    pub one_time_until: Option<DateTime<Utc>>,
    /// Two-factor login (TOTP) is on.
    pub two_factor: bool,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// The password is a one-time password past its time: it no longer
    /// logs in. (One without a recorded time, set before they expired,
    /// counts as expired too.)
    pub fn one_time_password_expired(&self, now: DateTime<Utc>) -> bool {
        self.must_change_password && self.one_time_until.is_none_or(|until| until <= now)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct UserDoc {
    #[serde(rename = "_id")]
    id: bson::Uuid,
    email: Email,
    role: Role,
    #[serde(rename = "passwordHash")]
    password_hash: String,
    #[serde(rename = "createdAt")]
    created_at: bson::DateTime,
    #[serde(
        rename = "mustChangePassword",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    must_change_password: bool,
    #[serde(
        rename = "oneTimeUntil",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    one_time_until: Option<bson::DateTime>,
    /// See `storage::totp`; only its presence matters here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    totp: Option<bson::Document>,
}

impl From<UserDoc> for User {
    fn from(d: UserDoc) -> Self {
        User {
            id: d.id.into(),
            email: d.email,
            role: d.role,
            password_hash: d.password_hash,
            created_at: d.created_at.to_chrono(),
            must_change_password: d.must_change_password,
            one_time_until: d.one_time_until.map(|t| t.to_chrono()),
            two_factor: d.totp.is_some(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("{0} already has an account")]
    EmailTaken(Email),
    #[error("no such user")]
    NotFound,
    #[error("the last admin cannot stop being one: make another user admin first")]
    LastAdmin,
    #[error("database error")]
    Database(#[from] mongodb::error::Error),
}

fn collection(store: &Store) -> mongodb::Collection<UserDoc> {
    store.db().collection(COLLECTION)
}

/// Inserts a new account with a password already hashed.
pub async fn insert(
    store: &Store,
    email: Email,
    password_hash: String,
    role: Role,
    now: DateTime<Utc>,
) -> Result<User, UserError> {
    let doc = UserDoc {
        id: Uuid::new_v4().into(),
        email: email.clone(),
        role,
        password_hash,
        created_at: bson::DateTime::from_chrono(now),
        must_change_password: false,
        one_time_until: None,
        totp: None,
    };
    match collection(store).insert_one(&doc).await {
        Ok(_) => Ok(doc.into()),
        Err(e) if is_duplicate_key(&e) => {
            // A retried insert (the driver retries a write whose answer was
            // lost, and a server without retryable-write records applies
            // it again) finds its own first attempt: that is a success.
            let held = collection(store)
                .find_one(doc! {"email": email.as_str()})
                .await?;
            match held {
                Some(held) if held.id == doc.id => Ok(doc.into()),
                _ => Err(UserError::EmailTaken(email)),
            }
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn find_by_email(
    store: &Store,
    email: &Email,
) -> Result<Option<User>, mongodb::error::Error> {
    Ok(collection(store)
        .find_one(doc! {"email": email.as_str()})
        .await?
        .map(User::from))
}

pub async fn find(store: &Store, id: Uuid) -> Result<Option<User>, mongodb::error::Error> {
    Ok(collection(store)
        .find_one(doc! {"_id": bson::Uuid::from(id)})
        .await?
        .map(User::from))
}

pub async fn list(store: &Store) -> Result<Vec<User>, mongodb::error::Error> {
    let docs: Vec<UserDoc> = collection(store)
        .find(doc! {})
        .sort(doc! {"email": 1})
        .await?
        .try_collect()
        .await?;
    Ok(docs.into_iter().map(User::from).collect())
}

pub async fn count(store: &Store) -> Result<u64, mongodb::error::Error> {
    collection(store).count_documents(doc! {}).await
}

/// The document every change that could remove an admin writes, in its
/// transaction: two such changes then conflict and run one after the
/// other, so each sees the other's result (counting admins alone would
/// let two demotions each see the other admin and leave none).
const ADMINS_GUARD: &str = "admins";
const GUARDS: &str = "guards";

/// Runs `change` on `id` in a transaction that keeps at least one admin:
/// `LastAdmin` (and nothing changed) when none would be left.
async fn keeping_an_admin(store: &Store, id: Uuid, change: Change) -> Result<(), UserError> {
    use super::txn;
    let mut tries = 0;
    loop {
        let result = async {
            let mut session = txn::begin(store).await?;
            store
                .db()
                .collection::<bson::Document>(GUARDS)
                .update_one(
                    doc! {"_id": ADMINS_GUARD},
                    doc! {"$inc": {"changes": 1_i64}},
                )
                .upsert(true)
                .session(&mut session)
                .await?;
            let users = collection(store);
            let filter = doc! {"_id": bson::Uuid::from(id)};
            let found = match change {
                Change::Role(role) => {
                    users
                        .update_one(filter, doc! {"$set": {"role": role.as_str()}})
                        .session(&mut session)
                        .await?
                        .matched_count
                }
                Change::Delete => {
                    users
                        .delete_one(filter)
                        .session(&mut session)
                        .await?
                        .deleted_count
                }
            };
            if found == 0 {
                let _ = session.abort_transaction().await;
                return Ok(Err(UserError::NotFound));
            }
            let admins = users
                .count_documents(doc! {"role": Role::Admin.as_str()})
                .session(&mut session)
                .await?;
            if admins == 0 {
                let _ = session.abort_transaction().await;
                return Ok(Err(UserError::LastAdmin));
            }
            txn::commit(&mut session).await?;
            Ok::<_, mongodb::error::Error>(Ok(()))
        }
        .await;
        match result {
            Ok(outcome) => return outcome,
            Err(e) if txn::should_retry(&e) && tries < txn::MAX_TRIES => {
                tries += 1;
                txn::pause(tries).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[derive(Clone, Copy)]
enum Change {
    Role(Role),
    Delete,
}

/// Sets a user's role; the last admin stays one (`LastAdmin`), even
/// against concurrent changes.
pub async fn set_role(store: &Store, id: Uuid, role: Role) -> Result<(), UserError> {
    keeping_an_admin(store, id, Change::Role(role)).await
}

/// Deletes the user's document alone; the last admin is never deleted
/// (`LastAdmin`), even by concurrent deletions of two admins by each other.
pub async fn delete(store: &Store, id: Uuid) -> Result<(), UserError> {
    keeping_an_admin(store, id, Change::Delete).await
}

/// Sets a password (already hashed) the user chose: any one-time
/// password ends.
pub async fn set_password_hash(
    store: &Store,
    id: Uuid,
    password_hash: String,
) -> Result<(), UserError> {
    let r = collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(id)},
            doc! {
                "$set": {"passwordHash": password_hash},
                "$unset": {"mustChangePassword": "", "oneTimeUntil": ""},
            },
        )
        .await?;
    if r.matched_count == 0 {
        return Err(UserError::NotFound);
    }
    Ok(())
}

/// Sets a one-time password (already hashed), working until `until`.
pub async fn set_one_time_password_hash(
    store: &Store,
    id: Uuid,
    password_hash: String,
    until: DateTime<Utc>,
) -> Result<(), UserError> {
    let r = collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(id)},
            doc! {"$set": {
                "passwordHash": password_hash,
                "mustChangePassword": true,
                "oneTimeUntil": bson::DateTime::from_chrono(until),
            }},
        )
        .await?;
    if r.matched_count == 0 {
        return Err(UserError::NotFound);
    }
    Ok(())
}

/// Replaces the hash of a one-time password still working at `now`,
/// keeping its end; returns that end, or `None` when the user has no such
/// password.
pub async fn replace_one_time_password_hash(
    store: &Store,
    id: Uuid,
    password_hash: String,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, UserError> {
    let user = collection(store)
        .find_one_and_update(
            doc! {
                "_id": bson::Uuid::from(id),
                "mustChangePassword": true,
                "oneTimeUntil": {"$gt": bson::DateTime::from_chrono(now)},
            },
            doc! {"$set": {"passwordHash": password_hash}},
        )
        .await?;
    Ok(user.and_then(|u| u.one_time_until.map(|t| t.to_chrono())))
}

/// Marks a user's current password as one-time, working until `until`.
pub async fn require_password_change(
    store: &Store,
    id: Uuid,
    until: DateTime<Utc>,
) -> Result<(), UserError> {
    let r = collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(id)},
            doc! {"$set": {"mustChangePassword": true, "oneTimeUntil": bson::DateTime::from_chrono(until)}},
        )
        .await?;
    if r.matched_count == 0 {
        return Err(UserError::NotFound);
    }
    Ok(())
}

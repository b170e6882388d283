//! Accounts: creating them with a hashed password, one-time passwords and
//! their lifetime, and what deleting a user takes with it. The documents
//! are `storage::users`'s.

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::password::NewPassword;
use crate::domain::Email;
use crate::storage::users as stored;
use crate::storage::Store;

pub use crate::storage::users::{count, find, find_by_email, list, Role, User, UserError};

/// How long a one-time password (the first admin's, an admin's reset)
/// works: long enough to pass it on, short enough that one left lying in
/// a mail or a console log stops working.
pub const ONE_TIME_PASSWORD_LIFETIME: TimeDelta = TimeDelta::days(7);

pub async fn create(
    store: &Store,
    email: Email,
    password: &NewPassword,
    role: Role,
    now: DateTime<Utc>,
) -> Result<User, UserError> {
    stored::insert(store, email, password.hash(), role, now).await
}

/// Sets a user's role; the last admin stays one (`LastAdmin`), even
/// against concurrent changes.
pub async fn set_role(store: &Store, id: Uuid, role: Role) -> Result<(), UserError> {
    stored::set_role(store, id, role).await
}

pub async fn set_password(
    store: &Store,
    id: Uuid,
    password: &NewPassword,
) -> Result<(), UserError> {
    stored::set_password_hash(store, id, password.hash()).await
}

/// Deletes a user, their sessions and API tokens, and their place among
/// sites' owners. The last admin is never deleted (`LastAdmin`), even by
/// concurrent deletions of two admins by each other.
pub async fn delete(store: &Store, id: Uuid) -> Result<(), UserError> {
    stored::delete(store, id).await?;
    super::sessions::delete_for_user(store, id, None).await?;
    super::api_tokens::delete_for_user(store, id).await?;
    crate::storage::sites::remove_owner_everywhere(store, id).await?;
    Ok(())
}

/// Gives a user a one-time password (an admin's reset), working until
/// `now` plus [`ONE_TIME_PASSWORD_LIFETIME`]: every page then sends them to
/// choose their own.
pub async fn set_one_time_password(
    store: &Store,
    id: Uuid,
    password: &NewPassword,
    now: DateTime<Utc>,
) -> Result<(), UserError> {
    let until = now + ONE_TIME_PASSWORD_LIFETIME;
    stored::set_one_time_password_hash(store, id, password.hash(), until).await
}

/// Replaces a one-time password that still works and was never replaced
/// by the user's own, keeping its end: `serve` prints the first admin a new
/// one at each start until then, since the one printed before may never
/// have been seen (a start that failed after printing it, a lost console).
/// Returns when it stops working, or `None` when the user has no such
/// password (they chose their own, or it expired).
pub async fn replace_one_time_password(
    store: &Store,
    id: Uuid,
    password: &NewPassword,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, UserError> {
    stored::replace_one_time_password_hash(store, id, password.hash(), now).await
}

/// Marks a user's current password as one-time (the first admin's printed
/// one), working until `now` plus [`ONE_TIME_PASSWORD_LIFETIME`].
pub async fn require_password_change(
    store: &Store,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), UserError> {
    stored::require_password_change(store, id, now + ONE_TIME_PASSWORD_LIFETIME).await
}

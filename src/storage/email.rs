//! Email: who receives which site's reports and alerts, the alert rules,
//! one record per email to send (the claim that keeps it from going out
//! twice), the alert episodes, and the key unsubscribe links are signed
//! with.
//!
//! A send record's `_id` names the email completely (kind, site, period or
//! episode, address), so every instance that finds it due derives the same
//! id: the insert of the second one fails on `_id` and changes nothing.
//! Sending is then claimed by one atomic update from `pending` to
//! `sending`; only the instance whose update matched sends it.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Store;
use crate::domain::{AlertRules, Recipient, Schedule, SiteId};

pub const SUBSCRIPTIONS: &str = "email_subscriptions";
pub const ALERT_RULES: &str = "email_alert_rules";
pub const SENDS: &str = "email_sends";
pub const EPISODES: &str = "email_alert_episodes";
pub const KEYS: &str = "email_keys";
/// One document per site with subscriptions, `{_id: siteId, n}`: how many
/// it has, moved by one conditional update per subscription so that the
/// cap holds however many requests come at once (see [`subscribe`]).
pub const SUBSCRIPTION_COUNTS: &str = "email_subscription_counts";

/// Most subscriptions one site may have (every address and schedule).
pub const MAX_PER_SITE: u64 = 500;

/// How long a send record is kept: long past any period it keeps from
/// being sent twice (a month), so the system page can list recent ones.
const SENDS_KEPT: std::time::Duration = std::time::Duration::from_secs(90 * 24 * 3600);

pub fn indexes() -> Vec<super::schema::IndexSpec> {
    use super::schema::IndexSpec;
    vec![
        // One subscription per site, address and schedule; listed per site.
        IndexSpec::new(
            SUBSCRIPTIONS,
            "siteId_1_address_1_schedule_1",
            doc! {"siteId": 1, "address": 1, "schedule": 1},
        )
        .unique(),
        // The sender's retries: pending records whose next attempt is due.
        IndexSpec::new(
            SENDS,
            "state_1_nextAttemptAt_1",
            doc! {"state": 1, "nextAttemptAt": 1},
        ),
        IndexSpec::new(SENDS, "createdAt_1", doc! {"createdAt": 1}).expire_after(SENDS_KEPT),
    ]
}

// ---------------------------------------------------------- subscriptions

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subscription {
    #[serde(rename = "_id")]
    pub id: bson::Uuid,
    #[serde(rename = "siteId")]
    pub site_id: bson::Uuid,
    pub address: Recipient,
    pub schedule: Schedule,
    #[serde(rename = "createdAt")]
    pub created_at: bson::DateTime,
    /// The address said yes (or is the subscribing owner's own): only then
    /// does it receive reports and alerts. Missing (a subscription made
    /// before confirmations existed): not confirmed, so it is asked once.
    #[serde(default)]
    pub confirmed: bool,
}

/// Whether an address agreed to receive a site's email.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// The address of the signed-in owner who subscribes it, or the
    /// operator's choice: it receives email at once.
    Given,
    /// Any other address: it receives a confirmation email and nothing
    /// else until its link is followed.
    Asked,
}

impl Consent {
    /// The consent of `address` subscribed by a user whose sign-in address
    /// is `own`: given for their own address, asked of any other.
    pub fn of(own: &str, address: &Recipient) -> Self {
        if own.eq_ignore_ascii_case(address.as_str()) {
            Consent::Given
        } else {
            Consent::Asked
        }
    }
}

impl Subscription {
    pub fn site(&self) -> SiteId {
        SiteId::from_uuid(self.site_id.into())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubscribeError {
    #[error("this site already has {MAX_PER_SITE} subscriptions: remove one first")]
    TooMany,
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
}

fn subscriptions(store: &Store) -> mongodb::Collection<Subscription> {
    store.db().collection(SUBSCRIPTIONS)
}

fn site_key(site: &SiteId) -> bson::Uuid {
    site.as_uuid().into()
}

/// Subscribes `address` to `schedule` of `site`; an existing subscription
/// is returned as it is (with `false`: nothing new), confirmed now if
/// `consent` is given.
///
/// The cap is a slot taken on the site's counter before the insert, by one
/// update that matches only below [`MAX_PER_SITE`]: of any number of
/// concurrent requests, at most the free slots' number get one (a count
/// followed by an insert lets them all through). A slot is given back when
/// the insert adds nothing, and when a subscription is removed. A crash
/// between taking a slot and the insert keeps that slot taken: the cap
/// errs on the side of fewer.
pub async fn subscribe(
    store: &Store,
    site: &SiteId,
    address: &Recipient,
    schedule: Schedule,
    now: DateTime<Utc>,
    consent: Consent,
) -> Result<(Subscription, bool), SubscribeError> {
    let filter =
        doc! {"siteId": site_key(site), "address": address.as_str(), "schedule": schedule.key()};
    if let Some(existing) = subscriptions(store).find_one(filter.clone()).await? {
        if consent == Consent::Given && !existing.confirmed {
            confirm(store, site, address).await?;
            let now_confirmed = subscriptions(store).find_one(filter).await?;
            return Ok((now_confirmed.unwrap_or(existing), false));
        }
        return Ok((existing, false));
    }
    // An address that confirmed another of this site's emails agreed to
    // the site's email: it is not asked again.
    let confirmed = consent == Consent::Given
        || subscriptions(store)
            .find_one(
                doc! {"siteId": site_key(site), "address": address.as_str(), "confirmed": true},
            )
            .await?
            .is_some();
    if !take_slot(store, site).await? {
        return Err(SubscribeError::TooMany);
    }
    let new = Subscription {
        id: Uuid::new_v4().into(),
        site_id: site_key(site),
        address: address.clone(),
        schedule,
        created_at: bson::DateTime::from_chrono(now),
        confirmed,
    };
    let inserted = subscriptions(store).insert_one(&new).await;
    if inserted.is_err() {
        give_back_slots(store, site, 1).await?;
    }
    match inserted {
        Ok(_) => Ok((new, true)),
        // Subscribed at the same moment by another request.
        Err(e) if super::values::is_duplicate_key(&e) => {
            let existing = subscriptions(store).find_one(filter).await?;
            Ok((existing.unwrap_or(new), false))
        }
        Err(e) => Err(e.into()),
    }
}

fn slot_counters(store: &Store) -> mongodb::Collection<Document> {
    store.db().collection(SUBSCRIPTION_COUNTS)
}

/// Takes one of the site's [`MAX_PER_SITE`] slots; false when none is
/// free. A site without a counter (none yet, or subscriptions made before
/// counters existed) gets one holding its current number first; of two
/// made at once the second insert fails on `_id` and changes nothing.
async fn take_slot(store: &Store, site: &SiteId) -> Result<bool, mongodb::error::Error> {
    let key = site_key(site);
    if slot_counters(store)
        .find_one(doc! {"_id": key})
        .await?
        .is_none()
    {
        let n = subscriptions(store)
            .count_documents(doc! {"siteId": key})
            .await?;
        match slot_counters(store)
            .insert_one(doc! {"_id": key, "n": n as i64})
            .await
        {
            Ok(_) => {}
            Err(e) if super::values::is_duplicate_key(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let taken = slot_counters(store)
        .update_one(
            doc! {"_id": key, "n": {"$lt": MAX_PER_SITE as i64}},
            doc! {"$inc": {"n": 1_i64}},
        )
        .await?;
    Ok(taken.modified_count == 1)
}

async fn give_back_slots(
    store: &Store,
    site: &SiteId,
    n: u64,
) -> Result<(), mongodb::error::Error> {
    if n == 0 {
        return Ok(());
    }
    let n = n as i64;
    slot_counters(store)
        .update_one(
            doc! {"_id": site_key(site), "n": {"$gte": n}},
            doc! {"$inc": {"n": -n}},
        )
        .await?;
    Ok(())
}

/// Confirms every subscription of `address` to `site` (its confirmation
/// link); how many were waiting.
pub async fn confirm(
    store: &Store,
    site: &SiteId,
    address: &Recipient,
) -> Result<u64, mongodb::error::Error> {
    let r = subscriptions(store)
        .update_many(
            doc! {"siteId": site_key(site), "address": address.as_str(), "confirmed": {"$ne": true}},
            doc! {"$set": {"confirmed": true}},
        )
        .await?;
    Ok(r.modified_count)
}

/// A site's subscriptions by address, then schedule.
pub async fn list_for_site(
    store: &Store,
    site: &SiteId,
) -> Result<Vec<Subscription>, mongodb::error::Error> {
    let mut all: Vec<Subscription> = subscriptions(store)
        .find(doc! {"siteId": site_key(site)})
        .await?
        .try_collect()
        .await?;
    all.sort_by(|a, b| (&a.address, a.schedule).cmp(&(&b.address, b.schedule)));
    Ok(all)
}

/// Every subscription of every site (the sender's round).
pub async fn list_all(store: &Store) -> Result<Vec<Subscription>, mongodb::error::Error> {
    subscriptions(store)
        .find(doc! {})
        .await?
        .try_collect()
        .await
}

/// Removes one of a site's subscriptions; false when it has no such one.
pub async fn remove(store: &Store, site: &SiteId, id: Uuid) -> Result<bool, mongodb::error::Error> {
    let deleted = subscriptions(store)
        .delete_one(doc! {"_id": bson::Uuid::from(id), "siteId": site_key(site)})
        .await?;
    give_back_slots(store, site, deleted.deleted_count).await?;
    Ok(deleted.deleted_count == 1)
}

/// Forgets a purged site's subscribers, alert rules and pending sends:
/// nothing is sent for a site that is gone, and its addresses go with it.
pub async fn delete_site(store: &Store, site: &SiteId) -> Result<(), mongodb::error::Error> {
    let key = site_key(site);
    subscriptions(store)
        .delete_many(doc! {"siteId": key})
        .await?;
    slot_counters(store).delete_many(doc! {"_id": key}).await?;
    rules(store).delete_many(doc! {"_id": key}).await?;
    sends(store).delete_many(doc! {"siteId": key}).await?;
    Ok(())
}

/// Removes every subscription of `address` to `site` (the unsubscribe
/// link); how many there were.
pub async fn unsubscribe(
    store: &Store,
    site: &SiteId,
    address: &Recipient,
) -> Result<u64, mongodb::error::Error> {
    let deleted = subscriptions(store)
        .delete_many(doc! {"siteId": site_key(site), "address": address.as_str()})
        .await?;
    give_back_slots(store, site, deleted.deleted_count).await?;
    Ok(deleted.deleted_count)
}

// ------------------------------------------------------------ alert rules

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredRules {
    #[serde(rename = "_id")]
    site_id: bson::Uuid,
    #[serde(flatten)]
    rules: AlertRules,
}

fn rules(store: &Store) -> mongodb::Collection<StoredRules> {
    store.db().collection(ALERT_RULES)
}

/// A site's alert rules (all off when never set).
pub async fn alert_rules(
    store: &Store,
    site: &SiteId,
) -> Result<AlertRules, mongodb::error::Error> {
    Ok(rules(store)
        .find_one(doc! {"_id": site_key(site)})
        .await?
        .map(|r| r.rules)
        .unwrap_or_default())
}

pub async fn set_alert_rules(
    store: &Store,
    site: &SiteId,
    new: AlertRules,
) -> Result<(), mongodb::error::Error> {
    rules(store)
        .replace_one(
            doc! {"_id": site_key(site)},
            StoredRules {
                site_id: site_key(site),
                rules: new,
            },
        )
        .upsert(true)
        .await?;
    Ok(())
}

// ----------------------------------------------------------- send records

/// Where one email stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SendState {
    /// To be sent (again) from `nextAttemptAt` on.
    Pending,
    /// Claimed by an instance that is handing it to the SMTP server.
    Sending,
    Sent,
    /// Refused for good, or still failing after the last retry.
    Failed,
    /// Its sender stopped while sending (its lease ran out): it may or may
    /// not have gone out, and it is not sent again (at most once).
    Abandoned,
}

impl SendState {
    pub const ALL: [SendState; 5] = [
        SendState::Pending,
        SendState::Sending,
        SendState::Sent,
        SendState::Failed,
        SendState::Abandoned,
    ];

    pub fn key(self) -> &'static str {
        match self {
            SendState::Pending => "pending",
            SendState::Sending => "sending",
            SendState::Sent => "sent",
            SendState::Failed => "failed",
            SendState::Abandoned => "abandoned",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendRecord {
    /// See [`send_key`].
    #[serde(rename = "_id")]
    pub key: String,
    #[serde(rename = "siteId")]
    pub site_id: bson::Uuid,
    pub address: Recipient,
    /// `daily`, `weekly`, `monthly`, `spike` or `drop`.
    pub kind: String,
    /// The start of the period reported on, or of the alert's episode.
    pub from: bson::DateTime,
    /// The end of the period reported on (an alert: when it was noticed).
    pub to: bson::DateTime,
    pub state: SendState,
    pub attempts: i32,
    #[serde(rename = "nextAttemptAt")]
    pub next_attempt_at: bson::DateTime,
    #[serde(rename = "leaseUntil", default)]
    pub lease_until: Option<bson::DateTime>,
    #[serde(rename = "lastError", default)]
    pub last_error: Option<String>,
    #[serde(rename = "createdAt")]
    pub created_at: bson::DateTime,
    #[serde(rename = "sentAt", default)]
    pub sent_at: Option<bson::DateTime>,
}

impl SendRecord {
    pub fn site(&self) -> SiteId {
        SiteId::from_uuid(self.site_id.into())
    }
}

/// The id every instance derives for the same email: its kind, site,
/// period (or episode) start and address.
pub fn send_key(kind: &str, site: &SiteId, from: DateTime<Utc>, address: &Recipient) -> String {
    format!(
        "{kind}|{site}|{}|{address}",
        from.format("%Y-%m-%dT%H:%M:%SZ")
    )
}

fn sends(store: &Store) -> mongodb::Collection<SendRecord> {
    store.db().collection(SENDS)
}

/// What a new record is for.
pub struct NewSend<'a> {
    pub kind: &'a str,
    pub site: &'a SiteId,
    pub address: &'a Recipient,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// Records an email to send unless its record exists (made here before, or
/// by another instance); true when this call made it.
pub async fn record_due(
    store: &Store,
    new: &NewSend<'_>,
    now: DateTime<Utc>,
) -> Result<bool, mongodb::error::Error> {
    let at = bson::DateTime::from_chrono(now);
    let record = SendRecord {
        key: send_key(new.kind, new.site, new.from, new.address),
        site_id: site_key(new.site),
        address: new.address.clone(),
        kind: new.kind.to_owned(),
        from: bson::DateTime::from_chrono(new.from),
        to: bson::DateTime::from_chrono(new.to),
        state: SendState::Pending,
        attempts: 0,
        next_attempt_at: at,
        lease_until: None,
        last_error: None,
        created_at: at,
        sent_at: None,
    };
    match sends(store).insert_one(&record).await {
        Ok(_) => Ok(true),
        Err(e) if super::values::is_duplicate_key(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Claims a pending record whose attempt is due, for `lease`: one atomic
/// update, so of several instances only one gets it. `None`: sent,
/// claimed by another, or not due.
pub async fn claim(
    store: &Store,
    key: &str,
    now: DateTime<Utc>,
    lease: TimeDelta,
) -> Result<Option<SendRecord>, mongodb::error::Error> {
    let at = bson::DateTime::from_chrono(now);
    sends(store)
        .find_one_and_update(
            doc! {"_id": key, "state": "pending", "nextAttemptAt": {"$lte": at}},
            doc! {
                "$set": {"state": "sending", "leaseUntil": bson::DateTime::from_chrono(now + lease)},
                "$inc": {"attempts": 1},
            },
        )
        .return_document(ReturnDocument::After)
        .await
}

/// The pending records due for an attempt at `now` (retries, and records
/// made by an instance that stopped before claiming them).
pub async fn due(
    store: &Store,
    now: DateTime<Utc>,
) -> Result<Vec<SendRecord>, mongodb::error::Error> {
    sends(store)
        .find(
            doc! {"state": "pending", "nextAttemptAt": {"$lte": bson::DateTime::from_chrono(now)}},
        )
        .sort(doc! {"nextAttemptAt": 1})
        .limit(500)
        .await?
        .try_collect()
        .await
}

async fn finish(store: &Store, key: &str, set: Document) -> Result<(), mongodb::error::Error> {
    sends(store)
        .update_one(doc! {"_id": key, "state": "sending"}, doc! {"$set": set})
        .await?;
    Ok(())
}

pub async fn mark_sent(
    store: &Store,
    key: &str,
    now: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    let at = bson::DateTime::from_chrono(now);
    // A send slower than its lease was marked abandoned meanwhile (by this
    // or another instance); it went out after all, so the record says so.
    sends(store)
        .update_one(
            doc! {"_id": key, "state": {"$in": ["sending", "abandoned"]}},
            doc! {"$set": {"state": "sent", "sentAt": at, "lastError": null}},
        )
        .await?;
    Ok(())
}

/// Back to pending, tried again from `next`.
pub async fn mark_retry(
    store: &Store,
    key: &str,
    next: DateTime<Utc>,
    error: &str,
) -> Result<(), mongodb::error::Error> {
    let next = bson::DateTime::from_chrono(next);
    finish(
        store,
        key,
        doc! {"state": "pending", "nextAttemptAt": next, "lastError": error},
    )
    .await
}

pub async fn mark_failed(
    store: &Store,
    key: &str,
    error: &str,
) -> Result<(), mongodb::error::Error> {
    finish(store, key, doc! {"state": "failed", "lastError": error}).await
}

/// Records claimed by a sender that stopped (lease over) become
/// `abandoned`, never sent again: the email may have gone out just before
/// the stop, and a second copy is what these records exist to prevent.
/// How many there were.
pub async fn abandon_expired(
    store: &Store,
    now: DateTime<Utc>,
) -> Result<u64, mongodb::error::Error> {
    let at = bson::DateTime::from_chrono(now);
    let r = sends(store)
        .update_many(
            doc! {"state": "sending", "leaseUntil": {"$lt": at}},
            doc! {"$set": {"state": "abandoned", "lastError": "the sender stopped while sending it; not sent again"}},
        )
        .await?;
    Ok(r.modified_count)
}

/// How many records are in each state (the system page).
pub async fn counts(store: &Store) -> Result<Vec<(SendState, u64)>, mongodb::error::Error> {
    let mut out = Vec::new();
    for state in SendState::ALL {
        let n = sends(store)
            .count_documents(doc! {"state": state.key()})
            .await?;
        out.push((state, n));
    }
    Ok(out)
}

/// The latest records that failed or were abandoned, newest first.
pub async fn recent_problems(
    store: &Store,
    n: i64,
) -> Result<Vec<SendRecord>, mongodb::error::Error> {
    sends(store)
        .find(doc! {"$or": [{"state": {"$in": ["failed", "abandoned"]}}, {"lastError": {"$type": "string"}}]})
        .sort(doc! {"createdAt": -1})
        .limit(n)
        .await?
        .try_collect()
        .await
}

/// Every record of a site (tests and the CLI's summary).
pub async fn for_site(
    store: &Store,
    site: &SiteId,
) -> Result<Vec<SendRecord>, mongodb::error::Error> {
    sends(store)
        .find(doc! {"siteId": site_key(site)})
        .sort(doc! {"createdAt": 1})
        .await?
        .try_collect()
        .await
}

// ----------------------------------------------------------- alert episodes

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Episode {
    /// `<kind>|<site>`: one per site and kind of alert.
    #[serde(rename = "_id")]
    pub key: String,
    pub open: bool,
    #[serde(rename = "startedAt")]
    pub started_at: bson::DateTime,
    #[serde(rename = "endedAt", default)]
    pub ended_at: Option<bson::DateTime>,
    /// The rules it opened under: while the condition they describe holds,
    /// the episode goes on whatever the rules became since (switched off
    /// and on, or edited), so that an edit never sends a second alert for
    /// the same spike or drop. Missing in episodes of older versions.
    #[serde(default)]
    pub rules: Option<AlertRules>,
}

fn episodes(store: &Store) -> mongodb::Collection<Episode> {
    store.db().collection(EPISODES)
}

fn episode_key(kind: &str, site: &SiteId) -> String {
    format!("{kind}|{site}")
}

/// The open episode of `kind` on `site`, if any.
pub async fn open_episode_of(
    store: &Store,
    kind: &str,
    site: &SiteId,
) -> Result<Option<Episode>, mongodb::error::Error> {
    episodes(store)
        .find_one(doc! {"_id": episode_key(kind, site), "open": true})
        .await
}

/// The open episode of `kind` on `site`, opening one at `now` under
/// `rules` unless one is open: its start (which names its alert emails).
pub async fn open_episode(
    store: &Store,
    kind: &str,
    site: &SiteId,
    now: DateTime<Utc>,
    rules: &AlertRules,
) -> Result<DateTime<Utc>, mongodb::error::Error> {
    let key = episode_key(kind, site);
    let at = bson::DateTime::from_chrono(now);
    let rules = bson::to_bson(rules).map_err(mongodb::error::Error::custom)?;
    // Opens a closed (or missing) one; an open one does not match, and
    // the upsert's insert then fails on `_id`: it stays as it is.
    let opened = episodes(store)
        .find_one_and_update(
            doc! {"_id": &key, "open": {"$ne": true}},
            doc! {"$set": {"open": true, "startedAt": at, "endedAt": null, "rules": rules}},
        )
        .upsert(true)
        .return_document(ReturnDocument::After)
        .await;
    match opened {
        Ok(Some(e)) => Ok(e.started_at.to_chrono()),
        Ok(None) => Ok(now),
        Err(e) if super::values::is_duplicate_key(&e) => {
            let open = episodes(store).find_one(doc! {"_id": &key}).await?;
            Ok(open.map_or(now, |e| e.started_at.to_chrono()))
        }
        Err(e) => Err(e),
    }
}

/// Ends the open episode of `kind` on `site`, if any; true when one ended.
pub async fn close_episode(
    store: &Store,
    kind: &str,
    site: &SiteId,
    now: DateTime<Utc>,
) -> Result<bool, mongodb::error::Error> {
    let r = episodes(store)
        .update_one(
            doc! {"_id": episode_key(kind, site), "open": true},
            doc! {"$set": {"open": false, "endedAt": bson::DateTime::from_chrono(now)}},
        )
        .await?;
    Ok(r.modified_count == 1)
}

// -------------------------------------------------------------------- key

/// The instance's key for unsubscribe links, made once and shared by every
/// instance through the database (a link made by one works on all, and
/// after a restart).
pub async fn link_key(store: &Store) -> Result<[u8; 32], mongodb::error::Error> {
    let keys = store.db().collection::<Document>(KEYS);
    let mut fresh = [0u8; 32];
    getrandom::fill(&mut fresh).expect("the operating system's random source");
    let made = keys
        .insert_one(doc! {"_id": "unsubscribe", "key": bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: fresh.to_vec(),
        }})
        .await;
    match made {
        Ok(_) => return Ok(fresh),
        Err(e) if super::values::is_duplicate_key(&e) => {}
        Err(e) => return Err(e),
    }
    let stored = keys
        .find_one(doc! {"_id": "unsubscribe"})
        .await?
        .and_then(|d| d.get_binary_generic("key").ok().cloned())
        .filter(|k| k.len() == 32);
    match stored {
        Some(k) => {
            let mut key = [0u8; 32];
            key.copy_from_slice(&k);
            Ok(key)
        }
        None => Err(mongodb::error::Error::custom(
            "the stored unsubscribe key is malformed",
        )),
    }
}

//! Sites: a canonical domain (the prefix of every page key), aliases that
//! also count as the site's host, a name and owners.
//!
//! A host names one site only, including sites being deleted: each host is
//! the `_id` of a document in [`HOSTS`], written in the same transaction as
//! the site, so two concurrent adds of one host cannot both succeed.
//!
//! Hosts an owner added (a site of their own, an alias) are *unconfirmed*
//! until an admin saves the site: page views naming the site by its id
//! count on them (the id in the snippet is the owner's proof), but a hit
//! found only through its Referer does not, so nobody collects another
//! site's addresses by registering its host.

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Store;
use crate::domain::{
    DomainName, Goal, PageCapSetting, SiteId, SiteName, TimeZone, MAX_GOALS_PER_SITE,
};

pub const COLLECTION: &str = "sites";

#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub id: SiteId,
    pub name: String,
    pub domain: DomainName,
    pub aliases: Vec<DomainName>,
    pub owners: Vec<Uuid>,
    pub created_at: DateTime<Utc>,
    /// The zone its reports are in.
    pub time_zone: TimeZone,
    /// Its site totals are complete (created with them, or backfilled):
    /// reports read them instead of adding up page buckets.
    pub totals_complete: bool,
    /// Its own new-page cap, set by an admin.
    pub page_cap: PageCapSetting,
    /// Hosts an owner added that no admin has confirmed yet.
    pub unconfirmed_hosts: Vec<DomainName>,
    /// The events and pages its owner marked as goals, in the
    /// order they were added; at most [`MAX_GOALS_PER_SITE`].
    pub goals: Vec<Goal>,
}

impl Site {
    /// Whether a page on `host` belongs to this site.
    pub fn owns_host(&self, host: &str) -> bool {
        self.domain.as_str() == host || self.aliases.iter().any(|a| a.as_str() == host)
    }

    pub fn hosts(&self) -> impl Iterator<Item = &DomainName> {
        std::iter::once(&self.domain).chain(self.aliases.iter())
    }

    /// The hosts a hit may be attributed to by its Referer alone.
    pub fn confirmed_hosts(&self) -> impl Iterator<Item = &DomainName> {
        self.hosts().filter(|h| !self.unconfirmed_hosts.contains(h))
    }
}

/// The stored shape; ids are BSON UUIDs (binary subtype 4).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SiteDoc {
    #[serde(rename = "_id")]
    id: bson::Uuid,
    name: String,
    domain: DomainName,
    #[serde(default)]
    aliases: Vec<DomainName>,
    #[serde(default)]
    owners: Vec<bson::Uuid>,
    #[serde(rename = "createdAt")]
    created_at: bson::DateTime,
    /// Set when the site is deleted: a tombstone until its buckets are
    /// purged (see [`mark_deleted`]).
    #[serde(rename = "deletedAt", default, skip_serializing_if = "Option::is_none")]
    deleted_at: Option<bson::DateTime>,
    #[serde(rename = "timeZone", default)]
    time_zone: Option<String>,
    /// Absent on sites created before site totals existed.
    #[serde(rename = "siteTotals", default)]
    totals_complete: bool,
    #[serde(
        rename = "unconfirmedHosts",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    unconfirmed_hosts: Vec<DomainName>,
    /// Absent: the instance's budgets; `"none"`; or new pages per hour.
    #[serde(rename = "pageCap", default, skip_serializing_if = "Option::is_none")]
    page_cap: Option<bson::Bson>,
    /// Each goal's [`Goal::stored`] form; absent on sites without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    goals: Vec<String>,
}

fn cap_from_stored(v: Option<bson::Bson>) -> PageCapSetting {
    match v {
        Some(bson::Bson::String(s)) if s == "none" => PageCapSetting::Unlimited,
        Some(v) => super::values::number(Some(&v))
            .and_then(|n| u64::try_from(n).ok())
            .filter(|&n| n > 0)
            .map_or(PageCapSetting::Default, PageCapSetting::PerHour),
        None => PageCapSetting::Default,
    }
}

fn cap_to_stored(cap: PageCapSetting) -> Option<bson::Bson> {
    match cap {
        PageCapSetting::Default => None,
        PageCapSetting::Unlimited => Some(bson::Bson::String("none".into())),
        PageCapSetting::PerHour(n) => Some(bson::Bson::Int64(n as i64)),
    }
}

impl From<SiteDoc> for Site {
    fn from(d: SiteDoc) -> Self {
        Site {
            id: SiteId::from_uuid(d.id.into()),
            name: d.name,
            domain: d.domain,
            aliases: d.aliases,
            owners: d.owners.into_iter().map(Uuid::from).collect(),
            created_at: d.created_at.to_chrono(),
            // A name this build does not know (written by a newer tz
            // database) reads as UTC rather than hiding the site.
            time_zone: d
                .time_zone
                .and_then(|z| TimeZone::parse(&z).ok())
                .unwrap_or_default(),
            totals_complete: d.totals_complete,
            page_cap: cap_from_stored(d.page_cap),
            unconfirmed_hosts: d.unconfirmed_hosts,
            // A kind a newer build added (or a name an older one allowed)
            // is left out of reports rather than hiding the site.
            goals: d
                .goals
                .iter()
                .filter_map(|g| Goal::from_stored(g))
                .collect(),
        }
    }
}

impl From<&Site> for SiteDoc {
    fn from(s: &Site) -> Self {
        SiteDoc {
            id: s.id.as_uuid().into(),
            name: s.name.clone(),
            domain: s.domain.clone(),
            aliases: s.aliases.clone(),
            owners: s.owners.iter().map(|&u| u.into()).collect(),
            created_at: bson::DateTime::from_chrono(s.created_at),
            deleted_at: None,
            time_zone: Some(s.time_zone.name().to_owned()),
            totals_complete: s.totals_complete,
            page_cap: cap_to_stored(s.page_cap),
            unconfirmed_hosts: s.unconfirmed_hosts.clone(),
            goals: s.goals.iter().map(Goal::stored).collect(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewSite {
    pub domain: DomainName,
    pub aliases: Vec<DomainName>,
    pub name: Option<String>,
    pub owners: Vec<Uuid>,
    pub time_zone: TimeZone,
}

#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("{0} already belongs to a site")]
    HostTaken(String),
    #[error("{0} was just deleted and its data is being removed; add it again in a few minutes")]
    BeingDeleted(String),
    #[error(transparent)]
    Name(#[from] crate::domain::SiteNameError),
    #[error("a site with id {0} exists already")]
    IdTaken(SiteId),
    /// The owner already has the most sites an owner may add.
    #[error("the owner already owns {owned} sites, the most an owner may add")]
    OwnerCap { owned: u64 },
    #[error("database error")]
    Database(#[from] mongodb::error::Error),
}

pub(super) fn collection(store: &Store) -> mongodb::Collection<SiteDoc> {
    store.db().collection(COLLECTION)
}

/// One document per host of every site (deleted ones too, until purged):
/// `{_id: host, siteId}`.
pub const HOSTS: &str = "site_hosts";

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct HostDoc {
    #[serde(rename = "_id")]
    host: String,
    #[serde(rename = "siteId")]
    site: bson::Uuid,
}

pub(super) fn hosts_collection(store: &Store) -> mongodb::Collection<HostDoc> {
    store.db().collection(HOSTS)
}

/// Who adds or changes a site: an admin (or the command line) vouches for
/// its hosts; an owner's new hosts stay unconfirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangedBy {
    Admin,
    Owner,
}

/// How one try of a transaction on hosts ended.
enum Outcome {
    /// Another site holds this host.
    Taken(String),
    /// The owner is at their cap.
    OwnerCap(u64),
    Failed(mongodb::error::Error),
}

impl From<mongodb::error::Error> for Outcome {
    fn from(e: mongodb::error::Error) -> Self {
        Outcome::Failed(e)
    }
}

/// Runs `attempt` until it commits, is refused, or fails for a reason
/// other than a race with another transaction.
async fn retried<F, Fut>(store: &Store, mut attempt: F) -> Result<(), SiteError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Outcome>>,
{
    let mut tries = 0;
    loop {
        match attempt().await {
            Ok(()) => return Ok(()),
            Err(Outcome::Taken(host)) => return Err(holder_refusal(store, host).await),
            Err(Outcome::OwnerCap(owned)) => return Err(SiteError::OwnerCap { owned }),
            Err(Outcome::Failed(e))
                if super::txn::should_retry(&e) && tries < super::txn::MAX_TRIES =>
            {
                tries += 1;
                super::txn::pause(tries).await;
            }
            Err(Outcome::Failed(e)) => return Err(e.into()),
        }
    }
}

/// Claims `host` for `site` inside the session's transaction (a host it
/// already holds is kept: the caller's copy of the site may be a few
/// seconds old).
async fn claim(
    store: &Store,
    session: &mut mongodb::ClientSession,
    host: &str,
    site: bson::Uuid,
) -> Result<(), Outcome> {
    let hosts = hosts_collection(store);
    let held = hosts
        .find_one(doc! {"_id": host})
        .session(&mut *session)
        .await?;
    match held {
        Some(h) if h.site == site => return Ok(()),
        Some(_) => {}
        None => {
            let doc = HostDoc {
                host: host.to_owned(),
                site,
            };
            match hosts.insert_one(doc).session(&mut *session).await {
                Ok(_) => return Ok(()),
                Err(e) if super::values::is_duplicate_key(&e) => {}
                Err(e) => {
                    let _ = session.abort_transaction().await;
                    return Err(e.into());
                }
            }
        }
    }
    let _ = session.abort_transaction().await;
    Err(Outcome::Taken(host.to_owned()))
}

/// Why `host` cannot be had: its site is being deleted, or it is taken.
async fn holder_refusal(store: &Store, host: String) -> SiteError {
    let holder = match hosts_collection(store).find_one(doc! {"_id": &host}).await {
        Ok(Some(h)) => collection(store).find_one(doc! {"_id": h.site}).await,
        Ok(None) => Ok(None),
        Err(e) => return e.into(),
    };
    match holder {
        Ok(Some(site)) if site.deleted_at.is_some() => {
            SiteError::BeingDeleted(site.domain.to_string())
        }
        Ok(_) => SiteError::HostTaken(host),
        Err(e) => e.into(),
    }
}

/// Who adds a site, which decides the rules it is added under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creator {
    /// The command line: the operator vouches for the hosts, and may give
    /// the id (a site moved from Umami keeps its website id, so the
    /// `data-website-id` of its snippets stays as it is).
    Operator { id: Option<SiteId> },
    /// An admin (the admin form, or an admin on the owner's form): the
    /// hosts are confirmed, the owners are whoever the admin lists.
    Admin,
    /// An owner adding a site of their own: they are among its owners,
    /// every host starts unconfirmed (until an admin confirms it), and
    /// they may own at most `max_sites` (a bound on what one owner can
    /// make the instance keep, and on hosts claimed in bulk).
    Owner { user: Uuid, max_sites: u64 },
}

/// Adds a site: the one way the command line, the admin form and the
/// owner form create one. The owner's cap is counted in the insert's
/// transaction, which also writes the owner's document in
/// [`OWNER_TICKETS`], so two adds of one owner never both see room: the
/// second conflicts, runs again and counts the first one's site. That is
/// why the rules live here, beside the transaction, rather than in each
/// caller: none of them can skip one.
pub async fn create(
    store: &Store,
    mut new: NewSite,
    by: Creator,
    now: DateTime<Utc>,
) -> Result<Site, SiteError> {
    match by {
        Creator::Operator { id: Some(id) } => {
            let existing = collection(store)
                .clone_with_type::<bson::Document>()
                .find_one(doc! {"_id": bson::Uuid::from(id.as_uuid())})
                .await?;
            if existing.is_some() {
                return Err(SiteError::IdTaken(id));
            }
            insert_under(store, new, id, now, ChangedBy::Admin, None).await
        }
        Creator::Operator { id: None } | Creator::Admin => {
            insert_under(store, new, SiteId::new(), now, ChangedBy::Admin, None).await
        }
        Creator::Owner { user, max_sites } => {
            if !new.owners.contains(&user) {
                new.owners.push(user);
            }
            let cap = Some((user, max_sites));
            insert_under(store, new, SiteId::new(), now, ChangedBy::Owner, cap).await
        }
    }
}

/// Adds a site whose hosts an admin (or the command line) vouches for:
/// [`create`] by [`Creator::Admin`].
pub async fn insert(store: &Store, new: NewSite, now: DateTime<Utc>) -> Result<Site, SiteError> {
    create(store, new, Creator::Admin, now).await
}

/// One document per owner who added a site of their own,
/// `{_id: owner, adds}`: written by every such add so that concurrent
/// adds of one owner conflict (see [`create`]).
pub const OWNER_TICKETS: &str = "site_owner_tickets";

async fn insert_under(
    store: &Store,
    new: NewSite,
    id: SiteId,
    now: DateTime<Utc>,
    by: ChangedBy,
    cap: Option<(Uuid, u64)>,
) -> Result<Site, SiteError> {
    // Checked here too, whoever calls: a stored name is one line.
    let name = match new
        .name
        .as_deref()
        .map(SiteName::parse)
        .transpose()?
        .flatten()
    {
        Some(name) => name.into_string(),
        None => new.domain.to_string(),
    };
    let mut aliases = new.aliases;
    aliases.sort();
    aliases.dedup();
    aliases.retain(|a| *a != new.domain);
    let mut site = Site {
        id,
        name,
        domain: new.domain,
        aliases,
        owners: new.owners,
        created_at: now,
        time_zone: new.time_zone,
        // A new site has no page buckets: its totals start complete.
        totals_complete: true,
        page_cap: PageCapSetting::Default,
        unconfirmed_hosts: Vec::new(),
        goals: Vec::new(),
    };
    if by == ChangedBy::Owner {
        site.unconfirmed_hosts = site.hosts().cloned().collect();
    }
    let id = bson::Uuid::from(site.id.as_uuid());
    let site_ref = &site;
    retried(store, || async move {
        let site = site_ref;
        let mut session = super::txn::begin(store).await?;
        if let Some((owner, max_sites)) = cap {
            let owner = bson::Uuid::from(owner);
            store
                .db()
                .collection::<bson::Document>(OWNER_TICKETS)
                .update_one(doc! {"_id": owner}, doc! {"$inc": {"adds": 1_i64}})
                .upsert(true)
                .session(&mut session)
                .await?;
            let owned = collection(store)
                .count_documents(owned_filter(owner))
                .session(&mut session)
                .await?;
            if owned >= max_sites {
                let _ = session.abort_transaction().await;
                return Err(Outcome::OwnerCap(owned));
            }
        }
        for host in site.hosts() {
            claim(store, &mut session, host.as_str(), id).await?;
        }
        if let Err(e) = collection(store)
            .insert_one(SiteDoc::from(site))
            .session(&mut session)
            .await
        {
            let _ = session.abort_transaction().await;
            return Err(if super::values::is_duplicate_key(&e) {
                Outcome::Taken(site.domain.to_string())
            } else {
                e.into()
            });
        }
        super::txn::commit(&mut session).await?;
        Ok(())
    })
    .await?;
    Ok(site)
}

/// What an admin may change on a site. The domain is fixed: it is the
/// prefix of every stored page key.
#[derive(Debug, Clone)]
pub struct SiteChanges {
    pub name: String,
    pub aliases: Vec<DomainName>,
    pub owners: Vec<Uuid>,
}

/// An admin's change: every host of the site is confirmed with it.
pub async fn update(store: &Store, site: &Site, changes: SiteChanges) -> Result<(), SiteError> {
    update_as(store, site, changes, ChangedBy::Admin).await
}

/// Changes a site as `by` does: an owner's new aliases stay unconfirmed
/// (and so do the hosts that were).
pub async fn update_as(
    store: &Store,
    site: &Site,
    changes: SiteChanges,
    by: ChangedBy,
) -> Result<(), SiteError> {
    let name = SiteName::parse(&changes.name)?;
    let mut aliases = changes.aliases;
    aliases.sort();
    aliases.dedup();
    aliases.retain(|a| *a != site.domain);
    let unconfirmed: Vec<DomainName> = match by {
        ChangedBy::Admin => Vec::new(),
        ChangedBy::Owner => std::iter::once(&site.domain)
            .chain(aliases.iter())
            .filter(|h| site.unconfirmed_hosts.contains(h) || !site.owns_host(h.as_str()))
            .cloned()
            .collect(),
    };
    let name = match name {
        Some(name) => name.into_string(),
        None => site.domain.to_string(),
    };
    let id = bson::Uuid::from(site.id.as_uuid());
    let hosts: Vec<&str> = aliases.iter().map(DomainName::as_str).collect();
    let kept: Vec<&str> = std::iter::once(site.domain.as_str())
        .chain(hosts.iter().copied())
        .collect();
    let (kept, hosts, aliases, name, unconfirmed) = (&kept, &hosts, &aliases, &name, &unconfirmed);
    let owners: Vec<bson::Uuid> = changes
        .owners
        .iter()
        .map(|&u| bson::Uuid::from(u))
        .collect();
    let owners = &owners;
    retried(store, || async move {
        let mut session = super::txn::begin(store).await?;
        hosts_collection(store)
            .delete_many(doc! {"siteId": id, "_id": {"$nin": kept}})
            .session(&mut session)
            .await?;
        for host in aliases.iter() {
            claim(store, &mut session, host.as_str(), id).await?;
        }
        collection(store)
            .update_one(
                doc! {"_id": id},
                doc! {"$set": {
                    "name": name,
                    "aliases": hosts,
                    "owners": owners,
                    "unconfirmedHosts": unconfirmed.iter().map(DomainName::as_str).collect::<Vec<_>>(),
                }},
            )
            .session(&mut session)
            .await?;
        super::txn::commit(&mut session).await?;
        Ok(())
    })
    .await
}

/// How many sites (not deleted) list `owner` among their owners.
pub async fn count_owned(store: &Store, owner: Uuid) -> Result<u64, mongodb::error::Error> {
    collection(store)
        .count_documents(owned_filter(bson::Uuid::from(owner)))
        .await
}

/// Takes a deleted user off every site's owners, deleted sites included:
/// no site names a user who no longer exists.
pub async fn remove_owner_everywhere(
    store: &Store,
    owner: Uuid,
) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_many(
            doc! {"owners": bson::Uuid::from(owner)},
            doc! {"$pull": {"owners": bson::Uuid::from(owner)}},
        )
        .await
        .map(|_| ())
}

fn owned_filter(owner: bson::Uuid) -> bson::Document {
    doc! {"owners": owner, "deletedAt": {"$exists": false}}
}

/// Writes the host documents of sites from before they existed (run with
/// the indexes at every start; a no-op once done). Two old sites sharing a
/// host (possible before) keep working; the first claims it and the clash
/// is logged for an admin to resolve.
pub async fn backfill_hosts(store: &Store) -> Result<(), mongodb::error::Error> {
    let held: std::collections::HashSet<String> = hosts_collection(store)
        .find(doc! {})
        .await?
        .try_collect::<Vec<_>>()
        .await?
        .into_iter()
        .map(|h| h.host)
        .collect();
    let sites: Vec<SiteDoc> = collection(store).find(doc! {}).await?.try_collect().await?;
    for site in sites {
        let hosts = std::iter::once(&site.domain).chain(site.aliases.iter());
        for host in hosts.filter(|h| !held.contains(h.as_str())) {
            let doc = HostDoc {
                host: host.to_string(),
                site: site.id,
            };
            match hosts_collection(store).insert_one(doc).await {
                Ok(_) => {}
                Err(e) if super::values::is_duplicate_key(&e) => {
                    tracing::warn!(host = %host, site = %site.domain, "two sites share this host; the other keeps it for hits found by their Referer");
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Deletes a site, in two steps so that no hit re-creates its buckets.
///
/// First the site is marked deleted: every instance's directory drops it
/// at its next refresh (the pixel then refuses its hits as an unknown
/// site), and the appliers skip hits of a marked site that were accepted
/// before (they may sit in a journal for as long as the database is away).
/// Its buckets are purged once `purge_after` has passed ([`purge_due`]), by
/// then every instance has refreshed; the mark stays until the purge.
pub async fn mark_deleted(
    store: &Store,
    site: &Site,
    now: DateTime<Utc>,
) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$set": {"deletedAt": bson::DateTime::from_chrono(now)}},
        )
        .await?;
    Ok(())
}

/// The canonical domains of sites marked deleted and not purged yet.
pub async fn deleted_domains(store: &Store) -> Result<Vec<DomainName>, mongodb::error::Error> {
    let docs: Vec<SiteDoc> = collection(store)
        .find(doc! {"deletedAt": {"$exists": true}})
        .await?
        .try_collect()
        .await?;
    Ok(docs.into_iter().map(|d| d.domain).collect())
}

/// Whether the site exists and is not marked deleted: what may still get
/// derived data (page summaries) stored for it.
pub async fn is_live(store: &Store, site: &SiteId) -> Result<bool, mongodb::error::Error> {
    Ok(collection(store)
        .clone_with_type::<bson::Document>()
        .find_one(doc! {"_id": bson::Uuid::from(site.as_uuid()), "deletedAt": null})
        .projection(doc! {"_id": 1})
        .await?
        .is_some())
}

/// Records that the site's totals are complete (see `site_totals`).
pub async fn mark_totals_complete(store: &Store, site: &Site) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$set": {"siteTotals": true}},
        )
        .await
        .map(|_| ())
}

/// Sets the site's own new-page cap (`Default` removes it).
pub async fn set_page_cap(
    store: &Store,
    site: &Site,
    cap: PageCapSetting,
) -> Result<(), mongodb::error::Error> {
    let change = match cap_to_stored(cap) {
        Some(v) => doc! {"$set": {"pageCap": v}},
        None => doc! {"$unset": {"pageCap": ""}},
    };
    collection(store)
        .update_one(doc! {"_id": bson::Uuid::from(site.id.as_uuid())}, change)
        .await
        .map(|_| ())
}

/// Sets the zone the site's reports are in.
pub async fn set_time_zone(
    store: &Store,
    site: &Site,
    zone: TimeZone,
) -> Result<(), mongodb::error::Error> {
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$set": {"timeZone": zone.name()}},
        )
        .await
        .map(|_| ())
}

#[derive(Debug, thiserror::Error)]
pub enum GoalChangeError {
    #[error("a site has at most {MAX_GOALS_PER_SITE} goals: remove one before adding another")]
    Full,
    #[error("this goal is already there")]
    AlreadyThere,
    #[error("this goal is not there (it may have been removed already)")]
    NotThere,
    /// Deleted (or marked deleted) since the caller read it.
    #[error("the site is gone")]
    NoSite,
    #[error("database error")]
    Database(#[from] mongodb::error::Error),
}

/// The filter of a site in use: a goal change never revives a site being
/// deleted.
fn live_site(id: &SiteId) -> bson::Document {
    doc! {"_id": bson::Uuid::from(id.as_uuid()), "deletedAt": {"$exists": false}}
}

/// Adds a goal to the site, in one update so that two owners adding at
/// once can neither exceed [`MAX_GOALS_PER_SITE`] nor store one goal twice.
pub async fn add_goal(store: &Store, site: &SiteId, goal: &Goal) -> Result<(), GoalChangeError> {
    let stored = goal.stored();
    let last = format!("goals.{}", MAX_GOALS_PER_SITE - 1);
    let mut filter = live_site(site);
    // A site that has the goal matches even when full, so that a duplicate
    // is told apart from a full list by the one update's result.
    filter.insert(
        "$or",
        vec![doc! {&last: {"$exists": false}}, doc! {"goals": &stored}],
    );
    let result = collection(store)
        .update_one(filter, doc! {"$addToSet": {"goals": &stored}})
        .await?;
    if result.matched_count == 0 {
        let exists = collection(store).count_documents(live_site(site)).await? > 0;
        return Err(if exists {
            GoalChangeError::Full
        } else {
            GoalChangeError::NoSite
        });
    }
    if result.modified_count == 0 {
        return Err(GoalChangeError::AlreadyThere);
    }
    Ok(())
}

/// Removes a goal from the site.
pub async fn remove_goal(store: &Store, site: &SiteId, goal: &Goal) -> Result<(), GoalChangeError> {
    let mut filter = live_site(site);
    filter.insert("goals", goal.stored());
    let result = collection(store)
        .update_one(filter, doc! {"$pull": {"goals": goal.stored()}})
        .await?;
    if result.modified_count == 0 {
        let exists = collection(store).count_documents(live_site(site)).await? > 0;
        return Err(if exists {
            GoalChangeError::NotThere
        } else {
            GoalChangeError::NoSite
        });
    }
    Ok(())
}

/// The sites in use (not marked deleted).
pub async fn list(store: &Store) -> Result<Vec<Site>, mongodb::error::Error> {
    let docs: Vec<SiteDoc> = collection(store)
        .find(doc! {"deletedAt": {"$exists": false}})
        .sort(doc! {"domain": 1})
        .await?
        .try_collect()
        .await?;
    Ok(docs.into_iter().map(Site::from).collect())
}

/// A domain or alias names one site only; the pixel's directory finds
/// sites by either.
pub fn indexes() -> Vec<super::schema::IndexSpec> {
    use super::schema::IndexSpec;
    vec![
        IndexSpec::new(COLLECTION, "domain", doc! {"domain": 1}).unique(),
        IndexSpec::new(COLLECTION, "aliases_1", doc! {"aliases": 1}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_owns_its_domain_and_aliases_only() {
        let site = Site {
            id: SiteId::new(),
            name: "x".into(),
            domain: DomainName::parse("example.com").unwrap(),
            aliases: vec![DomainName::parse("www.example.com").unwrap()],
            owners: vec![],
            created_at: Utc::now(),
            time_zone: TimeZone::UTC,
            totals_complete: true,
            page_cap: PageCapSetting::Default,
            unconfirmed_hosts: vec![],
            goals: vec![],
        };
        assert!(site.owns_host("example.com"));
        assert!(site.owns_host("www.example.com"));
        assert!(!site.owns_host("evil.com"));
        assert!(!site.owns_host("example.com.evil.com"));
    }
}

//! Sites: a canonical domain (the prefix of every page key), aliases that
//! also count as the site's host, a name and owners.

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Store;
use crate::domain::{DomainName, PageCapSetting, SiteId, TimeZone};

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
    /// Its own new-page cap, set by an admin (issue 29).
    pub page_cap: PageCapSetting,
}

impl Site {
    /// Whether a page on `host` belongs to this site.
    pub fn owns_host(&self, host: &str) -> bool {
        self.domain.as_str() == host || self.aliases.iter().any(|a| a.as_str() == host)
    }

    pub fn hosts(&self) -> impl Iterator<Item = &DomainName> {
        std::iter::once(&self.domain).chain(self.aliases.iter())
    }
}

/// The stored shape; ids are BSON UUIDs (binary subtype 4).
#[derive(Debug, Serialize, Deserialize)]
struct SiteDoc {
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
    /// Absent: the instance's budgets; `"none"`; or new pages per hour.
    #[serde(rename = "pageCap", default, skip_serializing_if = "Option::is_none")]
    page_cap: Option<bson::Bson>,
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
    #[error("a site name is at most 100 characters")]
    NameTooLong,
    #[error("database error")]
    Database(#[from] mongodb::error::Error),
}

fn collection(store: &Store) -> mongodb::Collection<SiteDoc> {
    store.db().collection(COLLECTION)
}

pub async fn insert(store: &Store, new: NewSite, now: DateTime<Utc>) -> Result<Site, SiteError> {
    let name = new.name.unwrap_or_else(|| new.domain.to_string());
    if name.chars().count() > 100 {
        return Err(SiteError::NameTooLong);
    }
    let mut aliases = new.aliases;
    aliases.sort();
    aliases.dedup();
    aliases.retain(|a| *a != new.domain);
    let hosts: Vec<&str> = std::iter::once(new.domain.as_str())
        .chain(aliases.iter().map(DomainName::as_str))
        .collect();
    let clash = collection(store)
        .find_one(doc! {"$or": [{"domain": {"$in": &hosts}}, {"aliases": {"$in": &hosts}}]})
        .await?;
    if let Some(other) = clash {
        if other.deleted_at.is_some() {
            return Err(SiteError::BeingDeleted(other.domain.to_string()));
        }
        let other = Site::from(other);
        let taken = hosts
            .iter()
            .find(|h| other.owns_host(h))
            .map_or_else(|| new.domain.to_string(), |h| h.to_string());
        return Err(SiteError::HostTaken(taken));
    }
    let site = Site {
        id: SiteId::new(),
        name,
        domain: new.domain,
        aliases,
        owners: new.owners,
        created_at: now,
        time_zone: new.time_zone,
        // A new site has no page buckets: its totals start complete.
        totals_complete: true,
        page_cap: PageCapSetting::Default,
    };
    match collection(store).insert_one(SiteDoc::from(&site)).await {
        Ok(_) => Ok(site),
        Err(e) if super::values::is_duplicate_key(&e) => {
            Err(SiteError::HostTaken(site.domain.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

/// What an admin may change on a site. The domain is fixed: it is the
/// prefix of every stored page key.
#[derive(Debug, Clone)]
pub struct SiteChanges {
    pub name: String,
    pub aliases: Vec<DomainName>,
    pub owners: Vec<Uuid>,
}

pub async fn update(store: &Store, site: &Site, changes: SiteChanges) -> Result<(), SiteError> {
    if changes.name.chars().count() > 100 {
        return Err(SiteError::NameTooLong);
    }
    let mut aliases = changes.aliases;
    aliases.sort();
    aliases.dedup();
    aliases.retain(|a| *a != site.domain);
    let hosts: Vec<&str> = aliases.iter().map(DomainName::as_str).collect();
    if !hosts.is_empty() {
        let clash = collection(store)
            .find_one(doc! {
                "_id": {"$ne": bson::Uuid::from(site.id.as_uuid())},
                "$or": [{"domain": {"$in": &hosts}}, {"aliases": {"$in": &hosts}}],
            })
            .await?;
        if let Some(other) = clash {
            let other = Site::from(other);
            let taken = hosts
                .iter()
                .find(|h| other.owns_host(h))
                .map_or_else(String::new, |h| h.to_string());
            return Err(SiteError::HostTaken(taken));
        }
    }
    let name = if changes.name.trim().is_empty() {
        site.domain.to_string()
    } else {
        changes.name.trim().to_owned()
    };
    collection(store)
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$set": {
                "name": name,
                "aliases": hosts,
                "owners": changes.owners.iter().map(|&u| bson::Uuid::from(u)).collect::<Vec<_>>(),
            }},
        )
        .await?;
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

/// Purges the sites marked deleted at least `purge_after` ago: their
/// buckets, then the mark. Returns each purged domain with the buckets
/// removed.
pub async fn purge_due(
    store: &Store,
    now: DateTime<Utc>,
    purge_after: chrono::TimeDelta,
) -> Result<Vec<(DomainName, u64)>, mongodb::error::Error> {
    let due: Vec<SiteDoc> = collection(store)
        .find(doc! {"deletedAt": {"$lte": bson::DateTime::from_chrono(now - purge_after)}})
        .await?
        .try_collect()
        .await?;
    let mut purged = Vec::new();
    for doc in due {
        let site = Site::from(doc);
        let removed = purge(store, &site).await?;
        purged.push((site.domain, removed));
    }
    Ok(purged)
}

/// Removes every bucket of a site's pages, its totals and sources, then
/// the site.
async fn purge(store: &Store, site: &Site) -> Result<u64, mongodb::error::Error> {
    use super::Subject;
    let mut removed = 0;
    let pages = site.domain.pages_filter();
    let site_key = site.domain.as_str();
    let mut targets: Vec<(&str, bson::Document)> = Vec::new();
    for g in super::Resolution::ALL {
        targets.push((g.collection(), doc! {"page": pages.clone()}));
        targets.push((Subject::Site.collection(g), doc! {"site": site_key}));
    }
    for (subject, collection) in super::sources::collections() {
        targets.push(match subject {
            Subject::Page => (collection, doc! {"page": pages.clone()}),
            Subject::Site => (collection, doc! {"site": site_key}),
        });
    }
    for (collection, filter) in targets {
        removed += store
            .db()
            .collection::<bson::Document>(collection)
            .delete_many(filter)
            .await?
            .deleted_count;
    }
    // Its share links would open nothing; a new site never reuses the id.
    store
        .db()
        .collection::<bson::Document>(super::share_links::COLLECTION)
        .delete_many(doc! {"siteId": bson::Uuid::from(site.id.as_uuid())})
        .await?;
    collection(store)
        .delete_one(doc! {"_id": bson::Uuid::from(site.id.as_uuid())})
        .await?;
    Ok(removed)
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
        };
        assert!(site.owns_host("example.com"));
        assert!(site.owns_host("www.example.com"));
        assert!(!site.owns_host("evil.com"));
        assert!(!site.owns_host("example.com.evil.com"));
    }
}

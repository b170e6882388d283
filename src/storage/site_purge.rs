//! Purging a deleted site: every bucket, total, breakdown, page summary,
//! visit (with its day packs and counters) and share link of it, then the
//! site. Above `sites` and the modules whose data it removes, so none of
//! them needs the others.

use bson::doc;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;

use super::sites::{collection, hosts_collection, Site, SiteDoc};
use super::Store;
use crate::domain::DomainName;

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
    for (subject, collection) in super::breakdowns::collections() {
        targets.push(match subject {
            Subject::Page => (collection, doc! {"page": pages.clone()}),
            Subject::Site => (collection, doc! {"site": site_key}),
        });
    }
    targets.push((super::visit_log::COLLECTION, doc! {"site": site_key}));
    targets.push((super::visit_log::PARTS, doc! {"site": site_key}));
    targets.push((
        super::imported_properties::COLLECTION,
        doc! {"site": site_key},
    ));
    for (collection, filter) in targets {
        removed += store
            .db()
            .collection::<bson::Document>(collection)
            .delete_many(filter)
            .await?
            .deleted_count;
    }
    removed += super::page_summaries::delete_site(store, &site.id.to_string()).await?;
    // The visits' read model and counters go with them.
    removed += super::visit_packs::delete_site(store, site_key).await?;
    removed += super::visit_days::delete_site(store, site_key).await?;
    let id = bson::Uuid::from(site.id.as_uuid());
    // Its share links would open nothing; a new site never reuses the id.
    store
        .db()
        .collection::<bson::Document>(super::share_links::COLLECTION)
        .delete_many(doc! {"siteId": id})
        .await?;
    super::funnels::delete_site(store, &site.id).await?;
    super::email::delete_site(store, &site.id).await?;
    // The mark and the hosts go together: a host is free exactly when the
    // site is gone.
    let mut tries = 0;
    loop {
        let result = async {
            let mut session = super::txn::begin(store).await?;
            hosts_collection(store)
                .delete_many(doc! {"siteId": id})
                .session(&mut session)
                .await?;
            collection(store)
                .delete_one(doc! {"_id": id})
                .session(&mut session)
                .await?;
            super::txn::commit(&mut session).await
        }
        .await;
        match result {
            Err(e) if super::txn::should_retry(&e) && tries < super::txn::MAX_TRIES => {
                tries += 1;
                super::txn::pause(tries).await;
            }
            // Summaries a report stored while the site was being purged
            // (see `page_summaries::write`).
            Ok(()) => {
                removed += super::page_summaries::delete_site(store, &site.id.to_string()).await?;
                return Ok(removed);
            }
            Err(e) => return Err(e),
        }
    }
}

//! An in-memory copy of the sites, so that resolving a pixel's site costs a
//! hash lookup and no database round trip. Reloaded on an interval and
//! whenever this process changes a site.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::domain::SiteId;
use crate::storage::{sites, sites::Site, Store};

#[derive(Default)]
struct Snapshot {
    by_id: HashMap<SiteId, Arc<Site>>,
    by_host: HashMap<String, Arc<Site>>,
    /// Canonical domains of sites marked deleted, not yet purged: their
    /// hits still in a journal are not applied.
    deleted: HashSet<String>,
}

#[derive(Clone, Default)]
pub struct SiteDirectory {
    current: Arc<RwLock<Arc<Snapshot>>>,
}

impl SiteDirectory {
    pub fn replace(&self, all: Vec<Site>) {
        self.replace_with_deleted(all, Vec::new());
    }

    fn replace_with_deleted(&self, all: Vec<Site>, deleted: Vec<crate::domain::DomainName>) {
        let mut next = Snapshot {
            deleted: deleted.into_iter().map(|d| d.to_string()).collect(),
            ..Snapshot::default()
        };
        for site in all {
            let site = Arc::new(site);
            // Only confirmed hosts: a hit found by its Referer alone must
            // not count for a host an owner merely claimed.
            for host in site.confirmed_hosts() {
                next.by_host.insert(host.to_string(), site.clone());
            }
            next.by_id.insert(site.id, site);
        }
        *self.current.write().expect("directory lock poisoned") = Arc::new(next);
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .expect("directory lock poisoned")
            .clone()
    }

    pub fn by_id(&self, id: &SiteId) -> Option<Arc<Site>> {
        self.snapshot().by_id.get(id).cloned()
    }

    pub fn by_host(&self, host: &str) -> Option<Arc<Site>> {
        self.snapshot().by_host.get(host).cloned()
    }

    /// Whether a stored page key (`domain/path`) belongs to a site marked
    /// deleted.
    pub fn is_deleted_page(&self, page: &str) -> bool {
        let snapshot = self.snapshot();
        !snapshot.deleted.is_empty()
            && page
                .split_once('/')
                .is_some_and(|(domain, _)| snapshot.deleted.contains(domain))
    }

    pub fn all(&self) -> Vec<Arc<Site>> {
        self.snapshot().by_id.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.snapshot().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub async fn reload(&self, store: &Store) -> Result<usize, mongodb::error::Error> {
        let (all, deleted) = tokio::try_join!(sites::list(store), sites::deleted_domains(store))?;
        let n = all.len();
        self.replace_with_deleted(all, deleted);
        Ok(n)
    }

    /// Reloads every `interval` until the task is aborted. A failed reload
    /// keeps the previous copy: a database hiccup must not make every site
    /// unknown.
    pub fn spawn_refresher(&self, store: Store, interval: Duration) -> tokio::task::JoinHandle<()> {
        let directory = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = directory.reload(&store).await {
                    tracing::warn!(error = %e, "site directory reload failed; keeping the previous copy");
                }
            }
        })
    }
}

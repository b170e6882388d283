//! Who a hit is from, without cookies and without keeping who they are.
//!
//! A visitor id is 64 bits of BLAKE3 keyed by the UTC day's salt over the
//! site, the client address (as the trusted-proxy rules of
//! `domain::client_ip` decide it; an IPv6 client by its /64) and the
//! User-Agent. The address and the User-Agent are read here and dropped:
//! only the id goes on, into the journal and the sketches.
//!
//! The salt is random, one per UTC day, stored in the database so every
//! instance makes the same id for the same visitor (`storage::salts`), and
//! deleted two days after its day by [`Salts::keep`]. So the same person is
//! a new visitor each UTC day, and once a day's salt is gone nobody can
//! recompute an id from an address, not even with the database.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;
use tokio::sync::watch;

use super::request::{Headers, HitRequest};
use super::visits::{OpenVisits, VisitsConfig};
use crate::clock::SharedClock;
use crate::domain::client_ip::TrustedProxies;
use crate::storage::salts::{self, Salt};
use crate::storage::Store;

/// What the pixel needs to tell visitors and visits apart.
#[derive(Debug)]
pub struct Visitors {
    pub salts: Salts,
    pub open: OpenVisits,
    /// Which peers may name the client in `X-Forwarded-For`.
    pub proxies: TrustedProxies,
}

impl Visitors {
    pub fn new(config: VisitsConfig, proxies: TrustedProxies) -> Self {
        Self {
            salts: Salts::default(),
            open: OpenVisits::new(config),
            proxies,
        }
    }

    /// The request's client as the budgets that anonymous clients share
    /// tell them apart (an address; an IPv6 client by its /64). Kept in
    /// memory only, never journaled or stored.
    pub fn client_key(&self, req: &HitRequest<'_>) -> String {
        self.proxies.client(req.peer, forwarded_for(req.headers))
    }

    /// The id of a hit at `at` on `site` from this request's client. The
    /// address and the User-Agent go no further than this call.
    pub fn id_of(&self, req: &HitRequest<'_>, at: DateTime<Utc>, site: &str) -> u64 {
        let client = self.client_key(req);
        let user_agent = req.headers.first("user-agent").unwrap_or_default();
        visitor_id(&self.salts.of(at), site, &client, user_agent)
    }
}

/// The `X-Forwarded-For` values of a request, in the order received.
pub fn forwarded_for(headers: &dyn Headers) -> Vec<&str> {
    headers.all("x-forwarded-for")
}

/// The salts of the days this instance counts in, as the database has
/// them, or a provisional one made here while the database cannot be
/// asked (replaced by the stored one as soon as it can).
#[derive(Debug, Default)]
pub struct Salts {
    days: RwLock<BTreeMap<NaiveDate, DaySalt>>,
}

#[derive(Debug, Clone, Copy)]
struct DaySalt {
    salt: Salt,
    /// Made here, not yet known to the database: another instance may be
    /// using another one (its visitors are counted apart until then).
    provisional: bool,
}

/// How often the keeper checks the day and the database.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How often it asks the database again when nothing changed.
const REFRESH_EVERY: TimeDelta = TimeDelta::minutes(10);

impl Salts {
    /// The salt of `at`'s UTC day: the stored one, else a provisional one
    /// (so a hit never waits on the database).
    pub fn of(&self, at: DateTime<Utc>) -> Salt {
        let day = at.date_naive();
        if let Some(found) = self.days.read().expect("salts lock").get(&day) {
            return found.salt;
        }
        let mut days = self.days.write().expect("salts lock");
        days.entry(day)
            .or_insert_with(|| DaySalt {
                salt: random_salt(),
                provisional: true,
            })
            .salt
    }

    /// Whether a provisional salt is in use (shown on the metrics).
    pub fn provisional(&self) -> usize {
        self.days
            .read()
            .expect("salts lock")
            .values()
            .filter(|d| d.provisional)
            .count()
    }

    fn set(&self, day: NaiveDate, salt: Salt) {
        self.days.write().expect("salts lock").insert(
            day,
            DaySalt {
                salt,
                provisional: false,
            },
        );
    }

    fn candidate(&self, day: NaiveDate) -> Salt {
        self.days
            .read()
            .expect("salts lock")
            .get(&day)
            .map_or_else(random_salt, |d| d.salt)
    }

    /// Forgets the days before `day` here too.
    fn drop_before(&self, day: NaiveDate) {
        self.days
            .write()
            .expect("salts lock")
            .retain(|d, _| *d >= day);
    }

    /// Keeps today's and tomorrow's salts loaded from the database (made
    /// there by the first instance to ask), and deletes the salts of the
    /// days before yesterday, until `shutdown`.
    pub async fn keep(
        &self,
        store: Store,
        clock: SharedClock,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut done: Option<(NaiveDate, DateTime<Utc>)> = None;
        loop {
            let now = clock.now();
            let today = now.date_naive();
            let due = match done {
                Some((day, at)) => day != today || now - at >= REFRESH_EVERY,
                None => true,
            } || self.provisional() > 0;
            if due {
                match self.rotate(&store, today).await {
                    Ok(()) => done = Some((today, now)),
                    Err(e) => tracing::warn!(error = %crate::telemetry::chain(&e),
                        "cannot read or store the day's visitor salt; a provisional one counts visitors meanwhile"),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(CHECK_EVERY) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Loads today's and tomorrow's salts once, before the pixel serves, so
    /// that a restarted instance goes on with the ids it made before. When
    /// the database cannot be asked, provisional salts count meanwhile.
    pub async fn load(&self, store: &Store, now: DateTime<Utc>) {
        if let Err(e) = self.rotate(store, now.date_naive()).await {
            tracing::warn!(error = %crate::telemetry::chain(&e),
                "cannot load the visitor salts at start; provisional ones count visitors until the database answers");
        }
    }

    async fn rotate(&self, store: &Store, today: NaiveDate) -> Result<(), mongodb::error::Error> {
        let yesterday = today.pred_opt().unwrap_or(today);
        for day in [today, today.succ_opt().unwrap_or(today)] {
            let stored = salts::ensure(store, day, &self.candidate(day)).await?;
            self.set(day, stored);
        }
        let deleted = salts::delete_before(store, yesterday).await?;
        if deleted > 0 {
            tracing::info!(deleted, "deleted the visitor salts of past days");
        }
        self.drop_before(yesterday);
        Ok(())
    }
}

fn random_salt() -> Salt {
    let mut salt = [0; 32];
    getrandom::fill(&mut salt).expect("the operating system's random source");
    salt
}

/// The visitor id of a hit on `site` (its domain) from `client` with
/// `user_agent`, under `salt`. Each part is length-prefixed, so no two
/// different triples hash the same input.
pub fn visitor_id(salt: &Salt, site: &str, client: &str, user_agent: &str) -> u64 {
    let mut hasher = blake3::Hasher::new_keyed(salt);
    for part in [site, client, user_agent] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let hash = hasher.finalize();
    u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn an_id_depends_on_every_part_and_the_salt() {
        let salt = [7; 32];
        let id = visitor_id(&salt, "example.com", "192.0.2.1", "Firefox");
        assert_eq!(id, visitor_id(&salt, "example.com", "192.0.2.1", "Firefox"));
        assert_ne!(id, visitor_id(&salt, "example.org", "192.0.2.1", "Firefox"));
        assert_ne!(id, visitor_id(&salt, "example.com", "192.0.2.2", "Firefox"));
        assert_ne!(id, visitor_id(&salt, "example.com", "192.0.2.1", "Chrome"));
        assert_ne!(
            id,
            visitor_id(&[8; 32], "example.com", "192.0.2.1", "Firefox")
        );
        // Moving a byte from one part to the next is another input.
        assert_ne!(
            visitor_id(&salt, "ab", "c", "d"),
            visitor_id(&salt, "a", "bc", "d")
        );
    }

    #[test]
    fn a_day_has_one_salt_and_the_next_day_another() {
        let salts = Salts::default();
        let day = Utc.with_ymd_and_hms(2026, 11, 25, 0, 0, 1).unwrap();
        let a = salts.of(day);
        assert_eq!(a, salts.of(day + TimeDelta::hours(23)));
        assert_ne!(a, salts.of(day + TimeDelta::days(1)));
        assert_eq!(salts.provisional(), 2);
        salts.set(day.date_naive(), [1; 32]);
        assert_eq!(salts.of(day), [1; 32]);
        assert_eq!(salts.provisional(), 1);
        salts.drop_before((day + TimeDelta::days(1)).date_naive());
        assert_ne!(salts.of(day), [1; 32], "forgotten: a new salt");
    }
}

//! Login rate limiting, in memory (a restart forgets, which is acceptable
//! for slowing guessing down).
//!
//! Per client address the limit is strict: after `max_failures` failed
//! attempts within `window`, further attempts are refused without checking
//! the password until old failures age out. Per account, failures from one
//! address must not lock the account for everyone else (anyone could lock
//! anyone out), so the account's own limit is [`ACCOUNT_FACTOR`] times
//! higher, more than any one address can reach, and it does not refuse: it
//! *guards* the account, which then opens only with a right password plus
//! two-factor login (the code step has its own limits); an account without
//! two-factor login is paused while it is guarded. That takes guesses from
//! several addresses at once.
//!
//! An attempt is reserved (counted as a failure) *before* its password is
//! checked, in the same critical section as the check of the limit. Checking
//! first and recording after let any number of concurrent attempts through
//! the check while the first ones were still hashing; now at most
//! `max_failures` checks can be in flight for one address.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct LoginLimiter {
    max_failures: usize,
    window: Duration,
    /// Per key, the attempts in the window: when, and which reservation.
    failures: Mutex<Failures>,
    next_id: AtomicU64,
}

/// The attempts per key, and when to next drop the keys whose attempts
/// have all aged out: without it, every e-mail ever tried (a spray of
/// made-up accounts) would stay in memory. Sweeping when the map has
/// doubled since the last sweep keeps the cost amortised O(1) per attempt
/// and the memory bounded by the attempts of one window.
#[derive(Default)]
struct Failures {
    by_key: HashMap<String, VecDeque<(Instant, u64)>>,
    sweep_at: usize,
}

const FIRST_SWEEP: usize = 1024;

/// One login attempt holding its place in the limiter. It stays counted as
/// a failure unless [`Attempt::succeeded`] is called: an attempt that ends
/// any other way (wrong password, error, cancelled request) must not give
/// its place back to a guesser.
#[must_use = "an attempt counts as a failure unless it is marked as succeeded"]
pub struct Attempt<'a> {
    limiter: &'a LoginLimiter,
    account: String,
    client: String,
    id: u64,
    /// The account has reached its own limit: how long until it is not.
    guarded: Option<Duration>,
}

/// How many times the per-address limit an account takes, from all
/// addresses together, before it is guarded: one address alone stays far
/// below it.
pub const ACCOUNT_FACTOR: usize = 4;

impl LoginLimiter {
    pub fn new(max_failures: usize, window: Duration) -> Self {
        Self {
            max_failures: max_failures.max(1),
            window,
            failures: Mutex::new(Failures {
                by_key: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            }),
            next_id: AtomicU64::new(0),
        }
    }

    /// Reserves an attempt for this account from this client, or says how
    /// long to wait when the client has used up its attempts. A reserved
    /// attempt says whether the account is guarded ([`Attempt::guarded`]).
    pub fn reserve(
        &self,
        account: &str,
        client: &str,
        now: Instant,
    ) -> Result<Attempt<'_>, Duration> {
        let mut failures = self.failures.lock().expect("limiter lock poisoned");
        if failures.by_key.len() >= failures.sweep_at {
            let window = self.window;
            failures.by_key.retain(|_, times| {
                times.retain(|(t, _)| now.duration_since(*t) < window);
                !times.is_empty()
            });
            failures.sweep_at = (failures.by_key.len() * 2).max(FIRST_SWEEP);
        }
        let map = &mut failures.by_key;
        let (account_key, client_key) = (account_key(account), client_key(client));
        if let Some(wait) = self.wait(map, &client_key, self.max_failures, now) {
            return Err(wait);
        }
        let guarded = self.wait(map, &account_key, self.max_failures * ACCOUNT_FACTOR, now);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        for key in [account_key, client_key] {
            map.entry(key).or_default().push_back((now, id));
        }
        Ok(Attempt {
            limiter: self,
            account: account.to_owned(),
            client: client.to_owned(),
            id,
            guarded,
        })
    }

    /// How long until `key` has fewer than `limit` failures in the window,
    /// if it has that many now; aged-out failures are dropped on the way.
    fn wait(
        &self,
        map: &mut HashMap<String, VecDeque<(Instant, u64)>>,
        key: &str,
        limit: usize,
        now: Instant,
    ) -> Option<Duration> {
        let times = map.get_mut(key)?;
        while times
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) >= self.window)
        {
            times.pop_front();
        }
        if times.len() < limit {
            return None;
        }
        // The failure whose ageing out brings the key under its limit.
        let (oldest, _) = times[times.len() - limit];
        Some(self.window.saturating_sub(now.duration_since(oldest)))
    }

    /// How many accounts and addresses are remembered.
    pub fn keys_held(&self) -> usize {
        self.failures
            .lock()
            .expect("limiter lock poisoned")
            .by_key
            .len()
    }
}

fn account_key(account: &str) -> String {
    format!("account:{account}")
}

fn client_key(client: &str) -> String {
    format!("client:{client}")
}

impl Attempt<'_> {
    /// When the account has reached its own limit (guessed at from several
    /// addresses), how long until it is under it again. A guarded account
    /// opens only with two-factor login.
    pub fn guarded(&self) -> Option<Duration> {
        self.guarded
    }

    /// The password was right: the account's failures are cleared, and this
    /// attempt no longer counts against the client address (its other
    /// failures stay: one good password must not reset guessing at other
    /// accounts).
    pub fn succeeded(self) {
        let mut failures = self.limiter.failures.lock().expect("limiter lock poisoned");
        let map = &mut failures.by_key;
        map.remove(&account_key(&self.account));
        if let Some(times) = map.get_mut(&client_key(&self.client)) {
            times.retain(|(_, id)| *id != self.id);
        }
    }

    /// Nothing was checked (the server was too busy, or the account is
    /// paused): the attempt gives its place back, as if never made.
    pub fn released(self) {
        let mut failures = self.limiter.failures.lock().expect("limiter lock poisoned");
        let map = &mut failures.by_key;
        for key in [account_key(&self.account), client_key(&self.client)] {
            if let Some(times) = map.get_mut(&key) {
                times.retain(|(_, id)| *id != self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_the_limit_and_releases_after_the_window() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t = Instant::now();
        for i in 0..3 {
            assert!(l.reserve("a", "1.1.1.1", t).is_ok(), "attempt {i}");
        }
        assert!(l.reserve("a", "1.1.1.1", t).is_err());
        assert!(l.reserve("b", "1.1.1.1", t).is_err(), "per client");
        let other = l.reserve("a", "2.2.2.2", t).expect("another address");
        assert_eq!(other.guarded(), None, "one address does not guard it");
        assert!(l.reserve("b", "2.2.2.2", t).is_ok());
        let wait = l
            .reserve("a", "1.1.1.1", t + Duration::from_secs(20))
            .err()
            .unwrap();
        assert_eq!(wait, Duration::from_secs(40));
        assert!(l
            .reserve("a", "1.1.1.1", t + Duration::from_secs(61))
            .is_ok());
    }

    #[test]
    fn attempts_in_flight_count_before_their_outcome_is_known() {
        // The race the probe won: many attempts pass the check before any
        // of them has failed. Reservations held, not yet resolved, must
        // already stop the next one.
        let l = LoginLimiter::new(5, Duration::from_secs(60));
        let t = Instant::now();
        let held: Vec<_> = (0..5)
            .map(|_| l.reserve("a", "c", t).expect("within the limit"))
            .collect();
        assert!(l.reserve("a", "c", t).is_err());
        drop(held);
        assert!(
            l.reserve("a", "c", t).is_err(),
            "dropped attempts stay failures"
        );
    }

    #[test]
    fn failures_from_one_address_never_guard_the_account() {
        // Five wrong passwords from one address paused
        // the account for every address, the right password included.
        let l = LoginLimiter::new(5, Duration::from_secs(60));
        let t = Instant::now();
        for _ in 0..5 {
            assert_eq!(l.reserve("a", "evil", t).unwrap().guarded(), None);
        }
        assert!(l.reserve("a", "evil", t).is_err(), "that address waits");
        let mine = l.reserve("a", "mine", t).expect("others are not refused");
        assert_eq!(mine.guarded(), None);
        mine.succeeded();
    }

    #[test]
    fn guesses_from_several_addresses_guard_the_account() {
        let l = LoginLimiter::new(5, Duration::from_secs(60));
        let t = Instant::now();
        for client in 0..ACCOUNT_FACTOR {
            for s in 0..5 {
                let at = t + Duration::from_secs(client as u64 * 5 + s);
                let a = l.reserve("a", &format!("10.0.0.{client}"), at).unwrap();
                assert_eq!(a.guarded(), None);
            }
        }
        // 20 failures from four addresses: the fifth address may try, but
        // the account is guarded until the first failure ages out.
        let later = t + Duration::from_secs(30);
        let a = l.reserve("a", "10.0.0.9", later).expect("not refused");
        assert_eq!(a.guarded(), Some(Duration::from_secs(30)));
        a.released();
        assert!(l
            .reserve("b", "10.0.0.9", later)
            .unwrap()
            .guarded()
            .is_none());
        let after = t + Duration::from_secs(61);
        assert_eq!(l.reserve("a", "10.0.0.9", after).unwrap().guarded(), None);
    }

    #[test]
    fn a_released_attempt_gives_its_place_back() {
        // A login answered 503 (no password checked)
        // counted as a failure.
        let l = LoginLimiter::new(2, Duration::from_secs(60));
        let t = Instant::now();
        for _ in 0..10 {
            l.reserve("a", "c", t).unwrap().released();
        }
        let _ = l.reserve("a", "c", t).unwrap();
        let _ = l.reserve("a", "c", t).unwrap();
        assert!(l.reserve("a", "c", t).is_err());
    }

    #[test]
    fn keys_whose_attempts_aged_out_are_forgotten() {
        // A spray of made-up accounts from many addresses: 50,000 keys
        // within one window, then the window passes.
        let l = LoginLimiter::new(5, Duration::from_secs(60));
        let t = Instant::now();
        for i in 0..25_000 {
            let _ = l.reserve(
                &format!("user{i}@x"),
                &format!("10.0.{}.{}", i / 256, i % 256),
                t,
            );
        }
        assert_eq!(l.keys_held(), 50_000, "all within the window are kept");
        // New attempts, each from its own address, after the window: once
        // the map has doubled since the last sweep, the old keys go.
        let later = t + Duration::from_secs(61);
        for i in 0..10_000 {
            let client = format!("10.9.{}.{}", i / 256, i % 256);
            assert!(l.reserve(&format!("late{i}@x"), &client, later).is_ok());
        }
        assert_eq!(
            l.keys_held(),
            20_000,
            "only the keys of the current window are left"
        );
    }

    #[test]
    fn success_clears_the_account_and_its_own_place_only() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t = Instant::now();
        let _ = l.reserve("a", "c", t).unwrap();
        let _ = l.reserve("a", "c", t).unwrap();
        l.reserve("a", "c", t).unwrap().succeeded();
        assert!(l.reserve("a", "other", t).is_ok(), "account cleared");
        // The client still has its two failures (plus the one just taken
        // for "other", which is another client): one more place, then full.
        assert!(l.reserve("z", "c", t).is_ok());
        assert!(l.reserve("z", "c", t).is_err());
    }
}

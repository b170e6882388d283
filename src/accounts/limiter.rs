//! Login rate limiting: at most `max_failures` failed logins per account
//! and per client address within `window`; further attempts are refused
//! without checking the password until old failures age out. In memory: a
//! restart forgets, which is acceptable for slowing guessing down.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct LoginLimiter {
    max_failures: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl LoginLimiter {
    pub fn new(max_failures: usize, window: Duration) -> Self {
        Self {
            max_failures,
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn keys(account: &str, client: &str) -> [String; 2] {
        [format!("account:{account}"), format!("client:{client}")]
    }

    /// `Some(wait)` when this account or client must wait before trying again.
    pub fn blocked(&self, account: &str, client: &str, now: Instant) -> Option<Duration> {
        let mut map = self.failures.lock().expect("limiter lock poisoned");
        Self::keys(account, client)
            .iter()
            .filter_map(|key| {
                let times = map.get_mut(key)?;
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) >= self.window)
                {
                    times.pop_front();
                }
                let oldest = *times.front()?;
                (times.len() >= self.max_failures)
                    .then(|| self.window.saturating_sub(now.duration_since(oldest)))
            })
            .max()
    }

    pub fn record_failure(&self, account: &str, client: &str, now: Instant) {
        let mut map = self.failures.lock().expect("limiter lock poisoned");
        for key in Self::keys(account, client) {
            let times = map.entry(key).or_default();
            times.push_back(now);
            while times.len() > self.max_failures {
                times.pop_front();
            }
        }
    }

    /// A successful login clears the account's failures (not the client's:
    /// one good password must not reset guessing at other accounts).
    pub fn record_success(&self, account: &str) {
        let mut map = self.failures.lock().expect("limiter lock poisoned");
        map.remove(&format!("account:{account}"));
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
            assert!(l.blocked("a", "1.1.1.1", t).is_none(), "attempt {i}");
            l.record_failure("a", "1.1.1.1", t);
        }
        assert!(l.blocked("a", "1.1.1.1", t).is_some());
        assert!(l.blocked("a", "2.2.2.2", t).is_some(), "per account");
        assert!(l.blocked("b", "1.1.1.1", t).is_some(), "per client");
        assert!(l.blocked("b", "2.2.2.2", t).is_none());
        assert!(l
            .blocked("a", "1.1.1.1", t + Duration::from_secs(61))
            .is_none());
    }

    #[test]
    fn success_clears_the_account_only() {
        let l = LoginLimiter::new(2, Duration::from_secs(60));
        let t = Instant::now();
        l.record_failure("a", "c", t);
        l.record_failure("a", "c", t);
        l.record_success("a");
        assert!(l.blocked("a", "other", t).is_none());
        assert!(l.blocked("z", "c", t).is_some());
    }
}

//! A fixed-window request limit per key (a client address), in memory:
//! enough to keep one client from turning a public page into a stream of
//! report queries. A restart forgets, which is acceptable for that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct RateLimit {
    per_window: u32,
    window: Duration,
    /// Per key: when its window started and the requests in it.
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

/// Keys kept before expired windows are swept out.
const SWEEP_AT: usize = 10_000;

impl RateLimit {
    pub fn new(per_window: u32, window: Duration) -> Self {
        Self {
            per_window: per_window.max(1),
            window,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a request; `Err(wait)` when the key has used its window.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut windows = self.windows.lock().expect("rate limit lock poisoned");
        if windows.len() >= SWEEP_AT {
            let window = self.window;
            windows.retain(|_, (start, _)| now.duration_since(*start) < window);
        }
        let entry = windows.entry(key.to_owned()).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        if entry.1 >= self.per_window {
            return Err(self.window.saturating_sub(now.duration_since(entry.0)));
        }
        entry.1 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_its_requests_per_window_then_waits() {
        let limit = RateLimit::new(3, Duration::from_secs(60));
        let t = Instant::now();
        for _ in 0..3 {
            assert!(limit.check("a", t).is_ok());
        }
        assert_eq!(
            limit.check("a", t + Duration::from_secs(10)),
            Err(Duration::from_secs(50))
        );
        assert!(limit.check("b", t).is_ok(), "other keys are not affected");
        assert!(limit.check("a", t + Duration::from_secs(60)).is_ok());
    }
}

//! The time a hit is answered in must not tell whether its host is
//! tracked here. A counted hit waits for its journal's sync (`durable`:
//! about 0.3 to 2 ms); a hit refused because no site has its host
//! (`NotTracked`, and a peer's endpoint for an unknown domain) is answered
//! like a counted one in content, and here in time too: it waits as long
//! as a recent counted hit waited for its sync, drawn at random from the
//! last [`SAMPLES`] such waits so that the two answers' times have the
//! same spread. Nothing about the refused hit is written anywhere: the
//! wait is a timer.
//!
//! In `fast` mode a counted hit does not wait for the sync, and neither
//! does a refusal.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Recent journal waits kept to draw from.
pub const SAMPLES: usize = 64;

/// The wait before any hit was counted: about one sync on a local SSD.
const FIRST_GUESS: Duration = Duration::from_micros(1000);

/// The timer's granularity: tokio fires a sleep at the first millisecond
/// tick past its deadline, half a millisecond late on average, so a drawn
/// wait is shortened by that much.
const TIMER_LATENESS: Duration = Duration::from_micros(500);

#[derive(Debug)]
pub struct Pacing {
    /// Microseconds; 0 is an empty place.
    waits: [AtomicU32; SAMPLES],
    next: AtomicUsize,
    started: Instant,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            waits: std::array::from_fn(|_| AtomicU32::new(0)),
            next: AtomicUsize::new(0),
            started: Instant::now(),
        }
    }
}

impl Pacing {
    /// A counted hit waited `waited` for its journal.
    pub fn record(&self, waited: Duration) {
        let micros = waited.as_micros().clamp(1, u128::from(u32::MAX)) as u32;
        let at = self.next.fetch_add(1, Relaxed) % SAMPLES;
        self.waits[at].store(micros, Relaxed);
    }

    /// One of the recent waits, picked at random (the clock's nanoseconds
    /// are random enough to spread the choice: nobody gains by predicting
    /// it, since every sample is a real wait).
    pub fn draw(&self) -> Duration {
        let filled = self.next.load(Relaxed).min(SAMPLES);
        if filled == 0 {
            return FIRST_GUESS;
        }
        let pick = self.started.elapsed().subsec_nanos() as usize % filled;
        match self.waits[pick].load(Relaxed) {
            0 => FIRST_GUESS,
            micros => Duration::from_micros(micros.into()),
        }
    }

    /// Waits about as long as a counted hit waits for its journal.
    pub async fn wait_like_a_count(&self) {
        let wait = self.draw().saturating_sub(TIMER_LATENESS);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_recent_waits() {
        let p = Pacing::default();
        assert_eq!(p.draw(), FIRST_GUESS);
        p.record(Duration::from_micros(700));
        assert_eq!(p.draw(), Duration::from_micros(700));
        for _ in 0..SAMPLES {
            p.record(Duration::from_micros(1500));
        }
        for _ in 0..100 {
            assert_eq!(
                p.draw(),
                Duration::from_micros(1500),
                "the oldest are replaced"
            );
        }
    }
}

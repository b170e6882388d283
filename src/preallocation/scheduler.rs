//! The background task: a lead time before each hour, preallocate the next
//! hour for every active page. The timing is a pure function of the clock,
//! so it is tested by setting the clock rather than by waiting.

use chrono::{DateTime, TimeDelta, Utc};
use std::sync::Mutex;
use std::time::Duration;

use super::{lease, run, PreallocRequest, PreallocRun, Scope, Trigger};
use crate::clock::SharedClock;
use crate::domain::Resolution;
use crate::storage::Store;

/// The first scheduled run strictly after `now`: `lead` before an hour.
pub fn next_run_after(now: DateTime<Utc>, lead: TimeDelta) -> DateTime<Utc> {
    let mut hour = Resolution::Hour.floor(now) + TimeDelta::hours(1);
    while hour - lead <= now {
        hour += TimeDelta::hours(1);
    }
    hour - lead
}

pub struct Scheduler {
    store: Store,
    clock: SharedClock,
    lead: TimeDelta,
    threshold: i64,
    /// The next run due; advanced once a run for it has happened.
    next_due: Mutex<DateTime<Utc>>,
    /// This scheduler's name in the lease (see `lease`).
    holder: String,
}

impl Scheduler {
    pub fn new(store: Store, clock: SharedClock, lead: TimeDelta, threshold: i64) -> Self {
        let now = clock.now();
        // If we start inside the lead window, the coming hour still gets done.
        let first = next_run_after(now - lead, lead).min(next_run_after(now, lead));
        Self {
            store,
            clock,
            lead,
            threshold,
            next_due: Mutex::new(first),
            holder: uuid::Uuid::new_v4().to_string(),
        }
    }

    pub fn next_due(&self) -> DateTime<Utc> {
        *self.next_due.lock().expect("scheduler lock")
    }

    /// Runs the preallocation if it is due; returns the run when one happened.
    pub async fn tick(&self) -> Option<PreallocRun> {
        let now = self.clock.now();
        let due = self.next_due();
        if now < due {
            return None;
        }
        // The hour coming up now, not the one `due` was for: after a pause
        // or a clock jump, preallocating a past hour would be useless.
        let request = PreallocRequest {
            scope: Scope::AllActive,
            from: Resolution::Hour.floor(now + self.lead),
            hours: 1,
            threshold: self.threshold,
        };
        *self.next_due.lock().expect("scheduler lock") = next_run_after(now, self.lead);
        match lease::acquire(&self.store, &self.holder, request.from, now).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(hour = %request.from, "another instance preallocates this hour");
                return None;
            }
            Err(e) => {
                tracing::error!(error = %crate::telemetry::chain(&e), "preallocation lease unavailable; skipping this hour");
                return None;
            }
        }
        let result = run(&self.store, &request, Trigger::Schedule, "scheduler", now).await;
        let done = result.is_ok().then_some(request.from);
        if let Err(e) = lease::release(&self.store, &self.holder, done, self.clock.now()).await {
            tracing::warn!(error = %crate::telemetry::chain(&e), "preallocation lease not released; it runs out on its own");
        }
        match result {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::error!(error = %crate::telemetry::chain(&e), "scheduled preallocation failed");
                None
            }
        }
    }

    /// Checks every few seconds, so a clock change or a long pause is
    /// noticed promptly; the work itself runs here, off the request path.
    pub fn spawn(self: std::sync::Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let wait = (self.next_due() - self.clock.now())
                    .to_std()
                    .unwrap_or(Duration::ZERO);
                tokio::time::sleep(wait.clamp(Duration::from_millis(50), Duration::from_secs(5)))
                    .await;
                self.tick().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(d: u32, h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, d, h, m, s).unwrap()
    }

    #[test]
    fn next_run_is_lead_minutes_before_the_coming_hour() {
        let lead = TimeDelta::minutes(10);
        assert_eq!(next_run_after(at(22, 10, 1, 7), lead), at(22, 10, 50, 0));
        assert_eq!(next_run_after(at(22, 10, 49, 59), lead), at(22, 10, 50, 0));
        // At or after the run time, the next one is an hour later.
        assert_eq!(next_run_after(at(22, 10, 50, 0), lead), at(22, 11, 50, 0));
        assert_eq!(next_run_after(at(22, 10, 55, 0), lead), at(22, 11, 50, 0));
    }

    #[test]
    fn across_the_day_boundary() {
        let lead = TimeDelta::minutes(10);
        assert_eq!(next_run_after(at(22, 23, 45, 0), lead), at(22, 23, 50, 0));
        assert_eq!(next_run_after(at(22, 23, 50, 0), lead), at(23, 0, 50, 0));
        assert_eq!(next_run_after(at(22, 23, 59, 59), lead), at(23, 0, 50, 0));
        // Month boundary too.
        assert_eq!(
            next_run_after(at(30, 23, 55, 0), lead),
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 50, 0).unwrap()
        );
    }

    #[test]
    fn leads_of_zero_and_over_an_hour() {
        assert_eq!(
            next_run_after(at(22, 10, 1, 7), TimeDelta::zero()),
            at(22, 11, 0, 0)
        );
        assert_eq!(
            next_run_after(at(22, 10, 1, 7), TimeDelta::minutes(90)),
            at(22, 10, 30, 0)
        );
    }
}

//! How preallocation runs are shown, on the preallocation page and on the
//! system page.

use super::fmt;
use super::state::WebState;
use crate::preallocation::PreallocRun;

pub struct RunRow {
    pub id: String,
    pub started: String,
    pub trigger: String,
    pub who: String,
    pub scope: String,
    pub from_hour: String,
    pub hours: u32,
    pub pages: u64,
    pub inserted: u64,
    pub already_present: u64,
    pub duration_ms: u64,
    pub errors: String,
    /// `running`, `done` or `failed`.
    pub status: String,
    /// While running: how far, in words.
    pub progress: String,
}

impl RunRow {
    pub fn running(&self) -> bool {
        self.status == crate::preallocation::runs::RUNNING
    }
}

impl From<&PreallocRun> for RunRow {
    fn from(r: &PreallocRun) -> Self {
        RunRow {
            id: uuid::Uuid::from(r.id).to_string(),
            started: fmt::utc(&r.started_at.to_chrono()),
            trigger: r.trigger.clone(),
            who: r.who.clone(),
            scope: r.scope.clone(),
            from_hour: fmt::utc(&r.from_hour.to_chrono()),
            hours: r.hours,
            pages: r.pages,
            inserted: r.inserted,
            already_present: r.already_present,
            duration_ms: r.duration_ms,
            errors: r.errors.join("; "),
            status: r.status.clone(),
            progress: if r.documents == 0 {
                "finding the active pages".to_owned()
            } else {
                format!(
                    "{} of {} buckets written",
                    fmt::thousands(&((r.inserted + r.already_present) as i64)),
                    fmt::thousands(&(r.documents as i64))
                )
            },
        }
    }
}

pub fn next_run_text(state: &WebState) -> String {
    match &state.scheduler {
        Some(s) => fmt::utc(&s.next_due()),
        None => "never (TICKERTAPE_PREALLOC_SCHEDULE=false)".into(),
    }
}

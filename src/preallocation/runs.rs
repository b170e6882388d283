//! The history of preallocation runs (stored by `storage::prealloc`).

use chrono::{DateTime, Utc};
use std::time::Duration;

use super::{InsertCounts, PreallocRequest, Trigger};

pub use crate::storage::prealloc::{
    find, recent, record, update, PreallocRun, DONE, FAILED, RUNNING,
};

impl PreallocRun {
    pub fn new(
        request: &PreallocRequest,
        trigger: Trigger,
        who: &str,
        now: DateTime<Utc>,
        pages: usize,
        counts: InsertCounts,
        took: Duration,
    ) -> Self {
        let mut errors = counts.errors;
        // Keep the record small when every insert failed the same way.
        errors.dedup();
        errors.truncate(20);
        Self {
            id: uuid::Uuid::new_v4().into(),
            started_at: bson::DateTime::from_chrono(now),
            trigger: trigger.as_str().to_owned(),
            who: who.to_owned(),
            scope: request.scope.describe(),
            from_hour: bson::DateTime::from_chrono(request.from),
            hours: request.hours,
            pages: pages as u64,
            inserted: counts.inserted,
            already_present: counts.already_present,
            duration_ms: took.as_millis() as u64,
            status: if errors.is_empty() { DONE } else { FAILED }.to_owned(),
            documents: 0,
            errors,
        }
    }
}

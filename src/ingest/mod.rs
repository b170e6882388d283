//! From pixel request to journaled hit, and from journal to buckets.
//!
//! The request path never waits on MongoDB: a hit is answered once it is in
//! the local journal (`durable`) or queued for it (`fast`); the appliers
//! write it behind. See docs/architecture.md.

pub mod applier;
pub mod bots;
pub mod classifier;
pub mod directory;
pub mod event_cap;
pub mod freshness;
pub mod pacing;
pub mod page_cap;
pub mod pixel;
pub mod request;
pub mod standalone;
pub mod stats;
pub mod visitor;
pub mod visits;

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::journal::Appender;
pub use directory::SiteDirectory;
pub use stats::IngestStats;

/// What the pixel handler needs, passed in as a value (no globals).
#[derive(Clone)]
pub struct IngestState {
    pub journal: Appender,
    pub directory: SiteDirectory,
    pub clock: SharedClock,
    pub stats: Arc<IngestStats>,
    /// New pages per site per hour (see `page_cap`).
    pub page_cap: Arc<page_cap::PageCap>,
    /// Visitor ids and open visits (see `visitor`, `visits`).
    pub visitors: Arc<visitor::Visitors>,
    /// Browser, OS, device and country of a view (see `classifier`).
    pub classifier: Arc<classifier::Classifier>,
    /// Event names per site per day (see `event_cap`).
    pub event_cap: Arc<event_cap::EventCap>,
    /// Property pairs per site per day (see `event_cap`).
    pub property_cap: Arc<event_cap::EventCap>,
    /// Views carry their breakdowns (`TICKERTAPE_BREAKDOWNS`).
    pub breakdowns: bool,
    /// Answers a refusal for an untracked host in a counted hit's time
    /// (see `pacing`).
    pub pacing: Arc<pacing::Pacing>,
}

impl IngestState {
    /// Waits as a counted hit waits for its journal (nothing in `fast`
    /// mode): for answers that must look like a count.
    pub async fn wait_like_a_count(&self) {
        if self.journal.ack_mode() == crate::journal::AckMode::Durable {
            self.pacing.wait_like_a_count().await;
        }
    }
}

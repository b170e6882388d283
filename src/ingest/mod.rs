//! From pixel request to queued hit, and from queue to buckets.
//!
//! The request path never waits on MongoDB except, in `durable` mode, for
//! the flush that carries its own hit. See docs/architecture.md.

pub mod bots;
pub mod directory;
pub mod page_cap;
pub mod pixel;
pub mod queue;
pub mod stats;
pub mod writer;

use std::sync::Arc;

use crate::clock::SharedClock;
pub use directory::SiteDirectory;
pub use queue::HitQueue;
pub use stats::IngestStats;

/// What the pixel handler needs, passed in as a value (no globals).
#[derive(Clone)]
pub struct IngestState {
    pub queue: HitQueue,
    pub directory: SiteDirectory,
    pub clock: SharedClock,
    pub stats: Arc<IngestStats>,
    /// New pages per site per hour (see `page_cap`).
    pub page_cap: Arc<page_cap::PageCap>,
}

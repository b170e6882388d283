//! A journal with appliers of its own, for a command that writes hits
//! without the server (`tickertape demo`): the hits take the pixel's write
//! path (journaled, then applied exactly once by the same appliers, to
//! every store) in a journal that is removed once all of it is applied.

use std::sync::Arc;
use std::time::Duration;

use super::applier::{Appliers, ApplyConfig};
use super::directory::SiteDirectory;
use super::stats::IngestStats;
use crate::journal::{AckMode, Appender, Journal, JournalConfig};
use crate::storage::Store;

pub struct Standalone {
    journal: Journal,
    appliers: Appliers,
    _dir: tempfile::TempDir,
}

impl Standalone {
    pub async fn open(store: &Store, config: ApplyConfig) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("tickertape-journal-")
            .tempdir()?;
        let (journal, feeds) = Journal::open(&JournalConfig {
            dir: dir.path().to_owned(),
            lanes: 2,
            segment_bytes: 16 << 20,
            segment_max_age: Duration::from_secs(60),
            budget_bytes: 1 << 30,
            queue_capacity: 100_000,
            queue_bytes: 32 << 20,
            // Nothing is answered: a crash loses the command's run, which
            // is started again.
            ack_mode: AckMode::Fast,
        })?;
        let directory = SiteDirectory::default();
        directory.reload(store).await?;
        let appliers = Appliers::start(
            store,
            journal.id(),
            feeds,
            config,
            Arc::new(IngestStats::default()),
            journal.stats().clone(),
            directory,
        );
        Ok(Self {
            journal,
            appliers,
            _dir: dir,
        })
    }

    pub fn appender(&self) -> &Appender {
        self.journal.appender()
    }

    /// Closes the journal and waits until every stream has applied all of
    /// it; fails if the database does not take it within `within`.
    pub async fn finish(self, within: Duration) -> anyhow::Result<()> {
        self.journal.close_writers().await;
        let stats = self.journal.stats();
        let deadline = tokio::time::Instant::now() + within;
        let left = || {
            stats.backlog()
                + stats.sources_backlog()
                + stats.rollups_backlog()
                + stats.visits_backlog()
        };
        while left() > 0 {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the database did not take {} journaled hits' figures within {} s",
                left(),
                within.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.appliers.shutdown(Duration::from_secs(30)).await;
        Ok(())
    }
}

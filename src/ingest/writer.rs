//! Writer tasks: each drains its lane, merges what has arrived and flushes
//! it as one command per collection. While a flush runs, the next batch
//! accumulates in the lane, so batches grow with load without any timer.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::queue::{FlushFailed, QueuedHit};
use super::stats::IngestStats;
use crate::settings::IngestSettings;
use crate::storage::bucket_writer::BucketWriter;
use crate::storage::Store;

pub struct Writers {
    handles: Vec<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

struct Writer {
    lane: usize,
    rx: mpsc::Receiver<QueuedHit>,
    buckets: BucketWriter,
    max_batch: usize,
    retry_budget: Duration,
    stats: Arc<IngestStats>,
}

impl Writers {
    pub async fn start(
        store: &Store,
        receivers: Vec<mpsc::Receiver<QueuedHit>>,
        settings: &IngestSettings,
        stats: Arc<IngestStats>,
    ) -> Result<Self, mongodb::error::Error> {
        let (shutdown, _) = watch::channel(false);
        let mut handles = Vec::with_capacity(receivers.len());
        for (lane, rx) in receivers.into_iter().enumerate() {
            let writer = Writer {
                lane,
                rx,
                buckets: BucketWriter::new(store).await?,
                max_batch: settings.max_batch.max(1),
                retry_budget: settings.store_retry(),
                stats: stats.clone(),
            };
            handles.push(tokio::spawn(writer.run(shutdown.subscribe())));
        }
        Ok(Self { handles, shutdown })
    }

    /// Stops taking hits, flushes everything already queued, and returns
    /// when every writer is done.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for handle in self.handles {
            if let Err(e) = handle.await {
                tracing::error!(error = %e, "writer task ended abnormally");
            }
        }
    }
}

impl Writer {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut batch = Vec::with_capacity(self.max_batch.min(4096));
        let mut closing = false;
        loop {
            tokio::select! {
                received = self.rx.recv_many(&mut batch, self.max_batch) => {
                    if received == 0 {
                        break; // closed and drained
                    }
                    self.flush(&mut batch).await;
                }
                _ = shutdown.changed(), if !closing => {
                    // Refuse new hits; what is queued is still received
                    // above, and then recv_many returns 0.
                    closing = true;
                    self.rx.close();
                }
            }
        }
        tracing::debug!(lane = self.lane, "writer drained and stopped");
    }

    async fn flush(&mut self, batch: &mut Vec<QueuedHit>) {
        let started = Instant::now();
        let deadline = started + self.retry_budget;
        let result = self
            .buckets
            .apply(batch.iter().map(|h| (h.page.as_str(), h.at)), deadline)
            .await;
        let micros = started.elapsed().as_micros() as u64;
        let ack = match &result {
            Ok(report) => {
                self.stats.record_flush(batch.len(), micros);
                for o in &report.outcomes {
                    self.stats
                        .duplicate_retries
                        .fetch_add(o.duplicate_retries as u64, Relaxed);
                    self.stats
                        .resent_commands
                        .fetch_add(o.resent as u64, Relaxed);
                }
                Ok(())
            }
            Err(e) => {
                self.stats.flush_failures.fetch_add(1, Relaxed);
                let unacknowledged = batch.iter().filter(|h| h.ack.is_none()).count();
                self.stats
                    .hits_lost
                    .fetch_add(unacknowledged as u64, Relaxed);
                tracing::error!(
                    lane = self.lane,
                    hits = batch.len(),
                    error = %crate::telemetry::chain(e),
                    "flush failed; durable hits are answered 503"
                );
                Err(FlushFailed)
            }
        };
        for hit in batch.drain(..) {
            if let Some(tx) = hit.ack {
                let _ = tx.send(ack);
            }
        }
    }
}

//! The application's background tasks. Each is started through [`Tasks`],
//! which keeps its handle, so stopping the application stops every one
//! (none outlives it, holding the store or the clock); starting another is
//! one call in [`super::Application::build_on`].

use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

/// The background tasks started so far, by name.
pub struct Tasks {
    started: Vec<Started>,
    /// Told `true` when the application stops, to the tasks that finish
    /// their work first ([`Tasks::spawn_graceful`]).
    stop: watch::Sender<bool>,
    running: Running,
}

struct Started {
    handle: JoinHandle<()>,
    /// Waited for once told to stop, rather than aborted.
    graceful: bool,
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new()
    }
}

impl Tasks {
    pub fn new() -> Self {
        Self {
            started: Vec::new(),
            stop: watch::channel(false).0,
            running: Running::default(),
        }
    }

    /// Starts `task`; it is stopped where it is (aborted) when the
    /// application stops.
    pub fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        self.adopt(name, tokio::spawn(task));
    }

    /// Takes a task already started (by a module that returns its
    /// handle): stopped as [`spawn`](Self::spawn)'s are.
    pub fn adopt(&mut self, name: &'static str, handle: JoinHandle<()>) {
        self.keep(name, handle, false);
    }

    /// Starts a task that is told to stop (its receiver turns `true`) and
    /// is waited for: one that must finish what it is writing.
    pub fn spawn_graceful<F, Fut>(&mut self, name: &'static str, task: F)
    where
        F: FnOnce(watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(task(self.stop.subscribe()));
        self.keep(name, handle, true);
    }

    fn keep(&mut self, name: &'static str, handle: JoinHandle<()>, graceful: bool) {
        self.running
            .0
            .lock()
            .expect("task list lock poisoned")
            .push((name, handle.abort_handle()));
        self.started.push(Started { handle, graceful });
    }

    /// The tasks' names while they run (for tests and the logs).
    pub fn running(&self) -> Running {
        self.running.clone()
    }

    /// Stops every task: the graceful ones are told and waited for, the
    /// others aborted; returns once none runs.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for Started { handle, graceful } in self.started {
            if !graceful {
                handle.abort();
            }
            // An aborted task ends with a cancelled error: nothing to
            // report.
            let _ = handle.await;
        }
    }
}

/// The application's background tasks still running, by name.
#[derive(Clone, Default)]
pub struct Running(Arc<Mutex<Vec<(&'static str, AbortHandle)>>>);

impl Running {
    pub fn names(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .expect("task list lock poisoned")
            .iter()
            .filter(|(_, task)| !task.is_finished())
            .map(|(name, _)| *name)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stopping_ends_every_task_aborted_or_told() {
        let mut tasks = Tasks::new();
        tasks.spawn("forever", std::future::pending());
        tasks.adopt("adopted", tokio::spawn(std::future::pending()));
        let (told_tx, mut told_rx) = tokio::sync::mpsc::unbounded_channel();
        tasks.spawn_graceful("graceful", |mut stop| async move {
            let _ = stop.wait_for(|s| *s).await;
            let _ = told_tx.send(());
        });
        let running = tasks.running();
        assert_eq!(running.names(), ["forever", "adopted", "graceful"]);
        tasks.stop().await;
        assert!(running.names().is_empty(), "{:?}", running.names());
        // The graceful one finished its own way, not aborted.
        assert!(told_rx.try_recv().is_ok());
    }
}

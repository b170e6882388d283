//! Where the costly reads run, and what bounds them: the filtered reports
//! and the funnels read the visit store and compute over every visit of
//! their range, which can take seconds of CPU and hundreds of megabytes.
//! Run on the HTTP workers, a few of them at once left the pixel waiting
//! behind them (timeouts, resets: lost views). So they run here:
//!
//! - on a runtime of their own ([`ReadLimits::threads`] threads, at a
//!   lower CPU priority than the rest of the process), the HTTP worker
//!   only awaiting the answer;
//! - at most [`ReadLimits::in_all`] at once, [`ReadLimits::per_site`] per
//!   site; a read over the limit waits up to [`ReadLimits::queue_wait`],
//!   then is refused ([`Refused::Busy`]: 503 with `Retry-After`);
//! - within a time budget for the whole computation (reads and CPU),
//!   after which it is stopped ([`Refused::OutOfTime`]);
//! - stopped as soon as the client leaves: dropping the handler's future
//!   aborts the work;
//! - within a budget of bytes of visits held in memory
//!   ([`Refused::TooLarge`], checked as the visits are read, through
//!   [`charge`]).
//!
//! docs/design/read-isolation.md says why each bound is what it is.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The bounds of the costly reads (`TICKERTAPE_REPORT_*`, see
/// docs/configuration.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLimits {
    /// Threads of the reads' runtime.
    pub threads: usize,
    /// Reads computed at once, all sites together.
    pub in_all: usize,
    /// Reads computed at once for one site.
    pub per_site: usize,
    /// How long a read over a limit waits for its turn before 503.
    pub queue_wait: Duration,
    /// The whole computation's time, from its turn to its answer.
    pub time_budget: Duration,
    /// Bytes of visits one read may hold in memory.
    pub max_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            threads: 2,
            in_all: 4,
            per_site: 2,
            queue_wait: Duration::from_secs(2),
            time_budget: Duration::from_secs(15),
            max_bytes: 128 << 20,
        }
    }
}

/// Why a costly read was not answered; each is a 503 with `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "too many filtered reports and funnels are being computed right now; try again in a moment"
    )]
    Busy,
    #[error("this report was stopped at its time limit of {0} seconds; try again in a moment, or choose a shorter range")]
    OutOfTime(u64),
    #[error("this report would hold more than {0} MB of visits; choose a shorter range or another filter")]
    TooLarge(u64),
    /// Its client closed the connection: the answer goes to nobody.
    #[error("the client left before the answer")]
    ClientLeft,
}

impl Refused {
    /// Seconds a client should wait before asking again.
    pub fn retry_after(self) -> u64 {
        match self {
            Refused::Busy => 2,
            // Closed days read from the documents are packed after a read
            // and read twenty times faster from then on.
            Refused::OutOfTime(_) => 30,
            Refused::TooLarge(_) => 60,
            Refused::ClientLeft => 1,
        }
    }

    /// A code a script can match on; it never changes once published.
    pub fn code(self) -> &'static str {
        match self {
            Refused::Busy => "reports_busy",
            Refused::OutOfTime(_) => "report_out_of_time",
            Refused::TooLarge(_) => "report_too_large",
            Refused::ClientLeft => "client_left",
        }
    }
}

/// What a costly read fails with.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Database(#[from] mongodb::error::Error),
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// What one read may still spend, seen by the code that reads and
/// computes through [`charge`] and [`check`]: a task-local, so the report
/// functions keep their signatures and behave as before when called
/// outside [`CostlyReads::run`] (the emails, the commands, the tests).
struct Budget {
    deadline: Instant,
    seconds: u64,
    max_bytes: u64,
    bytes: AtomicU64,
    /// Set when the client left: the work stops at its next check even
    /// in a stretch of CPU without an await.
    abandoned: AtomicBool,
}

tokio::task_local! {
    static BUDGET: Arc<Budget>;
    static CLIENT: ClientLeft;
}

/// Whether the client of the request being answered has left (closed its
/// connection). The web layer knows the connection; it answers through
/// [`for_client`].
pub type ClientLeft = Arc<dyn Fn() -> bool + Send + Sync>;

/// Runs `request` (a request's handling) with `left` saying whether its
/// client has left, so that a costly read it starts stops when it has.
/// The HTTP server keeps polling a handler whose client closed its
/// connection (it notices only when it writes the answer), so the read
/// asks.
pub async fn for_client<F: Future>(left: ClientLeft, request: F) -> F::Output {
    CLIENT.scope(left, request).await
}

/// How often a running read asks whether its client has left.
const CLIENT_CHECK: Duration = Duration::from_millis(100);

/// Counts `bytes` more of visits held by the current read; past its budget
/// of bytes, or of time, the read is refused.
pub fn charge(bytes: u64) -> Result<(), Refused> {
    BUDGET
        .try_with(|b| {
            let held = b.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
            if held > b.max_bytes {
                return Err(Refused::TooLarge(b.max_bytes >> 20));
            }
            b.check()
        })
        .unwrap_or(Ok(()))
}

/// Whether the current read may go on: within its time, its client still
/// there. For loops of CPU work, which no timer can interrupt.
pub fn check() -> Result<(), Refused> {
    BUDGET.try_with(|b| b.check()).unwrap_or(Ok(()))
}

impl Budget {
    fn check(&self) -> Result<(), Refused> {
        if self.abandoned.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            return Err(Refused::OutOfTime(self.seconds));
        }
        Ok(())
    }
}

/// `items`, the budget checked every 1,024 of them: a computation over
/// the visits read is CPU without an await, which neither the timer nor an
/// abort can stop. Cut short, `stopped` says why; the computation's result
/// is then to be dropped.
pub fn checked<'a, T>(
    items: &'a [T],
    stopped: &'a std::cell::Cell<Option<Refused>>,
) -> impl Iterator<Item = &'a T> + 'a {
    items.iter().enumerate().map_while(move |(i, item)| {
        if i % 1024 == 1023 {
            if let Err(why) = check() {
                stopped.set(Some(why));
                return None;
            }
        }
        Some(item)
    })
}

/// The counters `/metrics` shows.
#[derive(Debug, Default)]
pub struct ReadStats {
    pub started: AtomicU64,
    /// Computations under way (the gauge falls when the work has really
    /// stopped, not when its client was answered).
    pub running: AtomicU64,
    pub refused_busy: AtomicU64,
    pub out_of_time: AtomicU64,
    pub too_large: AtomicU64,
    /// Stopped because the client left before the answer.
    pub abandoned: AtomicU64,
}

/// The costly reads' runtime and limits; one per application.
pub struct CostlyReads {
    runtime: Option<tokio::runtime::Runtime>,
    limits: ReadLimits,
    in_all: Arc<Semaphore>,
    sites: Mutex<HashMap<String, Arc<Semaphore>>>,
    stats: Arc<ReadStats>,
}

impl CostlyReads {
    pub fn start(limits: ReadLimits) -> std::io::Result<Self> {
        let threads = limits.threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .max_blocking_threads(threads)
            .thread_name("tt-reports")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        Ok(CostlyReads {
            runtime: Some(runtime),
            in_all: Arc::new(Semaphore::new(limits.in_all.max(1))),
            sites: Mutex::default(),
            stats: Arc::default(),
            limits,
        })
    }

    pub fn limits(&self) -> &ReadLimits {
        &self.limits
    }

    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Runs `work`, a read of `site`, on the reads' runtime within the
    /// limits; the caller only awaits it. Dropping the returned future (the
    /// client left) aborts the work.
    pub async fn run<T, W>(&self, site: &str, work: W) -> Result<T, ReadError>
    where
        W: Future<Output = Result<T, ReadError>> + Send + 'static,
        T: Send + 'static,
    {
        let turn = self.turn(site).await.inspect_err(|_| {
            self.stats.refused_busy.fetch_add(1, Ordering::Relaxed);
        })?;
        let seconds = self.limits.time_budget.as_secs().max(1);
        let deadline = Instant::now() + self.limits.time_budget;
        let budget = Arc::new(Budget {
            deadline,
            seconds,
            max_bytes: self.limits.max_bytes,
            bytes: AtomicU64::new(0),
            abandoned: AtomicBool::new(false),
        });
        let stats = self.stats.clone();
        stats.started.fetch_add(1, Ordering::Relaxed);
        stats.running.fetch_add(1, Ordering::Relaxed);
        let running = Running(stats.clone());
        let task = BUDGET.scope(budget.clone(), async move {
            // Held until the work itself is dropped: finished, stopped or
            // aborted, so the limits count work that really runs.
            let _held = (turn, running);
            match tokio::time::timeout_at(deadline, work).await {
                Ok(answer) => answer,
                Err(_) => Err(Refused::OutOfTime(seconds).into()),
            }
        });
        let runtime = self.runtime.as_ref().expect("running until dropped");
        let mut handle = Abandon {
            handle: runtime.spawn(task),
            budget,
            stats: stats.clone(),
            done: false,
        };
        let left = CLIENT.try_with(Clone::clone).ok();
        let mut asking = tokio::time::interval(CLIENT_CHECK);
        let joined = loop {
            tokio::select! {
                joined = &mut handle.handle => break joined,
                _ = asking.tick(), if left.is_some() => {
                    if left.as_ref().is_some_and(|left| left()) {
                        // Dropping `handle` aborts the work.
                        return Err(Refused::ClientLeft.into());
                    }
                }
            }
        };
        let answer = match joined {
            Ok(answer) => answer,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Refused::OutOfTime(seconds).into()),
        };
        handle.done = true;
        match &answer {
            Err(ReadError::Refused(Refused::OutOfTime(_))) => {
                stats.out_of_time.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    site,
                    seconds,
                    "a filtered report or funnel was stopped at its time budget"
                );
            }
            Err(ReadError::Refused(Refused::TooLarge(mb))) => {
                stats.too_large.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    site,
                    mb,
                    "a filtered report or funnel was stopped at its budget of bytes"
                );
            }
            _ => {}
        }
        answer
    }

    /// A turn to read `site`: its site's permit, then one of all; each
    /// wait within the queue wait. The site's first, so that one site's
    /// queue holds none of the others' turns.
    async fn turn(
        &self,
        site: &str,
    ) -> Result<
        (
            tokio::sync::OwnedSemaphorePermit,
            tokio::sync::OwnedSemaphorePermit,
        ),
        Refused,
    > {
        let of_site = {
            let mut sites = self.sites.lock().expect("not poisoned");
            if sites.len() > 1024 {
                // Forget the sites nobody reads now.
                sites.retain(|_, s| Arc::strong_count(s) > 1);
            }
            sites
                .entry(site.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limits.per_site.max(1))))
                .clone()
        };
        let wait = async {
            let mine = of_site.acquire_owned().await.ok()?;
            let all = self.in_all.clone().acquire_owned().await.ok()?;
            Some((mine, all))
        };
        match tokio::time::timeout(self.limits.queue_wait, wait).await {
            Ok(Some(turn)) => Ok(turn),
            _ => Err(Refused::Busy),
        }
    }
}

impl Drop for CostlyReads {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which an async context refuses; the
        // application may be dropped in one.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Counts a computation as running until it is dropped.
struct Running(Arc<ReadStats>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Aborts the work when its awaiting future is dropped before the answer.
struct Abandon<T> {
    handle: tokio::task::JoinHandle<T>,
    budget: Arc<Budget>,
    stats: Arc<ReadStats>,
    done: bool,
}

impl<T> Drop for Abandon<T> {
    fn drop(&mut self) {
        if !self.done {
            self.budget.abandoned.store(true, Ordering::Relaxed);
            self.handle.abort();
            self.stats.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The reads' threads yield the CPU to the rest of the process (the
/// pixel's workers, the journal's writers) when both want it: a nice
/// value of 10 weighs about a tenth of the default under Linux's
/// scheduler. On Linux the nice value is per thread (`who` 0 is the
/// calling thread); failing is harmless, the bounds above still hold.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority reads no memory of ours; it only changes the
    // calling thread's nice value.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// The bytes a visit holds in memory, as [`charge`] counts them: the
/// record, its steps, its properties, and the text of each (a visit read
/// from its document has its own copy of each path).
pub fn visit_bytes(v: &crate::domain::visit::VisitRecord) -> u64 {
    use crate::domain::visit::Step;
    let steps: usize = v
        .steps
        .iter()
        .map(|s| {
            std::mem::size_of::<Step>()
                + 16
                + match s {
                    Step::View { path, .. } => path.len(),
                    Step::Event { name, .. } => name.len(),
                }
        })
        .sum();
    let labels: usize = v.labels.values().map(|l| 48 + l.len()).sum();
    // Each property: its place and two text handles, and (read from a
    // document) its own copy of the key and the value.
    let props: usize = v
        .props
        .iter()
        .map(|(_, k, value)| 40 + 2 * 16 + k.len() + value.len())
        .sum();
    (std::mem::size_of::<crate::domain::visit::VisitRecord>() + steps + labels + props) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(in_all: usize, per_site: usize) -> ReadLimits {
        ReadLimits {
            threads: 1,
            in_all,
            per_site,
            queue_wait: Duration::from_millis(50),
            time_budget: Duration::from_secs(60),
            max_bytes: 1000,
        }
    }

    #[tokio::test]
    async fn a_read_over_the_site_limit_is_refused_and_others_go_on() {
        let reads = Arc::new(CostlyReads::start(limits(4, 1)).unwrap());
        let (started, release) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(Semaphore::new(0)),
        );
        let first = {
            let (reads, started, release) = (reads.clone(), started.clone(), release.clone());
            tokio::spawn(async move {
                reads
                    .run("a.test", async move {
                        started.notify_one();
                        let _ = release.acquire().await;
                        Ok(1)
                    })
                    .await
            })
        };
        started.notified().await;
        let refused = reads.run("a.test", async { Ok(2) }).await;
        assert!(matches!(refused, Err(ReadError::Refused(Refused::Busy))));
        assert_eq!(reads.run("b.test", async { Ok(3) }).await.unwrap(), 3);
        release.add_permits(1);
        assert_eq!(first.await.unwrap().unwrap(), 1);
        assert_eq!(reads.stats().refused_busy.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn the_bytes_and_the_time_are_bounded_and_a_dropped_read_stops() {
        let reads = CostlyReads::start(ReadLimits {
            time_budget: Duration::from_millis(100),
            ..limits(4, 4)
        })
        .unwrap();
        let too_large = reads
            .run("a.test", async {
                charge(600)?;
                charge(600)?;
                Ok(())
            })
            .await;
        assert!(matches!(
            too_large,
            Err(ReadError::Refused(Refused::TooLarge(_)))
        ));
        // A read that never ends is stopped at its budget.
        let endless = reads.run("a.test", std::future::pending::<Result<(), _>>());
        assert!(matches!(
            endless.await,
            Err(ReadError::Refused(Refused::OutOfTime(_)))
        ));
        assert_eq!(reads.stats().out_of_time.load(Ordering::Relaxed), 1);
        // Outside a read nothing is counted.
        assert!(charge(u64::MAX / 2).is_ok() && check().is_ok());
        // A read whose caller goes away is aborted: its work is dropped.
        let reads = CostlyReads::start(limits(4, 4)).unwrap();
        let dropped = Arc::new(tokio::sync::Notify::new());
        struct OnDrop(Arc<tokio::sync::Notify>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.notify_one();
            }
        }
        let guard = OnDrop(dropped.clone());
        let gone = reads.run("a.test", async move {
            let _guard = guard;
            std::future::pending::<Result<(), ReadError>>().await
        });
        let _ = tokio::time::timeout(Duration::from_millis(20), gone).await;
        dropped.notified().await;
        assert_eq!(reads.stats().abandoned.load(Ordering::Relaxed), 1);
        while reads.stats().running.load(Ordering::Relaxed) > 0 {
            tokio::task::yield_now().await;
        }
    }
}

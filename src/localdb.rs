//! The embedded local database: `secantusd-rs` run as a child process (it is
//! GPL-2.0, so it is never linked, only executed).
//!
//! A dedicated keeper thread spawns the server and waits on it. The child
//! is spawned with `PR_SET_PDEATHSIG`, which fires when the spawning
//! *thread* ends; the keeper lives until the child exits, so the server
//! goes down with this process however the process ends, and never
//! outlives it as an orphan holding the data directory's lock.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const SERVER_NAME: &str = "secantusd-rs";
/// The pinned version; `make setup` installs exactly this one.
pub const SERVER_VERSION: &str = "0.5.3-beta.196";

#[derive(Debug, thiserror::Error)]
pub enum LocalDbError {
    #[error(
        "the local database server `{SERVER_NAME}` was not found (looked for {looked}).\n\
         Run `make setup` to install it (about 6 minutes, once), set TICKERTAPE_LOCALDB_BIN \
         to its path, or set MONGODB_URI to use an existing MongoDB."
    )]
    MissingBinary { looked: String },
    #[error("could not start {0}")]
    Spawn(PathBuf, #[source] std::io::Error),
    #[error(
        "the local database exited before it was ready ({status}); its last output:\n{output}"
    )]
    ExitedEarly { status: String, output: String },
    #[error("the local database did not report its port within {0:?}")]
    Timeout(Duration),
    #[error("the local database did not answer `hello`")]
    NotAnswering(#[source] mongodb::error::Error),
}

/// Tuning for a server that shares the machine with the app.
#[derive(Debug, Clone)]
pub struct LocalDbOptions {
    pub cache_size: String,
    pub log_file_max: String,
    /// 0 picks a free port; tests that restart a server on the same files
    /// keep its port.
    pub port: u16,
    /// Fsync the server's log on every commit. Without it the server
    /// acknowledges `j: true` writes that a crash of the server loses.
    pub sync_on_commit: bool,
    /// Advertise a standalone server (no transactions), to test that
    /// Tickertape refuses one.
    pub standalone: bool,
}

impl Default for LocalDbOptions {
    fn default() -> Self {
        Self {
            cache_size: "512M".into(),
            log_file_max: "32MB".into(),
            port: 0,
            sync_on_commit: true,
            standalone: false,
        }
    }
}

pub struct LocalDb {
    pid: u32,
    uri: String,
    exited: mpsc::Receiver<ExitStatus>,
}

/// Finds the server binary: the configured path, else `.tools/bin` under
/// the current directory or the checkout the running executable was built
/// in (`target/<profile>/tickertape`), else the `PATH`.
pub fn locate(configured: Option<&Path>) -> Result<PathBuf, LocalDbError> {
    if let Some(path) = configured {
        return if path.is_file() {
            Ok(path.to_owned())
        } else {
            Err(LocalDbError::MissingBinary {
                looked: path.display().to_string(),
            })
        };
    }
    let mut looked = Vec::new();
    let mut roots = vec![PathBuf::from(".")];
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).take(3).map(Path::to_owned));
    }
    for root in roots {
        let candidate = root.join(".tools/bin").join(SERVER_NAME);
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join(SERVER_NAME);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    looked.push("the PATH".into());
    Err(LocalDbError::MissingBinary {
        looked: looked.join(", "),
    })
}

impl LocalDb {
    /// Starts the server on a free loopback port with its files in
    /// `storage`, and returns once it has answered `hello`.
    pub async fn start(
        binary: &Path,
        storage: &Path,
        options: &LocalDbOptions,
    ) -> Result<Self, LocalDbError> {
        std::fs::create_dir_all(storage).map_err(|e| LocalDbError::Spawn(storage.to_owned(), e))?;
        let mut command = Command::new(binary);
        command
            .args(["--host", "127.0.0.1", "--log-level", "WARNING"])
            .args(["--port", &options.port.to_string()])
            .arg("--storage-path")
            .arg(storage)
            .args(["--cache-size", &options.cache_size])
            .args(["--log-file-max", &options.log_file_max]);
        if options.sync_on_commit {
            command.arg("--sync-on-commit");
        }
        if options.standalone {
            command.arg("--standalone");
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }

        let (started_tx, started_rx) = mpsc::channel();
        let (exited_tx, exited_rx) = mpsc::channel();
        let binary = binary.to_owned();
        std::thread::Builder::new()
            .name("localdb-keeper".into())
            .spawn(move || keep(command, binary, started_tx, exited_tx))
            .map_err(|e| LocalDbError::Spawn("keeper thread".into(), e))?;

        let wait = Duration::from_secs(60);
        let started = tokio::task::spawn_blocking(move || started_rx.recv_timeout(wait))
            .await
            .map_err(|e| LocalDbError::Spawn("keeper thread".into(), std::io::Error::other(e)))?;
        let (pid, port) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(LocalDbError::Timeout(wait)),
        };
        let db = LocalDb {
            pid,
            uri: format!("mongodb://127.0.0.1:{port}/?directConnection=true"),
            exited: exited_rx,
        };
        if let Err(e) = db.wait_for_hello().await {
            db.stop();
            return Err(e);
        }
        tracing::info!(pid, port, storage = %storage.display(), "local database started");
        Ok(db)
    }

    async fn wait_for_hello(&self) -> Result<(), LocalDbError> {
        let mut options = mongodb::options::ClientOptions::parse(&self.uri)
            .await
            .map_err(LocalDbError::NotAnswering)?;
        options.server_selection_timeout = Some(Duration::from_secs(30));
        let client = mongodb::Client::with_options(options).map_err(LocalDbError::NotAnswering)?;
        client
            .database("admin")
            .run_command(bson::doc! {"hello": 1})
            .await
            .map_err(LocalDbError::NotAnswering)?;
        Ok(())
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Kills the server outright (SIGKILL), as a crash or power cut would,
    /// and waits for it to be gone.
    pub fn kill(self) {
        // SAFETY: plain syscall on a pid we spawned and have not reaped.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        let _ = self.exited.recv_timeout(Duration::from_secs(10));
    }

    /// Asks the server to stop (SIGTERM, so WiredTiger closes cleanly) and
    /// waits up to 20 s before killing it.
    pub fn stop(self) -> Option<ExitStatus> {
        let pid = self.pid as libc::pid_t;
        // SAFETY: plain syscall on a pid we spawned and have not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        match self.exited.recv_timeout(Duration::from_secs(20)) {
            Ok(status) => {
                tracing::info!(pid, %status, "local database stopped");
                Some(status)
            }
            Err(_) => {
                tracing::warn!(pid, "local database ignored SIGTERM; killing it");
                unsafe { libc::kill(pid, libc::SIGKILL) };
                self.exited.recv_timeout(Duration::from_secs(5)).ok()
            }
        }
    }
}

type Started = Result<(u32, u16), LocalDbError>;

/// The keeper thread: spawn, report the port, forward output to the log,
/// wait for the exit.
fn keep(
    mut command: Command,
    binary: PathBuf,
    started: mpsc::Sender<Started>,
    exited: mpsc::Sender<ExitStatus>,
) {
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = started.send(Err(LocalDbError::Spawn(binary, e)));
            return;
        }
    };
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr is piped");
    let recent_stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let recent = recent_stderr.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tracing::debug!(target: "localdb", "{line}");
            let mut recent = recent.lock().expect("lock");
            recent.push(line);
            if recent.len() > 20 {
                recent.remove(0);
            }
        }
    });
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let mut reported = false;
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(port) = listening_port(&line) {
            let _ = started.send(Ok((pid, port)));
            reported = true;
            break;
        }
        seen.push(line);
    }
    if reported {
        // Keep draining so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                tracing::debug!(target: "localdb", "{line}");
            }
        });
    }
    let status = child.wait();
    if !reported {
        std::thread::sleep(Duration::from_millis(100));
        seen.extend(recent_stderr.lock().expect("lock").iter().cloned());
        let _ = started.send(Err(LocalDbError::ExitedEarly {
            status: status
                .as_ref()
                .map_or_else(|e| e.to_string(), |s| s.to_string()),
            output: seen.join("\n"),
        }));
    }
    if let Ok(status) = status {
        let _ = exited.send(status);
    }
}

/// Parses `secantusd-rs listening on 127.0.0.1:PORT`.
fn listening_port(line: &str) -> Option<u16> {
    let rest = line.split("listening on ").nth(1)?;
    rest.trim().rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_listening_line() {
        assert_eq!(
            listening_port("secantusd-rs listening on 127.0.0.1:32867"),
            Some(32867)
        );
        assert_eq!(listening_port("starting"), None);
    }

    #[test]
    fn a_missing_binary_says_how_to_get_it() {
        let err = locate(Some(Path::new("/nonexistent/secantusd-rs"))).unwrap_err();
        assert!(err.to_string().contains("make setup"), "{err}");
    }
}

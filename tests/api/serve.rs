//! `tickertape serve` as a user runs it: with no MONGODB_URI it starts the
//! embedded database, and stops it on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::*;

fn tickertape() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.env_remove("MONGODB_URI")
        .env_remove("TICKERTAPE_PUBLIC_URL")
        .env("TICKERTAPE_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn");
    cmd
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purposes.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

#[tokio::test]
async fn serve_starts_and_stops_the_embedded_database() {
    let data = tempfile::tempdir().unwrap();
    let mut child = tickertape()
        .arg("serve")
        .env("TICKERTAPE_DATA_DIR", data.path())
        .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let logs = std::thread::spawn(move || stderr.lines().map_while(Result::ok).collect::<Vec<_>>());
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut db_pid = None;
    let mut address = None;
    let mut warned = 0;
    for line in stdout.by_ref() {
        let line = line.unwrap();
        // No public URL, so the snippets use the
        // loopback listen address, and serve says so at start.
        warned += usize::from(line.contains("only this machine"));
        if let Some(rest) = line.strip_prefix("embedded database pid ") {
            db_pid = rest.split(' ').next().and_then(|p| p.parse::<u32>().ok());
        }
        if let Some(url) = line.strip_prefix("tickertape listening on ") {
            address = Some(url.to_owned());
            break;
        }
    }
    std::thread::spawn(move || stdout.for_each(drop));
    let db_pid = db_pid.expect("serve reports the embedded database's pid");
    let address = address.expect("serve reports its address");
    assert_eq!(warned, 1, "serve flags the loopback snippet address once");
    assert!(alive(db_pid));
    assert!(data.path().join("localdb.uri").exists());

    let http = reqwest::Client::new();
    for path in ["/healthz", "/readyz"] {
        let r = http.get(format!("{address}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let js = http.get(format!("{address}/tt.js")).send().await.unwrap();
    assert!(js.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(
        js.bytes().await.unwrap().len() < 2048,
        "tt.js stays under 2 KB"
    );
    // Compressed for clients that accept it.
    let css = http
        .get(format!("{address}/static/style.css"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(css.headers()["content-encoding"], "gzip");

    // A command run beside `serve` uses its database.
    let cli = |args: &[&str]| {
        tickertape()
            .args(args)
            .env("TICKERTAPE_DATA_DIR", data.path())
            .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
            .output()
            .unwrap()
    };
    let added = cli(&["site", "add", "--domain", "beside.test"]);
    assert!(added.status.success(), "{added:?}");

    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    assert!(!alive(db_pid), "the embedded database outlived serve");
    // Logs to a pipe carry no terminal colour codes.
    let logs = logs.join().unwrap();
    assert!(!logs.is_empty(), "serve logs at info");
    assert!(logs.iter().all(|l| !l.contains('\x1b')), "{logs:?}");
    // Not in the log as well: whoever runs `serve` would read it twice.
    assert!(
        logs.iter().all(|l| !l.contains("only this machine")),
        "{logs:?}"
    );
    assert!(!data.path().join("localdb.uri").exists());
    // With `serve` stopped, a command starts serve's database, not a new one.
    let listed = cli(&["site", "list"]);
    assert!(listed.status.success(), "{listed:?}");
    // Each site with its zone (id, domain, name, zone, aliases).
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("\tbeside.test\tbeside.test\tUTC\t"),
        "{listed:?}"
    );
}

/// Run where `serve` keeps no data, a command other than
/// `serve` creates nothing and names the two ways to point it at the
/// database.
#[test]
fn commands_other_than_serve_never_create_a_database() {
    let elsewhere = tempfile::tempdir().unwrap();
    for args in [
        &["site", "list"][..],
        &["site", "add", "--domain", "lost.test"],
        &["demo", "--days", "1"],
        &["setup"],
    ] {
        let output = tickertape()
            .args(args)
            .current_dir(elsewhere.path())
            .env_remove("TICKERTAPE_DATA_DIR")
            .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("TICKERTAPE_DATA_DIR") && stderr.contains("MONGODB_URI"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(
                &elsewhere
                    .path()
                    .join("data")
                    .join("db")
                    .display()
                    .to_string()
            ),
            "{args:?} names the directory it looked in: {stderr}"
        );
        let left: Vec<_> = std::fs::read_dir(elsewhere.path()).unwrap().collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
}

#[test]
fn a_missing_database_binary_says_how_to_install_it() {
    let data = tempfile::tempdir().unwrap();
    let output = tickertape()
        .arg("serve")
        .env("TICKERTAPE_DATA_DIR", data.path())
        .env("TICKERTAPE_LOCALDB_BIN", "/nonexistent/secantusd-rs")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("make setup"), "{stderr}");
    assert!(stderr.contains("MONGODB_URI"), "{stderr}");
}

#[test]
fn site_add_rejects_a_malformed_domain_without_touching_the_database() {
    let output = tickertape()
        .args(["site", "add", "--domain", "https://example.com/blog"])
        .env("TICKERTAPE_LOCALDB_BIN", "/nonexistent/secantusd-rs")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--domain") && stderr.contains("host only"),
        "{stderr}"
    );
}

/// Drops a database a synchronous test made (on a thread of its own: the
/// test has no runtime).
fn drop_database(database: String) {
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let client = mongodb::Client::with_uri_str(database_uri()).await?;
            client.database(&database).drop().await
        })
    })
    .join();
}

/// A site moved from Umami keeps its website id (the snippets'
/// `data-website-id`); an id taken or malformed adds nothing.
#[test]
fn site_add_keeps_a_chosen_id_and_refuses_a_taken_or_bad_one() {
    let database = format!("test_{}", uuid::Uuid::new_v4().simple());
    let run = |domain: &str, id: &str| {
        tickertape()
            .args(["site", "add", "--domain", domain, "--id", id])
            .env("MONGODB_URI", database_uri())
            .env("TICKERTAPE_DATABASE", &database)
            .output()
            .unwrap()
    };
    let id = uuid::Uuid::new_v4().to_string();
    let added = run("moved.test", &id.to_ascii_uppercase());
    assert!(added.status.success(), "{added:?}");
    assert_eq!(String::from_utf8_lossy(&added.stdout).trim(), id);
    let taken = run("other.test", &id);
    assert!(!taken.status.success());
    assert!(
        String::from_utf8_lossy(&taken.stderr).contains("exists already"),
        "{taken:?}"
    );
    let bad = run("third.test", "umami-1");
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--id"),
        "{bad:?}"
    );
    let listed = tickertape()
        .args(["site", "list"])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", &database)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains(&format!("{id}\tmoved.test")), "{listed}");
    assert!(
        !listed.contains("other.test") && !listed.contains("third.test"),
        "{listed}"
    );
    drop_database(database);
}

#[test]
fn site_add_prints_snippets_with_the_address_serve_uses() {
    let database = format!("test_{}", uuid::Uuid::new_v4().simple());
    let run = |extra: &[(&str, &str)]| {
        let mut cmd = tickertape();
        cmd.args([
            "site",
            "add",
            "--domain",
            &format!("{}.test", uuid::Uuid::new_v4().simple()),
        ])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", &database)
        .env_remove("TICKERTAPE_PUBLIC_URL");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let output = cmd.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // `serve` started with TICKERTAPE_LISTEN serves there: the snippets
    // must point there too, not at the default port.
    let stderr = run(&[("TICKERTAPE_LISTEN", "127.0.0.1:18960")]);
    assert!(
        stderr.contains(r#"src="http://127.0.0.1:18960/tt.js""#)
            && stderr.contains("http://127.0.0.1:18960/pixel.gif?site="),
        "{stderr}"
    );
    // A public URL still wins, as in `serve`.
    let stderr = run(&[
        ("TICKERTAPE_LISTEN", "127.0.0.1:18960"),
        ("TICKERTAPE_PUBLIC_URL", "https://stats.example.com/"),
    ]);
    assert!(
        stderr.contains(r#"src="https://stats.example.com/tt.js""#),
        "{stderr}"
    );
    drop_database(database);
}

#[tokio::test]
async fn a_standalone_server_is_refused_with_the_fix_named() {
    let dir = tempfile::tempdir().unwrap();
    let options = tickertape::localdb::LocalDbOptions {
        standalone: true,
        ..Default::default()
    };
    let db = tickertape::localdb::LocalDb::start(&localdb_binary(), dir.path(), &options)
        .await
        .unwrap();
    let output = tickertape()
        .arg("serve")
        .env("MONGODB_URI", db.uri())
        .env("TICKERTAPE_JOURNAL_DIR", dir.path().join("journal"))
        .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
        .output()
        .unwrap();
    db.stop();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("standalone"), "{stderr}");
    assert!(stderr.contains("one-member replica set"), "{stderr}");
}

#[tokio::test]
async fn a_second_process_on_the_same_journal_refuses_to_start() {
    let data = tempfile::tempdir().unwrap();
    let journal = data.path().join("journal");
    let first = spawn_app_with(|s| s.ingest.journal_dir = Some(journal.clone())).await;
    let output = tickertape()
        .arg("serve")
        .env("MONGODB_URI", database_uri())
        .env(
            "TICKERTAPE_DATABASE",
            format!("second_{}", uuid::Uuid::new_v4().simple()),
        )
        .env("TICKERTAPE_JOURNAL_DIR", &journal)
        .env("TICKERTAPE_PREALLOC_SCHEDULE", "false")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("in use by another process"), "{stderr}");
    assert!(stderr.contains(&std::process::id().to_string()), "{stderr}");
    drop(first);
}

/// `make run` is `serve --demo-if-empty`: its default demo (30 days of
/// 4,000 views with visits and sources) must fit the embedded database's
/// cache, and the report must show it. Batches of 20,000 views did not
/// fit, and a new user's first `make run` stopped with "Transaction is too
/// large".
#[tokio::test]
async fn make_runs_demo_loads_on_the_embedded_database_and_serves_a_report() {
    let data = tempfile::tempdir().unwrap();
    let mut child = tickertape()
        .args(["serve", "--demo-if-empty"])
        .env("TICKERTAPE_DATA_DIR", data.path())
        .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut wrote, mut address) = (None, None);
    for line in stdout.by_ref() {
        let line = line.unwrap();
        if line.starts_with("journaled ") {
            wrote = Some(line.clone());
        }
        if let Some(url) = line.strip_prefix("tickertape listening on ") {
            address = Some(url.to_owned());
            break;
        }
    }
    std::thread::spawn(move || stdout.for_each(drop));
    let wrote = wrote.expect("the demo was journaled");
    assert!(wrote.contains("over 30 days"), "{wrote}");
    let views: u64 = wrote.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(views > 100_000, "{wrote}");
    let address = address.expect("serve came up after the demo");
    let health = reqwest::get(format!("{address}/healthz")).await;
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(health.is_ok_and(|r| r.status().is_success()), "{status:?}");
}

/// A running `serve`, its stdout lines up to "listening" kept.
struct Served {
    child: std::process::Child,
    lines: Vec<String>,
    address: String,
}

impl Served {
    fn start(data: &std::path::Path, extra: &[&str]) -> Served {
        let mut child = tickertape()
            .arg("serve")
            .args(extra)
            .env("TICKERTAPE_DATA_DIR", data)
            .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut lines = Vec::new();
        let mut address = None;
        // Up to the address, then whatever follows within a second (the
        // login line comes right after it).
        while let Ok(line) = rx.recv_timeout(if address.is_some() {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(180)
        }) {
            if let Some(url) = line.strip_prefix("tickertape listening on ") {
                address = Some(url.to_owned());
            }
            lines.push(line);
        }
        let address = address.unwrap_or_else(|| panic!("serve did not come up: {lines:?}"));
        Served {
            child,
            lines,
            address,
        }
    }

    /// The one-time password the "first run" line prints, if it does.
    fn password(&self) -> Option<String> {
        let line = self.lines.iter().find(|l| l.starts_with("first run: "))?;
        let rest = line.split(" with password ").nth(1)?;
        Some(rest.split(' ').next()?.to_owned())
    }

    fn stop(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

impl Drop for Served {
    /// A failed test leaves no server running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Logs in as the first admin with `password`: `true` when the login is
/// taken (and sends them to choose their own password).
async fn first_admin_logs_in(address: &str, password: &str) -> bool {
    let http = cookie_client();
    let page = http
        .get(format!("{address}/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = csrf_in(&page).expect("the login form's token");
    let r = http
        .post(format!("{address}/login"))
        .form(&[
            ("email", "admin@localhost"),
            ("password", password),
            ("csrf", csrf.as_str()),
            ("next", "/sites"),
        ])
        .send()
        .await
        .unwrap();
    r.status() == 303
        && r.headers()["location"]
            .to_str()
            .is_ok_and(|l| l.starts_with("/account/password"))
}

/// `serve --demo-if-empty` on a port already taken stops at once, before
/// it has created anything: no database, no first admin, no demo. (It used
/// to create the admin and write the demo for over a minute, then fail
/// without printing the one-time password, which no later start printed.)
#[tokio::test]
async fn a_taken_port_stops_serve_before_anything_is_created() {
    let data = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let started = Instant::now();
    let out = tickertape()
        .args(["serve", "--demo-if-empty"])
        .env("TICKERTAPE_LISTEN", format!("127.0.0.1:{port}"))
        .env("TICKERTAPE_DATA_DIR", data.path())
        .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it stopped at once"
    );
    assert!(
        !data.path().join("db").exists()
            || std::fs::read_dir(data.path().join("db"))
                .unwrap()
                .next()
                .is_none(),
        "no database was created"
    );
    drop(taken);
    // The next start is a first start: it prints the one-time login.
    let served = Served::start(data.path(), &[]);
    let password = served.password().expect("the first start's login");
    assert!(first_admin_logs_in(&served.address, &password).await);
    served.stop();
}

/// Each start prints a working one-time login while the first admin is
/// the only user and has not chosen a password (the one printed before may
/// never have been seen); the one printed before stops working.
/// `user reset-login` gives a new one, also beside a running `serve`.
#[tokio::test]
async fn every_start_prints_the_first_admins_login_until_it_is_used() {
    let data = tempfile::tempdir().unwrap();
    let first = Served::start(data.path(), &[]);
    let p1 = first.password().expect("the first start's login");
    first.stop();
    let second = Served::start(data.path(), &[]);
    let p2 = second
        .password()
        .unwrap_or_else(|| panic!("the second start prints a login too: {:?}", second.lines));
    assert_ne!(p1, p2);
    assert!(first_admin_logs_in(&second.address, &p2).await);
    assert!(!first_admin_logs_in(&second.address, &p1).await);

    let reset = tickertape()
        .args(["user", "reset-login", "--email", "admin@localhost"])
        .env("TICKERTAPE_DATA_DIR", data.path())
        .env("TICKERTAPE_LOCALDB_BIN", localdb_binary())
        .output()
        .unwrap();
    assert!(reset.status.success(), "{reset:?}");
    let said = String::from_utf8_lossy(&reset.stdout);
    let p3 = said
        .split(" with password ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    assert!(first_admin_logs_in(&second.address, &p3).await);
    assert!(!first_admin_logs_in(&second.address, &p2).await);
    second.stop();
}

#[tokio::test]
async fn once_the_application_stops_none_of_its_background_tasks_runs() {
    let mut settings = test_settings();
    settings.prealloc.prealloc_schedule = true;
    let dir = tempfile::tempdir().unwrap();
    settings.ingest.journal_dir = Some(dir.path().to_owned());
    let store = connect(database_uri(), &settings).await;
    let clock = tickertape::clock::ManualClock::new(t0());
    let app = tickertape::app::Application::build(&settings, store, clock)
        .await
        .expect("build the app");
    let tasks = app.tasks();
    let running = tasks.names();
    // The hourly backfill of page summaries never ends by itself: it is
    // what a dropped handle left running after a stop.
    for name in [
        "backfills",
        "site directory refresh",
        "deleted sites purge",
        "visitor salts",
        "preallocation schedule",
    ] {
        assert!(running.contains(&name), "{name} not in {running:?}");
    }
    let handle = app.handle();
    let served = tokio::spawn(app.run_until_stopped());
    handle.stop(true).await;
    served.await.expect("app task").expect("stopped cleanly");
    assert!(
        tasks.names().is_empty(),
        "still running after the stop: {:?}",
        tasks.names()
    );
}

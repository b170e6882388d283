//! Real processes, killed for real: the release binary and the database
//! server are spawned, sent SIGKILL in the middle of a load, and restarted on
//! the same files. Afterwards every hit answered 200 must be in all three
//! bucket collections exactly once, and its source and its visit's
//! counters with it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tickertape::domain::DomainName;
use tickertape::storage::sites::{self, NewSite};
use tickertape::storage::{Resolution, Subject};

use crate::helpers::*;
use crate::processes::*;

struct Scenario {
    db: Db,
    app: AppProcess,
    database: String,
    site: String,
    _summariser: Summariser,
    _dirs: tempfile::TempDir,
}

async fn scenario() -> Scenario {
    let dirs = tempfile::tempdir().unwrap();
    let db = Db::start(&dirs.path().join("db")).await;
    let database = format!("crash_{}", uuid::Uuid::new_v4().simple());
    let site = create_site(&db.uri(), &database, vec![]).await;
    let app = AppProcess::start(&db.uri(), &database, &dirs.path().join("journal")).await;
    let summariser = Summariser::start(&db.uri(), &database).await;
    Scenario {
        db,
        app,
        database,
        site,
        _summariser: summariser,
        _dirs: dirs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_killed_with_sigkill_mid_load_loses_and_doubles_nothing() {
    let mut s = scenario().await;
    let stop = Arc::new(AtomicBool::new(false));
    let running = load(s.app.url(""), s.site.clone(), 200, 32, 0, stop.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    s.app.kill();
    s.app.restart().await; // same journal directory
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let tally = running.await.unwrap();
    let acked: i64 = tally.acked.values().sum();
    assert!(acked > 1_000, "the load ran: {tally:?}");
    s.app.drained(Duration::from_secs(60)).await;
    check_exactly_once(&s.db.uri(), &s.database, &tally).await;
    eprintln!(
        "app SIGKILL: {acked} answered 200, {} answers lost in the kill, {} refused",
        tally.unknown.values().sum::<i64>(),
        tally.refused
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_killed_with_sigkill_mid_load_loses_and_doubles_nothing() {
    let mut s = scenario().await;
    let stop = Arc::new(AtomicBool::new(false));
    let running = load(s.app.url(""), s.site.clone(), 200, 32, 0, stop.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    s.db.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    s.db.restart().await; // same files, same port
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let tally = running.await.unwrap();
    assert_eq!(
        tally.non_200_statuses, 0,
        "every hit answered from the journal"
    );
    assert_eq!(tally.unknown.values().sum::<i64>(), 0, "{tally:?}");
    let acked: i64 = tally.acked.values().sum();
    assert!(acked > 1_000, "the load ran: {tally:?}");
    s.app.drained(Duration::from_secs(60)).await;
    check_exactly_once(&s.db.uri(), &s.database, &tally).await;
    eprintln!("database SIGKILL: {acked} answered 200, all stored exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixty_second_database_outage_is_absorbed_by_the_journal_and_drained() {
    let mut s = scenario().await;
    let stop = Arc::new(AtomicBool::new(false));
    let running = load(s.app.url(""), s.site.clone(), 100, 8, 200, stop.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.db.kill();
    let outage = Instant::now();
    // The app stays up and says it is degraded while the backlog grows.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ready = reqwest::get(s.app.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503, "not ready while the database is away");
    while outage.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let backlog = s
        .app
        .metric("tickertape_journal_backlog_hits")
        .await
        .unwrap();
    assert!(backlog > 5_000.0, "the backlog grew: {backlog}");
    s.db.restart().await;
    let returned = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let tally = running.await.unwrap();
    assert_eq!(
        tally.non_200_statuses, 0,
        "all answered 200 within the budget"
    );
    assert_eq!(tally.unknown.values().sum::<i64>(), 0);
    s.app.drained(Duration::from_secs(120)).await;
    let drain = returned.elapsed();
    check_exactly_once(&s.db.uri(), &s.database, &tally).await;
    let ready = reqwest::get(s.app.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "ready again");
    eprintln!(
        "60 s outage: {} answered 200, backlog {backlog} at the end of the outage, drained {drain:?} after the database returned",
        tally.acked.values().sum::<i64>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_killed_at_once_while_a_large_backlog_drains_lose_and_double_nothing() {
    // A backlog builds while the database is away; it drains in large
    // batches once it returns, and the app and the database are both
    // killed in the middle of that drain, then started again.
    let mut s = scenario().await;
    let stop = Arc::new(AtomicBool::new(false));
    let running = load(s.app.url(""), s.site.clone(), 500, 16, 1_500, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.db.kill();
    tokio::time::sleep(Duration::from_secs(15)).await;
    let backlog = s
        .app
        .metric("tickertape_journal_backlog_hits")
        .await
        .unwrap();
    assert!(backlog > 5_000.0, "a backlog to drain: {backlog}");
    s.db.restart().await;
    // Into the drain: some batches in, most not yet.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = s.app.metric("tickertape_journal_backlog_hits").await;
        if left.is_some_and(|l| l < backlog * 0.9) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.app.kill();
    s.db.kill();
    s.db.restart().await;
    s.app.restart().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let tally = running.await.unwrap();
    let acked: i64 = tally.acked.values().sum();
    assert!(acked > 5_000, "the load ran: {tally:?}");
    s.app.drained(Duration::from_secs(120)).await;
    check_exactly_once(&s.db.uri(), &s.database, &tally).await;
    eprintln!(
        "both SIGKILLed during a drain of {backlog} hits: {acked} answered 200, {} answers lost in the kill",
        tally.unknown.values().sum::<i64>()
    );
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_address_nor_user_agent_reaches_the_journal_the_database_or_the_logs() {
    let dirs = tempfile::tempdir().unwrap();
    let db = Db::start(&dirs.path().join("db")).await;
    let database = format!("privacy_{}", uuid::Uuid::new_v4().simple());
    let mut settings = test_settings();
    settings.database.name = database.clone();
    let store = connect(&db.uri(), &settings).await;
    tickertape::indexes::ensure(&store).await.unwrap();
    let site = sites::insert(
        &store,
        NewSite {
            domain: DomainName::parse("privacy.test").unwrap(),
            aliases: vec![],
            name: None,
            owners: vec![],
            time_zone: tickertape::domain::TimeZone::UTC,
        },
        Utc::now(),
    )
    .await
    .unwrap();
    let journal = dirs.path().join("journal");
    let log = dirs.path().join("app.log");
    // The most talkative logs, behind a trusted proxy that names clients,
    // and fewer open visits than the run has visitors.
    let mut app = AppProcess::start_with(
        &db.uri(),
        &database,
        &journal,
        &[
            ("RUST_LOG", "debug"),
            ("TICKERTAPE_TRUSTED_PROXIES", "127.0.0.1"),
            ("TICKERTAPE_OPEN_VISITS", "1000"),
        ],
        Some(&log),
    )
    .await;
    let http = reqwest::Client::new();
    let (mut addresses, mut agents) = (Vec::new(), Vec::new());
    for i in 0..3000 {
        let address = format!("203.0.113.{}", i % 250);
        let ipv6 = format!("2001:db8:{:x}::7", i);
        let agent = format!("Mozilla/5.0 (X11; Linux x86_64) PrivacyProbe/{i}.{i} Firefox/133.0");
        let client = if i % 2 == 0 { &address } else { &ipv6 };
        // The pixel and every peer's endpoint in turn.
        let page = format!("/p/{}", i % 40);
        let (request, status) = match i % 4 {
            0 => (
                http.get(app.url(&format!("/pixel.gif?site={}&page={page}", site.id))),
                200,
            ),
            1 => (
                http.post(app.url("/api/event"))
                    .header("content-type", "text/plain")
                    .body(format!(
                        r#"{{"n":"pageview","u":"https://privacy.test{page}","d":"privacy.test","r":null}}"#
                    )),
                202,
            ),
            2 => (
                http.post(app.url("/api/send")).json(&serde_json::json!({
                    "type": "event",
                    "payload": {"website": site.id.to_string(), "url": page, "hostname": "privacy.test"}
                })),
                200,
            ),
            _ => (
                http.get(app.url(&format!("/count?p={page}")))
                    .header("referer", format!("https://privacy.test{page}")),
                200,
            ),
        };
        let r = request
            .header("user-agent", &agent)
            .header("x-forwarded-for", format!("198.51.100.9, {client}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "request {i}");
        if i < 300 {
            addresses.push(address);
            addresses.push(ipv6);
            agents.push(agent);
        }
    }
    // A report and the metrics, so every logging path has run.
    let _ = http.get(app.url("/metrics")).send().await.unwrap();
    app.drained(Duration::from_secs(60)).await;
    let open = app.metric("tickertape_open_visits").await.unwrap();
    assert!(open <= 1000.0, "the open visits keep their bound: {open}");
    let evicted = app
        .metric("tickertape_open_visits_evicted_total")
        .await
        .unwrap();
    assert!(evicted >= 2000.0, "{evicted}");
    let pid = app.child.as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rss_kb < 200 * 1024, "RSS {rss_kb} kB");
    // The visitors were counted (the addresses did their work)...
    let visitors = visit_totals(&db.uri(), &database, Subject::Site, Resolution::Day)
        .await
        .1;
    let counted: u64 = visitors.values().map(|s| s.estimate_count()).sum();
    assert!(
        (2900..=3100).contains(&counted),
        "{counted} visitors of 3,000"
    );
    app.kill();
    // ...and neither they nor the User-Agents are anywhere.
    let mut haystacks: Vec<(String, Vec<u8>)> = files_under(&journal)
        .into_iter()
        .chain([log.clone()])
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    let client = mongodb::Client::with_uri_str(db.uri()).await.unwrap();
    let names = client
        .database(&database)
        .list_collection_names()
        .await
        .unwrap();
    assert!(names.len() > 10, "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n == tickertape::storage::visit_log::PARTS),
        "the visit store is searched too: {names:?}"
    );
    let parts: Vec<bson::Document> =
        all(&db.uri(), &database, tickertape::storage::visit_log::PARTS).await;
    let entries: Vec<&bson::Document> = parts
        .iter()
        .flat_map(|p| p.get_array("v").unwrap())
        .map(|e| e.as_document().unwrap())
        .collect();
    assert!(
        entries.len() >= 1000,
        "{} visits' entries stored",
        entries.len()
    );
    for e in entries {
        // What a visit keeps of its visitor: the sketch register only.
        let first = e.get_document("f").ok();
        assert!(
            e.keys()
                .all(|k| ["i", "s", "g", "f", "w", "d", "st"].contains(&k.as_str()))
                && first.is_none_or(|f| f.get("visitor").is_none() && f.get("ip").is_none()),
            "{e}"
        );
    }
    for name in names {
        let docs: Vec<bson::Document> = all(&db.uri(), &database, &name).await;
        let mut dump = Vec::new();
        for d in docs {
            dump.extend(format!("{d}").into_bytes());
            dump.extend(bson::to_vec(&d).unwrap());
        }
        haystacks.push((format!("collection {name}"), dump));
    }
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("DEBUG"),
        "the logs are debug: {} bytes",
        log_text.len()
    );
    for (name, bytes) in &haystacks {
        assert!(!contains(bytes, "PrivacyProbe"), "a User-Agent in {name}");
        assert!(!contains(bytes, "Firefox/133"), "a User-Agent in {name}");
        for a in &addresses {
            assert!(!contains(bytes, a), "{a} in {name}");
        }
        assert!(
            !contains(bytes, "198.51.100.9"),
            "the proxy chain in {name}"
        );
    }
}

//! `/metrics` passes `promtool check metrics` (Debian's
//! `prometheus` package, installed by `make test-deps`), the linter of the
//! Prometheus that scrapes it. The check reads whatever `/metrics` serves,
//! so a metric added later is held to it without a change here.

use std::io::Write;
use std::process::{Command, Stdio};

use tickertape::accounts::Role;

use crate::helpers::*;

fn promtool() -> Command {
    let binary = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let found = Command::new(&binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{binary} is missing: run `make test-deps` (it installs Debian's prometheus package)"
    );
    Command::new(binary)
}

/// `promtool check metrics` on `text`: its verdict and what it said.
fn check(text: &str) -> (bool, String) {
    let mut child = promtool()
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && said.trim().is_empty(), said)
}

#[tokio::test]
async fn metrics_pass_promtool_after_traffic() {
    // The linter can fail: a counter without `_total` is refused.
    let (clean, said) = check("# HELP x_hits Hits.\n# TYPE x_hits counter\nx_hits 1\n");
    assert!(!clean, "promtool lints counters: {said}");

    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("m.test", &[]).await;
    // Counted hits, hits refused for several reasons, and report pages, so
    // that counters, gauges and every histogram have values.
    for i in 0..20 {
        let r = app
            .pixel(&format!("site={}&page=/p{}", site.id, i % 3))
            .await;
        assert_eq!(r.status(), 200);
    }
    app.pixel("site=00000000-0000-4000-8000-000000000000&page=/x")
        .await;
    app.pixel(&format!("site={}&page=no-slash", site.id)).await;
    app.settle().await;
    let admin = app.login("admin@example.com").await;
    for page in ["", "/pages.csv", "/page?path=/p1"] {
        let (status, _) = admin.text(&format!("/sites/{}{page}", site.id)).await;
        assert_eq!(status, 200, "{page}");
    }

    let text = app.metrics().await;
    // The visit store's stream is measured like the others.
    let visits_statements: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("tickertape_apply_statements_total{stream=\"visits\"} "))
        .expect("the visits stream's statements")
        .parse()
        .unwrap();
    assert!(visits_statements >= 1.0, "{visits_statements}");
    assert_eq!(
        app.metric("tickertape_journal_visits_backlog_hits").await,
        0.0
    );
    let (clean, said) = check(&text);
    assert!(clean, "promtool check metrics:\n{said}\n{text}");
    // Every histogram was observed, so the check saw real buckets.
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|l| l.strip_suffix(" histogram"))
        {
            let count = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}_count ")))
                .unwrap_or_else(|| panic!("{name}_count missing"));
            assert_ne!(count, "0", "{name} has no observation after the traffic");
        }
    }
}

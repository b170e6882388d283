//! Email reports and alerts against a real SMTP server: Debian's
//! python3-aiosmtpd (`make test-deps`), run by `smtp_sink.py` on a free
//! port, which writes each message it receives, decoded by Python's own
//! `email` package, to a directory this test reads. The app's clock is
//! moved to the start of a period instead of waiting for it; the sender
//! checks every 50 ms here.

use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tickertape::accounts::Role;
use tickertape::clock::Clock;
use tickertape::settings::Settings;

use crate::helpers::*;
use crate::json_api::{create_email_token, create_token, get};

/// A running sink; stops when dropped.
pub struct SmtpSink {
    _child: tokio::process::Child,
    port: u16,
    dir: tempfile::TempDir,
    auth: Option<(String, String)>,
    tls: Option<SinkTls>,
}

/// How a sink speaks TLS, with a server certificate and its key (PEM
/// files; tests/api/email_tls.rs makes them).
pub struct SinkTls {
    pub mode: TlsMode,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// STARTTLS offered and required before anything else (AUTH included).
    StartTls,
    /// TLS from the first byte (`smtps://`).
    Implicit,
}

fn python() -> PathBuf {
    // Debian's interpreter, which has the python3-aiosmtpd package (a
    // python3 of pyenv or a venv may come first on the PATH).
    std::env::var_os("TICKERTAPE_SMTP_SINK_PYTHON")
        .map_or_else(|| PathBuf::from("/usr/bin/python3"), PathBuf::from)
}

impl SmtpSink {
    pub async fn start(auth: Option<(&str, &str)>, fail_first: u32) -> Self {
        Self::start_with(auth, fail_first, None).await
    }

    /// A sink speaking TLS as `tls` says (plain SMTP without it).
    pub async fn start_with(
        auth: Option<(&str, &str)>,
        fail_first: u32,
        tls: Option<SinkTls>,
    ) -> Self {
        let ok = std::process::Command::new(python())
            .args(["-c", "import aiosmtpd"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "{} has no aiosmtpd: run `make test-deps` (it installs Debian's python3-aiosmtpd)",
            python().display()
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cmd = tokio::process::Command::new(python());
        cmd.arg(repo_root().join("tests/api/smtp_sink.py"))
            .arg(port.to_string())
            .arg(dir.path())
            .args(["--fail-first", &fail_first.to_string()])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Some((user, password)) = auth {
            cmd.args(["--user", user, "--password", password]);
        }
        if let Some(tls) = &tls {
            let mode = match tls.mode {
                TlsMode::StartTls => "starttls",
                TlsMode::Implicit => "implicit",
            };
            cmd.args(["--tls", mode])
                .arg("--cert")
                .arg(&tls.cert)
                .arg("--key")
                .arg(&tls.key);
        }
        let mut child = cmd.spawn().expect("start the SMTP sink");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the SMTP sink started within 20 s")
            .unwrap();
        assert_eq!(first.as_deref(), Some("ready"));
        SmtpSink {
            _child: child,
            port,
            dir,
            auth: auth.map(|(u, p)| (u.to_owned(), p.to_owned())),
            tls,
        }
    }

    /// `TICKERTAPE_SMTP_URL` for it, credentials URL-encoded: `smtps://`
    /// for implicit TLS, else `smtp://` (STARTTLS when offered).
    pub fn url(&self) -> String {
        let enc = |s: &str| {
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        let scheme = match self.tls.as_ref().map(|t| t.mode) {
            Some(TlsMode::Implicit) => "smtps",
            _ => "smtp",
        };
        match &self.auth {
            Some((u, p)) => format!("{scheme}://{}:{}@127.0.0.1:{}", enc(u), enc(p), self.port),
            None => format!("{scheme}://127.0.0.1:{}", self.port),
        }
    }

    /// [`Self::url`], allowing AUTH in the clear when it takes AUTH
    /// without TLS (a relay on this host).
    pub fn url_for_local_relay(&self) -> String {
        match (&self.auth, &self.tls) {
            (Some(_), None) => format!("{}?auth_without_tls=true", self.url()),
            _ => self.url(),
        }
    }

    /// The AUTH commands it was sent, right or wrong, each with the TLS
    /// version of its connection (null: in the clear).
    pub fn auth_attempts(&self) -> Vec<Value> {
        match std::fs::read_to_string(self.dir.path().join("auth-attempts.jsonl")) {
            Ok(lines) => lines
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("the sink's AUTH log: {e}"),
        }
    }

    /// The messages received so far, in order.
    pub fn received(&self) -> Vec<Value> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect()
    }

    /// Waits until `n` messages are in (at most 30 s).
    pub async fn wait_for(&self, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} of {n} messages arrived: {got:#?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Email settings that send through `sink`, checking every 50 ms.
/// A sink with credentials and no TLS is a local relay: the URL says that
/// AUTH may go in the clear.
pub fn send_through(settings: &mut Settings, sink: &SmtpSink) {
    settings.email.smtp_url = Some(sink.url_for_local_relay().into());
    settings.email.smtp_from = Some("Tickertape <stats@tickertape.test>".into());
    settings.email.email_check_ms = 50;
}

fn header<'a>(message: &'a Value, name: &str) -> Option<&'a str> {
    message["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0].as_str().unwrap().eq_ignore_ascii_case(name))
        .map(|h| h[1].as_str().unwrap())
}

/// The value of a first-line figure in the text part ("Views: 1,234
/// (+5.0%; before: 1,175)"), and its value before.
pub fn figure(text: &str, name: &str) -> (String, String) {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} line in {text}"));
    let rest = &line[name.len() + 2..];
    let (value, tail) = rest.split_once(" (").unwrap();
    let before = tail
        .rsplit_once("before: ")
        .unwrap()
        .1
        .trim_end_matches(')');
    (value.replace(',', ""), before.replace(',', ""))
}

/// The rows of a top list in the text part ("Top pages"), as (name,
/// views).
fn top_list(text: &str, title: &str) -> Vec<(String, i64)> {
    text.split(&format!("\n{title}\n"))
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter(|l| l.trim() != "(none)")
        .map(|l| {
            let (n, name) = l.trim().split_once("  ").unwrap();
            (name.trim().to_owned(), n.replace(',', "").parse().unwrap())
        })
        .collect()
}

fn link_after(text: &str, marker: &str) -> String {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in {text}"))
        + marker.len();
    text[at..].split_whitespace().next().unwrap().to_owned()
}

pub fn n(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        v => v.as_i64().unwrap().to_string(),
    }
}

/// Views over two weeks from the pixel (so they have visits, visitors
/// and sources), at their own times on the app's clock.
pub async fn traffic(app: &TestApp, site: &str) {
    let visits = [
        // The week of 16 to 22 November 2026.
        (
            Utc.with_ymd_and_hms(2026, 11, 16, 9, 0, 0).unwrap(),
            "/",
            Some("news.ycombinator.com"),
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 16, 9, 3, 0).unwrap(),
            "/blog/hello",
            None,
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 18, 14, 0, 0).unwrap(),
            "/blog/hello",
            Some("google.com"),
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 20, 20, 0, 0).unwrap(),
            "/",
            None,
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 20, 20, 1, 0).unwrap(),
            "/about",
            None,
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 22, 8, 0, 0).unwrap(),
            "/blog/hello",
            Some("google.com"),
        ),
        // The week before.
        (
            Utc.with_ymd_and_hms(2026, 11, 10, 9, 0, 0).unwrap(),
            "/",
            None,
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 12, 9, 0, 0).unwrap(),
            "/about",
            Some("google.com"),
        ),
    ];
    for (at, page, source) in visits {
        app.clock.set(at);
        let referrer = source.map_or(String::new(), |s| format!("&ref=https://{s}/"));
        let r = app
            .pixel(&format!("site={site}&page={page}{referrer}"))
            .await;
        assert_eq!(r.status(), 200, "{page} at {at}");
    }
    app.settle().await;
}

async fn subscribe_form(login: &Login, site: &str, address: &str, schedule: &str) {
    let r = login
        .post(
            &format!("/sites/{site}/email/subscriptions"),
            &[
                ("csrf", &login.csrf),
                ("address", address),
                ("schedule", schedule),
            ],
        )
        .await;
    assert_eq!(r.status(), 303, "{address} {schedule} subscribed");
}

/// The status of a GET with `token`.
async fn get_status(app: &TestApp, token: &str, path: &str) -> u16 {
    app.http
        .get(format!("{}{path}", app.address))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn subscribe_api(
    app: &TestApp,
    token: &str,
    site: &str,
    address: &str,
    schedule: &str,
) -> (u16, Value) {
    let r = app
        .http
        .post(format!(
            "{}/api/v1/sites/{site}/email/subscriptions",
            app.address
        ))
        .header("authorization", format!("Bearer {token}"))
        .json(&serde_json::json!({"address": address, "schedule": schedule}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
    let body = r.text().await.unwrap();
    crate::openapi::check(
        "POST",
        &format!("/api/v1/sites/{site}/email/subscriptions"),
        status,
        &content_type,
        &body,
    );
    (status, serde_json::from_str(&body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weekly_report_equals_the_dashboard_and_unsubscribes_with_one_click() {
    let sink = SmtpSink::start(Some(("tickertape", "p@ss w/rd")), 0).await;
    let app = spawn_app_with(|s| send_through(s, &sink)).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("mail.test", &[]).await;
    let other = app.add_site("other.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    app.set_owners(&other, &[owner.id]).await;
    let id = site.id.to_string();
    traffic(&app, &id).await;
    // Two purchases inside the week's visits, one with a plan, and goals
    // on them: the report has a Goals section with their revenue.
    use tickertape::domain::Goal;
    for goal in [
        Goal::parse("event", "Purchase").unwrap(),
        Goal::parse_event_with("Purchase", "plan", "pro").unwrap(),
    ] {
        tickertape::storage::sites::add_goal(&app.store, &site.id, &goal)
            .await
            .unwrap();
    }
    app.ingest.directory.reload(&app.store).await.unwrap();
    for (at, page, extra) in [
        (
            Utc.with_ymd_and_hms(2026, 11, 16, 9, 3, 30).unwrap(),
            "/blog/hello",
            r#"&revenue={"amount":5,"currency":"USD"}"#,
        ),
        (
            Utc.with_ymd_and_hms(2026, 11, 20, 20, 1, 30).unwrap(),
            "/about",
            r#"&revenue={"amount":"19.99","currency":"EUR"}&props={"plan":"pro"}"#,
        ),
    ] {
        app.clock.set(at);
        let extra = extra
            .replace('{', "%7B")
            .replace('}', "%7D")
            .replace('"', "%22");
        let r = app
            .pixel(&format!("site={id}&page={page}&e=Purchase{extra}"))
            .await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;

    // Subscribed on Sunday 22 November: one by the page, one by the API.
    app.clock.set(t0());
    let login = app.login("owner@example.com").await;
    subscribe_form(&login, &id, "Ada@Example.com", "weekly").await;
    // A token made to read may not see or change who gets mail.
    let reader = create_token(&login, "reads", None).await;
    let (status, refused) = subscribe_api(&app, &reader, &id, "eve@example.com", "weekly").await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (403, Some("token_read_only")),
        "{refused}"
    );
    let listed = get_status(
        &app,
        &reader,
        &format!("/api/v1/sites/{id}/email/subscriptions"),
    )
    .await;
    assert_eq!(listed, 403, "a reading token lists no subscriber");
    let token = create_email_token(&login, "mail").await;
    let (_, list) = login.text("/account/tokens").await;
    assert!(
        list.contains("<td data-label=\"May\">read; manage email subscribers</td>")
            && list.contains("<td data-label=\"May\">read</td>"),
        "the list says which token may manage subscribers: {list}"
    );
    let (status, created) = subscribe_api(&app, &token, &id, "bob@example.com", "weekly").await;
    assert_eq!(status, 201, "{created}");
    let (status, again) = subscribe_api(&app, &token, &id, "bob@example.com", "weekly").await;
    assert_eq!(
        (status, &again["id"]),
        (200, &created["id"]),
        "subscribing twice is one subscription"
    );
    let page = login.text(&format!("/sites/{id}/email")).await.1;
    assert!(
        page.contains("ada@example.com") && page.contains("bob@example.com"),
        "{page}"
    );
    // Neither address is the owner's own: each gets a confirmation, and
    // then nothing during the week they subscribed in.
    let asked = sink.wait_for(2).await;
    for m in &asked {
        let subject = m["subject"].as_str().unwrap();
        assert!(subject.starts_with("Confirm email from"), "{subject}");
        let link = link_after(m["text"].as_str().unwrap(), "To confirm, open this link:\n");
        let r = reqwest::Client::new().post(&link).send().await.unwrap();
        assert_eq!(r.status(), 200, "{link}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.received().len(), 2);

    // Monday 23 November, just after midnight (UTC): the week's report.
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 30).unwrap());
    let got = sink.wait_for(4).await.split_off(2);
    let mut recipients: Vec<&str> = got
        .iter()
        .map(|m| m["rcptTos"][0].as_str().unwrap())
        .collect();
    recipients.sort();
    assert_eq!(recipients, ["ada@example.com", "bob@example.com"]);
    let ada = got
        .iter()
        .find(|m| m["rcptTos"][0] == "ada@example.com")
        .unwrap();
    assert_eq!(
        ada["rcptTos"].as_array().unwrap().len(),
        1,
        "one recipient per message"
    );
    assert_eq!(
        ada["authenticatedAs"], "tickertape",
        "AUTH with the URL's user"
    );
    assert_eq!(ada["mailFrom"], "stats@tickertape.test");
    assert_eq!(ada["contentType"], "multipart/alternative");
    let subject = ada["subject"].as_str().unwrap();
    assert!(
        subject.starts_with("mail.test: 16 November – 22 November 2026"),
        "{subject}"
    );
    let text = ada["text"].as_str().expect("a plain-text part");
    let html = ada["html"].as_str().expect("an HTML part");

    // The figures are the API's (the dashboard's numbers) for that week
    // and the week before.
    let api = |range: &'static str| {
        let (app, token, id) = (&app, &token, &id);
        async move {
            get(
                app,
                token,
                &format!("/api/v1/sites/{id}/visits?range=custom&{range}"),
            )
            .await
            .json
        }
    };
    let week = api("from=2026-11-16&to=2026-11-22").await;
    let before = api("from=2026-11-09&to=2026-11-15").await;
    assert_eq!(week["views"], 6, "{week}");
    assert_eq!(
        figure(text, "Views"),
        (n(&week["views"]), n(&before["views"]))
    );
    assert_eq!(
        figure(text, "Visitors"),
        (n(&week["visitors"]), n(&before["visitors"]))
    );
    assert_eq!(
        figure(text, "Visits"),
        (n(&week["visits"]), n(&before["visits"]))
    );
    let rate = |v: &Value| format!("{:.0}%", v.as_f64().unwrap() * 100.0);
    assert_eq!(
        figure(text, "Bounce rate"),
        (rate(&week["bounceRate"]), rate(&before["bounceRate"]))
    );
    let pages = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/pages?range=custom&from=2026-11-16&to=2026-11-22"),
    )
    .await
    .json;
    let api_pages: Vec<(String, i64)> = pages["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["views"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(top_list(text, "Top pages"), api_pages);
    let sources = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/sources?range=custom&from=2026-11-16&to=2026-11-22"),
    )
    .await
    .json;
    let api_sources: Vec<(String, i64)> = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["source"].as_str().unwrap().to_owned(),
                p["views"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(top_list(text, "Top sources"), api_sources);
    assert_eq!(api_sources[0], ("google.com".to_owned(), 2));
    assert!(text.contains("\nTop countries\n"), "{text}");
    // Each goal as the API's goals say it for the week: the revenue
    // goal's sums, and the property goal's figure from the visit store.
    let goals = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/goals?range=custom&from=2026-11-16&to=2026-11-22"),
    )
    .await
    .json;
    let with_plan = goals["goals"][1]["conversions"].as_i64().unwrap();
    assert_eq!(goals["goals"][1]["property"]["value"], "pro", "{goals}");
    let plan_revenue = if with_plan > 0 {
        "  (revenue: 19.99 EUR)"
    } else {
        ""
    };
    assert!(
        text.contains(&format!(
            "\nGoals (conversions)\n          2  Purchase  (revenue: 19.99 EUR, 5.00 USD)\n{with_plan:>11}  Purchase with plan = pro{plan_revenue}\n"
        )),
        "{text}"
    );
    assert!(
        html.contains("id=\"goals\"") && html.contains("19.99 EUR<br>5.00 USD"),
        "{html}"
    );

    // Both parts say the same; the HTML loads nothing from anywhere.
    assert!(
        html.contains("/blog/hello") && html.contains("google.com"),
        "{html}"
    );
    for remote in ["<img", "<link", "<script", "src=", "url(", "@import"] {
        assert!(!html.contains(remote), "the HTML has {remote}: {html}");
    }
    let dashboard = link_after(text, "Dashboard for this period: ");
    assert_eq!(
        dashboard,
        format!(
            "{}/sites/{id}?range=custom&from=2026-11-16&to=2026-11-22",
            app.address
        )
    );
    assert!(html.contains(&dashboard.replace('&', "&amp;")));
    let (status, shown) = login.text(dashboard.trim_start_matches(&app.address)).await;
    assert_eq!(status, 200);
    assert!(shown.contains("mail.test"));

    // One-click unsubscribe (RFC 8058): the headers, and the link.
    let link = link_after(text, "(one click, no login):\n");
    assert_eq!(
        header(ada, "List-Unsubscribe"),
        Some(format!("<{link}>").as_str())
    );
    assert_eq!(
        header(ada, "List-Unsubscribe-Post"),
        Some("List-Unsubscribe=One-Click")
    );
    let anonymous = reqwest::Client::new();
    // The link works for this address and site only.
    for forged in [
        link.replace("ada%40example.com", "bob%40example.com"),
        link.replace(&id, &other.id.to_string()),
        link.replace("token=", "token=0"),
    ] {
        let r = anonymous
            .post(&forged)
            .form(&[("List-Unsubscribe", "One-Click")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{forged}");
    }
    // Opening it asks first (a mail scanner opening links unsubscribes
    // nobody) …
    let r = anonymous.get(&link).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("id=\"unsubscribe\""));
    let listed = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/email/subscriptions"),
    )
    .await
    .json;
    assert_eq!(listed["subscriptions"].as_array().unwrap().len(), 2);
    // … and the one-click POST, without a login or a CSRF token, does it.
    let r = anonymous
        .post(&link)
        .form(&[("List-Unsubscribe", "One-Click")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("id=\"unsubscribed\""));
    let listed = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/email/subscriptions"),
    )
    .await
    .json;
    let left: Vec<&str> = listed["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["address"].as_str().unwrap())
        .collect();
    assert_eq!(
        left,
        ["bob@example.com"],
        "only that address, only that site"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_and_a_restart_send_each_report_once() {
    let sink = SmtpSink::start(None, 0).await;
    let a = spawn_app_with(|s| send_through(s, &sink)).await;
    let db = a.store.db().name().to_owned();
    let same_db = |s: &mut Settings| {
        send_through(s, &sink);
        s.database.name = db.clone();
    };
    let mut b = spawn_app_with(same_db).await;
    let site = a.add_site("twice.test", &[]).await;
    b.ingest.directory.reload(&b.store).await.unwrap();
    a.write_hits(&[(
        "twice.test/",
        Utc.with_ymd_and_hms(2026, 11, 22, 9, 0, 0).unwrap(),
    )])
    .await;
    // Subscribed on Sunday 22 November: nothing is due that day.
    let now = t0();
    for (address, schedule) in [
        ("ops@example.com", "daily"),
        ("ops@example.com", "weekly"),
        ("dev@example.com", "monthly"),
    ] {
        tickertape::storage::email::subscribe(
            &a.store,
            &site.id,
            &tickertape::domain::Recipient::parse(address).unwrap(),
            tickertape::domain::Schedule::parse(schedule).unwrap(),
            now,
            tickertape::storage::email::Consent::Given,
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(sink.received().is_empty());
    // Both instances reach Monday 23 November at once: a daily and a
    // weekly report are due (the monthly one on 1 December).
    let monday = Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 5).unwrap();
    a.clock.set(monday);
    b.clock.set(monday);
    sink.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = sink.received();
    let subjects: Vec<&str> = got.iter().map(|m| m["subject"].as_str().unwrap()).collect();
    assert_eq!(
        got.len(),
        2,
        "each once, whichever instance sent it: {subjects:?}"
    );
    assert!(
        subjects
            .iter()
            .any(|s| s.contains("Sunday 22 November 2026")),
        "{subjects:?}"
    );
    assert!(
        subjects
            .iter()
            .any(|s| s.contains("16 November – 22 November 2026")),
        "{subjects:?}"
    );

    // One stops and starts again later that day: nothing again.
    b.stop().await;
    // Not dropped: a test app drops its database when dropped.
    std::mem::forget(b);
    let c = spawn_app_with(same_db).await;
    c.clock.set(monday + TimeDelta::hours(9));
    a.clock.set(monday + TimeDelta::hours(9));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(sink.received().len(), 2, "nothing twice after a restart");
    // The next day brings the next daily report only. Tuesday 1
    // December: the monthly one, the week of 23 to 29 November and the
    // daily of 30 November (the days the clock skipped are not made up).
    c.clock.set(monday + TimeDelta::days(1));
    a.clock.set(monday + TimeDelta::days(1));
    sink.wait_for(3).await;
    let december = Utc.with_ymd_and_hms(2026, 12, 1, 6, 0, 0).unwrap();
    c.clock.set(december);
    a.clock.set(december);
    let got = sink.wait_for(6).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(sink.received().len(), 6);
    let mut last: Vec<&str> = got[3..]
        .iter()
        .map(|m| m["subject"].as_str().unwrap())
        .collect();
    last.sort();
    assert_eq!(
        last,
        [
            "twice.test: 23 November – 29 November 2026 — 0 views",
            "twice.test: Monday 30 November 2026 — 0 views",
            "twice.test: November 2026 — 1 view",
        ]
    );
    let records = tickertape::storage::email::for_site(&a.store, &site.id)
        .await
        .unwrap();
    assert_eq!(records.len(), 6);
    assert!(records
        .iter()
        .all(|r| r.state == tickertape::storage::email::SendState::Sent && r.attempts == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spike_alert_is_sent_once_per_episode() {
    let sink = SmtpSink::start(None, 0).await;
    let app = spawn_app_with(|s| send_through(s, &sink)).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("spike.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let id = site.id.to_string();
    let login = app.login("owner@example.com").await;
    subscribe_form(&login, &id, "owner@example.com", "alerts").await;
    // A refused rule names its field and saves nothing.
    let r = login
        .post(
            &format!("/sites/{id}/email/alerts"),
            &[
                ("csrf", &login.csrf),
                ("spike_views", "0"),
                ("spike_factor", ""),
                ("drop_hours", ""),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("id=\"spikeViews-error\""));
    let r = login
        .post(
            &format!("/sites/{id}/email/alerts"),
            &[
                ("csrf", &login.csrf),
                ("spike_views", "5"),
                ("spike_factor", ""),
                ("drop_hours", ""),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);

    // 5 views in an hour is no spike; the 6th is.
    let burst = |n: usize| {
        let (app, id) = (&app, &id);
        async move {
            for i in 0..n {
                let r = app.pixel(&format!("site={id}&page=/launch-{i}")).await;
                assert_eq!(r.status(), 200);
            }
            app.settle().await;
        }
    };
    burst(5).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(sink.received().is_empty(), "5 views are not above 5");
    burst(1).await;
    let got = sink.wait_for(1).await;
    assert_eq!(got[0]["rcptTos"][0], "owner@example.com");
    assert_eq!(
        got[0]["subject"],
        "Traffic spike on spike.test: 6 views in the last hour"
    );
    assert!(got[0]["html"].as_str().unwrap().contains("6 views"));
    // More views in the same episode: no second email.
    burst(3).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(sink.received().len(), 1, "once per episode");

    // Two quiet hours end the episode; the next spike is a new one.
    app.clock.advance(TimeDelta::hours(2));
    let episodes = app
        .store
        .db()
        .collection::<bson::Document>(tickertape::storage::email::EPISODES);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while episodes
        .find_one(bson::doc! {"open": false})
        .await
        .unwrap()
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the episode did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sink.received().len(), 1);
    // All at once, so the alert's count is not taken halfway.
    let now = app.clock.now();
    app.write_hits(&[("spike.test/again", now); 7]).await;
    let got = sink.wait_for(2).await;
    assert_eq!(
        got[1]["subject"],
        "Traffic spike on spike.test: 7 views in the last hour"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(sink.received().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_deliveries_are_retried_with_back_off_counted_and_shown() {
    // The sink refuses the first two messages for now (451).
    let sink = SmtpSink::start(None, 2).await;
    let app = spawn_app_with(|s| {
        send_through(s, &sink);
        s.email.email_retry_secs = 60;
    })
    .await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("retry.test", &[]).await;
    tickertape::storage::email::subscribe(
        &app.store,
        &site.id,
        &tickertape::domain::Recipient::parse("ops@example.com").unwrap(),
        tickertape::domain::Schedule::Daily,
        // Sunday: the first report due is Monday's.
        t0(),
        tickertape::storage::email::Consent::Given,
    )
    .await
    .unwrap();
    let failures = || async { app.metric("tickertape_email_attempt_failures_total").await };
    app.clock
        .set(Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 1).unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while failures().await < 1.0 {
        assert!(std::time::Instant::now() < deadline, "no failed attempt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Not again until its back-off (60 s on the app's clock) is over.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(failures().await, 1.0);
    app.clock.advance(TimeDelta::seconds(61));
    while failures().await < 2.0 {
        assert!(std::time::Instant::now() < deadline, "no second attempt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The second wait is four times longer.
    app.clock.advance(TimeDelta::seconds(200));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(sink.received().is_empty());
    app.clock.advance(TimeDelta::seconds(60));
    let got = sink.wait_for(1).await;
    assert!(got[0]["subject"]
        .as_str()
        .unwrap()
        .contains("Sunday 22 November 2026"));
    // Counted once the server's answer is in (just after the sink wrote it).
    while app.metric("tickertape_email_sent_total").await < 1.0 {
        assert!(std::time::Instant::now() < deadline, "not counted as sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(app.metric("tickertape_email_sent_total").await, 1.0);
    assert_eq!(app.metric("tickertape_email_retries_total").await, 2.0);
    assert_eq!(app.metric("tickertape_email_given_up_total").await, 0.0);
    assert_eq!(app.metric("tickertape_email_configured").await, 1.0);
    let records = tickertape::storage::email::for_site(&app.store, &site.id)
        .await
        .unwrap();
    assert_eq!((records.len(), records[0].attempts), (1, 3));

    // The system page says so.
    let admin = app.login("admin@example.com").await;
    let (status, page) = admin.text("/admin/system").await;
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("127.0.0.1:{}", sink.port)),
        "the server is named"
    );
    assert!(page.contains("1 sent, 2 failed attempts"), "{page}");
    assert!(page.contains("451"), "the last failure is shown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_report_sends_the_last_seven_days_now() {
    let sink = SmtpSink::start(Some(("cli", "s3cret%")), 0).await;
    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("cli.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    // The command reads the real clock: views of the last days.
    let now = Utc::now();
    let ago = |h: i64| now - TimeDelta::hours(h);
    let (a, b, c, old) = (ago(1), ago(30), ago(100), ago(24 * 8));
    app.write_hits(&[
        ("cli.test/", a, Some("google.com")),
        ("cli.test/", b, None),
        ("cli.test/docs", c, None),
        ("cli.test/docs", old, None),
    ])
    .await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args([
            "email",
            "send-report",
            "--site",
            "cli.test",
            "--period",
            "week",
            "--to",
            "me@example.com",
        ])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("TICKERTAPE_SMTP_URL", sink.url_for_local_relay())
        .env("TICKERTAPE_SMTP_FROM", "stats@tickertape.test")
        // No public URL: the links use the listen address, as `serve`
        // does, not a port of their own.
        .env_remove("TICKERTAPE_PUBLIC_URL")
        .env(
            "TICKERTAPE_LISTEN",
            app.address.trim_start_matches("http://"),
        )
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(
        !said.contains("s3cret"),
        "the password is never shown: {said}"
    );
    let got = sink.wait_for(1).await;
    assert_eq!(got[0]["rcptTos"][0], "me@example.com");
    assert_eq!(got[0]["authenticatedAs"], "cli");
    let text = got[0]["text"].as_str().unwrap();
    assert_eq!(figure(text, "Views").0, "3", "the last 7 days only: {text}");
    // The same period on the API (the link's bounds) says the same.
    let dashboard = link_after(text, "Dashboard for this period: ");
    assert!(
        dashboard.starts_with(&format!("{}/sites/{}?", app.address, site.id)),
        "{dashboard}"
    );
    let html = got[0]["html"].as_str().unwrap();
    // The zone said once in each part; a viewport for phones; a
    // Message-ID; a footer that speaks of no subscription.
    assert_eq!(text.matches("(UTC)").count(), 1, "{text}");
    assert_eq!(html.matches("(UTC)").count(), 1, "{html}");
    assert!(
        html.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"),
        "{html}"
    );
    let id = header(&got[0], "Message-ID").unwrap_or_default();
    assert!(
        id.starts_with('<') && id.ends_with("@tickertape.test>"),
        "{id:?}"
    );
    for part in [text, html] {
        assert!(part.contains("sent once, by command"), "{part}");
        assert!(!part.contains("is subscribed"), "{part}");
    }
    let query = dashboard.split_once('?').unwrap().1;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "cli", None).await;
    let visits = get(
        &app,
        &token,
        &format!("/api/v1/sites/{}/visits?{query}", site.id),
    )
    .await
    .json;
    assert_eq!(figure(text, "Views").0, n(&visits["views"]), "{query}");
    assert_eq!(
        top_list(text, "Top pages"),
        [("/".to_owned(), 2), ("/docs".to_owned(), 1)]
    );
    // Nothing is recorded: it belongs to no schedule.
    assert!(tickertape::storage::email::for_site(&app.store, &site.id)
        .await
        .unwrap()
        .is_empty());
}

/// The API's subscription answers, each checked against the document (the
/// json_api test collects every documented answer through here); `reader`
/// is a token of the site's owner made only to read.
pub async fn subscription_answers(
    app: &TestApp,
    token: &str,
    other: &str,
    reader: &str,
    site: &str,
) {
    let base = format!("/api/v1/sites/{site}/email/subscriptions");
    let body = serde_json::json!({"address": "eve@example.com", "schedule": "weekly"});
    for (method, path, body) in [
        ("GET", base.clone(), None),
        ("POST", base.clone(), Some(&body)),
        ("DELETE", format!("{base}/{}", uuid::Uuid::nil()), None),
    ] {
        let r = call_with_body(app, method, Some(reader), &path, body).await;
        assert_eq!(
            (r.status, r.json["error"]["code"].as_str()),
            (403, Some("token_read_only")),
            "{method} {path}"
        );
    }
    let base = format!("/api/v1/sites/{site}/email/subscriptions");
    // The document's pattern is the parser's rule.
    assert_eq!(
        crate::openapi::document()
            .pointer("/components/schemas/NewSubscription/properties/address/pattern")
            .and_then(Value::as_str),
        Some(tickertape::domain::RECIPIENT_PATTERN)
    );
    let body = serde_json::json!({"address": "doc@example.com", "schedule": "monthly"});
    let created = call_with_body(app, "POST", Some(token), &base, Some(&body)).await;
    assert_eq!(created.status, 201);
    assert_eq!(
        call_with_body(app, "POST", Some(token), &base, Some(&body))
            .await
            .status,
        200
    );
    for bad in [
        serde_json::json!({"address": " doc@example.com", "schedule": "monthly"}),
        serde_json::json!({"address": "doc@localhost", "schedule": "monthly"}),
        serde_json::json!({"address": "doc@example.com", "schedule": "yearly"}),
        serde_json::json!({"address": "doc@example.com"}),
        serde_json::json!({"address": "doc@example.com", "schedule": "daily", "extra": 1}),
    ] {
        let r = call_with_body(app, "POST", Some(token), &base, Some(&bad)).await;
        assert_eq!(r.status, 400, "{bad}");
    }
    assert_eq!(
        call_with_body(app, "GET", Some(token), &base, None)
            .await
            .status,
        200
    );
    assert_eq!(
        call_with_body(app, "GET", None, &base, None).await.status,
        401
    );
    assert_eq!(
        call_with_body(app, "GET", Some(other), &base, None)
            .await
            .status,
        404
    );
    assert_eq!(
        call_with_body(app, "PUT", Some(token), &base, None)
            .await
            .status,
        405
    );
    let one = format!("{base}/{}", created.json["id"].as_str().unwrap());
    for (who, status) in [(None, 401), (Some(other), 404)] {
        let r = call_with_body(app, "POST", who, &base, Some(&body)).await;
        assert_eq!(r.status, status);
    }
    // Only DELETE here (no GET operation to document the 405 under).
    let r = app
        .http
        .get(format!("{}{one}", app.address))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), r.headers()["allow"].to_str().unwrap()),
        (405, "DELETE")
    );
    assert_eq!(
        call_with_body(app, "DELETE", Some(other), &one, None)
            .await
            .status,
        404
    );
    assert_eq!(
        call_with_body(app, "DELETE", None, &one, None).await.status,
        401
    );
    assert_eq!(
        call_with_body(app, "DELETE", Some(token), &one, None)
            .await
            .status,
        200
    );
    let gone = call_with_body(app, "DELETE", Some(token), &one, None).await;
    assert_eq!(
        (gone.status, gone.json["error"]["code"].as_str()),
        (404, Some("subscription_not_found"))
    );
}

/// `method path` with an optional JSON body, checked against the document.
async fn call_with_body(
    app: &TestApp,
    method: &str,
    token: Option<&str>,
    path: &str,
    body: Option<&Value>,
) -> crate::json_api::Answer {
    let mut request = app.http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{}{path}", app.address),
    );
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let content_type = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    crate::openapi::check(method, path, status, &content_type, &text);
    crate::json_api::Answer {
        status,
        json: serde_json::from_str(&text).unwrap(),
        headers,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_alert_comes_when_usual_hours_pass_without_a_view() {
    let sink = SmtpSink::start(None, 0).await;
    let app = spawn_app_with(|s| send_through(s, &sink)).await;
    let site = app.add_site("drop.test", &[]).await;
    // A view at 09:00 on each of the 7 days before; none today.
    let days: Vec<_> = (1..=7)
        .map(|d| Utc.with_ymd_and_hms(2026, 11, 22 - d, 9, 0, 0).unwrap())
        .collect();
    let hits: Vec<(&str, chrono::DateTime<Utc>)> =
        days.iter().map(|t| ("drop.test/", *t)).collect();
    app.write_hits(&hits).await;
    tickertape::storage::email::set_alert_rules(
        &app.store,
        &site.id,
        tickertape::domain::AlertRules::parse("", "", "2").unwrap(),
    )
    .await
    .unwrap();
    tickertape::storage::email::subscribe(
        &app.store,
        &site.id,
        &tickertape::domain::Recipient::parse("ops@example.com").unwrap(),
        tickertape::domain::Schedule::Alerts,
        t0(),
        tickertape::storage::email::Consent::Given,
    )
    .await
    .unwrap();
    // 10:01 on Sunday: 08:02 to 10:02 had a view on every day before.
    let got = sink.wait_for(1).await;
    assert_eq!(
        got[0]["subject"],
        "Traffic drop on drop.test: no views for 2 hours"
    );
    assert!(got[0]["text"].as_str().unwrap().contains("usually have 1"));
    // Still none: the same episode, no second email.
    app.clock.advance(TimeDelta::minutes(30));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(sink.received().len(), 1);
}

/// Waits while the sender runs some rounds (it checks every 50 ms here):
/// for what must not happen, there is no condition to wait for.
async fn some_rounds() {
    tokio::time::sleep(Duration::from_millis(600)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_an_alert_rule_off_and_on_keeps_its_episode() {
    use tickertape::domain::AlertRules;
    use tickertape::storage::email::set_alert_rules;
    let sink = SmtpSink::start(None, 0).await;
    let app = spawn_app_with(|s| send_through(s, &sink)).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("onoff.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let id = site.id.to_string();
    let login = app.login("owner@example.com").await;
    subscribe_form(&login, &id, "owner@example.com", "alerts").await;
    let rules = |views: &str| AlertRules::parse(views, "", "").unwrap();
    set_alert_rules(&app.store, &site.id, rules("5"))
        .await
        .unwrap();
    let now = app.clock.now();
    app.write_hits(&[("onoff.test/launch", now); 6]).await;
    let got = sink.wait_for(1).await;
    assert_eq!(
        got[0]["subject"],
        "Traffic spike on onoff.test: 6 views in the last hour"
    );
    // Off and on three times, a minute apart (an episode opened again
    // would start at another minute, and so be another email), then
    // edited: the same spike, the same episode, no second email.
    for _ in 0..3 {
        set_alert_rules(&app.store, &site.id, AlertRules::default())
            .await
            .unwrap();
        app.clock.advance(TimeDelta::minutes(1));
        some_rounds().await;
        set_alert_rules(&app.store, &site.id, rules("5"))
            .await
            .unwrap();
        app.clock.advance(TimeDelta::minutes(1));
        some_rounds().await;
    }
    set_alert_rules(&app.store, &site.id, rules("4"))
        .await
        .unwrap();
    some_rounds().await;
    // Edited so that it no longer holds, and back: still that spike.
    set_alert_rules(&app.store, &site.id, rules("100"))
        .await
        .unwrap();
    app.clock.advance(TimeDelta::minutes(1));
    some_rounds().await;
    set_alert_rules(&app.store, &site.id, rules("5"))
        .await
        .unwrap();
    some_rounds().await;
    assert_eq!(sink.received().len(), 1, "one email for one spike");

    // The spike over (two quiet hours), the next one is a new episode.
    app.clock.advance(TimeDelta::hours(2));
    let episodes = app
        .store
        .db()
        .collection::<bson::Document>(tickertape::storage::email::EPISODES);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while episodes
        .find_one(bson::doc! {"open": false})
        .await
        .unwrap()
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the episode did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let now = app.clock.now();
    app.write_hits(&[("onoff.test/again", now); 7]).await;
    let got = sink.wait_for(2).await;
    assert_eq!(
        got[1]["subject"],
        "Traffic spike on onoff.test: 7 views in the last hour"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_not_the_owners_gets_only_a_confirmation_until_it_confirms() {
    let sink = SmtpSink::start(None, 0).await;
    let app = spawn_app_with(|s| send_through(s, &sink)).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("consent.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let id = site.id.to_string();
    let login = app.login("owner@example.com").await;
    subscribe_form(&login, &id, "Owner@Example.com", "alerts").await;
    subscribe_form(&login, &id, "ops@example.com", "alerts").await;
    // By the API too: the token's owner is who subscribes.
    let token = create_email_token(&login, "mail").await;
    let (status, created) = subscribe_api(&app, &token, &id, "api@example.com", "alerts").await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["confirmed"], false, "{created}");
    let page = login.text(&format!("/sites/{id}/email")).await.1;
    assert!(page.contains("waiting for confirmation"), "{page}");
    tickertape::storage::email::set_alert_rules(
        &app.store,
        &site.id,
        tickertape::domain::AlertRules::parse("5", "", "").unwrap(),
    )
    .await
    .unwrap();
    let now = app.clock.now();
    app.write_hits(&[("consent.test/launch", now); 6]).await;
    // The owner's own address gets the alert; the others one confirmation
    // each, and nothing else.
    let got = sink.wait_for(3).await;
    some_rounds().await;
    let got_now = sink.received();
    assert_eq!(got_now.len(), 3, "{got_now:#?}");
    let to = |m: &Value| m["rcptTos"][0].as_str().unwrap().to_owned();
    let owners = got.iter().find(|m| to(m) == "owner@example.com").unwrap();
    assert_eq!(
        owners["subject"],
        "Traffic spike on consent.test: 6 views in the last hour"
    );
    let ops = got.iter().find(|m| to(m) == "ops@example.com").unwrap();
    assert_eq!(
        ops["subject"],
        "Confirm email from consent.test's statistics"
    );
    let text = ops["text"].as_str().unwrap();
    assert!(!text.contains("views"), "no figure before consent: {text}");
    let link = link_after(text, "To confirm, open this link:\n");
    let anonymous = reqwest::Client::new();
    // A forged or another address's link confirms nothing.
    for forged in [
        link.replace("ops%40example.com", "api%40example.com"),
        link.replace("token=", "token=0"),
    ] {
        let r = anonymous.post(&forged).send().await.unwrap();
        assert_eq!(r.status(), 404, "{forged}");
    }
    // Opening it asks first (a mail scanner confirms nobody) …
    let r = anonymous.get(&link).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("id=\"confirm\""));
    let listed = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/email/subscriptions"),
    )
    .await
    .json;
    let confirmed = |listed: &Value, address: &str| {
        listed["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["address"] == address)
            .unwrap()["confirmed"]
            .clone()
    };
    assert_eq!(confirmed(&listed, "ops@example.com"), false);
    assert_eq!(confirmed(&listed, "owner@example.com"), true);
    // … and the button confirms.
    let r = anonymous.post(&link).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("id=\"confirmed\""));
    let listed = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/email/subscriptions"),
    )
    .await
    .json;
    assert_eq!(confirmed(&listed, "ops@example.com"), true);
    assert_eq!(confirmed(&listed, "api@example.com"), false);

    // Confirmed, it receives what a new subscriber would: the alert of
    // the spike going on.
    let got = sink.wait_for(4).await;
    assert_eq!(to(&got[3]), "ops@example.com");
    assert_eq!(
        got[3]["subject"],
        "Traffic spike on consent.test: 6 views in the last hour"
    );
    // The next spike reaches both confirmed addresses, not the third.
    app.clock.advance(TimeDelta::hours(2));
    let episodes = app
        .store
        .db()
        .collection::<bson::Document>(tickertape::storage::email::EPISODES);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while episodes
        .find_one(bson::doc! {"open": false})
        .await
        .unwrap()
        .is_none()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the episode did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let now = app.clock.now();
    app.write_hits(&[("consent.test/again", now); 7]).await;
    let got = sink.wait_for(6).await;
    some_rounds().await;
    assert_eq!(sink.received().len(), 6);
    let mut alerted: Vec<String> = got[4..].iter().map(to).collect();
    alerted.sort();
    assert_eq!(alerted, ["ops@example.com", "owner@example.com"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_concurrent_subscriptions_do_not_pass_the_cap() {
    use tickertape::domain::{Recipient, Schedule};
    use tickertape::storage::email::{list_for_site, subscribe, Consent, MAX_PER_SITE};
    let app = spawn_app().await;
    let site = app.add_site("cap.test", &[]).await;
    // 490 there already, written as an older version did (no counter).
    let docs: Vec<bson::Document> = (0..MAX_PER_SITE - 10)
        .map(|i| {
            bson::doc! {
                "_id": bson::Uuid::new(),
                "siteId": bson::Uuid::from(site.id.as_uuid()),
                "address": format!("reader{i}@example.com"),
                "schedule": "weekly",
                "createdAt": bson::DateTime::now(),
                "confirmed": true,
            }
        })
        .collect();
    app.store
        .db()
        .collection::<bson::Document>(tickertape::storage::email::SUBSCRIPTIONS)
        .insert_many(docs)
        .await
        .unwrap();
    for round in 0..2 {
        let attempts = (0..30).map(|i| {
            let (store, site) = (app.store.clone(), site.id);
            tokio::spawn(async move {
                let address = Recipient::parse(&format!("new{round}-{i}@example.com")).unwrap();
                subscribe(
                    &store,
                    &site,
                    &address,
                    Schedule::Daily,
                    Utc::now(),
                    Consent::Given,
                )
                .await
            })
        });
        let results = futures::future::join_all(attempts).await;
        let made = results
            .iter()
            .filter(|r| matches!(r.as_ref().unwrap(), Ok((_, true))))
            .count();
        let all = list_for_site(&app.store, &site.id).await.unwrap().len() as u64;
        assert_eq!(all, MAX_PER_SITE, "round {round}");
        assert_eq!(made, if round == 0 { 10 } else { 0 }, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_see_neither_the_relay_nor_its_credentials_and_admins_the_host_only() {
    let sink = SmtpSink::start(Some(("relay-user-7", "pw-7")), 0).await;
    let app = spawn_app_with(|s| send_through(s, &sink)).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("quiet.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let login = app.login("owner@example.com").await;
    let (status, page) = login.text(&format!("/sites/{}/email", site.id)).await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"sending\""), "{page}");
    for secret in ["relay-user-7", "pw-7", "127.0.0.1", &sink.port.to_string()] {
        assert!(
            !page.contains(secret),
            "the owner's page shows {secret}: {page}"
        );
    }
    let admin = app.login("admin@example.com").await;
    let (_, system) = admin.text("/admin/system").await;
    assert!(
        system.contains(&format!("127.0.0.1:{}", sink.port)),
        "{system}"
    );
    for secret in ["relay-user-7", "pw-7"] {
        assert!(!system.contains(secret), "the system page shows {secret}");
    }
}

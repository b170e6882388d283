//! Email over TLS against the real aiosmtpd sink (tests/api/email.rs):
//! STARTTLS required and TLS from the first byte (`smtps://`), with a
//! throwaway certificate authority made here by the openssl CLI and given
//! to the app as `TICKERTAPE_SMTP_CA_FILE`. A server that offers no
//! STARTTLS, or shows a certificate another authority signed, gets no
//! email and no password.

use chrono::{TimeZone, Utc};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tickertape::accounts::Role;
use tickertape::domain::{Recipient, Schedule};
use tickertape::settings::Settings;
use tickertape::storage::email::{for_site, subscribe, Consent, SendState};
use tickertape::storage::sites::Site;

use crate::email::{figure, n, send_through, traffic, SinkTls, SmtpSink, TlsMode};
use crate::helpers::*;
use crate::json_api::{create_token, get};

/// A certificate authority made for one test, and a server certificate it
/// signed for `localhost` and 127.0.0.1 (where the sink listens); gone
/// with the test.
struct TestCa {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "openssl cannot be run ({e}): run `make test-deps` (it installs Debian's openssl)"
            )
        });
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let subject = format!("/CN={name}");
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            d,
            &[
                &["req", "-x509"][..],
                &key,
                &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"],
                &["-subj", &subject],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign"],
            ]
            .concat(),
        );
        openssl(
            d,
            &[
                &["req"][..],
                &key,
                &["-keyout", "server.key", "-out", "server.csr"],
                &["-subj", "/CN=localhost"],
            ]
            .concat(),
        );
        std::fs::write(
            d.join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        );
        TestCa { dir }
    }

    /// The authority's own certificate: what `TICKERTAPE_SMTP_CA_FILE`
    /// names.
    fn certificate(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A sink's TLS with the server certificate this authority signed.
    fn server(&self, mode: TlsMode) -> SinkTls {
        SinkTls {
            mode,
            cert: self.dir.path().join("server.pem"),
            key: self.dir.path().join("server.key"),
        }
    }
}

/// Sending through `url` (the sink's, perhaps with `?tls=required`),
/// trusting `ca` besides the system's roots.
fn send_over_tls(settings: &mut Settings, sink: &SmtpSink, url: &str, ca: &Path) {
    send_through(settings, sink);
    settings.email.smtp_url = Some(url.to_owned().into());
    settings.email.smtp_ca_file = Some(ca.to_owned());
}

async fn wait_for_metric(app: &TestApp, name: &str, at_least: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while app.metric(name).await < at_least {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} did not reach {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A site with a subscription whose first report is due on Monday 23
/// November 2026 (subscribed on Sunday).
async fn site_with_a_subscriber(app: &TestApp, name: &str, schedule: Schedule) -> Site {
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site(name, &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    subscribe(
        &app.store,
        &site.id,
        &Recipient::parse("ada@example.com").unwrap(),
        schedule,
        t0(),
        Consent::Given,
    )
    .await
    .unwrap();
    site
}

fn monday() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 30).unwrap()
}

/// The week's report goes through a sink speaking TLS as `mode` says,
/// logged in over TLS, and says what the API says.
async fn a_weekly_report_arrives_over(mode: TlsMode, query: &str) {
    let ca = TestCa::new("Tickertape test CA");
    let sink = SmtpSink::start_with(Some(("relay", "pa:ss w/rd%")), 0, Some(ca.server(mode))).await;
    let url = format!("{}{query}", sink.url());
    let app = spawn_app_with(|s| send_over_tls(s, &sink, &url, &ca.certificate())).await;
    let id = site_with_a_subscriber(&app, "tls.test", Schedule::Weekly)
        .await
        .id
        .to_string();
    traffic(&app, &id).await;
    app.clock.set(monday());
    let got = sink.wait_for(1).await;
    let m = &got[0];
    assert_eq!(m["rcptTos"][0], "ada@example.com");
    assert!(
        m["tls"].as_str().is_some_and(|v| v.starts_with("TLSv1.")),
        "received over TLS: {m}"
    );
    assert_eq!(m["authenticatedAs"], "relay");
    let attempts = sink.auth_attempts();
    assert!(
        !attempts.is_empty() && attempts.iter().all(|a| a["tls"].is_string()),
        "AUTH only inside TLS: {attempts:?}"
    );
    let text = m["text"].as_str().expect("a plain-text part");
    assert!(
        m["html"].as_str().is_some_and(|h| h.contains("tls.test")),
        "{m}"
    );

    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "tls", None).await;
    let visits = |range: &'static str| {
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
    let week: Value = visits("from=2026-11-16&to=2026-11-22").await;
    let before: Value = visits("from=2026-11-09&to=2026-11-15").await;
    assert_eq!(week["views"], 6, "{week}");
    for (line, field) in [
        ("Views", "views"),
        ("Visitors", "visitors"),
        ("Visits", "visits"),
    ] {
        assert_eq!(
            figure(text, line),
            (n(&week[field]), n(&before[field])),
            "{line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_over_required_starttls_arrives_with_its_figures() {
    a_weekly_report_arrives_over(TlsMode::StartTls, "?tls=required").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_over_smtps_arrives_with_its_figures() {
    a_weekly_report_arrives_over(TlsMode::Implicit, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_starttls_sends_nothing_to_a_server_without_it_and_retries() {
    // The authority is trusted: what is missing is STARTTLS itself.
    let ca = TestCa::new("Tickertape test CA");
    let sink = SmtpSink::start(Some(("relay", "not-in-the-clear")), 0).await;
    let url = format!("{}?tls=required", sink.url());
    let app = spawn_app_with(|s| send_over_tls(s, &sink, &url, &ca.certificate())).await;
    let site = site_with_a_subscriber(&app, "plain.test", Schedule::Daily).await;
    app.clock.set(monday());
    // The retry is counted last, once it is stored.
    wait_for_metric(&app, "tickertape_email_retries_total", 1.0).await;
    // Tried again after its back-off (60 s), and refused again.
    app.clock.advance(chrono::TimeDelta::seconds(61));
    wait_for_metric(&app, "tickertape_email_retries_total", 2.0).await;
    assert_eq!(
        app.metric("tickertape_email_attempt_failures_total").await,
        2.0
    );
    assert_eq!(app.metric("tickertape_email_sent_total").await, 0.0);
    assert!(sink.received().is_empty(), "nothing sent in the clear");
    assert!(
        sink.auth_attempts().is_empty(),
        "no password sent in the clear: {:?}",
        sink.auth_attempts()
    );
    let records = for_site(&app.store, &site.id).await.unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!((r.state, r.attempts), (SendState::Pending, 2), "{r:?}");
    let error = r.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("STARTTLS"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_another_authority_signed_is_refused() {
    let ours = TestCa::new("Tickertape test CA");
    let theirs = TestCa::new("Someone else's CA");
    for (mode, query) in [
        (TlsMode::StartTls, "?tls=required"),
        (TlsMode::Implicit, ""),
    ] {
        let sink =
            SmtpSink::start_with(Some(("relay", "secret")), 0, Some(theirs.server(mode))).await;
        let url = format!("{}{query}", sink.url());
        let app = spawn_app_with(|s| send_over_tls(s, &sink, &url, &ours.certificate())).await;
        let site = site_with_a_subscriber(&app, "mitm.test", Schedule::Daily).await;
        app.clock.set(monday());
        wait_for_metric(&app, "tickertape_email_retries_total", 1.0).await;
        assert_eq!(
            app.metric("tickertape_email_attempt_failures_total").await,
            1.0
        );
        assert_eq!(app.metric("tickertape_email_sent_total").await, 0.0);
        assert!(sink.received().is_empty(), "{mode:?}");
        assert!(
            sink.auth_attempts().is_empty(),
            "{mode:?}: no password for a server not trusted"
        );
        let records = for_site(&app.store, &site.id).await.unwrap();
        let error = records[0].last_error.as_deref().unwrap_or_default();
        // Refused for its issuer: the name (127.0.0.1) is one it is for.
        assert!(
            error.contains("invalid peer certificate: UnknownIssuer"),
            "{mode:?}: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_go_in_the_clear_only_when_the_url_says_so() {
    // A server that offers no STARTTLS and takes AUTH in the clear; the
    // URL names no TLS mode: the password is not sent, nor the email.
    let sink = SmtpSink::start(Some(("relay", "not-in-the-clear")), 0).await;
    let url = sink.url();
    let app = spawn_app_with(|s| {
        send_through(s, &sink);
        s.email.smtp_url = Some(url.clone().into());
    })
    .await;
    let site = site_with_a_subscriber(&app, "clear.test", Schedule::Daily).await;
    app.clock.set(monday());
    wait_for_metric(&app, "tickertape_email_attempt_failures_total", 1.0).await;
    assert!(sink.received().is_empty(), "nothing sent");
    assert!(
        sink.auth_attempts().is_empty(),
        "no password in the clear: {:?}",
        sink.auth_attempts()
    );
    // The failure is counted before the subscription's record says why.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let error = loop {
        let records = for_site(&app.store, &site.id).await.unwrap();
        if let Some(error) = records[0].last_error.clone() {
            break error;
        }
        assert!(std::time::Instant::now() < deadline, "no error recorded");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(error.contains("auth_without_tls"), "{error}");
    drop(app);

    // Said explicitly (a relay on the same host), it goes.
    let url = format!("{}?auth_without_tls=true", sink.url());
    let app = spawn_app_with(|s| {
        send_through(s, &sink);
        s.email.smtp_url = Some(url.clone().into());
    })
    .await;
    site_with_a_subscriber(&app, "clear.test", Schedule::Daily).await;
    app.clock.set(monday());
    let got = sink.wait_for(1).await;
    assert_eq!(got[0]["authenticatedAs"], "relay");
    assert!(got[0]["tls"].is_null(), "{:?}", got[0]);
}

//! A minimal W3C WebDriver client over chromedriver: enough to log in,
//! click, read text and take screenshots in a real headless Chromium.

use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::free_port;

pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start(user_agent: &str) -> Browser {
        let chromedriver =
            std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        assert!(
            std::path::Path::new(&chromedriver).is_file(),
            "{chromedriver} is missing: `make test` installs chromium-driver"
        );
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            // Console messages, to catch what the page's
            // Content-Security-Policy refused.
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
                    "--window-size=1280,1000", format!("--user-agent={user_agent}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let reply: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = reply["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {reply}"))
            .to_owned();
        Browser {
            http,
            session: format!("{base}/session/{session}"),
            driver,
            _profile: profile,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.session);
        let request = self.http.request(method, url);
        let request = if body.is_null() {
            request
        } else {
            request.json(&body)
        };
        let reply: Value = request.send().await.unwrap().json().await.unwrap();
        reply["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    /// Console messages since the last call (chromedriver's log endpoint).
    pub async fn console(&self) -> Vec<String> {
        let v = self
            .call(reqwest::Method::POST, "/se/log", json!({"type": "browser"}))
            .await;
        v.as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|e| e["message"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The address once it satisfies `arrived` (a click's navigation may
    /// still be under way when `click` returns), or as it is after 10 s.
    pub async fn wait_for_url(&self, arrived: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let url = self.url().await;
            if arrived(&url) || std::time::Instant::now() > deadline {
                return url;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        // A reference is an object with one member (the W3C element key).
        v.as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    pub async fn count(&self, css: &str) -> usize {
        let v = self
            .call(
                reqwest::Method::POST,
                "/elements",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        v.as_array().map_or(0, Vec::len)
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            json!({"text": text}),
        )
        .await;
    }

    pub async fn click(&self, css: &str) {
        let e = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/click"),
            json!({}),
        )
        .await;
    }

    /// Clicks a link or a submit button and returns once the next page has
    /// loaded: chromedriver may answer the click before the navigation it
    /// starts has begun, so reading the page straight after would read the
    /// old one. The old document carries a mark the new one lacks.
    pub async fn click_and_load(&self, css: &str) {
        self.execute("window.__ttLeaving = true; return null;", json!([]))
            .await;
        self.click(css).await;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let loaded = self
                .execute(
                    "return window.__ttLeaving === undefined && document.readyState === 'complete';",
                    json!([]),
                )
                .await;
            if loaded == Value::Bool(true) {
                return;
            }
            assert!(Instant::now() < deadline, "clicking {css} loaded no page");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Moves the mouse over the middle of the first element matching
    /// `css`, as a reader pointing at it.
    pub async fn hover(&self, css: &str) {
        let e = self.element(css).await;
        let reply = self
            .call(
                reqwest::Method::POST,
                "/actions",
                json!({"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": [
                    {"type": "pointerMove", "duration": 0, "x": 0, "y": 0,
                     "origin": {"element-6066-11e4-a52e-4f735466cecf": e}}
                ]}]}),
            )
            .await;
        assert!(reply.get("error").is_none(), "hovering {css}: {reply}");
    }

    pub async fn text(&self, css: &str) -> String {
        let e = self.element(css).await;
        self.call(
            reqwest::Method::GET,
            &format!("/element/{e}/text"),
            Value::Null,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Runs `script` (a function body; `arguments` as given) in the page.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// Runs an asynchronous script: it calls the last argument when done.
    pub async fn execute_async(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/async",
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// Sets the window's outer size in CSS pixels.
    pub async fn resize(&self, width: u32, height: u32) {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            json!({"width": width, "height": height}),
        )
        .await;
    }

    /// Emulates the system's colour scheme (`light` or `dark`), as the
    /// page's `prefers-color-scheme` media query sees it (chromedriver's
    /// DevTools passthrough).
    pub async fn color_scheme(&self, scheme: &str) {
        let reply = self
            .call(
                reqwest::Method::POST,
                "/goog/cdp/execute",
                json!({"cmd": "Emulation.setEmulatedMedia", "params": {"features": [
                    {"name": "prefers-color-scheme", "value": scheme}
                ]}}),
            )
            .await;
        assert!(reply.get("error").is_none(), "{reply}");
    }

    /// Presses Tab, as a keyboard user moving to the next control.
    pub async fn press_tab(&self) {
        self.call(
            reqwest::Method::POST,
            "/actions",
            json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
                {"type": "keyDown", "value": "\u{E004}"}, {"type": "keyUp", "value": "\u{E004}"}
            ]}]}),
        )
        .await;
    }

    pub async fn back(&self) {
        self.call(reqwest::Method::POST, "/back", json!({})).await;
    }

    /// Injects axe-core (from the npm registry, see the Makefile's
    /// `test-deps`) and returns the serious and critical violations of the
    /// page, as "rule: target" lines.
    pub async fn axe_violations(&self) -> Vec<String> {
        let path = std::env::var("AXE_CORE_JS").map_or_else(
            |_| crate::helpers::repo_root().join("target/npm/node_modules/axe-core/axe.min.js"),
            std::path::PathBuf::from,
        );
        let source = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!(
                "{} is missing: `make test-deps` installs axe-core from npm",
                path.display()
            )
        });
        let loaded = self
            .execute(&format!("{source}\n;return typeof window.axe;"), json!([]))
            .await;
        assert_eq!(loaded, "object", "axe-core did not load: {loaded}");
        let result = self
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, targets: v.nodes.map(n => n.target.join(' '))}))), e => done([{id: 'axe-error', impact: 'critical', targets: [String(e)]}]));",
                json!([]),
            )
            .await;
        result
            .as_array()
            .unwrap_or_else(|| panic!("axe did not run: {result}"))
            .iter()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .map(|v| format!("{}: {}", v["id"], v["targets"]))
            .collect()
    }

    /// Saves a PNG of the whole window under `target/screenshots/`.
    /// What is wider than its box: a table wider than its container, any
    /// box that scrolls sideways (a table's wrapper, a `pre`), or the page
    /// itself. Each is named by its id or label, with the widths.
    pub async fn sideways(&self) -> Vec<String> {
        let found = self
            .execute(
                "const name = e => { \
                   const tag = e.tagName.toLowerCase(), label = e.getAttribute('aria-label'); \
                   return e.id ? `${tag}#${e.id}` : label ? `${tag}[${label}]` : `${tag}.${e.className}`; }; \
                 const out = []; \
                 for (const t of document.querySelectorAll('table')) { \
                   const box = t.parentElement; \
                   if (t.offsetWidth > box.clientWidth + 1) \
                     out.push(`${name(t)} is ${t.offsetWidth} px wide in a box of ${box.clientWidth} px`); } \
                 for (const e of document.querySelectorAll('body *')) { \
                   if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1) \
                     out.push(`${name(e)} scrolls sideways: ${e.scrollWidth} px in ${e.clientWidth} px`); } \
                 const page = document.documentElement; \
                 if (page.scrollWidth > page.clientWidth + 1) \
                   out.push(`the page is ${page.scrollWidth} px wide in a window of ${page.clientWidth} px`); \
                 return out;",
                json!([]),
            )
            .await;
        found
            .as_array()
            .unwrap_or_else(|| panic!("the width check did not run: {found}"))
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub async fn screenshot(&self, name: &str) -> std::path::PathBuf {
        use base64::Engine;
        let v = self
            .call(reqwest::Method::GET, "/screenshot", Value::Null)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        let dir = crate::helpers::repo_root().join("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    pub async fn quit(mut self) {
        let _ = self.http.delete(self.session.clone()).send().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}

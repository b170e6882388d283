//! Two-factor login (TOTP, RFC 6238) with recovery codes, and its
//! enforcement for admins.

use chrono::TimeDelta;
use std::collections::BTreeSet;
use tickertape::accounts::totp::Secret;
use tickertape::accounts::Role;

use crate::helpers::*;

fn between<'a>(html: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = html.find(start)? + start.len();
    let to = from + html[from..].find(end)?;
    Some(&html[from..to])
}

pub(crate) fn unix(app: &TestApp) -> u64 {
    use tickertape::clock::Clock;
    app.clock.now().timestamp() as u64
}

/// Turns two-factor login on for a logged-in user, as they would in the
/// browser; returns the secret their app holds and the recovery codes.
pub(crate) async fn turn_on(app: &TestApp, user: &Login) -> (Secret, Vec<String>) {
    let (status, html) = user.text("/account/totp").await;
    assert_eq!(status, 200);
    let secret = Secret::parse(between(&html, "id=\"totp-secret\">", "<").unwrap()).unwrap();
    assert!(html.contains("otpauth://totp/Tickertape:"));
    // A wrong code changes nothing.
    let r = user
        .post(
            "/account/totp/enable",
            &[
                ("csrf", &user.csrf),
                ("password", PASSWORD),
                ("code", "000000"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let code = secret.code_at(unix(app));
    let r = user
        .post(
            "/account/totp/enable",
            &[
                ("csrf", &user.csrf),
                ("password", PASSWORD),
                ("code", &code),
            ],
        )
        .await;
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    let list = between(&html, "<ul id=\"recovery-codes\">", "</ul>").unwrap();
    let codes: Vec<String> = list
        .split("<code>")
        .skip(1)
        .map(|c| c.split('<').next().unwrap().to_owned())
        .collect();
    assert_eq!(codes.len(), 10);
    (secret, codes)
}

/// Password step of a login; returns the browser and the code form's token.
async fn password_step(app: &TestApp, email: &str) -> (reqwest::Client, String) {
    let http = cookie_client();
    let r = app.submit_login(&http, email, PASSWORD).await;
    assert_eq!(r.status(), 303);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, "/login/totp?next=%2Fsites");
    assert!(
        r.headers()
            .get_all("set-cookie")
            .iter()
            .all(|c| !c.to_str().unwrap().starts_with("tt_session=")),
        "no session before the code"
    );
    let html = app.page_text(&http, &location).await;
    (http, csrf_in(&html).expect("the code form has a token"))
}

async fn submit_code(
    app: &TestApp,
    http: &reqwest::Client,
    csrf: &str,
    code: &str,
) -> reqwest::Response {
    http.post(format!("{}/login/totp", app.address))
        .form(&[("csrf", csrf), ("code", code), ("next", "/sites")])
        .send()
        .await
        .unwrap()
}

async fn sites_status(app: &TestApp, http: &reqwest::Client) -> u16 {
    http.get(format!("{}/sites", app.address))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn after_the_password_a_code_is_needed_and_works_once() {
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    let (secret, _) = turn_on(&app, &user).await;

    let (http, csrf) = password_step(&app, "a@example.com").await;
    assert_eq!(
        sites_status(&app, &http).await,
        303,
        "the password alone opens nothing"
    );
    assert_eq!(
        submit_code(&app, &http, &csrf, "123456").await.status(),
        401
    );
    // The code that turned it on was used in this time step: not again.
    let used = secret.code_at(unix(&app));
    assert_eq!(submit_code(&app, &http, &csrf, &used).await.status(), 401);
    app.clock.advance(TimeDelta::seconds(30));
    let code = secret.code_at(unix(&app));
    let r = submit_code(&app, &http, &csrf, &code).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/sites");
    assert_eq!(sites_status(&app, &http).await, 200);

    // The same code cannot log in a second browser (replay).
    let (other, csrf) = password_step(&app, "a@example.com").await;
    assert_eq!(submit_code(&app, &other, &csrf, &code).await.status(), 401);
    assert_eq!(sites_status(&app, &other).await, 303);
}

#[tokio::test]
async fn a_recovery_code_logs_in_once() {
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    let (_, codes) = turn_on(&app, &user).await;

    let (http, csrf) = password_step(&app, "a@example.com").await;
    let typed = codes[3].to_uppercase();
    assert_eq!(submit_code(&app, &http, &csrf, &typed).await.status(), 303);
    assert_eq!(sites_status(&app, &http).await, 200);

    let (again, csrf) = password_step(&app, "a@example.com").await;
    assert_eq!(
        submit_code(&app, &again, &csrf, &codes[3]).await.status(),
        401
    );
    assert_eq!(
        submit_code(&app, &again, &csrf, &codes[4]).await.status(),
        303
    );
}

#[tokio::test]
async fn wrong_codes_are_rate_limited_even_with_the_right_password() {
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    let (secret, _) = turn_on(&app, &user).await;
    app.clock.advance(TimeDelta::seconds(60));
    for i in 0..5 {
        // A fresh password step each time: a right password must not
        // reset the count of wrong codes.
        let (http, csrf) = password_step(&app, "a@example.com").await;
        assert_eq!(
            submit_code(&app, &http, &csrf, "000000").await.status(),
            401,
            "{i}"
        );
    }
    let (http, csrf) = password_step(&app, "a@example.com").await;
    let code = secret.code_at(unix(&app));
    assert_eq!(submit_code(&app, &http, &csrf, &code).await.status(), 429);
    assert_eq!(sites_status(&app, &http).await, 303);
}

#[tokio::test]
async fn turning_it_off_needs_the_password_and_a_code() {
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    let (secret, _) = turn_on(&app, &user).await;
    app.clock.advance(TimeDelta::seconds(30));
    let code = secret.code_at(unix(&app));
    for (password, code) in [("wrong password", code.as_str()), (PASSWORD, "000000")] {
        let r = user
            .post(
                "/account/totp/disable",
                &[("csrf", &user.csrf), ("password", password), ("code", code)],
            )
            .await;
        assert_eq!(r.status(), 400);
    }
    let r = user
        .post(
            "/account/totp/disable",
            &[
                ("csrf", &user.csrf),
                ("password", PASSWORD),
                ("code", &code),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    // Off: the password alone logs in again.
    let http = cookie_client();
    let r = app.submit_login(&http, "a@example.com", PASSWORD).await;
    assert_eq!(r.headers()["location"], "/sites");
}

#[tokio::test]
async fn when_required_admins_must_turn_it_on_first() {
    let app = spawn_app_with(|s| s.security.require_admin_totp = true).await;
    app.add_user("admin@example.com", Role::Admin).await;
    app.add_user("owner@example.com", Role::Owner).await;
    let owner = app.login("owner@example.com").await;
    assert_eq!(
        owner.get("/sites").await.status(),
        200,
        "owners are not forced"
    );

    let admin = app.login("admin@example.com").await;
    for path in ["/sites", "/admin/users", "/account/password"] {
        let r = admin.get(path).await;
        assert_eq!(r.status(), 303, "{path}");
        assert_eq!(r.headers()["location"], "/account/totp", "{path}");
    }
    let api = admin
        .http
        .post(format!("{}/admin/api/preallocate", app.address))
        .header("x-csrf-token", &admin.csrf)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    // A script is answered in JSON, with a code that names the fix.
    assert_eq!(api.status(), 403, "the JSON API too");
    let json: serde_json::Value = api.json().await.unwrap();
    assert_eq!(json["error"]["code"], "second_factor_required");
    let (status, html) = admin.text("/account/totp").await;
    assert_eq!(status, 200);
    assert!(html.contains("Administrators must turn on two-factor login"));
    turn_on(&app, &admin).await;
    assert_eq!(admin.get("/admin/users").await.status(), 200);
}

#[tokio::test]
async fn an_admin_password_reset_also_turns_it_off() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let user = app.add_user("a@example.com", Role::Owner).await;
    let login = app.login("a@example.com").await;
    turn_on(&app, &login).await;
    let admin = app.login("admin@example.com").await;
    let (_, html) = admin.text("/admin/users").await;
    assert!(
        html.contains("<td data-label=\"Two-factor\">on</td>"),
        "the users page shows it"
    );
    let r = admin
        .post(
            &format!("/admin/users/{}/password", user.id),
            &[("csrf", &admin.csrf), ("password", "a brand new password")],
        )
        .await;
    assert_eq!(r.status(), 303);
    let http = cookie_client();
    let r = app
        .submit_login(&http, "a@example.com", "a brand new password")
        .await;
    // No code asked: straight in, to the password page, since a password
    // an admin reset is a one-time one.
    assert_eq!(
        r.headers()["location"],
        "/account/password",
        "no code asked"
    );
    // Signed in, but only to choose a password.
    assert_eq!(sites_status(&app, &http).await, 303);
}

/// The page's HTML-escaped attribute or text as it reads.
fn unescape(html: &str) -> String {
    html.replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

/// The dark modules an SVG from `qrcode`'s renderer draws (one unit each:
/// `M{x} {y}h1v1H{x}V{y}`), and its width in units.
fn drawn_modules(svg: &roxmltree::Document) -> (usize, BTreeSet<(usize, usize)>) {
    let root = svg.root_element();
    let view_box: Vec<usize> = root
        .attribute("viewBox")
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(view_box[0..2], [0, 0]);
    assert_eq!(view_box[2], view_box[3], "square");
    let path = root
        .descendants()
        .find(|n| n.has_tag_name("path"))
        .expect("the modules' path");
    assert_eq!(path.attribute("fill"), Some("#000"));
    let d = path.attribute("d").unwrap();
    let dark = d
        .split('M')
        .skip(1)
        .map(|m| {
            let (x, rest) = m.split_once(' ').unwrap();
            let (y, rest) = rest.split_once('h').unwrap();
            assert_eq!(rest, format!("1v1H{x}V{y}"), "one module: {m}");
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    (view_box[2], dark)
}

/// The setup page shows the `otpauth://` link as a QR
/// code drawn on the server (inline SVG) beside the key, which stays for
/// typing; the code holds exactly the link, whose secret is the key shown.
/// The bar marks Account, and the page links to the other account pages.
#[tokio::test]
async fn the_setup_page_shows_the_link_as_a_qr_code_beside_the_key() {
    let app = spawn_app().await;
    app.add_user("qr@example.com", Role::Owner).await;
    let user = app.login("qr@example.com").await;
    let (status, html) = user.text("/account/totp").await;
    assert_eq!(status, 200);
    let secret = between(&html, "id=\"totp-secret\">", "<").unwrap();
    assert!(Secret::parse(secret).is_ok(), "{secret}");
    let link = between(&html, "<a href=\"", "\" id=\"totp-link\">")
        .map(|a| a.rsplit("href=\"").next().unwrap())
        .unwrap();
    let uri = unescape(link);
    let parsed = url::Url::parse(&uri).unwrap();
    assert_eq!(parsed.scheme(), "otpauth");
    let query: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
    assert_eq!(query["secret"], secret, "{uri}");
    assert_eq!(query["issuer"], "Tickertape");
    assert!(
        uri.contains("qr%40example.com") || uri.contains("qr@example.com"),
        "{uri}"
    );

    let figure = between(&html, "<figure class=\"qr\" id=\"totp-qr\">", "</figure>").unwrap();
    let svg = roxmltree::Document::parse(figure).expect("well-formed SVG");
    let root = svg.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    assert_eq!(root.attribute("role"), Some("img"));
    assert!(!root.attribute("aria-label").unwrap_or("").is_empty());

    // What the code holds: the link, module for module as the crate
    // encodes it, inside the four-module quiet zone.
    let code = qrcode::QrCode::new(uri.as_bytes()).unwrap();
    let width = code.width();
    let expected: BTreeSet<(usize, usize)> = code
        .to_colors()
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == qrcode::Color::Dark)
        .map(|(i, _)| (i % width + 4, i / width + 4))
        .collect();
    let (units, dark) = drawn_modules(&svg);
    assert_eq!(units, width + 8);
    assert_eq!(dark, expected);
    // And the drawing is the crate's own for that link.
    let own = code
        .render::<qrcode::render::svg::Color>()
        .quiet_zone(true)
        .module_dimensions(1, 1)
        .build();
    let own = roxmltree::Document::parse(&own).unwrap();
    assert_eq!(drawn_modules(&own), (units, dark));

    // The bar marks Account, not Sites; the account pages link to each other.
    assert!(html.contains("<a href=\"/account/password\" aria-current=\"page\">Account</a>"));
    assert!(!html.contains("<a href=\"/sites\" aria-current"));
    let links = between(
        &html,
        "<nav class=\"subnav\" aria-label=\"Account\">",
        "</nav>",
    )
    .unwrap();
    for (href, text) in [
        ("/account/password", "Password"),
        ("/account/tokens", "API tokens"),
    ] {
        assert!(
            links.contains(&format!("<a href=\"{href}\">{text}</a>")),
            "{links}"
        );
    }
    assert!(links.contains("<a href=\"/account/totp\" aria-current=\"page\">Two-factor login</a>"));

    // The same page after a refused code keeps all of it.
    let r = user
        .post(
            "/account/totp/enable",
            &[
                ("csrf", &user.csrf),
                ("password", PASSWORD),
                ("code", "000000"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let again = r.text().await.unwrap();
    assert!(again.contains(figure), "the same code for the same key");
    assert!(again.contains("<a href=\"/account/password\" aria-current=\"page\">Account</a>"));
}

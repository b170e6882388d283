//! Passwords, sessions, API tokens, share links and the login limits:
//! what someone who guesses, races or keeps a stolen credential can and
//! cannot do. Each test is a regression test of a hole a probe found.

use tickertape::accounts::Role;

use crate::helpers::*;
use crate::json_api::{create_token, get as api_get};
use crate::share_links::create_link;

/// An owner with one site holding a view, logged in.
pub(crate) struct Owned {
    pub(crate) app: TestApp,
    pub(crate) owner: Login,
    pub(crate) site: String,
    pub(crate) record: tickertape::storage::sites::Site,
}

pub(crate) async fn owned_site() -> Owned {
    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("owned.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    app.write_hits(&[("owned.test/x", t0())]).await;
    let login = app.login("owner@example.com").await;
    Owned {
        site: site.id.to_string(),
        record: site,
        owner: login,
        app,
    }
}

/// The status of `GET path` with `http`'s cookies.
async fn status_of(app: &TestApp, http: &reqwest::Client, path: &str) -> u16 {
    http.get(format!("{}{path}", app.address))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn change_password(login: &Login, current: &str, new: &str) -> reqwest::Response {
    login
        .post(
            "/account/password",
            &[
                ("csrf", &login.csrf),
                ("current", current),
                ("new", new),
                ("confirm", new),
            ],
        )
        .await
}

/// A token minted during a takeover kept answering after both
/// recovery steps. A password change revokes every token and ends the
/// other sessions (and says so on the form); an admin's reset ends all.
#[tokio::test]
async fn a_password_change_or_reset_revokes_api_tokens_and_sessions() {
    let w = owned_site().await;
    let app = &w.app;
    let owner_id = tickertape::accounts::users::find_by_email(
        &app.store,
        &tickertape::domain::Email::parse("owner@example.com").unwrap(),
    )
    .await
    .unwrap()
    .unwrap()
    .id;
    let (_, form) = w.owner.text("/account/password").await;
    assert!(form.contains("revokes all your API tokens"), "{form}");

    // The takeover: another session, and a token made in it.
    let thief = app.login("owner@example.com").await;
    let stolen = create_token(&thief, "stolen", None).await;
    assert_eq!(api_get(app, &stolen, "/api/v1/sites").await.status, 200);
    let r = change_password(&w.owner, PASSWORD, "a new password of mine").await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("API tokens revoked"));
    assert_eq!(api_get(app, &stolen, "/api/v1/sites").await.status, 401);
    assert_eq!(
        thief.get("/sites").await.status(),
        303,
        "other session ended"
    );
    assert_eq!(w.owner.get("/sites").await.status(), 200, "this one stays");

    // The reset: every session and token of the user ends.
    let mine = create_token(&w.owner, "mine", None).await;
    assert_eq!(api_get(app, &mine, "/api/v1/sites").await.status, 200);
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let r = admin
        .post(
            &format!("/admin/users/{owner_id}/password"),
            &[("csrf", &admin.csrf), ("password", "a temporary password")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(api_get(app, &mine, "/api/v1/sites").await.status, 401);
    assert_eq!(w.owner.get("/sites").await.status(), 303);
}

/// Turning two-factor login on asks for the password, and on or
/// off ends the user's other sessions.
#[tokio::test]
async fn turning_two_factor_login_on_or_off_needs_the_password_and_ends_other_sessions() {
    use crate::two_factor::unix;
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    let other = app.login("a@example.com").await;
    let (_, html) = user.text("/account/totp").await;
    let secret = html
        .split("id=\"totp-secret\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap();
    let secret = tickertape::accounts::totp::Secret::parse(secret).unwrap();
    let code = secret.code_at(unix(&app));
    for password in ["", "wrong password"] {
        let r = user
            .post(
                "/account/totp/enable",
                &[
                    ("csrf", &user.csrf),
                    ("password", password),
                    ("code", &code),
                ],
            )
            .await;
        assert_eq!(r.status(), 400, "password {password:?}");
    }
    assert_eq!(other.get("/sites").await.status(), 200);
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
    assert_eq!(
        other.get("/sites").await.status(),
        303,
        "ended by turning on"
    );
    assert_eq!(user.get("/sites").await.status(), 200);

    // Off: a new other session (password and code), then it ends too.
    let http = cookie_client();
    let r = app.submit_login(&http, "a@example.com", PASSWORD).await;
    assert_eq!(r.status(), 303);
    let form = app.page_text(&http, "/login/totp?next=/sites").await;
    let csrf = csrf_in(&form).unwrap();
    app.clock.advance(chrono::TimeDelta::seconds(30));
    let r = http
        .post(format!("{}/login/totp", app.address))
        .form(&[
            ("csrf", csrf.as_str()),
            ("code", &secret.code_at(unix(&app))),
            ("next", "/sites"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(status_of(&app, &http, "/sites").await, 200);
    app.clock.advance(chrono::TimeDelta::seconds(30));
    let r = user
        .post(
            "/account/totp/disable",
            &[
                ("csrf", &user.csrf),
                ("password", PASSWORD),
                ("code", &secret.code_at(unix(&app))),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        status_of(&app, &http, "/sites").await,
        303,
        "ended by turning off"
    );
    assert_eq!(user.get("/sites").await.status(), 200);
}

/// A login from `client` (as named by a trusted proxy at 127.0.0.1):
/// its status and where it leads.
async fn login_from(app: &TestApp, client: &str, email: &str, password: &str) -> (u16, String) {
    let http = cookie_client();
    let page = app.page_text(&http, "/login").await;
    let csrf = csrf_in(&page).unwrap();
    let r = http
        .post(format!("{}/login", app.address))
        .header("x-forwarded-for", client)
        .form(&[
            ("email", email),
            ("password", password),
            ("csrf", &csrf),
            ("next", "/sites"),
        ])
        .send()
        .await
        .unwrap();
    let location = r
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status().as_u16(), location)
}

async fn behind_a_proxy() -> TestApp {
    spawn_app_with(|s| s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await
}

/// Five wrong passwords from one address locked the account for
/// everyone, the right password from elsewhere included. The address
/// stays paused; other addresses are not. Guesses from several addresses
/// (four times the limit) pause an account without two-factor login, and
/// an account with it still opens with the password and a code.
#[tokio::test]
async fn failures_from_one_address_do_not_lock_the_account_for_others() {
    let app = behind_a_proxy().await;
    app.add_user("a@example.com", Role::Owner).await;
    app.add_user("b@example.com", Role::Owner).await;
    app.add_user("c@example.com", Role::Owner).await;
    for _ in 0..5 {
        let (status, _) = login_from(&app, "203.0.113.1", "a@example.com", "wrong").await;
        assert_eq!(status, 401);
    }
    assert_eq!(
        login_from(&app, "203.0.113.1", "a@example.com", PASSWORD)
            .await
            .0,
        429,
        "the guessing address waits"
    );
    assert_eq!(
        login_from(&app, "203.0.113.2", "a@example.com", PASSWORD).await,
        (303, "/sites".to_owned()),
        "the owner, elsewhere, gets in"
    );

    let c = app.login("c@example.com").await;
    crate::two_factor::turn_on(&app, &c).await;
    for (account, first) in [("b@example.com", 10), ("c@example.com", 20)] {
        for client in first..first + 4 {
            for _ in 0..5 {
                let from = format!("203.0.113.{client}");
                assert_eq!(login_from(&app, &from, account, "wrong").await.0, 401);
            }
        }
    }
    let (status, _) = login_from(&app, "203.0.113.30", "b@example.com", PASSWORD).await;
    assert_eq!(status, 429, "guessed at from four addresses: paused");
    let (status, to) = login_from(&app, "203.0.113.31", "c@example.com", PASSWORD).await;
    assert_eq!(status, 303);
    assert!(to.starts_with("/login/totp"), "{to}");
}

/// The current password on `/account/password` (30 guesses in
/// 1.7 s) had no limit; now it is a login attempt like any other.
#[tokio::test]
async fn guessing_the_current_password_is_rate_limited() {
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    for i in 0..5 {
        let r = change_password(&user, &format!("guess {i}"), "a new password of mine").await;
        assert_eq!(r.status(), 400, "guess {i}");
    }
    let r = change_password(&user, PASSWORD, "a new password of mine").await;
    assert_eq!(r.status(), 429);
    assert!(r.text().await.unwrap().contains("Too many wrong passwords"));
    // Nothing changed.
    let user = tickertape::accounts::users::find_by_email(
        &app.store,
        &tickertape::domain::Email::parse("a@example.com").unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(tickertape::accounts::password::verify(
        PASSWORD,
        &user.password_hash
    ));
}

/// The two-factor code on `/account/totp/disable` had no limit
/// either: a session holder who knows the password could try codes.
#[tokio::test]
async fn guessing_the_code_to_turn_two_factor_off_is_rate_limited() {
    use crate::two_factor::unix;
    let app = spawn_app().await;
    app.add_user("a@example.com", Role::Owner).await;
    let user = app.login("a@example.com").await;
    let (secret, _) = crate::two_factor::turn_on(&app, &user).await;
    app.clock.advance(chrono::TimeDelta::seconds(60));
    for i in 0..5 {
        let r = user
            .post(
                "/account/totp/disable",
                &[
                    ("csrf", &user.csrf),
                    ("password", PASSWORD),
                    ("code", &format!("00000{i}")),
                ],
            )
            .await;
        assert_eq!(r.status(), 400, "guess {i}");
    }
    let r = user
        .post(
            "/account/totp/disable",
            &[
                ("csrf", &user.csrf),
                ("password", PASSWORD),
                ("code", &secret.code_at(unix(&app))),
            ],
        )
        .await;
    assert_eq!(r.status(), 429);
    let (_, html) = user.text("/account/totp").await;
    assert!(html.contains("Two-factor login is on."), "still on");
}

/// A login answered 503 (too many password checks at once)
/// counted as a failed attempt, so a burst could use up an address's
/// attempts without a single password being checked.
#[tokio::test]
async fn a_busy_login_is_not_a_failed_attempt() {
    let app = std::sync::Arc::new(
        spawn_app_with(|s| {
            s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
            s.security.password_checks = Some(1);
        })
        .await,
    );
    app.add_user("a@example.com", Role::Owner).await;
    // One slot and a 2 s wait: most of a burst of 40 is answered 503.
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(40));
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (app, start) = (app.clone(), start.clone());
            tokio::spawn(async move {
                let client = format!("198.51.100.{i}");
                let http = cookie_client();
                let page = app.page_text(&http, "/login").await;
                let csrf = csrf_in(&page).unwrap();
                start.wait().await;
                let status = http
                    .post(format!("{}/login", app.address))
                    .header("x-forwarded-for", &client)
                    .form(&[
                        ("email", format!("nobody{i}@example.com").as_str()),
                        ("password", "wrong"),
                        ("csrf", &csrf),
                    ])
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16();
                (client, status)
            })
        })
        .collect();
    let mut busy = None;
    for t in tasks {
        let (client, status) = t.await.unwrap();
        assert!(status == 401 || status == 503, "{status}");
        if status == 503 {
            busy = Some(client);
        }
    }
    let busy = busy.expect("the burst found the checks busy");
    // That address still has all five attempts.
    for i in 0..5 {
        let (status, _) = login_from(&app, &busy, "a@example.com", "wrong").await;
        assert_eq!(status, 401, "attempt {i} from {busy}");
    }
    assert_eq!(
        login_from(&app, &busy, "a@example.com", "wrong").await.0,
        429
    );
}

/// A reset (or first-run) password was called one-time but was
/// neither: it opened every page for as long as nobody changed it. Now
/// every page but the password form leads to the form, and it stops
/// working after a week.
#[tokio::test]
async fn a_one_time_password_only_opens_the_password_form_and_expires() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let user = app.add_user("a@example.com", Role::Owner).await;
    let admin = app.login("admin@example.com").await;
    let reset = |password: &'static str| {
        let admin = &admin;
        async move {
            let r = admin
                .post(
                    &format!("/admin/users/{}/password", user.id),
                    &[("csrf", &admin.csrf), ("password", password)],
                )
                .await;
            assert_eq!(r.status(), 303);
        }
    };
    reset("the admin's temporary one").await;
    let http = cookie_client();
    let r = app
        .submit_login(&http, "a@example.com", "the admin's temporary one")
        .await;
    assert_eq!(r.headers()["location"], "/account/password");
    for path in ["/sites", "/account/tokens", "/account/totp", "/sites/new"] {
        let r = http
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303, "{path}");
        assert_eq!(r.headers()["location"], "/account/password", "{path}");
    }
    assert_eq!(status_of(&app, &http, "/account/password").await, 200);

    // A week later it no longer logs in.
    reset("another temporary one").await;
    app.clock.advance(chrono::TimeDelta::days(7));
    let r = app
        .submit_login(&cookie_client(), "a@example.com", "another temporary one")
        .await;
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("expired"));
    // A fresh reset works again, and choosing one's own ends it.
    reset("a third temporary one").await;
    let login = {
        let http = cookie_client();
        let r = app
            .submit_login(&http, "a@example.com", "a third temporary one")
            .await;
        assert_eq!(r.status(), 303);
        let page = app.page_text(&http, "/account/password").await;
        let mut login = app.anonymous();
        login.csrf = csrf_in(&page).unwrap();
        login.http = http;
        login
    };
    // The first own password goes on to the sites list.
    let r = change_password(&login, "a third temporary one", "my own password now").await;
    assert_eq!(r.status(), 303);
    assert_eq!(login.get("/sites").await.status(), 200);
    app.clock.advance(chrono::TimeDelta::days(30));
    let r = app
        .submit_login(&cookie_client(), "a@example.com", "my own password now")
        .await;
    assert_eq!(
        r.headers()["location"],
        "/sites",
        "one's own does not expire"
    );
}

/// A share link kept working after its creator stopped being an
/// owner. It now works only while its creator may see the site; the
/// remaining owners see it as stopped and can revoke it.
#[tokio::test]
async fn a_share_link_dies_with_its_creators_access() {
    let w = owned_site().await;
    let app = &w.app;
    let link = create_link(&w.owner, &w.site, "for the board", "").await;
    let visitor = app.anonymous();
    assert_eq!(visitor.get(&link).await.status(), 200);
    let other = app.add_user("other@example.com", Role::Owner).await;
    app.set_owners(&w.record, &[other.id]).await;
    assert_eq!(visitor.get(&link).await.status(), 404, "creator removed");
    assert_eq!(
        visitor.get(&format!("{link}/page?path=/x")).await.status(),
        404
    );
    let other = app.login("other@example.com").await;
    let (status, html) = other.text(&format!("/sites/{}/share", w.site)).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("stopped: whoever made it no longer has access"),
        "{html}"
    );
    // A link made by an admin stops when the admin is deleted.
    let admin_user = app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let admins_link = create_link(&admin, &w.site, "admin's", "").await;
    assert_eq!(visitor.get(&admins_link).await.status(), 200);
    app.add_user("admin2@example.com", Role::Admin).await;
    let admin2 = app.login("admin2@example.com").await;
    let r = admin2
        .post(
            &format!("/admin/users/{}/delete", admin_user.id),
            &[("csrf", &admin2.csrf), ("confirm", "yes")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        visitor.get(&admins_link).await.status(),
        404,
        "creator deleted"
    );
}

/// `scope=bogus` made a token for all sites.
#[tokio::test]
async fn a_token_scope_other_than_all_or_chosen_is_refused() {
    let w = owned_site().await;
    for scope in [Some("bogus"), Some(""), Some("ALL"), None] {
        let mut form = vec![("csrf", w.owner.csrf.as_str()), ("name", "x")];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        let r = w.owner.post("/account/tokens", &form).await;
        assert_eq!(r.status(), 400, "scope {scope:?}");
        assert!(!r.text().await.unwrap().contains("new-token"));
    }
    let tokens = w
        .app
        .store
        .db()
        .collection::<bson::Document>("api_tokens")
        .count_documents(bson::doc! {})
        .await
        .unwrap();
    assert_eq!(tokens, 0, "nothing was made");
}

/// The login limit counted each IPv6 address apart, so a client
/// holding a /64 had endless attempts. Now one /64 is one client.
#[tokio::test]
async fn an_ipv6_client_is_limited_by_its_64() {
    let app = behind_a_proxy().await;
    app.add_user("a@example.com", Role::Owner).await;
    for i in 1..=5 {
        let from = format!("2001:db8:1:2::{i:x}");
        assert_eq!(
            login_from(&app, &from, "a@example.com", "wrong").await.0,
            401
        );
    }
    assert_eq!(
        login_from(
            &app,
            "2001:db8:1:2:dead:beef:0:1",
            "a@example.com",
            PASSWORD
        )
        .await
        .0,
        429,
        "another address of the same /64"
    );
    assert_eq!(
        login_from(&app, "2001:db8:1:3::1", "a@example.com", PASSWORD)
            .await
            .0,
        303,
        "another /64"
    );
}

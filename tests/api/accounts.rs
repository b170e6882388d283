//! Who may see and do what: the authorization matrix, CSRF, login rate
//! limiting and password changes.

use tickertape::accounts::Role;
use tickertape::storage::sites;

use crate::helpers::*;

struct World {
    app: TestApp,
    site_a: String,
}

async fn world() -> World {
    let app = spawn_app().await;
    let owner_a = app.add_user("a@example.com", Role::Owner).await;
    app.add_user("b@example.com", Role::Owner).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let a = app.add_site("alpha.test", &[]).await;
    let b = app.add_site("bravo.test", &[]).await;
    // Owners are set through the storage layer as the admin page would.
    let changes = |owner| sites::SiteChanges {
        name: String::new(),
        aliases: vec![],
        owners: vec![owner],
    };
    sites::update(&app.store, &a, changes(owner_a.id))
        .await
        .unwrap();
    let owner_b = tickertape::accounts::users::find_by_email(
        &app.store,
        &tickertape::domain::Email::parse("b@example.com").unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    sites::update(&app.store, &b, changes(owner_b.id))
        .await
        .unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    // 4,321 views on alpha: a number that must not leak to bravo's owner.
    let hits: Vec<(&str, _)> = (0..4321)
        .map(|_| ("alpha.test/secret-page", t0()))
        .collect();
    app.write_hits(&hits).await;
    World {
        site_a: a.id.to_string(),
        app,
    }
}

fn site_routes(id: &str) -> Vec<String> {
    [
        "",
        "?range=7d",
        "/page?path=/secret-page",
        "/settings",
        "/share",
        "/series.csv?range=24h",
        "/series.csv?range=24h&path=/secret-page",
        "/pages.csv?range=24h",
        "/visits.csv?range=24h",
        "/visits.csv?range=24h&path=/secret-page",
        "/seconds.csv?path=/secret-page&minute=2026-11-22T10:01",
        "/realtime.csv?path=/secret-page",
    ]
    .iter()
    .map(|suffix| format!("/sites/{id}{suffix}"))
    .collect()
}

fn admin_routes(id: &str) -> Vec<String> {
    [
        "/admin/sites".to_owned(),
        format!("/admin/sites/{id}"),
        format!("/admin/sites/{id}/delete"),
        "/admin/users".into(),
        "/admin/system".into(),
    ]
    .to_vec()
}

#[tokio::test]
async fn the_authorization_matrix_holds_for_every_route() {
    let w = world().await;
    let app = &w.app;
    let anonymous = app.anonymous();
    let owner_a = app.login("a@example.com").await;
    let owner_b = app.login("b@example.com").await;
    let admin = app.login("admin@example.com").await;

    for path in site_routes(&w.site_a)
        .iter()
        .chain(&admin_routes(&w.site_a))
        .chain(&["/sites".to_owned(), "/account/password".to_owned()])
    {
        let r = anonymous.get(path).await;
        assert_eq!(r.status(), 303, "anonymous {path}");
        let location = r.headers()["location"].to_str().unwrap();
        assert!(
            location.starts_with("/login?next="),
            "anonymous {path} → {location}"
        );
    }
    for path in site_routes(&w.site_a) {
        let (status, body) = owner_a.text(&path).await;
        assert_eq!(status, 200, "owner of A: {path}");
        if !path.contains("settings") && !path.contains("realtime") && !path.ends_with("/share") {
            assert!(
                body.contains("4321") || body.contains("4,321"),
                "owner of A sees the numbers on {path}"
            );
        }
        let (status, body) = owner_b.text(&path).await;
        assert_eq!(status, 404, "owner of B: {path}");
        assert!(
            !body.contains("4321") && !body.contains("4,321") && !body.contains("secret-page"),
            "{path} leaks"
        );
        assert_eq!(admin.get(&path).await.status(), 200, "admin: {path}");
    }
    for path in admin_routes(&w.site_a) {
        assert_eq!(owner_a.get(&path).await.status(), 403, "owner: {path}");
        assert_eq!(owner_b.get(&path).await.status(), 403, "owner: {path}");
        assert_eq!(admin.get(&path).await.status(), 200, "admin: {path}");
    }
    // The sites list shows each owner only their own sites.
    let (_, list_b) = owner_b.text("/sites").await;
    assert!(
        list_b.contains("bravo.test")
            && !list_b.contains("alpha.test")
            && !list_b.contains("4,321")
    );
    let (_, list_a) = owner_a.text("/sites").await;
    assert!(list_a.contains("alpha.test") && !list_a.contains("bravo.test"));
    let (_, list_admin) = admin.text("/sites").await;
    assert!(list_admin.contains("alpha.test") && list_admin.contains("bravo.test"));
    // Unknown and malformed site ids are the same 404 as someone else's.
    assert_eq!(
        owner_a
            .get("/sites/00000000-0000-4000-8000-000000000000")
            .await
            .status(),
        404
    );
    assert_eq!(owner_a.get("/sites/not-a-uuid").await.status(), 404);
}

#[tokio::test]
async fn admin_posts_by_owners_and_strangers_change_nothing() {
    let w = world().await;
    let app = &w.app;
    let owner = app.login("a@example.com").await;
    let anonymous = app.anonymous();
    let delete = format!("/admin/sites/{}/delete", w.site_a);
    let attempts: Vec<(String, Vec<(&str, &str)>)> = vec![
        ("/admin/sites".into(), vec![("domain", "evil.test")]),
        (
            format!("/admin/sites/{}", w.site_a),
            vec![("name", "pwned"), ("aliases", "evil.test")],
        ),
        (delete, vec![("confirm", "alpha.test")]),
        (
            "/admin/users".into(),
            vec![
                ("email", "evil@example.com"),
                ("role", "admin"),
                ("password", "0123456789ab"),
            ],
        ),
    ];
    for (path, fields) in &attempts {
        let mut form = fields.clone();
        form.push(("csrf", &owner.csrf));
        assert_eq!(
            owner.post(path, &form).await.status(),
            403,
            "owner POST {path}"
        );
        assert_eq!(
            anonymous.post(path, &form).await.status(),
            303,
            "anonymous POST {path}"
        );
    }
    let all = sites::list(&app.store).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all
        .iter()
        .all(|s| s.name != "pwned" && s.aliases.is_empty()));
    assert_eq!(
        tickertape::accounts::users::count(&app.store)
            .await
            .unwrap(),
        3
    );
}

#[tokio::test]
async fn a_post_without_the_right_csrf_token_changes_nothing() {
    let w = world().await;
    let app = &w.app;
    let admin = app.login("admin@example.com").await;
    let wrong = "0".repeat(64);
    for csrf in [None, Some(""), Some(wrong.as_str())] {
        let mut form = vec![("domain", "new.test")];
        if let Some(c) = csrf {
            form.push(("csrf", c));
        }
        let status = admin.post("/admin/sites", &form).await.status();
        assert!(status == 400 || status == 403, "csrf {csrf:?}: {status}");
        let status = admin
            .post(
                &format!("/admin/sites/{}/delete", w.site_a),
                &[("confirm", "alpha.test"), ("csrf", csrf.unwrap_or(""))],
            )
            .await
            .status();
        assert_eq!(status, 403);
    }
    assert_eq!(sites::list(&app.store).await.unwrap().len(), 2);
    // Logging out needs the token too: a forged logout keeps the session.
    assert_eq!(
        admin.post("/logout", &[("csrf", &wrong)]).await.status(),
        403
    );
    assert_eq!(admin.get("/admin/system").await.status(), 200);
    // A login form posted without the login page's token is refused.
    let forged = cookie_client()
        .post(format!("{}/login", app.address))
        .form(&[
            ("email", "admin@example.com"),
            ("password", PASSWORD),
            ("csrf", &wrong),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert!(forged
        .headers()
        .get("set-cookie")
        .is_none_or(|c| !c.to_str().unwrap().contains("tt_session=")));
}

#[tokio::test]
async fn login_is_rate_limited_per_account_and_per_client_after_five_failures() {
    let w = world().await;
    let app = &w.app;
    let http = cookie_client();
    for i in 0..5 {
        let r = app
            .submit_login(&http, "a@example.com", "wrong password")
            .await;
        assert_eq!(r.status(), 401, "failure {i}");
        assert!(r.text().await.unwrap().contains("Wrong e-mail or password"));
    }
    // The right password no longer helps, for this account...
    let r = app.submit_login(&http, "a@example.com", PASSWORD).await;
    assert_eq!(r.status(), 429);
    assert!(r.text().await.unwrap().contains("Too many failed logins"));
    // ...nor, from this client, for another account.
    assert_eq!(
        app.submit_login(&http, "b@example.com", PASSWORD)
            .await
            .status(),
        429
    );
    assert!(
        http.get(format!("{}/sites", app.address))
            .send()
            .await
            .unwrap()
            .status()
            == 303,
        "not logged in"
    );
}

#[tokio::test]
async fn logging_in_out_and_changing_the_password() {
    let w = world().await;
    let app = &w.app;
    // An unknown account fails like a wrong password.
    let r = app
        .submit_login(&cookie_client(), "nobody@example.com", PASSWORD)
        .await;
    assert_eq!(r.status(), 401);

    let user = app.login("a@example.com").await;
    let set_cookie = {
        let http = cookie_client();
        let r = app.submit_login(&http, "a@example.com", PASSWORD).await;
        r.headers()["set-cookie"].to_str().unwrap().to_owned()
    };
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"),
        "{set_cookie}"
    );

    let form = |current: &str, new: &str, confirm: &str| {
        vec![
            ("csrf".to_owned(), user.csrf.clone()),
            ("current".into(), current.into()),
            ("new".into(), new.into()),
            ("confirm".into(), confirm.into()),
        ]
    };
    let post = |f: Vec<(String, String)>| {
        let user = &user;
        async move {
            let f: Vec<(&str, &str)> = f.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            user.post("/account/password", &f).await.status().as_u16()
        }
    };
    assert_eq!(
        post(form("wrong", "a new long password", "a new long password")).await,
        400
    );
    assert_eq!(post(form(PASSWORD, "short", "short")).await, 400);
    assert_eq!(
        post(form(PASSWORD, "a new long password", "different")).await,
        400
    );
    assert_eq!(
        post(form(PASSWORD, "a new long password", "a new long password")).await,
        200
    );
    assert_eq!(
        app.submit_login(&cookie_client(), "a@example.com", PASSWORD)
            .await
            .status(),
        401
    );
    assert_eq!(
        app.submit_login(&cookie_client(), "a@example.com", "a new long password")
            .await
            .status(),
        303
    );

    assert_eq!(
        user.post("/logout", &[("csrf", &user.csrf)]).await.status(),
        303
    );
    assert_eq!(user.get("/sites").await.status(), 303, "logged out");
}

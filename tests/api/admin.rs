//! Admin flows: sites (create, edit, delete with confirmation), users
//! (create, role, password reset), each refusing bad input unchanged.

use tickertape::accounts::{users, Role};
use tickertape::domain::Email;
use tickertape::storage::{sites, Resolution};

use crate::helpers::*;

#[tokio::test]
async fn admins_create_edit_and_delete_sites() {
    let app = spawn_app_with(|s| {
        s.ingest.site_refresh_secs = 1;
        s.ingest.site_purge_after_secs = 30;
    })
    .await;
    app.add_user("admin@example.com", Role::Admin).await;
    app.add_user("owner@example.com", Role::Owner).await;
    let admin = app.login("admin@example.com").await;
    let csrf = admin.csrf.clone();

    let r = admin
        .post(
            "/admin/sites",
            &[
                ("csrf", &csrf),
                ("domain", "New.Test"),
                ("aliases", "www.new.test, m.new.test"),
                ("name", "New"),
                ("owners", "owner@example.com"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let site = sites::list(&app.store).await.unwrap().pop().unwrap();
    assert_eq!(site.domain.as_str(), "new.test");
    assert_eq!(site.aliases.len(), 2);
    assert_eq!(
        r.headers()["location"],
        format!("/sites/{}/settings?done=site-added", site.id).as_str()
    );
    // The settings page confirms and shows both snippets with the site's id.
    let (_, html) = admin
        .text(&format!("/sites/{}/settings?done=site-added", site.id))
        .await;
    assert!(html.contains("The site was added"), "confirmation");
    assert!(
        html.contains("/tt.js") && html.contains(&format!("data-site=&#34;{}&#34;", site.id)),
        "script snippet"
    );
    assert!(
        html.contains(&format!("pixel.gif?site={}", site.id)),
        "pixel snippet"
    );
    // The pixel knows the new site at once.
    assert_eq!(
        app.pixel(&format!(
            "site={}&page=https%3A%2F%2Fm.new.test%2Fx",
            site.id
        ))
        .await
        .status(),
        200
    );
    // The owner sees it.
    let owner = app.login("owner@example.com").await;
    assert!(owner.text("/sites").await.1.contains("new.test"));

    // Bad input: nothing changes.
    for form in [
        vec![("domain", "https://bad.test/blog")],
        vec![("domain", "new.test")], // taken
        vec![("domain", "other.test"), ("aliases", "m.new.test")], // alias taken
        vec![("domain", "other.test"), ("owners", "ghost@example.com")],
        vec![("domain", "other.test"), ("aliases", "bad_host")],
    ] {
        let mut form = form.clone();
        form.push(("csrf", &csrf));
        let r = admin.post("/admin/sites", &form).await;
        assert_eq!(r.status(), 400, "{form:?}");
        assert!(r.text().await.unwrap().contains("Nothing was added"));
    }
    assert_eq!(sites::list(&app.store).await.unwrap().len(), 1);

    // Edit name, aliases and owners.
    let r = admin
        .post(
            &format!("/admin/sites/{}", site.id),
            &[
                ("csrf", &csrf),
                ("name", "Renamed"),
                ("aliases", "www.new.test"),
                ("owners", ""),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let edited = sites::list(&app.store).await.unwrap().pop().unwrap();
    assert_eq!(
        (
            edited.name.as_str(),
            edited.aliases.len(),
            edited.owners.len()
        ),
        ("Renamed", 1, 0)
    );
    assert_eq!(
        owner.get(&format!("/sites/{}", site.id)).await.status(),
        404,
        "no longer an owner"
    );

    // Delete needs the domain typed in; then the site and its buckets go.
    let r = admin
        .post(
            &format!("/admin/sites/{}/delete", site.id),
            &[("csrf", &csrf), ("confirm", "wrong.test")],
        )
        .await;
    assert_eq!(r.status(), 400);
    assert_eq!(sites::list(&app.store).await.unwrap().len(), 1);
    assert!(app.total_views(Resolution::Minute).await > 0);
    let r = admin
        .post(
            &format!("/admin/sites/{}/delete", site.id),
            &[("csrf", &csrf), ("confirm", "new.test")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert!(sites::list(&app.store).await.unwrap().is_empty());
    assert_eq!(
        app.pixel(&format!("site={}&page=/", site.id))
            .await
            .status(),
        404,
        "the pixel forgets it"
    );
    // The buckets go once every instance has dropped the site (30 s here).
    assert!(app.bucket_count().await > 0, "purged only after the wait");
    app.clock.advance(chrono::TimeDelta::seconds(31));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // The site's mark goes last, once its buckets are gone.
    while app.bucket_count().await > 0
        || !sites::deleted_domains(&app.store).await.unwrap().is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "not purged");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The domain is free again.
    let r = admin
        .post(
            "/admin/sites",
            &[("csrf", &csrf), ("domain", "new.test"), ("name", "Again")],
        )
        .await;
    assert_eq!(r.status(), 303);
}

/// Hits answered 200 just before their site is deleted, still waiting in
/// the journal, are not applied: they would re-create the buckets the
/// purge is about to remove. Another site's hits in the same
/// batch are counted.
#[tokio::test]
async fn hits_in_flight_do_not_recreate_a_deleted_sites_buckets() {
    let app = spawn_app_with(|s| {
        s.ingest.apply_window_ms = 3_000;
        s.ingest.rollups_window_ms = 3_000;
    })
    .await;
    // A batch waits its window only for hits younger than it (older ones
    // are a backlog, applied at once): the clock is set ahead of the real
    // one, so these hits wait the whole window.
    app.clock
        .set(chrono::Utc::now() + chrono::TimeDelta::days(1));
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let doomed = app.add_site("doomed.test", &[]).await;
    let kept = app.add_site("kept.test", &[]).await;
    for i in 0..20 {
        let r = app
            .pixel(&format!("site={}&page=/p{}", doomed.id, i % 3))
            .await;
        assert_eq!(r.status(), 200);
    }
    for _ in 0..5 {
        let r = app.pixel(&format!("site={}&page=/", kept.id)).await;
        assert_eq!(r.status(), 200);
    }
    assert!(app.journal.stats().backlog() > 0, "still in the journal");
    let r = admin
        .post(
            &format!("/admin/sites/{}/delete", doomed.id),
            &[("csrf", &admin.csrf), ("confirm", "doomed.test")],
        )
        .await;
    assert_eq!(r.status(), 303);
    app.settle().await;
    let doomed_buckets = app
        .store
        .db()
        .collection::<bson::Document>(Resolution::Minute.collection())
        .count_documents(bson::doc! {"page": {"$regex": "^doomed\\.test/"}})
        .await
        .unwrap();
    assert_eq!(
        doomed_buckets, 0,
        "no bucket re-created for the deleted site"
    );
    assert_eq!(
        app.total_views(Resolution::Day).await,
        5,
        "the other site counted"
    );
}

#[tokio::test]
async fn admins_manage_users_and_the_last_admin_stays() {
    let app = spawn_app().await;
    let me = app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let csrf = admin.csrf.clone();

    let r = admin
        .post(
            "/admin/users",
            &[
                ("csrf", &csrf),
                ("email", "New@Example.com"),
                ("role", "owner"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let new = users::find_by_email(&app.store, &Email::parse("new@example.com").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(new.role, Role::Owner);

    for form in [
        vec![
            ("email", "new@example.com"),
            ("role", "owner"),
            ("password", "a long password"),
        ],
        vec![
            ("email", "not-an-email"),
            ("role", "owner"),
            ("password", "a long password"),
        ],
        vec![
            ("email", "x@example.com"),
            ("role", "root"),
            ("password", "a long password"),
        ],
        vec![
            ("email", "x@example.com"),
            ("role", "owner"),
            ("password", "short"),
        ],
    ] {
        let mut form = form.clone();
        form.push(("csrf", &csrf));
        assert_eq!(
            admin.post("/admin/users", &form).await.status(),
            400,
            "{form:?}"
        );
    }
    assert_eq!(users::count(&app.store).await.unwrap(), 2);

    // Promote, then demote; the last admin cannot demote themself.
    let path = format!("/admin/users/{}/role", new.id);
    assert_eq!(
        admin
            .post(&path, &[("csrf", &csrf), ("role", "admin")])
            .await
            .status(),
        303
    );
    assert_eq!(
        admin
            .post(&path, &[("csrf", &csrf), ("role", "owner")])
            .await
            .status(),
        303
    );
    let r = admin
        .post(
            &format!("/admin/users/{}/role", me.id),
            &[("csrf", &csrf), ("role", "owner")],
        )
        .await;
    assert_eq!(r.status(), 400);
    assert_eq!(
        users::find(&app.store, me.id).await.unwrap().unwrap().role,
        Role::Admin
    );
    assert_eq!(
        admin
            .post(
                "/admin/users/not-a-uuid/role",
                &[("csrf", &csrf), ("role", "owner")]
            )
            .await
            .status(),
        404
    );

    // A password reset logs the user out everywhere and lets the new one in.
    let user = app.login("new@example.com").await;
    let r = admin
        .post(
            &format!("/admin/users/{}/password", new.id),
            &[("csrf", &csrf), ("password", "reset to this one")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(user.get("/sites").await.status(), 303, "old session ended");
    assert_eq!(
        app.submit_login(&cookie_client(), "new@example.com", "reset to this one")
            .await
            .status(),
        303
    );
}

/// The links between the admin pages, and between the account
/// pages, mark the page shown (`aria-current`), exactly one of them; an
/// admin site's own page marks Sites as its section.
#[tokio::test]
async fn section_links_mark_the_page_shown() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("nav.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let site_page = format!("/admin/sites/{}", site.id);
    for (path, section, current, how) in [
        ("/admin/sites", "Admin", "Sites", "page"),
        ("/admin/users", "Admin", "Users", "page"),
        ("/admin/preallocation", "Admin", "Preallocation", "page"),
        ("/admin/system", "Admin", "System", "page"),
        (site_page.as_str(), "Admin", "Sites", "true"),
        ("/account/password", "Account", "Password", "page"),
        ("/account/totp", "Account", "Two-factor login", "page"),
        ("/account/tokens", "Account", "API tokens", "page"),
    ] {
        let (status, html) = admin.text(path).await;
        assert_eq!(status, 200, "{path}");
        let start = format!("<nav class=\"subnav\" aria-label=\"{section}\">");
        assert_eq!(html.matches(&start).count(), 1, "{path}");
        let at = html.find(&start).unwrap() + start.len();
        let nav = &html[at..at + html[at..].find("</nav>").unwrap()];
        let marked: Vec<&str> = nav
            .split("<a ")
            .skip(1)
            .filter(|a| a.contains("aria-current="))
            .collect();
        assert_eq!(marked.len(), 1, "{path}: {nav}");
        assert!(
            marked[0].contains(&format!("aria-current=\"{how}\">{current}</a>")),
            "{path}: {nav}"
        );
        assert_eq!(
            nav.matches("<a ").count(),
            if section == "Admin" { 4 } else { 3 }
        );
    }
}

#[tokio::test]
async fn a_site_name_with_a_control_character_is_refused_on_every_form_and_the_cli() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("named.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    let admin = app.login("admin@example.com").await;
    let message = "one line of text, without control characters";
    for name in ["Evil\r\nsite", "tab\there", "bell\u{7}", "next\u{85}line"] {
        let r = admin
            .post(
                "/admin/sites",
                &[
                    ("csrf", &admin.csrf),
                    ("domain", "other.test"),
                    ("name", name),
                ],
            )
            .await;
        assert_eq!(r.status(), 400, "add {name:?}");
        assert!(r.text().await.unwrap().contains(message), "add {name:?}");
        let r = admin
            .post(
                &format!("/admin/sites/{}", site.id),
                &[("csrf", &admin.csrf), ("name", name)],
            )
            .await;
        assert_eq!(r.status(), 400, "edit {name:?}");
        assert!(r.text().await.unwrap().contains(message), "edit {name:?}");
    }
    let owner = app.login("owner@example.com").await;
    let r = owner
        .post(
            &format!("/sites/{}/settings", site.id),
            &[
                ("csrf", &owner.csrf),
                ("name", "a\nb"),
                ("time_zone", "UTC"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains(message));
    let names: Vec<String> = sites::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["named.test"], "nothing was saved");

    // The command line refuses it too, naming the option.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tickertape"))
        .args([
            "site",
            "add",
            "--domain",
            "cli.test",
            "--name",
            "two\nlines",
        ])
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("--name") && said.contains(message), "{said}");
    assert_eq!(sites::list(&app.store).await.unwrap().len(), 1);
}

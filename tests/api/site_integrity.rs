//! What a hostile owner, a forged hit or two admins acting at once cannot
//! do to the sites and their reports: out-of-range minutes, probing which
//! hosts are tracked, squatting hosts, racing demotions and claims, and
//! sources posing as the report's own rows. Each test is a regression test
//! of a hole a probe found.

use tickertape::accounts::Role;

use crate::credentials::owned_site;
use crate::helpers::*;
use crate::json_api::{create_token, get as api_get};
use crate::share_links::create_link;

/// A `minute` outside the years reports accept (2000 to 2200) is a
/// 400 on every route that reads one; before, anything past 2262 or before
/// year 0 panicked the handler (`Resolution::floor`) and dropped the
/// connection.
#[tokio::test]
async fn an_out_of_range_minute_is_a_400_everywhere() {
    let w = owned_site().await;
    let app = &w.app;
    let token = create_token(&w.owner, "reader", None).await;
    let link = create_link(&w.owner, &w.site, "board", "").await;
    let visitor = app.anonymous();
    let minutes = [
        "9999-12-31T23:59",
        "2263-01-01T00:00",
        "262143-12-31T23:59",
        "0000-01-01T00:00",
        "-0001-01-01T00:00",
        "1677-09-21T00:12",
        "2201-01-01T00:00",
        "1999-12-31T23:59",
    ];
    for minute in minutes {
        let q = format!("path=/x&minute={minute}");
        let page = w.owner.get(&format!("/sites/{}/page?{q}", w.site)).await;
        assert_eq!(page.status(), 400, "page report, {minute}");
        let csv = w
            .owner
            .get(&format!("/sites/{}/seconds.csv?{q}", w.site))
            .await;
        assert_eq!(csv.status(), 400, "seconds.csv, {minute}");
        let shared = visitor.get(&format!("{link}/page?{q}")).await;
        assert_eq!(shared.status(), 400, "share link, {minute}");
        let api = api_get(
            app,
            &token,
            &format!("/api/v1/sites/{}/page/seconds?{q}", w.site),
        )
        .await;
        assert_eq!(api.status, 400, "API, {minute}");
        assert_eq!(api.json["error"]["parameter"], "minute");
    }
    // The bounds themselves still read.
    for minute in ["2000-01-01T00:00", "2200-12-31T23:59", "2026-11-22T10:01"] {
        let q = format!("path=/x&minute={minute}");
        let page = w.owner.get(&format!("/sites/{}/page?{q}", w.site)).await;
        assert_eq!(page.status(), 200, "page report, {minute}");
        let api = api_get(
            app,
            &token,
            &format!("/api/v1/sites/{}/page/seconds?{q}", w.site),
        )
        .await;
        assert_eq!(api.status, 200, "API, {minute}");
    }
}

/// What the pixel answers: status and reason.
async fn pixel_answer(app: &TestApp, method: &str, query: &str, referer: &str) -> (u16, String) {
    let r = app
        .http
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}/pixel.gif?{query}", app.address),
        )
        .header("referer", referer)
        .send()
        .await
        .unwrap();
    let reason = r
        .headers()
        .get("x-tickertape-reason")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status().as_u16(), reason)
}

/// A hit without `site` was a 404 `unknown-site` for a host the
/// instance does not track and counted for one it does, so anyone could
/// list the tracked domains. Every answer that depends on the Referer's
/// host is now the same for both.
#[tokio::test]
async fn the_pixel_answers_tracked_and_untracked_hosts_alike() {
    let app = spawn_app().await;
    app.add_site("tracked.example.com", &[]).await;
    let cases = [
        ("", "/a"),
        ("page=%2Fb", "/a"),
        ("page=https%3A%2F%2Felsewhere.example.org%2Fx", "/a"),
        ("page=%7B%22%24gt%22%3A%22%22%7D", "/a"),
        ("page=%2F%01", "/a"),
    ];
    for method in ["GET", "HEAD"] {
        for (query, path) in cases {
            let tracked = pixel_answer(
                &app,
                method,
                query,
                &format!("https://tracked.example.com{path}"),
            )
            .await;
            let untracked = pixel_answer(
                &app,
                method,
                query,
                &format!("https://untracked.example.net{path}"),
            )
            .await;
            assert_eq!(tracked, untracked, "{method} {query:?}");
        }
    }
    app.settle().await;
    let pages: Vec<String> = app
        .buckets(tickertape::storage::Resolution::Minute)
        .await
        .into_iter()
        .map(|b| b.page)
        .collect();
    assert!(
        pages.contains(&"tracked.example.com/a".to_owned()),
        "{pages:?}"
    );
    assert!(pages.iter().all(|p| p.starts_with("tracked.example.com/")));
}

/// The sites whose domain or aliases hold `host`.
async fn sites_holding(app: &TestApp, host: &str) -> usize {
    tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .iter()
        .filter(|s| s.owns_host(host))
        .count()
}

async fn minute_pages(app: &TestApp) -> Vec<String> {
    app.buckets(tickertape::storage::Resolution::Minute)
        .await
        .into_iter()
        .map(|b| b.page)
        .collect()
}

/// An owner allowed to add sites squatted `www.bob.test`,
/// `localhost` and 2,000 more in seconds, and a Referer-only hit from the
/// real site then counted for the squatter. Owners may now add only public,
/// registrable names, a bounded number of sites, and their hosts take hits
/// found by the Referer only once an admin has confirmed them (a hit naming
/// the site by its id counts at once: the id in the snippet is the proof).
#[tokio::test]
async fn owners_add_only_public_hosts_a_bounded_number_and_unconfirmed() {
    let app = spawn_app_with(|s| {
        s.accounts.owners_add_sites = true;
        s.accounts.owner_max_sites = 3;
    })
    .await;
    app.add_user("squatter@example.com", Role::Owner).await;
    let owner = app.login("squatter@example.com").await;
    let add = |domain: &'static str| {
        let owner = &owner;
        async move {
            owner
                .post(
                    "/sites/new",
                    &[("csrf", &owner.csrf), ("domain", domain), ("name", "")],
                )
                .await
                .status()
                .as_u16()
        }
    };
    for refused in [
        "localhost",
        "127.0.0.1",
        "www.bob.test",
        "printer.local",
        "com",
        "co.uk",
        "github.io",
    ] {
        assert_eq!(add(refused).await, 400, "{refused}");
    }
    assert_eq!(sites_holding(&app, "localhost").await, 0);
    assert_eq!(add("www.bob-shop.com").await, 303);
    assert_eq!(add("second.example.org").await, 303);
    assert_eq!(add("third.example.org").await, 303);
    assert_eq!(add("fourth.example.org").await, 400, "at most 3 per owner");
    assert_eq!(
        tickertape::storage::sites::list(&app.store)
            .await
            .unwrap()
            .len(),
        3
    );
    // An alias an owner adds must be public too.
    let site = tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.domain.as_str() == "www.bob-shop.com")
        .unwrap();
    let settings = format!("/sites/{}/settings", site.id);
    for alias in ["localhost", "10.0.0.1", "shop.test"] {
        let r = owner
            .post(
                &settings,
                &[("csrf", &owner.csrf), ("name", ""), ("aliases", alias)],
            )
            .await;
        assert_eq!(r.status(), 400, "{alias}");
    }

    // Referer-only: not counted (answered like any untracked host); by id:
    // counted.
    let referer = [("referer", "https://www.bob-shop.com/secret/admin-panel")];
    let r = app.pixel_with("", &referer).await;
    assert_eq!(r.status(), 200);
    let r = app
        .pixel_with(&format!("site={}&page=/by-id", site.id), &[])
        .await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    assert_eq!(
        minute_pages(&app).await,
        vec!["www.bob-shop.com/by-id".to_owned()]
    );

    // An admin's save confirms the hosts: now the Referer counts.
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (_, html) = admin.text(&format!("/admin/sites/{}", site.id)).await;
    assert!(html.contains("id=\"unconfirmed\""), "the admin is told");
    let r = admin
        .post(
            &format!("/admin/sites/{}", site.id),
            &[
                ("csrf", &admin.csrf),
                ("name", ""),
                ("aliases", ""),
                ("owners", "squatter@example.com"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let r = app.pixel_with("", &referer).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    assert!(minute_pages(&app)
        .await
        .contains(&"www.bob-shop.com/secret/admin-panel".to_owned()));
}

/// Two concurrent demotions left no admin. Each round, two admins
/// demote each other at the same moment: one wins, one admin stays.
#[tokio::test]
async fn concurrent_demotions_keep_an_admin() {
    let app = std::sync::Arc::new(spawn_app().await);
    let a = app.add_user("a@example.com", Role::Admin).await;
    let b = app.add_user("b@example.com", Role::Admin).await;
    let (la, lb) = (
        std::sync::Arc::new(app.login("a@example.com").await),
        std::sync::Arc::new(app.login("b@example.com").await),
    );
    for round in 0..8 {
        for user in [a.id, b.id] {
            tickertape::accounts::users::set_role(&app.store, user, Role::Admin)
                .await
                .unwrap();
        }
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let demote = |by: std::sync::Arc<Login>, whom: uuid::Uuid| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                by.post(
                    &format!("/admin/users/{whom}/role"),
                    &[("csrf", &by.csrf), ("role", "owner")],
                )
                .await
                .status()
                .as_u16()
            })
        };
        let (x, y) = (demote(la.clone(), b.id), demote(lb.clone(), a.id));
        let statuses = [x.await.unwrap(), y.await.unwrap()];
        let admins = tickertape::accounts::users::list(&app.store)
            .await
            .unwrap()
            .into_iter()
            .filter(|u| u.is_admin())
            .count();
        assert_eq!(admins, 1, "round {round}: {statuses:?}");
        assert!(statuses.contains(&303), "round {round}: {statuses:?}");
    }
    // Nor can two admins delete each other at once.
    for user in [a.id, b.id] {
        tickertape::accounts::users::set_role(&app.store, user, Role::Admin)
            .await
            .unwrap();
    }
    let (x, y) = tokio::join!(
        tickertape::accounts::users::delete(&app.store, a.id),
        tickertape::accounts::users::delete(&app.store, b.id)
    );
    assert!(x.is_ok() != y.is_ok(), "{x:?} {y:?}");
    assert!(matches!(
        x.err().or(y.err()),
        Some(tickertape::accounts::users::UserError::LastAdmin)
    ));
}

/// Two sites could hold the same alias (two admins adding it at
/// once). Each round, two sites claim one new host at the same moment (as
/// an alias, or as a new site's domain): exactly one gets it.
#[tokio::test]
async fn concurrent_claims_of_one_host_leave_it_to_one_site() {
    use tickertape::storage::sites::{self, NewSite, SiteChanges};
    let app = spawn_app().await;
    let one = app.add_site("one.example.com", &[]).await;
    let two = app.add_site("two.example.com", &[]).await;
    let alias = |site: &tickertape::storage::sites::Site, host: &str| {
        let changes = SiteChanges {
            name: String::new(),
            aliases: vec![tickertape::domain::DomainName::parse(host).unwrap()],
            owners: vec![],
        };
        let (store, site) = (app.store.clone(), site.clone());
        async move { sites::update(&store, &site, changes).await.is_ok() }
    };
    for round in 0..8 {
        let host = format!("shared{round}.example.com");
        let won = if round % 2 == 0 {
            let (x, y) = tokio::join!(alias(&one, &host), alias(&two, &host));
            [x, y]
        } else {
            let new = NewSite {
                domain: tickertape::domain::DomainName::parse(&host).unwrap(),
                aliases: vec![],
                name: None,
                owners: vec![],
                time_zone: tickertape::domain::TimeZone::UTC,
            };
            let (x, y) = tokio::join!(alias(&one, &host), sites::insert(&app.store, new, t0()));
            [x, y.is_ok()]
        };
        assert_eq!(won.iter().filter(|w| **w).count(), 1, "round {round}");
        assert_eq!(sites_holding(&app, &host).await, 1, "round {round}");
    }
}

/// A referring host `(other)` made a row that looked like the
/// CSV's overflow row, and `direct` or look-alike letters could pose as
/// other rows. Such sources now count as direct, and look-alikes show in
/// their IDNA form.
#[tokio::test]
async fn sources_cannot_pose_as_the_reports_own_rows() {
    let w = owned_site().await;
    let app = &w.app;
    let hits = [
        "page=%2Fx&ref=https%3A%2F%2F(other)%2F",
        "page=%2Fx&ref=https%3A%2F%2F(other%2520sources)%2F",
        "page=%2Fx&ref=https%3A%2F%2Fdirect%2F",
        "page=%2Fx%3Futm_source%3DDirect&ref=",
        "page=%2Fx&ref=https%3A%2F%2Fg%D0%BE%D0%BEgle.com%2F",
        "page=%2Fx%3Futm_source%3Dg%25D0%25BE%25D0%25BEgle.com&ref=",
        "page=%2Fx&ref=https%3A%2F%2Fgoogle.com%2F",
    ];
    for query in hits {
        let r = app.pixel(&format!("site={}&{query}", w.site)).await;
        assert_eq!(r.status(), 200, "{query}");
    }
    app.settle().await;
    let (status, csv) = w
        .owner
        .text(&format!("/sites/{}/sources.csv?range=24h", w.site))
        .await;
    assert_eq!(status, 200);
    let mut rows: Vec<(String, String)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let mut cells = l.split(',');
            (
                cells.next().unwrap().to_owned(),
                cells.next().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        vec![
            // The referrer naming "(other sources)" gave its view no
            // source: it is counted in the report's own row of views
            // without one, and no source took that row's name.
            ("(none)".to_owned(), "1".to_owned()),
            ("direct".to_owned(), "4".to_owned()),
            ("google.com".to_owned(), "1".to_owned()),
            ("xn--ggle-55da.com".to_owned(), "2".to_owned()),
        ],
        "{csv}"
    );
}

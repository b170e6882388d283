//! Share links: made by an owner or admin, read-only views of one site's
//! reports, revocable at once, expiring, rate-limited, and never leaking
//! the token through the Referer.

use tickertape::accounts::Role;
use tickertape::storage::sites;

use crate::helpers::*;

struct World {
    app: TestApp,
    alpha: String,
}

/// alpha.test (a@) has 4,321 views on /secret-page; bravo.test (b@) has
/// 9,876 on /secret-b.
async fn world_with(configure: impl FnOnce(&mut tickertape::settings::Settings)) -> World {
    let app = spawn_app_with(configure).await;
    let a = app.add_user("a@example.com", Role::Owner).await;
    let b = app.add_user("b@example.com", Role::Owner).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let alpha = app.add_site("alpha.test", &[]).await;
    let bravo = app.add_site("bravo.test", &[]).await;
    for (site, owner) in [(&alpha, a.id), (&bravo, b.id)] {
        app.set_owners(site, &[owner]).await;
    }
    let hits: Vec<(&str, _)> = (0..4321)
        .map(|_| ("alpha.test/secret-page", t0()))
        .chain((0..9876).map(|_| ("bravo.test/secret-b", t0())))
        .collect();
    app.write_hits(&hits).await;
    World {
        alpha: alpha.id.to_string(),
        app,
    }
}

async fn world() -> World {
    world_with(|_| {}).await
}

/// Creates a link on the site's share page; returns its path (`/share/…`).
pub(crate) async fn create_link(login: &Login, site: &str, label: &str, expires: &str) -> String {
    let r = login
        .post(
            &format!("/sites/{site}/share"),
            &[
                ("csrf", &login.csrf),
                ("label", label),
                ("expires", expires),
            ],
        )
        .await;
    assert_eq!(r.status(), 200, "link created");
    let page = r.text().await.unwrap();
    let start = page.find("id=\"new-link\">").expect("the link is shown") + 14;
    let end = start + page[start..].find('<').unwrap();
    let url = &page[start..end];
    let path = &url[url.find("/share/").unwrap()..];
    assert_eq!(path.len(), "/share/tt_share_".len() + 64, "{path}");
    path.to_owned()
}

async fn link_count(app: &TestApp) -> u64 {
    app.store
        .db()
        .collection::<bson::Document>("share_links")
        .count_documents(bson::doc! {})
        .await
        .unwrap()
}

#[tokio::test]
async fn a_share_link_shows_one_sites_reports_and_nothing_else() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let link = create_link(&a, &w.alpha, "for the board", "").await;
    let visitor = app.anonymous();

    for path in [
        link.clone(),
        format!("{link}?range=7d"),
        format!("{link}/page?path=/secret-page"),
        format!("{link}/page?path=/secret-page&range=custom&from=2026-11-22&to=2026-11-22"),
    ] {
        let r = visitor.get(&path).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["referrer-policy"], "no-referrer", "{path}");
        assert_eq!(r.headers()["cache-control"], "no-store");
        let body = r.text().await.unwrap();
        assert!(body.contains("4,321"), "{path} shows the numbers");
        assert!(body.contains("id=\"shared-view\""));
        for absent in [
            "/settings",
            "Tracking code",
            ".csv",
            "Log out",
            "/sites/",
            "bravo.test",
            "9,876",
            "pixel.gif",
            "tt.js",
        ] {
            assert!(!body.contains(absent), "{path} shows {absent}");
        }
    }
    // Links inside the shared view stay inside it.
    let (_, dashboard) = visitor.text(&link).await;
    assert!(dashboard.contains(&format!("href=\"{link}/page?path=")));
    // Another site's page through this link is read under this site: 0.
    let (status, body) = visitor.text(&format!("{link}/page?path=/secret-b")).await;
    assert_eq!(status, 200);
    assert!(!body.contains("9,876") && !body.contains("9876"));
    // Nothing but the two reports.
    for path in [
        format!("{link}/settings"),
        format!("{link}/series.csv"),
        format!("{link}/pages.csv"),
        format!("{link}/seconds.csv?path=/secret-page&minute=2026-11-22T10:01"),
        format!("{link}/status.json"),
    ] {
        let r = visitor.get(&path).await;
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(r.headers()["referrer-policy"], "no-referrer", "{path}");
        assert!(!r.text().await.unwrap().contains("4,321"));
    }
    // The list shows when it was made and last used.
    let (_, list) = a.text(&format!("/sites/{}/share", w.alpha)).await;
    assert!(list.contains("for the board"));
    assert!(
        list.matches("2026-11-22 10:01 UTC").count() >= 2,
        "created and last used"
    );
    assert!(!list.contains(&link[7..]), "the secret is shown once only");
    let stored: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<bson::Document>("share_links")
            .find(bson::doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert!(
        !stored[0].to_string().contains(&link[17..]),
        "stored hashed"
    );
}

#[tokio::test]
async fn only_the_sites_owners_and_admins_manage_its_links_and_revoking_is_immediate() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let b = app.login("b@example.com").await;
    let admin = app.login("admin@example.com").await;
    let share = format!("/sites/{}/share", w.alpha);
    assert_eq!(b.get(&share).await.status(), 404);
    let r = b
        .post(
            &share,
            &[("csrf", &b.csrf), ("label", "mine now"), ("expires", "")],
        )
        .await;
    assert_eq!(r.status(), 404);
    assert_eq!(app.anonymous().get(&share).await.status(), 303);
    assert_eq!(link_count(app).await, 0);

    let by_admin = create_link(&admin, &w.alpha, "by admin", "").await;
    let by_owner = create_link(&a, &w.alpha, "by owner", "30").await;
    let (_, list) = a.text(&share).await;
    assert!(list.contains("by admin") && list.contains("by owner"));
    let visitor = app.anonymous();
    assert_eq!(visitor.get(&by_admin).await.status(), 200);
    assert_eq!(visitor.get(&by_owner).await.status(), 200);

    let id = |label: &str| {
        let list = list.clone();
        let row = &list[list.find(label).unwrap()..];
        let start = row.find("/share/").unwrap() + 7;
        row[start..start + 36].to_owned()
    };
    let revoke = format!("{share}/{}/revoke", id("by owner"));
    let sure = ("confirm", "yes");
    assert_eq!(
        b.post(&revoke, &[("csrf", &b.csrf), sure]).await.status(),
        404
    );
    assert_eq!(
        a.post(&revoke, &[("csrf", "nope"), sure]).await.status(),
        403
    );
    // Without the "Sure" box, the link keeps working.
    assert_eq!(
        admin.post(&revoke, &[("csrf", &admin.csrf)]).await.status(),
        400
    );
    assert_eq!(visitor.get(&by_owner).await.status(), 200);
    let r = admin.post(&revoke, &[("csrf", &admin.csrf), sure]).await;
    assert_eq!(r.status(), 303);
    let r = visitor.get(&by_owner).await;
    assert_eq!(r.status(), 404, "revoked: refused at once");
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");
    assert!(!r.text().await.unwrap().contains("4,321"));
    assert_eq!(
        visitor
            .get(&format!("{by_owner}/page?path=/secret-page"))
            .await
            .status(),
        404
    );
    assert_eq!(
        visitor.get(&by_admin).await.status(),
        200,
        "the other link still works"
    );
    // Revoking again is a 404 that changes nothing.
    assert_eq!(
        a.post(&revoke, &[("csrf", &a.csrf), sure]).await.status(),
        404
    );
    assert_eq!(link_count(app).await, 1);
    // A site marked deleted opens nothing through its links at once; the
    // purge takes the links with its buckets.
    let alpha = sites::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.domain.as_str() == "alpha.test")
        .unwrap();
    sites::mark_deleted(&app.store, &alpha, t0()).await.unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    assert_eq!(visitor.get(&by_admin).await.status(), 404);
    tickertape::storage::site_purge::purge_due(&app.store, t0(), chrono::TimeDelta::zero())
        .await
        .unwrap();
    assert_eq!(link_count(app).await, 0);
}

#[tokio::test]
async fn an_expired_link_is_refused() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let link = create_link(&a, &w.alpha, "one day", "1").await;
    let visitor = app.anonymous();
    assert_eq!(visitor.get(&link).await.status(), 200);
    app.clock
        .advance(chrono::TimeDelta::hours(24) - chrono::TimeDelta::seconds(1));
    assert_eq!(
        visitor.get(&link).await.status(),
        200,
        "still within its day"
    );
    app.clock.advance(chrono::TimeDelta::seconds(1));
    for path in [link.clone(), format!("{link}/page?path=/secret-page")] {
        let r = visitor.get(&path).await;
        assert_eq!(r.status(), 410, "{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains("expired") && !body.contains("4,321"));
    }
    let (_, list) = a.text(&format!("/sites/{}/share", w.alpha)).await;
    assert!(list.contains("expired 2026-11-23 10:01 UTC"));
}

#[tokio::test]
async fn bad_links_and_bad_forms_are_refused_and_change_nothing() {
    let w = world().await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let share = format!("/sites/{}/share", w.alpha);
    let long = "x".repeat(81);
    for (label, expires, field_says) in [
        ("", "", "a name is needed"),
        (long.as_str(), "", "at most 80"),
        ("x", "0", "from 1 to 3,650"),
        ("x", "3651", "from 1 to 3,650"),
        ("x", "soon", "from 1 to 3,650"),
    ] {
        let r = a
            .post(
                &share,
                &[("csrf", &a.csrf), ("label", label), ("expires", expires)],
            )
            .await;
        assert_eq!(r.status(), 400, "{label:?} {expires:?}");
        let body = r.text().await.unwrap();
        assert!(body.to_lowercase().contains(field_says), "{field_says}");
        assert!(!body.contains("new-link"));
    }
    let r = a
        .post(
            &share,
            &[("csrf", "wrong"), ("label", "x"), ("expires", "")],
        )
        .await;
    assert_eq!(r.status(), 403);
    assert_eq!(link_count(app).await, 0);
    let visitor = app.anonymous();
    for path in [
        "/share/nonsense".to_owned(),
        format!("/share/tt_share_{}", "0".repeat(64)),
        format!("/share/tt_api_{}", "0".repeat(64)),
        format!("/share/tt_share_{}", "A".repeat(64)),
        "/share/".to_owned(),
    ] {
        let r = visitor.get(&path).await;
        assert_eq!(r.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn shared_views_are_rate_limited_per_client() {
    let w = world_with(|s| s.security.share_requests_per_minute = 3).await;
    let app = &w.app;
    let a = app.login("a@example.com").await;
    let link = create_link(&a, &w.alpha, "busy", "").await;
    let visitor = app.anonymous();
    for _ in 0..3 {
        assert_eq!(visitor.get(&link).await.status(), 200);
    }
    let r = visitor.get(&link).await;
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert!(!r.text().await.unwrap().contains("4,321"));
    // Guessing tokens counts too: no free lookups once limited.
    assert_eq!(
        visitor
            .get(&format!("/share/tt_share_{}", "0".repeat(64)))
            .await
            .status(),
        429
    );
    // The owner's own pages are not limited.
    assert_eq!(a.get(&format!("/sites/{}", w.alpha)).await.status(), 200);
}

#[tokio::test]
async fn a_share_link_shows_the_breakdowns_and_goals() {
    use tickertape::domain::Goal;
    let app = spawn_app().await;
    let a = app.add_user("a@example.com", Role::Owner).await;
    let site = app.add_site("panels.test", &[]).await;
    app.set_owners(&site, &[a.id]).await;
    let goal = Goal::parse("event", "Signup").unwrap();
    sites::add_goal(&app.store, &site.id, &goal).await.unwrap();
    app.ingest.directory.reload(&app.store).await.unwrap();
    for q in ["page=%2F%3Futm_medium%3Demail", "page=%2F&e=Signup"] {
        let r = app
            .pixel_with(
                &format!("site={}&{q}", site.id),
                &[("user-agent", BROWSER_UA)],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;
    let owner = app.login("a@example.com").await;
    let link = create_link(&owner, &site.id.to_string(), "panels", "").await;
    let visitor = app.anonymous();
    let (status, html) = visitor.text(&format!("{link}?range=24h")).await;
    assert_eq!(status, 200);
    let first = |html: &str, table: &str| {
        let rows = table_rows(html, table);
        rows.first()
            .map(|r| [r[0].clone(), r[1].clone()])
            .unwrap_or_else(|| panic!("no rows in {table}"))
    };
    assert_eq!(first(&html, "breakdown-browser"), ["Chrome", "1"]);
    assert_eq!(first(&html, "breakdown-medium"), ["email", "1"]);
    assert_eq!(first(&html, "breakdown-event"), ["Signup", "1"]);
    assert_eq!(first(&html, "goals-table"), ["Signup", "1"]);
    assert!(!html.contains("/settings"), "no way to the settings");
    let (status, page) = visitor.text(&format!("{link}/page?path=/&range=24h")).await;
    assert_eq!(status, 200);
    assert_eq!(first(&page, "breakdown-browser"), ["Chrome", "1"]);
}

/// The visits a funnel table shows for `step` (`<code>step</code>` then
/// its visits cell).
fn funnel_step_visits(html: &str, step: &str) -> i64 {
    let cell = format!("<code>{step}</code></td><td class=\"num\">");
    let at = html
        .find(&cell)
        .unwrap_or_else(|| panic!("no step {step} in {html}"))
        + cell.len();
    html[at..html[at..].find('<').unwrap() + at]
        .replace(',', "")
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_share_link_shows_its_sites_funnels_filtered_and_read_only() {
    use chrono::{TimeZone, Utc};
    let app = spawn_app().await;
    let a = app.add_user("a@example.com", Role::Owner).await;
    let alpha = app.add_site("alpha.test", &[]).await;
    let bravo = app.add_site("bravo.test", &[]).await;
    // One owner of both: the link is what limits the view, not its maker.
    app.set_owners(&alpha, &[a.id]).await;
    app.set_owners(&bravo, &[a.id]).await;
    let (alpha_id, bravo_id) = (alpha.id.to_string(), bravo.id.to_string());
    // Four visits of one visitor on 20 November, two hours apart: two from
    // google.com (one reaches /signup), two direct (one reaches it; one
    // starts at /signup, which is no funnel's first step).
    let at = |h: u32, m: u32| Utc.with_ymd_and_hms(2026, 11, 20, h, m, 0).unwrap();
    for (time, page, source) in [
        (at(9, 0), "/pricing", Some("google.com")),
        (at(9, 1), "/signup", None),
        (at(11, 0), "/pricing", Some("google.com")),
        (at(13, 0), "/pricing", None),
        (at(13, 1), "/signup", None),
        (at(15, 0), "/signup", None),
    ] {
        app.clock.set(time);
        let referrer = source.map_or(String::new(), |s| format!("&ref=https://{s}/"));
        let r = app
            .pixel(&format!("site={alpha_id}&page={page}{referrer}"))
            .await;
        assert_eq!(r.status(), 200);
        // Each in before the next: a minute apart on the app's clock, but
        // microseconds apart in fact, and a funnel depends on their order.
        app.settle().await;
    }
    app.clock.set(t0());
    let login = app.login("a@example.com").await;
    for (site, name) in [
        (&alpha_id, "Pricing to signup"),
        (&bravo_id, "Bravo checkout"),
    ] {
        let r = login
            .post(
                &format!("/sites/{site}/funnels"),
                &[
                    ("csrf", login.csrf.as_str()),
                    ("name", name),
                    ("step1", "/pricing"),
                    ("step2", "/signup"),
                ],
            )
            .await;
        assert_eq!(r.status(), 303, "{name} added");
    }
    let funnel_of = |site: &tickertape::storage::sites::Site| {
        let store = app.store.clone();
        let id = site.id;
        async move {
            tickertape::storage::funnels::list(&store, &id)
                .await
                .unwrap()[0]
                .id
        }
    };
    let (alpha_funnel, bravo_funnel) = (funnel_of(&alpha).await, funnel_of(&bravo).await);
    let link = create_link(&login, &alpha_id, "funnels", "").await;
    let visitor = app.anonymous();

    // The dashboard leads to the funnels, inside the link.
    let range = "range=custom&from=2026-11-20&to=2026-11-20";
    let (status, dashboard) = visitor.text(&format!("{link}?{range}")).await;
    assert_eq!(status, 200);
    assert!(
        dashboard.contains(&format!("href=\"{link}/funnels?range=custom")),
        "{dashboard}"
    );

    // The figures are the API's, unfiltered and filtered, and the filter
    // changes them (so it is applied, not dropped).
    let token = crate::json_api::create_token(&login, "funnels", None).await;
    let mut seen = Vec::new();
    for filter in ["", "&filter=source%3Agoogle.com"] {
        let (status, page) = visitor
            .text(&format!("{link}/funnels?{range}{filter}"))
            .await;
        assert_eq!(status, 200, "{filter}");
        assert!(page.contains("Pricing to signup") && page.contains("id=\"shared-view\""));
        let api = crate::json_api::get(
            &app,
            &token,
            &format!("/api/v1/sites/{alpha_id}/funnel?step=/pricing&step=/signup&{range}{filter}"),
        )
        .await;
        assert_eq!(api.status, 200, "{}", api.json);
        let want: Vec<i64> = api.json["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["visits"].as_i64().unwrap())
            .collect();
        let got = vec![
            funnel_step_visits(&page, "/pricing"),
            funnel_step_visits(&page, "/signup"),
        ];
        assert_eq!(got, want, "{filter}");
        seen.push(got);
        // Read-only and inside the link: no settings, form, export,
        // other site or way out.
        for absent in [
            "/settings",
            "Define funnels",
            "method=\"post\"",
            ".csv",
            "/sites/",
            "bravo",
            "Bravo checkout",
            "Log out",
        ] {
            assert!(!page.contains(absent), "{filter}: the page shows {absent}");
        }
        // The funnel alone, by its id, with the filter kept.
        assert!(
            page.contains(&format!("href=\"{link}/funnels/{alpha_funnel}?")),
            "{page}"
        );
    }
    assert_eq!(seen, [vec![3, 2], vec![2, 1]]);

    let (status, one) = visitor
        .text(&format!(
            "{link}/funnels/{alpha_funnel}?{range}&filter=source%3Agoogle.com"
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            funnel_step_visits(&one, "/pricing"),
            funnel_step_visits(&one, "/signup")
        ),
        (2, 1)
    );
    // Another site's funnel through this link, a forged id, or not an id:
    // not found, nothing of it shown.
    for path in [
        format!("{link}/funnels/{bravo_funnel}"),
        format!("{link}/funnels/{}", uuid::Uuid::new_v4()),
        format!("{link}/funnels/not-a-funnel"),
    ] {
        let r = visitor.get(&path).await;
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(r.headers()["referrer-policy"], "no-referrer", "{path}");
        assert!(!r.text().await.unwrap().contains("Bravo checkout"));
    }
    // Nor does a signed-in page of one site open another site's funnel.
    let (status, _) = login
        .text(&format!("/sites/{alpha_id}/funnels/{bravo_funnel}"))
        .await;
    assert_eq!(status, 404);

    // Defining or removing through the link is not a thing.
    for (path, form) in [
        (
            format!("{link}/funnels"),
            vec![("name", "Mine"), ("step1", "/a"), ("step2", "/b")],
        ),
        (format!("{link}/funnels/remove"), vec![("funnel", "")]),
    ] {
        let r = visitor.post(&path, &form).await;
        assert_eq!(r.status(), 404, "{path}");
    }
    let r = visitor
        .post(
            &format!("{link}/funnels/remove"),
            &[("funnel", alpha_funnel.to_string().as_str())],
        )
        .await;
    assert_eq!(r.status(), 404);
    for site in [&alpha, &bravo] {
        assert_eq!(
            tickertape::storage::funnels::list(&app.store, &site.id)
                .await
                .unwrap()
                .len(),
            1
        );
    }
}

//! The reports and flows as a new site owner meets them.

use chrono::{TimeZone, Utc};
use tickertape::accounts::Role;

use crate::helpers::*;

fn at(d: u32, h: u32, m: u32, s: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, m, s).unwrap()
}

/// o.test: /a has 2 views at 14:05:07 and 1 at 14:05:31 on the 21st, and
/// 1 each hour from 11:00 on the 21st to 09:00 on the 22nd (23 views);
/// 10:00 on the 22nd (the running hour at t0) has 4.
async fn world() -> (TestApp, Login, String) {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("o.test", &[]).await;
    let mut hits = vec![
        ("o.test/a", at(21, 14, 5, 7)),
        ("o.test/a", at(21, 14, 5, 7)),
        ("o.test/a", at(21, 14, 5, 31)),
    ];
    for h in 0..23 {
        hits.push(("o.test/b", at(21, 11, 30, 0) + chrono::TimeDelta::hours(h)));
    }
    for _ in 0..4 {
        hits.push(("o.test/b", at(22, 10, 0, 30)));
    }
    app.write_hits(&hits).await;
    let admin = app.login("admin@example.com").await;
    let base = format!("/sites/{}", site.id);
    (app, admin, base)
}

#[tokio::test]
async fn the_second_by_second_breakdown_labels_every_second() {
    let (_app, admin, base) = world().await;
    let (status, html) = admin
        .text(&format!("{base}/page?path=/a&minute=2026-11-21T14:05"))
        .await;
    assert_eq!(status, 200);
    assert!(html.contains("<td>2026-11-21 14:05:07</td><td class=\"num\">2</td>"));
    assert!(html.contains("2026-11-21 14:05:31 UTC: 1 view</span>"));
    assert!(html.contains("at most 2 in one second"));
    // Axis labels every 15 seconds.
    assert!(
        html.contains(r#"<span class="x0">14:05:00</span><span class="x5 alt">14:05:15</span>"#)
    );
    assert!(
        !html.contains("<td>2026-11-21 14:05</td>"),
        "no row labelled by the minute"
    );
    // Each chart has its own title id.
    for id in ["series", "seconds"] {
        assert_eq!(
            html.matches(&format!("id=\"{id}-title\"")).count(),
            1,
            "{id}"
        );
    }
    let (_, html) = admin.text(&format!("{base}/page?path=/b")).await;
    for id in ["series", "seconds", "realtime"] {
        assert_eq!(
            html.matches(&format!("id=\"{id}-title\"")).count(),
            1,
            "{id}"
        );
    }
}

#[tokio::test]
async fn the_change_compares_complete_buckets_and_a_coarser_resolution_keeps_the_range() {
    let (_app, admin, base) = world().await;
    // Last 24 hours at 10:01:07: 11:00 on the 21st to 11:00 on the 22nd.
    let (_, by_hour) = admin.text(&format!("{base}?range=24h")).await;
    let (_, by_day) = admin.text(&format!("{base}?range=24h&res=day")).await;
    // 3 + 23 + 4: the same total either way.
    for html in [&by_hour, &by_day] {
        assert!(html.contains("id=\"total\">30<"), "{html}");
        // Only the 23 complete hours are compared, with the same 23 hours
        // of the day before (no views then), said as times.
        assert!(html.contains(
            "The current hour is still counting and left out: each change compares the complete part, \
             2026-11-21 11:00 to 2026-11-22 10:00"
        ));
        assert!(html.contains(
            "with the same stretch of the previous period, 2026-11-20 11:00 to 2026-11-21 10:00."
        ));
    }
    // By day: two bars, both partial (the range cuts both days).
    assert!(by_day.contains("2 points by day"));
    assert_eq!(by_day.matches("class=\"bar partial\"").count(), 2);
    // By hour: only the running hour is partial.
    assert_eq!(by_hour.matches("class=\"bar partial\"").count(), 1);
    assert!(by_hour.contains("2026-11-22 10:00 UTC: 4 views (partial)"));
}

#[tokio::test]
async fn a_refused_range_is_shown_next_to_the_form_with_the_input_kept() {
    let (_app, admin, base) = world().await;
    let (status, html) = admin
        .text(&format!(
            "{base}?range=custom&from=2026-11-22T10:00&to=2026-11-21T10:00&q=b"
        ))
        .await;
    assert_eq!(status, 400);
    assert!(html.contains("id=\"range-error\" role=\"alert\">The end must be after the start."));
    assert!(
        html.contains("name=\"from\" value=\"2026-11-22T10:00\""),
        "input kept"
    );
    assert!(html.contains("name=\"to\" value=\"2026-11-21T10:00\" required aria-invalid=\"true\""));
    // Both ends malformed: both are marked in one answer.
    let (status, both) = admin
        .text(&format!("{base}?range=custom&from=soon&to=later"))
        .await;
    assert_eq!(status, 400);
    assert!(
        both.contains("The start and the end must be dates"),
        "{both}"
    );
    for (name, value) in [("from", "soon"), ("to", "later")] {
        assert!(
            both.contains(&format!(
                "name=\"{name}\" value=\"{value}\" required aria-invalid=\"true\""
            )),
            "{name} marked"
        );
    }
    assert!(
        html.contains("<nav aria-label=\"Main\">"),
        "navigation present"
    );
    assert!(
        html.contains("id=\"total\">30<"),
        "the default range still shows"
    );
    let (status, html) = admin
        .text(&format!(
            "{base}?range=custom&from=2025-01-01&to=2026-11-22&res=minute"
        ))
        .await;
    assert_eq!(status, 400);
    assert!(html.contains("more than 1,500: choose a coarser resolution"));
    assert!(html.contains("<details class=\"custom\" open>"));
}

#[tokio::test]
async fn signed_in_pages_are_not_cached_and_logout_says_so() {
    let (app, admin, base) = world().await;
    for path in [
        "/sites".to_owned(),
        base.clone(),
        format!("{base}/page?path=/a"),
        format!("{base}/series.csv"),
        "/admin/sites".to_owned(),
        "/account/password".to_owned(),
    ] {
        let r = admin.get(&path).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
    }
    let r = admin.post("/logout", &[("csrf", &admin.csrf)]).await;
    assert_eq!(r.headers()["location"], "/login?signed_out=1");
    let (_, html) = admin.text("/login?signed_out=1").await;
    assert!(html.contains("You are signed out."));
    let r = admin.get(&base).await;
    assert_eq!(r.status(), 303, "the dashboard needs a login again");
    drop(app);
}

#[tokio::test]
async fn unknown_addresses_get_a_page_and_json_endpoints_get_json() {
    let (app, admin, _base) = world().await;
    let (status, html) = admin.text("/no/such/thing").await;
    assert_eq!(status, 404);
    assert!(html.contains("Page not found") && html.contains("<nav aria-label=\"Main\">"));
    let (status, html) = app.anonymous().text("/nope").await;
    assert_eq!(status, 404);
    assert!(html.contains("Page not found") && html.contains("href=\"/sites\""));
    let r = app
        .anonymous()
        .http
        .post(format!("{}/admin/api/preallocate", app.address))
        .json(&serde_json::json!({"scope": "all"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "login_required");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Sign in"));
}

#[tokio::test]
async fn empty_states_guide_the_owner() {
    let (app, admin, base) = world().await;
    let fresh = app.add_site("new.test", &[]).await;
    let (status, html) = admin.text(&format!("/sites/{}", fresh.id)).await;
    assert_eq!(status, 200);
    assert!(html.contains("Waiting for the first view"));
    assert!(
        html.contains("tt.js") && html.contains(&fresh.id.to_string()),
        "snippet"
    );
    assert!(
        html.contains("/static/waiting.js?v="),
        "checks again by itself"
    );
    let status_url = format!("/sites/{}/status.json", fresh.id);
    assert_eq!(
        admin.text(&status_url).await,
        (200, r#"{"seen":false}"#.to_owned())
    );
    assert_eq!(app.anonymous().get(&status_url).await.status(), 401);
    assert!(html.contains("No views in this period."));
    assert!(!html.contains("<svg class=\"chart\""), "no chart of zeros");
    // The first view arrives; the reload says tracking works.
    app.write_hits(&[("new.test/", at(22, 10, 0, 5))]).await;
    let (_, html) = admin.text(&format!("/sites/{}?waiting=1", fresh.id)).await;
    assert!(html.contains("id=\"first-view\""), "{html}");
    assert!(!html.contains("Waiting for the first view"));
    assert!(!html.contains("/static/waiting.js"));
    assert_eq!(
        admin.text(&status_url).await,
        (200, r#"{"seen":true}"#.to_owned())
    );
    // A page and a minute without views say so.
    let (_, html) = admin
        .text(&format!(
            "{base}/page?path=/a&range=1h&minute=2026-11-22T09:00"
        ))
        .await;
    assert!(html.contains("No views of this page in this period."));
    assert!(html.contains("No views in this minute."));
}

#[tokio::test]
async fn navigation_keeps_the_context() {
    let (_app, admin, base) = world().await;
    let (_, html) = admin.text(&format!("{base}?range=7d&q=b")).await;
    assert!(
        html.contains(&format!("href=\"{base}?range=24h&#38;q=b\"")),
        "presets keep the filter"
    );
    assert!(html.contains("id=\"pager-position\">Page 1 of 1<"));
    assert!(
        html.contains("href=\"/sites\" aria-current=\"page\""),
        "section highlighted"
    );
    let (_, html) = admin.text(&format!("{base}/page?path=/b&range=7d")).await;
    assert!(
        html.contains(&format!("href=\"{base}?range=7d\" id=\"back\"")),
        "back keeps the range"
    );
    let (_, html) = admin.text("/admin/users").await;
    assert!(html.contains("href=\"/admin/sites\" aria-current=\"page\""));
    assert!(html.contains("Signed in as admin@example.com"));
}

#[tokio::test]
async fn csv_files_are_named_after_page_and_range() {
    let (_app, admin, base) = world().await;
    let r = admin
        .get(&format!(
            "{base}/series.csv?path=/a&range=custom&from=2026-11-21&to=2026-11-21&res=hour"
        ))
        .await;
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename=\"o_test_a_2026-11-21T0000_2026-11-22T0000_hour.csv\""
    );
    let r = admin.get(&format!("{base}/pages.csv?range=24h")).await;
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename=\"o_test_2026-11-21T1100_2026-11-22T1100_pages.csv\""
    );
    let body = r.text().await.unwrap();
    assert!(
        body.starts_with("path,views,share_percent,entries,exits,visitors,time_on_page_seconds,time_kind,timed_views,scroll_depth_percent,engaged_views\r\n/b,27,90.0,0,0,0,,,0,,0\r\n"),
        "{body}"
    );
    // The last 60 minutes by minute are named as realtime, not
    // like a minute series of a chosen range.
    let r = admin
        .get(&format!(
            "{base}/seconds.csv?path=/a&minute=2026-11-21T10:00"
        ))
        .await;
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename=\"o_test_a_2026-11-21T1000_2026-11-21T1001_seconds.csv\""
    );
    let r = admin.get(&format!("{base}/realtime.csv?path=/a")).await;
    let name = r.headers()["content-disposition"].to_str().unwrap();
    assert!(
        name.starts_with("attachment; filename=\"o_test_a_") && name.ends_with("_realtime.csv\""),
        "{name}"
    );
}

#[tokio::test]
async fn admin_forms_answer_on_the_same_page_and_keep_the_input() {
    let (app, admin, _base) = world().await;
    let csrf = admin.csrf.clone();
    // A URL is normalised to its host.
    let r = admin
        .post(
            "/admin/sites",
            &[
                ("csrf", &csrf),
                ("domain", "https://Example.com:8443/"),
                ("name", "Ex"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let sites = tickertape::storage::sites::list(&app.store).await.unwrap();
    assert!(sites.iter().any(|s| s.domain.as_str() == "example.com"));
    // Refusals: the field's error, the input kept, the navigation there.
    for (form, field, says) in [
        (
            vec![("domain", "https://example.org/blog")],
            "domain",
            "without the path /blog",
        ),
        (
            vec![("domain", "example.com")],
            "domain",
            // The domain as typed, not capitalised.
            ">example.com already belongs to a site.",
        ),
        (
            vec![("domain", "other.test"), ("owners", "ghost@example.com")],
            "owners",
            "No user has the e-mail ghost@example.com",
        ),
    ] {
        let mut f = form.clone();
        f.push(("csrf", &csrf));
        let r = admin.post("/admin/sites", &f).await;
        assert_eq!(r.status(), 400, "{form:?}");
        let html = r.text().await.unwrap();
        assert!(
            html.contains(&format!("id=\"{field}-error\" role=\"alert\"")),
            "{form:?}"
        );
        assert!(html.contains(says), "{form:?}: {html}");
        assert!(
            html.contains(&format!("value=\"{}\"", form[0].1.replace('/', "&#x2f;")))
                || html.contains(&format!("value=\"{}\"", form[0].1)),
            "input kept: {form:?}"
        );
        assert!(html.contains("<nav aria-label=\"Main\">"));
    }
    assert_eq!(
        tickertape::storage::sites::list(&app.store)
            .await
            .unwrap()
            .len(),
        2
    );
    // A duplicate user.
    let r = admin
        .post(
            "/admin/users",
            &[
                ("csrf", &csrf),
                ("email", "admin@example.com"),
                ("role", "admin"),
                ("password", "long enough pw"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    // The address as typed, not capitalised as a sentence start.
    assert!(
        html.contains(
            "id=\"email-error\" role=\"alert\">admin@example.com already has an account."
        ),
        "{html}"
    );
    assert!(html.contains("value=\"admin@example.com\""), "e-mail kept");
    // Success is confirmed; an admin can delete a user.
    let r = admin
        .post(
            "/admin/users",
            &[
                ("csrf", &csrf),
                ("email", "gone@example.com"),
                ("role", "owner"),
                ("password", "long enough pw"),
            ],
        )
        .await;
    assert_eq!(r.headers()["location"], "/admin/users?done=user-added");
    let (_, html) = admin.text("/admin/users?done=user-added").await;
    assert!(html.contains("The user was added."));
    let gone = tickertape::accounts::users::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.email.as_str() == "gone@example.com")
        .unwrap();
    // The list asks for a "Sure" tick; without it the
    // user stays.
    let (_, list) = admin.text("/admin/users").await;
    assert!(list.contains(r#"<input type="checkbox" name="confirm" value="yes" required>"#));
    let delete = format!("/admin/users/{}/delete", gone.id);
    assert_eq!(admin.post(&delete, &[("csrf", &csrf)]).await.status(), 400);
    assert_eq!(
        tickertape::accounts::users::list(&app.store)
            .await
            .unwrap()
            .len(),
        2
    );
    let r = admin
        .post(&delete, &[("csrf", &csrf), ("confirm", "yes")])
        .await;
    assert_eq!(r.headers()["location"], "/admin/users?done=user-deleted");
    assert_eq!(
        tickertape::accounts::users::list(&app.store)
            .await
            .unwrap()
            .len(),
        1
    );
    // Preallocation: a site picked while "all" is selected runs nothing.
    let r = admin
        .post(
            "/admin/preallocation",
            &[
                ("csrf", &csrf),
                ("scope", "all"),
                ("site", "o.test"),
                ("page", ""),
                ("from", "2026-11-22T11:00"),
                ("hours", "3"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"scope-error\""), "{html}");
    assert!(
        html.contains("<option value=\"o.test\" selected>"),
        "site kept"
    );
    assert!(html.contains("value=\"3\""), "hours kept");
    assert!(tickertape::preallocation::runs::recent(&app.store, 5)
        .await
        .unwrap()
        .is_empty());
    let r = admin
        .post(
            "/admin/preallocation",
            &[
                ("csrf", &csrf),
                ("scope", "page"),
                ("site", ""),
                ("page", "nowhere.test/x"),
                ("from", "2026-11-22T11:00"),
                ("hours", "1"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("id=\"page-error\"") && html.contains("value=\"nowhere.test&#x2f;x\"")
            || html.contains("value=\"nowhere.test/x\""),
        "{html}"
    );
}

#[tokio::test]
async fn a_one_time_password_is_replaced_at_first_login() {
    let app = spawn_app().await;
    let admin = app.add_user("first@example.com", Role::Admin).await;
    tickertape::accounts::users::require_password_change(&app.store, admin.id, t0())
        .await
        .unwrap();
    let http = cookie_client();
    let r = app.submit_login(&http, "first@example.com", PASSWORD).await;
    assert_eq!(r.headers()["location"], "/account/password");
    let page = app.page_text(&http, "/account/password").await;
    assert!(page.contains("id=\"one-time\""));
    assert!(page.contains("Signed in as <strong>first@example.com</strong>"));
    let csrf = csrf_in(&page).unwrap();
    let r = http
        .post(format!("{}/account/password", app.address))
        .form(&[
            ("csrf", csrf.as_str()),
            ("current", PASSWORD),
            ("new", "my very own password"),
            ("confirm", "my very own password"),
        ])
        .send()
        .await
        .unwrap();
    // On to the sites list, which says it was done.
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/sites?done=password");
    let sites = app.page_text(&http, "/sites?done=password").await;
    assert!(
        sites.contains("id=\"done\">Your password was changed.<"),
        "{sites}"
    );
    let user = tickertape::accounts::users::find(&app.store, admin.id)
        .await
        .unwrap()
        .unwrap();
    assert!(!user.must_change_password);
    let r = app
        .submit_login(
            &cookie_client(),
            "first@example.com",
            "my very own password",
        )
        .await;
    assert_eq!(r.headers()["location"], "/sites");
}

/// A site's minutes are read from its hour buckets' `minutes`
/// slots (one document per page-hour instead of sixty); the figures are
/// the minute buckets' to the view, edges included.
#[tokio::test]
async fn site_minutes_read_from_hour_buckets_match_the_minute_buckets() {
    use tickertape::reports::{queries, Period, RangeQuery, Scope};
    let app = spawn_app().await;
    let site = app.add_site("m.test", &[]).await;
    let mut hits = Vec::new();
    for (i, page) in ["m.test/a", "m.test/b", "m.test/c"].iter().enumerate() {
        for m in 0..150 {
            if (m + i) % 7 < 3 {
                hits.push((
                    *page,
                    at(22, 8, 0, 3) + chrono::TimeDelta::minutes(m as i64),
                ));
            }
        }
    }
    app.write_hits(&hits).await;
    let pages: Vec<tickertape::domain::Page> = ["m.test/a", "m.test/b", "m.test/c"]
        .iter()
        .map(|p| tickertape::domain::Page::parse(p).unwrap())
        .collect();
    for (from, to) in [
        ("2026-11-22T08:59", "2026-11-22T10:01"),
        ("2026-11-22T09:30", "2026-11-22T09:31"),
    ] {
        let q = RangeQuery {
            range: Some("custom".into()),
            from: Some(from.into()),
            to: Some(to.into()),
            res: Some("minute".into()),
        };
        let period = Period::resolve(&q, t0()).unwrap();
        let site_series = queries::series(&app.store, &Scope::Site(&site.domain), &period)
            .await
            .unwrap();
        let (overview, top) =
            queries::site_overview(&app.store, &Scope::Site(&site.domain), &period)
                .await
                .unwrap();
        let mut by_pages = vec![0_i64; site_series.len()];
        let mut page_totals = Vec::new();
        for page in &pages {
            let s = queries::series(&app.store, &Scope::Page(page), &period)
                .await
                .unwrap();
            for (slot, p) in by_pages.iter_mut().zip(&s) {
                *slot += p.views;
            }
            page_totals.push(queries::total(&s));
        }
        let views: Vec<i64> = site_series.iter().map(|p| p.views).collect();
        assert_eq!(views, by_pages, "{from}..{to}");
        assert_eq!(
            queries::rollup(&period, &overview)
                .iter()
                .map(|p| p.views)
                .collect::<Vec<_>>(),
            by_pages
        );
        let mut top_totals: Vec<i64> = top.iter().map(|(_, v)| *v).collect();
        top_totals.sort();
        page_totals.retain(|v| *v > 0);
        page_totals.sort();
        assert_eq!(top_totals, page_totals);
        assert!(queries::total(&site_series) > 0);
    }
    // The site's minute figures come from the hour buckets alone: without
    // the minute buckets they are the same.
    let q = RangeQuery {
        range: Some("custom".into()),
        from: Some("2026-11-22T08:59".into()),
        to: Some("2026-11-22T10:01".into()),
        res: Some("minute".into()),
    };
    let period = Period::resolve(&q, t0()).unwrap();
    let before = queries::series(&app.store, &Scope::Site(&site.domain), &period)
        .await
        .unwrap();
    app.store
        .db()
        .collection::<bson::Document>("views_minute")
        .delete_many(bson::doc! {})
        .await
        .unwrap();
    let after = queries::series(&app.store, &Scope::Site(&site.domain), &period)
        .await
        .unwrap();
    assert_eq!(before, after);
    assert!(queries::total(&after) > 0);
}

#[tokio::test]
async fn owners_manage_their_own_sites_when_allowed() {
    // Not allowed by default: 403, nothing added.
    let app = spawn_app().await;
    app.add_user("owner@example.com", Role::Owner).await;
    let owner = app.login("owner@example.com").await;
    assert_eq!(owner.get("/sites/new").await.status(), 403);
    let r = owner
        .post(
            "/sites/new",
            &[("csrf", &owner.csrf), ("domain", "mine.test")],
        )
        .await;
    assert_eq!(r.status(), 403);
    assert!(!owner.text("/sites").await.1.contains("href=\"/sites/new\""));
    assert!(tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .is_empty());

    let app = spawn_app_with(|s| s.accounts.owners_add_sites = true).await;
    let user = app.add_user("owner@example.com", Role::Owner).await;
    app.add_user("other@example.com", Role::Owner).await;
    let owner = app.login("owner@example.com").await;
    assert!(owner.text("/sites").await.1.contains("href=\"/sites/new\""));
    // The form asks for the zone; a bad one is flagged,
    // keeps the input and adds nothing.
    let (_, form) = owner.text("/sites/new").await;
    assert!(
        form.contains("id=\"time_zone\" name=\"time_zone\""),
        "{form}"
    );
    let r = owner
        .post(
            "/sites/new",
            &[
                ("csrf", &owner.csrf),
                ("domain", "mine.test"),
                ("time_zone", "Europe/Atlantis"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"time_zone-error\"") && html.contains("value=\"Europe/Atlantis\""));
    assert!(tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .is_empty());
    let r = owner
        .post(
            "/sites/new",
            &[
                ("csrf", &owner.csrf),
                ("domain", "https://Mine-Site.org/"),
                ("name", "Mine"),
                ("time_zone", "Europe/Berlin"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let site = tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(
        (site.domain.as_str(), site.owners.clone()),
        ("mine-site.org", vec![user.id])
    );
    assert_eq!(site.time_zone.name(), "Europe/Berlin");
    app.ingest.directory.reload(&app.store).await.unwrap();
    let (_, list) = owner.text("/sites").await;
    assert!(
        list.contains("mine-site.org · <span class=\"zone\">Europe/Berlin</span>"),
        "the sites list says the zone"
    );
    // Rename and aliases; a bad alias is answered on the page.
    let settings = format!("/sites/{}/settings", site.id);
    let r = owner
        .post(
            &settings,
            &[
                ("csrf", &owner.csrf),
                ("name", "Renamed"),
                ("aliases", "bad_host"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"aliases-error\"") && html.contains("value=\"bad_host\""));
    let r = owner
        .post(
            &settings,
            &[
                ("csrf", &owner.csrf),
                ("name", "Renamed"),
                ("aliases", "www.mine-site.org"),
            ],
        )
        .await;
    assert_eq!(
        r.headers()["location"],
        format!("{settings}?done=site-saved").as_str()
    );
    let site = tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(site.name, "Renamed");
    assert_eq!(site.aliases[0].as_str(), "www.mine-site.org");
    assert_eq!(site.owners, vec![user.id], "owners unchanged");
    // Another owner cannot touch it.
    let other = app.login("other@example.com").await;
    let r = other
        .post(
            &settings,
            &[("csrf", &other.csrf), ("name", "Taken"), ("aliases", "")],
        )
        .await;
    assert_eq!(r.status(), 404);
    assert_eq!(
        tickertape::storage::sites::list(&app.store).await.unwrap()[0].name,
        "Renamed"
    );
}

/// A snippet that points at a loopback or plain-http
/// address is flagged where it is shown: the waiting dashboard and the
/// tracking-code page.
#[tokio::test]
async fn snippets_for_an_address_visitors_cannot_use_are_flagged() {
    for (public_url, says) in [
        (None, "only this machine reaches"),
        (Some("http://stats.example.com"), "over plain http"),
    ] {
        let app = spawn_app_with(|s| s.public_url = public_url.map(str::to_owned)).await;
        app.add_user("admin@example.com", Role::Admin).await;
        let site = app.add_site("flag.test", &[]).await;
        let admin = app.login("admin@example.com").await;
        for path in [
            format!("/sites/{}", site.id),
            format!("/sites/{}/settings", site.id),
        ] {
            let (status, html) = admin.text(&path).await;
            assert_eq!(status, 200, "{path}");
            let warning = html
                .split("id=\"url-warning\">")
                .nth(1)
                .unwrap_or_else(|| panic!("{path} flags {public_url:?}"))
                .split('<')
                .next()
                .unwrap();
            assert!(
                warning.contains(says) && warning.contains("TICKERTAPE_PUBLIC_URL"),
                "{path}: {warning}"
            );
        }
    }
}

/// The 403 and 404 pages of a signed-in user keep the
/// navigation (with its section), and an anonymous visitor's have none.
#[tokio::test]
async fn error_pages_keep_the_navigation_of_a_signed_in_user() {
    let app = spawn_app().await;
    app.add_user("owner@example.com", Role::Owner).await;
    let owner = app.login("owner@example.com").await;
    let unknown = format!("/sites/{}", uuid::Uuid::new_v4());
    for (path, status, title, section) in [
        ("/admin/users", 403, "Admins only", None),
        (unknown.as_str(), 404, "Not found", Some("Sites")),
        ("/no/such/page", 404, "Page not found", Some("Sites")),
    ] {
        let (got, html) = owner.text(path).await;
        assert_eq!(got, status, "{path}");
        assert!(
            html.contains(&format!("<h1>{title}</h1>")),
            "{path}: {html}"
        );
        assert!(
            html.contains("<nav aria-label=\"Main\">"),
            "{path}: no navigation"
        );
        assert!(html.contains("Signed in as owner@example.com"), "{path}");
        if let Some(section) = section {
            assert!(
                html.contains(&format!("aria-current=\"page\">{section}<")),
                "{path}: {section} marked"
            );
        }
    }
    let r = app.anonymous().get(&unknown).await;
    assert_eq!(r.status(), 303, "anonymous: to the login page");
    let html = app
        .anonymous()
        .get("/no/such/page")
        .await
        .text()
        .await
        .unwrap();
    assert!(!html.contains("<nav aria-label=\"Main\">"));
}

/// The dashboard says how many views came in the last
/// five minutes, as a plain figure in the page and at `now.json`, which
/// the page's script polls; only for those who may see the site.
#[tokio::test]
async fn the_dashboard_says_how_many_views_came_in_the_last_five_minutes() {
    let (app, admin, base) = world().await;
    // The clock is at 10:01:07: the four views at 10:00:30 count, those
    // at 09:30 do not.
    let (_, html) = admin.text(&base).await;
    assert!(
        html.contains("<strong id=\"now-views\">4</strong> <span id=\"now-noun\">views</span> in the last 5 minutes"),
        "{html}"
    );
    assert!(html.contains("/static/now.js?v="), "refreshes by itself");
    assert!(html.contains(&format!("data-now=\"{base}/now.json\"")));
    let url = format!("{base}/now.json");
    let (status, body) = now_json(&admin, &url).await;
    assert_eq!(
        (status, &body["views"], &body["minutes"]),
        (200, &4.into(), &5.into())
    );
    // One more this minute; one six minutes ago, outside the window.
    app.write_hits(&[
        ("o.test/a", at(22, 10, 1, 0)),
        ("o.test/a", at(22, 9, 55, 59)),
    ])
    .await;
    assert_eq!(now_json(&admin, &url).await.1["views"], 5);
    let (_, html) = admin.text(&base).await;
    assert!(html.contains("<strong id=\"now-views\">5</strong>"));
    // Without a session, JSON 401; another owner's site, 404; and the
    // script is served.
    let (status, body) = now_json(&app.anonymous(), &url).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &"login_required".into())
    );
    app.add_user("other@example.com", Role::Owner).await;
    let other = app.login("other@example.com").await;
    assert_eq!(now_json(&other, &url).await.0, 404);
    let script = app
        .anonymous()
        .get(tickertape::web::assets::now_script_url())
        .await;
    assert_eq!(script.status(), 200);
    assert!(script.text().await.unwrap().contains("now-views"));
}

async fn now_json(login: &Login, url: &str) -> (u16, serde_json::Value) {
    let (status, body) = login.text(url).await;
    (status, serde_json::from_str(&body).unwrap())
}

//! Issue 24, the second security and privacy probe: one regression test
//! (or more) per item, named after it.

use tickertape::accounts::Role;

use crate::helpers::*;
use crate::json_api::{create_token, get as api_get};
use crate::share_links::create_link;

/// An owner with one site holding a view, logged in.
struct Owned {
    app: TestApp,
    owner: Login,
    site: String,
}

async fn owned_site() -> Owned {
    let app = spawn_app().await;
    let owner = app.add_user("owner@example.com", Role::Owner).await;
    let site = app.add_site("owned.test", &[]).await;
    app.set_owners(&site, &[owner.id]).await;
    app.write_hits(&[("owned.test/x", t0())]).await;
    let login = app.login("owner@example.com").await;
    Owned {
        site: site.id.to_string(),
        owner: login,
        app,
    }
}

/// Item 1: a `minute` outside the years reports accept (2000 to 2200) is a
/// 400 on every route that reads one; before, anything past 2262 or before
/// year 0 panicked the handler (`Resolution::floor`) and dropped the
/// connection.
#[tokio::test]
async fn item1_an_out_of_range_minute_is_a_400_everywhere() {
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
        let page = w
            .owner
            .get(&format!("/sites/{}/page?{q}", w.site))
            .await;
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
        let page = w
            .owner
            .get(&format!("/sites/{}/page?{q}", w.site))
            .await;
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

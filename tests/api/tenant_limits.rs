//! Budgets an owner or an anonymous client can fill: the most sites an
//! owner may add, the event names a site may use a day, and what
//! Plausible's endpoint tells about the domains tracked here. None may be
//! passed by racing, nor filled by junk so that real figures stop.

use tickertape::accounts::Role;

use crate::helpers::*;

/// Thirty adds at once by an owner allowed three sites: the count and
/// the insert were two steps, so a burst made twelve.
#[tokio::test]
async fn a_burst_of_adds_stays_at_the_owners_site_cap() {
    let app = spawn_app_with(|s| {
        s.accounts.owners_add_sites = true;
        s.accounts.owner_max_sites = 3;
    })
    .await;
    app.add_user("racer@example.com", Role::Owner).await;
    let owner = app.login("racer@example.com").await;
    let domains: Vec<String> = (0..30).map(|i| format!("site{i}.example.org")).collect();
    let answers = futures::future::join_all(domains.iter().map(|domain| {
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
    }))
    .await;
    let sites = tickertape::storage::sites::list(&app.store).await.unwrap();
    assert_eq!(sites.len(), 3, "answers: {answers:?}");
    assert_eq!(
        answers.iter().filter(|&&s| s == 303).count(),
        3,
        "{answers:?}"
    );
    assert!(
        answers.iter().all(|&s| s == 303 || s == 400),
        "every other add is refused with the form's answer: {answers:?}"
    );
    // The refusal says why.
    let (_, html) = {
        let r = owner
            .post(
                "/sites/new",
                &[
                    ("csrf", &owner.csrf),
                    ("domain", "one-more.example.org"),
                    ("name", ""),
                ],
            )
            .await;
        (r.status(), r.text().await.unwrap())
    };
    assert!(html.contains("You already own 3 sites"), "{html}");
}

/// A hundred made-up event names from one client used to fill a site's
/// day, and its real `Signup` was then refused until midnight. Now one
/// client brings only its share of new names, and the site's goals
/// always pass, through the pixel and the peers' endpoints alike.
#[tokio::test]
async fn junk_event_names_cannot_lock_out_a_sites_real_events() {
    use tickertape::ingest::event_cap::{MAX_EVENT_NAMES_PER_DAY, NEW_NAMES_PER_CLIENT};
    let app =
        spawn_app_with(|s| s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await;
    app.add_user("owner@example.com", Role::Admin).await;
    let site = app.add_site("junk.test", &[]).await;
    let other = app.add_site("calm.test", &[]).await;
    let owner = app.login("owner@example.com").await;
    let r = owner
        .post(
            &format!("/sites/{}/goals", site.id),
            &[("csrf", &owner.csrf), ("kind", "event"), ("name", "Signup")],
        )
        .await;
    assert_eq!(r.status(), 303);
    let pixel = |client: String, name: String| {
        let app = &app;
        let id = site.id;
        async move {
            app.pixel_with(
                &format!("site={id}&page=%2F&e={name}"),
                &[("x-forwarded-for", &client)],
            )
            .await
            .status()
            .as_u16()
        }
    };
    // One client's flood: its share counts, the rest is refused.
    let mut answers = Vec::new();
    for i in 0..MAX_EVENT_NAMES_PER_DAY {
        answers.push(pixel("198.51.100.7".into(), format!("junk{i}")).await);
    }
    let admitted = answers.iter().filter(|&&s| s == 200).count();
    assert_eq!(admitted, NEW_NAMES_PER_CLIENT as usize, "{answers:?}");
    assert!(answers.iter().all(|&s| s == 200 || s == 403));
    // The same flood through Plausible's endpoint (by domain) gets no more.
    let http = reqwest::Client::new();
    for i in 0..20 {
        let r = http
            .post(format!("{}/api/event", app.address))
            .header("x-forwarded-for", "198.51.100.7")
            .header("content-type", "text/plain")
            .body(format!(
                r#"{{"n":"more{i}","u":"https://junk.test/","d":"junk.test","r":null}}"#
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "answered as Plausible does");
    }
    // Another visitor's new name still has room.
    assert_eq!(pixel("192.0.2.10".into(), "Download".into()).await, 200);
    // A botnet fills the rest of the day ...
    let mut i = 0;
    loop {
        let client = format!("10.{}.{}.1", i / 250, i % 250);
        let status = pixel(client, format!("bot{i}")).await;
        i += 1;
        if status == 403 {
            break;
        }
        assert!(i < 10 * MAX_EVENT_NAMES_PER_DAY, "the site cap holds");
    }
    assert_eq!(pixel("192.0.2.11".into(), "Other".into()).await, 403);
    // ... and the goal still counts, from anyone.
    assert_eq!(pixel("192.0.2.12".into(), "Signup".into()).await, 200);
    assert_eq!(pixel("198.51.100.7".into(), "Signup".into()).await, 200);
    // Another site's budget is its own.
    let r = app
        .pixel_with(
            &format!("site={}&page=%2F&e=junk0", other.id),
            &[("x-forwarded-for", "198.51.100.7")],
        )
        .await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let events = breakdown_counts(
        &app,
        "site_breakdowns_day",
        bson::doc! {"site": "junk.test"},
        tickertape::domain::Dimension::Event,
    )
    .await;
    assert_eq!(events.get("Signup"), Some(&2), "{events:?}");
}

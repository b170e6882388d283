//! Pages in headless Chromium, at desktop and phone sizes, with
//! axe-core finding no serious or critical violation: API tokens, share
//! links, a shared dashboard and page report, and a report shown coarser
//! because of the retention.

use tickertape::accounts::Role;
use tickertape::domain::Retention;

use crate::helpers::*;
use crate::webdriver::Browser;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharing_and_token_pages_read_right_in_a_browser() {
    let app = spawn_app_with(|s| s.retention.set(Retention::parse(7, 0, 0).unwrap())).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("shared.test", &[]).await;
    let old = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 1, 10, 15, 30).unwrap();
    let hits: Vec<(&str, _)> = (0..40)
        .map(|i| {
            (
                "shared.test/blog/hello",
                t0() - chrono::TimeDelta::minutes(i),
            )
        })
        .chain((0..5).map(|_| ("shared.test/about", t0())))
        .chain((0..3).map(|_| ("shared.test/about", old)))
        .collect();
    app.write_hits(&hits).await;

    let browser = Browser::start(BROWSER_UA).await;
    let base = app.address.clone();
    browser.goto(&format!("{base}/login")).await;
    browser.type_into("#email", "admin@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click_and_load("form button[type=submit]").await;

    // A token made in the browser is shown once.
    browser.goto(&format!("{base}/account/tokens")).await;
    browser.type_into("#name", "wall display").await;
    browser
        .click_and_load("#new ~ form button[type=submit]")
        .await;
    let token = browser.text("#new-token").await;
    assert!(token.starts_with("tt_api_"), "{token}");
    // A share link too.
    let share = format!("/sites/{}/share", site.id);
    browser.goto(&format!("{base}{share}")).await;
    browser.type_into("#label", "for the team").await;
    browser.type_into("#expires", "30").await;
    browser
        .click_and_load("#new ~ form button[type=submit]")
        .await;
    let link = browser.text("#new-link").await;
    let link = &link[link.find("/share/").unwrap()..];

    let dash = format!("/sites/{}", site.id);
    let pages: Vec<(&str, String)> = vec![
        ("api-tokens", "/account/tokens".into()),
        ("share-links", share.clone()),
        (
            "retention-note",
            format!("{dash}?range=custom&from=2026-11-01T10:00&to=2026-11-01T11:00&res=minute"),
        ),
        ("shared-dashboard", link.to_owned()),
        ("shared-page", format!("{link}/page?path=%2Fblog%2Fhello")),
    ];
    let (mut violations, mut too_wide) = (Vec::new(), Vec::new());
    for (size, width, height) in [("desktop", 1366, 900), ("phone", 390, 844)] {
        browser.resize(width, height).await;
        for (name, path) in &pages {
            browser.goto(&format!("{base}{path}")).await;
            for v in browser.axe_violations().await {
                violations.push(format!("{size} {name}: {v}"));
            }
            browser.screenshot(&format!("sharing-{size}-{name}")).await;
            // Every table fits the window (a phone too); nothing,
            // the page included, scrolls sideways.
            for wide in browser.sideways().await {
                too_wide.push(format!("{size} {name}: {wide}"));
            }
        }
    }
    assert!(too_wide.is_empty(), "wider than the window: {too_wide:#?}");
    assert!(violations.is_empty(), "axe-core: {violations:#?}");

    // The shared view: the reports, none of the owner's tools.
    browser.goto(&format!("{base}{link}")).await;
    assert_eq!(browser.count("#shared-view").await, 1);
    assert_eq!(browser.count("a[href*='/settings']").await, 0);
    assert_eq!(browser.count("a[href$='.csv'], a[href*='.csv?']").await, 0);
    assert_eq!(browser.count("form[action='/logout']").await, 0);
    // Following a top page stays inside the share.
    browser.click_and_load("#pages a").await;
    assert!(browser.url().await.contains(&format!("{link}/page?")));
    assert_eq!(browser.text("#total").await, "40");
    // The retention note reads where the range is.
    browser
        .goto(&format!(
            "{base}{dash}?range=custom&from=2026-11-01T10:00&to=2026-11-01T11:00&res=minute"
        ))
        .await;
    assert!(browser
        .text("#retention-note")
        .await
        .starts_with("Shown by hour"));
    assert_eq!(browser.text("#total").await, "3");
    browser.quit().await;
}

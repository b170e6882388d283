//! Reports in a site's IANA zone against totals worked out by hand: UTC,
//! Europe/Berlin across both DST changes of 2026, Asia/Kolkata (+05:30).

use chrono::{DateTime, TimeZone, Utc};
use tickertape::accounts::Role;

use crate::helpers::*;

fn utc(mo: u32, d: u32, h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, mo, d, h, m, s).unwrap()
}

/// The same views on three sites, one per zone. Berlin local times in
/// the comments.
fn hits() -> Vec<DateTime<Utc>> {
    vec![
        utc(3, 28, 22, 59, 59),  // Mar 28 23:59:59 CET
        utc(3, 28, 23, 0, 0),    // Mar 29 00:00 CET
        utc(3, 29, 0, 30, 0),    // Mar 29 01:30 CET
        utc(3, 29, 1, 15, 0),    // Mar 29 03:15 CEST (02:00-03:00 skipped)
        utc(3, 29, 21, 59, 0),   // Mar 29 23:59 CEST
        utc(3, 29, 22, 0, 0),    // Mar 30 00:00 CEST
        utc(10, 24, 21, 59, 0),  // Oct 24 23:59 CEST
        utc(10, 24, 22, 0, 0),   // Oct 25 00:00 CEST
        utc(10, 25, 0, 30, 0),   // Oct 25 02:30 CEST (the first 02:30)
        utc(10, 25, 1, 30, 0),   // Oct 25 02:30 CET (the second)
        utc(10, 25, 22, 59, 0),  // Oct 25 23:59 CET
        utc(10, 25, 23, 0, 0),   // Oct 26 00:00 CET
        utc(11, 21, 18, 29, 0),  // Kolkata: Nov 21 23:59 IST
        utc(11, 21, 18, 30, 0),  // Nov 22 00:00 IST
        utc(11, 21, 18, 45, 0),  // Nov 22 00:15 IST
        utc(11, 22, 18, 29, 59), // Nov 22 23:59:59 IST
        utc(11, 22, 18, 30, 0),  // Nov 23 00:00 IST
    ]
}

async fn world() -> (TestApp, Login, [String; 3]) {
    world_grouped("auto").await
}

/// `grouping`: where site reports add up (`TICKERTAPE_REPORT_GROUPING`).
async fn world_grouped(grouping: &str) -> (TestApp, Login, [String; 3]) {
    let grouping = grouping.to_owned();
    let app = spawn_app_with(move |s| s.database.report_grouping = grouping).await;
    app.add_user("admin@example.com", Role::Admin).await;
    let mut bases = Vec::new();
    for (domain, zone) in [
        ("utc.test", "UTC"),
        ("berlin.test", "Europe/Berlin"),
        ("kolkata.test", "Asia/Kolkata"),
    ] {
        let site = app.add_site_in(domain, &[], zone).await;
        let page = format!("{domain}/a");
        let hits: Vec<(&str, DateTime<Utc>)> =
            hits().into_iter().map(|t| (page.as_str(), t)).collect();
        app.write_hits(&hits).await;
        bases.push(format!("/sites/{}", site.id));
    }
    let admin = app.login("admin@example.com").await;
    (app, admin, bases.try_into().unwrap())
}

/// `series.csv` rows as (timestamp, views).
async fn rows(admin: &Login, path: &str) -> Vec<(String, i64)> {
    let (status, body) = admin.text(path).await;
    assert_eq!(status, 200, "{path}: {body}");
    body.lines()
        .skip(1)
        .map(|l| {
            let (t, v) = l.split_once(',').unwrap();
            (t.to_owned(), v.parse().unwrap())
        })
        .collect()
}

fn nonzero(rows: &[(String, i64)]) -> Vec<(&str, i64)> {
    rows.iter()
        .filter(|(_, v)| *v != 0)
        .map(|(t, v)| (t.as_str(), *v))
        .collect()
}

#[tokio::test]
async fn local_days_are_exact_across_both_dst_changes_and_half_hour_offsets() {
    for grouping in ["app", "server"] {
        local_days_are_exact(grouping).await;
    }
}

async fn local_days_are_exact(grouping: &str) {
    let (_app, admin, [utc_site, berlin, kolkata]) = world_grouped(grouping).await;
    let by_day = |base: &str, from: &str, to: &str| {
        format!("{base}/series.csv?range=custom&from={from}&to={to}&res=day")
    };

    // UTC: plain UTC days.
    let r = rows(&admin, &by_day(&utc_site, "2026-03-28", "2026-03-30")).await;
    assert_eq!(
        r,
        vec![
            ("2026-03-28T00:00:00Z".into(), 2),
            ("2026-03-29T00:00:00Z".into(), 4),
            ("2026-03-30T00:00:00Z".into(), 0),
        ]
    );

    // Berlin, spring: Mar 29 has 23 hours and 4 views.
    let r = rows(&admin, &by_day(&berlin, "2026-03-28", "2026-03-30")).await;
    assert_eq!(
        r,
        vec![
            ("2026-03-28T00:00:00+01:00".into(), 1),
            ("2026-03-29T00:00:00+01:00".into(), 4),
            ("2026-03-30T00:00:00+02:00".into(), 1),
        ]
    );
    let hours = rows(
        &admin,
        &format!("{berlin}/series.csv?range=custom&from=2026-03-29&to=2026-03-29&res=hour"),
    )
    .await;
    assert_eq!(hours.len(), 23, "a 23-hour day");
    assert_eq!(hours[1].0, "2026-03-29T01:00:00+01:00");
    assert_eq!(
        hours[2].0, "2026-03-29T03:00:00+02:00",
        "02:00 does not exist"
    );
    assert_eq!(
        nonzero(&hours),
        vec![
            ("2026-03-29T00:00:00+01:00", 1),
            ("2026-03-29T01:00:00+01:00", 1),
            ("2026-03-29T03:00:00+02:00", 1),
            ("2026-03-29T23:00:00+02:00", 1),
        ]
    );

    // Berlin, autumn: Oct 25 has 25 hours, 02:00 twice.
    let r = rows(&admin, &by_day(&berlin, "2026-10-24", "2026-10-26")).await;
    assert_eq!(
        r,
        vec![
            ("2026-10-24T00:00:00+02:00".into(), 1),
            ("2026-10-25T00:00:00+02:00".into(), 4),
            ("2026-10-26T00:00:00+01:00".into(), 1),
        ]
    );
    let hours = rows(
        &admin,
        &format!("{berlin}/series.csv?range=custom&from=2026-10-25&to=2026-10-25&res=hour"),
    )
    .await;
    assert_eq!(hours.len(), 25, "a 25-hour day");
    assert_eq!(
        nonzero(&hours),
        vec![
            ("2026-10-25T00:00:00+02:00", 1),
            ("2026-10-25T02:00:00+02:00", 1),
            ("2026-10-25T02:00:00+01:00", 1),
            ("2026-10-25T23:00:00+01:00", 1),
        ]
    );

    // Kolkata: days start at 18:30 UTC, inside a UTC hour.
    let r = rows(&admin, &by_day(&kolkata, "2026-11-21", "2026-11-23")).await;
    assert_eq!(
        r,
        vec![
            ("2026-11-21T00:00:00+05:30".into(), 1),
            ("2026-11-22T00:00:00+05:30".into(), 3),
            ("2026-11-23T00:00:00+05:30".into(), 1),
        ]
    );
    // Its local hours start at :30 UTC.
    let hours = rows(
        &admin,
        &format!("{kolkata}/series.csv?range=custom&from=2026-11-22&to=2026-11-22&res=hour"),
    )
    .await;
    assert_eq!(hours.len(), 24);
    assert_eq!(
        nonzero(&hours),
        vec![
            ("2026-11-22T00:00:00+05:30", 2),
            ("2026-11-22T23:00:00+05:30", 1),
        ]
    );
    // The page's own series and its top-pages row agree with the site's.
    let page = rows(
        &admin,
        &format!("{kolkata}/series.csv?range=custom&from=2026-11-21&to=2026-11-23&res=day&path=/a"),
    )
    .await;
    assert_eq!(page.iter().map(|(_, v)| v).sum::<i64>(), 5);
    let (_, pages) = admin
        .text(&format!(
            "{kolkata}/pages.csv?range=custom&from=2026-11-22&to=2026-11-22"
        ))
        .await;
    assert!(pages.contains("/a,3,100.0"), "{pages}");
    // Whole UTC days inside a Berlin range come from day totals, the
    // edges from slots: the 25-hour day's page total is its 4 views.
    let (_, pages) = admin
        .text(&format!(
            "{berlin}/pages.csv?range=custom&from=2026-10-24&to=2026-10-26&res=day"
        ))
        .await;
    assert!(pages.contains("/a,6,100.0"), "{grouping}: {pages}");
    let (_, pages) = admin
        .text(&format!(
            "{berlin}/pages.csv?range=custom&from=2026-10-25&to=2026-10-25&res=day"
        ))
        .await;
    assert!(pages.contains("/a,4,100.0"), "{grouping}: {pages}");
}

#[tokio::test]
async fn presets_and_pages_say_the_zone_and_count_the_local_day() {
    let (app, admin, [_, berlin, kolkata]) = world().await;
    // 2026-11-22 10:01:07 UTC is 15:31 in Kolkata: "today" is Nov 22 IST,
    // 18:30 UTC the day before to 18:30 UTC, with 3 views.
    let _ = &app;
    let (status, html) = admin.text(&format!("{kolkata}?range=today")).await;
    assert_eq!(status, 200);
    assert!(html.contains("(Asia/Kolkata)"), "the zone is said");
    assert!(html.contains("From (Asia/Kolkata)"));
    // The zone said once in the range line (no abbreviation
    // beside each time), and not repeated as the chart's caption.
    assert!(
        html.contains("2026-11-22 00:00 to 2026-11-23 00:00 (Asia/Kolkata), 24 points by hour"),
        "{}",
        &html[..2000.min(html.len())]
    );
    assert!(html.contains("<figcaption class=\"muted\">Views by hour"));
    // Across a clock change each end says its offset.
    let (_, html) = admin
        .text(&format!(
            "{berlin}?range=custom&from=2026-10-25&to=2026-10-25"
        ))
        .await;
    assert!(
        html.contains("2026-10-25 00:00 CEST to 2026-10-26 00:00 CET (Europe/Berlin)"),
        "{html}"
    );
    let csv = rows(&admin, &format!("{kolkata}/series.csv?range=today")).await;
    assert_eq!(csv.iter().map(|(_, v)| v).sum::<i64>(), 3);
    assert_eq!(csv.len(), 24);
    // A custom minute is a local time.
    let (status, html) = admin
        .text(&format!("{berlin}/page?path=/a&minute=2026-10-25T02:30"))
        .await;
    assert_eq!(status, 200);
    assert!(html.contains("2026-10-25 02:30 CEST"), "the earlier 02:30");
    // A local time that does not exist is refused clearly.
    let (status, body) = admin
        .text(&format!("{berlin}/page?path=/a&minute=2026-03-29T02:30"))
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("exists in Europe/Berlin"), "{body}");
}

#[tokio::test]
async fn owners_set_the_zone_and_a_bad_one_changes_nothing() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("zone.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let settings = format!("/sites/{}/settings", site.id);
    for bad in ["Mars/Olympus", "+05:30", "europe/berlin "] {
        let r = admin
            .post(
                &settings,
                &[
                    ("csrf", &admin.csrf),
                    ("name", "Zone"),
                    ("aliases", ""),
                    ("time_zone", bad),
                ],
            )
            .await;
        assert_eq!(r.status(), 400, "{bad}");
        let html = r.text().await.unwrap();
        assert!(html.contains("id=\"time_zone-error\""), "{bad}");
    }
    // A bad alias and a bad zone are both marked in one answer,
    // on the settings page and on the forms that add a site.
    let r = admin
        .post(
            &settings,
            &[
                ("csrf", &admin.csrf),
                ("name", "Zone"),
                ("aliases", "not a host/x"),
                ("time_zone", "Mars/Olympus"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    for field in ["aliases", "time_zone"] {
        assert!(
            html.contains(&format!("id=\"{field}-error\"")),
            "{field}: {html}"
        );
    }
    for (path, form) in [
        (
            "/sites/new",
            vec![
                ("domain", "https://x.org/blog"),
                ("time_zone", "Mars/Olympus"),
            ],
        ),
        (
            "/admin/sites",
            vec![
                ("domain", "https://x.org/blog"),
                ("aliases", "not a host/x"),
                ("time_zone", "Mars/Olympus"),
                ("owners", "ghost@example.com"),
            ],
        ),
    ] {
        let mut f = form.clone();
        f.push(("csrf", &admin.csrf));
        let r = admin.post(path, &f).await;
        assert_eq!(r.status(), 400, "{path}");
        let html = r.text().await.unwrap();
        for (field, _) in &form {
            assert!(
                html.contains(&format!("id=\"{field}-error\"")),
                "{path} {field}: {html}"
            );
        }
    }
    let stored = |app: &TestApp| {
        let store = app.store.clone();
        async move {
            tickertape::storage::sites::list(&store)
                .await
                .unwrap()
                .into_iter()
                .find(|s| s.domain.as_str() == "zone.test")
                .unwrap()
                .time_zone
                .name()
        }
    };
    assert_eq!(stored(&app).await, "UTC", "nothing changed");
    let r = admin
        .post(
            &settings,
            &[
                ("csrf", &admin.csrf),
                ("name", "Zone"),
                ("aliases", ""),
                ("time_zone", "Asia/Kathmandu"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(stored(&app).await, "Asia/Kathmandu");
}

#[tokio::test]
async fn admins_add_a_site_in_a_zone_and_a_bad_zone_adds_nothing() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let r = admin
        .post(
            "/admin/sites",
            &[
                ("csrf", &admin.csrf),
                ("domain", "bad-zone.test"),
                ("time_zone", "Europe/Atlantis"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"time_zone-error\""));
    assert!(
        html.contains("value=\"Europe/Atlantis\""),
        "the input is kept"
    );
    assert!(tickertape::storage::sites::list(&app.store)
        .await
        .unwrap()
        .is_empty());
    let r = admin
        .post(
            "/admin/sites",
            &[
                ("csrf", &admin.csrf),
                ("domain", "kathmandu.test"),
                ("time_zone", "Asia/Kathmandu"),
            ],
        )
        .await;
    assert!(
        r.status().is_redirection() || r.status() == 200,
        "{}",
        r.status()
    );
    let sites = tickertape::storage::sites::list(&app.store).await.unwrap();
    assert_eq!(sites.len(), 1);
    assert_eq!(sites[0].time_zone.name(), "Asia/Kathmandu");
    // The admin's table and edit page say the zone.
    let (_, table) = admin.text("/admin/sites").await;
    assert!(
        table.contains("<td data-label=\"Time zone\">Asia/Kathmandu</td>"),
        "{table}"
    );
    let (_, edit) = admin.text(&format!("/admin/sites/{}", sites[0].id)).await;
    assert!(edit.contains("<strong>Asia/Kathmandu</strong>"), "{edit}");
}

//! Breakdowns: classified at the pixel, counted in one bucket
//! per page and hour (and day, and site) for every dimension, shown in the
//! panels, `breakdown.csv` and the API.

use bson::{doc, Document};
use std::collections::BTreeMap;
use tickertape::accounts::Role;
use tickertape::domain::dimension::from_field_name;
use tickertape::domain::Dimension;
use tickertape::storage::breakdowns::MAX_NAMES_PER_BUCKET;

use crate::helpers::*;

const CHROME_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const SAFARI_IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
const FIREFOX_LINUX: &str =
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";

/// One dimension's counts (decoded names, and `other`) over the buckets
/// of `coll` matching `filter`.
async fn counted(
    app: &TestApp,
    coll: &str,
    filter: Document,
    dimension: Dimension,
) -> (BTreeMap<String, i64>, i64) {
    app.settle().await;
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<Document>(coll)
            .find(filter)
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let mut by = BTreeMap::new();
    let mut other = 0;
    for d in docs {
        other += d.get_i64(dimension.other_field()).unwrap_or(0);
        if let Ok(names) = d.get_document(dimension.field()) {
            for (k, v) in names {
                *by.entry(from_field_name(k)).or_default() += v.as_i64().unwrap();
            }
        }
    }
    (by, other)
}

fn map(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// A scripted load: three browsers, two pages, campaigns, screen widths,
/// countries through a trusted proxy, and events.
async fn scripted(app: &TestApp, site: &str) {
    let view = |page: &str, w: &str| format!("site={site}&page={page}&ref=&w={w}");
    let loads: [(&str, &str, &str, &str, usize); 5] = [
        (
            CHROME_WINDOWS,
            "8.8.8.8",
            "%2Fa%3Futm_medium%3DEmail%26utm_campaign%3Dspring",
            "1920",
            4,
        ),
        (SAFARI_IPHONE, "8.8.8.8", "%2Fa", "390", 3),
        (
            FIREFOX_LINUX,
            "10.1.2.3",
            "%2Fb%3Futm_medium%3Dsocial",
            "",
            2,
        ),
        (CHROME_WINDOWS, "203.0.113.9", "%2Fb", "1920", 1),
        // A bad width is ignored, never a refusal.
        (FIREFOX_LINUX, "10.1.2.3", "%2Fb", "abc", 1),
    ];
    for (ua, ip, page, w, n) in loads {
        for _ in 0..n {
            let r = app
                .pixel_with(
                    &view(page, w),
                    &[("user-agent", ua), ("x-forwarded-for", ip)],
                )
                .await;
            assert_eq!(r.status(), 200);
        }
    }
    for (page, name, n) in [("%2Fa", "Signup", 2), ("%2Fb", "Download%3A%20pdf", 1)] {
        for _ in 0..n {
            let r = app
                .pixel_with(
                    &format!("site={site}&page={page}&e={name}"),
                    &[("user-agent", CHROME_WINDOWS)],
                )
                .await;
            assert_eq!(r.status(), 200);
        }
    }
}

async fn app_behind_a_proxy() -> TestApp {
    spawn_app_with(|s| s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await
}

#[tokio::test]
async fn a_scripted_load_gives_exact_counts_per_dimension_page_site_hour_and_day() {
    let app = app_behind_a_proxy().await;
    let site = app.add_site("bd.test", &[]).await;
    scripted(&app, &site.id.to_string()).await;
    // Events are never views.
    assert_eq!(
        app.total_views(tickertape::storage::Resolution::Day).await,
        11
    );
    for (coll, filter) in [
        ("breakdowns_hour", doc! {"page": "bd.test/a"}),
        ("breakdowns_day", doc! {"page": "bd.test/a"}),
    ] {
        let got = |d| counted(&app, coll, filter.clone(), d);
        assert_eq!(
            got(Dimension::Browser).await,
            (map(&[("Chrome", 4), ("Safari", 3)]), 0)
        );
        assert_eq!(
            got(Dimension::Os).await,
            (map(&[("Windows", 4), ("iOS", 3)]), 0)
        );
        assert_eq!(
            got(Dimension::Device).await,
            (map(&[("desktop", 4), ("mobile", 3)]), 0)
        );
        assert_eq!(got(Dimension::Country).await, (map(&[("US", 7)]), 0));
        assert_eq!(got(Dimension::Medium).await, (map(&[("email", 4)]), 0));
        assert_eq!(got(Dimension::Campaign).await, (map(&[("spring", 4)]), 0));
        assert_eq!(got(Dimension::Event).await, (map(&[("Signup", 2)]), 0));
    }
    for coll in ["site_breakdowns_hour", "site_breakdowns_day"] {
        let got = |d| counted(&app, coll, doc! {"site": "bd.test"}, d);
        assert_eq!(
            got(Dimension::Browser).await,
            (map(&[("Chrome", 5), ("Firefox", 3), ("Safari", 3)]), 0)
        );
        assert_eq!(
            got(Dimension::Device).await,
            (map(&[("desktop", 8), ("mobile", 3)]), 0)
        );
        // Private addresses have no country; 203.0.113.9 (documentation
        // range) is in no database.
        assert_eq!(
            got(Dimension::Country).await,
            (map(&[("US", 7), ("unknown", 4)]), 0)
        );
        assert_eq!(
            got(Dimension::Medium).await,
            (map(&[("email", 4), ("social", 2)]), 0)
        );
        assert_eq!(
            got(Dimension::Event).await,
            (map(&[("Download: pdf", 1), ("Signup", 2)]), 0)
        );
    }
    // Nothing of the address or the User-Agent is stored.
    let raw = format!(
        "{:?}",
        futures::TryStreamExt::try_collect::<Vec<Document>>(
            app.store
                .db()
                .collection::<Document>("site_breakdowns_day")
                .find(doc! {})
                .await
                .unwrap()
        )
        .await
        .unwrap()
    );
    for secret in ["8.8.8.8", "10.1.2.3", "Win64", "AppleWebKit"] {
        assert!(!raw.contains(secret), "{secret} stored: {raw}");
    }

    // The panels, the CSV and the API say the same.
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text(&format!("/sites/{}?range=24h", site.id)).await;
    assert_eq!(status, 200);
    let rows = table_rows(&html, "breakdown-browser");
    assert_eq!(
        rows[0],
        ["Chrome", "5", "45.5%", "new"].map(String::from),
        "{rows:?}"
    );
    let countries = table_rows(&html, "breakdown-country");
    assert_eq!(countries[0][0], "United States (US)");
    let events = table_rows(&html, "breakdown-event");
    assert_eq!(events[0][..2], ["Signup".to_owned(), "2".to_owned()]);
    let (_, page_html) = admin
        .text(&format!("/sites/{}/page?path=/b&range=24h", site.id))
        .await;
    let rows = table_rows(&page_html, "breakdown-browser");
    assert_eq!(rows[0][..2], ["Firefox".to_owned(), "3".to_owned()]);

    let r = admin
        .get(&format!(
            "/sites/{}/breakdown.csv?range=24h&dimension=os",
            site.id
        ))
        .await;
    assert_eq!(r.status(), 200);
    let cd = r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cd.ends_with("_os.csv\""), "{cd}");
    assert_eq!(
        r.text().await.unwrap(),
        "os,views,share_percent,compared_views,previous_period_views\r\nWindows,5,45.5,0,0\r\nLinux,3,27.3,0,0\r\niOS,3,27.3,0,0\r\n"
    );
    let r = admin
        .get(&format!(
            "/sites/{}/breakdown.csv?range=24h&dimension=campaign&path=/a",
            site.id
        ))
        .await;
    // Campaign shares are of every view of the page's covered hours.
    assert_eq!(
        r.text().await.unwrap(),
        "campaign,views,share_percent,compared_views,previous_period_views\r\nspring,4,57.1,0,0\r\n"
    );
    for bad in [
        "",
        "&dimension=",
        "&dimension=planet",
        "&dimension=browser&dimension=os",
    ] {
        let r = admin
            .get(&format!("/sites/{}/breakdown.csv?range=24h{bad}", site.id))
            .await;
        assert_eq!(r.status(), 400, "{bad}");
        assert!(r.text().await.unwrap().contains("dimension"), "{bad}");
    }

    let token = crate::json_api::create_token(&admin, "breakdowns", None).await;
    let a = crate::json_api::get(
        &app,
        &token,
        &format!(
            "/api/v1/sites/{}/breakdown?range=24h&dimension=device",
            site.id
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(a.json["total"], 11);
    assert_eq!(a.json["entries"][0]["name"], "desktop");
    assert_eq!(a.json["entries"][0]["count"], 8);
    assert_eq!(a.json["entries"][1]["name"], "mobile");
    let a = crate::json_api::get(
        &app,
        &token,
        &format!(
            "/api/v1/sites/{}/breakdown?range=24h&dimension=event&path=/b",
            site.id
        ),
    )
    .await;
    assert_eq!(a.json["entries"][0]["name"], "Download: pdf");
    let a = crate::json_api::get(
        &app,
        &token,
        &format!(
            "/api/v1/sites/{}/breakdown?range=24h&dimension=nope",
            site.id
        ),
    )
    .await;
    assert_eq!(a.status, 400);
    // Two days on, the load's day is a whole day of the ranges, read from
    // the day buckets: the same figures, for the site and for a page, in
    // the pages, the CSV and the API.
    app.clock
        .set(tickertape::clock::Clock::now(&*app.clock) + chrono::TimeDelta::days(2));
    let admin = app.login("admin@example.com").await;
    for range in ["7d", "30d"] {
        let r = admin
            .get(&format!(
                "/sites/{}/breakdown.csv?range={range}&dimension=os",
                site.id
            ))
            .await;
        // The load's hours are complete now: the change compares them.
        assert_eq!(
            r.text().await.unwrap(),
            "os,views,share_percent,compared_views,previous_period_views\r\nWindows,5,45.5,5,0\r\nLinux,3,27.3,3,0\r\niOS,3,27.3,3,0\r\n",
            "{range}"
        );
        let (_, page_html) = admin
            .text(&format!("/sites/{}/page?path=/b&range={range}", site.id))
            .await;
        let rows = table_rows(&page_html, "breakdown-browser");
        assert_eq!(
            rows[0][..2],
            ["Firefox".to_owned(), "3".to_owned()],
            "{range}"
        );
    }
    let a = crate::json_api::get(
        &app,
        &token,
        &format!(
            "/api/v1/sites/{}/breakdown?range=30d&dimension=device",
            site.id
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(
        (
            a.json["total"].clone(),
            a.json["entries"][0]["count"].clone()
        ),
        (11.into(), 8.into()),
        "over whole days: {}",
        a.json
    );
}

#[tokio::test]
async fn a_bucket_keeps_at_most_the_cap_of_names_per_dimension_and_counts_the_rest_as_other() {
    let app = spawn_app().await;
    let site = app.add_site("bdcap.test", &[]).await;
    let n = MAX_NAMES_PER_BUCKET + 7;
    for i in 0..n {
        let r = app
            .pixel(&format!(
                "site={}&page=%2Fx%3Futm_campaign%3Dc{i}%26utm_medium%3Dm{}",
                site.id,
                i % 2
            ))
            .await;
        assert_eq!(r.status(), 200);
    }
    let (names, other) = counted(
        &app,
        "breakdowns_hour",
        doc! {"page": "bdcap.test/x"},
        Dimension::Campaign,
    )
    .await;
    assert_eq!(names.len(), MAX_NAMES_PER_BUCKET);
    assert_eq!(other, 7);
    assert_eq!(names.values().sum::<i64>() + other, n as i64);
    // The other dimensions of the same bucket have room of their own.
    let (media, other) = counted(
        &app,
        "breakdowns_hour",
        doc! {"page": "bdcap.test/x"},
        Dimension::Medium,
    )
    .await;
    assert_eq!((media.len(), other), (2, 0));

    // The panel, the CSV and the API show the names beyond the cap as one
    // "(other)" row.
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin
        .text(&format!("/sites/{}/page?path=/x&range=24h", site.id))
        .await;
    assert_eq!(status, 200);
    let rows = table_rows(&html, "breakdown-campaign");
    let other = rows.iter().find(|r| r[0] == "(other)");
    assert_eq!(
        other.map(|r| r[1].as_str()),
        Some("7"),
        "the page's campaigns panel: {rows:?}"
    );
    let r = admin
        .get(&format!(
            "/sites/{}/breakdown.csv?range=24h&dimension=campaign&path=/x",
            site.id
        ))
        .await;
    assert_eq!(r.status(), 200);
    let csv = r.text().await.unwrap();
    assert_eq!(csv.lines().count(), 1 + MAX_NAMES_PER_BUCKET + 1, "{csv}");
    assert!(csv.ends_with("(other),7,12.3,0,0\r\n"), "{csv}");
    let token = crate::json_api::create_token(&admin, "cap", None).await;
    let a = crate::json_api::get(
        &app,
        &token,
        &format!(
            "/api/v1/sites/{}/breakdown?range=24h&dimension=campaign&path=/x",
            site.id
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(a.json["other"], 7, "{}", a.json);
    assert_eq!(a.json["matching"], MAX_NAMES_PER_BUCKET, "{}", a.json);
}

#[tokio::test]
async fn writers_that_remember_names_keep_the_cap_when_another_writer_fills_the_bucket() {
    use tickertape::domain::Labels;
    use tickertape::storage::bucket_writer::{BucketWriter, Hit};
    let app = spawn_app().await;
    let page = "bdknown.test/x";
    let at = chrono::Utc::now();
    async fn write(
        writer: &BucketWriter,
        page: &str,
        at: chrono::DateTime<chrono::Utc>,
        campaigns: Vec<String>,
    ) {
        let labels: Vec<Labels> = campaigns
            .iter()
            .map(|c| Labels::default().with(Dimension::Campaign, c))
            .collect();
        let hits: Vec<Hit<'_>> = labels
            .iter()
            .map(|labels| Hit {
                page,
                at,
                source: None,
                visit: None,
                labels: Some(labels),
            })
            .collect();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        writer.apply_direct(&hits, deadline).await.unwrap();
    }
    let (first, second) = (BucketWriter::new(&app.store), BucketWriter::new(&app.store));
    // The first writer learns that the bucket holds "a"; the second then
    // fills it behind the first one's back.
    write(&first, page, at, vec!["a".into()]).await;
    let filling: Vec<String> = (0..MAX_NAMES_PER_BUCKET + 5)
        .map(|i| format!("c{i}"))
        .collect();
    write(&second, page, at, filling).await;
    // "a" is known to the first writer; "late" is not, so it looks again
    // and finds the bucket full.
    write(&first, page, at, vec!["a".into(), "late".into()]).await;
    for coll in ["breakdowns_hour", "breakdowns_day"] {
        let (names, other) = counted(&app, coll, doc! {"page": page}, Dimension::Campaign).await;
        assert_eq!(names.len(), MAX_NAMES_PER_BUCKET, "{coll}: {names:?}");
        assert_eq!(names["a"], 2, "{coll}");
        assert!(!names.contains_key("late"), "{coll}");
        assert_eq!(other, 7, "{coll}");
        assert_eq!(
            names.values().sum::<i64>() + other,
            MAX_NAMES_PER_BUCKET as i64 + 8
        );
    }
}

#[tokio::test]
async fn bad_events_are_refused_with_a_reason_and_change_nothing() {
    // Clients named by a trusted proxy: each brings a share of new names.
    let app =
        spawn_app_with(|s| s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await;
    let site = app.add_site("bdev.test", &[]).await;
    let long = "e".repeat(65);
    for (e, reason) in [
        ("%20%20", "invalid-event"),
        (long.as_str(), "invalid-event"),
        ("%7B%22%24gt%22%3A1%7D", "invalid-event"),
        ("a%0Ab", "invalid-event"),
        ("%FF", "invalid-event"),
    ] {
        let r = app.pixel(&format!("site={}&page=%2F&e={e}", site.id)).await;
        assert_eq!(r.status(), 400, "{e}");
        assert_eq!(r.headers()["x-tickertape-reason"], reason, "{e}");
        assert_eq!(r.headers()["content-type"], "image/gif");
    }
    // The site's daily budget of event names, from clients that each
    // bring their share, then a clear refusal; its known names still count.
    use tickertape::ingest::event_cap::{MAX_EVENT_NAMES_PER_DAY, NEW_NAMES_PER_CLIENT};
    for i in 0..MAX_EVENT_NAMES_PER_DAY {
        let client = format!("203.0.113.{}", i / NEW_NAMES_PER_CLIENT as usize);
        let r = app
            .pixel_with(
                &format!("site={}&page=%2F&e=n{i}", site.id),
                &[("x-forwarded-for", &client)],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    let r = app
        .pixel(&format!("site={}&page=%2F&e=one-more", site.id))
        .await;
    assert_eq!(r.status(), 403);
    assert_eq!(r.headers()["x-tickertape-reason"], "event-cap");
    let r = app.pixel(&format!("site={}&page=%2F&e=n3", site.id)).await;
    assert_eq!(r.status(), 200);
    let (events, other) = counted(
        &app,
        "site_breakdowns_day",
        doc! {"site": "bdev.test"},
        Dimension::Event,
    )
    .await;
    assert_eq!(
        events.values().sum::<i64>() + other,
        MAX_EVENT_NAMES_PER_DAY as i64 + 1
    );
    assert!(!events.contains_key("one-more"));
    assert_eq!(
        app.total_views(tickertape::storage::Resolution::Day).await,
        0,
        "no event, good or bad, is a view"
    );
}

#[tokio::test]
async fn without_a_country_database_hits_count_with_unknown_countries_and_a_warning() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
        s.ingest.geoip_db = Some("/nonexistent/countries.mmdb".into());
    })
    .await;
    let site = app.add_site("nogeo.test", &[]).await;
    let r = app
        .pixel_with(
            &format!("site={}&page=%2F", site.id),
            &[("x-forwarded-for", "8.8.8.8")],
        )
        .await;
    assert_eq!(r.status(), 200);
    let (countries, _) = counted(
        &app,
        "site_breakdowns_day",
        doc! {"site": "nogeo.test"},
        Dimension::Country,
    )
    .await;
    assert_eq!(countries, map(&[("unknown", 1)]));
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text("/admin/system").await;
    assert_eq!(status, 200);
    assert!(
        html.contains("id=\"geoip\"") && html.contains("/nonexistent/countries.mmdb"),
        "{html}"
    );
    let warning = html
        .find("id=\"geoip-warning\"")
        .map(|at| &html[at..])
        .expect("a warning about the missing country database");
    let warning = &warning[..warning.find("</p>").unwrap_or(warning.len())];
    assert!(
        warning.contains("Every country counts as “unknown”")
            && warning.contains("TICKERTAPE_GEOIP_DB"),
        "{warning}"
    );
}

#[tokio::test]
async fn the_system_page_names_the_country_database_its_date_and_attribution() {
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text("/admin/system").await;
    assert_eq!(status, 200);
    let start = html
        .find("id=\"geoip\"")
        .expect("a country database section");
    let section = &html[start..];
    let section = &section[..section.find("</section>").unwrap_or(section.len())];
    // The name and build date are the file's own metadata, not its path.
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(tickertape::classify::country::SHIPPED_DB);
    let db = tickertape::classify::CountryDb::open(&shipped).expect("the shipped database");
    let info = db.info();
    let built = info.built.format("%Y-%m-%d").to_string();
    assert!(
        section.contains(&format!("{}, built {built}", info.name)),
        "{section}"
    );
    assert!(section.contains("geo-whois-asn-country"), "{section}");
    assert!(section.contains("CC0"), "{section}");
}

#[tokio::test]
async fn goals_show_conversions_converting_visitors_and_their_rate() {
    use tickertape::domain::Goal;
    use tickertape::storage::sites;
    let app = spawn_app().await;
    let site = app.add_site("goal.test", &[]).await;
    for goal in [
        Goal::parse("event", "Signup"),
        Goal::parse("page", "/thanks"),
    ] {
        sites::add_goal(&app.store, &site.id, &goal.unwrap())
            .await
            .unwrap();
    }
    app.ingest.directory.reload(&app.store).await.unwrap();
    // Ten visitors (told apart by their User-Agent) view the home page;
    // three sign up (one of them twice), two reach /thanks.
    let ua = |i: usize| format!("{CHROME_WINDOWS} visitor/{i}");
    for i in 0..10 {
        let r = app
            .pixel_with(
                &format!("site={}&page=%2F", site.id),
                &[("user-agent", &ua(i))],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    for i in [1, 2, 3, 3] {
        let r = app
            .pixel_with(
                &format!("site={}&page=%2F&e=Signup", site.id),
                &[("user-agent", &ua(i))],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    for i in [4, 5] {
        let r = app
            .pixel_with(
                &format!("site={}&page=%2Fthanks", site.id),
                &[("user-agent", &ua(i))],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    app.settle().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text(&format!("/sites/{}?range=24h", site.id)).await;
    assert_eq!(status, 200);
    let start = html.find("id=\"goals-table\"").expect("a goals table");
    let table = &html[start..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(
        table.contains("<td>Signup</td><td class=\"num\">4</td><td class=\"num hide-small\">new</td><td class=\"num\">3</td><td class=\"num\">30.0%</td>"),
        "{table}"
    );
    // A page goal's row opens its page's report over the same range.
    let href = format!("/sites/{}/page?range=24h&#38;path=%2Fthanks", site.id);
    assert!(
        table.contains(&format!("<td><a href=\"{href}\">Visit /thanks</a></td><td class=\"num\">2</td><td class=\"num hide-small\">new</td><td class=\"num\">2</td><td class=\"num\">20.0%</td>")),
        "{table}"
    );
    let (status, page) = admin.text(&href.replace("&#38;", "&")).await;
    assert_eq!(status, 200);
    assert!(page.contains("/thanks"), "{page}");
    let r = admin
        .get(&format!("/sites/{}/goals.csv?range=24h", site.id))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.text().await.unwrap(),
        "kind,goal,conversions,converting_visitors,conversion_rate_percent,currency,revenue,revenue_events,average_revenue,converting_kind\r\nevent,Signup,4,3,30.0,,,,,visitors\r\npage,/thanks,2,2,20.0,,,,,visitors\r\n"
    );
    // A site without goals says where to set them.
    let other = app.add_site("nogoal.test", &[]).await;
    let (_, html) = admin.text(&format!("/sites/{}?range=24h", other.id)).await;
    assert!(html.contains("id=\"no-goals\""));
}

#[tokio::test]
async fn with_breakdowns_off_views_carry_none_and_events_still_count() {
    let app = spawn_app_with(|s| s.ingest.breakdowns = false).await;
    let site = app.add_site("off.test", &[]).await;
    for q in [
        "page=%2Fa%3Futm_source%3Dnews%26utm_medium%3Demail&ref=&w=390",
        "page=%2Fa&e=Signup",
    ] {
        let r = app
            .pixel_with(
                &format!("site={}&{q}", site.id),
                &[("user-agent", CHROME_WINDOWS)],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(
        app.total_views(tickertape::storage::Resolution::Day).await,
        1
    );
    for dimension in Dimension::ALL {
        let (names, other) = counted(
            &app,
            "site_breakdowns_day",
            doc! {"site": "off.test"},
            dimension,
        )
        .await;
        let expected = match dimension {
            Dimension::Event => map(&[("Signup", 1)]),
            _ => BTreeMap::new(),
        };
        assert_eq!((names, other), (expected, 0), "{dimension}");
    }
}

#[tokio::test]
async fn a_long_range_answer_is_kept_only_while_its_buckets_are_unwritten() {
    use tickertape::domain::Labels;
    use tickertape::reports::breakdowns;
    use tickertape::reports::sources::SourceScope;
    use tickertape::storage::bucket_writer::{BucketWriter, Hit};
    let app = spawn_app().await;
    let site = app.add_site("bdkept.test", &[]).await;
    let page = tickertape::domain::Page::parse("bdkept.test/x").unwrap();
    let day = tickertape::storage::Resolution::Day;
    // Whole past days only, so that what is kept does not move with the
    // clock (the last ten minutes are never kept).
    let end = day.floor(chrono::Utc::now()) - chrono::TimeDelta::days(1);
    let writer = BucketWriter::new(&app.store);
    let write = |days_ago: i64, browser: &'static str| {
        let (writer, page) = (&writer, page.as_str());
        async move {
            let labels = Labels::default().with(Dimension::Browser, browser);
            let hit = Hit {
                page,
                at: end - chrono::TimeDelta::days(days_ago) + chrono::TimeDelta::hours(3),
                source: Some("direct"),
                visit: None,
                labels: Some(&labels),
            };
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
            writer.apply_direct(&[hit], deadline).await.unwrap();
        }
    };
    async fn browsers(
        store: &tickertape::storage::Store,
        scope: SourceScope<'_>,
        end: chrono::DateTime<chrono::Utc>,
    ) -> (i64, i64) {
        let b = breakdowns::read(
            store,
            scope,
            &[Dimension::Browser, Dimension::Source],
            &[],
            end - chrono::TimeDelta::days(60),
            end,
        )
        .await
        .unwrap();
        let browsers = b.of(Dimension::Browser);
        (browsers.of("Firefox"), browsers.of("Safari"))
    }
    let store = app.store.clone();
    let read = |scope| browsers(&store, scope, end);
    let (of_site, of_page) = (SourceScope::Site(&site), SourceScope::Page(&page));
    write(3, "Firefox").await;
    write(20, "Firefox").await;
    assert_eq!(read(of_site).await, (2, 0));
    assert_eq!(read(of_page).await, (2, 0));
    // Changed behind the writers' back (their write counters untouched),
    // the buckets are not read again: the answers were kept, by them.
    for coll in ["site_breakdowns_day", "breakdowns_day"] {
        app.store
            .db()
            .collection::<Document>(coll)
            .update_many(
                doc! {"$or": [{"site": "bdkept.test"}, {"page": page.as_str()}]},
                doc! {"$inc": {"browser.Firefox": 100_i64}},
            )
            .await
            .unwrap();
    }
    assert_eq!(read(of_site).await, (2, 0));
    assert_eq!(read(of_page).await, (2, 0));
    // A late record on a past day that has a bucket already (a replayed
    // journal, an import) raises its counter: the next read sees every
    // bucket's state.
    write(3, "Safari").await;
    assert_eq!(read(of_site).await, (202, 1));
    assert_eq!(read(of_page).await, (202, 1));
    // Buckets deleted and made again by the same writes (a site deleted
    // and added again) come back with the same counters, but not the same
    // generation.
    for coll in [
        "site_breakdowns_day",
        "breakdowns_day",
        "site_breakdowns_hour",
        "breakdowns_hour",
    ] {
        app.store
            .db()
            .collection::<Document>(coll)
            .delete_many(doc! {"$or": [{"site": "bdkept.test"}, {"page": page.as_str()}]})
            .await
            .unwrap();
    }
    write(3, "Firefox").await;
    write(20, "Firefox").await;
    write(3, "Safari").await;
    assert_eq!(read(of_site).await, (2, 1));
    assert_eq!(read(of_page).await, (2, 1));
}

#[tokio::test]
async fn breakdowns_behind_by_more_than_their_window_are_said_on_the_dashboard() {
    // The page breakdowns take no write: the breakdowns stream stalls for
    // real while the views go on, and the report's clock moves on 45 s.
    let app = spawn_app().await;
    let start = chrono::Utc::now();
    app.clock.set(start);
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("blag.test", &[]).await;
    let admin = app.login("admin@example.com").await;
    let base = format!("/sites/{}", site.id);
    let (_, fresh) = admin.text(&base).await;
    assert!(
        !fresh.contains("id=\"breakdowns-lag\""),
        "nothing behind yet"
    );
    app.refuse_writes("breakdowns_hour", "page", true).await;
    let r = app.pixel(&format!("site={}&page=/late", site.id)).await;
    assert_eq!(r.status(), 200);
    app.clock.set(start + chrono::TimeDelta::seconds(45));
    app.wait_for_lag("sources", 45.0).await;
    let (_, late) = admin.text(&base).await;
    assert!(
        late.contains("Sources and breakdowns are 45 s behind the views"),
        "the dashboard says how far behind the breakdowns are: {late}"
    );
    assert!(
        !late.contains("id=\"behind\""),
        "while the views themselves are fresh"
    );
    let r = admin.get(&format!("{base}/sources.csv?range=24h")).await;
    assert_eq!(r.headers()["tickertape-behind-seconds"], "45");
    app.refuse_writes("breakdowns_hour", "page", false).await;
    app.settle().await;
    let (_, caught_up) = admin.text(&base).await;
    assert!(!caught_up.contains("id=\"breakdowns-lag\""), "{caught_up}");
}

/// What a site's breakdowns serve: every dimension's CSV for the site, and
/// one for a page.
async fn served_breakdowns(app: &TestApp, site: &tickertape::storage::sites::Site) -> Vec<String> {
    let admin = app.login("admin@example.com").await;
    let mut served = Vec::new();
    for dimension in ["browser", "os", "device", "country", "medium", "event"] {
        let r = admin
            .get(&format!(
                "/sites/{}/breakdown.csv?range=24h&dimension={dimension}",
                site.id
            ))
            .await;
        assert_eq!(r.status(), 200);
        served.push(r.text().await.unwrap());
    }
    let r = admin
        .get(&format!(
            "/sites/{}/breakdown.csv?range=24h&dimension=campaign&path=/a",
            site.id
        ))
        .await;
    served.push(r.text().await.unwrap());
    served
}

async fn collection_names(db: &mongodb::Database) -> Vec<String> {
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    names
}

/// A database from before the breakdown collections were named for what
/// they hold (its breakdowns under `sources_hour`, `site_sources_day`, …)
/// is renamed at start and serves the same figures; a second start
/// changes nothing.
#[tokio::test]
async fn a_database_with_the_former_collection_names_serves_the_same_breakdowns_after_start() {
    use tickertape::storage::renames::{rename_former_collections, FORMER_NAMES};
    let mut first = app_behind_a_proxy().await;
    let site = first.add_site("former.test", &[]).await;
    scripted(&first, &site.id.to_string()).await;
    first.add_user("admin@example.com", Role::Admin).await;
    let before = served_breakdowns(&first, &site).await;
    assert!(before[0].contains("Chrome,5"), "{before:?}");
    first.stop().await;

    // Back to the former names, as a database written before them holds.
    let db = first.store.db().clone();
    let admin = first.store.client().database("admin");
    for (former, now) in FORMER_NAMES {
        let held = db
            .collection::<Document>(now)
            .count_documents(doc! {})
            .await
            .unwrap();
        assert!(held > 0, "{now} holds the breakdowns");
        admin
            .run_command(doc! {
                "renameCollection": format!("{}.{now}", db.name()),
                "to": format!("{}.{former}", db.name()),
            })
            .await
            .unwrap();
    }
    let old = collection_names(&db).await;
    for (former, now) in FORMER_NAMES {
        assert!(old.iter().any(|n| n == former), "{old:?}");
        assert!(!old.iter().any(|n| n == now), "{old:?}");
    }

    let name = db.name().to_owned();
    let same_database = |s: &mut tickertape::settings::Settings| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
        s.database.name = name.clone();
    };
    let mut second = spawn_app_with(same_database).await;
    let renamed = collection_names(&db).await;
    for (former, now) in FORMER_NAMES {
        assert!(!renamed.iter().any(|n| n == former), "{renamed:?}");
        assert!(renamed.iter().any(|n| n == now), "{renamed:?}");
    }
    assert_eq!(served_breakdowns(&second, &site).await, before);
    second.stop().await;

    // A second start renames nothing and serves the same.
    assert!(rename_former_collections(&second.store)
        .await
        .unwrap()
        .is_empty());
    let third = spawn_app_with(same_database).await;
    assert_eq!(collection_names(&db).await, renamed);
    assert_eq!(served_breakdowns(&third, &site).await, before);
}

#[tokio::test]
async fn panels_show_their_top_rows_and_link_the_whole_list() {
    use tickertape::domain::Labels;
    use tickertape::storage::bucket_writer::{BucketWriter, Hit};
    let app = spawn_app().await;
    app.add_user("admin@example.com", Role::Admin).await;
    let site = app.add_site("whole.test", &[]).await;
    let at = tickertape::clock::Clock::now(&*app.clock) - chrono::TimeDelta::minutes(2);
    // 12 browsers and 22 sources, one view each.
    let labels: Vec<Labels> = (0..12)
        .map(|i| Labels::default().with(Dimension::Browser, format!("b{i}")))
        .collect();
    let sources: Vec<String> = (0..22).map(|i| format!("s{i}.example")).collect();
    // Breakdowns are written with the sources: each view has one.
    let hits: Vec<Hit<'_>> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| Hit {
            page: "whole.test/",
            at,
            source: Some(s.as_str()),
            visit: None,
            labels: labels.get(i),
        })
        .collect();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    BucketWriter::new(&app.store)
        .apply_direct(&hits, deadline)
        .await
        .unwrap();
    let admin = app.login("admin@example.com").await;
    let (status, html) = admin.text(&format!("/sites/{}?range=24h", site.id)).await;
    assert_eq!(status, 200);
    let at = html.find("id=\"bd-browser\"").expect("browsers");
    let browsers = &html[at..at + html[at..].find("</section>").unwrap()];
    assert!(
        browsers.contains("the top 10 of 12 shown")
            && browsers.contains("breakdown.csv?")
            && browsers.contains(">All 12 (Browser CSV)</a>"),
        "{browsers}"
    );
    let at = html.find("id=\"sources-count\"").expect("sources");
    let sources = &html[at..at + html[at..].find("</p>").unwrap()];
    assert!(
        sources.contains("the top 20 of 22 shown") && sources.contains(">All 22 (CSV)</a>"),
        "{sources}"
    );
}

//! Site totals: written with the page buckets, read by the site reports,
//! and backfilled exactly (and idempotently) for sites that predate them.

use bson::{doc, Bson, Document};
use chrono::{DateTime, TimeDelta, Utc};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use tickertape::storage::site_totals;
use tickertape::storage::sites::{self, Site};
use tickertape::storage::{Increments, Resolution, Store, Subject};

use crate::helpers::*;

/// Per (timestamp, slot) the views of a collection's buckets matching
/// `filter`, slot "total" for `totalViews`.
async fn sums(store: &Store, coll: &str, filter: Document) -> BTreeMap<(i64, String), i64> {
    let docs: Vec<Document> = store
        .db()
        .collection::<Document>(coll)
        .find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    let number = |b: &Bson| match b {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        other => panic!("not a count: {other:?}"),
    };
    for d in docs {
        let at = d.get_datetime("timestamp").unwrap().timestamp_millis();
        *out.entry((at, "total".to_owned())).or_default() += number(d.get("totalViews").unwrap());
        for field in ["seconds", "minutes", "hours"] {
            if let Ok(slots) = d.get_document(field) {
                for (k, v) in slots {
                    *out.entry((at, k.clone())).or_default() += number(v);
                }
            }
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

/// Site totals equal the sum of the site's page buckets at every level,
/// time and slot.
async fn assert_totals_match_pages(store: &Store, site: &Site) {
    for g in Resolution::ALL {
        let pages = sums(
            store,
            g.collection(),
            doc! {"page": {"$gte": format!("{}/", site.domain), "$lt": format!("{}0", site.domain)}},
        )
        .await;
        let totals = sums(
            store,
            Subject::Site.collection(g),
            doc! {"site": site.domain.as_str()},
        )
        .await;
        assert!(!pages.is_empty(), "{g:?}: some views");
        assert_eq!(totals, pages, "{g:?}: site totals = sum of page buckets");
    }
}

/// Page buckets as the version before site totals wrote them: no site
/// bucket at all.
pub(crate) async fn write_old_page_buckets(store: &Store, hits: &[(&str, DateTime<Utc>)]) {
    for g in Resolution::ALL {
        let mut inc = Increments::new(g);
        for (page, at) in hits {
            inc.add(page, *at);
        }
        let reply = store
            .db()
            .run_command(doc! {
                "update": g.collection(),
                "updates": inc.statements().into_iter().map(Bson::Document).collect::<Vec<_>>(),
            })
            .await
            .unwrap();
        assert_eq!(reply.get_i32("n").unwrap() as usize, inc.len());
    }
}

pub(crate) async fn mark_old(store: &Store, site: &Site) {
    store
        .db()
        .collection::<Document>("sites")
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$unset": {"siteTotals": ""}},
        )
        .await
        .unwrap();
}

async fn reload(store: &Store, site: &Site) -> Site {
    sites::list(store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.id == site.id)
        .unwrap()
}

#[tokio::test]
async fn views_through_the_pixel_write_site_totals_in_the_same_batch() {
    let app = spawn_app().await;
    let site = app.add_site("totals.test", &[]).await;
    let other = app.add_site("other.test", &[]).await;
    for (i, page) in ["/", "/a", "/b", "/a", "/a"].iter().enumerate() {
        app.clock.set(t0() + TimeDelta::seconds(i as i64 * 37));
        let r = app.pixel(&format!("site={}&page={page}", site.id)).await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(
        app.pixel(&format!("site={}&page=/x", other.id))
            .await
            .status(),
        200
    );
    app.settle().await;
    assert_totals_match_pages(&app.store, &site).await;
    let day = sums(&app.store, "site_views_day", doc! {"site": "totals.test"}).await;
    let total: i64 = day
        .iter()
        .filter(|((_, k), _)| k == "total")
        .map(|(_, v)| v)
        .sum();
    assert_eq!(
        total, 5,
        "the other site's view is not in this site's totals"
    );
}

#[tokio::test]
async fn the_backfill_is_exact_and_running_it_twice_changes_nothing() {
    let app = spawn_app().await;
    let site = app.add_site("old.test", &[]).await;
    // Three days of views written before site totals existed ...
    let start = t0() - TimeDelta::days(3);
    let pages = ["old.test/", "old.test/a", "old.test/b/c"];
    let old: Vec<(&str, DateTime<Utc>)> = (0..600)
        .map(|i| {
            (
                pages[i % 3],
                start + TimeDelta::seconds(i as i64 * 431 % (3 * 86_400)),
            )
        })
        .collect();
    write_old_page_buckets(&app.store, &old).await;
    // ... and some after the upgrade, which wrote site totals as well,
    // partly into the same buckets.
    let new: Vec<(&str, DateTime<Utc>)> = (0..50)
        .map(|i| (pages[i % 3], start + TimeDelta::seconds(i as i64 * 977)))
        .collect();
    app.write_hits(&new).await;
    mark_old(&app.store, &site).await;
    let site = reload(&app.store, &site).await;
    assert!(!site.totals_complete);

    let first = site_totals::backfill(&app.store, &site).await.unwrap();
    assert_eq!(first.views, 650);
    assert_totals_match_pages(&app.store, &site).await;
    let snapshot = |store: Store| async move {
        let mut all = Vec::new();
        for g in Resolution::ALL {
            all.push(
                sums(
                    &store,
                    Subject::Site.collection(g),
                    doc! {"site": "old.test"},
                )
                .await,
            );
        }
        all
    };
    let after_first = snapshot(app.store.clone()).await;
    let second = site_totals::backfill(&app.store, &site).await.unwrap();
    assert_eq!(second.views, 650);
    assert_eq!(snapshot(app.store.clone()).await, after_first);
    assert!(reload(&app.store, &site).await.totals_complete);

    // Views after the backfill keep totals and pages equal.
    app.write_hits(&[("old.test/a", t0())]).await;
    assert_totals_match_pages(&app.store, &site).await;
}

#[tokio::test]
async fn the_backfill_command_does_the_sites_not_done_and_says_so() {
    let app = spawn_app().await;
    let site = app.add_site("cli.test", &[]).await;
    write_old_page_buckets(&app.store, &[("cli.test/x", t0()), ("cli.test/y", t0())]).await;
    mark_old(&app.store, &site).await;
    let done = site_totals::backfill_missing(&app.store).await.unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].0, "cli.test");
    assert_eq!(done[0].1.views, 2);
    assert_totals_match_pages(&app.store, &site).await;
    // Nothing left to do the second time.
    assert!(site_totals::backfill_missing(&app.store)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn site_reports_read_the_totals_once_complete() {
    let app = spawn_app().await;
    let site = app.add_site("read.test", &[]).await;
    app.add_user("admin@example.com", tickertape::accounts::Role::Admin)
        .await;
    let admin = app.login("admin@example.com").await;
    app.write_hits(&[
        ("read.test/a", t0()),
        ("read.test/b", t0() - TimeDelta::hours(2)),
    ])
    .await;
    // Tamper with the totals only: a report reading them shows it, proving
    // where the figure comes from (pages still say 2).
    app.store
        .db()
        .collection::<Document>("site_views_day")
        .update_one(
            doc! {"site": "read.test"},
            doc! {"$inc": {"totalViews": 1000_i64, "hours.10": 1000_i64}},
        )
        .await
        .unwrap();
    app.clock.set(t0() + TimeDelta::minutes(5));
    let (status, csv) = admin
        .text(&format!("/sites/{}/series.csv?range=30d", site.id))
        .await;
    assert_eq!(status, 200);
    let sum: i64 = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.rsplit(',').next()?.parse::<i64>().ok())
        .sum();
    assert_eq!(sum, 1002, "{csv}");
}

/// The top pages of whole past days come from page summaries while the
/// site's day totals are unchanged, and are made again when a late view
/// changes one: always the same list as reading every page-day bucket.
#[tokio::test]
async fn kept_page_days_give_the_buckets_numbers_and_follow_late_views() {
    use tickertape::reports::queries::{self, Scope};
    let app = spawn_app().await;
    let site = app.add_site("kept.test", &[]).await;
    assert!(site.totals_complete);
    let day = |d: i64, page| (page, t0() - TimeDelta::days(d));
    let hits: Vec<(&str, DateTime<Utc>)> = (1..=40)
        .flat_map(|d| {
            std::iter::repeat_n(day(d, "kept.test/a"), (d % 3 + 1) as usize)
                .chain(std::iter::repeat_n(day(d, "kept.test/b"), (d % 5) as usize))
        })
        .chain([day(0, "kept.test/c")])
        .collect();
    app.write_hits(&hits).await;
    let period = tickertape::reports::Period::resolve(
        &tickertape::reports::RangeQuery {
            range: Some("12mo".into()),
            ..Default::default()
        },
        t0(),
    )
    .unwrap();
    let kept = Scope::of_site(&site);
    let every_bucket = Scope::Site(&site.domain);
    let read = |scope| queries::top_pages(&app.store, scope, &period);
    let first = read(&kept).await.unwrap();
    assert_eq!(first, read(&every_bucket).await.unwrap());
    let views = |list: &[(tickertape::domain::Page, i64)], path: &str| {
        list.iter()
            .find(|(p, _)| p.path() == path)
            .map_or(0, |(_, v)| *v)
    };
    assert_eq!(
        views(&first, "/a"),
        (1..=40).map(|d| d % 3 + 1).sum::<i64>()
    );
    assert_eq!(views(&first, "/c"), 1);
    // Read again from the stored summaries: the same.
    assert_eq!(read(&kept).await.unwrap(), first);
    // The page buckets change behind the totals' back (no product write
    // does this): the summaries still answer, proving they are used...
    app.store
        .db()
        .collection::<Document>("views_day")
        .update_one(
            doc! {"page": "kept.test/b", "timestamp": bson::DateTime::from_chrono(Resolution::Day.floor(t0() - TimeDelta::days(9)))},
            doc! {"$inc": {"totalViews": 100_i64}},
        )
        .await
        .unwrap();
    assert_eq!(read(&kept).await.unwrap(), first);
    // ...and a late view through the writer, which moves the site's total
    // for that day, makes it read again (tampering included).
    app.write_hits(&[day(9, "kept.test/a")]).await;
    let after = read(&kept).await.unwrap();
    assert_eq!(views(&after, "/a"), views(&first, "/a") + 1);
    assert_eq!(views(&after, "/b"), views(&first, "/b") + 100);
}

/// A site whose totals are not built yet (views written by another tool,
/// or an upgrade), with a report time limit too small for its page
/// buckets: the 12-month dashboard, page report and API answer what is
/// being prepared (202, and how far while the backfill runs), never 503
/// "database unavailable"; the database is healthy.
#[tokio::test]
async fn a_long_range_of_a_site_being_prepared_says_so_instead_of_failing() {
    let app = spawn_app_with(|s| s.database.report_max_time_ms = 1).await;
    let site = app.add_site("prepared.test", &[]).await;
    app.add_user("owner@example.com", tickertape::accounts::Role::Owner)
        .await;
    let owner_id = tickertape::accounts::users::find_by_email(
        &app.store,
        &tickertape::domain::Email::parse("owner@example.com").unwrap(),
    )
    .await
    .unwrap()
    .unwrap()
    .id;
    app.set_owners(&site, &[owner_id]).await;
    // 20 pages with views on a day of every week of a year: more page
    // buckets than the time limit lets a report read.
    let pages: Vec<String> = (0..20).map(|i| format!("prepared.test/p{i}")).collect();
    let mut hits = Vec::new();
    for week in 0..52 {
        for page in &pages {
            hits.push((page.as_str(), t0() - TimeDelta::days(week * 7)));
        }
    }
    write_old_page_buckets(&app.store, &hits).await;
    mark_old(&app.store, &site).await;
    app.ingest.directory.reload(&app.store).await.unwrap();
    let owner = app.login("owner@example.com").await;
    let token = crate::json_api::create_token(&owner, "prep", None).await;
    let api = |path: String| {
        let (http, address, token) = (app.http.clone(), app.address.clone(), token.clone());
        async move {
            let r = http
                .get(format!("{address}{path}"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let retry = r.headers().get("retry-after").is_some();
            (r.status().as_u16(), retry, r.text().await.unwrap())
        }
    };

    let dashboard = format!("/sites/{}?range=12mo", site.id);
    let (status, html) = owner.text(&dashboard).await;
    assert_eq!(status, 202, "{html}");
    assert!(html.contains("cannot be shown yet"), "{html}");
    assert!(html.contains("backfill-site-totals"), "{html}");
    assert!(!html.contains("Database unavailable"), "{html}");
    let (status, html) = owner
        .text(&format!("/sites/{}/page?path=/p1&range=12mo", site.id))
        .await;
    assert_ne!(status, 503, "{html}");
    for csv in ["series", "visits", "pages", "sources", "goals"] {
        let r = owner
            .get(&format!("/sites/{}/{csv}.csv?range=12mo", site.id))
            .await;
        assert_ne!(r.status(), 503, "{csv}.csv");
    }
    let r = owner
        .get(&format!("/sites/{}/series.csv?range=12mo", site.id))
        .await;
    assert_eq!(r.status(), 202, "series.csv");
    let series = format!("/api/v1/sites/{}/series?range=12mo", site.id);
    let (status, retry, body) = api(series.clone()).await;
    assert_eq!(status, 202, "{body}");
    assert!(retry, "a client is told when to ask again");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "preparing", "{body}");
    for endpoint in ["pages", "visits", "sources", "breakdown?dimension=browser&"] {
        let sep = if endpoint.ends_with('&') { "" } else { "?" };
        let (status, _, body) = api(format!(
            "/api/v1/sites/{}/{endpoint}{sep}range=12mo",
            site.id
        ))
        .await;
        assert_ne!(status, 503, "{endpoint}: {body}");
    }

    // While the backfill runs, the answer says how far it is.
    let store = app.store.clone();
    let backfill = tokio::spawn(async move {
        let site = reload(&store, &site).await;
        site_totals::backfill(&store, &site).await.unwrap()
    });
    let mut told = None;
    while !backfill.is_finished() {
        let (status, _, body) = api(series.clone()).await;
        if status == 202 && body.contains("being prepared now") {
            told = Some(body);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A year of minute windows takes a while: the answer during it is
    // what this checks.
    backfill.abort();
    let told = told.expect("the progress was told while the backfill ran");
    assert!(told.contains(" totals "), "{told}");
}

//! The big-site read model: top pages of long ranges come from
//! page summaries over aligned spans of days, and the parts of days (the
//! last 24 hours, today, a zone's day edges) from summaries of hours; both
//! give exactly what reading every page bucket gives, in every zone, for
//! every preset and a matrix of custom ranges, before and after a late
//! view.

use bson::{doc, Document};
use chrono::{DateTime, TimeDelta, Utc};
use tickertape::domain::Page;
use tickertape::reports::page_totals;
use tickertape::reports::queries::{self, Scope};
use tickertape::reports::{Period, RangeQuery};
use tickertape::storage::page_summaries::{self, COLLECTION, HOUR_COLLECTION};
use tickertape::storage::sites::{self, Site};
use tickertape::storage::Resolution;

use crate::helpers::*;

const PATHS: [&str; 5] = ["/", "/a", "/b", "/c", "/deep/x"];

/// A few views a day for `days` days before t0, shaped so that every page
/// has its own total and some days have none.
fn hits_of(domain: &str, days: i64) -> Vec<(String, DateTime<Utc>)> {
    let mut hits = Vec::new();
    for d in 0..days {
        if d % 11 == 5 {
            continue;
        }
        for (i, path) in PATHS.iter().enumerate() {
            let n = (d as usize * (i + 3)) % (i + 2);
            for k in 0..n {
                // Spread over the day, some right before or after midnight
                // so zone edges cut days.
                let at = Resolution::Day.floor(t0()) - TimeDelta::days(d)
                    + TimeDelta::minutes(((k * 617 + i * 211 + d as usize * 37) % 1440) as i64);
                hits.push((format!("{domain}{path}"), at));
            }
        }
    }
    hits
}

async fn write(app: &TestApp, hits: &[(String, DateTime<Utc>)]) {
    let borrowed: Vec<(&str, DateTime<Utc>)> = hits.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    for chunk in borrowed.chunks(2_000) {
        app.write_hits(chunk).await;
    }
}

fn periods(zone: chrono_tz::Tz) -> Vec<(String, Period)> {
    let presets = [
        "24h",
        "today",
        "yesterday",
        "7d",
        "30d",
        "month",
        "lastmonth",
        "12mo",
    ]
    .map(|r| RangeQuery {
        range: Some(r.into()),
        ..Default::default()
    });
    let customs = [
        ("2025-10-30T23:00", "2026-11-22T05:00"),
        ("2025-12-01", "2026-11-01"),
        ("2026-02-27T13:00", "2026-03-30T02:00"),
        ("2026-03-28", "2026-10-26"),
        ("2026-06-15T05:30", "2026-06-18T00:00"),
        ("2025-11-20", "2026-11-23"),
    ]
    .map(|(from, to)| RangeQuery {
        range: Some("custom".into()),
        from: Some(from.into()),
        to: Some(to.into()),
        res: None,
    });
    presets
        .into_iter()
        .chain(customs)
        .map(|q| {
            let label = format!("{:?} {:?}-{:?}", q.range, q.from, q.to);
            (label, Period::resolve_in(&q, t0(), zone).unwrap())
        })
        .collect()
}

fn twelve_months() -> Period {
    let q = RangeQuery {
        range: Some("12mo".into()),
        ..Default::default()
    };
    Period::resolve(&q, t0()).unwrap()
}

async fn top(app: &TestApp, scope: &Scope<'_>, period: &Period) -> Vec<(Page, i64)> {
    queries::top_pages(&app.store, scope, period).await.unwrap()
}

async fn summaries(app: &TestApp) -> Vec<Document> {
    summaries_in(app, COLLECTION).await
}

async fn hour_summaries(app: &TestApp) -> Vec<Document> {
    summaries_in(app, HOUR_COLLECTION).await
}

async fn summaries_in(app: &TestApp, collection: &str) -> Vec<Document> {
    use futures::TryStreamExt;
    app.store
        .db()
        .collection::<Document>(collection)
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

async fn site_of(app: &TestApp, domain: &str) -> Site {
    sites::list(&app.store)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.domain.as_str() == domain)
        .unwrap()
}

#[tokio::test]
async fn summaries_give_every_range_the_buckets_numbers_in_three_zones_and_follow_late_views() {
    let app = spawn_app().await;
    let zones = ["UTC", "Europe/Berlin", "Asia/Kolkata"];
    let mut all_sites = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let domain = format!("sum{i}.test");
        app.add_site_in(&domain, &[], zone).await;
        write(&app, &hits_of(&domain, 400)).await;
        let site = site_of(&app, &domain).await;
        assert!(site.totals_complete);
        all_sites.push(site);
    }
    let compare = |label: &'static str| {
        let (app, all_sites) = (&app, &all_sites);
        async move {
            let mut compared = 0;
            for site in all_sites {
                for (range, period) in periods(site.time_zone.tz()) {
                    let from_summaries = top(app, &Scope::of_site(site), &period).await;
                    let every_bucket = top(app, &Scope::Site(&site.domain), &period).await;
                    assert_eq!(
                        from_summaries, every_bucket,
                        "{label}: {} {range}",
                        site.domain
                    );
                    compared += from_summaries.len();
                }
            }
            assert!(compared > 100, "{compared} rows compared");
        }
    };
    compare("first read").await;
    let stored = summaries(&app).await;
    assert!(
        stored.iter().any(|d| d.get_i32("level").unwrap() >= 7),
        "long spans are summarised: {} documents",
        stored.len()
    );
    // The last 24 hours and the zones' day edges took summaries of hours.
    let stored_hours = hour_summaries(&app).await;
    assert!(
        stored_hours
            .iter()
            .any(|d| d.get_i32("level").unwrap() >= 3),
        "parts of days are summarised as hours: {} documents",
        stored_hours.len()
    );
    // Every stored summary is right for the total it carries: its pages
    // add up to it.
    for d in stored.iter().chain(&stored_hours) {
        let pages = page_summaries::decode(d.get_binary_generic("data").unwrap()).unwrap();
        let views: i64 = pages.iter().map(|(_, f)| f.views).sum();
        assert_eq!(views, d.get_i64("total").unwrap(), "{d}");
    }
    compare("from stored summaries").await;
    assert_eq!(
        summaries(&app).await.len(),
        stored.len(),
        "nothing made again"
    );
    assert_eq!(hour_summaries(&app).await.len(), stored_hours.len());

    // The page buckets change behind the totals' back (no product write
    // does this): the summaries still answer, proving they are what is
    // read...
    let site = &all_sites[0];
    // A day on which /b has views (its bucket exists).
    let day = Resolution::Day.floor(t0()) - TimeDelta::days(201);
    let year = twelve_months();
    let before = top(&app, &Scope::of_site(site), &year).await;
    let tampered = app
        .store
        .db()
        .collection::<Document>("views_day")
        .update_one(
            doc! {"page": "sum0.test/b", "timestamp": bson::DateTime::from_chrono(day)},
            doc! {"$inc": {"totalViews": 100_i64}},
        )
        .await
        .unwrap();
    assert_eq!(tampered.modified_count, 1);
    assert_eq!(top(&app, &Scope::of_site(site), &year).await, before);
    // ...and a late view through the writer, which moves the site's total
    // for that day, makes that day's spans again (the tampering included).
    app.write_hits(&[("sum0.test/a", day + TimeDelta::hours(3))])
        .await;
    let after = top(&app, &Scope::of_site(site), &year).await;
    let views = |list: &[(Page, i64)], path: &str| {
        list.iter()
            .find(|(p, _)| p.path() == path)
            .map_or(0, |(_, v)| *v)
    };
    assert_eq!(views(&after, "/a"), views(&before, "/a") + 1);
    assert_eq!(views(&after, "/b"), views(&before, "/b") + 100);
    assert_eq!(after, top(&app, &Scope::Site(&site.domain), &year).await);
    // Late views on other sites and days too, and within the last 24
    // hours (hour summaries), then every range again.
    for (i, site) in all_sites.iter().enumerate() {
        let late = format!("{}/c", site.domain);
        let at = Resolution::Day.floor(t0()) - TimeDelta::days(3 + 50 * i as i64);
        let recent = t0() - TimeDelta::hours(5 + i as i64);
        app.write_hits(&[(late.as_str(), at), (late.as_str(), recent)])
            .await;
    }
    compare("after late views").await;
}

/// Today, as it happens: the hours that have settled come from hour
/// summaries, the last minutes' from their buckets, and the answer
/// follows every new view. Entries and exits (`pages.csv`) likewise.
#[tokio::test]
async fn today_and_the_last_24_hours_follow_new_views_through_hour_summaries() {
    let app = spawn_app().await;
    app.add_site("now.test", &[]).await;
    let now = Utc::now();
    let mut hits: Vec<(String, DateTime<Utc>)> = Vec::new();
    for h in 0..30_i64 {
        for (i, path) in PATHS.iter().enumerate() {
            for _ in 0..(h as usize + i) % 4 {
                let at = now - TimeDelta::hours(h) - TimeDelta::minutes(i as i64 * 7);
                hits.push((format!("now.test{path}"), at));
            }
        }
    }
    write(&app, &hits).await;
    let site = site_of(&app, "now.test").await;
    let periods: Vec<Period> = ["24h", "today", "7d"]
        .map(|r| {
            let q = RangeQuery {
                range: Some(r.into()),
                ..Default::default()
            };
            Period::resolve(&q, Utc::now()).unwrap()
        })
        .into();
    for (round, path) in PATHS.iter().take(3).enumerate() {
        for period in &periods {
            assert_eq!(
                top(&app, &Scope::of_site(&site), period).await,
                top(&app, &Scope::Site(&site.domain), period).await,
                "round {round}: {:?}",
                period.from
            );
        }
        assert!(!hour_summaries(&app).await.is_empty());
        // A new view, now and in a settled hour (a late one).
        let page = format!("now.test{path}");
        app.write_hits(&[
            (page.as_str(), Utc::now()),
            (page.as_str(), Utc::now() - TimeDelta::hours(3)),
        ])
        .await;
    }
    // Entries and exits of the hours come from the same summaries.
    let visits = page_totals::whole_hours(
        &app.store,
        &site,
        (
            Resolution::Hour.floor(now - TimeDelta::hours(20)),
            Resolution::Hour.floor(now - TimeDelta::hours(1)),
        ),
    )
    .await
    .unwrap();
    let views: i64 = visits.values().map(|f| f.views).sum();
    let expected = hits
        .iter()
        .filter(|(_, at)| {
            *at >= Resolution::Hour.floor(now - TimeDelta::hours(20))
                && *at < Resolution::Hour.floor(now - TimeDelta::hours(1))
        })
        .count() as i64
        + 3; // the late views of the three rounds, at now − 3 h
    assert_eq!(views, expected);
    assert!(
        visits.values().all(|f| f.visitors == 0),
        "hours carry no visitors"
    );
}

#[tokio::test]
async fn the_backfill_makes_every_summary_once_and_a_purge_removes_them() {
    let app = spawn_app().await;
    app.add_site("fill.test", &[]).await;
    app.add_site("other.test", &[]).await;
    let hits = hits_of("fill.test", 300);
    write(&app, &hits).await;
    write(&app, &hits_of("other.test", 20)).await;
    let site = site_of(&app, "fill.test").await;
    let days = page_totals::backfill(&app.store, &site).await.unwrap();
    let with_views: std::collections::BTreeSet<_> = hits
        .iter()
        .map(|(_, at)| Resolution::Day.floor(*at))
        .collect();
    assert_eq!(days, with_views.len() as u64);
    let made = summaries(&app).await;
    assert!(!made.is_empty());
    let site_key = site.id.to_string();
    assert!(made
        .iter()
        .all(|d| d.get_str("site") == Ok(site_key.as_str())));
    // Idempotent: a second run finds them all right and writes nothing.
    let stamp = |docs: &[Document]| {
        let mut ids: Vec<String> = docs
            .iter()
            .map(|d| {
                format!(
                    "{}={}",
                    d.get_str("_id").unwrap(),
                    d.get_i64("total").unwrap()
                )
            })
            .collect();
        ids.sort();
        ids
    };
    page_totals::backfill(&app.store, &site).await.unwrap();
    assert_eq!(stamp(&summaries(&app).await), stamp(&made));
    // What the backfill made is what reading every bucket gives.
    let year = twelve_months();
    assert_eq!(
        top(&app, &Scope::of_site(&site), &year).await,
        top(&app, &Scope::Site(&site.domain), &year).await
    );
    // A deleted site's purge takes its summaries with its buckets.
    let none_left = |docs: Vec<Document>| {
        docs.iter()
            .all(|d| d.get_str("site") != Ok(site_key.as_str()))
    };
    let day = top(&app, &Scope::of_site(&site), &twelve_months()).await;
    assert!(!day.is_empty());
    // Reports of the last 24 hours store hour summaries; the purge takes
    // those too.
    let q = RangeQuery {
        range: Some("24h".into()),
        ..Default::default()
    };
    top(
        &app,
        &Scope::of_site(&site),
        &Period::resolve(&q, t0()).unwrap(),
    )
    .await;
    assert!(!none_left(hour_summaries(&app).await));
    sites::mark_deleted(&app.store, &site, t0()).await.unwrap();
    tickertape::storage::site_purge::purge_due(&app.store, t0(), TimeDelta::zero())
        .await
        .unwrap();
    assert!(none_left(summaries(&app).await));
    assert!(none_left(hour_summaries(&app).await));
}

/// A backfill or report still holding a site that is being deleted (the
/// backfill `serve` runs in the background, say) stores nothing for it,
/// so the purge leaves none behind.
#[tokio::test]
async fn no_summary_is_stored_for_a_site_marked_deleted() {
    let app = spawn_app().await;
    app.add_site("gone.test", &[]).await;
    write(&app, &hits_of("gone.test", 50)).await;
    let site = site_of(&app, "gone.test").await;
    let key = site.id.to_string();
    let of_site = |docs: Vec<Document>| {
        docs.iter()
            .filter(|d| d.get_str("site") == Ok(key.as_str()))
            .count()
    };
    sites::mark_deleted(&app.store, &site, t0()).await.unwrap();
    // Its buckets are still there until the purge: the backfill reads
    // them, and stores nothing.
    assert!(page_totals::backfill(&app.store, &site).await.unwrap() > 0);
    assert_eq!(of_site(summaries(&app).await), 0);
    // The site back, the same backfill stores its summaries: the check is
    // the site's state, not something else that stopped the writes.
    app.store
        .db()
        .collection::<Document>(sites::COLLECTION)
        .update_one(
            doc! {"_id": bson::Uuid::from(site.id.as_uuid())},
            doc! {"$unset": {"deletedAt": ""}},
        )
        .await
        .unwrap();
    page_totals::backfill(&app.store, &site).await.unwrap();
    assert!(of_site(summaries(&app).await) > 0);
}

/// A visit's next view moves its previous view's exit (and bounce) back
/// to that view's hour, without a view there: an hour summary kept while
/// the hour's total is unchanged would keep the old exit. The site's
/// bucket of that hour is marked, so the summary is made again.
#[tokio::test]
async fn an_exit_moved_back_to_a_summarised_hour_is_seen() {
    let app = spawn_app().await;
    let site = app.add_site("late.test", &[]).await;
    let hour = Resolution::Hour.floor(Utc::now() - TimeDelta::hours(3));
    let exits =
        |answer: &page_summaries::Answer, page: &str| answer.get(page).map_or(0, |f| f.exits);
    app.clock.set(hour + TimeDelta::minutes(58));
    let r = app.pixel(&format!("site={}&page=/first", site.id)).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let range = (hour, hour + TimeDelta::hours(1));
    let before = page_totals::whole_hours(&app.store, &site, range)
        .await
        .unwrap();
    assert_eq!(exits(&before, "late.test/first"), 1, "{before:?}");
    assert!(
        !hour_summaries(&app).await.is_empty(),
        "the hour is summarised"
    );
    // Three minutes later, in the next hour, the same visitor goes on.
    app.clock.set(hour + TimeDelta::minutes(61));
    let r = app.pixel(&format!("site={}&page=/second", site.id)).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let after = page_totals::whole_hours(&app.store, &site, range)
        .await
        .unwrap();
    assert_eq!(
        exits(&after, "late.test/first"),
        0,
        "its visit went on: {after:?}"
    );
    let next = page_totals::whole_hours(
        &app.store,
        &site,
        (hour + TimeDelta::hours(1), hour + TimeDelta::hours(2)),
    )
    .await
    .unwrap();
    assert_eq!(exits(&next, "late.test/second"), 1, "{next:?}");
}

/// `pages.csv`'s time on page cells of a page: mean time (one decimal),
/// what it is measured by, of how many views, mean scroll depth, engaged
/// views.
fn time_cells(csv: &str, path: &str) -> [String; 5] {
    let row = crate::reference_model::csv_rows(csv)
        .into_iter()
        .find(|r| r[0] == path)
        .unwrap_or_else(|| panic!("{path} not in {csv}"));
    [
        row[6].clone(),
        row[7].clone(),
        row[8].clone(),
        row[9].clone(),
        row[10].clone(),
    ]
}

fn cells(cells: [&str; 5]) -> [String; 5] {
    cells.map(str::to_owned)
}

/// Time on page and scroll depth over a year come from the page
/// summaries (every page of `pages.csv` and the API's list), and stay
/// exact when an engagement changes a day whose summary is already made,
/// without a view: here the engagement is sent (by the app's clock) on
/// its view's day, days after (by the real one, which says which days
/// have ended) that day was summarised, as a journal applied late does.
#[tokio::test]
async fn time_on_page_and_scroll_depth_late_to_a_summarised_day_show_in_a_years_pages() {
    use crate::json_api::{create_token, get};
    let app = spawn_app().await;
    let site = app.add_site("engaged.test", &[]).await;
    let id = site.id.to_string();
    let ua =
        |who: &str| format!("Mozilla/5.0 (X11; Linux x86_64; {who}) Gecko/20100101 Firefox/133.0");
    let (r, s, t) = (ua("reader"), ua("skimmer"), ua("third"));
    // A visit is within one UTC day (its visitor id is the day's).
    // A day that ended days ago (summaries are of days that have settled).
    let day = Resolution::Day.floor(Utc::now()) - TimeDelta::days(3);
    let at = |h: i64, m: i64| day + TimeDelta::hours(h) + TimeDelta::minutes(m);
    let hit = |when: DateTime<Utc>, query: String, who: &str| {
        let (app, who) = (&app, who.to_owned());
        async move {
            app.clock.set(when);
            let r = app
                .pixel_with(&query, &[("user-agent", who.as_str())])
                .await;
            assert_eq!(r.status(), 200, "{query}");
        }
    };
    let view = |path: &str| format!("site={id}&page={path}");
    let engage = |path: &str, sd: i64, et: i64| format!("site={id}&page={path}&sd={sd}&et={et}");
    // The skimmer engages with /c at once: 40 % scrolled, 2 s.
    hit(at(12, 0), view("/c"), &s).await;
    hit(at(12, 1), engage("/c", 40, 2_000), &s).await;
    // The reader views /a then /b: /a is timed (120 s), /b not yet.
    hit(at(23, 40), view("/a"), &r).await;
    hit(at(23, 42), view("/b"), &r).await;
    // The third views /e.
    hit(at(23, 43), view("/e"), &t).await;
    app.settle().await;
    // The app's clock stays on that day (the reader's visit stays open);
    // which days have ended for the summaries is the real clock's.
    app.clock.set(at(23, 44));

    app.add_user("owner@example.com", tickertape::accounts::Role::Admin)
        .await;
    let login = app.login("owner@example.com").await;
    let token = create_token(&login, "summaries", None).await;
    let csv = || {
        let (login, id) = (&login, &id);
        async move {
            let (status, csv) = login
                .text(&format!("/sites/{id}/pages.csv?range=12mo"))
                .await;
            assert_eq!(status, 200, "{csv}");
            csv
        }
    };
    let first = csv().await;
    assert_eq!(
        time_cells(&first, "/a"),
        cells(["120.0", "until_next_view", "1", "", "0"])
    );
    assert_eq!(time_cells(&first, "/b"), cells(["", "", "0", "", "0"]));
    assert_eq!(
        time_cells(&first, "/c"),
        cells(["2.0", "engaged", "1", "40.0", "1"])
    );
    assert_eq!(time_cells(&first, "/e"), cells(["", "", "0", "", "0"]));
    // The day is summarised, with the site's engagement sums it was made
    // with.
    let number = page_summaries::day_number(day);
    let of_day = summaries(&app)
        .await
        .into_iter()
        .find(|d| d.get_i32("level") == Ok(0) && d.get_i64("index") == Ok(number))
        .expect("the day's summary is stored");
    assert_eq!(
        of_day.get_array("engaged").unwrap(),
        &vec![
            bson::Bson::Int64(1),
            bson::Bson::Int64(40),
            bson::Bson::Int64(2_000)
        ]
    );

    // The page bucket changed behind the site's back (no product write
    // does this): the year's pages do not move, so they are read from the
    // summaries, not from every page's buckets.
    let bucket = doc! {"page": "engaged.test/c", "timestamp": bson::DateTime::from_chrono(day)};
    let tamper = |n: i64| {
        let (app, bucket) = (&app, bucket.clone());
        async move {
            let done = app
                .store
                .db()
                .collection::<Document>("views_day")
                .update_one(bucket, doc! {"$inc": {"engagedMs.12": n}})
                .await
                .unwrap();
            assert_eq!(done.modified_count, 1);
        }
    };
    tamper(1_000_000).await;
    assert_eq!(csv().await, first, "read from the summaries");
    tamper(-1_000_000).await;

    // After the day was summarised: the reader's engagement with /b
    // (80 %, 4 s), without a view.
    let stored_before = summaries(&app).await.len();
    hit(at(23, 50), engage("/b", 80, 4_000), &r).await;
    app.settle().await;
    let after = csv().await;
    assert_eq!(
        time_cells(&after, "/b"),
        cells(["4.0", "engaged", "1", "80.0", "1"])
    );
    assert_eq!(time_cells(&after, "/e"), time_cells(&first, "/e"));
    assert_eq!(time_cells(&after, "/a"), time_cells(&first, "/a"));
    assert_eq!(time_cells(&after, "/c"), time_cells(&first, "/c"));
    // The day's summary was made again, with the new sums (and the
    // spans above it: no other).
    assert_eq!(summaries(&app).await.len(), stored_before);
    let of_day = summaries(&app)
        .await
        .into_iter()
        .find(|d| d.get_i32("level") == Ok(0) && d.get_i64("index") == Ok(number))
        .unwrap();
    assert_eq!(
        of_day.get_array("engaged").unwrap(),
        &vec![
            bson::Bson::Int64(2),
            bson::Bson::Int64(120),
            bson::Bson::Int64(6_000)
        ]
    );
    // The API's pages of the year say the same.
    let a = get(
        &app,
        &token,
        &format!("/api/v1/sites/{id}/pages?range=12mo"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.json);
    let page = |path: &str| {
        a.json["pages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["path"] == path)
            .cloned()
            .unwrap()
    };
    let b = page("/b");
    assert_eq!(
        (
            b["timeOnPage"].as_f64(),
            b["timeKind"].as_str(),
            b["scrollDepth"].as_f64()
        ),
        (Some(4.0), Some("engaged"), Some(80.0)),
        "{b}"
    );
    let a = page("/a");
    assert_eq!(
        (
            a["timeOnPage"].as_f64(),
            a["timeKind"].as_str(),
            a["timedViews"].as_i64()
        ),
        (Some(120.0), Some("until_next_view"), Some(1)),
        "{a}"
    );
}

/// An engagement with a view of an hour already summarised, arriving in
/// the next hour, is in that hour's summary: the site's hour bucket
/// carries it too, so the summary is made again. So is the time until
/// the visit's next view, in the hour after (the site's bucket of the
/// earlier hour is marked).
#[tokio::test]
async fn an_engagement_late_to_a_summarised_hour_is_seen() {
    let app = spawn_app().await;
    let site = app.add_site("hour.test", &[]).await;
    let mut hour = Resolution::Hour.floor(Utc::now() - TimeDelta::hours(3));
    if Resolution::Day.floor(hour) != Resolution::Day.floor(hour + TimeDelta::hours(1)) {
        // A visit does not cross UTC midnight.
        hour -= TimeDelta::hours(1);
    }
    let engaged = |answer: &page_summaries::Answer| {
        answer.get("hour.test/read").map(|f| {
            (
                f.engaged_views,
                f.scroll_sum,
                f.engaged_ms,
                f.timed_views,
                f.timed_secs,
            )
        })
    };
    app.clock.set(hour + TimeDelta::minutes(58));
    let r = app.pixel(&format!("site={}&page=/read", site.id)).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let range = (hour, hour + TimeDelta::hours(1));
    let before = page_totals::whole_hours(&app.store, &site, range)
        .await
        .unwrap();
    assert_eq!(engaged(&before), Some((0, 0, 0, 0, 0)), "{before:?}");
    assert!(!hour_summaries(&app).await.is_empty());
    app.clock.set(hour + TimeDelta::minutes(62));
    let r = app
        .pixel(&format!("site={}&page=/read&sd=65&et=3000", site.id))
        .await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let after = page_totals::whole_hours(&app.store, &site, range)
        .await
        .unwrap();
    assert_eq!(engaged(&after), Some((1, 65, 3_000, 0, 0)), "{after:?}");
    // The next view, in the next hour, times the first (seven minutes).
    app.clock.set(hour + TimeDelta::minutes(65));
    let r = app.pixel(&format!("site={}&page=/next", site.id)).await;
    assert_eq!(r.status(), 200);
    app.settle().await;
    let timed = page_totals::whole_hours(&app.store, &site, range)
        .await
        .unwrap();
    assert_eq!(engaged(&timed), Some((1, 65, 3_000, 1, 420)), "{timed:?}");
}

/// A summary stored before summaries carried time on page and scroll
/// depth (format 1, no `engaged`) is never used, and the backfill makes
/// it again with them.
#[tokio::test]
async fn a_summary_of_the_earlier_format_is_not_used_and_the_backfill_makes_it_again() {
    let app = spawn_app().await;
    let site = app.add_site("old.test", &[]).await;
    let day = Resolution::Day.floor(Utc::now()) - TimeDelta::days(2);
    let query = |q: &str| format!("site={}&{q}", site.id);
    for (minute, q) in [
        (600, "page=/a"),
        (601, "page=/a&sd=70&et=1500"),
        (603, "page=/b"),
    ] {
        app.clock.set(day + TimeDelta::minutes(minute));
        assert_eq!(app.pixel(&query(q)).await.status(), 200);
    }
    app.settle().await;
    app.clock.set(Utc::now());
    let number = page_summaries::day_number(day);
    let id = format!("{}/0/{number}", site.id);
    let site = site_of(&app, "old.test").await;
    page_totals::backfill(&app.store, &site).await.unwrap();
    let collection = app.store.db().collection::<Document>(COLLECTION);
    let made = collection
        .find_one(doc! {"_id": &id})
        .await
        .unwrap()
        .expect("the backfill made the day's summary");
    let a = |d: &Document| {
        page_summaries::decode(d.get_binary_generic("data").unwrap())
            .unwrap()
            .into_iter()
            .find(|(p, _)| p == "old.test/a")
            .unwrap()
            .1
    };
    let want = a(&made);
    assert_eq!((want.views, want.timed_views, want.timed_secs), (1, 1, 180));
    assert_eq!(
        (want.engaged_views, want.scroll_sum, want.engaged_ms),
        (1, 70, 1_500)
    );
    // As the previous version stored it: format 1 (views, entries, exits,
    // visitors), no `engaged`, and here a wrong count of views that would
    // show if it were used.
    let mut old = vec![1_u8, 1, 0, 10];
    old.extend_from_slice(b"old.test/a");
    old.extend_from_slice(&[0xce, 0x0f, 0, 0, 0]);
    let mut stale = made.clone();
    stale.remove("engaged");
    stale.insert(
        "data",
        bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: old,
        },
    );
    let put_stale = || {
        let (collection, id, stale) = (&collection, &id, stale.clone());
        async move {
            collection
                .replace_one(doc! {"_id": id}, stale)
                .await
                .unwrap();
        }
    };
    put_stale().await;
    let range = (day, day + TimeDelta::days(1));
    let read = page_totals::summarise(&app.store, &site, page_summaries::Grain::Day, range)
        .await
        .unwrap();
    assert_eq!(
        read["old.test/a"], want,
        "not used: made again from the buckets"
    );
    put_stale().await;
    page_totals::backfill(&app.store, &site).await.unwrap();
    let again = collection
        .find_one(doc! {"_id": &id})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a(&again), want);
    assert_eq!(
        again.get_array("engaged").unwrap(),
        &vec![
            bson::Bson::Int64(1),
            bson::Bson::Int64(70),
            bson::Bson::Int64(1_500)
        ]
    );
}

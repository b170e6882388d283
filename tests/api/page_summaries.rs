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

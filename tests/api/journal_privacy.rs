//! The privacy promise on disk: once a hit is applied, nothing in the
//! journal directory lets anyone rebuild its visitor's trail. A probe found
//! 48,178 applied records in a 16 MiB segment that had not rolled, each
//! with its visitor id and page; with the day's salt, the id of a known
//! address and User-Agent led to its exact pricing → signup → thanks
//! trail.

use std::net::IpAddr;

use crate::helpers::*;

/// Every byte under `dir`, file by file.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn no_applied_hit_stays_in_the_journal_past_the_segment_age() {
    let app = spawn_app_with(|s| {
        s.security.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
        s.ingest.journal_segment_secs = 2;
    })
    .await;
    let site = app.add_site("trail.test", &[]).await;
    let (client, ua) = (
        "203.0.113.77",
        "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    );
    let trail = ["/pricing-7f3a", "/signup-7f3a", "/thanks-7f3a"];
    for (i, path) in trail.iter().enumerate() {
        app.clock
            .set(t0() + chrono::TimeDelta::seconds(40 * i as i64));
        let r = app
            .pixel_with(
                &format!("site={}&page={path}", site.id),
                &[("x-forwarded-for", client), ("user-agent", ua)],
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    // The attack: the day's salt (the operator has the database), a known
    // address and User-Agent, and the visitor id they make.
    let salt = app.ingest.visitors.salts.of(t0());
    let key = app
        .ingest
        .visitors
        .proxies
        .client(Some(IpAddr::from([127, 0, 0, 1])), [client]);
    let visitor = tickertape::ingest::visitor::visitor_id(&salt, "trail.test", &key, ua);
    let dir = app.journal.dir().to_owned();
    let found = |files: &[(std::path::PathBuf, Vec<u8>)]| -> Vec<String> {
        let mut found = Vec::new();
        for (path, bytes) in files {
            if contains(bytes, &visitor.to_le_bytes()) {
                found.push(format!("{}: the visitor id", path.display()));
            }
            for page in trail {
                if contains(bytes, page.as_bytes()) {
                    found.push(format!("{}: {page}", path.display()));
                }
            }
        }
        found
    };
    // Just answered, in a young segment: the hits are on disk (so the
    // search below can find them: it does not look in the wrong place).
    assert!(
        !found(&files_under(&dir)).is_empty(),
        "the hits were journaled"
    );
    app.settle().await;
    // Applied: after the segment age (2 s) and the sealer's tick, nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = found(&files_under(&dir));
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "applied hits still on disk: {left:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The figures are all in the database.
    assert_eq!(
        app.total_views(tickertape::storage::Resolution::Day).await,
        3
    );
    // The visit store keeps the trail (that is what funnels read) but
    // nothing that ties it to whoever made it: neither the visitor id nor
    // the address or User-Agent, and a visit id of its own. It is written
    // as parts, one a batch.
    use tickertape::storage::visit_log;
    let parts: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<bson::Document>(visit_log::PARTS)
            .find(bson::doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert!(!parts.is_empty());
    let stored: Vec<u8> = parts
        .iter()
        .flat_map(|p| bson::to_vec(p).unwrap())
        .collect();
    assert!(contains(&stored, trail[2].as_bytes()), "the trail is there");
    assert!(!contains(&stored, &visitor.to_le_bytes()), "the visitor id");
    assert!(!contains(&stored, client.as_bytes()), "the address");
    assert!(!contains(&stored, b"Firefox/132"), "the User-Agent");
    let ever = visit_log::VisitQuery::new("trail.test", t0(), t0() + chrono::TimeDelta::days(1));
    let visits = visit_log::visits(&app.store, &ever).await.unwrap();
    assert_eq!(visits.len(), 1, "{visits:?}");
    assert_ne!(visits[0].id, visitor as i64);
    assert_eq!(visits[0].ordered_steps().len(), 3);
    // Its day pack (the read model of a closed day) likewise: the trail,
    // and neither the visitor id nor the address or User-Agent.
    use tickertape::storage::{visit_days, visit_packs};
    let day = visit_days::day_of(t0());
    let built = visit_packs::build_day(&app.store, "trail.test", day)
        .await
        .unwrap();
    assert_eq!(built.visits, 1);
    let packs: Vec<bson::Document> = futures::TryStreamExt::try_collect(
        app.store
            .db()
            .collection::<bson::Document>(visit_packs::COLLECTION)
            .find(bson::doc! {})
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert!(!packs.is_empty());
    let stored: Vec<u8> = packs
        .iter()
        .flat_map(|p| bson::to_vec(p).unwrap())
        .collect();
    assert!(
        contains(&stored, trail[2].as_bytes()),
        "the trail is packed"
    );
    assert!(!contains(&stored, &visitor.to_le_bytes()), "the visitor id");
    assert!(!contains(&stored, client.as_bytes()), "the address");
    assert!(!contains(&stored, b"Firefox/132"), "the User-Agent");
}

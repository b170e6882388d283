//! Restarts in an ordinary server life, not only crashes mid-load: after a
//! quiet spell (every segment applied and deleted), with changed journal
//! settings, with the journal's files lost. Every hit answered 200 is
//! counted exactly once on every level.

use std::path::Path;
use std::time::{Duration, Instant};

use tickertape::storage::Resolution;

use crate::helpers::*;

/// Whether any lane of the journal still holds a segment file.
fn has_segments(journal: &Path) -> bool {
    std::fs::read_dir(journal).unwrap().flatten().any(|lane| {
        std::fs::read_dir(lane.path()).is_ok_and(|files| {
            files
                .flatten()
                .any(|f| f.path().extension().is_some_and(|e| e == "seg"))
        })
    })
}

/// Waits until every segment is applied and deleted: the quiet state in
/// which the files alone no longer say where a lane stood.
async fn quiet_until_segments_are_deleted(app: &TestApp) {
    app.settle().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while has_segments(app.journal.dir()) {
        assert!(
            Instant::now() < deadline,
            "applied segments were never deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn send(app: &TestApp, site: &str, from: usize, n: usize) {
    for i in from..from + n {
        let r = app
            .pixel(&format!("site={site}&page=/quiet/{}", i % 7))
            .await;
        assert_eq!(r.status(), 200, "view {i}");
    }
}

async fn assert_counted(app: &TestApp, views: i64) {
    app.settle().await;
    for g in Resolution::ALL {
        assert_eq!(app.total_views(g).await, views, "page {g:?}");
        assert_eq!(app.site_total_views(g).await, views, "site {g:?}");
    }
}

fn settings_with(segment_secs: u64, lanes: u32) -> tickertape::settings::Settings {
    let mut settings = test_settings();
    settings.ingest.journal_segment_secs = segment_secs;
    settings.ingest.journal_lanes = lanes;
    settings
}

#[tokio::test]
async fn restarts_after_quiet_spells_and_changed_settings_lose_nothing() {
    let settings = settings_with(1, 2);
    let mut app = spawn_app_on(database_uri(), settings.clone()).await;
    let site = app.add_site("quiet.example", &[]).await.id.to_string();
    send(&app, &site, 0, 20).await;
    quiet_until_segments_are_deleted(&app).await;

    app = app.restart(settings.clone()).await;
    send(&app, &site, 20, 20).await;
    assert_counted(&app, 40).await;
    quiet_until_segments_are_deleted(&app).await;

    // Another segment age and size, as an operator might set them.
    let mut changed = settings_with(2, 2);
    changed.ingest.journal_segment_mb = 2;
    changed.ingest.journal_dir = settings.ingest.journal_dir.clone();
    app = app.restart(changed.clone()).await;
    send(&app, &site, 40, 40).await;
    assert_counted(&app, 80).await;
    quiet_until_segments_are_deleted(&app).await;

    // A restart right after another, with nothing sent in between.
    app = app.restart(changed.clone()).await;
    app = app.restart(changed).await;
    send(&app, &site, 80, 10).await;
    assert_counted(&app, 90).await;
}

/// The journal's disk is lost while the database keeps what was applied:
/// the whole directory (a new journal, with an id of its own), or only its
/// lanes' files (as a version without marks leaves a quiet journal).
#[tokio::test]
async fn a_lost_journal_directory_loses_nothing_that_was_applied_and_counts_new_hits() {
    let journal = tempfile::tempdir().unwrap();
    let mut settings = settings_with(1, 2);
    settings.ingest.journal_dir = Some(journal.path().to_owned());
    let mut app = spawn_app_on(database_uri(), settings.clone()).await;
    let site = app.add_site("lost.example", &[]).await.id.to_string();
    send(&app, &site, 0, 30).await;
    quiet_until_segments_are_deleted(&app).await;

    // Lanes and marks gone, journal.meta kept (same journal id).
    app.stop().await;
    for entry in std::fs::read_dir(journal.path()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("lane-") {
            let path = entry.path();
            if path.is_dir() {
                std::fs::remove_dir_all(path).unwrap();
            } else {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
    app = app.restart(settings.clone()).await;
    send(&app, &site, 30, 30).await;
    assert_counted(&app, 60).await;
    quiet_until_segments_are_deleted(&app).await;

    // Everything gone: a new journal.
    app.stop().await;
    for entry in std::fs::read_dir(journal.path()).unwrap().flatten() {
        if entry.file_name() != "LOCK" {
            let path = entry.path();
            if path.is_dir() {
                std::fs::remove_dir_all(path).unwrap();
            } else {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
    app = app.restart(settings).await;
    send(&app, &site, 60, 30).await;
    assert_counted(&app, 90).await;
}

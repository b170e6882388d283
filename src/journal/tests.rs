use super::*;
use chrono::{TimeZone, Utc};

fn config(dir: &Path) -> JournalConfig {
    JournalConfig {
        dir: dir.to_owned(),
        lanes: 1,
        segment_bytes: 64 * 1024,
        segment_max_age: std::time::Duration::from_secs(60),
        budget_bytes: 1 << 30,
        queue_capacity: 10_000,
        queue_bytes: 32 << 20,
        ack_mode: AckMode::Durable,
    }
}

fn hit(i: usize) -> Record {
    Record {
        page: format!("example.com/page/{i}"),
        at: Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap(),
        source: (i % 3 == 0).then(|| format!("source{i}.example")),
        visit: (i % 2 == 0).then(|| record::Visit {
            visitor: i as u64,
            place: (i % 4 == 0).then(|| record::VisitPlace {
                id: 1_000 + i as u64,
                start: Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap(),
                step: i as u32,
            }),
            ..Default::default()
        }),
        labels: match i % 4 {
            0 => Default::default(),
            _ => crate::domain::Labels::default()
                .with(crate::domain::Dimension::Browser, "Firefox")
                .with(crate::domain::Dimension::Country, format!("C{i}")),
        },
        props: Default::default(),
        revenue: None,
        engagement: None,
    }
}

/// Submits `n` hits in durable mode and waits for every sync.
async fn write(journal: &Journal, range: std::ops::Range<usize>) {
    let mut pending = Vec::new();
    for i in range {
        match journal.appender().submit(hit(i)).unwrap() {
            Accepted::Pending(rx) => pending.push(rx),
            Accepted::Queued => panic!("durable mode answers after the sync"),
        }
    }
    for rx in pending {
        rx.await.unwrap().unwrap();
    }
}

/// A journal holding hits 0..3000, written in ten syncs over several
/// 64 KiB segments.
async fn three_thousand_hits(dir: &Path) -> (Journal, Vec<LaneFeed>) {
    let (journal, feeds) = Journal::open(&config(dir)).unwrap();
    for round in 0..10 {
        write(&journal, round * 300..(round + 1) * 300).await;
    }
    (journal, feeds)
}

fn read_all(lane: &Lane) -> Vec<Record> {
    let mut at = lane.oldest();
    let mut out = Vec::new();
    while at < lane.committed() {
        let chunk = lane.read(at, 1000).unwrap();
        assert!(chunk.end > at, "reading makes progress");
        out.extend(chunk.records);
        at = chunk.end;
    }
    out
}

/// Waits (at most `within`) until the sealer has closed the lane's applied
/// segment and it is deleted.
fn until_every_segment_is_deleted(dir: &Path, within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    while !segments(dir).is_empty() {
        assert!(std::time::Instant::now() < deadline, "never deleted");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("lane-0"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn synced_hits_survive_a_reopen_in_order_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = three_thousand_hits(dir.path()).await;
    let id = journal.id();
    journal.close_writers().await;
    drop(journal);
    assert!(segments(dir.path()).len() > 1, "64 KiB segments roll");

    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(journal.id(), id, "the journal keeps its id");
    assert_eq!(journal.stats().committed_records.load(Relaxed), 3000);
    let records = read_all(&journal.lanes()[0]);
    assert_eq!(records.len(), 3000);
    assert!(records.iter().enumerate().all(|(i, r)| *r == hit(i)));
}

#[tokio::test]
async fn a_segment_stays_until_every_applier_is_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = three_thousand_hits(dir.path()).await;
    let lane = &journal.lanes()[0];
    let before = segments(dir.path()).len();
    assert!(before > 2);
    // The views, rollups and visits are all in; the sources not yet:
    // nothing may go.
    lane.applied(0, lane.committed());
    lane.applied(2, lane.committed());
    lane.applied(3, lane.committed());
    assert_eq!(segments(dir.path()).len(), before);
    // The sources reach the middle: only what lies before it goes.
    let middle = read_all(lane).len() / 2;
    let mut at = lane.oldest();
    let mut read = 0;
    while read < middle {
        let chunk = lane.read(at, middle - read).unwrap();
        read += chunk.records.len();
        at = chunk.end;
    }
    lane.applied(1, at);
    let after = segments(dir.path()).len();
    assert!(after < before && after > 1, "{before} -> {after}");
    // Everything the sources have not applied is still there.
    assert!(lane.oldest() <= at);
    assert!(read_all(lane).len() >= 3000 - read);
    // The sources past everything, the rollups back in the middle: what
    // the rollups still need stays.
    lane.applied(2, at);
    lane.applied(1, lane.committed());
    assert_eq!(segments(dir.path()).len(), after);
    // All past everything: only the writer's segment is left.
    lane.applied(2, lane.committed());
    assert_eq!(segments(dir.path()).len(), 1);
}

#[tokio::test]
async fn a_segment_stays_until_the_visit_store_is_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = three_thousand_hits(dir.path()).await;
    let lane = &journal.lanes()[0];
    let before = segments(dir.path()).len();
    for bucket_stream in 0..3 {
        lane.applied(bucket_stream, lane.committed());
    }
    assert_eq!(segments(dir.path()).len(), before, "the visits need them");
    lane.applied(3, lane.committed());
    assert_eq!(segments(dir.path()).len(), 1);
}

/// A quiet lane's segment is closed once it is older than the journal's
/// `segment_max_age`, and deleted once applied: no applied hit waits on
/// disk for 16 MiB more to come. A busy lane's segment is closed at the
/// next append after that age.
#[tokio::test]
async fn an_old_segment_is_closed_and_deleted_once_applied() {
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig {
        segment_max_age: std::time::Duration::from_millis(400),
        ..config(dir.path())
    };
    let (journal, _feeds) = Journal::open(&config).unwrap();
    let lane = &journal.lanes()[0];
    write(&journal, 0..10).await;
    for applier in 0..lane::APPLIERS {
        lane.applied(applier, lane.committed());
    }
    assert_eq!(
        segments(dir.path()).len(),
        1,
        "the writer's segment stays while young"
    );
    // Quiet: the sealer closes it, and it goes at once (it is applied).
    until_every_segment_is_deleted(dir.path(), std::time::Duration::from_secs(5));
    // Busy: a hit after the age starts a new segment; the old one goes
    // once applied.
    write(&journal, 10..20).await;
    let first = segments(dir.path());
    assert_eq!(first.len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(450));
    write(&journal, 20..21).await;
    let now = segments(dir.path());
    assert!(now.len() <= 2 && !now.is_empty(), "{now:?}");
    assert_ne!(now.last(), first.last(), "a new segment was started");
    for applier in 0..lane::APPLIERS {
        lane.applied(applier, lane.committed());
    }
    assert!(!first[0].exists(), "the closed, applied segment is deleted");
    assert_eq!(read_all(lane).len(), 1, "only the unapplied hit is on disk");
}

#[tokio::test]
async fn applied_segments_are_deleted_and_their_bytes_released() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = three_thousand_hits(dir.path()).await;
    let lane = &journal.lanes()[0];
    let before = segments(dir.path()).len();
    let bytes = journal.bytes();
    lane.release(lane.committed());
    // Everything is applied, but the newest segment is the writer's.
    assert_eq!(segments(dir.path()).len(), 1);
    assert!(before > 1);
    assert!(journal.bytes() < bytes);
    assert_eq!(lane.oldest(), lane_last_start(dir.path()));
}

/// A journal of ten synced hits, closed as a crash would leave it; returns
/// its (only) segment file.
async fn ten_hits_then_closed(dir: &Path) -> PathBuf {
    let (journal, _feeds) = Journal::open(&config(dir)).unwrap();
    write(&journal, 0..10).await;
    journal.close_writers().await;
    drop(journal);
    segments(dir).pop().unwrap()
}

fn lane_last_start(dir: &Path) -> u64 {
    segment::start_of(segments(dir).last().unwrap()).unwrap()
}

#[tokio::test]
async fn a_torn_tail_is_cut_off_with_the_good_records_kept() {
    let dir = tempfile::tempdir().unwrap();
    let last = ten_hits_then_closed(dir.path()).await;
    // A crash in the middle of the next append: half a record.
    let mut partial = Vec::new();
    hit(10).encode_into(&mut partial);
    let good_len = std::fs::metadata(&last).unwrap().len();
    let mut f = OpenOptions::new().append(true).open(&last).unwrap();
    f.write_all(&partial[..partial.len() / 2]).unwrap();
    drop(f);

    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(journal.stats().torn_tails_truncated.load(Relaxed), 1);
    assert_eq!(std::fs::metadata(&last).unwrap().len(), good_len);
    assert_eq!(
        read_all(&journal.lanes()[0]),
        (0..10).map(hit).collect::<Vec<_>>()
    );
    assert!(journal.stats().corrupt_segments().is_empty());
    // New hits go on after the cut.
    write(&journal, 10..12).await;
    assert_eq!(read_all(&journal.lanes()[0]).len(), 12);
}

#[tokio::test]
async fn a_damaged_record_in_the_middle_stops_replay_there_and_is_kept_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let last = ten_hits_then_closed(dir.path()).await;
    let mut bytes = std::fs::read(&last).unwrap();
    let one = hit(0).encoded_len();
    // Flip a bit inside the fourth record's page.
    bytes[HEADER_LEN as usize + 3 * one + 12] ^= 0x01;
    std::fs::write(&last, &bytes).unwrap();

    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    let corrupt = journal.stats().corrupt_segments();
    assert_eq!(corrupt.len(), 1, "{corrupt:?}");
    assert!(corrupt[0].contains("checksum"), "{corrupt:?}");
    let lane = &journal.lanes()[0];
    // Replay gives the three good records before the damage, nothing after.
    assert_eq!(read_all(lane), (0..3).map(hit).collect::<Vec<_>>());
    // New hits go after the damaged file's bytes, in a new segment.
    write(&journal, 20..21).await;
    assert_eq!(read_all(lane).len(), 4);
    // Once what preceded the damage is applied, the file is set aside.
    lane.release(lane.committed());
    assert!(!last.exists());
    let aside: Vec<_> = std::fs::read_dir(dir.path().join("quarantine"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(aside.len(), 1);
    // Its header and the bytes from the damage on; not the applied records.
    let damage = HEADER_LEN as usize + (0..3).map(|i| hit(i).encoded_len()).sum::<usize>();
    let mut kept = bytes[..HEADER_LEN as usize].to_vec();
    kept.extend_from_slice(&bytes[damage..]);
    assert_eq!(std::fs::read(aside[0].path()).unwrap(), kept);
}

#[tokio::test]
async fn a_full_budget_refuses_new_hits_and_keeps_the_accepted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.budget_bytes = 2_000;
    let (journal, _feeds) = Journal::open(&config).unwrap();
    let mut accepted = Vec::new();
    let mut refused = 0;
    for i in 0..100 {
        match journal.appender().submit(hit(i)) {
            Ok(Accepted::Pending(rx)) => accepted.push(rx),
            Ok(Accepted::Queued) => unreachable!(),
            Err(SubmitError::JournalFull) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    let accepted_count = accepted.len();
    for rx in accepted {
        rx.await.unwrap().unwrap();
    }
    assert!(
        refused > 0 && accepted_count > 0,
        "{accepted_count} / {refused}"
    );
    assert!(journal.bytes() <= 2_000 + HEADER_LEN);
    assert_eq!(read_all(&journal.lanes()[0]).len(), accepted_count);
    assert_eq!(journal.stats().full_refusals.load(Relaxed), refused as u64);
    // Applying frees room: deleting applied segments releases their bytes.
    let lane = &journal.lanes()[0];
    lane.release(lane.committed());
}

#[tokio::test]
async fn hits_past_the_queues_bytes_are_refused_and_reserve_no_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    // Less than any one record: nothing fits.
    let smallest = (0..10).map(|i| hit(i).encoded_len()).min().unwrap();
    config.queue_bytes = smallest as u64 - 1;
    let (journal, _feeds) = Journal::open(&config).unwrap();
    let on_disk = journal.bytes();
    for i in 0..10 {
        assert!(matches!(
            journal.appender().submit(hit(i)),
            Err(SubmitError::QueueFull)
        ));
    }
    assert_eq!(journal.bytes(), on_disk, "a refused hit reserves no disk");
    assert_eq!(journal.appender().depth_bytes(), 0);
    assert!(read_all(&journal.lanes()[0]).is_empty());
}

#[tokio::test]
async fn the_queues_bytes_are_released_as_the_writer_takes_the_hits() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    let largest = (0..1_000).map(|i| hit(i).encoded_len()).max().unwrap();
    config.queue_bytes = 10 * largest as u64;
    let (journal, _feeds) = Journal::open(&config).unwrap();
    // A hundred times the bound, ten at a time: each ten fit once the
    // writer has taken the ones before.
    for round in 0..100 {
        write(&journal, round * 10..(round + 1) * 10).await;
    }
    assert_eq!(journal.appender().depth_bytes(), 0);
    assert_eq!(read_all(&journal.lanes()[0]).len(), 1_000);
}

#[test]
fn the_hand_off_holds_at_most_its_bytes_and_frees_what_is_taken() {
    let (sender, mut handoff) = writer::handoff(1024);
    let batch = |start: u64, bytes: u64| CommittedBatch {
        start,
        end: start + bytes,
        records: Vec::new(),
    };
    let quarter = HANDOFF_BYTES / 4;
    for i in 0..6 {
        sender.offer(batch(i * quarter, quarter));
    }
    assert_eq!(handoff.held_bytes(), HANDOFF_BYTES);
    // The first four were handed on, the last two left to the files.
    let taken = handoff.try_recv().expect("a batch");
    assert_eq!((taken.start, handoff.held_bytes()), (0, 3 * quarter));
    sender.offer(batch(6 * quarter, quarter));
    let starts: Vec<u64> = std::iter::from_fn(|| handoff.try_recv())
        .map(|b| b.start)
        .collect();
    assert_eq!(starts, [quarter, 2 * quarter, 3 * quarter, 6 * quarter]);
    assert_eq!(handoff.held_bytes(), 0);
}

#[tokio::test]
async fn a_second_process_on_the_same_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    let second = Journal::open(&config(dir.path()));
    let err = second.err().expect("the directory is locked");
    assert!(matches!(err, OpenError::Locked { .. }));
    let message = err.to_string();
    assert!(message.contains("in use by another process"), "{message}");
    assert!(
        message.contains(&std::process::id().to_string()),
        "{message}"
    );
    assert!(message.contains("TICKERTAPE_JOURNAL_DIR"), "{message}");
}

#[tokio::test]
async fn a_journal_of_another_format_is_refused_while_it_holds_records() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    let id = journal.id();
    write(&journal, 0..3).await;
    journal.close_writers().await;
    drop(journal);
    let old_meta = format!("tickertape-journal\nformat=0\nid={id}\nlanes=1\n");
    std::fs::write(dir.path().join(META), &old_meta).unwrap();
    let err = Journal::open(&config(dir.path())).err().expect("refused");
    assert!(
        matches!(err, OpenError::OtherFormat { found: 0, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("move the directory aside"),
        "{err}"
    );

    // Once its records are gone (applied by the version that wrote them),
    // an old journal is upgraded in place.
    for s in segments(dir.path()) {
        std::fs::remove_file(s).unwrap();
    }
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(journal.id(), id);
    let meta = std::fs::read_to_string(dir.path().join(META)).unwrap();
    assert!(meta.contains(&format!("format={FORMAT}")), "{meta}");
}

#[tokio::test]
async fn a_format_1_journal_with_records_replays_them_and_goes_on_in_format_2() {
    // The journal as the version before sources left it: meta format 1 and
    // a segment of format-1 records (page and time only).
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4();
    std::fs::write(
        dir.path().join(META),
        format!("tickertape-journal\nformat=1\nid={id}\nlanes=1\n"),
    )
    .unwrap();
    let lane_dir = dir.path().join("lane-0");
    std::fs::create_dir_all(&lane_dir).unwrap();
    let old = SegmentHeader {
        format: record::FORMAT_V1,
        lane: 0,
        start: 0,
        journal: id,
    };
    let (mut file, _) = segment::create(&lane_dir, &old).unwrap();
    let mut body = Vec::new();
    let old_hits: Vec<Record> = (0..5)
        .map(|i| Record {
            source: None,
            visit: None,
            labels: Default::default(),
            ..hit(i)
        })
        .collect();
    for r in &old_hits {
        r.encode_v1_into(&mut body);
    }
    file.write_all(&body).unwrap();
    drop(file);

    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(journal.id(), id);
    let meta = std::fs::read_to_string(dir.path().join(META)).unwrap();
    assert!(meta.contains(&format!("format={FORMAT}")), "{meta}");
    // New hits (with sources) go to a new format-2 segment after the old one.
    write(&journal, 10..13).await;
    let all = read_all(&journal.lanes()[0]);
    let mut expected = old_hits.clone();
    expected.extend((10..13).map(hit));
    assert_eq!(all, expected);
    assert!(all[..5].iter().all(|r| r.source.is_none()));
    assert_eq!(all[7].source.as_deref(), Some("source12.example"));
    journal.close_writers().await;
    drop(journal);

    // Reopened, both formats still read back the same.
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(read_all(&journal.lanes()[0]), expected);
}

#[tokio::test]
async fn a_format_4_journal_replays_without_places_and_goes_on_in_format_5() {
    // The journal as the version before the visit store left it: meta
    // format 4 and a segment of format-4 records (labels, no place).
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4();
    std::fs::write(
        dir.path().join(META),
        format!("tickertape-journal\nformat=4\nid={id}\nlanes=1\n"),
    )
    .unwrap();
    let lane_dir = dir.path().join("lane-0");
    std::fs::create_dir_all(&lane_dir).unwrap();
    let old = SegmentHeader {
        format: record::FORMAT_V4,
        lane: 0,
        start: 0,
        journal: id,
    };
    let (mut file, _) = segment::create(&lane_dir, &old).unwrap();
    let mut body = Vec::new();
    let old_hits: Vec<Record> = (0..8).map(hit).collect();
    for r in &old_hits {
        r.encode_v4_into(&mut body);
    }
    file.write_all(&body).unwrap();
    drop(file);
    // What they read back as: everything but the place.
    let expected_old: Vec<Record> = old_hits
        .iter()
        .cloned()
        .map(|mut r| {
            if let Some(v) = r.visit.as_mut() {
                v.place = None;
            }
            r
        })
        .collect();
    assert!(old_hits
        .iter()
        .any(|r| r.visit.as_ref().is_some_and(|v| v.place.is_some())));

    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(journal.id(), id);
    let meta = std::fs::read_to_string(dir.path().join(META)).unwrap();
    assert!(meta.contains(&format!("format={FORMAT}")), "{meta}");
    write(&journal, 20..25).await;
    let mut expected = expected_old;
    expected.extend((20..25).map(hit));
    let all = read_all(&journal.lanes()[0]);
    assert_eq!(all, expected);
    // The new segment keeps the places.
    assert_eq!(all[8].visit.as_ref().unwrap().place.unwrap().id, 1_020);
    journal.close_writers().await;
    drop(journal);
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(read_all(&journal.lanes()[0]), expected);
}

#[tokio::test]
async fn a_format_7_journal_replays_as_it_was_and_goes_on_in_format_8() {
    // The journal as the version before engagements left it: meta format
    // 7 and a segment of format-7 records.
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4();
    std::fs::write(
        dir.path().join(META),
        format!("tickertape-journal\nformat=7\nid={id}\nlanes=1\n"),
    )
    .unwrap();
    let lane_dir = dir.path().join("lane-0");
    std::fs::create_dir_all(&lane_dir).unwrap();
    let old = SegmentHeader {
        format: record::FORMAT_V7,
        lane: 0,
        start: 0,
        journal: id,
    };
    let (mut file, _) = segment::create(&lane_dir, &old).unwrap();
    let mut body = Vec::new();
    let old_hits: Vec<Record> = (0..8).map(hit).collect();
    for r in &old_hits {
        r.encode_v7_into(&mut body);
    }
    file.write_all(&body).unwrap();
    drop(file);

    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    let meta = std::fs::read_to_string(dir.path().join(META)).unwrap();
    assert!(meta.contains(&format!("format={FORMAT}")), "{meta}");
    // New records, an engagement among them, go to a format-8 segment.
    let engagement = Record {
        engagement: Some(crate::journal::Engagement {
            view_at: hit(20).at,
            depth_added: 70,
            first: true,
            engaged_ms: 4_000,
        }),
        ..Record::view(hit(20).page, hit(20).at)
    };
    write(&journal, 20..22).await;
    match journal.appender().submit(engagement.clone()).unwrap() {
        Accepted::Pending(rx) => rx.await.unwrap().unwrap(),
        Accepted::Queued => panic!("durable mode answers after the sync"),
    }
    let mut expected = old_hits;
    expected.extend((20..22).map(hit));
    expected.push(engagement);
    assert_eq!(read_all(&journal.lanes()[0]), expected);
    journal.close_writers().await;
    drop(journal);
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    assert_eq!(read_all(&journal.lanes()[0]), expected);
}

#[tokio::test]
async fn fast_mode_answers_on_enqueue_and_still_journals() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.ack_mode = AckMode::Fast;
    let (journal, _feeds) = Journal::open(&config).unwrap();
    for i in 0..50 {
        assert!(matches!(
            journal.appender().submit(hit(i)),
            Ok(Accepted::Queued)
        ));
    }
    journal.close_writers().await;
    assert_eq!(read_all(&journal.lanes()[0]).len(), 50);
    assert_eq!(
        journal.appender().submit(hit(0)).err(),
        Some(SubmitError::Closed)
    );
}

#[test]
fn pages_keep_their_lane_in_every_process() {
    // The published FNV-1a 64-bit test vectors: a change here would send a
    // page's hits to another lane after an upgrade.
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
}

#[tokio::test]
async fn a_panicking_writer_answers_its_group_and_the_lane_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    // A page longer than any the pixel lets through trips the codec's
    // assertion inside the writer thread.
    let bad = Record {
        page: "x".repeat(record::MAX_PAYLOAD + 1),
        at: hit(0).at,
        source: None,
        visit: None,
        labels: Default::default(),
        props: Default::default(),
        revenue: None,
        engagement: None,
    };
    let Ok(Accepted::Pending(rx)) = journal.appender().submit(bad) else {
        panic!("accepted");
    };
    assert!(rx.await.is_err(), "no answer: the pixel says 503");
    // The lane still takes and syncs hits. (The answer is dropped while the
    // panic unwinds, before it is counted: look at the count after the
    // writer has handled what came next.)
    write(&journal, 0..5).await;
    assert_eq!(journal.stats().writer_panics.load(Relaxed), 1);
    assert_eq!(
        read_all(&journal.lanes()[0]),
        (0..5).map(hit).collect::<Vec<_>>()
    );
}

/// The lane's positions after a reopen, once every segment was applied and
/// deleted: they go on from where they were, never from 0 again (the
/// database counts every position below its record as applied).
#[tokio::test]
async fn positions_go_on_after_a_reopen_with_every_segment_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig {
        segment_max_age: std::time::Duration::from_millis(200),
        ..config(dir.path())
    };
    let (journal, _feeds) = Journal::open(&config).unwrap();
    write(&journal, 0..50).await;
    let lane = journal.lanes()[0].clone();
    let end = lane.committed();
    for applier in 0..lane::APPLIERS {
        lane.applied(applier, end);
    }
    // Quiet: the sealer closes the segment and it goes, as it is applied.
    until_every_segment_is_deleted(dir.path(), std::time::Duration::from_secs(10));
    assert_eq!(mark::read(&mark::path(dir.path(), 0)).unwrap(), Some(end));
    journal.close_writers().await;
    drop((journal, lane));

    // With another segment age, as an operator might change it.
    let config = JournalConfig {
        segment_max_age: std::time::Duration::from_secs(5),
        ..config
    };
    let (journal, _feeds) = Journal::open(&config).unwrap();
    let lane = journal.lanes()[0].clone();
    assert_eq!(lane.committed(), end, "the lane resumes at its mark");
    assert_eq!(lane.oldest(), end);
    write(&journal, 50..60).await;
    assert_eq!(
        lane_last_start(dir.path()),
        end,
        "new records start after the old"
    );
    let chunk = lane.read(end, 100).unwrap();
    assert_eq!(chunk.records.len(), 10);
    assert_eq!(chunk.records[0], hit(50));
}

/// A lane whose mark was written before its segments were deleted keeps
/// it even if the process dies right after: the mark is written first.
#[tokio::test]
async fn the_mark_is_written_before_applied_segments_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = three_thousand_hits(dir.path()).await;
    let lane = &journal.lanes()[0];
    let before = segments(dir.path());
    assert!(before.len() > 2);
    let second = segment::start_of(&before[1]).unwrap();
    lane.release(second);
    assert_eq!(segments(dir.path()).len(), before.len() - 1);
    assert_eq!(
        mark::read(&mark::path(dir.path(), 0)).unwrap(),
        Some(second)
    );
    // Nothing to delete: the mark stays.
    lane.release(second);
    assert_eq!(
        mark::read(&mark::path(dir.path(), 0)).unwrap(),
        Some(second)
    );
}

/// A journal that existed before, whose lane has neither segments nor a
/// mark (a version without marks after a quiet spell, or files removed by
/// hand), starts that lane at the time floor: above every position it
/// handed out before. Reading from an old position crosses the gap.
#[tokio::test]
async fn a_lane_that_lost_its_place_starts_above_every_old_position() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = three_thousand_hits(dir.path()).await;
    let old_end = journal.lanes()[0].committed();
    journal.close_writers().await;
    drop(journal);
    std::fs::remove_dir_all(dir.path().join("lane-0")).unwrap();
    let _ = std::fs::remove_file(mark::path(dir.path(), 0));

    let floor_before = mark::time_floor(Utc::now());
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    let lane = journal.lanes()[0].clone();
    assert!(lane.committed() >= floor_before && lane.committed() > old_end);
    assert_eq!(
        mark::read(&mark::path(dir.path(), 0)).unwrap(),
        Some(lane.committed()),
        "the floor is marked before any record"
    );
    let floor = lane.committed();
    write(&journal, 0..5).await;
    // The database's old position lies in the gap: reading it moves on to
    // the first record of this life, with no error.
    let gap = lane.read(old_end, 100).unwrap();
    assert_eq!((gap.records.len(), gap.end), (0, floor));
    assert_eq!(lane.read(floor, 100).unwrap().records.len(), 5);
}

/// The database is ahead of every position the lane holds: the next
/// segment starts at the database's position, so no new hit is taken for
/// applied.
#[tokio::test]
async fn a_floor_from_the_database_moves_the_next_segment_above_it() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _feeds) = Journal::open(&config(dir.path())).unwrap();
    write(&journal, 0..5).await;
    let lane = journal.lanes()[0].clone();
    let ahead = lane.committed() + 1_000_000;
    assert!(lane.raise_floor(ahead));
    assert!(!lane.raise_floor(ahead), "only once");
    write(&journal, 5..8).await;
    assert_eq!(lane_last_start(dir.path()), ahead);
    let chunk = lane.read(ahead, 100).unwrap();
    assert_eq!(chunk.records, vec![hit(5), hit(6), hit(7)]);
}

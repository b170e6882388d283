//! A lane's high-water mark: the position after the last record it ever
//! held, kept in `<dir>/lane-<n>.mark` so that positions never go back.
//!
//! Positions are the key of exactly-once: the database records, per lane,
//! the position up to which it has applied. Once every segment is applied
//! and deleted (the normal state of a quiet lane, for privacy), the files
//! alone no longer say where the lane stood; a journal that then started
//! again at 0 would hand out positions the database already counts as
//! applied, and the new hits would be skipped and deleted. So before a
//! segment is deleted, the mark is written (and synced) past it.
//!
//! A lane with neither segments nor a mark in a journal that existed
//! before (upgraded from a version without marks, or its files removed by
//! hand) does not know where it stood: it starts at [`time_floor`], a
//! position above any that a journal could have written since the epoch,
//! and the views applier raises it further if the database is ahead
//! (`Lane::raise_floor`).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::segment;

pub fn path(dir: &Path, lane: u32) -> PathBuf {
    dir.join(format!("lane-{lane}.mark"))
}

/// The mark on disk, if any. An unreadable mark is an error: guessing
/// could reuse positions.
pub fn read(path: &Path) -> std::io::Result<Option<u64>> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} does not hold a journal position", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes the mark durably: a new file synced, renamed over the old one,
/// and the directory synced, so a crash leaves the old mark or the new.
pub fn write(path: &Path, position: u64) -> std::io::Result<()> {
    let tmp = path.with_extension("mark.tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        writeln!(file, "{position}")?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    segment::sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Where a lane that lost its place starts: one MiB of positions per
/// millisecond since the epoch. A lane cannot have written 1 GiB/s for
/// as long as it lived (one fsync'd writer thread), so every position it
/// handed out before lies below this; it fits a MongoDB `long` until the
/// year 2248.
pub fn time_floor(now: chrono::DateTime<chrono::Utc>) -> u64 {
    (now.timestamp_millis().max(0) as u64) << 20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_round_trips_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), 3);
        assert_eq!(read(&p).unwrap(), None);
        write(&p, 12_345).unwrap();
        assert_eq!(read(&p).unwrap(), Some(12_345));
        write(&p, 99).unwrap();
        assert_eq!(read(&p).unwrap(), Some(99));
    }

    #[test]
    fn a_damaged_mark_is_an_error_not_zero() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), 0);
        std::fs::write(&p, "garbage").unwrap();
        assert!(read(&p).is_err());
    }

    #[test]
    fn the_time_floor_grows_with_time_and_fits_a_long() {
        use chrono::TimeZone;
        let now = chrono::Utc.with_ymd_and_hms(2026, 11, 28, 6, 0, 0).unwrap();
        let later = now + chrono::Duration::milliseconds(1);
        assert_eq!(time_floor(later) - time_floor(now), 1 << 20);
        let far = chrono::Utc.with_ymd_and_hms(2240, 1, 1, 0, 0, 0).unwrap();
        assert!(time_floor(far) < i64::MAX as u64);
    }
}

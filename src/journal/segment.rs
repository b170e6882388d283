//! Segment files: one lane's records, in order, split into files that can
//! be deleted once applied.
//!
//! A lane's records form one byte stream; a record's *position* is its
//! offset in that stream (its log sequence number). A segment file is named
//! by the position of its first record (`<start, 20 digits>.seg`) and starts
//! with a fixed header, so a position maps to a file and an offset without
//! an index.
//!
//! ```text
//! header = "TTJOURNL" format:u32le lane:u32le start:u64le journal_id[16] crc:u32le pad[4]
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::record::{
    DecodeError, Record, FORMAT_V1, FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6,
    FORMAT_V7, FORMAT_V8, HEADER_LEN as RECORD_HEADER_LEN, MAX_PAYLOAD,
};

pub const MAGIC: &[u8; 8] = b"TTJOURNL";
/// The record format this build writes (see `record`).
pub const FORMAT: u32 = FORMAT_V8;
/// The formats this build reads: segments written before sources were
/// journaled (format 1) are replayed, their hits without a source, and
/// those before visitors (format 2) without a visit, and those before
/// breakdowns (format 3) without labels, and those before the visit store
/// (format 4) without a place in a visit.
pub const READABLE: [u32; 8] = [
    FORMAT_V1, FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6, FORMAT_V7, FORMAT_V8,
];
pub const HEADER_LEN: u64 = 48;
pub const EXTENSION: &str = "seg";

/// What identifies a segment as belonging to this journal and lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    pub format: u32,
    pub lane: u32,
    pub start: u64,
    pub journal: uuid::Uuid,
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut out = [0u8; HEADER_LEN as usize];
        out[0..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&self.format.to_le_bytes());
        out[12..16].copy_from_slice(&self.lane.to_le_bytes());
        out[16..24].copy_from_slice(&self.start.to_le_bytes());
        out[24..40].copy_from_slice(self.journal.as_bytes());
        let crc = crc32c::crc32c(&out[0..40]);
        out[40..44].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        if buf.len() < HEADER_LEN as usize || &buf[0..8] != MAGIC {
            return None;
        }
        let crc = u32::from_le_bytes(buf[40..44].try_into().ok()?);
        if crc32c::crc32c(&buf[0..40]) != crc {
            return None;
        }
        Some(Self {
            format: u32::from_le_bytes(buf[8..12].try_into().ok()?),
            lane: u32::from_le_bytes(buf[12..16].try_into().ok()?),
            start: u64::from_le_bytes(buf[16..24].try_into().ok()?),
            journal: uuid::Uuid::from_slice(&buf[24..40]).ok()?,
        })
    }
}

pub fn file_name(start: u64) -> String {
    format!("{start:020}.{EXTENSION}")
}

/// The start position a segment file name encodes.
pub fn start_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(&format!(".{EXTENSION}"))?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// Why a segment's records stop before the end of its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The last append before a crash was only partly written: nothing after
    /// the last good record was ever acknowledged, so it is cut off.
    TornTail { bytes: u64 },
    /// A bad record with good records after it (or in a segment that was
    /// complete): data that was written and synced has been damaged. Replay
    /// stops at `offset`; the file is kept aside, never silently skipped.
    Corrupt { offset: u64, error: String },
}

/// A segment as found on disk at start-up.
#[derive(Debug, Clone)]
pub struct Scanned {
    pub start: u64,
    /// The record format of this segment, from its header.
    pub format: u32,
    pub path: PathBuf,
    /// Bytes of good records (after the header).
    pub valid_len: u64,
    /// Bytes after the header in the file as found.
    pub file_len: u64,
    pub records: u64,
    pub damage: Option<Damage>,
}

/// Reads a whole segment and checks every record. `last` says whether it is
/// the lane's newest segment, the only one a crash can leave torn. The
/// header must match `expected` except for the format, which may be any
/// readable one.
pub fn scan(path: &Path, expected: &SegmentHeader, last: bool) -> io::Result<Scanned> {
    let bytes = std::fs::read(path)?;
    let found = SegmentHeader::decode(&bytes).filter(|h| {
        READABLE.contains(&h.format)
            && SegmentHeader {
                format: expected.format,
                ..*h
            } == *expected
    });
    let Some(found) = found else {
        // A crash while creating the newest segment can leave it shorter
        // than its header: nothing was ever written to it.
        if last && (bytes.len() as u64) < HEADER_LEN {
            return Ok(Scanned {
                start: expected.start,
                format: expected.format,
                path: path.to_owned(),
                valid_len: 0,
                file_len: 0,
                records: 0,
                damage: Some(Damage::TornTail {
                    bytes: bytes.len() as u64,
                }),
            });
        }
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} does not have the header of this journal's lane {} at position {}",
                path.display(),
                expected.lane,
                expected.start
            ),
        ));
    };
    let format = found.format;
    let body = &bytes[HEADER_LEN as usize..];
    let (records, valid_len, error) = valid_prefix(body, format);
    let file_len = body.len() as u64;
    let damage = error.map(|error| {
        let rest = &body[valid_len as usize..];
        if last && !has_record_after(rest, format) {
            Damage::TornTail {
                bytes: file_len - valid_len,
            }
        } else {
            Damage::Corrupt {
                offset: valid_len,
                error: error.to_string(),
            }
        }
    });
    Ok(Scanned {
        start: expected.start,
        format,
        path: path.to_owned(),
        valid_len,
        file_len,
        records,
        damage,
    })
}

/// Good records from the start of `body`: count, bytes, and the error that
/// ended them (none if they run to the end).
fn valid_prefix(body: &[u8], format: u32) -> (u64, u64, Option<DecodeError>) {
    let mut at = 0usize;
    let mut records = 0u64;
    while at < body.len() {
        match Record::decode(&body[at..], format) {
            Ok((_, len)) => {
                at += len;
                records += 1;
            }
            Err(e) => return (records, at as u64, Some(e)),
        }
    }
    (records, at as u64, None)
}

/// Whether a good record starts anywhere in `rest` after its first byte.
/// A torn tail is garbage to the end of the file; a good record after a bad
/// one means the damage is in the middle of written data.
fn has_record_after(rest: &[u8], format: u32) -> bool {
    (1..rest.len().saturating_sub(RECORD_HEADER_LEN))
        .any(|i| Record::decode(&rest[i..], format).is_ok())
}

/// Creates a segment file with its header, synced together with the
/// directory entry so the file survives a crash.
pub fn create(dir: &Path, header: &SegmentHeader) -> io::Result<(File, PathBuf)> {
    let path = dir.join(file_name(header.start));
    let mut file = OpenOptions::new()
        .create_new(true)
        .read(true)
        .append(true)
        .open(&path)?;
    file.write_all(&header.encode())?;
    file.sync_all()?;
    sync_dir(dir)?;
    Ok((file, path))
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Cuts a torn tail off: the file keeps its header and `valid_len` bytes.
pub fn truncate(path: &Path, valid_len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(HEADER_LEN + valid_len)?;
    file.sync_all()
}

/// Decodes records of `format` from `path` starting at `offset` (after the
/// header) up to `end`, at most `max` of them. Returns the records and the
/// offset after the last one.
pub fn read(
    path: &Path,
    format: u32,
    offset: u64,
    end: u64,
    max: usize,
    out: &mut Vec<Record>,
) -> Result<u64, ReadError> {
    const CHUNK: u64 = 1 << 20;
    let file = File::open(path).map_err(ReadError::Io)?;
    let mut at = offset;
    let mut buf = Vec::new();
    let mut taken = 0;
    while at < end && taken < max {
        let want = (end - at).min(CHUNK.max(MAX_PAYLOAD as u64 * 2));
        buf.resize(want as usize, 0);
        file.read_exact_at(&mut buf, HEADER_LEN + at)
            .map_err(ReadError::Io)?;
        let mut used = 0usize;
        while used < buf.len() && taken < max {
            match Record::decode(&buf[used..], format) {
                Ok((record, len)) => {
                    out.push(record);
                    used += len;
                    taken += 1;
                }
                // The record continues past this chunk: read on from it.
                Err(DecodeError::Truncated) if at + (used as u64) < end && used > 0 => break,
                Err(e) => {
                    return Err(ReadError::Corrupt {
                        offset: at + used as u64,
                        error: e,
                    })
                }
            }
        }
        at += used as u64;
    }
    Ok(at)
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the segment")]
    Io(#[source] io::Error),
    #[error("bad record at offset {offset}: {error}")]
    Corrupt { offset: u64, error: DecodeError },
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn header(start: u64) -> SegmentHeader {
        SegmentHeader {
            format: FORMAT,
            lane: 0,
            start,
            journal: uuid::Uuid::from_u128(7),
        }
    }

    fn records(n: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        for i in 0..n {
            Record {
                page: format!("example.com/{i}"),
                at: Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap(),
                source: Some("google.com".to_owned()),
                visit: None,
                labels: Default::default(),
                props: Default::default(),
                revenue: None,
                engagement: None,
            }
            .encode_into(&mut buf);
        }
        buf
    }

    fn write_segment(dir: &Path, start: u64, body: &[u8]) -> PathBuf {
        let (mut file, path) = create(dir, &header(start)).unwrap();
        file.write_all(body).unwrap();
        path
    }

    #[test]
    fn header_round_trips_and_names_encode_the_start() {
        let h = header(12345);
        assert_eq!(SegmentHeader::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[13] ^= 1;
        assert_eq!(SegmentHeader::decode(&bad), None);
        assert_eq!(start_of(Path::new(&file_name(12345))), Some(12345));
        assert_eq!(start_of(Path::new("12345.seg")), None);
    }

    #[test]
    fn a_clean_segment_scans_whole() {
        let dir = tempfile::tempdir().unwrap();
        let body = records(10);
        let path = write_segment(dir.path(), 0, &body);
        let s = scan(&path, &header(0), true).unwrap();
        assert_eq!(
            (s.records, s.valid_len, s.damage),
            (10, body.len() as u64, None)
        );
    }

    #[test]
    fn a_partial_last_record_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let body = records(10);
        let cut = body.len() - 5;
        let path = write_segment(dir.path(), 0, &body[..cut]);
        let s = scan(&path, &header(0), true).unwrap();
        assert_eq!(s.records, 9);
        assert!(
            matches!(s.damage, Some(Damage::TornTail { .. })),
            "{:?}",
            s.damage
        );
    }

    #[test]
    fn a_bad_record_followed_by_good_ones_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = records(10);
        let one = body.len() / 10;
        body[one * 3 + 10] ^= 0x40;
        let path = write_segment(dir.path(), 0, &body);
        let s = scan(&path, &header(0), true).unwrap();
        assert_eq!(s.records, 3);
        assert_eq!(
            s.damage,
            Some(Damage::Corrupt {
                offset: one as u64 * 3,
                error: "record checksum mismatch".into()
            })
        );
        // The same damage at the end of an older (complete) segment is
        // corruption too: only the newest segment can be torn.
        let path = write_segment(dir.path(), 1000, &body[..one * 9 + 4]);
        let s = scan(&path, &header(1000), false).unwrap();
        assert!(matches!(s.damage, Some(Damage::Corrupt { .. })));
    }

    #[test]
    fn a_format_1_segment_scans_and_reads_without_sources() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = Vec::new();
        for i in 0..3 {
            Record {
                page: format!("example.com/{i}"),
                at: Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap(),
                source: None,
                visit: None,
                labels: Default::default(),
                props: Default::default(),
                revenue: None,
                engagement: None,
            }
            .encode_v1_into(&mut body);
        }
        let old = SegmentHeader {
            format: FORMAT_V1,
            ..header(0)
        };
        let (mut file, path) = create(dir.path(), &old).unwrap();
        file.write_all(&body).unwrap();
        let s = scan(&path, &header(0), true).unwrap();
        assert_eq!((s.format, s.records, s.damage), (FORMAT_V1, 3, None));
        let mut out = Vec::new();
        read(&path, s.format, 0, s.valid_len, usize::MAX, &mut out).unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[2].page, "example.com/2");
        assert_eq!(out[2].source, None);
        // A format this build does not know is refused.
        let unknown = SegmentHeader {
            format: 99,
            ..header(100)
        };
        let (_, path) = create(dir.path(), &unknown).unwrap();
        assert!(scan(&path, &header(100), false).is_err());
    }

    #[test]
    fn a_foreign_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_segment(dir.path(), 0, &records(1));
        let mut other = header(0);
        other.lane = 1;
        assert!(scan(&path, &other, true).is_err());
    }

    #[test]
    fn read_takes_records_across_chunks_and_stops_at_max() {
        let dir = tempfile::tempdir().unwrap();
        let body = records(50_000);
        let path = write_segment(dir.path(), 0, &body);
        let mut out = Vec::new();
        let end = read(&path, FORMAT, 0, body.len() as u64, usize::MAX, &mut out).unwrap();
        assert_eq!((out.len(), end), (50_000, body.len() as u64));
        let mut out = Vec::new();
        let mid = read(&path, FORMAT, 0, body.len() as u64, 7, &mut out).unwrap();
        assert_eq!(out.len(), 7);
        let mut rest = Vec::new();
        read(&path, FORMAT, mid, body.len() as u64, usize::MAX, &mut rest).unwrap();
        assert_eq!(rest.len(), 50_000 - 7);
        assert_eq!(rest[0].page, "example.com/7");
    }
}

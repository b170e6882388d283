//! The journal's record codec: one hit per record.
//!
//! ```text
//! record     = len:u32le  crc:u32le  payload[len]
//! payload v2 = at_ms:i64le  page_len:u16le  page:utf8[page_len]  source:utf8[rest]
//! payload v1 = at_ms:i64le  page:utf8[len - 8]
//! crc        = CRC32C(len bytes ++ payload)
//! ```
//!
//! Format 2 (issue 10) adds the view's source; an empty source means none
//! was known (a pixel without the script). Segments say their format in
//! their header, and a journal written by the previous version is still
//! replayed: its format-1 records decode with no source.
//!
//! The checksum covers the length too, so a flipped length bit is caught
//! rather than read as a record boundary somewhere else. A record never spans
//! two segment files.

use chrono::{DateTime, Utc};

/// Bytes before the payload: length and checksum.
pub const HEADER_LEN: usize = 8;
/// The longest payload we ever write (a page is at most a 253-byte domain
/// plus a 512-byte path, a source at most 253 bytes); anything longer on
/// disk is damage, not data.
pub const MAX_PAYLOAD: usize = 8 + 2 + 1024 + 512;

/// The record format of format-1 segments: no source.
pub const FORMAT_V1: u32 = 1;
/// The record format this build writes.
pub const FORMAT_V2: u32 = 2;

/// A hit as journaled: which page, when it happened, and where it came
/// from when that is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub page: String,
    pub at: DateTime<Utc>,
    pub source: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the header or the declared payload: the end of what
    /// was written (a torn tail), or the end of the buffer.
    #[error("record truncated")]
    Truncated,
    #[error("record length {0} out of range")]
    BadLength(u32),
    #[error("record checksum mismatch")]
    BadChecksum,
    #[error("record payload is not a hit")]
    BadPayload,
}

impl Record {
    /// Bytes this record takes on disk.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.payload_len()
    }

    fn payload_len(&self) -> usize {
        8 + 2 + self.page.len() + self.source.as_ref().map_or(0, String::len)
    }

    /// Appends the encoded record to `out`. Pages longer than the codec
    /// allows are a bug upstream (the pixel's rules bound them), so they
    /// panic here instead of writing a record that would read back as damage.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let payload_len = self.payload_len();
        assert!(payload_len <= MAX_PAYLOAD, "page too long for the journal");
        let len = (payload_len as u32).to_le_bytes();
        let at = self.at.timestamp_millis().to_le_bytes();
        let page_len = (self.page.len() as u16).to_le_bytes();
        let source = self.source.as_deref().unwrap_or_default().as_bytes();
        let mut crc = crc32c::crc32c(&len);
        crc = crc32c::crc32c_append(crc, &at);
        crc = crc32c::crc32c_append(crc, &page_len);
        crc = crc32c::crc32c_append(crc, self.page.as_bytes());
        crc = crc32c::crc32c_append(crc, source);
        out.extend_from_slice(&len);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&at);
        out.extend_from_slice(&page_len);
        out.extend_from_slice(self.page.as_bytes());
        out.extend_from_slice(source);
    }

    /// Writes a record as the previous version did (format 1, no source):
    /// only for tests that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v1_into(&self, out: &mut Vec<u8>) {
        let len = ((8 + self.page.len()) as u32).to_le_bytes();
        let at = self.at.timestamp_millis().to_le_bytes();
        let mut crc = crc32c::crc32c(&len);
        crc = crc32c::crc32c_append(crc, &at);
        crc = crc32c::crc32c_append(crc, self.page.as_bytes());
        out.extend_from_slice(&len);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&at);
        out.extend_from_slice(self.page.as_bytes());
    }

    /// Decodes the record at the start of `buf`, written in `format`
    /// (the segment header's); returns it and its length.
    pub fn decode(buf: &[u8], format: u32) -> Result<(Record, usize), DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes"));
        let min = if format == FORMAT_V1 { 8 } else { 10 };
        if !(min..=MAX_PAYLOAD as u32).contains(&len) {
            return Err(DecodeError::BadLength(len));
        }
        let total = HEADER_LEN + len as usize;
        if buf.len() < total {
            return Err(DecodeError::Truncated);
        }
        let stored = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
        let payload = &buf[HEADER_LEN..total];
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..4]), payload);
        if crc != stored {
            return Err(DecodeError::BadChecksum);
        }
        let at_ms = i64::from_le_bytes(payload[0..8].try_into().expect("8 bytes"));
        let at = DateTime::<Utc>::from_timestamp_millis(at_ms).ok_or(DecodeError::BadPayload)?;
        let text = |bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .map(str::to_owned)
                .map_err(|_| DecodeError::BadPayload)
        };
        let (page, source) = if format == FORMAT_V1 {
            (text(&payload[8..])?, None)
        } else {
            let page_len = u16::from_le_bytes(payload[8..10].try_into().expect("2 bytes")) as usize;
            let rest = &payload[10..];
            if page_len > rest.len() {
                return Err(DecodeError::BadPayload);
            }
            let source = text(&rest[page_len..])?;
            (
                text(&rest[..page_len])?,
                (!source.is_empty()).then_some(source),
            )
        };
        Ok((Record { page, at, source }, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn record(page: &str) -> Record {
        Record {
            page: page.to_owned(),
            at: Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap(),
            source: None,
        }
    }

    #[test]
    fn a_record_round_trips_and_says_its_length() {
        let mut r = record("example.com/blog/hello");
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V2), Ok((r.clone(), buf.len())));
        r.source = Some("news.ycombinator.com".into());
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V2), Ok((r, buf.len())));
    }

    #[test]
    fn a_format_1_record_decodes_without_a_source() {
        let r = record("example.com/old");
        let mut buf = Vec::new();
        r.encode_v1_into(&mut buf);
        assert_eq!(Record::decode(&buf, FORMAT_V1), Ok((r, buf.len())));
    }

    #[test]
    fn zeros_are_not_a_record() {
        assert_eq!(
            Record::decode(&[0; 64], FORMAT_V2).unwrap_err(),
            DecodeError::BadLength(0)
        );
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            "\\PC{0,300}",
            // Any millisecond chrono can represent in the years we may see.
            -62_000_000_000_000i64..253_000_000_000_000i64,
            proptest::option::of("[a-z0-9.]{1,60}"),
        )
            .prop_map(|(page, ms, source)| Record {
                page,
                at: DateTime::<Utc>::from_timestamp_millis(ms).unwrap(),
                source,
            })
    }

    proptest! {
        #[test]
        fn arbitrary_records_round_trip(records in proptest::collection::vec(arb_record(), 1..20)) {
            let mut buf = Vec::new();
            for r in &records {
                r.encode_into(&mut buf);
            }
            let mut at = 0;
            for r in &records {
                let (decoded, len) = Record::decode(&buf[at..], FORMAT_V2).unwrap();
                prop_assert_eq!(&decoded, r);
                at += len;
            }
            prop_assert_eq!(at, buf.len());
        }

        #[test]
        fn any_truncation_is_detected(r in arb_record(), cut in 0usize..2000) {
            let mut buf = Vec::new();
            r.encode_into(&mut buf);
            let cut = cut % buf.len();
            prop_assert!(Record::decode(&buf[..cut], FORMAT_V2).is_err());
        }

        #[test]
        fn any_bit_flip_is_detected(r in arb_record(), bit in 0usize..20_000) {
            let mut buf = Vec::new();
            r.encode_into(&mut buf);
            let bit = bit % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            // A flip may make the record look longer than the buffer
            // (truncated) or fail the length, checksum or payload checks:
            // never may it decode as a record.
            prop_assert!(Record::decode(&buf, FORMAT_V2).is_err());
        }
    }
}

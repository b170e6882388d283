//! The journal's record codec: one hit per record.
//!
//! ```text
//! record  = len:u32le  crc:u32le  payload[len]
//! payload = at_ms:i64le  page:utf8[len - 8]
//! crc     = CRC32C(len bytes ++ payload)
//! ```
//!
//! The checksum covers the length too, so a flipped length bit is caught
//! rather than read as a record boundary somewhere else. A record never spans
//! two segment files.

use chrono::{DateTime, Utc};

/// Bytes before the payload: length and checksum.
pub const HEADER_LEN: usize = 8;
/// The longest payload we ever write (a page is at most a 253-byte domain
/// plus a 512-byte path); anything longer on disk is damage, not data.
pub const MAX_PAYLOAD: usize = 8 + 1024;

/// A hit as journaled: which page, and when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub page: String,
    pub at: DateTime<Utc>,
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
        HEADER_LEN + 8 + self.page.len()
    }

    /// Appends the encoded record to `out`. Pages longer than the codec
    /// allows are a bug upstream (the pixel's rules bound them), so they
    /// panic here instead of writing a record that would read back as damage.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let payload_len = 8 + self.page.len();
        assert!(payload_len <= MAX_PAYLOAD, "page too long for the journal");
        let len = (payload_len as u32).to_le_bytes();
        let at = self.at.timestamp_millis().to_le_bytes();
        let mut crc = crc32c::crc32c(&len);
        crc = crc32c::crc32c_append(crc, &at);
        crc = crc32c::crc32c_append(crc, self.page.as_bytes());
        out.extend_from_slice(&len);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&at);
        out.extend_from_slice(self.page.as_bytes());
    }

    /// Decodes the record at the start of `buf`; returns it and its length.
    pub fn decode(buf: &[u8]) -> Result<(Record, usize), DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes"));
        if !(8..=MAX_PAYLOAD as u32).contains(&len) {
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
        let page = std::str::from_utf8(&payload[8..]).map_err(|_| DecodeError::BadPayload)?;
        Ok((
            Record {
                page: page.to_owned(),
                at,
            },
            total,
        ))
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
        }
    }

    #[test]
    fn a_record_round_trips_and_says_its_length() {
        let r = record("example.com/blog/hello");
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf), Ok((r, buf.len())));
    }

    #[test]
    fn zeros_are_not_a_record() {
        assert_eq!(
            Record::decode(&[0; 64]).unwrap_err(),
            DecodeError::BadLength(0)
        );
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            "\\PC{0,300}",
            // Any millisecond chrono can represent in the years we may see.
            -62_000_000_000_000i64..253_000_000_000_000i64,
        )
            .prop_map(|(page, ms)| Record {
                page,
                at: DateTime::<Utc>::from_timestamp_millis(ms).unwrap(),
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
                let (decoded, len) = Record::decode(&buf[at..]).unwrap();
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
            prop_assert!(Record::decode(&buf[..cut]).is_err());
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
            prop_assert!(Record::decode(&buf).is_err());
        }
    }
}

//! The journal's record codec: one hit per record.
//!
//! ```text
//! record     = len:u32le  crc:u32le  payload[len]
//! payload v8 = v7 with  view_at_ms:i64le  depth_added:u8  engaged_ms:u32le
//!              after amount
//! payload v7 = at_ms:i64le  flags:u8  visitor:u64le  duration_s:u32le
//!              page_len:u16le  source_len:u16le  entry_len:u16le  previous_len:u16le
//!              visit_id:u64le  visit_start_ms:i64le  step:u32le  props_len:u16le
//!              currency:[u8;3]  amount:i64le
//!              page  source  entry  previous  props[props_len]  labels[rest]
//! payload v6 = v7 without currency and amount
//! props      = count:u8  (key_len:u16le  key  value_len:u16le  value)*
//! payload v5 = at_ms:i64le  flags:u8  visitor:u64le  duration_s:u32le
//!              page_len:u16le  source_len:u16le  entry_len:u16le  previous_len:u16le
//!              visit_id:u64le  visit_start_ms:i64le  step:u32le
//!              page  source  entry  previous  labels[rest]
//! payload v4 = at_ms:i64le  flags:u8  visitor:u64le  duration_s:u32le
//!              page_len:u16le  source_len:u16le  entry_len:u16le  previous_len:u16le
//!              page  source  entry  previous  labels[rest]
//! labels     = (dimension:u8  len:u8  name[len])*
//! payload v3 = at_ms:i64le  flags:u8  visitor:u64le  duration_s:u32le
//!              page_len:u16le  source_len:u16le  entry_len:u16le
//!              page[page_len]  source[source_len]  entry[entry_len]  previous[rest]
//! payload v2 = at_ms:i64le  page_len:u16le  page:utf8[page_len]  source:utf8[rest]
//! payload v1 = at_ms:i64le  page:utf8[len - 8]
//! crc        = CRC32C(len bytes ++ payload)
//! flags      = bit 0: the hit carries a visit (the fields after it mean
//!              something); bit 1: it starts a visit; bit 2: it is the
//!              visit's second view (its bounce becomes a non-bounce);
//!              bit 3 (format 5): the hit has a place in a visit (the
//!              visit id, start and step mean something); bit 4 (format
//!              7): the event carries revenue (currency and amount mean
//!              something; zeros otherwise); bit 5 (format 8): the record
//!              is an engagement (view_at_ms, depth_added and engaged_ms
//!              mean something; zeros otherwise); bit 6 (format 8): it is
//!              its view's first engagement
//! ```
//!
//! Format 2 adds the view's source; an empty source means none
//! was known (a pixel without the script). Format 3 (visitors) adds what
//! the hit changes of its visit: the visitor id (a keyed hash, never an
//! address), whether it starts a visit, the seconds since the visit's
//! previous hit, and the visit's entry and previous pages (empty when it
//! starts one). Format 4 adds the hit's breakdown labels
//! (`domain::Labels`: medium, campaign, browser, OS, device, country, and
//! the event's name for an event, which is not a view). Format 5 adds the
//! hit's place in its visit (`VisitPlace`: a random visit id drawn when the
//! visit opens, never derived from the visitor, the visit's start and the
//! hit's step number), which the visit store (`storage::visit_log`) keys
//! and orders its steps by. Format 6 adds the hit's custom properties
//! (`domain::Properties`, within their bounds). Format 7 adds an
//! event's revenue (`domain::Revenue`: an ISO 4217 code and an amount in
//! ten-thousandths, within its bound). Format 8 adds an engagement
//! (`Engagement`: a view's scroll depth and engaged time, neither a view
//! nor an event). Segments say their
//! format in their header, and a journal
//! written by a previous version is still replayed: format-1 records decode
//! with no source, format-1 and format-2 records with no visit.
//!
//! The checksum covers the length too, so a flipped length bit is caught
//! rather than read as a record boundary somewhere else. A record never spans
//! two segment files.

use chrono::{DateTime, Utc};

use crate::domain::dimension::{Dimension, Labels, MAX_NAME_BYTES};
use crate::domain::properties::{self, Properties};
use crate::domain::revenue::{Amount, Currency, Revenue};

/// Bytes before the payload: length and checksum.
pub const HEADER_LEN: usize = 8;
/// The longest payload we ever write (a page is at most a 253-byte domain
/// plus a 512-byte path, a source at most 253 bytes, and a hit names up to
/// three pages); anything longer on disk is damage, not data.
pub const MAX_PAYLOAD: usize = V8_FIXED + 3 * 1024 + 512 + MAX_LABELS + MAX_PROPS;

/// Bounds one page of a record (a domain plus a path, with room).
const MAX_PAGE: usize = 1024;

/// The record format of format-1 segments: no source.
pub const FORMAT_V1: u32 = 1;
/// The record format of format-2 segments: a source, no visit.
pub const FORMAT_V2: u32 = 2;
/// The record format of format-3 segments: a visit, no labels.
pub const FORMAT_V3: u32 = 3;
/// The record format of format-4 segments: labels, no place in a visit.
pub const FORMAT_V4: u32 = 4;
/// The record format of format-5 segments: a place in a visit, no
/// properties.
pub const FORMAT_V5: u32 = 5;
/// The record format of format-6 segments: properties, no revenue.
pub const FORMAT_V6: u32 = 6;
/// The record format of format-7 segments: revenue, no engagement.
pub const FORMAT_V7: u32 = 7;
/// The record format this build writes.
pub const FORMAT_V8: u32 = 8;

/// Bytes of a format-3 payload before its strings.
const V3_FIXED: usize = 8 + 1 + 8 + 4 + 2 + 2 + 2;
/// Bytes of a format-4 payload before its strings.
const V4_FIXED: usize = V3_FIXED + 2;
/// Bytes of a format-5 payload before its strings.
const V5_FIXED: usize = V4_FIXED + 8 + 8 + 4;
/// Bytes of a format-6 payload before its strings.
const V6_FIXED: usize = V5_FIXED + 2;
/// Bytes of a format-7 payload before its strings.
const V7_FIXED: usize = V6_FIXED + 3 + 8;
/// Bytes of a format-8 payload before its strings.
const V8_FIXED: usize = V7_FIXED + 8 + 1 + 4;
/// Most bytes of a record's properties: their count, and each key and
/// value with its length.
const MAX_PROPS: usize = 1 + properties::MAX_PROPERTIES * 4 + properties::MAX_TOTAL_BYTES;
/// Most bytes of a record's labels: one per dimension, each at most 255.
const MAX_LABELS: usize = Dimension::ALL.len() * (2 + MAX_NAME_BYTES);

const HAS_VISIT: u8 = 1;
const STARTS: u8 = 2;
const SECOND_VIEW: u8 = 4;
const HAS_PLACE: u8 = 8;
const HAS_REVENUE: u8 = 16;
const ENGAGEMENT: u8 = 32;
const FIRST_ENGAGEMENT: u8 = 64;

/// The most engaged time one engagement record carries: the pixel bounds
/// a view's engaged time by the time since the view (`ingest::visits`),
/// which an open visit keeps under its 30-minute gap.
pub const MAX_ENGAGED_MS: u32 = 30 * 60 * 1000;

/// A hit as journaled: which page, when it happened, where it came from
/// when that is known, and what it changes of its visit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub page: String,
    pub at: DateTime<Utc>,
    pub source: Option<String>,
    /// `None` for hits from before visitors (formats 1 and 2) and writers
    /// that have no visitor (imports of views alone).
    pub visit: Option<Visit>,
    /// Its names in the breakdowns other than the source (format 4). A
    /// record with an [`Dimension::Event`] label is that event, not a view.
    pub labels: Labels,
    /// Its custom properties (format 6).
    pub props: Properties,
    /// An event's revenue (format 7); never on a view.
    pub revenue: Option<Revenue>,
    /// An engagement with the view of `page` (format 8): neither a view
    /// nor an event, it has no visit, source, labels or properties.
    pub engagement: Option<Engagement>,
}

/// What an engagement adds to its view's page (`ingest::visits` works it
/// out from what the view had sent before): every figure is a sum, so the
/// write-behind applies each exactly once like the views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Engagement {
    /// When the view was made: credited there, so a range's scroll depth
    /// and engaged time are of the views it counts.
    pub view_at: DateTime<Utc>,
    /// How much the view's greatest scroll depth grew, in percentage
    /// points (0 to 100 over all of a view's engagements).
    pub depth_added: u8,
    /// The view's first engagement: it counts the view once.
    pub first: bool,
    /// Engaged milliseconds added, at most [`MAX_ENGAGED_MS`].
    pub engaged_ms: u32,
}

/// What one hit changes of its visit, decided at the pixel (see
/// `ingest::visits`): every report metric is a sum of these, so the
/// write-behind's `$inc` applies each exactly once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Visit {
    /// The day's keyed hash of the visitor (`ingest::visitor`).
    pub visitor: u64,
    /// Seconds since the visit's previous hit (0 when it starts one):
    /// added to the visit's duration, credited to its entry page.
    pub duration_secs: u32,
    /// The visit's entry page, and the page of its previous hit (which
    /// loses the exit this hit takes); both `None` when it starts a visit.
    pub entry: Option<String>,
    pub previous: Option<String>,
    /// The visit's second view: its entry page's bounce is undone.
    pub second_view: bool,
    /// The hit's place in its visit (format 5); `None` in older formats
    /// and for an event outside any open visit.
    pub place: Option<VisitPlace>,
}

/// Where a hit stands in its visit, for the visit store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisitPlace {
    /// Drawn at random when the visit opens: not derived from the visitor
    /// or the address, so it ties nothing beyond the one visit.
    pub id: u64,
    /// The visit's first hit.
    pub start: DateTime<Utc>,
    /// The hit's number in its visit: 0 for the entry, then in the order
    /// the pixel took the visit's hits (views and events).
    pub step: u32,
}

impl Visit {
    /// Whether this hit starts a visit (its page is the entry).
    pub fn starts(&self) -> bool {
        self.entry.is_none()
    }
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
    /// A view of `page` at `at`, with nothing else known.
    pub fn view(page: impl Into<String>, at: DateTime<Utc>) -> Self {
        Record {
            page: page.into(),
            at,
            source: None,
            visit: None,
            labels: Labels::default(),
            props: Properties::default(),
            revenue: None,
            engagement: None,
        }
    }

    /// Whether the record is an engagement with a view (counted in the
    /// page's scroll depth and engaged time only), not a view or event.
    pub fn is_engagement(&self) -> bool {
        self.engagement.is_some()
    }

    /// Whether the record is a view: neither an event nor an engagement.
    pub fn is_view(&self) -> bool {
        !self.is_event() && !self.is_engagement()
    }

    /// Whether the record is a custom event (counted in the event
    /// breakdown only), not a page view.
    pub fn is_event(&self) -> bool {
        self.labels.get(Dimension::Event).is_some()
    }

    /// Bytes this record takes on disk.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.payload_len(FORMAT_V8)
    }

    fn payload_len(&self, format: u32) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let visit = self.visit.as_ref();
        let strings = self.page.len()
            + text(&self.source)
            + visit.map_or(0, |v| text(&v.entry) + text(&v.previous));
        match format {
            FORMAT_V3 => V3_FIXED + strings,
            _ => {
                let labels: usize = self.labels.iter().map(|(_, n)| 2 + n.len()).sum();
                let fixed = match format {
                    FORMAT_V4 => V4_FIXED,
                    FORMAT_V5 => V5_FIXED,
                    FORMAT_V6 => V6_FIXED + self.props_len(),
                    FORMAT_V7 => V7_FIXED + self.props_len(),
                    _ => V8_FIXED + self.props_len(),
                };
                fixed + strings + labels
            }
        }
    }

    /// Bytes of its properties in a format-6 record.
    fn props_len(&self) -> usize {
        1 + self
            .props
            .iter()
            .map(|(k, v)| 4 + k.len() + v.len())
            .sum::<usize>()
    }

    /// Appends the encoded record to `out`. Pages longer than the codec
    /// allows are a bug upstream (the pixel's rules bound them), so they
    /// panic here instead of writing a record that would read back as damage.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        self.encode_format_into(out, FORMAT_V8);
    }

    /// Writes a record as format 7 did (revenue, no engagement): only for
    /// tests that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v7_into(&self, out: &mut Vec<u8>) {
        self.encode_format_into(out, FORMAT_V7);
    }

    /// Writes a record as format 6 did (properties, no revenue): only for
    /// tests that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v6_into(&self, out: &mut Vec<u8>) {
        self.encode_format_into(out, FORMAT_V6);
    }

    /// Writes a record as format 5 did (a place in a visit, no
    /// properties): only for tests that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v5_into(&self, out: &mut Vec<u8>) {
        self.encode_format_into(out, FORMAT_V5);
    }

    /// Writes a record as format 4 did (labels, no place in a visit): only
    /// for tests that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v4_into(&self, out: &mut Vec<u8>) {
        self.encode_format_into(out, FORMAT_V4);
    }

    /// Writes a record as format 3 did (a visit, no labels): only for tests
    /// that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v3_into(&self, out: &mut Vec<u8>) {
        self.encode_format_into(out, FORMAT_V3);
    }

    fn encode_format_into(&self, out: &mut Vec<u8>, format: u32) {
        let payload_len = self.payload_len(format);
        assert!(payload_len <= MAX_PAYLOAD, "page too long for the journal");
        fn text(s: &Option<String>) -> &[u8] {
            s.as_deref().unwrap_or_default().as_bytes()
        }
        let place = match (&self.visit, format) {
            (Some(v), FORMAT_V5 | FORMAT_V6 | FORMAT_V7 | FORMAT_V8) => v.place,
            _ => None,
        };
        let (flags, visitor, duration, entry, previous) = match &self.visit {
            None => (0, 0, 0, &[][..], &[][..]),
            Some(v) => {
                let mut flags = HAS_VISIT;
                if v.starts() {
                    flags |= STARTS;
                }
                if v.second_view {
                    flags |= SECOND_VIEW;
                }
                if place.is_some() {
                    flags |= HAS_PLACE;
                }
                let (entry, previous) = (text(&v.entry), text(&v.previous));
                (flags, v.visitor, v.duration_secs, entry, previous)
            }
        };
        let revenue = self.revenue.filter(|_| format >= FORMAT_V7);
        let flags = if revenue.is_some() {
            flags | HAS_REVENUE
        } else {
            flags
        };
        let engagement = self.engagement.filter(|_| format >= FORMAT_V8);
        let flags = match engagement {
            Some(e) if e.first => flags | ENGAGEMENT | FIRST_ENGAGEMENT,
            Some(_) => flags | ENGAGEMENT,
            None => flags,
        };
        let source = text(&self.source);
        for part in [self.page.as_bytes(), source, entry, previous] {
            assert!(part.len() <= MAX_PAGE, "page too long for the journal");
        }
        let start = out.len();
        out.extend_from_slice(&(payload_len as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.at.timestamp_millis().to_le_bytes());
        out.push(flags);
        out.extend_from_slice(&visitor.to_le_bytes());
        out.extend_from_slice(&duration.to_le_bytes());
        let mut lens = vec![self.page.len(), source.len(), entry.len()];
        if format != FORMAT_V3 {
            lens.push(previous.len());
        }
        for len in lens {
            out.extend_from_slice(&(len as u16).to_le_bytes());
        }
        if format >= FORMAT_V5 {
            let (id, start, step) =
                place.map_or((0, 0, 0), |p| (p.id, p.start.timestamp_millis(), p.step));
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&start.to_le_bytes());
            out.extend_from_slice(&step.to_le_bytes());
        }
        if format >= FORMAT_V6 {
            out.extend_from_slice(&(self.props_len() as u16).to_le_bytes());
        }
        if format >= FORMAT_V7 {
            let (currency, amount) =
                revenue.map_or(([0; 3], 0), |r| (r.currency.bytes(), r.amount.scaled()));
            out.extend_from_slice(&currency);
            out.extend_from_slice(&amount.to_le_bytes());
        }
        if format >= FORMAT_V8 {
            let (view_at, depth, ms) = engagement.map_or((0, 0, 0), |e| {
                (e.view_at.timestamp_millis(), e.depth_added, e.engaged_ms)
            });
            out.extend_from_slice(&view_at.to_le_bytes());
            out.push(depth);
            out.extend_from_slice(&ms.to_le_bytes());
        }
        for part in [self.page.as_bytes(), source, entry, previous] {
            out.extend_from_slice(part);
        }
        if format >= FORMAT_V6 {
            out.push(self.props.len() as u8);
            for (k, v) in self.props.iter() {
                for part in [k, v] {
                    out.extend_from_slice(&(part.len() as u16).to_le_bytes());
                    out.extend_from_slice(part.as_bytes());
                }
            }
        }
        if format != FORMAT_V3 {
            for (dimension, name) in self.labels.iter() {
                out.push(dimension.code());
                out.push(name.len() as u8);
                out.extend_from_slice(name.as_bytes());
            }
        }
        let crc = crc32c::crc32c_append(
            crc32c::crc32c(&out[start..start + 4]),
            &out[start + HEADER_LEN..],
        );
        out[start + 4..start + HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    }

    /// Writes a record as format 2 did (a source, no visit): only for tests
    /// that replay an old journal.
    #[doc(hidden)]
    pub fn encode_v2_into(&self, out: &mut Vec<u8>) {
        let source = self.source.as_deref().unwrap_or_default().as_bytes();
        let len = ((10 + self.page.len() + source.len()) as u32).to_le_bytes();
        let at = self.at.timestamp_millis().to_le_bytes();
        let page_len = (self.page.len() as u16).to_le_bytes();
        let mut crc = crc32c::crc32c(&len);
        for part in [&at[..], &page_len[..], self.page.as_bytes(), source] {
            crc = crc32c::crc32c_append(crc, part);
        }
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
        let min = match format {
            FORMAT_V1 => 8,
            FORMAT_V2 => 10,
            FORMAT_V3 => V3_FIXED as u32,
            FORMAT_V4 => V4_FIXED as u32,
            FORMAT_V5 => V5_FIXED as u32,
            FORMAT_V6 => V6_FIXED as u32,
            FORMAT_V7 => V7_FIXED as u32,
            _ => V8_FIXED as u32,
        };
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
        let optional = |bytes: &[u8]| text(bytes).map(|s| (!s.is_empty()).then_some(s));
        let u16_at = |i: usize| u16::from_le_bytes(payload[i..i + 2].try_into().expect("2 bytes"));
        let record = match format {
            FORMAT_V1 => Record {
                page: text(&payload[8..])?,
                at,
                source: None,
                visit: None,
                labels: Labels::default(),
                props: Properties::default(),
                revenue: None,
                engagement: None,
            },
            FORMAT_V2 => {
                let page_len = u16_at(8) as usize;
                let rest = &payload[10..];
                if page_len > rest.len() {
                    return Err(DecodeError::BadPayload);
                }
                Record {
                    page: text(&rest[..page_len])?,
                    at,
                    source: optional(&rest[page_len..])?,
                    visit: None,
                    labels: Labels::default(),
                    props: Properties::default(),
                    revenue: None,
                    engagement: None,
                }
            }
            _ => {
                let flags = payload[8];
                let visitor = u64::from_le_bytes(payload[9..17].try_into().expect("8 bytes"));
                let duration = u32::from_le_bytes(payload[17..21].try_into().expect("4 bytes"));
                let v3 = format == FORMAT_V3;
                let lens: Vec<usize> = if v3 {
                    [21, 23, 25].map(|i| usize::from(u16_at(i))).to_vec()
                } else {
                    [21, 23, 25, 27].map(|i| usize::from(u16_at(i))).to_vec()
                };
                let v5 = format >= FORMAT_V5;
                let fixed = match format {
                    FORMAT_V3 => V3_FIXED,
                    FORMAT_V4 => V4_FIXED,
                    FORMAT_V5 => V5_FIXED,
                    FORMAT_V6 => V6_FIXED,
                    FORMAT_V7 => V7_FIXED,
                    _ => V8_FIXED,
                };
                let props_len = if format >= FORMAT_V6 {
                    usize::from(u16_at(V5_FIXED))
                } else {
                    0
                };
                let rest = &payload[fixed..];
                let known_flags = match format {
                    FORMAT_V3 | FORMAT_V4 => 7,
                    FORMAT_V5 | FORMAT_V6 => 15,
                    FORMAT_V7 => 31,
                    _ => 127,
                };
                let revenue = if format >= FORMAT_V7 {
                    let at = V6_FIXED;
                    let currency: [u8; 3] = payload[at..at + 3].try_into().expect("3 bytes");
                    let amount =
                        i64::from_le_bytes(payload[at + 3..at + 11].try_into().expect("8 bytes"));
                    if flags & HAS_REVENUE == 0 {
                        if currency != [0; 3] || amount != 0 {
                            return Err(DecodeError::BadPayload);
                        }
                        None
                    } else {
                        let currency = std::str::from_utf8(&currency)
                            .ok()
                            .and_then(|c| Currency::parse(c).ok())
                            .filter(|c| c.bytes() == currency)
                            .ok_or(DecodeError::BadPayload)?;
                        let amount = Amount::from_scaled(amount).ok_or(DecodeError::BadPayload)?;
                        Some(Revenue { currency, amount })
                    }
                } else {
                    None
                };
                if lens.iter().sum::<usize>() + props_len > rest.len() || flags & !known_flags != 0
                {
                    return Err(DecodeError::BadPayload);
                }
                let engagement = if format >= FORMAT_V8 {
                    let at = V7_FIXED;
                    let view_ms =
                        i64::from_le_bytes(payload[at..at + 8].try_into().expect("8 bytes"));
                    let depth = payload[at + 8];
                    let ms =
                        u32::from_le_bytes(payload[at + 9..at + 13].try_into().expect("4 bytes"));
                    if flags & ENGAGEMENT == 0 {
                        if view_ms != 0 || depth != 0 || ms != 0 || flags & FIRST_ENGAGEMENT != 0 {
                            return Err(DecodeError::BadPayload);
                        }
                        None
                    } else {
                        // Written within its bounds, and never with what a
                        // view or an event carries.
                        if depth > 100
                            || ms > MAX_ENGAGED_MS
                            || flags & !(ENGAGEMENT | FIRST_ENGAGEMENT) != 0
                        {
                            return Err(DecodeError::BadPayload);
                        }
                        let view_at = DateTime::<Utc>::from_timestamp_millis(view_ms)
                            .ok_or(DecodeError::BadPayload)?;
                        Some(Engagement {
                            view_at,
                            depth_added: depth,
                            first: flags & FIRST_ENGAGEMENT != 0,
                            engaged_ms: ms,
                        })
                    }
                } else {
                    None
                };
                let place = if v5 {
                    let id = u64::from_le_bytes(payload[29..37].try_into().expect("8 bytes"));
                    let start_ms = i64::from_le_bytes(payload[37..45].try_into().expect("8 bytes"));
                    let step = u32::from_le_bytes(payload[45..49].try_into().expect("4 bytes"));
                    if flags & HAS_PLACE == 0 {
                        if id != 0 || start_ms != 0 || step != 0 {
                            return Err(DecodeError::BadPayload);
                        }
                        None
                    } else {
                        let start = DateTime::<Utc>::from_timestamp_millis(start_ms)
                            .ok_or(DecodeError::BadPayload)?;
                        Some(VisitPlace { id, start, step })
                    }
                } else {
                    None
                };
                let (page, rest) = rest.split_at(lens[0]);
                let (source, rest) = rest.split_at(lens[1]);
                let (entry, rest) = rest.split_at(lens[2]);
                let (previous, rest) = match lens.get(3) {
                    Some(&n) => rest.split_at(n),
                    None => (rest, &[][..]),
                };
                let (props, labels) = rest.split_at(props_len);
                let props = if format >= FORMAT_V6 {
                    decode_props(props)?
                } else {
                    Properties::default()
                };
                let labels = decode_labels(labels)?;
                let (entry, previous) = (optional(entry)?, optional(previous)?);
                let visit = if flags & HAS_VISIT == 0 {
                    // An event outside any visit (an import's) may still carry
                    // revenue.
                    if flags & !(HAS_REVENUE | ENGAGEMENT | FIRST_ENGAGEMENT) != 0
                        || visitor != 0
                        || duration != 0
                        || entry.is_some()
                        || previous.is_some()
                    {
                        return Err(DecodeError::BadPayload);
                    }
                    None
                } else {
                    // A visit starts exactly when it names no entry page.
                    // (An event's visit names none either: it changes
                    // nothing of the visit, whatever its step.)
                    if (flags & STARTS != 0) != entry.is_none()
                        || entry.is_some() != previous.is_some()
                    {
                        return Err(DecodeError::BadPayload);
                    }
                    Some(Visit {
                        visitor,
                        duration_secs: duration,
                        entry,
                        previous,
                        second_view: flags & SECOND_VIEW != 0,
                        place,
                    })
                };
                let record = Record {
                    page: text(page)?,
                    at,
                    source: optional(source)?,
                    visit,
                    labels,
                    props,
                    revenue,
                    engagement,
                };
                if record.is_engagement()
                    && (record.source.is_some()
                        || !record.labels.is_empty()
                        || !record.props.is_empty())
                {
                    return Err(DecodeError::BadPayload);
                }
                record
            }
        };
        Ok((record, total))
    }
}

/// A format-6 record's properties: as this build writes them, within
/// their bounds, or damage.
fn decode_props(bytes: &[u8]) -> Result<Properties, DecodeError> {
    let (count, mut rest) = bytes.split_first().ok_or(DecodeError::BadPayload)?;
    let mut text = || -> Result<String, DecodeError> {
        let &[a, b, ref tail @ ..] = rest else {
            return Err(DecodeError::BadPayload);
        };
        let len = usize::from(u16::from_le_bytes([a, b]));
        if len > tail.len() {
            return Err(DecodeError::BadPayload);
        }
        let (s, tail) = tail.split_at(len);
        rest = tail;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadPayload)
    };
    let mut pairs = Vec::with_capacity(usize::from(*count).min(properties::MAX_PROPERTIES));
    for _ in 0..*count {
        let key = text()?;
        let value = text()?;
        pairs.push((key, value));
    }
    if !rest.is_empty() {
        return Err(DecodeError::BadPayload);
    }
    Properties::from_journal(pairs).ok_or(DecodeError::BadPayload)
}

/// A format-4 record's labels: each dimension at most once, each name
/// non-empty UTF-8.
fn decode_labels(mut bytes: &[u8]) -> Result<Labels, DecodeError> {
    let mut labels = Labels::default();
    while let [code, len, rest @ ..] = bytes {
        let dimension = Dimension::from_code(*code).ok_or(DecodeError::BadPayload)?;
        let len = usize::from(*len);
        if len == 0 || len > rest.len() || labels.get(dimension).is_some() {
            return Err(DecodeError::BadPayload);
        }
        let name = std::str::from_utf8(&rest[..len]).map_err(|_| DecodeError::BadPayload)?;
        labels.set(dimension, name);
        bytes = &rest[len..];
    }
    if bytes.is_empty() {
        Ok(labels)
    } else {
        Err(DecodeError::BadPayload)
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
            visit: None,
            labels: Labels::default(),
            props: Default::default(),
            revenue: None,
            engagement: None,
        }
    }

    #[test]
    fn labels_round_trip_and_a_format_3_record_reads_without_them() {
        let mut r = record("example.com/pricing");
        r.labels = Labels::default()
            .with(Dimension::Browser, "Firefox")
            .with(Dimension::Country, "DE")
            .with(Dimension::Campaign, "spring sale");
        r.visit = Some(Visit {
            visitor: 9,
            duration_secs: 3,
            entry: Some("example.com/".into()),
            previous: Some("example.com/a".into()),
            second_view: false,
            place: Some(VisitPlace {
                id: 77,
                start: Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap(),
                step: 3,
            }),
        });
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        assert!(!r.is_event());
        let without_place = Some(Visit {
            place: None,
            ..r.visit.clone().unwrap()
        });
        let mut old = Vec::new();
        r.encode_v3_into(&mut old);
        let (decoded, _) = Record::decode(&old, FORMAT_V3).unwrap();
        assert_eq!(decoded.labels, Labels::default());
        assert_eq!(decoded.visit, without_place);
        // A format-4 record keeps its labels and reads with no place.
        let mut v4 = Vec::new();
        r.encode_v4_into(&mut v4);
        let (decoded, len) = Record::decode(&v4, FORMAT_V4).unwrap();
        assert_eq!(len, v4.len());
        assert_eq!(decoded.labels, r.labels);
        assert_eq!(decoded.visit, without_place);
        let event = Record {
            labels: Labels::default().with(Dimension::Event, "Signup"),
            ..record("example.com/")
        };
        assert!(event.is_event());
    }

    #[test]
    fn a_label_of_no_known_dimension_is_damage() {
        let mut r = record("example.com/a");
        r.labels = Labels::default().with(Dimension::Os, "Linux");
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        let code = buf.len() - 2 - "Linux".len();
        buf[code] = 200;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..4]), &buf[HEADER_LEN..]);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Record::decode(&buf, FORMAT_V8).unwrap_err(),
            DecodeError::BadPayload
        );
    }

    #[test]
    fn a_record_round_trips_and_says_its_length() {
        let mut r = record("example.com/blog/hello");
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        r.source = Some("news.ycombinator.com".into());
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        for visit in [
            Visit {
                visitor: u64::MAX,
                ..Visit::default()
            },
            Visit {
                visitor: 7,
                duration_secs: 95,
                entry: Some("example.com/".into()),
                previous: Some("example.com/a".into()),
                second_view: true,
                place: None,
            },
            Visit {
                visitor: 7,
                place: Some(VisitPlace {
                    id: u64::MAX,
                    start: Utc.with_ymd_and_hms(2026, 11, 22, 9, 59, 59).unwrap(),
                    step: 0,
                }),
                ..Visit::default()
            },
        ] {
            r.visit = Some(visit);
            let mut buf = Vec::new();
            r.encode_into(&mut buf);
            assert_eq!(buf.len(), r.encoded_len());
            assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        }
    }

    #[test]
    fn a_format_2_record_decodes_with_its_source_and_no_visit() {
        let mut r = record("example.com/old");
        r.source = Some("google.com".into());
        let mut buf = Vec::new();
        r.encode_v2_into(&mut buf);
        assert_eq!(Record::decode(&buf, FORMAT_V2), Ok((r, buf.len())));
    }

    #[test]
    fn a_visit_that_names_only_one_of_its_pages_is_damage() {
        let mut r = record("example.com/a");
        r.visit = Some(Visit {
            visitor: 1,
            entry: Some("example.com/".into()),
            previous: Some("example.com/".into()),
            ..Visit::default()
        });
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        // Cut the entry's length to zero (and fix the checksum): a visit
        // that continues but names no entry.
        buf[HEADER_LEN + 25..HEADER_LEN + 27].copy_from_slice(&0u16.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..4]), &buf[HEADER_LEN..]);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Record::decode(&buf, FORMAT_V8).unwrap_err(),
            DecodeError::BadPayload
        );
    }

    #[test]
    fn a_format_1_record_decodes_without_a_source() {
        let r = record("example.com/old");
        let mut buf = Vec::new();
        r.encode_v1_into(&mut buf);
        assert_eq!(r.visit, None);
        assert_eq!(Record::decode(&buf, FORMAT_V1), Ok((r, buf.len())));
    }

    #[test]
    fn zeros_are_not_a_record() {
        assert_eq!(
            Record::decode(&[0; 64], FORMAT_V8).unwrap_err(),
            DecodeError::BadLength(0)
        );
    }

    /// Revenue on some of the generated events, from the record's own
    /// bytes so the strategy stays one value.
    fn revenue_of(r: &Record) -> Option<Revenue> {
        let seed = r.at.timestamp_millis().unsigned_abs();
        (seed % 3 == 0).then(|| Revenue {
            currency: Currency::parse(["EUR", "JPY", "KWD"][(seed % 7 % 3) as usize]).unwrap(),
            amount: Amount::from_scaled((seed % 20_000_000) as i64 - 10_000_000).unwrap(),
        })
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            "\\PC{0,300}",
            // Any millisecond chrono can represent in the years we may see.
            -62_000_000_000_000i64..253_000_000_000_000i64,
            proptest::option::of("[a-z0-9.]{1,60}"),
            proptest::option::of((
                any::<u64>(),
                any::<u32>(),
                proptest::option::of(("\\PC{0,100}", "\\PC{0,100}")),
                any::<bool>(),
                proptest::option::of((
                    any::<u64>(),
                    -62_000_000_000_000i64..253_000_000_000_000i64,
                    any::<u32>(),
                )),
            )),
        )
            .prop_map(|(page, ms, source, visit)| Record {
                labels: match &source {
                    Some(s) => Labels::default().with(Dimension::Medium, s.clone()),
                    None => Labels::default(),
                },
                page,
                at: DateTime::<Utc>::from_timestamp_millis(ms).unwrap(),
                source,
                // An empty page name reads back as none: the pixel never
                // journals one.
                visit: visit.map(|(visitor, duration_secs, pages, second_view, place)| {
                    let pages = pages.map(|(e, p)| (format!("e{e}"), format!("p{p}")));
                    Visit {
                        visitor,
                        duration_secs,
                        entry: pages.as_ref().map(|p| p.0.clone()),
                        previous: pages.map(|p| p.1),
                        second_view,
                        place: place.map(|(id, ms, step)| VisitPlace {
                            id,
                            start: DateTime::<Utc>::from_timestamp_millis(ms).unwrap(),
                            step,
                        }),
                    }
                }),
                props: Default::default(),
                revenue: None,
                engagement: None,
            })
            .prop_flat_map(|r| {
                proptest::collection::vec(("[a-z.$]{1,20}", "\\PC{1,60}"), 0..5).prop_map(
                    move |pairs| Record {
                        props: crate::domain::Properties::of(
                            pairs,
                            crate::domain::properties::Rules::Lenient,
                        )
                        .unwrap(),
                        revenue: revenue_of(&r),
                        ..r.clone()
                    },
                )
            })
    }

    #[test]
    fn properties_round_trip_and_a_format_5_record_reads_without_them() {
        let mut r = record("example.com/blog/a");
        r.props = crate::domain::Properties::parse_query(r#"{"author":"Zoë","x.y$z":"1","n":2}"#)
            .unwrap();
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        let mut v5 = Vec::new();
        r.encode_v5_into(&mut v5);
        let (decoded, len) = Record::decode(&v5, FORMAT_V5).unwrap();
        assert_eq!(len, v5.len());
        assert!(decoded.props.is_empty());
        assert_eq!(decoded.page, r.page);
    }

    #[test]
    fn properties_outside_their_rules_are_damage() {
        let mut r = record("example.com/");
        r.props = crate::domain::Properties::parse_query(r#"{"k":"v"}"#).unwrap();
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        // The count says two properties where one was written: the
        // checksum is made again, so only the properties' shape can refuse
        // it. (count, key length, "k", value length, "v")
        let at = buf.len() - 7;
        assert_eq!(buf[at], 1);
        buf[at] = 2;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..4]), &buf[HEADER_LEN..]);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Record::decode(&buf, FORMAT_V8).unwrap_err(),
            DecodeError::BadPayload
        );
    }

    #[test]
    fn revenue_round_trips_and_a_format_6_record_reads_without_it() {
        let mut r = record("example.com/checkout");
        r.labels = Labels::default().with(Dimension::Event, "Purchase");
        r.revenue = Some(Revenue {
            currency: Currency::parse("EUR").unwrap(),
            amount: Amount::parse("-12.3456").unwrap(),
        });
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        let mut v6 = Vec::new();
        r.encode_v6_into(&mut v6);
        let (decoded, len) = Record::decode(&v6, FORMAT_V6).unwrap();
        assert_eq!(len, v6.len());
        assert_eq!(decoded.revenue, None);
        assert_eq!(decoded.labels, r.labels);
    }

    #[test]
    fn an_engagement_round_trips_and_a_format_7_record_reads_as_before() {
        let view_at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 3).unwrap();
        let r = Record {
            engagement: Some(Engagement {
                view_at,
                depth_added: 55,
                first: true,
                engaged_ms: 61_000,
            }),
            ..record("example.com/docs")
        };
        let mut buf = Vec::new();
        r.encode_into(&mut buf);
        assert_eq!(buf.len(), r.encoded_len());
        assert_eq!(Record::decode(&buf, FORMAT_V8), Ok((r.clone(), buf.len())));
        assert!(r.is_engagement() && !r.is_view() && !r.is_event());
        // A view written as format 7 reads back the same, with no
        // engagement.
        let mut view = record("example.com/docs");
        view.visit = Some(Visit {
            visitor: 3,
            ..Visit::default()
        });
        let mut v7 = Vec::new();
        view.encode_v7_into(&mut v7);
        assert_eq!(Record::decode(&v7, FORMAT_V7), Ok((view.clone(), v7.len())));
        assert!(view.is_view());
    }

    #[test]
    fn an_engagement_outside_its_rules_is_damage() {
        let r = Record {
            engagement: Some(Engagement {
                view_at: Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 3).unwrap(),
                depth_added: 5,
                first: false,
                engaged_ms: 1,
            }),
            ..record("example.com/")
        };
        let mut good = Vec::new();
        r.encode_into(&mut good);
        let at = HEADER_LEN + V7_FIXED;
        let reseal = |buf: &mut Vec<u8>| {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..4]), &buf[HEADER_LEN..]);
            buf[4..8].copy_from_slice(&crc.to_le_bytes());
        };
        let mut cases: Vec<Vec<u8>> = Vec::new();
        // A depth past 100, a time past the bound, the engagement bytes
        // without the flag, and an engagement that is also a visit's hit.
        let mut b = good.clone();
        b[at + 8] = 101;
        cases.push(b);
        let mut b = good.clone();
        b[at + 9..at + 13].copy_from_slice(&(MAX_ENGAGED_MS + 1).to_le_bytes());
        cases.push(b);
        let mut b = good.clone();
        b[HEADER_LEN + 8] &= !ENGAGEMENT;
        cases.push(b);
        let mut b = good.clone();
        b[HEADER_LEN + 8] |= HAS_VISIT | STARTS;
        cases.push(b);
        for mut b in cases {
            reseal(&mut b);
            assert_eq!(
                Record::decode(&b, FORMAT_V8).unwrap_err(),
                DecodeError::BadPayload
            );
        }
    }

    #[test]
    fn revenue_outside_its_rules_is_damage() {
        let mut r = record("example.com/");
        r.revenue = Some(Revenue {
            currency: Currency::parse("USD").unwrap(),
            amount: Amount::parse("1").unwrap(),
        });
        let mut good = Vec::new();
        r.encode_into(&mut good);
        let at = HEADER_LEN + V6_FIXED;
        let reseal = |buf: &mut Vec<u8>| {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[0..4]), &buf[HEADER_LEN..]);
            buf[4..8].copy_from_slice(&crc.to_le_bytes());
        };
        // Not a currency, a lower-case one, an amount past the bound, and
        // revenue bytes without the flag that says they mean something.
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for code in [*b"ABC", *b"usd"] {
            let mut b = good.clone();
            b[at..at + 3].copy_from_slice(&code);
            cases.push(b);
        }
        let mut b = good.clone();
        b[at + 3..at + 11].copy_from_slice(&i64::MAX.to_le_bytes());
        cases.push(b);
        let mut b = good.clone();
        b[HEADER_LEN + 8] &= !HAS_REVENUE;
        cases.push(b);
        for mut b in cases {
            reseal(&mut b);
            assert_eq!(
                Record::decode(&b, FORMAT_V8).unwrap_err(),
                DecodeError::BadPayload
            );
        }
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
                let (decoded, len) = Record::decode(&buf[at..], FORMAT_V8).unwrap();
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
            prop_assert!(Record::decode(&buf[..cut], FORMAT_V8).is_err());
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
            prop_assert!(Record::decode(&buf, FORMAT_V8).is_err());
        }
    }
}

//! Umami's raw rows, as `psql \copy (…) TO '…' CSV HEADER` writes them
//! (README, "Switching from Umami"): `website_event`, one row per view or
//! event, and optionally `session`, which says each session's browser,
//! system, device and country. Columns are found by name, since Umami
//! added some over its versions (`visit_id`, the `utm_*` columns); the
//! others are ignored.
//!
//! `event_type` 1 is a view of `url_path` at `created_at`; 2 is the custom
//! event `event_name` on that page (never a view); 3 to 5 (links, pixels,
//! web vitals) are skipped and counted. A view's source follows the
//! pixel's rules: `utm_source`, else `referrer_domain` (the site's own
//! hosts are no source), else direct; `utm_medium` and `utm_campaign` are
//! kept. They are read from their columns, or from `url_query` in exports
//! from before those columns. `hostname`, titles, `utm_content`,
//! `utm_term` and click ids are not kept. The event data, a file beside
//! ([`super::umami_data`]), gives a row its custom properties and revenue
//! by its `event_id` (below, "Properties").
//!
//! Visits are rebuilt so that every figure stays a sum of per-row
//! deltas, as the pixel's are (`ingest::visits`):
//! - a visit is Umami's `visit_id` within one UTC day, fed through the
//!   pixel's own open-visit table ([`OpenVisits`]): its first view is the
//!   entry (one visit, one entry and, until a later view takes it, the
//!   exit), each later view moves the exit, adds the gap to the duration
//!   and its second view ends the bounce. So over every visit entries =
//!   visits = exits, and bounces are the visits of one view;
//! - the pixel's visitor changes with the UTC day's salt, so a visit going
//!   past midnight ends there, and its views after midnight start another
//!   visit of another visitor; the same holds here;
//! - a visit idle for the pixel's [`GAP`](crate::ingest::visits::GAP), or
//!   pushed out of the table's bounds, is forgotten: its `visit_id` seen
//!   again starts a new visit (Umami itself starts a new one after 30
//!   minutes);
//! - the visitor is `session_id`, hashed per UTC day under a key fixed by
//!   the site, so one session is one visitor a day, as with the pixel, and
//!   the same session in two imports of the site is the same visitor;
//! - the deltas depend on the file alone (every run rebuilds them from
//!   its first row, also for batches already in), so a rerun after
//!   `kill -9` applies exactly the deltas the first run would have; and as
//!   overlap days are whole UTC days and no visit crosses one, skipping a
//!   day drops whole visits.
//!
//! *Properties*: what an export's event data gives is counted where an
//! import's properties are (`storage::imported_properties`), per day of the
//! site's zone: each value's views or events, and its visits, a visit
//! being Umami's `visit_id` within a UTC day (as above) counted once per
//! day, view or event name, key and value; and each day's visits (those
//! with any row that day), which a value's share is of. A visit is found
//! again within its day by its id; what was seen is held for the current
//! day of the site's zone only (rows come in time order), at most
//! [`MAX_SEEN_ON_A_DAY`] entries.
//!
//! *Length*: under 900 lines of code; the rest is its unit tests.

use chrono::{DateTime, NaiveDate, Utc};
use std::io::Read;

use super::reading::{
    day_in_window, site_path, starts_with_plain_date, CsvFile, Format, Hashing, RowError, Rows,
};
use super::umami_data::EventData;
use super::{Carried, ImportHit, Row, Skipped};
use crate::classify::user_agent::{BROWSERS, OPERATING_SYSTEMS};
use crate::classify::{Country, DeviceClass, UNKNOWN};
use crate::domain::{Dimension, EventName, Labels, Page, Properties, Source};
use crate::ingest::pixel::utm_value;
use crate::ingest::visits::{OpenVisits, VisitsConfig};
use crate::journal::Visit;
use crate::storage::sites::Site;

pub const KIND: &str = "umami";

const SESSION_ID: &str = "session_id";
const VISIT_ID: &str = "visit_id";
const CREATED_AT: &str = "created_at";
const URL_PATH: &str = "url_path";
const EVENT_TYPE: &str = "event_type";
const EVENT_NAME: &str = "event_name";
const REFERRER_DOMAIN: &str = "referrer_domain";
const EVENT_COLUMNS: [&str; 7] = [
    SESSION_ID,
    VISIT_ID,
    CREATED_AT,
    URL_PATH,
    EVENT_TYPE,
    EVENT_NAME,
    REFERRER_DOMAIN,
];
const URL_QUERY: &str = "url_query";
const EVENT_ID: &str = "event_id";
const WEBSITE_ID: &str = "website_id";
const UTM_SOURCE: &str = "utm_source";
const UTM_MEDIUM: &str = "utm_medium";
const UTM_CAMPAIGN: &str = "utm_campaign";
const OPTIONAL_EVENT_COLUMNS: [&str; 6] = [
    URL_QUERY,
    WEBSITE_ID,
    UTM_SOURCE,
    UTM_MEDIUM,
    UTM_CAMPAIGN,
    EVENT_ID,
];

const SESSION_COLUMNS: [&str; 5] = [SESSION_ID, "browser", "os", "device", "country"];

/// Most sessions a session file may hold: at [`SESSION_BYTES`] each,
/// about 210 MB (up to twice that for a moment while the file is read, as
/// the vector grows).
pub const MAX_SESSIONS: usize = 10_000_000;
/// What a session takes in memory: its id and its labels' indexes.
pub const SESSION_BYTES: usize = std::mem::size_of::<SessionEntry>();
const _: () = assert!(SESSION_BYTES == 21, "a session entry has no padding");

/// A session as kept: the id's bytes (big-endian, so they sort as the
/// UUID does) and its labels as indexes into our names; byte arrays only,
/// so an entry takes 21 bytes, with no padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEntry {
    id: [u8; 16],
    /// Indexes into [`BROWSERS`], [`OPERATING_SYSTEMS`] and
    /// [`DeviceClass::ALL`], then the country's code (zeros: unknown).
    labels: [u8; 5],
}

impl SessionEntry {
    fn label(&self, labels: &mut Labels) {
        let [browser, os, device, c0, c1] = self.labels;
        labels.set(Dimension::Browser, BROWSERS[usize::from(browser)]);
        labels.set(Dimension::Os, OPERATING_SYSTEMS[usize::from(os)]);
        labels.set(
            Dimension::Device,
            DeviceClass::ALL[usize::from(device)].as_str(),
        );
        let country = if c0 == 0 {
            Country::UNKNOWN
        } else {
            Country::from_code(std::str::from_utf8(&[c0, c1]).unwrap_or_default())
        };
        labels.set(Dimension::Country, country.as_str());
    }
}

/// The session file's labels by session id, sorted for binary search.
#[derive(Debug, Default)]
pub struct Sessions {
    entries: Vec<SessionEntry>,
}

impl Sessions {
    /// Reads and checks a session file: a bad row names its line and
    /// column; more than [`MAX_SESSIONS`] is refused.
    pub fn load(read: impl Read, file: &str) -> Result<Self, RowError> {
        Self::load_at_most(read, file, MAX_SESSIONS)
    }

    fn load_at_most(read: impl Read, file: &str, most: usize) -> Result<Self, RowError> {
        let mut csv = CsvFile::open(read, file, &SESSION_COLUMNS, &[], |_| Ok(()))?;
        let mut entries = Vec::new();
        while let Some(next) = csv.next_record() {
            let (line, record) = next?;
            let cell = |name| csv.cell(&record, name);
            let error = |column: &str, message: String| RowError::new(file, line, column, message);
            if entries.len() == most {
                return Err(error(
                    SESSION_ID,
                    format!(
                        "more than {most} sessions ({SESSION_BYTES} bytes each in memory): \
                         import the events in parts, each with the sessions of its period \
                         (README, \"Switching from Umami\")"
                    ),
                ));
            }
            let id = uuid(cell(SESSION_ID)).map_err(|m| error(SESSION_ID, m))?;
            let country = match cell("country") {
                "" => [0, 0],
                code => {
                    let country = Country::from_code(code);
                    if code.len() != 2 || !country.is_known() {
                        return Err(error("country", format!("not a country code: {code:?}")));
                    }
                    let b = country.as_str().as_bytes();
                    [b[0], b[1]]
                }
            };
            entries.push(SessionEntry {
                id: id.to_be_bytes(),
                labels: [
                    browser(cell("browser")),
                    os(cell("os")),
                    device(cell("device")),
                    country[0],
                    country[1],
                ],
            });
        }
        entries.sort_unstable_by_key(|e| e.id);
        if let Some(twice) = entries.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(RowError::new(
                file,
                0,
                SESSION_ID,
                format!(
                    "{} is on two rows: export one website's sessions",
                    uuid::Uuid::from_bytes(twice[0].id)
                ),
            ));
        }
        entries.shrink_to_fit();
        Ok(Self { entries })
    }

    fn get(&self, id: u128) -> Option<&SessionEntry> {
        let id = id.to_be_bytes();
        self.entries
            .binary_search_by_key(&id, |e| e.id)
            .ok()
            .map(|i| &self.entries[i])
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn index_of(names: &[&str], name: &str) -> u8 {
    names
        .iter()
        .position(|n| n.eq_ignore_ascii_case(name))
        .unwrap_or(0) as u8
}

/// Umami's browser (`detect-browser`'s names) as one of [`BROWSERS`]; a
/// name of ours (given with `umami.track`'s overrides) is taken as it is.
fn browser(umami: &str) -> u8 {
    let ours = match umami {
        "chrome" | "crios" => "Chrome",
        "chromium-webview" => "Android WebView",
        "ios-webview" => "iOS WebView",
        "safari" | "ios" => "Safari",
        "firefox" | "fxios" => "Firefox",
        "edge" | "edge-chromium" | "edge-ios" => "Edge",
        "opera" | "opera-mini" => "Opera",
        "samsung" => "Samsung Internet",
        "yandexbrowser" => "Yandex",
        "miui" => "MIUI Browser",
        "ie" => "Internet Explorer",
        other => other,
    };
    index_of(BROWSERS, ours)
}

/// Umami's system (`detect-browser`'s `detectOS`) as one of
/// [`OPERATING_SYSTEMS`].
fn os(umami: &str) -> u8 {
    let ours = match umami {
        windows if windows.starts_with("Windows") => "Windows",
        "Mac OS" => "macOS",
        "Android OS" | "Amazon OS" => "Android",
        "Chrome OS" => "ChromeOS",
        other => other,
    };
    index_of(OPERATING_SYSTEMS, ours)
}

/// Umami's device (`desktop` or `laptop` by screen width, else the
/// User-Agent parser's type) as one of [`DeviceClass::ALL`].
fn device(umami: &str) -> u8 {
    let class = match umami {
        "desktop" | "laptop" => DeviceClass::Desktop,
        "mobile" => DeviceClass::Mobile,
        "tablet" => DeviceClass::Tablet,
        _ => DeviceClass::Unknown,
    };
    DeviceClass::ALL
        .iter()
        .position(|c| *c == class)
        .unwrap_or(0) as u8
}

fn uuid(raw: &str) -> Result<u128, String> {
    uuid::Uuid::parse_str(raw)
        .map(|u| u.as_u128())
        .map_err(|_| format!("not a UUID: {raw:?}"))
}

/// A `timestamptz` as psql writes it (`2026-11-25 10:00:00.123456+00`),
/// or RFC 3339.
fn time(raw: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_str(raw, "%Y-%m-%d %H:%M:%S%.f%#z")
        .or_else(|_| DateTime::parse_from_rfc3339(raw))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Umami's reading of a `website_event` row, with what the row changes
/// of its visit.
pub struct Umami<'a> {
    site: Site,
    sessions: &'a Sessions,
    /// Keys the day's hashes of sessions and visits (fixed by the site).
    key: [u8; 32],
    visits: OpenVisits,
    previous_at: Option<DateTime<Utc>>,
    websites: Websites,
    /// The first `website_id` seen ([`Websites::Any`]).
    website: Option<uuid::Uuid>,
    /// The event data by event id (empty: the import has none).
    data: &'a EventData,
    /// What the current day of the site's zone has seen of visits and
    /// values, while there is event data.
    seen: Seen,
}

/// Most visits and visits' values one day may hold in [`Seen`] (24 bytes
/// each, about twice that in the sets): past it, the file is refused.
pub const MAX_SEEN_ON_A_DAY: usize = 8_000_000;

/// The visits one day of the site's zone has had rows of, and the values
/// each sent: what makes a day's visits and a value's visits each count a
/// visit once.
#[derive(Debug, Default)]
struct Seen {
    day: Option<NaiveDate>,
    visits: std::collections::HashSet<u64>,
    /// A visit and a fingerprint of the view or event name, key and value
    /// (128 bits: a chance collision is far less likely than a disk error).
    values: std::collections::HashSet<(u64, u128)>,
}

impl Seen {
    /// Moves to `day` (a day of the site's zone, in time order).
    fn on(&mut self, day: NaiveDate) {
        if self.day != Some(day) {
            self.day = Some(day);
            self.visits.clear();
            self.values.clear();
        }
    }

    fn full(&self) -> bool {
        self.visits.len() + self.values.len() >= MAX_SEEN_ON_A_DAY
    }
}

/// A view's or an event's key and value, as [`Seen::values`] holds it.
fn fingerprint(event: &str, key: &str, value: &str) -> u128 {
    let mut hasher = blake3::Hasher::new();
    for part in [event, key, value] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    u128::from_le_bytes(
        hasher.finalize().as_bytes()[..16]
            .try_into()
            .expect("16 bytes"),
    )
}

/// Which rows of a `website_event` file are the site's, by their
/// `website_id` (a file without that column has no say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Websites {
    /// The site's own id, as when the site was added with Umami's website
    /// id (README, "Switching from Umami"): a row of another website is
    /// refused, and the message names `--from-website`.
    TheSites,
    /// `--from-website <id>`: that website's rows; other websites' rows
    /// are skipped and counted (an export of every website is fine).
    From(uuid::Uuid),
    /// One website, whichever: how imports were read before the site's
    /// id was checked, so that deleting one of those reads its rows as it
    /// did (its content is checked against its key first).
    Any,
}

/// The file's `event_id`s in order, hashed (`None` for a file without
/// that column): the same events, whatever else an export holds.
pub fn event_ids(read: impl Read, file: &str) -> Result<Option<blake3::Hash>, RowError> {
    let mut csv = CsvFile::open(read, file, &[], &[EVENT_ID], |_| Ok(()))?;
    if !csv.has(EVENT_ID) {
        return Ok(None);
    }
    let mut ids = blake3::Hasher::new();
    while let Some(next) = csv.next_record() {
        let (_, record) = next?;
        ids.update(csv.cell(&record, EVENT_ID).as_bytes());
        ids.update(b"\n");
    }
    Ok(Some(ids.finalize()))
}

/// `website_event`'s rows in order, each checked.
pub fn rows<'a, R: Read>(
    read: R,
    file: &str,
    site: Site,
    (sessions, data): (&'a Sessions, &'a EventData),
    websites: Websites,
) -> Result<Rows<Umami<'a>, R>, RowError> {
    let csv = CsvFile::open(read, file, &EVENT_COLUMNS, &OPTIONAL_EVENT_COLUMNS, |_| {
        Ok(())
    })?;
    if !data.is_empty() && !csv.has(EVENT_ID) {
        return Err(RowError::new(
            file,
            1,
            EVENT_ID,
            "no event_id column, which the event data names its events by: export \
             website_event with SELECT * (README, \"Switching from Umami\")",
        ));
    }
    let key = blake3::derive_key(
        "tickertape umami import 2026-11 visitor and visit ids",
        site.id.to_string().as_bytes(),
    );
    let umami = Umami {
        site,
        sessions,
        key,
        visits: OpenVisits::new(VisitsConfig::default()),
        previous_at: None,
        websites,
        website: None,
        data,
        seen: Seen::default(),
    };
    Ok(Rows::new(csv, umami))
}

impl Umami<'_> {
    /// A session's or a visit's id on `day`, under the site's key; `kind`
    /// keeps the two apart.
    fn day_id(&self, kind: u8, day: NaiveDate, id: u128) -> u64 {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        hasher.update(&[kind]);
        hasher.update(&chrono::Datelike::num_days_from_ce(&day).to_le_bytes());
        hasher.update(&id.to_le_bytes());
        u64::from_le_bytes(
            hasher.finalize().as_bytes()[..8]
                .try_into()
                .expect("8 bytes"),
        )
    }
}

impl Umami<'_> {
    /// What a row brings to the imported properties (see "Properties"
    /// above), when the export has event data: `event` is the event's
    /// name, none for a view. An error names its column.
    fn carried<R: Read>(
        &mut self,
        at: DateTime<Utc>,
        visit: u128,
        event: Option<&str>,
        csv: &CsvFile<R>,
        record: &csv::StringRecord,
    ) -> Result<Option<Box<Carried>>, (&'static str, String)> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let id = uuid(csv.cell(record, EVENT_ID)).map_err(|m| (EVENT_ID, m))?;
        let tz = self.site.time_zone.tz();
        let local = at.with_timezone(&tz).date_naive();
        self.seen.on(local);
        if self.seen.full() {
            return Err((
                VISIT_ID,
                format!(
                    "more than {MAX_SEEN_ON_A_DAY} visits and values on one day: import \
                     the events without --event-data"
                ),
            ));
        }
        let visit = self.day_id(b'v', at.date_naive(), visit);
        let new_visit = self.seen.visits.insert(visit);
        let facts = self.data.get(id);
        let properties = facts.map(|f| f.properties.clone()).unwrap_or_default();
        let new_values = properties
            .iter()
            .map(|(key, value)| {
                let print = fingerprint(event.unwrap_or_default(), key, value);
                self.seen.values.insert((visit, print))
            })
            .collect();
        Ok(Some(Box::new(Carried {
            day: crate::reports::local::midnight(local, tz),
            properties,
            new_values,
            new_visit,
            // A view's revenue counts nowhere, as the live endpoint's.
            revenue: event.and_then(|_| facts.and_then(|f| f.revenue)),
        })))
    }
}

impl Format for Umami<'_> {
    type Counted = ImportHit;

    fn row<R: Read>(
        &mut self,
        csv: &CsvFile<R>,
        line: u64,
        record: &csv::StringRecord,
    ) -> Result<Row, RowError> {
        let cell = |name: &str| csv.cell(record, name);
        let error =
            |column: &str, message: String| RowError::new(csv.file(), line, column, message);
        let at = Some(cell(CREATED_AT))
            .filter(|raw| starts_with_plain_date(raw))
            .and_then(time)
            .ok_or_else(|| {
                error(
                    CREATED_AT,
                    format!(
                        "not a time as psql writes one (2026-11-25 10:00:00.123+00): {:?}",
                        cell(CREATED_AT)
                    ),
                )
            })?;
        day_in_window(at.date_naive()).map_err(|e| error(CREATED_AT, e))?;
        if let Some(before) = self.previous_at.filter(|&b| at < b) {
            return Err(error(
                CREATED_AT,
                format!(
                    "{} is before the row above ({}): export the rows ORDER BY created_at \
                     (README, \"Switching from Umami\")",
                    at.to_rfc3339(),
                    before.to_rfc3339()
                ),
            ));
        }
        self.previous_at = Some(at);
        if csv.has(WEBSITE_ID) {
            let raw = cell(WEBSITE_ID);
            let website = uuid::Uuid::try_parse(raw)
                .map_err(|_| error(WEBSITE_ID, format!("not a UUID: {raw:?}")))?;
            match self.websites {
                Websites::TheSites if website != self.site.id.as_uuid() => {
                    return Err(error(
                        WEBSITE_ID,
                        format!(
                            "{website} is another website than this site ({}): to import \
                             that website's rows into it, add --from-website {website}",
                            self.site.id
                        ),
                    ))
                }
                Websites::From(wanted) if website != wanted => {
                    return Ok(Err(Skipped::OtherWebsite))
                }
                Websites::Any => match self.website {
                    None => self.website = Some(website),
                    Some(first) if first != website => {
                        return Err(error(
                            WEBSITE_ID,
                            format!(
                                "a second website ({website}, after {first}): export one \
                                 website's rows, WHERE website_id = '…'"
                            ),
                        ))
                    }
                    Some(_) => {}
                },
                _ => {}
            }
        }
        let session = uuid(cell(SESSION_ID)).map_err(|m| error(SESSION_ID, m))?;
        let visit = uuid(cell(VISIT_ID)).map_err(|m| error(VISIT_ID, m))?;
        let is_event = match cell(EVENT_TYPE) {
            "1" => false,
            "2" => true,
            "3" | "4" | "5" => return Ok(Err(Skipped::NotAViewOrEvent)),
            other => {
                return Err(error(
                    EVENT_TYPE,
                    format!("not an Umami event type (1 a view, 2 a custom event): {other:?}"),
                ))
            }
        };
        let path = site_path(&self.site, cell(URL_PATH)).map_err(|e| error(URL_PATH, e))?;
        let page = Page::new(&self.site.domain, &path).into_string();
        let day = at.date_naive();
        let visitor = self.day_id(b's', day, session);
        let mut labels = Labels::default();
        if is_event {
            let name = EventName::parse(cell(EVENT_NAME))
                .map_err(|e| error(EVENT_NAME, format!("not an event name: {e}")))?;
            let carried = self
                .carried(at, visit, Some(name.as_str()), csv, record)
                .map_err(|(column, m)| error(column, m))?;
            labels.set(Dimension::Event, name.into_string());
            return Ok(Ok(ImportHit {
                page,
                at,
                source: None,
                labels,
                visit: Some(Visit {
                    visitor,
                    ..Visit::default()
                }),
                carried,
            }));
        }
        let carried = self
            .carried(at, visit, None, csv, record)
            .map_err(|(column, m)| error(column, m))?;
        let query = format!("?{}", cell(URL_QUERY));
        let utm = |column: &str| match csv.has(column) {
            true => Some(cell(column).to_owned()).filter(|v| !v.is_empty()),
            false => utm_value(&query, column),
        };
        for (column, dimension) in [
            (UTM_MEDIUM, Dimension::Medium),
            (UTM_CAMPAIGN, Dimension::Campaign),
        ] {
            if let Some(value) = utm(column).as_deref().and_then(Source::from_utm) {
                labels.set(dimension, value.into_string());
            }
        }
        let referrer = Some(cell(REFERRER_DOMAIN))
            .filter(|d| !d.is_empty())
            .map(|d| format!("https://{d}"));
        let source = Source::of_view(utm(UTM_SOURCE).as_deref(), referrer.as_deref(), |h| {
            self.site.owns_host(h)
        });
        match self.sessions.get(session) {
            Some(entry) => entry.label(&mut labels),
            None => {
                for dimension in [
                    Dimension::Browser,
                    Dimension::Os,
                    Dimension::Device,
                    Dimension::Country,
                ] {
                    labels.set(dimension, UNKNOWN);
                }
            }
        }
        let visit_id = self.day_id(b'v', day, visit);
        let (mut delta, _) = self.visits.hit(visit_id, &page, &Properties::EMPTY, at);
        delta.visitor = visitor;
        // Imports bring figures, not visits to the visit store (filters
        // and funnels leave imported days out): the random id the visits
        // table draws would only make one file's rows differ between runs.
        delta.place = None;
        Ok(Ok(ImportHit {
            page,
            at,
            source: Some(source.into_string()),
            labels,
            visit: Some(delta),
            carried,
        }))
    }
}

/// An Umami export to import: the `website_event` file, the sessions
/// beside it (whose content is part of the import's key) and which
/// website's rows to read.
pub struct Export {
    file: std::path::PathBuf,
    sessions: Sessions,
    /// The sessions file's hash, and its path as recorded.
    sessions_hash: Option<(blake3::Hash, String)>,
    data: EventData,
    /// The event data file's hash, and its path as recorded.
    data_hash: Option<(blake3::Hash, String)>,
    websites: Websites,
    /// `--from-website`, as recorded.
    from_website: Option<String>,
    /// The events by their ids (with the website read): the same events
    /// read again with other sessions are recognised as another import's.
    rows_key: Option<String>,
}

impl Export {
    /// Reads the sessions and the events' ids before any database, as the
    /// first pass: a bad file should not wait for one.
    pub fn open(
        file: &std::path::Path,
        beside: super::workflow::Moved<'_>,
        from_website: Option<&str>,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let (sessions, sessions_hash) = load_sessions(beside.sessions)?;
        let (data, data_hash) = load_event_data(beside.event_data)?;
        let from = match from_website {
            Some(id) => Some(
                uuid::Uuid::try_parse(id)
                    .with_context(|| format!("--from-website {id:?}: not an Umami website id"))?,
            ),
            None => None,
        };
        let websites = from.map_or(Websites::TheSites, Websites::From);
        let from_website = from.map(|id| id.to_string());
        let shown = file.display().to_string();
        let rows_key = event_ids(super::workflow::open(file)?, &shown)?.map(|ids| {
            let mut key = blake3::Hasher::new();
            key.update(ids.as_bytes());
            if let Some(website) = &from_website {
                key.update(website.as_bytes());
            }
            key.finalize().to_hex()[..24].to_owned()
        });
        Ok(Self {
            file: file.to_owned(),
            sessions,
            sessions_hash,
            data,
            data_hash,
            websites,
            from_website,
            rows_key,
        })
    }

    /// The other files' hash, part of the import's content: the sessions'
    /// alone for an import without event data (its key as before event
    /// data was read), else both.
    fn also(&self) -> Option<blake3::Hash> {
        let sessions = self.sessions_hash.as_ref().map(|(hash, _)| *hash);
        let Some((data, _)) = &self.data_hash else {
            return sessions;
        };
        let mut both = blake3::Hasher::new();
        both.update(b"event data ");
        both.update(data.as_bytes());
        if let Some(sessions) = sessions {
            both.update(sessions.as_bytes());
        }
        Some(both.finalize())
    }

    /// The event data read, to tell once the rows are in.
    fn data_note(&self) -> Option<String> {
        let (_, file) = self.data_hash.as_ref()?;
        Some(format!(
            "{file}: {} rows, custom properties on {} views and events{}",
            self.data.rows,
            self.data.events(),
            match self.data.left_out {
                0 => String::new(),
                n => format!(
                    " ({n} left out: lists, values past the bounds, email addresses, \
                     past 30 a hit)"
                ),
            }
        ))
    }
}

/// A file beside the events (sessions, event data), if given: what
/// `load` reads of it, its hash and its recorded path; without one, none.
fn load_beside<T: Default>(
    path: Option<&std::path::Path>,
    load: impl FnOnce(Box<dyn Read>, &str) -> Result<T, RowError>,
) -> anyhow::Result<(T, Option<(blake3::Hash, String)>)> {
    let Some(path) = path else {
        return Ok((T::default(), None));
    };
    let shown = path.display().to_string();
    let (read, hasher) = Hashing::new(super::workflow::open(path)?);
    let loaded = load(Box::new(read), &shown)?;
    let hash = hasher.borrow().finalize();
    Ok((loaded, Some((hash, super::workflow::recorded_path(path)))))
}

fn load_sessions(
    path: Option<&std::path::Path>,
) -> anyhow::Result<(Sessions, Option<(blake3::Hash, String)>)> {
    load_beside(path, Sessions::load)
}

fn load_event_data(
    path: Option<&std::path::Path>,
) -> anyhow::Result<(EventData, Option<(blake3::Hash, String)>)> {
    load_beside(path, EventData::load)
}

impl super::workflow::Importer for Export {
    const KIND: &'static str = KIND;
    const DAYS: super::workflow::Days = super::workflow::Days::Utc;
    type Counted = ImportHit;

    /// The sessions from `sessions`, or where the import read them; the
    /// website it read (imports from before the site's id was checked
    /// read any one website).
    fn reopen(
        record: &crate::storage::imports::ImportRecord,
        file: &std::path::Path,
        moved: super::workflow::Moved<'_>,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let recorded = record.also_file.as_deref().map(std::path::Path::new);
        let (sessions, sessions_hash) = load_sessions(moved.sessions.or(recorded))?;
        let recorded = record.data_file.as_deref().map(std::path::Path::new);
        let (data, data_hash) = load_event_data(moved.event_data.or(recorded))?;
        let websites = match record.from_website.as_deref() {
            Some(id) => Websites::From(
                uuid::Uuid::try_parse(id)
                    .with_context(|| format!("the import's website {id:?}"))?,
            ),
            None => Websites::Any,
        };
        Ok(Self {
            file: file.to_owned(),
            sessions,
            sessions_hash,
            data,
            data_hash,
            websites,
            from_website: record.from_website.clone(),
            rows_key: None,
        })
    }

    fn check(&self, site: &Site) -> anyhow::Result<super::workflow::Checked> {
        let name = self.file.display().to_string();
        let mut checked = super::workflow::check_file(
            &self.file,
            |read| {
                let beside = (&self.sessions, &self.data);
                rows(read, &name, site.clone(), beside, self.websites)
            },
            self.also(),
            self.from_website.as_deref(),
        )?;
        checked.notes.extend(self.data_note());
        Ok(checked)
    }

    fn content(&self) -> anyhow::Result<blake3::Hash> {
        super::workflow::file_hash(&self.file, self.also(), self.from_website.as_deref())
    }

    fn rows(&self, site: &Site) -> anyhow::Result<super::workflow::CheckedRows<'_, ImportHit>> {
        let name = self.file.display().to_string();
        let read = super::workflow::open(&self.file)?;
        Ok(Box::new(rows(
            read,
            &name,
            site.clone(),
            (&self.sessions, &self.data),
            self.websites,
        )?))
    }

    fn beside(&self) -> super::workflow::Beside {
        super::workflow::Beside {
            also_file: self.sessions_hash.as_ref().map(|(_, file)| file.clone()),
            data_file: self.data_hash.as_ref().map(|(_, file)| file.clone()),
            from_website: self.from_website.clone(),
            rows_key: self.rows_key.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const HEADER: &str = "event_id,website_id,session_id,visit_id,created_at,url_path,url_query,utm_source,utm_medium,utm_campaign,utm_content,utm_term,referrer_path,referrer_query,referrer_domain,page_title,gclid,fbclid,msclkid,ttclid,li_fat_id,twclid,event_type,event_name,tag,hostname";
    const WEBSITE: &str = "94db1cb1-74f4-4a40-ad6c-962362670409";
    const ALICE: &str = "11111111-1111-4111-8111-111111111111";
    const BOB: &str = "22222222-2222-4222-8222-222222222222";
    const VISIT_1: &str = "aaaaaaaa-1111-4111-8111-111111111111";
    const VISIT_2: &str = "bbbbbbbb-2222-4222-8222-222222222222";

    fn site() -> Site {
        use crate::domain::DomainName;
        Site {
            id: crate::domain::SiteId::parse(WEBSITE).unwrap(),
            name: "Example".into(),
            domain: DomainName::parse("example.com").unwrap(),
            aliases: vec![DomainName::parse("blog.example.com").unwrap()],
            owners: vec![],
            created_at: Utc::now(),
            time_zone: crate::domain::TimeZone::UTC,
            totals_complete: true,
            page_cap: crate::domain::PageCapSetting::Default,
            unconfirmed_hosts: vec![],
            goals: vec![],
        }
    }

    /// A `website_event` row, written as psql would.
    #[derive(Clone, Copy)]
    struct Event {
        session: &'static str,
        visit: &'static str,
        at: &'static str,
        path: &'static str,
        query: &'static str,
        utm_source: &'static str,
        referrer: &'static str,
        kind: u8,
        name: &'static str,
    }

    /// Alice's view of the home page at 10:00, direct.
    const VIEW: Event = Event {
        session: ALICE,
        visit: VISIT_1,
        at: "2026-11-25 10:00:00+00",
        path: "/",
        query: "",
        utm_source: "",
        referrer: "",
        kind: 1,
        name: "",
    };

    impl Event {
        fn csv(&self) -> String {
            let Event {
                session,
                visit,
                at,
                path,
                query,
                utm_source,
                referrer,
                kind,
                name,
            } = self;
            format!(
                "{},{WEBSITE},{session},{visit},{at},{path},{query},{utm_source},,,,,,,{referrer},A title,,,,,,,{kind},{name},,example.com",
                uuid::Uuid::new_v4()
            )
        }
    }

    fn file(events: &[Event]) -> String {
        let mut lines = vec![HEADER.to_owned()];
        lines.extend(events.iter().map(Event::csv));
        lines.join("\n")
    }

    fn read(text: &str, sessions: &Sessions) -> Result<Vec<Row>, RowError> {
        rows(
            text.as_bytes(),
            "website_event.csv",
            site(),
            (sessions, &EventData::default()),
            Websites::TheSites,
        )?
        .collect()
    }

    fn sessions() -> Sessions {
        let text = format!(
            "session_id,website_id,browser,os,device,screen,language,country,region,city,distinct_id,created_at\n\
             {ALICE},{WEBSITE},crios,iOS,mobile,390x844,en-US,DE,DE-BE,Berlin,,2026-11-25 10:00:00+00\n\
             {BOB},{WEBSITE},edge-chromium,Windows 10,laptop,1440x900,nl,,,,,2026-11-25 10:00:00+00\n"
        );
        Sessions::load(text.as_bytes(), "session.csv").unwrap()
    }

    fn ok(row: &Row) -> &ImportHit {
        row.as_ref().expect("counted")
    }

    #[test]
    fn event_data_gives_properties_revenue_and_each_visits_first_value_on_a_day() {
        let id = |n: u128| uuid::Uuid::from_u128(n).to_string();
        let with_id = |n: u128, e: Event| {
            let line = e.csv();
            format!("{}{}", id(n), &line[line.find(',').unwrap()..])
        };
        let signup = |at| Event {
            at,
            kind: 2,
            name: "Signup",
            ..VIEW
        };
        let lines = [
            with_id(1, VIEW),
            with_id(2, signup("2026-11-25 10:01:00+00")),
            with_id(
                3,
                Event {
                    at: "2026-11-25 10:02:00+00",
                    ..VIEW
                },
            ),
            with_id(
                4,
                Event {
                    session: BOB,
                    visit: VISIT_2,
                    at: "2026-11-25 10:03:00+00",
                    ..VIEW
                },
            ),
            with_id(5, signup("2026-11-25 10:04:00+00")),
            with_id(
                6,
                Event {
                    at: "2026-11-26 00:10:00+00",
                    ..VIEW
                },
            ),
        ];
        let text = format!("{HEADER}\n{}", lines.join("\n"));
        let data_row = |event: u128, key: &str, value: &str, kind: u8| {
            let number = if kind == 2 { value } else { "" };
            format!(
                "{},{WEBSITE},{},{key},{value},{number},,{kind},",
                id(99),
                id(event)
            )
        };
        let data = [
            data_row(1, "author", "Jane", 1),
            data_row(2, "plan", "pro", 1),
            data_row(2, "revenue", "9.5000", 2),
            data_row(2, "currency", "EUR", 1),
            data_row(3, "author", "Jane", 1),
            data_row(5, "plan", "pro", 1),
            data_row(6, "author", "Jane", 1),
        ];
        let data = format!(
            "event_data_id,website_id,website_event_id,data_key,string_value,number_value,date_value,data_type,created_at\n{}",
            data.join("\n")
        );
        let data = EventData::load(data.as_bytes(), "event_data.csv").unwrap();
        let sessions = sessions();
        let got: Vec<Row> = rows(
            text.as_bytes(),
            "website_event.csv",
            site(),
            (&sessions, &data),
            Websites::TheSites,
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
        let carried: Vec<&Carried> = got
            .iter()
            .map(|r| ok(r).carried.as_deref().unwrap())
            .collect();
        let pairs = |c: &Carried| -> Vec<(String, String)> {
            c.properties
                .iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect()
        };
        let jane = vec![("author".to_owned(), "Jane".to_owned())];
        // Alice's first view: her visit's first row and first Jane.
        assert_eq!(
            (
                pairs(carried[0]),
                &carried[0].new_values[..],
                carried[0].new_visit
            ),
            (jane.clone(), &[true][..], true)
        );
        // Her Signup: a new value for the event, with its revenue.
        assert_eq!(&carried[1].new_values[..], &[true, true, true]);
        assert!(!carried[1].new_visit);
        let revenue = carried[1].revenue.unwrap();
        assert_eq!(
            (revenue.currency.as_str(), revenue.amount.scaled()),
            ("EUR", 95_000)
        );
        assert_eq!(carried[1].properties.get("revenue"), Some("9.5"));
        // Jane again in the same visit and day: not a new visit of hers.
        assert_eq!(&carried[2].new_values[..], &[false]);
        // Bob: a visit without data, still one of the day's visits.
        assert!(carried[3].properties.is_empty() && carried[3].new_visit);
        assert_eq!(&carried[4].new_values[..], &[false]);
        // The next day starts again, at its own midnight.
        assert_eq!(
            (&carried[5].new_values[..], carried[5].new_visit),
            (&[true][..], true)
        );
        assert_eq!(
            carried[5].day,
            Utc.with_ymd_and_hms(2026, 11, 26, 0, 0, 0).unwrap()
        );
        assert_eq!(
            carried[0].day,
            Utc.with_ymd_and_hms(2026, 11, 25, 0, 0, 0).unwrap()
        );
        // Without event data, rows carry nothing.
        assert!(read(&text, &sessions)
            .unwrap()
            .iter()
            .all(|r| ok(r).carried.is_none()));
    }

    #[test]
    fn event_data_needs_the_events_ids() {
        let header = HEADER.replacen("event_id,", "", 1);
        let line = VIEW.csv();
        let text = format!("{header}\n{}", &line[line.find(',').unwrap() + 1..]);
        let data = "website_event_id,data_key,string_value,number_value,data_type\n\
                    33333333-3333-4333-8333-333333333333,plan,pro,,1\n";
        let data = EventData::load(data.as_bytes(), "event_data.csv").unwrap();
        let sessions = sessions();
        let e = rows(
            text.as_bytes(),
            "w.csv",
            site(),
            (&sessions, &data),
            Websites::TheSites,
        )
        .err()
        .expect("refused");
        assert_eq!((e.line, e.column.as_str()), (1, EVENT_ID), "{e}");
    }

    #[test]
    fn views_events_sources_and_session_labels_are_read_by_column_name() {
        let text = file(&[
            Event {
                at: "2026-11-25 10:00:00.123456+00",
                query: "utm_medium=mail",
                utm_source: "newsletter",
                ..VIEW
            },
            Event {
                at: "2026-11-25 11:05:00+01",
                path: "/pricing",
                referrer: "example.com",
                ..VIEW
            },
            Event {
                at: "2026-11-25T10:06:00Z",
                path: "/pricing",
                kind: 2,
                name: "Signup",
                ..VIEW
            },
            Event {
                session: BOB,
                visit: VISIT_2,
                at: "2026-11-25 10:07:00+00",
                path: "/blog#top",
                referrer: "www.news.example",
                ..VIEW
            },
            Event {
                session: BOB,
                visit: VISIT_2,
                at: "2026-11-25 10:08:00+00",
                kind: 5,
                ..VIEW
            },
        ]);
        let rows = read(&text, &sessions()).unwrap();
        assert_eq!(rows.len(), 5);
        let first = ok(&rows[0]);
        assert_eq!(first.page, "example.com/");
        assert_eq!(
            first.at,
            Utc.with_ymd_and_hms(2026, 11, 25, 10, 0, 0).unwrap()
                + chrono::TimeDelta::microseconds(123_456)
        );
        assert_eq!(first.source.as_deref(), Some("newsletter"));
        assert_eq!(
            first.labels.get(Dimension::Medium),
            None,
            "the utm_medium column, not url_query"
        );
        assert_eq!(first.labels.get(Dimension::Browser), Some("Chrome"));
        assert_eq!(first.labels.get(Dimension::Os), Some("iOS"));
        assert_eq!(first.labels.get(Dimension::Device), Some("mobile"));
        assert_eq!(first.labels.get(Dimension::Country), Some("DE"));
        assert!(first.visit.as_ref().unwrap().starts());
        let second = ok(&rows[1]);
        assert_eq!(
            second.source.as_deref(),
            Some("direct"),
            "the site's own host"
        );
        let delta = second.visit.as_ref().unwrap();
        assert_eq!(delta.entry.as_deref(), Some("example.com/"));
        assert_eq!(delta.previous.as_deref(), Some("example.com/"));
        assert!(delta.second_view);
        assert_eq!(
            delta.duration_secs, 300,
            "the difference of the whole-second clocks since 10:00:00.123456"
        );
        assert_eq!(delta.visitor, first.visit.as_ref().unwrap().visitor);
        let signup = ok(&rows[2]);
        assert_eq!(signup.labels.get(Dimension::Event), Some("Signup"));
        assert_eq!(signup.page, "example.com/pricing");
        assert_eq!(signup.visit.as_ref().unwrap().visitor, delta.visitor);
        let bob = ok(&rows[3]);
        assert_eq!(bob.page, "example.com/blog");
        assert_eq!(bob.source.as_deref(), Some("news.example"));
        assert_eq!(bob.labels.get(Dimension::Browser), Some("Edge"));
        assert_eq!(bob.labels.get(Dimension::Os), Some("Windows"));
        assert_eq!(bob.labels.get(Dimension::Device), Some("desktop"));
        assert_eq!(bob.labels.get(Dimension::Country), Some("unknown"));
        assert!(bob.visit.as_ref().unwrap().starts());
        assert_ne!(bob.visit.as_ref().unwrap().visitor, delta.visitor);
        assert_eq!(rows[4], Err(Skipped::NotAViewOrEvent));
    }

    #[test]
    fn exports_without_utm_columns_read_url_query_and_unknown_sessions_are_unknown() {
        let text = format!(
            "session_id,visit_id,created_at,url_path,url_query,referrer_domain,event_type,event_name\n\
             {ALICE},{VISIT_1},2026-11-25 10:00:00+00,/,utm_source=Mastodon&utm_campaign=launch%20week,t.co,1,\n"
        );
        let rows = read(&text, &Sessions::default()).unwrap();
        let hit = ok(&rows[0]);
        assert_eq!(hit.source.as_deref(), Some("mastodon"));
        assert_eq!(hit.labels.get(Dimension::Campaign), Some("launch week"));
        assert_eq!(hit.labels.get(Dimension::Browser), Some("unknown"));
        assert_eq!(hit.labels.get(Dimension::Country), Some("unknown"));
    }

    #[test]
    fn a_visit_ends_at_utc_midnight_and_after_the_gap() {
        let text = file(&[
            Event {
                at: "2026-11-25 23:50:00+00",
                ..VIEW
            },
            Event {
                at: "2026-11-26 00:10:00+00",
                path: "/b",
                ..VIEW
            },
            Event {
                at: "2026-11-26 00:15:00+00",
                path: "/c",
                ..VIEW
            },
            Event {
                at: "2026-11-26 00:50:00+00",
                path: "/d",
                ..VIEW
            },
        ]);
        let rows = read(&text, &sessions()).unwrap();
        let visits: Vec<&Visit> = rows.iter().map(|r| ok(r).visit.as_ref().unwrap()).collect();
        assert!(visits[0].starts());
        assert!(visits[1].starts(), "a new day, a new visit");
        assert_ne!(visits[0].visitor, visits[1].visitor, "and a new visitor");
        assert!(!visits[2].starts());
        assert!(visits[3].starts(), "35 minutes idle");
        assert_eq!(visits[3].visitor, visits[2].visitor);
    }

    #[test]
    fn the_same_file_gives_the_same_deltas() {
        let text = file(&[
            VIEW,
            Event {
                session: BOB,
                visit: VISIT_2,
                at: "2026-11-25 10:01:00+00",
                ..VIEW
            },
            Event {
                at: "2026-11-25 10:02:00+00",
                path: "/b",
                ..VIEW
            },
        ]);
        assert_eq!(
            read(&text, &sessions()).unwrap(),
            read(&text, &sessions()).unwrap()
        );
    }

    #[test]
    fn each_bad_row_names_its_line_and_column() {
        let cases = [
            (
                Event {
                    at: "yesterday",
                    ..VIEW
                },
                "created_at",
            ),
            (
                Event {
                    at: "2026-11-25 09:00:00+00",
                    ..VIEW
                },
                "created_at",
            ),
            (
                Event {
                    path: "docs",
                    ..VIEW
                },
                "url_path",
            ),
            (
                Event {
                    path: "https://other.test/",
                    ..VIEW
                },
                "url_path",
            ),
            (Event { kind: 7, ..VIEW }, "event_type"),
            (Event { kind: 2, ..VIEW }, "event_name"),
            (
                Event {
                    session: "alice",
                    ..VIEW
                },
                "session_id",
            ),
        ];
        for (bad, column) in cases {
            let e = read(&file(&[VIEW, bad]), &sessions()).unwrap_err();
            assert_eq!((e.line, e.column.as_str()), (3, column), "{e}");
            assert_eq!(e.file, "website_event.csv");
        }
        let other_website = [
            HEADER.to_owned(),
            VIEW.csv(),
            VIEW.csv()
                .replace(WEBSITE, "5f4dcc3b-5aa7-4d61-8b6f-000000000000"),
        ]
        .join("\n");
        let e = read(&other_website, &sessions()).unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (3, "website_id"), "{e}");
        let e = read(&HEADER.replace(",visit_id", ""), &sessions()).unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (1, "visit_id"), "{e}");
        assert!(e.message.contains("missing"), "{e}");
    }

    #[test]
    fn a_session_file_maps_umamis_names_and_refuses_bad_countries() {
        assert_eq!(sessions().len(), 2);
        let header = "session_id,browser,os,device,country";
        let bad = format!("{header}\n{ALICE},chrome,Linux,desktop,Germany\n");
        let e = Sessions::load(bad.as_bytes(), "session.csv").unwrap_err();
        assert_eq!((e.line, e.column.as_str()), (2, "country"), "{e}");
        let twice = format!("{header}\n{ALICE},,,,\n{ALICE},,,,\n");
        let e = Sessions::load(twice.as_bytes(), "session.csv").unwrap_err();
        assert!(e.message.contains("two rows"), "{e}");
        let three = format!("{header}\n{ALICE},,,,\n{BOB},,,,\n{VISIT_1},,,,\n");
        let e = Sessions::load_at_most(three.as_bytes(), "session.csv", 2).unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("more than 2 sessions"), "{e}");
        let missing = "session_id,browser,os,device\n";
        let e = Sessions::load(missing.as_bytes(), "session.csv").unwrap_err();
        assert_eq!(e.column, "country");
        for (umami, ours) in [
            ("Mac OS", "macOS"),
            ("Android OS", "Android"),
            ("Windows 7", "Windows"),
            ("BeOS", "unknown"),
        ] {
            assert_eq!(OPERATING_SYSTEMS[usize::from(os(umami))], ours);
        }
        for (umami, ours) in [
            ("fxios", "Firefox"),
            ("ios", "Safari"),
            ("samsung", "Samsung Internet"),
            ("kakaotalk", "unknown"),
        ] {
            assert_eq!(BROWSERS[usize::from(browser(umami))], ours);
        }
        assert_eq!(
            DeviceClass::ALL[usize::from(device("smarttv"))],
            DeviceClass::Unknown
        );
    }
}

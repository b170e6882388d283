//! GoatCounter's CSV export, format version 2 (the header's first cell is
//! `2Path`; one row per page view): Path, Title, Event, UserAgent,
//! Browser, System, Session, Bot, Referrer, Referrer scheme, Screen size,
//! Location, FirstVisit, Date (RFC 3339). Columns are found by name.
//!
//! A row is a view of its path at its own second, or, with `Event` true,
//! an event named by its path (GoatCounter keeps no page for an event:
//! it counts on the site's home page). `Bot` other than 0 is skipped. The
//! User-Agent is classified as the pixel does and dropped; `Location`'s
//! country (`NL`, or `US-CA` for a region) is kept. Current exports leave
//! `UserAgent` blank (GoatCounter's docs: "always blank") and carry its own
//! reading of it in `Browser` (`Chrome 86`) and `System` (`Windows 7`):
//! without a User-Agent, those name the browser and system (the device
//! class then comes from the screen size alone). Title, Session and
//! FirstVisit are not read: imported rows carry no visits.

use chrono::{DateTime, Utc};
use std::io::Read;

use super::reading::{
    day_in_window, site_path, starts_with_plain_date, CsvFile, Format, RowError, Rows,
};
use super::{ImportHit, Row, Skipped};
use crate::classify::user_agent::{BROWSERS, OPERATING_SYSTEMS};
use crate::classify::{parse_screen_width, Country, UserAgentClassifier, UNKNOWN};
use crate::domain::{Dimension, EventName, Labels, Page, PagePath, Source};
use crate::storage::sites::Site;

pub const KIND: &str = "goatcounter";

/// The columns read; the others are allowed and ignored.
const PATH: &str = "2Path";
const REQUIRED: [&str; 8] = [
    PATH,
    "Event",
    "UserAgent",
    "Bot",
    "Referrer",
    "Referrer scheme",
    "Screen size",
    "Date",
];
const LOCATION: &str = "Location";
/// GoatCounter's own reading of the User-Agent (`Chrome 86`, `Windows
/// 7`): what its current exports carry, with `UserAgent` left blank.
const BROWSER: &str = "Browser";
const SYSTEM: &str = "System";

/// GoatCounter's reading of a row.
pub struct GoatCounter<'a> {
    site: Site,
    user_agents: &'a UserAgentClassifier,
}

/// An export's rows in order, each checked.
pub fn rows<'a, R: Read>(
    read: R,
    file: &str,
    site: Site,
    user_agents: &'a UserAgentClassifier,
) -> Result<Rows<GoatCounter<'a>, R>, RowError> {
    let csv = CsvFile::open(
        read,
        file,
        &REQUIRED,
        &[LOCATION, BROWSER, SYSTEM],
        |header| match header.get(0) {
            Some(PATH) => Ok(()),
            other => Err(RowError::new(
                file,
                1,
                other.unwrap_or_default(),
                "not a GoatCounter export of format version 2 (its first column is `2Path`)",
            )),
        },
    )?;
    Ok(Rows::new(csv, GoatCounter { site, user_agents }))
}

impl Format for GoatCounter<'_> {
    type Counted = ImportHit;

    fn row<R: Read>(
        &mut self,
        csv: &CsvFile<R>,
        line: u64,
        record: &csv::StringRecord,
    ) -> Result<Row, RowError> {
        let error =
            |column: &str, message: String| RowError::new(csv.file(), line, column, message);
        let cell = |name: &str| csv.cell(record, name);
        let raw_at = cell("Date");
        if !starts_with_plain_date(raw_at) {
            return Err(error(
                "Date",
                format!("not an RFC 3339 time (2026-11-25T10:00:00Z): {raw_at:?}"),
            ));
        }
        let at: DateTime<Utc> = DateTime::parse_from_rfc3339(raw_at)
            .map_err(|e| error("Date", format!("not an RFC 3339 time: {e}")))?
            .with_timezone(&Utc);
        day_in_window(at.date_naive()).map_err(|e| error("Date", e))?;
        let bot: u32 = cell("Bot")
            .parse()
            .map_err(|_| error("Bot", format!("not a whole number: {:?}", cell("Bot"))))?;
        let location = cell(LOCATION);
        let country = match location.split('-').next().unwrap_or_default() {
            "" => Country::UNKNOWN,
            code if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) => {
                Country::from_code(code)
            }
            _ => return Err(error(LOCATION, format!("not a country code: {location:?}"))),
        };
        let is_event = match cell("Event") {
            "true" | "1" => true,
            "false" | "0" | "" => false,
            other => return Err(error("Event", format!("not true or false: {other:?}"))),
        };
        let path = cell(PATH);
        let mut labels = Labels::default();
        let (page, source) = if is_event {
            let name = EventName::parse(path)
                .map_err(|e| error(PATH, format!("not an event name: {e}")))?;
            labels.set(Dimension::Event, name.into_string());
            (Page::new(&self.site.domain, &PagePath::root()), None)
        } else {
            let path = site_path(&self.site, path).map_err(|e| error(PATH, e))?;
            let width = cell("Screen size")
                .split(',')
                .next()
                .and_then(parse_screen_width);
            let user_agent = cell("UserAgent");
            let device = self.user_agents.classify(user_agent, width);
            let (browser, os) = match user_agent {
                "" => (
                    named(BROWSERS, cell(BROWSER)),
                    named(OPERATING_SYSTEMS, cell(SYSTEM)),
                ),
                _ => (device.browser, device.os),
            };
            labels.set(Dimension::Browser, browser);
            labels.set(Dimension::Os, os);
            labels.set(Dimension::Device, device.class.as_str());
            labels.set(Dimension::Country, country.as_str());
            (
                Page::new(&self.site.domain, &path),
                Some(self.source(cell("Referrer"), cell("Referrer scheme"))),
            )
        };
        if bot != 0 {
            return Ok(Err(Skipped::Bot));
        }
        Ok(Ok(ImportHit {
            page: page.into_string(),
            at,
            source: source.map(Source::into_string),
            labels,
            visit: None,
            carried: None,
        }))
    }
}

/// GoatCounter's browser or system (`Chrome 86`, `Windows 7`, `macOS
/// 10.15`) as one of `ours`: its version left out, a few names mapped;
/// "unknown" when none fits.
fn named(ours: &'static [&'static str], goatcounter: &str) -> &'static str {
    let name = match goatcounter.rsplit_once(' ') {
        Some((name, version)) if version.starts_with(|c: char| c.is_ascii_digit()) => name,
        _ => goatcounter,
    };
    let name = match name {
        "Mac OS X" | "OS X" | "Mac" | "Mac OS" => "macOS",
        "Chrome OS" | "Chromium OS" => "ChromeOS",
        "MSIE" | "IE" => "Internet Explorer",
        "Samsung Browser" | "SamsungBrowser" => "Samsung Internet",
        "Windows Phone" => UNKNOWN,
        other => other,
    };
    ours.iter()
        .copied()
        .find(|o| o.eq_ignore_ascii_case(name))
        .unwrap_or(UNKNOWN)
}

impl GoatCounter<'_> {
    /// GoatCounter keeps a referrer without its scheme (`h`: a host and
    /// path), a campaign (`c`) or a name it made (`g`, `o`).
    fn source(&self, referrer: &str, scheme: &str) -> Source {
        let found = match scheme {
            _ if referrer.is_empty() => None,
            "h" => {
                Source::from_referrer(&format!("https://{referrer}"), |h| self.site.owns_host(h))
            }
            _ => Source::from_utm(referrer),
        };
        found.unwrap_or_else(Source::direct)
    }
}

/// A GoatCounter export to import: one file, read with the User-Agent
/// rules for rows whose browser and system GoatCounter left blank.
pub struct Export {
    file: std::path::PathBuf,
    user_agents: UserAgentClassifier,
}

impl Export {
    /// The User-Agent rules are loaded here, before any database: the
    /// first pass needs none, and a bad file should not wait for one.
    pub fn new(file: &std::path::Path) -> Self {
        Self {
            file: file.to_owned(),
            user_agents: UserAgentClassifier::new(),
        }
    }
}

impl super::workflow::Importer for Export {
    const KIND: &'static str = KIND;
    const DAYS: super::workflow::Days = super::workflow::Days::Utc;
    type Counted = ImportHit;

    fn reopen(
        _record: &crate::storage::imports::ImportRecord,
        file: &std::path::Path,
        _moved: super::workflow::Moved<'_>,
    ) -> anyhow::Result<Self> {
        Ok(Self::new(file))
    }

    fn check(&self, site: &Site) -> anyhow::Result<super::workflow::Checked> {
        let name = self.file.display().to_string();
        super::workflow::check_file(
            &self.file,
            |read| rows(read, &name, site.clone(), &self.user_agents),
            None,
            None,
        )
    }

    fn content(&self) -> anyhow::Result<blake3::Hash> {
        super::workflow::file_hash(&self.file, None, None)
    }

    fn rows(&self, site: &Site) -> anyhow::Result<super::workflow::CheckedRows<'_, ImportHit>> {
        let name = self.file.display().to_string();
        let read = super::workflow::open(&self.file)?;
        Ok(Box::new(rows(
            read,
            &name,
            site.clone(),
            &self.user_agents,
        )?))
    }
}

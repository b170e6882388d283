//! A site's IANA time zone: every date, range and axis of its reports is
//! in it.
//!
//! Rules: the name is trimmed and must be one of the IANA tz database's
//! names as `chrono-tz` knows them (`Europe/Berlin`, `Asia/Kolkata`, `UTC`,
//! ...), spelled with the database's case; the default is `UTC`.

use chrono_tz::Tz;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeZone(Tz);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeZoneError {
    #[error("a time zone is required, e.g. Europe/Berlin or UTC")]
    Empty,
    #[error("{0:?} is not an IANA time zone name (e.g. Europe/Berlin, Asia/Kolkata, UTC)")]
    Unknown(String),
}

impl TimeZone {
    pub const UTC: TimeZone = TimeZone(Tz::UTC);

    pub fn parse(raw: &str) -> Result<Self, TimeZoneError> {
        let name = raw.trim();
        if name.is_empty() {
            return Err(TimeZoneError::Empty);
        }
        name.parse::<Tz>()
            .map(Self)
            .map_err(|_| TimeZoneError::Unknown(name.chars().take(64).collect()))
    }

    pub fn tz(self) -> Tz {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// Every name, for the settings form's list.
    pub fn all() -> impl Iterator<Item = &'static str> {
        chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())
    }
}

impl Default for TimeZone {
    fn default() -> Self {
        Self::UTC
    }
}

impl fmt::Display for TimeZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iana_names_parse_and_say_their_name() {
        assert_eq!(
            TimeZone::parse(" Europe/Berlin ").unwrap().name(),
            "Europe/Berlin"
        );
        assert_eq!(
            TimeZone::parse("Asia/Kolkata").unwrap().name(),
            "Asia/Kolkata"
        );
        assert_eq!(TimeZone::parse("UTC").unwrap(), TimeZone::UTC);
        assert_eq!(TimeZone::default(), TimeZone::UTC);
    }

    #[test]
    fn anything_else_is_refused() {
        assert_eq!(TimeZone::parse(""), Err(TimeZoneError::Empty));
        assert_eq!(TimeZone::parse("   "), Err(TimeZoneError::Empty));
        assert!(matches!(
            TimeZone::parse("Mars/Olympus"),
            Err(TimeZoneError::Unknown(_))
        ));
        assert!(TimeZone::parse("+05:30").is_err());
        assert!(TimeZone::parse("{\"$gt\":\"\"}").is_err());
        assert!(TimeZone::all().any(|n| n == "Asia/Kathmandu"));
    }
}

//! Breakdown dimensions: the bounded sets of names a view (or an event) is
//! counted under beside its page.
//!
//! Every dimension is stored the same way, in the same breakdown bucket
//! (`storage::breakdowns`): a map of names to counts under its [`field`],
//! and the count of names beyond the bucket's cap under its
//! [`other_field`]. Adding a dimension is a variant here, a line in each
//! `match` below and its classification at the pixel; the write path, the
//! journal and the reports take every dimension from [`Dimension::ALL`].
//!
//! [`field`]: Dimension::field
//! [`other_field`]: Dimension::other_field

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    /// The referring host or `utm_source`: views with a known
    /// source only.
    Source,
    /// `utm_medium` of the page address.
    Medium,
    /// `utm_campaign` of the page address.
    Campaign,
    /// Browser family from the User-Agent: every view.
    Browser,
    /// Operating system family: every view.
    Os,
    /// Device class (desktop, mobile, tablet): every view.
    Device,
    /// ISO 3166 country of the client address: every view.
    Country,
    /// A custom event's name: counts events, never views.
    Event,
}

impl Dimension {
    pub const ALL: [Dimension; 8] = [
        Dimension::Source,
        Dimension::Medium,
        Dimension::Campaign,
        Dimension::Browser,
        Dimension::Os,
        Dimension::Device,
        Dimension::Country,
        Dimension::Event,
    ];

    /// The name in addresses, the API's `dimension` parameter and CSV
    /// file names.
    pub fn key(self) -> &'static str {
        match self {
            Dimension::Source => "source",
            Dimension::Medium => "medium",
            Dimension::Campaign => "campaign",
            Dimension::Browser => "browser",
            Dimension::Os => "os",
            Dimension::Device => "device",
            Dimension::Country => "country",
            Dimension::Event => "event",
        }
    }

    pub fn parse(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.key() == key)
    }

    /// Every key, for the message that refuses another.
    pub fn keys() -> String {
        Self::ALL.map(Self::key).join(", ")
    }

    /// The heading of its column and panel.
    pub fn title(self) -> &'static str {
        match self {
            Dimension::Source => "Source",
            Dimension::Medium => "Medium",
            Dimension::Campaign => "Campaign",
            Dimension::Browser => "Browser",
            Dimension::Os => "Operating system",
            Dimension::Device => "Device",
            Dimension::Country => "Country",
            Dimension::Event => "Event",
        }
    }

    /// The bucket field holding its names' counts. Sources keep the field
    /// they had before the other dimensions, so their history reads on.
    pub fn field(self) -> &'static str {
        match self {
            Dimension::Source => "sources",
            Dimension::Medium => "medium",
            Dimension::Campaign => "campaign",
            Dimension::Browser => "browser",
            Dimension::Os => "os",
            Dimension::Device => "device",
            Dimension::Country => "country",
            Dimension::Event => "event",
        }
    }

    /// The bucket field counting names beyond the cap.
    pub fn other_field(self) -> &'static str {
        match self {
            Dimension::Source => "other",
            Dimension::Medium => "other_medium",
            Dimension::Campaign => "other_campaign",
            Dimension::Browser => "other_browser",
            Dimension::Os => "other_os",
            Dimension::Device => "other_device",
            Dimension::Country => "other_country",
            Dimension::Event => "other_event",
        }
    }

    /// Its tag in a journal record (format 4): never reused.
    pub fn code(self) -> u8 {
        match self {
            Dimension::Source => 0,
            Dimension::Medium => 1,
            Dimension::Campaign => 2,
            Dimension::Browser => 3,
            Dimension::Os => 4,
            Dimension::Device => 5,
            Dimension::Country => 6,
            Dimension::Event => 7,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.code() == code)
    }

    /// Whether every view has a name in it (classified, "unknown" at
    /// worst), so its counts add up to the views; the others count only
    /// views that carried a value.
    pub fn covers_every_view(self) -> bool {
        matches!(
            self,
            Dimension::Browser | Dimension::Os | Dimension::Device | Dimension::Country
        )
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// The name a view is counted under when nothing better is known: never
/// a new name made up by a client.
pub const UNKNOWN: &str = "unknown";

/// Longest name of any dimension, in bytes (a journal label's length is
/// one byte).
pub const MAX_NAME_BYTES: usize = 255;

/// A hit's names beside its page and source: at most one per dimension,
/// each already through its dimension's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<(Dimension, String)>);

impl Labels {
    /// Sets `dimension`'s name (replacing one set before). Names longer
    /// than [`MAX_NAME_BYTES`] are a bug upstream: every dimension's rules
    /// bound them well below.
    pub fn set(&mut self, dimension: Dimension, name: impl Into<String>) {
        let name = name.into();
        assert!(
            !name.is_empty() && name.len() <= MAX_NAME_BYTES,
            "label out of bounds"
        );
        match self.0.iter_mut().find(|(d, _)| *d == dimension) {
            Some(slot) => slot.1 = name,
            None => self.0.push((dimension, name)),
        }
    }

    pub fn with(mut self, dimension: Dimension, name: impl Into<String>) -> Self {
        self.set(dimension, name);
        self
    }

    pub fn get(&self, dimension: Dimension) -> Option<&str> {
        self.0
            .iter()
            .find(|(d, _)| *d == dimension)
            .map(|(_, n)| n.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (Dimension, &str)> {
        self.0.iter().map(|(d, n)| (*d, n.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The rules of an event name (`tickertape.track("Signup")`,
/// `data-tt-event`): trimmed, 1 to [`MAX_EVENT_CHARS`] characters of
/// letters, digits, spaces and `-_.:/`; case is kept ("Signup" and
/// "signup" are two events, as the site's code names them).
pub const MAX_EVENT_CHARS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventNameError {
    #[error("the event name is empty")]
    Empty,
    #[error("the event name is longer than {MAX_EVENT_CHARS} characters")]
    TooLong,
    #[error("the event name has characters other than letters, digits, spaces and -_.:/")]
    BadCharacter,
}

/// A custom event's name, through [`EventName::parse`] only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventName(String);

impl EventName {
    pub fn parse(raw: &str) -> Result<Self, EventNameError> {
        let name = raw.trim();
        if name.is_empty() {
            return Err(EventNameError::Empty);
        }
        if name.chars().count() > MAX_EVENT_CHARS {
            return Err(EventNameError::TooLong);
        }
        let allowed = |c: char| c.is_alphanumeric() || " -_.:/".contains(c);
        if !name.chars().all(allowed) {
            return Err(EventNameError::BadCharacter);
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// The value as a field name inside a bucket's map: `.` would nest and a
/// leading `$` is an operator, so `%`, `.` and `$` are percent-encoded
/// (and decoded by [`from_field_name`]).
pub fn field_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '.' => out.push_str("%2E"),
            '$' => out.push_str("%24"),
            c => out.push(c),
        }
    }
    out
}

pub fn from_field_name(field: &str) -> String {
    percent_encoding::percent_decode_str(field)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fields_and_codes_are_distinct_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for d in Dimension::ALL {
            assert_eq!(Dimension::parse(d.key()), Some(d));
            assert_eq!(Dimension::from_code(d.code()), Some(d));
            for name in [d.key(), d.field(), d.other_field()] {
                assert!(!name.contains('.') && !name.starts_with('$'));
            }
            assert!(seen.insert(d.field()) && seen.insert(d.other_field()));
        }
        assert_eq!(Dimension::parse("sources"), None);
        // The sources' fields are the ones stored before breakdowns existed.
        assert_eq!(
            (Dimension::Source.field(), Dimension::Source.other_field()),
            ("sources", "other")
        );
    }

    #[test]
    fn labels_hold_one_name_per_dimension() {
        let labels = Labels::default()
            .with(Dimension::Browser, "Firefox")
            .with(Dimension::Country, "DE")
            .with(Dimension::Browser, "Chrome");
        assert_eq!(labels.get(Dimension::Browser), Some("Chrome"));
        assert_eq!(labels.get(Dimension::Os), None);
        assert_eq!(labels.iter().count(), 2);
    }

    #[test]
    #[should_panic(expected = "label out of bounds")]
    fn an_empty_label_is_a_bug() {
        Labels::default().set(Dimension::Event, "");
    }

    #[test]
    fn event_names_are_trimmed_bounded_and_plain() {
        assert_eq!(EventName::parse(" Signup ").unwrap().as_str(), "Signup");
        assert_eq!(
            EventName::parse("Download: report.pdf").unwrap().as_str(),
            "Download: report.pdf"
        );
        assert_eq!(EventName::parse("  "), Err(EventNameError::Empty));
        assert_eq!(
            EventName::parse(&"a".repeat(MAX_EVENT_CHARS + 1)),
            Err(EventNameError::TooLong)
        );
        assert!(EventName::parse(&"é".repeat(MAX_EVENT_CHARS)).is_ok());
        for bad in ["a\u{0}b", "{\"$gt\":1}", "<script>", "a\nb", "a$b"] {
            assert_eq!(
                EventName::parse(bad),
                Err(EventNameError::BadCharacter),
                "{bad}"
            );
        }
    }

    #[test]
    fn field_names_round_trip_and_never_nest() {
        for raw in ["google.com", "100%", "$where", "a.b$c%2E", "Sign up"] {
            let field = field_name(raw);
            assert!(!field.contains('.') && !field.starts_with('$'), "{field}");
            assert_eq!(from_field_name(&field), raw);
        }
    }
}

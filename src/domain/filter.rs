//! Report filters: `filter=<dimension>:<value>`, repeatable, all must hold.
//!
//! A filter names a visit-level property (where the visit came from, what
//! it ran on, where it entered or left) or something the visit contains (a
//! page it viewed, an event it sent). Parsed once here, so the read side
//! never re-checks a value. What each dimension selects is stated on
//! [`FilterDimension`] and in docs/segments.md.

use std::fmt;

use super::dimension::MAX_NAME_BYTES;
use super::{Dimension, PageRef};

/// Most filters on one report: each is a condition on every visit read,
/// so the bound is on the work of a request (and on the address's length).
pub const MAX_FILTERS: usize = 6;

/// Longest page value (a pattern included), in characters: a stored path
/// has at most 512 bytes, so no longer value can name one.
pub const MAX_PAGE_VALUE_CHARS: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FilterDimension {
    /// Visits that viewed the page; of those visits, only the views of
    /// that page count as views (as in Plausible).
    Page,
    /// Visits that entered on the page; all their views.
    Entry,
    /// Visits that left from the page; all their views.
    Exit,
    /// Visits with this property (each visit has one of each, set by its
    /// first hit); all their views.
    Source,
    Medium,
    Campaign,
    Browser,
    Os,
    Device,
    Country,
    /// Visits that sent the event at least once; all their views.
    Event,
    /// `prop:<key>:<value>`: visits with a view or an event carrying the
    /// custom property; all their views (as an event filter).
    Property,
}

impl FilterDimension {
    pub const ALL: [FilterDimension; 12] = [
        FilterDimension::Page,
        FilterDimension::Entry,
        FilterDimension::Exit,
        FilterDimension::Source,
        FilterDimension::Medium,
        FilterDimension::Campaign,
        FilterDimension::Browser,
        FilterDimension::Os,
        FilterDimension::Device,
        FilterDimension::Country,
        FilterDimension::Event,
        FilterDimension::Property,
    ];

    pub fn key(self) -> &'static str {
        match self {
            FilterDimension::Page => "page",
            FilterDimension::Entry => "entry",
            FilterDimension::Exit => "exit",
            FilterDimension::Source => "source",
            FilterDimension::Medium => "medium",
            FilterDimension::Campaign => "campaign",
            FilterDimension::Browser => "browser",
            FilterDimension::Os => "os",
            FilterDimension::Device => "device",
            FilterDimension::Country => "country",
            FilterDimension::Event => "event",
            FilterDimension::Property => "prop",
        }
    }

    pub fn parse(key: &str) -> Option<Self> {
        // `goal` is the word of the goals panel: a goal is an event (a page
        // goal is a page filter).
        if key == "goal" {
            return Some(FilterDimension::Event);
        }
        Self::ALL.into_iter().find(|d| d.key() == key)
    }

    pub fn keys() -> String {
        Self::ALL.map(Self::key).join(", ")
    }

    /// The words of its chip.
    pub fn title(self) -> &'static str {
        match self {
            FilterDimension::Page => "Page",
            FilterDimension::Entry => "Entry page",
            FilterDimension::Exit => "Exit page",
            FilterDimension::Event => "Event",
            FilterDimension::Property => "Property",
            other => other.breakdown().map_or("", Dimension::title),
        }
    }

    /// Whether its values are names of a fixed vocabulary that the
    /// tracker itself gives (a country's code, a browser, a system, a
    /// device class), matched ignoring letter case (`browser:chrome` is
    /// `Chrome`); the others are as typed or as sent by a page (paths,
    /// sources, utm values, event names) and match exactly
    /// (docs/segments.md, "Letter case").
    pub fn ignores_case(self) -> bool {
        matches!(
            self,
            FilterDimension::Browser
                | FilterDimension::Os
                | FilterDimension::Device
                | FilterDimension::Country
        )
    }

    /// The breakdown dimension of the same name, for the visit-level ones.
    pub fn breakdown(self) -> Option<Dimension> {
        Some(match self {
            FilterDimension::Source => Dimension::Source,
            FilterDimension::Medium => Dimension::Medium,
            FilterDimension::Campaign => Dimension::Campaign,
            FilterDimension::Browser => Dimension::Browser,
            FilterDimension::Os => Dimension::Os,
            FilterDimension::Device => Dimension::Device,
            FilterDimension::Country => Dimension::Country,
            FilterDimension::Event => Dimension::Event,
            FilterDimension::Page
            | FilterDimension::Entry
            | FilterDimension::Exit
            | FilterDimension::Property => return None,
        })
    }

    /// The filter a breakdown's row adds.
    pub fn of_breakdown(d: Dimension) -> Self {
        match d {
            Dimension::Source => FilterDimension::Source,
            Dimension::Medium => FilterDimension::Medium,
            Dimension::Campaign => FilterDimension::Campaign,
            Dimension::Browser => FilterDimension::Browser,
            Dimension::Os => FilterDimension::Os,
            Dimension::Device => FilterDimension::Device,
            Dimension::Country => FilterDimension::Country,
            Dimension::Event => FilterDimension::Event,
        }
    }

    /// Whether its value is a page path (or a path pattern).
    pub fn is_page(self) -> bool {
        matches!(
            self,
            FilterDimension::Page | FilterDimension::Entry | FilterDimension::Exit
        )
    }
}

/// Longest event value, in characters (an event name's bound).
pub const MAX_EVENT_VALUE_CHARS: usize = super::dimension::MAX_EVENT_CHARS;

/// Longest value of the other dimensions, in characters: a stored name
/// has at most 255 bytes, so no longer value can name one.
pub const MAX_NAME_VALUE_CHARS: usize = MAX_NAME_BYTES;

// The rules are those a regular expression can state (docs/openapi.json
// gives it, and the API fuzzer holds the server to it both ways): values
// are taken as sent, never trimmed, and a value that is well formed but
// names nothing stored (a path the pixel would refuse, an event name it
// would not count) is a filter matching nothing, not an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("a filter is <dimension>:<value>, such as country:DE or page:/pricing")]
    NoColon,
    #[error("there is no filter dimension `{0}`: use one of {keys}", keys = FilterDimension::keys())]
    UnknownDimension(String),
    #[error("the {0} filter needs a value after the colon")]
    EmptyValue(&'static str),
    #[error("a page filter's value is a path starting with /, such as /pricing (* matches any characters)")]
    NotAPath,
    #[error("a page filter's value is at most {MAX_PAGE_VALUE_CHARS} characters")]
    PageTooLong,
    #[error("a filter's value is at most {MAX_NAME_VALUE_CHARS} characters")]
    ValueTooLong,
    #[error("an event filter's value is at most {MAX_EVENT_VALUE_CHARS} characters")]
    EventTooLong,
    #[error("a country filter's value is a two-letter ISO 3166 code, such as DE")]
    NotACountry,
    #[error("a property filter is prop:<key>:<value>, such as prop:author:Jane, with a key of at most {} characters and a value of at most {} characters", crate::domain::properties::MAX_KEY_BYTES, crate::domain::properties::MAX_VALUE_BYTES)]
    NotAProperty,
    #[error("at most {MAX_FILTERS} filters at once")]
    TooMany,
}

/// How a page filter's value matches a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PageMatch {
    /// One page, normalised as the pixel normalises the pages it counts.
    Exact(String),
    /// A pattern: `*` matches any run of characters (none included), the
    /// rest literally, and the whole path must match.
    Pattern(String),
}

impl PageMatch {
    /// A path or a pattern as typed: it starts with `/`; with a `*` it is
    /// a pattern kept as typed, without one the page it names.
    pub fn parse(raw: &str) -> Result<Self, FilterError> {
        if !raw.starts_with('/') {
            return Err(FilterError::NotAPath);
        }
        if raw.chars().count() > MAX_PAGE_VALUE_CHARS {
            return Err(FilterError::PageTooLong);
        }
        if raw.contains('*') {
            return Ok(PageMatch::Pattern(raw.to_owned()));
        }
        // Normalised as the pixel normalises the pages it counts; a path
        // it would refuse is kept as sent, and matches no stored page.
        Ok(match PageRef::parse(raw) {
            Ok(PageRef::Path(p)) => PageMatch::Exact(p.as_str().to_owned()),
            _ => PageMatch::Exact(raw.to_owned()),
        })
    }

    pub fn matches(&self, path: &str) -> bool {
        match self {
            PageMatch::Exact(p) => p == path,
            PageMatch::Pattern(pattern) => wildcard(pattern, path),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            PageMatch::Exact(p) | PageMatch::Pattern(p) => p,
        }
    }
}

/// Whether `text` matches `pattern` whole, `*` matching any run of
/// characters (none included). Linear in the lengths of both, whatever
/// the stars: the pattern is literal pieces between stars; the first must
/// begin the text, the last must end it, and each piece between is taken
/// at its leftmost place after the one before. Leftmost is never wrong
/// for `*`-only patterns (a later place leaves less text for the pieces
/// after it, never more), so nothing is tried twice; each search is
/// `str::find`, linear in the text it is given. A back-tracking matcher
/// costs up to pattern × path per call (`/*a*a*a…b` against a 511-byte
/// path of `a`s), for every view a filtered read looks at.
fn wildcard(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(rest) = text.strip_prefix(first) else {
        return false;
    };
    let Some(last) = pieces.next_back() else {
        // No star: the pattern is the whole text.
        return rest.is_empty();
    };
    // What the middle pieces may use: the text past the first piece and
    // before the last, which must fit after the first.
    let Some(end) = rest.len().checked_sub(last.len()) else {
        return false;
    };
    if !rest.is_char_boundary(end) || !rest[end..].eq(last) {
        return false;
    }
    let mut middle = &rest[..end];
    for piece in pieces {
        match middle.find(piece) {
            Some(at) => {
                scanned(at + piece.len());
                middle = &middle[at + piece.len()..];
            }
            None => {
                scanned(middle.len());
                return false;
            }
        }
    }
    true
}

// The bytes of text each search walks past, counted in the tests to hold
// the matcher to its linear bound without timing it.
#[cfg(test)]
thread_local! {
    static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
fn scanned(bytes: usize) {
    SCANNED.with(|s| s.set(s.get() + bytes));
}

#[cfg(not(test))]
fn scanned(_: usize) {}

/// What a filter requires of a visit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Condition {
    /// A page dimension (page, entry, exit) against a path or pattern.
    Page(PageMatch),
    /// A named property or event, compared as stored: exactly, or
    /// ignoring letter case for a fixed vocabulary
    /// ([`FilterDimension::ignores_case`]).
    Name(String),
    /// A custom property: `key:value` as typed, split at `colon` (the
    /// first: a key holding a colon cannot be filtered on).
    Property { raw: String, colon: usize },
}

impl Condition {
    /// A property filter's key and value.
    pub fn property(&self) -> Option<(&str, &str)> {
        match self {
            Condition::Property { raw, colon } => Some((&raw[..*colon], &raw[colon + 1..])),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Filter {
    dimension: FilterDimension,
    condition: Condition,
}

impl Filter {
    /// `<dimension>:<value>`, split at the first colon (values may hold
    /// colons, such as an event named `a:b`).
    pub fn parse(raw: &str) -> Result<Self, FilterError> {
        let (key, value) = raw.split_once(':').ok_or(FilterError::NoColon)?;
        let dimension = FilterDimension::parse(key)
            .ok_or_else(|| FilterError::UnknownDimension(bounded(key)))?;
        Self::new(dimension, value)
    }

    /// The filter of `dimension` for `value` (as a breakdown row shows it).
    pub fn new(dimension: FilterDimension, value: &str) -> Result<Self, FilterError> {
        if value.is_empty() {
            return Err(FilterError::EmptyValue(dimension.key()));
        }
        let chars = value.chars().count();
        let condition = match dimension {
            d if d.is_page() => Condition::Page(PageMatch::parse(value)?),
            FilterDimension::Property => {
                let colon = value.find(':').ok_or(FilterError::NotAProperty)?;
                let (key, rest) = (&value[..colon], &value[colon + 1..]);
                // Bounded in characters, as the API document's pattern
                // states: a longer key or value than a stored one (whose
                // bounds are in bytes) names nothing, and is refused.
                if key.is_empty()
                    || rest.is_empty()
                    || key.chars().count() > crate::domain::properties::MAX_KEY_BYTES
                    || rest.chars().count() > crate::domain::properties::MAX_VALUE_BYTES
                {
                    return Err(FilterError::NotAProperty);
                }
                Condition::Property {
                    raw: value.to_owned(),
                    colon,
                }
            }
            FilterDimension::Country => {
                if value.len() != 2 || !value.bytes().all(|b| b.is_ascii_alphabetic()) {
                    return Err(FilterError::NotACountry);
                }
                Condition::Name(value.to_ascii_uppercase())
            }
            FilterDimension::Event if chars > MAX_EVENT_VALUE_CHARS => {
                return Err(FilterError::EventTooLong)
            }
            _ if chars > MAX_NAME_VALUE_CHARS => return Err(FilterError::ValueTooLong),
            _ => Condition::Name(value.to_owned()),
        };
        Ok(Filter {
            dimension,
            condition,
        })
    }

    pub fn dimension(&self) -> FilterDimension {
        self.dimension
    }

    pub fn condition(&self) -> &Condition {
        &self.condition
    }

    pub fn value(&self) -> &str {
        match &self.condition {
            Condition::Page(m) => m.as_str(),
            Condition::Name(n) => n,
            Condition::Property { raw, .. } => raw,
        }
    }

    /// Whether a name (of a visit-level dimension, or an event) is the
    /// one this filter names: ignoring letter case for a fixed
    /// vocabulary, exactly otherwise.
    pub fn names(&self, name: &str) -> bool {
        match &self.condition {
            Condition::Name(n) if self.dimension.ignores_case() => n.eq_ignore_ascii_case(name),
            Condition::Name(n) => n == name,
            Condition::Page(m) => m.matches(name),
            Condition::Property { raw, colon } => &raw[colon + 1..] == name,
        }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.dimension.key(), self.value())
    }
}

/// An unknown key as the message repeats it: never more than 40 characters.
fn bounded(key: &str) -> String {
    key.chars().take(40).collect()
}

/// The filters of one report, all of which must hold: sorted and without
/// repeats, so two addresses with the same filters read the same thing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Filters(Vec<Filter>);

impl Filters {
    /// The `filter` values of an address; empty ones are ignored (a form
    /// with an empty field sends one).
    /// Counted as sent, repeats included (the document's `maxItems`).
    pub fn parse<'a>(raw: impl IntoIterator<Item = &'a str>) -> Result<Self, FilterError> {
        let mut filters = Vec::new();
        for (sent, value) in raw.into_iter().enumerate() {
            // Checked before parsing so an address of thousands of filters
            // costs nothing to refuse.
            if sent == MAX_FILTERS {
                return Err(FilterError::TooMany);
            }
            // An empty parameter is an absent one (the API document's
            // rule for every parameter), not a malformed filter.
            if value.is_empty() {
                continue;
            }
            filters.push(Filter::parse(value)?);
        }
        Self::of(filters)
    }

    pub fn of(mut filters: Vec<Filter>) -> Result<Self, FilterError> {
        filters.sort();
        filters.dedup();
        if filters.len() > MAX_FILTERS {
            return Err(FilterError::TooMany);
        }
        Ok(Filters(filters))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Filter> {
        self.0.iter()
    }

    /// These filters and one more (a breakdown row's link); unchanged when
    /// it is already there or there would be too many.
    pub fn with(&self, filter: Filter) -> Self {
        let mut more = self.0.clone();
        more.push(filter);
        Self::of(more).unwrap_or_else(|_| self.clone())
    }

    /// These filters and the page a page report is about: never refused
    /// for their number, as the page is the report's, not one more filter.
    pub fn and_page(&self, page: Filter) -> Self {
        let mut all = self.0.clone();
        all.push(page);
        all.sort();
        all.dedup();
        Filters(all)
    }

    /// These filters without `filter` (a chip's remove link).
    pub fn without(&self, filter: &Filter) -> Self {
        Filters(self.0.iter().filter(|f| *f != filter).cloned().collect())
    }

    /// The property filters, as `(key, value)`.
    pub fn properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().filter_map(|f| f.condition.property())
    }

    /// The page filters (views of other pages do not count).
    pub fn pages(&self) -> impl Iterator<Item = &PageMatch> {
        self.0
            .iter()
            .filter_map(|f| match (&f.dimension, &f.condition) {
                (FilterDimension::Page, Condition::Page(m)) => Some(m),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_property_filter_is_a_key_and_a_value() {
        let f = Filter::parse("prop:author:Jane: Doe").unwrap();
        assert_eq!(f.dimension(), FilterDimension::Property);
        assert_eq!(f.condition().property(), Some(("author", "Jane: Doe")));
        assert_eq!(f.to_string(), "prop:author:Jane: Doe");
        assert!(f.names("Jane: Doe"));
        assert!(!f.names("jane: doe"), "values match exactly");
        for bad in ["prop:author", "prop::Jane", "prop:author:", "prop:"] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
        let long = format!("prop:k:{}", "v".repeat(2_001));
        assert_eq!(Filter::parse(&long), Err(FilterError::NotAProperty));
        let filters = Filters::parse(["prop:a:1", "country:DE"]).unwrap();
        assert_eq!(filters.properties().collect::<Vec<_>>(), [("a", "1")]);
    }

    #[test]
    fn a_filter_is_a_dimension_and_a_value() {
        let f = Filter::parse("browser:Firefox").unwrap();
        assert_eq!(f.dimension(), FilterDimension::Browser);
        assert_eq!(f.value(), "Firefox");
        assert_eq!(f.to_string(), "browser:Firefox");
    }

    #[test]
    fn without_a_colon_it_is_refused() {
        assert_eq!(Filter::parse("country"), Err(FilterError::NoColon));
    }

    #[test]
    fn an_unknown_dimension_is_refused_and_named_briefly() {
        assert_eq!(
            Filter::parse("planet:Mars"),
            Err(FilterError::UnknownDimension("planet".into()))
        );
        // Keys are taken as sent: no spaces around them.
        assert_eq!(
            Filter::parse(" country:DE"),
            Err(FilterError::UnknownDimension(" country".into()))
        );
        let long = format!("{}:x", "k".repeat(1000));
        match Filter::parse(&long) {
            Err(FilterError::UnknownDimension(k)) => assert_eq!(k.len(), 40),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn goal_is_the_event_dimension() {
        assert_eq!(
            Filter::parse("goal:Signup").unwrap(),
            Filter::parse("event:Signup").unwrap()
        );
    }

    #[test]
    fn an_empty_value_is_refused() {
        assert_eq!(
            Filter::parse("source:"),
            Err(FilterError::EmptyValue("source"))
        );
    }

    #[test]
    fn a_value_is_taken_as_sent_colons_and_spaces_included() {
        assert_eq!(Filter::parse("event:a:b").unwrap().value(), "a:b");
        assert_eq!(Filter::parse("source: x ").unwrap().value(), " x ");
    }

    #[test]
    fn page_values_are_paths_normalised_like_the_pixel() {
        assert_eq!(Filter::parse("page:pricing"), Err(FilterError::NotAPath));
        assert_eq!(
            Filter::parse("entry:/a/../pricing?x=1").unwrap().value(),
            "/pricing"
        );
        assert!(Filter::parse(&format!("exit:/{}", "a".repeat(MAX_PAGE_VALUE_CHARS - 1))).is_ok());
        assert_eq!(
            Filter::parse(&format!("exit:/{}", "a".repeat(MAX_PAGE_VALUE_CHARS))),
            Err(FilterError::PageTooLong)
        );
        // A path the pixel would refuse matches nothing, and is no error.
        let f = Filter::parse("page:/a\u{7}b").unwrap();
        assert!(!f.names("/ab"));
    }

    #[test]
    fn a_star_makes_a_pattern_matching_the_whole_path() {
        let m = PageMatch::parse("/blog/*").unwrap();
        assert!(m.matches("/blog/"));
        assert!(m.matches("/blog/a/b"));
        assert!(!m.matches("/blogs"));
        let m = PageMatch::parse("/*/signup").unwrap();
        assert!(m.matches("/en/signup"));
        assert!(!m.matches("/en/signup/done"));
        let m = PageMatch::parse("/a*b*c").unwrap();
        assert!(m.matches("/abc"));
        assert!(m.matches("/axxbyyc"));
        assert!(!m.matches("/axxbyy"));
        // Many stars against a long path stay quick (no back-tracking blow-up).
        let m = PageMatch::parse(&format!("/{}b", "*a".repeat(100))).unwrap();
        assert!(!m.matches(&format!("/{}", "a".repeat(500))));
        // The first and last pieces may not overlap.
        let m = PageMatch::parse("/a*a").unwrap();
        assert!(!m.matches("/a"));
        assert!(m.matches("/aa"));
        let m = PageMatch::parse("/é*é").unwrap();
        assert!(m.matches("/éxé"));
        assert!(!m.matches("/é"));
    }

    /// Whether `text` matches `pattern` by the definition (every way of
    /// splitting the text among the stars), to check the matcher against.
    fn by_definition(pattern: &[u8], text: &[u8]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some((b'*', rest)) => (0..=text.len()).any(|i| by_definition(rest, &text[i..])),
            Some((c, rest)) => text.first() == Some(c) && by_definition(rest, &text[1..]),
        }
    }

    #[test]
    fn the_matcher_agrees_with_the_definition_on_every_short_case() {
        // Every pattern of up to 5 symbols of `a`, `b`, `*` against every
        // text of up to 6 of `a`, `b`.
        fn all(alphabet: &[u8], most: usize) -> Vec<Vec<u8>> {
            let mut out = vec![Vec::new()];
            let mut last = vec![Vec::new()];
            for _ in 0..most {
                last = last
                    .iter()
                    .flat_map(|w: &Vec<u8>| {
                        alphabet.iter().map(move |c| [w.as_slice(), &[*c]].concat())
                    })
                    .collect();
                out.extend(last.iter().cloned());
            }
            out
        }
        for p in all(b"ab*", 5) {
            for t in all(b"ab", 6) {
                let (ps, ts) = (
                    String::from_utf8(p.clone()).unwrap(),
                    String::from_utf8(t.clone()).unwrap(),
                );
                assert_eq!(wildcard(&ps, &ts), by_definition(&p, &t), "{ps} {ts}");
            }
        }
    }

    #[test]
    fn hostile_patterns_cost_one_pass_over_the_path() {
        let path = format!("/{}", "a".repeat(510));
        let hostile = [
            // Stars and one letter, all the way to the longest value.
            format!("/{}b", "*a".repeat(255)),
            format!("/*{}b", "a".repeat(509)),
            format!("/*{}*b", "a*".repeat(254)),
            format!("{}*", "/a".repeat(255)),
            format!("/*{}", "ab".repeat(255)),
        ];
        for pattern in &hostile {
            let m = PageMatch::parse(pattern).unwrap();
            SCANNED.with(|s| s.set(0));
            assert!(!m.matches(&path), "{pattern}");
            // Each search walks on from where the one before stopped:
            // never more than the path itself, however many stars.
            let walked = SCANNED.with(|s| s.get());
            assert!(walked <= path.len(), "{pattern}: {walked} bytes walked");
        }
    }

    #[test]
    fn an_exact_page_matches_only_itself() {
        let m = PageMatch::parse("/pricing").unwrap();
        assert!(m.matches("/pricing"));
        assert!(!m.matches("/pricing/more"));
    }

    #[test]
    fn other_values_are_bounded_in_characters() {
        assert!(Filter::parse(&format!("source:{}", "é".repeat(MAX_NAME_VALUE_CHARS))).is_ok());
        assert_eq!(
            Filter::parse(&format!(
                "campaign:{}",
                "a".repeat(MAX_NAME_VALUE_CHARS + 1)
            )),
            Err(FilterError::ValueTooLong)
        );
    }

    #[test]
    fn a_country_is_two_letters_in_upper_case() {
        assert_eq!(Filter::parse("country:DEU"), Err(FilterError::NotACountry));
        assert_eq!(Filter::parse("country:D1"), Err(FilterError::NotACountry));
        assert_eq!(Filter::parse("country:fr").unwrap().value(), "FR");
    }

    #[test]
    fn a_fixed_vocabularys_names_match_in_any_letter_case_and_the_rest_exactly() {
        let names = |raw: &str, name: &str| Filter::parse(raw).unwrap().names(name);
        assert!(names("browser:chrome", "Chrome"));
        assert!(names("os:IOS", "iOS"));
        assert!(names("device:Mobile", "mobile"));
        assert!(names("country:de", "DE"));
        assert!(!names("browser:chrom", "Chrome"));
        // Typed or sent by a page: as they are.
        assert!(!names("source:Google.com", "google.com"));
        assert!(!names("campaign:Spring", "spring"));
        assert!(!names("event:signup", "Signup"));
        assert!(names("event:Signup", "Signup"));
    }

    #[test]
    fn an_event_is_bounded_like_an_event_name() {
        assert!(Filter::parse(&format!("event:{}", "a".repeat(64))).is_ok());
        assert_eq!(
            Filter::parse(&format!("event:{}", "a".repeat(65))),
            Err(FilterError::EventTooLong)
        );
    }

    #[test]
    fn filters_are_sorted_without_repeats_and_bounded_in_count_as_sent() {
        let f = Filters::parse(["device:mobile", "country:DE", "country:de"]).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f.iter().next().unwrap().to_string(), "device:mobile");
        let many: Vec<String> = (0..=MAX_FILTERS).map(|i| format!("source:s{i}")).collect();
        assert_eq!(
            Filters::parse(many.iter().map(String::as_str)),
            Err(FilterError::TooMany)
        );
        // Repeats count: the document bounds the items sent.
        let repeated = vec!["source:x"; MAX_FILTERS + 1];
        assert_eq!(Filters::parse(repeated), Err(FilterError::TooMany));
    }

    #[test]
    fn an_empty_filter_is_an_absent_one() {
        assert!(Filters::parse([""]).unwrap().is_empty());
        let f = Filters::parse(["", "country:DE", ""]).unwrap();
        assert_eq!(f.len(), 1);
        // Only empty: a blank value is still a malformed filter.
        assert!(Filters::parse([" "]).is_err());
        // Still counted as sent (the document's `maxItems`).
        let sent = vec![""; MAX_FILTERS + 1];
        assert_eq!(Filters::parse(sent), Err(FilterError::TooMany));
    }

    #[test]
    fn with_and_without_add_and_remove_one_filter() {
        let base = Filters::parse(["country:DE"]).unwrap();
        let more = base.with(Filter::parse("device:mobile").unwrap());
        assert_eq!(more.len(), 2);
        assert_eq!(more.with(Filter::parse("country:DE").unwrap()).len(), 2);
        assert_eq!(more.without(&Filter::parse("device:mobile").unwrap()), base);
        // A page report's page comes on top of the most filters.
        let six: Vec<String> = (0..MAX_FILTERS).map(|i| format!("source:s{i}")).collect();
        let six = Filters::parse(six.iter().map(String::as_str)).unwrap();
        assert_eq!(
            six.and_page(Filter::parse("page:/a").unwrap()).len(),
            MAX_FILTERS + 1
        );
    }
}

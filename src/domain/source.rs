//! Where a view came from: the referring host, or the campaign's
//! `utm_source`, or "direct".
//!
//! Rules (README "Traffic sources" repeats them):
//! 1. `utm_source` in the page URL's query wins: percent-decoded once,
//!    trimmed, lower-cased; 1 to [`MAX_SOURCE_CHARS`] characters, letters,
//!    digits and ` .-_+:@~/` only. Anything else is ignored (rule 2 applies).
//! 2. Otherwise the referrer (`ref`, at most [`MAX_REFERRER_BYTES`]): it must
//!    be an absolute `http(s)` URL without control characters; its host,
//!    lower-cased, without a leading `www.`, is the source, unless the host
//!    is the site's own domain or an alias (with or without `www.`): moving
//!    inside the site is not a source.
//! 3. Otherwise "direct". A bad `ref` (too long, not a URL, a control
//!    character) is ignored for the source; it never rejects the view.
//!
//! Only the host is ever kept, never a path or query string of the referrer.
//!
//! No source may pose as a row the reports make themselves ([`RESERVED`]:
//! `direct`, `(other)`…) nor as another name in look-alike letters: a
//! referring host must be letters, digits, `.`, `-` and `_` (or an IP
//! address) in its IDNA ASCII form (`xn--…`), as the URL parser writes it,
//! and a `utm_source` with letters outside ASCII is kept in that form too
//! (or ignored when it is no valid international name).

use std::fmt;

pub const MAX_SOURCE_CHARS: usize = 64;
pub const MAX_REFERRER_BYTES: usize = 2048;

/// Names of the reports' own rows and words they use for them: never a
/// source's name (a `utm_source` or a referring host with one is ignored).
pub const RESERVED: [&str; 7] = [
    Source::DIRECT,
    "(direct)",
    "other",
    "(other)",
    "(other sources)",
    "(none)",
    "none",
];

fn reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// A source as stored in the source buckets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source(String);

impl Source {
    pub const DIRECT: &'static str = "direct";

    pub fn direct() -> Self {
        Self(Self::DIRECT.to_owned())
    }

    /// The source of a view: rule 1, then 2, then 3. `own_host` says
    /// whether a (lower-cased, `www.`-less) host belongs to the site.
    pub fn of_view(
        utm_source: Option<&str>,
        referrer: Option<&str>,
        own_host: impl Fn(&str) -> bool,
    ) -> Self {
        utm_source
            .and_then(Self::from_utm)
            .or_else(|| referrer.and_then(|r| Self::from_referrer(r, own_host)))
            .unwrap_or_else(Self::direct)
    }

    /// Rule 1 on an already percent-decoded value.
    pub fn from_utm(raw: &str) -> Option<Self> {
        let value = raw.trim().to_lowercase();
        let allowed = |c: char| c.is_alphanumeric() || " .-_+:@~/".contains(c);
        let chars = value.chars().count();
        if !(1..=MAX_SOURCE_CHARS).contains(&chars) || !value.chars().all(allowed) {
            return None;
        }
        // Letters outside ASCII could spell a look-alike of another name
        // (Cyrillic `о` in `gооgle.com`): shown in IDNA form, as a browser
        // would send that host.
        let value = if value.is_ascii() {
            value
        } else {
            idna::domain_to_ascii_strict(&value).ok()?
        };
        (!reserved(&value)).then_some(Self(value))
    }

    /// Rule 2: the referring host, or `None` for an unusable referrer or
    /// one on the site itself.
    pub fn from_referrer(raw: &str, own_host: impl Fn(&str) -> bool) -> Option<Self> {
        if raw.len() > MAX_REFERRER_BYTES || raw.chars().any(char::is_control) {
            return None;
        }
        let url = url::Url::parse(raw).ok()?;
        if !matches!(url.scheme(), "http" | "https") {
            return None;
        }
        let host = match url.host()? {
            url::Host::Domain(d) => d.trim_end_matches('.').to_lowercase(),
            other => other.to_string(),
        };
        let host = host.strip_prefix("www.").unwrap_or(&host).to_owned();
        if host.is_empty() || host.chars().count() > 253 {
            return None;
        }
        // The URL parser already wrote an international name in IDNA
        // form; it lets through punctuation a host never has (`(other)`).
        let host_char = |c: char| c.is_ascii_alphanumeric() || ".-_[]:".contains(c);
        if !host.chars().all(host_char) || reserved(&host) {
            return None;
        }
        if own_host(&host) || own_host(&format!("www.{host}")) {
            return None;
        }
        Some(Self(host))
    }

    /// A value read back from the database (written through the rules).
    pub fn from_stored(value: String) -> Self {
        Self(value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The value as a field name inside a `sources` sub-document
    /// (`dimension::field_name`).
    pub fn field_name(&self) -> String {
        super::dimension::field_name(&self.0)
    }

    pub fn from_field_name(field: &str) -> Self {
        Self(super::dimension::from_field_name(field))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(host: &str) -> bool {
        host == "example.com" || host == "blog.example.com"
    }

    fn referrer(raw: &str) -> Option<String> {
        Source::from_referrer(raw, own).map(Source::into_string)
    }

    #[test]
    fn the_referring_host_is_lower_cased_without_www() {
        assert_eq!(
            referrer("https://WWW.Google.COM/search?q=secret").as_deref(),
            Some("google.com")
        );
        assert_eq!(
            referrer("http://news.ycombinator.com:8080/item?id=1").as_deref(),
            Some("news.ycombinator.com")
        );
        assert_eq!(
            referrer("http://127.0.0.1:4000/").as_deref(),
            Some("127.0.0.1")
        );
    }

    #[test]
    fn the_sites_own_hosts_are_not_a_source() {
        assert_eq!(referrer("https://example.com/other"), None);
        assert_eq!(referrer("https://www.example.com/other"), None);
        assert_eq!(referrer("https://BLOG.example.com/"), None);
        assert_eq!(
            referrer("https://example.com.evil.net/").as_deref(),
            Some("example.com.evil.net")
        );
    }

    #[test]
    fn bad_referrers_are_ignored() {
        assert_eq!(referrer("not a url"), None);
        assert_eq!(referrer("/relative/path"), None);
        assert_eq!(referrer("ftp://files.example.net/"), None);
        assert_eq!(referrer("javascript:alert(1)"), None);
        assert_eq!(referrer("https://evil.net/\u{7}"), None);
        assert_eq!(referrer("https://evil.net/\n"), None);
        let long = format!("https://evil.net/{}", "a".repeat(MAX_REFERRER_BYTES));
        assert_eq!(referrer(&long), None);
        assert_eq!(referrer(""), None);
    }

    #[test]
    fn utm_source_is_trimmed_lower_cased_and_bounded() {
        assert_eq!(
            Source::from_utm(" Newsletter ").map(Source::into_string),
            Some("newsletter".into())
        );
        assert_eq!(
            Source::from_utm("mastodon.social").map(Source::into_string),
            Some("mastodon.social".into())
        );
        assert_eq!(Source::from_utm(""), None);
        assert_eq!(Source::from_utm("   "), None);
        assert_eq!(Source::from_utm(&"a".repeat(MAX_SOURCE_CHARS + 1)), None);
        assert!(Source::from_utm(&"a".repeat(MAX_SOURCE_CHARS)).is_some());
        assert_eq!(Source::from_utm("a\u{0}b"), None);
        assert_eq!(Source::from_utm("{\"$gt\":\"\"}"), None);
        assert_eq!(Source::from_utm("<script>"), None);
    }

    #[test]
    fn utm_source_wins_then_the_referrer_then_direct() {
        let of = |utm, r| Source::of_view(utm, r, own).into_string();
        assert_eq!(of(Some("mail"), Some("https://google.com/")), "mail");
        assert_eq!(of(Some("<bad>"), Some("https://google.com/")), "google.com");
        assert_eq!(of(None, Some("https://example.com/a")), "direct");
        assert_eq!(of(None, Some("garbage")), "direct");
        assert_eq!(of(None, None), "direct");
    }

    #[test]
    fn no_source_poses_as_a_row_of_the_report() {
        // A referrer must not produce a name that reads like one of the
        // report's own rows (other, direct, none) or an invalid host.
        for forged in [
            "https://(other)/",
            "https://(other%20sources)/",
            "https://direct/",
            "https://www.direct/",
            "https://DIRECT./",
            "http://none/x",
            "https://a!b.com/",
        ] {
            assert_eq!(referrer(forged), None, "{forged}");
        }
        for forged in ["direct", " Direct ", "other", "none"] {
            assert_eq!(Source::from_utm(forged), None, "{forged}");
        }
        assert_eq!(
            Source::of_view(Some("direct"), Some("https://news.example/"), own).into_string(),
            "news.example"
        );
        assert_eq!(referrer("http://[::1]:8080/").as_deref(), Some("[::1]"));
    }

    #[test]
    fn look_alike_letters_are_kept_in_idna_form() {
        // `gооgle.com` with two Cyrillic `о`.
        let look_alike = "g\u{43e}\u{43e}gle.com";
        let expected = "xn--ggle-55da.com";
        assert_eq!(
            referrer(&format!("https://{look_alike}/")).as_deref(),
            Some(expected)
        );
        assert_eq!(
            Source::from_utm(look_alike)
                .map(Source::into_string)
                .as_deref(),
            Some(expected)
        );
        assert_eq!(
            Source::from_utm("d\u{456}rect")
                .map(Source::into_string)
                .as_deref(),
            Some("xn--drect-n2e")
        );
        // Not a valid international name: ignored.
        assert_eq!(Source::from_utm("\u{43e} \u{43e}"), None);
        assert_eq!(
            Source::from_utm("Newsletter 2026")
                .map(Source::into_string)
                .as_deref(),
            Some("newsletter 2026"),
            "ASCII names are kept as they are"
        );
    }

    #[test]
    fn field_names_round_trip_and_never_nest() {
        for raw in ["google.com", "100%", "$where", "a.b$c%2E"] {
            let s = Source(raw.to_owned());
            let field = s.field_name();
            assert!(!field.contains('.') && !field.starts_with('$'), "{field}");
            assert_eq!(Source::from_field_name(&field), s);
        }
    }
}

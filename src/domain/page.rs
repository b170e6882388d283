//! Pages as the pixel reports them and as buckets store them.
//!
//! Rules, in the order they are applied (README "Page rules" repeats them):
//! 1. the raw value is at most [`MAX_PAGE_INPUT_BYTES`] (query strings and
//!    fragments can be long; they are dropped, but we refuse to parse more);
//! 2. a value starting with `http://`, `https://` or `//` is a full URL: it
//!    must parse, and its host is returned so the caller can check it
//!    belongs to the site; any other value must start with `/`;
//! 3. scheme, query string (`?...`) and fragment (`#...`) are dropped;
//! 4. percent-escapes in the path are decoded once, so `/caf%C3%A9` and
//!    `/café` are one page; the result must be valid UTF-8;
//! 5. control characters (U+0000..U+001F, U+007F..U+009F) are rejected;
//! 6. the path is at most [`MAX_PATH_BYTES`] bytes.
//!
//! `$` and `.` are ordinary characters in a path and are kept: a page is
//! only ever stored as a BSON string *value*, never used as a field name or
//! an operator, so it cannot change the shape of a query or an update.

use percent_encoding::percent_decode_str;
use std::fmt;

use super::DomainName;

pub const MAX_PATH_BYTES: usize = 512;
pub const MAX_PAGE_INPUT_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum PageError {
    #[error("the page is longer than allowed")]
    TooLong,
    #[error("the page must be a path starting with / or an http(s) URL")]
    NotAPathOrUrl,
    #[error("the page is not valid UTF-8")]
    InvalidUtf8,
    #[error("the page contains a control character")]
    ControlCharacter,
    #[error("the page contains an invisible or bidirectional formatting character")]
    InvisibleCharacter,
}

/// Characters that change how a path is displayed without being visible:
/// bidirectional overrides and isolates could make a report show
/// `/admin` + U+202E + `txt.exe` read as ending in `exe.txt`, zero-width ones make two pages
/// that look identical.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{061C}'                     // Arabic letter mark
        | '\u{180E}'                   // Mongolian vowel separator
        | '\u{200B}'..='\u{200F}'      // zero-width space/joiners, LRM, RLM
        | '\u{202A}'..='\u{202E}'      // embeddings and overrides
        | '\u{2060}'..='\u{2064}'      // word joiner, invisible operators
        | '\u{2066}'..='\u{2069}'      // isolates
        | '\u{FEFF}'                   // zero-width no-break space
    )
}

/// A normalised path: starts with `/`, valid UTF-8, no control characters,
/// at most [`MAX_PATH_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PagePath(String);

impl PagePath {
    /// Parses the path part of a page (no query or fragment expected, but
    /// they are dropped if present).
    pub fn parse(raw: &str) -> Result<Self, PageError> {
        let without_fragment = raw.split('#').next().unwrap_or_default();
        let without_query = without_fragment.split('?').next().unwrap_or_default();
        if !without_query.starts_with('/') {
            return Err(PageError::NotAPathOrUrl);
        }
        let decoded = percent_decode_str(without_query)
            .decode_utf8()
            .map_err(|_| PageError::InvalidUtf8)?;
        if decoded.chars().any(char::is_control) {
            return Err(PageError::ControlCharacter);
        }
        if decoded.chars().any(is_invisible) {
            return Err(PageError::InvisibleCharacter);
        }
        if decoded.len() > MAX_PATH_BYTES {
            return Err(PageError::TooLong);
        }
        Ok(Self(decoded.into_owned()))
    }

    pub fn root() -> Self {
        Self("/".to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a pixel's `page` parameter (or a Referer) names: a bare path, or a
/// full URL whose host still has to be checked against the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageRef {
    Path(PagePath),
    Url { host: String, path: PagePath },
}

impl PageRef {
    pub fn parse(raw: &str) -> Result<Self, PageError> {
        if raw.len() > MAX_PAGE_INPUT_BYTES {
            return Err(PageError::TooLong);
        }
        if raw.chars().any(char::is_control) {
            return Err(PageError::ControlCharacter);
        }
        let lower_start = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
        let url_text = if lower_start.starts_with("http://") || lower_start.starts_with("https://")
        {
            raw.to_owned()
        } else if raw.starts_with("//") {
            format!("https:{raw}")
        } else {
            // A bare path goes through the same URL parser as a full URL,
            // so `/a/../../b` is stored as `/b` either way and a page
            // cannot be reached under two spellings.
            PagePath::parse(raw)?;
            let url = url::Url::parse(&format!("http://path.invalid{raw}"))
                .map_err(|_| PageError::NotAPathOrUrl)?;
            return PagePath::parse(url.path()).map(PageRef::Path);
        };
        let url = url::Url::parse(&url_text).map_err(|_| PageError::NotAPathOrUrl)?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or(PageError::NotAPathOrUrl)?
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let path = PagePath::parse(url.path())?;
        Ok(PageRef::Url { host, path })
    }
}

/// The bucket key: a site's canonical domain followed by a normalised path,
/// e.g. `example.com/blog/hello`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Page(String);

impl Page {
    pub fn new(domain: &DomainName, path: &PagePath) -> Self {
        Self(format!("{}{}", domain.as_str(), path.as_str()))
    }

    /// Parses the stored form `domain/path` (used by the CLI and admin pages).
    pub fn parse(raw: &str) -> Result<Self, PageError> {
        let slash = raw.find('/').ok_or(PageError::NotAPathOrUrl)?;
        let domain = DomainName::parse(&raw[..slash]).map_err(|_| PageError::NotAPathOrUrl)?;
        let path = PagePath::parse(&raw[slash..])?;
        Ok(Self::new(&domain, &path))
    }

    /// Wraps a value read back from a bucket document, which was written by
    /// this code and so already follows the rules.
    pub fn from_stored(stored: String) -> Self {
        Self(stored)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    pub fn domain(&self) -> &str {
        self.0.split('/').next().unwrap_or_default()
    }

    pub fn path(&self) -> &str {
        &self.0[self.domain().len()..]
    }
}

impl fmt::Display for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(raw: &str) -> String {
        match PageRef::parse(raw).unwrap() {
            PageRef::Path(p) => p.as_str().to_owned(),
            other => panic!("expected a path, got {other:?}"),
        }
    }

    #[test]
    fn rule1_rejects_oversized_input() {
        let raw = format!("/{}", "a".repeat(MAX_PAGE_INPUT_BYTES));
        assert_eq!(PageRef::parse(&raw), Err(PageError::TooLong));
    }

    #[test]
    fn rule2_full_urls_return_their_host() {
        assert_eq!(
            PageRef::parse("HTTPS://WWW.Example.com/Blog?x=1#top").unwrap(),
            PageRef::Url {
                host: "www.example.com".into(),
                path: PagePath("/Blog".into())
            }
        );
        assert_eq!(
            PageRef::parse("//example.com./a").unwrap(),
            PageRef::Url {
                host: "example.com".into(),
                path: PagePath("/a".into())
            }
        );
    }

    #[test]
    fn rule2_other_values_must_start_with_a_slash() {
        for raw in [
            "",
            "blog",
            r#"{"$gt":""}"#,
            "$where.x",
            "javascript:alert(1)",
            "ftp://x/y",
        ] {
            assert_eq!(PageRef::parse(raw), Err(PageError::NotAPathOrUrl), "{raw}");
        }
        assert_eq!(PageRef::parse("http://"), Err(PageError::NotAPathOrUrl));
    }

    #[test]
    fn rule3_drops_query_and_fragment() {
        assert_eq!(path("/a/b?utm=1&x=2#frag"), "/a/b");
        assert_eq!(path("/a#x?y"), "/a");
        assert_eq!(path("/?q"), "/");
    }

    #[test]
    fn rule4_decodes_percent_escapes_once() {
        assert_eq!(path("/caf%C3%A9"), "/café");
        assert_eq!(path("/café"), "/café");
        assert_eq!(path("/100%2525"), "/100%25");
        assert_eq!(path("/a%zz"), "/a%zz");
        assert_eq!(PageRef::parse("/%FF%FE"), Err(PageError::InvalidUtf8));
    }

    #[test]
    fn rule5_rejects_control_characters_raw_or_escaped() {
        for raw in ["/a\u{0}b", "/a\nb", "/a%0Ab", "/a%7F", "/a\u{85}"] {
            assert_eq!(
                PageRef::parse(raw),
                Err(PageError::ControlCharacter),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn rule6_limits_the_path_to_512_bytes() {
        let ok = format!("/{}", "a".repeat(MAX_PATH_BYTES - 1));
        assert_eq!(path(&ok).len(), MAX_PATH_BYTES);
        let too_long = format!("/{}", "a".repeat(MAX_PATH_BYTES));
        assert_eq!(PageRef::parse(&too_long), Err(PageError::TooLong));
        // Bytes, not characters: 171 three-byte characters are 513 bytes.
        let wide = format!("/{}", "€".repeat(171));
        assert_eq!(PageRef::parse(&wide), Err(PageError::TooLong));
    }

    #[test]
    fn bare_paths_are_normalised_like_full_urls() {
        for (bare, normal) in [
            ("/a/../../b", "/b"),
            ("/a/./b/../c", "/a/c"),
            ("/a/%2e%2E/c", "/c"),
            ("/..", "/"),
            ("/a//b", "/a//b"),
            ("/a b", "/a b"),
        ] {
            assert_eq!(path(bare), normal, "{bare}");
            let full = format!("https://example.com{bare}");
            match PageRef::parse(&full).unwrap() {
                PageRef::Url { path, .. } => assert_eq!(path.as_str(), normal, "{full}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn bidi_overrides_and_zero_width_characters_are_refused() {
        for raw in [
            "/admin\u{202E}txt.exe",
            "/a%E2%80%AEb",
            "/a\u{200B}b",
            "/a%E2%80%8Bb",
            "/a\u{2066}b\u{2069}",
            "/\u{FEFF}x",
            "/a\u{200D}b",
            "https://example.com/a%E2%80%8Fb",
        ] {
            assert_eq!(
                PageRef::parse(raw),
                Err(PageError::InvisibleCharacter),
                "{raw:?}"
            );
        }
        assert_eq!(path("/caf%C3%A9/日本"), "/café/日本");
    }

    #[test]
    fn dollar_and_dot_are_kept_as_plain_characters() {
        assert_eq!(path("/a$b.c/$inc"), "/a$b.c/$inc");
    }

    #[test]
    fn page_joins_domain_and_path_and_splits_back() {
        let domain = DomainName::parse("example.com").unwrap();
        let page = Page::new(&domain, &PagePath::parse("/blog/hello").unwrap());
        assert_eq!(page.as_str(), "example.com/blog/hello");
        assert_eq!(page.domain(), "example.com");
        assert_eq!(page.path(), "/blog/hello");
        assert_eq!(Page::parse("Example.com/blog/hello").unwrap(), page);
        assert!(Page::parse("example.com").is_err());
        assert!(Page::parse("bad_host/x").is_err());
    }
}

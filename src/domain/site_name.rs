use std::fmt;

/// What a site is called in lists, pages, emails and `site list`'s
/// tab-separated lines: trimmed, at most 100 characters, one line without
/// control characters (a CR or LF would split `site list`'s line and an
/// email's subject, a tab its columns). Empty means "the domain", which
/// the caller supplies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteName(String);

pub const MAX_SITE_NAME_CHARS: usize = 100;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SiteNameError {
    #[error("a site name is at most {MAX_SITE_NAME_CHARS} characters")]
    TooLong,
    #[error("a site name is one line of text, without control characters (such as a line break or a tab)")]
    Control,
}

impl SiteName {
    /// The name given, or `None` when it is empty (the site is then called
    /// by its domain).
    pub fn parse(raw: &str) -> Result<Option<Self>, SiteNameError> {
        let name = raw.trim();
        if name.chars().count() > MAX_SITE_NAME_CHARS {
            return Err(SiteNameError::TooLong);
        }
        // `is_control` covers C0, DEL and C1 (NEL among them); the line and
        // paragraph separators break lines too.
        if name
            .chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
        {
            return Err(SiteNameError::Control);
        }
        Ok((!name.is_empty()).then(|| Self(name.to_owned())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for SiteName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(raw: &str) -> Option<String> {
        SiteName::parse(raw).unwrap().map(SiteName::into_string)
    }

    #[test]
    fn a_name_is_trimmed() {
        assert_eq!(name("  My blog "), Some("My blog".into()));
    }

    #[test]
    fn an_empty_name_is_none() {
        assert_eq!(name(""), None);
        assert_eq!(name(" \t "), None, "blank, tabs around included");
    }

    #[test]
    fn a_name_is_at_most_100_characters() {
        assert_eq!(name(&"é".repeat(100)).unwrap().chars().count(), 100);
        assert_eq!(
            SiteName::parse(&"a".repeat(101)),
            Err(SiteNameError::TooLong)
        );
    }

    #[test]
    fn a_name_has_no_control_characters() {
        for raw in [
            "a\r\nb",
            "a\nb",
            "a\rb",
            "a\tb",
            "a\u{0}b",
            "a\u{7}b",
            "a\u{1b}[31mb",
            "a\u{7f}b",
            "a\u{85}b",
            "a\u{2028}b",
            "a\u{2029}b",
        ] {
            assert_eq!(SiteName::parse(raw), Err(SiteNameError::Control), "{raw:?}");
        }
        assert_eq!(name("Café — Über ✓"), Some("Café — Über ✓".into()));
    }
}

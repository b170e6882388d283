use serde::{Deserialize, Serialize};
use std::fmt;

/// A site's host name: lower-case ASCII labels of letters, digits and
/// hyphens, joined by dots. IP addresses written as dotted digits and
/// `localhost` fit the same rule, which is what local testing needs.
///
/// Because it never contains `/`, every page of a site sorts inside
/// `"<domain>/"` ..= `"<domain>0"`, the key range reports scan.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DomainName(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DomainNameError {
    #[error("a domain name is required")]
    Empty,
    #[error("a domain name is at most 253 characters")]
    TooLong,
    #[error("a domain name is a host only: no scheme, port, path or spaces (e.g. example.com)")]
    NotAHost,
    #[error("a site is a whole host: enter the domain without the path {0} (e.g. example.com)")]
    HasPath(String),
    #[error("each dot-separated label needs 1 to 63 letters, digits or hyphens, not starting or ending with a hyphen")]
    BadLabel,
}

impl DomainName {
    /// The `page` filter for every page of this site: `"<domain>/"` ≤
    /// page < `"<domain>0"` (`0` sorts right after `/`), a range the
    /// `{page, timestamp}` index and shard key serve.
    pub fn pages_filter(&self) -> bson::Document {
        bson::doc! {"$gte": format!("{self}/"), "$lt": format!("{self}0")}
    }

    pub fn parse(raw: &str) -> Result<Self, DomainNameError> {
        let trimmed = raw.trim();
        // One trailing dot is the fully-qualified spelling of the same host.
        let host = trimmed.strip_suffix('.').unwrap_or(trimmed);
        if host.is_empty() {
            return Err(DomainNameError::Empty);
        }
        if host.len() > 253 {
            return Err(DomainNameError::TooLong);
        }
        if host.contains(['/', ':', '@', '?', '#', ' ', '\\']) {
            return Err(DomainNameError::NotAHost);
        }
        let host = host.to_ascii_lowercase();
        for label in host.split('.') {
            let ok = !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                return Err(DomainNameError::BadLabel);
            }
        }
        Ok(Self(host))
    }

    /// What a person types into a form: also a URL or `host:port`
    /// (`https://Example.com:8080/` is `example.com`). Scheme, port and a
    /// bare `/` are dropped since they cannot change which host is meant;
    /// a longer path, a query or a user name are refused, since a site is a
    /// whole host and dropping them would silently track more than asked.
    pub fn from_input(raw: &str) -> Result<Self, DomainNameError> {
        let trimmed = raw.trim();
        if !trimmed.contains(['/', ':']) {
            return Self::parse(trimmed);
        }
        let lower = trimmed.to_ascii_lowercase();
        let with_scheme = if lower.starts_with("http://") || lower.starts_with("https://") {
            trimmed.to_owned()
        } else if trimmed.contains("://") {
            return Err(DomainNameError::NotAHost);
        } else {
            format!("http://{}", trimmed.trim_start_matches("//"))
        };
        let url = url::Url::parse(&with_scheme).map_err(|_| DomainNameError::NotAHost)?;
        if !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(DomainNameError::NotAHost);
        }
        if !matches!(url.path(), "" | "/") {
            return Err(DomainNameError::HasPath(url.path().to_owned()));
        }
        let host = url.host_str().ok_or(DomainNameError::Empty)?;
        // The URL parser writes international names as punycode; that is
        // the host a browser sends, so it is the one to keep.
        Self::parse(host)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is a name anyone could register a site under: not an
    /// IP address, not `localhost` nor another name outside the public
    /// suffix list's known suffixes (`.test`, `.local`, `.internal`, …),
    /// and not a public suffix itself (`com`, `co.uk`, `github.io`). Hosts
    /// an owner adds must pass; an admin may add any host (an intranet).
    pub fn check_public(&self) -> Result<(), NotPublic> {
        let host = self.0.as_str();
        if host.parse::<std::net::Ipv4Addr>().is_ok() {
            return Err(NotPublic::IpAddress);
        }
        if !psl::suffix(host.as_bytes()).is_some_and(|s| s.is_known()) {
            return Err(NotPublic::UnknownSuffix);
        }
        match psl::domain(host.as_bytes()) {
            Some(_) => Ok(()),
            None => Err(NotPublic::Suffix),
        }
    }
}

/// Why a host is not a public, registrable domain name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotPublic {
    #[error("an IP address is not a public domain name")]
    IpAddress,
    #[error("a public suffix (like com, co.uk or github.io) is shared by many sites, not one")]
    Suffix,
    #[error("it does not end in a public top-level domain (localhost, .test, .local and the like are private)")]
    UnknownSuffix,
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for DomainName {
    type Error = DomainNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<DomainName> for String {
    fn from(value: DomainName) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_cases_and_drops_one_trailing_dot() {
        assert_eq!(
            DomainName::parse(" Example.COM. ").unwrap().as_str(),
            "example.com"
        );
    }

    #[test]
    fn only_registrable_public_names_are_public() {
        let public = |h: &str| DomainName::parse(h).unwrap().check_public();
        for ok in [
            "example.com",
            "www.bob.co.uk",
            "alice.github.io",
            "xn--bcher-kva.de",
        ] {
            assert_eq!(public(ok), Ok(()), "{ok}");
        }
        assert_eq!(public("127.0.0.1"), Err(NotPublic::IpAddress));
        assert_eq!(public("10.1.2.3"), Err(NotPublic::IpAddress));
        for suffix in ["com", "co.uk", "github.io"] {
            assert_eq!(public(suffix), Err(NotPublic::Suffix), "{suffix}");
        }
        for private in [
            "localhost",
            "www.bob.test",
            "printer.local",
            "db.internal",
            "app.localhost",
        ] {
            assert_eq!(public(private), Err(NotPublic::UnknownSuffix), "{private}");
        }
    }

    #[test]
    fn accepts_localhost_and_dotted_ipv4() {
        assert!(DomainName::parse("localhost").is_ok());
        assert!(DomainName::parse("127.0.0.1").is_ok());
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(DomainName::parse("  "), Err(DomainNameError::Empty));
        assert_eq!(DomainName::parse("."), Err(DomainNameError::Empty));
    }

    #[test]
    fn rejects_too_long() {
        let long = format!("{}.com", "a.".repeat(130));
        assert_eq!(DomainName::parse(&long), Err(DomainNameError::TooLong));
    }

    #[test]
    fn rejects_scheme_port_and_path() {
        for raw in [
            "https://example.com",
            "example.com:8080",
            "example.com/blog",
            "a b.com",
        ] {
            assert_eq!(
                DomainName::parse(raw),
                Err(DomainNameError::NotAHost),
                "{raw}"
            );
        }
    }

    #[test]
    fn form_input_may_be_a_url_or_carry_a_port() {
        for raw in [
            "https://example.com/",
            "http://Example.com",
            "example.com:8080",
            "https://example.com:8443/",
            "//example.com/",
            " example.com ",
        ] {
            assert_eq!(
                DomainName::from_input(raw).unwrap().as_str(),
                "example.com",
                "{raw}"
            );
        }
        assert_eq!(
            DomainName::from_input("https://example.com/blog"),
            Err(DomainNameError::HasPath("/blog".into()))
        );
        for raw in [
            "ftp://example.com",
            "https://u:p@example.com/",
            "example.com/?a=1",
            "https://",
        ] {
            assert!(DomainName::from_input(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn rejects_bad_labels() {
        for raw in [
            "-a.com",
            "a-.com",
            "a..com",
            "ex_ample.com",
            "exämple.com",
            "$gt",
        ] {
            assert_eq!(
                DomainName::parse(raw),
                Err(DomainNameError::BadLabel),
                "{raw}"
            );
        }
        let label = "a".repeat(64);
        assert_eq!(
            DomainName::parse(&format!("{label}.com")),
            Err(DomainNameError::BadLabel)
        );
    }
}

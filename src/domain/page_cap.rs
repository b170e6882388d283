//! A site's own new-page cap: the instance's budgets, none, or a
//! number of new pages per hour. Parsed from what an admin types (the form
//! and the CLI) and from what is stored.

use std::fmt;

/// The most new pages per hour a site may be set to (a number this large
/// is as good as no cap, but stays a bound).
pub const MAX_PAGES_PER_HOUR: u64 = 10_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PageCapSetting {
    /// The instance's budgets (`TICKERTAPE_NEW_PAGES_PER_HOUR` and the
    /// repeat budget).
    #[default]
    Default,
    /// Every new page gets its own buckets at once.
    Unlimited,
    /// At most this many new pages per hour.
    PerHour(u64),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageCapError {
    #[error("the page cap is `default`, `none` or a whole number of new pages per hour from 1 to {}", super::numbers::thousands(&(MAX_PAGES_PER_HOUR as i64)))]
    Invalid,
}

impl PageCapSetting {
    /// `default` (or empty), `none`, or a whole number from 1 to
    /// [`MAX_PAGES_PER_HOUR`].
    pub fn parse(input: &str) -> Result<Self, PageCapError> {
        match input.trim() {
            "" | "default" => Ok(Self::Default),
            "none" => Ok(Self::Unlimited),
            n if n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<u64>() {
                Ok(n) if (1..=MAX_PAGES_PER_HOUR).contains(&n) => Ok(Self::PerHour(n)),
                _ => Err(PageCapError::Invalid),
            },
            _ => Err(PageCapError::Invalid),
        }
    }
}

impl fmt::Display for PageCapSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Unlimited => f.write_str("none"),
            Self::PerHour(n) => write!(f, "{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_empty_mean_the_instance_budgets() {
        assert_eq!(
            PageCapSetting::parse("default"),
            Ok(PageCapSetting::Default)
        );
        assert_eq!(PageCapSetting::parse("  "), Ok(PageCapSetting::Default));
    }

    #[test]
    fn none_means_no_cap() {
        assert_eq!(PageCapSetting::parse("none"), Ok(PageCapSetting::Unlimited));
    }

    #[test]
    fn a_number_is_pages_per_hour_within_bounds() {
        assert_eq!(
            PageCapSetting::parse("5000"),
            Ok(PageCapSetting::PerHour(5000))
        );
        assert_eq!(PageCapSetting::parse("0"), Err(PageCapError::Invalid));
        assert_eq!(
            PageCapSetting::parse("10000001"),
            Err(PageCapError::Invalid)
        );
        assert_eq!(
            PageCapSetting::parse("99999999999999999999"),
            Err(PageCapError::Invalid)
        );
        // The limit is said as the pages say numbers.
        assert!(PageCapError::Invalid
            .to_string()
            .ends_with("from 1 to 10,000,000"));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in ["-1", "1e3", "ten", "12 34", "None", "1000\u{0}"] {
            assert_eq!(
                PageCapSetting::parse(bad),
                Err(PageCapError::Invalid),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn it_reads_back_what_it_writes() {
        for s in [
            PageCapSetting::Default,
            PageCapSetting::Unlimited,
            PageCapSetting::PerHour(42),
        ] {
            assert_eq!(PageCapSetting::parse(&s.to_string()), Ok(s));
        }
    }
}

/// How many days a share link works, as typed in its form: empty means it
/// never expires; otherwise a whole number of days from 1 to 3,650.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryDays(Option<u16>);

pub const MAX_EXPIRY_DAYS: u16 = 3650;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the expiry is a whole number of days from 1 to {}, or empty for never", super::numbers::thousands(&i64::from(MAX_EXPIRY_DAYS)))]
pub struct ExpiryDaysError;

impl ExpiryDays {
    pub fn parse(raw: &str) -> Result<Self, ExpiryDaysError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(Self(None));
        }
        raw.parse::<u16>()
            .ok()
            .filter(|d| (1..=MAX_EXPIRY_DAYS).contains(d))
            .map(|d| Self(Some(d)))
            .ok_or(ExpiryDaysError)
    }

    pub fn days(self) -> Option<u16> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_never() {
        assert_eq!(ExpiryDays::parse("").unwrap().days(), None);
        assert_eq!(ExpiryDays::parse("  ").unwrap().days(), None);
    }

    #[test]
    fn days_are_whole_numbers_from_1_to_3650() {
        assert_eq!(ExpiryDays::parse(" 7 ").unwrap().days(), Some(7));
        assert_eq!(ExpiryDays::parse("3650").unwrap().days(), Some(3650));
        for bad in ["0", "3651", "-1", "1.5", "seven", "99999999"] {
            assert_eq!(ExpiryDays::parse(bad), Err(ExpiryDaysError), "{bad}");
        }
    }
}

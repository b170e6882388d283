use chrono::TimeDelta;

use super::Resolution;

/// How long each level of buckets is kept, in whole days (`None`: for
/// ever). Enforced by the database through a TTL index on `timestamp` per
/// bucket collection.
///
/// Rules: 1 to 36,500 days, or 0 for ever; and a coarser level is kept at
/// least as long as a finer one (hours at least as long as minutes, days at
/// least as long as hours), so that a range too old for one level can always
/// be read from the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    minute: Option<u32>,
    hour: Option<u32>,
    day: Option<u32>,
}

pub const MAX_RETENTION_DAYS: u32 = 36_500;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RetentionError {
    #[error(
        "the retention of {0} buckets is at most {max} days (0 keeps them for ever)",
        max = super::numbers::thousands(&i64::from(MAX_RETENTION_DAYS))
    )]
    TooLong(&'static str),
    #[error("{coarser} buckets must be kept at least as long as {finer} buckets")]
    CoarserShorter {
        coarser: &'static str,
        finer: &'static str,
    },
}

impl Default for Retention {
    /// Minutes 90 days, hours 2 years, days for ever.
    fn default() -> Self {
        Self {
            minute: Some(90),
            hour: Some(730),
            day: None,
        }
    }
}

impl Retention {
    /// Days per level, minute, hour and day; 0 means for ever.
    pub fn parse(minute: u32, hour: u32, day: u32) -> Result<Self, RetentionError> {
        let level = |days: u32, name: &'static str| match days {
            0 => Ok(None),
            d if d > MAX_RETENTION_DAYS => Err(RetentionError::TooLong(name)),
            d => Ok(Some(d)),
        };
        let r = Self {
            minute: level(minute, "minute")?,
            hour: level(hour, "hour")?,
            day: level(day, "day")?,
        };
        // For ever is longer than any number of days.
        let longer_or_equal = |coarse: Option<u32>, fine: Option<u32>| match (coarse, fine) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(c), Some(f)) => c >= f,
        };
        if !longer_or_equal(r.hour, r.minute) {
            return Err(RetentionError::CoarserShorter {
                coarser: "hour",
                finer: "minute",
            });
        }
        if !longer_or_equal(r.day, r.hour) {
            return Err(RetentionError::CoarserShorter {
                coarser: "day",
                finer: "hour",
            });
        }
        Ok(r)
    }

    /// Days the buckets of `level` are kept; `None`: for ever.
    pub fn days(&self, level: Resolution) -> Option<u32> {
        match level {
            Resolution::Minute => self.minute,
            Resolution::Hour => self.hour,
            Resolution::Day => self.day,
        }
    }

    pub fn kept(&self, level: Resolution) -> Option<TimeDelta> {
        self.days(level).map(|d| TimeDelta::days(i64::from(d)))
    }

    /// The TTL index's `expireAfterSeconds` for `level`.
    pub fn expire_after_secs(&self, level: Resolution) -> Option<i64> {
        self.kept(level).map(|k| k.num_seconds())
    }

    /// "90 days", "2 years" or "for ever", for pages.
    pub fn describe(&self, level: Resolution) -> String {
        match self.days(level) {
            None => "for ever".to_owned(),
            Some(d) if d % 365 == 0 => {
                let years = d / 365;
                format!("{years} year{}", if years == 1 { "" } else { "s" })
            }
            Some(d) => format!(
                "{} day{}",
                super::numbers::thousands(&i64::from(d)),
                if d == 1 { "" } else { "s" }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_keeps_minutes_90_days_hours_2_years_days_for_ever() {
        let r = Retention::default();
        assert_eq!(r, Retention::parse(90, 730, 0).unwrap());
        assert_eq!(r.expire_after_secs(Resolution::Minute), Some(90 * 86_400));
        assert_eq!(r.expire_after_secs(Resolution::Day), None);
        assert_eq!(
            [Resolution::Minute, Resolution::Hour, Resolution::Day].map(|l| r.describe(l)),
            ["90 days", "2 years", "for ever"]
        );
        // Thousands separated, like every figure on the pages.
        let long = Retention::parse(1000, 1000, 0).unwrap();
        assert_eq!(long.describe(Resolution::Hour), "1,000 days");
    }

    #[test]
    fn zero_means_for_ever() {
        let r = Retention::parse(0, 0, 0).unwrap();
        assert!(Resolution::ALL.iter().all(|l| r.kept(*l).is_none()));
    }

    #[test]
    fn a_level_is_kept_at_most_100_years() {
        assert_eq!(
            Retention::parse(36_501, 0, 0),
            Err(RetentionError::TooLong("minute"))
        );
        assert!(Retention::parse(36_500, 36_500, 36_500).is_ok());
    }

    #[test]
    fn a_coarser_level_is_kept_at_least_as_long_as_a_finer_one() {
        assert_eq!(
            Retention::parse(90, 30, 0),
            Err(RetentionError::CoarserShorter {
                coarser: "hour",
                finer: "minute"
            })
        );
        assert_eq!(
            Retention::parse(0, 730, 0).unwrap_err(),
            RetentionError::CoarserShorter {
                coarser: "hour",
                finer: "minute"
            },
            "minutes for ever need hours for ever"
        );
        assert_eq!(
            Retention::parse(1, 2, 1).unwrap_err(),
            RetentionError::CoarserShorter {
                coarser: "day",
                finer: "hour"
            }
        );
        assert!(Retention::parse(1, 1, 1).is_ok());
    }
}

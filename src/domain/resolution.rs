//! The three levels of the time series: a bucket per minute (a slot per
//! second), per hour (a slot per minute) and per day (a slot per hour).
//! Storage keeps one collection per level and reports show a series at
//! one of them, so both use this one type.

use chrono::{DateTime, TimeDelta, Timelike, Utc};

/// Ordered from finest to coarsest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resolution {
    Minute,
    Hour,
    Day,
}

impl Resolution {
    pub const ALL: [Resolution; 3] = [Resolution::Minute, Resolution::Hour, Resolution::Day];

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == raw)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }

    /// The bucket collection of this level.
    pub fn collection(self) -> &'static str {
        match self {
            Self::Minute => "views_minute",
            Self::Hour => "views_hour",
            Self::Day => "views_day",
        }
    }

    /// The sub-document of a bucket holding one counter per slot.
    pub fn slots_field(self) -> &'static str {
        match self {
            Self::Minute => "seconds",
            Self::Hour => "minutes",
            Self::Day => "hours",
        }
    }

    pub fn slot_count(self) -> usize {
        match self {
            Self::Minute | Self::Hour => 60,
            Self::Day => 24,
        }
    }

    /// How long one bucket (one point of a series) is.
    pub fn step(self) -> TimeDelta {
        match self {
            Self::Minute => TimeDelta::minutes(1),
            Self::Hour => TimeDelta::hours(1),
            Self::Day => TimeDelta::days(1),
        }
    }

    /// The start of the bucket holding `t` (UTC). Whole seconds, so it is
    /// defined for every `DateTime` (chrono's `duration_trunc` fails past
    /// the nanosecond range, years beyond 1677 to 2262); at the very first
    /// representable instants it answers `t` itself.
    pub fn floor(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let step = self.step().num_seconds();
        let start = t.timestamp().div_euclid(step) * step;
        DateTime::from_timestamp(start, 0).unwrap_or(t)
    }

    /// The end of the bucket holding `t`, or `t` when it is a start; `t`
    /// itself at the last representable instants.
    pub fn ceil(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let f = self.floor(t);
        if f == t {
            t
        } else {
            f.checked_add_signed(self.step()).unwrap_or(t)
        }
    }

    /// Whether `t` is on a bucket boundary of this resolution.
    pub fn aligned(self, t: DateTime<Utc>) -> bool {
        self.floor(t) == t
    }

    /// Which slot of its bucket `t` falls in: the second of the minute, the
    /// minute of the hour, or the hour of the day.
    pub fn slot(self, t: DateTime<Utc>) -> usize {
        (match self {
            Self::Minute => t.second(),
            Self::Hour => t.minute(),
            Self::Day => t.hour(),
        }) as usize
    }

    /// The finest resolution that shows `span` in a readable number of points.
    pub fn auto(span: TimeDelta) -> Self {
        if span <= TimeDelta::hours(6) {
            Self::Minute
        } else if span <= TimeDelta::days(10) {
            Self::Hour
        } else {
            Self::Day
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn names_parse_back() {
        for r in Resolution::ALL {
            assert_eq!(Resolution::parse(r.as_str()), Some(r));
        }
        assert_eq!(Resolution::parse("second"), None);
        assert_eq!(Resolution::parse("Minute"), None);
    }

    #[test]
    fn a_time_maps_to_its_bucket_and_slot() {
        let t = Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap();
        let at = |h, m, s| Utc.with_ymd_and_hms(2026, 11, 22, h, m, s).unwrap();
        assert_eq!(Resolution::Minute.floor(t), at(10, 1, 0));
        assert_eq!(Resolution::Minute.slot(t), 7);
        assert_eq!(Resolution::Hour.floor(t), at(10, 0, 0));
        assert_eq!(Resolution::Hour.slot(t), 1);
        assert_eq!(Resolution::Hour.ceil(t), at(11, 0, 0));
        assert_eq!(Resolution::Day.floor(t), at(0, 0, 0));
        assert_eq!(Resolution::Day.slot(t), 10);
        assert!(Resolution::Minute.aligned(at(10, 1, 0)));
        assert!(!Resolution::Hour.aligned(at(10, 1, 0)));
    }

    #[test]
    fn any_instant_floors_without_panicking() {
        // `duration_trunc` panicked past 2262.
        let far = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 30).unwrap();
        assert_eq!(
            Resolution::Minute.floor(far),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 0).unwrap()
        );
        assert_eq!(
            Resolution::Day.floor(far),
            Utc.with_ymd_and_hms(9999, 12, 31, 0, 0, 0).unwrap()
        );
        let before_1970 = Utc.with_ymd_and_hms(1969, 12, 31, 23, 59, 59).unwrap();
        assert_eq!(
            Resolution::Hour.floor(before_1970),
            Utc.with_ymd_and_hms(1969, 12, 31, 23, 0, 0).unwrap()
        );
        let with_nanos =
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + TimeDelta::nanoseconds(5);
        assert_eq!(
            Resolution::Minute.floor(with_nanos),
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
        );
        for r in Resolution::ALL {
            assert_eq!(r.floor(DateTime::<Utc>::MIN_UTC), DateTime::<Utc>::MIN_UTC);
            assert!(r.ceil(DateTime::<Utc>::MAX_UTC) <= DateTime::<Utc>::MAX_UTC);
        }
    }
}

//! A date or a minute as people type it in a query string: `YYYY-MM-DD`
//! or `YYYY-MM-DDTHH:MM`, and nothing else. chrono on its own also takes
//! `2026-1-5`, `+2026-01-05` or a year 99999; the API document gives the
//! format as a pattern, so what is accepted here is exactly what the
//! pattern accepts.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime};

/// Years a typed date may have: far enough either way for any report,
/// bounded so that every date has a next day and a local midnight.
pub const YEARS: std::ops::RangeInclusive<i32> = 2000..=2200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WallClock {
    Date(NaiveDate),
    Minute(NaiveDateTime),
}

impl WallClock {
    /// `None` unless `raw` is exactly `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM`
    /// (ASCII digits, no sign, padding or spaces), a real calendar day in
    /// [`YEARS`].
    pub fn parse(raw: &str) -> Option<Self> {
        let shaped = matches!(raw.len(), 10 | 16)
            && raw.bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                10 => b == b'T',
                13 => b == b':',
                _ => b.is_ascii_digit(),
            });
        if !shaped {
            return None;
        }
        let number = |range: std::ops::Range<usize>| raw[range].parse::<u32>().ok();
        let date = NaiveDate::from_ymd_opt(
            i32::try_from(number(0..4)?).ok()?,
            number(5..7)?,
            number(8..10)?,
        )
        .filter(|d| YEARS.contains(&d.year()))?;
        if raw.len() == 10 {
            return Some(WallClock::Date(date));
        }
        let time = NaiveTime::from_hms_opt(number(11..13)?, number(14..16)?, 0)?;
        Some(WallClock::Minute(date.and_time(time)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_documented_shapes_are_read() {
        let date = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(
            WallClock::parse("2026-11-05"),
            Some(WallClock::Date(date(2026, 11, 5)))
        );
        assert_eq!(
            WallClock::parse("2026-11-05T23:59"),
            Some(WallClock::Minute(
                date(2026, 11, 5).and_hms_opt(23, 59, 0).unwrap()
            ))
        );
        for (raw, why) in [
            ("2026-1-05", "unpadded month"),
            ("+2026-11-05", "sign"),
            ("2026-11-05 ", "trailing space"),
            (" 2026-11-05", "leading space"),
            ("2026-11-05T9:30", "unpadded hour"),
            ("2026-11-05T09:30:00", "seconds"),
            ("2026-11-05t09:30", "lower-case t"),
            ("2026-02-29", "not a leap year"),
            ("2026-04-31", "April has 30 days"),
            ("2026-11-05T24:00", "hour 24"),
            ("2026-11-05T10:60", "minute 60"),
            ("1999-12-31", "before 2000"),
            ("2201-01-01", "after 2200"),
            ("2100-02-29", "2100 is not a leap year"),
            ("２026-11-05", "a non-ASCII digit"),
            ("", "empty"),
        ] {
            assert_eq!(WallClock::parse(raw), None, "{why}: {raw:?}");
        }
        for leap in ["2000-02-29", "2024-02-29", "2196-02-29"] {
            assert!(WallClock::parse(leap).is_some(), "{leap}");
        }
        assert!(WallClock::parse("2200-12-31T23:59").is_some());
    }
}

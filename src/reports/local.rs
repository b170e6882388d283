//! Local time: where a site's buckets of minutes, hours, days and months
//! start, in its IANA zone, as UTC instants.
//!
//! Minutes are the same everywhere (every zone's offset is whole minutes).
//! A local hour starts where the local clock shows :00, which in a zone
//! with a :30 or :45 offset is inside a UTC hour. A local day starts at
//! local midnight and lasts 23, 24 or 25 hours around DST changes.

use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Timelike, Utc};
use chrono_tz::Tz;

use crate::domain::Resolution;

/// The instant local midnight of `date` starts. Where a DST change skips
/// midnight (some zones change at 00:00), the first instant of the date.
pub fn midnight(date: NaiveDate, tz: Tz) -> DateTime<Utc> {
    use chrono::offset::LocalResult;
    use chrono::TimeZone;
    for minutes in (0..=180).step_by(15) {
        let t = date.and_hms_opt(0, 0, 0).expect("midnight") + TimeDelta::minutes(minutes);
        match tz.from_local_datetime(&t) {
            LocalResult::Single(l) => return l.with_timezone(&Utc),
            LocalResult::Ambiguous(first, _) => return first.with_timezone(&Utc),
            LocalResult::None => continue,
        }
    }
    date.and_hms_opt(0, 0, 0).expect("midnight").and_utc()
}

/// The local date of an instant.
pub fn date_of(t: DateTime<Utc>, tz: Tz) -> NaiveDate {
    t.with_timezone(&tz).date_naive()
}

/// The start of the local bucket of `res` holding `t`.
pub fn floor(res: Resolution, t: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let minute = Resolution::Minute.floor(t);
    match res {
        Resolution::Minute => minute,
        Resolution::Hour => {
            let local = minute.with_timezone(&tz);
            minute - TimeDelta::minutes(i64::from(local.minute()))
        }
        Resolution::Day => midnight(date_of(t, tz), tz),
    }
}

/// The start of the local bucket after the one starting at `start`.
pub fn next(res: Resolution, start: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    match res {
        Resolution::Minute | Resolution::Hour => {
            let guess = start + res.step();
            // A 30-minute DST change (Lord Howe) moves the local hour.
            let f = floor(res, guess, tz);
            if f > start {
                f
            } else {
                guess
            }
        }
        Resolution::Day => {
            let date = date_of(start, tz);
            midnight(date.succ_opt().unwrap_or(date), tz)
        }
    }
}

/// The first instant of the local month holding `t`, and of the next one.
pub fn month_of(t: DateTime<Utc>, tz: Tz) -> (DateTime<Utc>, DateTime<Utc>) {
    let d = date_of(t, tz);
    let first = NaiveDate::from_ymd_opt(d.year(), d.month(), 1).expect("first of month");
    let next = if d.month() == 12 {
        NaiveDate::from_ymd_opt(d.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(d.year(), d.month() + 1, 1)
    }
    .expect("first of next month");
    (midnight(first, tz), midnight(next, tz))
}

/// The starts of every local bucket of `res` from the one holding `from`
/// up to (not including) `to`.
pub fn starts(
    res: Resolution,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    tz: Tz,
) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut at = floor(res, from, tz);
    while at < to {
        out.push(at);
        at = next(res, at, tz);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, m, 0).unwrap()
    }

    #[test]
    fn berlin_days_have_23_and_25_hours_at_the_dst_changes() {
        let tz = chrono_tz::Europe::Berlin;
        // 2026-03-29: clocks go 02:00 -> 03:00 (CET -> CEST).
        let day = starts(
            Resolution::Day,
            utc(2026, 3, 28, 23, 0),
            utc(2026, 3, 30, 22, 0),
            tz,
        );
        assert_eq!(day, vec![utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 22, 0)]);
        assert_eq!(day[1] - day[0], TimeDelta::hours(23));
        // 2026-10-25: 03:00 -> 02:00 (CEST -> CET): 25 hours.
        let a = floor(Resolution::Day, utc(2026, 10, 25, 12, 0), tz);
        assert_eq!(a, utc(2026, 10, 24, 22, 0));
        assert_eq!(next(Resolution::Day, a, tz) - a, TimeDelta::hours(25));
        // Local hours on the 25-hour day: 02:00 happens twice, 25 of them.
        let hours = starts(Resolution::Hour, a, next(Resolution::Day, a, tz), tz);
        assert_eq!(hours.len(), 25);
    }

    #[test]
    fn kolkata_and_kathmandu_hours_and_days_start_inside_utc_hours() {
        let kolkata = chrono_tz::Asia::Kolkata;
        assert_eq!(
            floor(Resolution::Day, utc(2026, 11, 22, 10, 1), kolkata),
            utc(2026, 11, 21, 18, 30)
        );
        assert_eq!(
            floor(Resolution::Hour, utc(2026, 11, 22, 10, 1), kolkata),
            utc(2026, 11, 22, 9, 30)
        );
        let kathmandu = chrono_tz::Asia::Kathmandu;
        assert_eq!(
            floor(Resolution::Hour, utc(2026, 11, 22, 10, 1), kathmandu),
            utc(2026, 11, 22, 9, 15)
        );
        assert_eq!(
            floor(Resolution::Day, utc(2026, 11, 22, 10, 1), kathmandu),
            utc(2026, 11, 21, 18, 15)
        );
    }

    #[test]
    fn months_start_at_local_midnight_of_the_first() {
        let (a, b) = month_of(utc(2026, 3, 15, 0, 0), chrono_tz::Europe::Berlin);
        assert_eq!((a, b), (utc(2026, 2, 28, 23, 0), utc(2026, 3, 31, 22, 0)));
        let (a, b) = month_of(utc(2026, 12, 31, 23, 30), chrono_tz::UTC);
        assert_eq!((a, b), (utc(2026, 12, 1, 0, 0), utc(2027, 1, 1, 0, 0)));
    }
}

//! Reports never promise what retention removed: a period that would read
//! buckets of a level older than that level's retention is read one level
//! coarser instead (minutes → hours → days), widened to whole buckets of
//! that level, and the page says why.

use chrono::{DateTime, Utc};

use super::Period;
use crate::domain::{Resolution, Retention};

/// Why a period is shown coarser than asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coarsened {
    /// The level whose buckets have expired for part of the range.
    pub expired: Resolution,
    pub kept: String,
    pub shown: Resolution,
}

impl std::fmt::Display for Coarsened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Shown by {}: {} buckets are kept for {}, and this range starts before that.",
            self.shown.as_str(),
            self.expired.as_str(),
            self.kept
        )
    }
}

/// `period` as it can be read under `retention` at `now`.
pub fn keep(
    period: Period,
    retention: &Retention,
    now: DateTime<Utc>,
) -> (Period, Option<Coarsened>) {
    let mut period = period;
    let mut note = None;
    for (level, coarser) in [
        (Resolution::Minute, Resolution::Hour),
        (Resolution::Hour, Resolution::Day),
    ] {
        let Some(kept) = retention.kept(level) else {
            continue;
        };
        if period.read == level && period.from < now - kept {
            let resolution = period.resolution.max(coarser);
            period = Period {
                from: coarser.floor(period.from),
                to: coarser.ceil(period.to),
                resolution,
                read: coarser,
                preset: period.preset,
                zone: period.zone,
            };
            note = Some(Coarsened {
                expired: level,
                kept: retention.describe(level),
                shown: resolution,
            });
        }
    }
    (period, note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::RangeQuery;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap()
    }

    fn custom(from: &str, to: &str, res: &str) -> Period {
        Period::resolve(
            &RangeQuery {
                range: Some("custom".into()),
                from: Some(from.into()),
                to: Some(to.into()),
                res: Some(res.into()),
            },
            now(),
        )
        .unwrap()
    }

    #[test]
    fn a_range_within_the_minute_retention_is_unchanged() {
        let p = custom("2026-11-20T09:00", "2026-11-20T10:30", "minute");
        assert_eq!(keep(p, &Retention::default(), now()), (p, None));
    }

    #[test]
    fn minutes_beyond_their_retention_are_shown_by_hour_and_say_why() {
        let p = custom("2026-08-01T09:30", "2026-08-01T10:30", "minute");
        let (kept, note) = keep(p, &Retention::default(), now());
        assert_eq!(
            (kept.resolution, kept.read),
            (Resolution::Hour, Resolution::Hour)
        );
        assert_eq!(
            kept.from,
            Utc.with_ymd_and_hms(2026, 8, 1, 9, 0, 0).unwrap()
        );
        assert_eq!(kept.to, Utc.with_ymd_and_hms(2026, 8, 1, 11, 0, 0).unwrap());
        assert_eq!(
            note.unwrap().to_string(),
            "Shown by hour: minute buckets are kept for 90 days, and this range starts before that."
        );
    }

    #[test]
    fn a_coarser_shown_resolution_read_by_minute_is_read_by_hour() {
        // Shown by day from 09:30: read by hour (the cut hours' minutes
        // come from the hour buckets' slots).
        let p = custom("2026-08-01T09:30", "2026-08-03T10:30", "day");
        assert_eq!(p.read, Resolution::Hour);
        // Nothing there reads minute buckets: kept as asked.
        assert_eq!(keep(p, &Retention::default(), now()), (p, None));
    }

    #[test]
    fn hours_beyond_their_retention_are_shown_by_day() {
        let p = custom("2023-01-01", "2023-01-03", "hour");
        let (kept, note) = keep(p, &Retention::default(), now());
        assert_eq!(
            (kept.resolution, kept.read),
            (Resolution::Day, Resolution::Day)
        );
        assert_eq!(note.unwrap().expired, Resolution::Hour);
        // Minutes that old go all the way to days.
        let p = custom("2023-01-01T10:00", "2023-01-01T11:00", "minute");
        let (kept, note) = keep(p, &Retention::default(), now());
        assert_eq!(kept.read, Resolution::Day);
        assert_eq!(note.unwrap().expired, Resolution::Hour);
    }

    #[test]
    fn nothing_changes_when_everything_is_kept() {
        let p = custom("2023-01-01T10:00", "2023-01-01T11:00", "minute");
        let forever = Retention::parse(0, 0, 0).unwrap();
        assert_eq!(keep(p, &forever, now()), (p, None));
    }
}

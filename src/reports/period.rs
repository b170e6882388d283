//! Which time range a report shows, at which resolution. All times UTC.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use serde::Deserialize;

pub use crate::domain::Resolution;

/// Most points one series may have: a chart wider than this says nothing
/// more, and it bounds the work one request can ask for.
pub const MAX_POINTS: i64 = 1500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    LastHour,
    Last24Hours,
    Last7Days,
    Last30Days,
    Last12Months,
}

impl Preset {
    pub const ALL: [Preset; 5] = [
        Preset::LastHour,
        Preset::Last24Hours,
        Preset::Last7Days,
        Preset::Last30Days,
        Preset::Last12Months,
    ];

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.key() == raw)
    }

    pub fn key(self) -> &'static str {
        match self {
            Preset::LastHour => "1h",
            Preset::Last24Hours => "24h",
            Preset::Last7Days => "7d",
            Preset::Last30Days => "30d",
            Preset::Last12Months => "12mo",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Preset::LastHour => "Last hour",
            Preset::Last24Hours => "Last 24 hours",
            Preset::Last7Days => "Last 7 days",
            Preset::Last30Days => "Last 30 days",
            Preset::Last12Months => "Last 12 months",
        }
    }

    fn span_and_resolution(self) -> (TimeDelta, Resolution) {
        match self {
            Preset::LastHour => (TimeDelta::hours(1), Resolution::Minute),
            Preset::Last24Hours => (TimeDelta::hours(24), Resolution::Hour),
            Preset::Last7Days => (TimeDelta::days(7), Resolution::Hour),
            Preset::Last30Days => (TimeDelta::days(30), Resolution::Day),
            Preset::Last12Months => (TimeDelta::days(365), Resolution::Day),
        }
    }
}

/// The query-string controls every report page shares.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RangeQuery {
    /// A preset key (`1h`, `24h`, `7d`, `30d`, `12mo`) or `custom`.
    pub range: Option<String>,
    /// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM`, UTC; for `custom`.
    pub from: Option<String>,
    pub to: Option<String>,
    /// `auto`, `minute`, `hour` or `day`.
    pub res: Option<String>,
}

/// Said to the user in sentence case, without parameter names: the form
/// shows the message next to the field it is about ([`PeriodError::field`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeriodError {
    #[error("Unknown range “{0}”: choose a preset or a custom range.")]
    UnknownRange(String),
    #[error("Unknown resolution “{0}”: choose auto, minute, hour or day.")]
    UnknownResolution(String),
    #[error("The {} must be a UTC date (YYYY-MM-DD) or date and time (YYYY-MM-DDTHH:MM) between the years 2000 and 2200.", if *.0 == "from" { "start" } else { "end" })]
    BadTime(&'static str),
    #[error("A custom range needs both a start and an end.")]
    MissingBound,
    #[error("The end must be after the start.")]
    Empty,
    #[error("That is {} points by {resolution}, more than {}: choose a coarser resolution or a shorter range.", crate::web::fmt::thousands(points), crate::web::fmt::thousands(&MAX_POINTS))]
    TooManyPoints {
        points: i64,
        resolution: &'static str,
    },
}

impl PeriodError {
    /// The form field the error is about: `from`, `to`, `res` or `range`.
    pub fn field(&self) -> &'static str {
        match self {
            PeriodError::UnknownRange(_) => "range",
            PeriodError::UnknownResolution(_) | PeriodError::TooManyPoints { .. } => "res",
            PeriodError::BadTime(which) => which,
            PeriodError::MissingBound => "from",
            PeriodError::Empty => "to",
        }
    }
}

/// Most buckets of the read resolution a period may need when it is shown
/// coarser than it is read (see [`Period::read`]).
const MAX_READ_POINTS: i64 = 20 * MAX_POINTS;

/// A half-open range `[from, to)`, shown in buckets of `resolution` and read
/// from the buckets of `read`.
///
/// `from` and `to` are aligned to `read`, which is `resolution` or finer:
/// "last 24 hours by day" reads the 24 hour buckets of the range and adds
/// them up per day, rather than widening the range to two whole days. The
/// first and last shown bucket may then cover only part of their day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub resolution: Resolution,
    pub read: Resolution,
    /// The preset it came from, if any.
    pub preset: Option<Preset>,
}

impl Period {
    pub fn resolve(q: &RangeQuery, now: DateTime<Utc>) -> Result<Self, PeriodError> {
        let res = match q.res.as_deref().filter(|r| !r.is_empty()) {
            None | Some("auto") => None,
            Some(raw) => Some(
                Resolution::parse(raw).ok_or_else(|| PeriodError::UnknownResolution(raw.into()))?,
            ),
        };
        let range = q
            .range
            .as_deref()
            .filter(|r| !r.is_empty())
            .unwrap_or("24h");
        let (from, to, auto, preset) = if range == "custom" {
            let from = parse_time(q.from.as_deref(), "from", false)?;
            let to = parse_time(q.to.as_deref(), "to", true)?;
            if to <= from {
                return Err(PeriodError::Empty);
            }
            (from, to, Resolution::auto(to - from), None)
        } else {
            let preset =
                Preset::parse(range).ok_or_else(|| PeriodError::UnknownRange(range.into()))?;
            let (span, natural) = preset.span_and_resolution();
            // The current, partial bucket is included: "last hour" ends now.
            let to = natural.floor(now) + natural.step();
            (to - span, to, natural, Some(preset))
        };
        let resolution = res.unwrap_or(auto);
        // Read at the coarsest resolution, up to the one shown, whose
        // buckets fit the range exactly; widen the range to whole shown
        // buckets only where that would mean reading too many buckets.
        let read = [Resolution::Day, Resolution::Hour, Resolution::Minute]
            .into_iter()
            .find(|r| *r <= resolution && r.aligned(from) && r.aligned(to))
            .unwrap_or(Resolution::Minute);
        let exact = Period {
            from,
            to,
            resolution,
            read,
            preset,
        };
        let period = if read == resolution || exact.read_point_count() <= MAX_READ_POINTS {
            exact
        } else {
            Period {
                from: resolution.floor(from),
                to: resolution.ceil(to),
                resolution,
                read: resolution,
                preset,
            }
        };
        let points = period.point_count();
        if points > MAX_POINTS {
            return Err(PeriodError::TooManyPoints {
                points,
                resolution: resolution.as_str(),
            });
        }
        Ok(period)
    }

    /// A period read and shown at one resolution (`from`, `to` aligned).
    pub fn aligned(from: DateTime<Utc>, to: DateTime<Utc>, resolution: Resolution) -> Self {
        Period {
            from,
            to,
            resolution,
            read: resolution,
            preset: None,
        }
    }

    pub fn span(&self) -> TimeDelta {
        self.to - self.from
    }

    /// Buckets shown: every bucket of `resolution` the range touches.
    pub fn point_count(&self) -> i64 {
        let first = self.resolution.floor(self.from);
        let end = self.resolution.ceil(self.to);
        (end - first).num_seconds() / self.resolution.step().num_seconds()
    }

    /// Buckets read from the collection of `read`.
    pub fn read_point_count(&self) -> i64 {
        self.span().num_seconds() / self.read.step().num_seconds()
    }

    /// The start of every bucket shown.
    pub fn points(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let first = self.resolution.floor(self.from);
        (0..self.point_count()).map(move |i| first + self.resolution.step() * i as i32)
    }

    /// The start of every bucket read.
    pub fn read_points(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        (0..self.read_point_count()).map(move |i| self.from + self.read.step() * i as i32)
    }

    /// Whether the shown bucket starting at `at` covers only part of its
    /// time: cut by the range's edges, or not over at `now`.
    pub fn is_partial(&self, at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        let end = at + self.resolution.step();
        at < self.from || end > self.to || end > now
    }

    /// Where the complete buckets of the range end at `now`: the start of
    /// the read bucket still counting, or `to` once the range is over.
    /// The change against the previous period compares only this much of
    /// both (see [`Period::previous`]).
    pub fn complete_until(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.read.floor(now).clamp(self.from, self.to)
    }

    /// The period of the same length just before this one.
    pub fn previous(&self) -> Period {
        Period {
            from: self.from - self.span(),
            to: self.from,
            ..*self
        }
    }
}

fn parse_time(
    raw: Option<&str>,
    which: &'static str,
    end: bool,
) -> Result<DateTime<Utc>, PeriodError> {
    let raw = raw
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .ok_or(PeriodError::MissingBound)?;
    if raw.len() > 32 {
        return Err(PeriodError::BadTime(which));
    }
    let t = if let Ok(date) = NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
        // A date as `to` means the whole of that day.
        let day = if end {
            date.succ_opt().ok_or(PeriodError::BadTime(which))?
        } else {
            date
        };
        day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
    } else {
        NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M")
            .map_err(|_| PeriodError::BadTime(which))?
            .and_utc()
    };
    let year = chrono::Datelike::year(&t);
    if !(2000..=2200).contains(&year) {
        return Err(PeriodError::BadTime(which));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap()
    }

    fn q(range: &str) -> RangeQuery {
        RangeQuery {
            range: Some(range.into()),
            ..Default::default()
        }
    }

    fn at(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap()
    }

    #[test]
    fn presets_end_with_the_current_bucket() {
        let p = Period::resolve(&q("1h"), now()).unwrap();
        assert_eq!(
            (p.from, p.to, p.resolution),
            (at(22, 9, 2), at(22, 10, 2), Resolution::Minute)
        );
        assert_eq!(p.point_count(), 60);
        let p = Period::resolve(&q("24h"), now()).unwrap();
        assert_eq!(
            (p.from, p.to, p.resolution),
            (at(21, 11, 0), at(22, 11, 0), Resolution::Hour)
        );
        let p = Period::resolve(&q("30d"), now()).unwrap();
        assert_eq!(
            (p.from, p.to, p.resolution),
            (
                at(23, 0, 0) - TimeDelta::days(30),
                at(23, 0, 0),
                Resolution::Day
            )
        );
        assert_eq!(p.point_count(), 30);
        assert_eq!(
            Period::resolve(&q("12mo"), now()).unwrap().point_count(),
            365
        );
        assert_eq!(
            Period::resolve(&RangeQuery::default(), now())
                .unwrap()
                .preset,
            Some(Preset::Last24Hours)
        );
    }

    #[test]
    fn custom_dates_cover_whole_days_and_pick_a_resolution() {
        let mut r = q("custom");
        r.from = Some("2026-11-01".into());
        r.to = Some("2026-11-02".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!(
            (p.from, p.to, p.resolution),
            (at(1, 0, 0), at(3, 0, 0), Resolution::Hour)
        );
        r.from = Some("2026-11-22T09:00".into());
        r.to = Some("2026-11-22T10:30".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!((p.point_count(), p.resolution), (90, Resolution::Minute));
    }

    #[test]
    fn a_coarser_resolution_keeps_the_range() {
        // Custom 09:30-10:30 by hour: read by minute, shown as two partial
        // hours, not widened to 09:00-11:00.
        let mut r = q("custom");
        r.from = Some("2026-11-22T09:30".into());
        r.to = Some("2026-11-22T10:30".into());
        r.res = Some("hour".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!((p.from, p.to), (at(22, 9, 30), at(22, 10, 30)));
        assert_eq!(
            (p.read, p.resolution),
            (Resolution::Minute, Resolution::Hour)
        );
        assert_eq!(
            p.points().collect::<Vec<_>>(),
            vec![at(22, 9, 0), at(22, 10, 0)]
        );
        assert!(p.is_partial(at(22, 9, 0), now()) && p.is_partial(at(22, 10, 0), now()));
        // The preset "last 24 hours" by day keeps its 24 hours.
        let mut r = q("24h");
        let by_hour = Period::resolve(&r, now()).unwrap();
        r.res = Some("day".into());
        let by_day = Period::resolve(&r, now()).unwrap();
        assert_eq!((by_day.from, by_day.to), (by_hour.from, by_hour.to));
        assert_eq!((by_day.read, by_day.point_count()), (Resolution::Hour, 2));
        // A finer resolution reads the finer buckets of the same range.
        r.res = Some("minute".into());
        let by_minute = Period::resolve(&r, now()).unwrap();
        assert_eq!((by_minute.from, by_minute.to), (by_hour.from, by_hour.to));
        assert_eq!(by_minute.read, Resolution::Minute);
    }

    #[test]
    fn only_complete_buckets_are_compared() {
        // At 10:01:07, "last 24 hours" runs 11:00 yesterday to 11:00 today;
        // the hour 10:00-11:00 is still counting.
        let p = Period::resolve(&q("24h"), now()).unwrap();
        assert_eq!(p.complete_until(now()), at(22, 10, 0));
        assert!(p.is_partial(at(22, 10, 0), now()));
        assert!(!p.is_partial(at(22, 9, 0), now()));
        // A range that is over is complete.
        let mut r = q("custom");
        r.from = Some("2026-11-01".into());
        r.to = Some("2026-11-02".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!(p.complete_until(now()), p.to);
        // A range in the future has no complete bucket.
        r.from = Some("2026-12-01".into());
        r.to = Some("2026-12-02".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!(p.complete_until(now()), p.from);
    }

    #[test]
    fn previous_period_has_the_same_length() {
        let p = Period::resolve(&q("7d"), now()).unwrap();
        let prev = p.previous();
        assert_eq!(prev.to, p.from);
        assert_eq!(prev.span(), p.span());
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        assert_eq!(
            Period::resolve(&q("2y"), now()),
            Err(PeriodError::UnknownRange("2y".into()))
        );
        let mut r = q("24h");
        r.res = Some("second".into());
        assert!(matches!(
            Period::resolve(&r, now()),
            Err(PeriodError::UnknownResolution(_))
        ));
        // 24 hours by minute is 1440 points: allowed; 12 months is not.
        r.res = Some("minute".into());
        assert_eq!(Period::resolve(&r, now()).unwrap().point_count(), 1440);
        let mut long = q("12mo");
        long.res = Some("minute".into());
        assert!(matches!(
            Period::resolve(&long, now()),
            Err(PeriodError::TooManyPoints { .. })
        ));
        let mut c = q("custom");
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::MissingBound));
        c.from = Some("2026-11-02".into());
        c.to = Some("2026-11-01".into());
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::Empty));
        c.to = Some("yesterday".into());
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::BadTime("to")));
        c.to = Some("1900-01-01".into());
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::BadTime("to")));
    }
}

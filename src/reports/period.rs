//! Which time range a report shows, at which resolution. All times UTC.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, Utc};
use serde::Deserialize;

use crate::storage::Granularity;

/// Most points one series may have: a chart wider than this says nothing
/// more, and it bounds the work one request can ask for.
pub const MAX_POINTS: i64 = 1500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Minute,
    Hour,
    Day,
}

impl Resolution {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "minute" => Some(Self::Minute),
            "hour" => Some(Self::Hour),
            "day" => Some(Self::Day),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }

    pub fn granularity(self) -> Granularity {
        match self {
            Self::Minute => Granularity::Minute,
            Self::Hour => Granularity::Hour,
            Self::Day => Granularity::Day,
        }
    }

    pub fn step(self) -> TimeDelta {
        self.granularity().bucket_length()
    }

    pub fn floor(self, t: DateTime<Utc>) -> DateTime<Utc> {
        self.granularity().bucket_start(t)
    }

    pub fn ceil(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let f = self.floor(t);
        if f == t {
            t
        } else {
            f + self.step()
        }
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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeriodError {
    #[error("unknown range {0:?}: use 1h, 24h, 7d, 30d, 12mo or custom")]
    UnknownRange(String),
    #[error("unknown resolution {0:?}: use auto, minute, hour or day")]
    UnknownResolution(String),
    #[error("{0} must be a UTC date (YYYY-MM-DD) or date and time (YYYY-MM-DDTHH:MM)")]
    BadTime(&'static str),
    #[error("a custom range needs both from and to")]
    MissingBound,
    #[error("the range must end after it starts")]
    Empty,
    #[error("{points} points at {resolution} resolution is more than {MAX_POINTS}; choose a coarser resolution or a shorter range")]
    TooManyPoints {
        points: i64,
        resolution: &'static str,
    },
}

/// A half-open range `[from, to)` aligned to its resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub resolution: Resolution,
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
        let period = Period {
            from: resolution.floor(from),
            to: resolution.ceil(to),
            resolution,
            preset,
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

    pub fn span(&self) -> TimeDelta {
        self.to - self.from
    }

    pub fn point_count(&self) -> i64 {
        self.span().num_seconds() / self.resolution.step().num_seconds()
    }

    /// The start of every bucket in the period.
    pub fn points(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        (0..self.point_count()).map(move |i| self.from + self.resolution.step() * i as i32)
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
    fn a_chosen_resolution_aligns_the_edges() {
        let mut r = q("custom");
        r.from = Some("2026-11-22T09:30".into());
        r.to = Some("2026-11-22T10:30".into());
        r.res = Some("hour".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!((p.from, p.to), (at(22, 9, 0), at(22, 11, 0)));
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

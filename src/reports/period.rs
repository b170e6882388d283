//! Which time range a report shows, at which resolution, in the site's
//! zone. Instants are UTC; bucket boundaries are local (see `local`).

use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use chrono_tz::Tz;
use serde::Deserialize;

use super::local;
use super::wall_clock::WallClock;

pub use crate::domain::Resolution;

/// Most points one series may have: a chart wider than this says nothing
/// more, and it bounds the work one request can ask for.
pub const MAX_POINTS: i64 = 1500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    LastHour,
    Last24Hours,
    Today,
    Yesterday,
    Last7Days,
    Last30Days,
    ThisMonth,
    LastMonth,
    Last12Months,
}

impl Preset {
    pub const ALL: [Preset; 9] = [
        Preset::LastHour,
        Preset::Last24Hours,
        Preset::Today,
        Preset::Yesterday,
        Preset::Last7Days,
        Preset::Last30Days,
        Preset::ThisMonth,
        Preset::LastMonth,
        Preset::Last12Months,
    ];

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.key() == raw)
    }

    /// Every preset's key, for an error to list: "1h, 24h, … or 12mo".
    pub fn keys() -> String {
        let keys: Vec<&str> = Self::ALL.iter().map(|p| p.key()).collect();
        let (last, rest) = keys.split_last().expect("presets");
        format!("{} or {last}", rest.join(", "))
    }

    pub fn key(self) -> &'static str {
        match self {
            Preset::LastHour => "1h",
            Preset::Last24Hours => "24h",
            Preset::Today => "today",
            Preset::Yesterday => "yesterday",
            Preset::Last7Days => "7d",
            Preset::Last30Days => "30d",
            Preset::ThisMonth => "month",
            Preset::LastMonth => "lastmonth",
            Preset::Last12Months => "12mo",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Preset::LastHour => "Last hour",
            Preset::Last24Hours => "Last 24 hours",
            Preset::Today => "Today",
            Preset::Yesterday => "Yesterday",
            Preset::Last7Days => "Last 7 days",
            Preset::Last30Days => "Last 30 days",
            Preset::ThisMonth => "This month",
            Preset::LastMonth => "Last month",
            Preset::Last12Months => "Last 12 months",
        }
    }

    /// The range at `now` in `tz`, and its natural resolution. Presets
    /// that run to now end with the current (partial) bucket; day-based
    /// ones start and end at local midnight.
    fn range(self, now: DateTime<Utc>, tz: Tz) -> (DateTime<Utc>, DateTime<Utc>, Resolution) {
        let today = local::date_of(now, tz);
        let days_back = |n: u64| {
            today
                .checked_sub_days(chrono::Days::new(n))
                .unwrap_or(today)
        };
        let tomorrow = local::midnight(today.succ_opt().unwrap_or(today), tz);
        let hour_end = local::next(
            Resolution::Hour,
            local::floor(Resolution::Hour, now, tz),
            tz,
        );
        match self {
            Preset::LastHour => {
                let to = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
                (to - TimeDelta::hours(1), to, Resolution::Minute)
            }
            Preset::Last24Hours => (hour_end - TimeDelta::hours(24), hour_end, Resolution::Hour),
            Preset::Today => (local::midnight(today, tz), tomorrow, Resolution::Hour),
            Preset::Yesterday => (
                local::midnight(days_back(1), tz),
                local::midnight(today, tz),
                Resolution::Hour,
            ),
            // Calendar days like every day-based preset, so "last 7 days"
            // is the same figure on the dashboard and in the sites list
            // (the last 7 of its 30 days).
            Preset::Last7Days => (local::midnight(days_back(6), tz), tomorrow, Resolution::Day),
            Preset::Last30Days => (
                local::midnight(days_back(29), tz),
                tomorrow,
                Resolution::Day,
            ),
            Preset::ThisMonth => {
                let (first, next) = local::month_of(now, tz);
                (first, next, Resolution::Day)
            }
            Preset::LastMonth => {
                let (first, _) = local::month_of(now, tz);
                let (before, _) = local::month_of(first - TimeDelta::hours(1), tz);
                (before, first, Resolution::Day)
            }
            Preset::Last12Months => (
                local::midnight(days_back(364), tz),
                tomorrow,
                Resolution::Day,
            ),
        }
    }
}

/// The query-string controls every report page shares.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RangeQuery {
    /// A preset key (`1h`, `24h`, `7d`, `30d`, `12mo`) or `custom`.
    pub range: Option<String>,
    /// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM` in the site's zone; for `custom`.
    pub from: Option<String>,
    pub to: Option<String>,
    /// `auto`, `minute`, `hour` or `day`.
    pub res: Option<String>,
}

/// Said to the user in sentence case, without parameter names: the form
/// shows the message next to the field it is about ([`PeriodError::field`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeriodError {
    #[error("Unknown range “{0}”: choose {keys}, or custom (with a start and an end).", keys = Preset::keys())]
    UnknownRange(String),
    #[error("Unknown resolution “{0}”: choose auto, minute, hour or day.")]
    UnknownResolution(String),
    #[error("The {} must be a date (YYYY-MM-DD) or date and time (YYYY-MM-DDTHH:MM) between the years 2000 and 2200.", if *.0 == "from" { "start" } else { "end" })]
    BadTime(&'static str),
    /// Both `from` and `to` are malformed: both are marked.
    #[error("The start and the end must be dates (YYYY-MM-DD) or dates and times (YYYY-MM-DDTHH:MM) between the years 2000 and 2200.")]
    BadTimes,
    /// `from` or `to`, whichever is missing (`from` when both are, and
    /// then both are marked: [`PeriodError::fields`]).
    #[error("A custom range needs both a start and an end.")]
    MissingBound(&'static str),
    #[error("The end must be after the start.")]
    Empty,
    #[error("That is {} points by {resolution}, more than {}: choose a coarser resolution or a shorter range.", super::numbers::thousands(points), super::numbers::thousands(&MAX_POINTS))]
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
            PeriodError::BadTime(which) | PeriodError::MissingBound(which) => which,
            PeriodError::BadTimes => "from",
            PeriodError::Empty => "to",
        }
    }

    /// Every form field the error is about, so that a form marks them all
    /// at once: both ends when both are malformed or both missing.
    pub fn fields(&self, q: &RangeQuery) -> Vec<&'static str> {
        let given = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
        match self {
            PeriodError::BadTimes => vec!["from", "to"],
            PeriodError::MissingBound(_) if !given(&q.from) && !given(&q.to) => vec!["from", "to"],
            other => vec![other.field()],
        }
    }
}

/// A half-open range `[from, to)` of instants, shown in local buckets of
/// `resolution` in `zone`.
///
/// Figures are read as *units*: whole UTC hours where no bucket boundary
/// falls inside the hour (from the day buckets' `hours` slots: one document
/// per day), and minutes elsewhere (from the hour buckets' `minutes` slots):
/// the minute level when shown by minute, the edges of a range that starts
/// inside an hour, and the hours a local boundary cuts (`+05:30`: every
/// local midnight). Units are then added up into the local buckets, so a
/// local day is exact whether it has 23, 24 or 25 hours and wherever in a
/// UTC hour it starts, and a long range costs one document per day, not one
/// per hour. `read` is the coarsest unit (hour, or minute when shown by
/// minute): a bucket of it still counting is left out of the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub resolution: Resolution,
    pub read: Resolution,
    /// The preset it came from, if any.
    pub preset: Option<Preset>,
    pub zone: Tz,
}

impl Period {
    /// [`Period::resolve_in`] UTC.
    pub fn resolve(q: &RangeQuery, now: DateTime<Utc>) -> Result<Self, PeriodError> {
        Self::resolve_in(q, now, Tz::UTC)
    }

    pub fn resolve_in(q: &RangeQuery, now: DateTime<Utc>, zone: Tz) -> Result<Self, PeriodError> {
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
        let preset = match range {
            "custom" => None,
            _ => Some(Preset::parse(range).ok_or_else(|| PeriodError::UnknownRange(range.into()))?),
        };
        // Checked with a preset too, where they are unused: a malformed
        // value is a mistake whichever range it comes with.
        let (from, to) = match (
            parse_time(q.from.as_deref(), "from", false, zone),
            parse_time(q.to.as_deref(), "to", true, zone),
        ) {
            (Err(_), Err(_)) => return Err(PeriodError::BadTimes),
            (from, to) => (from?, to?),
        };
        let (from, to, auto) = match preset {
            None => {
                let from = from.ok_or(PeriodError::MissingBound("from"))?;
                let to = to.ok_or(PeriodError::MissingBound("to"))?;
                if to <= from {
                    return Err(PeriodError::Empty);
                }
                (from, to, Resolution::auto(to - from))
            }
            Some(preset) => preset.range(now, zone),
        };
        let resolution = res.unwrap_or(auto);
        let period = Period {
            from,
            to,
            resolution,
            read: if resolution == Resolution::Minute {
                Resolution::Minute
            } else {
                Resolution::Hour
            },
            preset,
            zone,
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

    /// A UTC period read and shown at one resolution (`from`, `to` aligned).
    pub fn aligned(from: DateTime<Utc>, to: DateTime<Utc>, resolution: Resolution) -> Self {
        Self::aligned_in(from, to, resolution, Tz::UTC)
    }

    /// The last hour by minute, up to the end of the running minute: the
    /// page report's "last hour" panel and `realtime.csv`.
    pub fn last_hour(now: DateTime<Utc>, zone: Tz) -> Period {
        let to = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
        Period::aligned_in(to - TimeDelta::minutes(60), to, Resolution::Minute, zone)
    }

    /// A period of whole local buckets of `resolution` in `zone`.
    pub fn aligned_in(
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        resolution: Resolution,
        zone: Tz,
    ) -> Self {
        Period {
            from,
            to,
            resolution,
            read: if resolution == Resolution::Minute {
                Resolution::Minute
            } else {
                Resolution::Hour
            },
            preset: None,
            zone,
        }
    }

    pub fn span(&self) -> TimeDelta {
        self.to - self.from
    }

    /// Buckets shown: every local bucket of `resolution` the range touches.
    pub fn point_count(&self) -> i64 {
        // Bounded before listing them: a range of years by minute must not
        // make a list of millions to learn that it is too long.
        let rough = self.span().num_seconds() / self.resolution.step().num_seconds();
        if rough > MAX_POINTS * 2 {
            return rough;
        }
        self.points().len() as i64
    }

    /// The start of every bucket shown (local boundaries, as instants).
    pub fn points(&self) -> Vec<DateTime<Utc>> {
        local::starts(self.resolution, self.from, self.to, self.zone)
    }

    /// The start of every bucket of `read` in the range (UTC minutes or
    /// hours from `from`).
    pub fn read_points(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let n = self.span().num_seconds() / self.read.step().num_seconds();
        (0..n).map(move |i| self.from + self.read.step() * i as i32)
    }

    /// Where the shown bucket starting at `at` ends.
    pub fn end_of(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        local::next(self.resolution, at, self.zone)
    }

    /// Whether the shown bucket starting at `at` covers only part of its
    /// time: cut by the range's edges, or not over at `now`.
    pub fn is_partial(&self, at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        let end = self.end_of(at);
        at < self.from || end > self.to || end > now
    }

    /// Where the complete buckets of the range end at `now`: the start of
    /// the read bucket still counting, or `to` once the range is over.
    /// The change against the previous period compares only this much of
    /// both (see [`Period::previous`]).
    pub fn complete_until(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.read.floor(now).clamp(self.from, self.to)
    }

    /// The period just before this one: as many local days when shown by
    /// day (so a month-long range before a DST change still starts at
    /// local midnight), else the same length.
    pub fn previous(&self) -> Period {
        let from = if self.resolution == Resolution::Day
            && local::floor(Resolution::Day, self.from, self.zone) == self.from
        {
            let days = self.points().len() as u64;
            let date = local::date_of(self.from, self.zone);
            local::midnight(
                date.checked_sub_days(chrono::Days::new(days))
                    .unwrap_or(date),
                self.zone,
            )
        } else {
            self.from - self.span()
        };
        Period {
            from,
            to: self.from,
            ..*self
        }
    }

    /// How far the previous period lies before this one.
    pub fn shift(&self) -> TimeDelta {
        self.from - self.previous().from
    }
}

/// The years a typed time may fall in. Far beyond them chrono's
/// arithmetic and nanosecond timestamps overflow (past 2262 truncating to
/// a bucket panics), so a time is checked against them before anything is
/// computed from it.
pub const YEARS: std::ops::RangeInclusive<i32> = 2000..=2200;

/// `YYYY-MM-DDTHH:MM` within [`YEARS`], as typed: no time zone applied.
pub fn parse_local_minute(raw: &str) -> Option<NaiveDateTime> {
    if raw.len() > 32 {
        return None;
    }
    NaiveDateTime::parse_from_str(raw.trim(), "%Y-%m-%dT%H:%M")
        .ok()
        .filter(|t| YEARS.contains(&chrono::Datelike::year(t)))
}

fn parse_time(
    raw: Option<&str>,
    which: &'static str,
    end: bool,
    zone: Tz,
) -> Result<Option<DateTime<Utc>>, PeriodError> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let t = match WallClock::parse(raw).ok_or(PeriodError::BadTime(which))? {
        // A date as `to` means the whole of that day (the last year's
        // last day still has a next day: [`WallClock`] bounds the years).
        WallClock::Date(date) if end => {
            local::midnight(date.succ_opt().ok_or(PeriodError::BadTime(which))?, zone)
        }
        WallClock::Date(date) => local::midnight(date, zone),
        WallClock::Minute(t) => local_instant(t, zone),
    };
    Ok(Some(t))
}

/// A local wall-clock time as an instant: the earlier one when the clock
/// shows it twice (DST ends), the first after the gap when it skips it.
fn local_instant(t: NaiveDateTime, zone: Tz) -> DateTime<Utc> {
    use chrono::offset::LocalResult;
    use chrono::TimeZone;
    for minutes in (0..=180).step_by(15) {
        match zone.from_local_datetime(&(t + TimeDelta::minutes(minutes))) {
            LocalResult::Single(l) => return l.with_timezone(&Utc),
            LocalResult::Ambiguous(first, _) => return first.with_timezone(&Utc),
            LocalResult::None => continue,
        }
    }
    t.and_utc()
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
        let p = Period::resolve(&q("7d"), now()).unwrap();
        assert_eq!(
            (p.from, p.to, p.resolution),
            (at(16, 0, 0), at(23, 0, 0), Resolution::Day)
        );
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
        // Custom 09:30-10:30 by hour: the cut hours read by minute, shown
        // as two partial hours, not widened to 09:00-11:00.
        let mut r = q("custom");
        r.from = Some("2026-11-22T09:30".into());
        r.to = Some("2026-11-22T10:30".into());
        r.res = Some("hour".into());
        let p = Period::resolve(&r, now()).unwrap();
        assert_eq!((p.from, p.to), (at(22, 9, 30), at(22, 10, 30)));
        assert_eq!((p.read, p.resolution), (Resolution::Hour, Resolution::Hour));
        assert_eq!(p.points(), vec![at(22, 9, 0), at(22, 10, 0)]);
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

    fn utc(y: i32, mo: u32, d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, m, 0).unwrap()
    }

    #[test]
    fn day_presets_start_at_local_midnight() {
        let berlin = chrono_tz::Europe::Berlin;
        // 10:01 UTC is 11:01 in Berlin: today started at 23:00 UTC.
        let p = Period::resolve_in(&q("today"), now(), berlin).unwrap();
        assert_eq!((p.from, p.to), (at(21, 23, 0), at(22, 23, 0)));
        assert_eq!((p.resolution, p.point_count()), (Resolution::Hour, 24));
        let p = Period::resolve_in(&q("yesterday"), now(), berlin).unwrap();
        assert_eq!((p.from, p.to), (at(20, 23, 0), at(21, 23, 0)));
        let p = Period::resolve_in(&q("month"), now(), berlin).unwrap();
        assert_eq!((p.from, p.to), (utc(2026, 10, 31, 23, 0), at(30, 23, 0)));
        assert_eq!(p.point_count(), 30);
        // Last month, October, has 31 days and one of them 25 hours.
        let p = Period::resolve_in(&q("lastmonth"), now(), berlin).unwrap();
        assert_eq!(
            (p.from, p.to),
            (utc(2026, 9, 30, 22, 0), utc(2026, 10, 31, 23, 0))
        );
        assert_eq!(p.point_count(), 31);
        assert_eq!(p.span(), TimeDelta::days(31) + TimeDelta::hours(1));
        // Kolkata (+05:30): the local day starts at 18:30 UTC.
        let kolkata = chrono_tz::Asia::Kolkata;
        let p = Period::resolve_in(&q("today"), now(), kolkata).unwrap();
        assert_eq!((p.from, p.to), (at(21, 18, 30), at(22, 18, 30)));
        let p = Period::resolve_in(&q("30d"), now(), kolkata).unwrap();
        assert_eq!(p.to, at(22, 18, 30));
        assert_eq!(p.point_count(), 30);
        let p = Period::resolve_in(&q("7d"), now(), kolkata).unwrap();
        assert_eq!((p.from, p.to), (at(15, 18, 30), at(22, 18, 30)));
        assert_eq!(p.point_count(), 7);
        // Last 24 hours end with the current local hour (15:30 IST).
        let p = Period::resolve_in(&q("24h"), now(), kolkata).unwrap();
        assert_eq!(p.to, at(22, 10, 30));
    }

    #[test]
    fn custom_bounds_are_local_times() {
        let mut r = q("custom");
        r.from = Some("2026-03-29".into());
        r.to = Some("2026-03-29".into());
        let p = Period::resolve_in(&r, now(), chrono_tz::Europe::Berlin).unwrap();
        // The day clocks go forward has 23 hours, as 23 hourly points.
        assert_eq!(
            (p.from, p.to),
            (utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 22, 0))
        );
        assert_eq!((p.resolution, p.point_count()), (Resolution::Hour, 23));
        r.from = Some("2026-11-22T09:00".into());
        r.to = Some("2026-11-22T10:00".into());
        let p = Period::resolve_in(&r, now(), chrono_tz::Asia::Kolkata).unwrap();
        assert_eq!((p.from, p.to), (at(22, 3, 30), at(22, 4, 30)));
    }

    #[test]
    fn the_previous_period_of_local_days_is_as_many_local_days() {
        let berlin = chrono_tz::Europe::Berlin;
        let mut r = q("custom");
        r.from = Some("2026-10-25".into());
        r.to = Some("2026-10-31".into());
        r.res = Some("day".into());
        let p = Period::resolve_in(&r, now(), berlin).unwrap();
        let prev = p.previous();
        assert_eq!(prev.to, p.from);
        assert_eq!(prev.from, utc(2026, 10, 17, 22, 0));
        assert_eq!(prev.point_count(), p.point_count());
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
        assert_eq!(
            Period::resolve(&c, now()),
            Err(PeriodError::MissingBound("from"))
        );
        c.from = Some("2026-11-02".into());
        assert_eq!(
            Period::resolve(&c, now()),
            Err(PeriodError::MissingBound("to"))
        );
        c.from = Some("2026-11-02".into());
        c.to = Some("2026-11-01".into());
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::Empty));
        c.to = Some("yesterday".into());
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::BadTime("to")));
        c.to = Some("1900-01-01".into());
        assert_eq!(Period::resolve(&c, now()), Err(PeriodError::BadTime("to")));
        // Both ends wrong, or both missing: both are marked at once.
        c.from = Some("soon".into());
        let both = Period::resolve(&c, now()).unwrap_err();
        assert_eq!(both, PeriodError::BadTimes);
        assert_eq!(both.fields(&c), ["from", "to"]);
        let none = q("custom");
        assert_eq!(
            Period::resolve(&none, now()).unwrap_err().fields(&none),
            ["from", "to"]
        );
        c.from = Some("2026-11-02".into());
        assert_eq!(Period::resolve(&c, now()).unwrap_err().fields(&c), ["to"]);
    }
}

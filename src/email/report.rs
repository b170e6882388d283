//! A report's figures, read through the report engine as the dashboard
//! reads them (`reports::engine::Report`: the first line and its changes,
//! the pages, the sources, the countries and the goals), so the email says what the
//! dashboard says for its period, changes included.

use chrono::{DateTime, Datelike, TimeDelta, Utc};
use chrono_tz::Tz;

use crate::domain::{Dimension, Resolution, Retention, Schedule};
use crate::reports::costly::ReadError;
use crate::reports::engine;
use crate::reports::isolated::Reads;
use crate::reports::line::Totals;
use crate::reports::local;
use crate::reports::request::ReportRequest;
use crate::reports::sources::SourceScope;
use crate::reports::Period;
use crate::storage::sites::Site;
use crate::storage::Store;

/// Rows of each top list.
pub const TOP_ROWS: usize = 10;

/// The first line's figures over one period.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Headline {
    pub views: i64,
    /// Unique visitors (`None` where the stored data cannot say).
    pub visitors: Option<i64>,
    pub visits: i64,
    /// Bounces per visit, 0 to 1.
    pub bounce_rate: Option<f64>,
    /// Average seconds per visit.
    pub visit_duration: Option<f64>,
}

impl From<Totals> for Headline {
    fn from(t: Totals) -> Self {
        Headline {
            views: t.views,
            visitors: t.visits.visitors,
            visits: t.visits.visits,
            bounce_rate: t.visits.bounce_rate(),
            visit_duration: t.visits.average_duration(),
        }
    }
}

/// What the changes compare, as the dashboard compares them
/// (`reports::line`): the whole period with the whole period
/// before, or, while the period runs, its complete hours with the same
/// stretch before.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compared {
    pub now: Headline,
    pub before: Headline,
    /// The stretch of this period compared (`[from, to)`).
    pub stretch: (DateTime<Utc>, DateTime<Utc>),
    /// The stretch of the period before it is compared with.
    pub before_stretch: (DateTime<Utc>, DateTime<Utc>),
}

/// Everything one report email shows.
#[derive(Debug, Clone)]
pub struct Report {
    pub site_id: String,
    pub site_name: String,
    pub domain: String,
    pub period: Period,
    /// How the period is named: "Sunday 22 November 2026", "16 – 22
    /// November 2026", "November 2026", or its first and last minute.
    pub title: String,
    /// The whole period's figures.
    pub now: Headline,
    /// What the changes compare; `None`: no change is shown (nothing of
    /// the period is complete yet, or the period before is past the
    /// retention of its buckets).
    pub compared: Option<Compared>,
    pub pages: Vec<(String, i64)>,
    pub sources: Vec<(String, i64)>,
    pub countries: Vec<(String, i64)>,
    /// The site's goals, as the dashboard's Goals table has them (none
    /// when the site has no goal).
    pub goals: Vec<GoalLine>,
    /// The dashboard showing this period.
    pub dashboard: String,
    /// Sent once by command (`tickertape email send-report`), not by a
    /// subscription's schedule: its footer says so.
    pub one_off: bool,
}

/// One goal of a report: its name as the dashboard says it, its
/// conversions, and its revenue per currency (`1,234.50 EUR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalLine {
    pub name: String,
    pub conversions: i64,
    pub revenue: Vec<String>,
}

/// The period a report sent at the start of the period holding `now`
/// covers: the local day, week (from Monday) or month just before it.
/// `None` for the alerts.
pub fn last_complete(schedule: Schedule, now: DateTime<Utc>, zone: Tz) -> Option<Period> {
    let (from, to) = current(schedule, now, zone)?;
    let before = match schedule {
        Schedule::Daily => local::date_of(from, zone).pred_opt()?,
        Schedule::Weekly => local::date_of(from, zone).checked_sub_days(chrono::Days::new(7))?,
        Schedule::Monthly => {
            let first = local::date_of(from, zone);
            let prev = first.pred_opt()?;
            prev.with_day(1)?
        }
        Schedule::Alerts => return None,
    };
    let _ = to;
    Some(day_period_of(local::midnight(before, zone), from, zone))
}

/// The local day, week or month holding `now`: when its report is due
/// (its start) and until when it may still be sent (its end).
pub fn current(
    schedule: Schedule,
    now: DateTime<Utc>,
    zone: Tz,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let today = local::date_of(now, zone);
    let (first, next) = match schedule {
        Schedule::Daily => (today, today.succ_opt()?),
        Schedule::Weekly => {
            let monday = today.checked_sub_days(chrono::Days::new(
                today.weekday().num_days_from_monday().into(),
            ))?;
            (monday, monday.checked_add_days(chrono::Days::new(7))?)
        }
        Schedule::Monthly => {
            let first = today.with_day(1)?;
            let next = first.checked_add_months(chrono::Months::new(1))?;
            (first, next)
        }
        Schedule::Alerts => return None,
    };
    Some((local::midnight(first, zone), local::midnight(next, zone)))
}

/// Whole local days `[from, to)`, at the resolution the dashboard picks for
/// such a range (so the period before it is the dashboard's too).
pub fn day_period_of(from: DateTime<Utc>, to: DateTime<Utc>, zone: Tz) -> Period {
    Period::aligned_in(from, to, Resolution::auto(to - from), zone)
}

/// The last 7 days up to `now` (`tickertape email send-report`): from the
/// same minute 7 days ago to the end of the current minute.
pub fn last_days(days: i64, now: DateTime<Utc>, zone: Tz) -> Period {
    let to = Resolution::Minute.floor(now) + TimeDelta::minutes(1);
    let from = to - TimeDelta::days(days);
    Period::aligned_in(from, to, Resolution::auto(to - from), zone)
}

/// A country's name beside its code, as the dashboard shows it.
fn country_label(code: &str) -> String {
    match crate::domain::countries::name(code) {
        Some(name) => format!("{name} ({code})"),
        None => code.to_owned(),
    }
}

/// The local dates of a period: `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM` where
/// it does not start (end) at local midnight. `to` is the last day shown,
/// as the dashboard's custom range takes it.
fn dashboard_bounds(period: &Period) -> (String, String) {
    let zone = period.zone;
    let at_midnight = |t: DateTime<Utc>| local::floor(Resolution::Day, t, zone) == t;
    if at_midnight(period.from) && at_midnight(period.to) {
        let last = local::date_of(period.to, zone)
            .pred_opt()
            .unwrap_or_default();
        (
            local::date_of(period.from, zone).to_string(),
            last.to_string(),
        )
    } else {
        let minute = |t: DateTime<Utc>| t.with_timezone(&zone).format("%Y-%m-%dT%H:%M").to_string();
        (minute(period.from), minute(period.to))
    }
}

/// The address of the dashboard for `period`.
pub fn dashboard_url(public_url: &str, site: &Site, period: &Period) -> String {
    let (from, to) = dashboard_bounds(period);
    format!(
        "{}/sites/{}?range=custom&from={from}&to={to}",
        public_url.trim_end_matches('/'),
        site.id
    )
}

fn title(period: &Period, schedule: Option<Schedule>) -> String {
    let zone = period.zone;
    let first = local::date_of(period.from, zone);
    let last = local::date_of(period.to - TimeDelta::seconds(1), zone);
    match schedule {
        Some(Schedule::Daily) => first.format("%A %-d %B %Y").to_string(),
        Some(Schedule::Weekly) => {
            format!("{} – {}", first.format("%-d %B"), last.format("%-d %B %Y"))
        }
        Some(Schedule::Monthly) => first.format("%B %Y").to_string(),
        _ => {
            // The zone is said beside the title, once (`render::report`).
            let f = |t: DateTime<Utc>| t.with_timezone(&zone).format("%-d %B %Y %H:%M").to_string();
            format!("{} – {}", f(period.from), f(period.to))
        }
    }
}

/// Reads a site's report over `period` at `now` (what "so far" means for
/// a running period). `schedule` names the period in the title (`None`:
/// any stretch, named by its first and last minute); `retention` says how
/// far back a change may compare, as on the dashboard.
pub async fn assemble(
    store: &Store,
    public_url: &str,
    site: &Site,
    period: &Period,
    schedule: Option<Schedule>,
    (now, retention): (DateTime<Utc>, &Retention),
) -> Result<Report, ReadError> {
    let before = period.previous();
    // The dashboard's own engine, unfiltered: the same figures, read the
    // same way, in the sender's task (no visitor waits on it).
    let request = ReportRequest::new(store, SourceScope::Site(site), period, now);
    let report = engine::Report::new(Reads::inline(store), site, request, retention);
    let (line, pages, (sources, panels), (goals, _)) = tokio::try_join!(
        report.line(),
        report.pages("", (0, TOP_ROWS)),
        report.panels(&[Dimension::Country]),
        report.goals(),
    )?;
    let line = line.figures;
    Ok(Report {
        site_id: site.id.to_string(),
        site_name: site.name.clone(),
        domain: site.domain.to_string(),
        period: *period,
        title: title(period, schedule),
        now: line.shown.into(),
        compared: line.compared.map(|(part, part_before)| {
            // The complete part of a running period, and the same stretch
            // before (`reports::line`: the stretches it compares).
            let cut = period.complete_until(now);
            Compared {
                now: part.into(),
                before: part_before.into(),
                stretch: (period.from, cut),
                before_stretch: (before.from, cut - period.shift()),
            }
        }),
        pages: pages
            .rows
            .into_iter()
            .take(TOP_ROWS)
            .map(|p| (p.path, p.views))
            .collect(),
        sources: sources
            .rows
            .into_iter()
            .take(TOP_ROWS)
            .map(|r| (r.name, r.count))
            .collect(),
        countries: panels
            .into_iter()
            .flat_map(|panel| panel.rows)
            .take(TOP_ROWS)
            .map(|r| (country_label(&r.name), r.count))
            .collect(),
        goals: goals
            .rows
            .iter()
            .map(|g| GoalLine {
                name: g.goal.label(),
                conversions: g.conversions,
                revenue: g.revenue.iter().map(|r| r.shown()).collect(),
            })
            .collect(),
        dashboard: dashboard_url(public_url, site, period),
        one_off: schedule.is_none(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0).unwrap()
    }

    #[test]
    fn a_daily_report_covers_the_local_day_before() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        // 23:30 UTC on the 22nd is 00:30 on the 23rd in Berlin.
        let p = last_complete(Schedule::Daily, at(2026, 11, 22, 23, 30), berlin).unwrap();
        assert_eq!(
            (p.from, p.to),
            (at(2026, 11, 21, 23, 0), at(2026, 11, 22, 23, 0))
        );
    }

    #[test]
    fn a_weekly_report_covers_monday_to_sunday_before() {
        // Sunday 22 November 2026: the week before is 9 to 15 November.
        let p = last_complete(Schedule::Weekly, at(2026, 11, 22, 10, 0), Tz::UTC).unwrap();
        assert_eq!(
            (p.from, p.to),
            (at(2026, 11, 9, 0, 0), at(2026, 11, 16, 0, 0))
        );
        // Monday 23rd: 16 to 22 November.
        let p = last_complete(Schedule::Weekly, at(2026, 11, 23, 0, 0), Tz::UTC).unwrap();
        assert_eq!(
            (p.from, p.to),
            (at(2026, 11, 16, 0, 0), at(2026, 11, 23, 0, 0))
        );
        assert_eq!(
            title(&p, Some(Schedule::Weekly)),
            "16 November – 22 November 2026"
        );
    }

    #[test]
    fn a_monthly_report_covers_the_calendar_month_before() {
        let p = last_complete(Schedule::Monthly, at(2027, 3, 1, 0, 5), Tz::UTC).unwrap();
        assert_eq!((p.from, p.to), (at(2027, 2, 1, 0, 0), at(2027, 3, 1, 0, 0)));
        assert_eq!(p.resolution, Resolution::Day);
        assert_eq!(title(&p, Some(Schedule::Monthly)), "February 2027");
        assert!(last_complete(Schedule::Alerts, at(2027, 3, 1, 0, 5), Tz::UTC).is_none());
    }

    #[test]
    fn the_dashboard_link_names_the_same_days() {
        let p = last_complete(Schedule::Weekly, at(2026, 11, 23, 8, 0), Tz::UTC).unwrap();
        assert_eq!(
            dashboard_bounds(&p),
            ("2026-11-16".into(), "2026-11-22".into())
        );
        let q = last_days(7, at(2026, 11, 22, 10, 1), Tz::UTC);
        assert_eq!(q.to, at(2026, 11, 22, 10, 2));
        assert_eq!(
            dashboard_bounds(&q),
            ("2026-11-15T10:02".into(), "2026-11-22T10:02".into())
        );
    }
}

//! What every report page shows: the range controls, a series as chart
//! and table, what the changes compare, and how fresh the figures are.

use chrono::{DateTime, Utc};

use super::*;
use crate::reports::period::Preset;
use crate::reports::retention::Coarsened;
use crate::reports::{chart, queries, Period, PeriodError, Point, RangeQuery};
use crate::storage::Topology;
use crate::web::fmt;
use crate::web::state::WebState;

/// How fresh report figures are, given where they are read from.
pub fn freshness(state: &WebState) -> String {
    use mongodb::options::ReadPreference;
    let pref = state.store.read_preference();
    let staleness = match pref {
        ReadPreference::Primary => None,
        ReadPreference::Secondary { options }
        | ReadPreference::SecondaryPreferred { options }
        | ReadPreference::PrimaryPreferred { options }
        | ReadPreference::Nearest { options } => options.as_ref().and_then(|o| o.max_staleness),
        _ => None,
    };
    let has_secondaries = match state.store.topology() {
        Topology::Standalone => false,
        Topology::ReplicaSet { members, .. } => *members > 1,
        Topology::Sharded => true,
    };
    // Plain words for site owners; the admin system page names the setting.
    let copy = if matches!(pref, ReadPreference::Primary) || !has_secondaries {
        "These figures include every view stored so far.".to_owned()
    } else if let Some(s) = staleness {
        format!(
            "These figures come from a copy of the database and may be up to {} seconds behind.",
            s.as_secs()
        )
    } else {
        "These figures come from a copy of the database and may miss views of the last second or so.".to_owned()
    };
    format!(
        "{copy} New views show here within about {}, their sources and other breakdowns with them (longer under heavy load).",
        seconds(shown_within(&state.apply))
    )
}

/// How long after a hit the reports show it at light load: every report
/// (the "right now" figure and the minutes included) reads views from the
/// hour and day buckets, which the rollups applier writes a window after
/// the hit, and the breakdowns wait for those (`ingest::applier`); about a
/// second more for the batch to be written (measured: the hours at 5.0 s
/// with the 5 s window, today's figures at 5.5 to 6.4 s).
pub fn shown_within(a: &crate::ingest::applier::ApplyConfig) -> std::time::Duration {
    a.rollups_window.max(a.sources_window) + std::time::Duration::from_secs(1)
}

fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64().max(1.0);
    if s < 1.5 {
        "a second".to_owned()
    } else {
        format!("{s:.0} seconds")
    }
}

/// When the write-behind has fallen behind by more than
/// [`FRESH_SECS`](crate::ingest::stats::FRESH_SECS): how far, in words for
/// the top of a report ("Figures up to 42 s ago").
pub fn behind(state: &WebState) -> Option<String> {
    use crate::storage::progress::Stream;
    let now = state.clock.now();
    let lag = |s: Stream| state.journal.lag_secs(s.index(), now);
    let (minutes, rollups) = (lag(Stream::Views), lag(Stream::Rollups));
    let worst = minutes.max(rollups);
    (worst > crate::ingest::stats::FRESH_SECS).then(|| {
        format!(
            "Figures up to {} s ago: the database is behind the views received (minutes {:.0} s, hours and days {:.0} s); they are kept safe and counted as it catches up.",
            worst.ceil() as i64,
            minutes,
            rollups
        )
    })
}

/// Range presets, custom bounds and resolution, as the form shows them.
pub struct Controls {
    pub action: String,
    pub hidden: Vec<(String, String)>,
    /// The current range, for other forms on the page to keep it.
    pub range_hidden: Vec<(String, String)>,
    /// Key (`range=`), label, address and whether it is shown: as pills
    /// on a wide screen, as a select on a phone.
    pub presets: Vec<(&'static str, &'static str, String, bool)>,
    pub custom: bool,
    pub from: String,
    pub to: String,
    pub res: String,
    pub summary: String,
    /// What a bar covers ("hour"), for the chart's caption (the range
    /// and its zone are said once, in `summary`).
    pub resolution: &'static str,
    /// The site's zone, which every time of the form is in.
    pub zone: &'static str,
    /// A refused range: the message, and the field it is about.
    pub error: Option<String>,
    /// The form fields the refusal is about (each marked invalid).
    pub error_fields: Vec<&'static str>,
    /// Why the range is shown coarser than asked (retention).
    pub coarsened: Option<String>,
    /// The range is finer than a day over days imported as daily figures.
    pub daily_only: Option<String>,
}

impl Controls {
    /// Whether the refusal is about form field `field`.
    pub fn marks(&self, field: &str) -> bool {
        self.error_fields.contains(&field)
    }
}

/// A page shown with a refused range says so in its status.
pub(super) fn status_of(range_error: Option<&PeriodError>) -> actix_web::http::StatusCode {
    match range_error {
        Some(_) => actix_web::http::StatusCode::BAD_REQUEST,
        None => actix_web::http::StatusCode::OK,
    }
}

/// The period the query asks for; a refused one falls back to the default
/// range, with the reason kept for the form (the page still shows). A
/// range reaching past a level's retention is read one level coarser, and
/// says so (`crate::reports::retention`).
pub(super) fn resolve_or_default(
    q: &ReportQuery,
    now: DateTime<Utc>,
    retention: &crate::domain::Retention,
    zone: chrono_tz::Tz,
) -> (Period, Option<PeriodError>, Option<Coarsened>) {
    let (period, error) = match Period::resolve_in(&q.range(), now, zone) {
        Ok(p) => (p, None),
        Err(e) => (
            Period::resolve_in(&RangeQuery::default(), now, zone)
                .expect("the default range is valid"),
            Some(e),
        ),
    };
    let (period, coarsened) = crate::reports::retention::keep(period, retention, now);
    (period, error, coarsened)
}

/// What an export reads: the asked period under the retention.
pub(super) fn resolve_kept(
    q: &ReportQuery,
    state: &WebState,
    zone: chrono_tz::Tz,
) -> Result<Period, PeriodError> {
    let now = state.clock.now();
    let period = Period::resolve_in(&q.range(), now, zone)?;
    Ok(crate::reports::retention::keep(period, &state.retention, now).0)
}

pub(super) fn controls(
    action: &str,
    hidden: &[(&str, &str)],
    q: &ReportQuery,
    period: &Period,
    error: Option<&PeriodError>,
) -> Controls {
    let filters = q.filter_params();
    let mut hidden_params: Vec<(&str, &str)> = hidden.to_vec();
    // The range picker keeps the filters.
    hidden_params.extend(filters.iter().map(|(k, v)| (*k, v.as_str())));
    let kept = |v: &Option<String>| v.clone().unwrap_or_default();
    Controls {
        action: action.to_owned(),
        hidden: hidden_params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        range_hidden: if error.is_some() {
            Vec::new()
        } else {
            [
                ("range", &q.range),
                ("from", &q.from),
                ("to", &q.to),
                ("res", &q.res),
            ]
            .into_iter()
            .filter_map(|(k, v)| {
                v.clone()
                    .filter(|v| !v.is_empty())
                    .map(|v| (k.to_owned(), v))
            })
            .chain(filters.iter().map(|(k, v)| ((*k).to_owned(), v.clone())))
            .collect()
        },
        presets: Preset::ALL
            .iter()
            .map(|p| {
                let mut extra = hidden_params.clone();
                extra.insert(0, ("range", p.key()));
                // A refused range shows the default preset instead, and
                // its pill says so.
                (
                    p.key(),
                    p.label(),
                    join(action, "", &extra),
                    period.preset == Some(*p),
                )
            })
            .collect(),
        custom: error.is_some() || period.preset.is_none(),
        // A refused range is shown as typed, to be corrected.
        from: if error.is_some() {
            kept(&q.from)
        } else {
            fmt::input_minute_in(&period.from, period.zone)
        },
        to: if error.is_some() {
            kept(&q.to)
        } else {
            fmt::input_minute_in(&period.to, period.zone)
        },
        res: q
            .res
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "auto".into()),
        summary: summary(period),
        resolution: period.resolution.as_str(),
        zone: period.zone.name(),
        error: error.map(|e| e.to_string()),
        error_fields: error.map_or_else(Vec::new, |e| e.fields(&q.range())),
        coarsened: None,
        daily_only: None,
    }
}

/// The range in words, its zone said once: "2026-11-21 10:00 to
/// 2026-11-22 10:00 (Europe/Berlin), 24 points by hour". The zone's
/// abbreviations are added only where the range crosses a clock change
/// (then they tell which offset each end is at).
fn summary(period: &Period) -> String {
    let offset = |t: &DateTime<Utc>| {
        use chrono::Offset;
        t.with_timezone(&period.zone).offset().fix()
    };
    let time = if offset(&period.from) == offset(&period.to) {
        fmt::local_short
    } else {
        fmt::local
    };
    format!(
        "{} to {} ({}), {} by {}",
        time(&period.from, period.zone),
        time(&period.to, period.zone),
        period.zone.name(),
        fmt::plural(&period.point_count(), "point"),
        period.resolution.as_str()
    )
}

/// A series as its chart and its table.
pub struct SeriesView {
    /// Prefix of the ids in the chart and its table, unique on the page.
    pub id: String,
    pub chart: String,
    /// Label, views, whether the bucket covers only part of its time.
    pub rows: Vec<(String, i64, bool)>,
    pub total: i64,
    /// The zone its times are in.
    pub zone: &'static str,
    /// What it counts, as its table's column says ("Views").
    pub column: &'static str,
}

pub(super) fn series_view(
    id: &str,
    points: &[Point],
    unit: chart::Unit,
    zone: chrono_tz::Tz,
    title: &str,
    partial: impl Fn(DateTime<Utc>) -> bool,
) -> SeriesView {
    series_view_of(id, points, unit, zone, title, partial, chart::VIEWS)
}

/// [`series_view`] of something other than views.
pub(super) fn series_view_of(
    id: &str,
    points: &[Point],
    unit: chart::Unit,
    zone: chrono_tz::Tz,
    title: &str,
    partial: impl Fn(DateTime<Utc>) -> bool,
    noun: chart::Noun,
) -> SeriesView {
    let bars: Vec<chart::Bar> = points
        .iter()
        .map(|p| chart::Bar {
            at: p.at,
            views: p.views,
            partial: partial(p.at),
        })
        .collect();
    SeriesView {
        id: id.to_owned(),
        chart: chart::bars_of(&bars, unit, zone, title, id, noun),
        rows: bars
            .iter()
            .map(|b| (chart::label_in(b.at, unit, zone), b.views, b.partial))
            .collect(),
        total: queries::total(points),
        zone: zone.name(),
        column: capitalized(noun.many),
    }
}

fn capitalized(word: &'static str) -> &'static str {
    match word {
        "views" => "Views",
        "visitors" => "Visitors",
        "visits" => "Visits",
        "entries" => "Entries",
        other => other,
    }
}

/// The series of a period: bars still counting or cut by the range's
/// edges are marked partial.
pub(super) fn period_view(
    id: &str,
    period: &Period,
    read: &[Point],
    now: DateTime<Utc>,
    title: &str,
) -> SeriesView {
    series_view(
        id,
        &queries::rollup(period, read),
        period.resolution.into(),
        period.zone,
        title,
        |at| period.is_partial(at, now),
    )
}

/// Whether the period before can be compared with (`reports::first_line`).
pub(super) use crate::reports::first_line::comparable;

/// What the changes of a report's first line compare, in words: shown
/// once, on demand, under the line (`partials/visits.html`), the same on
/// the dashboard, the page report and a shared view.
///
/// Like is compared with like: while the period's last bucket is still
/// counting, the changes cover only its complete buckets and the same
/// stretch of the previous period (e.g. 23 complete hours of "last 24
/// hours" against the first 23 hours of the 24 before). The stretches are
/// said as times, never as a count of hours ("8,749 hours" of a year). No
/// change is shown against a previous period that reaches past the
/// retention of the level it is read at: its figures would be missing the
/// expired buckets, not lower.
pub(super) fn change_basis(
    period: &Period,
    current: &[Point],
    now: DateTime<Utc>,
    retention: &crate::domain::Retention,
) -> String {
    let cut = period.complete_until(now);
    let before = period.previous();
    let span = |from: &DateTime<Utc>, to: &DateTime<Utc>| {
        format!(
            "{} to {}",
            fmt::local_short(from, period.zone),
            fmt::local_short(to, period.zone)
        )
    };
    if !comparable(&before, retention, now) {
        format!(
            "No change is shown: the previous period starts more than {} ago, and {} buckets are kept only that long.",
            retention.describe(before.read),
            before.read.as_str()
        )
    } else if cut >= period.to {
        format!(
            "Each change compares this period with the one before it, {}.",
            span(&before.from, &before.to)
        )
    } else if cut <= period.from {
        format!(
            "No {} of this period is complete yet (the current one is still counting), so no change is shown.",
            period.read.as_str()
        )
    } else {
        let done: i64 = current.iter().filter(|p| p.at < cut).map(|p| p.views).sum();
        format!(
            "The current {} is still counting and left out: each change compares the complete part, {} ({} so far), with the same stretch of the previous period, {}.",
            period.read.as_str(),
            span(&period.from, &cut),
            fmt::plural(&done, "view"),
            span(&before.from, &(cut - period.shift()))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    pub(super) fn the_change_compares_the_same_complete_stretch() {
        use chrono::TimeZone;
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap();
        let q = RangeQuery {
            range: Some("24h".into()),
            ..Default::default()
        };
        let period = Period::resolve(&q, now).unwrap();
        let points = |p: &Period, views: &dyn Fn(usize) -> i64| -> Vec<Point> {
            p.read_points()
                .enumerate()
                .map(|(i, at)| Point {
                    at,
                    views: views(i),
                })
                .collect()
        };
        // 10 a complete hour now; the running hour has 500 so far.
        let current = points(&period, &|i| if i == 23 { 500 } else { 10 });
        let kept = crate::domain::Retention::parse(400, 400, 0).unwrap();
        assert_eq!(
            change_basis(&period, &current, now, &kept),
            "The current hour is still counting and left out: each change compares the complete part, \
             2026-11-21 11:00 to 2026-11-22 10:00 (230 views so far), with the same stretch of the \
             previous period, 2026-11-20 11:00 to 2026-11-21 10:00."
        );
        // Once the period is over, all of both count.
        let later = period.to + TimeDelta::hours(1);
        assert_eq!(
            change_basis(&period, &current, later, &kept),
            "Each change compares this period with the one before it, 2026-11-20 11:00 to 2026-11-21 11:00."
        );
        // A previous period past the retention of its level: no change.
        let retention = crate::domain::Retention::parse(1, 1, 0).unwrap();
        let basis = change_basis(&period, &current, now, &retention);
        assert!(basis.contains("more than 1 day ago"), "{basis}");
        let basis = change_basis(
            &period,
            &current,
            now,
            &crate::domain::Retention::parse(2, 2, 0).unwrap(),
        );
        assert!(basis.contains("still counting"), "within 2 days: {basis}");
        // Before its first bucket is complete there is nothing to compare.
        assert!(change_basis(&period, &current, period.from, &kept)
            .starts_with("No hour of this period is complete yet"));
    }
}

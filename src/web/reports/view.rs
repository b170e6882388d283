//! What every report page shows: the range controls, a series as chart
//! and table, what the changes compare, and how fresh the figures are.

use chrono::{DateTime, Utc};

use super::*;
use crate::ingest::freshness::{self, Behind, Lags};
use crate::reports::engine::Said;
use crate::reports::period::Preset;
use crate::reports::retention::Coarsened;
use crate::reports::{chart, queries, Period, PeriodError, Point, RangeQuery};
use crate::storage::progress::Stream;
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
        "{copy} New views show here within about {}, their sources and other breakdowns with them; when the database falls further behind, the reports say by how much.",
        seconds(shown_within(&state.apply))
    )
}

/// How long after a hit the reports show it at light load: every report
/// (the "right now" figure and the minutes included) reads views from the
/// hour and day buckets, which the rollups applier writes a window after
/// the hit, the breakdowns wait for those, and the filtered figures read
/// the visit store: the longest of their windows
/// ([`freshness::fresh_within`]), past which the reports say they are
/// behind instead.
pub fn shown_within(a: &crate::ingest::applier::ApplyConfig) -> std::time::Duration {
    Stream::EVERY
        .into_iter()
        .map(|s| freshness::fresh_within(a, s))
        .max()
        .unwrap_or_default()
}

fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64().max(1.0);
    if s < 1.5 {
        "a second".to_owned()
    } else {
        format!("{s:.0} seconds")
    }
}

/// Every stream's lag now, with its window: read once per request.
pub fn lags(state: &WebState) -> Lags {
    Lags::now(&state.journal, &state.apply, state.clock.now())
}

/// When a stream that writes what `said`'s figures were read from is
/// behind by more than its window: how far, in words for the top of a
/// report ("Filtered figures and funnels are 45 s behind the views").
pub fn behind(lags: &Lags, said: &Said) -> Option<String> {
    lags.behind(said.streams).map(behind_words)
}

/// A stream past its window, said for the figures it writes.
pub fn behind_words(b: Behind) -> String {
    let secs = b.secs;
    match b.stream {
        Stream::Views | Stream::Rollups => format!(
            "Figures are {secs} s behind the views received: the database is catching up, and every view is kept safe and counted as it does."
        ),
        Stream::Sources => format!(
            "Sources and breakdowns are {secs} s behind the views: the newest views count in them as the database catches up."
        ),
        Stream::Visits => format!(
            "Filtered figures and funnels are {secs} s behind the views: the newest visits count in them as the database catches up."
        ),
    }
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
/// expired buckets, not lower. Filtered figures (`whole`) compare the
/// whole period with the whole one before: the visit store has no
/// complete buckets to cut at. `done`: the views of the complete part.
pub(super) fn change_basis(
    period: &Period,
    done: i64,
    now: DateTime<Utc>,
    retention: &crate::domain::Retention,
    whole: bool,
) -> String {
    use crate::reports::line::comparable;
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
    } else if whole && cut < period.to {
        format!(
            "Each change compares the filtered figures of this period so far with the whole period before it, {}.",
            span(&before.from, &before.to)
        )
    } else if cut >= period.to || whole {
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
        let cut = period.complete_until(now);
        let done: i64 = current.iter().filter(|p| p.at < cut).map(|p| p.views).sum();
        assert_eq!(
            change_basis(&period, done, now, &kept, false),
            "The current hour is still counting and left out: each change compares the complete part, \
             2026-11-21 11:00 to 2026-11-22 10:00 (230 views so far), with the same stretch of the \
             previous period, 2026-11-20 11:00 to 2026-11-21 10:00."
        );
        // Once the period is over, all of both count.
        let later = period.to + TimeDelta::hours(1);
        assert_eq!(
            change_basis(&period, done, later, &kept, false),
            "Each change compares this period with the one before it, 2026-11-20 11:00 to 2026-11-21 11:00."
        );
        // A previous period past the retention of its level: no change.
        let retention = crate::domain::Retention::parse(1, 1, 0).unwrap();
        let basis = change_basis(&period, done, now, &retention, false);
        assert!(basis.contains("more than 1 day ago"), "{basis}");
        let basis = change_basis(
            &period,
            done,
            now,
            &crate::domain::Retention::parse(2, 2, 0).unwrap(),
            false,
        );
        assert!(basis.contains("still counting"), "within 2 days: {basis}");
        // Before its first bucket is complete there is nothing to compare.
        assert!(change_basis(&period, done, period.from, &kept, false)
            .starts_with("No hour of this period is complete yet"));
    }
}

//! The first line of a report: visitors, visits, views, views per visit,
//! bounce rate and visit duration, each with its change against the
//! previous period under the same honest-change rules as the views'
//! headline (only the complete part of a running period is compared).

use chrono::{DateTime, Utc};

use crate::reports::engine::Chart;
pub use crate::reports::line::{LineFigures, Totals};
pub use crate::reports::metric::ChartMetric;
use crate::reports::numbers::{minutes_seconds, percent, points};
use crate::reports::Period;
use crate::web::fmt;

pub struct Figure {
    /// The element id (tests and the CSV use the same names).
    pub id: &'static str,
    pub label: &'static str,
    pub value: String,
    pub change: String,
    /// `up`, `down` or empty.
    pub class: &'static str,
    /// The figure compared with, formatted ("1,234"), or empty when there
    /// is no change to show: the details the change line holds on demand.
    pub before: String,
}

pub struct VisitLine {
    pub figures: Vec<Figure>,
    /// What the changes compare, in words (set by the page from
    /// [`super::Headline`]): one explanation for the whole line.
    pub basis: String,
    /// From when visitors are counted, when the period reaches before it.
    pub note: Option<String>,
    /// `visits.csv` of the same range (empty through a share link).
    pub csv: String,
}

impl VisitLine {
    /// The figures compared with, "Visitors 1,200 · Views 3,400", or
    /// empty when nothing is compared.
    pub fn before(&self) -> String {
        self.figures
            .iter()
            .filter(|f| !f.before.is_empty())
            .map(|f| format!("{} {}", f.label, f.before))
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

/// The line of a site, or of a page (`page`), where a visit is counted on
/// its entry page: "Entries" and its exits instead of views per visit.
pub(super) fn build(line: &LineFigures, period: &Period, page: bool) -> VisitLine {
    let (shown, compared, since) = (&line.shown, line.compared.as_ref(), line.since);
    let counted = since.is_some();
    let dash = || "—".to_owned();
    let none = || (dash(), "", String::new());
    let f = &shown.visits;
    let pair = |get: &dyn Fn(&Totals) -> Option<f64>| compared.map(|(a, b)| (get(a), get(b)));
    // A count against a previous part with none: "new" as soon as the
    // shown period has any (even only in its still-counting part), the
    // wording of every panel; nothing against nothing is no change ("—").
    let count_change = |get: &dyn Fn(&Totals) -> Option<i64>| match compared {
        Some((a, b)) => match (get(a), get(b)) {
            (Some(_), Some(0)) if get(shown).is_some_and(|n| n > 0) => {
                ("new".to_owned(), "up", "0".to_owned())
            }
            (Some(a), Some(b)) => (
                fmt::change(a, b),
                direction(a as f64, b as f64),
                fmt::thousands(&b),
            ),
            _ => none(),
        },
        None => none(),
    };
    let ratio_change = |values: Option<(Option<f64>, Option<f64>)>,
                        show: &dyn Fn(f64) -> String| match values {
        Some((Some(a), Some(b))) if b > 0.0 => {
            (fmt::relative_change(a, b), direction(a, b), show(b))
        }
        Some((Some(_), None)) => ("new".to_owned(), "up", dash()),
        _ => none(),
    };
    let figure =
        |id, label, value: String, (change, class, before): (String, &'static str, String)| {
            Figure {
                id,
                label,
                value,
                change,
                class,
                before,
            }
        };
    let visitors_of = |t: &Totals| t.visits.visitors;
    let mut figures = vec![
        figure(
            "visitors",
            "Visitors",
            match f.visitors {
                Some(v) if counted => fmt::thousands(&v),
                _ => dash(),
            },
            if counted {
                count_change(&visitors_of)
            } else {
                none()
            },
        ),
        figure(
            "visits",
            if page { "Entries" } else { "Visits" },
            if counted {
                fmt::thousands(&f.visits)
            } else {
                dash()
            },
            if counted {
                count_change(&|t| Some(t.visits.visits))
            } else {
                none()
            },
        ),
        figure(
            "views",
            "Views",
            fmt::thousands(&shown.views),
            count_change(&|t| Some(t.views)),
        ),
    ];
    let per_visit = |t: &Totals| t.visits.views_per_visit(t.views);
    let bounce = |t: &Totals| t.visits.bounce_rate();
    let duration = |t: &Totals| t.visits.average_duration();
    if page {
        let exits = |t: &Totals| t.visits.exits;
        figures.push(figure(
            "exits",
            "Exits",
            match f.exits {
                Some(n) if counted => fmt::thousands(&n),
                _ => dash(),
            },
            if counted {
                count_change(&exits)
            } else {
                none()
            },
        ));
    } else {
        figures.push(figure(
            "views-per-visit",
            "Views per visit",
            per_visit(shown).map_or_else(dash, |v| format!("{v:.2}")),
            ratio_change(pair(&per_visit), &|v| format!("{v:.2}")),
        ));
    }
    figures.push(figure(
        "bounce-rate",
        "Bounce rate",
        bounce(shown).map_or_else(dash, |r| percent(r, 0)),
        match pair(&bounce) {
            Some((Some(a), Some(b))) => (points(a, b), direction(a, b), percent(b, 0)),
            _ => none(),
        },
    ));
    figures.push(figure(
        "visit-duration",
        "Visit duration",
        duration(shown).map_or_else(dash, minutes_seconds),
        ratio_change(pair(&duration), &minutes_seconds),
    ));
    let note = match since {
        // A site without a view yet has nothing to explain.
        None if shown.views == 0 => None,
        None => Some(
            "Visitors and visits are counted from the first view after the upgrade that brought them: these views came before it."
                .to_owned(),
        ),
        Some(since) if since > period.from => Some(format!(
            "Visitors and visits are counted since {} (UTC); the views before that have none.",
            since.format("%Y-%m-%d")
        )),
        Some(_) => None,
    };
    VisitLine {
        figures,
        basis: String::new(),
        note,
        csv: String::new(),
    }
}

/// A page report's time on page and scroll depth, after its visit
/// figures: the means, the time's label saying what it is measured by
/// (the visit store keeps neither, so a filtered report shows "—").
pub(super) fn add_time_on_page(
    line: &mut VisitLine,
    engagement: Option<&crate::reports::engagement::Engagement>,
) {
    use crate::reports::engagement::TimeKind;
    // What the time is measured by is said in its label; the change slot
    // holds "—" (nothing compared), as every figure's holds a change.
    let (value, label) = match engagement.map(|e| (e, e.time_on_page())) {
        Some((_, Some((secs, TimeKind::Engaged)))) => {
            (minutes_seconds(secs), "Time on page (engaged)")
        }
        Some((_, Some((secs, TimeKind::UntilNextView)))) => {
            (minutes_seconds(secs), "Time on page (to next view)")
        }
        _ => ("—".to_owned(), "Time on page"),
    };
    line.figures.push(Figure {
        id: "time-on-page",
        label,
        value,
        change: "—".to_owned(),
        class: "",
        before: String::new(),
    });
    line.figures.push(Figure {
        id: "scroll-depth",
        label: "Scroll depth",
        value: scroll_depth(engagement),
        change: "—".to_owned(),
        class: "",
        before: String::new(),
    });
}

fn direction(a: f64, b: f64) -> &'static str {
    if a > b {
        "up"
    } else if a < b {
        "down"
    } else {
        ""
    }
}

/// The chart of a report with its tabs (visitors, visits, views).
pub struct ChartView {
    pub series: super::SeriesView,
    /// Label, address, and whether it is the one shown.
    pub tabs: Vec<(&'static str, String, bool)>,
    /// What it shows, in words ("Visitors").
    pub caption: &'static str,
    pub empty: String,
    /// Why it shows views although something else was asked for.
    pub note: Option<&'static str>,
}

/// Builds the chart from the engine's points: `href(metric)` is the
/// address of the same report showing `metric`; `of` what the report is
/// about ("example.com", a page), for the chart's title, and `of_page`
/// whether it is a page.
pub fn chart_view(
    chart: &Chart,
    period: &Period,
    now: DateTime<Utc>,
    of: &str,
    of_page: bool,
    href: impl Fn(ChartMetric) -> String,
) -> ChartView {
    let shown = chart.metric;
    let noun = shown.noun();
    let caption = shown.caption();
    let filtered = if chart.said.is_filtered() {
        " (filtered)"
    } else {
        ""
    };
    let series = super::series_view_of(
        "series",
        &chart.points,
        period.resolution.into(),
        period.zone,
        &format!(
            "{caption} of {of}{filtered} by {}",
            period.resolution.as_str()
        ),
        |at| period.is_partial(at, now),
        noun,
    );
    ChartView {
        series,
        tabs: ChartMetric::ALL
            .into_iter()
            .map(|m| (m.caption(), href(m), m == shown))
            .collect(),
        caption,
        empty: format!(
            "No {}{}{} in this period.",
            noun.many,
            if of_page { " of this page" } else { "" },
            if chart.said.is_filtered() {
                " with these filters"
            } else {
                ""
            }
        ),
        note: chart.note,
    }
}

/// A page's mean scroll depth as the reports show it: a whole percent.
pub(super) fn scroll_depth(engagement: Option<&crate::reports::engagement::Engagement>) -> String {
    engagement
        .and_then(|e| e.scroll_depth())
        .map_or_else(|| "—".to_owned(), |d| format!("{d:.0}%"))
}

/// A page's mean time on page as the pages panel shows it, and what it is
/// measured by in words; "—" where there is none (no view followed by
/// another of its visit, or a filtered report: the visit store keeps no
/// time on page).
pub(super) fn time_on_page(
    engagement: Option<&crate::reports::engagement::Engagement>,
) -> (String, &'static str) {
    use crate::reports::engagement::TimeKind;
    match engagement.and_then(|e| e.time_on_page()) {
        Some((secs, TimeKind::Engaged)) => (
            crate::reports::numbers::minutes_seconds(secs),
            "Mean engaged time the tracker sent per view",
        ),
        Some((secs, TimeKind::UntilNextView)) => (
            crate::reports::numbers::minutes_seconds(secs),
            "Mean time from a view to its visit's next view (a visit's last view is not timed)",
        ),
        None => ("—".to_owned(), "No view followed by another of its visit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_minutes_and_seconds() {
        assert_eq!(minutes_seconds(42.4), "42s");
        assert_eq!(minutes_seconds(65.0), "1m 05s");
        assert_eq!(minutes_seconds(3725.0), "1h 02m");
    }

    #[test]
    fn rates_change_in_points_and_ratios_relatively() {
        assert_eq!(points(0.55, 0.5), "+5 pts");
        assert_eq!(points(0.5, 0.55), "−5 pts");
        assert_eq!(points(0.5, 0.501), "±0 pts");
        assert_eq!(fmt::relative_change(3.0, 2.0), "+50.0%");
        assert_eq!(direction(1.0, 2.0), "down");
    }
}

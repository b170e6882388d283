//! The dashboard's Goals table: each goal the owner marked on
//! the settings page, with its conversions, converting unique visitors and
//! conversion rate (converting visitors / the site's visitors), each
//! against the previous period.
//!
//! An event goal's conversions are its events and its converting visitors
//! the sketch of those who sent it (`converted.<name>` in the site's
//! breakdown buckets); a page goal's are the page's views and visitors.

use crate::domain::Goal;
use crate::domain::{Dimension, Page};
use crate::reports::breakdowns::Breakdown;
use crate::reports::{queries, visits, Period, Scope};
use crate::storage::sites::Site;
use crate::web::fmt;
use crate::web::state::WebState;

pub struct GoalRow {
    pub kind: &'static str,
    pub name: String,
    /// A page goal's page report over the same range: its views are the
    /// goal's conversions, so that view answers exactly (an event goal has
    /// no view of its own to open).
    pub href: Option<String>,
    pub conversions: i64,
    pub conversions_change: String,
    /// Converting unique visitors ("—" where the visitors are unknown).
    pub visitors: String,
    pub converting: Option<i64>,
    pub rate: String,
    /// The rate as a plain percentage with one decimal, for `goals.csv`
    /// (empty where unknown).
    pub rate_percent: String,
    pub rate_change: String,
}

pub struct GoalsView {
    pub rows: Vec<GoalRow>,
    /// Where goals are set (none through a share link).
    pub settings: Option<String>,
    /// `goals.csv` of the same range (empty through a share link).
    pub csv: String,
}

/// The event names whose converting visitors the dashboard's breakdown
/// read gathers.
pub fn event_names(site: &Site) -> Vec<&str> {
    site.goals
        .iter()
        .filter_map(|g| match g {
            Goal::Event(name) => Some(name.as_str()),
            Goal::Page(_) => None,
        })
        .collect()
}

/// A conversion rate's change in percentage points, one decimal.
fn points(now: f64, before: f64) -> String {
    let d = (now - before) * 100.0;
    if d.abs() < 0.05 {
        "±0 pts".into()
    } else if d > 0.0 {
        format!("+{d:.1} pts")
    } else {
        format!("−{:.1} pts", -d)
    }
}

fn rate(converting: i64, visitors: Option<i64>) -> Option<f64> {
    visitors
        .filter(|v| *v > 0)
        .map(|v| (converting as f64 / v as f64).min(1.0))
}

/// The table, from the breakdowns of the period and the one before
/// (read with [`event_names`]) and, for page goals, their pages' own
/// figures.
pub async fn view(
    state: &WebState,
    site: &Site,
    period: &Period,
    (now, before): (&Breakdown, &Breakdown),
    settings: Option<String>,
    csv: String,
    page_href: impl Fn(&str) -> String,
) -> Result<GoalsView, mongodb::error::Error> {
    let previous = period.previous();
    let ranges = [(period.from, period.to), (previous.from, previous.to)];
    // The site's visitors are the rates' denominator: without goals there
    // is no rate, and a year of them is one of a dashboard's costliest reads.
    let site_visitors = if site.goals.is_empty() {
        None
    } else {
        visits::visitors(&state.store, &Scope::of_site(site), &ranges).await?
    };
    let (visitors_now, visitors_before) = match &site_visitors {
        Some(v) => (Some(v[0]), Some(v[1])),
        None => (None, None),
    };
    let events_now = now.of(Dimension::Event);
    let events_before = before.of(Dimension::Event);
    let mut rows = Vec::with_capacity(site.goals.len());
    for goal in &site.goals {
        let (conversions, was, converting, converted_before) = match goal {
            Goal::Event(name) => (
                events_now.of(name),
                events_before.of(name),
                Some(now.converting_visitors(name)),
                Some(before.converting_visitors(name)),
            ),
            Goal::Page(path) => {
                let page = Page::new(&site.domain, path);
                let scope = Scope::Page(&page);
                let (series_now, series_before, visitors) = tokio::try_join!(
                    queries::read_series(&state.store, &scope, period),
                    queries::read_series(&state.store, &scope, &previous),
                    visits::visitors(&state.store, &scope, &ranges),
                )?;
                (
                    queries::total(&series_now),
                    queries::total(&series_before),
                    visitors.as_ref().map(|v| v[0]),
                    visitors.as_ref().map(|v| v[1]),
                )
            }
        };
        let rate_now = converting.and_then(|c| rate(c, visitors_now));
        let rate_before = converted_before.and_then(|c| rate(c, visitors_before));
        rows.push(GoalRow {
            kind: goal.kind(),
            name: goal.name().to_owned(),
            href: match goal {
                Goal::Page(path) => Some(page_href(path.as_str())),
                Goal::Event(_) => None,
            },
            conversions,
            conversions_change: fmt::change(conversions, was),
            visitors: converting.map_or_else(|| "—".to_owned(), |c| fmt::thousands(&c)),
            converting,
            rate: rate_now.map_or_else(
                || "—".to_owned(),
                |r| crate::reports::numbers::percent(r, 1),
            ),
            rate_percent: rate_now.map_or_else(String::new, |r| format!("{:.1}", r * 100.0)),
            rate_change: match (rate_now, rate_before) {
                (Some(a), Some(b)) => points(a, b),
                (Some(_), None) => "new".to_owned(),
                _ => "—".to_owned(),
            },
        });
    }
    Ok(GoalsView {
        rows,
        settings,
        csv,
    })
}

/// `GET /sites/{id}/goals.csv`: the Goals table of the range, one row per
/// goal.
pub async fn goals_csv(
    super::shared::CsvRequest(r): super::shared::CsvRequest,
    q: super::Query,
) -> super::shared::CsvAnswer {
    // A long range of a site whose totals are being built: what is being
    // prepared, not a 503.
    let site = r.site.clone();
    goals_csv_of(super::shared::CsvRequest(r), q)
        .await
        .map_err(|e| e.unless_preparing(&site))
}

async fn goals_csv_of(
    super::shared::CsvRequest(r): super::shared::CsvRequest,
    q: super::Query,
) -> super::shared::CsvAnswer {
    let filters = q.filters()?;
    if !filters.is_empty() {
        return super::filtered_csv::goals(r, &q, &filters).await;
    }
    let (state, site, started) = (r.state, r.site, r.started);
    let period = super::resolve_kept(&q, &state, site.time_zone.tz())?;
    let scope = crate::reports::sources::SourceScope::Site(&site);
    let request = crate::reports::request::ReportRequest::new(
        &state.store,
        scope,
        &period,
        state.clock.now(),
    );
    let read = crate::reports::compared::breakdowns(&request, &event_names(&site)).await?;
    let no_links = |_: &str| String::new();
    let goals = view(
        &state,
        &site,
        &period,
        (&read.now, &read.before),
        None,
        String::new(),
        no_links,
    )
    .await?;
    let rows = goals.rows.into_iter().map(|g| {
        vec![
            g.kind.to_owned(),
            g.name,
            g.conversions.to_string(),
            // Plain numbers, as in every CSV; unknown is an empty cell.
            g.converting.map_or_else(String::new, |c| c.to_string()),
            g.rate_percent,
        ]
    });
    let body = crate::reports::csv::table(
        &[
            "kind",
            "goal",
            "conversions",
            "converting_visitors",
            "conversion_rate_percent",
        ],
        rows,
    );
    super::timed(&state, started);
    Ok(super::shared::csv_response(
        &format!(
            "{}_goals.csv",
            super::shared::file_stem(&site, None, period.from, period.to)
        ),
        body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_of_the_visitors_and_changes_in_points() {
        assert_eq!(rate(5, Some(200)), Some(0.025));
        assert_eq!(rate(5, Some(0)), None);
        assert_eq!(rate(5, None), None);
        // Two estimates may disagree by a little: never above 100 %.
        assert_eq!(rate(201, Some(200)), Some(1.0));
        assert_eq!(points(0.025, 0.02), "+0.5 pts");
        assert_eq!(points(0.02, 0.025), "−0.5 pts");
        assert_eq!(points(0.02, 0.0201), "±0 pts");
    }
}

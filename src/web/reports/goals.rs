//! The dashboard's Goals table and `goals.csv`: each goal the owner
//! marked on the settings page, with its conversions, its converting
//! visitors (with filters: visits) and conversion rate, each against the
//! previous period ([`crate::reports::goals`] says what each counts).

use crate::domain::Goal;
use crate::domain::RevenueTotal;
use crate::reports::goals::{Converting, Goals};
use crate::web::fmt;

pub struct GoalRow {
    pub kind: &'static str,
    pub name: String,
    /// A page goal's page report over the same range: its views are the
    /// goal's conversions, so that view answers exactly (an event goal has
    /// no view of its own to open).
    pub href: Option<String>,
    pub conversions: i64,
    pub conversions_change: String,
    /// Converting visitors or visits ("—" where unknown).
    pub visitors: String,
    pub converting: Option<i64>,
    /// What `converting` counts: "visitors" or "visits".
    pub converting_kind: &'static str,
    pub rate: String,
    /// The rate as a plain percentage with one decimal, for `goals.csv`
    /// (empty where unknown).
    pub rate_percent: String,
    pub rate_change: String,
    /// Per currency its events carried: the sum, the average per event
    /// that carried one, and the change of the sum.
    pub revenue: Vec<RevenueCell>,
}

/// One currency of a goal's revenue.
pub struct RevenueCell {
    pub currency: String,
    /// As the page shows them (`1,234.50 EUR`).
    pub sum: String,
    pub average: String,
    /// Plain decimals, for `goals.csv`.
    pub amount: String,
    pub average_amount: String,
    pub events: i64,
    pub change: String,
}

impl RevenueCell {
    fn of(now: &RevenueTotal, was: &RevenueTotal) -> Self {
        RevenueCell {
            currency: now.currency.to_string(),
            sum: now.shown(),
            average: now.average_shown(),
            amount: now.amount(),
            average_amount: now.average().unwrap_or_default(),
            events: now.conversions,
            change: revenue_change(now.scaled, was.scaled),
        }
    }
}

/// A sum's change against the period before, in whole percent ("new"
/// where there was none): the sums are exact, their ratio is a rounded
/// figure like every other change.
fn revenue_change(now: i128, before: i128) -> String {
    if before == 0 {
        return if now == 0 {
            "±0%".into()
        } else {
            "new".into()
        };
    }
    let d = (now - before) * 100 / before.abs();
    match d.cmp(&0) {
        std::cmp::Ordering::Equal => "±0%".into(),
        std::cmp::Ordering::Greater => format!("+{d}%"),
        std::cmp::Ordering::Less => format!("−{}%", -d),
    }
}

pub struct GoalsView {
    pub rows: Vec<GoalRow>,
    /// Said when some row's figures were read from a sample of the visits
    /// (with filters, or a goal on a property value): they are estimates.
    pub sampled: Option<String>,
    /// Whether any goal's events carried revenue (the columns show then).
    pub has_revenue: bool,
    /// What converts: "visitors", or "visits" with filters.
    pub converting: &'static str,
    /// Where goals are set (none through a share link).
    pub settings: Option<String>,
    /// `goals.csv` of the same range (empty through a share link).
    pub csv: String,
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

/// The table from the engine's goals.
pub fn view(
    goals: &Goals,
    settings: Option<String>,
    csv: String,
    page_href: impl Fn(&str) -> String,
) -> GoalsView {
    let rows = goals
        .rows
        .iter()
        .map(|g| {
            let (rate_now, rate_before) = (g.rate(), g.rate_before());
            GoalRow {
                kind: g.goal.kind(),
                // A page goal's path (the table says "Visit"), an event's
                // name, with its property where it has one.
                name: match &g.goal {
                    Goal::Page(path) => path.as_str().to_owned(),
                    goal => goal.label(),
                },
                href: match &g.goal {
                    Goal::Page(path) => Some(page_href(path.as_str())),
                    Goal::Event(_) | Goal::EventWith { .. } => None,
                },
                conversions: g.conversions,
                conversions_change: fmt::change(g.conversions, g.conversions_before),
                // A property goal counts visits in a table of visitors:
                // its cell says so.
                visitors: g.converting.map_or_else(
                    || "—".to_owned(),
                    |c| match (g.converting_kind, goals.converting) {
                        (Converting::Visits, Converting::Visitors) => {
                            format!("{} visits", fmt::thousands(&c))
                        }
                        _ => fmt::thousands(&c),
                    },
                ),
                converting: g.converting,
                converting_kind: g.converting_kind.noun(),
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
                revenue: g
                    .revenue_compared()
                    .iter()
                    .map(|(now, was)| RevenueCell::of(now, was))
                    .collect(),
            }
        })
        .collect::<Vec<GoalRow>>();
    let share = goals.rows.iter().map(|g| g.sampled).fold(1.0_f64, f64::min);
    GoalsView {
        sampled: crate::reports::filtered_read::sample_words(share),
        has_revenue: rows.iter().any(|r| !r.revenue.is_empty()),
        rows,
        converting: match goals.converting {
            Converting::Visitors => "visitors",
            Converting::Visits => "visits",
        },
        settings,
        csv,
    }
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
    let (state, site, started) = (r.state, r.site, r.started);
    let period = super::resolve_kept(&q, &state, site.time_zone.tz())?;
    let scope = crate::reports::sources::SourceScope::Site(&site);
    let request = crate::reports::request::ReportRequest::new(
        &state.store,
        scope,
        &period,
        state.clock.now(),
    )
    .filtered(&filters);
    let report =
        crate::reports::engine::Report::new(state.reads(), &site, request, &state.retention);
    let (goals, said) = report.goals().await?;
    let converting = goals.converting.noun();
    let goals = view(&goals, None, String::new(), |_| String::new());
    // One row per goal and currency its events carried (a goal without
    // revenue: one row, its revenue cells empty), so that every cell is a
    // plain number a spreadsheet adds up within a currency.
    let rows = goals.rows.into_iter().flat_map(|g| {
        let row = |cell: Option<&RevenueCell>| {
            vec![
                g.kind.to_owned(),
                g.name.clone(),
                g.conversions.to_string(),
                // Plain numbers, as in every CSV; unknown is an empty cell.
                g.converting.map_or_else(String::new, |c| c.to_string()),
                g.rate_percent.clone(),
                cell.map_or_else(String::new, |c| c.currency.clone()),
                cell.map_or_else(String::new, |c| c.amount.clone()),
                cell.map_or_else(String::new, |c| c.events.to_string()),
                cell.map_or_else(String::new, |c| c.average_amount.clone()),
                g.converting_kind.to_owned(),
            ]
        };
        if g.revenue.is_empty() {
            vec![row(None)]
        } else {
            g.revenue.iter().map(|c| row(Some(c))).collect()
        }
    });
    let body = crate::reports::csv::table(
        &[
            "kind",
            "goal",
            "conversions",
            &format!("converting_{converting}"),
            "conversion_rate_percent",
            "currency",
            "revenue",
            "revenue_events",
            "average_revenue",
            "converting_kind",
        ],
        rows,
    );
    super::timed(&state, started);
    let stem = super::shared::file_stem(&site, None, period.from, period.to);
    Ok(super::shared::report_csv(
        &state, &stem, &said, "goals", body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_changes_in_points() {
        assert_eq!(points(0.025, 0.02), "+0.5 pts");
        assert_eq!(points(0.02, 0.025), "−0.5 pts");
        assert_eq!(points(0.02, 0.0201), "±0 pts");
    }

    #[test]
    fn figures_read_from_a_sample_say_so() {
        use crate::reports::goals::GoalFigures;
        let row = |goal: Goal, sampled: f64| GoalFigures {
            goal,
            converting_kind: Converting::Visits,
            sampled,
            conversions: 4,
            conversions_before: 2,
            converting: Some(3),
            converting_before: Some(1),
            of: Some(10),
            of_before: Some(10),
            revenue: Vec::new(),
            revenue_before: Vec::new(),
        };
        let whole = Goals {
            rows: vec![row(Goal::Event("Signup".into()), 1.0)],
            converting: Converting::Visitors,
        };
        assert!(view(&whole, None, String::new(), |_| String::new())
            .sampled
            .is_none());
        let with = Goal::parse_event_with("Signup", "plan", "pro").unwrap();
        let sampled = Goals {
            rows: vec![row(Goal::Event("Signup".into()), 1.0), row(with, 0.25)],
            converting: Converting::Visitors,
        };
        let v = view(&sampled, None, String::new(), |_| String::new());
        assert!(v.sampled.unwrap().contains("1 in 4"));
        assert_eq!(v.rows[1].visitors, "3 visits");
        assert_eq!(v.rows[1].name, "Signup with plan = pro");
    }

    #[test]
    fn revenue_changes_in_whole_percent() {
        assert_eq!(revenue_change(150, 100), "+50%");
        assert_eq!(revenue_change(50, 100), "−50%");
        assert_eq!(revenue_change(100, 100), "±0%");
        assert_eq!(revenue_change(100, 0), "new");
        assert_eq!(revenue_change(0, 0), "±0%");
        assert_eq!(revenue_change(-50, -100), "+50%");
    }
}

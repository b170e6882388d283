//! A site's goals over a report's period: each goal's conversions and the
//! converting share, against the period before. From the buckets: an
//! event goal's conversions are its events and its converting visitors the
//! sketch of those who sent it (`converted.<name>` in the site's breakdown
//! buckets); a page goal's are the page's views and visitors; the rate is
//! of the site's visitors. From the visit store (with filters), the
//! converting visits of the filtered visits and the rate of those visits.
//! A goal on an event with a property value is always counted from the
//! visit store (the buckets count events by name alone): its events that
//! carried the value, the visits that sent one, out of all visits.

use super::breakdowns::Breakdown;
use super::filtered::Figures;
use super::{queries, visits, Period, Scope};
use crate::domain::{Dimension, Goal, Page, RevenueTotal};
use crate::storage::sites::Site;
use crate::storage::Store;

/// Who converts: what a goal's converting count and its rate's
/// denominator count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converting {
    /// Unique visitors (the buckets' sketches).
    Visitors,
    /// Visits (the visit store, with filters).
    Visits,
}

impl Converting {
    pub fn noun(self) -> &'static str {
        match self {
            Converting::Visitors => "visitors",
            Converting::Visits => "visits",
        }
    }
}

/// One goal's figures over the period and the period before.
#[derive(Debug, Clone)]
pub struct GoalFigures {
    pub goal: Goal,
    /// What its converting count counts: the table's, but visits for a
    /// property goal in a table of visitors.
    pub converting_kind: Converting,
    /// The share of visitors its figures were read from (1: all; below
    /// when read from a sampled visit store: estimates).
    pub sampled: f64,
    /// Its events, or its page's views.
    pub conversions: i64,
    pub conversions_before: i64,
    /// Visitors or visits that converted (`None`: unknown).
    pub converting: Option<i64>,
    pub converting_before: Option<i64>,
    /// The rate's denominators: every visitor or visit of the period.
    pub of: Option<i64>,
    pub of_before: Option<i64>,
    /// An event goal's revenue per currency, in the period and the one
    /// before (empty when its events carried none).
    pub revenue: Vec<RevenueTotal>,
    pub revenue_before: Vec<RevenueTotal>,
}

impl GoalFigures {
    /// Converting out of all, 0 to 1 (`None`: unknown, or none to be of).
    pub fn rate(&self) -> Option<f64> {
        rate(self.converting, self.of)
    }

    pub fn rate_before(&self) -> Option<f64> {
        rate(self.converting_before, self.of_before)
    }

    /// Each currency of its revenue in either period, with its totals in
    /// this period and the one before (none there: zero): this period's
    /// currencies in their order, then those only the period before had.
    pub fn revenue_compared(&self) -> Vec<(RevenueTotal, RevenueTotal)> {
        let zero = |currency| RevenueTotal {
            currency,
            scaled: 0,
            conversions: 0,
        };
        let before_of = |currency| {
            self.revenue_before
                .iter()
                .find(|b| b.currency == currency)
                .copied()
                .unwrap_or_else(|| zero(currency))
        };
        let mut out: Vec<(RevenueTotal, RevenueTotal)> = self
            .revenue
            .iter()
            .map(|r| (*r, before_of(r.currency)))
            .collect();
        for b in &self.revenue_before {
            if !self.revenue.iter().any(|r| r.currency == b.currency) {
                out.push((zero(b.currency), *b));
            }
        }
        out
    }
}

/// Two estimates may disagree by a little: never above 100 %.
fn rate(converting: Option<i64>, of: Option<i64>) -> Option<f64> {
    let (c, of) = (converting?, of.filter(|v| *v > 0)?);
    Some((c as f64 / of as f64).min(1.0))
}

/// A site's goals, and what converts in them.
#[derive(Debug, Clone)]
pub struct Goals {
    pub rows: Vec<GoalFigures>,
    pub converting: Converting,
}

/// The event names whose converting visitors a breakdown read gathers.
pub fn event_names(site: &Site) -> Vec<&str> {
    site.goals
        .iter()
        .filter_map(|g| match g {
            Goal::Event(name) => Some(name.as_str()),
            Goal::Page(_) | Goal::EventWith { .. } => None,
        })
        .collect()
}

/// Whether any goal is counted from the visit store whatever the filters.
pub fn needs_visits(site: &Site) -> bool {
    site.goals.iter().any(|g| g.property().is_some())
}

/// A goal's row from the visit store's figures of the period and the one
/// before: its conversions (an event goal's events, with a property only
/// those carrying its value; a page goal's views), the visits that
/// converted out of all the visits, and an event goal's revenue.
fn from_visit_figures(goal: &Goal, (now, was): (&Figures, &Figures)) -> GoalFigures {
    let of = |f: &Figures| -> (i64, i64, Vec<RevenueTotal>) {
        match goal {
            Goal::Event(name) => (
                f.breakdowns
                    .get(&Dimension::Event)
                    .and_then(|m| m.get(name.as_str()))
                    .copied()
                    .unwrap_or(0),
                f.converting_events.get(name).copied().unwrap_or(0),
                f.revenue_of(name),
            ),
            Goal::Page(path) => (
                f.pages.get(path.as_str()).map_or(0, |p| p.views),
                f.converting_pages.get(path.as_str()).copied().unwrap_or(0),
                Vec::new(),
            ),
            Goal::EventWith { name, key, value } => f
                .event_properties
                .iter()
                .find(|((e, k, v), _)| **e == **name && **k == **key && **v == **value)
                .map_or((0, 0, Vec::new()), |(_, p)| {
                    (
                        p.events,
                        p.visits,
                        crate::domain::revenue::totals(
                            p.revenue.iter().map(|(c, (s, n))| (*c, *s, *n)),
                        ),
                    )
                }),
        }
    };
    let (
        (conversions, converting, revenue),
        (conversions_before, converting_before, revenue_before),
    ) = (of(now), of(was));
    GoalFigures {
        goal: goal.clone(),
        converting_kind: Converting::Visits,
        sampled: now.sampled,
        conversions,
        conversions_before,
        converting: Some(converting),
        converting_before: Some(converting_before),
        of: Some(now.visits),
        of_before: Some(was.visits),
        revenue,
        revenue_before,
    }
}

/// The goals from the breakdowns of the period and the one before (read
/// with [`event_names`]) and, for page goals, their pages' own figures.
pub async fn from_buckets(
    store: &Store,
    site: &Site,
    period: &Period,
    (now, before): (&Breakdown, &Breakdown),
    visits: Option<(&Figures, &Figures)>,
) -> Result<Goals, mongodb::error::Error> {
    let previous = period.previous();
    let ranges = [(period.from, period.to), (previous.from, previous.to)];
    // The site's visitors are the rates' denominator: without goals there
    // is no rate, and a year of them is one of a dashboard's costliest reads.
    let site_visitors = if site.goals.is_empty() {
        None
    } else {
        visits::visitors(store, &Scope::of_site(site), &ranges).await?
    };
    let (of, of_before) = match &site_visitors {
        Some(v) => (Some(v[0]), Some(v[1])),
        None => (None, None),
    };
    let events_now = now.of(Dimension::Event);
    let events_before = before.of(Dimension::Event);
    let mut rows = Vec::with_capacity(site.goals.len());
    for goal in &site.goals {
        if goal.property().is_some() {
            if let Some(visits) = visits {
                rows.push(from_visit_figures(goal, visits));
            }
            continue;
        }
        let (revenue, revenue_before) = match goal {
            Goal::Event(name) => (
                now.revenue_of(name).to_vec(),
                before.revenue_of(name).to_vec(),
            ),
            Goal::Page(_) | Goal::EventWith { .. } => (Vec::new(), Vec::new()),
        };
        let (conversions, conversions_before, converting, converting_before) = match goal {
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
                    queries::read_series(store, &scope, period),
                    queries::read_series(store, &scope, &previous),
                    visits::visitors(store, &scope, &ranges),
                )?;
                (
                    queries::total(&series_now),
                    queries::total(&series_before),
                    visitors.as_ref().map(|v| v[0]),
                    visitors.as_ref().map(|v| v[1]),
                )
            }
            Goal::EventWith { .. } => unreachable!("counted from the visit store above"),
        };
        rows.push(GoalFigures {
            goal: goal.clone(),
            converting_kind: Converting::Visitors,
            sampled: 1.0,
            conversions,
            conversions_before,
            converting,
            converting_before,
            of,
            of_before,
            revenue,
            revenue_before,
        });
    }
    Ok(Goals {
        rows,
        converting: Converting::Visitors,
    })
}

/// The goals among the filtered visits of the period (`now`) and of the
/// period before (`was`): a goal's conversions its events or its page's
/// views, its converting visits those that sent the event or viewed the
/// page, out of all the filtered visits.
pub fn from_visits(site: &Site, now: &Figures, was: &Figures) -> Goals {
    let rows = site
        .goals
        .iter()
        .map(|goal| from_visit_figures(goal, (now, was)))
        .collect();
    Goals {
        rows,
        converting: Converting::Visits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revenue_compares_every_currency_of_either_period() {
        use crate::domain::revenue::totals;
        let (eur, usd, jpy) = (
            crate::domain::Currency::parse("EUR").unwrap(),
            crate::domain::Currency::parse("USD").unwrap(),
            crate::domain::Currency::parse("JPY").unwrap(),
        );
        let g = GoalFigures {
            goal: Goal::Event("Buy".into()),
            converting_kind: Converting::Visitors,
            sampled: 1.0,
            conversions: 3,
            conversions_before: 2,
            converting: None,
            converting_before: None,
            of: None,
            of_before: None,
            revenue: totals([(eur, 10, 2), (jpy, 7, 1)]),
            revenue_before: totals([(eur, 4, 1), (usd, 5, 1)]),
        };
        let got: Vec<(String, i128, i128)> = g
            .revenue_compared()
            .into_iter()
            .map(|(now, was)| (now.currency.to_string(), now.scaled, was.scaled))
            .collect();
        assert_eq!(
            got,
            [
                ("EUR".to_owned(), 10, 4),
                ("JPY".to_owned(), 7, 0),
                ("USD".to_owned(), 0, 5)
            ]
        );
    }

    #[test]
    fn a_rate_is_of_the_converting_kind_and_never_above_one() {
        assert_eq!(rate(Some(5), Some(200)), Some(0.025));
        assert_eq!(rate(Some(5), Some(0)), None);
        assert_eq!(rate(Some(5), None), None);
        assert_eq!(rate(None, Some(5)), None);
        assert_eq!(rate(Some(201), Some(200)), Some(1.0));
    }
}

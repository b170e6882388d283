//! What a report's chart shows (views, visits or visitors per bucket),
//! and those points as the buckets and day counters hold them.

use super::queries::{self, Point, Scope};
use super::{chart, visits, Period};
use crate::storage::Store;

/// What the chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartMetric {
    Views,
    Visitors,
    Visits,
}

impl ChartMetric {
    pub const ALL: [ChartMetric; 3] = [Self::Visitors, Self::Visits, Self::Views];

    /// `metric=` of a report's address (views when absent).
    pub fn parse(raw: Option<&str>) -> Result<Self, String> {
        match raw.filter(|r| !r.is_empty()) {
            None => Ok(Self::Views),
            Some(raw) => Self::ALL
                .into_iter()
                .find(|m| m.key() == raw)
                .ok_or_else(|| "The chart shows visitors, visits or views.".to_owned()),
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Self::Views => "views",
            Self::Visitors => "visitors",
            Self::Visits => "visits",
        }
    }

    /// Its name as a caption or tab ("Visitors").
    pub fn caption(self) -> &'static str {
        match self {
            Self::Views => "Views",
            Self::Visitors => "Visitors",
            Self::Visits => "Visits",
        }
    }

    pub fn noun(self) -> chart::Noun {
        match self {
            Self::Views => chart::VIEWS,
            Self::Visitors => chart::Noun {
                one: "visitor",
                many: "visitors",
            },
            Self::Visits => chart::Noun {
                one: "visit",
                many: "visits",
            },
        }
    }
}

/// The chart's points for `metric`, one per shown bucket, and why they are
/// views instead when the stored data cannot give visitors. `views` are
/// the period's views as read units.
pub async fn points(
    store: &Store,
    scope: &Scope<'_>,
    period: &Period,
    metric: ChartMetric,
    views: &[Point],
) -> Result<(ChartMetric, Vec<Point>, Option<&'static str>), mongodb::error::Error> {
    match metric {
        ChartMetric::Views => Ok((metric, queries::rollup(period, views), None)),
        ChartMetric::Visits => {
            let points = visits::counter_series(store, scope, period, visits::VISITS).await?;
            Ok((metric, points, None))
        }
        ChartMetric::Visitors => match visits::visitors_series(store, scope, period).await? {
            Some(points) => Ok((metric, points, None)),
            None => Ok((
                ChartMetric::Views,
                queries::rollup(period, views),
                Some("Visitors are shown once the site's totals are computed (a few minutes after an upgrade); views meanwhile."),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_shows_views_visitors_or_visits() {
        assert_eq!(ChartMetric::parse(None), Ok(ChartMetric::Views));
        assert_eq!(ChartMetric::parse(Some("")), Ok(ChartMetric::Views));
        assert_eq!(
            ChartMetric::parse(Some("visitors")),
            Ok(ChartMetric::Visitors)
        );
        assert!(ChartMetric::parse(Some("bounces")).is_err());
    }
}

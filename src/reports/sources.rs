//! Top sources of a site or a page over a range, from the source buckets
//! (`storage::breakdowns`): whole UTC days from the day buckets, the edges
//! from the hour buckets.
//!
//! Sources are kept by the hour, so a range that starts or ends inside an
//! hour (a last-hour preset, a zone with a :30 or :45 offset) counts that
//! whole hour's sources: [`SourceTotals::from`]/`to` say which stretch was
//! read, and the reports say so. View totals stay exact to the minute.
//!
//! Views without a known source (the pixel's alone) write no source
//! bucket: [`SourceShares`] adds every view of the same whole hours, so the
//! panel's rows, with a "(none)" row for the difference, add up to them.

use chrono::{DateTime, Utc};

use super::queries::{self, Scope};
use super::Period;

pub use super::hours::{covered, plan, SourceScope, Span};
use crate::domain::{Dimension, Source};
use crate::storage::{Resolution, Store};

/// The sources of a stretch of time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceTotals {
    /// Views per source, most first (ties by name).
    pub sources: Vec<(Source, i64)>,
    /// Views of sources beyond a bucket's cap.
    pub other: i64,
    /// Every view with a known source (the sources plus `other`).
    pub total: i64,
    /// The whole hours read.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl SourceTotals {
    /// No views, over the whole hours [`top_sources`] reads for `[from, to)`:
    /// the answer for a page that cannot exist.
    pub fn none(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        let (from, to) = covered(from, to);
        SourceTotals {
            from,
            to,
            ..Self::default()
        }
    }

    /// The sources of a breakdown read over `[from, to)` (which read them
    /// with its other dimensions, in the same pass over the buckets).
    pub fn of(read: &super::breakdowns::Breakdown, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        let totals = read.of(Dimension::Source);
        SourceTotals {
            sources: totals
                .names
                .into_iter()
                .map(|(name, v)| (Source::from_stored(name), v))
                .collect(),
            other: totals.other,
            total: totals.total,
            ..SourceTotals::none(from, to)
        }
    }

    pub fn views_of(&self, source: &Source) -> i64 {
        self.sources
            .iter()
            .find(|(s, _)| s == source)
            .map_or(0, |(_, v)| *v)
    }
}

/// The name of the row of views without a known source, in the pages,
/// `sources.csv` and the API's words: reserved, so no source is called so.
pub const NONE_ROW: &str = "(none)";

/// The sources of a stretch of time and every view of the same whole
/// hours: the named sources, `other` and the views without a known source
/// add up to [`SourceShares::views`], which the shares are of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceShares {
    pub sources: SourceTotals,
    /// Every view of the covered hours, with a known source or not.
    pub views: i64,
}

impl SourceShares {
    pub fn new(sources: SourceTotals, views: i64) -> Self {
        // Never below the sources: a page's view buckets may have expired
        // under retention where its source buckets (kept for ever) have not.
        let views = views.max(sources.total);
        SourceShares { sources, views }
    }

    /// Views of the covered hours without a known source: counted by the
    /// pixel alone, or so new that their sources are not written yet.
    pub fn without_source(&self) -> i64 {
        self.views - self.sources.total
    }
}

/// Longest source filter accepted, in characters.
pub const MAX_FILTER_CHARS: usize = 100;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("The source filter is at most {MAX_FILTER_CHARS} characters of text.")]
pub struct BadSourceFilter;

/// The "Top sources" filter of the pages, `sources.csv` and the API: a
/// trimmed substring of the source's name; empty matches every source.
pub fn parse_filter(raw: Option<&str>) -> Result<String, BadSourceFilter> {
    // Checked as typed, before trimming: a tab or a newline at either end
    // is refused like anywhere else (the API document's pattern says so).
    let raw = raw.unwrap_or_default();
    if raw.chars().count() > MAX_FILTER_CHARS || raw.chars().any(char::is_control) {
        return Err(BadSourceFilter);
    }
    Ok(raw.trim().to_owned())
}

/// The sources whose name contains `filter`, ignoring case, most first.
pub fn matching<'a>(totals: &'a SourceTotals, filter: &str) -> Vec<&'a (Source, i64)> {
    let needle = filter.to_lowercase();
    totals
        .sources
        .iter()
        .filter(|(s, _)| needle.is_empty() || s.as_str().to_lowercase().contains(&needle))
        .collect()
}

/// Every view of `scope` in the whole UTC hours `[from, to)` (from the day
/// buckets' hour slots: one document per day).
pub async fn covered_views(
    store: &Store,
    scope: &Scope<'_>,
    (from, to): Span,
) -> Result<i64, mongodb::error::Error> {
    let hours = Period::aligned(from, to, Resolution::Hour);
    Ok(queries::total(
        &queries::read_series(store, scope, &hours).await?,
    ))
}

pub async fn top_sources(
    store: &Store,
    scope: SourceScope<'_>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<SourceTotals, mongodb::error::Error> {
    let read = super::breakdowns::read(store, scope, &[Dimension::Source], &[], from, to).await?;
    Ok(SourceTotals::of(&read, from, to))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_empty_stretch_covers_no_hour() {
        use chrono::TimeZone;
        let t = chrono::Utc
            .with_ymd_and_hms(2026, 11, 22, 10, 15, 0)
            .unwrap();
        assert_eq!(super::covered(t, t), (t, t));
        let h = chrono::Utc
            .with_ymd_and_hms(2026, 11, 22, 10, 0, 0)
            .unwrap();
        assert_eq!(
            super::covered(t, t + chrono::TimeDelta::minutes(1)),
            (h, h + chrono::TimeDelta::hours(1))
        );
    }

    #[test]
    fn the_source_filter_is_trimmed_bounded_and_text() {
        use super::{parse_filter, BadSourceFilter};
        assert_eq!(parse_filter(None), Ok(String::new()));
        assert_eq!(parse_filter(Some("  google ")), Ok("google".into()));
        assert_eq!(parse_filter(Some(&"é".repeat(100))), Ok("é".repeat(100)));
        assert_eq!(parse_filter(Some(&"a".repeat(101))), Err(BadSourceFilter));
        assert_eq!(parse_filter(Some("goo\u{7}gle")), Err(BadSourceFilter));
        assert_eq!(parse_filter(Some("google\n")), Err(BadSourceFilter));
    }

    #[test]
    fn matching_ignores_case_and_keeps_the_order() {
        use super::{matching, SourceTotals};
        use crate::domain::Source;
        let at = chrono::DateTime::UNIX_EPOCH;
        let totals = SourceTotals {
            sources: vec![
                (Source::direct(), 5),
                (Source::from_stored("google.com".into()), 3),
                (Source::from_stored("news.google.com".into()), 1),
            ],
            other: 0,
            total: 9,
            from: at,
            to: at,
        };
        let rows: Vec<&str> = matching(&totals, "GOOGLE")
            .iter()
            .map(|(s, _)| s.as_str())
            .collect();
        assert_eq!(rows, ["google.com", "news.google.com"]);
        assert_eq!(matching(&totals, "").len(), 3);
    }

    use super::*;
    use chrono::TimeZone;

    #[test]
    fn views_without_a_source_are_the_rest_of_the_covered_hours() {
        let at = chrono::DateTime::UNIX_EPOCH;
        let sources = |total, other| SourceTotals {
            sources: vec![(Source::direct(), total - other)],
            other,
            total,
            from: at,
            to: at,
        };
        let shares = SourceShares::new(sources(6, 1), 10);
        assert_eq!((shares.views, shares.without_source()), (10, 4));
        // View buckets gone under retention while the sources are kept:
        // never a negative "(none)".
        let shares = SourceShares::new(sources(6, 0), 2);
        assert_eq!((shares.views, shares.without_source()), (6, 0));
    }

    #[test]
    fn the_covered_hours_are_the_whole_hours_read() {
        assert_eq!(
            covered(at(22, 9, 2), at(22, 10, 2)),
            (at(22, 9, 0), at(22, 11, 0))
        );
        assert_eq!(
            covered(at(20, 22, 30), at(23, 2, 0)),
            (at(20, 22, 0), at(23, 2, 0))
        );
    }

    fn at(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap()
    }

    #[test]
    fn whole_days_come_from_day_buckets_and_edges_from_hours() {
        let (hours, days) = plan(at(20, 22, 0), at(23, 2, 0));
        assert_eq!(
            hours,
            vec![(at(20, 22, 0), at(21, 0, 0)), (at(23, 0, 0), at(23, 2, 0))]
        );
        assert_eq!(days, Some((at(21, 0, 0), at(23, 0, 0))));
    }

    #[test]
    fn ranges_inside_an_hour_widen_to_whole_hours() {
        let (hours, days) = plan(at(22, 18, 30), at(22, 19, 10));
        assert_eq!(hours, vec![(at(22, 18, 0), at(22, 20, 0))]);
        assert_eq!(days, None);
        // Kolkata's local day: 18:30 UTC to 18:30 UTC.
        let (hours, days) = plan(at(21, 18, 30), at(22, 18, 30));
        assert_eq!(hours, vec![(at(21, 18, 0), at(22, 19, 0))]);
        assert_eq!(days, None);
    }

    #[test]
    fn aligned_days_need_no_hours() {
        let (hours, days) = plan(at(1, 0, 0), at(23, 0, 0));
        assert!(hours.is_empty());
        assert_eq!(days, Some((at(1, 0, 0), at(23, 0, 0))));
    }
}

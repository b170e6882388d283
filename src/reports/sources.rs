//! Top sources of a site or a page over a range, from the source buckets
//! (`storage::sources`): whole UTC days from the day buckets, the edges
//! from the hour buckets.
//!
//! Sources are kept by the hour, so a range that starts or ends inside an
//! hour (a last-hour preset, a zone with a :30 or :45 offset) counts that
//! whole hour's sources: [`SourceTotals::from`]/`to` say which stretch was
//! read, and the reports say so. View totals stay exact to the minute.

use bson::{doc, Document};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::HashMap;

use super::queries::number;
use crate::domain::{DomainName, Page, Source};
use crate::storage::sources::collection;
use crate::storage::{Resolution, Store, Subject};

/// What a sources report covers.
#[derive(Debug, Clone, Copy)]
pub enum SourceScope<'a> {
    Site(&'a DomainName),
    Page(&'a Page),
}

impl SourceScope<'_> {
    fn subject(&self) -> Subject {
        match self {
            SourceScope::Site(_) => Subject::Site,
            SourceScope::Page(_) => Subject::Page,
        }
    }

    fn key(&self) -> &str {
        match self {
            SourceScope::Site(d) => d.as_str(),
            SourceScope::Page(p) => p.as_str(),
        }
    }
}

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
        let (hours, days) = plan(from, to);
        let read = hours.iter().copied().chain(days);
        let (from, to) = read.fold((to, from), |(f, t), (a, b)| (f.min(a), t.max(b)));
        SourceTotals {
            from,
            to,
            ..Self::default()
        }
    }

    pub fn views_of(&self, source: &Source) -> i64 {
        self.sources
            .iter()
            .find(|(s, _)| s == source)
            .map_or(0, |(_, v)| *v)
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

/// A stretch of time, `[start, end)`.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

/// The hours and days `[from, to)` is read from: whole UTC days in the
/// middle from day buckets, the rest from hour buckets (widened to whole
/// hours).
pub fn plan(from: DateTime<Utc>, to: DateTime<Utc>) -> (Vec<Span>, Option<Span>) {
    let hour = Resolution::Hour;
    let day = Resolution::Day;
    let start = hour.floor(from);
    let end = {
        let f = hour.floor(to);
        if f == to {
            to
        } else {
            f + hour.step()
        }
    };
    let first_day = {
        let f = day.floor(start);
        if f == start {
            start
        } else {
            f + day.step()
        }
    };
    let last_day = day.floor(end);
    if first_day < last_day {
        let mut hours = Vec::new();
        if start < first_day {
            hours.push((start, first_day));
        }
        if last_day < end {
            hours.push((last_day, end));
        }
        (hours, Some((first_day, last_day)))
    } else {
        (vec![(start, end)], None)
    }
}

pub async fn top_sources(
    store: &Store,
    scope: SourceScope<'_>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<SourceTotals, mongodb::error::Error> {
    let (hours, days) = plan(from, to);
    let mut reads: Vec<(Resolution, DateTime<Utc>, DateTime<Utc>)> = hours
        .iter()
        .map(|&(f, t)| (Resolution::Hour, f, t))
        .collect();
    if let Some((f, t)) = days {
        reads.push((Resolution::Day, f, t));
    }
    let mut by_field: HashMap<String, i64> = HashMap::new();
    let mut other = 0;
    let mut total = 0;
    for (g, f, t) in reads {
        let subject = scope.subject();
        let mut cursor = store
            .reports()
            .collection::<Document>(collection(subject, g))
            .find(doc! {
                subject.key_field(): scope.key(),
                "timestamp": {"$gte": bson::DateTime::from_chrono(f), "$lt": bson::DateTime::from_chrono(t)},
            })
            .projection(doc! {"_id": 0, "sources": 1, "other": 1, "totalViews": 1})
            .await?;
        while let Some(d) = cursor.try_next().await? {
            total += number(d.get("totalViews"));
            other += number(d.get("other"));
            if let Ok(sources) = d.get_document("sources") {
                for (field, views) in sources {
                    let views = number(Some(views));
                    match by_field.get_mut(field) {
                        Some(v) => *v += views,
                        None => {
                            by_field.insert(field.clone(), views);
                        }
                    }
                }
            }
        }
    }
    let mut sources: Vec<(Source, i64)> = by_field
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(field, v)| (Source::from_field_name(&field), v))
        .collect();
    sources.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(SourceTotals {
        sources,
        other,
        total,
        ..SourceTotals::none(from, to)
    })
}

#[cfg(test)]
mod tests {
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

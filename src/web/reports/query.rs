//! The query string every report page and export accepts, parsed.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::domain::PagePath;
use crate::reports::RangeQuery;
use crate::web::error::WebError;

/// The query string every report page and export accepts.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReportQuery {
    pub(super) range: Option<String>,
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) res: Option<String>,
    /// Page report: the page's path.
    pub(super) path: Option<String>,
    /// Dashboard: filter for top pages (part of the path).
    pub(super) q: Option<String>,
    /// Dashboard: page of the top-pages list, from 1.
    pub(super) p: Option<String>,
    /// Page report: the minute whose seconds are shown.
    pub(super) minute: Option<String>,
    /// Dashboard: `1` when reloaded while waiting for a site's first view.
    pub(super) waiting: Option<String>,
    /// Dashboard and page report: filter for top sources (part of a name).
    pub(super) src: Option<String>,
    /// Dashboard and page report: what the chart shows (`views`,
    /// `visitors`, `visits`).
    pub(super) metric: Option<String>,
    /// `breakdown.csv`: which dimension (`browser`, `country`, ...).
    pub(super) dimension: Option<String>,
    /// Every report: `filter` values as sent (`filter_query::Query` reads
    /// them, as they repeat).
    #[serde(skip)]
    pub(super) filter: Vec<String>,
}

impl ReportQuery {
    pub(super) fn range(&self) -> RangeQuery {
        RangeQuery {
            range: self.range.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            res: self.res.clone(),
        }
    }

    /// The top-pages filter (part of a path), at most 200 characters.
    pub(super) fn page_filter(&self) -> Result<String, WebError> {
        crate::reports::page_search::parse(self.q.as_deref()).map_err(WebError::invalid)
    }

    /// The top-sources filter (part of a source's name), at most 100
    /// characters.
    pub(super) fn source_filter(&self) -> Result<String, WebError> {
        crate::reports::sources::parse_filter(self.src.as_deref())
            .map_err(|e| WebError::Invalid(e.to_string()))
    }

    /// The dimension of `breakdown.csv`: required, one of the keys.
    pub(super) fn dimension(&self) -> Result<crate::domain::Dimension, WebError> {
        self.dimension
            .as_deref()
            .and_then(crate::domain::Dimension::parse)
            .ok_or_else(|| {
                let keys: Vec<&str> = crate::domain::Dimension::ALL
                    .iter()
                    .map(|d| d.key())
                    .collect();
                WebError::Invalid(format!("`dimension` must be one of: {}.", keys.join(", ")))
            })
    }

    /// What the chart shows (views when absent).
    pub(super) fn chart_metric(&self) -> Result<super::visit_line::ChartMetric, WebError> {
        super::visit_line::ChartMetric::parse(self.metric.as_deref()).map_err(WebError::Invalid)
    }

    /// `path` when given: empty is absent, as in the API (the whole site).
    pub(super) fn optional_path(&self) -> Result<Option<PagePath>, WebError> {
        match self.path.as_deref() {
            Some(p) if !p.is_empty() => self.path().map(Some),
            _ => Ok(None),
        }
    }

    pub(super) fn path(&self) -> Result<PagePath, WebError> {
        let raw = self.path.as_deref().unwrap_or("/");
        PagePath::parse(raw)
            .map_err(|e| WebError::Invalid(format!("That page cannot be shown: {e}.")))
    }

    /// The page the `path` parameter names on `site`.
    pub(super) fn page_of(
        &self,
        site: &crate::storage::sites::Site,
    ) -> Result<(PagePath, crate::domain::Page), WebError> {
        let path = self.path()?;
        let page = crate::domain::Page::new(&site.domain, &path);
        Ok((path, page))
    }

    /// The chosen minute, a local time in the site's zone (the earlier
    /// one where DST ends repeats it).
    pub(super) fn minute(&self, zone: chrono_tz::Tz) -> Result<Option<DateTime<Utc>>, WebError> {
        use chrono::TimeZone;
        match self.minute.as_deref().filter(|m| !m.is_empty()) {
            None => Ok(None),
            Some(raw) => crate::reports::period::parse_local_minute(raw)
                .and_then(|t| zone.from_local_datetime(&t).earliest())
                .map(|t| Some(t.with_timezone(&Utc)))
                .ok_or_else(|| {
                    WebError::Invalid(format!(
                        "The minute must be a date and time (YYYY-MM-DDTHH:MM) between the years 2000 and 2200 that exists in {}.",
                        zone.name()
                    ))
                }),
        }
    }
}

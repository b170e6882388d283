//! One report's question: whose figures (a site, or one page of it), over
//! which period, as of when, read from which store. Every read of a
//! report's breakdowns and sources takes it, so what narrows a report is
//! added here once, for the pages, the CSV files and the API together.

use chrono::{DateTime, Utc};

use super::queries::Scope;
use super::sources::SourceScope;
use super::Period;
use crate::domain::filter::{Filter, FilterDimension, FilterError, Filters};
use crate::storage::Store;

/// The filters of a report of one page: the report's own filters, and its
/// page on top of them, however many they are.
pub fn with_page(filters: &Filters, path: &str) -> Result<Filters, FilterError> {
    let page = Filter::new(FilterDimension::Page, path)?;
    Ok(filters.and_page(page))
}

#[derive(Clone, Copy)]
pub struct ReportRequest<'a> {
    pub store: &'a Store,
    /// The site, or one page of it.
    pub scope: SourceScope<'a>,
    pub period: &'a Period,
    /// What "so far" means for a running period.
    pub now: DateTime<Utc>,
}

impl<'a> ReportRequest<'a> {
    pub fn new(
        store: &'a Store,
        scope: SourceScope<'a>,
        period: &'a Period,
        now: DateTime<Utc>,
    ) -> Self {
        ReportRequest {
            store,
            scope,
            period,
            now,
        }
    }

    /// The same site or page for reading its views.
    pub fn views(&self) -> Scope<'a> {
        self.scope.views()
    }
}

//! One report's question: whose figures (a site, or one page of it), over
//! which period, as of when, narrowed by which filters, read from which
//! store. Every read of a report takes it ([`super::engine`] decides from
//! it where the figures come from), so what narrows a report is added here
//! once, for the pages, the CSV files and the API together.

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
    /// The report's filters (empty: none), without a page report's page,
    /// which `scope` names.
    pub filters: &'a Filters,
}

/// No filters, for the requests that have none.
static NO_FILTERS: std::sync::LazyLock<Filters> = std::sync::LazyLock::new(Filters::default);

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
            filters: &NO_FILTERS,
        }
    }

    /// The same request narrowed by `filters`.
    pub fn filtered(self, filters: &'a Filters) -> Self {
        ReportRequest { filters, ..self }
    }

    /// The same site or page for reading its views.
    pub fn views(&self) -> Scope<'a> {
        self.scope.views()
    }
}

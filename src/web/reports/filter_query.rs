//! The report query with its `filter` values: `filter` repeats
//! (`filter=country:DE&filter=device:mobile`), which a plain
//! `web::Query` cannot read, so they are taken from the query string here
//! and the rest is read as before.

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use std::future::{ready, Ready};
use std::ops::Deref;

use super::ReportQuery;
use crate::domain::{Filter, Filters};
use crate::web::error::WebError;

/// Every `filter` value of a query string, as sent (decoded).
pub fn raw_filters(query_string: &str) -> Vec<String> {
    url::form_urlencoded::parse(query_string.as_bytes())
        .filter(|(k, _)| k == "filter")
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// A report's query string, its filters included.
pub struct Query(ReportQuery);

impl Deref for Query {
    type Target = ReportQuery;

    fn deref(&self) -> &ReportQuery {
        &self.0
    }
}

impl FromRequest for Query {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        // The plain parameters go through `web::Query`, so its configured
        // error page answers a malformed one as before.
        let mut q = match web::Query::<ReportQuery>::from_request(req, payload).into_inner() {
            Ok(q) => q.into_inner(),
            Err(e) => return ready(Err(e)),
        };
        q.filter = raw_filters(req.query_string());
        ready(Ok(Query(q)))
    }
}

impl ReportQuery {
    /// The report's filters, all of which must hold.
    pub fn filters(&self) -> Result<Filters, WebError> {
        Filters::parse(self.filter.iter().map(String::as_str))
            .map_err(|e| WebError::Invalid(format!("That filter cannot be used: {e}.")))
    }

    /// The filters as query parameters (after the range in every link).
    pub(super) fn filter_params(&self) -> Vec<(&'static str, String)> {
        match self.filters() {
            Ok(f) => f.iter().map(|f| ("filter", f.to_string())).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// This query with one more filter (a breakdown row's link).
    pub fn with_filter(&self, filter: Filter) -> Vec<String> {
        let f = self.filters().unwrap_or_default().with(filter);
        f.iter().map(ToString::to_string).collect()
    }
}

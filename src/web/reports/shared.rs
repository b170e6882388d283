//! What several report pages and files render alike: a CSV answer and
//! its file name, the filter chips, the breakdown tables and a country's
//! label. A leaf: it uses none of the other report modules, so each of
//! them can use it without reaching back through another.

use actix_web::http::header;
use actix_web::HttpResponse;
use chrono::{DateTime, Utc};

use super::*;
use crate::domain::filter::{FilterDimension, Filters};
use crate::domain::{Dimension, PagePath};
use crate::storage::sites::Site;
use crate::web::error::{CsvError, WebError};

/// What an export answers: the file, or the reason in plain text.
pub type CsvAnswer = Result<HttpResponse, CsvError>;

/// A [`SiteRequest`] for an export: an unknown site, like every other
/// refusal, is answered in plain text.
pub struct CsvRequest(pub SiteRequest);

impl FromRequest for CsvRequest {
    type Error = CsvError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let site = SiteRequest::from_request(req, payload);
        Box::pin(async move { Ok(CsvRequest(site.await?)) })
    }
}

/// The exports' query strings: one that cannot be read (a parameter given
/// twice) is refused in plain text too, not with the pages' HTML.
pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|err, _| {
        let message = format!("The address has a malformed parameter: {err}.");
        CsvError(WebError::Invalid(message)).into()
    })
}

/// A CSV answer's status and headers, its body still to come.
pub(super) fn csv_header(filename: &str) -> actix_web::HttpResponseBuilder {
    let mut answer = HttpResponse::Ok();
    answer
        .content_type("text/csv; charset=utf-8")
        .insert_header(crate::web::pages::no_store())
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{filename}\""),
        ));
    answer
}

/// A file name part from free text: letters and digits kept, anything
/// else one `-`, at most 80 characters.
pub(super) fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    out.chars().take(80).collect()
}

/// `<domain>[_<page>]_<from>_<to>[_<resolution>]`, e.g.
/// `example_com_blog-hello_2026-11-21T1100_2026-11-22T1100_hour`: the file
/// says what it holds once downloaded.
pub(super) fn file_stem(
    site: &Site,
    path: Option<&PagePath>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> String {
    let mut stem = site.domain.as_str().replace('.', "_");
    if let Some(path) = path {
        let page = slug(path.as_str());
        stem.push('_');
        stem.push_str(if page.is_empty() { "home" } else { &page });
    }
    let tz = site.time_zone.tz();
    stem.push_str(&format!(
        "_{}_{}",
        from.with_timezone(&tz).format("%Y-%m-%dT%H%M"),
        to.with_timezone(&tz).format("%Y-%m-%dT%H%M")
    ));
    stem
}

/// A report file's name: `<stem>[_filtered][_sampled]_<what>.csv`, so a
/// file read from a sample says it holds estimates wherever it is saved
/// (its `Tickertape-Sampled` header gives the share read).
pub(super) fn report_file(stem: &str, said: &crate::reports::engine::Said, what: &str) -> String {
    let filtered = if said.is_filtered() { "_filtered" } else { "" };
    let sampled = if said.is_estimate() { "_sampled" } else { "" };
    format!("{stem}{filtered}{sampled}_{what}.csv")
}

/// The header of a report file whose figures were read from a stream
/// behind by more than its window: by how many seconds (whole, rounded up).
pub(super) const BEHIND_HEADER: &str = "Tickertape-Behind-Seconds";

/// A report file's answer: its head from
/// [`report_csv_header`], then `body`.
pub(super) fn report_csv(
    state: &WebState,
    stem: &str,
    said: &crate::reports::engine::Said,
    what: &str,
    body: String,
) -> HttpResponse {
    report_csv_header(state, stem, said, what).body(body)
}

/// A report file's head: its name from [`report_file`], for a sample the
/// share read, and when the store it was read from is behind by more than
/// its window, by how much ([`BEHIND_HEADER`]).
pub(super) fn report_csv_header(
    state: &WebState,
    stem: &str,
    said: &crate::reports::engine::Said,
    what: &str,
) -> actix_web::HttpResponseBuilder {
    let mut answer = csv_header(&report_file(stem, said, what));
    if said.is_estimate() {
        answer.insert_header(("Tickertape-Sampled", said.sampled.to_string()));
    }
    behind_header(&mut answer, state, said.streams);
    answer
}

/// Adds [`BEHIND_HEADER`] when one of `streams` is past its window.
pub(super) fn behind_header(
    answer: &mut actix_web::HttpResponseBuilder,
    state: &WebState,
    streams: &[crate::storage::progress::Stream],
) {
    if let Some(b) = lags(state).behind(streams) {
        answer.insert_header((BEHIND_HEADER, b.secs.to_string()));
    }
}

/// [`reports::request::with_page`](crate::reports::request::with_page),
/// refused as a bad request.
pub(super) fn with_page(filters: &Filters, path: &str) -> Result<Filters, WebError> {
    crate::reports::request::with_page(filters, path)
        .map_err(|e| WebError::Invalid(format!("That page cannot be filtered on: {e}.")))
}

/// The active filters as chips, each with the link that removes it.
pub struct FilterChips {
    pub chips: Vec<Chip>,
    /// The same report without any filter.
    pub clear_href: String,
}

pub struct Chip {
    pub label: String,
    pub key: String,
    pub value: String,
    pub remove_href: String,
}

impl FilterChips {
    pub fn of(q: &ReportQuery, base: &str, filters: &Filters) -> Self {
        FilterChips::keeping(q, base, &[], filters)
    }

    /// [`Self::of`] for a report whose address keeps `kept` (a page
    /// report's page) whatever the filters.
    pub fn keeping(q: &ReportQuery, base: &str, kept: &[(&str, &str)], filters: &Filters) -> Self {
        FilterChips {
            chips: filters
                .iter()
                .map(|f| Chip {
                    label: f.dimension().title().to_owned(),
                    key: f.dimension().key().to_owned(),
                    value: match f.dimension() {
                        FilterDimension::Country => country_label(f.value()),
                        _ => f.value().to_owned(),
                    },
                    remove_href: q.filtered_link_with(base, kept, &filters.without(f)),
                })
                .collect(),
            clear_href: q.filtered_link_with(base, kept, &Filters::default()),
        }
    }
}

pub struct BreakdownRow {
    pub name: String,
    /// The name as stored (a country's code), and the link that adds it as
    /// a filter (none for "(other)").
    pub value: String,
    pub href: Option<String>,
    pub count: i64,
    pub share: String,
    pub change: String,
}

impl BreakdownsView {
    /// Makes each named row a link: `link(dimension, name)`.
    pub fn link_rows(&mut self, link: impl Fn(Dimension, &str) -> Option<String>) {
        for t in self
            .devices
            .iter_mut()
            .chain(&mut self.countries)
            .chain(&mut self.campaigns)
            .chain(&mut self.events)
        {
            let Some(d) = Dimension::parse(t.key) else {
                continue;
            };
            for row in &mut t.rows {
                if row.value != "(other)" {
                    row.href = link(d, &row.value);
                }
            }
        }
    }
}

/// One dimension's table.
pub struct BreakdownTable {
    pub key: &'static str,
    pub title: &'static str,
    pub rows: Vec<BreakdownRow>,
    /// Views (events, for events) counted in it.
    pub total: i64,
    /// How many names it has in all: more than `SHOWN` are cut to the
    /// top ones, and the panel links the whole list (its CSV).
    pub names: usize,
    pub csv: String,
}

/// At most this many rows per breakdown table on a page; the CSV has them all.
pub(super) const SHOWN: usize = 10;

impl BreakdownTable {
    /// The names not shown (beyond the top `SHOWN`).
    pub fn more(&self) -> usize {
        self.names.saturating_sub(SHOWN)
    }

    /// The names shown.
    pub fn shown(&self) -> usize {
        self.names.min(SHOWN)
    }
}

/// Every panel's tables, and what they cover.
pub struct BreakdownsView {
    pub devices: Vec<BreakdownTable>,
    pub countries: Vec<BreakdownTable>,
    pub campaigns: Vec<BreakdownTable>,
    pub events: Vec<BreakdownTable>,
    /// Set when the figures cover more than the range (whole hours).
    pub widened: Option<String>,
    /// Set when the breakdowns trail the views by more than a few seconds.
    pub lag: Option<String>,
}

/// A country's name beside its code ("Germany (DE)"), or the name as it
/// is (unknown, or a code the table does not have). No flag emoji: without
/// an emoji font they are two empty boxes.
pub fn country_label(code: &str) -> String {
    match crate::domain::countries::name(code) {
        Some(name) => format!("{name} ({code})"),
        None => code.to_owned(),
    }
}

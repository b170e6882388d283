//! The API's query parameters, read exactly as docs/openapi.json gives
//! them: an empty optional parameter is an absent one, and each value has
//! the format its schema states (the fuzzer in tests/api/schemathesis.rs
//! holds the two to each other).

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::ApiError;
use crate::domain::PagePath;
use crate::reports::retention::{self, Coarsened};
use crate::reports::wall_clock::WallClock;
use crate::reports::{page_search, sources, Period, RangeQuery};
use crate::storage::sites::Site;
use crate::web::state::WebState;

/// Most characters of `path` (the document's `maxLength`): a stored page
/// has at most 512 bytes, so no longer path names one.
const MAX_PATH_CHARS: usize = 512;

#[derive(Debug, Default, Deserialize)]
pub struct ApiQuery {
    range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    res: Option<String>,
    path: Option<String>,
    q: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
    minute: Option<String>,
    source: Option<String>,
    dimension: Option<String>,
    /// `filter` and the funnel's `step`, which repeat: read from the query
    /// string by [`ApiQ`], not by serde.
    #[serde(skip)]
    filter: Vec<String>,
    #[serde(skip)]
    step: Vec<String>,
}

/// The API's query string, with its repeated parameters.
pub struct ApiQ(ApiQuery);

impl std::ops::Deref for ApiQ {
    type Target = ApiQuery;

    fn deref(&self) -> &ApiQuery {
        &self.0
    }
}

impl actix_web::FromRequest for ApiQ {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Self, Self::Error>>;

    fn from_request(
        req: &actix_web::HttpRequest,
        payload: &mut actix_web::dev::Payload,
    ) -> Self::Future {
        let mut q = match actix_web::web::Query::<ApiQuery>::from_request(req, payload).into_inner()
        {
            Ok(q) => q.into_inner(),
            Err(e) => return std::future::ready(Err(e)),
        };
        for (k, v) in url::form_urlencoded::parse(req.query_string().as_bytes()) {
            match &*k {
                "filter" => q.filter.push(v.into_owned()),
                "step" => q.step.push(v.into_owned()),
                _ => {}
            }
        }
        std::future::ready(Ok(ApiQ(q)))
    }
}

/// What `path` names: a page as the pixel stores it, or a path no page can
/// have (undecodable, a control or invisible character, too long once
/// decoded), which has no views like any page nobody visited.
pub enum NamedPath {
    Page(PagePath),
    Nowhere(String),
}

impl NamedPath {
    /// Refuses only what the document's schema refuses: no leading `/`,
    /// or more than [`MAX_PATH_CHARS`].
    fn parse(raw: &str) -> Result<Self, ApiError> {
        if !raw.starts_with('/') || raw.chars().count() > MAX_PATH_CHARS {
            return Err(ApiError::BadParameter {
                parameter: "path",
                message: format!(
                    "A page's path starts with / and has at most {MAX_PATH_CHARS} characters, e.g. path=/blog/hello."
                ),
            });
        }
        Ok(match PagePath::parse(raw) {
            Ok(path) => NamedPath::Page(path),
            Err(_) => NamedPath::Nowhere(raw.to_owned()),
        })
    }

    /// The path as the answer shows it.
    pub fn shown(&self) -> &str {
        match self {
            NamedPath::Page(path) => path.as_str(),
            NamedPath::Nowhere(raw) => raw,
        }
    }
}

/// The value of an optional parameter: `None` when absent or empty.
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

impl ApiQuery {
    /// The period asked for, in the site's time zone, as the pages read it
    /// under the retention.
    pub fn period(
        &self,
        state: &WebState,
        site: &Site,
    ) -> Result<(Period, Option<Coarsened>), ApiError> {
        let now = state.clock.now();
        let asked = Period::resolve_in(
            &RangeQuery {
                range: self.range.clone(),
                from: self.from.clone(),
                to: self.to.clone(),
                res: self.res.clone(),
            },
            now,
            site.time_zone.tz(),
        )?;
        Ok(retention::keep(asked, &state.retention, now))
    }

    /// The page of the page reports (`path`, required).
    pub fn path(&self) -> Result<NamedPath, ApiError> {
        let raw = given(&self.path).ok_or_else(|| ApiError::BadParameter {
            parameter: "path",
            message: "Name the page: path=/blog/hello.".into(),
        })?;
        NamedPath::parse(raw)
    }

    /// The optional page (`path`) of the reports that read a site or one
    /// of its pages.
    pub fn optional_path(&self) -> Result<Option<NamedPath>, ApiError> {
        given(&self.path).map(NamedPath::parse).transpose()
    }

    pub fn minute(&self) -> Result<DateTime<Utc>, ApiError> {
        match given(&self.minute).and_then(WallClock::parse) {
            Some(WallClock::Minute(t)) => Ok(t.and_utc()),
            _ => Err(ApiError::BadParameter {
                parameter: "minute",
                message: "The minute must be a UTC date and time (YYYY-MM-DDTHH:MM) in the years 2000 to 2200.".into(),
            }),
        }
    }

    /// The top-pages filter (`q`).
    pub fn page_filter(&self) -> Result<String, ApiError> {
        page_search::parse(self.q.as_deref()).map_err(|e| ApiError::BadParameter {
            parameter: "q",
            message: e.to_string(),
        })
    }

    /// The top-sources filter (`source`).
    pub fn source_filter(&self) -> Result<String, ApiError> {
        sources::parse_filter(self.source.as_deref()).map_err(|e| ApiError::BadParameter {
            parameter: "source",
            message: e.to_string(),
        })
    }

    /// The breakdown's `dimension`: required, one of the keys.
    pub fn dimension(&self) -> Result<Breakdown, ApiError> {
        let given = given(&self.dimension);
        if let Some(key) = given.and_then(|d| d.strip_prefix("prop:")) {
            if !key.is_empty() && key.chars().count() <= MAX_PROPERTY_KEY_CHARS {
                return Ok(Breakdown::Property(key.to_owned()));
            }
        }
        given
            .and_then(crate::domain::Dimension::parse)
            .map(Breakdown::Dimension)
            .ok_or_else(|| ApiError::BadParameter {
                parameter: "dimension",
                message: format!(
                    "The dimension must be one of: {}, or prop:<key> (a custom property's key, 1 to {MAX_PROPERTY_KEY_CHARS} characters).",
                    crate::domain::Dimension::keys()
                ),
            })
    }

    /// The report's filters (`filter`, repeatable, all must hold).
    pub fn filters(&self) -> Result<crate::domain::Filters, ApiError> {
        crate::domain::Filters::parse(self.filter.iter().map(String::as_str)).map_err(|e| {
            ApiError::BadParameter {
                parameter: "filter",
                message: format!("That filter cannot be used: {e}."),
            }
        })
    }

    /// The ad-hoc funnel's steps (`step`, 2 to 8 of them, in order).
    pub fn funnel_steps(&self) -> Result<crate::domain::FunnelSteps, ApiError> {
        crate::domain::FunnelSteps::parse(self.step.iter().map(String::as_str)).map_err(|e| {
            ApiError::BadParameter {
                parameter: "step",
                message: format!("That funnel cannot be read: {e}."),
            }
        })
    }

    pub fn limit(&self, default: usize, max: usize) -> Result<usize, ApiError> {
        bounded(given(&self.limit), "limit", default, 1..=max)
    }

    pub fn offset(&self) -> Result<usize, ApiError> {
        bounded(given(&self.offset), "offset", 0, 0..=1_000_000)
    }
}

/// A whole number in `range` written with digits only (Rust's own parser
/// would also take `+5`, which the document's integer does not allow).
fn bounded(
    raw: Option<&str>,
    parameter: &'static str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    raw.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| raw.parse().ok())
        .flatten()
        .filter(|n| range.contains(n))
        .ok_or_else(|| ApiError::BadParameter {
            parameter,
            message: format!(
                "The {parameter} must be a whole number from {} to {}.",
                range.start(),
                range.end()
            ),
        })
}

/// Longest property key the API takes, in characters: a stored key has
/// at most 300 bytes, so no longer one can name one.
pub const MAX_PROPERTY_KEY_CHARS: usize = crate::domain::properties::MAX_KEY_BYTES;

/// What `dimension` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breakdown {
    Dimension(crate::domain::Dimension),
    /// `prop:<key>`: the values of a custom property, from the visit store.
    Property(String),
}

//! The read-only JSON API under `/api/v1/`, for personal API tokens
//! (`Authorization: Bearer tt_api_…`). It reads through the same period
//! parsing and report queries as the pages, so it serves the same numbers.
//! Every error is `{"error": {"code", "message"}}` with a stable `code`;
//! the document at `/api/v1/openapi.json` (docs/openapi.json) describes it
//! all and the tests check real responses against it.

mod auth;
mod email;
mod query;
mod reports;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse, ResponseError};
use serde::Serialize;

pub use auth::ApiClient;

use crate::reports::PeriodError;
use crate::telemetry::chain;

/// The OpenAPI document, kept in the repository and compiled in.
pub const OPENAPI: &str = include_str!("../../../docs/openapi.json");

/// A resource answering GET (and HEAD), and a JSON 405 for other methods.
fn get<F, Args>(path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path)
        .route(web::get().to(handler))
        .default_service(web::to(method_not_allowed))
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/v1")
            .app_data(web::QueryConfig::default().error_handler(|err, _| {
                let message = format!("The query string could not be read: {err}.");
                actix_web::error::InternalError::from_response(
                    err,
                    ApiError::BadParameter {
                        parameter: "query",
                        message,
                    }
                    .error_response(),
                )
                .into()
            }))
            .service(get("/openapi.json", openapi))
            .service(get("/sites", reports::sites))
            .service(get("/sites/{id}/series", reports::site_series))
            .service(get("/sites/{id}/pages", reports::top_pages))
            .service(get("/sites/{id}/page/series", reports::page_series))
            .service(get("/sites/{id}/page/seconds", reports::page_seconds))
            .service(get("/sites/{id}/sources", reports::top_sources))
            .service(get("/sites/{id}/breakdown", reports::breakdown))
            .service(get("/sites/{id}/visits", reports::visits))
            .service(get("/sites/{id}/funnel", reports::funnel))
            .service(get("/sites/{id}/goals", reports::goals))
            .configure(email::api_routes)
            .default_service(web::to(|| async { ApiError::NoSuchEndpoint })),
    );
}

async fn openapi() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(OPENAPI)
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("Send an API token: Authorization: Bearer tt_api_…")]
    MissingToken,
    /// Malformed, unknown, revoked, or its user is gone: one answer, so a
    /// caller learns nothing about which.
    #[error("The API token is not valid (it may have been revoked).")]
    InvalidToken,
    /// Unknown, not this token's, or not its user's: one answer, no numbers.
    #[error("There is no such site for this token.")]
    SiteNotFound,
    #[error("This site has no such email subscription.")]
    SubscriptionNotFound,
    /// A token made to read: the email subscribers (addresses, and who
    /// gets mail) need a token created to manage them.
    #[error("This API token only reads. Create one that may manage email subscribers (Account, API tokens).")]
    ReadOnlyToken,
    #[error("There is no such endpoint.")]
    NoSuchEndpoint,
    #[error("This endpoint only answers GET.")]
    MethodNotAllowed,
    #[error("{message}")]
    BadParameter {
        parameter: &'static str,
        message: String,
    },
    #[error("The database did not answer. Please try again in a moment.")]
    Database(#[from] mongodb::error::Error),
    /// The site's totals are still being built and this range cannot be
    /// read from its page buckets within the time limit.
    #[error("{0}")]
    Preparing(String),
    /// A filtered report or funnel refused by the costly reads' limits
    /// (busy, out of time, too large).
    #[error("{}", crate::web::fmt::sentence(&.0.to_string()))]
    ReadRefused(crate::reports::costly::Refused),
}

impl From<crate::reports::costly::ReadError> for ApiError {
    fn from(e: crate::reports::costly::ReadError) -> Self {
        match e {
            crate::reports::costly::ReadError::Database(e) => ApiError::Database(e),
            crate::reports::costly::ReadError::Refused(r) => ApiError::ReadRefused(r),
        }
    }
}

impl From<PeriodError> for ApiError {
    fn from(e: PeriodError) -> Self {
        ApiError::BadParameter {
            parameter: e.field(),
            message: e.to_string(),
        }
    }
}

impl ApiError {
    /// The stable code clients branch on (documented in the OpenAPI
    /// document's `Error` schema).
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::MissingToken => "missing_token",
            ApiError::InvalidToken => "invalid_token",
            ApiError::SiteNotFound => "site_not_found",
            ApiError::NoSuchEndpoint => "no_such_endpoint",
            ApiError::SubscriptionNotFound => "subscription_not_found",
            ApiError::ReadOnlyToken => "token_read_only",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::BadParameter { .. } => "bad_parameter",
            ApiError::Database(_) => "database_unavailable",
            ApiError::Preparing(_) => "preparing",
            ApiError::ReadRefused(r) => r.code(),
        }
    }

    /// See `WebError::unless_preparing`: a read of `site` stopped at the
    /// time limit while its totals are not built is no database failure.
    pub fn unless_preparing(self, site: &crate::storage::sites::Site) -> Self {
        match self {
            ApiError::Database(e)
                if !site.totals_complete && crate::web::error::stopped_at_time_limit(&e) =>
            {
                ApiError::Preparing(crate::web::error::preparing_message(site))
            }
            other => other,
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    code: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter: Option<&'a str>,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::MissingToken | ApiError::InvalidToken => StatusCode::UNAUTHORIZED,
            ApiError::SiteNotFound | ApiError::NoSuchEndpoint | ApiError::SubscriptionNotFound => {
                StatusCode::NOT_FOUND
            }
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::ReadOnlyToken => StatusCode::FORBIDDEN,
            ApiError::BadParameter { .. } => StatusCode::BAD_REQUEST,
            ApiError::Database(_) | ApiError::ReadRefused(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Preparing(_) => StatusCode::ACCEPTED,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ApiError::Database(e) = self {
            tracing::error!(error = %chain(e), "API query failed");
        }
        let mut response = HttpResponse::build(self.status_code());
        response.insert_header(super::pages::no_store());
        match self {
            ApiError::MissingToken | ApiError::InvalidToken => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer realm=\"tickertape\""));
            }
            ApiError::MethodNotAllowed => {
                response.insert_header((header::ALLOW, "GET, HEAD"));
            }
            ApiError::Database(_) => {
                response.insert_header((header::RETRY_AFTER, "5"));
            }
            ApiError::Preparing(_) => {
                response.insert_header((header::RETRY_AFTER, "30"));
            }
            ApiError::ReadRefused(r) => {
                response.insert_header((header::RETRY_AFTER, r.retry_after()));
            }
            _ => {}
        }
        response.json(ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.to_string(),
                parameter: match self {
                    ApiError::BadParameter { parameter, .. } => Some(parameter),
                    _ => None,
                },
            },
        })
    }
}

impl actix_web::Responder for ApiError {
    type Body = actix_web::body::BoxBody;

    fn respond_to(self, _: &actix_web::HttpRequest) -> HttpResponse {
        self.error_response()
    }
}

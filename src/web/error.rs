//! The one error type of every web route but the pixel (which always
//! answers its GIF). Each variant has a status, a stable code for JSON
//! clients and a page for browsers; causes are logged with their chain and
//! never sent to the client.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};

use super::pages::{error_page, no_store};
use crate::telemetry::chain;

/// Where an admin without two-factor login is sent when it is required.
pub const TOTP_SETUP: &str = "/account/totp";

/// Where a user signed in with a one-time password is sent.
pub const PASSWORD_PAGE: &str = "/account/password";

/// What an HTML route answers.
pub type Answer = Result<actix_web::HttpResponse, WebError>;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// Unknown, or not this viewer's: the same answer, so ids leak nothing.
    #[error("there is no such thing among yours")]
    NotFound,
    /// Bad input: the message says what to correct; nothing was changed.
    #[error("{0}")]
    Invalid(String),
    #[error("login required")]
    LoginRequired { next: String },
    #[error("admins must turn on two-factor login first")]
    SecondFactorRequired,
    #[error("choose your own password first: you signed in with a one-time password")]
    PasswordChangeRequired,
    #[error("this is for administrators")]
    Forbidden,
    #[error("the form's CSRF token is missing or wrong")]
    BadCsrf,
    #[error("too many password checks are running; try again in a moment")]
    Busy,
    #[error("the database did not answer; try again in a moment")]
    Database(#[source] anyhow::Error),
    /// A report of a site whose totals are not built yet (an upgrade,
    /// views written by another tool) that the page buckets cannot answer
    /// within the time limit: what is being prepared, and how far.
    #[error("{0}")]
    Preparing(String),
    /// A filtered report or funnel refused by the costly reads' limits
    /// (busy, out of time, too large): 503 with `Retry-After`.
    #[error("{0}")]
    ReadRefused(crate::reports::costly::Refused),
    #[error("something went wrong")]
    Internal(#[source] anyhow::Error),
}

impl WebError {
    pub fn internal(e: impl Into<anyhow::Error>) -> Self {
        WebError::Internal(e.into())
    }

    pub fn invalid(message: impl std::fmt::Display) -> Self {
        WebError::Invalid(message.to_string())
    }

    /// A code a script can match on; it never changes once published.
    pub fn code(&self) -> &'static str {
        match self {
            WebError::NotFound => "not_found",
            WebError::Invalid(_) => "invalid",
            WebError::LoginRequired { .. } => "login_required",
            WebError::SecondFactorRequired => "second_factor_required",
            WebError::PasswordChangeRequired => "password_change_required",
            WebError::Forbidden => "forbidden",
            WebError::BadCsrf => "bad_csrf",
            WebError::Busy => "busy",
            WebError::Database(_) => "database_unavailable",
            WebError::Preparing(_) => "preparing",
            WebError::ReadRefused(r) => r.code(),
            WebError::Internal(_) => "internal",
        }
    }

    /// A time-limited report read of `site` that failed because the site's
    /// totals are still being built becomes [`WebError::Preparing`]: the
    /// database is healthy, the figures are not ready. Anything else is
    /// left as it is.
    pub fn unless_preparing(self, site: &crate::storage::sites::Site) -> Self {
        match self {
            WebError::Database(e) if !site.totals_complete && is_time_limit(&e) => {
                WebError::Preparing(preparing_message(site))
            }
            other => other,
        }
    }

    /// The `Retry-After` of a 503 that passes.
    fn retry_after(&self) -> Option<u64> {
        match self {
            WebError::Busy => Some(2),
            WebError::ReadRefused(r) => Some(r.retry_after()),
            _ => None,
        }
    }

    /// The status a JSON client gets: a script is answered, not redirected.
    fn json_status(&self) -> StatusCode {
        match self {
            WebError::LoginRequired { .. } => StatusCode::UNAUTHORIZED,
            WebError::SecondFactorRequired | WebError::PasswordChangeRequired => {
                StatusCode::FORBIDDEN
            }
            other => other.status_code(),
        }
    }

    /// Logs what the client is not told.
    fn log(&self) {
        match self {
            WebError::Database(e) => {
                tracing::error!(error = %chain(e.as_ref()), "database unavailable")
            }
            WebError::Internal(e) => tracing::error!(error = %chain(e.as_ref()), "internal error"),
            _ => {}
        }
    }
}

/// The server stopped a read at its time limit (`maxTimeMS`): code 50,
/// `MaxTimeMSExpired`.
pub fn is_time_limit(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<mongodb::error::Error>()
            .is_some_and(stopped_at_time_limit)
    })
}

/// `MaxTimeMSExpired`, as the server answers a command run past its
/// `maxTimeMS`.
pub fn stopped_at_time_limit(e: &mongodb::error::Error) -> bool {
    matches!(*e.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 50)
}

/// What a report of `site` says while its totals are being prepared.
pub fn preparing_message(site: &crate::storage::sites::Site) -> String {
    let how_far = match crate::storage::preparation::of(site.domain.as_str()) {
        Some(p) => format!("They are being prepared now: {}.", p.describe()),
        None => "They are not being prepared in this process: `serve` prepares them at start, and `tickertape backfill-site-totals` does it now.".to_owned(),
    };
    format!(
        "This range of {} cannot be shown yet: the site's totals are built once from its page buckets (after an upgrade, or views written by another tool), up to about 15 minutes for a year of 10,000 pages. {how_far} Shorter ranges may already show; this one will once they are ready.",
        site.domain
    )
}

impl From<mongodb::error::Error> for WebError {
    fn from(e: mongodb::error::Error) -> Self {
        WebError::Database(e.into())
    }
}

impl From<crate::reports::costly::ReadError> for WebError {
    fn from(e: crate::reports::costly::ReadError) -> Self {
        match e {
            crate::reports::costly::ReadError::Database(e) => e.into(),
            crate::reports::costly::ReadError::Refused(r) => WebError::ReadRefused(r),
        }
    }
}

impl From<crate::reports::costly::ReadError> for JsonError {
    fn from(e: crate::reports::costly::ReadError) -> Self {
        JsonError(e.into())
    }
}

impl From<crate::reports::costly::ReadError> for CsvError {
    fn from(e: crate::reports::costly::ReadError) -> Self {
        CsvError(e.into())
    }
}

impl From<crate::reports::PeriodError> for WebError {
    fn from(e: crate::reports::PeriodError) -> Self {
        WebError::invalid(e)
    }
}

impl From<crate::storage::sites::SiteError> for WebError {
    fn from(e: crate::storage::sites::SiteError) -> Self {
        match e {
            crate::storage::sites::SiteError::Database(e) => e.into(),
            other => WebError::invalid(super::fmt::sentence(&other.to_string())),
        }
    }
}

impl From<crate::accounts::users::UserError> for WebError {
    fn from(e: crate::accounts::users::UserError) -> Self {
        use crate::accounts::users::UserError;
        match e {
            UserError::Database(e) => e.into(),
            UserError::NotFound => WebError::NotFound,
            other => WebError::invalid(super::fmt::sentence(&other.to_string())),
        }
    }
}

impl ResponseError for WebError {
    fn status_code(&self) -> StatusCode {
        match self {
            WebError::NotFound => StatusCode::NOT_FOUND,
            WebError::Invalid(_) => StatusCode::BAD_REQUEST,
            WebError::LoginRequired { .. }
            | WebError::SecondFactorRequired
            | WebError::PasswordChangeRequired => StatusCode::SEE_OTHER,
            WebError::Forbidden | WebError::BadCsrf => StatusCode::FORBIDDEN,
            WebError::Busy | WebError::Database(_) | WebError::ReadRefused(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            // Accepted, not ready: never a 503 for a healthy database.
            WebError::Preparing(_) => StatusCode::ACCEPTED,
            WebError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        self.log();
        let status = self.status_code();
        let mut page = match self {
            WebError::LoginRequired { next } => {
                return see_other(&format!("/login?next={}", super::fmt::query(next)))
            }
            WebError::SecondFactorRequired => return see_other(TOTP_SETUP),
            WebError::PasswordChangeRequired => return see_other(PASSWORD_PAGE),
            WebError::NotFound => error_page(
                status,
                "Not found",
                "There is no such site, page or user among yours.",
            ),
            WebError::Invalid(message) => error_page(status, "That cannot be done", message),
            WebError::Forbidden => {
                error_page(status, "Admins only", "This page is for administrators.")
            }
            WebError::BadCsrf => error_page(
                status,
                "Form expired",
                "The form was out of date or did not come from this site. Nothing was changed: go back, reload and try again.",
            ),
            WebError::Busy => error_page(
                status,
                "Busy",
                "Too many logins are being checked right now. Please try again in a moment.",
            ),
            WebError::Database(_) => error_page(
                status,
                "Database unavailable",
                "The database did not answer. Please try again in a moment.",
            ),
            WebError::Preparing(message) => {
                error_page(status, "Figures being prepared", message)
            }
            WebError::ReadRefused(r) => error_page(
                status,
                "Report not computed",
                &super::fmt::sentence(&r.to_string()),
            ),
            WebError::Internal(_) => {
                error_page(status, "Something went wrong", "Please try again.")
            }
        };
        if matches!(self, WebError::Preparing(_)) {
            // The page comes back by itself, and shows the figures once
            // they are ready.
            page.headers_mut()
                .insert(header::REFRESH, header::HeaderValue::from_static("30"));
            page.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("30"));
        }
        if let Some(seconds) = self.retry_after() {
            page.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        page
    }
}

/// The same errors for JSON clients: `{"error": {"code", "message"}}`.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct JsonError(#[from] pub WebError);

impl From<mongodb::error::Error> for JsonError {
    fn from(e: mongodb::error::Error) -> Self {
        JsonError(e.into())
    }
}

impl ResponseError for JsonError {
    fn status_code(&self) -> StatusCode {
        self.0.json_status()
    }

    fn error_response(&self) -> HttpResponse {
        self.0.log();
        let message = match &self.0 {
            WebError::LoginRequired { .. } => "Sign in first.".to_owned(),
            WebError::SecondFactorRequired => {
                "Turn on two-factor login first (under Account).".to_owned()
            }
            WebError::PasswordChangeRequired => {
                "Choose your own password first (under Account).".to_owned()
            }
            other => super::fmt::sentence(&other.to_string()),
        };
        let mut answer = json_error(self.status_code(), self.0.code(), &message);
        if let Some(seconds) = self.0.retry_after() {
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        answer
    }
}

/// The same errors for the CSV exports: the reason as plain text (a script
/// reads it as it is; a browser following an export link shows it rather
/// than saving an HTML page as `.csv`). Signing in and the required setup
/// steps stay redirects, as on the pages.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct CsvError(#[from] pub WebError);

impl CsvError {
    /// See [`WebError::unless_preparing`].
    pub fn unless_preparing(self, site: &crate::storage::sites::Site) -> Self {
        CsvError(self.0.unless_preparing(site))
    }
}

impl From<mongodb::error::Error> for CsvError {
    fn from(e: mongodb::error::Error) -> Self {
        CsvError(e.into())
    }
}

impl From<crate::reports::PeriodError> for CsvError {
    fn from(e: crate::reports::PeriodError) -> Self {
        CsvError(e.into())
    }
}

impl ResponseError for CsvError {
    fn status_code(&self) -> StatusCode {
        self.0.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        if self.0.status_code().is_redirection() {
            return self.0.error_response();
        }
        self.0.log();
        let mut answer = HttpResponse::build(self.status_code());
        answer
            .content_type("text/plain; charset=utf-8")
            .insert_header(no_store());
        if let Some(seconds) = self.0.retry_after() {
            answer.insert_header((header::RETRY_AFTER, seconds));
        }
        answer.body(format!("{}\n", super::fmt::sentence(&self.0.to_string())))
    }
}

/// A JSON error body with its stable code.
pub fn json_error(status: StatusCode, code: &str, message: &str) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(no_store())
        .json(serde_json::json!({"error": {"code": code, "message": message}}))
}

/// The redirect after a form post (and to the login page).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

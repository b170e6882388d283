//! What every page shares: the navigation bar and the error page.

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use askama::Template;

use crate::accounts::User;

/// The signed-in user as the navigation bar shows them.
#[derive(Debug, Clone)]
pub struct Nav {
    pub email: String,
    pub is_admin: bool,
    pub csrf: String,
    /// The top-level section the page belongs to, highlighted in the bar:
    /// `sites`, `admin` or `account`.
    pub section: &'static str,
}

impl Nav {
    pub fn new(user: &User, csrf: &str) -> Self {
        Self {
            email: user.email.to_string(),
            is_admin: user.is_admin(),
            csrf: csrf.to_owned(),
            section: "sites",
        }
    }

    pub fn in_section(mut self, section: &'static str) -> Self {
        self.section = section;
        self
    }
}

#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage<'a> {
    pub nav: Option<Nav>,
    pub status: u16,
    pub title: &'a str,
    pub message: &'a str,
}

/// Renders an error page. The message is for the user; causes are logged
/// by the caller, never shown.
pub fn error_page(status: StatusCode, title: &str, message: &str) -> HttpResponse {
    let page = ErrorPage {
        nav: None,
        status: status.as_u16(),
        title,
        message,
    };
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header(no_store())
        .body(page.render().unwrap_or_else(|_| message.to_owned()))
}

/// Pages are never stored by the browser or a proxy: after logging out,
/// Back must not show a signed-in page from the cache.
pub fn no_store() -> (actix_web::http::header::HeaderName, &'static str) {
    (actix_web::http::header::CACHE_CONTROL, "no-store")
}

/// A page with a form: 400 when it shows a refusal, else 200.
pub fn render_form(refused: bool, page: &impl Template) -> HttpResponse {
    let status = if refused {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    render(status, page)
}

pub fn render(status: StatusCode, page: &impl Template) -> HttpResponse {
    match page.render() {
        Ok(body) => HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .insert_header(no_store())
            .body(body),
        Err(e) => {
            tracing::error!(error = %e, "template rendering failed");
            error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The page could not be shown.",
            )
        }
    }
}

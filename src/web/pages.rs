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

/// What an error page says, kept on its response: errors are rendered
/// without the request, and [`keep_nav`] renders the page again with the
/// navigation when the request was a signed-in user's.
#[derive(Debug, Clone)]
struct Said {
    title: String,
    message: String,
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
    let mut response = HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header(no_store())
        .body(page.render().unwrap_or_else(|_| message.to_owned()));
    response.extensions_mut().insert(Said {
        title: title.to_owned(),
        message: message.to_owned(),
    });
    response
}

/// The section of the navigation an address belongs to.
fn section_of(path: &str) -> &'static str {
    if path.starts_with("/admin") {
        "admin"
    } else if path.starts_with("/account") {
        "account"
    } else {
        "sites"
    }
}

/// Middleware: an error page (403 "Admins only", 404 "Not found" ...) of a
/// signed-in user keeps the navigation, as every other page does. The
/// viewer extractor leaves the user's [`Nav`] on the request.
pub async fn keep_nav(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    use actix_web::HttpMessage;
    let res = next.call(req).await?;
    let said = res.response().extensions().get::<Said>().cloned();
    let nav = res.request().extensions().get::<Nav>().cloned();
    let (Some(said), Some(nav)) = (said, nav) else {
        return Ok(res.map_into_boxed_body());
    };
    let status = res.status();
    let (req, old) = res.into_parts();
    let page = ErrorPage {
        nav: Some(nav.in_section(section_of(req.path()))),
        status: status.as_u16(),
        title: &said.title,
        message: &said.message,
    };
    let mut new = render(status, &page);
    for (name, value) in old.headers() {
        if !new.headers().contains_key(name) {
            new.headers_mut().insert(name.clone(), value.clone());
        }
    }
    Ok(actix_web::dev::ServiceResponse::new(req, new))
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

//! HTTP: every route, wired in [`routes`], each family in its own module.
//!
//! - Hits: the pixel (`pixel`, `/pixel.gif`), the peers' tracker endpoints
//!   (`compat`) and the tracking script (`assets`, with the stylesheet and
//!   scripts the pages load).
//! - Accounts: logging in and out, passwords and CSRF (`auth`), two-factor
//!   login (`two_factor`, its QR code `qr`), API tokens (`account_tokens`).
//! - Reports for people: the sites list, the dashboard, a page's report,
//!   funnels and the CSV exports (`reports`, its own submodules), read-only
//!   share links (`share`); for programs, the JSON API under `/api/v1/`
//!   (`api`). They render what `crate::reports` answers.
//! - A site's settings and goals (`site_settings`, `snippets`), its email
//!   reports and alerts (`email`).
//! - Admin pages (`admin`) and preallocation (`preallocation`,
//!   `prealloc_runs`); the operational endpoints `/healthz`, `/readyz`,
//!   `/metrics` (`ops`).
//!
//! What they share: `state` (what a handler reaches), `error` (`WebError`,
//! answered as a page, JSON or plain text as the route asks; the API has
//! its own `ApiError`, the peers' endpoints `BodyError`), `pages` and
//! `forms` (navigation, error page, refused fields), `fmt` (the templates'
//! formatting), `security` and `head` (headers, `HEAD` on every `GET`),
//! `rate_limit` and `peer` (public pages' limits, a gone client).

pub mod account_tokens;
pub mod admin;
pub mod api;
pub mod assets;
pub mod auth;
pub mod compat;
pub mod email;
pub use crate::domain::client_ip;
pub mod error;
pub mod fmt;
pub mod forms;
pub mod head;
pub mod ops;
pub mod pages;
pub mod peer;
pub mod pixel;
pub mod prealloc_runs;
pub mod preallocation;
pub mod qr;
pub mod rate_limit;
pub mod reports;
pub mod security;
pub mod share;
pub mod site_settings;
pub mod snippets;
pub mod state;
pub mod two_factor;

use actix_web::http::{Method, StatusCode};
use actix_web::{web, HttpResponse};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::FormConfig::default()
            .limit(16 * 1024)
            .error_handler(|err, _| {
                let message = format!("The form could not be read: {err}.");
                actix_web::error::InternalError::from_response(
                    err,
                    pages::error_page(StatusCode::BAD_REQUEST, "Bad form", &message),
                )
                .into()
            }),
    )
    .app_data(web::QueryConfig::default().error_handler(|err, _| {
        let message = format!("The address has a malformed parameter: {err}.");
        actix_web::error::InternalError::from_response(
            err,
            pages::error_page(StatusCode::BAD_REQUEST, "Bad request", &message),
        )
        .into()
    }))
    .configure(api::routes)
    .configure(share::routes)
    .configure(email::routes)
    .route("/sites/{id}/share", web::get().to(share::share_page))
    .route("/sites/{id}/share", web::post().to(share::create))
    .route(
        "/sites/{id}/share/{link}/revoke",
        web::post().to(share::revoke),
    )
    .route("/pixel.gif", web::get().to(pixel::pixel))
    .route(
        "/pixel.gif",
        web::method(Method::OPTIONS).to(pixel::options),
    )
    .configure(compat::routes)
    .route("/tt.js", web::get().to(assets::tracking_script))
    .route("/static/style.css", web::get().to(assets::stylesheet))
    .route("/static/waiting.js", web::get().to(assets::waiting_script))
    .route("/static/now.js", web::get().to(assets::now_script))
    .route("/healthz", web::get().to(ops::healthz))
    .route("/readyz", web::get().to(ops::readyz))
    .route("/metrics", web::get().to(ops::prometheus))
    .route("/", web::get().to(home))
    .route("/login", web::get().to(auth::login_form))
    .route("/login", web::post().to(auth::login))
    .route("/logout", web::post().to(auth::logout))
    .route("/login/totp", web::get().to(two_factor::code_form))
    .route("/login/totp", web::post().to(two_factor::submit_code))
    .route("/account/totp", web::get().to(two_factor::account))
    .route("/account/totp/enable", web::post().to(two_factor::enable))
    .route("/account/totp/disable", web::post().to(two_factor::disable))
    .route(
        "/account/tokens",
        web::get().to(account_tokens::tokens_page),
    )
    .route("/account/tokens", web::post().to(account_tokens::create))
    .route(
        "/account/tokens/{id}/revoke",
        web::post().to(account_tokens::revoke),
    )
    .route("/account/password", web::get().to(auth::password_form))
    .route("/account/password", web::post().to(auth::change_password))
    .route("/sites", web::get().to(reports::sites))
    .route("/sites/new", web::get().to(site_settings::new_site_form))
    .route("/sites/new", web::post().to(site_settings::add_site))
    .route("/sites/{id}", web::get().to(reports::dashboard))
    .route("/sites/{id}/page", web::get().to(reports::page_report))
    .route(
        "/sites/{id}/properties",
        web::get().to(reports::properties_page),
    )
    .route(
        "/sites/{id}/settings",
        web::get().to(site_settings::site_settings),
    )
    .route(
        "/sites/{id}/settings",
        web::post().to(site_settings::save_site_settings),
    )
    .route(
        "/sites/{id}/page-cap",
        web::post().to(site_settings::save_page_cap),
    )
    .route("/sites/{id}/goals", web::post().to(site_settings::add_goal))
    .route("/sites/{id}/funnels", web::get().to(reports::funnels_page))
    .route(
        "/sites/{id}/funnels/{funnel}",
        web::get().to(reports::funnel_page),
    )
    .route("/sites/{id}/funnels", web::post().to(reports::add_funnel))
    .route(
        "/sites/{id}/funnels/remove",
        web::post().to(reports::remove_funnel),
    )
    .route(
        "/sites/{id}/goals/remove",
        web::post().to(site_settings::remove_goal),
    )
    .route(
        "/sites/{id}/status.json",
        web::get().to(reports::status_json),
    )
    .route("/sites/{id}/now.json", web::get().to(reports::now_json))
    .service(csv("/sites/{id}/series.csv", reports::series_csv))
    .service(csv("/sites/{id}/visits.csv", reports::visits_csv))
    .service(csv("/sites/{id}/pages.csv", reports::pages_csv))
    .service(csv("/sites/{id}/sources.csv", reports::sources_csv))
    .service(csv("/sites/{id}/breakdown.csv", reports::breakdown_csv))
    .service(csv("/sites/{id}/goals.csv", reports::goals_csv))
    .service(csv("/sites/{id}/funnel.csv", reports::funnel_csv))
    .service(csv("/sites/{id}/properties.csv", reports::properties_csv))
    .service(csv("/sites/{id}/seconds.csv", reports::seconds_csv))
    .service(csv("/sites/{id}/realtime.csv", reports::realtime_csv))
    .route(
        "/admin",
        web::get().to(|| async { error::see_other("/admin/sites") }),
    )
    .route("/admin/sites", web::get().to(admin::sites_page))
    .route("/admin/sites", web::post().to(admin::create_site))
    .route("/admin/sites/{id}", web::get().to(admin::site_page))
    .route("/admin/sites/{id}", web::post().to(admin::update_site))
    .route(
        "/admin/sites/{id}/delete",
        web::get().to(admin::delete_site_page),
    )
    .route(
        "/admin/sites/{id}/delete",
        web::post().to(admin::delete_site),
    )
    .route("/admin/users", web::get().to(admin::users_page))
    .route("/admin/users", web::post().to(admin::create_user))
    .route("/admin/users/{id}/role", web::post().to(admin::set_role))
    .route(
        "/admin/users/{id}/password",
        web::post().to(admin::reset_password),
    )
    .route(
        "/admin/users/{id}/delete",
        web::post().to(admin::delete_user),
    )
    .route("/admin/system", web::get().to(admin::system_page))
    .route("/admin/preallocation", web::get().to(preallocation::page))
    .route(
        "/admin/preallocation",
        web::post().to(preallocation::trigger),
    )
    .route("/admin/api/preallocate", web::post().to(preallocation::api))
    .route(
        "/admin/api/preallocate/{id}",
        web::get().to(preallocation::api_run),
    )
    .default_service(web::route().to(not_found));
}

/// A CSV export: its malformed query strings are refused in plain text,
/// like its other errors.
fn csv<F, Args>(path: &str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path)
        .app_data(reports::csv_query_config())
        .route(web::get().to(handler))
}

async fn home() -> HttpResponse {
    error::see_other("/sites")
}

/// Any address no route serves: an HTML page with the navigation (when
/// signed in), or JSON under `/admin/api/`.
pub async fn not_found(req: actix_web::HttpRequest, viewer: Option<auth::Viewer>) -> HttpResponse {
    if req.path().starts_with("/admin/api/") || req.path().starts_with("/api/") {
        return error::json_error(StatusCode::NOT_FOUND, "not_found", "No such endpoint.");
    }
    let page = pages::ErrorPage {
        nav: viewer.map(|v| v.nav()),
        status: 404,
        title: "Page not found",
        message:
            "There is nothing at this address. Check the link, or start again from your sites.",
    };
    pages::render(StatusCode::NOT_FOUND, &page)
}

//! Peers' tracking scripts, unchanged: what Plausible's, Umami's and
//! GoatCounter's trackers send, mapped onto the pixel's own [`HitParams`]
//! and counted by [`pixel::take`]. The same bot, prefetch, page, cap and
//! privacy rules apply, the same journal takes the hit, and nothing a peer
//! sends besides what the pixel reads (its page, referrer, event and
//! custom properties) is kept: not titles, not languages. Each peer is one module: its body, its answer, nothing else.

pub mod goatcounter;
pub mod plausible;
pub mod umami;

use actix_web::web;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, HttpResponseBuilder, ResponseError};

use crate::ingest::pixel::{self, PixelError};
use crate::web::pixel::REASON_HEADER;

/// The largest body a peer's tracker sends is well under this (a URL, a
/// referrer, a name and a few properties).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// What a peer's endpoint could not take before the pixel's rules: its
/// body. The rest is the pixel's own answer ([`PixelError`]).
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the body is not the tracker's JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the body lacks `{0}`")]
    Missing(&'static str),
    #[error("the body's properties: {0}")]
    Properties(crate::domain::PropertyError),
    #[error("the body's engagement: {0}")]
    Engagement(crate::domain::EngagementError),
}

impl BodyError {
    /// What it counts as, and the reason its answer gives.
    pub fn outcome(&self) -> pixel::Outcome {
        match self {
            BodyError::Properties(_) => pixel::Outcome::InvalidProperties,
            BodyError::Engagement(_) => pixel::Outcome::InvalidEngagement,
            _ => pixel::Outcome::InvalidBody,
        }
    }
}

/// A peer's answer: its own body on success, the pixel's status and reason
/// header otherwise (a hit not counted is never answered as counted,
/// except a site found by a host that nobody tracks here, which is
/// answered like a count so that nobody learns which hosts are).
fn answer(
    result: Result<pixel::Outcome, PixelError>,
    counted: impl FnOnce() -> HttpResponse,
    refused: impl FnOnce(StatusCode, &'static str) -> HttpResponse,
) -> HttpResponse {
    match result {
        Ok(_) | Err(PixelError::NotTracked) => counted(),
        Err(e) => {
            let status = e.status_code();
            let mut response = refused(status, e.outcome().reason());
            if status == StatusCode::SERVICE_UNAVAILABLE {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            response
        }
    }
}

/// Headers every peer endpoint answers with: readable from any page (the
/// trackers run on the sites' origins), never cached.
fn cross_origin(mut builder: HttpResponseBuilder) -> HttpResponseBuilder {
    builder
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .insert_header(("cross-origin-resource-policy", "cross-origin"));
    builder
}

fn with_reason(mut builder: HttpResponseBuilder, reason: &'static str) -> HttpResponseBuilder {
    builder.insert_header((
        header::HeaderName::from_static(REASON_HEADER),
        HeaderValue::from_static(reason),
    ));
    builder
}

/// `OPTIONS` on a peer's endpoint: the CORS preflight of a JSON `POST`
/// (Umami's tracker sends `application/json`).
pub async fn preflight() -> HttpResponse {
    cross_origin(HttpResponse::NoContent())
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, "POST, OPTIONS"))
        .insert_header((
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            "content-type, x-umami-cache",
        ))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, "86400"))
        .finish()
}

/// The peers' scripts, each a small cookie-free tracker with the peer's
/// snippet attributes and page API, sending to its endpoint here.
pub const PLAUSIBLE_SCRIPT: &str = include_str!("../../../static/compat/plausible.js");
pub const UMAMI_SCRIPT: &str = include_str!("../../../static/compat/umami.js");
pub const GOATCOUNTER_SCRIPT: &str = include_str!("../../../static/compat/count.js");

/// `GET /js/script.js`, where Plausible's snippet loads its script.
pub async fn plausible_script() -> HttpResponse {
    script(PLAUSIBLE_SCRIPT)
}

/// `GET /script.js`, where Umami's snippet loads its script.
pub async fn umami_script() -> HttpResponse {
    script(UMAMI_SCRIPT)
}

/// `GET /count.js`, where GoatCounter's snippet loads its script.
pub async fn goatcounter_script() -> HttpResponse {
    script(GOATCOUNTER_SCRIPT)
}

/// Served like `tt.js`: embedded by other sites under a fixed URL.
fn script(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header(("cross-origin-resource-policy", "cross-origin"))
        .body(body)
}

/// The peers' endpoints and scripts, at the paths their snippets use.
pub fn routes(cfg: &mut web::ServiceConfig) {
    use actix_web::http::Method;
    let body_limit = || web::PayloadConfig::new(MAX_BODY_BYTES);
    cfg.service(
        web::resource("/api/event")
            .app_data(body_limit())
            .route(web::post().to(plausible::event))
            .route(web::method(Method::OPTIONS).to(preflight)),
    )
    .service(
        web::resource("/api/send")
            .app_data(body_limit())
            .route(web::post().to(umami::send))
            .route(web::method(Method::OPTIONS).to(preflight)),
    )
    .service(
        web::resource("/count")
            .route(web::get().to(goatcounter::count))
            .route(web::post().to(goatcounter::count)),
    )
    .route("/js/script.js", web::get().to(plausible_script))
    .route("/script.js", web::get().to(umami_script))
    .route("/count.js", web::get().to(goatcounter_script));
}

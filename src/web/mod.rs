//! HTTP routes. Each route family lives next to its domain module (the
//! pixel in `ingest`); this module wires them together and serves the
//! small fixed resources.

pub mod snippets;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use std::time::Duration;

use crate::ingest::pixel;
use crate::storage::Store;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/pixel.gif", web::get().to(pixel::pixel))
        .route("/tt.js", web::get().to(tracking_script))
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .route("/", web::get().to(home));
}

const TRACKING_SCRIPT: &str = include_str!("../../static/tt.js");

async fn tracking_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        // Embedded by other sites under a fixed URL: cache, but not forever.
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header(("cross-origin-resource-policy", "cross-origin"))
        .body(TRACKING_SCRIPT)
}

/// The process is up and serving HTTP.
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// The process can do its job: the database answers.
async fn readyz(store: web::Data<Store>) -> HttpResponse {
    match tokio::time::timeout(Duration::from_secs(2), store.ping()).await {
        Ok(Ok(())) => HttpResponse::Ok()
            .content_type("text/plain")
            .body("ready\n"),
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::telemetry::chain(&e), "readiness: database error");
            HttpResponse::ServiceUnavailable()
                .content_type("text/plain")
                .body("database unavailable\n")
        }
        Err(_) => HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("database not answering\n"),
    }
}

async fn home() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("Tickertape is running. Embed /tt.js or /pixel.gif on your site; see the README.\n")
}

//! `GET /pixel.gif?site=<uuid>&page=<path or URL>[&ref=<referrer>][&w=<screen width>][&e=<event>]`
//!
//! With `e`, the hit is a custom event of that name on the page (counted
//! in the event breakdown and the goals, never as a view).
//!
//! Always answers the 43-byte transparent GIF. Whether the view was counted
//! is in the status (200 counted, 4xx refused, 503 not stored) and, when not
//! counted, in the `X-Tickertape-Reason` header. No cookies are read or set
//! and no client address is kept.
//!
//! The hit's rules are `ingest::pixel`'s; this module reads the request
//! and writes the answer.

use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};

use crate::ingest::pixel::{classify, take, HitParams, Outcome, PixelError};
use crate::ingest::request::{Headers, HitRequest};
use crate::ingest::IngestState;

pub const REASON_HEADER: &str = "x-tickertape-reason";

/// A 1x1 transparent GIF.
pub const GIF: [u8; 43] = [
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x00, 0x00, 0x00, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// The headers a hit's rules read, as actix has them: the first value of a
/// name that is text, and every value of a name that is.
impl Headers for HeaderMap {
    fn first(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.get_all(name).filter_map(|v| v.to_str().ok()).collect()
    }
}

/// What the hit's rules read of an HTTP request.
pub fn hit_request(req: &HttpRequest) -> HitRequest<'_> {
    HitRequest {
        peer: req.peer_addr().map(|a| a.ip()),
        headers: req.headers(),
    }
}

impl ResponseError for PixelError {
    fn status_code(&self) -> StatusCode {
        match self {
            PixelError::Bot
            | PixelError::Prefetch
            | PixelError::ForeignHost
            | PixelError::EventCap => StatusCode::FORBIDDEN,
            PixelError::UnknownSite => StatusCode::NOT_FOUND,
            PixelError::NotTracked => StatusCode::OK,
            PixelError::InvalidSite
            | PixelError::NoSite
            | PixelError::Page(_)
            | PixelError::Event(_)
            | PixelError::Properties(_)
            | PixelError::Revenue(_)
            | PixelError::Engagement(_)
            | PixelError::NoPage => StatusCode::BAD_REQUEST,
            PixelError::QueueFull
            | PixelError::JournalFull
            | PixelError::StoreFailed
            | PixelError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = gif(self.status_code());
        if *self == PixelError::NotTracked {
            return response;
        }
        response.headers_mut().insert(
            header::HeaderName::from_static(REASON_HEADER),
            HeaderValue::from_static(self.outcome().reason()),
        );
        if self.status_code() == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// The answer to a counted hit that went to its own page.
pub fn counted_gif() -> HttpResponse {
    gif(StatusCode::OK)
}

fn gif(status: StatusCode) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("image/gif")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("cross-origin-resource-policy", "cross-origin"))
        .body(GIF.as_slice())
}

pub async fn pixel(
    req: HttpRequest,
    state: web::Data<IngestState>,
) -> Result<HttpResponse, PixelError> {
    // A HEAD (link checkers, monitors) learns what a GET would be answered
    // but is not a view: classified, never queued nor counted in the stats.
    if super::head::is_head(&req) {
        return classify(req.headers(), req.query_string(), &state.directory)
            .map(|_| gif(StatusCode::OK));
    }
    let counted = take(
        &hit_request(&req),
        &state,
        HitParams::parse(req.query_string()),
    )
    .await?;
    let mut response = gif(StatusCode::OK);
    if counted == Outcome::PageCap {
        response.headers_mut().insert(
            header::HeaderName::from_static(REASON_HEADER),
            HeaderValue::from_static(Outcome::PageCap.reason()),
        );
    }
    Ok(response)
}

/// `OPTIONS /pixel.gif`: which methods the pixel answers. It needs no CORS
/// preflight (an image or a simple GET), so this only informs.
pub async fn options() -> HttpResponse {
    HttpResponse::NoContent()
        .insert_header((header::ALLOW, "GET, HEAD, OPTIONS"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("cross-origin-resource-policy", "cross-origin"))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gif_is_43_bytes_of_gif89a() {
        assert_eq!(GIF.len(), 43);
        assert_eq!(&GIF[..6], b"GIF89a");
        assert_eq!(GIF[42], 0x3b);
    }
}

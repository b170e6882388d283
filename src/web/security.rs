//! Response headers that tell browsers to confine our pages: no framing
//! (clickjacking), no inline or foreign script (an injected tag cannot
//! run), no content sniffing, no full URLs leaking to other sites in the
//! Referer, and, when served over https, https only from then on.

use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::DefaultHeaders;

/// Every page is served from this origin and uses no inline script or
/// style; the chart is inline SVG markup, which `default-src` does not
/// restrict. `form-action` and `base-uri` close the two gaps
/// `default-src` leaves open.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

pub const HSTS: &str = "max-age=31536000";

/// Added to every response that does not set the header itself (the
/// pixel's own `Cross-Origin-Resource-Policy: cross-origin` is kept).
pub fn headers(https: bool) -> DefaultHeaders {
    let mut headers = DefaultHeaders::new()
        .add((
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .add((header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")))
        .add((
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .add((
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ));
    if https {
        headers = headers.add((
            HeaderName::from_static("strict-transport-security"),
            HeaderValue::from_static(HSTS),
        ));
    }
    headers
}

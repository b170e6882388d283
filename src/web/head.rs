//! `HEAD` on every `GET` route: a link checker or monitor asking for the
//! headers gets what `GET` would answer, without the body.
//!
//! The request is passed on as a `GET` marked with [`Head`]; the HTTP/1
//! codec still knows it was `HEAD` and sends the headers (with the
//! `Content-Length` of the body) but not the body. Handlers with side
//! effects on `GET` (the pixel) look for the mark and skip them.
//!
//! HTTP middleware, so in `web`: the pixel and GoatCounter's endpoint read
//! the mark and `app` installs the middleware for the whole app.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::HttpMessage;

/// Set on a request that arrived as `HEAD`.
#[derive(Debug, Clone, Copy)]
pub struct Head;

pub async fn head_as_get(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    if req.method() == Method::HEAD {
        req.head_mut().method = Method::GET;
        req.extensions_mut().insert(Head);
    }
    next.call(req).await
}

/// Whether this request arrived as `HEAD`.
pub fn is_head(req: &actix_web::HttpRequest) -> bool {
    req.extensions().contains::<Head>()
}

//! `POST /api/send`: Umami's tracker (its script and `@umami/node`)
//! pointed at Tickertape. The body is `{type, payload}`: `type` `event`
//! counts, `identify` is accepted and ignored (Tickertape keeps no
//! per-visitor data); `payload.website` is the site id (`site add --id`
//! keeps an Umami website id), `url` the page (a path or a full address),
//! `referrer`, `screen` (`1920x1080`), `name` (a custom event when
//! present) and `data` (its custom properties: nested objects become
//! dotted keys, as Umami stores them; lists and properties past their
//! bounds are left out, the hit counted; an event's `revenue` and
//! `currency` in it are also its revenue, as Umami's revenue report reads
//! them, left out when they are not an amount and an ISO 4217 code).
//! `hostname`, `title` and
//! `language` are not kept.
//! Answers `{}` as JSON, which Umami's trackers accept.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::{answer, cross_origin, with_reason, BodyError};
use crate::domain::properties::{Properties, Rules};
use crate::ingest::pixel::{self, HitParams};
use crate::ingest::IngestState;
use crate::web::pixel::hit_request;

#[derive(Debug, Deserialize)]
struct Body {
    #[serde(rename = "type")]
    kind: Option<String>,
    payload: Option<Payload>,
}

#[derive(Debug, Deserialize)]
struct Payload {
    website: Option<String>,
    url: Option<String>,
    referrer: Option<String>,
    screen: Option<String>,
    name: Option<String>,
    #[serde(default)]
    data: serde_json::Value,
}

#[derive(Debug, PartialEq)]
enum Request {
    Hit(HitParams),
    Identify,
}

fn parse(body: &[u8]) -> Result<Request, BodyError> {
    let body: Body = serde_json::from_slice(body)?;
    match body.kind.as_deref() {
        Some("event") => {}
        Some("identify") => return Ok(Request::Identify),
        _ => return Err(BodyError::Missing("type")),
    }
    let payload = body.payload.ok_or(BodyError::Missing("payload"))?;
    let website = payload.website.ok_or(BodyError::Missing("website"))?;
    let page = match (payload.url, &payload.name) {
        (Some(url), _) => Some(url),
        // `umami.track("Signup")` from a server names no page: the
        // event is the site's, counted on its home page.
        (None, Some(_)) => Some("/".to_owned()),
        // A view without its page: the Referer's, if any.
        (None, None) => None,
    };
    Ok(Request::Hit(HitParams {
        site: Some(Ok(website)),
        page: page.map(Ok),
        referrer: payload.referrer.map(Ok),
        screen_width: payload
            .screen
            .as_deref()
            .and_then(|s| s.split('x').next())
            .and_then(crate::classify::parse_screen_width),
        revenue: payload
            .data
            .as_object()
            .and_then(|data| {
                let revenue = serde_json::json!({
                    "amount": data.get("revenue")?,
                    "currency": data.get("currency")?,
                });
                crate::domain::Revenue::parse_json(&revenue).ok()
            })
            .map(Ok),
        event: payload.name.map(Ok),
        props: Some(Properties::parse_json(&payload.data, Rules::Lenient)),
        engagement: None,
    }))
}

pub async fn send(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<IngestState>,
) -> HttpResponse {
    let ok = || cross_origin(HttpResponse::Ok()).json(serde_json::json!({}));
    let refused = |status: StatusCode, reason: &'static str| {
        with_reason(cross_origin(HttpResponse::build(status)), reason)
            .json(serde_json::json!({ "error": reason }))
    };
    match parse(&body) {
        Ok(Request::Hit(params)) => answer(
            pixel::take(&hit_request(&req), &state, params).await,
            ok,
            refused,
        ),
        Ok(Request::Identify) => ok(),
        Err(e) => {
            tracing::debug!(error = %e, "an Umami body refused");
            state.stats.record(e.outcome());
            refused(StatusCode::BAD_REQUEST, e.outcome().reason())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: &str = "6f1c1c1e-57a4-4d3e-9f3a-0c1a2b3c4d5e";

    #[test]
    fn an_event_is_a_view_of_its_url_on_the_website() {
        let body = format!(
            r#"{{"type":"event","payload":{{"website":"{SITE}","hostname":"a.test","url":"/x?utm_source=n","referrer":"https://r.test/","title":"X","screen":"1280x720","language":"de"}}}}"#
        );
        let Request::Hit(p) = parse(body.as_bytes()).unwrap() else {
            panic!("not a hit")
        };
        assert_eq!(p.site, Some(Ok(SITE.into())));
        assert_eq!(p.page, Some(Ok("/x?utm_source=n".into())));
        assert_eq!(p.referrer, Some(Ok("https://r.test/".into())));
        assert_eq!(p.screen_width, Some(1280));
        assert_eq!(p.event, None);
    }

    #[test]
    fn a_named_event_without_a_url_is_the_home_pages() {
        let body = format!(
            r#"{{"type":"event","payload":{{"website":"{SITE}","name":"Signup","data":{{"plan":"pro"}}}}}}"#
        );
        let Request::Hit(p) = parse(body.as_bytes()).unwrap() else {
            panic!("not a hit")
        };
        assert_eq!(p.page, Some(Ok("/".into())));
        assert_eq!(p.event, Some(Ok("Signup".into())));
        assert_eq!(p.referrer, None);
    }

    #[test]
    fn identify_is_accepted_and_bad_bodies_are_refused() {
        let body = format!(r#"{{"type":"identify","payload":{{"website":"{SITE}","data":{{}}}}}}"#);
        assert_eq!(parse(body.as_bytes()).unwrap(), Request::Identify);
        assert!(matches!(parse(b"{"), Err(BodyError::NotJson(_))));
        assert!(matches!(
            parse(br#"{"type":"other","payload":{}}"#),
            Err(BodyError::Missing("type"))
        ));
        assert!(matches!(
            parse(br#"{"type":"event"}"#),
            Err(BodyError::Missing("payload"))
        ));
        assert!(matches!(
            parse(br#"{"type":"event","payload":{"url":"/"}}"#),
            Err(BodyError::Missing("website"))
        ));
    }
}

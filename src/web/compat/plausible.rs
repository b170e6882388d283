//! `POST /api/event`: Plausible's tracker (its script and its npm package)
//! pointed at Tickertape. The body is JSON sent as `text/plain`:
//! `n`/`name` (`pageview`, `engagement` or a custom event), `u`/`url`
//! (the page's full address), `d`/`domain` (the site's domain, or a comma
//! list of them), `r`/`referrer` (the referring address or null),
//! `p`/`props` (or `m`/`meta`: custom properties, an object or a string
//! holding one, held to Plausible's rules, `domain::properties`),
//! `$`/`revenue` (a custom event's revenue, `{amount, currency}`: one
//! Plausible would not take is left out and the event counted, as
//! Plausible does); an `engagement`'s `sd` (the view's greatest scroll
//! depth so far, 0–100) and `e` (engaged milliseconds since its last
//! engagement), read by Plausible's rules (`domain::EngagementHit`: one
//! with neither readable is refused, 400 `invalid-engagement`, as
//! Plausible refuses it) and credited to the view of `u` in its visit;
//! `h`/`hashMode`, `i`/`interactive` and the rest are read by Plausible
//! only and ignored here. Answers 202 `ok`, like Plausible, to every body
//! it can read, counted or not, so that nobody learns which domains are
//! tracked here; only a body that is not Plausible's JSON, or whose
//! properties Plausible refuses (a key past 300 bytes, a value past
//! 2,000), is refused (400), whatever its domain.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use super::{cross_origin, with_reason, BodyError};
use crate::domain::properties::{Properties, Rules};
use crate::ingest::pixel::{self, HitParams, Outcome};
use crate::ingest::IngestState;
use crate::web::pixel::hit_request;

/// Plausible's `engagement` events (time on page, scroll depth) follow a
/// view that was counted already: they add to it, never count a view.
const ENGAGEMENT: &str = "engagement";
const PAGEVIEW: &str = "pageview";

#[derive(Debug, Deserialize)]
struct Body {
    #[serde(alias = "name")]
    n: Option<String>,
    #[serde(alias = "url")]
    u: Option<String>,
    #[serde(alias = "domain")]
    d: Option<String>,
    #[serde(alias = "referrer")]
    r: Option<String>,
    #[serde(default)]
    m: serde_json::Value,
    #[serde(default)]
    meta: serde_json::Value,
    #[serde(default)]
    p: serde_json::Value,
    #[serde(default)]
    props: serde_json::Value,
    #[serde(default, rename = "$")]
    dollar: serde_json::Value,
    #[serde(default)]
    revenue: serde_json::Value,
    #[serde(default)]
    sd: serde_json::Value,
    #[serde(default)]
    e: serde_json::Value,
}

/// What one of Plausible's bodies asks: a view, an event or an
/// engagement of a page of the first of its domains that a site here has.
#[derive(Debug, PartialEq)]
enum Request {
    Hit {
        domains: Vec<String>,
        params: HitParams,
    },
}

fn parse(body: &[u8]) -> Result<Request, BodyError> {
    let body: Body = serde_json::from_slice(body)?;
    let name = body.n.ok_or(BodyError::Missing("n"))?;
    let engagement = (name == ENGAGEMENT)
        .then(|| crate::domain::EngagementHit::parse_json(&body.sd, &body.e))
        .transpose()
        .map_err(BodyError::Engagement)?;
    let url = body.u.ok_or(BodyError::Missing("u"))?;
    // Plausible takes the first of these that is there.
    let props = [&body.m, &body.meta, &body.p, &body.props]
        .into_iter()
        .find(|v| !v.is_null())
        .map(|v| Properties::parse_json(v, Rules::Strict))
        .transpose()
        .map_err(BodyError::Properties)?
        .unwrap_or_default();
    let revenue = [&body.revenue, &body.dollar]
        .into_iter()
        .find(|v| !v.is_null())
        .and_then(|v| crate::domain::Revenue::parse_json(v).ok());
    let domains = body
        .d
        .ok_or(BodyError::Missing("d"))?
        .split(',')
        .map(|d| d.trim().to_ascii_lowercase())
        .filter(|d| !d.is_empty())
        .collect();
    if let Some(engagement) = engagement {
        // An engagement carries the view's page alone: its referrer,
        // properties and revenue were the view's.
        return Ok(Request::Hit {
            domains,
            params: HitParams {
                page: Some(Ok(url)),
                engagement: Some(Ok(engagement)),
                ..HitParams::default()
            },
        });
    }
    Ok(Request::Hit {
        domains,
        params: HitParams {
            page: Some(Ok(url)),
            // Plausible always sends it: null is a direct visit.
            referrer: Some(Ok(body.r.unwrap_or_default())),
            event: (name != PAGEVIEW).then_some(Ok(name)),
            props: Some(Ok(props)),
            revenue: revenue.map(Ok),
            ..HitParams::default()
        },
    })
}

pub async fn event(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<IngestState>,
) -> HttpResponse {
    let accepted = || {
        cross_origin(HttpResponse::Accepted())
            .content_type("text/plain; charset=utf-8")
            .body("ok")
    };
    let refused = |status: StatusCode, reason: &'static str| {
        with_reason(cross_origin(HttpResponse::build(status)), reason)
            .content_type("text/plain; charset=utf-8")
            .body(reason)
    };
    let (domains, mut params) = match parse(&body) {
        Ok(Request::Hit { domains, params }) => (domains, params),
        Err(e) => {
            tracing::debug!(error = %e, "a Plausible body refused");
            state.stats.record(e.outcome());
            return refused(StatusCode::BAD_REQUEST, e.outcome().reason());
        }
    };
    let Some(site) = domains.iter().find_map(|d| state.directory.by_host(d)) else {
        // Like a pixel whose Referer names no tracked host: answered as a
        // count, in a count's time.
        state.stats.record(Outcome::UnknownSite);
        state.wait_like_a_count().await;
        return accepted();
    };
    params.site = Some(Ok(site.id.to_string()));
    // Every hit not counted is answered as a counted one: a refusal only
    // a tracked domain can get (another site's host, a bad event name, a
    // cap, the journal) would tell anyone which domains are tracked here.
    // The reason goes to the metrics (`take` counts every outcome) and
    // the log; Plausible's tracker ignores the answer anyway.
    if let Err(e) = pixel::take(&hit_request(&req), &state, params).await {
        tracing::debug!(reason = e.outcome().reason(), "a Plausible hit not counted");
    }
    accepted()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PropertyError;

    #[test]
    fn a_pageview_is_a_view_of_its_url_with_its_referrer() {
        let body = br#"{"n":"pageview","u":"https://a.test/x?utm_source=n","d":"A.test, b.test","r":null,"v":36}"#;
        let Request::Hit { domains, params } = parse(body).unwrap();
        assert_eq!(domains, ["a.test", "b.test"]);
        assert_eq!(
            params.page,
            Some(Ok("https://a.test/x?utm_source=n".into()))
        );
        assert_eq!(params.referrer, Some(Ok(String::new())));
        assert_eq!(params.event, None);
        assert_eq!(params.site, None);
    }

    #[test]
    fn the_long_names_are_read_too_and_other_names_are_events() {
        let body = br#"{"name":"Signup","url":"https://a.test/","domain":"a.test","referrer":"https://r.test/","props":{"k":"v"}}"#;
        let Request::Hit { params, .. } = parse(body).unwrap();
        assert_eq!(params.event, Some(Ok("Signup".into())));
        assert_eq!(params.referrer, Some(Ok("https://r.test/".into())));
    }

    #[test]
    fn props_are_read_as_plausible_reads_them() {
        let body = br#"{"n":"Signup","u":"https://a.test/","d":"a.test","p":"{\"plan\":\"pro\",\"n\":2}"}"#;
        let Request::Hit { params, .. } = parse(body).unwrap();
        let props = params.props.unwrap().unwrap();
        assert_eq!(props.get("plan"), Some("pro"));
        assert_eq!(props.get("n"), Some("2"));
        let body =
            br#"{"n":"pageview","u":"https://a.test/","d":"a.test","props":{"a":{"b":1},"c":"d"}}"#;
        let Request::Hit { params, .. } = parse(body).unwrap();
        assert_eq!(params.props.unwrap().unwrap().len(), 1);
        let long = format!(
            r#"{{"n":"pageview","u":"https://a.test/","d":"a.test","p":{{"k":"{}"}}}}"#,
            "v".repeat(2_001)
        );
        assert!(matches!(
            parse(long.as_bytes()),
            Err(BodyError::Properties(PropertyError::TooLong))
        ));
        assert!(matches!(
            parse(br#"{"n":"pageview","u":"https://a.test/","d":"a.test","p":[1]}"#),
            Err(BodyError::Properties(PropertyError::NotAnObject))
        ));
    }

    #[test]
    fn an_engagement_is_its_views_depth_and_time_by_plausibles_rules() {
        let body = br#"{"n":"engagement","sd":40,"e":1234,"d":"a.test","u":"https://a.test/x","r":"https://r.test/","p":{"k":"v"},"v":36}"#;
        let Request::Hit { params, .. } = parse(body).unwrap();
        assert_eq!(params.page, Some(Ok("https://a.test/x".into())));
        assert_eq!(
            params.engagement,
            Some(Ok(crate::domain::EngagementHit {
                depth: Some(40),
                engaged_ms: 1234
            }))
        );
        // Neither the view's referrer, properties nor an event.
        assert_eq!((params.referrer, params.event), (None, None));
        assert!(params.props.is_none());
        // Neither value readable: refused, as Plausible refuses it; a
        // url is needed as for every event.
        assert!(matches!(
            parse(br#"{"n":"engagement","sd":-1,"e":"x","d":"a.test","u":"https://a.test/"}"#),
            Err(BodyError::Engagement(_))
        ));
        assert!(matches!(
            parse(br#"{"n":"engagement","sd":40,"d":"a.test"}"#),
            Err(BodyError::Missing("u"))
        ));
    }

    #[test]
    fn a_body_without_its_fields_or_not_json_is_refused() {
        assert!(matches!(parse(b"n=pageview"), Err(BodyError::NotJson(_))));
        assert!(matches!(
            parse(br#"{"u":"https://a.test/","d":"a.test"}"#),
            Err(BodyError::Missing("n"))
        ));
        assert!(matches!(
            parse(br#"{"n":"pageview","d":"a.test"}"#),
            Err(BodyError::Missing("u"))
        ));
        assert!(matches!(
            parse(br#"{"n":"pageview","u":"https://a.test/"}"#),
            Err(BodyError::Missing("d"))
        ));
        assert!(matches!(
            parse(br#"{"n":1,"u":"https://a.test/","d":"a.test"}"#),
            Err(BodyError::NotJson(_))
        ));
    }
}

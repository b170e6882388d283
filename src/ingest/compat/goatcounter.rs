//! `GET` or `POST /count`: GoatCounter's `count.js` pointed at Tickertape
//! (`data-goatcounter="https://<tickertape>/count"`). The site is found by
//! the Referer's host, as for a pixel without `site`. Parameters: `p` (the
//! path; the event's name when `e` is `true`), `r` (the referrer), `q`
//! (the page's query string, for its `utm_` fields), `s` (`width,height,
//! ratio`), `b` (count.js's own bot check: not 0 is a bot); `t` (title) and
//! `rnd` are not kept. Answers the pixel's GIF, status and reason header.

use actix_web::{web, HttpRequest, HttpResponse, ResponseError};

use crate::ingest::pixel::{self, decode, HitParams, PixelError};
use crate::ingest::IngestState;

/// What a `/count` query string says: the hit, or count.js's verdict that
/// the browser is a bot.
#[derive(Debug, PartialEq)]
enum Request {
    Hit(HitParams),
    Bot,
}

fn parse(query: &str) -> Request {
    let value = |key: &str| {
        query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == key && !v.is_empty()).then(|| decode(v))
        })
    };
    if value("b").is_some_and(|b| b.as_deref() != Ok("0")) {
        return Request::Bot;
    }
    let is_event = matches!(
        value("e").as_ref().map(|e| e.as_deref()),
        Some(Ok("true" | "1"))
    );
    let path = value("p");
    let query = value("q")
        .and_then(Result::ok)
        .filter(|q| q.starts_with('?'));
    let (page, event) = if is_event {
        // An event's page is the one it happened on: the Referer's.
        let name = path.map(|p| p.map_err(|_| crate::domain::EventNameError::BadCharacter));
        (None, name)
    } else {
        let page = path.map(|p| p.map(|p| p + query.as_deref().unwrap_or_default()));
        (page, None)
    };
    Request::Hit(HitParams {
        site: None,
        page,
        referrer: value("r"),
        screen_width: value("s").and_then(Result::ok).and_then(|s| {
            s.split(',')
                .next()
                .and_then(crate::classify::parse_screen_width)
        }),
        event,
    })
}

pub async fn count(req: HttpRequest, state: web::Data<IngestState>) -> HttpResponse {
    let params = match parse(req.query_string()) {
        Request::Hit(params) => Ok(params),
        Request::Bot => Err(PixelError::Bot),
    };
    let result = if crate::head::is_head(&req) {
        // A HEAD learns what a GET would be answered: not a view, and not
        // in the stats (as for the pixel).
        params.and_then(|p| pixel::classify_view(req.headers(), p, &state.directory).map(drop))
    } else {
        match params {
            Ok(p) => pixel::take(&req, &state, p).await.map(drop),
            Err(e) => {
                state.stats.record(e.outcome());
                Err(e)
            }
        }
    };
    match result {
        Ok(()) => pixel::counted_gif(),
        Err(e) => e.error_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_is_its_path_with_its_query_and_referrer() {
        let Request::Hit(p) = parse("p=%2Fdocs%2Fa&r=https%3A%2F%2Fr.test%2F&t=Docs&q=%3Futm_source%3Dnews&s=390%2C844%2C3&b=0&rnd=abc")
        else {
            panic!("not a hit")
        };
        assert_eq!(p.page, Some(Ok("/docs/a?utm_source=news".into())));
        assert_eq!(p.referrer, Some(Ok("https://r.test/".into())));
        assert_eq!(p.screen_width, Some(390));
        assert_eq!((p.site, p.event), (None, None));
    }

    #[test]
    fn an_event_is_named_by_its_path_on_the_referers_page() {
        let Request::Hit(p) = parse("p=Signup&e=true") else {
            panic!("not a hit")
        };
        assert_eq!(p.event, Some(Ok("Signup".into())));
        assert_eq!(p.page, None);
    }

    #[test]
    fn count_js_s_bot_verdict_is_a_bot() {
        assert_eq!(parse("p=%2F&b=150"), Request::Bot);
        assert!(matches!(parse("p=%2F&b=0"), Request::Hit(_)));
    }
}

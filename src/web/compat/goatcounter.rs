//! `GET` or `POST /count`: GoatCounter's `count.js` pointed at Tickertape
//! (`data-goatcounter="https://<tickertape>/count"`). The site is found by
//! the Referer's host, as for a pixel without `site`. Parameters: `p` (the
//! path, with the page's query string; the event's name when `e` is
//! `true`), `r` (the referrer), `q` (the page's query string again, for
//! its `utm_` fields), `s` (`width,height,ratio`), `b` (count.js's own bot
//! check: not 0 is a bot); `t` (title) and `rnd` are not kept.
//!
//! count.js leaves out every empty value, `r` included: a request with
//! `b` or `s` (which only a script in the page can send) and no `r` is a
//! view whose script found no referrer, a direct visit. Only a request
//! with none of them (GoatCounter's `<noscript>` image) cannot know its
//! referrer and has no source, like the bare pixel without `ref`.
//! Answers the pixel's GIF, status and reason header.

use actix_web::{web, HttpRequest, HttpResponse, ResponseError};

use crate::ingest::pixel::{self, decode, HitParams, PixelError};
use crate::ingest::IngestState;
use crate::web::pixel::{counted_gif, hit_request};

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
    let present = |key: &str| {
        query
            .split('&')
            .any(|pair| pair.split_once('=').map_or(pair, |(k, _)| k) == key)
    };
    let path = value("p");
    let query = value("q")
        .and_then(Result::ok)
        .filter(|q| q.starts_with('?'));
    let (page, event) = if is_event {
        // An event's page is the one it happened on: the Referer's.
        let name = path.map(|p| p.map_err(|_| crate::domain::EventNameError::BadCharacter));
        (None, name)
    } else {
        let page = path.map(|p| p.map(|p| with_campaign(p, query.as_deref())));
        (page, None)
    };
    let script_ran = present("r") || present("b") || present("s");
    let referrer = value("r").or_else(|| script_ran.then(|| Ok(String::new())));
    Request::Hit(HitParams {
        site: None,
        page,
        referrer,
        screen_width: value("s").and_then(Result::ok).and_then(|s| {
            s.split(',')
                .next()
                .and_then(crate::classify::parse_screen_width)
        }),
        event,
        props: None,
        revenue: None,
        engagement: None,
    })
}

/// The campaign fields the pixel reads from a page's address.
const CAMPAIGN_FIELDS: [&str; 3] = ["utm_source", "utm_medium", "utm_campaign"];

/// `p` with each campaign field once: count.js sends the query string in
/// `p` and again in `q` (only in `q` when a `path` callback strips it from
/// `p`), so a field is taken from `p` when it carries it, else from `q`.
/// Appending `q` whole would repeat the query and spoil the last field's
/// value.
fn with_campaign(path: String, query: Option<&str>) -> String {
    let Some(query) = query else {
        return path;
    };
    fn key(pair: &str) -> &str {
        pair.split_once('=').map_or(pair, |(k, _)| k)
    }
    let query = query.strip_prefix('?').unwrap_or(query);
    let (before_fragment, fragment) = match path.split_once('#') {
        Some((before, after)) => (before.to_owned(), Some(after.to_owned())),
        None => (path, None),
    };
    let missing: Vec<&str> = CAMPAIGN_FIELDS
        .into_iter()
        .filter(|field| {
            !before_fragment
                .split_once('?')
                .is_some_and(|(_, own)| own.split('&').any(|pair| key(pair) == *field))
        })
        .collect();
    let mut page = before_fragment;
    for field in missing {
        if let Some(pair) = query.split('&').find(|pair| key(pair) == field) {
            page.push(if page.contains('?') { '&' } else { '?' });
            page.push_str(pair);
        }
    }
    if let Some(fragment) = fragment {
        page.push('#');
        page.push_str(&fragment);
    }
    page
}

pub async fn count(req: HttpRequest, state: web::Data<IngestState>) -> HttpResponse {
    let params = match parse(req.query_string()) {
        Request::Hit(params) => Ok(params),
        Request::Bot => Err(PixelError::Bot),
    };
    let result = if crate::web::head::is_head(&req) {
        // A HEAD learns what a GET would be answered: not a view, and not
        // in the stats (as for the pixel).
        params.and_then(|p| pixel::classify_view(req.headers(), p, &state.directory).map(drop))
    } else {
        match params {
            Ok(p) => pixel::take(&hit_request(&req), &state, p).await.map(drop),
            Err(e) => {
                state.stats.record(e.outcome());
                Err(e)
            }
        }
    };
    match result {
        Ok(()) => counted_gif(),
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

    /// What GoatCounter's own count.js requests for
    /// `/guide?utm_source=Newsletter&utm_medium=email&utm_campaign=nov`
    /// opened without a referrer: written from reading its `get_data` and
    /// `urlencode` (GoatCounter's file is not copied here). `p` is
    /// `pathname + search`, `q` is `location.search` again, empty values
    /// (`r`, `e` false) are left out, `b` is its bot check and `rnd` five
    /// random characters, in that key order.
    const COUNT_JS_VIEW: &str = "p=%2Fguide%3Futm_source%3DNewsletter%26utm_medium%3Demail%26utm_campaign%3Dnov&t=Guide&s=1920%2C1080%2C1&b=0&q=%3Futm_source%3DNewsletter%26utm_medium%3Demail%26utm_campaign%3Dnov&rnd=k2x9a";

    #[test]
    fn a_query_sent_in_both_p_and_q_gives_each_campaign_field_once() {
        let Request::Hit(p) = parse(COUNT_JS_VIEW) else {
            panic!("not a hit")
        };
        let page = p.page.unwrap().unwrap();
        assert_eq!(
            page,
            "/guide?utm_source=Newsletter&utm_medium=email&utm_campaign=nov"
        );
        for (field, value) in [
            ("utm_source", "Newsletter"),
            ("utm_medium", "email"),
            ("utm_campaign", "nov"),
        ] {
            assert_eq!(
                pixel::utm_value(&page, field).as_deref(),
                Some(value),
                "{field}"
            );
        }
    }

    #[test]
    fn campaign_fields_only_in_q_are_added_to_the_path() {
        // A `path` callback that drops the query from `p` (GoatCounter's
        // documented way to merge pages), or Tickertape's own count.js.
        let Request::Hit(p) = parse(
            "p=%2Fguide%3Fpage%3D2%23top&q=%3Fpage%3D2%26utm_campaign%3Dnov%26utm_source%3Dx&b=0",
        ) else {
            panic!("not a hit")
        };
        assert_eq!(
            p.page,
            Some(Ok("/guide?page=2&utm_source=x&utm_campaign=nov#top".into()))
        );
        // A field in both is taken once, from `p`.
        let Request::Hit(p) = parse("p=%2Fa%3Futm_source%3Dp&q=%3Futm_source%3Dq") else {
            panic!("not a hit")
        };
        assert_eq!(p.page, Some(Ok("/a?utm_source=p".into())));
    }

    #[test]
    fn a_script_without_a_referrer_is_direct_and_the_noscript_image_has_none() {
        let referrer = |query| match parse(query) {
            Request::Hit(p) => p.referrer,
            Request::Bot => panic!("a bot"),
        };
        // count.js leaves `r` out when `document.referrer` is empty.
        assert_eq!(referrer(COUNT_JS_VIEW), Some(Ok(String::new())));
        // Tickertape's count.js sends it empty.
        assert_eq!(
            referrer("p=%2Fa&r=&s=390%2C844%2C3"),
            Some(Ok(String::new()))
        );
        assert_eq!(
            referrer("p=%2Fa&r=https%3A%2F%2Fnews.example%2F&b=0"),
            Some(Ok("https://news.example/".into()))
        );
        // `<noscript><img src=".../count?p=/a"></noscript>`: nothing ran
        // that could know the referrer.
        assert_eq!(referrer("p=%2Fa"), None);
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

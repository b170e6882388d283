//! Who is not a visitor. A hit is dropped when its User-Agent is missing or
//! names a crawler, a monitoring service, a link previewer, a headless
//! browser or an HTTP library that scripts use. `curl` and `wget` are
//! counted on purpose: people use them to check an installation by hand.

/// Lower-case fragments; a User-Agent containing any of them is a bot.
const BOT_FRAGMENTS: &[&str] = &[
    "bot",
    "crawl",
    "spider",
    "slurp",
    "archiver",
    "headlesschrome",
    "phantomjs",
    "lighthouse",
    "pingdom",
    "uptime",
    "facebookexternalhit",
    "embedly",
    "quora link preview",
    "whatsapp",
    "python-requests",
    "python-urllib",
    "aiohttp",
    "go-http-client",
    "java/",
    "okhttp",
    "apache-httpclient",
    "libwww-perl",
    "node-fetch",
    "axios/",
    "scrapy",
    "httpx",
];

pub fn is_bot(user_agent: Option<&str>) -> bool {
    let Some(ua) = user_agent.map(str::trim).filter(|ua| !ua.is_empty()) else {
        return true;
    };
    let ua = ua.to_ascii_lowercase();
    BOT_FRAGMENTS.iter().any(|fragment| ua.contains(fragment))
}

/// Speculative loads (`<link rel=prefetch>`, Chrome's prerender, Firefox's
/// `X-Moz: prefetch`) are not views: the page may never be shown.
pub fn is_prefetch(header: impl Fn(&str) -> Option<String>) -> bool {
    let names_prefetch = |v: String| {
        let v = v.to_ascii_lowercase();
        v.contains("prefetch") || v.contains("prerender") || v.contains("preview")
    };
    ["sec-purpose", "purpose", "x-purpose", "x-moz"]
        .iter()
        .any(|name| header(name).is_some_and(names_prefetch))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";

    #[test]
    fn browsers_and_command_line_tools_are_visitors() {
        assert!(!is_bot(Some(FIREFOX)));
        assert!(!is_bot(Some("curl/8.5.0")));
        assert!(!is_bot(Some("Wget/1.21")));
    }

    #[test]
    fn missing_or_blank_user_agent_is_a_bot() {
        assert!(is_bot(None));
        assert!(is_bot(Some("  ")));
    }

    #[test]
    fn crawlers_previewers_and_headless_browsers_are_bots() {
        for ua in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (compatible; bingbot/2.0)",
            "facebookexternalhit/1.1",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
            "python-requests/2.32.3",
            "Go-http-client/1.1",
        ] {
            assert!(is_bot(Some(ua)), "{ua}");
        }
    }

    #[test]
    fn prefetch_headers_are_recognised() {
        let only = |name: &'static str, value: &'static str| {
            move |n: &str| (n == name).then(|| value.to_owned())
        };
        assert!(is_prefetch(only("sec-purpose", "prefetch;prerender")));
        assert!(is_prefetch(only("sec-purpose", "prefetch")));
        assert!(is_prefetch(only("purpose", "prefetch")));
        assert!(is_prefetch(only("x-moz", "prefetch")));
        assert!(!is_prefetch(only("sec-purpose", "")));
        assert!(!is_prefetch(|_: &str| None));
    }

    /// The classifier's tables: the bots of `classify/bot_user_agents.txt` are
    /// refused before any classification, and none of the real browsers
    /// the classifier's table holds is.
    #[test]
    fn the_classifiers_bots_are_refused_and_its_browsers_counted() {
        for ua in include_str!("../classify/bot_user_agents.txt")
            .lines()
            .filter(|l| !l.is_empty())
        {
            assert!(is_bot(Some(ua)), "{ua}");
        }
        for line in include_str!("../classify/user_agents.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            let ua = line.split('\t').next().unwrap();
            assert!(!is_bot(Some(ua)), "counted, not a bot: {ua}");
        }
    }
}

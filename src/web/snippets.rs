//! The HTML a site owner pastes into their pages.

use crate::domain::SiteId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippets {
    /// Recommended: counts `location.pathname`, skips prerendering.
    pub script: String,
    /// Works without JavaScript; the page comes from the Referer, which the
    /// `referrerpolicy` attribute lets the browser send in full.
    pub pixel: String,
}

pub fn for_site(public_url: &str, site: &SiteId) -> Snippets {
    let base = public_url.trim_end_matches('/');
    Snippets {
        script: format!(r#"<script async src="{base}/tt.js" data-site="{site}"></script>"#),
        pixel: format!(
            r#"<img src="{base}/pixel.gif?site={site}" alt="" width="1" height="1" referrerpolicy="no-referrer-when-downgrade" style="position:absolute">"#
        ),
    }
}

/// What is wrong with `public_url` as the address visitors' browsers send
/// views to, if anything: said next to every snippet and by `serve` at
/// start, because a snippet that cannot reach the server counts nothing
/// and nothing else would tell.
pub fn url_warning(public_url: &str) -> Option<String> {
    let (scheme, rest) = public_url.split_once("://").unwrap_or(("", public_url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    }
    .to_ascii_lowercase();
    let local = host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
    if local {
        Some(format!(
            "These snippets send views to {public_url}, an address only this machine reaches: \
             visitors' browsers cannot. Set TICKERTAPE_PUBLIC_URL to the https address they reach \
             Tickertape at, and restart it."
        ))
    } else if !scheme.eq_ignore_ascii_case("https") {
        Some(format!(
            "These snippets send views to {public_url} over plain http: browsers block it on \
             https pages (mixed content). Set TICKERTAPE_PUBLIC_URL to an https address, and \
             restart Tickertape."
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_plain_http_addresses_are_flagged() {
        for local in [
            "http://127.0.0.1:8000",
            "https://127.0.0.2",
            "http://localhost:8000/",
            "https://app.localhost",
            "http://[::1]:8000",
            "http://0.0.0.0:8000",
        ] {
            let w = url_warning(local).unwrap_or_else(|| panic!("{local}"));
            assert!(
                w.contains("only this machine") && w.contains("TICKERTAPE_PUBLIC_URL"),
                "{w}"
            );
        }
        let w = url_warning("http://stats.example.com").unwrap();
        assert!(
            w.contains("plain http") && w.contains("TICKERTAPE_PUBLIC_URL"),
            "{w}"
        );
        assert_eq!(url_warning("https://stats.example.com/"), None);
        assert_eq!(url_warning("HTTPS://10.0.0.5:8443"), None);
    }

    #[test]
    fn snippets_name_the_site_and_the_server() {
        let id = SiteId::parse("6f1c2d3e-1111-4222-8333-444455556666").unwrap();
        let s = for_site("https://stats.example.com/", &id);
        assert_eq!(
            s.script,
            r#"<script async src="https://stats.example.com/tt.js" data-site="6f1c2d3e-1111-4222-8333-444455556666"></script>"#
        );
        assert!(s
            .pixel
            .starts_with(r#"<img src="https://stats.example.com/pixel.gif?site=6f1c2d3e-"#));
    }
}

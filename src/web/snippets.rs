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

#[cfg(test)]
mod tests {
    use super::*;

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

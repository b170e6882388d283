//! Static files compiled into the binary, served with a content hash in the
//! URL so they can be cached forever and still change on upgrade.

use actix_web::http::header;
use actix_web::HttpResponse;
use std::sync::OnceLock;

pub const STYLESHEET: &str = include_str!("../../static/style.css");
pub const TRACKING_SCRIPT: &str = include_str!("../../static/tt.js");
pub const WAITING_SCRIPT: &str = include_str!("../../static/waiting.js");
pub const NOW_SCRIPT: &str = include_str!("../../static/now.js");

/// FNV-1a, enough to tell versions of one file apart.
fn fingerprint(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", h as u32)
}

pub fn stylesheet_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| format!("/static/style.css?v={}", fingerprint(STYLESHEET)))
}

pub fn waiting_script_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| format!("/static/waiting.js?v={}", fingerprint(WAITING_SCRIPT)))
}

pub async fn waiting_script() -> HttpResponse {
    script(WAITING_SCRIPT)
}

pub fn now_script_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| format!("/static/now.js?v={}", fingerprint(NOW_SCRIPT)))
}

pub async fn now_script() -> HttpResponse {
    script(NOW_SCRIPT)
}

/// One of the app's own scripts, cached for ever under its fingerprinted URL.
fn script(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(body)
}

pub async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(STYLESHEET)
}

pub async fn tracking_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        // Embedded by other sites under a fixed URL: cache, but not forever.
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header(("cross-origin-resource-policy", "cross-origin"))
        .body(TRACKING_SCRIPT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stylesheet_url_carries_its_fingerprint() {
        assert!(stylesheet_url().starts_with("/static/style.css?v="));
        assert_ne!(fingerprint("a"), fingerprint("b"));
    }
}

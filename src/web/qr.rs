//! A QR code drawn on the server as inline SVG (the `qrcode` crate's own
//! renderer): the two-factor setup page shows its `otpauth://` link this
//! way, so the secret never leaves the page for an image service and no
//! script is needed.

use qrcode::render::svg;
use qrcode::QrCode;

/// `text` as an SVG QR code, one unit per module with the standard
/// four-module quiet zone, black on its own white background so it scans in
/// dark mode too; sized by the stylesheet (`svg.qr`). `label` (plain text
/// without markup) names it for screen readers. `None` when `text` is too
/// long for any QR version.
pub fn svg(text: &str, label: &'static str) -> Option<String> {
    let code = QrCode::new(text.as_bytes()).ok()?;
    let drawn = code
        .render::<svg::Color>()
        .quiet_zone(true)
        .module_dimensions(1, 1)
        .dark_color(svg::Color("#000"))
        .light_color(svg::Color("#fff"))
        .build();
    // The XML declaration has no place inside an HTML document.
    let body = drawn.get(drawn.find("<svg")?..)?;
    debug_assert!(!label.contains(['<', '>', '&', '"']));
    Some(body.replacen(
        "<svg ",
        &format!(r#"<svg class="qr" role="img" aria-label="{label}" "#),
        1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_unit_per_module_inside_a_quiet_zone() {
        let svg = svg("otpauth://totp/x?secret=AB", "The code").unwrap();
        let width = QrCode::new(b"otpauth://totp/x?secret=AB").unwrap().width() + 8;
        assert!(svg.starts_with(r#"<svg class="qr" role="img" aria-label="The code" "#));
        assert!(svg.contains(&format!(r#"viewBox="0 0 {width} {width}""#)));
        assert!(svg.ends_with("</svg>"));
        assert!(!svg.contains("<?xml"));
    }

    #[test]
    fn text_too_long_for_any_version_draws_nothing() {
        assert_eq!(svg(&"x".repeat(3000), "QR"), None);
    }
}

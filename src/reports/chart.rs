//! Charts drawn on the server as inline SVG: no JavaScript, readable by
//! screen readers through `<title>`/`<desc>`, with a table beside them.

use std::fmt::Write;

use super::queries::Point;
use super::Resolution;

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 8.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn label(at: chrono::DateTime<chrono::Utc>, resolution: Resolution) -> String {
    match resolution {
        Resolution::Minute => at.format("%Y-%m-%d %H:%M").to_string(),
        Resolution::Hour => at.format("%Y-%m-%d %H:00").to_string(),
        Resolution::Day => at.format("%Y-%m-%d").to_string(),
    }
}

/// A bar chart of `points`. Bars carry their own `<title>` (value on hover
/// and for assistive technology) while there are few enough to matter.
pub fn bars(points: &[Point], resolution: Resolution, title: &str) -> String {
    let max = points.iter().map(|p| p.views).max().unwrap_or(0).max(1);
    let plot_w = WIDTH - LEFT;
    let plot_h = HEIGHT - BOTTOM - TOP;
    let n = points.len().max(1) as f64;
    let bar_w = plot_w / n;
    let mut svg = String::new();
    let total: i64 = points.iter().map(|p| p.views).sum();
    let _ = write!(
        svg,
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" preserveAspectRatio="none"><title id="chart-title">{}</title><desc id="chart-desc">{} points, {} views in all, at most {} in one {}.</desc>"#,
        escape(title),
        points.len(),
        total,
        max,
        resolution.as_str()
    );
    // Axis and three gridlines with their values.
    for i in 0..=2 {
        let v = max as f64 * f64::from(i) / 2.0;
        let y = TOP + plot_h - plot_h * f64::from(i) / 2.0;
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" x2="{WIDTH}" y1="{y:.1}" y2="{y:.1}"/><text class="axis" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            v.round() as i64
        );
    }
    let with_titles = points.len() <= 400;
    for (i, p) in points.iter().enumerate() {
        if p.views == 0 {
            continue;
        }
        let h = plot_h * p.views as f64 / max as f64;
        let x = LEFT + bar_w * i as f64;
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{x:.2}" y="{:.2}" width="{:.2}" height="{h:.2}">"#,
            TOP + plot_h - h,
            (bar_w * 0.85).max(0.5)
        );
        if with_titles {
            let _ = write!(
                svg,
                "<title>{} UTC: {} views</title>",
                label(p.at, resolution),
                p.views
            );
        }
        svg.push_str("</rect>");
    }
    // First and last labels on the time axis.
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        let y = HEIGHT - 6.0;
        let _ = write!(
            svg,
            r#"<text class="axis" x="{LEFT}" y="{y}">{}</text><text class="axis" x="{WIDTH}" y="{y}" text-anchor="end">{}</text>"#,
            label(first.at, resolution),
            label(last.at, resolution)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A small line for the sites list.
pub fn sparkline(values: &[i64], title: &str) -> String {
    let (w, h) = (120.0, 28.0);
    let max = values.iter().copied().max().unwrap_or(0).max(1) as f64;
    let step = if values.len() > 1 {
        w / (values.len() - 1) as f64
    } else {
        0.0
    };
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "{:.1},{:.1}",
                step * i as f64,
                h - 2.0 - (h - 4.0) * *v as f64 / max
            )
        })
        .collect();
    format!(
        r#"<svg class="spark" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>{}</title><polyline points="{}"/></svg>"#,
        escape(title),
        points.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn bars_have_a_title_and_one_rect_per_non_zero_point() {
        let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        let points = [
            Point { at, views: 3 },
            Point { at, views: 0 },
            Point { at, views: 6 },
        ];
        let svg = bars(&points, Resolution::Hour, "Views <per> hour");
        assert!(svg.contains("<title id=\"chart-title\">Views &lt;per&gt; hour</title>"));
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("2026-11-22 10:00 UTC: 6 views"));
        assert!(svg.contains("9 views in all"));
    }

    #[test]
    fn sparkline_scales_to_its_box() {
        let s = sparkline(&[0, 5, 10], "x");
        assert!(s.contains("0.0,26.0 60.0,14.0 120.0,2.0"), "{s}");
        assert!(sparkline(&[], "empty").contains("<polyline points=\"\"/>"));
    }
}

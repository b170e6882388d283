//! Charts drawn on the server: no JavaScript, readable by screen readers
//! through `<title>`/`<desc>`, with a table beside them.
//!
//! The SVG holds only shapes and is stretched to the width of its box; all
//! text (axis values, first and last time) is HTML around it, so it keeps
//! the page's font size on a phone instead of shrinking with the drawing.

use std::fmt::Write;

use super::Resolution;
use crate::web::fmt::thousands;

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 200.0;

/// Gridlines above the baseline. The CSS places the HTML labels of the
/// y axis at the same fixed fractions of the height (`.y0`..`.y4`).
pub const GRIDLINES: i64 = 4;

/// Bars above this count get no `<title>` (the page would grow by a
/// tooltip per bar); their values stay one tap away in the table.
const MAX_TITLED_BARS: usize = 400;

/// Bars above this count are not Tab stops: the table right below the
/// chart is the keyboard route to their values.
const MAX_FOCUSABLE_BARS: usize = 60;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// How long one bar lasts, which sets how its time is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
        }
    }
}

impl From<Resolution> for Unit {
    fn from(r: Resolution) -> Self {
        match r {
            Resolution::Minute => Unit::Minute,
            Resolution::Hour => Unit::Hour,
            Resolution::Day => Unit::Day,
        }
    }
}

pub fn label(at: chrono::DateTime<chrono::Utc>, unit: Unit) -> String {
    match unit {
        Unit::Second => at.format("%Y-%m-%d %H:%M:%S").to_string(),
        Unit::Minute => at.format("%Y-%m-%d %H:%M").to_string(),
        Unit::Hour => at.format("%Y-%m-%d %H:00").to_string(),
        Unit::Day => at.format("%Y-%m-%d").to_string(),
    }
}

/// One bar: its start, its count, and whether its time span is only partly
/// inside the period or not over yet (drawn lighter, said in its title).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    pub at: chrono::DateTime<chrono::Utc>,
    pub views: i64,
    pub partial: bool,
}

/// The step between gridlines: the smallest 1, 2 or 5 × 10ⁿ such that
/// [`GRIDLINES`] steps reach `max`, so every gridline sits at a round value.
pub fn tick_step(max: i64) -> i64 {
    let needed = (max.max(1) + GRIDLINES - 1) / GRIDLINES;
    let mut magnitude = 1_i64;
    loop {
        for m in [1, 2, 5] {
            let step = m * magnitude;
            if step >= needed {
                return step;
            }
        }
        magnitude *= 10;
    }
}

/// A bar chart of `bars` with its id prefix `id` (unique on the page: the
/// chart's title and description are referenced by id).
pub fn bars(bars: &[Bar], unit: Unit, title: &str, id: &str) -> String {
    let max = bars.iter().map(|p| p.views).max().unwrap_or(0);
    let step = tick_step(max);
    let top = (step * GRIDLINES) as f64;
    let n = bars.len().max(1) as f64;
    let bar_w = WIDTH / n;
    let total: i64 = bars.iter().map(|p| p.views).sum();
    let partial = bars.iter().filter(|b| b.partial).count();
    let mut out = String::from(r#"<div class="chart-box"><div class="y-axis" aria-hidden="true">"#);
    for i in (0..=GRIDLINES).rev() {
        let _ = write!(
            out,
            r#"<span class="y{i}">{}</span>"#,
            thousands(&(step * i))
        );
    }
    let _ = write!(
        out,
        r#"</div><svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="group" aria-labelledby="{id}-title {id}-desc" preserveAspectRatio="none"><title id="{id}-title">{}</title><desc id="{id}-desc">{} bars, {} views in all, at most {} in one {}.{}</desc>"#,
        escape(title),
        thousands(&(bars.len() as i64)),
        thousands(&total),
        thousands(&max),
        unit.as_str(),
        if partial > 0 {
            " Lighter bars cover only part of their time."
        } else {
            ""
        }
    );
    for i in 0..=GRIDLINES {
        let y = HEIGHT - HEIGHT * i as f64 / GRIDLINES as f64;
        let y = y.clamp(0.5, HEIGHT - 0.5);
        let _ = write!(
            out,
            r#"<line class="grid" x1="0" x2="{WIDTH}" y1="{y:.1}" y2="{y:.1}" vector-effect="non-scaling-stroke"/>"#
        );
    }
    let titled = bars.len() <= MAX_TITLED_BARS;
    let focusable = bars.len() <= MAX_FOCUSABLE_BARS;
    for (i, p) in bars.iter().enumerate() {
        if p.views == 0 {
            continue;
        }
        let h = HEIGHT * p.views as f64 / top;
        let x = bar_w * i as f64;
        // A bar is a link to its row of the table: a tap shows the value
        // on a phone, whatever the number of bars; the link's name says it
        // to assistive technology.
        let value = format!(
            "{} UTC: {} {}{}",
            label(p.at, unit),
            thousands(&p.views),
            if p.views == 1 { "view" } else { "views" },
            if p.partial { " (partial)" } else { "" }
        );
        let _ = write!(
            out,
            r##"<a href="#{id}-r{i}" aria-label="{value}"{}><rect class="bar{}" x="{x:.2}" y="{:.2}" width="{:.2}" height="{h:.2}">"##,
            if focusable { "" } else { r#" tabindex="-1""# },
            if p.partial { " partial" } else { "" },
            HEIGHT - h,
            (bar_w * 0.85).max(0.5)
        );
        if titled {
            let _ = write!(out, "<title>{value}</title>");
        }
        out.push_str("</rect></a>");
    }
    out.push_str("</svg>");
    if let (Some(first), Some(last)) = (bars.first(), bars.last()) {
        let _ = write!(
            out,
            r#"<div class="x-axis" aria-hidden="true"><span>{}</span><span>{}</span></div>"#,
            label(first.at, unit),
            label(last.at, unit)
        );
    }
    out.push_str("</div>");
    out
}

/// A small line for the sites list; with `partial_last` the last segment
/// (a day still running) is dashed, so it does not read as a drop.
pub fn sparkline(values: &[i64], title: &str, partial_last: bool) -> String {
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
    let split = partial_last && points.len() >= 2;
    let solid = if split {
        &points[..points.len() - 1]
    } else {
        &points[..]
    };
    let mut svg = format!(
        r#"<svg class="spark" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>{}</title><polyline points="{}"/>"#,
        escape(title),
        solid.join(" ")
    );
    if split {
        let _ = write!(
            svg,
            r#"<polyline class="partial" points="{}"/>"#,
            points[points.len() - 2..].join(" ")
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, TimeZone, Utc};

    #[test]
    fn bars_have_a_title_and_one_rect_per_non_zero_point() {
        let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        let bar = |views, partial| Bar { at, views, partial };
        let points = [bar(3, false), bar(0, false), bar(6, true)];
        let svg = bars(&points, Unit::Hour, "Views <per> hour", "c1");
        assert!(svg.contains("<title id=\"c1-title\">Views &lt;per&gt; hour</title>"));
        assert!(svg.contains("aria-labelledby=\"c1-title c1-desc\""));
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("2026-11-22 10:00 UTC: 3 views</title>"));
        assert!(svg.contains("2026-11-22 10:00 UTC: 6 views (partial)"));
        assert_eq!(svg.matches("class=\"bar partial\"").count(), 1);
        assert!(svg.contains("9 views in all"));
        assert!(svg.contains("href=\"#c1-r2\""), "a bar links to its row");
    }

    #[test]
    fn seconds_are_labelled_with_the_second() {
        let minute = Utc.with_ymd_and_hms(2026, 11, 21, 14, 5, 0).unwrap();
        let points: Vec<Bar> = (0..60)
            .map(|s| Bar {
                at: minute + TimeDelta::seconds(s),
                views: 1,
                partial: false,
            })
            .collect();
        let svg = bars(&points, Unit::Second, "x", "s");
        assert!(svg.contains("2026-11-21 14:05:07 UTC: 1 view</title>"));
        assert!(svg.contains("at most 1 in one second"));
        assert!(svg.contains("<span>2026-11-21 14:05:00</span><span>2026-11-21 14:05:59</span>"));
    }

    #[test]
    fn gridlines_sit_at_round_values() {
        assert_eq!(tick_step(0), 1);
        assert_eq!(tick_step(4), 1);
        assert_eq!(tick_step(7), 2); // 0 2 4 6 8, never a "4" at 3.5
        assert_eq!(tick_step(9), 5);
        assert_eq!(tick_step(20), 5);
        assert_eq!(tick_step(21), 10);
        assert_eq!(tick_step(3_999), 1_000);
        assert_eq!(tick_step(4_001), 2_000);
        for max in 1..5_000 {
            let step = tick_step(max);
            assert!(step * GRIDLINES >= max, "{max}");
            let lead = step / 10_i64.pow(step.ilog10());
            assert!([1, 2, 5].contains(&lead) && step % 10_i64.pow(step.ilog10()) == 0);
        }
        let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        let svg = bars(
            &[Bar {
                at,
                views: 7_000,
                partial: false,
            }],
            Unit::Day,
            "x",
            "g",
        );
        assert!(svg.contains(r#"<span class="y4">8,000</span><span class="y3">6,000</span><span class="y2">4,000</span><span class="y1">2,000</span><span class="y0">0</span>"#), "{svg}");
        // The bar of 7,000 is 7/8 of the height.
        assert!(svg.contains("height=\"175.00\""), "{svg}");
    }

    #[test]
    fn sparkline_scales_to_its_box_and_dashes_a_running_day() {
        let s = sparkline(&[0, 5, 10], "x", false);
        assert!(s.contains("points=\"0.0,26.0 60.0,14.0 120.0,2.0\""), "{s}");
        let s = sparkline(&[0, 5, 10], "x", true);
        assert!(s.contains("points=\"0.0,26.0 60.0,14.0\"/><polyline class=\"partial\" points=\"60.0,14.0 120.0,2.0\""), "{s}");
        assert!(sparkline(&[], "empty", true).contains("<polyline points=\"\"/>"));
    }
}

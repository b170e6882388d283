//! Charts drawn on the server: no JavaScript, readable by screen readers
//! through `<title>`/`<desc>`, with a table beside them.
//!
//! The SVG holds only shapes and is stretched to the width of its box; all
//! text (axis values, first and last time, each bar's tooltip) is HTML
//! around it, so it keeps the page's font size on a phone instead of
//! shrinking with the drawing.
//!
//! Each bar's tooltip lives in a column of an HTML row laid over the plot
//! (`.tips`, one flex item per bar, so the columns line up with the bars
//! without a per-bar position, which the page's style policy would refuse
//! inline). A column is focusable and shows its tooltip on hover and focus
//! with CSS alone, so a click or a tap keeps the reader on the chart; the
//! tooltip's link leads to the bar's row of the table, which is highlighted
//! as the page's target.

use std::fmt::Write;

use super::numbers::thousands;
use super::Resolution;

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 200.0;

/// Gridlines above the baseline. The CSS places the HTML labels of the
/// y axis at the same fixed fractions of the plot's height (`.y0`..`.y4`):
/// the plot box holds only the SVG, so its height is the drawing's.
pub const GRIDLINES: i64 = 4;

/// A gridline's value, short enough for the narrow y axis of a phone
/// ("150k", "1.5M"); every value is a multiple of a round step.
pub fn axis_number(v: i64) -> String {
    let short = |unit: i64, suffix: &str| {
        let tenths = v * 10 / unit;
        if tenths % 10 == 0 {
            format!("{}{suffix}", tenths / 10)
        } else {
            format!("{}.{}{suffix}", tenths / 10, tenths % 10)
        }
    };
    if v < 10_000 {
        thousands(&v)
    } else if v < 1_000_000 {
        short(1_000, "k")
    } else {
        short(1_000_000, "M")
    }
}

/// Bars above this count get no tooltip (the page would grow by one per
/// bar, and a bar is then under two pixels wide); their values stay one tap
/// away in the table.
const MAX_TIPPED_BARS: usize = 400;

/// Bars above this count are not Tab stops (a click or tap still focuses
/// one): the table right below the chart is the keyboard route to their
/// values.
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
    label_in(at, unit, chrono_tz::Tz::UTC)
}

/// A bucket's start in the site's zone, as precise as its unit.
pub fn label_in(at: chrono::DateTime<chrono::Utc>, unit: Unit, tz: chrono_tz::Tz) -> String {
    let at = at.with_timezone(&tz);
    match unit {
        Unit::Second => at.format("%Y-%m-%d %H:%M:%S").to_string(),
        Unit::Minute | Unit::Hour => at.format("%Y-%m-%d %H:%M").to_string(),
        Unit::Day => at.format("%Y-%m-%d").to_string(),
    }
}

/// Most labels under the x axis: enough to read the time off any bar,
/// few enough to fit a phone.
pub const MAX_X_TICKS: usize = 5;

/// Which bars get a label under the x axis, and the label: at a round
/// stride (every 10 seconds, 15 minutes, 6 hours, 2 days, the 1st of every
/// third month ...) in the site's zone, at most [`MAX_X_TICKS`]. A label
/// carries the date wherever the bars span days: local midnights read
/// "Nov 22", and an hour label without a midnight between the labels
/// reads "Nov 22 14:00".
pub fn x_ticks(bars: &[Bar], unit: Unit, tz: chrono_tz::Tz) -> Vec<(usize, String)> {
    use chrono::{Datelike, Timelike};
    let n = bars.len();
    if n == 0 {
        return Vec::new();
    }
    let strides: &[usize] = match unit {
        Unit::Second => &[1, 2, 5, 10, 15, 30, 60],
        Unit::Minute => &[1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440],
        Unit::Hour => &[1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 720],
        Unit::Day => &[1, 2, 7, 14, 30, 61, 91, 182, 365],
    };
    let stride = strides
        .iter()
        .copied()
        .find(|s| n.div_ceil(*s) <= MAX_X_TICKS)
        .unwrap_or_else(|| n.div_ceil(MAX_X_TICKS));
    // A bar is "round" when its local time is a multiple of the stride
    // (minute 0, 15, 30, 45; hour 0, 6, 12, 18 ...); days count from the
    // first bar; past a month, ticks fall on the 1st of every month, every
    // 2nd, 3rd, 6th or 12th month.
    let months = match stride {
        ..61 => 1,
        61..91 => 2,
        91..182 => 3,
        182..365 => 6,
        _ => 12,
    };
    let round = |i: usize| -> bool {
        let t = bars[i].at.with_timezone(&tz);
        match unit {
            Unit::Second => t.second() as usize % stride == 0,
            Unit::Minute if stride <= 60 => t.minute() as usize % stride == 0,
            Unit::Minute => t.minute() == 0 && (t.hour() as usize * 60) % stride == 0,
            Unit::Hour if stride <= 24 => t.hour() as usize % stride == 0,
            Unit::Hour => t.hour() == 0 && (i / 24) % (stride / 24).max(1) == 0,
            Unit::Day if stride >= 30 => t.day() == 1 && t.month0() % months == 0,
            Unit::Day => i % stride == 0,
        }
    };
    let mut ticks: Vec<usize> = (0..n).filter(|&i| round(i)).collect();
    if ticks.is_empty() || ticks.len() > MAX_X_TICKS {
        ticks = (0..n).step_by(stride).collect();
    }
    ticks.truncate(MAX_X_TICKS);
    let local_date = |i: usize| bars[i].at.with_timezone(&tz).date_naive();
    let spans_days = local_date(0) != local_date(n - 1);
    let mut out: Vec<(usize, String)> = Vec::with_capacity(ticks.len());
    for (k, &i) in ticks.iter().enumerate() {
        let t = bars[i].at.with_timezone(&tz);
        let midnight = t.hour() == 0 && t.minute() == 0;
        // The date is said once per day: a label on a new day that is not
        // its midnight carries it, unless an earlier label said that day.
        let new_day = k == 0 || local_date(ticks[k - 1]) != t.date_naive();
        let text = match unit {
            Unit::Second => t.format("%H:%M:%S").to_string(),
            Unit::Minute | Unit::Hour if midnight => t.format("%b %-d").to_string(),
            Unit::Minute | Unit::Hour if spans_days && new_day && k > 0 => {
                t.format("%b %-d %H:%M").to_string()
            }
            Unit::Minute | Unit::Hour => t.format("%H:%M").to_string(),
            Unit::Day if stride >= 30 && t.day() == 1 => t.format("%b %Y").to_string(),
            Unit::Day => t.format("%b %-d").to_string(),
        };
        out.push((i, text));
    }
    out
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
    bars_in(bars, unit, chrono_tz::Tz::UTC, title, id)
}

/// What a chart's bars count, in words: "view" and "views".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Noun {
    pub one: &'static str,
    pub many: &'static str,
}

pub const VIEWS: Noun = Noun {
    one: "view",
    many: "views",
};

/// [`bars`] with times in the site's zone.
pub fn bars_in(bars: &[Bar], unit: Unit, tz: chrono_tz::Tz, title: &str, id: &str) -> String {
    bars_of(bars, unit, tz, title, id, VIEWS)
}

/// [`bars_in`] of something other than views (visitors, visits).
pub fn bars_of(
    bars: &[Bar],
    unit: Unit,
    tz: chrono_tz::Tz,
    title: &str,
    id: &str,
    noun: Noun,
) -> String {
    let max = bars.iter().map(|p| p.views).max().unwrap_or(0);
    let step = tick_step(max);
    let top = (step * GRIDLINES) as f64;
    let n = bars.len().max(1) as f64;
    let bar_w = WIDTH / n;
    let total: i64 = bars.iter().map(|p| p.views).sum();
    let partial = bars.iter().filter(|b| b.partial).count();
    let mut out = String::from(
        r#"<div class="chart-box"><div class="plot"><div class="y-axis" aria-hidden="true">"#,
    );
    for i in (0..=GRIDLINES).rev() {
        let _ = write!(
            out,
            r#"<span class="y{i}">{}</span>"#,
            axis_number(step * i)
        );
    }
    let _ = write!(
        out,
        r#"</div><svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{id}-title {id}-desc" preserveAspectRatio="none"><title id="{id}-title">{}</title><desc id="{id}-desc">{} bars, {} {} in all, at most {} in one {}.{}</desc>"#,
        escape(title),
        thousands(&(bars.len() as i64)),
        thousands(&total),
        noun.many,
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
    for (i, p) in bars.iter().enumerate() {
        if p.views == 0 {
            continue;
        }
        let h = HEIGHT * p.views as f64 / top;
        let x = bar_w * i as f64;
        let _ = write!(
            out,
            r#"<rect class="bar{}" x="{x:.2}" y="{:.2}" width="{:.2}" height="{h:.2}"/>"#,
            if p.partial { " partial" } else { "" },
            HEIGHT - h,
            (bar_w * 0.85).max(0.5)
        );
    }
    out.push_str("</svg>");
    if bars.len() <= MAX_TIPPED_BARS {
        tips(&mut out, bars, unit, tz, id, noun);
    }
    out.push_str("</div>");
    if !bars.is_empty() {
        // Positioned by class (x0..x20, 5% apart): the page's style policy
        // allows no inline style. Every second label is `alt`: a phone
        // shows only the others, so they do not run into each other.
        out.push_str(r#"<div class="x-axis" aria-hidden="true">"#);
        for (k, (i, text)) in x_ticks(bars, unit, tz).into_iter().enumerate() {
            let centre = (i as f64 + 0.5) / n * 100.0;
            let _ = write!(
                out,
                r#"<span class="x{}{}">{}</span>"#,
                ((centre / 5.0).round() as i64).clamp(0, 20),
                if k % 2 == 1 { " alt" } else { "" },
                escape(&text)
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</div>");
    out
}

/// The tooltips' row over the plot: one column per bar (those without
/// views too, so the columns match the bars' places), each a group named
/// by its tooltip. The tooltip opens towards the middle of the plot (from
/// a column's left edge in the first third, centred in the second, from
/// its right edge in the last), so it never runs past the plot's sides
/// and widens no phone's page.
fn tips(out: &mut String, bars: &[Bar], unit: Unit, tz: chrono_tz::Tz, id: &str, noun: Noun) {
    let focusable = bars.len() <= MAX_FOCUSABLE_BARS;
    out.push_str(r#"<div class="tips">"#);
    for (i, p) in bars.iter().enumerate() {
        // A bar without views is no Tab stop (as few as there are bars to
        // read), but a click, a tap or the pointer still shows its tooltip.
        let tab = if focusable && p.views > 0 { "0" } else { "-1" };
        let value = format!(
            "{} {}: {} {}{}",
            label_in(p.at, unit, tz),
            p.at.with_timezone(&tz).format("%Z"),
            thousands(&p.views),
            if p.views == 1 { noun.one } else { noun.many },
            if p.partial { " (partial)" } else { "" }
        );
        let centre = (i as f64 + 0.5) / bars.len() as f64;
        let side = if centre < 1.0 / 3.0 {
            ""
        } else if centre <= 2.0 / 3.0 {
            " mid"
        } else {
            " end"
        };
        // The link is no Tab stop of its own: a keyboard reaches every
        // row through "Show as a table" right below, and one stop per bar
        // is enough to pass the chart.
        let _ = write!(
            out,
            r##"<div class="col{side}" tabindex="{tab}" role="group" aria-labelledby="{id}-t{i}"><div class="tip"><span id="{id}-t{i}">{}</span> <a href="#{id}-r{i}" tabindex="-1">Row in the table</a></div></div>"##,
            escape(&value)
        );
    }
    out.push_str("</div>");
}

/// A funnel as horizontal bars, one per step, each as long as its visits
/// against the first step's, with the step and its visits written on it:
/// inline SVG, no script, as the series' charts.
pub fn funnel(steps: &[(&str, i64)], title: &str, id: &str) -> String {
    const W: f64 = 600.0;
    const ROW: f64 = 30.0;
    let first = steps.first().map_or(0, |(_, v)| *v).max(1) as f64;
    let height = ROW * steps.len().max(1) as f64;
    let desc = steps
        .iter()
        .map(|(step, visits)| format!("{step}: {}", thousands(visits)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = format!(
        r#"<svg class="funnel-bars" viewBox="0 0 {W} {height}" role="img" aria-labelledby="{id}-title {id}-desc" preserveAspectRatio="xMinYMin meet"><title id="{id}-title">{}</title><desc id="{id}-desc">{}.</desc>"#,
        escape(title),
        escape(&desc)
    );
    for (i, (step, visits)) in steps.iter().enumerate() {
        let y = ROW * i as f64;
        let w = (W * (*visits).max(0) as f64 / first).min(W);
        let _ = write!(
            out,
            r#"<rect class="bar" x="0" y="{:.1}" width="{w:.1}" height="{:.1}"/><text x="6" y="{:.1}">{} · {}</text>"#,
            y + 3.0,
            ROW - 6.0,
            y + ROW / 2.0 + 5.0,
            escape(step),
            thousands(visits)
        );
    }
    out.push_str("</svg>");
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
        assert_eq!(svg.matches("class=\"bar partial\"").count(), 1);
        assert!(svg.contains("9 views in all"));
    }

    #[test]
    fn every_bar_has_a_focusable_tooltip_that_leads_to_its_row() {
        // The value shows on the chart (hover, focus, a
        // tap), and only the tooltip's link leaves it for the table.
        let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        let bar = |views, partial| Bar { at, views, partial };
        let points = [bar(3, false), bar(0, false), bar(6, true)];
        let html = bars(&points, Unit::Hour, "x", "c1");
        let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
        assert!(
            !svg.contains("<a "),
            "the bars themselves lead nowhere: {svg}"
        );
        assert_eq!(html.matches("<div class=\"col").count(), 3, "{html}");
        assert!(html.contains(
            r##"<div class="col" tabindex="0" role="group" aria-labelledby="c1-t0"><div class="tip"><span id="c1-t0">2026-11-22 10:00 UTC: 3 views</span> <a href="#c1-r0" tabindex="-1">Row in the table</a></div></div>"##
        ), "{html}");
        // No views: no Tab stop, but still a tooltip where the pointer is.
        assert!(html.contains(r#"<div class="col mid" tabindex="-1" role="group" aria-labelledby="c1-t1"><div class="tip"><span id="c1-t1">2026-11-22 10:00 UTC: 0 views</span>"#), "{html}");
        assert!(html.contains(r##"<div class="col end" tabindex="0" role="group" aria-labelledby="c1-t2"><div class="tip"><span id="c1-t2">2026-11-22 10:00 UTC: 6 views (partial)</span> <a href="#c1-r2""##), "{html}");
        // The tooltips sit in the plot box, after the SVG, before the axis.
        let plot = html.find("<div class=\"plot\">").unwrap();
        let tips = html.find("<div class=\"tips\">").unwrap();
        assert!(plot < tips && tips < html.find("x-axis").unwrap());
        // Past the Tab-stop limit a bar is focused only by a click or tap;
        // past the tooltip limit the table alone holds the values.
        let many = |n: usize| -> String {
            let b: Vec<Bar> = (0..n).map(|_| bar(1, false)).collect();
            bars(&b, Unit::Hour, "x", "m")
        };
        assert_eq!(many(60).matches("tabindex=\"0\"").count(), 60);
        let tapped = many(61);
        assert_eq!(tapped.matches("tabindex=\"0\"").count(), 0);
        assert_eq!(tapped.matches("tabindex=\"-1\" role=\"group\"").count(), 61);
        assert_eq!(many(400).matches("class=\"tip\"").count(), 400);
        assert!(!many(401).contains("class=\"tips\""));
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
        assert!(svg.contains("2026-11-21 14:05:07 UTC: 1 view</span>"));
        assert!(svg.contains("at most 1 in one second"));
        // Ticks every 15 seconds, in the zone.
        assert!(
            svg.contains(r#"<span class="x0">14:05:00</span><span class="x5 alt">14:05:15</span><span class="x10">14:05:30</span><span class="x15 alt">14:05:45</span>"#),
            "{svg}"
        );
    }

    #[test]
    fn x_ticks_fall_on_round_local_times() {
        use chrono::DateTime;
        let hours = |from: DateTime<Utc>, n: i64| -> Vec<Bar> {
            (0..n)
                .map(|i| Bar {
                    at: from + TimeDelta::hours(i),
                    views: 1,
                    partial: false,
                })
                .collect()
        };
        // 24 hours from 10:00 UTC: every 6 hours, at 12:00, 18:00, 00:00 ...
        let bars = hours(Utc.with_ymd_and_hms(2026, 11, 21, 10, 0, 0).unwrap(), 24);
        let ticks = x_ticks(&bars, Unit::Hour, chrono_tz::Tz::UTC);
        let texts: Vec<&str> = ticks.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["12:00", "18:00", "Nov 22", "06:00"]);
        // The same bars in Kolkata: local hours start at :30 UTC, so these
        // UTC hours read 15:30, 16:30 ...: labels still every 6 bars.
        let kolkata = x_ticks(&bars, Unit::Hour, chrono_tz::Asia::Kolkata);
        assert!(
            kolkata.len() <= MAX_X_TICKS && kolkata.len() >= 3,
            "{kolkata:?}"
        );
        assert!(
            kolkata.iter().all(|(_, t)| t.ends_with(":30")),
            "{kolkata:?}"
        );
        // 168 hours from 14:00 (Kolkata's half hours never fall on a round
        // hour): every label says its date, never five times "14:00".
        let week = hours(Utc.with_ymd_and_hms(2026, 11, 15, 8, 30, 0).unwrap(), 168);
        let ticks = x_ticks(&week, Unit::Hour, chrono_tz::Asia::Kolkata);
        let texts: Vec<&str> = ticks.iter().map(|(_, t)| t.as_str()).collect();
        assert!(texts.len() >= 3, "{texts:?}");
        assert!(
            texts.iter().skip(1).all(|t| t.starts_with("Nov ")),
            "{texts:?}"
        );
        // Seven days by day: dates.
        let days = |from: DateTime<Utc>, n: i64| -> Vec<Bar> {
            (0..n)
                .map(|i| Bar {
                    at: from + TimeDelta::days(i),
                    views: 1,
                    partial: false,
                })
                .collect()
        };
        let week = days(Utc.with_ymd_and_hms(2026, 11, 16, 0, 0, 0).unwrap(), 7);
        let texts: Vec<String> = x_ticks(&week, Unit::Day, chrono_tz::Tz::UTC)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(texts, ["Nov 16", "Nov 18", "Nov 20", "Nov 22"]);
        // Twelve months by day: the 1st of every third month.
        let year = days(Utc.with_ymd_and_hms(2025, 11, 23, 0, 0, 0).unwrap(), 365);
        let texts: Vec<String> = x_ticks(&year, Unit::Day, chrono_tz::Tz::UTC)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(texts, ["Jan 2026", "Apr 2026", "Jul 2026", "Oct 2026"]);
        // Never more than MAX_X_TICKS, whatever the count.
        for n in [1, 2, 7, 60, 61, 367, 1500] {
            let bars = hours(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(), n);
            let t = x_ticks(&bars, Unit::Hour, chrono_tz::Tz::UTC);
            assert!(!t.is_empty() && t.len() <= MAX_X_TICKS, "{n}: {t:?}");
        }
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
        assert_eq!(axis_number(8_000), "8,000");
        assert_eq!(axis_number(15_000), "15k");
        assert_eq!(axis_number(150_000), "150k");
        assert_eq!(axis_number(1_500_000), "1.5M");
        assert_eq!(axis_number(20_000_000), "20M");
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

    #[test]
    fn a_funnel_is_a_bar_per_step_as_long_as_its_visits() {
        let svg = funnel(
            &[("/", 200), ("/pricing", 50), ("event:Signup", 0)],
            "Home <to> sign-up",
            "f1",
        );
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(r#"width="600.0""#), "{svg}");
        assert!(svg.contains(r#"width="150.0""#), "{svg}");
        assert!(svg.contains(r#"width="0.0""#), "{svg}");
        assert!(svg.contains("Home &lt;to&gt; sign-up"));
        assert!(svg.contains("/pricing · 50"));
        // No visits at all: no bar longer than the frame, no division by 0.
        assert!(funnel(&[("/", 0)], "t", "f2").contains(r#"width="0.0""#));
    }
}

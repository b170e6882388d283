//! An email's subject, plain-text part and HTML part. The HTML uses inline
//! styles and tables only: no stylesheet, image, font or script from
//! anywhere (mail clients block remote content, and it would tell a
//! tracker when the email was read).

use super::alerts::{Alert, AlertKind};
use super::report::{Compared, GoalLine, Headline, Report};
use crate::domain::numbers::thousands;
use crate::reports::numbers::{minutes_seconds, percent, points, relative_change, row_change};

/// What goes into the message.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One line of the first block: name, value, change, value before.
struct Line {
    name: &'static str,
    value: String,
    change: String,
    before: String,
}

/// The first block: each figure of the whole period, its change over the
/// stretches the dashboard compares (`Report::compared`) in the
/// dashboard's words, and the figure compared with.
fn lines(now: &Headline, compared: Option<&Compared>) -> Vec<Line> {
    let dash = || "—".to_owned();
    let count = |n: Option<i64>| n.map_or_else(dash, |n| thousands(&n));
    let rate = |r: Option<f64>| r.map_or_else(dash, |r| percent(r, 0));
    let secs = |d: Option<f64>| d.map_or_else(dash, minutes_seconds);
    // A count: "new" as soon as the period has any against none before.
    let count_line = |name, get: &dyn Fn(&Headline) -> Option<i64>| Line {
        name,
        value: count(get(now)),
        change: match compared.map(|c| (get(now), get(&c.now), get(&c.before))) {
            Some((Some(shown), Some(a), Some(b))) => row_change(shown, a, b),
            _ => dash(),
        },
        before: compared.map_or_else(dash, |c| count(get(&c.before))),
    };
    let pair =
        |get: &dyn Fn(&Headline) -> Option<f64>| compared.map(|c| (get(&c.now), get(&c.before)));
    vec![
        count_line("Views", &|f| Some(f.views)),
        count_line("Visitors", &|f| f.visitors),
        count_line("Visits", &|f| Some(f.visits)),
        Line {
            name: "Bounce rate",
            value: rate(now.bounce_rate),
            change: match pair(&|f| f.bounce_rate) {
                Some((Some(a), Some(b))) => points(a, b),
                _ => dash(),
            },
            before: compared.map_or_else(dash, |c| rate(c.before.bounce_rate)),
        },
        Line {
            name: "Visit duration",
            value: secs(now.visit_duration),
            change: match pair(&|f| f.visit_duration) {
                Some((Some(a), Some(b))) if b > 0.0 => relative_change(a, b),
                Some((Some(_), None)) => "new".into(),
                _ => dash(),
            },
            before: compared.map_or_else(dash, |c| secs(c.before.visit_duration)),
        },
    ]
}

/// What the changes compare, in words, as the dashboard says it.
fn basis(r: &Report) -> String {
    let zone = r.period.zone;
    let span = |(from, to): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)| {
        let at = |t: chrono::DateTime<chrono::Utc>| t.with_timezone(&zone).format("%Y-%m-%d %H:%M");
        format!("{} to {}", at(from), at(to))
    };
    match &r.compared {
        None => "No change is shown: nothing of this period can be compared yet.".to_owned(),
        Some(c) if c.stretch.1 >= r.period.to => format!(
            "Each change compares this period with the one before it, {}.",
            span(c.before_stretch)
        ),
        Some(c) => format!(
            "The current {} is still counting and left out: each change compares the complete part, {}, with the same stretch of the previous period, {}.",
            r.period.read.as_str(),
            span(c.stretch),
            span(c.before_stretch)
        ),
    }
}

const UNSUBSCRIBE_TEXT: &str = "You receive this because this address is subscribed to the site's emails. Unsubscribe from all of them (one click, no login):";

/// The footer of a report sent once by command: no subscription, no
/// schedule to speak of.
const ONE_OFF_TEXT: &str = "This report was sent once, by command, to this address; it is not part of a subscription. To receive none of the site's emails here (one click, no login):";

fn text_list(out: &mut String, title: &str, rows: &[(String, i64)]) {
    out.push_str(&format!("\n{title}\n"));
    if rows.is_empty() {
        out.push_str("  (none)\n");
    }
    for (name, n) in rows {
        out.push_str(&format!("  {:>9}  {name}\n", thousands(n)));
    }
}

/// The goals, when the site has any: conversions, and revenue where
/// their events carried it.
fn text_goals(out: &mut String, goals: &[GoalLine]) {
    if goals.is_empty() {
        return;
    }
    out.push_str("\nGoals (conversions)\n");
    for g in goals {
        out.push_str(&format!("  {:>9}  {}", thousands(&g.conversions), g.name));
        if !g.revenue.is_empty() {
            out.push_str(&format!("  (revenue: {})", g.revenue.join(", ")));
        }
        out.push('\n');
    }
}

fn html_goals(out: &mut String, goals: &[GoalLine]) {
    if goals.is_empty() {
        return;
    }
    let revenue = goals.iter().any(|g| !g.revenue.is_empty());
    out.push_str(&format!(
        "<h2 style=\"font-size:16px;margin:16px 0 6px 0\">Goals</h2>\n<table id=\"goals\" style=\"{STYLE_TABLE}\"><tr><th style=\"{STYLE_TH}\">Goal</th><th style=\"{STYLE_TH};text-align:right\">Conversions</th>{}</tr>\n",
        if revenue {
            format!("<th style=\"{STYLE_TH};text-align:right\">Revenue</th>")
        } else {
            String::new()
        }
    ));
    for g in goals {
        out.push_str(&format!(
            "<tr><td style=\"{STYLE_TD}\">{}</td><td style=\"{STYLE_NUM}\">{}</td>",
            escape(&g.name),
            thousands(&g.conversions)
        ));
        if revenue {
            let cell = if g.revenue.is_empty() {
                "—".to_owned()
            } else {
                g.revenue
                    .iter()
                    .map(|r| escape(r))
                    .collect::<Vec<_>>()
                    .join("<br>")
            };
            out.push_str(&format!("<td style=\"{STYLE_NUM}\">{cell}</td>"));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

const STYLE_TABLE: &str = "border-collapse:collapse;margin:0 0 20px 0;font-size:14px";
const STYLE_TH: &str = "text-align:left;padding:4px 12px 4px 0;border-bottom:1px solid #ccc";
const STYLE_TD: &str = "padding:4px 12px 4px 0;border-bottom:1px solid #eee";
const STYLE_NUM: &str = "padding:4px 12px 4px 0;border-bottom:1px solid #eee;text-align:right;font-variant-numeric:tabular-nums";

fn html_list(out: &mut String, id: &str, title: &str, column: &str, rows: &[(String, i64)]) {
    out.push_str(&format!(
        "<h2 style=\"font-size:16px;margin:16px 0 6px 0\">{}</h2>\n<table id=\"{id}\" style=\"{STYLE_TABLE}\"><tr><th style=\"{STYLE_TH}\">{}</th><th style=\"{STYLE_TH};text-align:right\">Views</th></tr>\n",
        escape(title),
        escape(column)
    ));
    if rows.is_empty() {
        out.push_str(&format!(
            "<tr><td style=\"{STYLE_TD}\" colspan=\"2\">None</td></tr>\n"
        ));
    }
    for (name, n) in rows {
        out.push_str(&format!(
            "<tr><td style=\"{STYLE_TD}\">{}</td><td style=\"{STYLE_NUM}\">{}</td></tr>\n",
            escape(name),
            thousands(n)
        ));
    }
    out.push_str("</table>\n");
}

fn html_page(title: &str, body: &str, (footer, unsubscribe): (&str, &str)) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{t}</title></head>\n<body style=\"font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#222;max-width:640px;margin:0 auto;padding:16px\">\n{body}<p style=\"font-size:12px;color:#666;margin-top:24px\">{u} <a href=\"{link}\">Unsubscribe</a>.</p>\n</body></html>\n",
        t = escape(title),
        u = escape(footer.trim_end_matches(':')),
        link = escape(unsubscribe),
    )
}

/// A periodic report.
pub fn report(r: &Report, unsubscribe: &str) -> Rendered {
    let views = match r.now.views {
        1 => "1 view".to_owned(),
        n => format!("{} views", thousands(&n)),
    };
    let subject = format!("{}: {} — {views}", r.site_name, r.title);
    let lines = lines(&r.now, r.compared.as_ref());
    let zone = r.period.zone.name();
    let footer = if r.one_off {
        ONE_OFF_TEXT
    } else {
        UNSUBSCRIBE_TEXT
    };
    let mut text = format!(
        "{} ({})\n{} ({})\n\n{}\n\n",
        r.site_name,
        r.domain,
        r.title,
        zone,
        basis(r)
    );
    for l in &lines {
        text.push_str(&format!(
            "{}: {} ({}; before: {})\n",
            l.name, l.value, l.change, l.before
        ));
    }
    text_list(&mut text, "Top pages", &r.pages);
    text_list(&mut text, "Top sources", &r.sources);
    text_list(&mut text, "Top countries", &r.countries);
    text_goals(&mut text, &r.goals);
    text.push_str(&format!(
        "\nDashboard for this period: {}\n\n-- \n{footer}\n{unsubscribe}\n",
        r.dashboard
    ));

    let mut body = format!(
        "<h1 style=\"font-size:20px;margin:0 0 4px 0\">{}</h1>\n<p style=\"margin:0 0 16px 0;color:#555\">{} · {} ({})</p>\n<table id=\"figures\" style=\"{STYLE_TABLE}\"><tr><th style=\"{STYLE_TH}\"></th><th style=\"{STYLE_TH};text-align:right\">This period</th><th style=\"{STYLE_TH};text-align:right\">Change</th><th style=\"{STYLE_TH};text-align:right\">Before</th></tr>\n",
        escape(&r.site_name),
        escape(&r.domain),
        escape(&r.title),
        escape(zone)
    );
    for l in &lines {
        body.push_str(&format!(
            "<tr><th scope=\"row\" style=\"{STYLE_TD};text-align:left\">{}</th><td style=\"{STYLE_NUM}\">{}</td><td style=\"{STYLE_NUM}\">{}</td><td style=\"{STYLE_NUM};color:#666\">{}</td></tr>\n",
            l.name,
            escape(&l.value),
            escape(&l.change),
            escape(&l.before)
        ));
    }
    body.push_str(&format!(
        "</table>\n<p id=\"basis\" style=\"font-size:12px;color:#666;margin:-12px 0 16px 0\">{}</p>\n",
        escape(&basis(r))
    ));
    html_list(&mut body, "pages", "Top pages", "Page", &r.pages);
    html_list(&mut body, "sources", "Top sources", "Source", &r.sources);
    html_list(
        &mut body,
        "countries",
        "Top countries",
        "Country",
        &r.countries,
    );
    html_goals(&mut body, &r.goals);
    body.push_str(&format!(
        "<p><a href=\"{}\" style=\"color:#0645ad\">Open the dashboard for this period</a></p>\n",
        escape(&r.dashboard)
    ));
    Rendered {
        html: html_page(&subject, &body, (footer, unsubscribe)),
        subject,
        text,
    }
}

/// A traffic alert.
pub fn alert(a: &Alert, unsubscribe: &str) -> Rendered {
    let (subject, what) = match a.kind {
        AlertKind::Spike => (
            format!(
                "Traffic spike on {}: {} views in the last hour",
                a.site_name,
                thousands(&a.views)
            ),
            format!(
                "{} views in the hour to {}; the same hour usually has {} ({}).",
                thousands(&a.views),
                a.noticed,
                thousands(&a.usual),
                a.rule
            ),
        ),
        AlertKind::Drop => (
            format!(
                "Traffic drop on {}: no views for {} hours",
                a.site_name, a.hours
            ),
            format!(
                "No views in the {} hours to {}; those hours usually have {} ({}).",
                a.hours,
                a.noticed,
                thousands(&a.usual),
                a.rule
            ),
        ),
    };
    let text = format!(
        "{} ({})\n\n{what}\n\nYou get one email per episode: the next one once traffic is back to normal and this happens again.\n\nDashboard: {}\n\n-- \n{UNSUBSCRIBE_TEXT}\n{unsubscribe}\n",
        a.site_name, a.domain, a.dashboard
    );
    let body = format!(
        "<h1 style=\"font-size:20px;margin:0 0 4px 0\">{}</h1>\n<p style=\"margin:0 0 16px 0;color:#555\">{}</p>\n<p id=\"alert\">{}</p>\n<p>You get one email per episode: the next one once traffic is back to normal and this happens again.</p>\n<p><a href=\"{}\" style=\"color:#0645ad\">Open the dashboard</a></p>\n",
        escape(&subject),
        escape(&a.domain),
        escape(&what),
        escape(&a.dashboard)
    );
    Rendered {
        html: html_page(&subject, &body, (UNSUBSCRIBE_TEXT, unsubscribe)),
        subject,
        text,
    }
}

/// The one email an address receives before it agrees: who asks, what
/// it would receive, and the link that confirms. No figure of the site.
pub fn confirmation(
    site: &crate::storage::sites::Site,
    schedules: &[crate::domain::Schedule],
    public_url: &str,
    confirm: &str,
) -> Rendered {
    let subject = format!("Confirm email from {}'s statistics", site.name);
    let what: Vec<&str> = schedules.iter().map(|s| s.label()).collect();
    let what = what.join(", ");
    let asked = format!(
        "An owner of {} ({}) on the Tickertape statistics at {} asked to send this address: {what}.",
        site.name,
        site.domain,
        public_url.trim_end_matches('/')
    );
    let nothing = "Nothing is sent to it unless you confirm. If you did not expect this, ignore this email: you will not be asked again for this site today.";
    let text = format!("{asked}\n\n{nothing}\n\nTo confirm, open this link:\n{confirm}\n");
    let body = format!(
        "<p>{}</p>\n<p>{}</p>\n<p><a href=\"{}\" style=\"color:#0645ad\">Confirm</a></p>\n",
        escape(&asked),
        escape(nothing),
        escape(confirm)
    );
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title></head>\n<body style=\"font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#222;max-width:640px;margin:0 auto;padding:16px\">\n{body}</body></html>\n",
        t = escape(&subject),
    );
    Rendered {
        subject,
        text,
        html,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_read_like_the_dashboards() {
        assert_eq!(row_change(0, 0, 0), "—");
        assert_eq!(row_change(5, 0, 0), "new");
        assert_eq!(row_change(9, 9, 8), "+12.5%");
        assert_eq!(row_change(97, 97, 100), "−3.0%");
        assert_eq!(row_change(120, 100, 100), "±0%");
        assert_eq!(points(0.55, 0.5), "+5 pts");
        assert_eq!(minutes_seconds(65.0), "1m 05s");
        assert_eq!(minutes_seconds(3725.0), "1h 02m");
    }

    #[test]
    fn html_escapes_what_comes_from_visitors() {
        assert_eq!(
            escape("<script>\"a\" & 'b'"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;"
        );
    }
}

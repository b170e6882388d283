//! Formatting used by the templates ("filters", as plain Rust functions).

use chrono::{DateTime, Utc};

/// 1234567 → "1,234,567": the charts and the reports' messages use it too.
pub use crate::reports::numbers::{change, relative_change, row_change, thousands};

/// Share of a total, "42.0%".
pub fn share(part: i64, total: i64) -> String {
    if total == 0 {
        crate::reports::numbers::percent(0.0, 1)
    } else {
        crate::reports::numbers::percent(part as f64 / total as f64, 1)
    }
}

/// A whole number of days, hours or minutes in words: "23 hours", "1 day".
pub fn duration(d: chrono::TimeDelta) -> String {
    let (n, unit) = if d.num_minutes() % (24 * 60) == 0 && d.num_minutes() > 0 {
        (d.num_days(), "day")
    } else if d.num_minutes() % 60 == 0 && d.num_minutes() > 0 {
        (d.num_hours(), "hour")
    } else {
        (d.num_minutes(), "minute")
    };
    plural(&n, unit)
}

/// "1 view", "2 views", "1,000 views".
pub fn plural(n: &i64, unit: &str) -> String {
    if *n == 1 {
        format!("1 {unit}")
    } else {
        format!("{} {unit}s", thousands(n))
    }
}

/// "Try again in 3 minutes." for a rate-limit wait, rounded up to whole
/// minutes (at least one).
pub fn try_again_in(wait: std::time::Duration) -> String {
    let minutes = wait.as_secs().div_ceil(60).max(1) as i64;
    format!("Try again in {}.", plural(&minutes, "minute"))
}

/// Bytes as "512 B", "1.5 kB", "23.4 MB", "1.2 GB" (powers of 1,000).
pub fn bytes(n: &i64) -> String {
    let n = (*n).max(0);
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < units.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// Share of a total as a plain number of percent with one decimal, "42.0"
/// (for CSV: a spreadsheet reads it as a number).
pub fn percent(part: i64, total: i64) -> String {
    if total == 0 {
        "0.0".into()
    } else {
        format!("{:.1}", part as f64 * 100.0 / total as f64)
    }
}

pub fn utc(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// A time in a site's zone, with the zone's abbreviation
/// ("2026-03-29 03:00 CEST").
pub fn local(t: &DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string()
}

/// A time in a site's zone without the zone ("2026-03-29 03:00"), where
/// the zone is said once nearby.
pub fn local_short(t: &DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string()
}

/// [`input_minute`] in a site's zone.
pub fn input_minute_in(t: &DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%dT%H:%M").to_string()
}

/// `YYYY-MM-DDTHH:MM`, the value format of `<input type="datetime-local">`.
pub fn input_minute(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M").to_string()
}

/// "no user has …" → "No user has ….": messages read as sentences. A
/// message that starts with a name as typed (a domain, an e-mail address:
/// "example.com already belongs to a site") keeps it as it is, since
/// "Example.com" is not what the owner typed.
pub fn sentence(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let first_word = text.split_whitespace().next().unwrap_or_default();
    let mut out: String = if first_word.contains(['.', '@']) {
        text.to_owned()
    } else {
        let mut chars = text.chars();
        match chars.next() {
            Some(c) => c.to_uppercase().chain(chars).collect(),
            None => return String::new(),
        }
    };
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// Percent-encodes a value for a query string.
pub fn query(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(change(150, 100), "+50.0%");
        assert_eq!(change(50, 100), "−50.0%");
        assert_eq!(change(5, 0), "new");
        assert_eq!(change(0, 0), "—");
        assert_eq!(change(7, 7), "±0%");
        assert_eq!(share(1, 3), "33.3%");
        assert_eq!(share(1, 0), "0.0%");
        assert_eq!(query("/a b&c"), "%2Fa%20b%26c");
        assert_eq!(sentence("no user has it"), "No user has it.");
        assert_eq!(sentence("done!"), "Done!");
        assert_eq!(sentence(""), "");
        assert_eq!(
            sentence("newsite.example already belongs to a site"),
            "newsite.example already belongs to a site."
        );
        assert_eq!(
            sentence("admin@example.com already has an account"),
            "admin@example.com already has an account."
        );
        assert_eq!(duration(chrono::TimeDelta::hours(23)), "23 hours");
        assert_eq!(duration(chrono::TimeDelta::days(1)), "1 day");
        assert_eq!(duration(chrono::TimeDelta::minutes(59)), "59 minutes");
        assert_eq!(plural(&1, "view"), "1 view");
        assert_eq!(plural(&2500, "page"), "2,500 pages");
        assert_eq!(bytes(&999), "999 B");
        assert_eq!(bytes(&23_400_000), "23.4 MB");
    }
}

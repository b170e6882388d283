//! Formatting used by the templates ("filters", as plain Rust functions).

use chrono::{DateTime, Utc};

/// 1234567 → "1,234,567".
pub fn thousands(n: &i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if *n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Change against the previous period: "+12.5%", "−3.0%", "new" or "±0%".
pub fn change(current: i64, previous: i64) -> String {
    if previous == 0 {
        return if current == 0 {
            "±0%".into()
        } else {
            "new".into()
        };
    }
    let pct = (current - previous) as f64 * 100.0 / previous as f64;
    if pct.abs() < 0.05 {
        "±0%".into()
    } else if pct > 0.0 {
        format!("+{pct:.1}%")
    } else {
        format!("−{:.1}%", -pct)
    }
}

/// Share of a total, "42.0%".
pub fn share(part: i64, total: i64) -> String {
    if total == 0 {
        "0.0%".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / total as f64)
    }
}

pub fn utc(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// `YYYY-MM-DDTHH:MM`, the value format of `<input type="datetime-local">`.
pub fn input_minute(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M").to_string()
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
        assert_eq!(thousands(&0), "0");
        assert_eq!(thousands(&999), "999");
        assert_eq!(thousands(&1000), "1,000");
        assert_eq!(thousands(&-1234567), "-1,234,567");
        assert_eq!(change(150, 100), "+50.0%");
        assert_eq!(change(50, 100), "−50.0%");
        assert_eq!(change(5, 0), "new");
        assert_eq!(change(0, 0), "±0%");
        assert_eq!(share(1, 3), "33.3%");
        assert_eq!(share(1, 0), "0.0%");
        assert_eq!(query("/a b&c"), "%2Fa%20b%26c");
    }
}

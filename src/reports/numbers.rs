//! Numbers as people read them: the charts' axes and labels, the reports'
//! messages and (through `web::fmt`) every page.

/// 1234567 → "1,234,567" (kept in the domain, whose messages use it too).
pub use crate::domain::numbers::thousands;

/// The change of a rate in percentage points: "+5 pts", "−5 pts", "±0 pts"
/// (the dashboard's and the emails' bounce rate).
pub fn points(now: f64, before: f64) -> String {
    let d = (now - before) * 100.0;
    if d.abs() < 0.5 {
        "±0 pts".into()
    } else if d > 0.0 {
        format!("+{d:.0} pts")
    } else {
        format!("−{:.0} pts", -d)
    }
}

/// Seconds as "1m 05s" (or "42s", "1h 02m"): a visit's duration.
pub fn minutes_seconds(secs: f64) -> String {
    let s = secs.round() as i64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(thousands(&0), "0");
        assert_eq!(thousands(&999), "999");
        assert_eq!(thousands(&1000), "1,000");
        assert_eq!(thousands(&-1234567), "-1,234,567");
    }

    #[test]
    fn durations_and_rate_changes_read_as_on_the_dashboard() {
        assert_eq!(minutes_seconds(42.4), "42s");
        assert_eq!(minutes_seconds(65.0), "1m 05s");
        assert_eq!(minutes_seconds(3725.0), "1h 02m");
        assert_eq!(points(0.55, 0.5), "+5 pts");
        assert_eq!(points(0.5, 0.55), "−5 pts");
        assert_eq!(points(0.5, 0.501), "±0 pts");
    }
}

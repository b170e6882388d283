//! Numbers as people read them: the charts' axes and labels, the reports'
//! messages and (through `web::fmt`) every page.

/// 1234567 → "1,234,567" (kept in the domain, whose messages use it too).
pub use crate::domain::numbers::{percent, thousands};

/// Change against the previous period: "+12.5%", "−3.0%", "±0%", "new"
/// (none before), or "—" when neither has any (nothing to compare; "±0%"
/// there would claim a steady figure). The one wording of a change: the
/// pages (through `web::fmt`) and the emails.
pub fn change(current: i64, previous: i64) -> String {
    if previous == 0 {
        return if current == 0 {
            "—".into()
        } else {
            "new".into()
        };
    }
    relative_change(current as f64, previous as f64)
}

/// A count's change whose compared stretch may be only part of the shown
/// period (its complete part while it runs): `compared` against
/// `previous`, and "new" as soon as the shown `count` has any against
/// none before. The dashboard's rows and first line, and the emails.
pub fn row_change(count: i64, compared: i64, previous: i64) -> String {
    if previous == 0 && count > 0 {
        return "new".into();
    }
    change(compared, previous)
}

/// [`change`] of two figures that need not be whole (a rate, an average),
/// `previous` above 0.
pub fn relative_change(current: f64, previous: f64) -> String {
    let pct = (current - previous) * 100.0 / previous;
    if pct.abs() < 0.05 {
        "±0%".into()
    } else if pct > 0.0 {
        format!("+{pct:.1}%")
    } else {
        format!("−{:.1}%", -pct)
    }
}

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
    fn changes_and_percentages_are_written_one_way() {
        assert_eq!(change(150, 100), "+50.0%");
        assert_eq!(change(97, 100), "−3.0%");
        assert_eq!(change(7, 7), "±0%");
        assert_eq!(change(5, 0), "new");
        assert_eq!(change(0, 0), "—");
        assert_eq!(percent(0.342, 1), "34.2%");
        assert_eq!(percent(0.5, 0), "50%");
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

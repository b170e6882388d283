//! CSV exports: RFC 4180 quoting, timestamps in ISO 8601 in the site's
//! zone with its offset (UTC: `Z`).

use super::queries::Point;

pub fn field(value: &str) -> String {
    // Leading = + - @ would be read as formulas by spreadsheets.
    let value = if value.starts_with(['=', '+', '-', '@']) {
        format!("'{value}")
    } else {
        value.to_owned()
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// A series with local timestamps and their offset
/// (`2026-03-29T03:00:00+02:00`); in UTC the offset reads `Z`.
pub fn series_in(points: &[Point], tz: chrono_tz::Tz) -> String {
    if tz == chrono_tz::Tz::UTC {
        return series(points);
    }
    let mut out = String::from("timestamp,views\r\n");
    for p in points {
        out.push_str(&format!(
            "{},{}\r\n",
            p.at.with_timezone(&tz).format("%Y-%m-%dT%H:%M:%S%:z"),
            p.views
        ));
    }
    out
}

pub fn series(points: &[Point]) -> String {
    let mut out = String::from("timestamp,views\r\n");
    for p in points {
        out.push_str(&format!(
            "{},{}\r\n",
            p.at.format("%Y-%m-%dT%H:%M:%SZ"),
            p.views
        ));
    }
    out
}

pub fn table<'a>(header: &[&str], rows: impl IntoIterator<Item = Vec<String>> + 'a) -> String {
    let mut out = header.join(",");
    out.push_str("\r\n");
    for row in rows {
        let fields: Vec<String> = row.iter().map(|f| field(f)).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_defuses_formulas() {
        assert_eq!(field("/a,b"), "\"/a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=SUM(A1)"), "'=SUM(A1)");
        assert_eq!(field("/plain"), "/plain");
    }
}

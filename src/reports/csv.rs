//! CSV exports: RFC 4180 quoting, timestamps in ISO 8601 in the site's
//! zone with its offset (UTC: `Z`).

use super::queries::Point;

pub fn field(value: &str) -> String {
    // Leading = + - @ would be read as formulas by spreadsheets; a number
    // (a negative change, say) is a number, never text.
    let number = value.parse::<f64>().is_ok_and(f64::is_finite);
    let value = if !number && value.starts_with(['=', '+', '-', '@']) {
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

/// A table as CSV in pieces of `per_piece` rows after the header line, for
/// an answer that is sent as it is made rather than held whole.
pub fn table_pieces(
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
    per_piece: usize,
) -> impl Iterator<Item = String> {
    let mut rows = rows.peekable();
    let mut head = Some(format!("{}\r\n", header.join(",")));
    std::iter::from_fn(move || {
        if let Some(head) = head.take() {
            return Some(head);
        }
        rows.peek()?;
        let mut out = String::new();
        for row in rows.by_ref().take(per_piece.max(1)) {
            let fields: Vec<String> = row.iter().map(|f| field(f)).collect();
            out.push_str(&fields.join(","));
            out.push_str("\r\n");
        }
        Some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_in_pieces_is_the_whole_table() {
        let rows = || (0..7).map(|i| vec![format!("/p,{i}"), i.to_string()]);
        let whole = table(&["path", "views"], rows());
        let pieces: Vec<String> = table_pieces(&["path", "views"], rows(), 3).collect();
        assert_eq!(pieces.len(), 4, "the header, then 3 + 3 + 1 rows");
        assert_eq!(pieces.concat(), whole);
        let empty: Vec<String> = table_pieces(&["a"], std::iter::empty(), 3).collect();
        assert_eq!(empty, ["a\r\n"]);
    }

    #[test]
    fn quotes_and_defuses_formulas() {
        assert_eq!(field("/a,b"), "\"/a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=SUM(A1)"), "'=SUM(A1)");
        assert_eq!(field("-1"), "-1", "a number stays a number");
        assert_eq!(field("-1+cmd"), "'-1+cmd");
        assert_eq!(field("/plain"), "/plain");
    }
}

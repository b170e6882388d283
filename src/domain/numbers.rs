//! Numbers as people read them, "1,234,567": the lowest layer has it, so
//! the domain's own messages (limits, retention) separate thousands like
//! every page does (`reports::numbers` and `web::fmt` re-export it).

/// A ratio (0.342) as a percentage, written the one way every page, email
/// and API note writes one: the digits then the sign with no space,
/// "34.2%" (English usage, and what the dashboard and CSV headers always
/// wrote; a space would let a narrow column break "34.2" from its "%").
/// `decimals`: 1 for shares and rates, 0 for the bounce rate.
pub fn percent(ratio: f64, decimals: usize) -> String {
    format!("{:.*}%", decimals, ratio * 100.0)
}

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

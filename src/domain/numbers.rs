//! Numbers as people read them, "1,234,567": the lowest layer has it, so
//! the domain's own messages (limits, retention) separate thousands like
//! every page does (`reports::numbers` and `web::fmt` re-export it).

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

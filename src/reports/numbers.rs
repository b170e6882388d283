//! Numbers as people read them: the charts' axes and labels, the reports'
//! messages and (through `web::fmt`) every page.

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
}

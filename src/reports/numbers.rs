//! Numbers as people read them: the charts' axes and labels, the reports'
//! messages and (through `web::fmt`) every page.

/// 1234567 → "1,234,567" (kept in the domain, whose messages use it too).
pub use crate::domain::numbers::thousands;

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

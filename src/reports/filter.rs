//! The top-pages filter shared by the dashboard, `pages.csv` and the API,
//! so all three list the same rows.

use crate::domain::Page;

/// Longest filter accepted, in bytes.
pub const MAX_FILTER_BYTES: usize = 200;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("The page filter is at most {MAX_FILTER_BYTES} characters.")]
pub struct FilterTooLong;

/// A trimmed filter; empty matches every page.
pub fn parse(raw: Option<&str>) -> Result<String, FilterTooLong> {
    let filter = raw.unwrap_or_default().trim();
    if filter.len() > MAX_FILTER_BYTES {
        return Err(FilterTooLong);
    }
    Ok(filter.to_owned())
}

/// The pages whose path contains `filter`, ignoring case, in their order.
pub fn matching<'a>(top: &'a [(Page, i64)], filter: &str) -> Vec<&'a (Page, i64)> {
    let needle = filter.to_lowercase();
    top.iter()
        .filter(|(page, _)| needle.is_empty() || page.path().to_lowercase().contains(&needle))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_is_trimmed_and_bounded() {
        assert_eq!(parse(None), Ok(String::new()));
        assert_eq!(parse(Some("  blog ")), Ok("blog".into()));
        assert_eq!(parse(Some(&"a".repeat(201))), Err(FilterTooLong));
    }

    #[test]
    fn matching_ignores_case_and_keeps_the_order() {
        let top = vec![
            (Page::from_stored("e.com/Blog/a".into()), 5),
            (Page::from_stored("e.com/about".into()), 3),
            (Page::from_stored("e.com/blog/b".into()), 1),
        ];
        let rows: Vec<&str> = matching(&top, "BLOG")
            .iter()
            .map(|(p, _)| p.path())
            .collect();
        assert_eq!(rows, ["/Blog/a", "/blog/b"]);
        assert_eq!(matching(&top, "").len(), 3);
    }
}

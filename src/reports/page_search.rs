//! The page search: the top pages whose path contains a text (the `q`
//! parameter), shared by the dashboard, `pages.csv` and the API, so all
//! three list the same rows. Not a filter of the figures: those are
//! `domain::filter`'s, which narrow every report to some visits.

use crate::domain::Page;

/// Longest search accepted, in characters (as typed, spaces included: the
/// API document gives it as a `maxLength`).
pub const MAX_SEARCH_CHARS: usize = 200;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("The page filter is at most {MAX_SEARCH_CHARS} characters.")]
pub struct SearchTooLong;

/// A trimmed search; empty matches every page.
pub fn parse(raw: Option<&str>) -> Result<String, SearchTooLong> {
    let raw = raw.unwrap_or_default();
    if raw.chars().count() > MAX_SEARCH_CHARS {
        return Err(SearchTooLong);
    }
    Ok(raw.trim().to_owned())
}

/// The pages whose path contains `filter`, ignoring case, in their order.
pub fn matching<'a>(top: &'a [(Page, i64)], filter: &str) -> Vec<&'a (Page, i64)> {
    let needle = filter.to_lowercase();
    top.iter()
        .filter(|(page, _)| matches(page, &needle))
        .collect()
}

/// Whether `page`'s path contains `needle` (already lower case), ignoring
/// case; an empty needle matches every page.
pub fn matches(page: &Page, needle: &str) -> bool {
    needle.is_empty() || page.path().to_lowercase().contains(needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_is_trimmed_and_bounded() {
        assert_eq!(parse(None), Ok(String::new()));
        assert_eq!(parse(Some("  blog ")), Ok("blog".into()));
        assert_eq!(parse(Some(&"a".repeat(201))), Err(SearchTooLong));
        // Characters, not bytes; spaces count before they are trimmed.
        assert_eq!(parse(Some(&"é".repeat(200))), Ok("é".repeat(200)));
        assert_eq!(
            parse(Some(&format!(" {}", "a".repeat(200)))),
            Err(SearchTooLong)
        );
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

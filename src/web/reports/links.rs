//! Links between report pages and exports: one place builds their query

//! strings, so every link keeps the range the same way.

use super::*;
use crate::web::fmt;

impl ReportQuery {
    /// The range parameters and the filters as a query string, for links
    /// and exports.
    pub(super) fn range_params(&self) -> String {
        let filters = self
            .filter_params()
            .into_iter()
            .map(|(k, v)| format!("{k}={}", fmt::query(&v)));
        let mut all: Vec<String> = vec![self.range_only_params()];
        all.retain(|p| !p.is_empty());
        all.extend(filters);
        all.join("&")
    }

    /// The range parameters alone.
    pub(super) fn range_only_params(&self) -> String {
        [
            ("range", &self.range),
            ("from", &self.from),
            ("to", &self.to),
            ("res", &self.res),
        ]
        .iter()
        .filter_map(|(k, v)| {
            v.as_deref()
                .filter(|v| !v.is_empty())
                .map(|v| format!("{k}={}", fmt::query(v)))
        })
        .collect::<Vec<_>>()
        .join("&")
    }

    /// `base` (a dashboard) with the range and `filters`.
    pub(super) fn filtered_link(&self, base: &str, filters: &crate::domain::Filters) -> String {
        self.filtered_link_with(base, &[], filters)
    }

    /// [`Self::filtered_link`] keeping `kept` (a page report's page).
    pub(super) fn filtered_link_with(
        &self,
        base: &str,
        kept: &[(&str, &str)],
        filters: &crate::domain::Filters,
    ) -> String {
        let values: Vec<String> = filters.iter().map(ToString::to_string).collect();
        let extra: Vec<(&str, &str)> = kept
            .iter()
            .copied()
            .chain(values.iter().map(|v| ("filter", v.as_str())))
            .collect();
        join(base, &self.range_only_params(), &extra)
    }

    /// A breakdown row's link: `base` with this report's filters and one
    /// more; `None` for a value no filter can name (such as "(other)").
    pub(super) fn add_filter_link(
        &self,
        base: &str,
        dimension: crate::domain::FilterDimension,
        value: &str,
    ) -> Option<String> {
        let filter = crate::domain::Filter::new(dimension, value).ok()?;
        let filters = self.filters().unwrap_or_default().with(filter);
        Some(self.filtered_link(base, &filters))
    }
}

pub(super) fn join(base: &str, params: &str, extra: &[(&str, &str)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !params.is_empty() {
        parts.push(params.to_owned());
    }
    parts.extend(extra.iter().map(|(k, v)| format!("{k}={}", fmt::query(v))));
    if parts.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::reports::shared::slug;

    #[test]
    pub(super) fn links_keep_the_range_and_encode_values() {
        let q = ReportQuery {
            range: Some("custom".into()),
            from: Some("2026-11-01".into()),
            to: Some("".into()),
            ..Default::default()
        };
        assert_eq!(q.range_params(), "range=custom&from=2026%2D11%2D01");
        assert_eq!(
            join("/x", &q.range_params(), &[("path", "/a b")]),
            "/x?range=custom&from=2026%2D11%2D01&path=%2Fa%20b"
        );
        assert_eq!(join("/x", "", &[]), "/x");
        assert_eq!(slug("/Blog/Hello World.html"), "blog-hello-world-html");
        assert_eq!(slug("/"), "");
    }
}

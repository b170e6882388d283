//! Funnels: 2 to 8 steps a visit should take in order (a page, a page
//! pattern with `*`, or an event), defined on a site's settings or asked
//! for ad hoc through the API (`step=/pricing&step=event:Signup`).

use std::fmt;

use super::dimension::MAX_EVENT_CHARS;
use super::filter::{FilterError, PageMatch};

pub const MIN_STEPS: usize = 2;
pub const MAX_STEPS: usize = 8;
/// Longest funnel name, in characters.
pub const MAX_FUNNEL_NAME_CHARS: usize = 60;
/// Most funnels one site keeps: each is one more read of the report.
pub const MAX_FUNNELS_PER_SITE: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FunnelStep {
    /// A view of a page, or of any page a pattern matches.
    Page(PageMatch),
    /// An event of that name.
    Event(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FunnelError {
    #[error("a funnel has {MIN_STEPS} to {MAX_STEPS} steps")]
    StepCount,
    #[error("a step is a page path such as /pricing (with * for any characters) or event:<name>")]
    EmptyStep,
    #[error("a step's page {0}")]
    Page(&'static str),
    #[error("a step's event: {0}")]
    Event(&'static str),
    #[error("name the funnel (at most {MAX_FUNNEL_NAME_CHARS} characters)")]
    Name,
}

impl FunnelStep {
    /// `/pricing`, `/blog/*` or `event:Signup`, as sent (the settings form
    /// trims what was typed first). An event's value is bounded like an
    /// event name; one the pixel would not count is a step nobody reaches.
    pub fn parse(raw: &str) -> Result<Self, FunnelError> {
        if raw.is_empty() {
            return Err(FunnelError::EmptyStep);
        }
        if let Some(name) = raw.strip_prefix("event:") {
            if name.is_empty() {
                return Err(FunnelError::Event("the name is empty"));
            }
            if name.chars().count() > MAX_EVENT_CHARS {
                return Err(FunnelError::Event("the name is at most 64 characters"));
            }
            return Ok(FunnelStep::Event(name.to_owned()));
        }
        PageMatch::parse(raw).map(FunnelStep::Page).map_err(|e| {
            FunnelError::Page(match e {
                FilterError::PageTooLong => "is at most 512 characters",
                _ => "is a path starting with /, such as /pricing",
            })
        })
    }

    /// Whether a visit's step (a page's path, or an event's name) is this.
    pub fn matches(&self, page: Option<&str>, event: Option<&str>) -> bool {
        match (self, page, event) {
            (FunnelStep::Page(m), Some(path), _) => m.matches(path),
            (FunnelStep::Event(name), _, Some(e)) => name == e,
            _ => false,
        }
    }
}

impl fmt::Display for FunnelStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FunnelStep::Page(m) => f.write_str(m.as_str()),
            FunnelStep::Event(name) => write!(f, "event:{name}"),
        }
    }
}

/// The steps of one funnel, 2 to 8 of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunnelSteps(Vec<FunnelStep>);

impl FunnelSteps {
    /// Every entry is a step (the settings form leaves its empty fields
    /// out before).
    pub fn parse<'a>(raw: impl IntoIterator<Item = &'a str>) -> Result<Self, FunnelError> {
        let mut steps = Vec::new();
        for s in raw {
            if steps.len() == MAX_STEPS {
                return Err(FunnelError::StepCount);
            }
            steps.push(FunnelStep::parse(s)?);
        }
        if steps.len() < MIN_STEPS {
            return Err(FunnelError::StepCount);
        }
        Ok(FunnelSteps(steps))
    }

    pub fn steps(&self) -> &[FunnelStep] {
        &self.0
    }

    /// The stored form: each step as [`FunnelStep`] displays it.
    pub fn stored(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

/// A funnel's name as the owner typed it, trimmed.
pub fn parse_funnel_name(raw: &str) -> Result<String, FunnelError> {
    let name = raw.trim();
    if name.is_empty()
        || name.chars().count() > MAX_FUNNEL_NAME_CHARS
        || name.chars().any(char::is_control)
    {
        return Err(FunnelError::Name);
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_a_page_a_pattern_or_an_event() {
        assert_eq!(
            FunnelStep::parse("/pricing").unwrap(),
            FunnelStep::Page(PageMatch::Exact("/pricing".into()))
        );
        assert_eq!(
            FunnelStep::parse("/blog/*").unwrap(),
            FunnelStep::Page(PageMatch::Pattern("/blog/*".into()))
        );
        assert_eq!(
            FunnelStep::parse("event:Signup").unwrap(),
            FunnelStep::Event("Signup".into())
        );
    }

    #[test]
    fn a_step_that_is_neither_is_refused() {
        assert_eq!(FunnelStep::parse(""), Err(FunnelError::EmptyStep));
        assert!(matches!(
            FunnelStep::parse(&format!("event:{}", "a".repeat(65))),
            Err(FunnelError::Event(_))
        ));
        assert!(matches!(
            FunnelStep::parse("pricing"),
            Err(FunnelError::Page(_))
        ));
        assert!(matches!(
            FunnelStep::parse("event:"),
            Err(FunnelError::Event(_))
        ));
    }

    #[test]
    fn a_funnel_has_two_to_eight_steps() {
        assert_eq!(FunnelSteps::parse(["/a"]), Err(FunnelError::StepCount));
        let eight: Vec<String> = (0..8).map(|i| format!("/s{i}")).collect();
        assert_eq!(
            FunnelSteps::parse(eight.iter().map(String::as_str))
                .unwrap()
                .steps()
                .len(),
            8
        );
        let nine: Vec<String> = (0..9).map(|i| format!("/s{i}")).collect();
        assert_eq!(
            FunnelSteps::parse(nine.iter().map(String::as_str)),
            Err(FunnelError::StepCount)
        );
        // Every entry is a step: an empty one is refused.
        assert_eq!(
            FunnelSteps::parse(["/a", "", "event:B"]),
            Err(FunnelError::EmptyStep)
        );
    }

    #[test]
    fn the_stored_form_parses_back() {
        let steps = FunnelSteps::parse(["/a", "/b/*", "event:Signup"]).unwrap();
        let stored = steps.stored();
        assert_eq!(stored, ["/a", "/b/*", "event:Signup"]);
        assert_eq!(
            FunnelSteps::parse(stored.iter().map(String::as_str)).unwrap(),
            steps
        );
    }

    #[test]
    fn a_step_matches_a_page_or_an_event_never_both() {
        let page = FunnelStep::parse("/a").unwrap();
        assert!(page.matches(Some("/a"), None));
        assert!(!page.matches(None, Some("/a")));
        let event = FunnelStep::parse("event:a").unwrap();
        assert!(event.matches(None, Some("a")));
        assert!(!event.matches(Some("a"), None));
    }

    #[test]
    fn a_name_is_trimmed_and_bounded() {
        assert_eq!(parse_funnel_name(" Signup "), Ok("Signup".into()));
        assert_eq!(parse_funnel_name(""), Err(FunnelError::Name));
        assert_eq!(
            parse_funnel_name(&"a".repeat(MAX_FUNNEL_NAME_CHARS + 1)),
            Err(FunnelError::Name)
        );
    }
}

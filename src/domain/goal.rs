//! Goals an owner marks on a site's settings page: a
//! custom event's name (optionally only its events carrying one property
//! value), or a page path whose views count as conversions.
//!
//! A goal is stored in the site's document as one string, its kind and its
//! name (`event:Signup`, `page:/thanks`, and for an event with a property
//! `event-with:["Signup","plan","pro"]`, a JSON list since keys and values
//! may hold any printable character), so that `$addToSet` and `$pull`
//! compare whole goals and an event and a page of the same name stay two.
//! A build that does not know a kind leaves its goals out.

use std::fmt;

use super::{EventName, EventNameError, PageError, PagePath, PageRef};

/// The most goals a site may have: a dashboard panel row and a count per
/// goal per report, so the bound is on the work of every report.
pub const MAX_GOALS_PER_SITE: usize = 20;

/// The longest event name (the rule of the events `tt.js` sends).
pub const MAX_EVENT_NAME_CHARS: usize = super::dimension::MAX_EVENT_CHARS;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Goal {
    /// A custom event, by the name the site's code sends.
    Event(String),
    /// Views of one path of the site.
    Page(PagePath),
    /// A custom event's events that carry one custom property value.
    EventWith {
        name: String,
        key: String,
        value: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoalError {
    #[error("a goal is an event or a page path")]
    UnknownKind,
    #[error("enter the event's name, as the page's code sends it")]
    EmptyName,
    #[error("an event name is at most {MAX_EVENT_NAME_CHARS} characters")]
    NameTooLong,
    #[error("an event name has only letters, digits, spaces and - _ . : /")]
    NameCharacters,
    #[error("enter the page's path, such as /thanks")]
    EmptyPath,
    /// A full address is refused rather than cut to its path: its host may
    /// be another site's, and the owner should see which path counts.
    #[error(
        "a page goal is a path of this site starting with /, such as /thanks, not a full address"
    )]
    NotAPath,
    #[error("the page path is not usable: {0}")]
    Path(PageError),
    #[error("a property goal names both a key and a value")]
    PropertyHalf,
    #[error(
        "a property key has at most 300 bytes and no colon, a value at most 2,000 bytes, neither blank nor an email address"
    )]
    Property,
}

/// The rules of an event name, those of the events the pixel counts
/// ([`EventName::parse`]), with the settings form's words.
pub fn parse_event_name(raw: &str) -> Result<String, GoalError> {
    EventName::parse(raw)
        .map(EventName::into_string)
        .map_err(|e| match e {
            EventNameError::Empty => GoalError::EmptyName,
            EventNameError::TooLong => GoalError::NameTooLong,
            EventNameError::BadCharacter => GoalError::NameCharacters,
        })
}

/// A page goal's path, normalised as the pixel normalises the pages it
/// counts (dot segments resolved, escapes decoded, query and fragment
/// dropped), so that the goal names the same page key the views are under.
fn parse_page_path(raw: &str) -> Result<PagePath, GoalError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(GoalError::EmptyPath);
    }
    if !raw.starts_with('/') || raw.starts_with("//") {
        return Err(GoalError::NotAPath);
    }
    match PageRef::parse(raw) {
        Ok(PageRef::Path(path)) => Ok(path),
        Ok(PageRef::Url { .. }) | Err(PageError::NotAPathOrUrl) => Err(GoalError::NotAPath),
        Err(e) => Err(GoalError::Path(e)),
    }
}

impl Goal {
    /// A goal as the settings form sends it: `kind` is `event` or `page`.
    pub fn parse(kind: &str, raw: &str) -> Result<Goal, GoalError> {
        match kind {
            "event" => parse_event_name(raw).map(Goal::Event),
            "page" => parse_page_path(raw).map(Goal::Page),
            _ => Err(GoalError::UnknownKind),
        }
    }

    /// An event goal counting only its events that carry the property
    /// `key` with `value` (both empty: every event of the name, as
    /// [`Goal::parse`]). Key and value follow the properties' rules
    /// (`domain::properties`), so the goal names what the pixel keeps.
    pub fn parse_event_with(name: &str, key: &str, value: &str) -> Result<Goal, GoalError> {
        let name = parse_event_name(name)?;
        let (key, value) = (key.trim(), value.trim());
        match (key.is_empty(), value.is_empty()) {
            (true, true) => return Ok(Goal::Event(name)),
            (false, false) => {}
            _ => return Err(GoalError::PropertyHalf),
        }
        let pair = vec![(key.to_owned(), value.to_owned())];
        let kept = super::Properties::of(pair, super::properties::Rules::Strict)
            .map_err(|_| GoalError::Property)?;
        let first = kept.iter().next().map(|(k, v)| k == key && v == value);
        match first {
            Some(true) => Ok(Goal::EventWith {
                name,
                key: key.to_owned(),
                value: value.to_owned(),
            }),
            _ => Err(GoalError::Property),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Goal::Event(_) | Goal::EventWith { .. } => "event",
            Goal::Page(_) => "page",
        }
    }

    /// The event's name or the page's path.
    pub fn name(&self) -> &str {
        match self {
            Goal::Event(name) | Goal::EventWith { name, .. } => name,
            Goal::Page(path) => path.as_str(),
        }
    }

    /// The event's name, for an event goal of either kind.
    pub fn event(&self) -> Option<&str> {
        match self {
            Goal::Event(name) | Goal::EventWith { name, .. } => Some(name),
            Goal::Page(_) => None,
        }
    }

    /// The property an event goal's events must carry.
    pub fn property(&self) -> Option<(&str, &str)> {
        match self {
            Goal::EventWith { key, value, .. } => Some((key, value)),
            _ => None,
        }
    }

    /// How the pages name it: `Signup`, `Visit /thanks`, `Signup with
    /// plan = pro`.
    pub fn label(&self) -> String {
        match self {
            Goal::Event(name) => name.clone(),
            Goal::Page(path) => format!("Visit {}", path.as_str()),
            Goal::EventWith { name, key, value } => format!("{name} with {key} = {value}"),
        }
    }

    /// The stored form: `event:Signup`, `page:/thanks`,
    /// `event-with:["Signup","plan","pro"]`.
    pub fn stored(&self) -> String {
        match self {
            Goal::EventWith { name, key, value } => {
                format!("{EVENT_WITH}:{}", serde_json::json!([name, key, value]))
            }
            _ => format!("{}:{}", self.kind(), self.name()),
        }
    }

    /// Reads [`Goal::stored`] back. The rules are applied again, so a
    /// string a newer or older build wrote that this one would refuse is
    /// not a goal (`None`) rather than an error.
    pub fn from_stored(s: &str) -> Option<Goal> {
        let (kind, name) = s.split_once(':')?;
        if kind == EVENT_WITH {
            let [name, key, value]: [String; 3] = serde_json::from_str(name).ok()?;
            let goal = Goal::parse_event_with(&name, &key, &value).ok()?;
            return (goal.stored() == s).then_some(goal);
        }
        let goal = Goal::parse(kind, name).ok()?;
        // Only the exact stored form: a name with spaces around it was not
        // written by `stored`, and removing it would miss.
        (goal.name() == name).then_some(goal)
    }
}

/// The stored kind of an event goal with a property.
const EVENT_WITH: &str = "event-with";

impl fmt::Display for Goal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.stored())
    }
}

#[cfg(test)]
mod property_tests {
    use super::*;

    #[test]
    fn an_event_goal_may_name_a_property_value() {
        let g = Goal::parse_event_with(" Signup ", " plan ", " pro ").unwrap();
        assert_eq!(g.event(), Some("Signup"));
        assert_eq!(g.property(), Some(("plan", "pro")));
        assert_eq!(g.kind(), "event");
        assert_eq!(g.label(), "Signup with plan = pro");
        assert_eq!(g.stored(), r#"event-with:["Signup","plan","pro"]"#);
        assert_eq!(
            Goal::parse_event_with("Signup", "", "").unwrap(),
            Goal::Event("Signup".into())
        );
    }

    #[test]
    fn a_property_goal_names_both_halves() {
        assert_eq!(
            Goal::parse_event_with("Signup", "plan", ""),
            Err(GoalError::PropertyHalf)
        );
        assert_eq!(
            Goal::parse_event_with("Signup", " ", "pro"),
            Err(GoalError::PropertyHalf)
        );
    }

    #[test]
    fn a_property_goal_keeps_the_properties_rules() {
        let long_key = "k".repeat(301);
        let long_value = "v".repeat(2_001);
        for (key, value) in [
            ("a:b", "x"),
            (long_key.as_str(), "x"),
            ("k", long_value.as_str()),
            ("email", "jane@example.com"),
            ("k\u{1}", "x"),
        ] {
            assert_eq!(
                Goal::parse_event_with("Signup", key, value),
                Err(GoalError::Property),
                "{key:?} {value:?}"
            );
        }
        assert_eq!(
            Goal::parse_event_with("a$b", "plan", "pro"),
            Err(GoalError::NameCharacters)
        );
    }

    #[test]
    fn a_property_goal_reads_back_what_it_stores() {
        for (key, value) in [
            ("plan", "pro"),
            ("x.y$z", "Zoë \"quoted\""),
            ("url", "https://a.test/?q=1"),
        ] {
            let g = Goal::parse_event_with("Outbound Link: Click", key, value).unwrap();
            assert_eq!(Goal::from_stored(&g.stored()), Some(g.clone()));
        }
        for s in [
            "event-with:",
            "event-with:[]",
            r#"event-with:["Signup","plan"]"#,
            r#"event-with:["Signup","",""]"#,
            r#"event-with:["Signup","a:b","x"]"#,
            r#"event-with: ["Signup","plan","pro"]"#,
        ] {
            assert_eq!(Goal::from_stored(s), None, "{s:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(raw: &str) -> Result<Goal, GoalError> {
        Goal::parse("event", raw)
    }

    fn page(raw: &str) -> Result<Goal, GoalError> {
        Goal::parse("page", raw)
    }

    #[test]
    fn an_event_name_is_trimmed_and_keeps_its_case() {
        assert_eq!(event("  Signup "), Ok(Goal::Event("Signup".into())));
        assert_ne!(event("signup"), event("Signup"));
    }

    #[test]
    fn an_event_name_is_not_empty() {
        assert_eq!(event(""), Err(GoalError::EmptyName));
        assert_eq!(event(" \t "), Err(GoalError::EmptyName));
    }

    #[test]
    fn an_event_name_is_at_most_64_characters() {
        assert!(event(&"a".repeat(64)).is_ok());
        // Characters, not bytes.
        assert!(event(&"é".repeat(64)).is_ok());
        assert_eq!(event(&"a".repeat(65)), Err(GoalError::NameTooLong));
    }

    #[test]
    fn an_event_name_has_letters_digits_spaces_and_a_few_marks() {
        for good in [
            "Download: report.pdf",
            "sign-up_2/step.1",
            "Anmeldung bestätigt",
            "注册",
        ] {
            assert_eq!(event(good), Ok(Goal::Event(good.into())), "{good}");
        }
        for bad in [
            "a\u{0}b",
            "a\nb",
            "a\tb",
            "<script>",
            "{\"$gt\":1}",
            "a$b",
            "100%",
            "a\u{202E}b",
        ] {
            assert_eq!(event(bad), Err(GoalError::NameCharacters), "{bad:?}");
        }
    }

    #[test]
    fn the_event_rules_stand_alone() {
        assert_eq!(parse_event_name(" Signup "), Ok("Signup".to_owned()));
        assert_eq!(parse_event_name(""), Err(GoalError::EmptyName));
    }

    #[test]
    fn a_page_goal_is_a_path_normalised_as_the_pixel_does() {
        assert_eq!(
            page(" /thanks "),
            Ok(Goal::Page(PagePath::parse("/thanks").unwrap()))
        );
        assert_eq!(page("/thanks?from=mail#top").unwrap().name(), "/thanks");
        assert_eq!(page("/a/../caf%C3%A9").unwrap().name(), "/café");
        assert_eq!(page("/").unwrap().name(), "/");
    }

    #[test]
    fn a_page_goal_is_not_empty_and_not_a_full_address() {
        assert_eq!(page("  "), Err(GoalError::EmptyPath));
        for bad in [
            "thanks",
            "https://example.com/thanks",
            "//example.com/x",
            "?a=1",
        ] {
            assert_eq!(page(bad), Err(GoalError::NotAPath), "{bad}");
        }
    }

    #[test]
    fn a_page_goal_keeps_the_page_rules() {
        assert_eq!(
            page(&format!("/{}", "a".repeat(600))),
            Err(GoalError::Path(PageError::TooLong))
        );
        assert_eq!(
            page("/a%00b"),
            Err(GoalError::Path(PageError::ControlCharacter))
        );
        assert_eq!(page("/%FF"), Err(GoalError::Path(PageError::InvalidUtf8)));
        // The message says what is wrong, fit for the form.
        assert_eq!(
            page("/%FF").unwrap_err().to_string(),
            "the page path is not usable: the page is not valid UTF-8"
        );
    }

    #[test]
    fn only_events_and_pages_are_goals() {
        assert_eq!(Goal::parse("click", "Signup"), Err(GoalError::UnknownKind));
        assert_eq!(Goal::parse("", "/"), Err(GoalError::UnknownKind));
    }

    #[test]
    fn a_goal_reads_back_what_it_stores() {
        for goal in [
            event("Signup").unwrap(),
            event("Download: a/b.pdf").unwrap(),
            page("/thanks").unwrap(),
            page("/a:b").unwrap(),
        ] {
            assert_eq!(Goal::from_stored(&goal.stored()), Some(goal.clone()));
        }
        assert_eq!(event("Signup").unwrap().stored(), "event:Signup");
        assert_eq!(page("/thanks").unwrap().stored(), "page:/thanks");
        assert_eq!(event("Signup").unwrap().kind(), "event");
        assert_eq!(page("/thanks").unwrap().kind(), "page");
    }

    #[test]
    fn unknown_or_malformed_stored_goals_are_none() {
        for s in [
            "",
            "Signup",
            "click:Signup",
            "event:",
            "event:a$b",
            "page:thanks",
            "event: Signup",
            "page:/a/../b",
        ] {
            assert_eq!(Goal::from_stored(s), None, "{s:?}");
        }
    }
}

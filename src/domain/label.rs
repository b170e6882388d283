use std::fmt;

/// What a user calls an API token or a share link, so that they can tell
/// them apart in the list: trimmed, 1 to 80 characters, no control
/// characters (it is shown in pages and must stay one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label(String);

pub const MAX_LABEL_CHARS: usize = 80;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    #[error("a name is needed")]
    Empty,
    #[error("a name is at most {MAX_LABEL_CHARS} characters")]
    TooLong,
    #[error("a name is one line of text, without control characters")]
    Control,
}

impl Label {
    pub fn parse(raw: &str) -> Result<Self, LabelError> {
        let label = raw.trim();
        if label.is_empty() {
            return Err(LabelError::Empty);
        }
        if label.chars().count() > MAX_LABEL_CHARS {
            return Err(LabelError::TooLong);
        }
        if label.chars().any(char::is_control) {
            return Err(LabelError::Control);
        }
        Ok(Self(label.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_trimmed() {
        assert_eq!(
            Label::parse("  CI dashboard ").unwrap().as_str(),
            "CI dashboard"
        );
    }

    #[test]
    fn an_empty_label_is_refused() {
        assert_eq!(Label::parse(""), Err(LabelError::Empty));
        assert_eq!(Label::parse(" \t "), Err(LabelError::Empty));
    }

    #[test]
    fn a_label_is_at_most_80_characters() {
        assert!(Label::parse(&"é".repeat(80)).is_ok());
        assert_eq!(Label::parse(&"a".repeat(81)), Err(LabelError::TooLong));
    }

    #[test]
    fn a_label_has_no_control_characters() {
        assert_eq!(Label::parse("a\nb"), Err(LabelError::Control));
        assert_eq!(Label::parse("a\u{7f}b"), Err(LabelError::Control));
    }
}

use serde::{Deserialize, Serialize};
use std::fmt;

/// A login: an e-mail address, trimmed and lower-cased so that one person
/// cannot hold two accounts by changing case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Email(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EmailError {
    #[error("an e-mail address is 3 to 254 characters")]
    Length,
    #[error("an e-mail address looks like name@example.com")]
    Shape,
}

impl Email {
    pub fn parse(raw: &str) -> Result<Self, EmailError> {
        let email = raw.trim().to_lowercase();
        if !(3..=254).contains(&email.len()) {
            return Err(EmailError::Length);
        }
        let (local, host) = email.split_once('@').ok_or(EmailError::Shape)?;
        let shape_ok = !local.is_empty()
            && !host.is_empty()
            && !host.contains('@')
            && !host.starts_with('.')
            && !host.ends_with('.')
            && !email
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || "<>\"'".contains(c));
        if !shape_ok {
            return Err(EmailError::Shape);
        }
        Ok(Self(email))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Email {
    type Error = EmailError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<Email> for String {
    fn from(value: Email) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_lower_cases() {
        assert_eq!(
            Email::parse(" Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        assert!(Email::parse("admin@localhost").is_ok());
    }

    #[test]
    fn rejects_wrong_lengths() {
        assert_eq!(Email::parse("a@"), Err(EmailError::Length));
        assert_eq!(
            Email::parse(&format!("{}@x.com", "a".repeat(250))),
            Err(EmailError::Length)
        );
    }

    #[test]
    fn rejects_wrong_shapes() {
        for raw in [
            "nobody",
            "@x.com",
            "ab@",
            "a@b@c",
            "a b@x.com",
            "a@.x",
            "<a>@x.com",
            "a@x.com.",
        ] {
            assert_eq!(Email::parse(raw), Err(EmailError::Shape), "{raw}");
        }
    }
}

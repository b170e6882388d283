use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// The public tracking id of a site: a UUID in its canonical hyphenated form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SiteId(Uuid);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SiteIdError {
    #[error("a site id is a UUID like 6f1c2d3e-0000-4000-8000-000000000000")]
    Malformed,
}

impl SiteId {
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }

    /// Accepts only the 36-character hyphenated form (any case), not the
    /// braced, URN or simple forms `Uuid` would also take: one spelling per
    /// site keeps snippets, logs and URLs comparable.
    pub fn parse(raw: &str) -> Result<Self, SiteIdError> {
        if raw.len() != 36 {
            return Err(SiteIdError::Malformed);
        }
        Uuid::try_parse(raw)
            .map(Self)
            .map_err(|_| SiteIdError::Malformed)
    }

    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl Default for SiteId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for SiteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.hyphenated())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_hyphenated_uuid_in_any_case() {
        let id = SiteId::parse("6F1C2D3E-1111-4222-8333-444455556666").unwrap();
        assert_eq!(id.to_string(), "6f1c2d3e-1111-4222-8333-444455556666");
    }

    #[test]
    fn rejects_other_uuid_spellings() {
        for raw in [
            "6f1c2d3e111142228333444455556666",
            "{6f1c2d3e-1111-4222-8333-444455556666}",
            "urn:uuid:6f1c2d3e-1111-4222-8333-444455556666",
        ] {
            assert_eq!(SiteId::parse(raw), Err(SiteIdError::Malformed), "{raw}");
        }
    }

    #[test]
    fn rejects_garbage_of_the_right_length() {
        assert!(SiteId::parse("zzzzzzzz-1111-4222-8333-444455556666").is_err());
        assert!(SiteId::parse("").is_err());
        assert!(SiteId::parse(r#"{"$gt":""}"#).is_err());
    }
}

//! What every form shares: a refused field shown next to the field, and
//! messages written as sentences.

use super::fmt::sentence;
use crate::domain::DomainName;

/// A refused form field: which one (its `id`), and what to do about it,
/// shown next to the field on the same page; and the form's other refused
/// fields (`also`), so that every one is marked at once, not one per post.
pub struct FormError {
    pub field: &'static str,
    pub message: String,
    pub also: Vec<FormError>,
}

impl FormError {
    pub fn new(field: &'static str, message: impl std::fmt::Display) -> Self {
        FormError {
            field,
            message: sentence(&message.to_string()),
            also: Vec::new(),
        }
    }

    /// What is wrong with `field`, if it was refused.
    pub fn about(&self, field: &str) -> Option<&str> {
        std::iter::once(self)
            .chain(&self.also)
            .find(|e| e.field == field)
            .map(|e| e.message.as_str())
    }
}

/// The refusals of a form's fields, gathered while each is checked.
#[derive(Default)]
pub struct Refusals(Vec<FormError>);

impl Refusals {
    /// The checked value, or `None` with its refusal kept.
    pub fn check<T>(&mut self, checked: Result<T, FormError>) -> Option<T> {
        match checked {
            Ok(value) => Some(value),
            Err(e) => {
                self.0.push(e);
                None
            }
        }
    }

    /// Every refusal as one error (the first, the others `also`), or
    /// `None` when all fields passed.
    pub fn into_error(self) -> Option<FormError> {
        let mut all = self.0.into_iter();
        let mut first = all.next()?;
        first.also.extend(all);
        Some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refused_field_is_kept() {
        let mut refusals = Refusals::default();
        assert_eq!(refusals.check(Ok::<_, FormError>(1)), Some(1));
        assert_eq!(
            refusals.check(Err::<i32, _>(FormError::new("aliases", "bad alias"))),
            None
        );
        let _ = refusals.check(Err::<i32, _>(FormError::new("time_zone", "no zone")));
        let e = refusals.into_error().unwrap();
        assert_eq!(e.about("aliases"), Some("Bad alias."));
        assert_eq!(e.about("time_zone"), Some("No zone."));
        assert_eq!(e.about("name"), None);
        assert!(Refusals::default().into_error().is_none());
    }
}

/// Host names separated by commas, spaces or new lines (URLs and ports
/// are normalised as for the domain).
pub fn parse_hosts(raw: &str) -> Result<Vec<DomainName>, FormError> {
    raw.split([',', ' ', '\n', '\r', '\t'])
        .filter(|h| !h.is_empty())
        .map(|h| {
            DomainName::from_input(h)
                .map_err(|e| FormError::new("aliases", format!("“{h}” is not usable: {e}")))
        })
        .collect()
}

/// Refuses the first host that is not a public, registrable name (what
/// an owner may add; see `DomainName::check_public`).
pub fn check_public<'a>(
    hosts: impl IntoIterator<Item = &'a DomainName>,
    field: &'static str,
) -> Result<(), FormError> {
    for host in hosts {
        host.check_public().map_err(|e| {
            FormError::new(
                field,
                format!("“{host}” cannot be added by an owner: {e}. An administrator can add it"),
            )
        })?;
    }
    Ok(())
}

/// A site refused by storage, as the field to mark: the name when it is too
/// long, else `hosts_field` (the domain or aliases that clash). A database
/// failure is no refusal but an error.
pub fn site_refusal(
    e: crate::storage::sites::SiteError,
    hosts_field: &'static str,
) -> Result<FormError, super::error::WebError> {
    use crate::storage::sites::SiteError;
    match e {
        SiteError::Database(e) => Err(e.into()),
        e @ SiteError::Name(_) => Ok(FormError::new("name", e)),
        SiteError::OwnerCap { owned } => Ok(FormError::new(
            hosts_field,
            format!(
                "You already own {owned} sites, the most an owner may add: ask an administrator"
            ),
        )),
        e => Ok(FormError::new(hosts_field, e)),
    }
}

/// What a page confirms after a change it redirected from (`?done=…`).
#[derive(serde::Deserialize)]
pub struct DoneQuery {
    pub done: Option<String>,
}

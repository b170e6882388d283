//! What every form shares: a refused field shown next to the field, and
//! messages written as sentences.

use super::fmt::sentence;
use crate::domain::DomainName;

/// A refused form field: which one (its `id`), and what to do about it,
/// shown next to the field on the same page.
pub struct FormError {
    pub field: &'static str,
    pub message: String,
}

impl FormError {
    pub fn new(field: &'static str, message: impl std::fmt::Display) -> Self {
        FormError {
            field,
            message: sentence(&message.to_string()),
        }
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
        e @ SiteError::NameTooLong => Ok(FormError::new("name", e)),
        e => Ok(FormError::new(hosts_field, e)),
    }
}

/// What a page confirms after a change it redirected from (`?done=…`).
#[derive(serde::Deserialize)]
pub struct DoneQuery {
    pub done: Option<String>,
}

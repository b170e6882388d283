//! Domain values. Each is built only through its `parse`, which enforces the
//! rules, so code holding one never re-checks it.

mod domain_name;
mod email;
mod page;
mod resolution;
mod site_id;
mod source;
mod time_zone;

pub use domain_name::{DomainName, DomainNameError};
pub use email::{Email, EmailError};
pub use page::{Page, PageError, PagePath, PageRef, MAX_PAGE_INPUT_BYTES, MAX_PATH_BYTES};
pub use resolution::Resolution;
pub use site_id::{SiteId, SiteIdError};
pub use source::{Source, MAX_REFERRER_BYTES, MAX_SOURCE_CHARS};
pub use time_zone::{TimeZone, TimeZoneError};

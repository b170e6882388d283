//! Domain values. Each is built only through its `parse`, which enforces the
//! rules, so code holding one never re-checks it.

mod access_token;
pub mod client_ip;
pub mod countries;
pub mod dimension;
mod domain_name;
mod email;
pub mod engagement;
mod expiry_days;
pub mod filter;
pub mod funnel;
mod goal;
mod label;
mod mail;
pub mod numbers;
mod page;
mod page_cap;
pub mod properties;
mod resolution;
mod retention;
pub mod revenue;
mod site_id;
mod site_name;
pub mod sketch;
mod source;
mod time_zone;
pub mod visit;

pub use access_token::{AccessToken, AccessTokenError, TokenKind};
pub use dimension::{Dimension, EventName, EventNameError, Labels};
pub use domain_name::{DomainName, DomainNameError, NotPublic};
pub use email::{Email, EmailError};
pub use engagement::{EngagementError, EngagementHit};
pub use expiry_days::{ExpiryDays, ExpiryDaysError, MAX_EXPIRY_DAYS};
pub use filter::{Filter, FilterDimension, FilterError, Filters};
pub use funnel::{FunnelError, FunnelStep, FunnelSteps};
pub use goal::{parse_event_name, Goal, GoalError, MAX_EVENT_NAME_CHARS, MAX_GOALS_PER_SITE};
pub use label::{Label, LabelError, MAX_LABEL_CHARS};
pub use mail::{
    AlertRules, AlertRulesError, Recipient, RecipientError, Schedule, ScheduleError,
    MAX_RECIPIENT_CHARS, RECIPIENT_PATTERN,
};
pub use page::{Page, PageError, PagePath, PageRef, MAX_PAGE_INPUT_BYTES, MAX_PATH_BYTES};
pub use page_cap::{PageCapError, PageCapSetting, MAX_PAGES_PER_HOUR};
pub use properties::{Properties, PropertyError};
pub use resolution::Resolution;
pub use retention::{Retention, RetentionError, MAX_RETENTION_DAYS};
pub use revenue::{Amount, Currency, Revenue, RevenueError, RevenueTotal};
pub use site_id::{SiteId, SiteIdError};
pub use site_name::{SiteName, SiteNameError, MAX_SITE_NAME_CHARS};
pub use source::{Source, MAX_REFERRER_BYTES, MAX_SOURCE_CHARS};
pub use time_zone::{TimeZone, TimeZoneError};

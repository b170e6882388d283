//! Classification at the pixel: what kind of device, browser and
//! operating system a view came from, and from which country, without
//! keeping the User-Agent or the address that told us.
//!
//! Every value is one of a fixed set of names (or "unknown"), so nothing a
//! client sends can become a new row in the breakdowns. docs/classification.md
//! has the rules, the choice of parser and database, and their cost.

pub mod country;
pub mod user_agent;

pub use country::{Country, CountryDb, CountryDbError, CountryDbInfo, CountryDbState};
pub use user_agent::{parse_screen_width, Device, DeviceClass, UserAgentClassifier};

/// The name every dimension gives a value it cannot tell.
pub const UNKNOWN: &str = "unknown";

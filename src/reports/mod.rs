//! Reading buckets back: periods and resolutions, the queries (all through
//! the store's report handle, so they honour the read preference), and the
//! server-side chart and CSV renderings.

pub mod breakdowns;
pub mod chart;
pub mod compared;
pub mod costly;
pub mod csv;
pub mod engine;
pub mod filter;
pub mod filtered;
pub mod filtered_imported;
pub mod filtered_read;
pub mod first_line;
pub mod hours;
pub mod isolated;
pub mod local;
pub mod notes;
pub mod numbers;
pub mod page_totals;
pub mod period;
pub mod queries;
pub mod request;
pub mod retention;
pub mod sources;
pub mod summaries;
pub mod visits;
pub mod wall_clock;

pub use period::{Period, PeriodError, RangeQuery, Resolution};
pub use queries::{Point, Scope};

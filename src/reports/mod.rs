//! Every report's figures: the pages, the CSV files, the JSON API and the
//! email reports read them here.
//!
//! - The question and who answers it: `request` (whose figures, which
//!   period, which filters, read from which store) and `engine`, which
//!   decides where the figures come from and answers with the same panel
//!   types either way.
//! - When: `period` (ranges and resolutions in the site's zone), `local`
//!   (where local minutes, hours and days start), `wall_clock` (dates as
//!   typed in a query), `retention` (a level past its retention is read
//!   one level coarser).
//! - Unfiltered figures, read from the buckets and page summaries
//!   (through the store's report handle, so they honour the read
//!   preference): `queries` (views and their sums), `visits` (visit
//!   counters and visitors' sketches), `engagement` (time on page),
//!   `breakdowns` and `sources` (the
//!   breakdown buckets, by the hours `hours` plans), `page_totals` (pages
//!   from page summaries), `compared` (a period and the one before),
//!   `summaries` (the sites list).
//! - Filtered figures and funnels, read from the visit store:
//!   `filtered_read` (which visits), `filtered` (what they count),
//!   `filtered_imported` (imported days under a filter); run apart from
//!   the HTTP workers within their limits by `costly` and `isolated`.
//! - The page search of the pages panel (`page_search`), unlike the
//!   filters (`domain::filter`), narrows the rows listed, not the figures.
//! - Presenting: `chart` (server-drawn SVG), `csv`, `numbers` (numbers as
//!   people read them), `notes` (what a report says of its figures).

pub mod breakdowns;
pub mod chart;
pub mod compared;
pub mod costly;
pub mod csv;
pub mod engagement;
pub mod engine;
pub mod filtered;
pub mod filtered_imported;
pub mod filtered_read;
pub mod goals;
pub mod hours;
pub mod isolated;
pub mod line;
pub mod local;
pub mod metric;
pub mod notes;
pub mod numbers;
pub mod page_search;
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

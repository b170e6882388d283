//! Integration tests against a real MongoDB wire-protocol server: the local
//! `secantusd-rs`, or the server named by `MONGODB_URI`.

mod helpers;
mod openapi;
mod proxy;
mod webdriver;

mod accounts;
mod admin;
mod breakdowns;
mod browser;
mod browser_sharing;
mod compat;
mod crash;
mod credentials;
mod deployment;
mod email;
mod goals;
mod imports;
mod imports_hostile;
mod imports_plausible;
mod ingest;
mod journal_privacy;
mod json_api;
mod metrics;
mod page_summaries;
mod pixel_rules;
mod preallocation;
mod reference_model;
mod reports;
mod retention;
mod schemathesis;
mod security;
mod segments;
mod serve;
mod share_links;
mod site_integrity;
mod site_owner;
mod site_totals;
mod sources;
mod storage;
mod stored_extremes;
mod tenant_limits;
mod time_zones;
mod two_factor;
mod visit_log;
mod visits;

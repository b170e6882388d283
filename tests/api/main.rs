//! Integration tests against a real MongoDB wire-protocol server: the local
//! `secantusd-rs`, or the server named by `MONGODB_URI`.

mod helpers;
mod proxy;
mod webdriver;

mod accounts;
mod admin;
mod browser;
mod crash;
mod deployment;
mod ingest;
mod pixel_rules;
mod preallocation;
mod reports;
mod security;
mod serve;
mod site_owner;
mod site_totals;
mod sources;
mod storage;
mod time_zones;
mod two_factor;

//! Tickertape: self-hosted page-view analytics on MongoDB time-series
//! buckets. See docs/architecture.md for how a hit travels from the pixel to
//! the buckets.

pub mod accounts;
pub mod app;
pub mod classify;
pub mod cli;
pub mod clock;
pub mod demo;
pub mod domain;
pub mod email;
pub mod import;
pub mod indexes;
pub mod ingest;
pub mod journal;
pub mod localdb;
pub mod metrics;
pub mod preallocation;
pub mod reports;
pub mod settings;
pub mod storage;
pub mod telemetry;
pub mod web;

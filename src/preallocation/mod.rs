//! Preallocation (seed 004, seed 001's MMS background task): before each
//! hour, insert the zero-filled buckets of the next hour for every active
//! page, so live traffic only increments existing documents of final size.
//!
//! One code path, [`run`], serves the background scheduler, the admin page,
//! the JSON endpoint and the CLI; [`PreallocRequest::parse`] validates what
//! people type for the last three.

pub mod lease;
pub mod runs;
pub mod scheduler;

use bson::{doc, Document};
use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use std::time::Duration;

use crate::domain::{DomainName, Page, Resolution};
use crate::storage::prealloc::insert_buckets;
pub use crate::storage::prealloc::{active_pages, indexes, InsertCounts};
use crate::storage::sites::Site;
use crate::storage::{zero_filled, Store};
pub use runs::PreallocRun;

pub const MAX_HOURS: u32 = 48;
/// Documents per insert command: bounded so a run never holds the server
/// (or the memory of this process) for long.
pub const INSERT_BATCH: usize = 1000;
/// Insert commands in flight at once: 100,000 active pages are 6.1 million
/// documents an hour, which one command at a time could not insert within
/// a 10-minute lead; a few at once keep the server busy without hogging it.
pub const CONCURRENT_BATCHES: usize = 4;
/// Views in the current hour that make a page worth preallocating: about
/// one a minute. WiredTiger gains nothing from zero-filled documents
/// (measured 0.91–1.00× in docs/benchmarks.md), so preallocating costs 61
/// documents an hour per page and pays off only where most of its minute
/// buckets would be created anyway.
pub const DEFAULT_THRESHOLD: i64 = 60;

/// Which pages a run covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every page whose current-hour views reach the threshold.
    AllActive,
    /// The active pages of one site.
    Site(DomainName),
    /// One page, active or not (an admin asked for it by name).
    Page(Page),
}

impl Scope {
    pub fn describe(&self) -> String {
        match self {
            Scope::AllActive => "all active pages".into(),
            Scope::Site(d) => format!("active pages of {d}"),
            Scope::Page(p) => format!("page {p}"),
        }
    }
}

/// Who started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Schedule,
    Admin,
    Api,
    Cli,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Admin => "admin page",
            Trigger::Api => "api",
            Trigger::Cli => "cli",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreallocRequest {
    pub scope: Scope,
    /// The first hour to preallocate (aligned to the hour).
    pub from: DateTime<Utc>,
    pub hours: u32,
    /// Views in the current hour that make a page active.
    pub threshold: i64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreallocError {
    #[error("The number of hours must be a whole number from 1 to {MAX_HOURS}.")]
    Hours,
    #[error("The start hour must look like 2026-11-22T10:00 (UTC, on the hour).")]
    Hour,
    #[error("The start hour must be between 24 hours ago and 30 days ahead.")]
    HourOutOfRange,
    #[error("No site has the domain {0}.")]
    UnknownSite(String),
    #[error("A page is written domain/path, e.g. example.com/blog/hello, of a known site.")]
    Page,
    #[error(
        "Choose one scope: all active pages, one site, or one page (and fill in only that one)."
    )]
    Scope,
}

/// What a person asks for, from the admin form, the JSON endpoint or the
/// CLI: every field optional text, validated by [`PreallocForm::validate`].
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct PreallocForm {
    /// `all`, `site` or `page`; absent: inferred from `site`/`page`.
    pub scope: Option<String>,
    /// A site's domain.
    pub site: Option<String>,
    /// `domain/path`.
    pub page: Option<String>,
    /// The first hour, `YYYY-MM-DDTHH:00` UTC; absent: the next hour.
    pub from: Option<String>,
    /// 1 to 48; absent: 1. Text, so a form's "" and a JSON number both work.
    #[serde(default, deserialize_with = "text_or_number")]
    pub hours: Option<String>,
}

fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::Deserialize;
    Ok(match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    })
}

impl PreallocError {
    /// The admin form's field the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            PreallocError::Hours => "hours",
            PreallocError::Hour | PreallocError::HourOutOfRange => "from",
            PreallocError::UnknownSite(_) => "site",
            PreallocError::Page => "page",
            PreallocError::Scope => "scope",
        }
    }
}

impl PreallocForm {
    pub fn validate(
        &self,
        threshold: i64,
        sites: &[std::sync::Arc<Site>],
        now: DateTime<Utc>,
    ) -> Result<PreallocRequest, PreallocError> {
        fn given(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let (site, page) = (given(&self.site), given(&self.page));
        let kind = match (given(&self.scope), site, page) {
            (Some(kind), _, _) => kind,
            (None, None, None) => "all",
            (None, Some(_), None) => "site",
            (None, None, Some(_)) => "page",
            (None, Some(_), Some(_)) => return Err(PreallocError::Scope),
        };
        // The chosen kind decides which field is read (a form sends all).
        let scope = match kind {
            // A site or page given with "all" is a choice not made: refuse
            // rather than run for every active page.
            "all" if site.is_some() || page.is_some() => return Err(PreallocError::Scope),
            "all" => Scope::AllActive,
            "site" => {
                let raw = site.ok_or(PreallocError::Scope)?;
                let domain = DomainName::parse(raw)
                    .map_err(|_| PreallocError::UnknownSite(raw.to_owned()))?;
                if !sites.iter().any(|s| s.domain == domain) {
                    return Err(PreallocError::UnknownSite(domain.to_string()));
                }
                Scope::Site(domain)
            }
            "page" => {
                let page = Page::parse(page.ok_or(PreallocError::Scope)?)
                    .map_err(|_| PreallocError::Page)?;
                if !sites.iter().any(|s| s.domain.as_str() == page.domain()) {
                    return Err(PreallocError::Page);
                }
                Scope::Page(page)
            }
            _ => return Err(PreallocError::Scope),
        };
        let hours = match given(&self.hours) {
            None => 1,
            Some(raw) => raw
                .parse::<u32>()
                .ok()
                .filter(|h| (1..=MAX_HOURS).contains(h))
                .ok_or(PreallocError::Hours)?,
        };
        let from = match given(&self.from) {
            None => Resolution::Hour.floor(now) + TimeDelta::hours(1),
            Some(raw) => parse_hour(raw)?,
        };
        if from < now - TimeDelta::hours(24) || from > now + TimeDelta::days(30) {
            return Err(PreallocError::HourOutOfRange);
        }
        Ok(PreallocRequest {
            scope,
            from,
            hours,
            threshold,
        })
    }
}

impl PreallocRequest {
    /// The hours covered, in order.
    pub fn hour_starts(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        (0..i64::from(self.hours)).map(move |i| self.from + TimeDelta::hours(i))
    }
}

fn parse_hour(raw: &str) -> Result<DateTime<Utc>, PreallocError> {
    let raw = raw.trim_end_matches('Z');
    let t = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M")
        .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S"))
        .or_else(|_| NaiveDateTime::parse_from_str(&format!("{raw}:00"), "%Y-%m-%dT%H:%M"))
        .map_err(|_| PreallocError::Hour)?
        .and_utc();
    if Resolution::Hour.floor(t) != t {
        return Err(PreallocError::Hour);
    }
    Ok(t)
}

/// The zero-filled buckets of one page for one hour: 60 minutes, the hour,
/// and the day when the hour starts one.
pub fn documents_for(page: &str, hour: DateTime<Utc>) -> Vec<(Resolution, Document)> {
    let minute = |m| {
        (
            Resolution::Minute,
            zero_filled(Resolution::Minute, page, hour + TimeDelta::minutes(m)),
        )
    };
    let mut docs: Vec<(Resolution, Document)> = (0..60).map(minute).collect();
    docs.push((Resolution::Hour, zero_filled(Resolution::Hour, page, hour)));
    if Resolution::Day.floor(hour) == hour {
        docs.push((Resolution::Day, zero_filled(Resolution::Day, page, hour)));
    }
    docs
}

/// The documents of every page and hour, in batches of [`INSERT_BATCH`]
/// per collection, built lazily and sent [`CONCURRENT_BATCHES`] at a time.
/// A background run's record is updated with the counts as they grow (at
/// most twice a second).
async fn insert_all(
    store: &Store,
    pages: &[String],
    request: &PreallocRequest,
    mut progress: Option<&mut PreallocRun>,
) -> InsertCounts {
    use futures::StreamExt;
    let batches = Batches {
        docs: Box::new(pages.iter().flat_map(move |page| {
            request
                .hour_starts()
                .flat_map(move |hour| documents_for(page, hour))
        })),
        pending: Default::default(),
    };
    let mut counts = InsertCounts::default();
    let mut sent = futures::stream::iter(batches)
        .map(|(g, docs)| insert_buckets(store, g, docs))
        .buffer_unordered(CONCURRENT_BATCHES);
    let mut reported = std::time::Instant::now();
    while let Some(batch) = sent.next().await {
        counts.add(batch);
        if let Some(run) = progress.as_deref_mut() {
            if reported.elapsed() >= Duration::from_millis(500) {
                reported = std::time::Instant::now();
                run.inserted = counts.inserted;
                run.already_present = counts.already_present;
                if let Err(e) = runs::update(store, run).await {
                    tracing::warn!(error = %crate::telemetry::chain(&e), "preallocation progress not recorded");
                }
            }
        }
    }
    counts
}

/// Documents a run writes for `pages` pages: 61 per page-hour, and the day
/// bucket for each hour that starts a day.
fn documents_to_write(pages: usize, request: &PreallocRequest) -> u64 {
    let per_page: usize = request
        .hour_starts()
        .map(|h| {
            if Resolution::Day.floor(h) == h {
                62
            } else {
                61
            }
        })
        .sum();
    (pages * per_page) as u64
}

/// Starts a run in the background (the admin page and the JSON endpoint):
/// its record is written at once with status `running` and updated as it
/// goes, so the caller answers at once and the page shows the progress.
pub async fn start(
    store: &Store,
    request: PreallocRequest,
    trigger: Trigger,
    who: &str,
    now: DateTime<Utc>,
) -> Result<PreallocRun, mongodb::error::Error> {
    let mut record = PreallocRun::new(
        &request,
        trigger,
        who,
        now,
        0,
        InsertCounts::default(),
        Duration::ZERO,
    );
    record.status = runs::RUNNING.to_owned();
    runs::record(store, &record).await?;
    let store = store.clone();
    let started = record.clone();
    tokio::spawn(async move {
        let clock = std::time::Instant::now();
        let mut record = started;
        let pages = match select_pages(&store, &request, now).await {
            Ok(pages) => pages,
            Err(e) => {
                record.status = runs::FAILED.to_owned();
                record.errors = vec![format!(
                    "finding the active pages: {}",
                    crate::telemetry::chain(&e)
                )];
                finish(&store, &record).await;
                return;
            }
        };
        record.pages = pages.len() as u64;
        record.documents = documents_to_write(pages.len(), &request);
        let counts = insert_all(&store, &pages, &request, Some(&mut record)).await;
        let mut done = PreallocRun::new(
            &request,
            trigger,
            &record.who,
            now,
            pages.len(),
            counts,
            clock.elapsed(),
        );
        done.id = record.id;
        done.documents = record.documents;
        tracing::info!(
            scope = %request.scope.describe(), pages = done.pages, inserted = done.inserted,
            already_present = done.already_present, errors = done.errors.len(), "background preallocation run"
        );
        finish(&store, &done).await;
    });
    Ok(record)
}

async fn finish(store: &Store, record: &PreallocRun) {
    if let Err(e) = runs::update(store, record).await {
        tracing::error!(error = %crate::telemetry::chain(&e), "preallocation result not recorded");
    }
}

/// The pages a run covers: the active ones of its scope in the current
/// hour, or the one page named.
async fn select_pages(
    store: &Store,
    request: &PreallocRequest,
    now: DateTime<Utc>,
) -> Result<Vec<String>, mongodb::error::Error> {
    let current_hour = Resolution::Hour.floor(now);
    Ok(match &request.scope {
        Scope::AllActive => active_pages(store, None, current_hour, request.threshold).await?,
        Scope::Site(domain) => {
            active_pages(store, Some(domain), current_hour, request.threshold).await?
        }
        Scope::Page(page) => vec![page.as_str().to_owned()],
    })
}

/// Groups documents by collection into full batches, then the remainders.
struct Batches<'a> {
    docs: Box<dyn Iterator<Item = (Resolution, Document)> + Send + 'a>,
    pending: [Vec<Document>; 3],
}

impl Iterator for Batches<'_> {
    type Item = (Resolution, Vec<Document>);

    fn next(&mut self) -> Option<Self::Item> {
        for (g, d) in self.docs.by_ref() {
            let slot = g as usize;
            self.pending[slot].push(d);
            if self.pending[slot].len() >= INSERT_BATCH {
                return Some((g, std::mem::take(&mut self.pending[slot])));
            }
        }
        Resolution::ALL
            .into_iter()
            .find(|g| !self.pending[*g as usize].is_empty())
            .map(|g| (g, std::mem::take(&mut self.pending[g as usize])))
    }
}

/// Runs a preallocation and records it in `prealloc_runs`.
pub async fn run(
    store: &Store,
    request: &PreallocRequest,
    trigger: Trigger,
    who: &str,
    now: DateTime<Utc>,
) -> Result<PreallocRun, mongodb::error::Error> {
    let started = std::time::Instant::now();
    let pages = select_pages(store, request, now).await?;
    let counts = insert_all(store, &pages, request, None).await;
    let mut record = PreallocRun::new(
        request,
        trigger,
        who,
        now,
        pages.len(),
        counts,
        started.elapsed(),
    );
    record.documents = documents_to_write(pages.len(), request);
    runs::record(store, &record).await?;
    tracing::info!(
        scope = %request.scope.describe(), pages = record.pages, inserted = record.inserted,
        already_present = record.already_present, errors = record.errors.len(), "preallocation run"
    );
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::sync::Arc;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 1, 7).unwrap()
    }

    #[test]
    fn documents_go_out_in_full_batches_per_collection_then_the_rest() {
        // 20 pages × 2 hours from midnight: 2,400 minute buckets, 40 hour
        // buckets and 20 day buckets.
        let pages: Vec<String> = (0..20).map(|i| format!("b.test/{i}")).collect();
        let midnight = Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 0).unwrap();
        let batches = Batches {
            docs: Box::new(pages.iter().flat_map(|p| {
                (0..2).flat_map(move |h| documents_for(p, midnight + TimeDelta::hours(h)))
            })),
            pending: Default::default(),
        };
        let sizes: Vec<(Resolution, usize)> = batches.map(|(g, d)| (g, d.len())).collect();
        assert_eq!(
            sizes,
            vec![
                (Resolution::Minute, 1000),
                (Resolution::Minute, 1000),
                (Resolution::Minute, 400),
                (Resolution::Hour, 40),
                (Resolution::Day, 20),
            ]
        );
    }

    fn sites() -> Vec<Arc<Site>> {
        vec![Arc::new(Site {
            id: crate::domain::SiteId::new(),
            name: "x".into(),
            domain: DomainName::parse("example.com").unwrap(),
            aliases: vec![],
            owners: vec![],
            created_at: now(),
            time_zone: crate::domain::TimeZone::UTC,
            totals_complete: true,
            page_cap: crate::domain::PageCapSetting::Default,
            unconfirmed_hosts: vec![],
            goals: vec![],
        })]
    }

    fn parse(
        kind: Option<&str>,
        site: Option<&str>,
        page: Option<&str>,
        from: Option<&str>,
        hours: Option<&str>,
    ) -> Result<PreallocRequest, PreallocError> {
        let text = |v: Option<&str>| v.map(str::to_owned);
        let form = PreallocForm {
            scope: text(kind),
            site: text(site),
            page: text(page),
            from: text(from),
            hours: text(hours),
        };
        form.validate(1, &sites(), now())
    }

    #[test]
    fn hours_may_be_a_json_number_or_text() {
        let form: PreallocForm = serde_json::from_str(r#"{"scope": "all", "hours": 3}"#).unwrap();
        assert_eq!(form.validate(1, &sites(), now()).unwrap().hours, 3);
        let form: PreallocForm = serde_json::from_str(r#"{"hours": "49"}"#).unwrap();
        assert_eq!(form.validate(1, &sites(), now()), Err(PreallocError::Hours));
    }

    #[test]
    fn defaults_to_all_active_pages_for_the_next_hour() {
        let r = parse(None, None, None, None, None).unwrap();
        assert_eq!(r.scope, Scope::AllActive);
        assert_eq!(
            r.from,
            Utc.with_ymd_and_hms(2026, 11, 22, 11, 0, 0).unwrap()
        );
        assert_eq!(r.hours, 1);
    }

    #[test]
    fn scopes_are_inferred_or_chosen_and_checked() {
        assert_eq!(
            parse(None, Some("Example.com"), None, None, None)
                .unwrap()
                .scope,
            Scope::Site(DomainName::parse("example.com").unwrap())
        );
        assert_eq!(
            parse(Some("page"), None, Some("example.com/a"), None, None)
                .unwrap()
                .scope,
            Scope::Page(Page::parse("example.com/a").unwrap())
        );
        assert_eq!(
            parse(None, Some("other.org"), None, None, None),
            Err(PreallocError::UnknownSite("other.org".into()))
        );
        assert_eq!(
            parse(None, None, Some("other.org/a"), None, None),
            Err(PreallocError::Page)
        );
        assert_eq!(
            parse(None, None, Some("no-slash"), None, None),
            Err(PreallocError::Page)
        );
        assert_eq!(
            parse(Some("site"), None, None, None, None),
            Err(PreallocError::Scope)
        );
        assert_eq!(
            parse(Some("everything"), None, None, None, None),
            Err(PreallocError::Scope)
        );
        assert_eq!(
            parse(None, Some("example.com"), Some("example.com/a"), None, None),
            Err(PreallocError::Scope)
        );
    }

    #[test]
    fn hours_and_start_hour_are_bounded() {
        for bad in ["0", "49", "-1", "two", "1.5"] {
            assert_eq!(
                parse(None, None, None, None, Some(bad)),
                Err(PreallocError::Hours),
                "{bad}"
            );
        }
        assert_eq!(parse(None, None, None, None, Some("48")).unwrap().hours, 48);
        assert_eq!(
            parse(None, None, None, Some("2026-11-22T12:00"), None)
                .unwrap()
                .from,
            Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
        );
        assert_eq!(
            parse(None, None, None, Some("2026-11-22T12"), None)
                .unwrap()
                .from
                .format("%H")
                .to_string(),
            "12"
        );
        assert_eq!(
            parse(None, None, None, Some("2026-11-22T12:30"), None),
            Err(PreallocError::Hour)
        );
        assert_eq!(
            parse(None, None, None, Some("noon"), None),
            Err(PreallocError::Hour)
        );
        assert_eq!(
            parse(None, None, None, Some("2026-11-20T10:00"), None),
            Err(PreallocError::HourOutOfRange)
        );
        assert_eq!(
            parse(None, None, None, Some("2027-01-01T00:00"), None),
            Err(PreallocError::HourOutOfRange)
        );
    }

    #[test]
    fn an_hour_is_60_minutes_plus_the_hour_and_the_day_at_midnight() {
        let ten = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
        assert_eq!(documents_for("example.com/", ten).len(), 61);
        let midnight = Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 0).unwrap();
        let docs = documents_for("example.com/", midnight);
        assert_eq!(docs.len(), 62);
        assert_eq!(docs[61].0, Resolution::Day);
        assert_eq!(docs[61].1.get_document("hours").unwrap().len(), 24);
    }
}

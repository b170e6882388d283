//! Operational endpoints (`/healthz`, `/readyz`, `/metrics`) and the
//! write-behind snapshot the admin system page shows: one reading of the
//! journal and appliers, so the three never disagree.

use actix_web::{web, HttpResponse};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::fmt::thousands;

fn n(value: impl TryInto<i64>) -> String {
    thousands(&value.try_into().unwrap_or(i64::MAX))
}
use super::state::WebState;
use crate::ingest::pixel::Outcome;
use crate::metrics;
use crate::storage::progress::Stream;

/// The journal and write-behind at one moment.
pub struct WriteBehind {
    pub ack_mode: &'static str,
    pub lanes: usize,
    pub queue_depth: usize,
    pub queue_capacity: usize,
    pub queue_bytes: u64,
    pub queue_capacity_bytes: u64,
    pub journal_bytes: u64,
    pub journal_budget: u64,
    pub backlog: u64,
    /// Journaled hits whose sources are not yet applied.
    pub sources_backlog: u64,
    /// Journaled hits whose hour and day buckets are not yet applied.
    pub rollups_backlog: u64,
    /// Journaled hits not yet in the visit store.
    pub visits_backlog: u64,
    pub backlog_age_secs: f64,
    /// Per stream (`Stream::EVERY` order: views, sources, rollups,
    /// visits): how far behind it is, in seconds.
    pub lag_secs: [f64; 4],
    /// Per stream: the lag past which the reports that read it say they
    /// are behind (`ingest::freshness::fresh_within`).
    pub window_secs: [f64; 4],
    /// Per stream: statements applied and the time their transactions took.
    pub statements: [u64; 4],
    pub transaction_secs: [f64; 4],
    /// The highest one-minute applied rate since start during which the
    /// minutes stayed within the freshness bound (hits/s).
    pub sustained_rate: f64,
    pub committed: u64,
    pub applied: u64,
    pub replayed: u64,
    pub apply_rate: f64,
    pub batches: u64,
    pub largest_batch: u64,
    pub mean_batch_ms: f64,
    pub apply_failures: u64,
    pub consecutive_failures: u64,
    pub sources_consecutive_failures: u64,
    pub rollups_consecutive_failures: u64,
    pub visits_consecutive_failures: u64,
    pub group_commits: u64,
    pub mean_sync_ms: f64,
    pub torn_tails: u64,
    pub corrupt: Vec<String>,
    pub fast_hits_lost: u64,
}

impl WriteBehind {
    pub fn read(state: &WebState) -> Self {
        let journal = &state.journal;
        let js = journal.stats();
        let stats = &state.ingest.stats;
        let appender = journal.appender();
        Self {
            ack_mode: match appender.ack_mode() {
                crate::journal::AckMode::Durable => "durable",
                crate::journal::AckMode::Fast => "fast",
            },
            lanes: journal.lanes().len(),
            queue_depth: appender.depth(),
            queue_capacity: appender.capacity(),
            queue_bytes: appender.depth_bytes(),
            queue_capacity_bytes: appender.capacity_bytes(),
            journal_bytes: journal.bytes(),
            journal_budget: journal.budget(),
            backlog: js.backlog(),
            sources_backlog: js.sources_backlog(),
            rollups_backlog: js.rollups_backlog(),
            visits_backlog: js.visits_backlog(),
            backlog_age_secs: journal.backlog_age_secs(state.clock.now()),
            lag_secs: Stream::EVERY.map(|s| journal.lag_secs(s.index(), state.clock.now())),
            window_secs: Stream::EVERY
                .map(|s| crate::ingest::freshness::fresh_within(&state.apply, s).as_secs_f64()),
            statements: Stream::EVERY.map(|s| stats.statements[s.index()].load(Relaxed)),
            transaction_secs: Stream::EVERY
                .map(|s| stats.transaction_micros[s.index()].load(Relaxed) as f64 / 1e6),
            sustained_rate: stats.sustained_rate(),
            committed: js.committed_records.load(Relaxed),
            applied: js.applied_records.load(Relaxed),
            replayed: js.replayed_records.load(Relaxed),
            apply_rate: stats.apply_rate(),
            batches: stats.batches.load(Relaxed),
            largest_batch: stats.largest_batch.load(Relaxed),
            mean_batch_ms: stats.flush_seconds.mean() * 1000.0,
            apply_failures: stats.flush_failures.load(Relaxed),
            consecutive_failures: stats.consecutive_failures.load(Relaxed),
            sources_consecutive_failures: stats.sources_consecutive_failures.load(Relaxed),
            rollups_consecutive_failures: stats.rollups_consecutive_failures.load(Relaxed),
            visits_consecutive_failures: stats.visits_consecutive_failures.load(Relaxed),
            group_commits: js.group_commits.load(Relaxed),
            mean_sync_ms: js.sync_seconds.mean() * 1000.0,
            torn_tails: js.torn_tails_truncated.load(Relaxed),
            corrupt: js.corrupt_segments(),
            fast_hits_lost: js.fast_hits_lost.load(Relaxed),
        }
    }

    /// Why the app should not take traffic from a load balancer, if it
    /// should not: the database keeps refusing batches (of views or of
    /// sources), or the backlog is older than the configured bound.
    pub fn degraded(&self, max_backlog_secs: u64) -> Option<String> {
        if self.consecutive_failures > 0 {
            return Some(format!(
                "write-behind failing ({} attempts in a row); {} hits wait in the journal",
                self.consecutive_failures, self.backlog
            ));
        }
        if self.sources_consecutive_failures > 0 {
            return Some(format!(
                "sources write-behind failing ({} attempts in a row); {} hits' sources wait in the journal",
                self.sources_consecutive_failures, self.sources_backlog
            ));
        }
        if self.rollups_consecutive_failures > 0 {
            return Some(format!(
                "hour and day write-behind failing ({} attempts in a row); {} hits wait in the journal",
                self.rollups_consecutive_failures, self.rollups_backlog
            ));
        }
        if self.visits_consecutive_failures > 0 {
            return Some(format!(
                "visit store write-behind failing ({} attempts in a row); {} hits wait in the journal",
                self.visits_consecutive_failures, self.visits_backlog
            ));
        }
        if self.backlog_age_secs > max_backlog_secs as f64 {
            return Some(format!(
                "backlog of {} hits, the oldest {:.0} s old",
                self.backlog, self.backlog_age_secs
            ));
        }
        None
    }

    /// Label and value pairs for the system page.
    pub fn figures(&self) -> Vec<(&'static str, String)> {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1 << 20) as f64);
        vec![
            ("Ack mode", self.ack_mode.to_owned()),
            ("Journal lanes", self.lanes.to_string()),
            (
                "Waiting for the journal",
                format!("{} of {}", n(self.queue_depth), n(self.queue_capacity)),
            ),
            (
                "Journal on disk",
                format!(
                    "{} of {}",
                    mib(self.journal_bytes),
                    mib(self.journal_budget)
                ),
            ),
            ("Group commits", n(self.group_commits)),
            ("Mean journal sync", format!("{:.2} ms", self.mean_sync_ms)),
            ("Backlog (hits not yet in the database)", n(self.backlog)),
            (
                "Sources backlog (hits whose sources wait for their batch)",
                n(self.sources_backlog),
            ),
            (
                "Hour and day backlog (hits whose hours and days wait for their batch)",
                n(self.rollups_backlog),
            ),
            (
                "Visit store backlog (hits whose visits wait for their batch)",
                n(self.visits_backlog),
            ),
            (
                "Lag: minutes / hours and days / sources / visits",
                format!(
                    "{:.1} s / {:.1} s / {:.1} s / {:.1} s",
                    self.lag_secs[0], self.lag_secs[2], self.lag_secs[1], self.lag_secs[3]
                ),
            ),
            (
                "Apply rate (last minute)",
                format!("{:.0} hits/s", self.apply_rate),
            ),
            (
                "Sustained rate since start (best minute with the minutes under 5 s behind)",
                format!("{:.0} hits/s", self.sustained_rate),
            ),
            (
                "Statements per applied hit",
                format!("{:.3}", self.statements_per_hit()),
            ),
            (
                "Hits journaled / applied",
                format!("{} / {}", n(self.committed), n(self.applied)),
            ),
            ("Replayed from journal files", n(self.replayed)),
            ("Batches applied", n(self.batches)),
            ("Largest batch", format!("{} hits", n(self.largest_batch))),
            ("Mean batch commit", format!("{:.1} ms", self.mean_batch_ms)),
            ("Failed apply attempts", n(self.apply_failures)),
            ("Torn tails cut at start", n(self.torn_tails)),
            ("Damaged segments", n(self.corrupt.len())),
            (
                "Fast-mode hits lost to journal errors",
                n(self.fast_hits_lost),
            ),
        ]
    }
}

impl WriteBehind {
    /// Statements of every stream per hit applied to the minutes.
    pub fn statements_per_hit(&self) -> f64 {
        self.statements.iter().sum::<u64>() as f64 / self.applied.max(1) as f64
    }
}

/// The process is up and serving HTTP.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// The process can do its job: the database answers and the write-behind
/// keeps up.
pub async fn readyz(state: web::Data<WebState>) -> HttpResponse {
    let unavailable = |why: &str| {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body(format!("{why}\n"))
    };
    match tokio::time::timeout(Duration::from_secs(2), state.store.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %crate::telemetry::chain(&e), "readiness: database error");
            return unavailable("database unavailable");
        }
        Err(_) => return unavailable("database not answering"),
    }
    if let Some(why) = WriteBehind::read(&state).degraded(state.ready_max_backlog_secs) {
        return unavailable(&why);
    }
    HttpResponse::Ok()
        .content_type("text/plain")
        .body("ready\n")
}

/// One metric with a sample per label set (`name{labels} value`).
fn labelled(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    for (labels, value) in samples {
        out.push_str(&format!("{name}{{{labels}}} {value}\n"));
    }
}

/// Prometheus text format.
pub async fn prometheus(state: web::Data<WebState>) -> HttpResponse {
    let stats = &state.ingest.stats;
    let js = state.journal.stats();
    let w = WriteBehind::read(&state);
    let mut out = String::new();
    out.push_str("# HELP tickertape_hits_total Pixel requests by outcome.\n# TYPE tickertape_hits_total counter\n");
    for o in Outcome::ALL {
        out.push_str(&format!(
            "tickertape_hits_total{{outcome=\"{}\"}} {}\n",
            o.reason(),
            stats.count(o)
        ));
    }
    let gauges: [(&str, &str, u64); 15] = [
        (
            "tickertape_queue_depth",
            "Hits waiting for the journal writers.",
            w.queue_depth as u64,
        ),
        (
            "tickertape_queue_capacity",
            "Hits that may wait for the journal writers.",
            w.queue_capacity as u64,
        ),
        (
            "tickertape_queue_bytes",
            "Bytes (as journaled) of the hits waiting for the journal writers.",
            w.queue_bytes,
        ),
        (
            "tickertape_queue_capacity_bytes",
            "Bytes (as journaled) the hits waiting for the journal writers may take.",
            w.queue_capacity_bytes,
        ),
        (
            "tickertape_journal_bytes",
            "Bytes of journal segment files on disk.",
            w.journal_bytes,
        ),
        (
            "tickertape_journal_budget_bytes",
            "Disk the journal may use.",
            w.journal_budget,
        ),
        (
            "tickertape_journal_backlog_hits",
            "Journaled hits not yet applied to the database.",
            w.backlog,
        ),
        (
            "tickertape_journal_sources_backlog_hits",
            "Journaled hits whose sources are not yet applied (they trail the views by up to the sources window).",
            w.sources_backlog,
        ),
        (
            "tickertape_journal_rollups_backlog_hits",
            "Journaled hits whose hour and day buckets are not yet applied (they trail the minutes by up to the rollups window).",
            w.rollups_backlog,
        ),
        (
            "tickertape_journal_visits_backlog_hits",
            "Journaled hits not yet in the visit store (they trail the views by up to the visits window).",
            w.visits_backlog,
        ),
        (
            "tickertape_visits_apply_consecutive_failures",
            "Failed visit store apply attempts since the last applied visits batch.",
            w.visits_consecutive_failures,
        ),
        (
            "tickertape_sources_apply_consecutive_failures",
            "Failed sources apply attempts since the last applied sources batch.",
            w.sources_consecutive_failures,
        ),
        (
            "tickertape_rollups_apply_consecutive_failures",
            "Failed hour and day apply attempts since the last applied rollups batch.",
            w.rollups_consecutive_failures,
        ),
        (
            "tickertape_journal_corrupt_segments",
            "Journal segments found with a damaged record.",
            w.corrupt.len() as u64,
        ),
        (
            "tickertape_apply_consecutive_failures",
            "Failed apply attempts since the last applied batch.",
            w.consecutive_failures,
        ),
    ];
    for (name, help, value) in gauges {
        metrics::gauge(&mut out, name, help, value);
    }
    out.push_str(&format!(
        "# HELP tickertape_journal_backlog_age_seconds Age of the oldest hit not yet applied.\n# TYPE tickertape_journal_backlog_age_seconds gauge\ntickertape_journal_backlog_age_seconds {:.3}\n",
        w.backlog_age_secs
    ));
    let by_stream = |values: [f64; 4]| {
        Stream::EVERY.map(|s| (format!("stream=\"{}\"", s.as_str()), values[s.index()]))
    };
    labelled(
        &mut out,
        "tickertape_write_behind_lag_seconds",
        "gauge",
        "Age of the oldest hit a write-behind stream has not applied (views: minute buckets; rollups: hour and day buckets; sources; visits: the visit store).",
        &by_stream(w.lag_secs),
    );
    labelled(
        &mut out,
        "tickertape_write_behind_window_seconds",
        "gauge",
        "The lag past which the reports that read a write-behind stream say how far behind they are (its gathering window plus the time a batch may take).",
        &by_stream(w.window_secs),
    );
    labelled(
        &mut out,
        "tickertape_apply_statements_total",
        "counter",
        "Statements applied to the database, by write-behind stream.",
        &by_stream(w.statements.map(|n| n as f64)),
    );
    let set_aside = |counters: &[std::sync::atomic::AtomicU64; 4]| {
        by_stream(counters.each_ref().map(|n| n.load(Relaxed) as f64))
    };
    labelled(
        &mut out,
        "tickertape_applier_statements_set_aside_total",
        "counter",
        "Statements the database refused for what their bucket holds (a counter past the largest NumberLong, or of another type), left out of their batch so the rest of the lane went on (each logged with its bucket), by write-behind stream.",
        &set_aside(&stats.set_aside_statements),
    );
    labelled(
        &mut out,
        "tickertape_applier_hits_set_aside_total",
        "counter",
        "Hits (views, and events for the sources) in the statements set aside, by write-behind stream.",
        &set_aside(&stats.set_aside_hits),
    );
    labelled(
        &mut out,
        "tickertape_apply_transaction_seconds_total",
        "counter",
        "Time spent in applied write-behind transactions, by stream.",
        &by_stream(w.transaction_secs),
    );
    let cap = &state.ingest.page_cap.stats;
    labelled(
        &mut out,
        "tickertape_page_cap_admitted_total",
        "counter",
        "New pages given buckets of their own, by how they were admitted.",
        &[
            (
                "how=\"first-sight\"".into(),
                cap.admitted_first_sight.load(Relaxed) as f64,
            ),
            (
                "how=\"repeat\"".into(),
                cap.admitted_repeat.load(Relaxed) as f64,
            ),
        ],
    );
    metrics::counter(
        &mut out,
        "tickertape_page_cap_overflow_views_total",
        "Views counted under a site's /(other) page because their page was not admitted.",
        cap.overflowed.load(Relaxed),
    );
    metrics::counter(
        &mut out,
        "tickertape_page_cap_instance_refusals_total",
        "New pages refused because the instance's hourly budget or its known-page bound was reached.",
        cap.instance_refusals.load(Relaxed),
    );
    metrics::gauge(
        &mut out,
        "tickertape_page_cap_known_pages",
        "Pages this instance remembers as admitted, over all sites (bounded by TICKERTAPE_MAX_KNOWN_PAGES).",
        cap.known_pages.load(Relaxed),
    );
    metrics::gauge(
        &mut out,
        "tickertape_page_cap_candidate_slots",
        "Slots remembering pages seen once (fixed: TICKERTAPE_PAGE_CANDIDATES).",
        state.ingest.page_cap.config().candidates as u64,
    );
    let visitors = &state.ingest.visitors;
    let (open, open_bytes) = visitors.open.size();
    metrics::gauge(
        &mut out,
        "tickertape_open_visits",
        "Visits the pixel keeps open (a visitor's last hit within 30 minutes; bounded by TICKERTAPE_OPEN_VISITS).",
        open as u64,
    );
    metrics::gauge(
        &mut out,
        "tickertape_open_visits_bytes",
        "Memory the open visits take, about (bounded by TICKERTAPE_OPEN_VISITS_MB).",
        open_bytes as u64,
    );
    metrics::counter(
        &mut out,
        "tickertape_open_visits_evicted_total",
        "Open visits forgotten to stay within the bounds (their next hit starts a new visit).",
        visitors.open.evicted.load(Relaxed),
    );
    metrics::gauge(
        &mut out,
        "tickertape_visitor_salts_provisional",
        "Days whose visitor salt is made here because the database could not be asked (visitors may count twice across instances meanwhile).",
        visitors.salts.provisional() as u64,
    );
    let background = state.store.background();
    let counters: [(&str, &str, u64); 12] = [
        ("tickertape_write_path_panics_total", "Panics caught in journal writers and appliers (each logged; the lane went on).", js.writer_panics.load(Relaxed)),
        ("tickertape_apply_resolved_by_progress_total", "Batches with an unknown commit outcome found applied by reading the progress document.", stats.resolved_by_progress.load(Relaxed)),
        ("tickertape_journal_committed_hits_total", "Hits synced to the journal (including those found on disk at start).", w.committed),
        ("tickertape_applied_hits_total", "Hits applied to the database.", w.applied),
        ("tickertape_journal_replayed_hits_total", "Hits applied from journal files rather than memory.", w.replayed),
        ("tickertape_journal_group_commits_total", "Journal appends, each with one fdatasync.", w.group_commits),
        ("tickertape_journal_sync_failures_total", "Journal appends that failed.", js.sync_failures.load(Relaxed)),
        ("tickertape_journal_torn_tails_total", "Torn journal tails cut off at start.", w.torn_tails),
        ("tickertape_apply_failures_total", "Failed attempts to apply a batch.", w.apply_failures),
        ("tickertape_fast_hits_lost_total", "Fast-mode hits answered but lost to a journal write error.", w.fast_hits_lost),
        ("tickertape_backfill_skipped_buckets_total", "Stored buckets the site totals and page summaries backfills left out for a date outside 1990 to the day after tomorrow (counted at each run that finds them; each logged).", background.skipped_buckets.load(Relaxed)),
        ("tickertape_backfill_failed_sites_total", "Sites whose site totals or page summaries backfill failed (each logged); the backfill went on with the next site.", background.failed_sites.load(Relaxed)),
    ];
    for (name, help, value) in counters {
        metrics::counter(&mut out, name, help, value);
    }
    js.commit_sizes.render(
        &mut out,
        "tickertape_journal_commit_size",
        "Hits per journal group commit.",
    );
    js.sync_seconds.render(
        &mut out,
        "tickertape_journal_sync_seconds",
        "Time to append and sync one group commit.",
    );
    stats.batch_sizes.render(
        &mut out,
        "tickertape_apply_batch_size",
        "Hits per applied batch.",
    );
    stats.flush_seconds.render(
        &mut out,
        "tickertape_apply_seconds",
        "Time to commit one batch to the database.",
    );
    crate::web::email::metrics(&mut out, &state);
    costly_reads(&mut out, &state);
    state.report_seconds.render(
        &mut out,
        "tickertape_report_seconds",
        "Server time of report pages and exports.",
    );
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(out)
}

/// The filtered reports' and funnels' runtime: what runs, what was refused
/// or stopped at a limit, what was stopped because its client left.
fn costly_reads(out: &mut String, state: &WebState) {
    use crate::metrics::{counter, gauge};
    use std::sync::atomic::Ordering::Relaxed;
    let s = state.costly.stats();
    gauge(
        out,
        "tickertape_report_reads_running",
        "Filtered reports and funnels being computed (until their work has stopped).",
        s.running.load(Relaxed),
    );
    for (name, help, value) in [
        (
            "tickertape_report_reads_started_total",
            "Filtered reports and funnels started.",
            &s.started,
        ),
        (
            "tickertape_report_reads_refused_busy_total",
            "Filtered reports and funnels refused at a concurrency limit (503).",
            &s.refused_busy,
        ),
        (
            "tickertape_report_reads_out_of_time_total",
            "Filtered reports and funnels stopped at their time budget (503).",
            &s.out_of_time,
        ),
        (
            "tickertape_report_reads_too_large_total",
            "Filtered reports and funnels stopped at their budget of bytes (503).",
            &s.too_large,
        ),
        (
            "tickertape_report_reads_abandoned_total",
            "Filtered reports and funnels stopped because their client left.",
            &s.abandoned,
        ),
    ] {
        counter(out, name, help, value.load(Relaxed));
    }
}

//! When a write-behind stream counts as behind, the one place that says
//! so: each stream's window for the reports, and how far behind the views
//! each stream is right now.
//!
//! A stream's lag is the age of the oldest hit it has not applied
//! (`Journal::lag_secs`). At light load that is up to the stream's own
//! gathering window (the breakdowns also wait for the rollups of the same
//! hits) plus the time a batch takes to be written: what a report promises
//! ("New views show here within about N seconds"). Past that, the reports
//! that read the stream say how far behind they are instead.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::applier::ApplyConfig;
use crate::journal::Journal;
use crate::storage::progress::Stream;

/// Beyond its window, how long a batch may take to be written (gathered,
/// sent, committed `w: majority`) before its stream counts as behind:
/// measured at light load, 0.5 to 1.4 s on the shared two-core machine.
pub const WRITE_MARGIN: Duration = Duration::from_secs(2);

/// How old a stream's oldest unapplied hit may be before the reports that
/// read it say they are behind: its window, plus the rollups' for the
/// breakdowns (a breakdowns batch waits for the rollups of its hits), plus
/// [`WRITE_MARGIN`].
pub fn fresh_within(config: &ApplyConfig, stream: Stream) -> Duration {
    let window = match stream {
        Stream::Views => config.window,
        Stream::Rollups => config.rollups_window,
        Stream::Sources => config.sources_window.max(config.rollups_window),
        Stream::Visits => config.visits_window,
    };
    window + WRITE_MARGIN
}

/// One stream past its window: which, and by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behind {
    pub stream: Stream,
    /// How far behind the views received, in whole seconds (rounded up).
    pub secs: u64,
}

/// Every stream's lag at one instant, with its window: read once per
/// request, so every figure of a report says the same.
#[derive(Debug, Clone, Copy)]
pub struct Lags {
    lag_secs: [f64; 4],
    within_secs: [f64; 4],
}

impl Lags {
    pub fn now(journal: &Journal, config: &ApplyConfig, now: DateTime<Utc>) -> Self {
        Lags {
            lag_secs: Stream::EVERY.map(|s| journal.lag_secs(s.index(), now)),
            within_secs: Stream::EVERY.map(|s| fresh_within(config, s).as_secs_f64()),
        }
    }

    /// The stream of `streams` farthest behind, when one is past its
    /// window; `None` when every one is within it.
    pub fn behind(&self, streams: &[Stream]) -> Option<Behind> {
        streams
            .iter()
            .filter(|s| self.lag_secs[s.index()] > self.within_secs[s.index()])
            .max_by(|a, b| self.lag_secs[a.index()].total_cmp(&self.lag_secs[b.index()]))
            .map(|&stream| Behind {
                stream,
                secs: self.lag_secs[stream.index()].ceil() as u64,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ApplyConfig {
        ApplyConfig {
            window: Duration::from_secs(1),
            max_hits: 1,
            rollups_window: Duration::from_secs(5),
            rollups_max_hits: 1,
            sources_window: Duration::from_secs(2),
            sources_max_hits: 1,
            visits_window: Duration::from_secs(5),
            visits_max_hits: 1,
            visit_store: true,
            max_buckets: 1,
        }
    }

    #[test]
    fn the_breakdowns_window_takes_the_rollups_they_wait_for() {
        let c = config();
        let secs = |s| fresh_within(&c, s).as_secs();
        assert_eq!(
            Stream::EVERY.map(secs),
            [3, 7, 7, 7],
            "views, sources, rollups, visits"
        );
    }

    #[test]
    fn behind_is_the_farthest_stream_past_its_window() {
        let lags = Lags {
            lag_secs: [2.5, 44.2, 6.0, 80.0],
            within_secs: [3.0, 7.0, 7.0, 7.0],
        };
        assert_eq!(lags.behind(&[Stream::Views, Stream::Rollups]), None);
        assert_eq!(
            lags.behind(&[Stream::Rollups, Stream::Sources]),
            Some(Behind {
                stream: Stream::Sources,
                secs: 45
            })
        );
        assert_eq!(
            lags.behind(&Stream::EVERY).map(|b| b.stream),
            Some(Stream::Visits)
        );
        assert_eq!(lags.behind(&[]), None);
    }
}

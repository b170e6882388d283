//! The whole UTC hours a breakdown or sources read covers, and whose: the
//! plan both `breakdowns` and `sources` read by (breakdowns are kept by the
//! hour, so a range inside an hour counts the whole hour).

use chrono::{DateTime, Utc};

use super::queries::Scope;
use crate::domain::Page;
use crate::storage::sites::Site;
use crate::storage::{Resolution, Subject};

/// What a sources report covers.
#[derive(Debug, Clone, Copy)]
pub enum SourceScope<'a> {
    Site(&'a Site),
    Page(&'a Page),
}

impl<'a> SourceScope<'a> {
    /// The page when one is named, else the whole site.
    pub fn of(site: &'a Site, page: Option<&'a Page>) -> Self {
        page.map_or(SourceScope::Site(site), SourceScope::Page)
    }

    pub(crate) fn subject(&self) -> Subject {
        match self {
            SourceScope::Site(_) => Subject::Site,
            SourceScope::Page(_) => Subject::Page,
        }
    }

    pub(crate) fn key(&self) -> &str {
        match self {
            SourceScope::Site(s) => s.domain.as_str(),
            SourceScope::Page(p) => p.as_str(),
        }
    }

    /// The same site or page for reading its views.
    pub fn views(&self) -> Scope<'a> {
        match *self {
            SourceScope::Site(s) => Scope::of_site(s),
            SourceScope::Page(p) => Scope::Page(p),
        }
    }
}

/// A stretch of time, `[start, end)`.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

/// The hours and days `[from, to)` is read from: whole UTC days in the
/// middle from day buckets, the rest from hour buckets (widened to whole
/// hours).
pub fn plan(from: DateTime<Utc>, to: DateTime<Utc>) -> (Vec<Span>, Option<Span>) {
    // An empty stretch (a running period's complete part before its first
    // whole hour) covers no hour, not the hour it starts in.
    if from >= to {
        return (Vec::new(), None);
    }
    let hour = Resolution::Hour;
    let day = Resolution::Day;
    let start = hour.floor(from);
    let end = {
        let f = hour.floor(to);
        if f == to {
            to
        } else {
            f + hour.step()
        }
    };
    let first_day = {
        let f = day.floor(start);
        if f == start {
            start
        } else {
            f + day.step()
        }
    };
    let last_day = day.floor(end);
    if first_day < last_day {
        let mut hours = Vec::new();
        if start < first_day {
            hours.push((start, first_day));
        }
        if last_day < end {
            hours.push((last_day, end));
        }
        (hours, Some((first_day, last_day)))
    } else {
        (vec![(start, end)], None)
    }
}

/// The whole hours `sources::top_sources` reads for `[from, to)`.
pub fn covered(from: DateTime<Utc>, to: DateTime<Utc>) -> Span {
    let (hours, days) = plan(from, to);
    let read = hours.iter().copied().chain(days);
    read.fold((to, from), |(f, t), (a, b)| (f.min(a), t.max(b)))
}

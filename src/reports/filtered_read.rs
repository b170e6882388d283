//! Reading the visit store for a filtered report or a funnel: which
//! visits (a UTC day's pack or its documents, a sample for ranges too
//! large to read in time), and each stored visit as a [`VisitRecord`].

use chrono::{DateTime, TimeDelta, Utc};

use super::costly::{self, ReadError};
use super::filtered::{self, Figures, FunnelFigures, VisitRecord};
use super::Period;
use crate::domain::filter::{Condition, FilterDimension, Filters, PageMatch};
use crate::domain::{Dimension, FunnelSteps};
use crate::storage::imported_properties::{self, ImportedRange};
use crate::storage::page_summaries::day_start;
use crate::storage::sites::Site;
use crate::storage::visit_days;
use crate::storage::visit_log::{self, Sample, StoredVisit, VisitQuery};
use crate::storage::visit_packs::{self, PackedDays, Want};
use crate::storage::Store;

/// Most visits one report reads whole: past it, a sample of the visitors
/// of about this many visits is read and the counts scaled up (the page
/// shows the rate). About a second of reading on the embedded database.
pub const MAX_VISITS_READ: u64 = 200_000;

/// What a stored visit says, as the read side uses it.
pub fn record(v: &StoredVisit) -> VisitRecord {
    v.record()
}

/// What the conditions of [`pushdown`] are for a day pack's visits
/// (`visit_packs::Want`): each implied by a filter's exact check, like the
/// documents' query, with the range and the sample.
pub fn want<'a>(
    filters: &'a Filters,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    sample: Option<Sample>,
) -> Want<'a> {
    let mut want = Want::all(from, to);
    want.registers = sample.map(Sample::registers);
    for f in filters.iter() {
        match (f.dimension(), f.condition()) {
            (FilterDimension::Entry, Condition::Page(PageMatch::Exact(p))) => {
                want.entry = Some(p.as_str())
            }
            (FilterDimension::Page, Condition::Page(PageMatch::Exact(p))) => {
                want.pages.push(p.as_str())
            }
            (FilterDimension::Event, Condition::Name(n)) => want.events.push(n.as_str()),
            (d, Condition::Name(n)) => match d.breakdown() {
                Some(b) if b != Dimension::Event => want.labels.push((b, stored_name(b, n))),
                _ => {}
            },
            _ => {}
        }
    }
    want
}

/// The name as the tracker stores it: a browser, a system or a device
/// class is matched ignoring letter case (`FilterDimension::ignores_case`),
/// so a pack, which compares names exactly, is asked for the vocabulary's
/// own spelling of it. Any other name is stored as sent.
fn stored_name(dimension: Dimension, name: &str) -> &str {
    use crate::classify::user_agent::{DeviceClass, BROWSERS, OPERATING_SYSTEMS};
    let devices = DeviceClass::ALL.map(DeviceClass::as_str);
    let vocabulary: &[&'static str] = match dimension {
        Dimension::Browser => BROWSERS,
        Dimension::Os => OPERATING_SYSTEMS,
        Dimension::Device => &devices,
        _ => &[],
    };
    vocabulary
        .iter()
        .find(|known| known.eq_ignore_ascii_case(name))
        .copied()
        .unwrap_or(name)
}

/// A visit decoded from a day pack costs about this fraction of one read
/// from its document (see docs/design/segments.md, "Day packs": measured
/// with a release build on this machine), so the sampling decision counts
/// packed visits at this share.
pub const PACKED_VISIT_COST: f64 = 1.0 / 20.0;

/// The day numbers `[first, end)` a range `[from, to)` touches.
fn days_of(from: DateTime<Utc>, to: DateTime<Utc>) -> (i64, i64) {
    let first = visit_days::day_of(from);
    let end = visit_days::day_of(to - TimeDelta::nanoseconds(1)) + 1;
    (first, end.max(first))
}

/// Consecutive runs of `days` (ascending), as `[first, end)`.
fn runs(days: &[i64]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &d in days {
        match out.last_mut() {
            Some((_, end)) if *end == d => *end = d + 1,
            _ => out.push((d, d + 1)),
        }
    }
    out
}

/// The visits of `site` that started in `[from, to)` and may pass
/// `filters`, and the share of visitors they are (1 unless sampled).
///
/// Closed days with a valid day pack (`storage::visit_packs`) are read
/// from it, the others from the stored visits (`visit_log`: parts and
/// visit documents, merged per visit); both give the same visits. Whether to sample is decided from the days' counters
/// (`storage::visit_days`), a packed visit counting for
/// [`PACKED_VISIT_COST`] of one read from its document; days without a
/// counter (visits from before the counters) are counted in the
/// documents. After answering, the closed days read from the documents
/// are queued to be packed for the next read.
pub async fn read_visits(
    store: &Store,
    site: &Site,
    filters: &Filters,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(Vec<VisitRecord>, f64), ReadError> {
    if from >= to {
        return Ok((Vec::new(), 1.0));
    }
    let domain = site.domain.as_str();
    let (first, end) = days_of(from, to);
    let counters = visit_days::counts(store, domain, first, end).await?;
    let packed = visit_packs::packed_days(store, domain, first, end, &counters).await?;
    let mut cost = 0.0;
    let mut uncounted = Vec::new();
    for day in first..end {
        if packed.contains(day) {
            cost += packed.visits(day) as f64 * PACKED_VISIT_COST;
        } else if let Some(c) = counters.get(&day) {
            cost += c.visits.max(0) as f64;
        } else {
            uncounted.push(day);
        }
    }
    // Counted as the counters count: every visit of the days, whatever
    // the filters (see `read_days` for why the query names no filter).
    for (a, b) in runs(&uncounted) {
        let query = VisitQuery::new(domain, from.max(day_start(a)), to.min(day_start(b)));
        cost += visit_log::count(store, &query).await? as f64;
    }
    let sample =
        (cost > MAX_VISITS_READ as f64).then(|| Sample::rate(MAX_VISITS_READ as f64 / cost));
    let (visits, from_documents) =
        read_days(store, domain, filters, from, to, &packed, sample).await?;
    if let Some(open) = store.pack_queue().first_open_day() {
        let closed: Vec<i64> = from_documents.into_iter().filter(|d| *d < open).collect();
        // Days without a counter (from before the counters) are worth
        // packing when they have visits.
        let seen: std::collections::HashSet<i64> =
            if closed.iter().all(|d| counters.contains_key(d)) {
                Default::default()
            } else {
                visits.iter().map(|v| visit_days::day_of(v.start)).collect()
            };
        for day in closed {
            if counters.contains_key(&day) || seen.contains(&day) {
                store.pack_queue().request(domain, day);
            }
        }
    }
    Ok((visits, sample.map_or(1.0, Sample::fraction)))
}

/// The visits of `[from, to)` that may pass `filters` (of `sample`'s
/// visitors), the `packed` days from their packs and the others from the
/// documents; and the days read from the documents.
pub async fn read_days(
    store: &Store,
    domain: &str,
    filters: &Filters,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    packed: &PackedDays,
    sample: Option<Sample>,
) -> Result<(Vec<VisitRecord>, Vec<i64>), ReadError> {
    let (first, end) = days_of(from, to);
    let want = want(filters, from, to, sample);
    let pack_days: Vec<i64> = packed.days().filter(|d| (first..end).contains(d)).collect();
    let read = visit_packs::read(store, domain, packed, &pack_days, &want).await?;
    let mut visits = read.visits;
    costly::charge(visits.iter().map(costly::visit_bytes).sum())?;
    let documents: Vec<i64> = (first..end)
        .filter(|d| !packed.contains(*d) || read.unread.contains(d))
        .collect();
    for (a, b) in runs(&documents) {
        // The query names the site and the range only, which the index
        // `{site, start}` answers; the filters are checked on the visits
        // read. With a filter's condition beside them (`{country: "DE"}`)
        // the local server took 1.9 s for a filtered 30-day dashboard that
        // takes 0.23 s without it (`BENCH_SEGMENTS_ONLY=1 cargo bench
        // --bench load`, docs/benchmarks.md).
        let mut query = VisitQuery::new(domain, from.max(day_start(a)), to.min(day_start(b)));
        query.sample = sample;
        // Held until the computation is done, bounded per request: charged
        // as the visits are merged (a visit's parts are all merged before
        // it is given out), then made records one by one, each visit freed
        // as its record is made.
        let records = visit_log::records_held(store, &query, true, |bytes| {
            costly::charge(bytes).map_err(ReadError::from)
        })
        .await?;
        visits.extend(records);
    }
    Ok((visits, documents))
}

/// A filtered report's figures over `period`, bucketed as it shows them.
pub async fn figures(
    store: &Store,
    site: &Site,
    filters: &Filters,
    period: &Period,
) -> Result<Figures, ReadError> {
    // The views in the period of visits that started before it, on its
    // first UTC day, count too (a visit never crosses a UTC day).
    let (visits, share) =
        read_visits(store, site, filters, utc_day_start(period.from), period.to).await?;
    let stopped = std::cell::Cell::new(None);
    let figures = filtered::compute_for_goals(
        filters,
        costly::checked(&visits, &stopped),
        (period.from, period.to),
        &period.points(),
        share,
        &site.goals,
    );
    match stopped.get() {
        Some(why) => Err(why.into()),
        None => Ok(figures),
    }
}

/// The start of `at`'s UTC day.
pub fn utc_day_start(at: DateTime<Utc>) -> DateTime<Utc> {
    at.date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc()
}

/// A funnel's figures over `period` for the visits passing `filters`.
pub async fn funnel(
    store: &Store,
    site: &Site,
    filters: &Filters,
    steps: &FunnelSteps,
    period: &Period,
) -> Result<FunnelFigures, ReadError> {
    Ok(
        funnels(store, site, filters, std::slice::from_ref(steps), period)
            .await?
            .remove(0),
    )
}

/// Several funnels' figures over `period` for the visits passing
/// `filters`, from one read of the visits.
pub async fn funnels(
    store: &Store,
    site: &Site,
    filters: &Filters,
    steps: &[FunnelSteps],
    period: &Period,
) -> Result<Vec<FunnelFigures>, ReadError> {
    // A funnel counts the visits that started in the period, whole.
    let (visits, share) = read_visits(store, site, filters, period.from, period.to).await?;
    let stopped = std::cell::Cell::new(None);
    let figures = steps
        .iter()
        .map(|s| filtered::funnel(filters, s, costly::checked(&visits, &stopped), share))
        .collect();
    match stopped.get() {
        Some(why) => Err(why.into()),
        None => Ok(figures),
    }
}

/// The custom properties of the visits passing `filters` over `period`
/// (`filtered::properties`), the values of `key` among them (`None`: of
/// the key most visits carry): read from the visits that may hold steps
/// in it (from `from`'s UTC day on), once, whether a key is chosen here
/// or not.
pub async fn properties(
    store: &Store,
    site: &Site,
    filters: &Filters,
    key: Option<&str>,
    period: &Period,
) -> Result<filtered::PropertyFigures, ReadError> {
    let (mut visits, share) =
        read_visits(store, site, filters, utc_day_start(period.from), period.to).await?;
    let range = (period.from, period.to);
    // Imported days keep no visits, so no filter can apply to them: they
    // are counted without filters only (`imported_properties`). Then the
    // days an import replaced (`--overlap replace`) are its, as in every
    // unfiltered figure: the visits tracked on them are left out.
    let imported = if filters.is_empty() {
        let replaced = replaced_spans(store, site).await?;
        visits.retain(|v| !replaced.iter().any(|(a, b)| v.start >= *a && v.start < *b));
        imported_properties::read(store, site.domain.as_str(), range, |bytes| {
            costly::charge(bytes).map_err(ReadError::from)
        })
        .await?
    } else {
        ImportedRange::default()
    };
    let stopped = std::cell::Cell::new(None);
    let mut figures = filtered::properties(
        filters,
        key,
        costly::checked(&visits, &stopped),
        range,
        share,
    );
    if key.is_none() {
        // The most common key's values, from the visits already held.
        if let Some(top) = figures.top_key_with(&imported) {
            figures = filtered::properties(
                filters,
                Some(&top),
                costly::checked(&visits, &stopped),
                range,
                share,
            );
        }
    }
    match stopped.get() {
        Some(why) => Err(why.into()),
        None => Ok(figures.with_imported(&imported)),
    }
}

/// The views of the pages `filters` count, per `step` from `from` to
/// `to` (scaled up by the share read), from the visits that may hold
/// them: those that started on `from`'s UTC day or later (a visit never
/// crosses a UTC day); and the share read (1: all), so the report can say
/// its counts are estimates.
pub async fn views_by_step(
    store: &Store,
    site: &Site,
    filters: &Filters,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    step: TimeDelta,
) -> Result<(Vec<i64>, f64), ReadError> {
    let day = utc_day_start(from);
    let (visits, share) = read_visits(store, site, filters, day, to).await?;
    let n = ((to - from).num_seconds() / step.num_seconds()).max(0) as usize;
    let mut counts = vec![0i64; n];
    let stopped = std::cell::Cell::new(None);
    for v in costly::checked(&visits, &stopped).filter(|v| filtered::admits(filters, v)) {
        for s in &v.steps {
            let filtered::Step::View { offset, path } = s else {
                continue;
            };
            if !filters.pages().all(|m| m.matches(path)) {
                continue;
            }
            let at = v.start.timestamp() + i64::from(*offset);
            if at >= from.timestamp() && at < to.timestamp() {
                counts[((at - from.timestamp()) / step.num_seconds()) as usize] += 1;
            }
        }
    }
    if let Some(why) = stopped.get() {
        return Err(why.into());
    }
    let counts = counts
        .into_iter()
        .map(|c| (c as f64 / share).round() as i64)
        .collect();
    Ok((counts, share))
}

/// What a filtered report says of imported figures, when the site has any:
/// imports bring days' or hours' totals, not visits, so no filter can
/// apply to them and they are left out.
pub async fn imported_note(
    store: &Store,
    site: &Site,
) -> Result<Option<String>, mongodb::error::Error> {
    let imports = crate::storage::imports::list(store, Some(&site.id.to_string())).await?;
    Ok((!imports.is_empty()).then(|| {
        "Imported figures are left out: an import brings totals, not visits, so no filter applies to them. Filtered figures count the visits recorded here.".to_owned()
    }))
}

/// The spans `--overlap replace` imports of `site` cleared of its live
/// figures to put theirs there.
async fn replaced_spans(
    store: &Store,
    site: &Site,
) -> Result<Vec<(DateTime<Utc>, DateTime<Utc>)>, mongodb::error::Error> {
    Ok(
        crate::storage::imports::list(store, Some(&site.id.to_string()))
            .await?
            .into_iter()
            .filter(|r| r.cleared)
            .flat_map(|r| r.replaced.into_iter().map(|d| (d.from, d.to)))
            .collect(),
    )
}

/// What a report read from the visit store says of the site's imports:
/// that they are counted, for Properties figures that count them
/// ([`filtered::PropertyFigures::with_imported`]), else
/// [`imported_note`].
pub async fn visit_store_imported_note(
    store: &Store,
    site: &Site,
    counted: bool,
) -> Result<Option<String>, mongodb::error::Error> {
    if counted {
        return Ok(Some(IMPORTED_PROPERTIES_COUNTED.to_owned()));
    }
    imported_note(store, site).await
}

/// What the Properties report says when imported days are counted in.
const IMPORTED_PROPERTIES_COUNTED: &str = "Imported days are counted with what their exports keep of properties: the link URLs (url) and paths (path) of Plausible's custom events, each with its events and its visitors as visits; a share is of every visit, imported days' included. Imports keep no views, and no other property.";

/// "1 in 12" for a share of visitors read; `None` when all were read.
pub fn sample_words(share: f64) -> Option<String> {
    (share < 1.0).then(|| {
        format!(
            "Sampled: the visits of about {} of visitors (1 in {:.0}) were read and the counts scaled up, as this range has too many visits to read in time.",
            super::numbers::percent(share, 1),
            1.0 / share
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::filtered::Step;

    #[test]
    fn a_stored_visit_reads_as_a_record_in_step_order() {
        let v = StoredVisit {
            id: 1,
            site: "a.com".into(),
            start: bson::DateTime::from_millis(0),
            entry: Some("/".into()),
            source: Some("google.com".into()),
            medium: None,
            campaign: None,
            browser: None,
            os: None,
            device: None,
            country: Some("DE".into()),
            reg: Some(3),
            rank: Some(2),
            views: 2,
            duration: 40,
            steps: vec![
                visit_log::Step {
                    n: 2,
                    t: 40,
                    p: "/b".into(),
                    e: None,
                    pr: Vec::new(),
                    rv: None,
                },
                visit_log::Step {
                    n: 1,
                    t: 40,
                    p: "/".into(),
                    e: Some("Go".into()),
                    pr: Vec::new(),
                    rv: None,
                },
                visit_log::Step {
                    n: 0,
                    t: 0,
                    p: "/".into(),
                    e: None,
                    pr: Vec::new(),
                    rv: None,
                },
            ],
        };
        let r = record(&v);
        assert_eq!(r.entry(), Some("/"));
        assert_eq!(r.exit(), Some("/b"));
        assert_eq!(&*r.labels[&Dimension::Source], "google.com");
        assert!(matches!(&r.steps[1], Step::Event { name, .. } if &**name == "Go"));
        assert_eq!((r.views, r.duration, r.register), (2, 40, Some((3, 2))));
    }

    #[test]
    fn a_pack_is_asked_the_conditions_the_documents_are() {
        let f = Filters::parse([
            "country:de",
            "entry:/a",
            "page:/b",
            "event:Go",
            "exit:/c",
            "page:/blog/*",
        ])
        .unwrap();
        let (from, to) = (
            DateTime::<Utc>::UNIX_EPOCH,
            DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(1),
        );
        let w = want(&f, from, to, Some(Sample::rate(0.5)));
        // A fixed vocabulary's name in any letter case asks a pack for
        // the stored spelling.
        let lower =
            Filters::parse(["browser:firefox", "device:MOBILE", "source:Google.com"]).unwrap();
        let mut labels = want(&lower, from, to, None).labels;
        labels.sort();
        let mut expected = vec![
            (Dimension::Source, "Google.com"),
            (Dimension::Browser, "Firefox"),
            (Dimension::Device, "mobile"),
        ];
        expected.sort();
        assert_eq!(labels, expected);
        assert_eq!(w.labels, [(Dimension::Country, "DE")]);
        assert_eq!(
            (w.entry, &w.pages[..], &w.events[..]),
            (Some("/a"), &["/b"][..], &["Go"][..])
        );
        assert_eq!(w.registers, Some(8192));
        assert_eq!((w.from, w.to), (from, to));
        assert!(want(&Filters::default(), from, to, None)
            .registers
            .is_none());
    }

    #[test]
    fn days_are_read_in_runs_and_a_range_touches_the_days_it_overlaps() {
        assert_eq!(runs(&[3, 4, 5, 8, 10, 11]), [(3, 6), (8, 9), (10, 12)]);
        assert!(runs(&[]).is_empty());
        let day = |d: i64| DateTime::<Utc>::UNIX_EPOCH + TimeDelta::days(d);
        assert_eq!(days_of(day(3), day(5)), (3, 5));
        assert_eq!(days_of(day(3), day(5) + TimeDelta::milliseconds(1)), (3, 6));
        assert_eq!(days_of(day(3) + TimeDelta::hours(23), day(4)), (3, 4));
    }

    #[test]
    fn the_sample_is_said_only_when_there_is_one() {
        assert_eq!(sample_words(1.0), None);
        assert!(sample_words(0.25).unwrap().contains("1 in 4"));
    }
}

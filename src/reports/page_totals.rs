//! Each page's figures over whole UTC days, or whole UTC hours, of a site
//! whose totals are complete, read from page summaries
//! (`storage::page_summaries`) so that the cost grows with the pages shown
//! and the log of the days, not with pages × days.
//!
//! A request reads the site's totals over the range (one small document
//! per day or hour and writer part), covers the range with aligned spans,
//! and reads those spans' summaries in one query. A summary whose total is
//! not the site's total over its span (a late view, or none made yet) is
//! made again from its halves, down to single days (or hours) read from
//! the page buckets, and stored for the next request. Days that have not
//! settled (today, mostly) are read as hours the same way, and only the
//! hours of the last few minutes from the page-hour buckets directly: they
//! still change with every batch, so a summary of them would be made again
//! each time.

use chrono::{DateTime, TimeDelta, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::storage::page_summaries::{self, Answer, Grain, PageCounts, Span, Summary};
use crate::storage::report_reads;
use crate::storage::sites::Site;
use crate::storage::{stored_dates, Store};

/// Units that ended less than this long ago are read from their buckets
/// and not summarised: the rollups of their last hits may still be on
/// their way (a few seconds under load).
pub(crate) const SETTLING: TimeDelta = TimeDelta::minutes(10);

/// Each page's figures over the whole UTC days `[first, last)` of `site`
/// (pages with none left out). Days past the day buckets' retention are
/// left out, as their page buckets are gone.
///
/// Visitors are summed over the days before [`settled_days_end`] only:
/// later days come from hour summaries, and hours do not add up to
/// visitors. A caller that shows visitors reads those days' for the pages
/// it shows.
pub async fn whole_days(
    store: &Store,
    site: &Site,
    range: (DateTime<Utc>, DateTime<Utc>),
) -> Result<Arc<Answer>, mongodb::error::Error> {
    answer(store, site, Grain::Day, range).await
}

/// Each page's views, entries and exits (no visitors) over the whole UTC
/// hours `[first, last)` of `site`: what a range's parts of days take
/// (the last 24 hours, a zone's day edges).
pub async fn whole_hours(
    store: &Store,
    site: &Site,
    range: (DateTime<Utc>, DateTime<Utc>),
) -> Result<Arc<Answer>, mongodb::error::Error> {
    answer(store, site, Grain::Hour, range).await
}

/// The whole UTC hours of `[from, to)` that [`whole_hours`] can give:
/// those whose page-hour buckets are kept. The rest of the range (the
/// minutes at either end, hours past the hour buckets' retention) is for
/// the caller to read from the buckets.
pub fn summarised_hours(
    store: &Store,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let hour = crate::storage::Resolution::Hour;
    let mut first = hour.ceil(from);
    if let Some(usable) = store.summary_retention().first_usable(Grain::Hour) {
        first = first.max(usable);
    }
    let last = hour.floor(to);
    (first < last).then_some((first, last))
}

/// A range of a site whose totals are complete as the page summaries
/// give it: the answers of its whole UTC days and of its edges' other
/// whole UTC hours, and the pieces left for the page buckets (where an
/// edge cuts an hour, and hours past the hour summaries' retention). The
/// pages reports all split a range so, and so find each other's answers
/// kept.
pub struct Summarised {
    pub answers: Vec<Arc<Answer>>,
    pub rest: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

pub async fn summarised(
    store: &Store,
    site: &Site,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Summarised, mongodb::error::Error> {
    let day = crate::storage::Resolution::Day;
    let (first_day, last_day) = (day.ceil(from), day.floor(to));
    let mut answers = Vec::new();
    let mut edges = vec![(from, to)];
    if first_day < last_day {
        answers.push(whole_days(store, site, (first_day, last_day)).await?);
        edges = vec![(from, first_day), (last_day, to)];
    }
    let mut rest = Vec::new();
    for (from, to) in edges.into_iter().filter(|(a, b)| a < b) {
        match summarised_hours(store, (from, to)) {
            Some(hours) => {
                answers.push(whole_hours(store, site, hours).await?);
                rest.extend([(from, hours.0), (hours.1, to)]);
            }
            None => rest.push((from, to)),
        }
    }
    rest.retain(|(a, b)| a < b);
    Ok(Summarised { answers, rest })
}

/// The end of the days, up to `last`, whose visitors [`whole_days`] gives.
pub fn settled_days_end(last: DateTime<Utc>) -> DateTime<Utc> {
    last.min(Grain::Day.resolution().floor(Utc::now() - SETTLING))
}

fn answer<'a>(
    store: &'a Store,
    site: &'a Site,
    grain: Grain,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
) -> BoxFuture<'a, Result<Arc<Answer>, mongodb::error::Error>> {
    async move {
        let first = match store.summary_retention().first_usable(grain) {
            Some(usable) => first.max(usable),
            None => first,
        };
        if first >= last {
            return Ok(Arc::default());
        }
        let totals = Totals::read(store, site, grain, (first, last)).await?;
        let key = (
            kept_key(site, grain),
            grain.number(first),
            grain.number(last),
            totals.fingerprint(),
        );
        if let Some(kept) = store.kept_answers().get(&key) {
            return Ok(kept);
        }
        let settled = grain.resolution().floor(Utc::now() - SETTLING);
        let cover_end = last.min(settled).max(first);
        let mut out = Answer::new();
        // Kept only when every part was read as of one state (the
        // totals'): a unit read while a batch committed serves this
        // request alone.
        let mut whole = summarise_with(store, site, &totals, (first, cover_end), &mut out).await?;
        let recent: Vec<i64> = (grain.number(cover_end)..grain.number(last))
            .filter(|d| totals.unit_has_figures(*d))
            .collect();
        if !recent.is_empty() {
            let expected = recent
                .iter()
                .filter_map(|d| totals.by_unit.get(d))
                .fold(0, |sum: i64, n| sum.saturating_add(*n));
            let hours = match grain {
                Grain::Day => Some(answer(store, site, Grain::Hour, (cover_end, last)).await?),
                Grain::Hour => None,
            };
            let hours_views = |h: &Answer| h.values().map(|f| f.views).fold(0, i64::saturating_add);
            match hours {
                // The hours agree with the days' totals: the same state.
                Some(h) if hours_views(&h) == expected => {
                    for (page, f) in h.iter() {
                        add_one(&mut out, page, f);
                    }
                }
                _ => {
                    let read =
                        report_reads::page_units(store, &site.domain, grain, &recent).await?;
                    let mut views = 0;
                    for (_, pages) in read {
                        let read = pages.iter().map(|(_, f)| f.views);
                        views = read.fold(views, i64::saturating_add);
                        for (page, mut f) in pages {
                            // As from hours: see `whole_days`.
                            f.visitors = 0;
                            add_one(&mut out, &page, &f);
                        }
                    }
                    whole &= views == expected;
                }
            }
        }
        let out = Arc::new(out);
        if whole {
            store.kept_answers().keep(key, out.clone());
        }
        Ok(out)
    }
    .boxed()
}

fn kept_key(site: &Site, grain: Grain) -> String {
    match grain {
        Grain::Day => site.id.to_string(),
        Grain::Hour => format!("{}/hours", site.id),
    }
}

/// Each page's figures over the whole units `[first, end)` of `site` from
/// their summaries, made (and stored) where missing or no longer right,
/// whether or not the units have ended: what [`whole_days`] does for
/// settled days, and what tests use to make summaries while hits arrive.
pub async fn summarise(
    store: &Store,
    site: &Site,
    grain: Grain,
    (first, end): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<String, PageCounts>, mongodb::error::Error> {
    let totals = Totals::read(store, site, grain, (first, end)).await?;
    let mut out = HashMap::new();
    summarise_with(store, site, &totals, (first, end), &mut out).await?;
    Ok(out)
}

/// Adds the summaries of `[first, end)` to `out`; whether every one was
/// exact for the totals (stored, or made from a consistent read).
async fn summarise_with(
    store: &Store,
    site: &Site,
    totals: &Totals,
    (first, end): (DateTime<Utc>, DateTime<Utc>),
    out: &mut HashMap<String, PageCounts>,
) -> Result<bool, mongodb::error::Error> {
    let grain = totals.grain;
    let builder = Builder {
        store,
        site,
        key: site.id.to_string(),
        totals,
    };
    let spans: Vec<Span> = Span::cover_in(grain, grain.number(first), grain.number(end))
        .into_iter()
        .filter(|s| totals.has_figures(*s))
        .collect();
    let stored = builder.stored(&spans).await?;
    let mut exact = true;
    for span in spans {
        match stored.get(&span) {
            Some(s) => add_all(out, &s.pages),
            None => {
                let made = builder.make(span).await?;
                exact &= made.exact;
                add_all(out, &made.summary.pages);
            }
        }
    }
    Ok(exact)
}

fn add_one(out: &mut HashMap<String, PageCounts>, page: &str, f: &PageCounts) {
    match out.get_mut(page) {
        Some(sum) => sum.add(f),
        None => {
            out.insert(page.to_owned(), *f);
        }
    }
}

fn add_all(out: &mut HashMap<String, PageCounts>, pages: &[(String, PageCounts)]) {
    for (page, f) in pages {
        add_one(out, page, f);
    }
}

/// The site's views per UTC day or hour (all writer parts added up).
struct Totals {
    grain: Grain,
    by_unit: BTreeMap<i64, i64>,
    /// Per unit, the deletions that took counts out of it: the totals
    /// alone could come back to a value they had with other pages.
    taken_back: BTreeMap<i64, i64>,
    /// Per unit with any, the site's engaged views, scroll sum and engaged
    /// milliseconds: engagements change pages without a view.
    engaged: BTreeMap<i64, [i64; 3]>,
    /// Per unit with any, the site's visits: a unit with visits and no
    /// views (an imported day without pages rows) still has pages with
    /// entries and exits.
    visits: BTreeMap<i64, i64>,
}

impl Totals {
    async fn read(
        store: &Store,
        site: &Site,
        grain: Grain,
        range: (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<Self, mongodb::error::Error> {
        let read =
            report_reads::site_totals_guarded(store, &site.domain, grain.resolution(), range)
                .await?;
        let visits =
            report_reads::site_visits(store, &site.domain, grain.resolution(), range).await?;
        Ok(Totals {
            visits: visits
                .iter()
                .map(|(at, n)| (grain.number(*at), *n))
                .collect(),
            grain,
            by_unit: read
                .iter()
                .map(|(at, u)| (grain.number(*at), u.views))
                .collect(),
            taken_back: read
                .iter()
                .filter(|(_, u)| u.taken_back != 0)
                .map(|(at, u)| (grain.number(*at), u.taken_back))
                .collect(),
            engaged: read
                .iter()
                .filter(|(_, u)| u.engaged != [0; 3])
                .map(|(at, u)| (grain.number(*at), u.engaged))
                .collect(),
        })
    }

    /// Tells the totals apart: equal fingerprints, equal totals (but for
    /// a 64-bit collision).
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.by_unit.hash(&mut h);
        self.taken_back.hash(&mut h);
        self.engaged.hash(&mut h);
        self.visits.hash(&mut h);
        h.finish()
    }

    /// Whether a span has anything of its pages to read: views, or
    /// visits (whose entries and exits are pages' figures).
    fn has_figures(&self, span: Span) -> bool {
        self.over(span) != 0
            || self
                .visits
                .range(span.first()..span.end())
                .any(|(_, n)| *n != 0)
    }

    /// Whether a unit has views or visits.
    fn unit_has_figures(&self, unit: i64) -> bool {
        self.by_unit.get(&unit).copied().unwrap_or(0) != 0
            || self.visits.get(&unit).copied().unwrap_or(0) != 0
    }

    /// The site buckets' engagement sums over a span's units.
    fn engaged_over(&self, span: Span) -> [i64; 3] {
        self.engaged
            .range(span.first()..span.end())
            .map(|(_, n)| *n)
            .fold([0; 3], page_summaries::add3)
    }

    /// Whether `summary`, made or stored, is right for these totals: the
    /// site's views, what was taken back and its engagements over the
    /// span are what it was made with (each moves whenever a page's
    /// figure in the span does, see `storage::page_summaries`).
    fn holds(&self, summary: &Summary) -> bool {
        let span = summary.span;
        summary.total == self.over(span)
            && summary.taken_back == self.taken_back_over(span)
            && summary.engaged == self.engaged_over(span)
    }

    /// The site buckets' `takenBack` over a span's units.
    fn taken_back_over(&self, span: Span) -> i64 {
        self.taken_back
            .range(span.first()..span.end())
            .map(|(_, n)| *n)
            .fold(0, i64::saturating_add)
    }

    /// The site's views over a span's units.
    fn over(&self, span: Span) -> i64 {
        self.by_unit
            .range(span.first()..span.end())
            .map(|(_, n)| *n)
            .fold(0, i64::saturating_add)
    }
}

/// A summary made for a request, and whether it is exact for its total
/// (only exact ones are stored, or merged into stored ones).
struct Made {
    summary: Summary,
    exact: bool,
}

struct Builder<'a> {
    store: &'a Store,
    site: &'a Site,
    key: String,
    totals: &'a Totals,
}

impl Builder<'_> {
    /// The stored summaries of `spans` that are right for the site's
    /// totals now.
    async fn stored(
        &self,
        spans: &[Span],
    ) -> Result<HashMap<Span, Summary>, mongodb::error::Error> {
        Ok(
            page_summaries::read(self.store, self.totals.grain, &self.key, spans)
                .await?
                .into_iter()
                .filter(|s| self.totals.holds(s))
                .map(|s| (s.span, s))
                .collect(),
        )
    }

    /// Makes the summary of `span` from its halves (stored ones where
    /// they are right, else made likewise), or of a unit from its
    /// buckets, and stores it when exact.
    fn make(&self, span: Span) -> BoxFuture<'_, Result<Made, mongodb::error::Error>> {
        async move {
            let made = match span.halves() {
                None => self.unit(span).await?,
                Some(halves) => {
                    let wanted: Vec<Span> = halves
                        .into_iter()
                        .filter(|h| self.totals.has_figures(*h))
                        .collect();
                    let mut stored = self.stored(&wanted).await?;
                    let mut parts = Vec::with_capacity(2);
                    for half in halves {
                        parts.push(if !self.totals.has_figures(half) {
                            Made {
                                summary: Summary {
                                    span: half,
                                    total: 0,
                                    taken_back: self.totals.taken_back_over(half),
                                    engaged: self.totals.engaged_over(half),
                                    pages: Vec::new(),
                                },
                                exact: true,
                            }
                        } else if let Some(s) = stored.remove(&half) {
                            Made {
                                summary: s,
                                exact: true,
                            }
                        } else {
                            self.make(half).await?
                        });
                    }
                    let (a, b) = (&parts[0], &parts[1]);
                    Made {
                        summary: Summary::merged(span, &a.summary, &b.summary),
                        exact: a.exact && b.exact,
                    }
                }
            };
            if made.exact && self.totals.holds(&made.summary) {
                let grain = self.totals.grain;
                page_summaries::write(self.store, grain, &self.site.id, &made.summary).await?;
            }
            Ok(made)
        }
        .boxed()
    }

    /// One unit's summary from its page buckets. It is exact when what
    /// the site's bucket says of that unit (views, taken back,
    /// engagements) is the same before and after the read, and the
    /// pages' views add up to its total: together they never come back
    /// to an earlier value (views only grow but for a deletion, which
    /// raises what was taken back; the engagement sums only grow), and
    /// every batch that changes a page's figure in the unit moves one of
    /// them in the same transaction, so the buckets were read as of one
    /// state, the one the summary carries.
    async fn unit(&self, span: Span) -> Result<Made, mongodb::error::Error> {
        let grain = self.totals.grain;
        let number = span.first();
        let before = report_reads::SiteUnit {
            views: self.totals.over(span),
            taken_back: self.totals.taken_back_over(span),
            engaged: self.totals.engaged_over(span),
        };
        let domain = &self.site.domain;
        let mut read = report_reads::page_units(self.store, domain, grain, &[number]).await?;
        let pages = read.remove(&number).unwrap_or_default();
        let start = grain.start(number);
        let end = start
            .checked_add_signed(TimeDelta::seconds(grain.seconds()))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let after =
            report_reads::site_totals_guarded(self.store, domain, grain.resolution(), (start, end))
                .await?
                .values()
                .fold(report_reads::SiteUnit::default(), |a, u| {
                    report_reads::SiteUnit {
                        views: a.views.saturating_add(u.views),
                        taken_back: a.taken_back.saturating_add(u.taken_back),
                        engaged: page_summaries::add3(a.engaged, u.engaged),
                    }
                });
        let views = pages
            .iter()
            .map(|(_, f)| f.views)
            .fold(0, i64::saturating_add);
        Ok(Made {
            exact: before == after && views == before.views,
            summary: Summary {
                span,
                total: views,
                // As the totals read before the buckets say: a credit
                // or engagement that came in between makes it differ
                // next time (and this one is not exact).
                taken_back: before.taken_back,
                engaged: before.engaged,
                pages,
            },
        })
    }
}

/// Makes and stores the summaries of every whole past day of `site` with
/// views, so that no report has to (`tickertape backfill-page-summaries`,
/// and `serve` in the background at start). Reads one span of
/// [`page_summaries::MAX_LEVEL`] at a time; idempotent, and safe while
/// hits arrive (a summary is only ever used while it is right). Returns
/// the days with views it covered.
///
/// Only days within [`stored_dates::window`] are visited: a site-day
/// bucket dated outside it (a hand edit, an old import's year +262142 or
/// −1) is counted, logged and left out, where walking to it would overflow
/// or take hundreds of thousands of spans.
pub async fn backfill(store: &Store, site: &Site) -> Result<u64, mongodb::error::Error> {
    let now = Utc::now();
    let days = crate::storage::Resolution::Day;
    let skipped = report_reads::site_days_outside_window(store, &site.domain, now).await?;
    if skipped > 0 {
        store.background().skipped(skipped);
        tracing::warn!(site = %site.domain, buckets = skipped,
            "site-day buckets dated outside 1990 to the day after tomorrow are left out of the page summaries");
    }
    let Some((first, last)) = report_reads::site_day_range(store, &site.domain, now).await? else {
        return Ok(0);
    };
    let first = match store.summary_retention().first_usable(Grain::Day) {
        Some(usable) => first.max(usable),
        None => first,
    };
    let settled = days.floor(now - SETTLING);
    let last = last
        .checked_add_signed(TimeDelta::days(1))
        .map_or(settled, |next| next.min(settled));
    let top = 1_i64 << page_summaries::MAX_LEVEL;
    let mut covered = 0;
    let mut from = Grain::Day.number(first);
    while from < Grain::Day.number(last) {
        // One top-level span at a time: its totals read once, and at most
        // one summary per level held.
        let end = ((from.div_euclid(top) + 1) * top).min(Grain::Day.number(last));
        let (a, b) = (Grain::Day.start(from), Grain::Day.start(end));
        let totals = Totals::read(store, site, Grain::Day, (a, b)).await?;
        summarise_with(store, site, &totals, (a, b), &mut HashMap::new()).await?;
        covered += totals.by_unit.values().filter(|n| **n != 0).count() as u64;
        from = end;
    }
    // The settled hours of the last two days: today's, and those a zone's
    // day edges or the last 24 hours take.
    let hour = crate::storage::Resolution::Hour;
    let (a, b) = (
        hour.floor(Utc::now() - TimeDelta::hours(48)),
        hour.floor(Utc::now() - SETTLING),
    );
    let totals = Totals::read(store, site, Grain::Hour, (a, b)).await?;
    summarise_with(store, site, &totals, (a, b), &mut HashMap::new()).await?;
    Ok(covered)
}

/// Backfills every site whose totals are complete. A site whose backfill
/// fails (an error, or a panic: a bug) is logged and counted
/// ([`stored_dates::BackgroundStats`]), and the next goes on: reports make
/// that site's summaries as they need them.
pub async fn backfill_all(store: &Store) -> anyhow::Result<Vec<(String, u64)>> {
    let mut done = Vec::new();
    for site in crate::storage::sites::list(store).await? {
        if site.totals_complete {
            match stored_dates::guarded(backfill(store, &site)).await {
                Ok(days) => done.push((site.domain.to_string(), days)),
                Err(e) => {
                    store.background().failed();
                    tracing::error!(site = %site.domain, error = %format!("{e:#}"),
                        "page summaries backfill failed for this site; going on with the next \
                         (reports make its summaries as they need them)");
                }
            }
        }
    }
    Ok(done)
}

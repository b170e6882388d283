//! One engine for every report. A [`ReportRequest`] carries the report's
//! scope (a site or one of its pages), its period and its filters; this
//! module decides where the figures come from — the buckets and page
//! summaries without filters, the visit store with them — and answers
//! with the same types either way: a panel's rows with their previous
//! values and denominators ([`Panel`]), the first line ([`Line`]), the
//! pages ([`Pages`]), the chart ([`Series`]), a minute's seconds
//! ([`Seconds`]), each with what it says of itself ([`Said`]: the filters,
//! the sample's share, imports). The API, the CSV files and the pages
//! only render these.
//!
//! One meaning whichever store is read: a page report's visits, bounces
//! and duration are the visits that **entered** on the page (with filters:
//! the filtered visits that entered there), its views and visitors those
//! of the page, its exits the visits that left from it.

use chrono::{DateTime, TimeDelta, Utc};

use super::breakdowns::NameTotals;
use super::compared::{self, Compared, ComparedShares, Stretches};
use super::costly::ReadError;
use super::engagement::{self, Engagement};
use super::filtered::Figures;
use super::filtered_imported::Imported;
use super::goals::{self, Goals};
use super::isolated::Reads;
use super::line::{self, LineFigures, Totals};
use super::metric::{self, ChartMetric};
use super::request::{with_page, ReportRequest};
use super::sources::{self as source_totals, SourceScope};
use super::visits::VisitFigures;
use super::{filtered_read, notes, page_search, queries, visits, Period, Point, Resolution};
use crate::domain::filter::{Filter, FilterDimension, Filters};
use crate::domain::Dimension;
use crate::domain::{Page, Retention};
use crate::storage::progress::Stream;
use crate::storage::sites::Site;
use tokio::sync::OnceCell;

/// What a report says of its own figures beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    /// The filters applied, as written in an address (none: unfiltered).
    pub filters: Vec<String>,
    /// The share of visitors whose visits were read, 0 to 1 (1: all of
    /// them); every count is scaled up by its inverse, so below 1 the
    /// figures are estimates.
    pub sampled: f64,
    /// With filters, on a site with imports: what was done with them.
    pub imported: Option<Imported>,
    /// The write-behind streams that write the store these figures were
    /// read from: how far behind they are is how far behind the figures
    /// are (`ingest::freshness`).
    pub streams: &'static [Stream],
}

/// What the buckets' figures (views, visitors, visits, the chart, the
/// pages) are written by: the minutes, and the hours and days.
pub const BUCKETS: &[Stream] = &[Stream::Views, Stream::Rollups];
/// What a panel of names from the breakdowns is written by: its names,
/// and the views they are a share of.
pub const BREAKDOWNS: &[Stream] = &[Stream::Rollups, Stream::Sources];
/// What every filtered figure and funnel is written by.
pub const VISIT_STORE: &[Stream] = &[Stream::Visits];
/// What an unfiltered Goals table with a goal on a property value is
/// written by: the breakdowns' events, and that goal's visits.
pub const BREAKDOWNS_AND_VISIT_STORE: &[Stream] =
    &[Stream::Rollups, Stream::Sources, Stream::Visits];

impl Said {
    /// The unfiltered figures: every hit counted, read from what
    /// `streams` write.
    fn whole(streams: &'static [Stream]) -> Self {
        Said {
            filters: Vec::new(),
            sampled: 1.0,
            imported: None,
            streams,
        }
    }

    /// Figures read from the visit store.
    fn filtered(filters: &Filters, sampled: f64, imported: Option<Imported>) -> Self {
        Said {
            filters: filters.iter().map(ToString::to_string).collect(),
            sampled,
            imported,
            streams: VISIT_STORE,
        }
    }

    /// What a report of nothing says (a page the site cannot have):
    /// every count 0, exactly, and nothing read that could be behind.
    pub fn nothing(filters: &Filters) -> Self {
        Said {
            streams: &[],
            ..Said::filtered(filters, 1.0, None)
        }
    }

    pub fn is_filtered(&self) -> bool {
        !self.filters.is_empty()
    }

    /// Whether the counts are scaled up from a sample.
    pub fn is_estimate(&self) -> bool {
        self.sampled < 1.0
    }

    /// The sentences a report shows beside its figures: the sample's, then
    /// the imports'.
    pub fn notes(&self) -> Vec<String> {
        filtered_read::sample_words(self.sampled)
            .into_iter()
            .chain(self.imported.as_ref().map(Imported::note))
            .collect()
    }
}

/// Where a request's figures come from.
enum Origin {
    /// The buckets, breakdowns and page summaries: no filter.
    Buckets,
    /// The visit store, with these filters (a page report's page among
    /// them); `None`: a page no filter can name, so nothing.
    Visits(Option<Filters>),
}

fn source(req: &ReportRequest<'_>) -> Origin {
    if req.filters.is_empty() {
        return Origin::Buckets;
    }
    match req.scope {
        SourceScope::Site(_) => Origin::Visits(Some(req.filters.clone())),
        SourceScope::Page(page) => Origin::Visits(with_page(req.filters, page.path()).ok()),
    }
}

/// The filtered figures of `period` (none for `None`), and of the period
/// before it when `before`.
async fn read_visits(
    reads: &Reads<'_>,
    site: &Site,
    filters: Option<&Filters>,
    period: &Period,
    before: bool,
) -> Result<(Figures, Option<Imported>, Figures), ReadError> {
    let previous = period.previous();
    let Some(f) = filters else {
        return Ok((
            Figures::none(&period.points()),
            None,
            Figures::none(&previous.points()),
        ));
    };
    if before {
        let ((now, imported), was) = reads.figures_and_before(site, f, period).await?;
        Ok((now, imported, was))
    } else {
        let (now, imported) = reads.figures(site, f, period).await?;
        Ok((now, imported, Figures::none(&previous.points())))
    }
}

/// One name's row of a panel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    /// Over the period.
    pub count: i64,
    /// Over the stretch its change compares (the complete hours of a
    /// running period; else the whole period).
    pub compared: i64,
    /// Over the same stretch of the period before.
    pub previous: i64,
}

/// A panel of names (a breakdown dimension, or the sources), whichever
/// store it was read from.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Most counted first (ties by name).
    pub rows: Vec<Row>,
    /// Counted under a name: the rows and `other`.
    pub total: i64,
    /// Counted under names beyond a bucket's cap, not named (the
    /// "(other)" row; never with filters, which read every name).
    pub other: Row,
    /// What the shares are of ([`compared::denominator`]).
    pub of: i64,
    /// Every view of `covered`.
    pub views: i64,
    /// The views with no name in the dimension (the sources' "(none)").
    pub unnamed: Row,
    /// The time read: whole UTC hours for the buckets, the period for the
    /// visit store.
    pub covered: (DateTime<Utc>, DateTime<Utc>),
    /// What the rows' changes compare.
    pub stretches: Stretches,
    pub said: Said,
}

impl Panel {
    /// No rows and no views (a page the site cannot have).
    pub fn nothing(period: &Period, now: DateTime<Utc>, said: Said) -> Self {
        let stretches = if said.is_filtered() {
            Panel::filtered_stretches(period)
        } else {
            Stretches::of(period, now)
        };
        Panel {
            rows: Vec::new(),
            total: 0,
            other: Row::default(),
            of: 0,
            views: 0,
            unnamed: Row::default(),
            covered: (period.from, period.to),
            stretches,
            said,
        }
    }

    /// The rows whose name contains `needle`, ignoring case (empty: all).
    pub fn matching(&self, needle: &str) -> Vec<&Row> {
        let needle = needle.to_lowercase();
        self.rows
            .iter()
            .filter(|r| needle.is_empty() || r.name.to_lowercase().contains(&needle))
            .collect()
    }

    /// The change of every filtered row compares the whole period with
    /// the whole period before: the visit store has no complete hours to
    /// widen to.
    fn filtered_stretches(period: &Period) -> Stretches {
        let before = period.previous();
        Stretches {
            current: (period.from, period.to),
            previous: (before.from, before.to),
            running: false,
        }
    }

    /// The sources panel from the buckets' sources and views.
    fn of_shares(read: &ComparedShares, req: &ReportRequest<'_>) -> Panel {
        let (current, compared, previous) = (&read.now, read.compared_now(), &read.before);
        let rows = current
            .sources
            .sources
            .iter()
            .map(|(s, views)| Row {
                name: s.to_string(),
                count: *views,
                compared: compared.sources.views_of(s),
                previous: previous.sources.views_of(s),
            })
            .collect();
        Panel {
            rows,
            total: current.sources.total,
            other: Row {
                name: String::new(),
                count: current.sources.other,
                compared: compared.sources.other,
                previous: previous.sources.other,
            },
            of: current.views,
            views: current.views,
            unnamed: Row {
                name: String::new(),
                count: current.without_source(),
                compared: compared.without_source(),
                previous: previous.without_source(),
            },
            covered: (current.sources.from, current.sources.to),
            stretches: Stretches::of(req.period, req.now),
            said: Said::whole(BREAKDOWNS),
        }
    }

    /// A dimension's panel from the buckets' breakdowns, `views` every
    /// view of the hours they cover.
    fn of_compared(d: Dimension, read: &Compared, views: i64, req: &ReportRequest<'_>) -> Panel {
        let sides = (
            &read.now.of(d),
            &read.compared_now().of(d),
            &read.compared_before().of(d),
        );
        Panel::of_totals(d, sides, views, read.stretches, req)
    }

    /// A dimension's panel from its names now, over the compared stretch
    /// and over the stretch before it.
    fn of_totals(
        d: Dimension,
        (now, compared, was): (&NameTotals, &NameTotals, &NameTotals),
        views: i64,
        stretches: Stretches,
        req: &ReportRequest<'_>,
    ) -> Panel {
        Panel {
            rows: now
                .names
                .iter()
                .map(|(name, count)| Row {
                    name: name.clone(),
                    count: *count,
                    compared: compared.of(name),
                    previous: was.of(name),
                })
                .collect(),
            total: now.total,
            other: Row {
                name: String::new(),
                count: now.other,
                compared: compared.other,
                previous: was.other,
            },
            of: compared::denominator(d, now, views),
            views,
            unnamed: Row {
                name: String::new(),
                count: views - now.total,
                compared: 0,
                previous: 0,
            },
            covered: source_totals::covered(req.period.from, req.period.to),
            stretches,
            said: Said::whole(BREAKDOWNS),
        }
    }

    fn of_figures(
        d: Dimension,
        now: &Figures,
        was: &Figures,
        period: &Period,
        said: Said,
    ) -> Panel {
        let rows: Vec<Row> = {
            let before = was.top(d);
            let previous = |name: &str| {
                before
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |(_, c)| *c)
            };
            now.top(d)
                .into_iter()
                .map(|(name, count)| Row {
                    name: name.to_owned(),
                    count,
                    compared: count,
                    previous: previous(name),
                })
                .collect()
        };
        let total: i64 = rows.iter().map(|r| r.count).sum();
        let total_before: i64 = was.top(d).iter().map(|(_, c)| c).sum();
        let totals = super::breakdowns::NameTotals {
            names: Vec::new(),
            other: 0,
            total,
        };
        Panel {
            of: compared::denominator(d, &totals, now.views),
            total,
            other: Row::default(),
            views: now.views,
            unnamed: Row {
                name: String::new(),
                count: now.views - total,
                compared: now.views - total,
                previous: was.views - total_before,
            },
            rows,
            covered: (period.from, period.to),
            stretches: Panel::filtered_stretches(period),
            said,
        }
    }
}

/// One dimension of the site or page over the period, with each row's
/// previous count.
pub async fn dimension(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
    d: Dimension,
) -> Result<Panel, ReadError> {
    match source(req) {
        Origin::Buckets => {
            let (now, compared, was, views) = compared::one_dimension(req, d).await?;
            let stretches = Stretches::of(req.period, req.now);
            Ok(Panel::of_totals(
                d,
                (&now, &compared, &was),
                views,
                stretches,
                req,
            ))
        }
        Origin::Visits(filters) => {
            let (now, imported, was) =
                read_visits(reads, site, filters.as_ref(), req.period, true).await?;
            let said = Said::filtered(req.filters, now.sampled, imported);
            Ok(Panel::of_figures(d, &now, &was, req.period, said))
        }
    }
}

/// The sources of the site or page over the period, with each row's
/// previous count and the views without a source.
pub async fn sources(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
) -> Result<Panel, ReadError> {
    match source(req) {
        Origin::Buckets => {
            let read = compared::read_source_shares(req).await?;
            Ok(Panel::of_shares(&read, req))
        }
        Origin::Visits(filters) => {
            let (now, imported, was) =
                read_visits(reads, site, filters.as_ref(), req.period, true).await?;
            let said = Said::filtered(req.filters, now.sampled, imported);
            let mut panel = Panel::of_figures(Dimension::Source, &now, &was, req.period, said);
            // A source's share is of every view, as without filters.
            panel.of = now.views;
            Ok(panel)
        }
    }
}

/// The first line of the dashboard or of a page report.
#[derive(Debug, Clone)]
pub struct Line {
    /// `None` where the stored data cannot say.
    pub visitors: Option<i64>,
    /// Visits started in the period (of a page: that entered there).
    pub visits: i64,
    pub views: i64,
    pub bounces: i64,
    /// Seconds between the hits of those visits, in all.
    pub duration_secs: i64,
    /// Of a page: the visits that left from it.
    pub exits: Option<i64>,
    /// The first UTC day with visitors (unfiltered only).
    pub counted_since: Option<DateTime<Utc>>,
    /// Of a page, unfiltered: its time on page.
    pub engagement: Option<Engagement>,
    pub said: Said,
}

impl Line {
    fn ratio(&self, n: i64) -> Option<f64> {
        (self.visits > 0).then(|| n as f64 / self.visits as f64)
    }

    pub fn views_per_visit(&self) -> Option<f64> {
        self.ratio(self.views)
    }

    pub fn bounce_rate(&self) -> Option<f64> {
        self.ratio(self.bounces)
    }

    pub fn average_duration(&self) -> Option<f64> {
        self.ratio(self.duration_secs)
    }

    /// Nothing: a page this site cannot have.
    pub fn nothing(said: Said) -> Self {
        Line {
            visitors: Some(0),
            visits: 0,
            views: 0,
            bounces: 0,
            duration_secs: 0,
            exits: Some(0),
            counted_since: None,
            engagement: None,
            said,
        }
    }
}

/// The first line over the period.
pub async fn line(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
) -> Result<Line, ReadError> {
    match source(req) {
        Origin::Buckets => {
            let scope = req.views();
            let time = page_time(req);
            let (views, figures, since, page_time) = tokio::try_join!(
                async {
                    Ok::<_, ReadError>(queries::read_series(req.store, &scope, req.period).await?)
                },
                async { Ok::<_, ReadError>(visits::figures(req.store, &scope, req.period).await?) },
                async { Ok::<_, ReadError>(visits::counted_since(req.store, &scope).await?) },
                time,
            )?;
            Ok(Line {
                visitors: figures.visitors,
                visits: figures.visits,
                views: queries::total(&views),
                bounces: figures.bounces(),
                duration_secs: figures.duration_secs,
                exits: figures.exits,
                counted_since: since,
                engagement: page_time,
                said: Said::whole(BUCKETS),
            })
        }
        Origin::Visits(filters) => {
            let SourceScope::Page(page) = req.scope else {
                let (f, imported, _) =
                    read_visits(reads, site, filters.as_ref(), req.period, false).await?;
                return Ok(Line {
                    visitors: Some(f.visitors()),
                    visits: f.visits,
                    views: f.views,
                    bounces: f.bounces,
                    duration_secs: f.duration_secs,
                    exits: None,
                    counted_since: None,
                    engagement: None,
                    said: Said::filtered(req.filters, f.sampled, imported),
                });
            };
            // A page's visits are those that entered there, as without
            // filters: its views from the visits that viewed it, its
            // visits from those that entered on it.
            let entered = Filter::new(FilterDimension::Entry, page.path())
                .ok()
                .map(|entry| req.filters.and_page(entry));
            let ((viewed, imported, _), (entering, _, _)) = tokio::try_join!(
                read_visits(reads, site, filters.as_ref(), req.period, false),
                read_visits(reads, site, entered.as_ref(), req.period, false),
            )?;
            Ok(Line {
                visitors: Some(viewed.visitors()),
                visits: entering.visits,
                views: viewed.views,
                bounces: entering.bounces,
                duration_secs: entering.duration_secs,
                exits: Some(viewed.pages.get(page.path()).map_or(0, |p| p.exits)),
                counted_since: None,
                engagement: None,
                said: Said::filtered(req.filters, viewed.sampled, imported),
            })
        }
    }
}

/// A page's time on page over the period, unfiltered; `None` for a site,
/// or under a filter (the visit store keeps no time on page).
pub async fn page_time(req: &ReportRequest<'_>) -> Result<Option<Engagement>, ReadError> {
    match (source(req), req.scope) {
        (Origin::Buckets, SourceScope::Page(page)) => Ok(Some(
            engagement::of_page(req.store, page, req.period, req.now).await?,
        )),
        _ => Ok(None),
    }
}

/// The first line of the period and of the whole period before it, which
/// a filtered report's changes compare it with.
pub async fn line_and_before(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
) -> Result<(Line, Line), ReadError> {
    let before = req.period.previous();
    let was = ReportRequest {
        period: &before,
        ..*req
    };
    tokio::try_join!(line(reads, site, req), line(reads, site, &was))
}

/// One shown bucket of the visit figures (`visits.csv`).
#[derive(Debug, Clone, Default)]
pub struct VisitPoint {
    pub at: DateTime<Utc>,
    /// `None` where the stored data cannot say.
    pub visitors: Option<i64>,
    /// Visits started in it (of a page: that entered there).
    pub visits: i64,
    pub views: i64,
    pub bounces: i64,
    pub duration_secs: i64,
}

/// Visitors, visits, views, bounces and duration per shown bucket.
pub async fn visit_series(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
) -> Result<(Vec<VisitPoint>, Said), ReadError> {
    match source(req) {
        Origin::Buckets => {
            let (store, scope, period) = (req.store, req.views(), req.period);
            let (views, visitors, started, non_bounces, duration) = tokio::try_join!(
                queries::series(store, &scope, period),
                visits::visitors_series(store, &scope, period),
                visits::counter_series(store, &scope, period, visits::VISITS),
                visits::counter_series(store, &scope, period, visits::NON_BOUNCES),
                visits::counter_series(store, &scope, period, visits::DURATION),
            )?;
            let points = views
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let n = |points: &[Point]| points.get(i).map_or(0, |p| p.views);
                    let visits = n(&started);
                    VisitPoint {
                        at: p.at,
                        visitors: visitors.as_deref().map(n),
                        visits,
                        views: p.views,
                        bounces: (visits - n(&non_bounces)).max(0),
                        duration_secs: n(&duration),
                    }
                })
                .collect();
            Ok((points, Said::whole(BUCKETS)))
        }
        Origin::Visits(filters) => {
            let (viewed, imported, _) =
                read_visits(reads, site, filters.as_ref(), req.period, false).await?;
            // A page's visits are those that entered there, as without
            // filters; its views and visitors those of the page.
            let entering = match req.scope {
                SourceScope::Site(_) => None,
                SourceScope::Page(page) => {
                    let entered = Filter::new(FilterDimension::Entry, page.path())
                        .ok()
                        .map(|entry| req.filters.and_page(entry));
                    Some(
                        read_visits(reads, site, entered.as_ref(), req.period, false)
                            .await?
                            .0,
                    )
                }
            };
            let visited = entering.as_ref().unwrap_or(&viewed);
            let points = viewed
                .series
                .iter()
                .zip(&visited.series)
                .map(|(v, e)| VisitPoint {
                    at: v.at,
                    visitors: Some(v.visitors()),
                    visits: e.visits,
                    views: v.views,
                    bounces: e.bounces,
                    duration_secs: e.duration_secs,
                })
                .collect();
            Ok((
                points,
                Said::filtered(req.filters, viewed.sampled, imported),
            ))
        }
    }
}

/// One page of the pages panel.
#[derive(Debug, Clone)]
pub struct PageRow {
    pub path: String,
    pub views: i64,
    /// `None` where the stored data cannot say.
    pub visitors: Option<i64>,
    /// Visits that entered on it.
    pub entries: i64,
    /// Visits that left from it.
    pub exits: i64,
    /// Its time on page; `None` under a filter (the visit store keeps
    /// no time on page).
    pub engagement: Option<Engagement>,
}

/// The site's pages over the period: a window of those matching a
/// search, most viewed first.
#[derive(Debug, Clone)]
pub struct Pages {
    /// Views of every page (the shares' denominator).
    pub total: i64,
    /// Pages matching the search, before the window.
    pub matching: usize,
    pub rows: Vec<PageRow>,
    pub said: Said,
}

/// The pages whose path contains `needle` (ignoring case), the window
/// `skip`..`skip + take` of them with their visit figures.
pub async fn pages(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
    needle: &str,
    window: (usize, usize),
) -> Result<Pages, ReadError> {
    match source(req) {
        Origin::Buckets => {
            let top = queries::top_pages(req.store, &req.views(), req.period).await?;
            pages_of_buckets(req.store, site, req, top, needle, window).await
        }
        Origin::Visits(filters) => {
            let (f, imported, _) =
                read_visits(reads, site, filters.as_ref(), req.period, false).await?;
            let said = Said::filtered(req.filters, f.sampled, imported);
            Ok(pages_of_figures(&f, needle, window, said))
        }
    }
}

/// [`pages`] from the site's pages by views (`top`).
async fn pages_of_buckets(
    store: &crate::storage::Store,
    site: &Site,
    req: &ReportRequest<'_>,
    top: Vec<(Page, i64)>,
    needle: &str,
    (skip, take): (usize, usize),
) -> Result<Pages, ReadError> {
    let scope = req.views();
    // The pages with entries or exits and no views follow, as in `pages.csv`.
    let (top, [entries, exits]) = visits::listed_pages(store, site, req.period, top).await?;
    let total: i64 = top.iter().map(|(_, v)| v).sum();
    let matching = page_search::matching(&top, needle);
    let shown: Vec<_> = matching.iter().skip(skip).take(take).copied().collect();
    // Time on page for every shown page at once: from the page summaries
    // that is the answers `listed_pages` just merged, found kept, whatever
    // the pages (it reads buckets a thousand pages at a time where it
    // must).
    let names: Vec<_> = shown.iter().map(|(page, _)| page).collect();
    let times = engagement::of_pages(store, &scope, &names, req.period, req.now).await?;
    // Visitors of every shown page at once. Entries and exits are every
    // page's already, from the summaries of days and hours `listed_pages`
    // read.
    let visitors = visits::page_visitors(store, &scope, &names, req.period, req.now).await?;
    let of = |counts: &std::collections::HashMap<String, i64>, page: &Page| {
        counts.get(page.as_str()).copied()
    };
    Ok(Pages {
        total,
        matching: matching.len(),
        rows: shown
            .into_iter()
            .zip(visitors)
            .zip(times)
            .map(|(((page, views), visitors), time)| PageRow {
                path: page.path().to_owned(),
                views: *views,
                visitors: Some(visitors),
                entries: of(&entries, page).unwrap_or(0),
                exits: of(&exits, page).unwrap_or(0),
                engagement: Some(time),
            })
            .collect(),
        said: Said::whole(BUCKETS),
    })
}

/// [`pages`] from the visit store's figures.
fn pages_of_figures(f: &Figures, needle: &str, (skip, take): (usize, usize), said: Said) -> Pages {
    let needle = needle.to_lowercase();
    let matching: Vec<_> = f
        .top_pages()
        .into_iter()
        .filter(|(path, _)| needle.is_empty() || path.to_lowercase().contains(&needle))
        .collect();
    Pages {
        total: f.views,
        matching: matching.len(),
        rows: matching
            .iter()
            .skip(skip)
            .take(take)
            .map(|(path, p)| PageRow {
                path: (*path).to_owned(),
                views: p.views,
                visitors: Some(p.visitors()),
                entries: p.entries,
                exits: p.exits,
                engagement: None,
            })
            .collect(),
        said,
    }
}

/// The chart: views per shown bucket of the period.
#[derive(Debug, Clone)]
pub struct Series {
    pub points: Vec<Point>,
    /// Days an import brought as daily figures, in a finer series.
    pub daily_only: Option<String>,
    pub said: Said,
}

impl Series {
    /// Nothing (a page the site cannot have): 0 in every shown bucket.
    pub fn nothing(period: &Period, said: Said) -> Self {
        Series {
            points: queries::rollup(period, &[]),
            daily_only: None,
            said,
        }
    }

    pub fn total(&self) -> i64 {
        queries::total(&self.points)
    }
}

/// The views of the site or page per shown bucket of the period.
pub async fn series(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
) -> Result<Series, ReadError> {
    match source(req) {
        Origin::Buckets => {
            let scope = req.views();
            let (points, daily_only) = tokio::try_join!(
                queries::series(req.store, &scope, req.period),
                notes::daily_only_note(req.store, site, req.period),
            )?;
            Ok(Series {
                points,
                daily_only,
                said: Said::whole(BUCKETS),
            })
        }
        Origin::Visits(filters) => {
            let (f, imported, _) =
                read_visits(reads, site, filters.as_ref(), req.period, false).await?;
            Ok(Series {
                points: f
                    .series
                    .iter()
                    .map(|p| Point {
                        at: p.at,
                        views: p.views,
                    })
                    .collect(),
                daily_only: None,
                said: Said::filtered(req.filters, f.sampled, imported),
            })
        }
    }
}

/// Views of a page per second of one minute, or per minute of an hour.
#[derive(Debug, Clone)]
pub struct Steps {
    pub points: Vec<Point>,
    pub said: Said,
}

impl Steps {
    /// Nothing (a page the site cannot have): 60 seconds of 0.
    pub fn seconds_of_nothing(minute: DateTime<Utc>, said: Said) -> Self {
        let minute = Resolution::Minute.floor(minute);
        Steps {
            points: steps_of(minute, TimeDelta::seconds(1), &[0; 60]),
            said,
        }
    }

    pub fn total(&self) -> i64 {
        queries::total(&self.points)
    }
}

/// A page's views per second of the minute starting at `minute` (the
/// request's scope must be a page; a site's scope has no seconds).
pub async fn seconds(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
    minute: DateTime<Utc>,
) -> Result<Steps, ReadError> {
    let minute = Resolution::Minute.floor(minute);
    match (source(req), req.scope) {
        (Origin::Buckets, SourceScope::Page(page)) => {
            let counts = queries::seconds_of(req.store, page, minute).await?;
            Ok(Steps {
                points: counts
                    .iter()
                    .enumerate()
                    .map(|(s, views)| Point {
                        at: minute + TimeDelta::seconds(s as i64),
                        views: *views,
                    })
                    .collect(),
                said: Said::whole(BUCKETS),
            })
        }
        (Origin::Buckets, SourceScope::Site(_)) => Ok(Steps {
            points: steps_of(minute, TimeDelta::seconds(1), &[0; 60]),
            said: Said::whole(BUCKETS),
        }),
        (Origin::Visits(filters), _) => {
            let end = minute + TimeDelta::minutes(1);
            by_step(
                reads,
                site,
                req,
                filters,
                (minute, end),
                TimeDelta::seconds(1),
            )
            .await
        }
    }
}

/// A page's realtime panels: its views per minute of the last hour (the
/// request's period) and per second of `this_minute`, read fresh from the
/// buckets without filters.
pub async fn realtime(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
    this_minute: DateTime<Utc>,
) -> Result<(Steps, Steps), ReadError> {
    let this_minute = Resolution::Minute.floor(this_minute);
    match (source(req), req.scope) {
        (Origin::Buckets, SourceScope::Page(page)) => {
            let scope = req.views();
            let (hour, seconds) = tokio::try_join!(
                queries::realtime_series(req.store, &scope, req.period),
                queries::realtime_seconds(req.store, page, this_minute),
            )?;
            Ok((
                Steps {
                    points: queries::rollup(req.period, &hour),
                    said: Said::whole(BUCKETS),
                },
                Steps {
                    points: steps_of(this_minute, TimeDelta::seconds(1), &seconds),
                    said: Said::whole(BUCKETS),
                },
            ))
        }
        (Origin::Buckets, SourceScope::Site(_)) => Ok((
            Steps {
                points: queries::rollup(req.period, &[]),
                said: Said::whole(BUCKETS),
            },
            Steps::seconds_of_nothing(this_minute, Said::whole(BUCKETS)),
        )),
        (Origin::Visits(filters), _) => {
            let hour = (req.period.from, req.period.to);
            let minute = (this_minute, this_minute + TimeDelta::minutes(1));
            let (hour, seconds) = tokio::try_join!(
                by_step(
                    reads,
                    site,
                    req,
                    filters.clone(),
                    hour,
                    TimeDelta::minutes(1)
                ),
                by_step(reads, site, req, filters, minute, TimeDelta::seconds(1)),
            )?;
            Ok((hour, seconds))
        }
    }
}

fn steps_of(from: DateTime<Utc>, step: TimeDelta, counts: &[i64]) -> Vec<Point> {
    counts
        .iter()
        .enumerate()
        .map(|(i, views)| Point {
            at: from + step * i as i32,
            views: *views,
        })
        .collect()
}

async fn by_step(
    reads: &Reads<'_>,
    site: &Site,
    req: &ReportRequest<'_>,
    filters: Option<Filters>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    step: TimeDelta,
) -> Result<Steps, ReadError> {
    let n = ((to - from).num_seconds() / step.num_seconds()).max(0) as usize;
    let (counts, sampled) = match &filters {
        Some(f) => reads.views_by_step(site, f, (from, to), step).await?,
        None => (vec![0; n], 1.0),
    };
    Ok(Steps {
        points: steps_of(from, step, &counts),
        said: Said::filtered(req.filters, sampled, None),
    })
}

/// The figures of the visit store a report reads: the period's, what was
/// done with imports, and the whole period before's.
type VisitRead = (Figures, Option<Imported>, Figures);

/// The buckets a whole report reads: the views of the period and of the
/// one before, and (of a site) its pages by views.
struct Overview {
    current: Vec<Point>,
    previous: Vec<Point>,
    top: Vec<(Page, i64)>,
}

/// One whole report (a dashboard, a page report, an email): every panel's
/// figures from one request, each store read at most once whatever the
/// panels ask — with filters, one read of the visit store feeds them all;
/// without, one pass over the breakdowns feeds the sources and every
/// dimension. The free functions of this module answer one panel each.
pub struct Report<'a> {
    reads: Reads<'a>,
    site: &'a Site,
    req: ReportRequest<'a>,
    retention: &'a Retention,
    visits: OnceCell<VisitRead>,
    overview: OnceCell<Overview>,
    compared: OnceCell<Compared>,
}

/// A report's first line and what its changes compare.
#[derive(Debug, Clone)]
pub struct LineCompared {
    pub figures: LineFigures,
    pub said: Said,
}

/// The chart's points for a metric, and why they are views where the
/// stored data cannot give what was asked.
#[derive(Debug, Clone)]
pub struct Chart {
    pub metric: ChartMetric,
    pub points: Vec<Point>,
    pub note: Option<&'static str>,
    pub said: Said,
}

fn totals_of(f: &Figures) -> Totals {
    Totals {
        views: f.views,
        visits: VisitFigures {
            visitors: Some(f.visitors()),
            visits: f.visits,
            non_bounces: f.non_bounces(),
            duration_secs: f.duration_secs,
            exits: None,
        },
    }
}

impl<'a> Report<'a> {
    pub fn new(
        reads: Reads<'a>,
        site: &'a Site,
        req: ReportRequest<'a>,
        retention: &'a Retention,
    ) -> Self {
        Report {
            reads,
            site,
            req,
            retention,
            visits: OnceCell::new(),
            overview: OnceCell::new(),
            compared: OnceCell::new(),
        }
    }

    pub fn request(&self) -> &ReportRequest<'a> {
        &self.req
    }

    pub fn is_filtered(&self) -> bool {
        !self.req.filters.is_empty()
    }

    async fn visit_read(&self, filters: Option<&Filters>) -> Result<&VisitRead, ReadError> {
        self.visits
            .get_or_try_init(|| read_visits(&self.reads, self.site, filters, self.req.period, true))
            .await
    }

    async fn overview(&self) -> Result<&Overview, ReadError> {
        self.overview
            .get_or_try_init(|| async {
                let (store, period) = (self.req.store, self.req.period);
                let scope = self.req.views();
                let before = period.previous();
                let ((current, top), previous) = match self.req.scope {
                    SourceScope::Site(_) => tokio::try_join!(
                        queries::site_overview(store, &scope, period),
                        queries::read_series(store, &scope, &before),
                    )?,
                    SourceScope::Page(_) => {
                        let (current, previous) = tokio::try_join!(
                            queries::read_series(store, &scope, period),
                            queries::read_series(store, &scope, &before),
                        )?;
                        ((current, Vec::new()), previous)
                    }
                };
                Ok::<_, ReadError>(Overview {
                    current,
                    previous,
                    top,
                })
            })
            .await
    }

    async fn compared(&self) -> Result<&Compared, ReadError> {
        self.compared
            .get_or_try_init(|| async {
                let events = goals::event_names(self.site);
                Ok::<_, ReadError>(compared::breakdowns(&self.req, &events).await?)
            })
            .await
    }

    fn said(&self, read: &VisitRead) -> Said {
        Said::filtered(self.req.filters, read.0.sampled, read.1.clone())
    }

    /// The views of the period (the headline's, the pages' denominator).
    pub async fn views(&self) -> Result<i64, ReadError> {
        Ok(match source(&self.req) {
            Origin::Buckets => queries::total(&self.overview().await?.current),
            Origin::Visits(f) => self.visit_read(f.as_ref()).await?.0.views,
        })
    }

    /// The first line and what its changes compare: without filters, the
    /// complete part of a running period with the same stretch before it
    /// ([`line::read`]); with filters, the whole period with the whole one
    /// before (the visit store has no complete hours to cut at).
    pub async fn line(&self) -> Result<LineCompared, ReadError> {
        match source(&self.req) {
            Origin::Buckets => {
                let scope = self.req.views();
                let (reads, overview) = tokio::try_join!(
                    async {
                        Ok::<_, ReadError>(
                            line::read(
                                self.req.store,
                                self.retention,
                                &scope,
                                self.req.period,
                                self.req.now,
                            )
                            .await?,
                        )
                    },
                    self.overview(),
                )?;
                Ok(LineCompared {
                    figures: reads.figures(&overview.current, &overview.previous),
                    said: Said::whole(BUCKETS),
                })
            }
            Origin::Visits(filters) => {
                let read = self.visit_read(filters.as_ref()).await?;
                let (mut now, mut was) = (totals_of(&read.0), totals_of(&read.2));
                if let SourceScope::Page(page) = self.req.scope {
                    // A page's visits are those that entered there, as
                    // without filters.
                    let entered = Filter::new(FilterDimension::Entry, page.path())
                        .ok()
                        .map(|entry| self.req.filters.and_page(entry));
                    let (is, _, before) = read_visits(
                        &self.reads,
                        self.site,
                        entered.as_ref(),
                        self.req.period,
                        true,
                    )
                    .await?;
                    for (t, entering, viewed) in
                        [(&mut now, &is, &read.0), (&mut was, &before, &read.2)]
                    {
                        t.visits = VisitFigures {
                            visitors: Some(viewed.visitors()),
                            visits: entering.visits,
                            non_bounces: entering.non_bounces(),
                            duration_secs: entering.duration_secs,
                            exits: Some(viewed.pages.get(page.path()).map_or(0, |p| p.exits)),
                        };
                    }
                }
                Ok(LineCompared {
                    figures: LineFigures {
                        shown: now,
                        compared: Some((now, was)),
                        since: Some(self.req.period.from),
                    },
                    said: self.said(read),
                })
            }
        }
    }

    /// The chart's points for `metric`, one per shown bucket.
    pub async fn chart(&self, asked: ChartMetric) -> Result<Chart, ReadError> {
        match source(&self.req) {
            Origin::Buckets => {
                let overview = self.overview().await?;
                let (metric, points, note) = metric::points(
                    self.req.store,
                    &self.req.views(),
                    self.req.period,
                    asked,
                    &overview.current,
                )
                .await?;
                Ok(Chart {
                    metric,
                    points,
                    note,
                    said: Said::whole(BUCKETS),
                })
            }
            Origin::Visits(filters) => {
                let read = self.visit_read(filters.as_ref()).await?;
                let points = read
                    .0
                    .series
                    .iter()
                    .map(|p| Point {
                        at: p.at,
                        views: match asked {
                            ChartMetric::Views => p.views,
                            ChartMetric::Visits => p.visits,
                            ChartMetric::Visitors => p.visitors(),
                        },
                    })
                    .collect();
                Ok(Chart {
                    metric: asked,
                    points,
                    note: None,
                    said: self.said(read),
                })
            }
        }
    }

    /// The pages whose path contains `needle` (ignoring case), the window
    /// `skip`..`skip + take` of them with their visit figures.
    pub async fn pages(&self, needle: &str, window: (usize, usize)) -> Result<Pages, ReadError> {
        match source(&self.req) {
            Origin::Buckets => {
                let top = self.overview().await?.top.clone();
                pages_of_buckets(self.req.store, self.site, &self.req, top, needle, window).await
            }
            Origin::Visits(filters) => {
                let read = self.visit_read(filters.as_ref()).await?;
                Ok(pages_of_figures(&read.0, needle, window, self.said(read)))
            }
        }
    }

    /// The views of one page of the site in the period.
    pub async fn views_of_page(&self, path: &str) -> Result<i64, ReadError> {
        Ok(match source(&self.req) {
            Origin::Buckets => self
                .overview()
                .await?
                .top
                .iter()
                .filter(|(page, _)| page.path() == path)
                .map(|(_, views)| views)
                .sum(),
            Origin::Visits(filters) => self
                .visit_read(filters.as_ref())
                .await?
                .0
                .pages
                .get(path)
                .map_or(0, |p| p.views),
        })
    }

    /// The sources panel and a panel per dimension of `dims`.
    pub async fn panels(&self, dims: &[Dimension]) -> Result<(Panel, Vec<Panel>), ReadError> {
        match source(&self.req) {
            Origin::Buckets => {
                let (read, overview) = tokio::try_join!(self.compared(), self.overview())?;
                let known = (
                    queries::total(&overview.current),
                    queries::total(&overview.previous),
                );
                let totals = compared::sources_of(read, self.req.period);
                let shares = compared::source_shares(&self.req, totals, Some(known)).await?;
                let sources = Panel::of_shares(&shares, &self.req);
                let views = shares.now.views;
                let panels = dims
                    .iter()
                    .map(|d| Panel::of_compared(*d, read, views, &self.req))
                    .collect();
                Ok((sources, panels))
            }
            Origin::Visits(filters) => {
                let read = self.visit_read(filters.as_ref()).await?;
                let (now, was) = (&read.0, &read.2);
                let period = self.req.period;
                let mut sources =
                    Panel::of_figures(Dimension::Source, now, was, period, self.said(read));
                // A source's share is of every view, as without filters.
                sources.of = now.views;
                let panels = dims
                    .iter()
                    .map(|d| Panel::of_figures(*d, now, was, period, self.said(read)))
                    .collect();
                Ok((sources, panels))
            }
        }
    }

    /// The site's goals.
    pub async fn goals(&self) -> Result<(Goals, Said), ReadError> {
        match source(&self.req) {
            Origin::Buckets => {
                let read = self.compared().await?;
                // A goal on an event with a property value is counted from
                // the visit store, whatever the filters (the buckets count
                // events by name alone).
                let visits = if goals::needs_visits(self.site) {
                    let ((now, _), was) = self
                        .reads
                        .figures_and_before(self.site, &Filters::default(), self.req.period)
                        .await?;
                    Some((now, was))
                } else {
                    None
                };
                let goals = goals::from_buckets(
                    self.req.store,
                    self.site,
                    self.req.period,
                    (&read.now, &read.before),
                    visits.as_ref().map(|(now, was)| (now, was)),
                )
                .await?;
                // Those goals' figures are the visit store's: a sample's
                // estimates, as fresh as the visits.
                let said = match &visits {
                    Some((now, _)) => Said {
                        sampled: now.sampled,
                        ..Said::whole(BREAKDOWNS_AND_VISIT_STORE)
                    },
                    None => Said::whole(BREAKDOWNS),
                };
                Ok((goals, said))
            }
            Origin::Visits(filters) => {
                let read = self.visit_read(filters.as_ref()).await?;
                Ok((
                    goals::from_visits(self.site, &read.0, &read.2),
                    self.said(read),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::collections::HashMap;

    fn period() -> Period {
        let from = Utc.with_ymd_and_hms(2026, 11, 22, 0, 0, 0).unwrap();
        Period::aligned_in(
            from,
            from + TimeDelta::hours(6),
            Resolution::Hour,
            chrono_tz::Tz::UTC,
        )
    }

    fn figures(views: i64, d: Dimension, rows: &[(&str, i64)]) -> Figures {
        let mut f = Figures::none(&period().points());
        f.views = views;
        f.breakdowns.insert(
            d,
            rows.iter()
                .map(|(n, c)| ((*n).to_owned(), *c))
                .collect::<HashMap<_, _>>(),
        );
        f
    }

    #[test]
    fn a_sample_says_its_figures_are_estimates_and_all_read_does_not() {
        let filters = Filters::parse(["country:DE"]).unwrap();
        let sampled = Said::filtered(&filters, 0.25, None);
        assert!(sampled.is_filtered() && sampled.is_estimate());
        assert!(sampled.notes()[0].starts_with("Sampled"), "{sampled:?}");
        let all = Said::filtered(&filters, 1.0, None);
        assert!(!all.is_estimate() && all.notes().is_empty());
        assert!(!Said::whole(BUCKETS).is_filtered());
        assert_eq!(all.filters, ["country:DE"]);
    }

    #[test]
    fn a_filtered_panel_has_the_rows_previous_counts_and_denominators_of_the_buckets() {
        let p = period();
        let now = figures(10, Dimension::Campaign, &[("spring", 3), ("launch", 1)]);
        let was = figures(7, Dimension::Campaign, &[("spring", 2)]);
        let panel = Panel::of_figures(Dimension::Campaign, &now, &was, &p, Said::whole(BUCKETS));
        let rows: Vec<_> = panel
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.count, r.compared, r.previous))
            .collect();
        assert_eq!(rows, [("spring", 3, 3, 2), ("launch", 1, 1, 0)]);
        // A campaign's share is of every view; the rest have none.
        assert_eq!((panel.total, panel.of, panel.views), (4, 10, 10));
        assert_eq!((panel.unnamed.count, panel.unnamed.previous), (6, 5));
        assert_eq!(panel.covered, (p.from, p.to));
        assert!(!panel.stretches.running);
        assert_eq!(
            panel.stretches.previous,
            (p.previous().from, p.previous().to)
        );
        // A browser's is of its own total, as without filters.
        let now = figures(10, Dimension::Browser, &[("Firefox", 3), ("Chrome", 1)]);
        let panel = Panel::of_figures(Dimension::Browser, &now, &was, &p, Said::whole(BUCKETS));
        assert_eq!(panel.of, 4);
        assert_eq!(panel.matching("fire").len(), 1);
    }
}

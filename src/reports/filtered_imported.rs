//! Imported figures in a filtered report.
//!
//! An import brings totals per day (Plausible) or single views without
//! their visits (GoatCounter, Umami), each row under one name of one
//! dimension, so a filter can apply to it only when every filter of the
//! request is on that one dimension (as Plausible does: imported data
//! within one group only). Then the report adds the views the imported
//! rows of the matching names carry, read apart from tracked hits
//! (`storage::imported_reads` says where), to the headline, the chart and
//! the dimension's own panel: the rows keep no other dimension beside it,
//! so a country filter can show the country's imported views, not its
//! pages. Imports keep no visits, visitors, bounces or durations per name,
//! so those stay the tracked visits'. An `event` filter adds the imported
//! events of that name to the Events panel alone: an import keeps no
//! views per event.
//!
//! Every other case leaves imported figures out and says why
//! ([`Imported::note`]).

use chrono::{DateTime, TimeDelta, Utc};

use super::filtered::Figures;
use super::{filtered_read, Period};
use crate::domain::filter::{Condition, FilterDimension, Filters, PageMatch};
use crate::domain::Dimension;
use crate::storage::buckets::PART_IMPORT;
use crate::storage::imported_reads::{self, HourViews, ImportedNames};
use crate::storage::sites::Site;
use crate::storage::{Resolution, Store};

/// What a filtered report did with the site's imported figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub case: Case,
    /// Imports recorded before imports wrote a part of their own: their
    /// figures are in a live lane's part, not told apart from tracked ones.
    pub older: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Case {
    /// The imported rows of `dimension` whose names pass every filter are
    /// counted.
    Counted {
        dimension: FilterDimension,
        /// Hours (page filters only) whose site views came from an import
        /// and from tracked hits both: a page's bucket adds them up, so
        /// its imported views there are unknown and left out.
        mixed_hours: usize,
        /// Imported counts under names past a bucket's name cap, which
        /// may include the filtered name but cannot be matched.
        past_cap: i64,
    },
    LeftOut(LeftOut),
}

/// Why imported days are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftOut {
    /// Filters on two dimensions or more: a row carries one.
    SeveralDimensions,
    /// A page pattern: it selects visits by the pages they viewed.
    Pattern,
    /// An entry or exit page: a row carries no visit to enter or leave.
    NoVisits(FilterDimension),
    /// The site's imported rows carry no name of this dimension.
    Lacks(FilterDimension),
}

fn noun(d: FilterDimension) -> String {
    d.title().to_lowercase()
}

impl Imported {
    /// Whether imported figures are in the counts.
    pub fn counted(&self) -> bool {
        matches!(self.case, Case::Counted { .. })
    }

    /// What the page and the API say.
    pub fn note(&self) -> String {
        let mut note = match self.case {
            Case::Counted {
                dimension: FilterDimension::Event,
                ..
            } => "Imported days count under this filter: events from the imported event rows, in the Events panel (an import keeps no views per event).".to_owned(),
            Case::Counted { dimension, .. } => format!(
                "Imported days count under this filter: views from the imported {} rows.",
                noun(dimension)
            ),
            Case::LeftOut(LeftOut::SeveralDimensions) => {
                "Imported days are left out: these filters are on more than one dimension, and each imported row carries one.".to_owned()
            }
            Case::LeftOut(LeftOut::Pattern) => {
                "Imported days are left out: their page rows are totals per page, and a page pattern is matched against recorded visits only.".to_owned()
            }
            Case::LeftOut(LeftOut::NoVisits(d)) => format!(
                "Imported days are left out: their rows carry no visits, so no {} selects views on them.",
                noun(d)
            ),
            Case::LeftOut(LeftOut::Lacks(d)) => format!(
                "Imported days are left out: their rows carry no {}.",
                noun(d)
            ),
        };
        if let Case::Counted {
            dimension,
            mixed_hours,
            past_cap,
        } = self.case
        {
            if mixed_hours > 0 {
                note.push_str(&format!(
                    " Hours holding both imported and tracked views ({mixed_hours}) are left out: a page's imported views there cannot be told apart."
                ));
            }
            if past_cap > 0 {
                let what = if dimension == FilterDimension::Event {
                    "events"
                } else {
                    "views"
                };
                note.push_str(&format!(
                    " Up to {past_cap} more imported {what} are under names past a bucket's cap of {} names and cannot be matched.",
                    crate::storage::breakdowns::MAX_NAMES_PER_BUCKET
                ));
            }
        }
        if self.older > 0 {
            note.push_str(&format!(
                " Imports recorded before imports had a part of their own ({}) are left out: their figures are added to tracked ones in the buckets; delete and import them again to count them.",
                self.older
            ));
        }
        note
    }
}

/// The one dimension imported rows are matched on, or why none can be.
/// `None` without filters (nothing to match).
pub fn plan(filters: &Filters) -> Option<Result<FilterDimension, LeftOut>> {
    let first = filters.iter().next()?.dimension();
    if filters.iter().any(|f| f.dimension() != first) {
        return Some(Err(LeftOut::SeveralDimensions));
    }
    Some(match first {
        FilterDimension::Entry | FilterDimension::Exit => Err(LeftOut::NoVisits(first)),
        FilterDimension::Property => Err(LeftOut::Lacks(first)),
        FilterDimension::Page
            if filters
                .iter()
                .any(|f| matches!(f.condition(), Condition::Page(PageMatch::Pattern(_)))) =>
        {
            Err(LeftOut::Pattern)
        }
        d => Ok(d),
    })
}

/// Where imported counts go in the period's points: a bucket of
/// `[start, start + len)` counts in the point its last instant falls in,
/// and in the period when that instant does. An hour straddling a point's
/// start (a zone off whole hours) goes to the later point, where a daily
/// import's row (at the local day's first instant) belongs.
struct Points<'a> {
    starts: &'a [DateTime<Utc>],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

/// Where a bucket's counts go: nowhere (outside the period), the period
/// alone (before the first point), or a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Out,
    Period(Option<usize>),
}

impl Points<'_> {
    fn slot(&self, start: DateTime<Utc>, len: TimeDelta) -> Slot {
        let last = start + len - TimeDelta::seconds(1);
        if last < self.from || last >= self.to {
            return Slot::Out;
        }
        let i = self.starts.partition_point(|p| *p <= last);
        Slot::Period(i.checked_sub(1))
    }

    /// The point `[start, start + len)` lies in whole, if one.
    fn whole(&self, start: DateTime<Utc>, len: TimeDelta) -> Option<usize> {
        if start < self.from || start + len > self.to {
            return None;
        }
        let i = self
            .starts
            .partition_point(|p| *p <= start)
            .checked_sub(1)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.to);
        (start + len <= end).then_some(i)
    }
}

/// Adds the imported counts of the names passing every filter (all on
/// `dimension`, a breakdown's) to `figures`: from each UTC day's bucket
/// when the day lies in one point, else from its hours' buckets, else
/// (hours not kept) from the day's bucket where its last instant falls.
/// Gives the counts under names past a bucket's cap where no passing name
/// was named.
fn add_names(
    figures: &mut Figures,
    filters: &Filters,
    dimension: Dimension,
    days: &[ImportedNames],
    hours: &[ImportedNames],
    points: &Points<'_>,
) -> i64 {
    let day = TimeDelta::days(1);
    let hour = TimeDelta::hours(1);
    let mut chosen: Vec<(&ImportedNames, Slot)> = Vec::new();
    for d in days {
        if let Some(i) = points.whole(d.at, day) {
            chosen.push((d, Slot::Period(Some(i))));
            continue;
        }
        let its_hours: Vec<&ImportedNames> = hours
            .iter()
            .filter(|h| h.at >= d.at && h.at < d.at + day)
            .collect();
        if its_hours.is_empty() {
            chosen.push((d, points.slot(d.at, day)));
        } else {
            chosen.extend(its_hours.into_iter().map(|h| (h, points.slot(h.at, hour))));
        }
    }
    let mut past_cap = 0;
    for (bucket, slot) in chosen {
        let Slot::Period(point) = slot else { continue };
        let mut named = false;
        for (name, n) in &bucket.names {
            if !filters.iter().all(|f| f.names(name)) {
                continue;
            }
            named = true;
            *figures
                .breakdowns
                .entry(dimension)
                .or_default()
                .entry(name.clone())
                .or_default() += n;
            if dimension != Dimension::Event {
                figures.views += n;
                if let Some(p) = point.and_then(|i| figures.series.get_mut(i)) {
                    p.views += n;
                }
            }
        }
        if !named {
            past_cap += bucket.other.max(0);
        }
    }
    past_cap
}

/// Adds the views of page `path` in the hours whose site views all came
/// from imports; gives the hours with imported and other views both.
fn add_page_hours(
    figures: &mut Figures,
    path: &str,
    site_hours: &[(DateTime<Utc>, HourViews)],
    page_hours: &[(DateTime<Utc>, i64)],
    points: &Points<'_>,
) -> usize {
    let hour = TimeDelta::hours(1);
    let in_period = |at: DateTime<Utc>| points.slot(at, hour) != Slot::Out;
    let imported_only = |at: &DateTime<Utc>| {
        site_hours
            .binary_search_by_key(at, |(h, _)| *h)
            .ok()
            .map(|i| site_hours[i].1)
            .is_some_and(|v| v.imported != 0 && v.other == 0)
    };
    for (at, n) in page_hours {
        if !imported_only(at) {
            continue;
        }
        let Slot::Period(point) = points.slot(*at, hour) else {
            continue;
        };
        figures.views += n;
        figures.pages.entry(path.to_owned()).or_default().views += n;
        if let Some(p) = point.and_then(|i| figures.series.get_mut(i)) {
            p.views += n;
        }
    }
    site_hours
        .iter()
        .filter(|(at, v)| v.imported != 0 && v.other != 0 && in_period(*at))
        .count()
}

/// A filtered report's figures over `period` (those of
/// [`filtered_read::figures`]) with the imported figures the filters
/// apply to, and what was done with the imported ones (`None`: the site
/// has no import).
pub async fn figures(
    store: &Store,
    site: &Site,
    filters: &Filters,
    period: &Period,
) -> Result<(Figures, Option<Imported>), super::costly::ReadError> {
    let mut figures = filtered_read::figures(store, site, filters, period).await?;
    let imports = crate::storage::imports::list(store, Some(&site.id.to_string())).await?;
    if imports.is_empty() {
        return Ok((figures, None));
    }
    let older = imports.iter().filter(|r| r.part != PART_IMPORT).count();
    let Some(plan) = plan(filters) else {
        return Ok((figures, None));
    };
    let dimension = match plan {
        Ok(d) => d,
        Err(why) => {
            let case = Case::LeftOut(why);
            return Ok((figures, Some(Imported { case, older })));
        }
    };
    let domain = site.domain.as_str();
    let carried = match dimension.breakdown() {
        Some(b) => imported_reads::imports_carry(store, domain, b).await?,
        None => imported_reads::imports_carry_pages(store, domain).await?,
    };
    if !carried {
        let case = Case::LeftOut(LeftOut::Lacks(dimension));
        return Ok((figures, Some(Imported { case, older })));
    }
    let starts: Vec<DateTime<Utc>> = figures.series.iter().map(|p| p.at).collect();
    let points = Points {
        starts: &starts,
        from: period.from,
        to: period.to,
    };
    // Buckets whose last instant may fall in the period.
    let first_day = Resolution::Day.floor(period.from);
    let (mut mixed_hours, mut past_cap) = (0, 0);
    match dimension.breakdown() {
        Some(b) => {
            let days = imported_reads::imported_names(
                store,
                domain,
                b,
                Resolution::Day,
                first_day,
                period.to,
            )
            .await?;
            let hours = imported_reads::imported_names(
                store,
                domain,
                b,
                Resolution::Hour,
                first_day,
                period.to,
            )
            .await?;
            past_cap = add_names(&mut figures, filters, b, &days, &hours, &points);
        }
        None => {
            // Exact page filters all naming one path: that page's rows.
            let path = filters.iter().next().map_or("", |f| f.value()).to_owned();
            if filters.iter().all(|f| f.names(&path)) {
                let page = format!("{domain}{path}");
                let site_hours =
                    imported_reads::site_hours_by_part(store, domain, first_day, period.to).await?;
                let page_hours =
                    imported_reads::page_hours(store, &page, first_day, period.to).await?;
                mixed_hours =
                    add_page_hours(&mut figures, &path, &site_hours, &page_hours, &points);
            }
        }
    }
    let case = Case::Counted {
        dimension,
        mixed_hours,
        past_cap,
    };
    Ok((figures, Some(Imported { case, older })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn filters(raw: &[&str]) -> Filters {
        Filters::parse(raw.iter().copied()).unwrap()
    }

    fn at(d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, d, h, 0, 0).unwrap()
    }

    fn names(at: DateTime<Utc>, rows: &[(&str, i64)], other: i64) -> ImportedNames {
        ImportedNames {
            at,
            names: rows.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect(),
            other,
        }
    }

    #[test]
    fn one_dimension_is_matched_and_every_other_case_says_why_not() {
        assert_eq!(
            plan(&filters(&["country:DE"])),
            Some(Ok(FilterDimension::Country))
        );
        assert_eq!(
            plan(&filters(&["page:/pricing"])),
            Some(Ok(FilterDimension::Page))
        );
        assert_eq!(
            plan(&filters(&["event:Signup"])),
            Some(Ok(FilterDimension::Event))
        );
        // Two filters of one dimension are still one dimension.
        assert_eq!(
            plan(&filters(&["country:DE", "country:FR"])),
            Some(Ok(FilterDimension::Country))
        );
        assert_eq!(
            plan(&filters(&["country:DE", "browser:Firefox"])),
            Some(Err(LeftOut::SeveralDimensions))
        );
        assert_eq!(
            plan(&filters(&["page:/blog/*"])),
            Some(Err(LeftOut::Pattern))
        );
        assert_eq!(
            plan(&filters(&["entry:/"])),
            Some(Err(LeftOut::NoVisits(FilterDimension::Entry)))
        );
        assert_eq!(
            plan(&filters(&["exit:/"])),
            Some(Err(LeftOut::NoVisits(FilterDimension::Exit)))
        );
        assert_eq!(plan(&Filters::default()), None);
    }

    #[test]
    fn each_case_is_said_in_its_own_words() {
        let said = |case| Imported { case, older: 0 }.note();
        assert_eq!(
            said(Case::Counted {
                dimension: FilterDimension::Country,
                mixed_hours: 0,
                past_cap: 0
            }),
            "Imported days count under this filter: views from the imported country rows."
        );
        assert_eq!(
            said(Case::LeftOut(LeftOut::Lacks(FilterDimension::Campaign))),
            "Imported days are left out: their rows carry no campaign."
        );
        assert!(said(Case::LeftOut(LeftOut::SeveralDimensions))
            .contains("filters are on more than one dimension"));
        let mixed = said(Case::Counted {
            dimension: FilterDimension::Page,
            mixed_hours: 2,
            past_cap: 0,
        });
        assert!(mixed.contains("imported page rows"), "{mixed}");
        assert!(mixed.contains("(2) are left out"), "{mixed}");
        let older = Imported {
            case: Case::LeftOut(LeftOut::Pattern),
            older: 1,
        };
        assert!(older.note().contains("part of their own (1)"));
        assert!(!older.counted());
    }

    #[test]
    fn matching_names_add_views_to_the_headline_the_chart_and_their_panel() {
        let f = filters(&["country:DE"]);
        let starts = [at(2, 0), at(3, 0)];
        let mut figures = Figures::none(&starts);
        let points = Points {
            starts: &starts,
            from: at(2, 0),
            to: at(4, 0),
        };
        let days = [
            names(at(2, 0), &[("DE", 5), ("FR", 7)], 0),
            names(at(3, 0), &[("DE", 2)], 0),
            // The day after the period: its last instant is out.
            names(at(4, 0), &[("DE", 100)], 0),
            // A day with DE past the cap.
            names(at(1, 0), &[("FR", 1)], 9),
        ];
        let past = add_names(&mut figures, &f, Dimension::Country, &days, &[], &points);
        assert_eq!(figures.views, 7);
        assert_eq!(figures.series[0].views, 5);
        assert_eq!(figures.series[1].views, 2);
        assert_eq!(figures.top(Dimension::Country), [("DE", 7)]);
        // The day before the period is out, so its cap counts nothing.
        assert_eq!(past, 0);
        assert_eq!(figures.visits, 0);
    }

    #[test]
    fn a_day_across_two_points_is_read_from_its_hours() {
        let f = filters(&["browser:Firefox"]);
        // Points of local days starting at 23:00 UTC (a zone one hour
        // ahead of UTC).
        let starts = [at(1, 23), at(2, 23)];
        let mut figures = Figures::none(&starts);
        let points = Points {
            starts: &starts,
            from: at(1, 23),
            to: at(3, 23),
        };
        let days = [
            names(at(1, 0), &[("Firefox", 4)], 0),
            names(at(2, 0), &[("Firefox", 6)], 0),
        ];
        let hours = [
            names(at(1, 10), &[("Firefox", 3)], 0),
            names(at(1, 23), &[("Firefox", 1)], 0),
            names(at(2, 22), &[("Firefox", 2)], 0),
            names(at(2, 23), &[("Firefox", 4)], 0),
        ];
        add_names(&mut figures, &f, Dimension::Browser, &days, &hours, &points);
        assert_eq!(figures.views, 7);
        assert_eq!(figures.series[0].views, 3);
        assert_eq!(figures.series[1].views, 4);
    }

    #[test]
    fn events_go_to_the_events_panel_alone() {
        let f = filters(&["event:Signup"]);
        let starts = [at(2, 0)];
        let mut figures = Figures::none(&starts);
        let points = Points {
            starts: &starts,
            from: at(2, 0),
            to: at(3, 0),
        };
        let days = [names(at(2, 0), &[("Signup", 3), ("Other", 1)], 0)];
        add_names(&mut figures, &f, Dimension::Event, &days, &[], &points);
        assert_eq!(figures.top(Dimension::Event), [("Signup", 3)]);
        assert_eq!((figures.views, figures.series[0].views), (0, 0));
    }

    #[test]
    fn a_pages_views_count_only_in_hours_with_imported_views_alone() {
        let starts = [at(2, 0)];
        let mut figures = Figures::none(&starts);
        let points = Points {
            starts: &starts,
            from: at(2, 0),
            to: at(3, 0),
        };
        let views = |imported, other| HourViews { imported, other };
        let site = [
            (at(2, 1), views(10, 0)),
            (at(2, 2), views(3, 4)),
            (at(2, 3), views(0, 5)),
        ];
        let page = [(at(2, 1), 6), (at(2, 2), 2), (at(2, 3), 5)];
        let mixed = add_page_hours(&mut figures, "/pricing", &site, &page, &points);
        assert_eq!(figures.views, 6);
        assert_eq!(figures.pages["/pricing"].views, 6);
        assert_eq!(figures.series[0].views, 6);
        assert_eq!(mixed, 1);
    }
}

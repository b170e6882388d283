//! Each page's figures over whole UTC days of a site whose totals are
//! complete, read from page summaries (`storage::page_summaries`) so that
//! the cost grows with the pages shown and the log of the days, not with
//! pages × days.
//!
//! A request reads the site's day totals over the range (one small
//! document per day and writer part), covers the days with aligned spans,
//! and reads those spans' summaries in one query. A summary whose total is
//! not the site's total over its span (a late view, or none made yet) is
//! made again from its halves, down to single days read from the page-day
//! buckets, and stored for the next request. The days of the last few
//! minutes (today, mostly) are read from the page-day buckets directly:
//! they still change with every batch, so a summary of them would be made
//! again each time.

use chrono::{DateTime, TimeDelta, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::queries;
use crate::storage::page_summaries::{
    self, day_number, day_start, Answer, PageFigures, Span, Summary,
};
use crate::storage::sites::Site;
use crate::storage::Store;

/// Days that ended less than this long ago are read from their buckets
/// and not summarised: the rollups of their last hits may still be on
/// their way (a few seconds under load).
const SETTLING: TimeDelta = TimeDelta::minutes(10);

/// Each page's figures over the whole UTC days `[first, last)` of `site`
/// (pages with none left out). Days past the day buckets' retention are
/// left out, as their page buckets are gone.
pub async fn whole_days(
    store: &Store,
    site: &Site,
    (first, last): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Arc<Answer>, mongodb::error::Error> {
    let first = match store.day_retention().first_usable_day() {
        Some(usable) => first.max(usable),
        None => first,
    };
    if first >= last {
        return Ok(Arc::default());
    }
    let totals = Totals::read(store, site, (first, last)).await?;
    let key = (
        site.id.to_string(),
        day_number(first),
        day_number(last),
        totals.fingerprint(),
    );
    if let Some(kept) = store.kept_answers().get(&key) {
        return Ok(kept);
    }
    let settled = crate::storage::Resolution::Day.floor(Utc::now() - SETTLING);
    let cover_end = last.min(settled).max(first);
    let mut out = Answer::new();
    // Kept only when every part was read as of one state (the totals'):
    // a day read while a batch committed serves this request alone.
    let mut whole = summarise_with(store, site, &totals, (first, cover_end), &mut out).await?;
    let recent: Vec<i64> = (day_number(cover_end)..day_number(last))
        .filter(|d| totals.by_day.get(d).copied().unwrap_or(0) != 0)
        .collect();
    if !recent.is_empty() {
        for (day, pages) in queries::page_days(store, &site.domain, &recent).await? {
            let views: i64 = pages.iter().map(|(_, f)| f.views).sum();
            whole &= Some(&views) == totals.by_day.get(&day);
            add_all(&mut out, &pages);
        }
    }
    let out = Arc::new(out);
    if whole {
        store.kept_answers().keep(key, out.clone());
    }
    Ok(out)
}

/// Each page's figures over the whole UTC days `[first, end)` of `site`
/// from their summaries, made (and stored) where missing or no longer
/// right, whether or not the days have ended: what [`whole_days`] does
/// for settled days, and what tests use to make summaries while hits
/// arrive.
pub async fn summarise(
    store: &Store,
    site: &Site,
    (first, end): (DateTime<Utc>, DateTime<Utc>),
) -> Result<HashMap<String, PageFigures>, mongodb::error::Error> {
    let totals = Totals::read(store, site, (first, end)).await?;
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
    out: &mut HashMap<String, PageFigures>,
) -> Result<bool, mongodb::error::Error> {
    let builder = Builder {
        store,
        site,
        key: site.id.to_string(),
        totals,
    };
    let spans: Vec<Span> = Span::cover(day_number(first), day_number(end))
        .into_iter()
        .filter(|s| totals.over(*s) != 0)
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

fn add_all(out: &mut HashMap<String, PageFigures>, pages: &[(String, PageFigures)]) {
    for (page, f) in pages {
        match out.get_mut(page.as_str()) {
            Some(sum) => sum.add(f),
            None => {
                out.insert(page.clone(), *f);
            }
        }
    }
}

/// The site's views per UTC day (all writer parts added up).
struct Totals {
    by_day: BTreeMap<i64, i64>,
}

impl Totals {
    async fn read(
        store: &Store,
        site: &Site,
        (first, last): (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<Self, mongodb::error::Error> {
        Ok(Totals {
            by_day: queries::site_day_totals(store, &site.domain, (first, last))
                .await?
                .into_iter()
                .map(|(day, n)| (day_number(day), n))
                .collect(),
        })
    }

    /// Tells the totals apart: equal fingerprints, equal totals (but for
    /// a 64-bit collision).
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.by_day.hash(&mut h);
        h.finish()
    }

    /// The site's views over a span's days.
    fn over(&self, span: Span) -> i64 {
        self.by_day
            .range(span.first_day()..span.end_day())
            .map(|(_, n)| n)
            .sum()
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
        Ok(page_summaries::read(self.store, &self.key, spans)
            .await?
            .into_iter()
            .filter(|s| s.total == self.totals.over(s.span))
            .map(|s| (s.span, s))
            .collect())
    }

    /// Makes the summary of `span` from its halves (stored ones where
    /// they are right, else made likewise), or of a day from its
    /// buckets, and stores it when exact.
    fn make(&self, span: Span) -> BoxFuture<'_, Result<Made, mongodb::error::Error>> {
        async move {
            let made = match span.halves() {
                None => self.day(span).await?,
                Some(halves) => {
                    let wanted: Vec<Span> = halves
                        .into_iter()
                        .filter(|h| self.totals.over(*h) != 0)
                        .collect();
                    let mut stored = self.stored(&wanted).await?;
                    let mut parts = Vec::with_capacity(2);
                    for half in halves {
                        parts.push(if self.totals.over(half) == 0 {
                            Made {
                                summary: Summary {
                                    span: half,
                                    total: 0,
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
            if made.exact && made.summary.total == self.totals.over(span) {
                page_summaries::write(self.store, &self.site.id, &made.summary).await?;
            }
            Ok(made)
        }
        .boxed()
    }

    /// One day's summary from its page-day buckets. It is exact when the
    /// site's total that day is the same before and after the read and
    /// equals the pages' views: a batch committed during the read would
    /// have changed the total (every batch adds views), so the buckets
    /// were read as of one state.
    async fn day(&self, span: Span) -> Result<Made, mongodb::error::Error> {
        let number = span.first_day();
        let before = self.totals.over(span);
        let mut read = queries::page_days(self.store, &self.site.domain, &[number]).await?;
        let pages = read.remove(&number).unwrap_or_default();
        let start = day_start(number);
        let after: i64 = queries::site_day_totals(
            self.store,
            &self.site.domain,
            (start, start + TimeDelta::days(1)),
        )
        .await?
        .values()
        .sum();
        let views: i64 = pages.iter().map(|(_, f)| f.views).sum();
        Ok(Made {
            exact: before == after && views == before,
            summary: Summary {
                span,
                total: views,
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
pub async fn backfill(store: &Store, site: &Site) -> Result<u64, mongodb::error::Error> {
    let Some((first, last)) = queries::site_day_range(store, &site.domain).await? else {
        return Ok(0);
    };
    let first = match store.day_retention().first_usable_day() {
        Some(usable) => first.max(usable),
        None => first,
    };
    let settled = crate::storage::Resolution::Day.floor(Utc::now() - SETTLING);
    let last = (last + TimeDelta::days(1)).min(settled);
    let top = 1_i64 << page_summaries::MAX_LEVEL;
    let mut covered = 0;
    let mut from = day_number(first);
    while from < day_number(last) {
        // One top-level span at a time: its totals read once, and at most
        // one summary per level held.
        let end = ((from.div_euclid(top) + 1) * top).min(day_number(last));
        let (a, b) = (day_start(from), day_start(end));
        let totals = Totals::read(store, site, (a, b)).await?;
        summarise_with(store, site, &totals, (a, b), &mut HashMap::new()).await?;
        covered += totals.by_day.values().filter(|n| **n != 0).count() as u64;
        from = end;
    }
    Ok(covered)
}

/// Backfills every site whose totals are complete.
pub async fn backfill_all(store: &Store) -> anyhow::Result<Vec<(String, u64)>> {
    let mut done = Vec::new();
    for site in crate::storage::sites::list(store).await? {
        if site.totals_complete {
            let days = backfill(store, &site).await?;
            done.push((site.domain.to_string(), days));
        }
    }
    Ok(done)
}

//! The sites list's figures of each site: views today, over 7 and 30
//! local days, the 30 days' chart, and the 30 days' visitors.

use chrono::{DateTime, Utc};
use std::sync::Arc;

use super::queries::{series, Scope};
use super::{visits, Period, RangeQuery};
use crate::storage::sites::Site;
use crate::storage::Store;

/// Headline numbers for the sites list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteSummary {
    pub today: i64,
    pub last_7_days: i64,
    pub last_30_days: i64,
    /// Views per day, oldest first, 30 values ending today.
    pub daily: Vec<i64>,
    /// Unique visitors over the 30 days (a sum over UTC days); `None`
    /// where the stored data cannot say.
    pub visitors_30_days: Option<i64>,
}

pub async fn site_summary(
    store: &Store,
    site: &Site,
    now: DateTime<Utc>,
) -> Result<SiteSummary, mongodb::error::Error> {
    let q = RangeQuery {
        range: Some("30d".into()),
        ..Default::default()
    };
    let period = Period::resolve_in(&q, now, site.time_zone.tz())
        .expect("the 30-day preset always resolves");
    let scope = Scope::of_site(site);
    let whole = [(period.from, period.to)];
    let (points, visitors) = tokio::try_join!(
        series(store, &scope, &period),
        visits::visitors(store, &scope, &whole),
    )?;
    let daily: Vec<i64> = points.iter().map(|p| p.views).collect();
    Ok(SiteSummary {
        today: *daily.last().unwrap_or(&0),
        last_7_days: daily.iter().rev().take(7).sum(),
        last_30_days: daily.iter().sum(),
        daily,
        visitors_30_days: visitors.map(|v| v[0]),
    })
}

/// `sites`, by name, each with the sites list's figures: the same on the
/// page and in the API.
pub async fn of_sites(
    store: &Store,
    mut sites: Vec<Arc<Site>>,
    now: DateTime<Utc>,
) -> Result<Vec<(Arc<Site>, SiteSummary)>, mongodb::error::Error> {
    sites.sort_by_key(|s| s.name.to_lowercase());
    let figures =
        futures::future::try_join_all(sites.iter().map(|site| site_summary(store, site, now)))
            .await?;
    Ok(sites.into_iter().zip(figures).collect())
}

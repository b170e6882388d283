//! The costly reads as the web asks for them: each a whole computation
//! (its reads and its CPU) run on the costly reads' runtime within their
//! limits ([`costly`]), the HTTP worker only awaiting the answer. Every
//! filtered report and funnel of the pages, the CSV files and the API
//! comes through here.

use chrono::{DateTime, TimeDelta, Utc};

use super::costly::{CostlyReads, ReadError};
use super::filtered::{Figures, FunnelFigures, PropertyFigures};
use super::filtered_imported::{self, Imported};
use super::{filtered_read, Period};
use crate::domain::filter::Filters;
use crate::domain::FunnelSteps;
use crate::storage::sites::Site;
use crate::storage::Store;

/// What the costly reads need: the store and where they run (`None`:
/// in the caller's task, unbounded — the email reports and the commands,
/// which read no filtered figures for a visitor waiting on them).
#[derive(Clone, Copy)]
pub struct Reads<'a> {
    pub store: &'a Store,
    pub costly: Option<&'a CostlyReads>,
}

impl<'a> Reads<'a> {
    /// Reads run in the caller's own task.
    pub fn inline(store: &'a Store) -> Self {
        Reads {
            store,
            costly: None,
        }
    }

    async fn run<T, W>(&self, site: &str, work: W) -> Result<T, ReadError>
    where
        W: std::future::Future<Output = Result<T, ReadError>> + Send + 'static,
        T: Send + 'static,
    {
        match self.costly {
            Some(costly) => costly.run(site, work).await,
            None => work.await,
        }
    }

    /// [`filtered_imported::figures`] over `period`.
    pub async fn figures(
        &self,
        site: &Site,
        filters: &Filters,
        period: &Period,
    ) -> Result<(Figures, Option<Imported>), ReadError> {
        let (store, site, filters, period) =
            (self.store.clone(), site.clone(), filters.clone(), *period);
        let domain = site.domain.to_string();
        self.run(&domain, async move {
            filtered_imported::figures(&store, &site, &filters, &period).await
        })
        .await
    }

    /// The figures of `period` and of the period before it, read together
    /// as one computation (one turn, one budget).
    pub async fn figures_and_before(
        &self,
        site: &Site,
        filters: &Filters,
        period: &Period,
    ) -> Result<((Figures, Option<Imported>), Figures), ReadError> {
        let (store, site, filters, period) =
            (self.store.clone(), site.clone(), filters.clone(), *period);
        let domain = site.domain.to_string();
        self.run(&domain, async move {
            let before = period.previous();
            let (now, (before, _)) = tokio::try_join!(
                filtered_imported::figures(&store, &site, &filters, &period),
                filtered_imported::figures(&store, &site, &filters, &before),
            )?;
            Ok((now, before))
        })
        .await
    }

    /// The funnels' figures over `period`, from one read of the visits.
    pub async fn funnels(
        &self,
        site: &Site,
        filters: &Filters,
        steps: &[FunnelSteps],
        period: &Period,
    ) -> Result<Vec<FunnelFigures>, ReadError> {
        let (store, site, filters, steps, period) = (
            self.store.clone(),
            site.clone(),
            filters.clone(),
            steps.to_vec(),
            *period,
        );
        let domain = site.domain.to_string();
        self.run(&domain, async move {
            filtered_read::funnels(&store, &site, &filters, &steps, &period).await
        })
        .await
    }

    /// One funnel's figures.
    pub async fn funnel(
        &self,
        site: &Site,
        filters: &Filters,
        steps: &FunnelSteps,
        period: &Period,
    ) -> Result<FunnelFigures, ReadError> {
        let mut all = self
            .funnels(site, filters, std::slice::from_ref(steps), period)
            .await?;
        Ok(all.remove(0))
    }

    /// [`filtered_read::properties`] over `period`, and over the period
    /// before it (for the change), one read each.
    pub async fn properties(
        &self,
        site: &Site,
        filters: &Filters,
        key: Option<&str>,
        period: &Period,
    ) -> Result<(PropertyFigures, PropertyFigures), ReadError> {
        let (store, site, filters, period) =
            (self.store.clone(), site.clone(), filters.clone(), *period);
        let key = key.map(str::to_owned);
        let domain = site.domain.to_string();
        self.run(&domain, async move {
            let now =
                filtered_read::properties(&store, &site, &filters, key.as_deref(), &period).await?;
            // The period before compares the same key, whichever was chosen.
            let key = now.key.as_deref();
            let before =
                filtered_read::properties(&store, &site, &filters, key, &period.previous()).await?;
            Ok((now, before))
        })
        .await
    }

    /// [`filtered_read::views_by_step`].
    pub async fn views_by_step(
        &self,
        site: &Site,
        filters: &Filters,
        range: (DateTime<Utc>, DateTime<Utc>),
        step: TimeDelta,
    ) -> Result<(Vec<i64>, f64), ReadError> {
        let (store, site, filters) = (self.store.clone(), site.clone(), filters.clone());
        let domain = site.domain.to_string();
        self.run(&domain, async move {
            filtered_read::views_by_step(&store, &site, &filters, range, step).await
        })
        .await
    }
}

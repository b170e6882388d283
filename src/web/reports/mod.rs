//! Report pages and CSV exports for site owners (and admins), one module
//! per page; `query` parses what they accept, `links` builds what they

//! link to, `view` holds what they all show.

mod dashboard;
mod exports;
mod links;
mod page;
mod query;
mod site_settings;
mod sites;
mod view;

pub use dashboard::{dashboard, status_json};
pub use exports::{pages_csv, realtime_csv, seconds_csv, series_csv};
pub use page::page_report;
pub use site_settings::{add_site, new_site_form, save_site_settings, site_settings};
pub use sites::sites;
pub use view::freshness;

use links::*;
use page::*;
use query::*;
use view::*;

use std::sync::Arc;
use std::time::Instant;

use super::auth::Viewer;
use super::error::WebError;
use super::state::WebState;
use crate::domain::SiteId;
use crate::storage::sites::Site;

/// The site `id` names, if this viewer may see it.
pub(super) fn visible_site(
    state: &WebState,
    viewer: &Viewer,
    id: &str,
) -> Result<Arc<Site>, WebError> {
    let id = SiteId::parse(id).map_err(|_| WebError::NotFound)?;
    let site = state.directory.by_id(&id).ok_or(WebError::NotFound)?;
    if viewer.can_see(&site) {
        Ok(site)
    } else {
        Err(WebError::NotFound)
    }
}

pub(super) fn timed(state: &WebState, started: Instant) {
    state
        .report_seconds
        .observe(started.elapsed().as_secs_f64());
}

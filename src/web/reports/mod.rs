//! Report pages and CSV exports for site owners (and admins), one module
//! per page; `query` parses what they accept, `links` builds what they

//! link to, `view` holds what they all show.

pub(crate) mod breakdowns;
mod dashboard;
mod exports;
mod filter_query;
mod funnels;
pub(crate) mod goals;
mod links;
mod page;
mod properties;
mod query;
mod shared;
mod sites;
pub(crate) mod sources;
mod view;
mod visit_line;

pub use breakdowns::breakdown_csv;
pub use dashboard::{dashboard, now_json, show_dashboard, status_json};
pub use exports::{pages_csv, realtime_csv, seconds_csv, series_csv, visits_csv};
pub use funnels::{add_funnel, funnel_csv, funnel_page, funnels_page, remove_funnel, show_funnels};
pub use goals::goals_csv;
pub use page::{page_report, show_page_report};
pub use properties::{properties_csv, properties_page, show_properties, KeyChoice};
pub use query::ReportQuery;
pub use shared::query_config as csv_query_config;
pub use sites::sites;
pub use sources::sources_csv;
pub use view::{behind, freshness};

use links::*;
use view::*;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use super::auth::Viewer;
use super::error::{Answer, WebError};
use super::state::WebState;
use crate::domain::SiteId;
use crate::storage::sites::Site;

pub use filter_query::Query;

/// Who looks at a report, and so where its links lead and what it offers.
pub struct Audience {
    pub nav: Option<super::pages::Nav>,
    /// Where the site's report links start: `/sites/<id>` or `/share/<token>`.
    pub base: String,
    /// Through a share link: the reports only, without settings, tracking
    /// code or exports.
    pub shared: bool,
    /// When the request started (for the latency histogram).
    pub started: Instant,
}

impl Audience {
    fn signed_in(r: &SiteRequest) -> Self {
        Audience {
            nav: Some(r.viewer.nav()),
            base: format!("/sites/{}", r.site.id),
            shared: false,
            started: r.started,
        }
    }

    /// `href` for a signed-in user; nothing through a share link.
    fn export(&self, href: String) -> String {
        if self.shared {
            String::new()
        } else {
            href
        }
    }
}

/// A request about one site the viewer may see: the state, the signed-in
/// viewer, the site the path's `{id}` names (404 when unknown or not
/// theirs), and when the request started (for the latency histogram).
pub struct SiteRequest {
    pub state: web::Data<WebState>,
    pub viewer: Viewer,
    pub site: Arc<Site>,
    pub started: Instant,
}

impl FromRequest for SiteRequest {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let started = Instant::now();
        let state = req.app_data::<web::Data<WebState>>().cloned();
        let id = req.match_info().get("id").unwrap_or_default().to_owned();
        let viewer = Viewer::from_request(req, payload);
        Box::pin(async move {
            let state =
                state.ok_or_else(|| WebError::internal(anyhow::anyhow!("web state missing")))?;
            let viewer = viewer.await?;
            let site = visible_site(&state, &viewer, &id)?;
            Ok(SiteRequest {
                state,
                viewer,
                site,
                started,
            })
        })
    }
}

/// The site `id` names, if this viewer may see it.
pub(crate) fn visible_site(
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

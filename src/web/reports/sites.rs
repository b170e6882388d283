//! The sites list: each visible site with its recent totals.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::reports::chart;
use crate::reports::summaries;
use crate::storage::sites::Site;
use crate::web::auth::Viewer;
use crate::web::error::Answer;
use crate::web::pages::{render, Nav};
use crate::web::state::WebState;

pub struct SiteRow {
    pub id: String,
    pub name: String,
    pub domain: String,
    pub time_zone: &'static str,
    pub today: i64,
    pub week: i64,
    pub month: i64,
    /// Unique visitors over the 30 days ("—" where unknown).
    pub visitors: String,
    pub sparkline: String,
}

/// The sites a reader may see (the page and the API ask the same).
fn visible(state: &WebState, can_see: impl Fn(&Site) -> bool) -> Vec<Arc<Site>> {
    state
        .directory
        .all()
        .into_iter()
        .filter(|s| can_see(s))
        .collect()
}

#[derive(Template)]
#[template(path = "sites.html")]
pub(super) struct SitesPage {
    nav: Option<Nav>,
    rows: Vec<SiteRow>,
    /// This viewer may add a site.
    can_add: bool,
    /// Just after the first password change.
    password_changed: bool,
}

#[derive(serde::Deserialize)]
pub struct SitesQuery {
    done: Option<String>,
}

pub async fn sites(
    state: web::Data<WebState>,
    viewer: Viewer,
    q: web::Query<SitesQuery>,
) -> Answer {
    let started = Instant::now();
    let summaries = summaries::of_sites(
        &state.store,
        visible(&state, |s| viewer.can_see(s)),
        state.clock.now(),
    )
    .await?;
    let rows = summaries
        .iter()
        .map(|(site, s)| SiteRow {
            id: site.id.to_string(),
            name: site.name.clone(),
            domain: site.domain.to_string(),
            time_zone: site.time_zone.name(),
            today: s.today,
            week: s.last_7_days,
            month: s.last_30_days,
            visitors: s
                .visitors_30_days
                .map_or_else(|| "—".to_owned(), |v| crate::web::fmt::thousands(&v)),
            sparkline: chart::sparkline(
                &s.daily,
                &format!(
                    "{}: views per day, last 30 days (today still counting)",
                    site.name
                ),
                true,
            ),
        })
        .collect();
    let page = SitesPage {
        nav: Some(viewer.nav()),
        rows,
        can_add: viewer.user.is_admin() || state.owners_add_sites,
        password_changed: q.done.as_deref() == Some("password"),
    };
    timed(&state, started);
    Ok(render(StatusCode::OK, &page))
}

//! Funnels: defined on the site's settings page (kept by
//! `storage::funnels`), shown on their own report page with the filters
//! (all of them, or one by its id), and one CSV each. A share link shows
//! the same page read-only: no defining, removing or CSV.

use actix_web::web;
use askama::Template;
use serde::Deserialize;
use std::sync::Arc;

use super::shared::{
    behind_header, csv_header, file_stem, slug, CsvAnswer, CsvRequest, FilterChips,
};
use super::*;
use crate::domain::funnel::{parse_funnel_name, FunnelSteps};
use crate::reports::engine::VISIT_STORE;
use crate::reports::filtered::FunnelFigures;
use crate::reports::{csv, filtered_read};
use crate::storage::funnels::{self, FunnelStoreError};
use crate::storage::sites::Site;
use crate::web::error::{see_other, WebError};
use crate::web::pages::{render, Nav};
use crate::web::state::WebState;

#[derive(Deserialize)]
pub struct FunnelForm {
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    step1: String,
    #[serde(default)]
    step2: String,
    #[serde(default)]
    step3: String,
    #[serde(default)]
    step4: String,
    #[serde(default)]
    step5: String,
    #[serde(default)]
    step6: String,
    #[serde(default)]
    step7: String,
    #[serde(default)]
    step8: String,
}

/// An owner (or admin) adds a funnel: its name and the steps typed (empty
/// fields left out, each trimmed). A refused one changes nothing and says
/// why (400).
pub async fn add_funnel(r: SiteRequest, form: web::Form<FunnelForm>) -> Answer {
    let (state, viewer, site) = (r.state, r.viewer, r.site);
    viewer.check_csrf(&form.csrf)?;
    let name = parse_funnel_name(&form.name)
        .map_err(|e| WebError::Invalid(format!("The funnel was not added: {e}.")))?;
    let typed = [
        &form.step1,
        &form.step2,
        &form.step3,
        &form.step4,
        &form.step5,
        &form.step6,
        &form.step7,
        &form.step8,
    ];
    let steps = FunnelSteps::parse(typed.iter().map(|s| s.trim()).filter(|s| !s.is_empty()))
        .map_err(|e| WebError::Invalid(format!("The funnel was not added: {e}.")))?;
    match funnels::add(&state.store, &site.id, &name, &steps, state.clock.now()).await {
        Ok(_) => {}
        Err(FunnelStoreError::Database(e)) => return Err(e.into()),
        Err(e @ FunnelStoreError::TooMany) => {
            return Err(WebError::Invalid(format!("The funnel was not added: {e}.")))
        }
    }
    tracing::info!(user = %viewer.user.email, site = %site.domain, funnel = %name, "funnel added");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=funnel-added#funnels",
        site.id
    )))
}

#[derive(Deserialize)]
pub struct RemoveFunnelForm {
    csrf: String,
    #[serde(default)]
    funnel: String,
}

pub async fn remove_funnel(r: SiteRequest, form: web::Form<RemoveFunnelForm>) -> Answer {
    let (state, viewer, site) = (r.state, r.viewer, r.site);
    viewer.check_csrf(&form.csrf)?;
    let id = uuid::Uuid::parse_str(&form.funnel)
        .map_err(|_| WebError::invalid("That is not a funnel of this site."))?;
    if !funnels::remove(&state.store, &site.id, id).await? {
        return Err(WebError::invalid("That is not a funnel of this site."));
    }
    Ok(see_other(&format!(
        "/sites/{}/settings?done=funnel-removed#funnels",
        site.id
    )))
}

pub struct FunnelView {
    pub name: String,
    /// This funnel alone.
    pub href: String,
    pub rows: Vec<FunnelRow>,
    /// The steps as bars (inline SVG), above the table.
    pub bars: String,
    /// Empty through a share link (no exports there).
    pub csv: String,
}

pub struct FunnelRow {
    pub step: String,
    pub visits: i64,
    pub from_previous: String,
    pub from_start: String,
    pub drop_off: i64,
}

fn percent(r: Option<f64>) -> String {
    r.map_or_else(
        || "—".to_owned(),
        |r| crate::reports::numbers::percent(r, 1),
    )
}

fn rows(f: &FunnelFigures) -> Vec<FunnelRow> {
    (0..f.steps.len())
        .map(|i| FunnelRow {
            step: f.steps[i].step.clone(),
            visits: f.steps[i].visits,
            from_previous: percent(f.from_previous(i)),
            from_start: percent(f.from_start(i)),
            drop_off: f.drop_off(i),
        })
        .collect()
}

#[derive(Template)]
#[template(path = "funnels.html")]
struct FunnelsPage {
    nav: Option<Nav>,
    shared: bool,
    site: Arc<Site>,
    controls: Controls,
    chips: FilterChips,
    funnels: Vec<FunnelView>,
    back_href: String,
    /// Back to every funnel, on one funnel's page.
    all_href: Option<String>,
    notes: Vec<String>,
    /// The visit store's stream past its window: how far behind.
    behind: Option<String>,
}

/// `GET /sites/{id}/funnels`: every funnel of the site over the period,
/// with the filters.
pub async fn funnels_page(r: SiteRequest, q: Query) -> Answer {
    let audience = Audience::signed_in(&r);
    show_funnels(&r.state, r.site, audience, &q, None).await
}

/// `GET /sites/{id}/funnels/{funnel}`: one of them.
pub async fn funnel_page(r: SiteRequest, q: Query, path: web::Path<(String, String)>) -> Answer {
    let audience = Audience::signed_in(&r);
    show_funnels(&r.state, r.site, audience, &q, Some(&path.1)).await
}

/// The funnels page for `audience`: every funnel of `site`, or only the one
/// `only` names (404 when it is not one of this site's: a funnel id never
/// opens another site's funnel, whoever asks).
pub async fn show_funnels(
    state: &WebState,
    site: Arc<Site>,
    audience: Audience,
    q: &Query,
    only: Option<&str>,
) -> Answer {
    let filters = q.filters()?;
    let now = state.clock.now();
    let (period, range_error, _) =
        resolve_or_default(q, now, &state.retention, site.time_zone.tz());
    let base = audience.base.clone();
    let params = q.range_params();
    let mut defined = funnels::list(&state.store, &site.id).await?;
    if let Some(only) = only {
        let id = uuid::Uuid::parse_str(only).map_err(|_| WebError::NotFound)?;
        defined.retain(|f| f.id == id);
        if defined.is_empty() {
            return Err(WebError::NotFound);
        }
    }
    let here = match only {
        None => format!("{base}/funnels"),
        Some(id) => format!("{base}/funnels/{id}"),
    };
    let mut shown = Vec::new();
    let mut sampled = 1.0f64;
    let steps: Vec<_> = defined.iter().map(|f| f.steps.clone()).collect();
    let all = state
        .reads()
        .funnels(&site, &filters, &steps, &period)
        .await?;
    for (n, (f, figures)) in defined.iter().zip(all).enumerate() {
        sampled = sampled.min(figures.sampled);
        let bars: Vec<(&str, i64)> = figures
            .steps
            .iter()
            .map(|s| (s.step.as_str(), s.visits))
            .collect();
        shown.push(FunnelView {
            bars: crate::reports::chart::funnel(
                &bars,
                &format!("Visits at each step of {}", f.name),
                &format!("funnel-bars-{}", n + 1),
            ),
            name: f.name.clone(),
            href: join(&format!("{base}/funnels/{}", f.id), &params, &[]),
            rows: rows(&figures),
            csv: audience.export(join(
                &format!("{base}/funnel.csv"),
                &params,
                &[("funnel", &f.id.to_string())],
            )),
        });
    }
    let mut notes = vec![
        "Each step counts visits (not visitors) that reached it after every step before it, in order, within one visit; a hit advances at most one step. Visits are those that started in the period and pass every filter.".to_owned(),
    ];
    notes.extend(filtered_read::sample_words(sampled));
    notes.extend(filtered_read::imported_note(&state.store, &site).await?);
    let hidden: Vec<(&str, &str)> = vec![];
    // Funnels read the visit store, whether filtered or not.
    let behind = lags(state).behind(VISIT_STORE).map(behind_words);
    let page = FunnelsPage {
        nav: audience.nav,
        shared: audience.shared,
        controls: controls(&here, &hidden, q, &period, range_error.as_ref()),
        chips: FilterChips::of(q, &here, &filters),
        funnels: shown,
        back_href: join(&base, &params, &[]),
        all_href: only.map(|_| join(&format!("{base}/funnels"), &params, &[])),
        notes,
        behind,
        site,
    };
    timed(state, audience.started);
    Ok(render(status_of(range_error.as_ref()), &page))
}

#[derive(Deserialize)]
pub struct FunnelChoice {
    funnel: Option<String>,
}

/// `GET /sites/{id}/funnel.csv?funnel=<id>`: one funnel's steps, with the
/// range and the filters.
pub async fn funnel_csv(
    CsvRequest(r): CsvRequest,
    q: Query,
    choice: web::Query<FunnelChoice>,
) -> CsvAnswer {
    let filters = q.filters()?;
    let period = resolve_kept(&q, &r.state, r.site.time_zone.tz())?;
    let id = choice
        .funnel
        .as_deref()
        .and_then(|f| uuid::Uuid::parse_str(f).ok())
        .ok_or_else(|| WebError::invalid("Name one of the site's funnels: funnel=<id>."))?;
    let defined = funnels::list(&r.state.store, &r.site.id).await?;
    let funnel = defined
        .into_iter()
        .find(|f| f.id == id)
        .ok_or(WebError::NotFound)?;
    let figures = r
        .state
        .reads()
        .funnel(&r.site, &filters, &funnel.steps, &period)
        .await?;
    let plain = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{:.1}", v * 100.0));
    let body = csv::table(
        &[
            "step",
            "visits",
            "conversion_from_previous_percent",
            "conversion_from_start_percent",
            "drop_off",
        ],
        (0..figures.steps.len()).map(|i| {
            vec![
                figures.steps[i].step.clone(),
                figures.steps[i].visits.to_string(),
                plain(figures.from_previous(i)),
                plain(figures.from_start(i)),
                figures.drop_off(i).to_string(),
            ]
        }),
    );
    timed(&r.state, r.started);
    let mut answer = csv_header(&format!(
        "{}_funnel_{}.csv",
        file_stem(&r.site, None, period.from, period.to),
        slug(&funnel.name)
    ));
    behind_header(&mut answer, &r.state, VISIT_STORE);
    Ok(answer.body(body))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_step_is_written_as_every_percentage_is() {
        assert_eq!(super::percent(Some(0.435)), "43.5%");
        assert_eq!(
            super::percent(Some(0.435)),
            crate::web::fmt::share(435, 1000)
        );
        assert_eq!(super::percent(None), "—");
    }
}

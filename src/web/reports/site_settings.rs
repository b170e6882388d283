//! A site's settings (name, aliases, snippets) and adding a site as its owner.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use serde::Deserialize;
use std::sync::Arc;

use super::*;
use crate::storage::sites::{ChangedBy, Site};
use crate::web::auth::{Post, Viewer};
use crate::web::error::{see_other, Answer, WebError};
use crate::web::pages::{render, Nav};
use crate::web::snippets;
use crate::web::state::WebState;

#[derive(Template)]
#[template(path = "site_settings.html")]
pub(super) struct SettingsPage {
    nav: Option<Nav>,
    site: Arc<Site>,
    script: String,
    pixel: String,
    /// What the confirmation says (`?done=site-added` or `site-saved`).
    done: Option<&'static str>,
    /// The name and aliases as typed, and what was wrong with them.
    name: String,
    aliases: String,
    time_zone: String,
    time_zones: Vec<&'static str>,
    error: Option<crate::web::forms::FormError>,
    /// The new-page cap and this hour's figures (issue 13).
    cap: crate::ingest::page_cap::CapStatus,
    overflow_path: &'static str,
}

#[derive(Deserialize)]
pub struct SettingsQuery {
    done: Option<String>,
}

pub(super) fn aliases_text(site: &Site) -> String {
    site.aliases
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn settings_page(
    state: &WebState,
    viewer: &Viewer,
    site: Arc<Site>,
    done: Option<&'static str>,
    typed: Option<(String, String, String, crate::web::forms::FormError)>,
) -> HttpResponse {
    let s = snippets::for_site(&state.public_url, &site.id);
    let cap = state
        .ingest
        .page_cap
        .status(site.domain.as_str(), state.clock.now());
    let (name, aliases, time_zone, error, status) = match typed {
        Some((name, aliases, zone, error)) => {
            (name, aliases, zone, Some(error), StatusCode::BAD_REQUEST)
        }
        None => (
            site.name.clone(),
            aliases_text(&site),
            site.time_zone.name().to_owned(),
            None,
            StatusCode::OK,
        ),
    };
    render(
        status,
        &SettingsPage {
            nav: Some(viewer.nav()),
            site,
            script: s.script,
            pixel: s.pixel,
            done,
            name,
            aliases,
            time_zone,
            time_zones: crate::domain::TimeZone::all().collect(),
            error,
            cap,
            overflow_path: crate::ingest::page_cap::OVERFLOW_PATH,
        },
    )
}

pub async fn site_settings(r: SiteRequest, q: web::Query<SettingsQuery>) -> Answer {
    let state = r.state;
    let viewer = r.viewer;
    let site = r.site;
    let done = match q.done.as_deref() {
        Some("site-added") => Some("The site was added. Embed one of these snippets; its dashboard then shows the views as they arrive."),
        Some("site-saved") => Some("The site was saved."),
        _ => None,
    };
    Ok(settings_page(&state, &viewer, site, done, None))
}

#[derive(Deserialize)]
pub struct SiteSettingsForm {
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    aliases: String,
    #[serde(default)]
    time_zone: String,
}

/// An owner (or admin) renames their site or changes its aliases; the
/// owners stay as they are (admins change them under Admin).
pub async fn save_site_settings(r: SiteRequest, form: web::Form<SiteSettingsForm>) -> Answer {
    let state = r.state;
    let viewer = r.viewer;
    let site = r.site;
    viewer.check_csrf(&form.csrf)?;
    let again = |error: crate::web::forms::FormError| {
        settings_page(
            &state,
            &viewer,
            site.clone(),
            None,
            Some((
                form.name.clone(),
                form.aliases.clone(),
                form.time_zone.clone(),
                error,
            )),
        )
    };
    let aliases = match crate::web::forms::parse_hosts(&form.aliases) {
        Ok(a) => a,
        Err(e) => return Ok(again(e)),
    };
    let by = changed_by(&viewer);
    // An owner's new aliases must be public names; the ones the site has
    // (an admin may have set an intranet host) stay.
    if by == ChangedBy::Owner {
        let added = aliases.iter().filter(|a| !site.owns_host(a.as_str()));
        if let Err(e) = crate::web::forms::check_public(added, "aliases") {
            return Ok(again(e));
        }
    }
    // An empty field (a form from before zones) keeps the zone.
    let zone = if form.time_zone.trim().is_empty() {
        site.time_zone
    } else {
        match crate::domain::TimeZone::parse(&form.time_zone) {
            Ok(z) => z,
            Err(e) => return Ok(again(crate::web::forms::FormError::new("time_zone", e))),
        }
    };
    let changes = crate::storage::sites::SiteChanges {
        name: form.name.clone(),
        aliases,
        owners: site.owners.clone(),
    };
    if let Err(e) = crate::storage::sites::update_as(&state.store, &site, changes, by).await {
        return Ok(again(crate::web::forms::site_refusal(e, "aliases")?));
    }
    if zone != site.time_zone {
        crate::storage::sites::set_time_zone(&state.store, &site, zone).await?;
    }
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, "site settings saved");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=site-saved",
        site.id
    )))
}

#[derive(Template)]
#[template(path = "site_new.html")]
pub(super) struct NewSitePage {
    nav: Option<Nav>,
    domain: String,
    name: String,
    error: Option<crate::web::forms::FormError>,
}

/// An admin vouches for the hosts they set; an owner's stay unconfirmed.
fn changed_by(viewer: &Viewer) -> ChangedBy {
    if viewer.user.is_admin() {
        ChangedBy::Admin
    } else {
        ChangedBy::Owner
    }
}

pub(super) fn may_add_sites(state: &WebState, viewer: &Viewer) -> Result<(), WebError> {
    if viewer.user.is_admin() || state.owners_add_sites {
        Ok(())
    } else {
        Err(WebError::Forbidden)
    }
}

pub async fn new_site_form(state: web::Data<WebState>, viewer: Viewer) -> Answer {
    may_add_sites(&state, &viewer)?;
    Ok(render(
        StatusCode::OK,
        &NewSitePage {
            nav: Some(viewer.nav()),
            domain: String::new(),
            name: String::new(),
            error: None,
        },
    ))
}

#[derive(Deserialize)]
pub struct NewSiteForm {
    domain: String,
    #[serde(default)]
    name: String,
}

/// An owner adds a site of their own, when the operator allows it.
pub async fn add_site(post: Post<NewSiteForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    may_add_sites(&state, &viewer)?;
    let again = |error: crate::web::forms::FormError| {
        render(
            StatusCode::BAD_REQUEST,
            &NewSitePage {
                nav: Some(viewer.nav()),
                domain: form.domain.clone(),
                name: form.name.clone(),
                error: Some(error),
            },
        )
    };
    let domain = match crate::domain::DomainName::from_input(&form.domain) {
        Ok(d) => d,
        Err(e) => return Ok(again(crate::web::forms::FormError::new("domain", e))),
    };
    let by = changed_by(&viewer);
    if by == ChangedBy::Owner {
        if let Err(e) = crate::web::forms::check_public([&domain], "domain") {
            return Ok(again(e));
        }
        // A bound on what one owner can make the instance keep (and on
        // hosts claimed in bulk).
        let owned = crate::storage::sites::count_owned(&state.store, viewer.user.id).await?;
        if owned >= state.owner_max_sites {
            return Ok(again(crate::web::forms::FormError::new(
                "domain",
                format!(
                    "You already own {owned} sites, the most an owner may add: ask an administrator"
                ),
            )));
        }
    }
    let new = crate::storage::sites::NewSite {
        domain,
        aliases: vec![],
        name: Some(form.name.trim().to_owned()).filter(|n| !n.is_empty()),
        owners: vec![viewer.user.id],
        time_zone: crate::domain::TimeZone::UTC,
    };
    let site =
        match crate::storage::sites::insert_as(&state.store, new, state.clock.now(), by).await {
            Ok(site) => site,
            Err(e) => return Ok(again(crate::web::forms::site_refusal(e, "domain")?)),
        };
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, "site added by its owner");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=site-added",
        site.id
    )))
}

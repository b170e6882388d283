//! A site's settings (name, aliases, time zone, snippets, page cap, goals,
//! imports) and adding a site as its owner: the pages and their handlers,
//! none of them a report.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use serde::Deserialize;
use std::sync::Arc;

use super::reports::SiteRequest;
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
    /// Why the snippets cannot count visitors' views, if they cannot.
    url_warning: Option<String>,
    /// What the confirmation says (`?done=site-added` or `site-saved`).
    done: Option<&'static str>,
    /// The name and aliases as typed, and what was wrong with them.
    name: String,
    aliases: String,
    time_zone: String,
    time_zones: Vec<&'static str>,
    error: Option<crate::web::forms::FormError>,
    /// The new-page cap and this hour's figures.
    cap: crate::ingest::page_cap::CapStatus,
    /// Views counted under the overflow page today (UTC), from the
    /// database; `None` when it could not be read.
    overflow_today: Option<i64>,
    /// Admins may set the site's own cap; what they typed, and why it was
    /// refused.
    is_admin: bool,
    cap_input: String,
    cap_error: Option<String>,
    overflow_path: &'static str,
    /// How long each level of the site's figures is kept (the instance's
    /// retention, in force for every site): minutes, hours, days.
    retention: [String; 3],
    /// The goal form as typed (kind and name), and why it was refused.
    goal_kind: String,
    goal_name: String,
    goal_error: Option<crate::web::forms::FormError>,
    max_goals: usize,
    /// The site's imports (`tickertape import`), as lines to show; `None`
    /// when the database did not answer.
    imports: Option<Vec<ImportLine>>,
    /// The site's funnels (`super::funnels`); `None` when the database did
    /// not answer.
    funnels: Option<Vec<crate::storage::funnels::Funnel>>,
    max_funnels: usize,
}

/// One import as the settings page shows it.
pub(super) struct ImportLine {
    kind: String,
    file: String,
    rows: String,
    views: String,
    events: String,
    overlap_days: String,
    state: String,
}

impl From<crate::storage::imports::ImportRecord> for ImportLine {
    fn from(i: crate::storage::imports::ImportRecord) -> Self {
        let n = |v: u64| crate::web::fmt::thousands(&(v as i64));
        let list = |days: Vec<String>| days.join(", ");
        let skipped = list(i.skipped_days.iter().map(|d| d.to_string()).collect());
        let replaced = list(i.replaced.iter().map(|r| r.day.to_string()).collect());
        ImportLine {
            kind: i.kind,
            // The name only: where it sits on the server is nobody's
            // business here.
            file: std::path::Path::new(&i.file)
                .file_name()
                .map_or(i.file.clone(), |n| n.to_string_lossy().into_owned()),
            rows: n(i.rows),
            views: n(i.views),
            events: n(i.events),
            overlap_days: match (skipped.is_empty(), replaced.is_empty()) {
                (true, true) => "none".into(),
                (false, true) => format!("skipped {skipped}"),
                (true, false) => format!("replaced {replaced}"),
                (false, false) => format!("skipped {skipped}; replaced {replaced}"),
            },
            state: match i.finished_at {
                Some(at) => format!("done {}", at.format("%Y-%m-%d %H:%M UTC")),
                None => "incomplete: run the same import again to finish it".into(),
            },
        }
    }
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

/// Views counted under the site's overflow page today (UTC).
async fn overflow_today(state: &WebState, site: &Site) -> Option<i64> {
    let page = format!("{}{}", site.domain, crate::ingest::page_cap::OVERFLOW_PATH);
    let day = crate::storage::Resolution::Day.floor(state.clock.now());
    match crate::storage::buckets::day_views(&state.store, &page, day).await {
        Ok(views) => Some(views),
        Err(e) => {
            tracing::warn!(error = %crate::telemetry::chain(&e), "could not read the overflow page's views");
            None
        }
    }
}

/// What the site settings form and the page-cap form typed, when one is
/// shown again with an error.
pub(super) enum Typed {
    Settings(String, String, String, crate::web::forms::FormError),
    Cap(String, String),
    /// The goal form's kind and name.
    Goal(String, String, crate::web::forms::FormError),
}

pub(super) async fn settings_page(
    state: &WebState,
    viewer: &Viewer,
    site: Arc<Site>,
    done: Option<&'static str>,
    typed: Option<Typed>,
) -> HttpResponse {
    let s = snippets::for_site(&state.public_url, &site.id);
    let cap = state
        .ingest
        .page_cap
        .status(site.domain.as_str(), state.clock.now(), site.page_cap);
    let overflow_today = overflow_today(state, &site).await;
    let imports =
        match crate::storage::imports::list(&state.store, Some(&site.id.to_string())).await {
            Ok(list) => Some(list.into_iter().map(ImportLine::from).collect()),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "the site's imports could not be read");
                None
            }
        };
    let funnels = match crate::storage::funnels::list(&state.store, &site.id).await {
        Ok(list) => Some(list),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "the site's funnels could not be read");
            None
        }
    };
    let (goal_kind, goal_name, goal_error, typed) = match typed {
        Some(Typed::Goal(kind, name, error)) => (kind, name, Some(error), None),
        other => ("event".to_owned(), String::new(), None, other),
    };
    let (cap_input, cap_error, typed) = match typed {
        Some(Typed::Cap(input, error)) => (input, Some(error), None),
        Some(Typed::Settings(a, b, c, d)) => (site.page_cap.to_string(), None, Some((a, b, c, d))),
        _ => (site.page_cap.to_string(), None, None),
    };
    let other_refused = cap_error.is_some() || goal_error.is_some();
    let (name, aliases, time_zone, error, status) = match typed {
        Some((name, aliases, zone, error)) => {
            (name, aliases, zone, Some(error), StatusCode::BAD_REQUEST)
        }
        None => (
            site.name.clone(),
            aliases_text(&site),
            site.time_zone.name().to_owned(),
            None,
            if other_refused {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            },
        ),
    };
    render(
        status,
        &SettingsPage {
            nav: Some(viewer.nav()),
            site,
            script: s.script,
            pixel: s.pixel,
            url_warning: snippets::url_warning(&state.public_url),
            done,
            name,
            aliases,
            time_zone,
            time_zones: crate::domain::TimeZone::all().collect(),
            error,
            cap,
            overflow_today,
            is_admin: viewer.user.is_admin(),
            cap_input,
            cap_error,
            overflow_path: crate::ingest::page_cap::OVERFLOW_PATH,
            retention: [
                crate::domain::Resolution::Minute,
                crate::domain::Resolution::Hour,
                crate::domain::Resolution::Day,
            ]
            .map(|level| state.retention.describe(level)),
            goal_kind,
            goal_name,
            goal_error,
            max_goals: crate::domain::MAX_GOALS_PER_SITE,
            imports,
            funnels,
            max_funnels: crate::domain::funnel::MAX_FUNNELS_PER_SITE,
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
        Some("cap-saved") => Some("The site's new-page cap was saved."),
        Some("goal-added") => Some("The goal was added."),
        Some("goal-removed") => Some("The goal was removed."),
        Some("funnel-added") => Some("The funnel was added."),
        Some("funnel-removed") => Some("The funnel was removed."),
        _ => None,
    };
    Ok(settings_page(&state, &viewer, site, done, None).await)
}

#[derive(Deserialize)]
pub struct PageCapForm {
    csrf: String,
    #[serde(default)]
    page_cap: String,
}

/// An admin sets the site's own new-page cap: `default`, `none` or new
/// pages per hour.
pub async fn save_page_cap(r: SiteRequest, form: web::Form<PageCapForm>) -> Answer {
    let (state, viewer, site) = (r.state, r.viewer, r.site);
    viewer.check_csrf(&form.csrf)?;
    if !viewer.user.is_admin() {
        return Err(WebError::Forbidden);
    }
    let cap = match crate::domain::PageCapSetting::parse(&form.page_cap) {
        Ok(cap) => cap,
        Err(e) => {
            let typed: String = form.page_cap.chars().take(40).collect();
            return Ok(settings_page(
                &state,
                &viewer,
                site,
                None,
                Some(Typed::Cap(typed, e.to_string())),
            )
            .await);
        }
    };
    crate::storage::sites::set_page_cap(&state.store, &site, cap).await?;
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, %cap, "site page cap set");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=cap-saved#page-cap",
        site.id
    )))
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
            Some(Typed::Settings(
                form.name.clone(),
                form.aliases.clone(),
                form.time_zone.clone(),
                error,
            )),
        )
    };
    // Every field is checked before any refusal is shown, so each wrong
    // one is marked at once.
    let mut refusals = crate::web::forms::Refusals::default();
    let by = changed_by(&viewer);
    // An owner's new aliases must be public names; the ones the site has
    // (an admin may have set an intranet host) stay.
    let aliases = refusals.check(crate::web::forms::parse_hosts(&form.aliases).and_then(
        |aliases| {
            if by == ChangedBy::Owner {
                let added = aliases.iter().filter(|a| !site.owns_host(a.as_str()));
                crate::web::forms::check_public(added, "aliases")?;
            }
            Ok(aliases)
        },
    ));
    // An empty field (a form from before zones) keeps the zone.
    let zone = refusals.check(if form.time_zone.trim().is_empty() {
        Ok(site.time_zone)
    } else {
        crate::domain::TimeZone::parse(&form.time_zone)
            .map_err(|e| crate::web::forms::FormError::new("time_zone", e))
    });
    let (Some(aliases), Some(zone)) = (aliases, zone) else {
        let refused = refusals.into_error().expect("a field was refused");
        return Ok(again(refused).await);
    };
    let changes = crate::storage::sites::SiteChanges {
        name: form.name.clone(),
        aliases,
        owners: site.owners.clone(),
    };
    if let Err(e) = crate::storage::sites::update_as(&state.store, &site, changes, by).await {
        return Ok(again(crate::web::forms::site_refusal(e, "aliases")?).await);
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

#[derive(Deserialize)]
pub struct GoalForm {
    csrf: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    /// An event goal's property: only its events carrying this value
    /// count (both empty: every event of the name).
    #[serde(default)]
    prop_key: String,
    #[serde(default)]
    prop_value: String,
}

/// An owner (or admin) marks an event or a page path as one of the site's
/// goals.
pub async fn add_goal(r: SiteRequest, form: web::Form<GoalForm>) -> Answer {
    let (state, viewer, site) = (r.state, r.viewer, r.site);
    viewer.check_csrf(&form.csrf)?;
    use crate::storage::sites::GoalChangeError;
    use crate::web::forms::FormError;
    let refused = |error: FormError| {
        // What was typed comes back bounded: the page must stay small even
        // when the post was not.
        let name: String = form.name.chars().take(600).collect();
        let kind = if form.kind == "page" { "page" } else { "event" };
        settings_page(
            &state,
            &viewer,
            site.clone(),
            None,
            Some(Typed::Goal(kind.to_owned(), name, error)),
        )
    };
    use crate::domain::{Goal, GoalError};
    let parsed = match form.kind.as_str() {
        "event" => Goal::parse_event_with(&form.name, &form.prop_key, &form.prop_value),
        kind => Goal::parse(kind, &form.name),
    };
    let goal = match parsed {
        Ok(goal) => goal,
        Err(e @ GoalError::UnknownKind) => return Ok(refused(FormError::new("goal_kind", e)).await),
        Err(e @ (GoalError::PropertyHalf | GoalError::Property)) => {
            return Ok(refused(FormError::new("goal_prop", e)).await)
        }
        Err(e) => return Ok(refused(FormError::new("goal_name", e)).await),
    };
    match crate::storage::sites::add_goal(&state.store, &site.id, &goal).await {
        Ok(()) => {}
        Err(GoalChangeError::Database(e)) => return Err(e.into()),
        Err(GoalChangeError::NoSite) => return Err(WebError::NotFound),
        Err(e) => return Ok(refused(FormError::new("goal_name", e)).await),
    }
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, %goal, "goal added");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=goal-added#goals",
        site.id
    )))
}

#[derive(Deserialize)]
pub struct RemoveGoalForm {
    csrf: String,
    /// The goal's stored form, as the page's Remove button carries it.
    #[serde(default)]
    goal: String,
}

pub async fn remove_goal(r: SiteRequest, form: web::Form<RemoveGoalForm>) -> Answer {
    let (state, viewer, site) = (r.state, r.viewer, r.site);
    viewer.check_csrf(&form.csrf)?;
    use crate::storage::sites::GoalChangeError;
    let Some(goal) = crate::domain::Goal::from_stored(&form.goal) else {
        return Err(WebError::invalid("That is not a goal of this site."));
    };
    match crate::storage::sites::remove_goal(&state.store, &site.id, &goal).await {
        Ok(()) => {}
        Err(GoalChangeError::Database(e)) => return Err(e.into()),
        Err(GoalChangeError::NoSite) => return Err(WebError::NotFound),
        Err(e) => {
            let error = crate::web::forms::FormError::new("goals", e);
            let typed = Typed::Goal("event".to_owned(), String::new(), error);
            return Ok(settings_page(&state, &viewer, site, None, Some(typed)).await);
        }
    }
    state.directory.reload(&state.store).await?;
    tracing::info!(user = %viewer.user.email, site = %site.domain, %goal, "goal removed");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=goal-removed#goals",
        site.id
    )))
}

#[derive(Template)]
#[template(path = "site_new.html")]
pub(super) struct NewSitePage {
    nav: Option<Nav>,
    domain: String,
    name: String,
    time_zone: String,
    time_zones: Vec<&'static str>,
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
            time_zone: String::new(),
            time_zones: crate::domain::TimeZone::all().collect(),
            error: None,
        },
    ))
}

#[derive(Deserialize)]
pub struct NewSiteForm {
    domain: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    time_zone: String,
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
                time_zone: form.time_zone.clone(),
                time_zones: crate::domain::TimeZone::all().collect(),
                error: Some(error),
            },
        )
    };
    // Both fields are checked before a refusal is shown (each marked).
    let mut refusals = crate::web::forms::Refusals::default();
    let by = changed_by(&viewer);
    let domain = refusals.check(
        crate::domain::DomainName::from_input(&form.domain)
            .map_err(|e| crate::web::forms::FormError::new("domain", e))
            .and_then(|domain| {
                if by == ChangedBy::Owner {
                    crate::web::forms::check_public([&domain], "domain")?;
                }
                Ok(domain)
            }),
    );
    // Empty is UTC, as on the admin's form; anything else must be a zone.
    let time_zone = refusals.check(if form.time_zone.trim().is_empty() {
        Ok(crate::domain::TimeZone::UTC)
    } else {
        crate::domain::TimeZone::parse(&form.time_zone)
            .map_err(|e| crate::web::forms::FormError::new("time_zone", e))
    });
    let (Some(domain), Some(time_zone)) = (domain, time_zone) else {
        return Ok(again(refusals.into_error().expect("a field was refused")));
    };
    let new = crate::storage::sites::NewSite {
        domain,
        aliases: vec![],
        name: Some(form.name.trim().to_owned()).filter(|n| !n.is_empty()),
        owners: vec![viewer.user.id],
        time_zone,
    };
    let now = state.clock.now();
    let creator = match by {
        ChangedBy::Owner => crate::storage::sites::Creator::Owner {
            user: viewer.user.id,
            max_sites: state.owner_max_sites,
        },
        ChangedBy::Admin => crate::storage::sites::Creator::Admin,
    };
    let added = crate::storage::sites::create(&state.store, new, creator, now).await;
    let site = match added {
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

//! Admin pages: sites, users and the system overview. Every handler takes
//! `Admin` (owners get 403), and every POST checks the CSRF token before
//! anything else.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

use super::auth::{Admin, AdminPost, Confirmed, Viewer};
use super::error::{see_other, Answer, WebError};
use super::forms::{parse_hosts, site_refusal, FormError};
use super::pages::{render, render_form, Nav};
use super::state::WebState;
use crate::accounts::password::NewPassword;
use crate::accounts::{sessions, users, Role, User};
use crate::domain::{DomainName, Email, SiteId, TimeZone};
use crate::ingest::pixel::Outcome;
use crate::storage::sites::{self, NewSite, Site, SiteChanges};
use crate::storage::system;

type Data = web::Data<WebState>;
type Done = web::Query<DoneQuery>;

/// Confirmations after a change, by the `done` query parameter of the page
/// the change redirects to.
#[derive(Deserialize)]
pub struct DoneQuery {
    done: Option<String>,
}

fn confirmation(q: &DoneQuery) -> Option<&'static str> {
    Some(match q.done.as_deref()? {
        "site-saved" => "The site was saved.",
        "site-deleted" => {
            "The site was deleted: it counts no more views, and its data is removed within minutes."
        }
        "user-added" => "The user was added.",
        "role-set" => "The role was changed.",
        "password-reset" => "The password was reset: for 7 days it logs in only to choose a new one; the user's sessions and API tokens were ended.",
        "user-deleted" => "The user was deleted.",
        _ => return None,
    })
}

fn site_by_id(state: &WebState, id: &str) -> Result<Arc<Site>, WebError> {
    let id = SiteId::parse(id).map_err(|_| WebError::NotFound)?;
    state.directory.by_id(&id).ok_or(WebError::NotFound)
}

/// Owner e-mails separated by commas, spaces or new lines; each must have
/// an account.
async fn parse_owners(
    state: &WebState,
    raw: &str,
) -> Result<Result<Vec<Uuid>, FormError>, WebError> {
    let mut owners = Vec::new();
    for part in raw
        .split([',', ' ', '\n', '\r', '\t'])
        .filter(|p| !p.is_empty())
    {
        let email = match Email::parse(part) {
            Ok(e) => e,
            Err(e) => {
                return Ok(Err(FormError::new(
                    "owners",
                    format!("“{part}” is not usable: {e}"),
                )))
            }
        };
        let Some(user) = users::find_by_email(&state.store, &email).await? else {
            return Ok(Err(FormError::new(
                "owners",
                format!("No user has the e-mail {email}: add the user first under Users"),
            )));
        };
        if !owners.contains(&user.id) {
            owners.push(user.id);
        }
    }
    Ok(Ok(owners))
}

async fn emails_by_id(state: &WebState) -> Result<HashMap<Uuid, String>, WebError> {
    Ok(users::list(&state.store)
        .await?
        .into_iter()
        .map(|u| (u.id, u.email.to_string()))
        .collect())
}

// -------------------------------------------------------------------- sites

pub struct SiteAdminRow {
    pub id: String,
    pub name: String,
    pub domain: String,
    pub aliases: String,
    pub owners: String,
    pub time_zone: &'static str,
}

/// The add-site form as typed, to show it again after a refusal.
#[derive(Default)]
pub struct SiteInput {
    pub domain: String,
    pub aliases: String,
    pub name: String,
    pub owners: String,
    pub time_zone: String,
}

#[derive(Template)]
#[template(path = "admin_sites.html")]
struct SitesPage {
    nav: Option<Nav>,
    rows: Vec<SiteAdminRow>,
    input: SiteInput,
    error: Option<FormError>,
    done: Option<&'static str>,
    time_zones: Vec<&'static str>,
}

fn owner_list(site: &Site, emails: &HashMap<Uuid, String>) -> String {
    site.owners
        .iter()
        .filter_map(|id| emails.get(id).cloned())
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn sites_page(state: Data, Admin(viewer): Admin, q: Done) -> Answer {
    let input = SiteInput::default();
    sites_page_with(&state, &viewer, input, None, confirmation(&q)).await
}

async fn sites_page_with(
    state: &WebState,
    viewer: &Viewer,
    input: SiteInput,
    error: Option<FormError>,
    done: Option<&'static str>,
) -> Answer {
    let emails = emails_by_id(state).await?;
    let mut all = state.directory.all();
    all.sort_by(|a, b| a.domain.cmp(&b.domain));
    let rows = all
        .iter()
        .map(|s| SiteAdminRow {
            time_zone: s.time_zone.name(),
            id: s.id.to_string(),
            name: s.name.clone(),
            domain: s.domain.to_string(),
            aliases: s
                .aliases
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            owners: owner_list(s, &emails),
        })
        .collect();
    Ok(render_form(
        error.is_some(),
        &SitesPage {
            nav: Some(viewer.nav().in_section("admin")),
            rows,
            input,
            error,
            done,
            time_zones: TimeZone::all().collect(),
        },
    ))
}

#[derive(Deserialize)]
pub struct NewSiteForm {
    domain: String,
    #[serde(default)]
    aliases: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    owners: String,
    /// IANA name; empty: UTC.
    #[serde(default)]
    time_zone: String,
}

pub async fn create_site(post: AdminPost<NewSiteForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let input = SiteInput {
        domain: form.domain.clone(),
        aliases: form.aliases.clone(),
        name: form.name.clone(),
        owners: form.owners.clone(),
        time_zone: form.time_zone.clone(),
    };
    // Every field is checked before a refusal is shown, so each wrong one
    // is marked at once.
    let checked = async {
        let mut refusals = super::forms::Refusals::default();
        let domain = refusals
            .check(DomainName::from_input(&form.domain).map_err(|e| FormError::new("domain", e)));
        let aliases = refusals.check(parse_hosts(&form.aliases));
        let time_zone = refusals.check(if form.time_zone.trim().is_empty() {
            Ok(TimeZone::UTC)
        } else {
            TimeZone::parse(&form.time_zone).map_err(|e| FormError::new("time_zone", e))
        });
        let owners = match parse_owners(&state, &form.owners).await {
            Ok(result) => refusals.check(result),
            Err(e) => return Ok(Err(e)),
        };
        match (domain, aliases, time_zone, owners) {
            (Some(domain), Some(aliases), Some(time_zone), Some(owners)) => {
                Ok::<_, FormError>(Ok(NewSite {
                    domain,
                    aliases,
                    name: Some(form.name.trim().to_owned()).filter(|n| !n.is_empty()),
                    owners,
                    time_zone,
                }))
            }
            _ => Err(refusals.into_error().expect("a field was refused")),
        }
    };
    let new = match checked.await {
        Ok(Ok(new)) => new,
        Ok(Err(e)) => return Err(e),
        Err(refused) => return sites_page_with(&state, &viewer, input, Some(refused), None).await,
    };
    let site =
        match sites::create(&state.store, new, sites::Creator::Admin, state.clock.now()).await {
            Ok(site) => site,
            Err(e) => {
                let refused = site_refusal(e, "domain")?;
                return sites_page_with(&state, &viewer, input, Some(refused), None).await;
            }
        };
    state.directory.reload(&state.store).await?;
    tracing::info!(admin = %viewer.user.email, site = %site.domain, "site created");
    Ok(see_other(&format!(
        "/sites/{}/settings?done=site-added",
        site.id
    )))
}

#[derive(Template)]
#[template(path = "admin_site.html")]
struct SitePage {
    nav: Option<Nav>,
    site: Arc<Site>,
    name: String,
    aliases: String,
    owners: String,
    error: Option<FormError>,
    done: Option<&'static str>,
}

pub async fn site_page(
    state: web::Data<WebState>,
    Admin(viewer): Admin,
    id: web::Path<String>,
    q: web::Query<DoneQuery>,
) -> Answer {
    let site = site_by_id(&state, &id)?;
    let emails = emails_by_id(&state).await?;
    let page = SitePage {
        nav: Some(viewer.nav().in_section("admin")),
        name: site.name.clone(),
        aliases: site
            .aliases
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        owners: owner_list(&site, &emails),
        site,
        error: None,
        done: confirmation(&q),
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
pub struct SiteForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    aliases: String,
    #[serde(default)]
    owners: String,
}

pub async fn update_site(post: AdminPost<SiteForm>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let site = site_by_id(&state, &id)?;
    let again = |error: FormError| {
        render(
            StatusCode::BAD_REQUEST,
            &SitePage {
                nav: Some(viewer.nav().in_section("admin")),
                site: site.clone(),
                name: form.name.clone(),
                aliases: form.aliases.clone(),
                owners: form.owners.clone(),
                error: Some(error),
                done: None,
            },
        )
    };
    let aliases = match parse_hosts(&form.aliases) {
        Ok(a) => a,
        Err(e) => return Ok(again(e)),
    };
    let owners = match parse_owners(&state, &form.owners).await? {
        Ok(o) => o,
        Err(e) => return Ok(again(e)),
    };
    let changes = SiteChanges {
        name: form.name.clone(),
        aliases,
        owners,
    };
    if let Err(e) = sites::update(&state.store, &site, changes).await {
        return Ok(again(site_refusal(e, "aliases")?));
    }
    state.directory.reload(&state.store).await?;
    Ok(see_other(&format!(
        "/admin/sites/{}?done=site-saved",
        site.id
    )))
}

#[derive(Template)]
#[template(path = "admin_site_delete.html")]
struct DeletePage {
    nav: Option<Nav>,
    site: Arc<Site>,
}

pub async fn delete_site_page(
    state: web::Data<WebState>,
    Admin(viewer): Admin,
    id: web::Path<String>,
) -> Answer {
    let site = site_by_id(&state, &id)?;
    Ok(render(
        StatusCode::OK,
        &DeletePage {
            nav: Some(viewer.nav().in_section("admin")),
            site,
        },
    ))
}

#[derive(Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    confirm: String,
}

pub async fn delete_site(post: AdminPost<DeleteForm>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let site = site_by_id(&state, &id)?;
    if form.confirm.trim().to_lowercase() != site.domain.as_str() {
        return Err(WebError::Invalid(format!(
            "type the domain {} to confirm the deletion",
            site.domain
        )));
    }
    sites::mark_deleted(&state.store, &site, state.clock.now()).await?;
    state.directory.reload(&state.store).await?;
    tracing::info!(admin = %viewer.user.email, site = %site.domain, "site marked deleted; its buckets are purged after the other instances have dropped it");
    Ok(see_other("/admin/sites?done=site-deleted"))
}

// -------------------------------------------------------------------- users

pub struct UserRow {
    pub id: String,
    pub email: String,
    pub role: &'static str,
    pub created: String,
    pub is_self: bool,
    pub two_factor: bool,
}

#[derive(Template)]
#[template(path = "admin_users.html")]
struct UsersPage {
    nav: Option<Nav>,
    rows: Vec<UserRow>,
    /// The add-user form as typed (never the password).
    email: String,
    role: String,
    error: Option<FormError>,
    /// The error is about the add-user form (not a row of the table).
    add_refused: bool,
    done: Option<&'static str>,
}

pub async fn users_page(state: web::Data<WebState>, Admin(viewer): Admin, q: Done) -> Answer {
    let (email, role) = (String::new(), "owner".to_owned());
    users_page_with(&state, &viewer, email, role, None, confirmation(&q)).await
}

/// The users page with a refusal in the table (role, password reset,
/// deletion): the add form stays empty.
async fn users_table_refusal(state: &WebState, viewer: &Viewer, refused: FormError) -> Answer {
    let (email, role) = (String::new(), "owner".to_owned());
    users_page_with(state, viewer, email, role, Some(refused), None).await
}

async fn users_page_with(
    state: &WebState,
    viewer: &Viewer,
    email: String,
    role: String,
    error: Option<FormError>,
    done: Option<&'static str>,
) -> Answer {
    let rows = users::list(&state.store)
        .await?
        .into_iter()
        .map(|u: User| UserRow {
            id: u.id.to_string(),
            email: u.email.to_string(),
            role: u.role.as_str(),
            created: u.created_at.format("%Y-%m-%d").to_string(),
            is_self: u.id == viewer.user.id,
            two_factor: u.two_factor,
        })
        .collect();
    Ok(render_form(
        error.is_some(),
        &UsersPage {
            nav: Some(viewer.nav().in_section("admin")),
            rows,
            email,
            role,
            add_refused: error.as_ref().is_some_and(|e| e.field != "rows"),
            error,
            done,
        },
    ))
}

#[derive(Deserialize)]
pub struct NewUserForm {
    email: String,
    role: String,
    password: String,
}

fn parse_role(raw: &str) -> Result<Role, FormError> {
    Role::parse(raw).ok_or_else(|| FormError::new("role", "Choose admin or owner"))
}

fn parse_password(raw: &str, field: &'static str) -> Result<NewPassword, FormError> {
    NewPassword::parse(raw).map_err(|e| FormError::new(field, e))
}

pub async fn create_user(post: AdminPost<NewUserForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let checked = (|| {
        let email = Email::parse(&form.email).map_err(|e| FormError::new("email", e))?;
        let role = parse_role(&form.role)?;
        let password = parse_password(&form.password, "password")?;
        Ok::<_, FormError>((email, role, password))
    })();
    let again = |error| {
        users_page_with(
            &state,
            &viewer,
            form.email.clone(),
            form.role.clone(),
            Some(error),
            None,
        )
    };
    let (email, role, password) = match checked {
        Ok(v) => v,
        Err(e) => return again(e).await,
    };
    let user = match users::create(&state.store, email, &password, role, state.clock.now()).await {
        Ok(user) => user,
        Err(e @ users::UserError::EmailTaken(_)) => return again(FormError::new("email", e)).await,
        Err(e) => return Err(e.into()),
    };
    tracing::info!(admin = %viewer.user.email, user = %user.email, role = role.as_str(), "user created");
    Ok(see_other("/admin/users?done=user-added"))
}

fn user_id(raw: &str) -> Result<Uuid, WebError> {
    Uuid::try_parse(raw).map_err(|_| WebError::NotFound)
}

#[derive(Deserialize)]
pub struct RoleForm {
    role: String,
}

pub async fn set_role(post: AdminPost<RoleForm>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let id = user_id(&id)?;
    let refuse = |e: FormError| users_table_refusal(&state, &viewer, e);
    let role = match parse_role(&form.role) {
        Ok(r) => r,
        Err(e) => return refuse(FormError { field: "rows", ..e }).await,
    };
    match users::set_role(&state.store, id, role).await {
        Ok(()) => Ok(see_other("/admin/users?done=role-set")),
        Err(users::UserError::LastAdmin) => {
            refuse(FormError::new(
                "rows",
                "The last admin cannot become an owner: make another user admin first",
            ))
            .await
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize)]
pub struct ResetForm {
    password: String,
}

pub async fn reset_password(post: AdminPost<ResetForm>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let id = user_id(&id)?;
    let password = match parse_password(&form.password, "rows") {
        Ok(p) => p,
        Err(e) => return users_table_refusal(&state, &viewer, e).await,
    };
    // The admin knows this one: it works for a week and only to choose
    // the user's own.
    users::set_one_time_password(&state.store, id, &password, state.clock.now()).await?;
    // A reset is how a user who lost both their phone and their recovery
    // codes gets back in: two-factor login is turned off with it, to be
    // set up again.
    crate::accounts::totp::disable(&state.store, id).await?;
    // Whoever held the account before the reset is out: every session and
    // every API token ends.
    sessions::delete_for_user(&state.store, id, None).await?;
    crate::accounts::api_tokens::delete_for_user(&state.store, id).await?;
    tracing::info!(admin = %viewer.user.email, user = %id, "password reset; sessions and API tokens ended");
    Ok(see_other("/admin/users?done=password-reset"))
}

/// Deletes a user (not oneself, so the last admin always stays).
pub async fn delete_user(post: AdminPost<Confirmed>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    form.check()?;
    let id = user_id(&id)?;
    if id == viewer.user.id {
        return users_table_refusal(
            &state,
            &viewer,
            FormError::new("rows", "You cannot delete your own account"),
        )
        .await;
    }
    match users::delete(&state.store, id).await {
        Ok(()) => {}
        Err(e @ users::UserError::LastAdmin) => {
            return users_table_refusal(&state, &viewer, FormError::new("rows", e)).await
        }
        Err(e) => return Err(e.into()),
    }
    state.directory.reload(&state.store).await?;
    tracing::info!(admin = %viewer.user.email, user = %id, "user deleted");
    Ok(see_other("/admin/users?done=user-deleted"))
}

// ------------------------------------------------------------------- system

pub struct Figure {
    pub label: String,
    pub value: String,
}

#[derive(Template)]
#[template(path = "admin_system.html")]
struct SystemPage {
    nav: Option<Nav>,
    topology: system::TopologyView,
    read_preference: String,
    freshness: String,
    /// When the collections' sizes were measured.
    sizes_at: String,
    /// Per collection: its figures, the retention in force and its TTL index.
    collections: Vec<(system::CollectionStats, String, String)>,
    writer: Vec<Figure>,
    corrupt_segments: Vec<String>,
    /// Pixel outcomes since start, each count as the pages say numbers.
    outcomes: Vec<(&'static str, i64)>,
    last_run: Option<super::prealloc_runs::RunRow>,
    next_run: String,
    geoip: GeoIpView,
    /// `None`: the database did not answer.
    email: Option<super::email::SystemEmail>,
}

/// The country database the pixel uses, as the system page states it.
struct GeoIpView {
    /// Name, build date and file, or why there is none.
    summary: String,
    attribution: Option<String>,
    /// Set when countries all count as "unknown".
    warning: Option<String>,
}

impl GeoIpView {
    fn of(classifier: &crate::ingest::classifier::Classifier) -> Self {
        use crate::classify::CountryDbState;
        match classifier.countries() {
            CountryDbState::Loaded(db) => {
                let info = db.info();
                GeoIpView {
                    summary: format!(
                        "{}, built {}, from {}",
                        info.name,
                        info.built.format("%Y-%m-%d"),
                        info.path.display()
                    ),
                    attribution: Some(info.attribution.clone()),
                    // Its own README says the registry's copy has wrong
                    // entries and gets no more updates (docs/classification.md).
                    warning: info.attribution.contains("ip-location-db").then(|| {
                        "The database installed with Tickertape is free and is no longer updated on npm; some addresses have the wrong country. For accurate countries set TICKERTAPE_GEOIP_DB to a GeoLite2-Country or DB-IP Lite file.".to_owned()
                    }),
                }
            }
            CountryDbState::Missing { path, why } => GeoIpView {
                summary: format!("none: {} could not be read ({why})", path.display()),
                attribution: None,
                warning: Some(
                    "Every country counts as “unknown” until a country database is installed (make setup) or TICKERTAPE_GEOIP_DB names one (GeoLite2-Country or DB-IP, MaxMind format), and the app is restarted. Views are counted as always.".to_owned(),
                ),
            },
        }
    }
}

/// The configured retention of a bucket collection, and what its TTL
/// index says (they differ only until the next start applies the setting).
fn retention_row(
    retention: &crate::domain::Retention,
    c: &system::CollectionStats,
    ttl: Option<crate::storage::retention::TtlState>,
) -> (String, String) {
    use crate::storage::retention::TtlState;
    let kept = c.level.map_or_else(String::new, |l| retention.describe(l));
    let ttl = match ttl {
        None => "could not be read".to_owned(),
        Some(TtlState::Absent) => "none".to_owned(),
        Some(TtlState::ExpireAfter(secs)) => {
            format!("expireAfterSeconds {}", super::fmt::thousands(&secs))
        }
    };
    (kept, ttl)
}

/// `GET /admin/system`. Its reads run at once; the collections' sizes come
/// from [`system::SizeCache`] (see there why).
pub async fn system_page(state: web::Data<WebState>, Admin(viewer): Admin) -> Answer {
    let (topology, sizes, ttls, runs) = tokio::join!(
        system::topology(&state.store),
        state.bucket_sizes.read(&state.store, &state.clock),
        system::ttl_states(&state.store),
        crate::preallocation::runs::recent(&state.store, 1),
    );
    let write_behind = super::ops::WriteBehind::read(&state);
    let writer = write_behind
        .figures()
        .into_iter()
        .map(|(label, value)| Figure {
            label: label.to_owned(),
            value,
        })
        .collect();
    let stats = &state.ingest.stats;
    let page = SystemPage {
        nav: Some(viewer.nav().in_section("admin")),
        topology,
        read_preference: crate::storage::read_preference_name(state.store.read_preference())
            .to_owned(),
        freshness: super::reports::freshness(&state),
        sizes_at: super::fmt::utc(&sizes.at),
        collections: sizes
            .collections
            .into_iter()
            .zip(ttls)
            .map(|(c, ttl)| {
                let (kept, ttl) = retention_row(&state.retention, &c, ttl);
                (c, kept, ttl)
            })
            .collect(),
        writer,
        corrupt_segments: write_behind.corrupt,
        outcomes: Outcome::ALL
            .iter()
            .map(|o| {
                (
                    o.reason(),
                    i64::try_from(stats.count(*o)).unwrap_or(i64::MAX),
                )
            })
            .collect(),
        last_run: runs?.first().map(super::prealloc_runs::RunRow::from),
        next_run: super::prealloc_runs::next_run_text(&state),
        geoip: GeoIpView::of(&state.ingest.classifier),
        email: super::email::system(&state).await.ok(),
    };
    Ok(render(StatusCode::OK, &page))
}

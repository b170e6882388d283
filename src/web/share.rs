//! Share links: an owner (or admin) makes read-only links to a site's
//! reports (`/sites/<id>/share`), and anyone holding one sees the dashboard
//! and page reports under `/share/<token>`, rate-limited per client
//! address, with `Referrer-Policy: no-referrer` so the token in the address
//! never reaches another site.

use crate::web::error::Answer;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Instant;

use super::auth::{client_address, Post, Viewer};
use super::error::{see_other, WebError};
use super::forms::FormError;
use super::pages::{error_page, render_form, Nav};
use super::reports::{self, Audience};
use super::state::WebState;
use crate::domain::{AccessToken, ExpiryDays, Label, TokenKind};
use crate::storage::share_links::{self, Lookup, ShareLink, ShareLinkError};
use crate::storage::sites::Site;

/// The shared views, with the headers every answer under them carries.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/share/{token}")
            .wrap(
                actix_web::middleware::DefaultHeaders::new()
                    .add((header::REFERRER_POLICY, "no-referrer"))
                    .add(("x-robots-tag", "noindex, nofollow")),
            )
            .route("", web::get().to(shared_dashboard))
            .route("/page", web::get().to(shared_page_report))
            .route("/funnels", web::get().to(shared_funnels))
            .route("/properties", web::get().to(shared_properties))
            .route("/funnels/{funnel}", web::get().to(shared_funnel))
            .default_service(web::to(|| async {
                Err::<HttpResponse, _>(WebError::NotFound)
            })),
    );
}

// ------------------------------------------------------------ shared view

/// The site a share link opens, or the answer to give instead.
async fn open(
    req: &HttpRequest,
    state: &WebState,
    token: &str,
) -> Result<Result<Arc<Site>, HttpResponse>, WebError> {
    if let Err(wait) = state
        .share_limit
        .check(&client_address(req, state), Instant::now())
    {
        let mut page = error_page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests",
            &format!(
                "This address asked for shared reports too often. {}",
                super::fmt::try_again_in(wait)
            ),
        );
        page.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(wait.as_secs().max(1)),
        );
        return Ok(Err(page));
    }
    let refused = || {
        error_page(
            StatusCode::NOT_FOUND,
            "This link does not work",
            "The link is wrong or was revoked. Ask whoever sent it for a new one.",
        )
    };
    let Ok(secret) = AccessToken::parse(TokenKind::Share, token) else {
        return Ok(Err(refused()));
    };
    match share_links::open(&state.store, &secret, state.clock.now()).await? {
        Lookup::Live(link) => {
            let Some(site) = state.directory.by_id(&link.site()) else {
                return Ok(Err(refused()));
            };
            // A link dies with its creator's access (removed as an owner,
            // demoted, deleted): it never shows more than they may see.
            if creator_has_access(state, &link, &site).await? {
                Ok(Ok(site))
            } else {
                Ok(Err(refused()))
            }
        }
        Lookup::Expired => Ok(Err(error_page(
            StatusCode::GONE,
            "This link has expired",
            "Ask whoever sent it for a new one.",
        ))),
        Lookup::Unknown => Ok(Err(refused())),
    }
}

/// Whether the user who made `link` may still see its site.
async fn creator_has_access(
    state: &WebState,
    link: &ShareLink,
    site: &Site,
) -> Result<bool, WebError> {
    let creator = crate::accounts::users::find(&state.store, link.created_by.into()).await?;
    Ok(creator.is_some_and(|u| u.is_admin() || site.owners.contains(&u.id)))
}

fn audience(token: &str) -> Audience {
    Audience {
        nav: None,
        base: format!("/share/{token}"),
        shared: true,
        started: std::time::Instant::now(),
    }
}

type Data = web::Data<WebState>;
type Done = web::Query<crate::web::forms::DoneQuery>;
type Token = web::Path<String>;
type Q = reports::Query;

pub async fn shared_dashboard(req: HttpRequest, state: Data, token: Token, q: Q) -> Answer {
    shared(req, state, token, q, false).await
}

pub async fn shared_page_report(req: HttpRequest, state: Data, token: Token, q: Q) -> Answer {
    shared(req, state, token, q, true).await
}

/// A shared view: the dashboard, or a page report when `page`.
async fn shared(req: HttpRequest, state: Data, token: Token, q: Q, page: bool) -> Answer {
    let audience = audience(&token);
    let site = match open(&req, &state, &token).await? {
        Ok(site) => site,
        Err(refused) => return Ok(refused),
    };
    if page {
        reports::show_page_report(&state, site, audience, &q).await
    } else {
        reports::show_dashboard(&state, &q, site, audience).await
    }
}

/// The site's funnels, read-only (defining and removing stay on the
/// settings page, behind a login).
pub async fn shared_funnels(req: HttpRequest, state: Data, token: Token, q: Q) -> Answer {
    let audience = audience(&token);
    match open(&req, &state, &token).await? {
        Ok(site) => reports::show_funnels(&state, site, audience, &q, None).await,
        Err(refused) => Ok(refused),
    }
}

/// The site's custom properties, read-only (no CSV).
pub async fn shared_properties(
    req: HttpRequest,
    state: Data,
    token: Token,
    q: Q,
    choice: web::Query<reports::KeyChoice>,
) -> Answer {
    let audience = audience(&token);
    match open(&req, &state, &token).await? {
        Ok(site) => reports::show_properties(&state, site, audience, &q, &choice).await,
        Err(refused) => Ok(refused),
    }
}

/// One funnel of the link's site; another site's funnel id is not found.
pub async fn shared_funnel(
    req: HttpRequest,
    state: Data,
    path: web::Path<(String, String)>,
    q: Q,
) -> Answer {
    let (token, funnel) = path.into_inner();
    let audience = audience(&token);
    match open(&req, &state, &token).await? {
        Ok(site) => reports::show_funnels(&state, site, audience, &q, Some(&funnel)).await,
        Err(refused) => Ok(refused),
    }
}

// ------------------------------------------------------------- management

pub struct LinkRow {
    /// Where its revoke button posts.
    pub revoke: String,
    pub label: String,
    pub created: String,
    pub expires: String,
    pub last_used: String,
}

pub struct Created {
    pub label: String,
    pub url: String,
}

#[derive(Template)]
#[template(path = "site_share.html")]
struct SharePage {
    nav: Option<Nav>,
    site: Arc<Site>,
    rows: Vec<LinkRow>,
    created: Option<Created>,
    done: Option<&'static str>,
    error: Option<FormError>,
    label: String,
    expires: String,
}

fn row(link: &ShareLink, now: chrono::DateTime<chrono::Utc>, creator_has_access: bool) -> LinkRow {
    let utc = |t: &bson::DateTime| super::fmt::utc(&t.to_chrono());
    LinkRow {
        revoke: format!(
            "/sites/{}/share/{}/revoke",
            link.site(),
            uuid::Uuid::from(link.id)
        ),
        label: link.label.clone(),
        created: utc(&link.created_at),
        expires: match &link.expires_at {
            _ if !creator_has_access => {
                "stopped: whoever made it no longer has access to this site".to_owned()
            }
            None => "never".to_owned(),
            Some(t) if link.expired(now) => format!("expired {}", utc(t)),
            Some(t) => utc(t),
        },
        last_used: link.last_used_at.as_ref().map_or("never".to_owned(), utc),
    }
}

struct Typed {
    label: String,
    expires: String,
    error: FormError,
}

async fn page(
    state: &WebState,
    viewer: &Viewer,
    site: Arc<Site>,
    created: Option<Created>,
    done: Option<&'static str>,
    typed: Option<Typed>,
) -> Result<HttpResponse, WebError> {
    let links = share_links::list_for_site(&state.store, &site.id).await?;
    let now = state.clock.now();
    let mut rows = Vec::with_capacity(links.len());
    for link in &links {
        rows.push(row(
            link,
            now,
            creator_has_access(state, link, &site).await?,
        ));
    }
    Ok(render_form(
        typed.is_some(),
        &SharePage {
            nav: Some(viewer.nav()),
            rows,
            site,
            created,
            done,
            label: typed.as_ref().map(|t| t.label.clone()).unwrap_or_default(),
            expires: typed
                .as_ref()
                .map(|t| t.expires.clone())
                .unwrap_or_default(),
            error: typed.map(|t| t.error),
        },
    ))
}

pub async fn share_page(state: Data, viewer: Viewer, id: Token, q: Done) -> Answer {
    let site = reports::visible_site(&state, &viewer, &id)?;
    let done = match q.done.as_deref() {
        Some("revoked") => Some("The link was revoked: it no longer opens anything."),
        _ => None,
    };
    page(&state, &viewer, site, None, done, None).await
}

#[derive(Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    label: String,
    #[serde(default)]
    expires: String,
}

pub async fn create(
    post: Post<CreateForm>,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let (state, viewer, form) = post.into_parts();
    let site = reports::visible_site(&state, &viewer, &id)?;
    let again = |field: &'static str, message: String| Typed {
        label: form.label.clone(),
        expires: form.expires.clone(),
        error: FormError::new(field, message),
    };
    let refuse = |typed| page(&state, &viewer, site.clone(), None, None, Some(typed));
    let label = match Label::parse(&form.label) {
        Ok(l) => l,
        Err(e) => return refuse(again("label", e.to_string())).await,
    };
    let expiry = match ExpiryDays::parse(&form.expires) {
        Ok(e) => e,
        Err(e) => return refuse(again("expires", e.to_string())).await,
    };
    let now = state.clock.now();
    match share_links::create(&state.store, &site.id, viewer.user.id, &label, expiry, now).await {
        Ok((link, secret)) => {
            tracing::info!(user = %viewer.user.email, site = %site.domain, link = %uuid::Uuid::from(link.id), "share link created");
            let created = Created {
                label: link.label,
                url: format!("{}/share/{}", state.public_url, secret.expose()),
            };
            page(&state, &viewer, site, Some(created), None, None).await
        }
        Err(ShareLinkError::Database(e)) => Err(e.into()),
        Err(e @ ShareLinkError::TooMany) => refuse(again("label", e.to_string())).await,
    }
}

#[derive(Deserialize)]
pub struct RevokeForm {
    csrf: String,
    #[serde(default)]
    confirm: String,
}

pub async fn revoke(
    state: web::Data<WebState>,
    viewer: Viewer,
    path: web::Path<(String, String)>,
    form: web::Form<RevokeForm>,
) -> Result<HttpResponse, WebError> {
    viewer.check_csrf(&form.csrf)?;
    crate::web::auth::confirmed(&form.confirm)?;
    let (id, link) = path.into_inner();
    let site = reports::visible_site(&state, &viewer, &id)?;
    let link = uuid::Uuid::try_parse(&link).map_err(|_| WebError::NotFound)?;
    if !share_links::revoke(&state.store, &site.id, link).await? {
        return Err(WebError::NotFound);
    }
    tracing::info!(user = %viewer.user.email, site = %site.domain, link = %link, "share link revoked");
    Ok(see_other(&format!("/sites/{}/share?done=revoked", site.id)))
}

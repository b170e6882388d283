//! Account → API tokens: create (shown once), list with last use, revoke.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use std::sync::Arc;

use super::auth::{Confirmed, Post, Viewer};
use super::error::WebError;
use super::forms::FormError;
use super::pages::{render_form, Nav};
use super::state::WebState;
use crate::accounts::api_tokens::{self, ApiToken, ApiTokenError, TokenScope};
use crate::domain::{Label, SiteId};
use crate::storage::sites::Site;

/// Largest form accepted (a name and up to a few hundred site ids).
const MAX_FORM_BYTES: usize = 32 * 1024;

pub struct TokenRow {
    /// Where its revoke button posts.
    pub revoke: String,
    pub name: String,
    pub sites: String,
    /// What it may do besides reading.
    pub rights: &'static str,
    pub created: String,
    pub last_used: String,
}

pub struct Created {
    pub name: String,
    pub secret: String,
}

#[derive(Template)]
#[template(path = "account_tokens.html")]
struct TokensPage {
    nav: Option<Nav>,
    rows: Vec<TokenRow>,
    /// Id, domain, checked: the sites a token may be limited to.
    sites: Vec<(String, String, bool)>,
    created: Option<Created>,
    done: Option<&'static str>,
    error: Option<FormError>,
    name: String,
    chosen: bool,
    public_url: String,
}

fn visible_sites(state: &WebState, viewer: &Viewer) -> Vec<Arc<Site>> {
    let mut sites: Vec<Arc<Site>> = state
        .directory
        .all()
        .into_iter()
        .filter(|s| viewer.can_see(s))
        .collect();
    sites.sort_by(|a, b| a.domain.as_str().cmp(b.domain.as_str()));
    sites
}

fn row(state: &WebState, token: &ApiToken) -> TokenRow {
    let sites = match token.scope() {
        TokenScope::AllSites => "all yours".to_owned(),
        TokenScope::Sites(ids) => ids
            .iter()
            .map(|id| {
                state
                    .directory
                    .by_id(id)
                    .map_or_else(|| "(a deleted site)".to_owned(), |s| s.domain.to_string())
            })
            .collect::<Vec<_>>()
            .join(", "),
    };
    TokenRow {
        revoke: format!("/account/tokens/{}/revoke", uuid::Uuid::from(token.id)),
        name: token.name.clone(),
        sites,
        rights: if token.manage_email {
            "read; manage email subscribers"
        } else {
            "read"
        },
        created: super::fmt::utc(&token.created_at.to_chrono()),
        last_used: token
            .last_used_at
            .map_or_else(|| "never".to_owned(), |t| super::fmt::utc(&t.to_chrono())),
    }
}

struct Typed {
    name: String,
    chosen: bool,
    sites: Vec<String>,
    error: FormError,
}

async fn page(
    state: &WebState,
    viewer: &Viewer,
    created: Option<Created>,
    done: Option<&'static str>,
    typed: Option<Typed>,
) -> Result<HttpResponse, WebError> {
    let tokens = api_tokens::list_for_user(&state.store, viewer.user.id)
        .await
        .map_err(WebError::from)?;
    let checked: &[String] = typed.as_ref().map_or(&[], |t| &t.sites);
    Ok(render_form(
        typed.is_some(),
        &TokensPage {
            nav: Some(viewer.nav().in_section("account")),
            rows: tokens.iter().map(|t| row(state, t)).collect(),
            sites: visible_sites(state, viewer)
                .iter()
                .map(|s| {
                    let id = s.id.to_string();
                    let on = checked.contains(&id);
                    (id, s.domain.to_string(), on)
                })
                .collect(),
            created,
            done,
            name: typed.as_ref().map(|t| t.name.clone()).unwrap_or_default(),
            chosen: typed.as_ref().is_some_and(|t| t.chosen),
            error: typed.map(|t| t.error),
            public_url: state.public_url.clone(),
        },
    ))
}

pub async fn tokens_page(
    state: web::Data<WebState>,
    viewer: Viewer,
    q: web::Query<crate::web::forms::DoneQuery>,
) -> Result<HttpResponse, WebError> {
    let done = match q.done.as_deref() {
        Some("revoked") => Some("The token was revoked: it no longer works."),
        _ => None,
    };
    page(&state, &viewer, None, done, None).await
}

/// The create form: `csrf`, `name`, `scope` (`all` or `chosen`) and any
/// number of `site` fields (repeated, so read from the raw body).
struct CreateForm {
    csrf: String,
    name: String,
    /// `scope` as sent (the first one); anything but `all` and `chosen`
    /// is refused, never read as the widest scope.
    scope: Option<String>,
    sites: Vec<String>,
    /// `email=on`: the token may also manage email subscribers.
    manage_email: bool,
}

impl CreateForm {
    fn chosen(&self) -> bool {
        self.scope.as_deref() == Some("chosen")
    }
}

fn parse_create_form(body: &[u8]) -> CreateForm {
    let mut form = CreateForm {
        csrf: String::new(),
        name: String::new(),
        scope: None,
        sites: Vec::new(),
        manage_email: false,
    };
    for (key, value) in url::form_urlencoded::parse(body) {
        match key.as_ref() {
            "csrf" => form.csrf = value.into_owned(),
            "name" => form.name = value.into_owned(),
            "scope" if form.scope.is_none() => form.scope = Some(value.into_owned()),
            "site" => form.sites.push(value.into_owned()),
            "email" => form.manage_email = value == "on",
            _ => {}
        }
    }
    form
}

pub async fn create(
    state: web::Data<WebState>,
    viewer: Viewer,
    body: web::Bytes,
) -> Result<HttpResponse, WebError> {
    if body.len() > MAX_FORM_BYTES {
        return Ok(super::pages::error_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Form too large",
            "The form was too large to read. Nothing was changed.",
        ));
    }
    let form = parse_create_form(&body);
    viewer.check_csrf(&form.csrf)?;
    let again = |field: &'static str, message: String| Typed {
        name: form.name.clone(),
        chosen: form.chosen(),
        sites: form.sites.clone(),
        error: FormError::new(field, message),
    };
    let refuse = |typed| page(&state, &viewer, None, None, Some(typed));
    let name = match Label::parse(&form.name) {
        Ok(n) => n,
        Err(e) => return refuse(again("name", e.to_string())).await,
    };
    let scope = match form.scope.as_deref() {
        Some("all") => Ok(TokenScope::AllSites),
        Some("chosen") => chosen_sites(&state, &viewer, &form.sites),
        _ => Err("Choose all your sites or only some of them".to_owned()),
    };
    let scope = match scope {
        Ok(scope) => scope,
        Err(message) => return refuse(again("sites", message)).await,
    };
    match api_tokens::create(
        &state.store,
        viewer.user.id,
        &name,
        &scope,
        form.manage_email,
        state.clock.now(),
    )
    .await
    {
        Ok((token, secret)) => {
            tracing::info!(user = %viewer.user.email, token = %uuid::Uuid::from(token.id), "API token created");
            page(
                &state,
                &viewer,
                Some(Created {
                    name: token.name,
                    secret: secret.expose(),
                }),
                None,
                None,
            )
            .await
        }
        Err(ApiTokenError::Database(e)) => Err(WebError::from(e)),
        Err(e @ ApiTokenError::NoSites) => refuse(again("sites", e.to_string())).await,
        Err(e @ ApiTokenError::TooMany) => refuse(again("name", e.to_string())).await,
    }
}

/// The sites a token limited to `raw` ids reads. Only sites this user may
/// see: anything else is refused, not silently dropped, so the token is
/// what the form said.
fn chosen_sites(state: &WebState, viewer: &Viewer, raw: &[String]) -> Result<TokenScope, String> {
    let mut ids = Vec::new();
    for raw in raw {
        let site = SiteId::parse(raw)
            .ok()
            .and_then(|id| state.directory.by_id(&id))
            .filter(|s| viewer.can_see(s))
            .ok_or_else(|| "One of the chosen sites is not yours".to_owned())?;
        if !ids.contains(&site.id) {
            ids.push(site.id);
        }
    }
    Ok(TokenScope::Sites(ids))
}

/// Revokes one of the viewer's tokens. Another user's token id, or an
/// unknown one, is a 404 that changes nothing.
pub async fn revoke(
    post: Post<Confirmed>,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let (state, viewer, form) = post.into_parts();
    form.check()?;
    let revoked = match uuid::Uuid::try_parse(&id) {
        Ok(id) => api_tokens::revoke(&state.store, viewer.user.id, id)
            .await
            .map_err(WebError::from)?,
        Err(_) => false,
    };
    if !revoked {
        return Err(WebError::NotFound);
    }
    tracing::info!(user = %viewer.user.email, token = %id, "API token revoked");
    Ok(super::error::see_other("/account/tokens?done=revoked"))
}

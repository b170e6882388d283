//! Preallocation for admins: a page (form and run history) and a JSON
//! endpoint, both calling `preallocation::run` like the CLI and scheduler.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use super::auth::{Admin, AdminPost};
use super::error::{see_other, Answer, JsonError, WebError};
use super::fmt;
use super::pages::{render, Nav};
use super::prealloc_runs::{next_run_text, RunRow};
use super::state::WebState;
use crate::accounts::sessions::tokens_match;
use crate::preallocation::{self, runs, PreallocError, PreallocForm, Trigger};

impl From<PreallocError> for WebError {
    fn from(e: PreallocError) -> Self {
        WebError::Invalid(e.to_string())
    }
}

#[derive(Template)]
#[template(path = "admin_preallocation.html")]
struct PreallocPage {
    nav: Option<Nav>,
    domains: Vec<String>,
    default_from: String,
    /// The form as typed, to show it again after a refusal.
    scope: String,
    site: String,
    page: String,
    hours: String,
    error: Option<super::forms::FormError>,
    next_run: String,
    threshold: i64,
    result: Option<RunRow>,
    runs: Vec<RunRow>,
}

#[derive(Deserialize)]
pub struct ShowQuery {
    run: Option<String>,
}

pub async fn page(
    state: web::Data<WebState>,
    Admin(viewer): Admin,
    q: web::Query<ShowQuery>,
) -> Answer {
    page_with(&state, &viewer, q.run.as_deref(), None, None).await
}

async fn page_with(
    state: &WebState,
    viewer: &super::auth::Viewer,
    run: Option<&str>,
    input: Option<&PreallocForm>,
    error: Option<PreallocError>,
) -> Answer {
    let recent = runs::recent(&state.store, 50).await?;
    let now = state.clock.now();
    let mut domains: Vec<String> = state
        .directory
        .all()
        .iter()
        .map(|s| s.domain.to_string())
        .collect();
    domains.sort();
    let typed = |f: fn(&PreallocForm) -> &Option<String>| {
        input.and_then(|i| f(i).clone()).unwrap_or_default()
    };
    let default_from = fmt::input_minute(
        &(crate::reports::Resolution::Hour.floor(now) + chrono::TimeDelta::hours(1)),
    );
    let page = PreallocPage {
        nav: Some(viewer.nav().in_section("admin")),
        domains,
        default_from: Some(typed(|i| &i.from))
            .filter(|f| !f.is_empty())
            .unwrap_or(default_from),
        scope: Some(typed(|i| &i.scope))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "all".into()),
        site: typed(|i| &i.site),
        page: typed(|i| &i.page),
        hours: Some(typed(|i| &i.hours))
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "1".into()),
        error: error.map(|e| super::forms::FormError {
            field: e.field(),
            message: e.to_string(),
            also: Vec::new(),
        }),
        next_run: next_run_text(state),
        threshold: state.prealloc_threshold,
        result: match run.and_then(|id| uuid::Uuid::parse_str(id).ok()) {
            // Looked up by id: a run older than the 50 listed still shows.
            Some(id) => runs::find(&state.store, id.into())
                .await?
                .as_ref()
                .map(RunRow::from),
            None => None,
        },
        runs: recent.iter().map(RunRow::from).collect(),
    };
    let status = if page.error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Ok(render(status, &page))
}

pub async fn trigger(post: AdminPost<PreallocForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let now = state.clock.now();
    let request = match form.validate(state.prealloc_threshold, &state.directory.all(), now) {
        Ok(r) => r,
        Err(e) => return page_with(&state, &viewer, None, Some(&form), Some(e)).await,
    };
    let run = preallocation::start(
        &state.store,
        request,
        Trigger::Admin,
        viewer.user.email.as_str(),
        now,
    )
    .await?;
    let id = uuid::Uuid::from(run.id);
    Ok(see_other(&format!("/admin/preallocation?run={id}")))
}

/// `POST /admin/api/preallocate` with a JSON body (`scope`, `site`, `page`,
/// `from`, `hours`) and the session's CSRF token in `X-CSRF-Token`.
pub async fn api(
    req: HttpRequest,
    state: web::Data<WebState>,
    // Taken as a result so that a missing login, an owner's 403 (or a
    // database failure) is answered in JSON like every other error of this
    // endpoint.
    admin: Result<Admin, WebError>,
    body: web::Bytes,
) -> Result<HttpResponse, JsonError> {
    let Admin(viewer) = admin?;
    let token = req
        .headers()
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !tokens_match(token, &viewer.session.csrf) {
        return Err(WebError::BadCsrf.into());
    }
    if body.len() > 4096 {
        return Err(WebError::invalid("the body is at most 4 KiB").into());
    }
    let form: PreallocForm = serde_json::from_slice(&body)
        .map_err(|e| WebError::invalid(format!("the body must be a JSON object: {e}")))?;
    let now = state.clock.now();
    let request = form
        .validate(state.prealloc_threshold, &state.directory.all(), now)
        .map_err(|e| WebError::invalid(e.to_string()))?;
    let run = preallocation::start(
        &state.store,
        request,
        Trigger::Api,
        viewer.user.email.as_str(),
        now,
    )
    .await?;
    let id = uuid::Uuid::from(run.id);
    Ok(HttpResponse::Accepted()
        .insert_header((
            actix_web::http::header::LOCATION,
            format!("/admin/api/preallocate/{id}"),
        ))
        .json(run_json(&run)))
}

/// `GET /admin/api/preallocate/<id>`: a run's status and figures, polled
/// until `status` is `done` or `failed`.
pub async fn api_run(
    state: web::Data<WebState>,
    admin: Result<Admin, WebError>,
    id: web::Path<String>,
) -> Result<HttpResponse, JsonError> {
    admin?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| WebError::NotFound)?;
    let run = runs::find(&state.store, id.into())
        .await?
        .ok_or(WebError::NotFound)?;
    Ok(HttpResponse::Ok()
        .insert_header(super::pages::no_store())
        .json(run_json(&run)))
}

fn run_json(run: &preallocation::PreallocRun) -> serde_json::Value {
    serde_json::json!({
        "id": uuid::Uuid::from(run.id).to_string(),
        "status": run.status,
        "scope": run.scope,
        "fromHour": run.from_hour.to_chrono().to_rfc3339(),
        "hours": run.hours,
        "pages": run.pages,
        "documents": run.documents,
        "inserted": run.inserted,
        "alreadyPresent": run.already_present,
        "durationMs": run.duration_ms,
        "errors": run.errors,
    })
}

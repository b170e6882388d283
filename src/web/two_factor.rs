//! Two-factor login pages: the code form after the password, and turning
//! TOTP on and off under Account. Part of the accounts route family
//! (errors are [`WebError`]).

use actix_web::cookie::{time::Duration as CookieDuration, SameSite};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest};
use askama::Template;
use serde::Deserialize;
use std::time::Instant;

use super::auth::{client_address, cookie, safe_next, Post, Viewer, SECOND_FACTOR_COOKIE};
use super::error::{see_other, Answer, WebError};
use super::pages::{render, Nav};
use super::state::WebState;
use crate::accounts::sessions::{self, tokens_match, COOKIE};
use crate::accounts::totp::{self, Secret};
use crate::accounts::users;

#[derive(Template)]
#[template(path = "login_totp.html")]
struct CodePage {
    nav: Option<Nav>,
    csrf: String,
    next: String,
    error: Option<String>,
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

async fn due_session(
    req: &HttpRequest,
    state: &WebState,
) -> Result<Option<sessions::Session>, WebError> {
    let Some(token) = req.cookie(SECOND_FACTOR_COOKIE) else {
        return Ok(None);
    };
    Ok(sessions::find_second_factor_due(&state.store, token.value(), state.clock.now()).await?)
}

/// `GET /login/totp`: the code form, for a login whose password was right.
pub async fn code_form(
    req: HttpRequest,
    state: web::Data<WebState>,
    q: web::Query<NextQuery>,
) -> Answer {
    let Some(session) = due_session(&req, &state).await? else {
        return Ok(see_other("/login"));
    };
    Ok(render(
        StatusCode::OK,
        &CodePage {
            nav: None,
            csrf: session.csrf,
            next: safe_next(q.next.as_deref()),
            error: None,
        },
    ))
}

#[derive(Deserialize)]
pub struct CodeForm {
    csrf: String,
    code: String,
    next: Option<String>,
}

/// `POST /login/totp`: the second factor; a right code turns the waiting
/// session into a new, full one.
pub async fn submit_code(
    req: HttpRequest,
    state: web::Data<WebState>,
    form: web::Form<CodeForm>,
) -> Answer {
    let Some(due) = due_session(&req, &state).await? else {
        return Ok(see_other("/login"));
    };
    if !tokens_match(&form.csrf, &due.csrf) {
        return Err(WebError::BadCsrf);
    }
    let user = users::find(&state.store, due.user_id.into()).await?;
    let Some(user) = user else {
        return Ok(see_other("/login"));
    };
    let next = safe_next(form.next.as_deref());
    let again = |status, error: &str| {
        render(
            status,
            &CodePage {
                nav: None,
                csrf: due.csrf.clone(),
                next: next.clone(),
                error: Some(error.to_owned()),
            },
        )
    };
    // Codes have their own counts (per account and per address), apart
    // from passwords: a right password clears the account's password
    // failures and must not give a code guesser fresh tries.
    let client = client_address(&req, &state);
    let (account, client) = (
        format!("2fa:{}", user.email.as_str()),
        format!("2fa:{client}"),
    );
    let attempt = match state.limiter.reserve(&account, &client, Instant::now()) {
        Ok(attempt) => attempt,
        Err(wait) => {
            return Ok(again(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Too many wrong codes. {}", super::fmt::try_again_in(wait)),
            ));
        }
    };
    let secret = totp::active(&state.store, user.id).await?;
    let now = state.clock.now();
    let right = match &secret {
        Some(secret) => {
            totp::verify(
                &state.store,
                user.id,
                secret,
                &form.code,
                now.timestamp().max(0) as u64,
            )
            .await?
        }
        None => false,
    };
    if !right {
        return Ok(again(
            StatusCode::UNAUTHORIZED,
            "Wrong or already used code.",
        ));
    }
    attempt.succeeded();
    sessions::delete(&state.store, &due.token_hash).await?;
    let token = sessions::create(&state.store, user.id, now, state.session_lifetime).await?;
    let mut response = see_other(&next);
    let max_age = CookieDuration::seconds(state.session_lifetime.num_seconds());
    let _ = response.add_cookie(&cookie(&state, COOKIE, token, max_age, SameSite::Lax));
    let mut gone = cookie(
        &state,
        SECOND_FACTOR_COOKIE,
        String::new(),
        CookieDuration::ZERO,
        SameSite::Strict,
    );
    gone.make_removal();
    let _ = response.add_cookie(&gone);
    tracing::info!(user = %user.email, "logged in with a second factor");
    Ok(response)
}

pub struct Setup {
    pub secret: String,
    pub url: String,
}

#[derive(Template)]
#[template(path = "account_totp.html")]
struct AccountPage {
    nav: Option<Nav>,
    error: Option<String>,
    required: bool,
    enabled: bool,
    setup: Option<Setup>,
    recovery_codes: Vec<String>,
}

async fn account_page(
    state: &WebState,
    viewer: &Viewer,
    status: StatusCode,
    error: Option<String>,
) -> Answer {
    let enabled = viewer.user.two_factor;
    let setup = if enabled {
        None
    } else {
        let secret = totp::pending(&state.store, viewer.user.id).await?;
        Some(Setup {
            url: secret.otpauth_url(viewer.user.email.as_str()),
            secret: secret.as_str().to_owned(),
        })
    };
    Ok(render(
        status,
        &AccountPage {
            nav: Some(viewer.nav()),
            error,
            required: state.require_admin_totp && viewer.user.is_admin() && !enabled,
            enabled,
            setup,
            recovery_codes: vec![],
        },
    ))
}

/// `GET /account/totp`
pub async fn account(state: web::Data<WebState>, viewer: Viewer) -> Answer {
    account_page(&state, &viewer, StatusCode::OK, None).await
}

#[derive(Deserialize)]
pub struct EnableForm {
    code: String,
}

/// `POST /account/totp/enable`: a code from the new secret proves the app
/// has it; then the recovery codes are shown, once.
pub async fn enable(post: Post<EnableForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    if viewer.user.two_factor {
        return account_page(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            Some("Two-factor login is already on.".into()),
        )
        .await;
    }
    let secret: Secret = totp::pending(&state.store, viewer.user.id).await?;
    let now = state.clock.now().timestamp().max(0) as u64;
    let Some(step) = secret.matching_step(&form.code, now) else {
        return account_page(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            Some("That code does not match. Check the key in your app and its clock, then try again.".into()),
        )
        .await;
    };
    let codes = totp::enable(&state.store, viewer.user.id, &secret, step).await?;
    tracing::info!(user = %viewer.user.email, "two-factor login turned on");
    Ok(render(
        StatusCode::OK,
        &AccountPage {
            nav: Some(viewer.nav()),
            error: None,
            required: false,
            enabled: true,
            setup: None,
            recovery_codes: codes,
        },
    ))
}

#[derive(Deserialize)]
pub struct DisableForm {
    password: String,
    code: String,
}

/// `POST /account/totp/disable`: needs the password and a second factor,
/// so a session left open is not enough to remove it.
pub async fn disable(post: Post<DisableForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let Some(secret) = totp::active(&state.store, viewer.user.id).await? else {
        return account_page(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            Some("Two-factor login is not on.".into()),
        )
        .await;
    };
    let password_right = state
        .password_checks
        .verify(&form.password, &viewer.user.password_hash)
        .await
        .map_err(|_| WebError::Busy)?;
    let now = state.clock.now().timestamp().max(0) as u64;
    let code_right = password_right
        && totp::verify(&state.store, viewer.user.id, &secret, &form.code, now).await?;
    if !code_right {
        return account_page(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            Some("The password or the code is wrong.".into()),
        )
        .await;
    }
    totp::disable(&state.store, viewer.user.id).await?;
    tracing::info!(user = %viewer.user.email, "two-factor login turned off");
    Ok(see_other("/account/totp"))
}

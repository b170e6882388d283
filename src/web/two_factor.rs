//! Two-factor login pages: the code form after the password, and turning
//! TOTP on and off under Account. Part of the accounts route family
//! (errors are [`WebError`]).

use actix_web::cookie::{time::Duration as CookieDuration, SameSite};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest};
use askama::Template;
use serde::Deserialize;
use std::time::Instant;

use super::auth::{
    check_own_password, client_address, cookie, safe_next, OwnPassword, Post, Viewer,
    SECOND_FACTOR_COOKIE,
};
use super::error::{see_other, Answer, WebError};
use super::pages::{render, Nav};
use super::state::WebState;
use crate::accounts::limiter::Attempt;
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
        Ok(attempt) => match attempt.guarded() {
            // Codes guessed from several addresses: only someone holding
            // the password gets here, so the account itself is paused.
            Some(wait) => {
                attempt.released();
                Err(wait)
            }
            None => Ok(attempt),
        },
        Err(wait) => Err(wait),
    };
    let attempt = match attempt {
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
    /// The link as an inline SVG QR code, when it could be drawn (the key
    /// and the link are shown either way).
    pub qr: Option<String>,
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
        let url = secret.otpauth_url(viewer.user.email.as_str());
        Some(Setup {
            qr: Some(&url)
                .filter(|url| !url.is_empty())
                .and_then(|url| super::qr::svg(url, "QR code of the setup link")),
            url,
            secret: secret.as_str().to_owned(),
        })
    };
    Ok(render(
        status,
        &AccountPage {
            nav: Some(viewer.nav().in_section("account")),
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
    password: String,
    code: String,
}

/// Checks a form's password under the login limiter: its attempt when it
/// is the user's (the caller marks it succeeded once the code is right
/// too), else the page refusing it.
async fn refuse_password<'a>(
    req: &HttpRequest,
    state: &'a WebState,
    viewer: &Viewer,
    password: &str,
) -> Result<Result<Attempt<'a>, actix_web::HttpResponse>, WebError> {
    let refusal = match check_own_password(req, state, &viewer.user, password).await? {
        OwnPassword::Right(attempt) => return Ok(Ok(attempt)),
        OwnPassword::Wrong => (
            StatusCode::BAD_REQUEST,
            "The password or the code is wrong.".to_owned(),
        ),
        OwnPassword::Paused(wait) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "Too many wrong passwords or codes. {}",
                super::fmt::try_again_in(wait)
            ),
        ),
    };
    Ok(Err(
        account_page(state, viewer, refusal.0, Some(refusal.1)).await?
    ))
}

/// `POST /account/totp/enable`: the password, and a code from the new
/// secret that proves the app has it; then the recovery codes are shown,
/// once, and the user's other sessions end.
pub async fn enable(req: HttpRequest, post: Post<EnableForm>) -> Answer {
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
    let attempt = match refuse_password(&req, &state, &viewer, &form.password).await? {
        Ok(attempt) => attempt,
        Err(refused) => return Ok(refused),
    };
    let secret: Secret = totp::pending(&state.store, viewer.user.id).await?;
    let now = state.clock.now().timestamp().max(0) as u64;
    let Some(step) = secret.matching_step(&form.code, now) else {
        // The password was right: only the code is wrong (a typo, a clock).
        attempt.succeeded();
        return account_page(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            Some("That code does not match. Check the key in your app and its clock, then try again.".into()),
        )
        .await;
    };
    attempt.succeeded();
    let codes = totp::enable(&state.store, viewer.user.id, &secret, step).await?;
    sessions::delete_for_user(
        &state.store,
        viewer.user.id,
        Some(&viewer.session.token_hash),
    )
    .await?;
    tracing::info!(user = %viewer.user.email, "two-factor login turned on; other sessions ended");
    Ok(render(
        StatusCode::OK,
        &AccountPage {
            nav: Some(viewer.nav().in_section("account")),
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
/// so a session left open is not enough to remove it; both are guesses
/// under the login limiter. The user's other sessions end.
pub async fn disable(req: HttpRequest, post: Post<DisableForm>) -> Answer {
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
    let attempt = match refuse_password(&req, &state, &viewer, &form.password).await? {
        Ok(attempt) => attempt,
        Err(refused) => return Ok(refused),
    };
    let now = state.clock.now().timestamp().max(0) as u64;
    // A wrong code leaves the attempt a failure: the code is what a
    // session thief who knows the password would guess.
    if !totp::verify(&state.store, viewer.user.id, &secret, &form.code, now).await? {
        return account_page(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            Some("The password or the code is wrong.".into()),
        )
        .await;
    }
    attempt.succeeded();
    totp::disable(&state.store, viewer.user.id).await?;
    sessions::delete_for_user(
        &state.store,
        viewer.user.id,
        Some(&viewer.session.token_hash),
    )
    .await?;
    tracing::info!(user = %viewer.user.email, "two-factor login turned off; other sessions ended");
    Ok(see_other("/account/totp"))
}

//! Logging in and out, the signed-in user as an extractor, CSRF checks and
//! password changes.

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

pub use super::error::WebError;
use super::error::{see_other, Answer, PASSWORD_PAGE, TOTP_SETUP};
use super::pages::{render, Nav};
use super::state::WebState;
use crate::accounts::limiter::Attempt;
use crate::accounts::password::{self, random_token, NewPassword};
use crate::accounts::sessions::{self, tokens_match, Session, COOKIE};
use crate::accounts::{users, User};
use crate::domain::Email;

/// The cookie carrying the login form's CSRF token (double submit: the
/// form's hidden field must equal it).
const LOGIN_CSRF_COOKIE: &str = "tt_login_csrf";

/// The cookie of a login whose password was right and whose second factor
/// is still due.
pub(super) const SECOND_FACTOR_COOKIE: &str = "tt_login_2fa";

fn internal(e: impl Into<anyhow::Error>) -> WebError {
    WebError::internal(e)
}

/// A signed-in user, with their session.
pub struct Viewer {
    pub user: User,
    pub session: Session,
}

impl Viewer {
    pub fn nav(&self) -> Nav {
        Nav::new(&self.user, &self.session.csrf)
    }

    /// Every form POST carries the session's CSRF token.
    pub fn check_csrf(&self, submitted: &str) -> Result<(), WebError> {
        if tokens_match(submitted, &self.session.csrf) {
            Ok(())
        } else {
            Err(WebError::BadCsrf)
        }
    }

    pub fn can_see(&self, site: &crate::storage::sites::Site) -> bool {
        self.user.is_admin() || site.owners.contains(&self.user.id)
    }
}

impl FromRequest for Viewer {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<WebState>>().cloned();
        let token = req.cookie(COOKIE).map(|c| c.value().to_owned());
        let next = req
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.to_string());
        // Turning two-factor login on, and leaving, stay open to an admin
        // who must turn it on; choosing a password and leaving, to a user
        // signed in with a one-time password.
        let setup_page = req.path().starts_with(TOTP_SETUP) || req.path() == "/logout";
        let password_page = req.path() == PASSWORD_PAGE || req.path() == "/logout";
        let req = req.clone();
        Box::pin(async move {
            let state = state.ok_or_else(|| internal(anyhow::anyhow!("web state missing")))?;
            let login = || WebError::LoginRequired { next: next.clone() };
            let token = token.ok_or_else(login)?;
            let now = state.clock.now();
            let session = sessions::find(&state.store, &token, now)
                .await?
                .ok_or_else(login)?;
            let user = users::find(&state.store, session.user_id.into())
                .await?
                .ok_or_else(login)?;
            if user.must_change_password && !password_page {
                return Err(WebError::PasswordChangeRequired);
            }
            if state.require_admin_totp && user.is_admin() && !user.two_factor && !setup_page {
                return Err(WebError::SecondFactorRequired);
            }
            let viewer = Viewer { user, session };
            // For an error page later in this request (pages::keep_nav).
            actix_web::HttpMessage::extensions_mut(&req).insert(viewer.nav());
            Ok(viewer)
        })
    }
}

/// A form a signed-in user posted, its CSRF token already checked: the
/// state, the viewer, and the rest of the form.
pub struct Post<T> {
    state: web::Data<WebState>,
    viewer: Viewer,
    form: T,
}

impl<T> Post<T> {
    pub fn into_parts(self) -> (web::Data<WebState>, Viewer, T) {
        (self.state, self.viewer, self.form)
    }
}

/// A [`Post`] by an administrator (owners get 403 before the form is read).
pub struct AdminPost<T>(Post<T>);

impl<T> AdminPost<T> {
    pub fn into_parts(self) -> (web::Data<WebState>, Viewer, T) {
        self.0.into_parts()
    }
}

impl<T: serde::de::DeserializeOwned + 'static> FromRequest for AdminPost<T> {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let admin = Admin::from_request(req, payload);
        let post = Post::<T>::from_request(req, payload);
        Box::pin(async move {
            admin.await?;
            Ok(AdminPost(post.await?))
        })
    }
}

#[derive(Deserialize)]
struct WithCsrf<T> {
    csrf: String,
    #[serde(flatten)]
    form: T,
}

impl<T: serde::de::DeserializeOwned + 'static> FromRequest for Post<T> {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<WebState>>().cloned();
        let viewer = Viewer::from_request(req, payload);
        let form = web::Form::<WithCsrf<T>>::from_request(req, payload);
        Box::pin(async move {
            let viewer = viewer.await?;
            let form = form
                .await
                .map_err(|e| WebError::invalid(format!("The form could not be read: {e}.")))?
                .into_inner();
            viewer.check_csrf(&form.csrf)?;
            let state = state.ok_or_else(|| internal(anyhow::anyhow!("web state missing")))?;
            Ok(Post {
                state,
                viewer,
                form: form.form,
            })
        })
    }
}

/// A signed-in administrator; owners get 403.
pub struct Admin(pub Viewer);

impl FromRequest for Admin {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let viewer = Viewer::from_request(req, payload);
        Box::pin(async move {
            let viewer = viewer.await?;
            if viewer.user.is_admin() {
                Ok(Admin(viewer))
            } else {
                Err(WebError::Forbidden)
            }
        })
    }
}

pub(super) fn cookie<'a>(
    state: &WebState,
    name: &'a str,
    value: String,
    max_age: CookieDuration,
    same_site: SameSite,
) -> Cookie<'a> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .secure(state.secure_cookies)
        .same_site(same_site)
        .max_age(max_age)
        .finish()
}

/// Only local paths: never redirect off-site after a login. Browsers strip
/// tabs and newlines from a `Location` and read `\\` as `/`, so `/\t/evil`
/// and `/\\evil` would leave the site: accept exactly one `/` followed by
/// something other than `/` or `\\`, and no control or whitespace character
/// anywhere (which also keeps the header value valid).
pub(super) fn safe_next(next: Option<&str>) -> String {
    const FALLBACK: &str = "/sites";
    let Some(n) = next else {
        return FALLBACK.to_owned();
    };
    let mut chars = n.chars();
    let local = chars.next() == Some('/')
        && chars.next().is_none_or(|c| c != '/' && c != '\\')
        && !n.chars().any(|c| c.is_control() || c.is_whitespace())
        && n.len() < 2048;
    if local {
        n.to_owned()
    } else {
        FALLBACK.to_owned()
    }
}

/// The address login attempts are counted by (see `client_ip`).
pub(super) fn client_address(req: &HttpRequest, state: &WebState) -> String {
    let forwarded = req.headers().get_all("x-forwarded-for");
    state.trusted_proxies.client(
        req.peer_addr().map(|a| a.ip()),
        forwarded.filter_map(|v| v.to_str().ok()),
    )
}

/// What re-checking a signed-in user's own password found.
pub(super) enum OwnPassword<'a> {
    /// Right; the attempt is to be marked succeeded once the whole form is.
    Right(Attempt<'a>),
    Wrong,
    /// This address has used up its attempts: how long to wait.
    Paused(std::time::Duration),
}

/// Checks the signed-in user's password (to change it, or to turn
/// two-factor login on or off) under the login limiter, with the same keys
/// as a login: an open session must not be a way to guess it at full speed.
pub(super) async fn check_own_password<'a>(
    req: &HttpRequest,
    state: &'a WebState,
    user: &User,
    password: &str,
) -> Result<OwnPassword<'a>, WebError> {
    let client = client_address(req, state);
    let attempt = match state
        .limiter
        .reserve(user.email.as_str(), &client, Instant::now())
    {
        Ok(attempt) => attempt,
        Err(wait) => return Ok(OwnPassword::Paused(wait)),
    };
    match state
        .password_checks
        .verify(password, &user.password_hash)
        .await
    {
        Ok(true) => Ok(OwnPassword::Right(attempt)),
        Ok(false) => Ok(OwnPassword::Wrong),
        Err(_) => {
            attempt.released();
            Err(WebError::Busy)
        }
    }
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    nav: Option<Nav>,
    csrf: String,
    next: String,
    email: String,
    error: Option<String>,
    signed_out: bool,
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
    /// Set by the logout redirect.
    signed_out: Option<String>,
}

pub async fn login_form(
    req: HttpRequest,
    state: web::Data<WebState>,
    q: web::Query<NextQuery>,
) -> HttpResponse {
    let csrf = req
        .cookie(LOGIN_CSRF_COOKIE)
        .map(|c| c.value().to_owned())
        .filter(|v| v.len() == 64)
        .unwrap_or_else(|| random_token(32));
    let page = LoginPage {
        nav: None,
        csrf: csrf.clone(),
        next: safe_next(q.next.as_deref()),
        email: String::new(),
        error: None,
        signed_out: q.signed_out.is_some(),
    };
    let mut response = render(StatusCode::OK, &page);
    let _ = response.add_cookie(&cookie(
        &state,
        LOGIN_CSRF_COOKIE,
        csrf,
        CookieDuration::hours(12),
        SameSite::Strict,
    ));
    response
}

#[derive(Deserialize)]
pub struct LoginForm {
    email: String,
    password: String,
    csrf: String,
    next: Option<String>,
}

pub async fn login(
    req: HttpRequest,
    state: web::Data<WebState>,
    form: web::Form<LoginForm>,
) -> Answer {
    let cookie_csrf = req
        .cookie(LOGIN_CSRF_COOKIE)
        .map(|c| c.value().to_owned())
        .unwrap_or_default();
    if cookie_csrf.is_empty() || !tokens_match(&form.csrf, &cookie_csrf) {
        return Err(WebError::BadCsrf);
    }
    let client = client_address(&req, &state);
    let account = form.email.trim().to_lowercase();
    let again = |status, error: String| {
        let page = LoginPage {
            nav: None,
            csrf: cookie_csrf.clone(),
            next: safe_next(form.next.as_deref()),
            email: form.email.clone(),
            error: Some(error),
            signed_out: false,
        };
        render(status, &page)
    };
    // The attempt takes its place before the password is checked, so
    // concurrent attempts cannot all slip past the limit (see limiter).
    let attempt = match state.limiter.reserve(&account, &client, Instant::now()) {
        Ok(attempt) => attempt,
        Err(wait) => {
            return Ok(again(
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many failed logins. {}", super::fmt::try_again_in(wait)),
            ));
        }
    };
    let user = match Email::parse(&form.email) {
        Ok(email) => users::find_by_email(&state.store, &email).await?,
        Err(_) => None,
    };
    // Guessed at from several addresses: only two-factor login opens it
    // now, and without it nothing is checked (a right password must not
    // answer differently from a wrong one).
    if let Some(wait) = attempt.guarded() {
        if !user.as_ref().is_some_and(|u| u.two_factor) {
            attempt.released();
            return Ok(again(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "Too many failed logins for this account from several addresses. {} An account with two-factor login can log in meanwhile.",
                    super::fmt::try_again_in(wait)
                ),
            ));
        }
    }
    // Verify against a decoy hash when there is no such user, so both
    // failures take the same time and say the same thing.
    let hash = user.as_ref().map_or_else(
        || password::decoy_hash().to_owned(),
        |u| u.password_hash.clone(),
    );
    let Ok(matches) = state.password_checks.verify(&form.password, &hash).await else {
        // Nothing was checked: not a failure.
        attempt.released();
        return Err(WebError::Busy);
    };
    let Some(user) = user.filter(|_| matches) else {
        return Ok(again(
            StatusCode::UNAUTHORIZED,
            "Wrong e-mail or password.".into(),
        ));
    };
    // Right, but a one-time password past its week: it stays a failure.
    if user.one_time_password_expired(state.clock.now()) {
        return Ok(again(
            StatusCode::UNAUTHORIZED,
            "This one-time password has expired: ask an administrator for a new one.".into(),
        ));
    }
    attempt.succeeded();
    let next = safe_next(form.next.as_deref());
    if user.two_factor {
        // The password was right; the session comes after the code.
        let token =
            sessions::create_second_factor_due(&state.store, user.id, state.clock.now()).await?;
        let mut response = see_other(&format!("/login/totp?next={}", super::fmt::query(&next)));
        let _ = response.add_cookie(&cookie(
            &state,
            SECOND_FACTOR_COOKIE,
            token,
            CookieDuration::minutes(sessions::SECOND_FACTOR_MINUTES),
            SameSite::Strict,
        ));
        return Ok(response);
    }
    let token = sessions::create(
        &state.store,
        user.id,
        state.clock.now(),
        state.session_lifetime,
    )
    .await?;
    let max_age = CookieDuration::seconds(state.session_lifetime.num_seconds());
    // A one-time password is replaced before anything else.
    let location = if user.must_change_password {
        PASSWORD_PAGE.to_owned()
    } else {
        next
    };
    let mut response = see_other(&location);
    let _ = response.add_cookie(&cookie(&state, COOKIE, token, max_age, SameSite::Lax));
    tracing::info!(user = %user.email, "logged in");
    Ok(response)
}

/// A form that carries nothing but its CSRF token (a button).
#[derive(Deserialize)]
pub struct Button {}

/// The form of a button whose action cannot be undone (delete a user,
/// revoke a token or share link): it carries a required "Sure" box, a
/// confirmation that needs no JavaScript. A post without it changes
/// nothing.
#[derive(Deserialize)]
pub struct Confirmed {
    #[serde(default)]
    confirm: String,
}

impl Confirmed {
    pub fn check(&self) -> Result<(), WebError> {
        confirmed(&self.confirm)
    }
}

/// Whether the "Sure" box of an irreversible action was ticked.
pub fn confirmed(confirm: &str) -> Result<(), WebError> {
    if confirm == "yes" {
        Ok(())
    } else {
        Err(WebError::invalid(
            "Nothing was changed: tick “Sure” beside the button to confirm, as this cannot be undone.",
        ))
    }
}

pub async fn logout(post: Post<Button>) -> Answer {
    let (state, viewer, _) = post.into_parts();
    sessions::delete(&state.store, &viewer.session.token_hash).await?;
    let mut response = see_other("/login?signed_out=1");
    let mut gone = cookie(
        &state,
        COOKIE,
        String::new(),
        CookieDuration::ZERO,
        SameSite::Lax,
    );
    gone.make_removal();
    let _ = response.add_cookie(&gone);
    Ok(response)
}

#[derive(Template)]
#[template(path = "password.html")]
struct PasswordPage {
    nav: Option<Nav>,
    error: Option<String>,
    done: bool,
    /// Signed in with a one-time password.
    one_time: bool,
}

pub async fn password_form(viewer: Viewer) -> HttpResponse {
    render(
        StatusCode::OK,
        &PasswordPage {
            nav: Some(viewer.nav().in_section("account")),
            error: None,
            done: false,
            one_time: viewer.user.must_change_password,
        },
    )
}

#[derive(Deserialize)]
pub struct PasswordForm {
    current: String,
    new: String,
    confirm: String,
}

pub async fn change_password(req: HttpRequest, post: Post<PasswordForm>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let refuse = |status: StatusCode, message: &str| {
        render(
            status,
            &PasswordPage {
                nav: Some(viewer.nav().in_section("account")),
                error: Some(message.to_owned()),
                done: false,
                one_time: viewer.user.must_change_password,
            },
        )
    };
    let attempt = match check_own_password(&req, &state, &viewer.user, &form.current).await? {
        OwnPassword::Right(attempt) => attempt,
        OwnPassword::Wrong => {
            return Ok(refuse(
                StatusCode::BAD_REQUEST,
                "The current password is wrong.",
            ))
        }
        OwnPassword::Paused(wait) => {
            return Ok(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "Too many wrong passwords. {}",
                    super::fmt::try_again_in(wait)
                ),
            ))
        }
    };
    attempt.succeeded();
    if form.new != form.confirm {
        return Ok(refuse(
            StatusCode::BAD_REQUEST,
            "The new password and its confirmation differ.",
        ));
    }
    let new = match NewPassword::parse(&form.new) {
        Ok(p) => p,
        Err(e) => return Ok(refuse(StatusCode::BAD_REQUEST, &format!("{e}."))),
    };
    users::set_password(&state.store, viewer.user.id, &new)
        .await
        .map_err(|e| match e {
            users::UserError::Database(e) => e.into(),
            other => internal(other),
        })?;
    // Whoever else knew the old password is out: other sessions end and
    // every API token is revoked (a token made during a takeover would
    // outlive the recovery otherwise). This session stays.
    end_other_access(&state, viewer.user.id, &viewer.session.token_hash).await?;
    tracing::info!(user = %viewer.user.email, "password changed; other sessions and API tokens ended");
    // The one-time password stood between a new user and the sites: go on
    // to them.
    if viewer.user.must_change_password {
        return Ok(see_other("/sites?done=password"));
    }
    Ok(render(
        StatusCode::OK,
        &PasswordPage {
            nav: Some(viewer.nav().in_section("account")),
            error: None,
            done: true,
            one_time: false,
        },
    ))
}

/// Ends a user's other sessions and revokes their API tokens: what a
/// password change does.
pub(super) async fn end_other_access(
    state: &WebState,
    user: uuid::Uuid,
    keep_session: &str,
) -> Result<(), WebError> {
    sessions::delete_for_user(&state.store, user, Some(keep_session)).await?;
    crate::accounts::api_tokens::delete_for_user(&state.store, user).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_kept_only_when_local() {
        let kept = [
            "/",
            "/sites/x?range=7d",
            "/a/b",
            "/sites?q=a%20b",
            "/caf%C3%A9",
        ];
        for next in kept {
            assert_eq!(safe_next(Some(next)), next, "{next:?}");
        }
        let refused = [
            "//evil.com/",
            "https://evil.com/",
            "http:/evil.com",
            "evil.com",
            "",
            "/\\evil.com",
            "\\/evil.com",
            "/\t/127.0.0.1:18960/pwned",
            "\t//evil.com",
            "/\n/evil.com",
            "/\r/evil.com",
            "/\u{b}/evil.com",
            "/\u{c}/evil.com",
            "/\u{0}/evil.com",
            "/\u{7f}/evil.com",
            "/ /evil.com",
            "/a b",
            "/\u{a0}/evil.com",
            "/\u{2028}/evil.com",
            "/\u{3000}/evil.com",
            "/a\nLocation: //evil.com",
        ];
        for next in refused {
            assert_eq!(safe_next(Some(next)), "/sites", "{next:?}");
        }
        assert_eq!(safe_next(Some(&format!("/{}", "a".repeat(2048)))), "/sites");
        assert_eq!(safe_next(None), "/sites");
    }
}

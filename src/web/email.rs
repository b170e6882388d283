//! Email reports and alerts on the web: a site's email page (its
//! subscriptions and alert rules, `/sites/<id>/email`), the one-click
//! unsubscribe link every email carries (`/email/unsubscribe`, no login),
//! the `/metrics` lines and the system page's figures. The API's
//! subscription endpoints are in `web::api::email`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use serde::Deserialize;
use std::sync::Arc;

use super::auth::{Post, Viewer};
use super::error::{see_other, Answer, WebError};
use super::forms::FormError;
use super::pages::{render, render_form, Nav};
use super::reports::visible_site;
use super::state::WebState;
use crate::domain::{AlertRules, Recipient, Schedule, SiteId};
use crate::storage::email::{self as stored, SubscribeError};
use crate::storage::sites::Site;

type Data = web::Data<WebState>;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/sites/{id}/email", web::get().to(email_page))
        .route("/sites/{id}/email/subscriptions", web::post().to(subscribe))
        .route(
            "/sites/{id}/email/subscriptions/{sub}/remove",
            web::post().to(remove),
        )
        .route("/sites/{id}/email/alerts", web::post().to(save_alerts))
        .route("/email/unsubscribe", web::get().to(unsubscribe_page))
        .route("/email/unsubscribe", web::post().to(unsubscribe))
        .route("/email/confirm", web::get().to(confirm_page))
        .route("/email/confirm", web::post().to(confirm));
}

// -------------------------------------------------------------- the page

pub struct SubscriptionRow {
    pub address: String,
    pub schedule: &'static str,
    pub since: String,
    pub remove: String,
    /// The address has not confirmed yet: it receives nothing.
    pub waiting: bool,
}

#[derive(Template)]
#[template(path = "site_email.html")]
struct EmailPage {
    nav: Option<Nav>,
    site: Arc<Site>,
    /// The sender address, or `None` when no email is sent. Nothing of the
    /// relay (host, user, password) is an owner's to see.
    sending: Option<String>,
    rows: Vec<SubscriptionRow>,
    schedules: Vec<(&'static str, &'static str)>,
    done: Option<&'static str>,
    error: Option<FormError>,
    address: String,
    schedule: String,
    spike_views: String,
    spike_factor: String,
    drop_hours: String,
    alerts_error: Option<FormError>,
}

#[derive(Default)]
struct Typed {
    address: String,
    schedule: String,
    error: Option<FormError>,
    rules: Option<(String, String, String)>,
    alerts_error: Option<FormError>,
}

fn show(n: Option<impl ToString>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

async fn page(
    state: &WebState,
    viewer: &Viewer,
    site: Arc<Site>,
    done: Option<&'static str>,
    typed: Typed,
) -> Result<HttpResponse, WebError> {
    let (subs, rules) = tokio::try_join!(
        stored::list_for_site(&state.store, &site.id),
        stored::alert_rules(&state.store, &site.id),
    )?;
    let rows = subs
        .iter()
        .map(|s| SubscriptionRow {
            address: s.address.to_string(),
            schedule: s.schedule.label(),
            since: super::fmt::utc(&s.created_at.to_chrono()),
            remove: format!(
                "/sites/{}/email/subscriptions/{}/remove",
                site.id,
                uuid::Uuid::from(s.id)
            ),
            waiting: !s.confirmed,
        })
        .collect();
    let refused = typed.error.is_some() || typed.alerts_error.is_some();
    let (spike_views, spike_factor, drop_hours) = typed.rules.unwrap_or_else(|| {
        (
            show(rules.spike_views),
            show(rules.spike_factor),
            show(rules.drop_hours),
        )
    });
    Ok(render_form(
        refused,
        &EmailPage {
            nav: Some(viewer.nav()),
            site,
            sending: state.email.sender_address(),
            rows,
            schedules: Schedule::ALL.iter().map(|s| (s.key(), s.label())).collect(),
            done,
            error: typed.error,
            address: typed.address,
            schedule: typed.schedule,
            spike_views,
            spike_factor,
            drop_hours,
            alerts_error: typed.alerts_error,
        },
    ))
}

pub async fn email_page(
    state: Data,
    viewer: Viewer,
    id: web::Path<String>,
    q: web::Query<crate::web::forms::DoneQuery>,
) -> Answer {
    let site = visible_site(&state, &viewer, &id)?;
    let done = match q.done.as_deref() {
        Some("subscribed") => {
            Some("Subscribed: the first email goes out at the start of the next period.")
        }
        Some("confirmation-sent") => Some(
            "A confirmation email goes to that address: it receives nothing else until its link is followed.",
        ),
        Some("removed") => Some("The subscription was removed."),
        Some("alerts-saved") => Some("The alert rules were saved."),
        _ => None,
    };
    page(&state, &viewer, site, done, Typed::default()).await
}

#[derive(Deserialize)]
pub struct SubscribeForm {
    #[serde(default)]
    address: String,
    #[serde(default)]
    schedule: String,
}

pub async fn subscribe(post: Post<SubscribeForm>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let site = visible_site(&state, &viewer, &id)?;
    let refuse = |field: &'static str, message: String| Typed {
        address: form.address.clone(),
        schedule: form.schedule.clone(),
        error: Some(FormError::new(field, message)),
        ..Typed::default()
    };
    let address = match Recipient::parse(&form.address) {
        Ok(a) => a,
        Err(e) => {
            return page(
                &state,
                &viewer,
                site,
                None,
                refuse("address", e.to_string()),
            )
            .await
        }
    };
    let schedule = match Schedule::parse(&form.schedule) {
        Ok(s) => s,
        Err(e) => {
            return page(
                &state,
                &viewer,
                site,
                None,
                refuse("schedule", e.to_string()),
            )
            .await
        }
    };
    let consent = stored::Consent::of(viewer.user.email.as_str(), &address);
    match stored::subscribe(
        &state.store,
        &site.id,
        &address,
        schedule,
        state.clock.now(),
        consent,
    )
    .await
    {
        Ok((sub, _)) => {
            tracing::info!(user = %viewer.user.email, site = %site.domain, schedule = %schedule, confirmed = sub.confirmed, "email subscription added");
            let done = if sub.confirmed {
                "subscribed"
            } else {
                "confirmation-sent"
            };
            Ok(see_other(&format!("/sites/{}/email?done={done}", site.id)))
        }
        Err(SubscribeError::Database(e)) => Err(e.into()),
        Err(e @ SubscribeError::TooMany) => {
            page(
                &state,
                &viewer,
                site,
                None,
                refuse("address", e.to_string()),
            )
            .await
        }
    }
}

#[derive(Deserialize)]
pub struct RemoveForm {
    csrf: String,
}

pub async fn remove(
    state: Data,
    viewer: Viewer,
    path: web::Path<(String, String)>,
    form: web::Form<RemoveForm>,
) -> Answer {
    viewer.check_csrf(&form.csrf)?;
    let (id, sub) = path.into_inner();
    let site = visible_site(&state, &viewer, &id)?;
    let sub = uuid::Uuid::try_parse(&sub).map_err(|_| WebError::NotFound)?;
    if !stored::remove(&state.store, &site.id, sub).await? {
        return Err(WebError::NotFound);
    }
    Ok(see_other(&format!("/sites/{}/email?done=removed", site.id)))
}

#[derive(Deserialize)]
pub struct AlertsForm {
    #[serde(default)]
    spike_views: String,
    #[serde(default)]
    spike_factor: String,
    #[serde(default)]
    drop_hours: String,
}

pub async fn save_alerts(post: Post<AlertsForm>, id: web::Path<String>) -> Answer {
    let (state, viewer, form) = post.into_parts();
    let site = visible_site(&state, &viewer, &id)?;
    match AlertRules::parse(&form.spike_views, &form.spike_factor, &form.drop_hours) {
        Ok(rules) => {
            stored::set_alert_rules(&state.store, &site.id, rules).await?;
            Ok(see_other(&format!(
                "/sites/{}/email?done=alerts-saved",
                site.id
            )))
        }
        Err(e) => {
            let typed = Typed {
                rules: Some((form.spike_views, form.spike_factor, form.drop_hours)),
                alerts_error: Some(FormError::new(e.field(), e.to_string())),
                ..Typed::default()
            };
            page(&state, &viewer, site, None, typed).await
        }
    }
}

// ------------------------------------------------------------ unsubscribe

#[derive(Deserialize)]
pub struct UnsubscribeQuery {
    #[serde(default)]
    site: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    token: String,
}

#[derive(Template)]
#[template(path = "email_unsubscribe.html")]
struct UnsubscribePage {
    nav: Option<Nav>,
    /// Where the button posts (the same link).
    action: String,
    address: String,
    site_name: String,
    /// Done: how many subscriptions were removed.
    removed: Option<u64>,
}

/// The site and address a link names, when its token is theirs.
async fn verified(
    state: &WebState,
    q: &UnsubscribeQuery,
) -> Result<(Arc<Site>, Recipient), WebError> {
    let site = SiteId::parse(&q.site).map_err(|_| WebError::NotFound)?;
    let address = Recipient::parse(&q.address).map_err(|_| WebError::NotFound)?;
    let key = state.email.key().await?;
    if !crate::email::unsubscribe::verify(&key, &site, &address, &q.token) {
        return Err(WebError::NotFound);
    }
    let site = state.directory.by_id(&site).ok_or(WebError::NotFound)?;
    Ok((site, address))
}

fn action(q: &UnsubscribeQuery) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "/email/unsubscribe?site={}&address={}&token={}",
        enc(&q.site),
        enc(&q.address),
        enc(&q.token)
    )
}

/// The link from the email: a page with one button, so that a mail
/// scanner fetching every link does not unsubscribe anyone.
pub async fn unsubscribe_page(state: Data, q: web::Query<UnsubscribeQuery>) -> Answer {
    let (site, address) = verified(&state, &q).await?;
    Ok(render(
        StatusCode::OK,
        &UnsubscribePage {
            nav: None,
            action: action(&q),
            address: address.to_string(),
            site_name: site.name.clone(),
            removed: None,
        },
    ))
}

/// The button, and RFC 8058's one-click POST from a mail client (body
/// `List-Unsubscribe=One-Click`): no login and no CSRF token, the link's
/// token is the authority, and it covers one address of one site.
pub async fn unsubscribe(state: Data, q: web::Query<UnsubscribeQuery>) -> Answer {
    let (site, address) = verified(&state, &q).await?;
    let removed = stored::unsubscribe(&state.store, &site.id, &address).await?;
    tracing::info!(site = %site.domain, removed, "unsubscribed through an email's link");
    Ok(render(
        StatusCode::OK,
        &UnsubscribePage {
            nav: None,
            action: action(&q),
            address: address.to_string(),
            site_name: site.name.clone(),
            removed: Some(removed),
        },
    ))
}

// ---------------------------------------------------------- confirmation

#[derive(Template)]
#[template(path = "email_confirm.html")]
struct ConfirmPage {
    nav: Option<Nav>,
    /// Where the button posts (the same link).
    action: String,
    address: String,
    site_name: String,
    /// Done: how many subscriptions were confirmed.
    confirmed: Option<u64>,
}

/// The site and address a confirmation link names, when its token is
/// theirs.
async fn verified_confirmation(
    state: &WebState,
    q: &UnsubscribeQuery,
) -> Result<(Arc<Site>, Recipient), WebError> {
    let site = SiteId::parse(&q.site).map_err(|_| WebError::NotFound)?;
    let address = Recipient::parse(&q.address).map_err(|_| WebError::NotFound)?;
    let key = state.email.key().await?;
    if !crate::email::unsubscribe::verify_confirm(&key, &site, &address, &q.token) {
        return Err(WebError::NotFound);
    }
    let site = state.directory.by_id(&site).ok_or(WebError::NotFound)?;
    Ok((site, address))
}

fn confirm_action(q: &UnsubscribeQuery) -> String {
    action(q).replacen("/email/unsubscribe", "/email/confirm", 1)
}

/// The confirmation email's link: a page with one button, so that a mail
/// scanner fetching every link confirms nobody.
pub async fn confirm_page(state: Data, q: web::Query<UnsubscribeQuery>) -> Answer {
    let (site, address) = verified_confirmation(&state, &q).await?;
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: None,
            action: confirm_action(&q),
            address: address.to_string(),
            site_name: site.name.clone(),
            confirmed: None,
        },
    ))
}

/// The button: no login and no CSRF token, the link's token (sent only to
/// that address) is the authority.
pub async fn confirm(state: Data, q: web::Query<UnsubscribeQuery>) -> Answer {
    let (site, address) = verified_confirmation(&state, &q).await?;
    let confirmed = stored::confirm(&state.store, &site.id, &address).await?;
    tracing::info!(site = %site.domain, confirmed, "an address confirmed through its email's link");
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: None,
            action: confirm_action(&q),
            address: address.to_string(),
            site_name: site.name.clone(),
            confirmed: Some(confirmed),
        },
    ))
}

// ------------------------------------------------------ metrics, system

/// The sender's `/metrics` lines.
pub fn metrics(out: &mut String, state: &WebState) {
    state.email.stats().render(out, state.email.enabled());
}

/// The system page's email section.
pub struct SystemEmail {
    /// The server and sender, or `None`: no email is sent.
    pub sending: Option<String>,
    /// Emails per state of their records.
    pub states: Vec<(&'static str, u64)>,
    /// The last failed attempt of this instance, when and what.
    pub last_failure: Option<String>,
    /// Recent problems: kind, site, period start, state, error.
    pub problems: Vec<[String; 5]>,
    pub sent: u64,
    pub attempt_failures: u64,
}

pub async fn system(state: &WebState) -> Result<SystemEmail, mongodb::error::Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let (counts, problems) = tokio::try_join!(
        stored::counts(&state.store),
        stored::recent_problems(&state.store, 10),
    )?;
    let stats = state.email.stats();
    Ok(SystemEmail {
        sending: state.email.describe(),
        states: counts.into_iter().map(|(s, n)| (s.key(), n)).collect(),
        last_failure: stats
            .last_failure()
            .map(|(at, what)| format!("{}: {what}", super::fmt::utc(&at))),
        problems: problems
            .into_iter()
            .map(|r| {
                [
                    r.kind.clone(),
                    r.site().to_string(),
                    super::fmt::utc(&r.from.to_chrono()),
                    format!("{:?}", r.state).to_lowercase(),
                    r.last_error.clone().unwrap_or_default(),
                ]
            })
            .collect(),
        sent: stats.sent.load(Relaxed),
        attempt_failures: stats.attempt_failures.load(Relaxed),
    })
}

//! The API's email subscription endpoints, inside `/api/v1`: a site's
//! subscriptions listed, added and removed (the pages are `web::email`).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse, ResponseError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ApiClient, ApiError};
use crate::domain::{Recipient, Schedule};
use crate::storage::email::{self as stored, SubscribeError, Subscription};
use crate::web::state::WebState;

type Data = web::Data<WebState>;

/// The API's subscription endpoints, inside `/api/v1`.
pub fn api_routes(cfg: &mut web::ServiceConfig) {
    let json = web::JsonConfig::default()
        .limit(4096)
        .error_handler(|err, _| {
            let message = format!("The body must be a JSON object as documented: {err}.");
            actix_web::error::InternalError::from_response(
                err,
                ApiError::BadParameter {
                    parameter: "body",
                    message,
                }
                .error_response(),
            )
            .into()
        });
    cfg.service(
        web::resource("/sites/{id}/email/subscriptions")
            .app_data(json)
            .route(web::get().to(api_list))
            .route(web::post().to(api_subscribe))
            .default_service(web::to(|| async { not_allowed("GET, HEAD, POST") })),
    )
    .service(
        web::resource("/sites/{id}/email/subscriptions/{sub}")
            .route(web::delete().to(api_remove))
            .default_service(web::to(|| async { not_allowed("DELETE") })),
    );
}

/// 405 with the methods the resource answers.
fn not_allowed(allow: &'static str) -> HttpResponse {
    let mut response = ApiError::MethodNotAllowed.error_response();
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    response
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubscriptionBody {
    id: String,
    address: String,
    schedule: &'static str,
    created_at: DateTime<Utc>,
    confirmed: bool,
}

impl From<&Subscription> for SubscriptionBody {
    fn from(s: &Subscription) -> Self {
        SubscriptionBody {
            id: uuid::Uuid::from(s.id).to_string(),
            address: s.address.to_string(),
            schedule: s.schedule.key(),
            created_at: s.created_at.to_chrono(),
            confirmed: s.confirmed,
        }
    }
}

#[derive(Serialize)]
struct SubscriptionsBody {
    site: String,
    subscriptions: Vec<SubscriptionBody>,
}

#[derive(Serialize)]
struct Removed {
    removed: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSubscription {
    address: String,
    schedule: String,
}

fn json(status: StatusCode, body: &impl Serialize) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(crate::web::pages::no_store())
        .json(body)
}

/// `GET /api/v1/sites/{id}/email/subscriptions`.
pub async fn api_list(
    state: Data,
    client: ApiClient,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let site = client.site(&state, &id)?;
    if !client.token.manage_email {
        return Err(ApiError::ReadOnlyToken);
    }
    let subs = stored::list_for_site(&state.store, &site.id).await?;
    Ok(json(
        StatusCode::OK,
        &SubscriptionsBody {
            site: site.id.to_string(),
            subscriptions: subs.iter().map(SubscriptionBody::from).collect(),
        },
    ))
}

/// `POST /api/v1/sites/{id}/email/subscriptions`: 201 with the new one,
/// or 200 with the one that already was.
pub async fn api_subscribe(
    state: Data,
    client: ApiClient,
    id: web::Path<String>,
    body: web::Json<NewSubscription>,
) -> Result<HttpResponse, ApiError> {
    let site = client.site(&state, &id)?;
    if !client.token.manage_email {
        return Err(ApiError::ReadOnlyToken);
    }
    let bad =
        |parameter: &'static str, message: String| ApiError::BadParameter { parameter, message };
    // Exactly the document's pattern: no spaces around it either.
    if body.address.trim() != body.address {
        return Err(bad("address", "The address has spaces around it.".into()));
    }
    let address = Recipient::parse(&body.address)
        .map_err(|e| bad("address", format!("The address is refused: {e}.")))?;
    let schedule = Schedule::parse(&body.schedule)
        .map_err(|e| bad("schedule", format!("The schedule is refused: {e}.")))?;
    // The token's owner subscribes: their own address at once, any other
    // once it confirms by the link it is sent.
    let consent = stored::Consent::of(client.user.email.as_str(), &address);
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
        Ok((sub, created)) => {
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json(status, &SubscriptionBody::from(&sub)))
        }
        Err(SubscribeError::Database(e)) => Err(e.into()),
        Err(e @ SubscribeError::TooMany) => Err(bad("address", format!("{e}."))),
    }
}

/// `DELETE /api/v1/sites/{id}/email/subscriptions/{sub}`.
pub async fn api_remove(
    state: Data,
    client: ApiClient,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, sub) = path.into_inner();
    let site = client.site(&state, &id)?;
    if !client.token.manage_email {
        return Err(ApiError::ReadOnlyToken);
    }
    let sub = uuid::Uuid::try_parse(&sub)
        .ok()
        .filter(|u| u.hyphenated().to_string() == sub)
        .ok_or(ApiError::SubscriptionNotFound)?;
    if !stored::remove(&state.store, &site.id, sub).await? {
        return Err(ApiError::SubscriptionNotFound);
    }
    Ok(json(StatusCode::OK, &Removed { removed: true }))
}

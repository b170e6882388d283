//! Who calls the API: the bearer token, and the user it belongs to.

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::ApiError;
use crate::accounts::api_tokens::{self, ApiToken};
use crate::accounts::{users, User};
use crate::domain::{AccessToken, SiteId, TokenKind};
use crate::storage::sites::Site;
use crate::web::state::WebState;

/// A request with a live API token, and the token's user as they are now
/// (a token never reads more than its user currently may).
pub struct ApiClient {
    pub user: User,
    pub token: ApiToken,
}

impl ApiClient {
    /// Whether this token may read `site`: in its scope, and its user may
    /// see it (admin, or listed as an owner).
    pub fn can_read(&self, site: &Site) -> bool {
        self.token.covers(&site.id) && (self.user.is_admin() || site.owners.contains(&self.user.id))
    }

    /// The site `id` names, if this token may read it; otherwise the same
    /// 404 for unknown and forbidden ids.
    pub fn site(&self, state: &WebState, id: &str) -> Result<Arc<Site>, ApiError> {
        let id = SiteId::parse(id).map_err(|_| ApiError::SiteNotFound)?;
        state
            .directory
            .by_id(&id)
            .filter(|site| self.can_read(site))
            .ok_or(ApiError::SiteNotFound)
    }
}

/// The secret of `Authorization: Bearer <token>`; `None` without the header.
fn bearer(req: &HttpRequest) -> Option<Result<AccessToken, ApiError>> {
    let value = req.headers().get(header::AUTHORIZATION)?;
    Some(
        value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .and_then(|token| AccessToken::parse(TokenKind::Api, token).ok())
            .ok_or(ApiError::InvalidToken),
    )
}

impl FromRequest for ApiClient {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<WebState>>().cloned();
        let secret = bearer(req);
        Box::pin(async move {
            let state = state.ok_or(ApiError::InvalidToken)?;
            let secret = secret.ok_or(ApiError::MissingToken)??;
            let token = api_tokens::authenticate(&state.store, &secret, state.clock.now())
                .await?
                .ok_or(ApiError::InvalidToken)?;
            let user = users::find(&state.store, token.user_id.into())
                .await?
                .ok_or(ApiError::InvalidToken)?;
            Ok(ApiClient { user, token })
        })
    }
}

//! Users, sessions and the login rate limiter.

pub mod api_tokens;
pub mod limiter;
pub mod password;
pub mod sessions;
pub mod totp;
pub mod users;

pub use users::{Role, User};

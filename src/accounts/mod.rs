//! Users, sessions and the login rate limiter.

pub mod limiter;
pub mod password;
pub mod sessions;
pub mod totp;
pub mod users;

pub use users::{Role, User};

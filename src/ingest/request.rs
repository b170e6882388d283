//! What a hit's rules read of the HTTP request that carried it (the pixel
//! or a peer's endpoint, both in `web`): a few headers and the address it
//! came from. A trait rather than the web framework's types, so that this
//! layer knows nothing of HTTP servers and its rules can be tested alone.

use std::net::IpAddr;

/// A request's headers, looked up by lower-case name.
pub trait Headers {
    /// The first value of `name`, when it is text.
    fn first(&self, name: &str) -> Option<&str>;
    /// Every value of `name` that is text, in the order received.
    fn all(&self, name: &str) -> Vec<&str>;
}

/// The request of one hit, as its rules see it. The address and the
/// headers go no further than the rules (see `visitor`).
#[derive(Clone, Copy)]
pub struct HitRequest<'a> {
    /// The peer's address: the client, or a proxy in front of it.
    pub peer: Option<IpAddr>,
    pub headers: &'a dyn Headers,
}

//! The client address that login rate limiting (and the share links'
//! limit) counts by, and that the pixel hashes into a visitor id (never
//! keeping it).
//!
//! An IPv6 client counts by its /64: one subscriber or host is usually
//! handed a whole /64, so counting each address apart would give one
//! client 2^64 fresh limits.
//!
//! Behind a reverse proxy every peer address is the proxy's, so all users
//! would share one counter. `X-Forwarded-For` names the real client, but
//! anyone can send that header: it is believed only when the peer is a
//! configured proxy, and then read from the right (the entries a trusted
//! proxy appended) to the first address that is not itself a trusted proxy.

use std::net::IpAddr;

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpAddr>);

impl TrustedProxies {
    pub fn new(proxies: Vec<IpAddr>) -> Self {
        Self(proxies.into_iter().map(canonical).collect())
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.contains(&canonical(ip))
    }

    /// The client address for a request from `peer` carrying these
    /// `X-Forwarded-For` header values (in the order received), as it is
    /// counted (an IPv6 client by its /64); empty without a peer.
    pub fn client<'a>(
        &self,
        peer: Option<IpAddr>,
        forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> String {
        self.client_ip(peer, forwarded_for)
            .map(limit_key)
            .unwrap_or_default()
    }

    /// The client's own address (for the country lookup, which drops it).
    pub fn client_ip<'a>(
        &self,
        peer: Option<IpAddr>,
        forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> Option<IpAddr> {
        let peer = canonical(peer?);
        if !self.trusts(peer) {
            return Some(peer);
        }
        let hops: Vec<&str> = forwarded_for
            .into_iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        for hop in hops.iter().rev() {
            match hop.parse::<IpAddr>().map(canonical) {
                Ok(ip) if self.trusts(ip) => continue,
                Ok(ip) => return Some(ip),
                // A hop we cannot read could be anything the client wrote:
                // count by the last address a trusted proxy vouched for.
                Err(_) => break,
            }
        }
        Some(peer)
    }
}

/// What a client is counted as: an IPv4 address, or an IPv6 address's /64.
fn limit_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let network = u128::from(v6) & !((1u128 << 64) - 1);
            format!("{}/64", std::net::Ipv6Addr::from(network))
        }
    }
}

/// `::ffff:1.2.3.4` and `1.2.3.4` are one client.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let none = TrustedProxies::default();
        assert_eq!(none.client(ip("10.0.0.1"), ["1.2.3.4"]), "10.0.0.1");
        assert_eq!(none.client(None, ["1.2.3.4"]), "");
    }

    #[test]
    fn a_trusted_proxy_names_the_client() {
        let proxies = TrustedProxies::new(vec![
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
        ]);
        assert_eq!(proxies.client(ip("10.0.0.1"), ["1.2.3.4"]), "1.2.3.4");
        // The rightmost untrusted hop: what the client wrote itself is ignored.
        assert_eq!(
            proxies.client(ip("10.0.0.1"), ["6.6.6.6, 1.2.3.4, 10.0.0.2"]),
            "1.2.3.4"
        );
        assert_eq!(
            proxies.client(ip("10.0.0.1"), ["6.6.6.6", "1.2.3.4"]),
            "1.2.3.4"
        );
        assert_eq!(
            proxies.client(ip("::ffff:10.0.0.1"), ["::ffff:1.2.3.4"]),
            "1.2.3.4"
        );
        // No header, or only proxies, or garbage: the peer.
        assert_eq!(proxies.client(ip("10.0.0.1"), []), "10.0.0.1");
        assert_eq!(proxies.client(ip("10.0.0.1"), ["10.0.0.2"]), "10.0.0.1");
        assert_eq!(
            proxies.client(ip("10.0.0.1"), ["1.2.3.4, junk"]),
            "10.0.0.1"
        );
        // An untrusted peer's header is not believed.
        assert_eq!(proxies.client(ip("10.9.9.9"), ["1.2.3.4"]), "10.9.9.9");
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        // Each of a /64's 2^64 addresses had its own
        // limit.
        let none = TrustedProxies::default();
        let key = |peer: &str| none.client(ip(peer), []);
        assert_eq!(key("2001:db8:1:2::1"), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
        assert_ne!(key("2001:db8:1:3::1"), key("2001:db8:1:2::1"));
        assert_eq!(key("::ffff:1.2.3.4"), "1.2.3.4");
        let proxies = TrustedProxies::new(vec!["10.0.0.1".parse().unwrap()]);
        assert_eq!(
            proxies.client(ip("10.0.0.1"), ["2001:db8:a:b:c:d:e:f"]),
            "2001:db8:a:b::/64"
        );
    }
}

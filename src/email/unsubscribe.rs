//! Unsubscribe and confirmation links: the site and the address, and a
//! keyed hash of both and of what the link does with the instance's key
//! (`storage::email::link_key`). A link works without logging in, and only
//! for that address, that site and that purpose: changing any breaks the
//! hash, and nobody without the key can make one. A confirmation link is
//! sent only to its address, so following it shows the address agreed.

use crate::domain::{Recipient, SiteId};

/// The hash of one (site, address) for unsubscribing, as hex.
pub fn token(key: &[u8; 32], site: &SiteId, address: &Recipient) -> String {
    token_for(b"unsubscribe", key, site, address)
}

/// The hash of one (site, address) for confirming, as hex.
pub fn confirm_token(key: &[u8; 32], site: &SiteId, address: &Recipient) -> String {
    token_for(b"confirm", key, site, address)
}

fn token_for(purpose: &[u8], key: &[u8; 32], site: &SiteId, address: &Recipient) -> String {
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(purpose);
    hasher.update(b"\0");
    hasher.update(site.to_string().as_bytes());
    hasher.update(b"\0");
    hasher.update(address.as_str().as_bytes());
    hasher.finalize().to_hex().to_string()
}

/// Whether `token` is the one of (site, address); compared in constant
/// time.
pub fn verify(key: &[u8; 32], site: &SiteId, address: &Recipient, token_hex: &str) -> bool {
    same(&token(key, site, address), token_hex)
}

/// Whether `token` is the confirmation token of (site, address).
pub fn verify_confirm(key: &[u8; 32], site: &SiteId, address: &Recipient, token_hex: &str) -> bool {
    same(&confirm_token(key, site, address), token_hex)
}

fn same(expected_hex: &str, token_hex: &str) -> bool {
    match blake3::Hash::from_hex(token_hex) {
        Ok(given) => {
            let expected = blake3::Hash::from_hex(expected_hex).expect("hex of a hash");
            // `blake3::Hash`'s equality is constant-time.
            given == expected
        }
        Err(_) => false,
    }
}

/// The link, under `public_url`.
pub fn link(public_url: &str, key: &[u8; 32], site: &SiteId, address: &Recipient) -> String {
    let encoded: String =
        url::form_urlencoded::byte_serialize(address.as_str().as_bytes()).collect();
    format!(
        "{}/email/unsubscribe?site={site}&address={encoded}&token={}",
        public_url.trim_end_matches('/'),
        token(key, site, address)
    )
}

/// The confirmation link, under `public_url`.
pub fn confirm_link(
    public_url: &str,
    key: &[u8; 32],
    site: &SiteId,
    address: &Recipient,
) -> String {
    let encoded: String =
        url::form_urlencoded::byte_serialize(address.as_str().as_bytes()).collect();
    format!(
        "{}/email/confirm?site={site}&address={encoded}&token={}",
        public_url.trim_end_matches('/'),
        confirm_token(key, site, address)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_opens_only_its_site_and_address() {
        let key = [7u8; 32];
        let (a, b) = (SiteId::new(), SiteId::new());
        let ada = Recipient::parse("ada@example.com").unwrap();
        let bob = Recipient::parse("bob@example.com").unwrap();
        let t = token(&key, &a, &ada);
        assert!(verify(&key, &a, &ada, &t));
        assert!(!verify(&key, &b, &ada, &t), "another site");
        assert!(!verify(&key, &a, &bob, &t), "another address");
        assert!(!verify(&[8u8; 32], &a, &ada, &t), "another key");
        assert!(!verify(&key, &a, &ada, "not hex"));
        assert!(!verify(&key, &a, &ada, &t[..32]), "a shortened token");
    }

    #[test]
    fn a_confirmation_token_is_not_an_unsubscribe_token() {
        let key = [7u8; 32];
        let site = SiteId::new();
        let ada = Recipient::parse("ada@example.com").unwrap();
        let c = confirm_token(&key, &site, &ada);
        assert!(verify_confirm(&key, &site, &ada, &c));
        assert!(!verify(&key, &site, &ada, &c));
        assert!(!verify_confirm(
            &key,
            &site,
            &ada,
            &token(&key, &site, &ada)
        ));
    }

    #[test]
    fn the_link_encodes_the_address() {
        let site = SiteId::new();
        let r = Recipient::parse("a+b@example.com").unwrap();
        let l = link("https://stats.example.com/", &[1; 32], &site, &r);
        assert!(
            l.starts_with(&format!(
                "https://stats.example.com/email/unsubscribe?site={site}&address=a%2Bb%40example.com&token="
            )),
            "{l}"
        );
    }
}

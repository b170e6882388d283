use argon2::password_hash::rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};
use std::fmt;

/// A bearer secret: an API token (`tt_api_…`) or a share link (`tt_share_…`),
/// the prefix followed by 32 random bytes in hex (256 bits, well over the
/// 128 a bearer secret needs). The prefix says what a leaked string is, so a
/// secret scanner or a reader can tell; the database keeps only
/// [`AccessToken::hash`].
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    kind: TokenKind,
    secret: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Api,
    Share,
}

impl TokenKind {
    fn prefix(self) -> &'static str {
        match self {
            TokenKind::Api => "tt_api_",
            TokenKind::Share => "tt_share_",
        }
    }
}

const SECRET_BYTES: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AccessTokenError {
    #[error("the token has the wrong prefix")]
    Prefix,
    #[error("the token is not 64 hexadecimal digits after its prefix")]
    Shape,
}

impl AccessToken {
    pub fn generate(kind: TokenKind) -> Self {
        let mut bytes = [0u8; SECRET_BYTES];
        OsRng.fill_bytes(&mut bytes);
        Self {
            kind,
            secret: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// A token as a client sent it. Checked before any lookup so that junk
    /// costs no database read.
    pub fn parse(kind: TokenKind, raw: &str) -> Result<Self, AccessTokenError> {
        let secret = raw
            .strip_prefix(kind.prefix())
            .ok_or(AccessTokenError::Prefix)?;
        if secret.len() != SECRET_BYTES * 2
            || !secret
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(AccessTokenError::Shape);
        }
        Ok(Self {
            kind,
            secret: secret.to_owned(),
        })
    }

    /// What the database stores and looks up: SHA-256 of the whole token,
    /// hex. The secret has 256 bits of entropy, so a plain hash cannot be
    /// reversed by guessing (no salt or slow hash needed, unlike passwords).
    pub fn hash(&self) -> String {
        Sha256::digest(self.expose().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The token itself, to show once or to put in a link.
    pub fn expose(&self) -> String {
        format!("{}{}", self.kind.prefix(), self.secret)
    }
}

/// Never printed by accident (logs, panics).
impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AccessToken({:?}, ..)", self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_parses_back_and_differs_each_time() {
        let a = AccessToken::generate(TokenKind::Api);
        let b = AccessToken::generate(TokenKind::Api);
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("tt_api_"));
        assert_eq!(a.expose().len(), "tt_api_".len() + 64);
        assert_eq!(AccessToken::parse(TokenKind::Api, &a.expose()), Ok(a));
    }

    #[test]
    fn the_prefix_must_match_the_kind() {
        let share = AccessToken::generate(TokenKind::Share).expose();
        assert_eq!(
            AccessToken::parse(TokenKind::Api, &share),
            Err(AccessTokenError::Prefix)
        );
        assert!(AccessToken::parse(TokenKind::Share, &share).is_ok());
    }

    #[test]
    fn the_secret_is_64_lowercase_hex_digits() {
        let ok = format!("tt_api_{}", "a".repeat(64));
        assert!(AccessToken::parse(TokenKind::Api, &ok).is_ok());
        for bad in [
            format!("tt_api_{}", "a".repeat(63)),
            format!("tt_api_{}", "a".repeat(65)),
            format!("tt_api_{}", "A".repeat(64)),
            format!("tt_api_{}g", "a".repeat(63)),
            "tt_api_".to_owned(),
        ] {
            assert_eq!(
                AccessToken::parse(TokenKind::Api, &bad),
                Err(AccessTokenError::Shape),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_hash_is_sha256_of_the_whole_token_and_debug_hides_it() {
        let t = AccessToken::parse(TokenKind::Api, &format!("tt_api_{}", "0".repeat(64))).unwrap();
        assert_eq!(t.hash().len(), 64);
        assert_ne!(t.hash(), t.expose());
        assert!(!format!("{t:?}").contains("000"));
    }
}

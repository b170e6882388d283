//! Passwords: the rules a new one must meet, and argon2id hashing.

use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use secrecy::{ExposeSecret, SecretString};

pub const MIN_LENGTH: usize = 10;
pub const MAX_LENGTH: usize = 1024;

/// A password that meets the rules, held as a secret (never printed by
/// `Debug`, never logged).
#[derive(Debug, Clone)]
pub struct NewPassword(SecretString);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PasswordError {
    #[error("a password needs at least {MIN_LENGTH} characters")]
    TooShort,
    #[error("a password is at most {MAX_LENGTH} characters")]
    TooLong,
}

impl NewPassword {
    pub fn parse(raw: &str) -> Result<Self, PasswordError> {
        let n = raw.chars().count();
        if n < MIN_LENGTH {
            return Err(PasswordError::TooShort);
        }
        if n > MAX_LENGTH {
            return Err(PasswordError::TooLong);
        }
        Ok(Self(SecretString::from(raw.to_owned())))
    }

    /// A random password for generated accounts: 20 characters from an
    /// alphabet without look-alikes.
    pub fn generate() -> Self {
        const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let mut bytes = [0u8; 20];
        OsRng.fill_bytes(&mut bytes);
        let text: String = bytes
            .iter()
            .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
            .collect();
        Self(SecretString::from(text))
    }

    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// An argon2id PHC string (salt and parameters included).
    pub fn hash(&self) -> String {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(self.expose().as_bytes(), &salt)
            .expect("argon2 with default parameters hashes any input")
            .to_string()
    }
}

/// Checks `candidate` against a stored hash. A malformed hash never matches.
pub fn verify(candidate: &str, stored_hash: &str) -> bool {
    PasswordHash::new(stored_hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(candidate.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A hash to verify against when the account does not exist, so that a
/// wrong e-mail and a wrong password take the same time.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| NewPassword::generate().hash())
}

/// Random bytes as lower-case hex, for session and CSRF tokens.
pub fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    OsRng.fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_rules() {
        assert_eq!(
            NewPassword::parse("short").unwrap_err(),
            PasswordError::TooShort
        );
        assert_eq!(
            NewPassword::parse(&"x".repeat(1025)).unwrap_err(),
            PasswordError::TooLong
        );
        assert!(NewPassword::parse("correct horse").is_ok());
    }

    #[test]
    fn hashes_with_argon2id_and_verifies() {
        let p = NewPassword::parse("correct horse battery").unwrap();
        let hash = p.hash();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify("correct horse battery", &hash));
        assert!(!verify("wrong horse battery", &hash));
        assert!(!verify("anything", "not a hash"));
    }

    #[test]
    fn generated_passwords_meet_the_rules_and_differ() {
        let a = NewPassword::generate();
        assert!(NewPassword::parse(a.expose()).is_ok());
        assert_ne!(a.expose(), NewPassword::generate().expose());
        assert!(!format!("{a:?}").contains(a.expose()));
    }
}

//! Two-factor login with time-based one-time passwords (RFC 6238: SHA-1,
//! 6 digits, 30 s steps, as every authenticator app expects) and one-time
//! recovery codes. The code arithmetic is `totp-rs`; what is stored, and
//! that no code is accepted twice, is here.
//!
//! Stored on the user document: `totp.secret` (base32), `totp.lastStep`
//! (the newest time step a code was accepted for: a code, even a stolen
//! one, works once) and `totp.recovery` (SHA-256 of each unused recovery
//! code; the codes are random, so a fast hash is enough). A secret being
//! set up waits in `totpPending` until a code from it is confirmed.

use argon2::password_hash::rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};
use totp_rs::{Algorithm, TOTP};
use uuid::Uuid;

use super::sessions::tokens_match;
use crate::storage::Store;

const ISSUER: &str = "Tickertape";
const STEP_SECONDS: u64 = 30;
pub const RECOVERY_CODES: usize = 10;

/// A TOTP secret, base32 without padding, as authenticator apps take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret(String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a TOTP secret")]
pub struct BadSecret;

impl Secret {
    /// 160 random bits, the size RFC 4226 recommends.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 20];
        OsRng.fill_bytes(&mut bytes);
        Self(base32_encode(&bytes))
    }

    pub fn parse(raw: &str) -> Result<Self, BadSecret> {
        let secret = Self(raw.to_owned());
        secret.totp("x").map(|_| secret).map_err(|_| BadSecret)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn totp(&self, account: &str) -> Result<TOTP, BadSecret> {
        let bytes = totp_rs::Secret::Encoded(self.0.clone())
            .to_bytes()
            .map_err(|_| BadSecret)?;
        TOTP::new(
            Algorithm::SHA1,
            6,
            1,
            STEP_SECONDS,
            bytes,
            Some(ISSUER.to_owned()),
            account.to_owned(),
        )
        .map_err(|_| BadSecret)
    }

    /// The `otpauth://` URI an authenticator app imports.
    pub fn otpauth_url(&self, account: &str) -> String {
        self.totp(account).map(|t| t.get_url()).unwrap_or_default()
    }

    /// The time step `code` is valid for at `unix_seconds` (the current
    /// step, or one either side for clock drift), if any.
    pub fn matching_step(&self, code: &str, unix_seconds: u64) -> Option<u64> {
        let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let totp = self.totp("x").ok()?;
        let now = unix_seconds / STEP_SECONDS;
        (now.saturating_sub(1)..=now + 1)
            .find(|step| tokens_match(&totp.generate(step * STEP_SECONDS), &code))
    }

    /// The code for `unix_seconds` (tests stand in for the phone).
    pub fn code_at(&self, unix_seconds: u64) -> String {
        self.totp("x")
            .map(|t| t.generate(unix_seconds))
            .unwrap_or_default()
    }
}

fn base32_encode(bytes: &[u8]) -> String {
    match totp_rs::Secret::Raw(bytes.to_vec()).to_encoded() {
        totp_rs::Secret::Encoded(text) => text,
        totp_rs::Secret::Raw(_) => unreachable!("to_encoded always encodes"),
    }
}

/// Fresh recovery codes (shown once) and what is stored of them.
pub fn recovery_codes() -> (Vec<String>, Vec<String>) {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let codes: Vec<String> = (0..RECOVERY_CODES)
        .map(|_| {
            let mut bytes = [0u8; 10];
            OsRng.fill_bytes(&mut bytes);
            let chars: String = bytes
                .iter()
                .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
                .collect();
            format!("{}-{}", &chars[..5], &chars[5..])
        })
        .collect();
    let hashes = codes.iter().map(|c| recovery_hash(c)).collect();
    (codes, hashes)
}

/// Case, spaces and dashes do not matter when a code is typed back.
fn recovery_hash(code: &str) -> String {
    let normal: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    Sha256::digest(normal.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

use crate::storage::totp as stored;

/// The user's active secret, if two-factor login is on.
pub async fn active(store: &Store, user: Uuid) -> Result<Option<Secret>, mongodb::error::Error> {
    Ok(stored::load(store, user)
        .await?
        .and_then(|u| u.active().map(Secret::parse))
        .and_then(Result::ok))
}

/// The secret being set up, creating one if there is none yet.
pub async fn pending(store: &Store, user: Uuid) -> Result<Secret, mongodb::error::Error> {
    if let Some(secret) = stored::load(store, user)
        .await?
        .and_then(|u| u.pending().map(Secret::parse))
        .and_then(Result::ok)
    {
        return Ok(secret);
    }
    let secret = Secret::generate();
    stored::set_pending(store, user, secret.as_str()).await?;
    Ok(secret)
}

/// Turns two-factor login on with the pending secret, once `step` (from a
/// confirmed code) shows the user's app has it. Returns the recovery codes.
pub async fn enable(
    store: &Store,
    user: Uuid,
    secret: &Secret,
    step: u64,
) -> Result<Vec<String>, mongodb::error::Error> {
    let (codes, hashes) = recovery_codes();
    stored::enable(store, user, secret.as_str(), step, hashes).await?;
    Ok(codes)
}

pub async fn disable(store: &Store, user: Uuid) -> Result<(), mongodb::error::Error> {
    stored::disable(store, user).await
}

/// Accepts a code for `step` only if no code of this or a later step was
/// accepted before (one atomic update, `storage::totp::consume_step`).
pub async fn consume_step(
    store: &Store,
    user: Uuid,
    step: u64,
) -> Result<bool, mongodb::error::Error> {
    stored::consume_step(store, user, step).await
}

/// Uses up a recovery code, if it is one of the user's unused ones.
pub async fn consume_recovery(
    store: &Store,
    user: Uuid,
    code: &str,
) -> Result<bool, mongodb::error::Error> {
    stored::consume_recovery_hash(store, user, &recovery_hash(code)).await
}

/// A second factor as typed: a 6-digit code or a recovery code.
pub async fn verify(
    store: &Store,
    user: Uuid,
    secret: &Secret,
    typed: &str,
    unix_seconds: u64,
) -> Result<bool, mongodb::error::Error> {
    match secret.matching_step(typed, unix_seconds) {
        Some(step) => consume_step(store, user, step).await,
        None => consume_recovery(store, user, typed).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_6238_test_vector() {
        // RFC 6238 appendix B, SHA-1, secret "12345678901234567890".
        let secret = Secret(base32_encode(b"12345678901234567890"));
        assert_eq!(secret.code_at(59), "287082");
        assert_eq!(secret.code_at(1_111_111_109), "081804");
        assert_eq!(secret.code_at(2_000_000_000), "279037");
    }

    #[test]
    fn codes_match_their_step_and_one_either_side_only() {
        let secret = Secret::generate();
        let t = 1_800_000_000;
        let code = secret.code_at(t);
        assert_eq!(secret.matching_step(&code, t), Some(t / 30));
        assert_eq!(secret.matching_step(&code, t + 30), Some(t / 30));
        assert_eq!(secret.matching_step(&code, t - 30), Some(t / 30));
        assert_eq!(secret.matching_step(&code, t + 90), None);
        assert_eq!(
            secret.matching_step(&format!("{} {}", &code[..3], &code[3..]), t),
            Some(t / 30)
        );
        for bad in ["", "12345", "1234567", "abcdef", "12345x"] {
            assert_eq!(secret.matching_step(bad, t), None, "{bad}");
        }
    }

    #[test]
    fn secrets_are_base32_and_parse_back() {
        let s = Secret::generate();
        assert_eq!(s.as_str().len(), 32);
        assert_eq!(Secret::parse(s.as_str()), Ok(s.clone()));
        assert!(Secret::parse("not base32!").is_err());
        assert!(Secret::parse("AAAA").is_err(), "too short");
        let url = s.otpauth_url("a@example.com");
        assert!(
            url.starts_with("otpauth://totp/Tickertape:a%40example.com?secret="),
            "{url}"
        );
        assert!(url.contains("issuer=Tickertape"));
    }

    #[test]
    fn recovery_codes_are_distinct_and_typed_back_loosely() {
        let (codes, hashes) = recovery_codes();
        assert_eq!(codes.len(), RECOVERY_CODES);
        let mut unique = hashes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), RECOVERY_CODES);
        assert_eq!(
            recovery_hash(&codes[0].to_uppercase().replace('-', " ")),
            hashes[0]
        );
    }
}

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

/// Bounds how many password checks run at once. An argon2id check holds
/// about 19 MiB and a core for tens of milliseconds, so unbounded
/// concurrent logins could take the process to gigabytes and starve
/// everything else. Checks beyond `permits` wait briefly for a slot; when
/// none frees up in time, or too many are already waiting, the caller is
/// told to come back later instead of queueing without limit.
pub struct PasswordChecks {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    limit: usize,
    max_waiting: usize,
    max_wait: std::time::Duration,
    waiting: std::sync::atomic::AtomicUsize,
    running: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    peak: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("too many password checks are running")]
pub struct Busy;

impl PasswordChecks {
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(limit)),
            limit,
            max_waiting: limit * 8,
            max_wait: std::time::Duration::from_secs(2),
            waiting: Default::default(),
            running: Default::default(),
            peak: Default::default(),
        }
    }

    /// How long a check may wait for a slot before the caller is told to
    /// come back later (default 2 s).
    pub fn with_max_wait(mut self, max_wait: std::time::Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The most checks that ever ran at the same time.
    pub fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`verify`] on the blocking pool, within the bound.
    pub async fn verify(&self, candidate: &str, stored_hash: &str) -> Result<bool, Busy> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.waiting.fetch_add(1, Relaxed) >= self.max_waiting {
            self.waiting.fetch_sub(1, Relaxed);
            return Err(Busy);
        }
        let permit =
            tokio::time::timeout(self.max_wait, self.permits.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Relaxed);
        let Ok(Ok(permit)) = permit else {
            return Err(Busy);
        };
        let (candidate, hash) = (candidate.to_owned(), stored_hash.to_owned());
        let (running, peak) = (self.running.clone(), self.peak.clone());
        // The permit moves into the blocking task: if the request is
        // cancelled, the hash still runs to its end and keeps its slot.
        tokio::task::spawn_blocking(move || {
            peak.fetch_max(running.fetch_add(1, Relaxed) + 1, Relaxed);
            let matches = verify(&candidate, &hash);
            running.fetch_sub(1, Relaxed);
            drop(permit);
            matches
        })
        .await
        .map_err(|_| Busy)
    }
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
    fn hashes_use_at_least_owasps_minimum_argon2id_parameters() {
        // OWASP: argon2id with m = 19 MiB, t = 2, p = 1 at the least.
        let hash = NewPassword::parse("correct horse battery").unwrap().hash();
        let parsed = PasswordHash::new(&hash).unwrap();
        let param = |name: &str| parsed.params.get_decimal(name).unwrap();
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert!(param("m") >= 19 * 1024, "{hash}");
        assert!(param("t") >= 2, "{hash}");
        assert!(param("p") >= 1, "{hash}");
    }

    #[tokio::test]
    async fn checks_beyond_the_bound_wait_and_never_run_together() {
        let checks = std::sync::Arc::new(
            PasswordChecks::new(2).with_max_wait(std::time::Duration::from_secs(120)),
        );
        let hash = NewPassword::parse("correct horse battery").unwrap().hash();
        let all: Vec<_> = (0..6)
            .map(|_| {
                let (checks, hash) = (checks.clone(), hash.clone());
                tokio::spawn(async move { checks.verify("wrong horse battery", &hash).await })
            })
            .collect();
        for task in all {
            assert_eq!(task.await.unwrap(), Ok(false));
        }
        assert_eq!(checks.peak(), 2);
    }

    #[tokio::test]
    async fn too_many_waiting_are_refused_at_once() {
        let checks = std::sync::Arc::new(PasswordChecks::new(1));
        let hash = NewPassword::parse("correct horse battery").unwrap().hash();
        let all: Vec<_> = (0..40)
            .map(|_| {
                let (checks, hash) = (checks.clone(), hash.clone());
                tokio::spawn(async move { checks.verify("x", &hash).await })
            })
            .collect();
        let mut busy = 0;
        for task in all {
            if task.await.unwrap() == Err(Busy) {
                busy += 1;
            }
        }
        // One hashing, at most eight waiting: the rest were refused at
        // once (counted, not timed: a busy machine hashes slowly).
        assert!(busy >= 40 - 1 - 8, "{busy} refused");
        assert_eq!(checks.peak(), 1);
    }

    #[test]
    fn generated_passwords_meet_the_rules_and_differ() {
        let a = NewPassword::generate();
        assert!(NewPassword::parse(a.expose()).is_ok());
        assert_ne!(a.expose(), NewPassword::generate().expose());
        assert!(!format!("{a:?}").contains(a.expose()));
    }
}

//! `TICKERTAPE_SMTP_*` and `TICKERTAPE_EMAIL_*`: where and how email
//! reports and alerts are sent (docs/email.md).

use clap::Args;
use secrecy::{ExposeSecret, SecretString};
use std::path::PathBuf;
use std::time::Duration;

use crate::email::smtp::{CaCertificates, SmtpUrl};
use crate::email::EmailConfig;

#[derive(Debug, Clone, Args)]
pub struct EmailSettings {
    /// The SMTP server reports and alerts go through:
    /// `smtp://user:password@host:port` (STARTTLS when the server offers
    /// it; add `?tls=required` to insist on it) or `smtps://…` (TLS from
    /// the start). User and password URL-encoded. Unset: no email is sent.
    #[arg(long = "smtp-url", env = "TICKERTAPE_SMTP_URL", value_parser = secret, hide_env_values = true)]
    pub smtp_url: Option<SecretString>,

    /// The sender of every email, e.g. `Tickertape <stats@example.com>`.
    #[arg(long = "smtp-from", env = "TICKERTAPE_SMTP_FROM")]
    pub smtp_from: Option<String>,

    /// A PEM file of certificates to trust for the SMTP server's TLS
    /// certificate besides the system's roots: a relay's private CA, or its
    /// self-signed certificate. Read at start.
    #[arg(long = "smtp-ca-file", env = "TICKERTAPE_SMTP_CA_FILE")]
    pub smtp_ca_file: Option<PathBuf>,

    /// How often the sender looks for due reports, alerts and retries, in
    /// milliseconds.
    #[arg(long, env = "TICKERTAPE_EMAIL_CHECK_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(10..))]
    pub email_check_ms: u64,

    /// The wait before a failed email is tried again, in seconds; each
    /// next wait is 4 times longer (at most 6 hours).
    #[arg(long, env = "TICKERTAPE_EMAIL_RETRY_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub email_retry_secs: u64,

    /// Attempts before an email is given up.
    #[arg(long, env = "TICKERTAPE_EMAIL_MAX_ATTEMPTS", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub email_max_attempts: u32,

    /// How long one SMTP connection or command may take, in seconds.
    #[arg(long, env = "TICKERTAPE_SMTP_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub smtp_timeout_secs: u64,
}

/// Kept as a secret from the start: clap's own error would print a value
/// it refused, password and all, so the URL is checked afterwards
/// ([`EmailSettings::email_config`]) with errors that never quote it.
fn secret(raw: &str) -> Result<SecretString, String> {
    Ok(SecretString::from(raw.to_owned()))
}

impl EmailSettings {
    /// What the sender runs with; refuses a URL or sender it cannot use.
    pub fn email_config(&self) -> Result<EmailConfig, String> {
        let smtp = self
            .smtp_url
            .as_ref()
            .filter(|u| !u.expose_secret().trim().is_empty())
            .map(|u| SmtpUrl::parse(u.expose_secret()))
            .transpose()
            .map_err(|e| e.to_string())?;
        let from = self
            .smtp_from
            .as_deref()
            .filter(|f| !f.trim().is_empty())
            .map(|f| {
                f.trim().parse::<lettre::message::Mailbox>().map_err(|e| {
                    format!("TICKERTAPE_SMTP_FROM is not an address (e.g. Tickertape <stats@example.com>): {e}")
                })
            })
            .transpose()?;
        if smtp.is_some() && from.is_none() {
            return Err("TICKERTAPE_SMTP_URL is set but TICKERTAPE_SMTP_FROM is not: set the sender address too".into());
        }
        // Read even without a server, so that a wrong file is found the
        // day it is set rather than the day email is turned on.
        let ca = self
            .smtp_ca_file
            .as_deref()
            .filter(|p| !p.as_os_str().is_empty())
            .map(CaCertificates::read)
            .transpose()
            .map_err(|e| e.to_string())?;
        let timeout = Duration::from_secs(self.smtp_timeout_secs);
        Ok(EmailConfig {
            smtp,
            from,
            ca,
            check_every: Duration::from_millis(self.email_check_ms),
            first_retry: chrono::TimeDelta::seconds(self.email_retry_secs as i64),
            max_attempts: self.email_max_attempts as i32,
            // A send takes at most a few timeouts (connect, commands, data).
            lease: chrono::TimeDelta::from_std(timeout * 6)
                .unwrap_or(chrono::TimeDelta::minutes(10)),
            timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(url: Option<&str>, from: Option<&str>) -> EmailSettings {
        let mut s = crate::settings::Settings::defaults().email;
        s.smtp_url = url.map(secret).transpose().unwrap();
        s.smtp_from = from.map(str::to_owned);
        s
    }

    #[test]
    fn unset_sends_nothing() {
        let c = with(None, None).email_config().unwrap();
        assert!(!c.enabled());
        assert_eq!(c.check_every, Duration::from_secs(60));
    }

    #[test]
    fn a_server_needs_a_sender() {
        let e = with(Some("smtp://u:hunter2@h"), None)
            .email_config()
            .unwrap_err();
        assert!(e.contains("TICKERTAPE_SMTP_FROM"), "{e}");
        let c = with(
            Some("smtp://u:hunter2@h"),
            Some("Stats <stats@example.com>"),
        )
        .email_config()
        .unwrap();
        assert!(c.enabled());
    }

    #[test]
    fn a_bad_url_is_refused_without_quoting_it() {
        let e = with(Some("ftp://u:hunter2@h"), Some("a@example.com"))
            .email_config()
            .unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        let e = with(Some("smtp://u:hunter2@h?x=hunter2"), Some("a@example.com"))
            .email_config()
            .unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn a_malformed_percent_escape_is_refused_naming_the_variable() {
        for url in [
            "smtp://u:hunter2%zz@h",
            "smtp://u%4:hunter2@h",
            "smtp://u:hunter2%@h",
            "smtp://u:hunter2%G1@h",
        ] {
            let e = with(Some(url), Some("a@example.com"))
                .email_config()
                .unwrap_err();
            assert!(e.contains("TICKERTAPE_SMTP_URL"), "{url}: {e}");
            assert!(!e.contains("hunter2"), "{url}: {e}");
        }
    }

    #[test]
    fn a_ca_file_is_read_at_start_and_a_bad_one_refused_by_its_name() {
        let mut s = with(
            Some("smtps://u:hunter2@relay.internal"),
            Some("a@example.com"),
        );
        s.smtp_ca_file = Some("/nonexistent/relay-ca.pem".into());
        let e = s.email_config().unwrap_err();
        assert!(
            e.contains("TICKERTAPE_SMTP_CA_FILE /nonexistent/relay-ca.pem"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        // Without a server too: the file is checked the day it is set.
        let mut s = with(None, None);
        s.smtp_ca_file = Some("/nonexistent/relay-ca.pem".into());
        assert!(s.email_config().is_err());
        // Empty is unset.
        s.smtp_ca_file = Some("".into());
        assert!(s.email_config().unwrap().ca.is_none());
    }
}

//! Sending through an SMTP server with `lettre` (rustls for TLS), as
//! `TICKERTAPE_SMTP_URL` says:
//!
//! - `smtp://host[:port]`: port 587 by default; STARTTLS when the server
//!   offers it, else plain (a local relay);
//! - `smtp://user:password@host[:port]`: STARTTLS or nothing is sent,
//!   since the credentials must not cross the network in the clear;
//! - `smtp://…?tls=required`: STARTTLS or nothing is sent, with or
//!   without credentials (what a provider on port 587 wants);
//! - `smtp://user:password@…?auth_without_tls=true`: STARTTLS when
//!   offered, else AUTH in the clear: only for a relay on the same host or
//!   a trusted network, and only when the URL says so;
//! - `smtps://[user:password@]host[:port]`: TLS from the first byte, port
//!   465 by default.
//!
//! User and password are URL-encoded in the address (`%40` for `@`); with
//! them the client authenticates (PLAIN or LOGIN). The password is held as
//! a secret and shown nowhere: not in logs, errors or `Debug`; nor is the
//! user name, which for some providers (Postmark, SES) is a credential too.
//!
//! The server's certificate is checked against the system's roots, and
//! also against the certificates of `TICKERTAPE_SMTP_CA_FILE` when set (a
//! relay with a private CA).

use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use secrecy::{ExposeSecret, SecretString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::render::Rendered;
use crate::domain::Recipient;

/// How the connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// STARTTLS when offered, else plain (without credentials, or with
    /// `auth_without_tls=true`).
    StartTlsWhenOffered,
    /// STARTTLS, or fail.
    StartTlsRequired,
    /// TLS from the start (`smtps://`).
    Tls,
}

/// A parsed `TICKERTAPE_SMTP_URL`.
#[derive(Clone)]
pub struct SmtpUrl {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub user: Option<String>,
    password: Option<SecretString>,
    /// `?auth_without_tls=true`: credentials may go in the clear when the
    /// server offers no STARTTLS.
    pub auth_without_tls: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SmtpUrlError {
    #[error("TICKERTAPE_SMTP_URL is not a URL (e.g. smtp://user:password@smtp.example.com:587)")]
    NotAUrl,
    #[error("TICKERTAPE_SMTP_URL starts with smtp:// (STARTTLS when offered) or smtps:// (TLS), not {0}://")]
    Scheme(String),
    #[error("TICKERTAPE_SMTP_URL names no host")]
    NoHost,
    #[error("TICKERTAPE_SMTP_URL's user or password is not valid URL-encoded UTF-8 (a % must be followed by two hex digits; write %25 for a % itself)")]
    Encoding,
    #[error("TICKERTAPE_SMTP_URL takes only ?tls=required or ?auth_without_tls=true (with smtp://), not ?{0}")]
    Query(String),
    #[error("TICKERTAPE_SMTP_URL's ?tls=required and ?auth_without_tls=true contradict each other: choose one")]
    Contradiction,
    #[error("TICKERTAPE_SMTP_URL has a password without a user")]
    PasswordWithoutUser,
}

impl SmtpUrl {
    pub fn parse(raw: &str) -> Result<Self, SmtpUrlError> {
        let url = url::Url::parse(raw.trim()).map_err(|_| SmtpUrlError::NotAUrl)?;
        let (mut security, default_port) = match url.scheme() {
            "smtp" => (Security::StartTlsWhenOffered, 587),
            "smtps" => (Security::Tls, 465),
            other => return Err(SmtpUrlError::Scheme(other.to_owned())),
        };
        let mut auth_without_tls = false;
        for pair in url.query().unwrap_or_default().split('&') {
            match pair {
                "" => {}
                "tls=required" if scheme_is_smtp(&url) => {
                    if auth_without_tls {
                        return Err(SmtpUrlError::Contradiction);
                    }
                    security = Security::StartTlsRequired
                }
                "auth_without_tls=true" if scheme_is_smtp(&url) => {
                    if security == Security::StartTlsRequired {
                        return Err(SmtpUrlError::Contradiction);
                    }
                    auth_without_tls = true
                }
                // Never echo the query: it is the user's, not ours to log.
                _ => return Err(SmtpUrlError::Query("…".into())),
            }
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or(SmtpUrlError::NoHost)?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        // `percent_decode_str` keeps a `%` not followed by two hex digits
        // as it is: a password typed unencoded would then be used changed
        // (or not at all) without a word, so such a URL is refused.
        let decode = |s: &str| {
            if !well_escaped(s) {
                return Err(SmtpUrlError::Encoding);
            }
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| SmtpUrlError::Encoding)
        };
        let user = match url.username() {
            "" => None,
            u => Some(decode(u)?),
        };
        let password = url
            .password()
            .map(decode)
            .transpose()?
            .map(SecretString::from);
        if user.is_none() && password.is_some() {
            return Err(SmtpUrlError::PasswordWithoutUser);
        }
        Ok(SmtpUrl {
            port: url.port().unwrap_or(default_port),
            host,
            security,
            user,
            password,
            auth_without_tls,
        })
    }

    pub fn has_credentials(&self) -> bool {
        self.user.is_some()
    }

    /// How the connection is made: with credentials, STARTTLS is required
    /// unless the URL allows AUTH in the clear.
    pub fn tls_mode(&self) -> Security {
        match self.security {
            Security::StartTlsWhenOffered if self.has_credentials() && !self.auth_without_tls => {
                Security::StartTlsRequired
            }
            other => other,
        }
    }

    /// The server as an administrator may see it: host, port and how the
    /// connection is protected; no user name, no password.
    pub fn server(&self) -> String {
        let how = match self.tls_mode() {
            Security::Tls => "TLS",
            Security::StartTlsRequired => "STARTTLS required",
            Security::StartTlsWhenOffered => "STARTTLS when offered",
        };
        format!("{}:{} ({how})", self.host, self.port)
    }
}

fn scheme_is_smtp(url: &url::Url) -> bool {
    url.scheme() == "smtp"
}

/// Whether every `%` in `s` starts an escape of two hex digits.
fn well_escaped(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// What logs may show: neither the password nor the user name (for some
/// providers the user name is the credential).
impl fmt::Display for SmtpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.security {
            Security::Tls => "smtps",
            _ => "smtp",
        };
        write!(f, "{scheme}://")?;
        if self.user.is_some() {
            write!(f, "***:***@")?;
        }
        write!(f, "{}:{}", self.host, self.port)?;
        if self.security == Security::StartTlsRequired {
            write!(f, "?tls=required")?;
        }
        if self.auth_without_tls {
            write!(f, "?auth_without_tls=true")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SmtpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SmtpUrl({self})")
    }
}

/// The certificates of `TICKERTAPE_SMTP_CA_FILE`, trusted as roots for
/// the SMTP server's certificate in addition to the system's (a
/// self-hosted relay whose certificate a private CA signed, or the
/// self-signed certificate itself).
#[derive(Clone)]
pub struct CaCertificates {
    path: PathBuf,
    certificates: Vec<Certificate>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("TICKERTAPE_SMTP_CA_FILE {path} cannot be read: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("TICKERTAPE_SMTP_CA_FILE {path} holds no PEM certificate (a block starting -----BEGIN CERTIFICATE-----)")]
    NoCertificate { path: String },
    #[error("TICKERTAPE_SMTP_CA_FILE {path} is not a valid PEM certificate: {reason}")]
    NotACertificate { path: String, reason: String },
}

impl CaCertificates {
    /// Reads and checks the file at start-up, so that a wrong path or file
    /// stops the start with its reason rather than failing every email
    /// later with a TLS error.
    pub fn read(path: &Path) -> Result<Self, CaFileError> {
        let shown = path.display().to_string();
        let pem = std::fs::read(path).map_err(|e| CaFileError::Unreadable {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        Self::parse(&shown, &pem)
    }

    /// The certificates of PEM text `pem` (other blocks, such as a key, are
    /// passed over); `path` names it in errors.
    pub fn parse(path: &str, pem: &[u8]) -> Result<Self, CaFileError> {
        let not_a_certificate = |reason: String| CaFileError::NotACertificate {
            path: path.to_owned(),
            reason,
        };
        let ders = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| not_a_certificate(e.to_string()))?;
        if ders.is_empty() {
            return Err(CaFileError::NoCertificate {
                path: path.to_owned(),
            });
        }
        let certificates = ders
            .into_iter()
            .map(|der| Certificate::from_der(der.to_vec()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| not_a_certificate(e.to_string()))?;
        // Decoding the base64 checks no more than the PEM armour: rustls
        // parses each as X.509 only when it is made a root, so that is done
        // here once, alone, to refuse a broken one by its file's name.
        certificates
            .iter()
            .fold(
                TlsParameters::builder("localhost".into())
                    .certificate_store(CertificateStore::None),
                |b, c| b.add_root_certificate(c.clone()),
            )
            .build()
            .map_err(|e| not_a_certificate(crate::telemetry::chain(&e)))?;
        Ok(CaCertificates {
            path: PathBuf::from(path),
            certificates,
        })
    }
}

impl fmt::Debug for CaCertificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CaCertificates({}: {})",
            self.path.display(),
            self.certificates.len()
        )
    }
}

/// Why an email did not go out.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SendFailure {
    /// Worth trying again: no connection, a timeout, a 4xx answer.
    #[error("{0}")]
    Transient(String),
    /// The server refused it for good (5xx), or it cannot be built.
    #[error("{0}")]
    Permanent(String),
}

/// The configured SMTP server and sender.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    url: SmtpUrl,
}

impl fmt::Debug for Mailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mailer({} as {})", self.url, self.from)
    }
}

impl Mailer {
    pub fn new(
        url: &SmtpUrl,
        from: Mailbox,
        timeout: Duration,
        ca: Option<&CaCertificates>,
    ) -> Result<Self, String> {
        // The system's roots stay (CertificateStore::Default): the extra
        // ones are added to them, not put in their place.
        let tls = |url: &SmtpUrl| {
            ca.map_or(&[][..], |c| &c.certificates[..])
                .iter()
                .fold(TlsParameters::builder(url.host.clone()), |b, c| {
                    b.add_root_certificate(c.clone())
                })
                .build()
                .map_err(|e| format!("TLS set-up for {}: {e}", url.host))
        };
        let tls = match url.tls_mode() {
            Security::StartTlsWhenOffered => Tls::Opportunistic(tls(url)?),
            Security::StartTlsRequired => Tls::Required(tls(url)?),
            Security::Tls => Tls::Wrapper(tls(url)?),
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(url.host.clone())
            .port(url.port)
            .tls(tls)
            .timeout(Some(timeout));
        if let Some(user) = &url.user {
            let password = url
                .password
                .as_ref()
                .map(|p| p.expose_secret().to_owned())
                .unwrap_or_default();
            builder = builder.credentials(Credentials::new(user.clone(), password));
        }
        Ok(Mailer {
            transport: builder.build(),
            from,
            url: url.clone(),
        })
    }

    /// The server, as logs and the system page may show it.
    pub fn server(&self) -> String {
        self.url.server()
    }

    pub fn from(&self) -> &Mailbox {
        &self.from
    }

    /// The message: both parts, and the one-click unsubscribe headers of
    /// RFC 8058 (`List-Unsubscribe` with the link, and
    /// `List-Unsubscribe-Post`, which lets a mail client unsubscribe with
    /// one POST to it).
    pub fn message(
        &self,
        to: &Recipient,
        rendered: &Rendered,
        unsubscribe: &str,
    ) -> Result<Message, SendFailure> {
        let to: Mailbox = to
            .as_str()
            .parse()
            .map_err(|e| SendFailure::Permanent(format!("the address cannot be used: {e}")))?;
        // Our own Message-ID on every mail, at the sender's domain: a relay
        // that would add one is not relied on, and spam filters mark mails
        // without one.
        let id = format!(
            "<{}@{}>",
            uuid::Uuid::new_v4().simple(),
            self.from.email.domain()
        );
        Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(rendered.subject.clone())
            .message_id(Some(id))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("List-Unsubscribe"),
                format!("<{unsubscribe}>"),
            ))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("List-Unsubscribe-Post"),
                "List-Unsubscribe=One-Click".to_owned(),
            ))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("Auto-Submitted"),
                "auto-generated".to_owned(),
            ))
            .multipart(MultiPart::alternative_plain_html(
                rendered.text.clone(),
                rendered.html.clone(),
            ))
            .map_err(|e| SendFailure::Permanent(format!("the message cannot be built: {e}")))
    }

    /// Hands one message to the server.
    pub async fn send(&self, message: Message) -> Result<(), SendFailure> {
        match self.transport.send(message).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_permanent() => Err(SendFailure::Permanent(e.to_string())),
            Err(e) => {
                let mut what = e.to_string();
                // STARTTLS was required because of the credentials, not
                // by the URL: say how to allow the clear, if wanted.
                if self.url.tls_mode() != self.url.security && what.contains("STARTTLS") {
                    what.push_str(": the server offers no STARTTLS, and credentials are never sent in the clear unless TICKERTAPE_SMTP_URL ends with ?auth_without_tls=true");
                }
                Err(SendFailure::Transient(what))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtp_is_starttls_when_offered_on_587() {
        let u = SmtpUrl::parse("smtp://relay.example.com").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.security),
            ("relay.example.com", 587, Security::StartTlsWhenOffered)
        );
        assert!(!u.has_credentials());
    }

    #[test]
    fn tls_required_insists_on_starttls() {
        let u = SmtpUrl::parse("smtp://a:b@smtp.gmail.com:587?tls=required").unwrap();
        assert_eq!(u.security, Security::StartTlsRequired);
        assert_eq!(
            SmtpUrl::parse("smtps://h?tls=required").unwrap_err(),
            SmtpUrlError::Query("…".into())
        );
        assert!(SmtpUrl::parse("smtp://h?tls=none").is_err());
    }

    #[test]
    fn smtps_is_tls_on_465() {
        let u = SmtpUrl::parse("smtps://mail.example.com").unwrap();
        assert_eq!((u.port, u.security), (465, Security::Tls));
    }

    #[test]
    fn credentials_are_url_decoded_and_never_shown() {
        let u =
            SmtpUrl::parse("smtp://me%40example.com:p%40ss%2Fw0rd@smtp.example.com:2525").unwrap();
        assert_eq!(u.user.as_deref(), Some("me@example.com"));
        assert_eq!(u.password.as_ref().unwrap().expose_secret(), "p@ss/w0rd");
        assert_eq!(u.port, 2525);
        for shown in [u.to_string(), format!("{u:?}"), u.server()] {
            assert!(
                !shown.contains("p@ss") && !shown.contains("p%40ss"),
                "{shown}"
            );
            assert!(!shown.contains("me@example.com"), "{shown}");
            assert!(shown.contains("smtp.example.com:2525"), "{shown}");
        }
        assert_eq!(u.server(), "smtp.example.com:2525 (STARTTLS required)");
    }

    #[test]
    fn credentials_require_starttls_unless_the_url_allows_the_clear() {
        let with = SmtpUrl::parse("smtp://u:p@relay").unwrap();
        assert_eq!(with.tls_mode(), Security::StartTlsRequired);
        let without = SmtpUrl::parse("smtp://relay").unwrap();
        assert_eq!(without.tls_mode(), Security::StartTlsWhenOffered);
        let allowed = SmtpUrl::parse("smtp://u:p@localhost:25?auth_without_tls=true").unwrap();
        assert_eq!(allowed.tls_mode(), Security::StartTlsWhenOffered);
        assert!(allowed.to_string().ends_with("?auth_without_tls=true"));
        assert_eq!(
            SmtpUrl::parse("smtp://u:p@h?tls=required&auth_without_tls=true").unwrap_err(),
            SmtpUrlError::Contradiction
        );
        for refused in [
            "smtps://u:p@h?auth_without_tls=true",
            "smtp://u:p@h?auth_without_tls=yes",
        ] {
            assert_eq!(
                SmtpUrl::parse(refused).unwrap_err(),
                SmtpUrlError::Query("…".into()),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_percent_without_two_hex_digits_is_refused() {
        for url in [
            "smtp://u:p%zz@h",
            "smtp://u:p%@h",
            "smtp://u:p%4@h",
            "smtp://u%g0:p@h",
        ] {
            assert_eq!(
                SmtpUrl::parse(url).unwrap_err(),
                SmtpUrlError::Encoding,
                "{url}"
            );
        }
        let ok = SmtpUrl::parse("smtp://u:100%25@h").unwrap();
        assert_eq!(ok.password.unwrap().expose_secret(), "100%");
        assert!(well_escaped("") && well_escaped("%41%2f") && !well_escaped("%2"));
    }

    #[test]
    fn other_schemes_and_hostless_urls_are_refused() {
        assert_eq!(
            SmtpUrl::parse("http://x").unwrap_err(),
            SmtpUrlError::Scheme("http".into())
        );
        assert_eq!(
            SmtpUrl::parse("not a url").unwrap_err(),
            SmtpUrlError::NotAUrl
        );
        assert!(SmtpUrl::parse("smtp://:secret@host").is_err());
    }

    /// A throwaway CA's certificate (its key was thrown away): only read here.
    const CA_PEM: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBnDCCAUGgAwIBAgIUQbSwmeb6y+OqNft4rDx7UCWHXrEwCgYIKoZIzj0EAwIw\n\
IjEgMB4GA1UEAwwXVGlja2VydGFwZSB1bml0LXRlc3QgQ0EwIBcNMjYxMTI3MTEw\n\
NjIyWhgPMjEyNjExMDMxMTA2MjJaMCIxIDAeBgNVBAMMF1RpY2tlcnRhcGUgdW5p\n\
dC10ZXN0IENBMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEcPa+FUQu5DT7v1kR\n\
BqKEIxi4kNfD4c/UBYfzkzDk49BY8fEEsgdfNIJKxEHLXPBdA05WawWAjlGOgyv9\n\
zsfseKNTMFEwHQYDVR0OBBYEFKPh/+zXXGTaJwETnxhdIfGJ5KBKMB8GA1UdIwQY\n\
MBaAFKPh/+zXXGTaJwETnxhdIfGJ5KBKMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZI\n\
zj0EAwIDSQAwRgIhANGDpGbJOvBs0yEyAe9+uy6t5MUT7BFpkhmg4LPuwXvSAiEA\n\
36wQmS4IA2Wt8naCGucZBD+LEpT03F5dOVp0tJ9Fr1E=\n\
-----END CERTIFICATE-----\n\
";

    #[test]
    fn a_ca_file_of_pem_certificates_is_read_passing_over_other_blocks() {
        let one = CaCertificates::parse("ca.pem", CA_PEM.as_bytes()).unwrap();
        assert_eq!(one.certificates.len(), 1);
        // A bundle, with a key and comments around it, as files often are.
        let bundle = format!(
            "# the relay's CA\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{CA_PEM}\n{CA_PEM}"
        );
        let two = CaCertificates::parse("bundle.pem", bundle.as_bytes()).unwrap();
        assert_eq!(format!("{two:?}"), "CaCertificates(bundle.pem: 2)");
    }

    #[test]
    fn an_unreadable_ca_file_is_refused_by_its_name() {
        let e = CaCertificates::read(Path::new("/nonexistent/relay-ca.pem")).unwrap_err();
        assert!(matches!(e, CaFileError::Unreadable { .. }), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.contains("TICKERTAPE_SMTP_CA_FILE /nonexistent/relay-ca.pem cannot be read"),
            "{shown}"
        );
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        let der = [0x30, 0x82, 0x01, 0x9c, 0x30, 0x82];
        for content in [
            &b""[..],
            b"just some text\n",
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            // DER, not PEM.
            &der[..],
        ] {
            let e = CaCertificates::parse("x.pem", content).unwrap_err();
            assert!(matches!(e, CaFileError::NoCertificate { .. }), "{e:?}");
            assert!(e.to_string().contains("BEGIN CERTIFICATE"), "{e}");
        }
    }

    #[test]
    fn a_certificate_block_that_is_not_a_certificate_is_refused() {
        for content in [
            // Not base64.
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
            // Base64 of "hello, world": armour right, no X.509 inside.
            "-----BEGIN CERTIFICATE-----\naGVsbG8sIHdvcmxk\n-----END CERTIFICATE-----\n",
        ] {
            let e = CaCertificates::parse("x.pem", content.as_bytes()).unwrap_err();
            assert!(
                matches!(e, CaFileError::NotACertificate { .. }),
                "{content}: {e:?}"
            );
        }
    }
}

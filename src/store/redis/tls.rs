//! The rustls crypto provider of `rediss://` connections (feature `tls`).
//!
//! redis-rs builds its rustls config with `ClientConfig::builder()`, which takes the
//! process-default provider, and without one picks the provider rustls was compiled with, or
//! panics when that is ambiguous: both `ring` and `aws-lc-rs` compiled in (an application
//! whose graph also enables rustls's default, `aws-lc-rs`), or neither. So a default is
//! settled here, when a TLS store is built, never at a connection: the application's own if it
//! installed one, else the provider `tls-ring` compiled in, else a [`ConfigError`].

use std::fmt;

use super::redact::Redacted;
use crate::error::ConfigError;

/// A store's TLS settings beyond its URLs: the authority trusted, the client certificate
/// shown, and whether the server's name is checked.
#[derive(Clone, Default)]
pub(super) struct TlsOptions {
    pub(super) root_certificate: Option<Vec<u8>>,
    /// The client certificate chain and its private key, PEM.
    pub(super) client_certificate: Option<(Vec<u8>, Vec<u8>)>,
    pub(super) skip_hostname_verification: bool,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes = self
            .client_certificate
            .as_ref()
            .map(|(cert, key)| (Size(cert.len()), Size(key.len())));
        f.debug_struct("TlsOptions")
            .field(
                "root_certificate",
                &self.root_certificate.as_ref().map(|pem| Size(pem.len())),
            )
            .field("client_certificate", &sizes)
            .field(
                "skip_hostname_verification",
                &self.skip_hostname_verification,
            )
            .finish()
    }
}

/// Shows a byte string by its size alone.
struct Size(usize);

impl fmt::Debug for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0)
    }
}

impl TlsOptions {
    /// Whether anything differs from redis-rs's defaults (the webpki roots, no client
    /// certificate, the name checked).
    pub(super) fn is_custom(&self) -> bool {
        self.root_certificate.is_some()
            || self.client_certificate.is_some()
            || self.skip_hostname_verification
    }

    pub(super) fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client_certificate
                .clone()
                .map(|(client_cert, client_key)| redis::ClientTlsConfig {
                    client_cert,
                    client_key,
                }),
            root_cert: self.root_certificate.clone(),
        }
    }

    /// A client of `info` (a `rediss://` server) with these settings.
    pub(super) fn client(&self, info: redis::ConnectionInfo) -> redis::RedisResult<redis::Client> {
        let client = redis::Client::build_with_tls(info, self.certificates())?;
        if !self.skip_hostname_verification {
            return Ok(client);
        }
        let info = client.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        redis::Client::open(info.set_addr(addr))
    }
}

/// rustls's "insecure" mode (no verification at all) is compiled in for
/// `tls_skip_hostname_verification`: a URL's `#insecure` must not turn it on.
pub(super) fn refuse_insecure(urls: &[String]) -> Result<(), ConfigError> {
    match urls.iter().find(|url| url.contains("#insecure")) {
        None => Ok(()),
        Some(url) => Err(ConfigError::Redis(format!(
            "{}: `#insecure` (no certificate verification) is not supported; \
             tls_skip_hostname_verification skips the name alone",
            Redacted(url)
        ))),
    }
}

/// Makes sure rustls has a process-default crypto provider, installing `tls-ring`'s only when
/// none is installed.
pub(super) fn ensure_provider() -> Result<(), ConfigError> {
    if rustls::crypto::CryptoProvider::get_default().is_some() {
        return Ok(());
    }
    install_compiled_in()
}

#[cfg(feature = "tls-ring")]
fn install_compiled_in() -> Result<(), ConfigError> {
    // Another thread may install one between the check and here: then that one is the
    // default, which is all this needs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(())
}

#[cfg(not(feature = "tls-ring"))]
fn install_compiled_in() -> Result<(), ConfigError> {
    Err(ConfigError::NoCryptoProvider)
}

/// Whether `url` is a `rediss://` URL (the scheme in any case, as the `url` crate reads it).
pub(super) fn is_tls(url: &str) -> bool {
    url.get(..9)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rediss_urls_in_any_case() {
        for url in ["rediss://h:6380", "REDISS://h", "Rediss://"] {
            assert!(is_tls(url), "{url}");
        }
        for url in [
            "redis://h",
            "rediss:/h",
            "rediss",
            "",
            "unix:///tmp/r.sock",
            "é",
        ] {
            assert!(!is_tls(url), "{url}");
        }
    }
}

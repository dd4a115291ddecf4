//! The rustls crypto provider of `rediss://` connections (feature `tls`).
//!
//! redis-rs builds its rustls config with `ClientConfig::builder()`, which takes the
//! process-default provider, and without one picks the provider rustls was compiled with, or
//! panics when that is ambiguous: both `ring` and `aws-lc-rs` compiled in (an application
//! whose graph also enables rustls's default, `aws-lc-rs`), or neither. So a default is
//! settled here, when a TLS store is built, never at a connection: the application's own if it
//! installed one, else the provider `tls-ring` compiled in, else a [`ConfigError`].

use crate::error::ConfigError;

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

//! Why a JWKS document could not be used.

use std::path::PathBuf;

/// Why a [`JwksVerifier`](super::JwksVerifier) could not be built or reloaded. A reload that
/// fails keeps the keys in force.
///
/// ```
/// use redlimit::key::{JwksError, JwksVerifier};
/// let error = JwksVerifier::from_json(r#"{"keys": []}"#).unwrap_err();
/// assert!(matches!(error, JwksError::NoKeys { .. }));
/// assert!(JwksVerifier::from_json("not json").is_err());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwksError {
    /// The file could not be read.
    #[error("cannot read the JWKS file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The document is over [`MAX_JWKS_DOCUMENT`](super::MAX_JWKS_DOCUMENT) bytes.
    #[error("the JWKS document is over {0} bytes")]
    TooLarge(usize),
    /// Not a JSON object with a `keys` array.
    #[error("not a JWKS document: {0}")]
    Malformed(String),
    /// More keys than [`MAX_JWKS_KEYS`](super::MAX_JWKS_KEYS): every one is work for a forged token.
    #[error("the JWKS document holds over {0} keys")]
    TooManyKeys(usize),
    /// No key that can verify a signature here; `skipped` says why each was left out.
    #[error("no usable signing key in the JWKS document{}", skipped_list(.skipped))]
    NoKeys {
        /// Each key left out, and why (`"kid rsa-enc: for encryption (use: enc)"`).
        skipped: Vec<String>,
    },
    /// [`JwksVerifier::watch`](super::JwksVerifier::watch) was called outside a Tokio runtime,
    /// or on a verifier not read from a file.
    #[error("cannot watch the JWKS: {0}")]
    Watch(&'static str),
}

fn skipped_list(skipped: &[String]) -> String {
    if skipped.is_empty() {
        String::new()
    } else {
        format!(" (skipped: {})", skipped.join("; "))
    }
}

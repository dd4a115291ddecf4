//! The bearer token every admin request must carry, and the check of it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::AdminError;
use crate::error::ConfigError;

/// The secret the admin endpoints require as `Authorization: Bearer TOKEN`: not empty,
/// printable ASCII without spaces (it travels in a header). Its `Debug` never shows it, and
/// a request's token is compared with it in constant time (SHA-256 digests of both, compared
/// with [`subtle`](https://docs.rs/subtle)), so neither the time taken nor a log tells how
/// much of a guess was right.
///
/// ```
/// use redlimit::admin::AdminToken;
/// let token = AdminToken::new("s3cret-token")?;
/// assert_eq!(format!("{token:?}"), "AdminToken(..)");
/// assert!(AdminToken::new("").is_err());
/// assert!(AdminToken::new("has space").is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct AdminToken {
    digest: Arc<[u8; 32]>,
}

impl AdminToken {
    /// The token `secret`, or [`ConfigError::InvalidAdminToken`] if it is empty or holds
    /// anything but printable ASCII without spaces.
    ///
    /// ```
    /// use redlimit::admin::AdminToken;
    /// assert!(AdminToken::new("0123456789abcdef").is_ok());
    /// assert!(AdminToken::new("tab\there").is_err());
    /// ```
    pub fn new(secret: impl AsRef<str>) -> Result<Self, ConfigError> {
        let secret = secret.as_ref();
        if secret.is_empty() || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::InvalidAdminToken(
                "expected a non-empty token of printable ASCII without spaces",
            ));
        }
        Ok(AdminToken {
            digest: Arc::new(Sha256::digest(secret.as_bytes()).into()),
        })
    }

    /// The token in the file at `path` (a mounted secret), without the line break that ends
    /// it. The error names the path, never the file's content.
    ///
    /// ```
    /// use redlimit::admin::AdminToken;
    /// let path = std::env::temp_dir().join(format!("redlimit-doc-token-{}", std::process::id()));
    /// std::fs::write(&path, "s3cret-token\n").unwrap();
    /// let token = AdminToken::from_file(&path)?;
    /// assert!(token.matches("s3cret-token"));
    /// # std::fs::remove_file(&path).unwrap();
    /// assert!(AdminToken::from_file("/nonexistent/token").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::ReadFile {
            path: path.display().to_string(),
            reason: e.kind().to_string(),
        })?;
        AdminToken::new(text.trim_end_matches(['\r', '\n']))
    }

    /// Whether `given` is this token, compared in constant time.
    ///
    /// ```
    /// use redlimit::admin::AdminToken;
    /// let token = AdminToken::new("s3cret")?;
    /// assert!(token.matches("s3cret"));
    /// assert!(!token.matches("s3creT"));
    /// assert!(!token.matches("s3cret2"));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn matches(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        given.ct_eq(&*self.digest).into()
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

/// 401 unless the request carries `Authorization: Bearer TOKEN` with the right token; the
/// handler runs only after.
pub(crate) async fn require(
    State(token): State<AdminToken>,
    request: Request,
    next: Next,
) -> Response {
    // RFC 9110 §11.1: the scheme is case-insensitive.
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map(|(_, credentials)| credentials.trim());
    match given {
        None => AdminError::Unauthorized.into_response(),
        Some(given) if !token.matches(given) => AdminError::InvalidToken.into_response(),
        Some(_) => next.run(request).await,
    }
}

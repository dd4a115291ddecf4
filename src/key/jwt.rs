//! The subject of a verified JWT bearer token (feature `jwt`).

use std::time::Duration;

use http::header::AUTHORIZATION;
use http::request::Parts;
use jsonwebtoken::crypto::{rust_crypto, CryptoProvider};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::{Key, KeyExtractor};
use crate::error::ConfigError;

/// Longer bearer tokens are not decoded: no real token is this long, and decoding is work.
const MAX_TOKEN: usize = 8 * 1024;

/// Keys on a claim (`sub` by default) of a JWT from `Authorization: Bearer <token>`, after
/// verifying its signature with the configured key and algorithms (feature `jwt`). Keys look
/// like `sub:user-42` (the same as [`Subject`](super::Subject)'s, so the same user is counted
/// once whichever way they were verified), or `claim:tenant:acme` for another claim; string
/// and number claims are accepted, a number as its JSON text, so `42` and `"42"` are the same
/// client (an issuer that changes how it writes an id still counts each user once).
///
/// A token is verified before any claim is read, never otherwise: a forged `sub` would spend
/// someone else's quota. It must be signed with one of the allowed algorithms of the key's
/// family (`alg: none` never is), carry an `exp` that has not passed, and an `nbf`, if present,
/// that has; both with 30 s of leeway by default. Issuer and audience are checked when
/// configured (and then required); otherwise they are not.
///
/// **No key** is the result when the `Authorization` header is missing, not `Bearer` (any
/// case), not visible ASCII or over 8 KiB, or when the token is malformed, forged, expired,
/// not yet valid, of another issuer or audience, or lacks the claim. What then happens is the
/// layer's [`MissingKey`](crate::layer::MissingKey) setting:
///
/// | setting | request without a valid token |
/// |---|---|
/// | `MissingKey::PeerIp` (default) | counted under the peer IP, like anonymous traffic (`500` if the server records no peer address) |
/// | `MissingKey::PeerIpOrAllow` | counted under the peer IP; not limited if the server records no peer address |
/// | `MissingKey::Reject(StatusCode::UNAUTHORIZED)` | answered `401` |
/// | `MissingKey::Allow` | not limited (only if another layer limits it) |
///
/// ```
/// use std::time::Duration;
/// use http::StatusCode;
/// use redlimit::key::Jwt;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
/// use redlimit::layer::MissingKey;
///
/// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
/// let secret = std::env::var("JWT_SECRET").unwrap_or_else(|_| "0123456789abcdef0123456789abcdef".into());
/// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
///     .key(Jwt::hs256(secret)?.issuer(["https://auth.example.com"]))
///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
///     .build()?;
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
///
/// Verification uses `jsonwebtoken`'s RustCrypto provider, which this installs as the process
/// default unless one is installed already: if your build also enables `jsonwebtoken`'s
/// `aws_lc_rs` feature and you want that one, install it before building a `Jwt`.
#[derive(Clone)]
#[must_use]
pub struct Jwt {
    key: DecodingKey,
    validation: Validation,
    claim: String,
    namespace: String,
}

impl Jwt {
    /// Verifies tokens with `key`, accepting the `algorithms` of the key's family (others in
    /// the list are dropped, so an RSA public key can never be used as an HMAC secret). With
    /// none left, no token verifies.
    ///
    /// ```
    /// use redlimit::key::jsonwebtoken::{Algorithm, DecodingKey};
    /// let key = redlimit::key::Jwt::new(
    ///     DecodingKey::from_secret(b"secret"),
    ///     [Algorithm::HS256, Algorithm::HS512],
    /// );
    /// ```
    pub fn new(key: DecodingKey, algorithms: impl IntoIterator<Item = Algorithm>) -> Self {
        // Without this, a build that enables both of jsonwebtoken's crypto features would panic
        // on the first token; an already installed provider stays.
        let _ = CryptoProvider::install_default(&rust_crypto::DEFAULT_PROVIDER);
        let family = key.family();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.algorithms = algorithms
            .into_iter()
            .filter(|alg| alg.family() == family)
            .collect();
        if validation.algorithms.is_empty() {
            tracing::warn!(
                ?family,
                "no allowed JWT algorithm fits the key: no token will verify"
            );
        }
        validation.leeway = 30;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        Jwt {
            key,
            validation,
            claim: "sub".into(),
            namespace: "sub".into(),
        }
    }

    /// Verifies HS256 tokens signed with `secret`, or [`ConfigError::InvalidKey`] if `secret`
    /// is empty (anyone could sign with it). A secret shorter than 32 bytes (HS256's output
    /// size, RFC 7518 §3.2) is accepted with a warning in the log: it can be guessed offline
    /// from any one token.
    ///
    /// ```
    /// use redlimit::key::Jwt;
    /// let key = Jwt::hs256(b"a long random secret of at least 32 bytes")?;
    /// assert!(Jwt::hs256(b"").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn hs256(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        let secret = secret.as_ref();
        if secret.is_empty() {
            return Err(ConfigError::InvalidKey("the HS256 secret is empty"));
        }
        if secret.len() < 32 {
            tracing::warn!(
                bytes = secret.len(),
                "the JWT HS256 secret is shorter than 32 bytes and can be guessed offline"
            );
        }
        Ok(Jwt::new(
            DecodingKey::from_secret(secret),
            [Algorithm::HS256],
        ))
    }

    /// Keys on `claim` instead of `sub` (key `claim:NAME:VALUE`).
    ///
    /// ```
    /// let key = redlimit::key::Jwt::hs256(b"0123456789abcdef0123456789abcdef")?.claim("tenant_id");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn claim(mut self, claim: impl Into<String>) -> Self {
        self.claim = claim.into();
        self.namespace = if self.claim == "sub" {
            "sub".into()
        } else {
            format!("claim:{}", self.claim)
        };
        self
    }

    /// Requires an `iss` claim, equal to one of `issuers`.
    ///
    /// ```
    /// let key = redlimit::key::Jwt::hs256(b"0123456789abcdef0123456789abcdef")?.issuer(["https://auth.example.com"]);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn issuer<I>(mut self, issuers: I) -> Self
    where
        I: IntoIterator,
        I::Item: ToString,
    {
        let issuers: Vec<String> = issuers.into_iter().map(|i| i.to_string()).collect();
        self.validation.set_issuer(&issuers);
        self.validation.required_spec_claims.insert("iss".into());
        self
    }

    /// Requires an `aud` claim naming one of `audiences`.
    ///
    /// ```
    /// let key = redlimit::key::Jwt::hs256(b"0123456789abcdef0123456789abcdef")?.audience(["api.example.com"]);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn audience<I>(mut self, audiences: I) -> Self
    where
        I: IntoIterator,
        I::Item: ToString,
    {
        let audiences: Vec<String> = audiences.into_iter().map(|a| a.to_string()).collect();
        self.validation.set_audience(&audiences);
        self.validation.validate_aud = true;
        self.validation.required_spec_claims.insert("aud".into());
        self
    }

    /// How far `exp` and `nbf` may be off, for clock skew (default 30 s; at most one hour,
    /// whole seconds).
    ///
    /// ```
    /// let key = redlimit::key::Jwt::hs256(b"0123456789abcdef0123456789abcdef")?.leeway(std::time::Duration::from_secs(5));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.validation.leeway = leeway.as_secs().min(3600);
        self
    }
}

/// The token of `Authorization: Bearer <token>` (scheme in any case), if plausible.
fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    let plausible =
        scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= MAX_TOKEN;
    plausible.then_some(token)
}

impl KeyExtractor for Jwt {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let token = bearer(parts)?;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &self.key, &self.validation)
            .ok()?
            .claims;
        let key = match claims.get(&self.claim)? {
            Value::String(text) if !text.is_empty() => Key::new(text),
            Value::Number(number) => Key::new(number.to_string()),
            _ => return None,
        };
        Some(key.namespaced(&self.namespace))
    }
}

impl std::fmt::Debug for Jwt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwt")
            .field("algorithms", &self.validation.algorithms)
            .field("claim", &self.claim)
            .field("leeway", &self.validation.leeway)
            .finish_non_exhaustive()
    }
}

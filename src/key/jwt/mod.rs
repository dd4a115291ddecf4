//! The subject of a verified JWT bearer token (feature `jwt`).

mod claims;
mod error;
mod hmac;
#[cfg(feature = "jwks")]
mod jwks;
mod token;
mod verifier;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::AUTHORIZATION;
use http::request::Parts;
use serde_json::Value;

use super::subject::claim_key;
use super::{ClientPart, ClientSpec, Key, KeyExtractor};
use crate::error::ConfigError;
use claims::{MAX_LEEWAY, Rules};

pub use self::hmac::{HmacAlgorithm, HmacVerifier};
pub use error::JwtError;
#[cfg(feature = "jwks")]
pub use jwks::{JwksError, JwksVerifier, JwksWatch, MAX_JWKS_DOCUMENT, MAX_JWKS_KEYS};
pub use verifier::{JwtHeader, JwtVerifier};

/// Keys on a claim (`sub` by default) of a JWT from `Authorization: Bearer <token>`, after
/// verifying its signature (feature `jwt`). Keys look like `sub:user-42` (the same as
/// [`Subject`](super::Subject)'s, so the same user is counted once whichever way they were
/// verified), or `claim:tenant:acme` for another claim; string and number claims are
/// accepted, a number as its JSON text, so `42` and `"42"` are the same client (an issuer that
/// changes how it writes an id still counts each user once).
///
/// HS256, HS384 and HS512 are verified here ([`Jwt::hs256`], [`HmacVerifier`]); for any other
/// algorithm, bring a [`JwtVerifier`] built on the crate of your choice ([`Jwt::new`]).
///
/// A token is verified before any claim is read, never otherwise: a forged `sub` would spend
/// someone else's quota. Its signature must verify with one of the configured algorithms
/// (`alg: none` never does, and a header with `crit` extensions is refused), it must carry an
/// `exp` that has not passed, and an `nbf`, if present, that has; both with 30 s of leeway by
/// default. Issuer and audience are checked when configured (and then required); otherwise
/// they are not. Tokens over 8 KiB are not decoded.
///
/// **No key** is the result when the `Authorization` header is missing, not `Bearer` (any
/// case), not visible ASCII or over 8 KiB, or when the token is refused ([`Jwt::verify`] says
/// why) or lacks the claim. What then happens is the layer's
/// [`MissingKey`](crate::layer::MissingKey) setting:
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
#[derive(Clone)]
#[must_use]
pub struct Jwt {
    verifier: Arc<dyn JwtVerifier>,
    rules: Rules,
    claim: String,
    namespace: String,
}

impl Jwt {
    /// Verifies signatures with `verifier`: an [`HmacVerifier`], or your own for another
    /// algorithm (see [`JwtVerifier`]). The claims are checked here.
    ///
    /// ```
    /// use redlimit::key::{HmacAlgorithm, HmacVerifier, Jwt};
    /// let verifier = HmacVerifier::new([7u8; 64], [HmacAlgorithm::Hs256, HmacAlgorithm::Hs512])?;
    /// let key = Jwt::new(verifier).claim("tenant");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(verifier: impl JwtVerifier) -> Self {
        Jwt {
            verifier: Arc::new(verifier),
            rules: Rules::default(),
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
        Ok(Jwt::new(HmacVerifier::new(secret, [HmacAlgorithm::Hs256])?))
    }

    /// Verifies HS384 tokens signed with `secret` (48 bytes or more), as [`Jwt::hs256`] does.
    ///
    /// ```
    /// let key = redlimit::key::Jwt::hs384([7u8; 48])?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn hs384(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Ok(Jwt::new(HmacVerifier::new(secret, [HmacAlgorithm::Hs384])?))
    }

    /// Verifies HS512 tokens signed with `secret` (64 bytes or more), as [`Jwt::hs256`] does.
    ///
    /// ```
    /// let key = redlimit::key::Jwt::hs512([7u8; 64])?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn hs512(secret: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Ok(Jwt::new(HmacVerifier::new(secret, [HmacAlgorithm::Hs512])?))
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
        self.rules.issuers = issuers.into_iter().map(|i| i.to_string()).collect();
        self
    }

    /// Requires an `aud` claim naming one of `audiences` (a string, or an array with one of
    /// them).
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
        self.rules.audiences = audiences.into_iter().map(|a| a.to_string()).collect();
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
        self.rules.leeway = leeway.as_secs().min(MAX_LEEWAY);
        self
    }

    /// The key of `token` (the part after `Bearer `), or why it has none: what
    /// [`extract`](KeyExtractor::extract) does with a request's token, with the reason kept.
    ///
    /// ```
    /// use redlimit::key::{Jwt, JwtError};
    /// let jwt = Jwt::hs256([7u8; 32])?;
    /// // {"alg":"none"}.{"sub":"alice","exp":9999999999}.
    /// let unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0.";
    /// assert_eq!(jwt.verify(unsigned), Err(JwtError::Unsigned));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn verify(&self, token: &str) -> Result<Key, JwtError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.verify_at(token, now)
    }

    fn verify_at(&self, token: &str, now: u64) -> Result<Key, JwtError> {
        let claims = token::verified_claims(token, self.verifier.as_ref())?;
        self.rules.check(&claims, now)?;
        match claims.get(&self.claim) {
            Some(Value::String(text)) if !text.is_empty() => {
                Ok(claim_key(&self.namespace, text.as_bytes()))
            }
            Some(Value::Number(number)) => {
                Ok(claim_key(&self.namespace, number.to_string().as_bytes()))
            }
            _ => Err(JwtError::KeyClaim),
        }
    }
}

/// The token of `Authorization: Bearer <token>` (scheme in any case), if plausible.
fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    let plausible = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && token.len() <= token::MAX_TOKEN;
    plausible.then_some(token)
}

impl KeyExtractor for Jwt {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        self.verify(bearer(parts)?).ok()
    }

    /// `jwt:CLAIM=VALUE` (`sub=`, `jwt=` for `sub`): a number claim as its JSON text.
    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Claim(&self.claim))
            .map(|part| claim_key(&self.namespace, part.value()))
    }
}

impl std::fmt::Debug for Jwt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwt")
            .field("claim", &self.claim)
            .field("leeway", &self.rules.leeway)
            .field("issuers", &self.rules.issuers)
            .field("audiences", &self.rules.audiences)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7515 Appendix A.1: an HS256 JWS and its key, from outside this crate.
    const RFC7515_A1: &str = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.\
        eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.\
        dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const RFC7515_A1_KEY: &str =
        "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";

    fn rfc_key() -> Vec<u8> {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(RFC7515_A1_KEY)
            .unwrap()
    }

    #[test]
    fn the_rfc_7515_example_verifies_until_it_expires() {
        let jwt = Jwt::hs256(rfc_key()).unwrap().claim("iss");
        let exp = 1_300_819_380;
        let key = jwt.verify_at(RFC7515_A1, exp).unwrap();
        assert_eq!(key.as_str(), "claim:iss:joe");
        assert!(jwt.verify_at(RFC7515_A1, exp + 30).is_ok(), "leeway");
        assert_eq!(jwt.verify_at(RFC7515_A1, exp + 31), Err(JwtError::Expired));
        assert_eq!(
            jwt.clone().issuer(["joe"]).verify_at(RFC7515_A1, exp),
            Ok(key)
        );
        assert_eq!(
            jwt.clone().issuer(["ann"]).verify_at(RFC7515_A1, exp),
            Err(JwtError::Claim("iss"))
        );
        assert_eq!(
            jwt.clone().audience(["api"]).verify_at(RFC7515_A1, exp),
            Err(JwtError::Claim("aud"))
        );
        // No `sub`, the default claim.
        assert_eq!(
            Jwt::hs256(rfc_key()).unwrap().verify_at(RFC7515_A1, exp),
            Err(JwtError::KeyClaim)
        );
        // The same token under HS512 only, or another secret: the signature fails.
        let hs512 = Jwt::hs512(rfc_key()).unwrap().claim("iss");
        assert_eq!(hs512.verify_at(RFC7515_A1, exp), Err(JwtError::Signature));
        let other = Jwt::hs256(b"another secret").unwrap().claim("iss");
        assert_eq!(other.verify_at(RFC7515_A1, exp), Err(JwtError::Signature));
    }

    #[test]
    fn leeway_is_capped_at_an_hour() {
        let jwt = Jwt::hs256(rfc_key())
            .unwrap()
            .claim("iss")
            .leeway(Duration::from_secs(86_400));
        let exp = 1_300_819_380;
        assert!(jwt.verify_at(RFC7515_A1, exp + 3600).is_ok());
        assert_eq!(
            jwt.verify_at(RFC7515_A1, exp + 3601),
            Err(JwtError::Expired)
        );
    }

    #[test]
    fn debug_shows_settings_not_secrets() {
        let jwt = Jwt::hs256(b"hunter2 hunter2 hunter2 hunter2!").unwrap();
        let text = format!("{jwt:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("leeway: 30"), "{text}");
    }
}

//! Why a bearer token yields no key.

/// Why [`Jwt::verify`](super::Jwt::verify) refused a token. Each one means the same to the
/// layer (no key); the reason is for logs and tests.
///
/// ```
/// use redlimit::key::{Jwt, JwtError};
/// let jwt = Jwt::hs256([7u8; 32])?;
/// assert_eq!(jwt.verify("not a token"), Err(JwtError::Malformed("not three dot-separated parts")));
/// assert_eq!(JwtError::Expired.to_string(), "the token has expired");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// Over 8 KiB, or a header over 1 KiB: not decoded at all.
    #[error("the token is too long")]
    TooLong,
    /// Not a compact JWS: not three base64url parts, a header or claims that are not a JSON
    /// object, a header without `alg`, or with `crit` extensions (none is understood here).
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// `alg: none`: an unsigned token, never accepted.
    #[error("unsigned tokens (alg none) are never accepted")]
    Unsigned,
    /// The signature does not verify, or the verifier does not accept the token's algorithm.
    #[error("the signature does not verify")]
    Signature,
    /// `exp` has passed, beyond the leeway.
    #[error("the token has expired")]
    Expired,
    /// `nbf` has not come, beyond the leeway.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// A registered claim that is missing (`exp`; `iss` and `aud` when configured), of the
    /// wrong type, or not accepted.
    #[error("the `{0}` claim is missing or not accepted")]
    Claim(&'static str),
    /// The claim keyed on is missing, an empty string, or neither a string nor a number.
    #[error("the claim keyed on is missing or not a string or number")]
    KeyClaim,
}

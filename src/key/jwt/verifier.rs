//! What checks a token's signature: [`HmacVerifier`](super::HmacVerifier) here, or your own.

/// Checks the signature of a JWT for [`Jwt`](super::Jwt): implement it to verify an algorithm
/// this crate does not (RS256, ES256, EdDSA, keys from a JWKS) with the crate of your choice.
///
/// [`Jwt`](super::Jwt) calls it only for a well-formed token whose header names an algorithm
/// other than `none` and has no `crit` extensions, and reads no claim before it returned
/// `true`. The verifier answers for the algorithm: it must return `false` for any `alg` it was
/// not configured with (so a public key is never taken for an HMAC secret), and for any
/// signature it cannot check; it must not panic.
///
/// An ES256 verifier with [`ring`](https://docs.rs/ring):
///
/// ```
/// use redlimit::key::{Jwt, JwtHeader, JwtVerifier};
/// use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
///
/// struct Es256 {
///     /// The issuer's P-256 public key, as an uncompressed point.
///     public_key: Vec<u8>,
/// }
///
/// impl JwtVerifier for Es256 {
///     fn verify(&self, header: &JwtHeader<'_>, signing_input: &[u8], signature: &[u8]) -> bool {
///         header.alg() == "ES256"
///             && UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &self.public_key)
///                 .verify(signing_input, signature)
///                 .is_ok()
///     }
/// }
///
/// # let public_key = vec![4; 65];
/// let key = Jwt::new(Es256 { public_key }).issuer(["https://auth.example.com"]);
/// ```
pub trait JwtVerifier: Send + Sync + 'static {
    /// Whether `signature` (decoded from the token's third part) signs `signing_input` (the
    /// token's first two parts and the dot between them, as sent) with `header.alg()`.
    fn verify(&self, header: &JwtHeader<'_>, signing_input: &[u8], signature: &[u8]) -> bool;
}

/// What a [`JwtVerifier`] may read of a token's header (the JOSE header, RFC 7515 §4).
///
/// ```
/// use redlimit::key::JwtHeader;
/// /// The id of the RS256 key that signed the token, if it names one.
/// fn rs256_key_id<'a>(header: &JwtHeader<'a>) -> Option<&'a str> {
///     header.kid().filter(|_| header.alg() == "RS256")
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JwtHeader<'a> {
    pub(super) alg: &'a str,
    pub(super) kid: Option<&'a str>,
}

impl<'a> JwtHeader<'a> {
    /// The `alg` parameter: the algorithm the token claims to be signed with (never `none`
    /// here). Compare it exactly: `HS256` and `hs256` are different names.
    ///
    /// ```
    /// # use redlimit::key::JwtHeader;
    /// fn is_rs256(header: &JwtHeader<'_>) -> bool {
    ///     header.alg() == "RS256"
    /// }
    /// ```
    pub fn alg(&self) -> &'a str {
        self.alg
    }

    /// The `kid` parameter, if any: which of the issuer's keys signed the token (to pick one
    /// during a key rotation).
    ///
    /// ```
    /// # use redlimit::key::JwtHeader;
    /// fn key_id<'a>(header: &JwtHeader<'a>) -> &'a str {
    ///     header.kid().unwrap_or("default")
    /// }
    /// ```
    pub fn kid(&self) -> Option<&'a str> {
        self.kid
    }
}

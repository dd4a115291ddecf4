//! HS256, HS384 and HS512 (RFC 7518 §3.2): a shared secret signs and verifies.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha384, Sha512};

use super::{JwtHeader, JwtVerifier};
use crate::error::ConfigError;

/// An HMAC algorithm of RFC 7518 §3.2.
///
/// ```
/// use redlimit::key::HmacAlgorithm;
/// assert_eq!(HmacAlgorithm::Hs384.name(), "HS384");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HmacAlgorithm {
    /// `HS256`: HMAC with SHA-256.
    Hs256,
    /// `HS384`: HMAC with SHA-384.
    Hs384,
    /// `HS512`: HMAC with SHA-512.
    Hs512,
}

impl HmacAlgorithm {
    /// Its `alg` name in a token's header.
    ///
    /// ```
    /// assert_eq!(redlimit::key::HmacAlgorithm::Hs256.name(), "HS256");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            HmacAlgorithm::Hs256 => "HS256",
            HmacAlgorithm::Hs384 => "HS384",
            HmacAlgorithm::Hs512 => "HS512",
        }
    }

    /// The hash's output size in bytes, the least secret size RFC 7518 §3.2 allows.
    fn output_len(self) -> usize {
        match self {
            HmacAlgorithm::Hs256 => 32,
            HmacAlgorithm::Hs384 => 48,
            HmacAlgorithm::Hs512 => 64,
        }
    }

    fn from_name(alg: &str) -> Option<Self> {
        [Self::Hs256, Self::Hs384, Self::Hs512]
            .into_iter()
            .find(|a| a.name() == alg)
    }
}

/// Verifies HMAC-signed tokens with a shared secret, for the algorithms it was given only.
/// [`Jwt::hs256`](super::Jwt::hs256) and its siblings build one; build it yourself to accept
/// several algorithms (during a move from HS256 to HS512, say).
///
/// The signature is compared in constant time. Its `Debug` output never shows the secret.
///
/// ```
/// use redlimit::key::{HmacAlgorithm, HmacVerifier, Jwt};
/// let secret = [7u8; 64]; // in production, from a secret store
/// let verifier = HmacVerifier::new(secret, [HmacAlgorithm::Hs256, HmacAlgorithm::Hs512])?;
/// let key = Jwt::new(verifier);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct HmacVerifier {
    secret: Vec<u8>,
    algorithms: Vec<HmacAlgorithm>,
}

impl HmacVerifier {
    /// Verifies tokens signed with `secret` by one of `algorithms`; [`ConfigError::InvalidKey`]
    /// if `secret` is empty (anyone could sign with it) or `algorithms` is. A secret shorter
    /// than an algorithm's hash output (32, 48 or 64 bytes) is accepted with a warning in the
    /// log: it can be guessed offline from any one token.
    ///
    /// ```
    /// use redlimit::key::{HmacAlgorithm, HmacVerifier};
    /// assert!(HmacVerifier::new(b"", [HmacAlgorithm::Hs256]).is_err());
    /// assert!(HmacVerifier::new([1u8; 32], []).is_err());
    /// ```
    pub fn new(
        secret: impl AsRef<[u8]>,
        algorithms: impl IntoIterator<Item = HmacAlgorithm>,
    ) -> Result<Self, ConfigError> {
        let secret = secret.as_ref();
        let mut algorithms: Vec<HmacAlgorithm> = algorithms.into_iter().collect();
        algorithms.sort_by_key(|a| a.output_len());
        algorithms.dedup();
        if secret.is_empty() {
            return Err(ConfigError::InvalidKey("the HMAC secret is empty"));
        }
        let Some(strongest) = algorithms.last() else {
            return Err(ConfigError::InvalidKey("no HMAC algorithm is allowed"));
        };
        if secret.len() < strongest.output_len() {
            tracing::warn!(
                bytes = secret.len(),
                algorithm = strongest.name(),
                "the JWT secret is shorter than the algorithm's hash and can be guessed offline"
            );
        }
        Ok(HmacVerifier {
            secret: secret.to_vec(),
            algorithms,
        })
    }

    /// The algorithms it accepts, weakest first.
    ///
    /// ```
    /// use redlimit::key::{HmacAlgorithm, HmacVerifier};
    /// let v = HmacVerifier::new([1u8; 64], [HmacAlgorithm::Hs512, HmacAlgorithm::Hs256])?;
    /// assert_eq!(v.algorithms(), [HmacAlgorithm::Hs256, HmacAlgorithm::Hs512]);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn algorithms(&self) -> &[HmacAlgorithm] {
        &self.algorithms
    }
}

/// Whether `signature` is the HMAC of `input` under `secret`, in constant time.
fn matches<M: Mac + hmac::digest::KeyInit>(secret: &[u8], input: &[u8], signature: &[u8]) -> bool {
    // HMAC takes a key of any length, so this never fails; `false` keeps it panic-free anyway.
    let Ok(mut mac) = <M as hmac::digest::KeyInit>::new_from_slice(secret) else {
        return false;
    };
    mac.update(input);
    mac.verify_slice(signature).is_ok()
}

impl JwtVerifier for HmacVerifier {
    fn verify(&self, header: &JwtHeader<'_>, signing_input: &[u8], signature: &[u8]) -> bool {
        let Some(alg) = HmacAlgorithm::from_name(header.alg()) else {
            return false;
        };
        if !self.algorithms.contains(&alg) {
            return false;
        }
        let secret = &self.secret;
        match alg {
            HmacAlgorithm::Hs256 => matches::<Hmac<Sha256>>(secret, signing_input, signature),
            HmacAlgorithm::Hs384 => matches::<Hmac<Sha384>>(secret, signing_input, signature),
            HmacAlgorithm::Hs512 => matches::<Hmac<Sha512>>(secret, signing_input, signature),
        }
    }
}

impl fmt::Debug for HmacVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HmacVerifier")
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(alg: &str) -> JwtHeader<'_> {
        JwtHeader { alg, kid: None }
    }

    fn sign<M: Mac + hmac::digest::KeyInit>(secret: &[u8], input: &[u8]) -> Vec<u8> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(secret).unwrap();
        mac.update(input);
        mac.finalize().into_bytes().to_vec()
    }

    #[test]
    fn each_algorithm_verifies_its_own_signatures_only() {
        let secret = [9u8; 64];
        let all = [
            HmacAlgorithm::Hs256,
            HmacAlgorithm::Hs384,
            HmacAlgorithm::Hs512,
        ];
        let v = HmacVerifier::new(secret, all).unwrap();
        let signatures = [
            ("HS256", sign::<Hmac<Sha256>>(&secret, b"a.b")),
            ("HS384", sign::<Hmac<Sha384>>(&secret, b"a.b")),
            ("HS512", sign::<Hmac<Sha512>>(&secret, b"a.b")),
        ];
        for (alg, sig) in &signatures {
            assert!(v.verify(&header(alg), b"a.b", sig), "{alg}");
            assert!(!v.verify(&header(alg), b"a.c", sig), "{alg}: other input");
            assert!(
                !v.verify(&header(alg), b"a.b", &sig[1..]),
                "{alg}: cut short"
            );
            assert!(!v.verify(&header(alg), b"a.b", &[]), "{alg}: empty");
            for (other, _) in signatures.iter().filter(|(o, _)| o != alg) {
                assert!(!v.verify(&header(other), b"a.b", sig), "{alg} as {other}");
            }
        }
        for alg in ["none", "hs256", "HS256 ", "RS256", ""] {
            assert!(!v.verify(&header(alg), b"a.b", &signatures[0].1), "{alg}");
        }
    }

    #[test]
    fn only_the_configured_algorithms_verify() {
        let secret = [9u8; 32];
        let v = HmacVerifier::new(secret, [HmacAlgorithm::Hs256]).unwrap();
        let hs512 = sign::<Hmac<Sha512>>(&secret, b"a.b");
        assert!(!v.verify(&header("HS512"), b"a.b", &hs512));
        let other_secret = sign::<Hmac<Sha256>>(&[8u8; 32], b"a.b");
        assert!(!v.verify(&header("HS256"), b"a.b", &other_secret));
    }

    #[test]
    fn the_secret_is_never_shown() {
        let v = HmacVerifier::new(b"hunter2-hunter2", [HmacAlgorithm::Hs256]).unwrap();
        let text = format!("{v:?}");
        assert!(!text.contains("hunter2") && !text.contains("104"), "{text}");
        assert!(text.contains("Hs256"), "{text}");
    }
}

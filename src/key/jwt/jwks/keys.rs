//! A JWKS document read into the keys that may verify a signature, each pinned to the
//! algorithms its key type (or its own `alg`) allows.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use super::{JwksError, MAX_JWKS_DOCUMENT, MAX_JWKS_KEYS};

/// One public key and what it may verify.
pub(super) struct PublicKey {
    pub(super) kid: Option<String>,
    pub(super) algorithms: &'static [Algorithm],
    pub(super) key: DecodingKey,
}

/// The keys of one document, and the document (a watch compares the file with it).
pub(super) struct KeySet {
    pub(super) keys: Vec<PublicKey>,
    pub(super) document: Box<[u8]>,
}

const RSA: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// The signing algorithms verified here, by their JOSE names: never an HMAC one (a public key
/// must never be taken for a shared secret) and never `none`.
pub(super) fn algorithm(name: &str) -> Option<Algorithm> {
    Some(match name {
        "RS256" => Algorithm::RS256,
        "RS384" => Algorithm::RS384,
        "RS512" => Algorithm::RS512,
        "PS256" => Algorithm::PS256,
        "PS384" => Algorithm::PS384,
        "PS512" => Algorithm::PS512,
        "ES256" => Algorithm::ES256,
        "ES384" => Algorithm::ES384,
        "EdDSA" => Algorithm::EdDSA,
        _ => return None,
    })
}

impl KeySet {
    /// The signing keys of `document`; keys that cannot verify here are skipped, and a
    /// document with none left is refused.
    pub(super) fn parse(document: &[u8]) -> Result<KeySet, JwksError> {
        if document.len() > MAX_JWKS_DOCUMENT {
            return Err(JwksError::TooLarge(MAX_JWKS_DOCUMENT));
        }
        let value: Value = serde_json::from_slice(document)
            .map_err(|e| JwksError::Malformed(format!("not JSON ({e})")))?;
        let Some(Value::Array(entries)) = value.get("keys") else {
            return Err(JwksError::Malformed("no `keys` array".into()));
        };
        if entries.len() > MAX_JWKS_KEYS {
            return Err(JwksError::TooManyKeys(MAX_JWKS_KEYS));
        }
        let mut keys = Vec::with_capacity(entries.len());
        let mut skipped = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let name = match entry.get("kid").and_then(Value::as_str) {
                Some(kid) => format!("kid {kid}"),
                None => format!("key {i}"),
            };
            match public_key(entry) {
                Ok(key) => keys.push(key),
                Err(why) => skipped.push(format!("{name}: {why}")),
            }
        }
        if keys.is_empty() {
            return Err(JwksError::NoKeys { skipped });
        }
        for skip in &skipped {
            tracing::debug!(key = %skip, "jwks: a key was left out");
        }
        Ok(KeySet {
            keys,
            document: document.into(),
        })
    }
}

/// One JWK as a verifying key, or why it cannot be one.
fn public_key(entry: &Value) -> Result<PublicKey, String> {
    let jwk: Jwk = serde_json::from_value(entry.clone()).map_err(|e| format!("not a JWK ({e})"))?;
    let common = &jwk.common;
    if let Some(PublicKeyUse::Encryption) = common.public_key_use {
        return Err("for encryption (use: enc)".into());
    }
    if let Some(ops) = &common.key_operations
        && !ops
            .iter()
            .any(|op| matches!(op, jsonwebtoken::jwk::KeyOperations::Verify))
    {
        return Err("its key_ops do not include verify".into());
    }
    let family: &'static [Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => RSA,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return Err("an elliptic curve other than P-256 and P-384".into()),
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => &[Algorithm::EdDSA],
            _ => return Err("an octet key pair other than Ed25519".into()),
        },
        AlgorithmParameters::OctetKey(_) => {
            return Err("a symmetric key (HMAC secrets go to HmacVerifier)".into());
        }
        _ => return Err("a key type not verified here".into()),
    };
    // A key's own `alg` pins it to that one algorithm, which must fit the key type.
    let algorithms = match common.key_algorithm {
        None => family,
        Some(alg) => {
            let named = key_algorithm(alg).ok_or_else(|| format!("alg {alg} is no signature"))?;
            let pinned = family
                .iter()
                .position(|a| *a == named)
                .ok_or_else(|| format!("alg {alg} does not fit the key type"))?;
            &family[pinned..=pinned]
        }
    };
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| format!("unreadable ({e})"))?;
    Ok(PublicKey {
        kid: common.key_id.clone(),
        algorithms,
        key,
    })
}

fn key_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

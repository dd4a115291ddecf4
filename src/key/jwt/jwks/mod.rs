//! Asymmetric signatures (RS256/384/512, PS256/384/512, ES256/384, EdDSA) with the public keys
//! of a JSON Web Key Set (feature `jwks`), verified by `jsonwebtoken` on `aws-lc-rs`.

mod error;
mod keys;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER;

use super::{JwtHeader, JwtVerifier};
use keys::{KeySet, algorithm};

pub use error::JwksError;
pub use watch::JwksWatch;

/// The largest JWKS document read: identity providers publish a few keys in a few KiB.
pub const MAX_JWKS_DOCUMENT: usize = 1024 * 1024;

/// The most keys a document may hold: a token naming no `kid` is never tried against more
/// than one, but a set this large is a mistake.
pub const MAX_JWKS_KEYS: usize = 100;

/// Verifies a token's signature with the public keys of a JWKS document (RFC 7517), as
/// identity providers publish them (Auth0, Okta, Cognito, Entra ID, Keycloak): RS256, RS384,
/// RS512, PS256, PS384, PS512, ES256, ES384 and EdDSA (Ed25519). Use it with
/// [`Jwt::new`](super::Jwt::new), which keeps every other check (`alg: none` and `crit`
/// refused, `exp`/`nbf` with leeway, `iss`/`aud`, size bounds).
///
/// Each key is pinned to algorithms: its own `alg` when the JWK names one, else those of its
/// type (an RSA key: RS256..PS512; P-256: ES256; P-384: ES384; Ed25519: EdDSA). An HMAC
/// algorithm never verifies here, so a public key is never taken for a shared secret. The key
/// is the one whose `kid` the token names; a token without `kid` verifies only when exactly one
/// key of the set fits its algorithm (so a forged token costs one verification, never one per
/// key). Keys for encryption (`use: enc`), symmetric keys and curves not listed are skipped;
/// a document with no usable key is refused ([`JwksError::NoKeys`]).
///
/// Read from a file, the set follows it: [`watch`](Self::watch) re-reads it when it changes (a
/// Kubernetes Secret or ConfigMap's `..data` swap included), keeping the keys in force when
/// the new document does not load. Clones share the keys. Fetching a JWKS over HTTP is left to
/// the application (a sidecar or a job that writes the file), so this crate adds no HTTP client.
///
/// ```
/// use redlimit::key::{Jwt, JwksVerifier};
///
/// // Typically JwksVerifier::from_file("/etc/redlimit/jwks.json")?
/// let jwks = JwksVerifier::from_json(r#"{"keys": [{
///     "kty": "EC", "crv": "P-256", "kid": "2026-11", "alg": "ES256", "use": "sig",
///     "x": "4V523mZrAPyztqaabtRWPh9gyv76mBvvErZEUlJS_l0",
///     "y": "nKFXLaMKXWXWNixWVSy38Gh3SKD6-Y10sW1NYXDtddg"
/// }]}"#)?;
/// assert_eq!(jwks.key_ids(), ["2026-11"]);
/// let key = Jwt::new(jwks).issuer(["https://auth.example.com"]);
/// # Ok::<(), redlimit::key::JwksError>(())
/// ```
#[derive(Clone)]
pub struct JwksVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    keys: ArcSwap<KeySet>,
    /// The file the keys were read from, for reloads.
    path: Option<PathBuf>,
}

impl JwksVerifier {
    /// The signing keys of a JWKS document.
    ///
    /// ```
    /// use redlimit::key::JwksVerifier;
    /// let jwks = JwksVerifier::from_json(r#"{"keys": [{"kty": "OKP", "crv": "Ed25519",
    ///     "kid": "ed", "x": "IzU1Fs_lbFfQ11_UjZqghEt0fX1l6lgceTRDKuZK5VE"}]}"#)?;
    /// assert_eq!(jwks.key_ids(), ["ed"]);
    /// # Ok::<(), redlimit::key::JwksError>(())
    /// ```
    pub fn from_json(document: &str) -> Result<Self, JwksError> {
        Ok(Self::new(KeySet::parse(document.as_bytes())?, None))
    }

    /// The signing keys of the JWKS document in `path`, which [`reload`](Self::reload) and
    /// [`watch`](Self::watch) read again.
    ///
    /// ```no_run
    /// use redlimit::key::{Jwt, JwksVerifier};
    /// let jwks = JwksVerifier::from_file("/etc/redlimit/jwks.json")?;
    /// let key = Jwt::new(jwks.clone());
    /// # Ok::<(), redlimit::key::JwksError>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, JwksError> {
        let path = path.as_ref().to_path_buf();
        let keys = KeySet::parse(&read(&path)?)?;
        Ok(Self::new(keys, Some(path)))
    }

    fn new(keys: KeySet, path: Option<PathBuf>) -> Self {
        JwksVerifier {
            inner: Arc::new(Inner {
                keys: ArcSwap::from_pointee(keys),
                path,
            }),
        }
    }

    /// Reads the file again and puts its keys in force for every clone; on an error the keys
    /// in force stay. Returns how many keys are in force.
    ///
    /// ```no_run
    /// # let jwks = redlimit::key::JwksVerifier::from_file("/etc/redlimit/jwks.json")?;
    /// let keys = jwks.reload()?;
    /// # Ok::<(), redlimit::key::JwksError>(())
    /// ```
    pub fn reload(&self) -> Result<usize, JwksError> {
        let path = self
            .inner
            .path
            .as_ref()
            .ok_or(JwksError::Watch("the keys were not read from a file"))?;
        self.reload_from(&read(path)?)
    }

    fn reload_from(&self, document: &[u8]) -> Result<usize, JwksError> {
        let keys = KeySet::parse(document)?;
        let count = keys.keys.len();
        self.inner.keys.store(Arc::new(keys));
        Ok(count)
    }

    /// The `kid` of each key in force, in the document's order (`""` for a key without one).
    ///
    /// ```
    /// # use redlimit::key::JwksVerifier;
    /// let jwks = JwksVerifier::from_json(r#"{"keys": [{"kty": "OKP", "crv": "Ed25519",
    ///     "x": "IzU1Fs_lbFfQ11_UjZqghEt0fX1l6lgceTRDKuZK5VE"}]}"#)?;
    /// assert_eq!(jwks.key_ids(), [""]);
    /// # Ok::<(), redlimit::key::JwksError>(())
    /// ```
    pub fn key_ids(&self) -> Vec<String> {
        self.inner
            .keys
            .load()
            .keys
            .iter()
            .map(|k| k.kid.clone().unwrap_or_default())
            .collect()
    }
}

impl JwtVerifier for JwksVerifier {
    fn verify(&self, header: &JwtHeader<'_>, signing_input: &[u8], signature: &[u8]) -> bool {
        let Some(alg) = algorithm(header.alg()) else {
            return false;
        };
        let set = self.inner.keys.load();
        let fits = |k: &&keys::PublicKey| k.algorithms.contains(&alg);
        let key = match header.kid() {
            Some(kid) => set
                .keys
                .iter()
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid)),
            None => {
                let mut fitting = set.keys.iter().filter(fits);
                match (fitting.next(), fitting.next()) {
                    (Some(only), None) => Some(only),
                    _ => None,
                }
            }
        };
        let Some(key) = key else {
            return false;
        };
        match (DEFAULT_PROVIDER.verifier_factory)(&alg, &key.key) {
            Ok(verifier) => verifier.verify(signing_input, &signature.to_vec()).is_ok(),
            Err(_) => false,
        }
    }
}

impl std::fmt::Debug for JwksVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksVerifier")
            .field("key_ids", &self.key_ids())
            .field("path", &self.inner.path)
            .finish()
    }
}

/// The file's bytes, bounded.
fn read(path: &Path) -> Result<Vec<u8>, JwksError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| JwksError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_JWKS_DOCUMENT as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| JwksError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() > MAX_JWKS_DOCUMENT {
        return Err(JwksError::TooLarge(MAX_JWKS_DOCUMENT));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;

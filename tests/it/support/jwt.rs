//! Signed test tokens, made with the `hmac` crate directly rather than by the verifier under
//! test.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha384, Sha512};

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Base64url without padding, as JWS parts are.
pub(crate) fn base64url(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A compact JWS of `claims` under `header`, signed with HMAC for `alg` (`HS256`, `HS384`,
/// `HS512`) and `secret`, whatever the header says.
pub(crate) fn sign_with(
    alg: &str,
    header: &serde_json::Value,
    secret: &[u8],
    claims: &serde_json::Value,
) -> String {
    let input = format!(
        "{}.{}",
        base64url(header.to_string()),
        base64url(claims.to_string())
    );
    fn mac<M: Mac + hmac::digest::KeyInit>(secret: &[u8], input: &str) -> Vec<u8> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(secret).unwrap();
        mac.update(input.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
    let signature = match alg {
        "HS256" => mac::<Hmac<Sha256>>(secret, &input),
        "HS384" => mac::<Hmac<Sha384>>(secret, &input),
        "HS512" => mac::<Hmac<Sha512>>(secret, &input),
        other => panic!("no test signer for {other}"),
    };
    format!("{input}.{}", base64url(signature))
}

/// A token signed with `alg` and `secret`, with the usual header.
pub(crate) fn sign(alg: &str, secret: &[u8], claims: &serde_json::Value) -> String {
    let header = serde_json::json!({ "alg": alg, "typ": "JWT" });
    sign_with(alg, &header, secret, claims)
}

/// The test keys' directory (`tests/fixtures/jwks/`: PKCS#8 private keys and `jwks.json`).
#[cfg(feature = "jwks")]
pub(crate) fn jwks_fixture(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jwks")
        .join(file)
}

/// A compact JWS of `claims` under `header`, signed with `ring` (not the verifier under test)
/// by the PKCS#8 key `tests/fixtures/jwks/<key>.pk8` with `alg` (RS256/384/512, PS256/384/512,
/// ES256, ES384, EdDSA), whatever the header says.
#[cfg(feature = "jwks")]
pub(crate) fn sign_asymmetric(
    alg: &str,
    key: &str,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> String {
    use ring::rand::SystemRandom;
    use ring::signature::{self as sig, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
    let der = std::fs::read(jwks_fixture(&format!("{key}.pk8"))).expect("a fixture key");
    let input = format!(
        "{}.{}",
        base64url(header.to_string()),
        base64url(claims.to_string())
    );
    let rng = SystemRandom::new();
    let rsa = |padding: &'static dyn sig::RsaEncoding| {
        let pair = RsaKeyPair::from_pkcs8(&der).expect("an RSA key");
        let mut out = vec![0; pair.public().modulus_len()];
        pair.sign(padding, &rng, input.as_bytes(), &mut out)
            .expect("RSA signing");
        out
    };
    let ecdsa = |alg: &'static sig::EcdsaSigningAlgorithm| {
        let pair = EcdsaKeyPair::from_pkcs8(alg, &der, &rng).expect("an EC key");
        pair.sign(&rng, input.as_bytes())
            .expect("ECDSA signing")
            .as_ref()
            .to_vec()
    };
    let signature = match alg {
        "RS256" => rsa(&sig::RSA_PKCS1_SHA256),
        "RS384" => rsa(&sig::RSA_PKCS1_SHA384),
        "RS512" => rsa(&sig::RSA_PKCS1_SHA512),
        "PS256" => rsa(&sig::RSA_PSS_SHA256),
        "PS384" => rsa(&sig::RSA_PSS_SHA384),
        "PS512" => rsa(&sig::RSA_PSS_SHA512),
        "ES256" => ecdsa(&sig::ECDSA_P256_SHA256_FIXED_SIGNING),
        "ES384" => ecdsa(&sig::ECDSA_P384_SHA384_FIXED_SIGNING),
        "EdDSA" => Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
            .expect("an Ed25519 key")
            .sign(input.as_bytes())
            .as_ref()
            .to_vec(),
        other => panic!("no asymmetric test signer for {other}"),
    };
    format!("{input}.{}", base64url(signature))
}

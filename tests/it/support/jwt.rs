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

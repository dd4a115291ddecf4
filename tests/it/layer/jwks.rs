//! JWKS verification end to end: tokens signed by `ring` with the fixture keys
//! (`tests/fixtures/jwks/`), verified through `Jwt::new(JwksVerifier)` on a request, every
//! forgery refused, and the key file followed on change.

use std::time::{Duration, Instant};

use redlimit::key::{JwksError, JwksVerifier, Jwt, JwtError, KeyExtractor};
use serde_json::json;

use crate::support::jwt::{base64url, jwks_fixture, now, sign_asymmetric, sign_with};

fn verifier() -> JwksVerifier {
    JwksVerifier::from_file(jwks_fixture("jwks.json")).expect("the fixture loads")
}

fn claims(sub: &str) -> serde_json::Value {
    json!({"sub": sub, "exp": now() + 600, "iss": "https://auth.example.com"})
}

fn token(alg: &str, key: &str, kid: Option<&str>, sub: &str) -> String {
    let mut header = json!({"alg": alg, "typ": "JWT"});
    if let Some(kid) = kid {
        header["kid"] = json!(kid);
    }
    sign_asymmetric(alg, key, &header, &claims(sub))
}

fn key_of(jwt: &Jwt, token: &str) -> Option<String> {
    let request = http::Request::builder()
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .unwrap();
    let (parts, ()) = request.into_parts();
    jwt.extract(&parts).map(|k| k.as_str().to_owned())
}

#[test]
fn every_algorithm_verifies_with_its_key() {
    let jwt = Jwt::new(verifier()).issuer(["https://auth.example.com"]);
    let cases = [
        ("RS256", "rs256", "rsa-1"),
        ("RS256", "rsa_any", "rsa-any"),
        ("RS384", "rsa_any", "rsa-any"),
        ("RS512", "rsa_any", "rsa-any"),
        ("PS256", "rsa_any", "rsa-any"),
        ("PS384", "rsa_any", "rsa-any"),
        ("PS512", "rsa_any", "rsa-any"),
        ("ES256", "es256", "ec-256"),
        ("ES384", "es384", "ec-384"),
        ("EdDSA", "ed25519", "ed-1"),
    ];
    for (alg, key, kid) in cases {
        let signed = token(alg, key, Some(kid), "alice");
        assert_eq!(
            key_of(&jwt, &signed).as_deref(),
            Some("sub:alice"),
            "{alg} with {kid}"
        );
    }
    // Without a kid: verified when exactly one key fits the algorithm.
    let no_kid = token("ES256", "es256", None, "bob");
    assert_eq!(key_of(&jwt, &no_kid).as_deref(), Some("sub:bob"));
}

#[test]
fn forgeries_are_refused() {
    let jwt = Jwt::new(verifier());
    let refused = |token: &str, why: &str| {
        assert_eq!(
            jwt.verify(token),
            Err(JwtError::Signature),
            "{why}: {token}"
        );
    };
    // A key the set does not hold, under a kid it does.
    refused(
        &token("RS256", "other", Some("rsa-1"), "mallory"),
        "another key",
    );
    // rsa-1 is pinned to RS256: the same key's PS256 signature is refused.
    refused(
        &token("PS256", "rs256", Some("rsa-1"), "mallory"),
        "an algorithm not pinned",
    );
    // The right key under another key's kid.
    refused(
        &token("ES256", "es256", Some("ed-1"), "mallory"),
        "a kid of another type",
    );
    // Two RSA keys fit RS256: a token without kid is tried against neither.
    refused(
        &token("RS256", "rs256", None, "mallory"),
        "no kid, two keys fit",
    );
    // The classic confusion: HS256 keyed with a public key's text.
    let public = std::fs::read(jwks_fixture("jwks.json")).unwrap();
    let confused = sign_with(
        "HS256",
        &json!({"alg": "HS256", "kid": "rsa-1"}),
        &public,
        &claims("mallory"),
    );
    refused(&confused, "HS256 with the public key as secret");
    // A valid token with its claims replaced.
    let valid = token("ES256", "es256", Some("ec-256"), "alice");
    let mut parts: Vec<String> = valid.split('.').map(str::to_owned).collect();
    parts[1] = base64url(claims("mallory").to_string());
    refused(&parts.join("."), "claims replaced");
    // An ES256 signature in DER rather than the fixed r||s form JWS uses.
    assert_eq!(
        jwt.verify(&format!(
            "{}.{}.{}",
            parts[0],
            parts[1],
            base64url([0x30u8; 70])
        )),
        Err(JwtError::Signature)
    );
    // The checks in front of the signature still hold: alg none, crit.
    let none = format!(
        "{}.{}.",
        base64url(r#"{"alg":"none","kid":"rsa-1"}"#),
        base64url(claims("mallory").to_string())
    );
    assert_eq!(jwt.verify(&none), Err(JwtError::Unsigned));
    let crit = sign_asymmetric(
        "ES256",
        "es256",
        &json!({"alg": "ES256", "kid": "ec-256", "crit": ["b64"], "b64": false}),
        &claims("mallory"),
    );
    assert!(matches!(jwt.verify(&crit), Err(JwtError::Malformed(_))));
    let expired = sign_asymmetric(
        "ES256",
        "es256",
        &json!({"alg": "ES256", "kid": "ec-256"}),
        &json!({"sub": "alice", "exp": now() - 3600}),
    );
    assert_eq!(jwt.verify(&expired), Err(JwtError::Expired));
}

/// Waits until `check` holds, or fails after a generous deadline (the watch polls every
/// 100 ms; a busy machine may take longer).
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_file_is_followed_and_a_broken_one_keeps_the_keys() {
    let dir = std::env::temp_dir().join(crate::support::unique_prefix("jwks"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jwks.json");
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(jwks_fixture("jwks.json")).unwrap()).unwrap();
    let only = |kid: &str| {
        let keys: Vec<_> = fixture["keys"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["kid"] == kid)
            .cloned()
            .collect();
        json!({ "keys": keys }).to_string()
    };
    // Rotation: first only ec-256, then only ed-1 (written atomically, as a ConfigMap swaps).
    std::fs::write(&path, only("ec-256")).unwrap();
    let jwks = JwksVerifier::from_file(&path).unwrap();
    let watch = jwks.watch(Duration::from_millis(100)).unwrap();
    let jwt = Jwt::new(jwks.clone());
    let old = token("ES256", "es256", Some("ec-256"), "alice");
    let new = token("EdDSA", "ed25519", Some("ed-1"), "alice");
    assert!(jwt.verify(&old).is_ok() && jwt.verify(&new).is_err());

    let swap = dir.join("jwks.json.tmp");
    std::fs::write(&swap, only("ed-1")).unwrap();
    std::fs::rename(&swap, &path).unwrap();
    eventually("the rotated key", || jwt.verify(&new).is_ok());
    assert_eq!(jwt.verify(&old), Err(JwtError::Signature));

    // A broken document (a truncated write) and one without a usable key keep the keys.
    std::fs::write(&path, "{\"keys\": [").unwrap();
    assert!(matches!(jwks.reload(), Err(JwksError::Malformed(_))));
    std::fs::write(&path, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap();
    assert!(matches!(jwks.reload(), Err(JwksError::NoKeys { .. })));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(jwks.reload(), Err(JwksError::Read { .. })));
    // The watch saw them too (it polls every 100 ms): the keys in force stayed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(jwt.verify(&new).is_ok());
    assert_eq!(jwks.key_ids(), ["ed-1"]);

    // Dropped, the watch follows the file no more.
    drop(watch);
    std::fs::write(&path, only("ec-256")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        jwks.key_ids(),
        ["ed-1"],
        "no reload after the watch is dropped"
    );
    assert!(jwks.reload().is_ok());
    assert!(jwt.verify(&old).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn watching_needs_a_runtime_and_a_file() {
    assert!(matches!(
        verifier().watch(Duration::from_secs(1)),
        Err(JwksError::Watch(_))
    ));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let from_json =
        JwksVerifier::from_json(&std::fs::read_to_string(jwks_fixture("jwks.json")).unwrap())
            .unwrap();
    assert!(matches!(
        from_json.watch(Duration::from_secs(1)),
        Err(JwksError::Watch(_))
    ));
}

use super::*;
use jsonwebtoken::Algorithm;

/// Public keys only: the signatures are tested in `tests/it/layer/jwks.rs` with the private
/// halves, signed by `ring`.
const FIXTURE: &str = include_str!("../../../../tests/fixtures/jwks/jwks.json");

fn header<'a>(alg: &'a str, kid: Option<&'a str>) -> JwtHeader<'a> {
    JwtHeader { alg, kid }
}

#[test]
fn the_fixture_s_signing_keys_load_and_its_encryption_key_is_skipped() {
    let jwks = JwksVerifier::from_json(FIXTURE).unwrap();
    assert_eq!(
        jwks.key_ids(),
        ["rsa-1", "rsa-any", "ec-256", "ec-384", "ed-1"]
    );
}

#[test]
fn keys_are_pinned_to_their_alg_or_their_type() {
    let set = KeySet::parse(FIXTURE.as_bytes()).unwrap();
    let algs = |kid: &str| {
        set.keys
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid))
            .unwrap()
            .algorithms
    };
    assert_eq!(algs("rsa-1"), [Algorithm::RS256]);
    assert_eq!(algs("rsa-any").len(), 6, "RS256..PS512");
    assert_eq!(algs("ec-256"), [Algorithm::ES256]);
    assert_eq!(algs("ec-384"), [Algorithm::ES384], "P-384 without alg");
    assert_eq!(algs("ed-1"), [Algorithm::EdDSA]);
}

#[test]
fn documents_without_a_usable_key_are_refused_with_the_reasons() {
    let refused = |json: &str| JwksVerifier::from_json(json).unwrap_err().to_string();
    assert!(refused("[]").contains("no `keys` array"));
    assert!(refused("{").contains("not JSON"));
    assert!(refused(r#"{"keys": []}"#).contains("no usable signing key"));
    let oct = refused(r#"{"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]}"#);
    assert!(oct.contains("kid s: a symmetric key"), "{oct}");
    let mismatch = refused(
        r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "ES256",
            "x": "IzU1Fs_lbFfQ11_UjZqghEt0fX1l6lgceTRDKuZK5VE"}]}"#,
    );
    assert!(
        mismatch.contains("key 0: alg ES256 does not fit"),
        "{mismatch}"
    );
    let hmac_alg = refused(
        r#"{"keys": [{"kty": "RSA", "alg": "HS256", "kid": "r", "n": "AQAB", "e": "AQAB"}]}"#,
    );
    assert!(
        hmac_alg.contains("kid r: alg HS256 is no signature"),
        "{hmac_alg}"
    );
    let verify_only = refused(
        r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "key_ops": ["sign"],
            "x": "IzU1Fs_lbFfQ11_UjZqghEt0fX1l6lgceTRDKuZK5VE"}]}"#,
    );
    assert!(verify_only.contains("key_ops"), "{verify_only}");
}

#[test]
fn sizes_are_bounded() {
    let big = format!(
        r#"{{"keys": [], "pad": "{}"}}"#,
        "x".repeat(MAX_JWKS_DOCUMENT)
    );
    assert!(matches!(
        JwksVerifier::from_json(&big),
        Err(JwksError::TooLarge(_))
    ));
    let key =
        r#"{"kty": "OKP", "crv": "Ed25519", "x": "IzU1Fs_lbFfQ11_UjZqghEt0fX1l6lgceTRDKuZK5VE"}"#;
    let many = format!(
        r#"{{"keys": [{}]}}"#,
        vec![key; MAX_JWKS_KEYS + 1].join(",")
    );
    assert!(matches!(
        JwksVerifier::from_json(&many),
        Err(JwksError::TooManyKeys(_))
    ));
}

#[test]
fn hmac_none_and_unknown_algorithms_never_verify() {
    let jwks = JwksVerifier::from_json(FIXTURE).unwrap();
    for alg in ["HS256", "HS384", "HS512", "none", "rs256", "ES512", ""] {
        assert!(
            !jwks.verify(&header(alg, Some("rsa-1")), b"a.b", &[0; 256]),
            "{alg}"
        );
    }
}

#[test]
fn a_token_without_kid_is_tried_against_one_key_at_most() {
    let jwks = JwksVerifier::from_json(FIXTURE).unwrap();
    // Two keys fit RS256 (rsa-1 and rsa-any): without a kid, neither is tried.
    let set = jwks.inner.keys.load();
    let fitting = set
        .keys
        .iter()
        .filter(|k| k.algorithms.contains(&Algorithm::RS256))
        .count();
    assert_eq!(fitting, 2);
    assert!(!jwks.verify(&header("RS256", None), b"a.b", &[0; 256]));
    assert!(!jwks.verify(&header("ES256", Some("no-such-kid")), b"a.b", &[0; 64]));
}

#[test]
fn reload_needs_a_file_and_debug_shows_ids_not_keys() {
    let jwks = JwksVerifier::from_json(FIXTURE).unwrap();
    assert!(matches!(jwks.reload(), Err(JwksError::Watch(_))));
    let debug = format!("{jwks:?}");
    assert!(
        debug.contains("rsa-1") && !debug.contains("AQAB"),
        "{debug}"
    );
}

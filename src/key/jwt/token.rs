//! A compact JWS (RFC 7515 §7.1) taken apart, bounded before any decoding: header, signing
//! input, signature; the claims only once the signature is verified.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

use super::{JwtError, JwtHeader, JwtVerifier};

/// Longer tokens are not decoded: no real token is this long, and decoding is work.
pub(super) const MAX_TOKEN: usize = 8 * 1024;

/// A JOSE header is a few short parameters; a longer one is not decoded.
const MAX_HEADER: usize = 1024;

/// Decodes one base64url part (no padding, no stray bits, as RFC 7515 §2 requires).
fn decode(part: &str) -> Result<Vec<u8>, JwtError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwtError::Malformed("a part is not base64url"))
}

/// A JSON object, or why not.
fn object(bytes: &[u8], what: &'static str) -> Result<Map<String, Value>, JwtError> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(JwtError::Malformed(what)),
    }
}

/// The claims of `token` once `verifier` has accepted its signature.
pub(super) fn verified_claims(
    token: &str,
    verifier: &dyn JwtVerifier,
) -> Result<Map<String, Value>, JwtError> {
    if token.len() > MAX_TOKEN {
        return Err(JwtError::TooLong);
    }
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed("not three dot-separated parts"));
    };
    if header_b64.len() > MAX_HEADER {
        return Err(JwtError::TooLong);
    }
    let header = object(&decode(header_b64)?, "the header is not a JSON object")?;
    let alg = match header.get("alg") {
        Some(Value::String(alg)) => alg.as_str(),
        _ => return Err(JwtError::Malformed("the header has no alg")),
    };
    if alg.eq_ignore_ascii_case("none") {
        return Err(JwtError::Unsigned);
    }
    // RFC 7515 §4.1.11: an extension the recipient does not understand (we understand none,
    // e.g. RFC 7797's unencoded payload) makes the token invalid.
    if header.contains_key("crit") {
        return Err(JwtError::Malformed("the header has crit extensions"));
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.as_str()),
        Some(_) => return Err(JwtError::Malformed("the kid is not a string")),
    };
    let signature = decode(signature_b64)?;
    if signature.is_empty() {
        return Err(JwtError::Signature);
    }
    let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
    let header = JwtHeader { alg, kid };
    if !verifier.verify(&header, signing_input.as_bytes(), &signature) {
        return Err(JwtError::Signature);
    }
    object(&decode(payload_b64)?, "the claims are not a JSON object")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts any signature of one byte `1`, for any algorithm: the parsing is under test.
    struct OneByte;

    impl JwtVerifier for OneByte {
        fn verify(&self, _: &JwtHeader<'_>, _: &[u8], signature: &[u8]) -> bool {
            signature == [1]
        }
    }

    fn b64(text: &str) -> String {
        URL_SAFE_NO_PAD.encode(text)
    }

    fn token(header: &str, claims: &str) -> String {
        format!("{}.{}.AQ", b64(header), b64(claims))
    }

    #[test]
    fn a_well_formed_token_yields_its_claims() {
        let claims = verified_claims(&token(r#"{"alg":"X"}"#, r#"{"sub":"a"}"#), &OneByte);
        assert_eq!(claims.unwrap()["sub"], "a");
    }

    #[test]
    fn each_malformation_has_its_error() {
        use JwtError::*;
        let ok_header = b64(r#"{"alg":"X"}"#);
        let ok_claims = b64(r#"{"sub":"a"}"#);
        let cases: Vec<(String, JwtError)> = vec![
            (format!("{ok_header}.{ok_claims}"), Malformed("")),
            (format!("{ok_header}.{ok_claims}.AQ.AQ"), Malformed("")),
            (format!("{ok_header}.{ok_claims}.AQ=="), Malformed("")),
            (format!("{ok_header}.{ok_claims}.AR"), Malformed("")), // stray bits
            (format!("{ok_header}.{ok_claims}."), Signature),
            (format!("{ok_header}.{ok_claims}.Ag"), Signature),
            (format!("{ok_header}=.{ok_claims}.AQ"), Malformed("")),
            (format!("{ok_header}.{ok_claims}+.AQ"), Malformed("")),
            (token(r#"{"alg":"none"}"#, r#"{"sub":"a"}"#), Unsigned),
            (token(r#"{"alg":"nOnE"}"#, r#"{"sub":"a"}"#), Unsigned),
            (token(r#"{"alg":1}"#, r#"{"sub":"a"}"#), Malformed("")),
            (token(r#"{}"#, r#"{"sub":"a"}"#), Malformed("")),
            (token(r#"["alg"]"#, r#"{"sub":"a"}"#), Malformed("")),
            (
                token(r#"{"alg":"X","kid":7}"#, r#"{"sub":"a"}"#),
                Malformed(""),
            ),
            (
                token(
                    r#"{"alg":"X","crit":["b64"],"b64":false}"#,
                    r#"{"sub":"a"}"#,
                ),
                Malformed(""),
            ),
            (token(r#"{"alg":"X"}"#, r#"["sub"]"#), Malformed("")),
            (token(r#"{"alg":"X"}"#, "{"), Malformed("")),
            (token(&"[".repeat(5000), "{}"), TooLong),
            (
                token(
                    r#"{"alg":"X"}"#,
                    &format!(r#"{{"a":"{}"}}"#, "x".repeat(MAX_TOKEN)),
                ),
                TooLong,
            ),
        ];
        for (token, expected) in cases {
            let got = verified_claims(&token, &OneByte).unwrap_err();
            assert_eq!(
                std::mem::discriminant(&got),
                std::mem::discriminant(&expected),
                "{token}: {got:?}"
            );
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(2000), "]".repeat(2000));
        let err = verified_claims(&token(r#"{"alg":"X"}"#, &deep), &OneByte).unwrap_err();
        assert!(matches!(err, JwtError::Malformed(_)), "{err:?}");
    }

    #[test]
    fn the_verifier_sees_the_signing_input_as_sent() {
        struct Expect(String);
        impl JwtVerifier for Expect {
            fn verify(&self, header: &JwtHeader<'_>, input: &[u8], sig: &[u8]) -> bool {
                header.alg() == "X"
                    && header.kid() == Some("k1")
                    && input == self.0.as_bytes()
                    && sig == [1]
            }
        }
        let t = token(r#"{"alg":"X","kid":"k1"}"#, r#"{"sub":"a"}"#);
        let input = t.rsplit_once('.').unwrap().0.to_owned();
        assert!(verified_claims(&t, &Expect(input)).is_ok());
    }
}

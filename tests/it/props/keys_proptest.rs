//! Property tests for the forwarded-header parsers behind `ClientIp`, and for the keys every
//! extractor makes: arbitrary bytes never panic, a chain of addresses with any set trusted
//! yields exactly the rightmost untrusted one, and key text is bounded and brace-free.
//!
//! 256 cases per property by default; `PROPTEST_CASES=10000` for a longer run.

use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use proptest::collection::vec;
use proptest::prelude::*;
use redlimit::key::{ClientIp, Header, ProxyHeader, Query, Subject, VerifiedSubject};
use redlimit::{Key, KeyExtractor};

const PROXY: &str = "10.255.255.254";

fn parts(peer: &str, headers: &[(&str, Vec<u8>)]) -> Parts {
    let mut req = http::Request::get("/").body(()).unwrap();
    for (name, value) in headers {
        req.headers_mut().append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    let addr = SocketAddr::new(peer.parse().unwrap(), 40000);
    req.extensions_mut().insert(addr);
    req.into_parts().0
}

fn assert_safe(key: &Key) {
    let text = key.as_str();
    assert!(!text.is_empty() && text.len() <= 128, "{text}");
    assert!(!text.contains(['{', '}']), "{text}");
    assert!(text.bytes().all(|b| b.is_ascii_graphic()), "{text}");
}

/// Bytes a header value may hold: visible ASCII, space, tab and obs-text (invalid UTF-8).
fn header_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![3 => 0x20u8..0x7f, 1 => 0x80u8..=0xff, 1 => Just(b'\t')],
        0..max,
    )
}

/// Pieces of forwarded syntax, so the parsers see near-misses rather than only noise.
fn header_soup() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop::sample::select(vec![
        "for=",
        "For=",
        "\"",
        "[",
        "]",
        ",",
        ", ",
        ";",
        ":",
        " ",
        "=",
        "\\",
        "unknown",
        "_h",
        "1.2.3.4",
        "999.1.1.1",
        "10.0.0.1",
        "::1",
        "2001:db8::1",
        "::ffff:",
        "80",
        "65536",
        "proto=https",
        "\u{ff}",
    ]);
    vec(piece, 0..40).prop_map(|p| p.concat().into_bytes())
}

fn any_header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![header_bytes(300), header_soup()]
}

fn extractors() -> Vec<ClientIp> {
    let trusted = || ClientIp::trusting(["10.0.0.0/8", "::1", "2001:db8::/32"]).unwrap();
    vec![
        ClientIp::peer(),
        trusted(),
        trusted().header(ProxyHeader::Forwarded),
        trusted().header(ProxyHeader::SingleValue(HeaderName::from_static(
            "x-real-ip",
        ))),
        trusted().ipv6_prefix(128).unwrap().ipv4_prefix(8).unwrap(),
    ]
}

fn address() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u16; 8]>().prop_map(IpAddr::from),
        // A small pool, so that the same address is often both trusted and seen again.
        (0u8..4).prop_map(|i| IpAddr::from([10, 0, 0, i])),
        (0u16..4).prop_map(|i| IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i])),
    ]
}

/// One address, written in one of the ways proxies write them.
fn xff_element(ip: IpAddr, style: u8) -> String {
    match (ip, style % 4) {
        (IpAddr::V4(a), 0) => a.to_string(),
        (IpAddr::V4(a), 1) => format!("{a}:{}", 1 + u16::from(style)),
        (IpAddr::V4(a), 2) => format!("::ffff:{a}"),
        (IpAddr::V4(a), _) => format!(" [::ffff:{a}]:443 "),
        (IpAddr::V6(a), 0) => a.to_string(),
        (IpAddr::V6(a), 1) => format!("[{a}]"),
        (IpAddr::V6(a), _) => format!("\t[{a}]:8080"),
    }
}

fn forwarded_element(ip: IpAddr, style: u8) -> String {
    let name = ["for", "For", "FOR"][usize::from(style % 3)];
    let value = match (ip, style % 4) {
        (IpAddr::V4(a), 0) => a.to_string(),
        (IpAddr::V4(a), 1) => format!("\"{a}:80\""),
        (IpAddr::V4(a), _) => format!("\"[::ffff:{a}]\""),
        (IpAddr::V6(a), 0 | 1) => format!("\"[{a}]\""),
        (IpAddr::V6(a), _) => format!("\"[{a}]:_port\""),
    };
    match style % 5 {
        0 => format!("{name}={value}"),
        1 => format!("{name}={value};proto=https"),
        2 => format!("proto=http;by=10.0.0.1; {name}={value}"),
        3 => format!("host=\"a;b\";{name}={value}"),
        _ => format!(" {name} = {value} ; by=_x "),
    }
}

/// Joins elements into header lines, starting a new line where `cuts` says.
fn lines(elements: &[String], cuts: &[bool]) -> Vec<Vec<u8>> {
    let mut out = vec![String::new()];
    for (i, e) in elements.iter().enumerate() {
        let line = out.last_mut().unwrap();
        if !line.is_empty() {
            line.push_str(", ");
        }
        line.push_str(e);
        if cuts[i] && i + 1 < elements.len() {
            out.push(String::new());
        }
    }
    out.into_iter().map(String::into_bytes).collect()
}

proptest! {
    #[test]
    fn arbitrary_headers_never_panic_and_give_safe_keys(
        xff in vec(any_header_value(), 0..3),
        fwd in vec(any_header_value(), 0..3),
        real_ip in any_header_value(),
        peer_is_proxy in any::<bool>(),
    ) {
        let mut headers: Vec<(&str, Vec<u8>)> = vec![("x-real-ip", real_ip)];
        headers.extend(xff.into_iter().map(|v| ("x-forwarded-for", v)));
        headers.extend(fwd.into_iter().map(|v| ("forwarded", v)));
        let peer = if peer_is_proxy { PROXY } else { "203.0.113.7" };
        let parts = parts(peer, &headers);
        for key in extractors() {
            let client = key.client(&parts).expect("a peer, so a client");
            if !peer_is_proxy {
                prop_assert_eq!(client, peer.parse::<IpAddr>().unwrap());
            }
            let k = key.extract(&parts).unwrap();
            assert_safe(&k);
            prop_assert!(k.as_str().starts_with("ip:"));
        }
    }

    #[test]
    fn the_client_is_the_rightmost_untrusted_address(
        chain in vec((address(), any::<bool>(), any::<u8>(), any::<bool>()), 0..=60),
        forwarded in any::<bool>(),
    ) {
        let ips: Vec<IpAddr> = chain.iter().map(|c| c.0.to_canonical()).collect();
        let mut trusted: Vec<String> = chain
            .iter()
            .filter(|c| c.1)
            .map(|c| c.0.to_canonical().to_string())
            .collect();
        trusted.push(PROXY.into());
        let is_trusted = |ip: &IpAddr| trusted.iter().any(|t| t.parse::<IpAddr>().unwrap() == *ip);
        let expected = ips
            .iter()
            .rev()
            .find(|ip| !is_trusted(ip))
            .or(ips.first())
            .copied()
            .unwrap_or_else(|| PROXY.parse().unwrap());

        let (name, elements): (&str, Vec<String>) = if forwarded {
            ("forwarded", chain.iter().map(|c| forwarded_element(c.0, c.2)).collect())
        } else {
            ("x-forwarded-for", chain.iter().map(|c| xff_element(c.0, c.2)).collect())
        };
        let cuts: Vec<bool> = chain.iter().map(|c| c.3).collect();
        let headers: Vec<(&str, Vec<u8>)> =
            lines(&elements, &cuts).into_iter().map(|l| (name, l)).collect();
        let header = if forwarded { ProxyHeader::Forwarded } else { ProxyHeader::XForwardedFor };
        let key = ClientIp::trusting(&trusted).unwrap().header(header);
        let parts = parts(PROXY, &headers);
        prop_assert_eq!(key.client(&parts), Some(expected), "{:?}", headers);
        // Untrusted, the same request is keyed on its peer.
        prop_assert_eq!(ClientIp::peer().client(&parts), Some(PROXY.parse().unwrap()));
    }

    #[test]
    fn an_unreadable_hop_stops_the_walk_at_the_last_trusted_one(
        left in vec(address(), 0..10),
        right in vec((0u8..8).prop_map(|i| IpAddr::from([10, 0, 1, i])), 0..10),
        garbage in prop::sample::select(vec!["unknown", "_hidden", "999.1.1.1", "1.2.3.4:x", "[::1"]),
    ) {
        let mut elements: Vec<String> = left.iter().map(|ip| xff_element(*ip, 0)).collect();
        elements.push(garbage.into());
        elements.extend(right.iter().map(|ip| ip.to_string()));
        let header = elements.join(", ").into_bytes();
        let parts = parts(PROXY, &[("x-forwarded-for", header)]);
        let expected = right.first().copied().unwrap_or_else(|| PROXY.parse().unwrap());
        let key = ClientIp::trusting(["10.0.0.0/8"]).unwrap();
        prop_assert_eq!(key.client(&parts), Some(expected));
    }

    #[test]
    fn api_keys_and_subjects_of_any_bytes_are_safe(
        value in header_bytes(2000).prop_filter("non-empty", |v| !v.is_empty()),
        query in vec(any::<u8>(), 1..2000),
        subject in ".{1,300}",
    ) {
        let mut req = http::Request::get(format!("/?k={}", percent(&query))).body(()).unwrap();
        req.headers_mut().insert("x-api-key", HeaderValue::from_bytes(&value).unwrap());
        req.extensions_mut().insert(VerifiedSubject(subject));
        let (parts, _) = req.into_parts();
        assert_safe(&Header::new("x-api-key").unwrap().extract(&parts).unwrap());
        assert_safe(&Query::new("k").extract(&parts).unwrap());
        assert_safe(&Subject::verified().extract(&parts).unwrap());
    }
}

#[cfg(feature = "jwt")]
mod jwt {
    use super::*;
    use crate::support::jwt::{base64url, now, sign_with};
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use redlimit::key::Jwt;
    use serde_json::{Value, json};

    const SECRET: &[u8] = b"the property tests' secret, 32 B";

    /// A signature part: the right HMAC for the header's algorithm, one for another secret
    /// or algorithm, one with a bit flipped, or noise.
    #[derive(Debug, Clone)]
    enum Signature {
        Right,
        OtherSecret,
        OtherAlgorithm,
        Flipped(usize, u8),
        Noise(Vec<u8>),
    }

    fn signature() -> impl Strategy<Value = Signature> {
        prop_oneof![
            8 => Just(Signature::Right),
            1 => Just(Signature::OtherSecret),
            1 => Just(Signature::OtherAlgorithm),
            2 => (any::<usize>(), 0u8..8).prop_map(|(i, bit)| Signature::Flipped(i, bit)),
            1 => vec(any::<u8>(), 0..70).prop_map(Signature::Noise),
        ]
    }

    fn alg() -> impl Strategy<Value = Value> {
        prop_oneof![
            12 => Just(json!("HS256")),
            1 => Just(json!("HS384")),
            1 => Just(json!("HS512")),
            1 => Just(json!("none")),
            1 => Just(json!("None")),
            1 => Just(json!("RS256")),
            1 => Just(json!("hs256")),
            1 => Just(json!(null)),
            1 => Just(json!(["HS256"])),
            1 => "[ -~]{0,8}".prop_map(Value::from),
        ]
    }

    /// A claim: absent, a fitting value, or one of the wrong type.
    fn claim(fitting: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            10 => fitting.prop_map(Some),
            1 => Just(None),
            1 => Just(Some(json!(""))),
            1 => Just(Some(json!([1]))),
            1 => Just(Some(json!({"a": null}))),
            1 => "[ -~]{0,12}".prop_map(|t| Some(json!(t))),
        ]
    }

    /// What the extractor must do with a token.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Expect {
        Key,
        NoKey,
        /// An `exp` within a second of the edge: the clock decides.
        Either,
    }

    /// An arbitrary token, and what the extractor (HS256, `SECRET`, 30 s leeway) must do with
    /// it: a key only for HS256, the right signature, no `crit`, a string or number `sub`
    /// and an `exp` that has not passed.
    fn token() -> impl Strategy<Value = (String, Expect)> {
        let sub = prop_oneof![
            "[a-z0-9-]{1,12}".prop_map(Value::from),
            any::<i64>().prop_map(Value::from)
        ];
        let exp = (-3600i64..7200).prop_map(|d| json!(now() as i64 + d));
        (
            alg(),
            proptest::option::of("[a-z0-9]{0,4}"),
            proptest::bool::weighted(0.1),
            claim(sub),
            claim(exp),
            signature(),
        )
            .prop_map(|(alg, kid, crit, sub, exp, signature)| {
                let mut header = json!({"alg": alg, "typ": "JWT"});
                if let Some(kid) = kid {
                    header["kid"] = json!(kid);
                }
                if crit {
                    header["crit"] = json!(["exp"]);
                }
                let mut claims = json!({});
                if let Some(sub) = &sub {
                    claims["sub"] = sub.clone();
                }
                if let Some(exp) = &exp {
                    claims["exp"] = exp.clone();
                }
                let named = header["alg"].as_str().unwrap_or("").to_owned();
                let signer = match named.as_str() {
                    "HS384" | "HS512" => named.clone(),
                    _ => "HS256".to_owned(),
                };
                let signed = |alg: &str, secret: &[u8]| sign_with(alg, &header, secret, &claims);
                let right = signed(&signer, SECRET);
                let input = right.rsplit_once('.').unwrap().0;
                let token = match &signature {
                    Signature::Right => right.clone(),
                    Signature::OtherSecret => signed(&signer, b"another secret of 32 bytes, too."),
                    Signature::OtherAlgorithm => {
                        signed(if signer == "HS512" { "HS256" } else { "HS512" }, SECRET)
                    }
                    Signature::Flipped(i, bit) => {
                        let mut sig = URL_SAFE_NO_PAD
                            .decode(right.rsplit_once('.').unwrap().1)
                            .unwrap();
                        let at = i % sig.len();
                        sig[at] ^= 1 << bit;
                        format!("{input}.{}", base64url(sig))
                    }
                    Signature::Noise(bytes) => format!("{input}.{}", base64url(bytes)),
                };
                let valid_sub = matches!(&sub, Some(Value::String(s)) if !s.is_empty())
                    || matches!(&sub, Some(Value::Number(_)));
                let exp = exp.as_ref().and_then(Value::as_i64);
                let now = now() as i64;
                let signed_right =
                    named == "HS256" && !crit && matches!(signature, Signature::Right);
                let expect = match exp {
                    _ if !signed_right || !valid_sub => Expect::NoKey,
                    None => Expect::NoKey,
                    Some(exp) if exp + 30 >= now + 2 => Expect::Key,
                    Some(exp) if exp + 30 < now - 2 => Expect::NoKey,
                    Some(_) => Expect::Either,
                };
                (token, expect)
            })
    }

    fn with_bearer(token: &str) -> Parts {
        parts(
            "203.0.113.7",
            &[("authorization", format!("Bearer {token}").into_bytes())],
        )
    }

    proptest! {
        #[test]
        fn arbitrary_authorization_headers_have_no_jwt_key(
            auth in prop_oneof![
                any_header_value(),
                header_bytes(200).prop_map(|t| [b"Bearer ".as_slice(), &t].concat()),
                "[A-Za-z0-9_-]{0,40}\\.[A-Za-z0-9_-]{0,80}\\.[A-Za-z0-9_-]{0,40}"
                    .prop_map(|t| format!("Bearer {t}").into_bytes()),
            ],
        ) {
            let parts = parts("203.0.113.7", &[("authorization", auth)]);
            prop_assert!(Jwt::hs256(b"secret").unwrap().extract(&parts).is_none());
        }

        /// Arbitrary headers, claims and signatures never panic, and yield a key only when
        /// signed right with the configured algorithm (and the claims hold).
        #[test]
        fn arbitrary_tokens_yield_a_key_only_when_signed((token, expect) in token()) {
            let key = Jwt::hs256(SECRET).unwrap().extract(&with_bearer(&token));
            match expect {
                Expect::Key => prop_assert!(key.is_some(), "no key for {}", token),
                Expect::NoKey => prop_assert!(key.is_none(), "{:?} for {}", key, token),
                Expect::Either => {}
            }
        }

        /// Any one character of a valid token changed, to anything: never a key.
        #[test]
        fn a_changed_character_is_never_a_key(at in any::<usize>(), to in any::<char>()) {
            let token = crate::support::jwt::sign(
                "HS256",
                SECRET,
                &json!({"sub": "alice", "exp": now() + 600}),
            );
            let jwt = Jwt::hs256(SECRET).unwrap();
            prop_assert!(jwt.verify(&token).is_ok());
            let at = at % token.len();
            prop_assume!(!token[at..].starts_with(to));
            let mut changed = token.clone();
            changed.replace_range(at..=at, to.encode_utf8(&mut [0; 4]));
            prop_assert!(jwt.verify(&changed).is_err(), "{}", changed);
        }
    }
}

/// The JWKS verifier under the same laws as HMAC: any one character of a valid token changed
/// is never a key, whatever the algorithm.
#[cfg(feature = "jwks")]
mod jwks {
    use proptest::prelude::*;
    use redlimit::key::{JwksVerifier, Jwt};
    use serde_json::json;

    use crate::support::jwt::{jwks_fixture, now, sign_asymmetric};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_changed_character_is_never_a_key(
            which in 0usize..4,
            at in any::<usize>(),
            to in any::<char>(),
        ) {
            let (alg, key, kid) = [
                ("RS256", "rs256", "rsa-1"),
                ("PS384", "rsa_any", "rsa-any"),
                ("ES256", "es256", "ec-256"),
                ("EdDSA", "ed25519", "ed-1"),
            ][which];
            let token = sign_asymmetric(
                alg,
                key,
                &json!({"alg": alg, "kid": kid}),
                &json!({"sub": "alice", "exp": now() + 600}),
            );
            let jwt = Jwt::new(JwksVerifier::from_file(jwks_fixture("jwks.json")).unwrap());
            prop_assert!(jwt.verify(&token).is_ok());
            let at = at % token.len();
            prop_assume!(!token[at..].starts_with(to));
            let mut changed = token.clone();
            changed.replace_range(at..=at, to.encode_utf8(&mut [0; 4]));
            prop_assert!(jwt.verify(&changed).is_err(), "{}", changed);
        }
    }
}

fn percent(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

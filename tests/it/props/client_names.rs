//! Property tests for naming a client as an operator knows it: for random values, the name
//! (`header:x-api-key=VALUE`, in its typed and its percent-encoded text form) gives exactly
//! the key the extractor gives a request carrying that value.
//!
//! 256 cases per property by default; `PROPTEST_CASES=10000` for a longer run.

use std::net::{IpAddr, SocketAddr};

use http::header::HeaderValue;
use http::request::Parts;
use proptest::collection::vec;
use proptest::prelude::*;
use redlimit::KeyExtractor;
use redlimit::key::{
    Both, ClientIp, ClientName, Header, PeerIp, Query, Route, Subject, VerifiedSubject,
};

/// The typed name and its text form (every byte percent-encoded but unreserved ones) must
/// give `extractor` the key it gives `parts`.
fn same_key(extractor: &dyn KeyExtractor, parts: &Parts, named: &[(&str, &[u8])]) {
    let expected = extractor.extract(parts).expect("the request has a key");
    let (first, rest) = named.split_first().expect("a part");
    let mut typed = ClientName::new(first.0, first.1).expect("a valid name");
    for (spec, value) in rest {
        typed = typed.and(spec, value).expect("a valid name");
    }
    assert_eq!(
        extractor.client_key(typed.parts()).as_ref(),
        Some(&expected)
    );
    let text: Vec<String> = named
        .iter()
        .map(|(spec, value)| format!("{spec}={}", encode(value)))
        .collect();
    let parsed = ClientName::parse(&text.join("&")).expect("a valid text form");
    assert_eq!(parsed, typed);
}

fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'+' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Bytes a header value may hold and a request keys on: visible ASCII, space, tab and
/// obs-text, not empty.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![3 => 0x21u8..0x7f, 1 => 0x80u8..=0xff, 1 => Just(b' '), 1 => Just(b'\t')],
        1..200,
    )
}

fn request(uri: &str, peer: IpAddr) -> http::request::Builder {
    http::Request::get(uri).extension(SocketAddr::new(peer, 40000))
}

fn any_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u8; 16]>().prop_map(IpAddr::from),
    ]
}

proptest! {
    #[test]
    fn a_header_value_is_named(value in header_bytes()) {
        let header = Header::new("x-api-key").unwrap();
        let parts = request("/", [10, 0, 0, 1].into())
            .header("x-api-key", HeaderValue::from_bytes(&value).unwrap())
            .body(())
            .unwrap()
            .into_parts()
            .0;
        same_key(&header, &parts, &[("header:X-API-Key", &value)]);
        same_key(&header, &parts, &[("metadata:x-api-key", &value)]);
    }

    #[test]
    fn a_query_value_is_named(value in "\\PC{1,60}") {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("page", "2")
            .append_pair("api_key", &value)
            .finish();
        let parts = request(&format!("/v1?{query}"), [10, 0, 0, 1].into())
            .body(())
            .unwrap()
            .into_parts()
            .0;
        same_key(&Query::new("api_key"), &parts, &[("query:api_key", value.as_bytes())]);
    }

    #[test]
    fn an_address_is_named_with_the_extractors_grouping(
        ip in any_ip(),
        v4 in 1u8..=32,
        v6 in 1u8..=128,
    ) {
        let parts = request("/", ip).body(()).unwrap().into_parts().0;
        let text = ip.to_string();
        same_key(&PeerIp, &parts, &[("ip", text.as_bytes())]);
        let grouped = ClientIp::peer().ipv4_prefix(v4).unwrap().ipv6_prefix(v6).unwrap();
        same_key(&grouped, &parts, &[("ip", text.as_bytes())]);
    }

    #[test]
    fn a_subject_and_a_route_with_a_header_are_named(
        subject in "\\PC{1,60}",
        path in "(/[a-zA-Z0-9._~-]{1,12}){1,4}",
        value in header_bytes(),
    ) {
        let parts = request(&path, [10, 0, 0, 1].into())
            .header("x-api-key", HeaderValue::from_bytes(&value).unwrap())
            .extension(VerifiedSubject(subject.clone()))
            .body(())
            .unwrap()
            .into_parts()
            .0;
        same_key(&Subject::verified(), &parts, &[("sub", subject.as_bytes())]);
        let both = Both::new(Route, Header::new("x-api-key").unwrap());
        same_key(&both, &parts, &[("route", path.as_bytes()), ("header:x-api-key", &value)]);
        let three = Both::new(both, Subject::verified());
        same_key(
            &three,
            &parts,
            &[("route", path.as_bytes()), ("header:x-api-key", &value), ("jwt:sub", subject.as_bytes())],
        );
    }
}

#[cfg(feature = "jwt")]
proptest! {
    #[test]
    fn a_jwt_claim_is_named(subject in "\\PC{1,60}", tenant in any::<u32>()) {
        use redlimit::key::Jwt;
        let secret = b"a test secret of thirty-two bytes";
        let exp = crate::support::jwt::now() + 3600;
        let claims = serde_json::json!({"sub": subject, "tenant": tenant, "exp": exp});
        let token = crate::support::jwt::sign("HS256", secret, &claims);
        let parts = request("/", [10, 0, 0, 1].into())
            .header("authorization", format!("Bearer {token}"))
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let by_sub = Jwt::hs256(secret).unwrap();
        same_key(&by_sub, &parts, &[("jwt", subject.as_bytes())]);
        same_key(&by_sub, &parts, &[("jwt:sub", subject.as_bytes())]);
        same_key(&by_sub, &parts, &[("sub", subject.as_bytes())]);
        let by_tenant = Jwt::hs256(secret).unwrap().claim("tenant");
        same_key(&by_tenant, &parts, &[("jwt:tenant", tenant.to_string().as_bytes())]);
    }
}

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
        prop_assert!(redlimit::key::Jwt::hs256(b"secret").unwrap().extract(&parts).is_none());
    }
}

fn percent(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

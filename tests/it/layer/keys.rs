//! Who is the client, through the real layer: trusted proxies and forwarded headers, IPv6
//! grouping, API keys in queries, verified subjects and JWTs, and hostile input of every kind.
//! No panic and no 5xx from the layer, and each case gets its documented key or response.

use crate::support;

use std::net::IpAddr;
use std::time::Duration;

use axum::body::Body;
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, StatusCode};
use redlimit::key::{ClientIp, Header, PeerIp, ProxyHeader, Query, Subject, VerifiedSubject};
use redlimit::layer::{MissingKey, RateLimitBuilder};
use redlimit::store::MemoryStore;
use redlimit::{Key, KeyExtractor, Limit, Policy, RateLimitLayer};
use support::*;

/// One request a minute per key, in memory.
fn one_per_minute(key: impl KeyExtractor) -> RateLimitLayer {
    one_per_minute_builder(key).build().expect("valid layer")
}

/// The builder of [`one_per_minute`], for more settings.
fn one_per_minute_builder(key: impl KeyExtractor) -> RateLimitBuilder {
    let policy = Policy::new(
        "keys",
        [Limit::fixed_window(1, Duration::from_secs(60)).unwrap()],
    )
    .unwrap();
    RateLimitLayer::builder(MemoryStore::new(), policy).key(key)
}

/// A request whose headers may hold any bytes (repeated names make several lines).
fn raw_request(path: &str, ip: &str, headers: &[(&str, &[u8])]) -> Request<Body> {
    let mut req = request(path, ip, &[]);
    for (name, value) in headers {
        req.headers_mut().append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    req
}

fn parts(ip: &str, headers: &[(&str, &str)]) -> Parts {
    request("/", ip, headers).into_parts().0
}

fn client(key: &ClientIp, ip: &str, headers: &[(&str, &str)]) -> String {
    key.client(&parts(ip, headers)).unwrap().to_string()
}

fn proxies() -> ClientIp {
    ClientIp::trusting(["10.0.0.0/8", "::1", "2001:db8:ffff::/48"]).unwrap()
}

async fn statuses(app: &axum::Router, requests: Vec<Request<Body>>) -> Vec<u16> {
    let mut out = Vec::new();
    for req in requests {
        out.push(send(app, req).await.status().as_u16());
    }
    out
}

#[tokio::test]
async fn rotating_forwarded_headers_without_trust_buys_no_quota() {
    for app in [
        app(one_per_minute(PeerIp)),
        app(one_per_minute(ClientIp::peer())),
        app(one_per_minute(proxies())), // the peer is not one of the proxies
    ] {
        let reqs = (0..5)
            .map(|i| {
                let forged = format!("198.51.100.{i}");
                request(
                    "/",
                    "203.0.113.7",
                    &[
                        ("x-forwarded-for", &forged),
                        ("forwarded", &format!("for={forged}")),
                        ("x-real-ip", &forged),
                    ],
                )
            })
            .collect();
        assert_eq!(statuses(&app, reqs).await, [200, 429, 429, 429, 429]);
    }
}

#[tokio::test]
async fn a_trusted_proxy_chain_names_the_client() {
    let app = app(one_per_minute(proxies()));
    let via_proxy = |xff: &str| request("/", "10.0.0.1", &[("x-forwarded-for", xff)]);
    let reqs = vec![
        via_proxy("6.6.6.6, 203.0.113.7, 10.0.0.2"),
        // The same client: a new claim on the left changes nothing.
        via_proxy("7.7.7.7, 203.0.113.7"),
        // The same client, connecting directly.
        request("/", "203.0.113.7", &[]),
        // Another client behind the same proxy has its own quota.
        via_proxy("198.51.100.1, 10.0.0.2"),
    ];
    assert_eq!(statuses(&app, reqs).await, [200, 429, 429, 200]);
}

#[test]
fn the_walk_from_the_right() {
    let p = proxies();
    let xff = |v: &str| client(&p, "10.0.0.1", &[("x-forwarded-for", v)]);
    assert_eq!(xff("203.0.113.7"), "203.0.113.7");
    assert_eq!(xff("6.6.6.6, 203.0.113.7, 10.0.0.2, ::1"), "203.0.113.7");
    // Every hop trusted: the leftmost.
    assert_eq!(xff("10.0.0.3, 10.0.0.2"), "10.0.0.3");
    // An element naming no address stops the walk at the last trusted hop.
    assert_eq!(xff("6.6.6.6, unknown, 10.0.0.2"), "10.0.0.2");
    assert_eq!(xff("6.6.6.6, 999.1.1.1"), "10.0.0.1");
    assert_eq!(xff("6.6.6.6, _hidden, 10.0.0.2"), "10.0.0.2");
    assert_eq!(xff("6.6.6.6, [1.2.3.4], 10.0.0.2"), "10.0.0.2");
    assert_eq!(xff(""), "10.0.0.1");
    assert_eq!(xff(" , ,"), "10.0.0.1");
    // Ports, brackets, whitespace, empty elements, IPv4-mapped IPv6.
    assert_eq!(xff("203.0.113.7:4711"), "203.0.113.7");
    assert_eq!(xff("[2001:db8::1]:443, 10.0.0.2"), "2001:db8::1");
    assert_eq!(xff("2001:db8::1"), "2001:db8::1");
    assert_eq!(xff(",,  203.0.113.7\t,,"), "203.0.113.7");
    assert_eq!(xff("::ffff:203.0.113.7, ::ffff:10.0.0.2"), "203.0.113.7");
    // A trusted peer may arrive as IPv4-mapped IPv6; an untrusted one's headers are ignored.
    assert_eq!(
        client(
            &p,
            "[::ffff:10.0.0.1]",
            &[("x-forwarded-for", "203.0.113.7")]
        ),
        "203.0.113.7"
    );
    assert_eq!(
        client(&p, "198.51.100.9", &[("x-forwarded-for", "203.0.113.7")]),
        "198.51.100.9"
    );
    assert_eq!(
        client(
            &p,
            "[2001:db8:ffff:1::5]",
            &[("x-forwarded-for", "203.0.113.7")]
        ),
        "203.0.113.7"
    );
}

#[test]
fn several_header_lines_are_one_list_in_order() {
    let p = proxies();
    let lines = |a: &str, b: &str| {
        client(
            &p,
            "10.0.0.1",
            &[("x-forwarded-for", a), ("x-forwarded-for", b)],
        )
    };
    assert_eq!(lines("6.6.6.6, 203.0.113.7", "10.0.0.2"), "203.0.113.7");
    assert_eq!(lines("203.0.113.7", "198.51.100.1"), "198.51.100.1");
}

#[test]
fn forwarded_when_chosen() {
    let p = proxies().header(ProxyHeader::Forwarded);
    let fwd = |v: &str| client(&p, "10.0.0.1", &[("forwarded", v)]);
    assert_eq!(
        fwd("for=192.0.2.60;proto=http;by=203.0.113.43"),
        "192.0.2.60"
    );
    assert_eq!(fwd("For=\"[2001:db8::1]:4711\""), "2001:db8::1");
    assert_eq!(fwd("for=\"203.0.113.7:80\", for=10.0.0.2"), "203.0.113.7");
    assert_eq!(
        fwd("for=6.6.6.6, for=203.0.113.7;proto=https, for=10.0.0.2"),
        "203.0.113.7"
    );
    assert_eq!(fwd("for=6.6.6.6, for=unknown, for=10.0.0.2"), "10.0.0.2");
    assert_eq!(fwd("for=_hidden"), "10.0.0.1");
    assert_eq!(fwd("for=6.6.6.6, proto=https"), "10.0.0.1"); // no for=: stop
    assert_eq!(fwd("for=6.6.6.6;for=7.7.7.7"), "10.0.0.1"); // repeated for=: malformed
    assert_eq!(fwd("for=\"6.6.6.6"), "10.0.0.1");
}

#[test]
fn with_both_headers_only_the_chosen_one_counts() {
    let both = [
        ("forwarded", "for=6.6.6.6"),
        ("x-forwarded-for", "203.0.113.7"),
    ];
    assert_eq!(client(&proxies(), "10.0.0.1", &both), "203.0.113.7");
    let fwd = proxies().header(ProxyHeader::Forwarded);
    assert_eq!(client(&fwd, "10.0.0.1", &both), "6.6.6.6");
}

#[test]
fn single_value_headers_only_when_chosen_and_only_from_proxies() {
    let real_ip = proxies().header(ProxyHeader::SingleValue(HeaderName::from_static(
        "x-real-ip",
    )));
    let h = |peer: &str, v: &str| client(&real_ip, peer, &[("x-real-ip", v)]);
    assert_eq!(h("10.0.0.1", "203.0.113.7"), "203.0.113.7");
    assert_eq!(h("10.0.0.1", "[2001:db8::1]:80"), "2001:db8::1");
    assert_eq!(h("10.0.0.1", "203.0.113.7, 6.6.6.6"), "10.0.0.1");
    assert_eq!(h("10.0.0.1", "garbage"), "10.0.0.1");
    assert_eq!(h("198.51.100.9", "203.0.113.7"), "198.51.100.9");
    // X-Forwarded-For is not read when a single-value header is chosen, nor X-Real-IP by default.
    let xff = [("x-forwarded-for", "6.6.6.6")];
    assert_eq!(client(&real_ip, "10.0.0.1", &xff), "10.0.0.1");
    let default = [("x-real-ip", "6.6.6.6")];
    assert_eq!(client(&proxies(), "10.0.0.1", &default), "10.0.0.1");
}

#[tokio::test]
async fn ipv6_clients_share_their_64() {
    for layer in [one_per_minute(PeerIp), one_per_minute(ClientIp::peer())] {
        let app = app(layer);
        assert_eq!(status_of(&app, "[2001:db8:1:2::1]").await, 200);
        assert_eq!(status_of(&app, "[2001:db8:1:2:ffff::9]").await, 429);
        assert_eq!(status_of(&app, "[2001:db8:1:3::1]").await, 200);
    }
    let exact = app(one_per_minute(ClientIp::peer().ipv6_prefix(128).unwrap()));
    assert_eq!(status_of(&exact, "[2001:db8:1:2::1]").await, 200);
    assert_eq!(status_of(&exact, "[2001:db8:1:2::2]").await, 200);
    let wide = app(one_per_minute(
        ClientIp::peer()
            .ipv6_prefix(48)
            .unwrap()
            .ipv4_prefix(24)
            .unwrap(),
    ));
    assert_eq!(status_of(&wide, "[2001:db8:1:2::1]").await, 200);
    assert_eq!(status_of(&wide, "[2001:db8:1:3::1]").await, 429);
    assert_eq!(status_of(&wide, "203.0.113.7").await, 200);
    assert_eq!(status_of(&wide, "203.0.113.8").await, 429);

    let key = proxies().extract(&parts(
        "10.0.0.1",
        &[("x-forwarded-for", "2001:db8:1:2:3:4:5:6")],
    ));
    assert_eq!(key.unwrap().as_str(), "ip:2001:db8:1:2::/64");
}

#[tokio::test]
async fn ipv4_mapped_ipv6_is_ipv4() {
    for layer in [one_per_minute(PeerIp), one_per_minute(ClientIp::peer())] {
        let app = app(layer);
        assert_eq!(status_of(&app, "[::ffff:203.0.113.7]").await, 200);
        assert_eq!(status_of(&app, "203.0.113.7").await, 429);
    }
    let ip: IpAddr = "203.0.113.7".parse().unwrap();
    let via = parts("10.0.0.1", &[("x-forwarded-for", "::ffff:203.0.113.7")]);
    assert_eq!(proxies().client(&via), Some(ip));
}

#[test]
fn bad_configuration_is_an_error_not_a_panic_later() {
    assert!(ClientIp::trusting(["10.0.0.0/8", "10.0.0.0/40"]).is_err());
    assert!(ClientIp::trusting(["::/0"]).is_err());
    assert!(ClientIp::peer().ipv6_prefix(0).is_err());
    assert!(ClientIp::peer().ipv4_prefix(33).is_err());
    assert!(matches!(
        ClientIp::trusting(["nope"]),
        Err(redlimit::ConfigError::InvalidRange { .. })
    ));
    assert!(matches!(
        Header::new("bad header"),
        Err(redlimit::ConfigError::InvalidHeaderName(name)) if name == "bad header"
    ));
    #[cfg(feature = "jwt")]
    assert!(matches!(
        redlimit::key::Jwt::hs256(b""),
        Err(redlimit::ConfigError::InvalidKey(_))
    ));
}

#[cfg(feature = "axum")]
#[test]
fn peer_ip_reads_axums_mock_connect_info() {
    use axum::extract::connect_info::MockConnectInfo;
    let mut req = http::Request::new(());
    let addr: std::net::SocketAddr = "203.0.113.9:4000".parse().unwrap();
    req.extensions_mut().insert(MockConnectInfo(addr));
    let (parts, _) = req.into_parts();
    assert_eq!(PeerIp.extract(&parts).unwrap().as_str(), "ip:203.0.113.9");
}

#[tokio::test]
async fn query_api_keys() {
    let app = app(one_per_minute(Query::new("api_key")));
    let reqs = vec![
        request("/v1?api_key=alpha", "203.0.113.7", &[]),
        request("/v1?page=2&api_key=alpha", "198.51.100.1", &[]), // the key, not the IP
        request("/v1?api_key=beta", "203.0.113.7", &[]),
        request("/v1", "192.0.2.1", &[]), // no key: the peer IP
        request("/v1?api_key=", "192.0.2.1", &[]),
    ];
    assert_eq!(statuses(&app, reqs).await, [200, 429, 200, 200, 429]);
}

#[tokio::test]
async fn a_missing_api_key_can_be_rejected() {
    let layer = one_per_minute_builder(Query::new("api_key"))
        .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
        .build()
        .expect("valid layer");
    let app = app(layer);
    let reqs = vec![
        request("/v1", "203.0.113.7", &[]),
        request("/v1?api_key=", "203.0.113.7", &[]),
        request("/v1?api_key=alpha", "203.0.113.7", &[]),
    ];
    assert_eq!(statuses(&app, reqs).await, [401, 401, 200]);
}

#[tokio::test]
async fn verified_subjects_from_an_auth_layer() {
    let app = app(one_per_minute(Subject::verified()));
    let as_user = |user: &str, ip: &str| {
        let mut req = request("/", ip, &[]);
        req.extensions_mut().insert(VerifiedSubject(user.into()));
        req
    };
    let reqs = vec![
        as_user("alice", "203.0.113.7"),
        as_user("alice", "198.51.100.1"),
        as_user("bob", "203.0.113.7"),
        request("/", "192.0.2.1", &[]),
        as_user("", "192.0.2.1"), // empty: the peer IP
    ];
    assert_eq!(statuses(&app, reqs).await, [200, 429, 200, 200, 429]);
}

/// Hostile headers at every extractor: each request gets 200 or 429, never a 5xx, and the
/// documented fallback key (the peer, counted across cases) when it names no client.
#[tokio::test]
async fn hostile_headers_never_break_the_layer() {
    let thousands = (0..5000)
        .map(|i| format!("10.{}.{}.{}", i % 7, i % 11, i % 13))
        .collect::<Vec<_>>()
        .join(", ");
    let huge = vec![b'9'; 64 * 1024];
    let hostile: Vec<(&str, Vec<u8>)> = vec![
        ("x-forwarded-for", thousands.clone().into_bytes()),
        ("x-forwarded-for", [b"6.6.6.6, ".as_slice(), &huge].concat()),
        ("x-forwarded-for", b"\xff\xfe, 10.0.0.2".to_vec()),
        ("x-forwarded-for", ",".repeat(60_000).into_bytes()),
        ("x-forwarded-for", b"[::1".to_vec()),
        (
            "forwarded",
            format!("for=\"{}", "\\".repeat(10_000)).into_bytes(),
        ),
        ("forwarded", "for=1.2.3.4;".repeat(5000).into_bytes()),
        ("forwarded", b"for=\"[2001:db8::1]:443\xff\"".to_vec()),
        ("x-real-ip", huge.clone()),
        ("x-api-key", huge.clone()),
        ("x-api-key", b"{a}\xff b\t".to_vec()),
        ("authorization", [b"Bearer ".as_slice(), &huge].concat()),
        ("authorization", b"Bearer \xff\xff.\xff.\xff".to_vec()),
    ];
    let extractors: Vec<Box<dyn Fn() -> RateLimitLayer>> = vec![
        Box::new(|| one_per_minute(PeerIp)),
        Box::new(|| one_per_minute(proxies())),
        Box::new(|| one_per_minute(proxies().header(ProxyHeader::Forwarded))),
        Box::new(|| {
            one_per_minute(
                proxies().header(ProxyHeader::SingleValue(HeaderName::from_static(
                    "x-real-ip",
                ))),
            )
        }),
        Box::new(|| one_per_minute(Header::new("x-api-key").unwrap())),
        Box::new(|| one_per_minute(Query::new("k"))),
        Box::new(|| one_per_minute(Subject::verified())),
        #[cfg(feature = "jwt")]
        Box::new(|| one_per_minute(redlimit::key::Jwt::hs256(b"secret").unwrap())),
    ];
    for make in &extractors {
        let app = app(make());
        for (name, value) in &hostile {
            let req = raw_request("/?k=%FF%00{}", "10.0.0.1", &[(name, value)]);
            let status = send(&app, req).await.status();
            assert!(
                status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS,
                "{status} for {name}"
            );
        }
    }
    // The documented client for each hostile chain, behind trusted proxies.
    let p = proxies();
    let at = |name: &str, value: &[u8]| {
        let req = raw_request("/", "10.0.0.1", &[(name, value)]);
        p.client(&req.into_parts().0).unwrap().to_string()
    };
    // 5000 trusted hops: only the 64 rightmost are read, and the leftmost of those counts.
    let hop_64 = thousands.rsplit(", ").nth(63).unwrap();
    assert_eq!(at("x-forwarded-for", thousands.as_bytes()), hop_64);
    assert_eq!(
        at("x-forwarded-for", b"6.6.6.6, \xff, 10.0.0.2"),
        "10.0.0.2"
    );
    assert_eq!(at("x-forwarded-for", &huge), "10.0.0.1");
    let mut huge_chain = thousands.clone().into_bytes();
    huge_chain.extend_from_slice(b", 203.0.113.7");
    assert_eq!(at("x-forwarded-for", &huge_chain), "203.0.113.7");
}

#[test]
fn keys_of_hostile_input_are_bounded_and_brace_free() {
    let huge = vec![b'}'; 64 * 1024];
    let mut req = raw_request(
        "/?api_key=%7B%7D%0A",
        "10.0.0.1",
        &[("x-api-key", &huge), ("x-forwarded-for", b"2001:db8::{1}")],
    );
    req.extensions_mut()
        .insert(VerifiedSubject(String::from_utf8_lossy(&huge).into_owned()));
    let (parts, _) = req.into_parts();
    let keys: Vec<Key> = vec![
        Header::new("x-api-key").unwrap().extract(&parts).unwrap(),
        Query::new("api_key").extract(&parts).unwrap(),
        Subject::verified().extract(&parts).unwrap(),
        proxies().extract(&parts).unwrap(),
    ];
    for key in keys {
        assert!(key.as_str().len() <= 128, "{key:?}");
        assert!(!key.as_str().contains(['{', '}', ' ', '\n']), "{key:?}");
    }
}

/// Hostile keys through a real Redis: every key written is bounded, and the keys of one
/// evaluation share one hash tag (one cluster slot).
#[tokio::test]
async fn hostile_keys_in_redis_are_bounded_and_share_one_hash_tag() {
    use redis::Commands;
    use std::sync::Arc;

    let server = RedisServer::start();
    let huge = vec![b'{'; 64 * 1024];
    let raw = |parts: &Parts| parts.headers.get("x-raw").map(|v| Key::new(v.as_bytes()));
    let mut subject = request("/", "203.0.113.7", &[]);
    subject
        .extensions_mut()
        .insert(VerifiedSubject("}{ evil\r\n".repeat(5000)));
    let cases: Vec<(Arc<dyn KeyExtractor>, Request<Body>)> = vec![
        (
            Arc::new(raw),
            raw_request("/", "203.0.113.7", &[("x-raw", b"a}{b c")]),
        ),
        (
            Arc::new(raw),
            raw_request("/", "203.0.113.7", &[("x-raw", &huge)]),
        ),
        (
            Arc::new(raw),
            raw_request("/", "203.0.113.7", &[("x-raw", b"\xff\xfe{")]),
        ),
        (
            Arc::new(Header::new("x-api-key").unwrap()),
            raw_request("/", "203.0.113.7", &[("x-api-key", &huge)]),
        ),
        (
            Arc::new(Query::new("k")),
            request("/?k=%7B%0A%7D%FF", "203.0.113.7", &[]),
        ),
        (Arc::new(Subject::verified()), subject),
        (
            Arc::new(proxies()),
            raw_request(
                "/",
                "10.0.0.1",
                &[("x-forwarded-for", b"2001:db8::1{}, \xff")],
            ),
        ),
        (Arc::new(proxies()), request("/", "[2001:db8:1:2::7]", &[])),
    ];
    let mut conn = server.connection();
    for (i, (key, req)) in cases.into_iter().enumerate() {
        let prefix = unique_prefix("hostile");
        let store = redlimit::store::RedisStore::builder(server.url())
            .prefix(&prefix)
            .connect()
            .await
            .unwrap();
        let policy = Policy::new(
            "hostile",
            [
                Limit::gcra(5, Duration::from_secs(60)).unwrap(),
                Limit::sliding_log(5, Duration::from_secs(60)).unwrap(),
                Limit::fixed_window(5, Duration::from_secs(60)).unwrap(),
            ],
        )
        .unwrap();
        let app = app(RateLimitLayer::builder(store, policy)
            .key(key)
            .build()
            .expect("valid layer"));
        let res = send(&app, req).await;
        assert_eq!(res.status(), StatusCode::OK, "case {i}");
        assert_eq!(
            header(&res, "x-ratelimit-remaining"),
            "4",
            "case {i}: counted in Redis"
        );
        let keys: Vec<String> = conn.keys(format!("{prefix}:*")).unwrap();
        assert_eq!(keys.len(), 3, "case {i}: {keys:?}");
        let tag = |k: &str| {
            assert_eq!(k.matches('{').count(), 1, "{k}");
            assert_eq!(k.matches('}').count(), 1, "{k}");
            k[k.find('{').unwrap()..=k.find('}').unwrap()].to_owned()
        };
        for k in &keys {
            assert!(k.len() <= 200, "case {i}: {} bytes: {k}", k.len());
            assert!(!k.contains([' ', '\n', '\r']), "{k}");
            assert_eq!(tag(k), tag(&keys[0]), "case {i}: {keys:?}");
        }
    }
}

#[cfg(feature = "jwt")]
mod jwt {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use redlimit::key::Jwt;
    use serde_json::json;
    use support::jwt::{base64url, now, sign, sign_with};

    const SECRET: &[u8] = b"test secret, at least 32 bytes long!";

    fn token(claims: serde_json::Value) -> String {
        sign("HS256", SECRET, &claims)
    }

    fn bearer(token: &str) -> String {
        format!("Bearer {token}")
    }

    /// Every way a token can fail: each one has no key.
    fn bad_authorizations() -> Vec<Vec<u8>> {
        let valid = token(json!({"sub": "alice", "exp": now() + 600}));
        let alg_none = format!(
            "{}.{}.",
            base64url(br#"{"alg":"none","typ":"JWT"}"#),
            base64url(format!(r#"{{"sub":"alice","exp":{}}}"#, now() + 600).as_bytes())
        );
        let tampered = {
            let mut parts: Vec<&str> = valid.split('.').collect();
            let forged = base64url(format!(r#"{{"sub":"bob","exp":{}}}"#, now() + 600).as_bytes());
            parts[1] = &forged;
            parts.join(".")
        };
        let readable: serde_json::Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(tampered.split('.').nth(1).unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(readable["sub"], "bob", "only the signature is wrong");
        [
            bearer(&sign(
                "HS256",
                b"another secret, also 32 bytes long",
                &json!({"sub": "alice", "exp": now() + 600}),
            )),
            bearer(&tampered),
            bearer(&token(json!({"sub": "alice", "exp": now() - 3600}))),
            bearer(&token(
                json!({"sub": "alice", "exp": now() + 600, "nbf": now() + 3600}),
            )),
            bearer(&token(json!({"sub": "alice"}))), // no exp
            bearer(&token(json!({"exp": now() + 600}))), // no sub
            bearer(&token(json!({"sub": "", "exp": now() + 600}))),
            bearer(&token(json!({"sub": ["a"], "exp": now() + 600}))),
            // Signed right, but with an algorithm other than the configured one.
            bearer(&sign(
                "HS512",
                SECRET,
                &json!({"sub": "alice", "exp": now() + 600}),
            )),
            // An HS256 signature under a header that says HS512.
            bearer(&sign_with(
                "HS256",
                &json!({"alg": "HS512"}),
                SECRET,
                &json!({"sub": "alice", "exp": now() + 600}),
            )),
            // A critical extension nobody here understands.
            bearer(&sign_with(
                "HS256",
                &json!({"alg": "HS256", "crit": ["exp"], "exp": 1}),
                SECRET,
                &json!({"sub": "alice", "exp": now() + 600}),
            )),
            bearer(&alg_none),
            // `none` with the valid token's signature kept.
            bearer(&format!(
                "{}.{}",
                base64url(br#"{"alg":"none"}"#),
                valid.split_once('.').unwrap().1
            )),
            format!("Basic {valid}"),
            format!("Token {valid}"),
            valid.clone(),
            "Bearer".into(),
            "Bearer ".into(),
            "Bearer garbage".into(),
            "Bearer a.b.c".into(),
            "Bearer ....".into(),
        ]
        .into_iter()
        .map(String::into_bytes)
        .chain([
            [b"Bearer ".as_slice(), valid.as_bytes(), b"\xff"].concat(),
            [b"Bearer ".as_slice(), &vec![b'A'; 64 * 1024]].concat(),
        ])
        .collect()
    }

    fn with_auth(ip: &str, authorization: &[u8]) -> Request<Body> {
        raw_request("/", ip, &[("authorization", authorization)])
    }

    #[tokio::test]
    async fn valid_tokens_are_keyed_per_subject() {
        let app = app(one_per_minute(Jwt::hs256(SECRET).unwrap()));
        let alice = bearer(&token(json!({"sub": "alice", "exp": now() + 600})));
        let bob = bearer(&token(json!({"sub": "bob", "exp": now() + 600})));
        let alice_lower = format!("bearer  {}", &alice[7..]);
        let reqs = vec![
            with_auth("203.0.113.7", alice.as_bytes()),
            with_auth("198.51.100.1", alice_lower.as_bytes()), // alice, any IP, any case
            with_auth("203.0.113.7", bob.as_bytes()),
        ];
        assert_eq!(statuses(&app, reqs).await, [200, 429, 200]);

        let (parts, _) = with_auth("203.0.113.7", alice.as_bytes()).into_parts();
        let key = Jwt::hs256(SECRET).unwrap().extract(&parts).unwrap();
        assert_eq!(key.as_str(), "sub:alice");
        let tenant = token(json!({"sub": "a", "tenant": 42, "exp": now() + 600}));
        let (parts, _) = with_auth("203.0.113.7", bearer(&tenant).as_bytes()).into_parts();
        let key = Jwt::hs256(SECRET)
            .unwrap()
            .claim("tenant")
            .extract(&parts)
            .unwrap();
        assert_eq!(key.as_str(), "claim:tenant:42");
        // A number and its text are the same client, as documented.
        let text = token(json!({"sub": "a", "tenant": "42", "exp": now() + 600}));
        let (parts, _) = with_auth("203.0.113.7", bearer(&text).as_bytes()).into_parts();
        let same = Jwt::hs256(SECRET)
            .unwrap()
            .claim("tenant")
            .extract(&parts)
            .unwrap();
        assert_eq!(same, key);
    }

    #[test]
    fn every_bad_token_has_no_key() {
        // The forgeries are well-formed, so they fail for the reason they are meant to.
        assert_eq!(base64url(br#"{"alg":"none"}"#), "eyJhbGciOiJub25lIn0");
        assert_eq!(base64url(b"ab"), "YWI");
        let jwt = Jwt::hs256(SECRET).unwrap();
        for auth in bad_authorizations() {
            let (parts, _) = with_auth("203.0.113.7", &auth).into_parts();
            assert_eq!(
                jwt.extract(&parts),
                None,
                "{}",
                String::from_utf8_lossy(&auth[..auth.len().min(80)])
            );
        }
    }

    #[tokio::test]
    async fn bad_tokens_fall_back_to_the_peer_ip_by_default() {
        let app = app(one_per_minute(Jwt::hs256(SECRET).unwrap()));
        let bad = bad_authorizations();
        assert_eq!(
            send(&app, with_auth("203.0.113.7", &bad[0])).await.status(),
            200
        );
        // Every other bad token from that IP shares its quota...
        for auth in &bad[1..] {
            assert_eq!(
                send(&app, with_auth("203.0.113.7", auth)).await.status(),
                429
            );
        }
        // ...as does no token, while a valid one has its own.
        assert_eq!(status_of(&app, "203.0.113.7").await, 429);
        let valid = bearer(&token(json!({"sub": "carol", "exp": now() + 600})));
        let res = send(&app, with_auth("203.0.113.7", valid.as_bytes())).await;
        assert_eq!(res.status(), 200);
    }

    #[tokio::test]
    async fn bad_tokens_get_401_when_configured() {
        let app = app(one_per_minute_builder(Jwt::hs256(SECRET).unwrap())
            .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
            .build()
            .expect("valid layer"));
        for auth in bad_authorizations() {
            let res = send(&app, with_auth("203.0.113.7", &auth)).await;
            assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        }
        assert_eq!(status_of(&app, "203.0.113.7").await, 401);
        let valid = bearer(&token(json!({"sub": "dave", "exp": now() + 600})));
        let res = send(&app, with_auth("203.0.113.7", valid.as_bytes())).await;
        assert_eq!(res.status(), 200);
    }

    #[test]
    fn issuer_and_audience_when_configured() {
        let jwt = Jwt::hs256(SECRET)
            .unwrap()
            .issuer(["https://auth"])
            .audience(["api"]);
        let check = |claims: serde_json::Value| {
            let (parts, _) =
                with_auth("203.0.113.7", bearer(&token(claims)).as_bytes()).into_parts();
            jwt.extract(&parts).map(|k| k.as_str().to_owned())
        };
        let exp = now() + 600;
        assert_eq!(
            check(json!({"sub": "a", "exp": exp, "iss": "https://auth", "aud": "api"})).as_deref(),
            Some("sub:a")
        );
        assert_eq!(
            check(json!({"sub": "a", "exp": exp, "iss": "https://evil", "aud": "api"})),
            None
        );
        assert_eq!(
            check(json!({"sub": "a", "exp": exp, "iss": "https://auth", "aud": "web"})),
            None
        );
        assert_eq!(check(json!({"sub": "a", "exp": exp, "aud": "api"})), None);
        assert_eq!(
            check(json!({"sub": "a", "exp": exp, "iss": "https://auth"})),
            None
        );
        // Not configured: an audience in the token does not matter.
        let (parts, _) = with_auth(
            "203.0.113.7",
            bearer(&token(json!({"sub": "a", "exp": exp, "aud": "web"}))).as_bytes(),
        )
        .into_parts();
        assert!(Jwt::hs256(SECRET).unwrap().extract(&parts).is_some());
    }

    #[test]
    fn hs384_hs512_and_several_algorithms() {
        use redlimit::key::{HmacAlgorithm, HmacVerifier};
        let secret = [5u8; 64];
        let claims = json!({"sub": "erin", "exp": now() + 600});
        let (hs256, hs384, hs512) = (
            sign("HS256", &secret, &claims),
            sign("HS384", &secret, &claims),
            sign("HS512", &secret, &claims),
        );
        let only = |jwt: &Jwt, ok: &str, bad: [&str; 2]| {
            assert_eq!(jwt.verify(ok).unwrap().as_str(), "sub:erin");
            for token in bad {
                assert_eq!(jwt.verify(token), Err(redlimit::key::JwtError::Signature));
            }
        };
        only(&Jwt::hs256(secret).unwrap(), &hs256, [&hs384, &hs512]);
        only(&Jwt::hs384(secret).unwrap(), &hs384, [&hs256, &hs512]);
        only(&Jwt::hs512(secret).unwrap(), &hs512, [&hs256, &hs384]);
        let both = Jwt::new(
            HmacVerifier::new(secret, [HmacAlgorithm::Hs512, HmacAlgorithm::Hs256]).unwrap(),
        );
        assert!(both.verify(&hs256).is_ok() && both.verify(&hs512).is_ok());
        assert_eq!(both.verify(&hs384), Err(redlimit::key::JwtError::Signature));
    }

    #[test]
    fn reasons_for_refusal_are_typed() {
        use redlimit::key::JwtError;
        let jwt = Jwt::hs256(SECRET).unwrap().issuer(["https://auth"]);
        let exp = now() + 600;
        let cases = [
            (
                token(json!({"sub": "a", "exp": exp, "iss": "https://auth"})),
                None,
            ),
            (
                token(json!({"sub": "a", "exp": now() - 3600, "iss": "https://auth"})),
                Some(JwtError::Expired),
            ),
            (
                token(json!({"sub": "a", "exp": exp, "nbf": now() + 3600, "iss": "https://auth"})),
                Some(JwtError::NotYetValid),
            ),
            (
                token(json!({"sub": "a", "iss": "https://auth"})),
                Some(JwtError::Claim("exp")),
            ),
            (
                token(json!({"sub": "a", "exp": exp})),
                Some(JwtError::Claim("iss")),
            ),
            (
                token(json!({"sub": {}, "exp": exp, "iss": "https://auth"})),
                Some(JwtError::KeyClaim),
            ),
            (
                sign("HS256", b"wrong", &json!({"sub": "a", "exp": exp})),
                Some(JwtError::Signature),
            ),
            (
                "a.b".into(),
                Some(JwtError::Malformed("not three dot-separated parts")),
            ),
            ("A".repeat(9000), Some(JwtError::TooLong)),
        ];
        for (token, expected) in cases {
            let got = jwt.verify(&token);
            match expected {
                None => assert_eq!(got.unwrap().as_str(), "sub:a"),
                Some(err) => assert_eq!(got, Err(err), "{}", &token[..token.len().min(60)]),
            }
        }
    }

    /// ES256 through a verifier of our own on `ring`, as `JwtVerifier`'s docs show.
    #[test]
    fn a_custom_verifier_brings_another_algorithm() {
        use redlimit::key::{JwtHeader, JwtVerifier};
        use ring::rand::SystemRandom;
        use ring::signature::{
            ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
            UnparsedPublicKey,
        };

        struct Es256 {
            public_key: Vec<u8>,
        }
        impl JwtVerifier for Es256 {
            fn verify(&self, header: &JwtHeader<'_>, input: &[u8], signature: &[u8]) -> bool {
                header.alg() == "ES256"
                    && UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &self.public_key)
                        .verify(input, signature)
                        .is_ok()
            }
        }

        let rng = SystemRandom::new();
        let pkcs8 = rcgen::KeyPair::generate().unwrap().serialize_der();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
        let es256 = |header: serde_json::Value, claims: serde_json::Value| {
            let input = format!(
                "{}.{}",
                base64url(header.to_string()),
                base64url(claims.to_string())
            );
            let signature = pair.sign(&rng, input.as_bytes()).unwrap();
            format!("{input}.{}", base64url(signature.as_ref()))
        };
        let jwt = Jwt::new(Es256 {
            public_key: pair.public_key().as_ref().to_vec(),
        })
        .claim("tenant");
        let claims = json!({"sub": "a", "tenant": "acme", "exp": now() + 600});
        let valid = es256(json!({"alg": "ES256", "kid": "k1"}), claims.clone());
        assert_eq!(jwt.verify(&valid).unwrap().as_str(), "claim:tenant:acme");
        // The claims are still ours to check, and the verifier's algorithm is the only one.
        let expired = es256(json!({"alg": "ES256"}), json!({"tenant": "acme", "exp": 1}));
        assert_eq!(jwt.verify(&expired), Err(redlimit::key::JwtError::Expired));
        let relabelled = es256(json!({"alg": "ES384"}), claims.clone());
        assert_eq!(
            jwt.verify(&relabelled),
            Err(redlimit::key::JwtError::Signature)
        );
        assert_eq!(
            jwt.verify(&sign("HS256", SECRET, &claims)),
            Err(redlimit::key::JwtError::Signature)
        );
        let unsigned = format!(
            "{}.{}.",
            base64url(r#"{"alg":"none"}"#),
            valid.split('.').nth(1).unwrap()
        );
        assert_eq!(
            jwt.verify(&unsigned),
            Err(redlimit::key::JwtError::Unsigned)
        );
    }
}

//! `examples/server`'s admin endpoints take a client as the operator knows it
//! (`header:x-api-key=sk_live_123`): with the server's own extractors (an API key falling back
//! to the client IP, a route with a key, a verified JWT subject), a denied client is found,
//! reset and given an override by that name.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::{RedisServer, RunningExample, unique_prefix};

const TOKEN: &str = "s3cret-token";

/// One HTTP/1.1 request; the status and the body.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read response");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {raw:?}"));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    )
}

/// A chunked body (axum's JSON) reassembled.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    out
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// Starts the server with `args` (a limit of 2 an hour), sends a client's request until it is
/// denied, then finds, resets and overrides the client by `name` through the admin listener.
fn named(args: &[&str], path: &str, headers: &[(&str, &str)], name: &str) {
    let mut all = vec![
        "--limit",
        "2/1h",
        "--admin-bind",
        "127.0.0.1:0",
        "--admin-token",
        TOKEN,
    ];
    all.extend_from_slice(args);
    let server = RunningExample::start("server", &all);
    let admin = server.listener("admin");
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("authorization", bearer.as_str())];
    let statuses: Vec<u16> = (0..3)
        .map(|_| http(&server.addr, "GET", path, headers, "").0)
        .collect();
    assert_eq!(statuses, [200, 200, 429], "{args:?}");

    let keys = format!("/keys/server/{name}");
    let (status, body) = http(admin, "GET", &keys, &auth, "");
    assert_eq!(status, 200, "{body}");
    let state = json(&body);
    assert_eq!(state["allowed"], false, "{state}");
    let stored = state["key"].as_str().expect("the stored key").to_owned();

    let (status, body) = http(admin, "DELETE", &keys, &auth, "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["key"], stored.as_str());
    assert_eq!(http(&server.addr, "GET", path, headers, "").0, 200);

    let overrides = format!("/overrides/server/{name}");
    let with_json = [auth[0], ("content-type", "application/json")];
    let (status, body) = http(
        admin,
        "PUT",
        &overrides,
        &with_json,
        r#"{"limits": ["1/1h"]}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["key"], stored.as_str());
    // 1 used since the reset: none left under the override (once this replica applied it).
    assert_eq!(http(&server.addr, "GET", path, headers, "").0, 429);
    let (status, body) = http(admin, "GET", &overrides, &auth, "");
    assert_eq!(
        (status, json(&body)["key"].clone()),
        (200, stored.as_str().into())
    );
}

#[test]
fn an_api_key_and_its_fallback_ip_are_named_on_redis() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("admin-names");
    let store = ["--redis", redis.url().leak(), "--prefix", prefix.leak()];
    let key = [&store[..], &["--key", "header:x-api-key"]].concat();
    named(
        &key,
        "/",
        &[("x-api-key", "sk_live_123")],
        "header:x-api-key=sk_live_123",
    );
    // Without the header, the server's fallback: the client's address.
    named(&key, "/", &[], "ip=127.0.0.1");
}

#[test]
fn a_route_with_a_key_is_named() {
    named(
        &["--key", "route+header:x-api-key"],
        "/search",
        &[("x-api-key", "k 1")],
        "route=%2Fsearch&header:x-api-key=k%201",
    );
}

#[cfg(feature = "jwt")]
#[test]
fn a_jwt_subject_is_named() {
    let secret = "a secret of thirty-two bytes, ok";
    let claims = serde_json::json!({"sub": "user-42", "exp": support::jwt::now() + 3600});
    let token = format!(
        "Bearer {}",
        support::jwt::sign("HS256", secret.as_bytes(), &claims)
    );
    named(
        &["--key", "jwt", "--jwt-secret", secret],
        "/",
        &[("authorization", &token)],
        "jwt=user-42",
    );
}

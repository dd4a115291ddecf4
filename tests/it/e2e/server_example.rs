//! Black-box tests of `examples/server.rs`: its flags, its output, and its answers over a real
//! socket, with the in-memory store and against a real Redis.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

use support::{RedisServer, RunningExample, example_binary, unique_prefix};

/// A running server example, killed on drop.
struct Server(RunningExample);

impl Server {
    fn start(args: &[&str]) -> Server {
        Server(RunningExample::start("server", args))
    }

    /// One HTTP/1.1 request; returns the status code and the raw response.
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        get_at(&self.0.addr, path, headers)
    }
}

/// One HTTP/1.1 request to `addr`; returns the status code and the raw response.
fn get_at(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {response:?}"));
    (status, response)
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn run(args: &[&str]) -> Output {
    Command::new(example_binary("server"))
        .args(args)
        .output()
        .expect("run server")
}

#[test]
fn answers_ok_then_429_with_headers_on_the_memory_store() {
    let server = Server::start(&["--limit", "2/10s", "--algorithm", "fixed-window"]);
    let (status, res) = server.get("/any/path", &[]);
    assert_eq!(status, 200);
    assert!(res.ends_with("ok"), "{res:?}");
    assert_eq!(header(&res, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&res, "x-ratelimit-remaining"), Some("1"));
    assert_eq!(server.get("/", &[]).0, 200);
    let (status, res) = server.get("/", &[]);
    assert_eq!(status, 429);
    let retry: u64 = header(&res, "retry-after").unwrap().parse().unwrap();
    assert!((1..=10).contains(&retry));
}

#[test]
fn multi_limit_policy_against_redis() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("server");
    let server = Server::start(&[
        "--redis",
        &redis.url(),
        "--prefix",
        &prefix,
        "--algorithm",
        "sliding-log",
        "--limit",
        "5/3s",
        "--limit",
        "20/60s",
    ]);
    for _ in 0..5 {
        assert_eq!(server.get("/", &[]).0, 200);
    }
    let (status, res) = server.get("/", &[]);
    assert_eq!(status, 429);
    assert_eq!(
        header(&res, "x-ratelimit-limit"),
        Some("5"),
        "the 3 s limit denied"
    );
    let retry: u64 = header(&res, "retry-after").unwrap().parse().unwrap();
    assert!((1..=3).contains(&retry));
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut redis.connection())
        .unwrap();
    assert_eq!(keys.len(), 1, "one shared log: {keys:?}");
    assert!(
        keys[0].starts_with(&format!("{prefix}:server:{{ip:127.0.0.1}}")),
        "{keys:?}"
    );
}

/// `--limit N/DUR@SPEC`: per API key 2 and per tenant 3, against Redis, where the tenant's
/// limit is one key whichever API key counts against it.
#[test]
fn limits_with_their_own_keys_against_redis() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("server-tiers");
    let server = Server::start(&[
        "--redis",
        &redis.url(),
        "--prefix",
        &prefix,
        "--algorithm",
        "fixed-window",
        "--limit",
        "2/1h@header:x-api-key",
        "--limit",
        "3/1h@header:x-tenant",
    ]);
    let get = |api_key: &str, tenant: &str| {
        server
            .get("/", &[("x-api-key", api_key), ("x-tenant", tenant)])
            .0
    };
    assert_eq!(get("k1", "acme"), 200);
    assert_eq!(get("k1", "acme"), 200);
    assert_eq!(get("k1", "acme"), 429, "k1's own 2");
    assert_eq!(get("k2", "acme"), 200);
    assert_eq!(get("k2", "acme"), 429, "acme's 3");
    assert_eq!(get("k3", "other"), 200);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut redis.connection())
        .unwrap();
    // k1, k2, k3 each and two tenants; every check's keys under its tenant's hash tag.
    assert_eq!(keys.len(), 5, "{keys:?}");
    assert!(
        keys.iter().all(|k| k.contains(":{header:x-tenant:")),
        "{keys:?}"
    );
}

#[test]
fn header_and_global_keys() {
    let server = Server::start(&["--limit", "1/60s", "--key", "header:x-api-key"]);
    assert_eq!(server.get("/", &[("x-api-key", "a")]).0, 200);
    assert_eq!(server.get("/", &[("x-api-key", "a")]).0, 429);
    assert_eq!(server.get("/", &[("x-api-key", "b")]).0, 200);
    let server = Server::start(&["--limit", "1/60s", "--key", "global"]);
    assert_eq!(server.get("/a", &[]).0, 200);
    assert_eq!(server.get("/b", &[]).0, 429);
}

#[test]
fn limits_locally_or_fails_open_or_closed_when_redis_is_unreachable() {
    // Nothing listens on port 1. By default the server limits in memory.
    let local = Server::start(&["--redis", "redis://127.0.0.1:1", "--limit", "1/60s"]);
    assert_eq!(local.get("/", &[]).0, 200);
    assert_eq!(local.get("/", &[]).0, 429);
    let open = Server::start(&[
        "--redis",
        "redis://127.0.0.1:1",
        "--limit",
        "1/60s",
        "--on-store-error",
        "open",
    ]);
    for _ in 0..3 {
        assert_eq!(open.get("/", &[]).0, 200);
    }
    let closed = Server::start(&[
        "--redis",
        "redis://127.0.0.1:1",
        "--on-store-error",
        "closed",
        "--store-timeout-ms",
        "50",
    ]);
    assert_eq!(closed.get("/", &[]).0, 503);
}

#[test]
fn bad_flags_exit_non_zero_with_a_message() {
    for args in [
        &["--limit", "five/3s"][..],
        &["--limit", "0/1s"],
        &["--algorithm", "leaky"],
        &["--key", "cookie"],
        &["--key", "header:bad name"],
        &["--on-store-error", "maybe"],
        &["--store-timeout-ms", "soon"],
        &["--bind", "nowhere"],
        &["--redis", "not a url"],
        &["--frobnicate"],
        &["--limit"],
        &["--on-store-error", "local:0"],
        &["--on-store-error=local:many"],
        &["--jwt-secret", ""],
        &["--jwt-secret="],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
}

#[test]
fn help_lists_the_flags_and_exits_0() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.starts_with("usage: server [OPTIONS]"), "{stdout}");
        assert!(stdout.contains("--on-store-error MODE"), "{stdout}");
        assert!(out.stderr.is_empty());
    }
}

#[test]
fn a_short_jwt_secret_is_a_one_line_warning() {
    // The bad URL makes the server exit after the warning instead of serving.
    let out = run(&["--jwt-secret", "short", "--redis", "not a url"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("warning: --jwt-secret is 5 bytes"),
        "{stderr}"
    );
    assert!(lines[1].starts_with("error: --redis"), "{stderr}");
}

#[test]
fn cluster_sentinel_and_local_fallback_flags() {
    let cluster = support::RedisCluster::start();
    let server = Server::start(&[
        "--redis-cluster",
        &cluster.urls().join(","),
        "--limit",
        "2/60s",
        "--key",
        "global",
    ]);
    assert_eq!(server.get("/", &[]).0, 200);
    assert_eq!(server.get("/", &[]).0, 200);
    assert_eq!(server.get("/", &[]).0, 429);

    let set = support::SentinelSet::start();
    let server = Server::start(&[
        "--redis-sentinel",
        &set.sentinel_urls().join(","),
        "--sentinel-master",
        support::MASTER_NAME,
        "--limit",
        "1/60s",
    ]);
    assert_eq!(server.get("/", &[]).0, 200);
    assert_eq!(server.get("/", &[]).0, 429);

    // Redis unreachable: this instance limits in memory.
    let local = Server::start(&[
        "--redis",
        "redis://127.0.0.1:1",
        "--on-store-error",
        "local",
        "--limit",
        "1/60s",
    ]);
    assert_eq!(local.get("/", &[]).0, 200);
    assert_eq!(local.get("/", &[]).0, 429);
}

#[test]
fn local_fallback_shares_the_limit_among_instances() {
    // Two instances falling back together each admit half of 4 per minute.
    let local = Server::start(&[
        "--redis",
        "redis://127.0.0.1:1",
        "--on-store-error",
        "local:2",
        "--limit",
        "4/60s",
    ]);
    assert_eq!(local.get("/", &[]).0, 200);
    assert_eq!(local.get("/", &[]).0, 200);
    assert_eq!(local.get("/", &[]).0, 429);
}

#[test]
fn trusted_proxies_and_combined_keys() {
    // Behind a trusted proxy (the test itself, on 127.0.0.1), X-Forwarded-For names the client.
    let server = Server::start(&["--limit", "1/60s", "--trusted-proxy", "127.0.0.1"]);
    let from = |ip: &str| server.get("/", &[("x-forwarded-for", ip)]).0;
    assert_eq!(from("203.0.113.1"), 200);
    assert_eq!(from("203.0.113.1"), 429);
    assert_eq!(from("203.0.113.2"), 200);
    // Without trust, rotating X-Forwarded-For buys nothing.
    let untrusting = Server::start(&["--limit", "1/60s"]);
    assert_eq!(
        untrusting
            .get("/", &[("x-forwarded-for", "198.51.100.1")])
            .0,
        200
    );
    assert_eq!(
        untrusting
            .get("/", &[("x-forwarded-for", "198.51.100.2")])
            .0,
        429
    );
    // route+ip: one quota per route and client.
    let combined = Server::start(&["--limit", "1/60s", "--key", "route+ip"]);
    assert_eq!(combined.get("/a", &[]).0, 200);
    assert_eq!(combined.get("/a", &[]).0, 429);
    assert_eq!(combined.get("/b", &[]).0, 200);
    // query:NAME, hashed.
    let query = Server::start(&["--limit", "1/60s", "--key", "query:api_key"]);
    assert_eq!(query.get("/?api_key=one", &[]).0, 200);
    assert_eq!(query.get("/?api_key=one", &[]).0, 429);
    assert_eq!(query.get("/?api_key=two", &[]).0, 200);
}

#[cfg(feature = "jwt")]
#[test]
fn jwt_subjects() {
    let token = |sub: &str, secret: &str| {
        let claims = serde_json::json!({ "sub": sub, "exp": support::jwt::now() + 600 });
        support::jwt::sign("HS256", secret.as_bytes(), &claims)
    };
    let secret = "a secret of thirty-two bytes, ok";
    let server = Server::start(&["--limit", "1/60s", "--key", "jwt", "--jwt-secret", secret]);
    let bearer = |t: &str| format!("Bearer {t}");
    let alice = bearer(&token("alice", secret));
    assert_eq!(server.get("/", &[("authorization", &alice)]).0, 200);
    assert_eq!(server.get("/", &[("authorization", &alice)]).0, 429);
    let bob = bearer(&token("bob", secret));
    assert_eq!(server.get("/", &[("authorization", &bob)]).0, 200);
    // A forged token (wrong secret) does not spend bob's quota: it falls back to the IP key.
    let forged = bearer(&token("bob", "guess"));
    assert_eq!(server.get("/", &[("authorization", &forged)]).0, 200);
}

#[cfg(feature = "jwks")]
#[test]
fn jwt_subjects_from_a_jwks_file() {
    let token = |sub: &str, key: &str| {
        let claims = serde_json::json!({ "sub": sub, "exp": support::jwt::now() + 600 });
        let header = serde_json::json!({ "alg": "RS256", "kid": "rsa-1" });
        format!(
            "Bearer {}",
            support::jwt::sign_asymmetric("RS256", key, &header, &claims)
        )
    };
    let jwks = support::jwt::jwks_fixture("jwks.json");
    let jwks = jwks.to_str().unwrap();
    let server = Server::start(&["--limit", "1/60s", "--key", "jwt", "--jwt-jwks", jwks]);
    let alice = token("alice", "rs256");
    assert_eq!(server.get("/", &[("authorization", &alice)]).0, 200);
    assert_eq!(server.get("/", &[("authorization", &alice)]).0, 429);
    assert_eq!(
        server
            .get("/", &[("authorization", &token("bob", "rs256"))])
            .0,
        200
    );
    // Signed by a key the set does not hold: not bob, the peer IP (its first request).
    let forged = token("bob", "other");
    assert_eq!(server.get("/", &[("authorization", &forged)]).0, 200);
    assert_eq!(server.get("/", &[("authorization", &forged)]).0, 429);
    // Both ways of verifying at once is a mistake the command line refuses.
    let out = run(&[
        "--key",
        "jwt",
        "--jwt-jwks",
        jwks,
        "--jwt-secret",
        "a secret of thirty-two bytes, ok",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("give only one of --jwt-secret and --jwt-jwks"),
        "{out:?}"
    );
}

#[test]
fn concurrency_flag_holds_one_request_in_flight_per_key() {
    let server = Server::start(&[
        "--concurrency",
        "1",
        "--handler-delay-ms",
        "3000",
        "--limit",
        "1000/1s",
        "--key",
        "global",
    ]);
    // Four requests at once: the first in holds the only slot for 3 s, the others are
    // refused at once (a later one could get in only if it started 3 s after the first).
    let addr = server.0.addr.clone();
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || get_at(&addr, "/", &[]))
        })
        .collect();
    let answers: Vec<(u16, String)> = requests.into_iter().map(|r| r.join().unwrap()).collect();
    let admitted = answers.iter().filter(|(status, _)| *status == 200).count();
    let refused: Vec<&String> = answers
        .iter()
        .filter(|(status, _)| *status == 429)
        .map(|(_, response)| response)
        .collect();
    assert!(admitted >= 1, "{answers:?}");
    assert!(!refused.is_empty(), "{answers:?}");
    assert_eq!(admitted + refused.len(), 4);
    for response in refused {
        assert_eq!(header(response, "retry-after"), Some("1"));
        assert_eq!(header(response, "x-ratelimit-limit"), Some("1"));
    }
    // The slot came back when the response ended (a release on a spawned task).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _) = server.get("/", &[]);
        if status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
    }
}

#[test]
fn concurrency_flags_are_checked() {
    for bad in [
        &["--concurrency", "0"][..],
        &["--concurrency", "x"],
        &["--handler-delay-ms", "-1"],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

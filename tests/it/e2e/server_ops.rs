//! Black-box tests of `examples/server.rs`'s operations flags: `/metrics` after a known
//! sequence (against real Redis, then without it), `--shadow`, and the admin endpoints
//! (inspect and reset, overrides) on Redis and on the memory store.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{RedisServer, RunningExample, unique_prefix};

const TOKEN: &str = "s3cret-token";

/// One HTTP/1.1 request to `addr`; the status, the headers (names in lower case) and the body.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    http_with_body(addr, method, path, headers, "")
}

/// [`http`] with a request body.
fn http_with_body(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
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
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {raw:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &str) -> u64 {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", self.headers))
            .parse()
            .unwrap()
    }

    /// The body, when chunked (axum's JSON), reassembled; as is otherwise.
    fn json(&self) -> serde_json::Value {
        let text = if self.header("transfer-encoding") == Some("chunked") {
            let mut out = String::new();
            let mut rest = self.body.as_str();
            while let Some((size, after)) = rest.split_once("\r\n") {
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                if size == 0 {
                    break;
                }
                out.push_str(&after[..size]);
                rest = &after[size + 2..];
            }
            out
        } else {
            self.body.clone()
        };
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
    }
}

/// The sum of the samples of `metric` whose labels include every one of `labels`, in the
/// Prometheus text `/metrics` serves.
fn sample(text: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) || l.starts_with(&format!("{metric} ")))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn scrape(server: &RunningExample) -> String {
    let reply = http(server.listener("metrics"), "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200);
    reply.body
}

fn client(name: &str) -> [(&'static str, &str); 1] {
    [("x-client", name)]
}

#[test]
fn metrics_count_a_known_sequence_exactly() {
    let mut redis = RedisServer::start();
    let prefix = unique_prefix("metrics");
    let server = RunningExample::start(
        "server",
        &[
            "--redis",
            &redis.url(),
            "--prefix",
            &prefix,
            "--algorithm",
            "sliding-log",
            "--limit",
            "5/1h",
            "--key",
            "header:x-client",
            "--metrics-bind",
            "127.0.0.1:0",
        ],
    );
    for _ in 0..5 {
        assert_eq!(http(&server.addr, "GET", "/", &client("a")).status, 200);
    }
    for _ in 0..3 {
        assert_eq!(http(&server.addr, "GET", "/", &client("a")).status, 429);
    }
    let text = scrape(&server);
    assert!(text.contains("# HELP redlimit_decisions_total "), "{text}");
    let decisions = |labels: &[(&str, &str)]| sample(&text, "redlimit_decisions_total", labels);
    let server_policy = ("policy", "server");
    assert_eq!(
        decisions(&[server_policy, ("outcome", "allowed")]),
        5.0,
        "{text}"
    );
    assert_eq!(
        decisions(&[server_policy, ("outcome", "allowed"), ("source", "store")]),
        5.0
    );
    assert_eq!(
        decisions(&[server_policy, ("outcome", "denied")]),
        3.0,
        "{text}"
    );
    // The first denial from Redis, the next two from the deny cache, all by the one limit.
    assert_eq!(
        decisions(&[
            ("outcome", "denied"),
            ("source", "store"),
            ("limit", "sliding-log 5/1h")
        ]),
        1.0
    );
    assert_eq!(
        decisions(&[("outcome", "denied"), ("source", "deny_cache")]),
        2.0
    );
    assert_eq!(decisions(&[("outcome", "shadow_denied")]), 0.0);
    assert_eq!(
        sample(
            &text,
            "redlimit_store_duration_seconds_count",
            &[("store", "redis")]
        ),
        6.0,
        "one per store call: {text}"
    );

    redis.kill();
    // Another client (the first is in the deny cache): decided in memory without Redis.
    assert_eq!(http(&server.addr, "GET", "/", &client("b")).status, 200);
    let text = scrape(&server);
    let decisions = |labels: &[(&str, &str)]| sample(&text, "redlimit_decisions_total", labels);
    assert_eq!(
        decisions(&[("outcome", "allowed"), ("source", "local")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        decisions(&[("outcome", "allowed"), ("source", "store")]),
        5.0
    );
    assert_eq!(decisions(&[("outcome", "denied")]), 3.0);
    assert_eq!(
        sample(
            &text,
            "redlimit_store_failures_total",
            &[("store", "redis")]
        ),
        1.0,
        "{text}"
    );
}

#[test]
fn shadow_mode_never_denies_while_the_metrics_show_what_it_would_have() {
    let server = RunningExample::start(
        "server",
        &[
            "--shadow",
            "--algorithm",
            "sliding-log",
            "--limit",
            "2/1h",
            "--metrics-bind",
            "127.0.0.1:0",
        ],
    );
    for _ in 0..6 {
        let reply = http(&server.addr, "GET", "/", &[]);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("x-ratelimit-remaining"), None);
        assert_eq!(reply.header("retry-after"), None);
    }
    let text = scrape(&server);
    let decisions = |outcome| {
        sample(
            &text,
            "redlimit_decisions_total",
            &[
                ("policy", "server"),
                ("outcome", outcome),
                ("source", "store"),
            ],
        )
    };
    assert_eq!(decisions("allowed"), 2.0, "{text}");
    assert_eq!(decisions("shadow_denied"), 4.0, "{text}");
    assert_eq!(decisions("denied"), 0.0);
}

/// Inspect, then the real decisions, then a reset, through the admin endpoints.
fn admin_flow(store_args: &[&str]) {
    let mut args = vec![
        "--algorithm",
        "sliding-log",
        "--limit",
        "3/1h",
        "--admin-bind",
        "127.0.0.1:0",
        "--admin-token",
        TOKEN,
    ];
    args.extend_from_slice(store_args);
    let server = RunningExample::start("server", &args);
    let admin = server.listener("admin");
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("authorization", bearer.as_str())];
    let key_path = "/keys/server/ip:127.0.0.1";
    let inspect = || {
        let reply = http(admin, "GET", key_path, &auth);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let json = reply.json();
        assert_eq!(json["policy"], "server");
        assert_eq!(json["key"], "ip:127.0.0.1");
        json["limits"][0].clone()
    };

    // Nothing without the token.
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        let reply = http(admin, "GET", key_path, headers);
        assert_eq!(reply.status, 401);
        assert!(
            reply
                .header("www-authenticate")
                .unwrap()
                .starts_with("Bearer")
        );
        assert!(reply.json()["error"].is_string());
        assert_eq!(http(admin, "DELETE", key_path, headers).status, 401);
    }

    let fresh = inspect();
    assert_eq!(fresh["name"], "sliding-log 3/1h");
    assert_eq!(fresh["limit"], 3);
    assert_eq!(fresh["remaining"], 3);
    assert_eq!(fresh["retry_after"], 0);

    // An inspection consumes nothing: the next decision's headers count from it.
    assert_eq!(inspect()["remaining"], 3);
    let first = http(&server.addr, "GET", "/", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.number("x-ratelimit-remaining"), 2);
    let seen = inspect();
    assert_eq!(seen["remaining"], 2);
    assert_eq!(seen["reset"], first.number("x-ratelimit-reset"));

    for _ in 0..2 {
        assert_eq!(http(&server.addr, "GET", "/", &[]).status, 200);
    }
    let seen = inspect();
    assert_eq!(seen["remaining"], 0);
    let retry = seen["retry_after"].as_u64().unwrap();
    assert!((1..=3600).contains(&retry), "{seen}");
    let denied = http(&server.addr, "GET", "/", &[]);
    assert_eq!(denied.status, 429);
    assert_eq!(denied.number("x-ratelimit-remaining"), 0);
    assert_eq!(seen["reset"], denied.number("x-ratelimit-reset"));
    // Retry-After counts whole seconds from a later instant: the same, or one less across a
    // second's boundary.
    let retry_after = denied.number("retry-after");
    assert!(
        retry_after == retry || retry_after + 1 == retry,
        "{retry_after} vs {retry}"
    );

    // A reset lets the denied client through at once (past the deny cache, on Redis).
    let reset = http(admin, "DELETE", key_path, &auth);
    assert_eq!(reset.status, 204, "{}", reset.body);
    let again = http(&server.addr, "GET", "/", &[]);
    assert_eq!(again.status, 200);
    assert_eq!(again.number("x-ratelimit-remaining"), 2);
    // The key percent-encoded, as a client would send it.
    assert_eq!(
        http(admin, "GET", "/keys/server/ip%3A127.0.0.1", &auth).json()["limits"][0]["remaining"],
        2
    );

    // Bad paths get a clear answer: a status, an error code and a message.
    let answer = |path: &str| {
        let reply = http(admin, "GET", path, &auth);
        let json = reply.json();
        let text = |field: &str| json[field].as_str().unwrap_or_default().to_owned();
        (reply.status, text("error"), text("message"))
    };
    let (status, error, message) = answer("/keys/nope/ip:127.0.0.1");
    assert_eq!((status, error.as_str()), (404, "no_such_policy"));
    assert!(message.contains("no policy named `nope`"), "{message}");
    let (status, error, message) = answer("/keys/server/a%7Bb%7D");
    assert_eq!((status, error.as_str()), (400, "bad_key"), "{message}");
    let (status, error, message) = answer("/keys/server/%FF");
    assert_eq!((status, error.as_str()), (400, "bad_request"), "{message}");
    assert!(message.starts_with("bad path"), "{message}");
    let (status, error, message) = answer("/keys/server");
    assert_eq!((status, error.as_str()), (404, "not_found"));
    assert!(message.contains("no such admin endpoint"), "{message}");
    let post = http(admin, "POST", key_path, &auth);
    assert_eq!(post.status, 405);
    assert_eq!(post.json()["error"], "method_not_allowed");
}

#[test]
fn admin_inspects_and_resets_keys_in_redis() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("admin");
    admin_flow(&["--redis", &redis.url(), "--prefix", &prefix]);
}

#[test]
fn admin_inspects_and_resets_keys_in_memory() {
    admin_flow(&[]);
}

#[test]
fn admin_answers_503_while_the_store_is_down() {
    let mut redis = RedisServer::start();
    let server = RunningExample::start(
        "server",
        &[
            "--redis",
            &redis.url(),
            "--admin-bind",
            "127.0.0.1:0",
            "--admin-token",
            TOKEN,
        ],
    );
    redis.kill();
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("authorization", bearer.as_str())];
    let deadline = Instant::now() + Duration::from_secs(10);
    let reply = loop {
        let reply = http(
            server.listener("admin"),
            "GET",
            "/keys/server/ip:1.2.3.4",
            &auth,
        );
        if reply.status != 200 || Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(reply.status, 503);
    assert_eq!(reply.json()["error"], "store_unavailable");
    assert!(
        reply.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("store: ")
    );
}

/// Set, read and remove an override through the admin endpoints (`{"limits": [..]}`); bad
/// bodies get 400.
fn override_flow(store_args: &[&str]) {
    let mut args = vec![
        "--algorithm",
        "fixed-window",
        "--limit",
        "3/1h",
        "--admin-bind",
        "127.0.0.1:0",
        "--admin-token",
        TOKEN,
    ];
    args.extend_from_slice(store_args);
    let server = RunningExample::start("server", &args);
    let admin = server.listener("admin");
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("authorization", bearer.as_str())];
    let path = "/overrides/server/ip%3A127.0.0.1";
    let request = || http(&server.addr, "GET", "/", &[]);

    for method in ["GET", "PUT", "DELETE"] {
        let body = r#"{"limits": ["9/1h"]}"#;
        assert_eq!(http_with_body(admin, method, path, &[], body).status, 401);
    }
    assert_eq!(http(admin, "GET", path, &auth).status, 404);
    for _ in 0..3 {
        assert_eq!(request().status, 200);
    }
    assert_eq!(request().status, 429);

    let json = [("content-type", "application/json"), auth[0]];
    for (body, code, reason) in [
        (
            r#"{"limits": ["ten per hour"]}"#,
            "bad_override",
            "limits[0]",
        ),
        (r#"{"limits": ["5/1h", "5/1s"]}"#, "bad_override", "(got 2)"),
        (r#"{"limits": []}"#, "bad_override", "(got 0)"),
        (r#"{"limits": ["0/1h"]}"#, "bad_override", "limits[0]"),
        ("5/1h", "bad_request", "JSON"),
        (r#"{"limits": ["5/1h"]"#, "bad_request", "JSON"),
    ] {
        let reply = http_with_body(admin, "PUT", path, &json, body);
        assert_eq!(reply.status, 400, "{body:?}: {}", reply.body);
        let answer = reply.json();
        assert_eq!(answer["error"], code, "{body:?}: {answer}");
        let message = answer["message"].as_str().unwrap().to_owned();
        assert!(message.contains(reason), "{body:?}: {message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }
    let hostile = format!(r#"{{"limits": [{}"1/1s"]}}"#, r#""1/1s","#.repeat(2_000));
    assert_eq!(
        http_with_body(admin, "PUT", path, &json, &hostile).status,
        413
    );

    // Raised to 5: the 3 used still count, and the cached denial is gone at once.
    assert_eq!(
        http_with_body(admin, "PUT", path, &json, r#"{"limits": ["5/1h"]}"#).status,
        204
    );
    let read = http(admin, "GET", path, &auth);
    assert_eq!(read.status, 200);
    assert_eq!(read.json()["limits"], serde_json::json!(["5/1h"]));
    let allowed = request();
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.number("x-ratelimit-limit"), 5);
    assert_eq!(allowed.number("x-ratelimit-remaining"), 1);

    assert_eq!(http(admin, "DELETE", path, &auth).status, 204);
    assert_eq!(http(admin, "DELETE", path, &auth).status, 404);
    assert_eq!(http(admin, "GET", path, &auth).status, 404);
    assert_eq!(request().status, 429);
}

#[test]
fn admin_sets_reads_and_removes_overrides_in_redis() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("admin-ov");
    override_flow(&["--redis", &redis.url(), "--prefix", &prefix]);
}

#[test]
fn admin_sets_reads_and_removes_overrides_in_memory() {
    override_flow(&[]);
}

/// The admin token from `$REDLIMIT_ADMIN_TOKEN`, then from the file `$REDLIMIT_ADMIN_TOKEN_FILE`
/// names (its line break dropped): never on the command line.
#[test]
fn admin_token_from_the_environment_or_a_file() {
    let dir = std::env::temp_dir().join(unique_prefix("admin-token"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, "from-a-file\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    for (env, token) in [
        (("REDLIMIT_ADMIN_TOKEN", "from-the-env"), "from-the-env"),
        (("REDLIMIT_ADMIN_TOKEN_FILE", file.as_str()), "from-a-file"),
    ] {
        let server =
            RunningExample::start_with_env("server", &["--admin-bind", "127.0.0.1:0"], &[env]);
        let admin = server.listener("admin");
        let path = "/keys/server/ip%3A127.0.0.1";
        let bearer = format!("Bearer {token}");
        let reply = http(admin, "GET", path, &[("authorization", &bearer)]);
        assert_eq!(reply.status, 200, "{env:?}: {}", reply.body);
        assert_eq!(reply.json()["limits"][0]["remaining"], 10);
        let wrong = http(admin, "GET", path, &[("authorization", "Bearer from-the")]);
        assert_eq!(wrong.status, 401, "{env:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

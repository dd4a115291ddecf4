//! Black-box test of `examples/production.rs`: configured from the environment only, it
//! limits by its config file (reloaded on SIGHUP), serves Prometheus metrics with histogram
//! buckets, keeps the admin API behind its token, and drains every listener on SIGTERM.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use support::{RedisServer, RunningExample, eventually, example_binary, unique_prefix};

/// One HTTP/1.1 request; the status and the body.
fn http(addr: &str, method: &str, path: &str, auth: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: Bearer {a}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{auth}Content-Length: 0\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read response");
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response {raw:?}"));
    let body = raw.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

fn config(count: u64) -> String {
    format!(
        "[[policy]]\nname = \"api\"\nlimits = [{{ algorithm = \"sliding-log\", rate = \"{count}/1h\" }}]\n\n\
         [default]\npolicy = \"api\"\nkey = \"ip\"\n"
    )
}

/// Starts the example with the memory store or `redis`, a config of `count` per hour and
/// the admin token given as `token_env`.
fn start(dir: &std::path::Path, redis: Option<&str>, token_env: (&str, &str)) -> RunningExample {
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, config(3)).unwrap();
    let mut command = Command::new(example_binary("production"));
    command
        .env("REDLIMIT_CONFIG", &path)
        .env("REDLIMIT_BIND", "127.0.0.1:0")
        .env("REDLIMIT_METRICS_BIND", "127.0.0.1:0")
        .env("REDLIMIT_ADMIN_BIND", "127.0.0.1:0")
        .env_remove("REDLIMIT_REDIS")
        .env_remove("REDLIMIT_REDIS_FILE")
        .env_remove("REDLIMIT_ADMIN_TOKEN")
        .env_remove("REDLIMIT_ADMIN_TOKEN_FILE")
        .env(token_env.0, token_env.1);
    if let Some(url) = redis {
        command.env("REDLIMIT_REDIS", url);
    }
    RunningExample::spawn("production", command)
}

fn runs_in_production(redis: Option<&str>) {
    let dir = std::env::temp_dir().join(unique_prefix("production"));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "file-token\n").unwrap();
    let token_file = token_file.to_string_lossy().into_owned();
    let mut server = start(&dir, redis, ("REDLIMIT_ADMIN_TOKEN_FILE", &token_file));

    // It limits by the file: 3 per hour.
    let statuses: Vec<u16> = (0..4)
        .map(|_| http(&server.addr, "GET", "/", None).0)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 429]);

    // Metrics: the decisions, and the store latency as buckets when Redis decided.
    let (status, metrics) = http(server.listener("metrics"), "GET", "/metrics", None);
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"redlimit_decisions_total{policy="api",outcome="denied""#),
        "{metrics}"
    );
    if redis.is_some() {
        assert!(
            metrics.contains(r#"redlimit_store_duration_seconds_bucket{store="redis",le="0.1"}"#),
            "{metrics}"
        );
    }

    // The admin API needs the token (from the file); with it, a reset lets the client in.
    let admin = server.listener("admin").to_owned();
    let key = "/keys/api/ip%3A127.0.0.1";
    assert_eq!(http(&admin, "DELETE", key, None).0, 401);
    assert_eq!(http(&admin, "DELETE", key, Some("wrong")).0, 401);
    assert_eq!(http(&server.addr, "GET", "/", None).0, 429);
    assert_eq!(http(&admin, "DELETE", key, Some("file-token")).0, 204);
    assert_eq!(http(&server.addr, "GET", "/", None).0, 200);

    // SIGHUP, whose default action ends a process, reloads the file instead (had it ended
    // the process, the SIGTERM below would find none and no clean exit). Then a new file is in
    // force (10 per hour, the units used kept), by the watcher or the next SIGHUP, whichever
    // comes first.
    let pid = server.pid().to_string();
    let hangup = || {
        let hup = Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("kill -HUP");
        assert!(hup.success());
    };
    hangup();
    let limit = |admin: &str| {
        let (status, body) = http(admin, "GET", key, Some("file-token"));
        assert_eq!(status, 200, "{body}");
        body
    };
    std::fs::write(dir.join("redlimit.toml"), config(10)).unwrap();
    hangup();
    let reloaded = tokio_block_on(eventually(Duration::from_secs(10), async || {
        limit(&admin).contains(r#""limit":10"#)
    }));
    assert!(reloaded, "the new limit is in force");
    assert_eq!(http(&server.addr, "GET", "/", None).0, 200);

    // SIGTERM: every listener drains and the process exits cleanly.
    let term = Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let exit = server
        .wait_exit(Duration::from_secs(10))
        .expect("exits after SIGTERM");
    assert!(exit.success(), "{exit:?}");
    for addr in [server.addr.as_str(), admin.as_str()] {
        assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tokio_block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn production_example_in_memory() {
    runs_in_production(None);
}

#[test]
fn production_example_on_redis() {
    let redis = RedisServer::start();
    runs_in_production(Some(&redis.url()));
}

#[test]
fn production_example_takes_the_admin_token_from_the_environment() {
    let dir = std::env::temp_dir().join(unique_prefix("production-env"));
    std::fs::create_dir_all(&dir).unwrap();
    let server = start(&dir, None, ("REDLIMIT_ADMIN_TOKEN", "env-token"));
    let admin = server.listener("admin");
    let key = "/keys/api/ip%3A127.0.0.1";
    assert_eq!(http(admin, "GET", key, Some("env-token")).0, 200);
    assert_eq!(http(admin, "GET", key, Some("file-token")).0, 401);
    assert_eq!(http(admin, "GET", key, None).0, 401);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Black-box test of `examples/server.rs`'s `--penalty`, `--refund-5xx` (with `GET /fail`)
//! and `--headers`: two servers sharing one Redis, over real sockets.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{RedisServer, RunningExample, unique_prefix};

/// One HTTP/1.1 GET with the API key `k`; returns the status and the raw response.
fn get(server: &RunningExample, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(&server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nx-api-key: k\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, response)
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Whether the servers keep any GCRA state in Redis (a refund of the only admission deletes
/// it: its TAT goes back to now).
fn any_state(redis: &RedisServer, prefix: &str) -> bool {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*:gc0"))
        .query(&mut redis.connection())
        .unwrap();
    !keys.is_empty()
}

#[test]
fn refunds_5xx_boxes_across_servers_and_shows_both_header_styles() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("server-penalty");
    let args = [
        "--redis",
        &redis.url(),
        "--prefix",
        &prefix,
        "--algorithm",
        "gcra",
        "--limit",
        "2/10s",
        "--key",
        "header:x-api-key",
        "--penalty",
        "30s",
        "--refund-5xx",
        "--headers",
        "both",
    ];
    let (a, b) = (
        RunningExample::start("server", &args),
        RunningExample::start("server", &args),
    );

    // Failures are refunded, after the response: wait for each.
    for server in [&a, &b, &a] {
        assert_eq!(get(server, "/fail").0, 500);
        let deadline = Instant::now() + Duration::from_secs(10);
        while any_state(&redis, &prefix) {
            assert!(Instant::now() < deadline, "the 500 was not refunded");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (status, ok) = get(&a, "/");
    assert_eq!(status, 200);
    assert_eq!(header(&ok, "x-ratelimit-remaining"), Some("1"));
    assert!(header(&ok, "ratelimit-policy").is_some(), "{ok}");
    assert_eq!(get(&b, "/").0, 200);

    // Denied through B (GCRA alone: 5 s): boxed for 30 s on both servers.
    let (status, denied) = get(&b, "/");
    assert_eq!(status, 429);
    assert_eq!(header(&denied, "retry-after"), Some("30"));
    assert!(
        header(&denied, "ratelimit").is_some() && header(&denied, "x-ratelimit-limit").is_some()
    );
    let (status, through_a) = get(&a, "/");
    assert_eq!(status, 429);
    let retry: u64 = header(&through_a, "retry-after").unwrap().parse().unwrap();
    assert!((25..=30).contains(&retry), "the box's time left: {retry}");
}

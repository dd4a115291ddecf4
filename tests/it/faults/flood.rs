//! A flood of thousands of concurrent connections against `examples/server` over a real Redis:
//! load alone must never switch limiting off. Store calls that queue past their deadline, a
//! breaker that opens on them, or calls past the in-flight bound would each have admitted
//! everything for a while; the limit must hold to at most twice its size (the store's count
//! plus, at worst, this instance's in-memory share) and nothing may answer 5xx.

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use support::example::RunningExample;
use support::redis_server::RedisServer;
use support::unique_prefix;

const CONNECTIONS: usize = 2000;
const FLOOD_FOR: Duration = Duration::from_secs(4);
const LIMIT: u64 = 100;

/// Responses by class, and connections that could not be made or broke.
#[derive(Default, Debug)]
struct Tally {
    ok: AtomicU64,
    limited: AtomicU64,
    server_errors: AtomicU64,
    other: AtomicU64,
    broken: AtomicU64,
}

/// One client connection: requests back to back until `until`.
async fn client(addr: String, until: Instant, tally: Arc<Tally>) {
    let Ok(stream) = tokio::net::TcpStream::connect(&addr).await else {
        tally.broken.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let Ok((mut sender, connection)) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        tally.broken.fetch_add(1, Ordering::Relaxed);
        return;
    };
    tokio::spawn(connection);
    while Instant::now() < until {
        let request = http::Request::get("/")
            .header("host", "flood")
            .body(Empty::<Bytes>::new())
            .expect("a valid request");
        let Ok(response) = sender.send_request(request).await else {
            tally.broken.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let status = response.status();
        let counter = match status.as_u16() {
            200 => &tally.ok,
            429 => &tally.limited,
            500..=599 => &tally.server_errors,
            _ => &tally.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if response.into_body().collect().await.is_err() {
            tally.broken.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

/// Floods a server with [`CONNECTIONS`] connections for [`FLOOD_FOR`].
async fn flood(addr: &str) -> Tally {
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + FLOOD_FOR;
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(client(addr.to_owned(), until, Arc::clone(&tally))))
        .collect();
    for c in clients {
        c.await.expect("a client task");
    }
    Arc::try_unwrap(tally).expect("every client done")
}

async fn flood_server(redis: &RedisServer, mode: &str) -> Tally {
    let url = redis.url();
    let prefix = unique_prefix(&format!("flood-{mode}"));
    let limit = format!("{LIMIT}/1h");
    let server = RunningExample::start(
        "server",
        &[
            "--redis",
            &url,
            "--prefix",
            &prefix,
            "--algorithm",
            "sliding-log",
            "--limit",
            &limit,
            "--key",
            "global",
            "--on-store-error",
            mode,
        ],
    );
    let tally = flood(&server.addr).await;
    eprintln!("{mode}: {tally:?}");
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_admits_at_most_twice_the_limit_and_never_5xx() {
    let redis = RedisServer::start();
    // Failing open is the mode a flood used to exploit: load must not count as a failure.
    for mode in ["local", "open"] {
        let tally = flood_server(&redis, mode).await;
        let answered = tally.ok.load(Ordering::Relaxed) + tally.limited.load(Ordering::Relaxed);
        assert!(
            answered > 10 * LIMIT,
            "{mode}: no flood happened: {tally:?}"
        );
        assert!(
            tally.ok.load(Ordering::Relaxed) <= 2 * LIMIT,
            "{mode}: {} admitted against a limit of {LIMIT}: {tally:?}",
            tally.ok.load(Ordering::Relaxed)
        );
        assert_eq!(
            tally.server_errors.load(Ordering::Relaxed),
            0,
            "{mode}: {tally:?}"
        );
        assert_eq!(tally.other.load(Ordering::Relaxed), 0, "{mode}: {tally:?}");
    }
}

//! A flood of thousands of concurrent connections against `examples/server` over a real Redis:
//! load alone must never switch limiting off. Store calls that queue past their deadline, a
//! breaker that opens on them, or calls past the in-flight bound would each have admitted
//! everything for a while; the limit must hold to at most twice its size (the store's count
//! plus, at worst, this instance's in-memory share) and nothing may answer 5xx.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
/// Answers a flood must reach, however long a busy machine takes (at most [`GIVE_UP_AFTER`]):
/// ten times the limit, so a limiter switched off by load admits far past twice it.
const ENOUGH: u64 = 10 * LIMIT;
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// Responses by class, and connections that could not be made or broke.
#[derive(Default, Debug)]
struct Tally {
    ok: AtomicU64,
    limited: AtomicU64,
    server_errors: AtomicU64,
    other: AtomicU64,
    broken: AtomicU64,
}

impl Tally {
    fn answered(&self) -> u64 {
        self.ok.load(Ordering::Relaxed) + self.limited.load(Ordering::Relaxed)
    }
}

/// One client connection: requests back to back until `until` and the flood has [`ENOUGH`]
/// answers (or [`GIVE_UP_AFTER`] passed).
async fn client(addr: String, until: Instant, give_up: Instant, tally: Arc<Tally>) {
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
    loop {
        let now = Instant::now();
        if now >= give_up || (now >= until && tally.answered() >= ENOUGH) {
            break;
        }
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

/// Floods a server with [`CONNECTIONS`] connections for [`FLOOD_FOR`], longer if the machine
/// is too busy to answer [`ENOUGH`] requests by then.
async fn flood(addr: &str) -> Tally {
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let (until, give_up) = (started + FLOOD_FOR, started + GIVE_UP_AFTER);
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let tally = Arc::clone(&tally);
            tokio::spawn(client(addr.to_owned(), until, give_up, tally))
        })
        .collect();
    for c in clients {
        c.await.expect("a client task");
    }
    eprintln!("flooded for {:?}", started.elapsed());
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
        assert!(
            tally.answered() >= ENOUGH,
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

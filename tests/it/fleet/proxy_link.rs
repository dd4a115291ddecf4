//! The delaying proxy the distance tests and benches stand on (`support/proxy.rs`): each
//! direction waits its own time, never less, and bytes come out in the order they went in,
//! with jitter too. A TCP echo server is the far end.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::proxy::{Link, Proxy};

/// Messages sent, each its own write a little after the last, so the proxy reads them as
/// separate chunks (a chunk boundary is the kernel's to choose: the checks hold either way).
const MESSAGES: u64 = 40;
/// A bound for "does not hang", not a timing assertion.
const HANG: Duration = Duration::from_secs(30);

/// An echo server on a free loopback port: every connection gets back what it sends.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut from, mut to) = stream.split();
                let _ = tokio::io::copy(&mut from, &mut to).await;
            });
        }
    });
    port
}

/// Sends numbered messages through a proxy with `up` and `down` links to an echo server;
/// each must come back whole, in order, no sooner than `up.delay + down.delay` after it
/// was sent.
async fn round_trips(up: Link, down: Link) {
    let proxy = Proxy::start_with(echo_server().await, up, down).await;
    let stream = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect through the proxy");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    let (mut from, mut to) = stream.into_split();
    let writer = tokio::spawn(async move {
        let mut sent = Vec::new();
        for i in 0..MESSAGES {
            sent.push(Instant::now());
            to.write_all(&i.to_be_bytes()).await.expect("send");
            tokio::time::sleep(Duration::from_micros(300)).await;
        }
        (sent, to)
    });
    let mut arrived = Vec::new();
    let read = async {
        for i in 0..MESSAGES {
            let mut message = [0_u8; 8];
            from.read_exact(&mut message).await.expect("an echo");
            arrived.push(Instant::now());
            assert_eq!(u64::from_be_bytes(message), i, "echoes out of order");
        }
    };
    tokio::time::timeout(HANG, read)
        .await
        .expect("the echoes came back");
    let (sent, _to) = writer.await.expect("the writer");
    let least = up.delay + down.delay;
    for (i, (sent, arrived)) in sent.iter().zip(&arrived).enumerate() {
        let took = arrived.duration_since(*sent);
        assert!(
            took >= least,
            "message {i} came back after {took:?}, under the link's {least:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_direction_waits_its_own_time_and_keeps_order() {
    round_trips(
        Link::delay(Duration::from_millis(30)),
        Link::delay(Duration::from_millis(5)),
    )
    .await;
    round_trips(
        Link::delay(Duration::ZERO),
        Link::delay(Duration::from_millis(25)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_never_reorders_bytes_nor_delivers_early() {
    let jittery = Link::delay(Duration::from_millis(4)).jitter(Duration::from_millis(15));
    round_trips(jittery, jittery).await;
}

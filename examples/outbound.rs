//! The client side: W workers in one process call a local dummy upstream over HTTP through
//! `AcquireLayer`, all under one policy shared, through Redis, with every other process run
//! with the same `--redis` and `--rate`. Requests over the quota wait their turn; none is
//! refused.
//!
//! ```text
//! cargo run --example outbound -- --rate 100/1s --workers 20 --secs 10          # memory store
//! for i in 1 2 3; do                                                             # three processes,
//!   cargo run --example outbound -- --redis redis://127.0.0.1:6379 \
//!     --rate 100/1s --workers 20 --secs 10 &                                     # one quota
//! done; wait
//! ```
//!
//! Prints `t=<unix seconds> admitted=<n>` each second (requests the upstream received in
//! that second), then `total=<admitted> redis_calls=<store calls>`. The policy is GCRA:
//! a burst of N, then N per DURATION, across every process on the same Redis.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::{Router, routing::get};
use clap::Parser;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use redlimit::limiter::{AcquireLayer, Limiter, per_host};
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Algorithm, Limit, Policy};
use tower::{Service, ServiceBuilder, ServiceExt};

#[derive(Parser)]
#[command(about = "Workers calling a dummy upstream under one shared rate, waiting their turn")]
struct Args {
    /// Redis to share the quota through (the memory store without it).
    #[arg(long)]
    redis: Option<String>,
    /// The policy: N per DURATION (GCRA: a burst of N, then N per DURATION).
    #[arg(long, default_value = "100/1s")]
    rate: String,
    /// Workers calling the upstream, each one request at a time.
    #[arg(long, default_value_t = 20)]
    workers: usize,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    secs: u64,
}

#[tokio::main]
async fn main() -> Result<(), redlimit::BoxError> {
    let args = Args::parse();
    let policy = Policy::new("outbound", [Limit::parse(Algorithm::Gcra, &args.rate)?])?;
    let limiter = match &args.redis {
        Some(url) => Limiter::builder(RedisStore::connect(url).await?, policy),
        None => Limiter::builder(MemoryStore::new(), policy),
    }
    .max_wait(Duration::from_secs(args.secs + 60))
    .build();

    // The dummy upstream: counts what it receives.
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    let upstream = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { "ok" }
        }),
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, upstream).await });

    // The client: hyper's, behind the layer; one quota per upstream host.
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let client = ServiceBuilder::new()
        .layer(AcquireLayer::new(
            limiter.clone(),
            per_host::<http::Request<Empty<bytes::Bytes>>>,
        ))
        .service(client);

    let end = Instant::now() + Duration::from_secs(args.secs);
    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            let (mut client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let request = http::Request::get(&url).body(Empty::new())?;
                    client.ready().await?.call(request).await?;
                }
                Ok::<_, redlimit::BoxError>(())
            })
        })
        .collect();

    // One line per second of Unix time: what the upstream received in it.
    let mut seen = 0;
    let mut second = unix_seconds();
    while Instant::now() < end {
        let next = UNIX_EPOCH + Duration::from_secs(second + 1);
        let pause = next.duration_since(SystemTime::now()).unwrap_or_default();
        tokio::time::sleep(pause).await;
        let now = received.load(Ordering::Relaxed);
        println!("t={second} admitted={}", now - seen);
        (seen, second) = (now, second + 1);
    }
    for worker in workers {
        worker.await??;
    }
    println!(
        "total={} redis_calls={}",
        received.load(Ordering::Relaxed),
        if args.redis.is_some() {
            limiter.store_calls()
        } else {
            0
        }
    );
    Ok(())
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

//! The client side over gRPC: W workers in one process call a local gRPC service (the
//! standard health service from `tonic-health`: no protoc) through `AcquireLayer` on a tonic
//! `Channel`, keyed per gRPC method, under one policy shared, through Redis, with every
//! other process run with the same `--redis` and `--rate`. Calls over the quota wait their
//! turn; none is refused.
//!
//! ```text
//! cargo run --example outbound_grpc -- --rate 100/1s --workers 20 --secs 10     # memory store
//! for i in 1 2 3; do                                                             # three processes,
//!   cargo run --example outbound_grpc -- --redis redis://127.0.0.1:6379 \
//!     --rate 100/1s --workers 20 --secs 10 &                                     # one quota
//! done; wait
//! ```
//!
//! Prints `t=<unix seconds> admitted=<n>` each second (calls the service received in that
//! second), then `total=<admitted> redis_calls=<store calls>`, as `examples/outbound.rs`
//! does. The policy is GCRA: a burst of N, then N per DURATION, across every process on the
//! same Redis.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use redlimit::limiter::{AcquireLayer, Limiter};
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Algorithm, Key, Limit, Policy};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::ServiceBuilder;
use tower::util::MapRequestLayer;

#[derive(Parser)]
#[command(about = "Workers calling a gRPC service under one shared rate, waiting their turn")]
struct Args {
    /// Redis to share the quota through (the memory store without it).
    #[arg(long)]
    redis: Option<String>,
    /// The policy: N per DURATION (GCRA: a burst of N, then N per DURATION).
    #[arg(long, default_value = "100/1s")]
    rate: String,
    /// Workers calling the service, each one call at a time.
    #[arg(long, default_value_t = 20)]
    workers: usize,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    secs: u64,
}

/// One quota per gRPC method (`/grpc.health.v1.Health/Check`): the request's path.
fn per_method(request: &http::Request<tonic::body::Body>) -> Key {
    Key::new(format!("method:{}", request.uri().path()))
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

    // The service: tonic-health's, counting the calls it receives.
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    let count = MapRequestLayer::new(move |request: http::Request<tonic::body::Body>| {
        counter.fetch_add(1, Ordering::Relaxed);
        request
    });
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(
        Server::builder()
            .layer(count)
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );

    // The client: a tonic Channel behind the layer, under the generated client.
    let channel = Channel::from_shared(url)?.connect().await?;
    let channel = ServiceBuilder::new()
        .layer(AcquireLayer::new(limiter.clone(), per_method))
        .service(channel);
    let client = HealthClient::new(channel);

    let end = Instant::now() + Duration::from_secs(args.secs);
    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move {
                while Instant::now() < end {
                    let request = HealthCheckRequest {
                        service: String::new(),
                    };
                    client.check(request).await?;
                }
                Ok::<_, tonic::Status>(())
            })
        })
        .collect();

    // One line per second of Unix time: what the service received in it.
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
    drop(reporter);
    Ok(())
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

//! gRPC through the layer, with a real tonic server and client over a real socket: allowed
//! calls succeed; the call past the limit fails with RESOURCE_EXHAUSTED and decodable
//! ErrorInfo (AIP-193), RetryInfo and QuotaFailure details matching the decision; streaming calls are limited at call start; fail-open when
//! Redis is down; HTTP requests through the same layer still get 429.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use redlimit::key::Route;
use redlimit::layer::{GrpcStatus, OnStoreError, RateLimitBuilder, Rule};
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use support::*;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

/// Serves the standard health service behind `layer` on a free port.
async fn serve(layer: RateLimitLayer) -> SocketAddr {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        // The reporter must outlive the server, or the health service reports nothing.
        let _reporter = reporter;
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
    });
    addr
}

async fn client(addr: SocketAddr) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
}

fn check() -> Request<HealthCheckRequest> {
    let mut req = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    req.metadata_mut()
        .insert("x-api-key", "key-1".parse().unwrap());
    req
}

async fn redis_layer(server: &RedisServer, limit: Limit) -> RateLimitBuilder {
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("grpc"))
        .connect()
        .await
        .unwrap();
    RateLimitLayer::builder(store, Policy::new("grpc", [limit]).unwrap()).key(api_key())
}

#[tokio::test]
async fn resource_exhausted_with_retry_info_past_the_limit() {
    let redis = RedisServer::start();
    let addr = serve(
        redis_layer(&redis, Limit::gcra(2, Duration::from_secs(10)).unwrap())
            .await
            .build()
            .expect("valid layer"),
    )
    .await;
    let mut health = client(addr).await;
    let started = std::time::Instant::now();
    for left in ["1", "0"] {
        let res = health.check(check()).await.expect("allowed");
        assert_eq!(res.metadata().get("x-ratelimit-remaining").unwrap(), left);
    }
    let status = health.check(check()).await.expect_err("denied");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status
            .message()
            .starts_with("rate limit exceeded; retry in"),
        "{}",
        status.message()
    );
    let retry = status.get_details_retry_info().expect("RetryInfo");
    let delay = retry.retry_delay.expect("a delay");
    // GCRA 2 per 10 s: the next unit 5 s after the first was admitted, less the time the
    // calls took since (measured, not assumed: a busy machine may take a second; 10 ms for
    // Redis's clock against this process's).
    let took = started.elapsed();
    assert!(
        delay <= Duration::from_secs(5)
            && delay + took + Duration::from_millis(10) >= Duration::from_secs(5),
        "{delay:?} after {took:?}"
    );
    let quota = status.get_details_quota_failure().expect("QuotaFailure");
    assert_eq!(quota.violations[0].subject, "policy:grpc");
    assert_eq!(quota.violations[0].description, "gcra 2/10s exceeded");
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "RATE_LIMIT_EXCEEDED");
    assert_eq!(info.domain, "redlimit");
    assert_eq!(info.metadata["policy"], "grpc");
    assert_eq!(info.metadata["violatedPolicies"], "grpc");
    assert!(
        status
            .message()
            .contains(&format!("retry in {}s", info.metadata["retryDelaySeconds"])),
        "the message's delay is in the metadata: {} {:?}",
        status.message(),
        info.metadata
    );
    assert_eq!(status.metadata().get("x-ratelimit-limit").unwrap(), "2");
    assert_eq!(status.metadata().get("retry-after").unwrap(), "5");
    // Another key has its own quota.
    let mut other = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    other
        .metadata_mut()
        .insert("x-api-key", "key-2".parse().unwrap());
    assert!(health.check(other).await.is_ok());
}

#[tokio::test]
async fn error_info_has_the_configured_domain_and_every_violated_quota() {
    let redis = RedisServer::start();
    let store = redis_store(&redis, "grpc-info").await;
    let policy = Policy::new(
        "health",
        [
            Limit::gcra(1, Duration::from_secs(60)).unwrap(),
            Limit::gcra(1, Duration::from_secs(3600)).unwrap(),
            Limit::fixed_window(100, Duration::from_secs(3600)).unwrap(),
        ],
    )
    .unwrap();
    let layer = RateLimitLayer::builder(store, policy)
        .key(api_key())
        .grpc_error_domain("health.example.com")
        .build()
        .expect("valid layer");
    let mut health = client(serve(layer).await).await;
    health.check(check()).await.expect("allowed");
    let status = health.check(check()).await.expect_err("denied");
    assert_eq!(status.code(), Code::ResourceExhausted);
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "RATE_LIMIT_EXCEEDED");
    assert_eq!(info.domain, "health.example.com");
    assert_eq!(info.metadata["policy"], "health");
    // As RateLimit-Policy names them: the per-minute and the per-hour limit of one ran out.
    assert_eq!(info.metadata["violatedPolicies"], "health-1,health-2");
    let quota = status.get_details_quota_failure().expect("QuotaFailure");
    assert_eq!(quota.violations.len(), 2);
    // The longer wait of the two: a unit of the hourly limit comes back in an hour.
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert!(retry.retry_delay.unwrap() > Duration::from_secs(3500));
}

#[tokio::test]
async fn streaming_calls_are_limited_at_call_start() {
    let addr = serve(
        RateLimitLayer::builder(
            redlimit::store::MemoryStore::new(),
            Policy::new(
                "watch",
                [Limit::fixed_window(1, Duration::from_secs(3600)).unwrap()],
            )
            .unwrap(),
        )
        .key(Route)
        .build()
        .expect("valid layer"),
    )
    .await;
    let mut health = client(addr).await;
    let mut stream = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("first watch allowed")
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.status, ServingStatus::Serving as i32);
    let status = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect_err("second watch denied at call start");
    assert_eq!(status.code(), Code::ResourceExhausted);
    // The method is the route key: Check has its own quota.
    assert!(
        health
            .check(HealthCheckRequest {
                service: String::new()
            })
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn configurable_status_and_fail_closed_unavailable() {
    let addr = serve(
        RateLimitLayer::builder(
            redlimit::store::MemoryStore::new(),
            Policy::new("u", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
        )
        .key(api_key())
        .grpc_status(GrpcStatus::Unavailable)
        .build()
        .expect("valid layer"),
    )
    .await;
    let mut health = client(addr).await;
    health.check(check()).await.unwrap();
    assert_eq!(
        health.check(check()).await.unwrap_err().code(),
        Code::Unavailable
    );

    let dead = RedisStore::builder("redis://127.0.0.1:1")
        .connect_lazy()
        .unwrap();
    let closed = serve(
        RateLimitLayer::builder(
            dead,
            Policy::new("c", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
        )
        .on_store_error(OnStoreError::Closed)
        .build()
        .expect("valid layer"),
    )
    .await;
    let status = client(closed).await.check(check()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "rate limiter unavailable");
}

#[tokio::test]
async fn fails_open_when_redis_is_down() {
    let mut redis = RedisServer::start();
    let addr = serve(
        redis_layer(&redis, Limit::gcra(1, Duration::from_secs(60)).unwrap())
            .await
            .store_deadline(Duration::from_millis(100))
            .on_store_error(redlimit::layer::OnStoreError::Open)
            // Every call has the same key: a cached denial would outlive Redis (rightly).
            .deny_cache(0)
            .build()
            .expect("valid layer"),
    )
    .await;
    let mut health = client(addr).await;
    health.check(check()).await.unwrap();
    assert_eq!(
        health.check(check()).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
    redis.kill();
    for _ in 0..5 {
        let started = std::time::Instant::now();
        health.check(check()).await.expect("fail open");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

#[tokio::test]
async fn per_service_and_per_method_policies() {
    let layer = RateLimitLayer::builder_per_route(redlimit::store::MemoryStore::new())
        .rule(
            Rule::new(
                "/grpc.health.v1.Health/Check",
                Policy::new("check", [Limit::gcra(2, Duration::from_secs(60)).unwrap()]).unwrap(),
            )
            .unwrap()
            .key(api_key()),
        )
        .rule(
            Rule::new(
                "/grpc.health.v1.Health/*",
                Policy::new("health", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
            )
            .unwrap()
            .key(redlimit::key::PeerIp),
        )
        .build()
        .expect("valid layer");
    let mut health = client(serve(layer).await).await;
    health.check(check()).await.unwrap();
    health.check(check()).await.unwrap();
    assert_eq!(
        health.check(check()).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
    // Watch falls under the service-wide rule, keyed by tonic's peer address.
    let watch = || HealthCheckRequest {
        service: String::new(),
    };
    assert!(health.watch(watch()).await.is_ok());
    assert_eq!(
        health.watch(watch()).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
}

#[tokio::test]
async fn axum_and_tonic_in_one_binary_share_one_layer() {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let layer = RateLimitLayer::builder(
        redlimit::store::MemoryStore::new(),
        Policy::new("both", [Limit::gcra(2, Duration::from_secs(60)).unwrap()]).unwrap(),
    )
    .key(redlimit::key::Global)
    .build()
    .expect("valid layer");
    let app = axum::Router::new()
        .route("/http", axum::routing::get(|| async { "ok" }))
        .merge(tonic::service::Routes::new(health).into_axum_router())
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _reporter = reporter;
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let mut health = client(addr).await;
    health.check(check()).await.expect("first call: gRPC");
    let http = |path: &str| {
        let path = path.to_owned();
        async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            stream.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            stream.read_to_string(&mut out).await.unwrap();
            out
        }
    };
    assert!(
        http("/http").await.starts_with("HTTP/1.1 200"),
        "second call: HTTP"
    );
    assert!(
        http("/http").await.starts_with("HTTP/1.1 429"),
        "HTTP past the shared limit"
    );
    let status = health.check(check()).await.unwrap_err();
    assert_eq!(
        status.code(),
        Code::ResourceExhausted,
        "gRPC past the shared limit"
    );
}

#[tokio::test]
async fn http_requests_through_the_same_layer_get_429() {
    let layer = RateLimitLayer::builder(
        redlimit::store::MemoryStore::new(),
        Policy::new("mixed", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap(),
    )
    .key(redlimit::key::Global)
    .build()
    .expect("valid layer");
    let app = app(layer);
    assert_eq!(status_of(&app, "10.0.0.1").await, http::StatusCode::OK);
    assert_eq!(
        status_of(&app, "10.0.0.1").await,
        http::StatusCode::TOO_MANY_REQUESTS
    );
}

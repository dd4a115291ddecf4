//! gRPC-Web through the layer, over HTTP/1.1 to a real tonic server with tonic-web: a real
//! gRPC-Web client (tonic's, through `tonic_web::GrpcWebClientLayer`) sees RESOURCE_EXHAUSTED
//! with its details, whether the layer is outside tonic-web (it answers in gRPC-Web itself)
//! or inside it; raw gRPC-Web and gRPC-Web-text requests get a trailers-only answer in their
//! own content type, never a bare 429.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use http::header::CONTENT_TYPE;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use redlimit::RateLimitLayer;
use support::*;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;
use tonic_web::{GrpcWebCall, GrpcWebClientLayer, GrpcWebClientService, GrpcWebLayer};
use tower::Layer;

/// Where the rate limit sits: outside tonic-web (it sees gRPC-Web calls) or inside it (it
/// sees the gRPC calls tonic-web made of them).
#[derive(Debug, Clone, Copy)]
enum Order {
    LimitOutside,
    LimitInside,
}

/// The health service with tonic-web and `layer`, HTTP/1.1 allowed, on a free port.
async fn serve(layer: RateLimitLayer, order: Order) -> SocketAddr {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = TcpIncoming::from(listener);
    tokio::spawn(async move {
        // The reporter must outlive the server, or the health service reports nothing.
        let _reporter = reporter;
        // The first layer given is the outermost.
        match order {
            Order::LimitOutside => {
                Server::builder()
                    .accept_http1(true)
                    .layer(layer)
                    .layer(GrpcWebLayer::new())
                    .add_service(health)
                    .serve_with_incoming(incoming)
                    .await
            }
            Order::LimitInside => {
                Server::builder()
                    .accept_http1(true)
                    .layer(GrpcWebLayer::new())
                    .layer(layer)
                    .add_service(health)
                    .serve_with_incoming(incoming)
                    .await
            }
        }
    });
    addr
}

type WebClient = GrpcWebClientService<Client<HttpConnector, GrpcWebCall<tonic::body::Body>>>;

/// tonic's health client speaking gRPC-Web over HTTP/1.1.
fn web_client(addr: SocketAddr) -> HealthClient<WebClient> {
    let http = Client::builder(TokioExecutor::new()).build_http();
    let origin = format!("http://{addr}").parse().unwrap();
    HealthClient::with_origin(GrpcWebClientLayer::new().layer(http), origin)
}

fn check() -> Request<HealthCheckRequest> {
    let mut req = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    req.metadata_mut()
        .insert("x-api-key", "web-1".parse().unwrap());
    req
}

async fn layer(redis: &RedisServer, n: u64) -> RateLimitLayer {
    let policy = gcra_policy("web", n, Duration::from_secs(60));
    RateLimitLayer::builder(redis_store(redis, "grpc-web").await, policy)
        .key(api_key())
        .build()
        .expect("valid layer")
}

#[tokio::test]
async fn a_grpc_web_client_sees_resource_exhausted_with_details() {
    let redis = RedisServer::start();
    for order in [Order::LimitOutside, Order::LimitInside] {
        let mut health = web_client(serve(layer(&redis, 2).await, order).await);
        for left in ["1", "0"] {
            let res = health.check(check()).await.expect("allowed");
            assert_eq!(res.get_ref().status, ServingStatus::Serving as i32);
            assert_eq!(res.metadata().get("x-ratelimit-remaining").unwrap(), left);
        }
        let status = health.check(check()).await.expect_err("denied");
        assert_eq!(
            status.code(),
            Code::ResourceExhausted,
            "{order:?}: {status:?}"
        );
        assert!(
            status
                .message()
                .starts_with("rate limit exceeded; retry in")
        );
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "RATE_LIMIT_EXCEEDED");
        assert_eq!(info.metadata["violatedPolicies"], "web");
        let delay = status
            .get_details_retry_info()
            .unwrap()
            .retry_delay
            .unwrap();
        assert!(delay > Duration::from_secs(25) && delay <= Duration::from_secs(30));
        let header: f64 = status
            .metadata()
            .get("retry-after")
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(header, delay.as_secs_f64().ceil(), "{delay:?}");
    }
}

/// A raw unary gRPC-Web request for `Health/Check` of the empty service name: one
/// uncompressed frame of a zero-length message, base64 for the text framing.
async fn raw_call(addr: SocketAddr, content_type: &str) -> http::Response<bytes::Bytes> {
    let frame: &[u8] = &[0, 0, 0, 0, 0];
    let text = content_type.starts_with("application/grpc-web-text");
    let body = if text {
        bytes::Bytes::from_static(b"AAAAAAA=")
    } else {
        bytes::Bytes::from_static(frame)
    };
    // As grpc-web's JavaScript client sends them (tonic-web answers in the encoding accepted).
    let accept = if text {
        "application/grpc-web-text"
    } else {
        "application/grpc-web"
    };
    let client: Client<HttpConnector, http_body_util::Full<bytes::Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let request = http::Request::post(format!("http://{addr}/grpc.health.v1.Health/Check"))
        .header(CONTENT_TYPE, content_type)
        .header("accept", accept)
        .header("x-grpc-web", "1")
        .header("x-api-key", content_type)
        .body(http_body_util::Full::new(body))
        .unwrap();
    let response = client.request(request).await.expect("an HTTP answer");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    http::Response::from_parts(parts, body)
}

#[tokio::test]
async fn raw_grpc_web_and_text_calls_get_trailers_only_answers_in_their_framing() {
    let redis = RedisServer::start();
    let addr = serve(layer(&redis, 1).await, Order::LimitOutside).await;
    for (sent, answered) in [
        ("application/grpc-web", "application/grpc-web+proto"),
        ("application/grpc-web+proto", "application/grpc-web+proto"),
        (
            "application/grpc-web-text",
            "application/grpc-web-text+proto",
        ),
        (
            "application/grpc-web-text+proto",
            "application/grpc-web-text+proto",
        ),
    ] {
        // tonic-web answers the first call: a message frame and a trailer frame.
        let ok = raw_call(addr, sent).await;
        assert_eq!(ok.status(), http::StatusCode::OK, "{sent}");
        assert_eq!(ok.headers()[CONTENT_TYPE], answered, "{sent}");
        assert!(!ok.body().is_empty(), "{sent}");
        assert!(!ok.headers().contains_key("grpc-status"), "in the body");

        let denied = raw_call(addr, sent).await;
        assert_eq!(
            denied.status(),
            http::StatusCode::OK,
            "{sent}: never a bare 429"
        );
        assert_eq!(denied.headers()[CONTENT_TYPE], answered, "{sent}");
        assert_eq!(denied.headers()["grpc-status"], "8", "{sent}");
        assert!(denied.headers().contains_key("grpc-message"));
        assert!(denied.headers().contains_key("grpc-status-details-bin"));
        assert_eq!(denied.headers()["x-ratelimit-remaining"], "0");
        assert!(denied.body().is_empty(), "{sent}: trailers-only");
    }
}

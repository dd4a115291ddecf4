//! The layer among others: tower-http's `TimeoutLayer` and tower's own layers stack around it
//! in one `ServiceBuilder` over an axum router; outer layers see the decision on the layer's
//! own answers; handlers take the decision as an extractor.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{HeaderValue, Response, StatusCode};
use redlimit::key::Global;
use redlimit::layer::{RateLimitBuilder, ResponseBody};
use redlimit::store::MemoryStore;
use redlimit::{Decision, DecisionSource, Limit, Policy, RateLimitLayer};
use support::*;
use tower::{ServiceBuilder, ServiceExt};
use tower_http::timeout::TimeoutLayer;

fn layer(n: u64) -> RateLimitLayer {
    layer_builder(n).build().expect("valid layer")
}

fn layer_builder(n: u64) -> RateLimitBuilder {
    let policy = Policy::new("api", [Limit::gcra(n, Duration::from_secs(60)).unwrap()]).unwrap();
    RateLimitLayer::builder(MemoryStore::new(), policy)
}

/// An outer layer that reports which policy denied, from the decision in the response.
fn denied_by_header<B>(mut response: Response<B>) -> Response<B> {
    let policy = response
        .extensions()
        .get::<Decision>()
        .filter(|d| !d.is_allowed())
        .map(|d| d.policy().to_owned());
    if let Some(policy) = policy {
        let value = HeaderValue::from_str(&policy).unwrap();
        response.headers_mut().insert("x-denied-by", value);
    }
    response
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    addr
}

/// One HTTP/1.1 GET over a fresh connection; the status line and headers.
async fn get_head(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out.to_ascii_lowercase()
}

#[tokio::test]
async fn timeout_and_tower_layers_stack_around_it_and_serve() {
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .layer(
            ServiceBuilder::new()
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::REQUEST_TIMEOUT,
                    Duration::from_millis(200),
                ))
                .map_response(denied_by_header)
                .layer(layer_builder(2).key(Global).build().expect("valid layer")),
        );
    let addr = serve(app).await;
    let ok = get_head(addr, "/").await;
    assert!(ok.starts_with("http/1.1 200"), "{ok}");
    assert!(ok.contains("x-ratelimit-remaining: 1"), "{ok}");
    // The timeout is outside: the slow handler's request counted, then timed out.
    let slow = get_head(addr, "/slow").await;
    assert!(slow.starts_with("http/1.1 408"), "{slow}");
    let denied = get_head(addr, "/").await;
    assert!(denied.starts_with("http/1.1 429"), "{denied}");
    assert!(denied.contains("x-denied-by: api"), "{denied}");
    assert!(!ok.contains("x-denied-by"), "{ok}");
}

#[tokio::test]
async fn timeout_inside_the_rate_limit_layer() {
    let svc = ServiceBuilder::new()
        .layer(layer(1))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(50),
        ))
        .service(Router::new().route(
            "/",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        ));
    let res: Response<ResponseBody<Body>> = svc
        .clone()
        .oneshot(request("/", "10.0.0.1", &[]))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(header(&res, "x-ratelimit-remaining"), "0");
    let res = svc.oneshot(request("/", "10.0.0.1", &[])).await.unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_429_carries_the_decision_for_outer_layers() {
    let app = app(layer(1));
    send(&app, request("/", "10.0.0.1", &[])).await;
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let decision = res.extensions().get::<Decision>().expect("the decision");
    assert!(!decision.is_allowed());
    assert_eq!(decision.policy(), "api");
    assert_eq!(decision.denied_by(), Some(0));
    assert_eq!(decision.source(), DecisionSource::Store);
}

#[tokio::test]
async fn a_custom_rejection_carries_the_decision_too() {
    let app = app(layer_builder(1)
        .on_rejection(|_: &Decision| {
            let mut res = Response::new(bytes::Bytes::from_static(b"slow down"));
            *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            res
        })
        .build()
        .expect("valid layer"));
    send(&app, request("/", "10.0.0.1", &[])).await;
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(
        res.extensions().get::<Decision>().map(Decision::policy),
        Some("api")
    );
    assert_eq!(body_text(res).await, "slow down");
}

#[tokio::test]
async fn a_grpc_rejection_carries_the_decision() {
    let app = app(layer(1));
    let grpc = || request("/", "10.0.0.1", &[("content-type", "application/grpc")]);
    send(&app, grpc()).await;
    let res = send(&app, grpc()).await;
    assert_eq!(res.status(), StatusCode::OK, "a gRPC status in HTTP 200");
    assert_eq!(header(&res, "grpc-status"), "8");
    let decision = res.extensions().get::<Decision>().expect("the decision");
    assert!(!decision.is_allowed());
}

#[tokio::test]
async fn allowed_responses_are_the_inner_services() {
    let app = app(layer(5));
    let res = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.extensions().get::<Decision>().is_none(),
        "the handler's response, untouched but for the headers"
    );
}

#[tokio::test]
async fn handlers_take_the_decision_as_an_argument() {
    let routes = || {
        Router::new()
            .route(
                "/required",
                get(|d: Decision| async move { format!("{} {:?}", d.policy(), d.remaining()) }),
            )
            .route(
                "/optional",
                get(|d: Option<Decision>| async move {
                    d.map_or("none".to_owned(), |d| d.policy().to_owned())
                }),
            )
    };
    let limited = routes().layer(layer(5));
    let res = send(&limited, request("/required", "10.0.0.1", &[])).await;
    assert_eq!(body_text(res).await, "api Some(4)");
    let res = send(&limited, request("/optional", "10.0.0.1", &[])).await;
    assert_eq!(body_text(res).await, "api");

    // Without the layer: `Option<Decision>` is `None`; `Decision` fails the handler with 500.
    let bare = routes();
    let res = send(&bare, request("/optional", "10.0.0.1", &[])).await;
    assert_eq!(body_text(res).await, "none");
    let res = send(&bare, request("/required", "10.0.0.1", &[])).await;
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body_text(res)
            .await
            .contains("RateLimitLayer is not installed")
    );
}

#[tokio::test]
async fn an_empty_default_body_for_outer_layers() {
    use http_body::Body as _;
    let body = ResponseBody::<Body>::default();
    assert!(body.is_end_stream());
    assert_eq!(format!("{body:?}"), "ResponseBody(b\"\")");
}

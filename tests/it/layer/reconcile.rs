//! Estimate, then reconcile, through HTTP: a request is admitted at the `max_tokens` its JSON
//! body asks for (`EstimateFromBodyLayer`), and settled to the tokens its response reports,
//! from a header or from the end of a server-sent event stream: a refund below the
//! estimate, a charge (into debt) above it, the estimate kept when nothing is reported or
//! the client goes away mid-stream; two store calls per request; on the memory store and on
//! Redis; a settle that fails (Redis gone) counted and the response unharmed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusBuilder;
use redlimit::layer::{Estimate, EstimateFromBodyLayer, Handle, SseUsage};
use redlimit::store::{Check, MemoryStore, RedisStore, Refund, Refunds, Store, StoreFuture};
use redlimit::telemetry::SETTLE_FAILURES;
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::support::{RedisServer, body_text, eventually, header, send, unique_prefix};

/// 10 000 tokens a month: no token comes back while a test runs.
fn tokens() -> Policy {
    let month = Duration::from_secs(30 * 24 * 3600);
    Policy::new("tokens", [Limit::gcra(10_000, month).unwrap()]).unwrap()
}

fn key() -> Key {
    Key::new("key:k")
}

/// The fake upstream: answers what the request's `used` field says it used, in an
/// `x-tokens-used` header (none without the field).
async fn upstream(body: String) -> Response<Body> {
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut response = Response::builder();
    if let Some(used) = json["used"].as_u64() {
        response = response.header("x-tokens-used", used);
    }
    response.body(Body::from("done")).unwrap()
}

/// The app: the estimate from the body's `max_tokens`, the settle from the head.
fn app(store: impl Store) -> (Router, Handle) {
    let layer = RateLimitLayer::builder(store, tokens())
        .key(|p: &http::request::Parts| {
            let api_key = p.headers.get("x-api-key")?.to_str().ok()?;
            Some(Key::new(format!("key:{api_key}")))
        })
        .cost(|p: &http::request::Parts| Estimate::of(p).unwrap_or(1_000))
        .settle_with(|r: &http::response::Parts| {
            r.headers.get("x-tokens-used")?.to_str().ok()?.parse().ok()
        })
        .build()
        .unwrap();
    let handle = layer.handle();
    let estimate = EstimateFromBodyLayer::new(1024, |_: &http::request::Parts, body: &[u8]| {
        let json: serde_json::Value = serde_json::from_slice(body).ok()?;
        json["max_tokens"].as_u64()
    });
    let router = Router::new()
        .route("/v1/chat", post(upstream))
        .layer(layer)
        .layer(estimate);
    (router, handle)
}

fn chat(body: &str) -> Request<Body> {
    Request::post("/v1/chat")
        .header("x-api-key", "k")
        .body(Body::from(body.to_owned()))
        .unwrap()
}

async fn remaining(handle: &Handle) -> u64 {
    handle.inspect(&tokens(), &key()).await.unwrap().limits()[0].remaining()
}

/// Waits until the key has `left` tokens (a Redis settle lands on a task of its own).
async fn settled(handle: &Handle, left: u64) {
    let mut last = 0;
    let reached = eventually(Duration::from_secs(10), async || {
        last = remaining(handle).await;
        last == left
    })
    .await;
    assert!(reached, "expected {left} tokens left, found {last}");
}

/// The story every store must tell the same.
async fn estimate_then_reconcile(store: impl Store) {
    let (app, handle) = app(store);
    // 500 asked for, 120 used: the headers count the estimate, the store the real cost.
    let response = send(&app, chat(r#"{"max_tokens": 500, "used": 120}"#)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "x-ratelimit-remaining"), "9500");
    settled(&handle, 9_880).await;
    // 500 asked for, 1 400 used: 900 more charged.
    let response = send(&app, chat(r#"{"max_tokens": 500, "used": 1400}"#)).await;
    assert_eq!(header(&response, "x-ratelimit-remaining"), "9380");
    settled(&handle, 8_480).await;
    // Nothing reported: the estimate stands.
    send(&app, chat(r#"{"max_tokens": 300}"#)).await;
    settled(&handle, 8_180).await;
    // No `max_tokens`: the layer's default estimate.
    send(&app, chat(r#"{"used": 1000}"#)).await;
    settled(&handle, 7_180).await;
    // A body past the size: 413, nothing consumed.
    let big = format!(r#"{{"max_tokens": 5, "pad": "{}"}}"#, "x".repeat(2000));
    let response = send(&app, chat(&big)).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(remaining(&handle).await, 7_180);
    // 7 000 asked for, 16 000 used: deep in debt, and refused until it is paid.
    send(&app, chat(r#"{"max_tokens": 7000, "used": 16000}"#)).await;
    settled(&handle, 0).await;
    let response = send(&app, chat(r#"{"max_tokens": 1}"#)).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = header(&response, "retry-after").parse().unwrap();
    assert!(retry > 24 * 3600, "the debt takes days to pay: {retry} s");
}

#[tokio::test]
async fn the_memory_store_settles_each_estimate_to_the_real_cost() {
    estimate_then_reconcile(MemoryStore::new()).await;
}

#[tokio::test]
async fn redis_settles_each_estimate_to_the_real_cost() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("reconcile"))
        .connect()
        .await
        .expect("connect");
    estimate_then_reconcile(store).await;
}

/// A memory store that counts the calls made to it.
#[derive(Clone, Default)]
struct Counting {
    inner: MemoryStore,
    calls: Arc<AtomicU64>,
}

impl Store for Counting {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.check(policy, key, cost)
    }
    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.charge(policy, key, cost)
    }
    fn refunds(&self) -> Option<&dyn Refunds> {
        Some(self)
    }
    fn admin(&self) -> Option<&dyn redlimit::store::Admin> {
        self.inner.admin()
    }
}

impl Refunds for Counting {
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> StoreFuture<bool> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.refund(policy, key, refund)
    }
}

#[tokio::test]
async fn a_request_costs_one_check_and_at_most_one_settle() {
    let store = Counting::default();
    let (app, _) = app(store.clone());
    let calls = || store.calls.load(Ordering::Relaxed);
    send(&app, chat(r#"{"max_tokens": 500, "used": 120}"#)).await;
    assert_eq!(calls(), 2, "a check and a refund");
    send(&app, chat(r#"{"max_tokens": 500, "used": 900}"#)).await;
    assert_eq!(calls(), 4, "a check and a charge");
    send(&app, chat(r#"{"max_tokens": 500, "used": 500}"#)).await;
    assert_eq!(calls(), 5, "the estimate was right: the check alone");
    send(&app, chat(r#"{"max_tokens": 500}"#)).await;
    assert_eq!(calls(), 6, "nothing reported: the check alone");
}

/// An app streaming server-sent events from `events` (one per message, then the end when
/// the sender is dropped), settled from the `tokens=N` event, estimated at 500.
fn streaming_app(store: impl Store, events: mpsc::Receiver<&'static str>) -> (Router, Handle) {
    let events = Arc::new(Mutex::new(Some(events)));
    let upstream = move || {
        let events = events.lock().unwrap().take().expect("one stream per test");
        let stream = futures_util::stream::unfold(events, |mut events| async move {
            let event = events.recv().await?;
            Some((Ok::<_, Infallible>(Bytes::from(event)), events))
        });
        async move {
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
    };
    let layer = RateLimitLayer::builder(store, tokens())
        .key(|_: &http::request::Parts| Some(key()))
        .cost(|_: &http::request::Parts| 500)
        .settle_with_body(|r: &http::response::Parts| {
            let events = r.headers.get("content-type")? == "text/event-stream";
            events.then(|| SseUsage::new(|data: &str| data.strip_prefix("tokens=")?.parse().ok()))
        })
        .build()
        .unwrap();
    let handle = layer.handle();
    (
        Router::new().route("/v1/chat", post(upstream)).layer(layer),
        handle,
    )
}

/// Serves `app` on a loopback port.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Sends a chat request on a fresh connection and reads its response until `until` shows.
async fn chat_until(addr: SocketAddr, until: &str) -> (tokio::net::TcpStream, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request =
        "POST /v1/chat HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(&seen).contains(until) {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "the stream ended before {until:?}: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    (stream, String::from_utf8_lossy(&seen).into_owned())
}

#[tokio::test]
async fn redis_settles_a_stream_when_its_usage_arrives_at_its_end() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("reconcile-sse"))
        .connect()
        .await
        .expect("connect");
    let (events, receiver) = mpsc::channel(8);
    let (app, handle) = streaming_app(store, receiver);
    let addr = serve(app).await;
    events.send("data: Hello\n\n").await.unwrap();
    let (mut stream, head) = chat_until(addr, "Hello").await;
    assert!(head.contains("x-ratelimit-remaining: 9500"), "{head}");
    // Mid-stream, only the estimate is spent.
    assert_eq!(remaining(&handle).await, 9_500);
    events.send("data: tokens=1234\n\n").await.unwrap();
    drop(events);
    let mut rest = String::new();
    stream.read_to_string(&mut rest).await.unwrap();
    assert!(rest.contains("tokens=1234"), "{rest}");
    settled(&handle, 10_000 - 1_234).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_stream_dropped_before_its_end_keeps_the_estimate() {
    let store = MemoryStore::new();
    let (events, receiver) = mpsc::channel(8);
    let (app, handle) = streaming_app(store, receiver);
    let addr = serve(app).await;
    // The usage arrives, but the client goes away before the stream's end.
    events.send("data: tokens=50\n\n").await.unwrap();
    let (stream, _) = chat_until(addr, "tokens=50").await;
    drop(stream);
    // The server drops the body (and with it the stream's receiver) once it sees the close.
    tokio::time::timeout(Duration::from_secs(10), events.closed())
        .await
        .expect("the server dropped the body");
    // The memory store settles at once: had it settled, 9 950 would be left.
    assert_eq!(remaining(&handle).await, 9_500);
}

#[tokio::test(flavor = "current_thread")]
async fn a_settle_that_fails_is_counted_and_the_response_unharmed() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let _local = metrics::set_default_local_recorder(&recorder);
    let server = Arc::new(Mutex::new(RedisServer::start()));
    let url = server.lock().unwrap().url();
    let store = RedisStore::builder(url)
        .prefix(unique_prefix("reconcile-down"))
        .connect()
        .await
        .expect("connect");
    // The upstream answers once Redis is gone: the admission landed, the settle cannot.
    let upstream = move || {
        server.lock().unwrap().kill();
        async {
            Response::builder()
                .header("x-tokens-used", "900")
                .body(Body::from("done"))
                .unwrap()
        }
    };
    let layer = RateLimitLayer::builder(store, tokens())
        .key(|_: &http::request::Parts| Some(key()))
        .cost(|_: &http::request::Parts| 500)
        .settle_with(|r: &http::response::Parts| {
            r.headers.get("x-tokens-used")?.to_str().ok()?.parse().ok()
        })
        .build()
        .unwrap();
    let app = Router::new().route("/v1/chat", post(upstream)).layer(layer);
    let response = send(&app, chat("{}")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "x-ratelimit-remaining"), "9500");
    assert_eq!(body_text(response).await, "done");
    let failures = || {
        let text = recorder.handle().render();
        text.lines()
            .filter(|l| l.starts_with(SETTLE_FAILURES) && l.contains("policy=\"tokens\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum::<u64>()
    };
    let counted = eventually(Duration::from_secs(10), async || failures() == 1).await;
    assert!(counted, "{}", recorder.handle().render());
}

#[tokio::test]
async fn a_refund_lifts_the_denial_the_layer_cached() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("reconcile-deny"))
        .connect()
        .await
        .expect("connect");
    let month = Duration::from_secs(30 * 24 * 3600);
    let policy = Policy::new("tokens", [Limit::gcra(1_000, month).unwrap()]).unwrap();
    // The first request's answer waits for the test's word, once it says it was admitted.
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let (entered, admitted_first) = tokio::sync::oneshot::channel::<()>();
    let hold = Arc::new(Mutex::new(Some((wait, entered))));
    let upstream = move |request: Request<Body>| {
        let hold = request
            .headers()
            .contains_key("x-hold")
            .then(|| hold.lock().unwrap().take().unwrap());
        async move {
            if let Some((wait, entered)) = hold {
                entered.send(()).unwrap();
                wait.await.unwrap();
            }
            Response::builder()
                .header("x-tokens-used", "100")
                .body(Body::empty())
                .unwrap()
        }
    };
    let layer = RateLimitLayer::builder(store, policy)
        .key(|_: &http::request::Parts| Some(key()))
        .cost(|_: &http::request::Parts| 600)
        .settle_with(|r: &http::response::Parts| {
            r.headers.get("x-tokens-used")?.to_str().ok()?.parse().ok()
        })
        .build()
        .unwrap();
    let app = Router::new().route("/v1/chat", post(upstream)).layer(layer);
    let held = Request::post("/v1/chat")
        .header("x-hold", "1")
        .body(Body::empty())
        .unwrap();
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, held).await }
    });
    admitted_first.await.unwrap();
    // 600 of 1 000 reserved: a second estimate of 600 is refused, and the denial cached.
    let refused = send(&app, chat("{}")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    go.send(()).unwrap();
    assert_eq!(first.await.unwrap().status(), StatusCode::OK);
    // 500 given back: the next request is admitted, not answered from the cached denial
    // (which would stand for days).
    let admitted = eventually(Duration::from_secs(10), async || {
        send(&app, chat("{}")).await.status() == StatusCode::OK
    })
    .await;
    assert!(admitted, "the refund did not lift the cached denial");
}

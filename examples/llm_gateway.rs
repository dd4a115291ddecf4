//! An LLM gateway: an axum proxy in front of a fake LLM upstream that streams completions as
//! server-sent events with a usage block at their end (as OpenAI's API does with
//! `"stream_options": {"include_usage": true}`), limited per API key by tokens a minute and
//! tokens a month. Each request is admitted at an estimate (its prompt's length / 4, plus its
//! `max_tokens`), and settled to the `usage.total_tokens` the stream reports when it ends: the
//! difference given back or charged. A client that hangs up mid-stream pays its estimate.
//!
//! ```text
//! cargo run --example llm_gateway                                   # a demo, then exits
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example llm_gateway  # the budget in Redis
//! cargo run --example llm_gateway -- --serve                        # then keeps serving
//! ```
//!
//! The demo narrates three requests (a refund, a charge, a hang-up), then runs eight
//! clients for five seconds and prints, each second, the requests admitted and refused, the
//! tokens the upstream reported, and the budget left.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use hyper_util::rt::TokioExecutor;
use redlimit::layer::{Estimate, EstimateFromBodyLayer, Handle, SseUsage};
use redlimit::store::{MemoryStore, RedisStore, Store};
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use serde_json::{Value, json};

type HttpClient = Client<HttpConnector, Body>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve = std::env::args().any(|a| a == "--serve");
    let minute = Limit::gcra(10_000, Duration::from_secs(60))?;
    let month = Limit::gcra(1_000_000, Duration::from_secs(30 * 24 * 3600))?;
    let tokens = Policy::new("llm-tokens", [minute, month])?;
    let upstream = spawn(Router::new().route("/v1/chat/completions", post(fake_llm))).await?;
    let (gateway, handle) = match std::env::var("REDIS_URL") {
        Ok(url) => {
            let store = RedisStore::connect(&url)
                .await
                .map_err(|e| format!("cannot connect to Redis at {url}: {e}"))?;
            println!("the token budget lives in Redis at {url}");
            gateway(store, tokens.clone(), upstream)
        }
        Err(_) => {
            println!("the token budget lives in memory (REDIS_URL=redis://... for Redis)");
            gateway(MemoryStore::new(), tokens.clone(), upstream)
        }
    };
    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, gateway).await });
    println!("gateway on http://{addr}, upstream on http://{upstream}\n");

    let budget = Budget {
        handle,
        tokens,
        key: Key::new("key:demo"),
    };
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    narrate(&client, addr, &budget).await?;
    load(&client, addr, &budget).await;
    if serve {
        println!("\nserving; try:");
        println!(
            "  curl -N http://{addr}/v1/chat/completions -H 'x-api-key: me' -d '{{\"max_tokens\": 300, \"messages\": [{{\"role\": \"user\", \"content\": \"Hi\"}}]}}'"
        );
        std::future::pending::<()>().await;
    }
    Ok(())
}

/// The gateway: the estimate read from the body, the limit per API key, the settle from the
/// stream's end, then the proxy.
fn gateway(store: impl Store, tokens: Policy, upstream: SocketAddr) -> (Router, Handle) {
    let limit = RateLimitLayer::builder(store, tokens)
        .key(|request: &http::request::Parts| {
            let api_key = request.headers.get("x-api-key")?.to_str().ok()?;
            Some(Key::new(format!("key:{api_key}")))
        })
        .on_missing_key(redlimit::layer::MissingKey::Reject(
            StatusCode::UNAUTHORIZED,
        ))
        .cost(|request: &http::request::Parts| Estimate::of(request).unwrap_or(4_096))
        .settle_with_body(|response: &http::response::Parts| {
            let streamed = response.headers.get("content-type")? == "text/event-stream";
            streamed.then(|| SseUsage::new(total_tokens))
        })
        .build()
        .expect("a valid layer");
    let handle = limit.handle();
    let estimate = EstimateFromBodyLayer::new(1 << 20, |_: &http::request::Parts, body: &[u8]| {
        let request: Value = serde_json::from_slice(body).ok()?;
        Some(prompt_chars(&request) / 4 + request["max_tokens"].as_u64().unwrap_or(4_096))
    });
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let app = Router::new()
        .route("/v1/chat/completions", post(proxy))
        .with_state((client, upstream))
        .layer(limit)
        .layer(estimate);
    (app, handle)
}

/// `usage.total_tokens` in an OpenAI-style chunk.
fn total_tokens(data: &str) -> Option<u64> {
    let chunk: Value = serde_json::from_str(data).ok()?;
    chunk["usage"]["total_tokens"].as_u64()
}

/// Hands the request to the upstream and streams its answer back.
async fn proxy(
    State((client, upstream)): State<(HttpClient, SocketAddr)>,
    request: Request<Body>,
) -> Response<Body> {
    let (mut parts, body) = request.into_parts();
    parts.uri = format!("http://{upstream}/v1/chat/completions")
        .parse()
        .unwrap();
    match client.request(Request::from_parts(parts, body)).await {
        Ok(response) => response.map(Body::new),
        Err(_) => (StatusCode::BAD_GATEWAY, "upstream unreachable").into_response(),
    }
}

fn prompt_chars(request: &Value) -> u64 {
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .map(|c| c.len() as u64)
        .sum()
}

/// The fake LLM: a few content chunks, 20 ms apart, then the usage and `[DONE]`. Its
/// tokenizer counts a prompt token per 3 characters (the gateway estimates 4: long prompts
/// cost more than estimated); it completes `demo_completion_tokens` if asked, else 40 to
/// 100 % of `max_tokens`.
async fn fake_llm(Json(request): Json<Value>) -> Response<Body> {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let max_tokens = request["max_tokens"].as_u64().unwrap_or(256);
    let share = 40 + (CALLS.fetch_add(1, Ordering::Relaxed) * 37) % 61;
    let completion = request["demo_completion_tokens"]
        .as_u64()
        .unwrap_or(max_tokens * share / 100);
    let prompt = prompt_chars(&request).div_ceil(3);
    let usage = json!({"choices": [], "usage": {
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
    }});
    let chunks = ["Tokens", " are", " money."]
        .into_iter()
        .map(|word| json!({"choices": [{"delta": {"content": word}}]}).to_string())
        .chain([usage.to_string(), "[DONE]".to_owned()]);
    let stream = futures_util::stream::iter(chunks).then(|data| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok::<_, Infallible>(Bytes::from(format!("data: {data}\n\n")))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Where the demo reads the budget.
struct Budget {
    handle: Handle,
    tokens: Policy,
    key: Key,
}

impl Budget {
    /// Tokens left this minute and this month.
    async fn left(&self) -> (u64, u64) {
        let state = self
            .handle
            .inspect(&self.tokens, &self.key)
            .await
            .expect("inspect");
        (state.limits()[0].remaining(), state.limits()[1].remaining())
    }

    /// The budget once `used` tokens are spent of the month's `before`: at once in memory,
    /// a moment later in Redis (its settle is sent on a task of its own).
    async fn settled(&self, before: u64, used: u64) -> (u64, u64) {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let now = self.left().await;
            if now.1 == before.saturating_sub(used) || Instant::now() > until {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Sends a chat request as `api_key`; reads the stream to its end, or hangs up after its
/// first chunk. The status, `X-RateLimit-Remaining`, and the stream.
async fn chat(
    client: &HttpClient,
    gateway: SocketAddr,
    api_key: &str,
    body: Value,
    hang_up: bool,
) -> (StatusCode, String, String) {
    let request = Request::post(format!("http://{gateway}/v1/chat/completions"))
        .header("x-api-key", api_key)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = client.request(request).await.expect("the gateway answers");
    let status = response.status();
    let remaining = response
        .headers()
        .get("x-ratelimit-remaining")
        .map(|v| v.to_str().unwrap_or("").to_owned())
        .unwrap_or_default();
    let mut body = response.into_body();
    let mut text = String::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            text.push_str(&String::from_utf8_lossy(data));
            if hang_up {
                break; // dropping the body closes the connection
            }
        }
    }
    (status, remaining, text)
}

/// Three requests, told one by one.
async fn narrate(
    client: &HttpClient,
    gateway: SocketAddr,
    budget: &Budget,
) -> Result<(), Box<dyn std::error::Error>> {
    let prompt = |chars: usize| json!([{"role": "user", "content": "x".repeat(chars)}]);
    let cases = [
        (
            "a short answer",
            json!({"max_tokens": 500, "messages": prompt(40), "demo_completion_tokens": 120}),
            false,
        ),
        (
            "a long prompt",
            json!({"max_tokens": 200, "messages": prompt(2400), "demo_completion_tokens": 200}),
            false,
        ),
        (
            "a client that hangs up",
            json!({"max_tokens": 800, "messages": prompt(40), "demo_completion_tokens": 50}),
            true,
        ),
    ];
    for (what, body, hang_up) in cases {
        let estimate = prompt_chars(&body) / 4 + body["max_tokens"].as_u64().unwrap_or(0);
        let before = budget.left().await;
        let (status, remaining, stream) = chat(client, gateway, "demo", body, hang_up).await;
        let used = stream
            .split("data: ")
            .filter_map(|d| total_tokens(d.trim()))
            .last();
        // The month's tokens: what the stream reported, else the estimate.
        let after = budget.settled(before.1, used.unwrap_or(estimate)).await;
        println!("{what}: estimate {estimate} tokens, {status}, X-RateLimit-Remaining {remaining}");
        match used {
            Some(used) => println!("  the stream reported {used} tokens"),
            None => println!("  hung up before the usage came"),
        }
        println!(
            "  budget: {} -> {} this minute, {} -> {} this month\n",
            before.0, after.0, before.1, after.1
        );
    }
    Ok(())
}

/// Eight clients for five seconds; a line a second.
async fn load(client: &HttpClient, gateway: SocketAddr, budget: &Budget) {
    let admitted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let used = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(5);
    println!("eight clients for five seconds, 10 000 tokens a minute:");
    for n in 0..8u64 {
        let (client, admitted, refused, used) = (
            client.clone(),
            admitted.clone(),
            refused.clone(),
            used.clone(),
        );
        tokio::spawn(async move {
            let mut i = n;
            while Instant::now() < end {
                i += 8;
                let body = json!({"max_tokens": 100 + (i * 53) % 400,
                    "messages": [{"role": "user", "content": "Tell me about rate limits."}]});
                let (status, _, stream) = chat(&client, gateway, "demo", body, false).await;
                if status == StatusCode::TOO_MANY_REQUESTS {
                    refused.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
                admitted.fetch_add(1, Ordering::Relaxed);
                let tokens = stream
                    .split("data: ")
                    .filter_map(|d| total_tokens(d.trim()))
                    .last();
                used.fetch_add(tokens.unwrap_or(0), Ordering::Relaxed);
            }
        });
    }
    for second in 1..=5 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (minute, month) = budget.left().await;
        println!(
            "t={second}s admitted={} refused={} tokens_used={} left: minute={minute} month={month}",
            admitted.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed),
            used.load(Ordering::Relaxed),
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Serves `app` on a free loopback port.
async fn spawn(app: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

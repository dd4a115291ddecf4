//! The smallest useful setup: an axum app that allows each client IP a burst of 5 requests,
//! refilled at 5 per 10 seconds (GCRA).
//!
//! ```text
//! cargo run --example quickstart                                   # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart  # shared state in Redis
//! for i in $(seq 7); do curl -si localhost:3000/ | head -1; done   # the 6th gets a 429
//! ```
//!
//! `BIND=0.0.0.0:8080` changes the listening address; `RUST_LOG=redlimit=debug` logs each 429.

use std::{net::SocketAddr, time::Duration};

use axum::{Router, routing::get};
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Decision, Limit, Policy, RateLimitLayer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    // One policy: a burst of 5, then one request every 2 seconds, per client.
    let policy = Policy::new("quickstart", [Limit::gcra(5, Duration::from_secs(10))?])?;

    // Redis makes the limit hold across every replica; memory is enough for one process.
    let layer = match std::env::var("REDIS_URL") {
        Ok(url) => {
            let store = RedisStore::connect(&url)
                .await
                .map_err(|e| format!("cannot connect to Redis at {url}: {e}"))?;
            RateLimitLayer::new(store, policy)
        }
        Err(_) => {
            println!("using the in-memory store; for Redis run:");
            println!("  REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart");
            RateLimitLayer::new(MemoryStore::new(), policy)
        }
    };

    // The layer keys requests on the peer IP by default, and hands the handler its decision.
    let app = Router::new().route("/", get(hello)).layer(layer);

    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!("try: for i in $(seq 7); do curl -si {addr}/ | head -1; done");
    // Connect info gives the layer each request's peer address: the default key.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}

/// Only allowed requests get here; the decision says how many are left.
async fn hello(decision: Option<Decision>) -> String {
    // With `OnStoreError::Open`, a failed store lets the request through without a count.
    match decision.and_then(|d| d.remaining()) {
        Some(left) => format!("hello! {left} requests left in this burst\n"),
        None => "hello! (not rate limited right now)\n".to_owned(),
    }
}

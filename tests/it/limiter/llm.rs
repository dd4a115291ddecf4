//! Several limits in one reservation, on Redis: an LLM quota of requests and tokens a
//! minute, the request limit counting permits and the token limit their cost; a permit
//! settled below its estimate gives the tokens back, above it charges them.

use std::time::Duration;

use redlimit::limiter::{AcquireError, Limiter};
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy};

use crate::support::{RedisServer, unique_prefix};

#[tokio::test]
async fn requests_and_tokens_are_reserved_together_and_settled() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("llm"))
        .connect()
        .await
        .expect("connect");
    let minute = Duration::from_secs(60);
    let policy = Policy::new(
        "llm",
        [
            Limit::gcra(5, minute).unwrap(),
            Limit::gcra(100, minute).unwrap(),
        ],
    )
    .unwrap();
    let limiter = Limiter::builder(store, policy).per_request([0]).build();

    // Three calls of 30 tokens: 3 requests of 5, 90 tokens of 100.
    let mut permits = Vec::new();
    for _ in 0..3 {
        permits.push(limiter.try_acquire("openai", 30).await.expect("room"));
    }
    let over = limiter.try_acquire("openai", 30).await;
    assert!(
        matches!(over, Err(AcquireError::TooLong { .. })),
        "tokens: {over:?}"
    );
    // The first used 10 tokens: 20 back, the request stays counted.
    permits.remove(0).settle(10).await.expect("settled");
    let fourth = limiter
        .try_acquire("openai", 30)
        .await
        .expect("the tokens given back");
    // The fourth used 40: 10 more charged, so no token is left.
    fourth.settle(40).await.expect("settled");
    let none = limiter.try_acquire("openai", 1).await;
    assert!(
        matches!(none, Err(AcquireError::TooLong { .. })),
        "{none:?}"
    );
    // Requests alone: five calls of 10 tokens (50 of 100), then the sixth is one request too
    // many.
    let policy = limiter.policy().clone();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("llm-requests"))
        .connect()
        .await
        .expect("connect");
    let requests = Limiter::builder(store, policy).per_request([0]).build();
    for _ in 0..5 {
        requests.try_acquire("openai", 10).await.expect("a request");
    }
    let sixth = requests.try_acquire("openai", 10).await;
    assert!(
        matches!(sixth, Err(AcquireError::TooLong { .. })),
        "requests: {sixth:?}"
    );
    assert_eq!(
        limiter.store_calls(),
        8,
        "one call per permit, settle and refusal"
    );
}

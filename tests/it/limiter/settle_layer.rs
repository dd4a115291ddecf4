//! `AcquireLayer::settle_with` on Redis: each request reserves its estimate, and the cost its
//! response reports is settled before the response is handed on (a refund below the
//! estimate, a charge above it); a response that reports nothing, and an inner error, keep
//! the estimate.

use std::time::Duration;

use redlimit::limiter::{AcquireLayer, Limiter};
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy};
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::support::{RedisServer, unique_prefix};

/// A call to a dummy LLM: its estimate of tokens, and what the "provider" will report.
#[derive(Clone, Copy)]
struct Prompt {
    estimate: u64,
    used: Option<u64>,
    fails: bool,
}

/// The provider's answer: the tokens it says the call used, if it says.
struct Completion {
    tokens_used: Option<u64>,
}

async fn limiter(server: &RedisServer) -> Limiter {
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("settle-layer"))
        .connect()
        .await
        .expect("connect");
    // 100 tokens an hour: no token comes back during the test, however slow the machine.
    let policy = Policy::new(
        "tokens",
        [Limit::gcra(100, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    Limiter::new(store, policy)
}

#[tokio::test]
async fn the_cost_a_response_reports_is_settled_before_it_is_handed_on() {
    let server = RedisServer::start();
    let limiter = limiter(&server).await;
    let mut llm = ServiceBuilder::new()
        .layer(
            AcquireLayer::global(limiter.clone())
                .cost(|p: &Prompt| p.estimate)
                .settle_with(|c: &Completion| c.tokens_used),
        )
        .service_fn(|p: Prompt| async move {
            if p.fails {
                return Err("the provider failed".into());
            }
            Ok::<_, redlimit::BoxError>(Completion {
                tokens_used: p.used,
            })
        });
    let mut call = async |estimate, used, fails| {
        let prompt = Prompt {
            estimate,
            used,
            fails,
        };
        llm.ready().await.unwrap().call(prompt).await.map(|_| ())
    };

    // 30 reserved, 5 used: 25 back. 30 reserved, 45 used: 15 more charged. 50 spent.
    call(30, Some(5), false).await.expect("answered");
    call(30, Some(45), false).await.expect("answered");
    assert_eq!(limiter.store_calls(), 4, "a reservation and a settle each");
    assert!(limiter.try_acquire("global", 51).await.is_err(), "50 spent");
    let rest = limiter.try_acquire("global", 50).await;
    assert!(rest.is_ok(), "50 left: {rest:?}");
    rest.unwrap().settle(0).await.expect("given back");

    // No count in the response: the estimate stands, one store call.
    let calls = limiter.store_calls();
    call(20, None, false).await.expect("answered");
    assert_eq!(limiter.store_calls(), calls + 1, "no settle");
    // The inner service failed: the estimate stands too (the call was made).
    call(10, Some(0), true)
        .await
        .expect_err("the provider's error");
    assert_eq!(limiter.store_calls(), calls + 2, "no settle");
    assert!(limiter.try_acquire("global", 21).await.is_err(), "80 spent");
    assert!(limiter.try_acquire("global", 20).await.is_ok(), "20 left");
}

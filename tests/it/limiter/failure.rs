//! While the store is gone the limiter keeps limiting, in memory, at this process's share
//! (`local_share(4)`: a quarter of the policy), never unlimited; it leaves the store alone for
//! its cool-down, then tries it with one call, not a stampede; and once the store answers
//! again permits come from the store. A limiter built to fail fails, and leaves the store
//! alone for its cool-down.

use std::time::Duration;

use redlimit::limiter::{AcquireError, Limiter};
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy, StoreError};

use super::run::saturate;
use crate::support::{RedisServer, eventually, unique_prefix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_store_leaves_the_local_share_and_one_call_per_cool_down() {
    let mut server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("gone"))
        .connect()
        .await
        .expect("connect");
    let policy = Policy::new("p", [Limit::gcra(100, Duration::from_secs(1)).unwrap()]).unwrap();
    let limiter = Limiter::builder(store, policy)
        .local_share(4)
        .store_deadline(Duration::from_millis(200))
        .cool_down(Duration::from_millis(500))
        .max_wait(Duration::from_secs(30))
        .build();
    assert!(!limiter.acquire("upstream", 1).await.unwrap().is_local());
    server.kill();

    let calls = limiter.store_calls();
    let run = saturate(
        std::slice::from_ref(&limiter),
        8,
        Duration::from_millis(1500),
    )
    .await;
    let elapsed = run.started.elapsed();
    let during = limiter.store_calls() - calls;
    // The share: a burst of 25 (less the one admitted through the store, mirrored), then 25/s.
    let admitted = run.within(Duration::from_secs(1));
    println!(
        "{admitted} permits in the first second of slots, {} in all, {during} store calls in {elapsed:?}",
        run.total()
    );
    assert!(
        (45..=51).contains(&admitted),
        "{admitted} permits within a second at a share of 25/s"
    );
    // The first call of each worker, then one per cool-down (its run, and the wait of a
    // worker's last permit, bounded by the elapsed time).
    let bound = 8 + elapsed.as_millis() as u64 / 500 + 1;
    assert!(
        during <= bound,
        "{during} store calls while it was gone (at most {bound})"
    );

    server.restart();
    assert!(
        eventually(Duration::from_secs(15), async || {
            matches!(limiter.acquire("upstream", 1).await, Ok(p) if !p.is_local())
        })
        .await,
        "permits come from the store again"
    );
}

#[tokio::test]
async fn a_limiter_built_to_fail_fails_and_then_leaves_the_store_alone() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let store = RedisStore::builder(url)
        .prefix(unique_prefix("fail"))
        .connect_lazy()
        .expect("a store");
    let policy = Policy::new("p", [Limit::gcra(100, Duration::from_secs(1)).unwrap()]).unwrap();
    let limiter = Limiter::builder(store, policy)
        .fail_on_store_error()
        .store_deadline(Duration::from_millis(200))
        .cool_down(Duration::from_secs(60))
        .build();
    let first = limiter.acquire("upstream", 1).await;
    assert!(matches!(first, Err(AcquireError::Store(_))), "{first:?}");
    let second = limiter.acquire("upstream", 1).await;
    assert!(
        matches!(second, Err(AcquireError::Store(StoreError::CircuitOpen))),
        "{second:?}"
    );
    assert_eq!(limiter.store_calls(), 1, "the second was not sent");
    assert_eq!(limiter.local_decisions(), 0);
}

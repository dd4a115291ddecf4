//! A waiter cancelled before its slot gives it back: the callers after it are served as if it
//! had never reserved.

use std::time::Duration;

use redlimit::limiter::Limiter;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy};

use crate::support::{RedisServer, eventually, unique_prefix};

#[tokio::test]
async fn a_cancelled_waiter_gives_its_slot_back() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("cancel"))
        .connect()
        .await
        .expect("connect");
    // A burst of 4, then one slot every 500 ms.
    let policy = Policy::new("p", [Limit::gcra(4, Duration::from_secs(2)).unwrap()]).unwrap();
    let limiter = Limiter::new(store, policy);
    let first = limiter.try_acquire("k", 1).await.expect("the burst");
    for _ in 0..3 {
        limiter.try_acquire("k", 1).await.expect("the burst");
    }
    let first = first.slot().unwrap();
    // A books the slot 500 ms after the burst and gives up after 20 ms.
    let a = tokio::time::timeout(Duration::from_millis(20), limiter.acquire("k", 1)).await;
    assert!(a.is_err(), "A gave up before its slot");
    assert!(
        eventually(Duration::from_secs(10), async || limiter.store_calls() >= 6).await,
        "A's reservation and its give back were sent"
    );
    // B and C: the slots at 500 ms and 1 s, as if A had never reserved (1.5 s otherwise).
    let b = tokio::spawn(limiter.acquire("k", 1));
    let c = tokio::spawn(limiter.acquire("k", 1));
    let b = b.await.unwrap().expect("B's permit").slot().unwrap();
    let c = c.await.unwrap().expect("C's permit").slot().unwrap();
    let last = b.max(c).duration_since(first).unwrap();
    assert!(
        last < Duration::from_millis(1250),
        "the last slot is {last:?} after the burst"
    );
}

//! Exactness under concurrency: many concurrent requests through two separate layers (two
//! connections, as two replicas would have) sharing one Redis admit exactly the limit.

use crate::support;

use std::time::Duration;

use axum::Router;
use futures_util::future::join_all;
use http::StatusCode;
use redlimit::key::Global;
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Algorithm, Limit, Policy, RateLimitLayer};
use support::*;

const LIMIT: u64 = 25;
const REQUESTS: usize = 120;

/// Sends `REQUESTS` requests at once, alternating between the two apps; counts the 200s.
async fn admitted(a: &Router, b: &Router) -> usize {
    let calls = (0..REQUESTS).map(|i| {
        let app = if i % 2 == 0 { a.clone() } else { b.clone() };
        tokio::spawn(async move { status_of(&app, "198.51.100.1").await })
    });
    let statuses = join_all(calls).await;
    statuses
        .into_iter()
        .map(|s| s.expect("task"))
        .inspect(|s| {
            assert!(
                *s == StatusCode::OK || *s == StatusCode::TOO_MANY_REQUESTS,
                "{s}"
            )
        })
        .filter(|s| *s == StatusCode::OK)
        .count()
}

/// A day-long period: no refill or window edge during the burst, except a fixed or sliding
/// window crossing midnight UTC, which the test detects and retries.
fn policy(algorithm: Algorithm) -> Policy {
    Policy::new(
        "burst",
        [Limit::new(algorithm, LIMIT, Duration::from_secs(86_400)).unwrap()],
    )
    .unwrap()
}

fn day() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_sharing_redis_admit_exactly_the_limit() {
    let server = RedisServer::start();
    for algorithm in Algorithm::ALL {
        loop {
            let prefix = unique_prefix(algorithm.name());
            let replica = || async {
                let store = RedisStore::builder(server.url())
                    .prefix(prefix.as_str())
                    .connect()
                    .await
                    .unwrap();
                app(RateLimitLayer::builder(store, policy(algorithm))
                    .key(Global)
                    .store_deadline(Duration::from_secs(5))
                    .build()
                    .expect("valid layer"))
            };
            let (a, b) = (replica().await, replica().await);
            let before = day();
            let n = admitted(&a, &b).await;
            if day() != before {
                continue; // the burst straddled a window edge
            }
            assert_eq!(n as u64, LIMIT, "{algorithm}");
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_layers_sharing_a_memory_store_admit_exactly_the_limit() {
    for algorithm in Algorithm::ALL {
        let store = MemoryStore::new();
        let a = app(RateLimitLayer::builder(store.clone(), policy(algorithm))
            .key(Global)
            .build()
            .expect("valid layer"));
        let b = app(RateLimitLayer::builder(store, policy(algorithm))
            .key(Global)
            .build()
            .expect("valid layer"));
        let before = day();
        let n = admitted(&a, &b).await;
        if day() == before {
            assert_eq!(n as u64, LIMIT, "{algorithm}");
        }
    }
}

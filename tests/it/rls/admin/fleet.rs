//! Two services on one Redis: a change made through one reaches the other within its poll.

use std::sync::Arc;
use std::time::Duration;

use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::store::{RedisStore, Store};

use super::{call, hit, router, service};
use crate::support::{RedisServer, eventually, unique_prefix};

/// Two stores of one fleet: one Redis, one prefix, each polling the other's changes often.
async fn fleet_store(server: &RedisServer, prefix: &str) -> Arc<dyn Store> {
    let store: RedisStore = RedisStore::builder(server.url())
        .prefix(prefix.to_owned())
        .override_poll(Duration::from_millis(50))
        .connect()
        .await
        .expect("connect to the test redis");
    Arc::new(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_replica_governs_the_other() {
    let server = RedisServer::start();
    let prefix = unique_prefix("rls-admin-fleet");
    let one = service(fleet_store(&server, &prefix).await);
    let two = service(fleet_store(&server, &prefix).await);
    let admin = router(&one);
    let within = Duration::from_secs(10);

    // The second replica denies, and caches the denial (a day long).
    for _ in 0..2 {
        assert_eq!(hit(&two, "10.9.9.9").await.overall_code(), Code::Ok);
    }
    for _ in 0..2 {
        assert_eq!(hit(&two, "10.9.9.9").await.overall_code(), Code::OverLimit);
    }
    // Reset through the first: the second's deny cache lets the address through.
    let (status, _) = call(&admin, "DELETE", "/rls/test/counters?ip=10.9.9.9", None).await;
    assert_eq!(status, 200);
    assert!(
        eventually(within, async || hit(&two, "10.9.9.9").await.overall_code()
            == Code::Ok)
        .await,
        "the reset did not reach the other replica's deny cache"
    );

    // An override set through the first governs the second.
    let (status, _) = call(
        &admin,
        "PUT",
        "/rls/test/override?ip=10.9.9.9",
        Some(r#"{"limits": ["50/1d"]}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        eventually(within, async || {
            let answer = hit(&two, "10.9.9.9").await;
            answer.statuses[0]
                .current_limit
                .as_ref()
                .map(|l| l.requests_per_unit)
                == Some(50)
        })
        .await,
        "the override did not reach the other replica"
    );
    // It stays in Redis: a replica started now applies it from its first request.
    let three = service(fleet_store(&server, &prefix).await);
    let answer = hit(&three, "10.9.9.9").await;
    assert_eq!(
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        50
    );

    // Shadow mode for the domain, set through the first, reaches the second.
    for _ in 0..3 {
        hit(&two, "10.9.9.7").await;
    }
    assert_eq!(hit(&two, "10.9.9.7").await.overall_code(), Code::OverLimit);
    call(
        &admin,
        "PUT",
        "/rls/test/shadow",
        Some(r#"{"shadow": true}"#),
    )
    .await;
    assert!(
        eventually(within, async || hit(&two, "10.9.9.7").await.overall_code()
            == Code::Ok)
        .await,
        "shadow mode did not reach the other replica"
    );
}

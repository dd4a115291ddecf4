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

/// A lazily connected store of the fleet: it reads the overrides in the background.
fn lazy_store(server: &RedisServer, prefix: &str) -> Arc<dyn Store> {
    let store = RedisStore::builder(server.url())
        .prefix(prefix.to_owned())
        .connect_lazy()
        .expect("a lazy store");
    Arc::new(store)
}

// One thread: the lazy store's poller cannot read before the first request is planned.
#[tokio::test(flavor = "current_thread")]
async fn a_fresh_lazy_replica_applies_a_stored_override_from_its_first_request() {
    let server = RedisServer::start();
    let prefix = unique_prefix("rls-admin-lazy");
    let one = service(fleet_store(&server, &prefix).await);
    let (status, _) = call(
        &router(&one),
        "PUT",
        "/rls/test/override?ip=10.9.8.7",
        Some(r#"{"limits": ["50/1d"]}"#),
    )
    .await;
    assert_eq!(status, 200);

    let fresh = service(lazy_store(&server, &prefix));
    let answer = hit(&fresh, "10.9.8.7").await;
    let shown = answer.statuses[0]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit);
    assert_eq!(
        shown,
        Some(50),
        "the first request was planned under the rule's limit"
    );
    assert_eq!(answer.statuses[0].limit_remaining, 49);

    // The admin API of another fresh replica shows the override from its first answer too.
    let fresh = service(lazy_store(&server, &prefix));
    let (status, body) = call(
        &router(&fresh),
        "GET",
        "/rls/test/counters?ip=10.9.8.7",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["overridden"], true, "{body}");
    assert_eq!(body["limits"][0]["requests_per_unit"], 50, "{body}");
}

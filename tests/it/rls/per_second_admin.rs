//! The admin API over a per-second store: a per-second descriptor's counters are read and reset
//! in the store that holds them, and an override to another period leaves them there.

use std::time::Duration;

use http::StatusCode;
use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use redlimit::store::RedisStore;

use super::admin::{call, router};
use super::service::d;
use crate::support::redis_server::RedisServer;
use crate::support::unique_prefix;

/// Two per second for an hour (the per-second store), five per day-long minute (the main one).
const CONFIG: &str = "
domain: split
descriptors:
  - {key: fast, rate_limit: {unit: second, unit_multiplier: 3600, requests_per_unit: 2}}
  - {key: slow, rate_limit: {unit: minute, unit_multiplier: 1440, requests_per_unit: 5}}
";

fn keys(server: &RedisServer, prefix: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut server.connection())
        .expect("KEYS")
}

async fn remaining(service: &RateLimitService, entry: (&str, &str)) -> u32 {
    let request = RateLimitRequest {
        domain: "split".into(),
        descriptors: vec![d(&[entry])],
        hits_addend: 0,
    };
    let answer = service.should_rate_limit(request).await.expect("answered");
    answer.statuses[0].limit_remaining
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_second_counter_is_inspected_reset_and_overridden_in_its_store() {
    let (main, per_second) = (RedisServer::start(), RedisServer::start());
    let prefix = unique_prefix("persec-admin");
    let store = |server: &RedisServer| RedisStore::builder(server.url()).prefix(prefix.clone());
    let service = RateLimitService::builder(store(&main).connect().await.expect("main"))
        .per_second_store(store(&per_second).connect().await.expect("per-second"))
        .config(RlsConfig::parse([("split.yaml", CONFIG)], false).expect("config"))
        .store_deadline(Duration::from_secs(5))
        .build();
    let admin = router(&service);
    assert_eq!(remaining(&service, ("fast", "1")).await, 1);
    assert_eq!(remaining(&service, ("slow", "1")).await, 4);

    let (status, read) = call(&admin, "GET", "/rls/split/counters?fast=1", None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["limits"][0]["remaining"], 1, "{read}");
    let (status, read) = call(&admin, "GET", "/rls/split/counters?slow=1", None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["limits"][0]["remaining"], 4, "{read}");

    let (status, reset) = call(&admin, "DELETE", "/rls/split/counters?fast=1", None).await;
    assert_eq!(status, StatusCode::OK, "{reset}");
    assert!(
        keys(&per_second, &prefix)
            .iter()
            .all(|k| !k.contains("fast")),
        "the per-second counter is gone from its store"
    );
    assert_eq!(remaining(&service, ("fast", "1")).await, 1, "whole again");

    // Overridden to a minute, the counter stays in the per-second store.
    let path = "/rls/split/override?fast=2";
    let (status, set) = call(&admin, "PUT", path, Some(r#"{"limits": ["10/1m"]}"#)).await;
    assert_eq!(status, StatusCode::OK, "{set}");
    let overridden = service
        .should_rate_limit(RateLimitRequest {
            domain: "split".into(),
            descriptors: vec![d(&[("fast", "2")])],
            hits_addend: 0,
        })
        .await
        .expect("answered");
    assert_eq!(
        overridden.statuses[0].limit_remaining, 9,
        "the override is in force"
    );
    assert!(
        keys(&main, &prefix).iter().all(|k| !k.contains("fast")),
        "{:?}",
        keys(&main, &prefix)
    );
    assert!(
        keys(&per_second, &prefix)
            .iter()
            .any(|k| k.contains("fast%002")),
        "{:?}",
        keys(&per_second, &prefix)
    );
}

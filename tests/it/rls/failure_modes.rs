//! A domain's failure mode and the deny cache, over a real redis-server that freezes (SIGSTOP:
//! every call misses the deadline) and dies (every call fails at once).

use std::time::Duration;

use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::rls::{FailureMode, RateLimitService};
use tonic::Status;

use super::service::d;
use crate::support::redis_server::RedisServer;
use crate::support::redis_store;

/// Four a day per `ip` in every domain; `open` and `local` name their mode in the file.
const CONFIG: [(&str, &str); 4] = [
    (
        "error.yaml",
        "domain: error\ndescriptors: [{key: ip, rate_limit: {unit: day, requests_per_unit: 4}}]\n",
    ),
    (
        "open.yaml",
        "domain: open\non_store_error: open\ndescriptors: [{key: ip, rate_limit: {unit: day, requests_per_unit: 4}}]\n",
    ),
    (
        "closed.yaml",
        "domain: closed\ndescriptors: [{key: ip, rate_limit: {unit: day, requests_per_unit: 4}}]\n",
    ),
    (
        "local.yaml",
        "domain: local\non_store_error: local:2\ndescriptors: [{key: ip, rate_limit: {unit: day, requests_per_unit: 4}}]\n",
    ),
];

fn request(domain: &str, ip: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![d(&[("ip", ip)])],
        hits_addend: 0,
    }
}

async fn code(service: &RateLimitService, domain: &str, ip: &str) -> Result<Code, Status> {
    let response = service.should_rate_limit(request(domain, ip)).await?;
    Ok(response.overall_code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_domain_answers_a_frozen_or_dead_redis_by_its_failure_mode() {
    let mut server = RedisServer::start();
    let store = redis_store(&server, "rls-failure-modes").await;
    let service = RateLimitService::builder(store)
        .config(RlsConfig::parse(CONFIG, false).unwrap())
        // Generous for a busy machine; a frozen Redis makes every call wait this long.
        .store_deadline(Duration::from_secs(1))
        .domain_on_store_error("closed", FailureMode::Closed)
        .build();

    // While Redis answers: one admitted through the store in `local` (of this server's 2),
    // and `ip=9` of `error` driven over its limit (the denial cached).
    assert_eq!(code(&service, "local", "1").await.unwrap(), Code::Ok);
    for _ in 0..4 {
        assert_eq!(code(&service, "error", "9").await.unwrap(), Code::Ok);
    }
    assert_eq!(code(&service, "error", "9").await.unwrap(), Code::OverLimit);

    server.freeze();
    // A known denial needs no store: answered as Redis would, frozen or not.
    assert_eq!(code(&service, "error", "9").await.unwrap(), Code::OverLimit);
    let error = code(&service, "error", "1").await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable);
    assert_eq!(code(&service, "open", "1").await.unwrap(), Code::Ok);
    assert_eq!(
        code(&service, "closed", "1").await.unwrap(),
        Code::OverLimit
    );
    // This server's share (2 of 4), one already spent through Redis.
    assert_eq!(code(&service, "local", "1").await.unwrap(), Code::Ok);
    assert_eq!(code(&service, "local", "1").await.unwrap(), Code::OverLimit);

    server.thaw();
    let back = tokio::time::Instant::now() + Duration::from_secs(30);
    while code(&service, "error", "2").await.is_err() {
        assert!(
            tokio::time::Instant::now() < back,
            "Redis never answered again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    server.kill();
    let error = code(&service, "error", "3").await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable);
    assert_eq!(code(&service, "open", "3").await.unwrap(), Code::Ok);
    assert_eq!(
        code(&service, "closed", "3").await.unwrap(),
        Code::OverLimit
    );
    assert_eq!(code(&service, "local", "3").await.unwrap(), Code::Ok);
}

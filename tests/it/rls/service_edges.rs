//! The service's edges: headers, unknown and empty domains, hostile requests, a store that is
//! gone.

use std::time::{Duration, Instant};

use redlimit::response::HeaderStyle;
use redlimit::rls::RateLimitService;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::store::{Commit, MemoryStore, RedisStore};

use super::service::{call, d, req, serve, stores};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_as_envoy_and_the_ietf_draft() {
    let builder = RateLimitService::builder(MemoryStore::new()).response_headers(HeaderStyle::Both);
    let mut client = serve(builder).await;
    let r = call(
        &mut client,
        req(vec![d(&[("ip", "h")]), d(&[("path", "/h")])], 1),
    )
    .await;
    let headers: Vec<(String, String)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        get("x-ratelimit-limit"),
        "3, 3;w=86400;name=\"per_ip\", 5;w=86400",
        "{headers:?}"
    );
    assert_eq!(get("x-ratelimit-remaining"), "2");
    let reset: u64 = get("x-ratelimit-reset").parse().unwrap();
    assert!((1..=86_400).contains(&reset), "{reset}");
    assert_eq!(
        get("ratelimit-policy"),
        "\"per_ip\";q=3;w=86400, \"2\";q=5;w=86400"
    );
    assert!(
        get("ratelimit").starts_with("\"per_ip\";r=2;t="),
        "{headers:?}"
    );
    // Off by default.
    let mut plain = serve(RateLimitService::builder(MemoryStore::new())).await;
    assert!(
        call(&mut plain, req(vec![d(&[("ip", "h")])], 1))
            .await
            .response_headers_to_add
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_empty_and_hostile_requests_get_clear_answers() {
    let (_server, stores) = stores("rls-hostile").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let mut unknown = req(vec![d(&[("ip", "1")]), d(&[("x", "y")])], 1);
        unknown.domain = "nowhere".into();
        let r = call(&mut client, unknown).await;
        assert_eq!(r.overall_code(), Code::Ok, "{kind}");
        assert!(
            r.statuses
                .iter()
                .all(|s| s.code() == Code::Ok && s.current_limit.is_none()),
            "{kind}"
        );
        let refused = |request| {
            let mut client = client.clone();
            async move { client.should_rate_limit(request).await.unwrap_err() }
        };
        let mut empty = req(vec![d(&[("ip", "1")])], 1);
        empty.domain.clear();
        let status = refused(empty).await;
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{kind}");
        assert!(
            status.message().contains("domain must not be empty"),
            "{status:?}"
        );
        let status = refused(req(vec![], 1)).await;
        assert!(
            status
                .message()
                .contains("descriptor list must not be empty"),
            "{status:?}"
        );
        let many = (0..10_000).map(|i| d(&[("ip", &i.to_string())])).collect();
        let status = refused(req(many, 1)).await;
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{kind}");
        assert!(
            status
                .message()
                .contains("10000 rate limit descriptors: at most 64"),
            "{status:?}"
        );
        let bad_unit = RateLimitDescriptor {
            limit: Some(RateLimitOverride {
                requests_per_unit: 1,
                unit: 0,
            }),
            ..d(&[("ip", "u")])
        };
        assert_eq!(
            refused(req(vec![bad_unit], 1)).await.code(),
            tonic::Code::InvalidArgument,
            "{kind}"
        );
        // A 1 MB value is a counter like any other.
        let big = "v".repeat(1 << 20);
        let r = call(&mut client, req(vec![d(&[("ip", &big)])], 1)).await;
        assert_eq!(
            (r.overall_code(), r.statuses[0].limit_remaining),
            (Code::Ok, 2),
            "{kind}"
        );
        // Hits past any capacity: over, nothing charged.
        let r = call(&mut client, req(vec![d(&[("ip", "max")])], u32::MAX)).await;
        assert_eq!(r.overall_code(), Code::OverLimit, "{kind}");
        let huge = RateLimitDescriptor {
            hits_addend: Some(u64::MAX),
            ..d(&[("ip", "max")])
        };
        assert_eq!(
            call(&mut client, req(vec![huge], 1)).await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );
        assert_eq!(
            call(&mut client, req(vec![d(&[("ip", "max")])], 1))
                .await
                .statuses[0]
                .limit_remaining,
            2,
            "{kind}"
        );
        // A zero limit is over without a store call.
        let zero = RateLimitDescriptor {
            limit: Some(RateLimitOverride {
                requests_per_unit: 0,
                unit: 1,
            }),
            ..d(&[("ip", "z")])
        };
        assert_eq!(
            call(&mut client, req(vec![zero], 1)).await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_shadow_answers_ok() {
    let mut client = serve(RateLimitService::builder(MemoryStore::new()).shadow_mode(true)).await;
    for _ in 0..3 {
        call(&mut client, req(vec![d(&[("ip", "g")])], 1)).await;
    }
    let r = call(&mut client, req(vec![d(&[("ip", "g")])], 1)).await;
    assert_eq!(
        (r.overall_code(), r.statuses[0].code()),
        (Code::Ok, Code::OverLimit)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_gone_is_unavailable() {
    // Nothing listens on the port: every call fails fast.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    drop(listener);
    let store = RedisStore::builder(url).connect_lazy().unwrap();
    let mut client = serve(RateLimitService::builder(store)).await;
    let started = Instant::now();
    let status = client
        .should_rate_limit(req(vec![d(&[("ip", "1")])], 1))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().starts_with("rate limit store"),
        "{status:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    // Unknown domains and unlimited descriptors never ask the store.
    let r = call(&mut client, req(vec![d(&[("free", "1")])], 1)).await;
    assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
}

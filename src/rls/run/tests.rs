use super::super::config::RlsConfig;
use super::super::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use super::super::testing::{Flaky, request};
use super::super::{HashTag, RateLimitService};
use crate::store::{Commit, MemoryStore, Store};

const CONFIG: &str = "
domain: d
descriptors:
  - {key: ip, rate_limit: {unit: day, requests_per_unit: 1}}
  - {key: path, rate_limit: {unit: day, requests_per_unit: 5}}
";

fn service(store: Flaky, deny_cache: usize) -> RateLimitService {
    service_committing(store, deny_cache, Commit::AllOrNone)
}

fn service_committing(store: Flaky, deny_cache: usize, commit: Commit) -> RateLimitService {
    let config = RlsConfig::parse([("d.yaml", CONFIG)], false).unwrap();
    RateLimitService::builder(store)
        .config(config)
        .deny_cache(deny_cache)
        .commit(commit)
        .build()
}

#[tokio::test]
async fn a_known_denial_answers_over_limit_without_the_store() {
    let store = Flaky::default();
    let service = service(store.clone(), 100);
    let ip = request("d", &[&[("ip", "1")]]);
    assert_eq!(
        service
            .should_rate_limit(ip.clone())
            .await
            .unwrap()
            .overall_code(),
        Code::Ok
    );
    let denied = service.should_rate_limit(ip.clone()).await.unwrap();
    assert_eq!(denied.overall_code(), Code::OverLimit);
    let calls = store.calls();
    let cached = service.should_rate_limit(ip.clone()).await.unwrap();
    assert_eq!(store.calls(), calls, "the store was asked");
    assert_eq!(cached.overall_code(), Code::OverLimit);
    let status = &cached.statuses[0];
    assert_eq!(status.code(), Code::OverLimit);
    assert_eq!(status.limit_remaining, 0);
    assert_eq!(status.current_limit.as_ref().unwrap().requests_per_unit, 1);
    assert!(status.duration_until_reset.unwrap().seconds > 0);
    // Another descriptor beside it: nothing charged, its status read (one call).
    let both = request("d", &[&[("ip", "1")], &[("path", "/")]]);
    for _ in 0..2 {
        let answer = service.should_rate_limit(both.clone()).await.unwrap();
        assert_eq!(answer.overall_code(), Code::OverLimit);
        assert_eq!(answer.statuses[0].code(), Code::OverLimit);
        assert_eq!(answer.statuses[1].code(), Code::Ok);
        assert_eq!(answer.statuses[1].limit_remaining, 5, "charged");
    }
    assert_eq!(store.calls(), calls + 2);
    // Other keys still ask.
    let other = service
        .should_rate_limit(request("d", &[&[("ip", "2")]]))
        .await
        .unwrap();
    assert_eq!(other.overall_code(), Code::Ok);
    assert_eq!(store.calls(), calls + 3);
}

#[tokio::test]
async fn without_the_deny_cache_every_request_asks_the_store() {
    let store = Flaky::default();
    let service = service(store.clone(), 0);
    let ip = request("d", &[&[("ip", "1")]]);
    for _ in 0..3 {
        service.should_rate_limit(ip.clone()).await.unwrap();
    }
    let calls = store.calls();
    service.should_rate_limit(ip).await.unwrap();
    assert!(store.calls() > calls);
}

/// Where every hit lands, a counter known over is answered from the deny cache and not
/// charged (as the Go service's local cache skips the `INCRBY` of a key it holds over the
/// limit), a check of nothing too; the request's other counters are still charged.
#[tokio::test]
async fn where_every_hit_lands_a_known_denial_is_not_charged_and_the_rest_is() {
    let store = Flaky::default();
    let service = service_committing(store.clone(), 100, Commit::Always);
    let ip = request("d", &[&[("ip", "1")]]);
    assert_eq!(
        service
            .should_rate_limit(ip.clone())
            .await
            .unwrap()
            .overall_code(),
        Code::Ok
    );
    // Over: charged all the same (2 of 1), and remembered.
    let denied = service.should_rate_limit(ip.clone()).await.unwrap();
    assert_eq!(denied.overall_code(), Code::OverLimit);
    let calls = store.calls();
    let mut read = ip.clone();
    read.descriptors[0].hits_addend = Some(0);
    for request in [ip.clone(), read] {
        let cached = service.should_rate_limit(request).await.unwrap();
        assert_eq!(store.calls(), calls, "the store was asked");
        assert_eq!(cached.statuses[0].code(), Code::OverLimit);
        assert_eq!(cached.statuses[0].limit_remaining, 0);
    }
    let both = request("d", &[&[("ip", "1")], &[("path", "/")]]);
    for left in [4, 3] {
        let answer = service.should_rate_limit(both.clone()).await.unwrap();
        assert_eq!(answer.overall_code(), Code::OverLimit);
        assert_eq!(answer.statuses[0].code(), Code::OverLimit);
        assert_eq!(answer.statuses[1].code(), Code::Ok);
        assert_eq!(answer.statuses[1].limit_remaining, left, "charged");
    }
    assert_eq!(store.calls(), calls + 2);
}

// Lanes, all or none: a check per domain or per descriptor; a refusal refunds the others.
const LANES: &str = "
domain: d
descriptors:
  - {key: ip, rate_limit: {unit: day, requests_per_unit: 1}}
  - {key: path, rate_limit: {unit: day, requests_per_unit: 5}}
  - key: user
    rate_limits:
      - {unit: day, requests_per_unit: 5}
      - {unit: hour, requests_per_unit: 4}
";

fn lanes_service(store: impl Store, tag: HashTag) -> RateLimitService {
    let config = RlsConfig::parse([("d.yaml", LANES)], false).unwrap();
    RateLimitService::builder(store)
        .config(config)
        .deny_cache(0)
        .hash_tag(tag)
        .commit(crate::store::Commit::AllOrNone)
        .build()
}

#[tokio::test]
async fn a_check_per_domain_or_per_descriptor() {
    let three = request("d", &[&[("ip", "1")], &[("path", "/")], &[("user", "u")]]);
    for (tag, calls) in [(HashTag::Domain, 1), (HashTag::Descriptor, 3)] {
        let store = Flaky::default();
        let service = lanes_service(store.clone(), tag);
        let answer = service.should_rate_limit(three.clone()).await.unwrap();
        assert_eq!(answer.overall_code(), Code::Ok, "{tag}");
        let remaining: Vec<u32> = answer.statuses.iter().map(|s| s.limit_remaining).collect();
        assert_eq!(remaining, [0, 4, 3], "{tag}");
        // A descriptor's limits (`user`'s two) stay in one check.
        assert_eq!(store.calls(), calls, "{tag}");
    }
}

#[tokio::test]
async fn a_refusal_refunds_the_other_descriptors_checks() {
    let store = MemoryStore::new();
    let service = lanes_service(store, HashTag::Descriptor);
    let ip = request("d", &[&[("ip", "1")]]);
    assert_eq!(
        service.should_rate_limit(ip).await.unwrap().overall_code(),
        Code::Ok
    );
    // `path` first: the memory store answers at once, and a refusal in the first lane
    // would start no check in the second.
    let both = request("d", &[&[("path", "/")], &[("ip", "1")]]);
    let refused = service.should_rate_limit(both).await.unwrap();
    assert_eq!(refused.overall_code(), Code::OverLimit);
    // As `path` stands once its charge is given back.
    assert_eq!(refused.statuses[0].limit_remaining, 5);
    let mut read = request("d", &[&[("path", "/")]]);
    read.descriptors[0].hits_addend = Some(0);
    let mut left = 0;
    // The refund is a task of its own: it lands after a few turns of this runtime.
    for _ in 0..1000 {
        tokio::task::yield_now().await;
        left = service
            .should_rate_limit(read.clone())
            .await
            .unwrap()
            .statuses[0]
            .limit_remaining;
        if left == 5 {
            break;
        }
    }
    assert_eq!(left, 5, "the refused request's charge on path stayed");
}

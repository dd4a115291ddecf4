//! `RateLimitService` served by tonic on a loopback port, driven by a client of the generated
//! stubs, over the memory store and a real redis-server.

use std::sync::Arc;
use std::time::Duration;

use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use redlimit::rls::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use redlimit::rls::{RateLimitService, RateLimitServiceBuilder};
use redlimit::store::{Commit, MemoryStore, RedisStore, Store};
use tonic::transport::{Channel, Server};

use crate::support::redis_server::RedisServer;
use crate::support::redis_store;

/// Day-long windows: no test runs across a window's end (but one started at midnight UTC).
pub(super) const CONFIG: &str = "
domain: test
descriptors:
  - key: ip
    rate_limit: {unit: day, requests_per_unit: 3, name: per_ip}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 10, name: user}
  - key: vip
    rate_limit: {unit: day, requests_per_unit: 100, replaces: [{name: user}]}
  - key: quota
    quota_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: conc
    rate_limit: {unit: day, requests_per_unit: 20}
  - key: two
    rate_limits:
      - {unit: day, requests_per_unit: 2, name: two_short}
      - {unit: day, requests_per_unit: 3, algorithm: gcra}
";

pub(super) type Client = RateLimitServiceClient<Channel>;

/// The service served on a free loopback port, and a client of it.
pub(super) async fn serve(builder: RateLimitServiceBuilder) -> Client {
    serve_yaml(builder, "test.yaml", CONFIG).await
}

/// The service with the config `yaml` (read as the file `file`), served on a free loopback
/// port, and a client of it.
pub(super) async fn serve_yaml(builder: RateLimitServiceBuilder, file: &str, yaml: &str) -> Client {
    let config = RlsConfig::parse([(file, yaml)], false).expect("test config");
    let service = builder
        .config(config)
        .store_deadline(Duration::from_secs(5))
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(
        Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(incoming),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect to the service");
    RateLimitServiceClient::new(channel)
}

/// A request of `domain`, each descriptor with its own hits.
pub(super) fn request_with_hits(
    domain: &str,
    descriptors: Vec<(RateLimitDescriptor, u64)>,
) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: descriptors
            .into_iter()
            .map(|(mut descriptor, hits)| {
                descriptor.hits_addend = Some(hits);
                descriptor
            })
            .collect(),
        hits_addend: 0,
    }
}

/// A memory store and a Redis store (with its server, kept alive by the caller).
pub(super) async fn stores(name: &str) -> (RedisServer, Vec<(&'static str, Arc<dyn Store>)>) {
    let server = RedisServer::start();
    let redis: RedisStore = redis_store(&server, name).await;
    let stores: Vec<(&'static str, Arc<dyn Store>)> = vec![
        ("memory", Arc::new(MemoryStore::new())),
        ("redis", Arc::new(redis)),
    ];
    (server, stores)
}

pub(super) fn d(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        ..Default::default()
    }
}

pub(super) fn req(descriptors: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: "test".into(),
        descriptors,
        hits_addend: hits,
    }
}

pub(super) async fn call(client: &mut Client, request: RateLimitRequest) -> RateLimitResponse {
    client
        .should_rate_limit(request)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
}

fn limit_of(status: &DescriptorStatus) -> (u32, i32, String) {
    let limit = status.current_limit.as_ref().expect("current_limit");
    (limit.requests_per_unit, limit.unit, limit.name.clone())
}

fn reset_secs(status: &DescriptorStatus) -> f64 {
    let d = status
        .duration_until_reset
        .as_ref()
        .expect("duration_until_reset");
    d.seconds as f64 + f64::from(d.nanos) / 1e9
}

const DAY: i32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_in_order_and_a_refused_request_charges_nothing() {
    let (_server, stores) = stores("rls-order").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let four = || {
            vec![
                d(&[("ip", "1")]),
                d(&[("nothing", "x")]),
                d(&[("free", "x")]),
                d(&[("path", "/a")]),
            ]
        };
        let first = call(&mut client, req(four(), 0)).await;
        assert_eq!(first.overall_code(), Code::Ok, "{kind}");
        let s = &first.statuses;
        assert_eq!(s.len(), 4, "{kind}");
        assert_eq!(limit_of(&s[0]), (3, DAY, "per_ip".into()), "{kind}");
        assert_eq!((s[0].code(), s[0].limit_remaining), (Code::Ok, 2), "{kind}");
        assert!(
            reset_secs(&s[0]) > 0.0 && reset_secs(&s[0]) <= 86_400.0,
            "{kind}"
        );
        assert!(
            s[1].current_limit.is_none() && s[1].code() == Code::Ok,
            "{kind}"
        );
        assert!(s[2].current_limit.is_none(), "{kind}");
        assert_eq!(s[2].limit_remaining, u32::MAX, "{kind}");
        assert_eq!(limit_of(&s[3]), (5, DAY, String::new()), "{kind}");
        assert_eq!(s[3].limit_remaining, 4, "{kind}");
        for left in [1, 0] {
            let r = call(&mut client, req(four(), 1)).await;
            assert_eq!(
                (r.overall_code(), r.statuses[0].limit_remaining),
                (Code::Ok, left),
                "{kind}"
            );
        }
        // ip is spent: refused, and path (2 left) not charged.
        let refused = call(&mut client, req(four(), 1)).await;
        assert_eq!(refused.overall_code(), Code::OverLimit, "{kind}");
        assert_eq!(refused.statuses[0].code(), Code::OverLimit, "{kind}");
        assert!(reset_secs(&refused.statuses[0]) > 0.0, "{kind}");
        assert_eq!(
            (
                refused.statuses[3].code(),
                refused.statuses[3].limit_remaining
            ),
            (Code::Ok, 2),
            "{kind}"
        );
        let path = call(&mut client, req(vec![d(&[("path", "/a")])], 1)).await;
        assert_eq!(
            path.statuses[0].limit_remaining, 1,
            "{kind}: the refused request charged path"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrides_hits_and_check_only() {
    let (_server, stores) = stores("rls-hits").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let with_limit = |rpu| RateLimitDescriptor {
            limit: Some(RateLimitOverride {
                requests_per_unit: rpu,
                unit: DAY,
            }),
            ..d(&[("ip", "o")])
        };
        let r = call(&mut client, req(vec![with_limit(2)], 0)).await;
        assert_eq!(
            (limit_of(&r.statuses[0]), r.statuses[0].limit_remaining),
            ((2, DAY, String::new()), 1),
            "{kind}"
        );
        call(&mut client, req(vec![with_limit(2)], 0)).await;
        assert_eq!(
            call(&mut client, req(vec![with_limit(2)], 0))
                .await
                .overall_code(),
            Code::OverLimit,
            "{kind}"
        );
        // Another limit value counts apart, and so does the configured rule.
        assert_eq!(
            call(&mut client, req(vec![with_limit(3)], 0))
                .await
                .statuses[0]
                .limit_remaining,
            2,
            "{kind}"
        );
        assert_eq!(
            call(&mut client, req(vec![d(&[("ip", "o")])], 0))
                .await
                .statuses[0]
                .limit_remaining,
            2,
            "{kind}"
        );
        // Request hits: 2 of path's 5.
        let r = call(&mut client, req(vec![d(&[("path", "/h")])], 2)).await;
        assert_eq!(r.statuses[0].limit_remaining, 3, "{kind}");
        // A per-descriptor hits_addend wins; 0 checks without charging.
        let check = || RateLimitDescriptor {
            hits_addend: Some(0),
            ..d(&[("path", "/h")])
        };
        let r = call(&mut client, req(vec![check()], 2)).await;
        assert_eq!(
            (r.overall_code(), r.statuses[0].limit_remaining),
            (Code::Ok, 3),
            "{kind}"
        );
        let three = RateLimitDescriptor {
            hits_addend: Some(3),
            ..d(&[("path", "/h")])
        };
        assert_eq!(
            call(&mut client, req(vec![three], 1)).await.statuses[0].limit_remaining,
            0,
            "{kind}"
        );
        // Spent: a check now is over (one more unit would be refused), and charges the other
        // descriptor nothing.
        let r = call(&mut client, req(vec![check(), d(&[("ip", "c")])], 1)).await;
        assert_eq!(
            (r.overall_code(), r.statuses[0].code()),
            (Code::OverLimit, Code::OverLimit),
            "{kind}"
        );
        assert_eq!(
            call(&mut client, req(vec![d(&[("ip", "c")])], 1))
                .await
                .statuses[0]
                .limit_remaining,
            2,
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaces_shadow_quota_and_several_limits() {
    let (_server, stores) = stores("rls-modes").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store)).await;
        let r = call(
            &mut client,
            req(vec![d(&[("user", "u")]), d(&[("vip", "u")])], 1),
        )
        .await;
        assert!(
            r.statuses[0].current_limit.is_none(),
            "{kind}: user is replaced"
        );
        assert_eq!(r.statuses[1].limit_remaining, 99, "{kind}");
        // Shadow: over, answered OK, and the enforced descriptor is charged.
        for left in [2, 1] {
            let r = call(
                &mut client,
                req(vec![d(&[("shadow", "s")]), d(&[("ip", "s")])], 1),
            )
            .await;
            assert_eq!(
                (r.overall_code(), r.statuses[0].code()),
                (Code::Ok, Code::Ok),
                "{kind}"
            );
            assert_eq!(r.statuses[1].limit_remaining, left, "{kind}");
        }
        // Quota: over alone is over; beside an OK quota descriptor it is not.
        call(&mut client, req(vec![d(&[("quota", "a")])], 1)).await;
        assert_eq!(
            call(&mut client, req(vec![d(&[("quota", "a")])], 1))
                .await
                .overall_code(),
            Code::OverLimit,
            "{kind}"
        );
        let r = call(
            &mut client,
            req(vec![d(&[("quota", "a")]), d(&[("quota", "b")])], 1),
        )
        .await;
        assert_eq!(r.overall_code(), Code::Ok, "{kind}");
        assert_eq!(r.statuses[0].code(), Code::OverLimit, "{kind}");
        // Two limits on one descriptor: checked and charged together.
        let r = call(&mut client, req(vec![d(&[("two", "t")])], 1)).await;
        assert_eq!(
            (limit_of(&r.statuses[0]).0, r.statuses[0].limit_remaining),
            (2, 1),
            "{kind}"
        );
        call(&mut client, req(vec![d(&[("two", "t")])], 1)).await;
        let r = call(&mut client, req(vec![d(&[("two", "t")])], 1)).await;
        assert_eq!(
            (r.overall_code(), limit_of(&r.statuses[0]).2),
            (Code::OverLimit, "two_short".into()),
            "{kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_under_concurrency() {
    let (_server, stores) = stores("rls-conc").await;
    for (kind, store) in stores {
        let client = serve(RateLimitService::builder(store)).await;
        let calls = (0..100).map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move { call(&mut client, req(vec![d(&[("conc", "c")])], 1)).await })
        });
        let mut ok = 0;
        for handle in calls.collect::<Vec<_>>() {
            ok += usize::from(handle.await.unwrap().overall_code() == Code::Ok);
        }
        assert_eq!(ok, 20, "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_hits_are_refunded_when_a_later_check_refuses() {
    let (_server, stores) = stores("rls-refund").await;
    for (kind, store) in stores {
        let mut client = serve(RateLimitService::builder(store).commit(Commit::AllOrNone)).await;
        let hits = |entries: &[(&str, &str)], n| RateLimitDescriptor {
            hits_addend: Some(n),
            ..d(entries)
        };
        call(&mut client, req(vec![hits(&[("path", "/r")], 4)], 1)).await;
        // ip (cost 1) is one check, admitted; path (cost 2, 1 left) the next, refused.
        let r = call(
            &mut client,
            req(vec![hits(&[("ip", "r")], 1), hits(&[("path", "/r")], 2)], 1),
        )
        .await;
        assert_eq!(r.overall_code(), Code::OverLimit, "{kind}");
        assert_eq!(r.statuses[0].code(), Code::Ok, "{kind}");
        let refunded = crate::support::eventually(Duration::from_secs(10), async || {
            let peek = call(&mut client, req(vec![hits(&[("ip", "r")], 0)], 1)).await;
            peek.statuses[0].limit_remaining == 3
        })
        .await;
        assert!(
            refunded,
            "{kind}: the refused request's charge on ip was not given back"
        );
    }
}

//! Hierarchical quotas: each limit of a policy counted under its own key (per client, per
//! tenant, global), checked and charged all or none in one store call. On the memory store, on
//! real Redis with two layer instances under concurrency, and across a real 3-master Cluster.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use http::StatusCode;
use redlimit::key::{Global, Header, PerLimit};
use redlimit::store::{MemoryStore, RedisStore, Store};
use redlimit::{Decision, Key, KeyExtractor, Limit, Policy, RateLimitLayer};
use support::*;

const HOUR: Duration = Duration::from_secs(3600);

/// Per client 3, per tenant 5, for everyone 8 (an hour each: nothing refills during a test).
fn three_levels() -> Policy {
    Policy::new(
        "tiers",
        [
            Limit::gcra(3, HOUR).unwrap(),
            Limit::fixed_window(5, HOUR).unwrap(),
            Limit::token_bucket(8, HOUR).unwrap(),
        ],
    )
    .unwrap()
}

fn key(client: &str, tenant: &str) -> Key {
    Key::new(client)
        .with_limit_key(1, Key::new(tenant))
        .with_limit_key(2, Key::new("global"))
}

/// The extractor of the layer tests: client and tenant from headers, then everyone.
fn per_limit() -> PerLimit {
    PerLimit::new(Header::new("x-client").unwrap())
        .limit(1, Header::new("x-tenant").unwrap())
        .limit(2, Global)
}

fn request_of(client: &str, tenant: &str) -> http::Request<axum::body::Body> {
    request(
        "/",
        "10.0.0.1",
        &[("x-client", client), ("x-tenant", tenant)],
    )
}

/// The key the layer counts `client` of `tenant` under.
fn layer_key(client: &str, tenant: &str) -> Key {
    let (parts, _) = request_of(client, tenant).into_parts();
    per_limit().extract(&parts).unwrap()
}

/// (allowed, denying limit, remaining of each limit) of one check.
fn outcome(d: &Decision) -> (bool, Option<usize>, Vec<u64>) {
    let remaining = d.limits().iter().map(|l| l.remaining()).collect();
    (d.is_allowed(), d.denied_by(), remaining)
}

/// The scenario both stores must agree on, step by step.
async fn walk(store: &dyn Store) -> Vec<(bool, Option<usize>, Vec<u64>)> {
    let policy = three_levels();
    let mut out = Vec::new();
    let check = |client: &str, tenant: &str| {
        let k = key(client, tenant);
        let policy = policy.clone();
        let fut = store.check(&policy, &k, 1);
        async move { outcome(&fut.await.unwrap()) }
    };
    // a1 (tenant t1): three, then its own limit denies.
    for _ in 0..3 {
        out.push(check("a1", "t1").await);
    }
    out.push(check("a1", "t1").await);
    // a2 (t1): two fill the tenant; the third is the tenant's to deny.
    for _ in 0..3 {
        out.push(check("a2", "t1").await);
    }
    // b1 (t2): three more fill the global limit of 8.
    for _ in 0..3 {
        out.push(check("b1", "t2").await);
    }
    // c1 (t3): nothing left for anyone.
    out.push(check("c1", "t3").await);
    out
}

fn assert_walk(steps: &[(bool, Option<usize>, Vec<u64>)]) {
    let allowed: Vec<bool> = steps.iter().map(|s| s.0).collect();
    assert_eq!(
        allowed,
        [
            true, true, true, false, true, true, false, true, true, true, false
        ]
    );
    // Who denied: the client, then the tenant, then everyone.
    assert_eq!(steps[3].1, Some(0));
    assert_eq!(steps[6].1, Some(1));
    assert_eq!(steps[10].1, Some(2));
    // Denied by the tenant, a2 was charged nothing: its own limit still has 1 of 3.
    assert_eq!(steps[6].2, vec![1, 0, 3]);
    assert_eq!(steps[9].2, vec![0, 2, 0]);
    assert_eq!(steps[10].2, vec![3, 5, 0]);
}

#[tokio::test]
async fn memory_counts_each_limit_under_its_own_key() {
    let steps = walk(&MemoryStore::new()).await;
    assert_walk(&steps);
}

#[tokio::test]
async fn redis_counts_each_limit_under_its_own_key_as_memory_does() {
    let server = RedisServer::start();
    let store = redis_store(&server, "tiers").await;
    let steps = walk(&store).await;
    assert_walk(&steps);
    assert_eq!(steps, walk(&MemoryStore::new()).await);
}

#[tokio::test]
async fn inspect_and_reset_see_every_level() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "tiers-admin").await;
    let memory = MemoryStore::new();
    let stores: [&dyn Store; 2] = [&redis, &memory];
    let policy = three_levels();
    for store in stores {
        for _ in 0..2 {
            assert!(
                store
                    .check(&policy, &key("a1", "t1"), 1)
                    .await
                    .unwrap()
                    .is_allowed()
            );
        }
        assert!(
            store
                .check(&policy, &key("a2", "t1"), 1)
                .await
                .unwrap()
                .is_allowed()
        );
        let state = store
            .admin()
            .unwrap()
            .inspect(&policy, &key("a2", "t1"))
            .await
            .unwrap();
        let remaining: Vec<u64> = state.limits().iter().map(|l| l.remaining()).collect();
        assert_eq!(remaining, [2, 2, 5], "{}", store.kind());
        store
            .admin()
            .unwrap()
            .reset(&policy, &key("a2", "t1"))
            .await
            .unwrap();
        // Every level of a2's check starts afresh, the shared ones included; a1's own stays.
        let a1 = store
            .admin()
            .unwrap()
            .inspect(&policy, &key("a1", "t1"))
            .await
            .unwrap();
        let remaining: Vec<u64> = a1.limits().iter().map(|l| l.remaining()).collect();
        assert_eq!(remaining, [1, 5, 8], "{}", store.kind());
    }
}

/// Two replicas of a service on one Redis, 200 concurrent requests from 10 clients of three
/// tenants: per client 5, tenant t0 (four clients) 12, everyone 30. Every client asks for more
/// than all limits allow, so exactly 30 are admitted, and every level's count is the sum of
/// what was admitted under it: a request one level denied charged no other.
#[tokio::test]
async fn exact_across_two_instances_under_concurrency() {
    let server = RedisServer::start();
    let prefix = unique_prefix("tiers-two");
    let policy = Policy::new(
        "tiers",
        [
            Limit::gcra(5, HOUR).unwrap(),
            Limit::sliding_window(12, HOUR).unwrap(),
            Limit::fixed_window(30, HOUR).unwrap(),
        ],
    )
    .unwrap();
    let mut apps = Vec::new();
    let mut layers = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::builder(server.url())
            .prefix(&prefix)
            .connect()
            .await
            .unwrap();
        let layer = RateLimitLayer::builder(store, policy.clone())
            .key(per_limit())
            .deny_cache(0)
            // Every request decided by Redis, however slow a loaded test machine is.
            .max_store_calls(1000)
            .store_deadline(Duration::from_secs(30))
            .build()
            .expect("valid layer");
        apps.push(app(layer.clone()));
        layers.push(layer);
    }
    let tenant_of = |client: usize| match client {
        0..=3 => "t0",
        4..=6 => "t1",
        _ => "t2",
    };
    let mut tasks = Vec::new();
    for i in 0..200 {
        let app: Router = apps[i % 2].clone();
        let client = i % 10;
        tasks.push(tokio::spawn(async move {
            let name = format!("c{client}");
            let res = send(&app, request_of(&name, tenant_of(client))).await;
            (client, res.status())
        }));
    }
    let mut admitted: HashMap<usize, u64> = HashMap::new();
    for task in tasks {
        let (client, status) = task.await.unwrap();
        match status {
            StatusCode::OK => *admitted.entry(client).or_default() += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other}"),
        }
    }
    let total: u64 = admitted.values().sum();
    assert_eq!(total, 30, "{admitted:?}");
    let t0: u64 = (0..4).map(|c| admitted.get(&c).copied().unwrap_or(0)).sum();
    assert!(t0 <= 12, "{admitted:?}");
    assert!(admitted.values().all(|&n| n <= 5), "{admitted:?}");
    // Each level holds exactly what was admitted under it.
    for client in 0..10 {
        let k = layer_key(&format!("c{client}"), tenant_of(client));
        let state = layers[client % 2]
            .handle()
            .inspect(&policy, &k)
            .await
            .unwrap();
        let used: Vec<u64> = state
            .limits()
            .iter()
            .map(|l| l.limit().count() - l.remaining())
            .collect();
        let mine = admitted.get(&client).copied().unwrap_or(0);
        let tenant: u64 = (0..10)
            .filter(|&c| tenant_of(c) == tenant_of(client))
            .map(|c| admitted.get(&c).copied().unwrap_or(0))
            .sum();
        assert_eq!(used, [mine, tenant, 30], "client {client}");
    }
}

#[tokio::test]
async fn a_denial_names_the_level_and_its_key() {
    let layer = RateLimitLayer::builder(MemoryStore::new(), three_levels())
        .key(per_limit())
        .build()
        .expect("valid layer");
    let router = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer);
    for _ in 0..3 {
        assert_eq!(
            send(&router, request_of("a1", "t1")).await.status(),
            StatusCode::OK
        );
    }
    for _ in 0..2 {
        assert_eq!(
            send(&router, request_of("a2", "t1")).await.status(),
            StatusCode::OK
        );
    }
    let denied = send(&router, request_of("a3", "t1")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let decision = denied.extensions().get::<Decision>().unwrap();
    assert_eq!(decision.denied_by(), Some(1));
    let tenant = layer_key("a3", "t1");
    assert_eq!(decision.denied_key(), Some(tenant.limit_key(1)));
    assert!(
        decision
            .denied_key()
            .unwrap()
            .as_str()
            .starts_with("header:x-tenant:")
    );
}

/// A request without one of the keys has none: the layer's missing-key setting decides (by
/// default, every limit counts under the peer's IP).
#[tokio::test]
async fn a_missing_level_key_means_no_key() {
    let layer = RateLimitLayer::builder(MemoryStore::new(), three_levels())
        .key(per_limit())
        .build()
        .expect("valid layer");
    let app = app(layer);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let res = send(&app, request("/", "10.0.0.1", &[("x-client", "a1")])).await;
        statuses.push(res.status());
    }
    assert_eq!(statuses[..3], [StatusCode::OK; 3]);
    assert_eq!(statuses[3], StatusCode::TOO_MANY_REQUESTS, "3 per peer IP");
    let allow = RateLimitLayer::builder(MemoryStore::new(), three_levels())
        .key(per_limit())
        .on_missing_key(redlimit::layer::MissingKey::Allow)
        .build()
        .expect("valid layer");
    let app = support::app(allow);
    for _ in 0..10 {
        let res = send(&app, request("/", "10.0.0.1", &[("x-client", "a1")])).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
}

/// Across a real 3-master Cluster: tenants are the hash tags, so checks spread over the
/// masters; each is exact. A policy with a global limit runs on the one slot of `{global}`.
#[tokio::test]
async fn cluster_runs_each_check_on_its_widest_key_s_slot() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("tiers-cluster"))
        .connect()
        .await
        .unwrap();
    let two_levels = Policy::new(
        "two",
        [
            Limit::gcra(3, HOUR).unwrap(),
            Limit::fixed_window(5, HOUR).unwrap(),
        ],
    )
    .unwrap();
    // Tenants on every master.
    let mut masters_seen = std::collections::HashSet::new();
    let mut tenants = Vec::new();
    for t in 0.. {
        let tenant = format!("tenant-{t}");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&tenant)
            .query(&mut cluster.nodes[0].connection())
            .unwrap();
        if masters_seen.insert(cluster.master_of(slot)) {
            tenants.push(tenant);
        }
        if masters_seen.len() == 3 {
            break;
        }
    }
    for tenant in &tenants {
        let k = |client: &str| Key::new(client).with_limit_key(1, Key::new(tenant.as_str()));
        let mut allowed = 0;
        for client in ["a", "b", "c"] {
            for _ in 0..4 {
                let d = store.check(&two_levels, &k(client), 1).await.unwrap();
                allowed += u32::from(d.is_allowed());
            }
        }
        // a: 3, b: 2 (the tenant's 5), c: none.
        assert_eq!(allowed, 5, "{tenant}");
        let c = store
            .admin()
            .unwrap()
            .inspect(&two_levels, &k("c"))
            .await
            .unwrap();
        assert_eq!(
            c.limits()[0].remaining(),
            3,
            "{tenant}: c was charged nothing"
        );
        assert_eq!(c.limits()[1].remaining(), 0, "{tenant}");
    }
    let steps = walk(&store).await;
    assert_walk(&steps);
}

/// A reset through the layer of one client's key resets its tenant too: the layer drops the
/// denials it cached for the tenant's other clients, which may pass now.
#[tokio::test]
async fn a_reset_of_a_shared_level_drops_other_clients_cached_denials() {
    let server = RedisServer::start();
    let store = redis_store(&server, "tiers-reset").await;
    let policy = three_levels();
    let layer = RateLimitLayer::builder(store, policy.clone())
        .key(per_limit())
        .build()
        .expect("valid layer");
    let app = app(layer.clone());
    for _ in 0..3 {
        assert_eq!(
            send(&app, request_of("a1", "t1")).await.status(),
            StatusCode::OK
        );
    }
    for _ in 0..2 {
        assert_eq!(
            send(&app, request_of("a2", "t1")).await.status(),
            StatusCode::OK
        );
    }
    // a2 is denied by the tenant, and the layer caches that denial.
    for source in ["Store", "DenyCache"] {
        let res = send(&app, request_of("a2", "t1")).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let decision = res.extensions().get::<Decision>().unwrap();
        assert_eq!(format!("{:?}", decision.source()), source);
    }
    layer
        .handle()
        .reset(&policy, &layer_key("a1", "t1"))
        .await
        .unwrap();
    assert_eq!(
        send(&app, request_of("a2", "t1")).await.status(),
        StatusCode::OK
    );
}

/// The penalty box of a hierarchical policy holds the client, not its tenant; Redis and
/// memory agree.
#[tokio::test]
async fn a_penalty_box_holds_the_client_whichever_level_denied() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "tiers-box").await;
    let memory = MemoryStore::new();
    let policy = three_levels().penalty(Duration::from_secs(600)).unwrap();
    let mut runs = Vec::new();
    for store in [&redis as &dyn Store, &memory] {
        let mut run = Vec::new();
        let mut check = async |client: &str, tenant: &str| {
            let d = store.check(&policy, &key(client, tenant), 1).await.unwrap();
            run.push((d.is_allowed(), d.denied_by(), d.is_penalized()));
            d
        };
        for _ in 0..3 {
            assert!(check("a1", "t1").await.is_allowed());
        }
        assert!(check("a2", "t1").await.is_allowed());
        // a1's own limit denies it: a1 is boxed; a2 is not.
        assert!(check("a1", "t1").await.is_penalized());
        assert!(check("a2", "t1").await.is_allowed());
        // The tenant's 5 are used: a2 is denied by it, and boxed.
        let denied = check("a2", "t1").await;
        assert_eq!((denied.denied_by(), denied.is_penalized()), (Some(1), true));
        // Boxed clients are denied without consuming; another tenant's client is not boxed.
        assert!(check("a1", "t1").await.is_penalized());
        assert!(check("b1", "t2").await.is_allowed());
        runs.push(run);
    }
    assert_eq!(runs[0], runs[1], "Redis and memory agree");
}

/// A refund of a hierarchical check gives the units back at every level, once.
#[tokio::test]
async fn a_refund_restores_every_level_once() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "tiers-refund").await;
    let memory = MemoryStore::new();
    let policy = three_levels();
    for store in [&redis as &dyn Store, &memory] {
        let remaining = async |client: &str| -> Vec<u64> {
            let state = store
                .admin()
                .unwrap()
                .inspect(&policy, &key(client, "t1"))
                .await
                .unwrap();
            state.limits().iter().map(|l| l.remaining()).collect()
        };
        assert!(
            store
                .check(&policy, &key("a1", "t1"), 1)
                .await
                .unwrap()
                .is_allowed()
        );
        let d = store.check(&policy, &key("a2", "t1"), 1).await.unwrap();
        assert_eq!(remaining("a2").await, [2, 3, 6], "{}", store.kind());
        let refund = || redlimit::store::Refund::of(&d, 1).unwrap();
        assert!(
            store
                .refunds()
                .unwrap()
                .refund(&policy, &key("a2", "t1"), refund())
                .await
                .unwrap()
        );
        assert_eq!(remaining("a2").await, [3, 4, 7], "{}", store.kind());
        assert!(
            !store
                .refunds()
                .unwrap()
                .refund(&policy, &key("a2", "t1"), refund())
                .await
                .unwrap()
        );
        assert_eq!(remaining("a2").await, [3, 4, 7], "{}: once", store.kind());
        // a1's own level was not touched.
        assert_eq!(remaining("a1").await, [2, 4, 7], "{}", store.kind());
    }
}

/// An in-flight limit counted per tenant: the tenant's clients share its slots, and a release
/// gives a slot back to whichever client asks next.
#[tokio::test]
async fn an_in_flight_limit_per_tenant() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "tiers-in-flight").await;
    let memory = MemoryStore::new();
    let policy = Policy::new(
        "uploads",
        [
            Limit::gcra(100, HOUR).unwrap(),
            Limit::concurrency(2, HOUR).unwrap(),
        ],
    )
    .unwrap();
    let key = |client: &str| Key::new(client).with_limit_key(1, Key::new("tenant:t"));
    for store in [&redis as &dyn Store, &memory] {
        let a = store.check(&policy, &key("a"), 1).await.unwrap();
        let b = store.check(&policy, &key("b"), 1).await.unwrap();
        assert!(a.is_allowed() && b.is_allowed(), "{}", store.kind());
        let c = store.check(&policy, &key("c"), 1).await.unwrap();
        assert_eq!(
            c.denied_by(),
            Some(1),
            "{}: the tenant's 2 slots",
            store.kind()
        );
        // c was charged nothing by its own rate.
        let state = store
            .admin()
            .unwrap()
            .inspect(&policy, &key("c"))
            .await
            .unwrap();
        assert_eq!(state.limits()[0].remaining(), 100, "{}", store.kind());
        store
            .release(&policy, &key("a"), a.lease().unwrap())
            .await
            .unwrap();
        let c = store.check(&policy, &key("c"), 1).await.unwrap();
        assert!(c.is_allowed(), "{}: a's slot went back", store.kind());
    }
}

/// A local-first store decides keys with limit keys exactly, through Redis: each level would
/// need fleet state of its own.
#[tokio::test]
async fn local_first_mode_decides_level_keys_exactly() {
    let server = RedisServer::start();
    let store = redis_store(&server, "tiers-local-first")
        .await
        .local_first(Duration::from_millis(100))
        .unwrap();
    let steps = walk(&store).await;
    assert_walk(&steps);
    let d = store
        .check(&three_levels(), &key("z", "t9"), 1)
        .await
        .unwrap();
    assert_eq!(d.source(), redlimit::DecisionSource::Store);
}

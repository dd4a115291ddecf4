//! The penalty box (`Policy::penalty`): a key a limit denies stays denied for the penalty,
//! nothing consumed, on every replica; it ends on time; the memory store and the Redis
//! scripts box identically.

use crate::support;

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use http::StatusCode;
use redlimit::store::Refunds;
use redlimit::store::{ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, Decision, DecisionSource, Key, Limit, Policy, RateLimitLayer};
use support::*;

/// Near 2023-11, off any round boundary.
const T0: u64 = 1_700_000_123_456_789;
const SECOND: u64 = 1_000_000;

/// One check at `now` on both stores; they must agree.
async fn both(
    memory: &MemoryStore,
    clock: &ManualClock,
    redis: &RedisStore,
    policy: &Policy,
    key: &Key,
    cost: u64,
    now: u64,
) -> Decision {
    clock.set(now);
    let m = memory.check_now(policy, key, cost);
    let r = redlimit::__private::check_at(redis, policy, key, cost, now)
        .into_future()
        .await
        .expect("redis check");
    assert_eq!(m, r, "memory and Redis disagree at {now} for {policy:?}");
    assert_eq!(m.is_penalized(), r.is_penalized());
    m
}

#[tokio::test]
async fn the_box_holds_then_ends_on_time_alike_on_redis_and_in_memory() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "penalty").await;
    let mut policies: Vec<Policy> = Algorithm::ALL
        .map(|a| {
            Policy::new(
                a.name(),
                [Limit::new(a, 2, Duration::from_secs(1)).unwrap()],
            )
            .unwrap()
        })
        .to_vec();
    policies.push(every_algorithm_policy("mix", 2, Duration::from_secs(1)));
    for policy in policies {
        let policy = policy.penalty(Duration::from_secs(5)).unwrap();
        let clock = ManualClock::new(T0);
        let memory = MemoryStore::with_clock(clock.clone());
        let key = Key::new("k");
        let check = |cost, now| both(&memory, &clock, &redis, &policy, &key, cost, now);

        // A cost no limit could ever admit is refused without boxing the key.
        let huge = check(3, T0).await;
        assert!(!huge.is_allowed() && !huge.is_penalized() && huge.exceeds_capacity());
        assert!(check(1, T0).await.is_allowed());
        assert!(check(1, T0).await.is_allowed());
        let denied = check(1, T0).await;
        assert!(!denied.is_allowed() && denied.is_penalized(), "{policy:?}");
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(5)));
        // Long after the limit alone would admit it, the key is still in the box, its wait
        // what is left of the box, and being asked again does not lengthen it.
        let boxed = check(1, T0 + 3 * SECOND / 2).await;
        assert!(!boxed.is_allowed() && boxed.is_penalized());
        assert_eq!(
            boxed.retry_after(),
            Some(Duration::from_micros(7 * SECOND / 2))
        );
        assert_eq!(boxed.limits()[0].remaining(), 0);
        let last = check(1, T0 + 5 * SECOND - 1).await;
        assert_eq!(last.retry_after(), Some(Duration::from_micros(1)));
        // Out of the box at its end exactly, with the limits' state as it was (nothing was
        // consumed while boxed).
        let out = check(1, T0 + 5 * SECOND).await;
        assert!(out.is_allowed() && !out.is_penalized(), "{policy:?}");
        assert_eq!(out.remaining(), Some(1));
    }
}

#[tokio::test]
async fn a_reset_empties_the_box() {
    let server = RedisServer::start();
    let redis = redis_store(&server, "penalty-reset").await;
    let policy = gcra_policy("p", 1, Duration::from_secs(60))
        .penalty(Duration::from_secs(600))
        .unwrap();
    let memory = MemoryStore::new();
    let key = Key::new("k");
    for store in [&redis as &dyn Store, &memory] {
        assert!(
            store
                .check(&policy, &key, 1)
                .into_future()
                .await
                .unwrap()
                .is_allowed()
        );
        let denied = store.check(&policy, &key, 1).into_future().await.unwrap();
        assert!(denied.is_penalized());
        store
            .admin()
            .expect("admin")
            .reset(&policy, &key)
            .await
            .unwrap();
        let fresh = store.check(&policy, &key, 1).into_future().await.unwrap();
        assert!(fresh.is_allowed(), "{}", store.kind());
    }
}

/// Two instances of a service share one Redis: a key denied through A is boxed through B too,
/// with `Retry-After` the time left in the box, answered by B's deny cache after its first
/// denial; the box ends no earlier than the penalty.
#[tokio::test]
async fn the_box_holds_across_instances_and_ends_on_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, "penalty-layers").await;
    // GCRA alone would admit again within 100 ms.
    let policy = gcra_policy("p", 2, Duration::from_millis(200))
        .penalty(Duration::from_secs(3))
        .unwrap();
    let layer = || {
        RateLimitLayer::builder(store.clone(), policy.clone())
            .key(api_key())
            .build()
            .expect("valid layer")
    };
    let (a, b) = (app(layer()), app(layer()));
    let get = |app: &axum::Router| {
        let app = app.clone();
        async move { send(&app, request("/", "10.0.0.1", &[("x-api-key", "k")])).await }
    };
    assert_eq!(get(&a).await.status(), StatusCode::OK);
    assert_eq!(get(&a).await.status(), StatusCode::OK);
    let before_denial = Instant::now();
    let denied = get(&a).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&denied, "retry-after"), "3");
    assert!(
        denied
            .extensions()
            .get::<Decision>()
            .unwrap()
            .is_penalized()
    );

    let through_b = get(&b).await;
    assert_eq!(through_b.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = header(&through_b, "retry-after").parse().unwrap();
    // GCRA's wait rounds up to 1 s; the box's is 2 or 3 until 2 s have passed since the
    // denial (a machine that slow cannot tell them apart).
    assert!(
        (2..=3).contains(&retry)
            || (retry == 1 && before_denial.elapsed() >= Duration::from_secs(2)),
        "the box's time left, not GCRA's: {retry} after {:?}",
        before_denial.elapsed()
    );
    let decision = through_b.extensions().get::<Decision>().unwrap();
    assert!(decision.is_penalized() && decision.source() == DecisionSource::Store);
    let cached = get(&b).await;
    assert_eq!(cached.status(), StatusCode::TOO_MANY_REQUESTS);
    let decision = cached.extensions().get::<Decision>().unwrap();
    assert_eq!(decision.source(), DecisionSource::DenyCache);
    assert!(decision.is_penalized());

    // Hammered while boxed (every poll a denial), the key still comes out.
    let out = eventually(Duration::from_secs(15), async || {
        get(&b).await.status() == StatusCode::OK
    })
    .await;
    assert!(out, "the box never ended");
    assert!(
        before_denial.elapsed() >= Duration::from_secs(3),
        "out of the box after {:?}, before the penalty",
        before_denial.elapsed()
    );
}

#[test]
fn a_penalty_must_be_a_sane_duration() {
    let policy = gcra_policy("p", 1, Duration::from_secs(1));
    assert!(policy.clone().penalty(Duration::from_micros(999)).is_err());
    assert!(
        policy
            .clone()
            .penalty(Duration::from_secs(400 * 86_400 * 365))
            .is_err()
    );
    assert!(policy.penalty(Duration::from_millis(1)).is_ok());
}

/// Concurrent checks go to Redis in batches (one script call for many decisions): the batch
/// script boxes as the single one does.
#[tokio::test]
async fn a_batch_boxes_as_single_calls_do() {
    let server = RedisServer::start();
    let store = redis_store(&server, "penalty-batch").await;
    let policy = every_algorithm_policy("mix", 3, Duration::from_secs(60))
        .penalty(Duration::from_secs(60))
        .unwrap();
    let key = Key::new("k");
    let mut redis = server.connection();
    let calls = |redis: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("commandstats").query(redis).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
            .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
    };
    let before = calls(&mut redis);
    // Cost 2 of 3: one admission, then a denial with 1 unit left that boxes the key, then
    // denials in the box (nothing left).
    let checks = (0..64).map(|_| store.check(&policy, &key, 2).into_future());
    let decisions: Vec<Decision> = futures_util::future::join_all(checks)
        .await
        .into_iter()
        .map(|d| d.expect("check"))
        .collect();
    assert!(
        calls(&mut redis) - before < 64,
        "some decisions were batched"
    );
    assert_eq!(decisions.iter().filter(|d| d.is_allowed()).count(), 1);
    let denied: Vec<&Decision> = decisions.iter().filter(|d| !d.is_allowed()).collect();
    assert!(denied.iter().all(|d| d.is_penalized()));
    let boxing: Vec<&&Decision> = denied.iter().filter(|d| d.remaining() == Some(1)).collect();
    assert_eq!(
        boxing.len(),
        1,
        "one denial by the limits, the rest by the box"
    );
    // The box's 60 s, or a sliding window's longer wait.
    assert!(boxing[0].retry_after() >= Some(Duration::from_secs(60)));
}

/// On a Redis Cluster the box and a refund's marker share the key's slot with its state (one
/// script call each, no CROSSSLOT), for keys spread over every master.
#[tokio::test]
async fn boxes_and_refunds_on_a_cluster() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("penalty-cluster"))
        .connect()
        .await
        .expect("connect to the test cluster");
    let policy = every_algorithm_policy("mix", 2, Duration::from_secs(60))
        .penalty(Duration::from_secs(60))
        .unwrap();
    for i in 0..24 {
        let key = Key::new(format!("client-{i}"));
        let first = store.check(&policy, &key, 1).into_future().await.unwrap();
        assert!(first.is_allowed());
        let refund = redlimit::store::Refund::of(&first, 1).unwrap();
        assert!(
            store.refund(&policy, &key, refund).await.unwrap(),
            "{key:?}"
        );
        for _ in 0..2 {
            assert!(
                store
                    .check(&policy, &key, 1)
                    .into_future()
                    .await
                    .unwrap()
                    .is_allowed()
            );
        }
        let denied = store.check(&policy, &key, 1).into_future().await.unwrap();
        assert!(denied.is_penalized(), "{key:?}");
        // The box's 60 s, or a sliding window's longer wait.
        assert!(denied.retry_after() >= Some(Duration::from_secs(60)));
    }
}

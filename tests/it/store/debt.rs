//! Charges land (`Store::charge`): a cost already incurred counts past the limit, as debt, on
//! every algorithm; checks are refused meanwhile with 0 remaining and a retry when the debt is
//! paid; time pays it; and the debt is capped, so a client charged for every call while
//! refused is never locked out for longer than about a period once it stops. On a real Redis
//! (time driven through the scripts' test-only argument) and in memory (a `ManualClock`),
//! which must answer alike at every step; then on a Redis Cluster.

use crate::support;

use std::future::IntoFuture;
use std::time::Duration;

use redlimit::store::{ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, Decision, Key, Limit, Policy};
use support::{RedisCluster, RedisServer, every_algorithm_policy, unique_prefix};

/// A window start (whole seconds), so window ends fall where the expectations say.
const T0: u64 = 1_700_003_000_000_000;
const MS: u64 = 1_000;
const S: u64 = 1_000_000;

/// 4 per second: GCRA and token bucket emit one unit every 250 ms.
fn policy(algorithm: Algorithm) -> Policy {
    Policy::new(
        format!("debt-{algorithm}"),
        [Limit::new(algorithm, 4, Duration::from_secs(1)).unwrap()],
    )
    .unwrap()
}

/// A Redis store and a memory store on a manual clock, asked the same at the same times.
struct Both {
    redis: RedisStore,
    memory: MemoryStore,
    clock: ManualClock,
}

impl Both {
    async fn new(server: &RedisServer) -> Both {
        let redis = RedisStore::builder(server.url())
            .prefix(unique_prefix("debt"))
            .connect()
            .await
            .unwrap();
        let clock = ManualClock::new(T0);
        Both {
            redis,
            memory: MemoryStore::with_clock(clock.clone()),
            clock,
        }
    }

    async fn charge(&self, policy: &Policy, key: &Key, cost: u64, now: u64) -> Decision {
        self.clock.set(now);
        let from_redis = redlimit::__private::charge_at(&self.redis, policy, key, cost, now)
            .await
            .unwrap();
        let from_memory = self.memory.charge_now(policy, key, cost);
        assert_eq!(
            from_redis,
            from_memory,
            "charge {cost} at t0+{}µs",
            now - T0
        );
        from_redis
    }

    async fn check(&self, policy: &Policy, key: &Key, cost: u64, now: u64) -> Decision {
        self.clock.set(now);
        let from_redis = redlimit::__private::check_at(&self.redis, policy, key, cost, now)
            .await
            .unwrap();
        let from_memory = self.memory.check_now(policy, key, cost);
        // Alike but for the lease ids, which each store makes its own.
        assert_eq!(
            (from_redis.is_allowed(), from_redis.limits()),
            (from_memory.is_allowed(), from_memory.limits()),
            "check {cost} at t0+{}µs",
            now - T0
        );
        from_redis
    }
}

/// µs until a request of cost 1 passes after 10 units charged at 100 ms into a window on a
/// fresh key of 4 per second: the debt capped at twice the limit (8 units) in every case.
fn paid_after(algorithm: Algorithm) -> u64 {
    match algorithm {
        // 8 units owed at 250 ms each: 2 s; one unit fits once 3 are left (1.25 s).
        Algorithm::Gcra | Algorithm::TokenBucket => 1_250 * MS,
        // The window ends 900 ms later.
        Algorithm::FixedWindow => 900 * MS,
        // 8 weigh into the next window until 8 · (P − e) / P ≤ 3: e ≥ 625 ms.
        Algorithm::SlidingWindow => 900 * MS + 625 * MS,
        // The 8 units leave the span a period after they were recorded.
        Algorithm::SlidingLog => S,
        _ => unreachable!("a rate algorithm"),
    }
}

#[tokio::test]
async fn a_charge_lands_past_the_limit_and_time_pays_the_debt() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    let key = Key::new("client");
    for algorithm in Algorithm::ALL {
        let policy = policy(algorithm);
        let now = T0 + 100 * MS;
        let paid = paid_after(algorithm);
        let after = both.charge(&policy, &key, 10, now).await;
        assert!(!after.is_allowed(), "{algorithm}: in debt");
        assert!(!after.is_penalized());
        assert_eq!(after.remaining(), Some(0), "{algorithm}");
        assert_eq!(
            after.retry_after(),
            Some(Duration::from_micros(paid)),
            "{algorithm}: retry when the debt is paid"
        );
        // A check finds what the charge said, consuming nothing.
        for at in [now, now + paid - 1] {
            let refused = both.check(&policy, &key, 1, at).await;
            assert!(!refused.is_allowed(), "{algorithm} at +{}µs", at - now);
            assert_eq!(refused.remaining(), Some(0));
            assert_eq!(
                refused.retry_after(),
                Some(Duration::from_micros(now + paid - at))
            );
        }
        assert!(
            both.check(&policy, &key, 1, now + paid).await.is_allowed(),
            "{algorithm}: paid on time"
        );
    }
}

/// Under the cap, every 50 ms a call charged while refused (the Go service's default: every
/// call charges), 58 of them at five times the limit's rate (the last 50 ms before a window
/// ends): the wait any reply asks for
/// stays bounded, and once the client stops it is let through after that wait.
#[tokio::test]
async fn a_client_charging_while_refused_is_never_locked_out() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    let key = Key::new("flood");
    for algorithm in Algorithm::ALL {
        let policy = policy(algorithm);
        let longest = match algorithm {
            // The debt of one period, then one emission interval.
            Algorithm::Gcra | Algorithm::TokenBucket => 1_250 * MS,
            // The rest of the window; a weighted count of 8 decaying in the next window.
            Algorithm::FixedWindow | Algorithm::SlidingLog => S,
            Algorithm::SlidingWindow => S + 625 * MS,
            _ => unreachable!("a rate algorithm"),
        };
        let mut now = T0 + 100 * MS;
        let mut last = None;
        for _ in 0..58 {
            let reply = both.charge(&policy, &key, 1, now).await;
            let wait = reply.retry_after().unwrap_or_default();
            assert!(
                wait <= Duration::from_micros(longest),
                "{algorithm}: asked to wait {wait:?} at t0+{}µs",
                now - T0
            );
            last = Some((now, wait));
            now += 50 * MS;
        }
        let (at, wait) = last.unwrap();
        assert!(!wait.is_zero(), "{algorithm}: still refused while flooding");
        let wait = u64::try_from(wait.as_micros()).unwrap();
        assert!(
            !both
                .check(&policy, &key, 1, at + wait - 1)
                .await
                .is_allowed()
        );
        assert!(
            both.check(&policy, &key, 1, at + wait).await.is_allowed(),
            "{algorithm}: let through once the debt is paid"
        );
    }
    // The log never held more than twice its limit: each charge past it added nothing.
    let members: u64 = redis::cmd("ZCARD")
        .arg(format!(
            "{}:debt-{}:{{flood}}:sl",
            both.redis.prefix(),
            Algorithm::SlidingLog
        ))
        .query(&mut server.connection())
        .unwrap();
    assert!(members <= 2 * 4 + 2, "{members} members in the log");
}

/// A charge does not take a concurrency slot, nor box the key; several limits are charged
/// in one call; a key with a tenant's limit key charges the tenant too.
#[tokio::test]
async fn a_charge_spares_slots_and_boxes_and_charges_every_level() {
    let server = RedisServer::start();
    let both = Both::new(&server).await;
    let second = Duration::from_secs(1);
    let policy = Policy::new(
        "debt-mix",
        [
            Limit::gcra(4, second).unwrap(),
            Limit::fixed_window(100, second).unwrap(),
            Limit::concurrency(2, Duration::from_secs(30)).unwrap(),
        ],
    )
    .unwrap()
    .penalty(Duration::from_secs(60))
    .unwrap();
    let key = Key::new("mix");
    let now = T0 + 100 * MS;
    let admitted = both.check(&policy, &key, 1, now).await;
    assert!(admitted.is_allowed());
    let after = both.charge(&policy, &key, 5, now).await;
    assert!(!after.is_penalized());
    let states = after.limits();
    assert_eq!(states[0].remaining(), 0);
    assert_eq!(states[1].remaining(), 94, "the window counted 6 of 100");
    assert_eq!(states[2].remaining(), 1, "one slot held, by the check");
    assert_eq!(after.denied_by(), Some(0));
    // The GCRA owes 2 units (a backlog of 1.5 s), no box: one unit passes 750 ms later.
    assert_eq!(after.retry_after(), Some(Duration::from_millis(750)));
    assert!(
        both.check(&policy, &key, 1, now + 750 * MS)
            .await
            .is_allowed()
    );

    // A client of tenant t: the tenant's limit is charged under the tenant's key.
    let hierarchy = Policy::new(
        "debt-tenant",
        [
            Limit::gcra(4, second).unwrap(),
            Limit::sliding_log(6, second).unwrap(),
        ],
    )
    .unwrap();
    let client = |name: &str| Key::new(name).with_limit_key(1, Key::new("tenant:t"));
    let after = both.charge(&hierarchy, &client("a"), 5, now).await;
    assert_eq!(after.limits()[1].remaining(), 1);
    let other = both.check(&hierarchy, &client("b"), 2, now).await;
    assert!(!other.is_allowed(), "the tenant owes what a charged");
    assert_eq!(other.denied_by(), Some(1));
}

/// On a Cluster, a charge's keys share the key's slot: every algorithm, many keys, no
/// `CROSSSLOT`, and every charge lands.
#[tokio::test]
async fn charges_land_on_a_cluster() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("debt-cluster"))
        .connect()
        .await
        .expect("connect to the test cluster");
    let policy = every_algorithm_policy("mix", 2, Duration::from_secs(60));
    for i in 0..24 {
        let key = Key::new(format!("client-{i}"));
        let after = store.charge(&policy, &key, 5).into_future().await.unwrap();
        assert!(!after.is_allowed());
        assert_eq!(after.remaining(), Some(0));
        let check = store.check(&policy, &key, 1).into_future().await.unwrap();
        assert!(!check.is_allowed(), "client-{i}: the charge landed");
    }
}

//! The rate limit service on local-first stores: four services, each on a `LocalFirstStore`
//! of its own over one real redis-server, share a hot descriptor at three times its limit.
//! The fleet admits what exact mode would (within the local-first load test's 10 %: see
//! `store/local_first.rs`), Redis sees about one sync per instance and interval rather than a
//! call per request, and every request's two counters are charged together or not at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::store::{Admin, Check, LocalFirstStore, Overrides, RedisStore, Refunds, Store};
use redlimit::{DecisionSource, Key, Policy};

use super::service::d;
use crate::store::local_first::{
    Checks, ONE_AT_A_TIME, client_commands, commands, exact_admits, within,
};
use crate::support::{RedisServer, eventually, unique_prefix};

/// The hot descriptor's limit: GCRA 200 a second, a burst of 200 (the layer's load test's).
const RATE: f64 = 200.0;
const BURST: f64 = 200.0;
/// The route descriptor's: wide, never the one that refuses.
const WIDE: u64 = 10_000_000;
/// Requests per second offered to each of the four services: three times the limit in all.
const OFFERED: u64 = 150;
const INTERVAL: Duration = Duration::from_millis(100);

const CONFIG: &str = "
domain: fleet
descriptors:
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 200, algorithm: gcra}
  - key: route
    rate_limit: {unit: day, requests_per_unit: 10000000}
";

fn config() -> RlsConfig {
    RlsConfig::parse([("fleet.yaml", CONFIG)], false).expect("test config")
}

/// Every request: the hot descriptor and the route's, one atomic check of two counters.
fn request() -> RateLimitRequest {
    RateLimitRequest {
        domain: "fleet".into(),
        descriptors: vec![d(&[("hot", "x")]), d(&[("route", "/api")])],
        hits_addend: 1,
    }
}

/// How one service's store decided: by Redis (a counter cold or joining there) or in memory,
/// and how often it went from memory back to Redis.
#[derive(Default)]
struct Seen {
    exact: AtomicU64,
    local: AtomicU64,
    cooled: AtomicU64,
    last_local: AtomicBool,
}

/// The real local-first store, every call its own, its decisions' sources counted.
struct Observed {
    store: LocalFirstStore,
    seen: Arc<Seen>,
}

impl Store for Observed {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        let check = self.store.check(policy, key, cost);
        let seen = Arc::clone(&self.seen);
        Check::pending(async move {
            let outcome = check.await;
            if let Ok(decision) = &outcome {
                let local = decision.source() == DecisionSource::LocalFirst;
                let counter = if local { &seen.local } else { &seen.exact };
                counter.fetch_add(1, Ordering::Relaxed);
                if seen.last_local.swap(local, Ordering::Relaxed) && !local {
                    seen.cooled.fetch_add(1, Ordering::Relaxed);
                }
            }
            outcome
        })
    }

    fn failure_domain(&self, policy: &Policy, key: &Key) -> u16 {
        self.store.failure_domain(policy, key)
    }

    fn kind(&self) -> &'static str {
        self.store.kind()
    }

    fn admin(&self) -> Option<&dyn Admin> {
        self.store.admin()
    }

    fn refunds(&self) -> Option<&dyn Refunds> {
        self.store.refunds()
    }

    fn overrides(&self) -> Option<&dyn Overrides> {
        self.store.overrides()
    }
}

struct Instance {
    service: RateLimitService,
    store: LocalFirstStore,
    seen: Arc<Seen>,
}

async fn instances(server: &RedisServer, prefix: &str) -> Vec<Instance> {
    let mut all = Vec::new();
    for _ in 0..4 {
        // Override polls slowed, so that the commands counted are the syncs' and heartbeats'.
        let redis = RedisStore::builder(server.url())
            .prefix(prefix)
            .override_poll(Duration::from_secs(5))
            .connect()
            .await
            .expect("connect to the test redis");
        let store = redis.local_first(INTERVAL).unwrap();
        let seen = Arc::new(Seen::default());
        let observed = Observed {
            store: store.clone(),
            seen: Arc::clone(&seen),
        };
        let service = RateLimitService::builder(observed)
            .config(config())
            .store_deadline(Duration::from_secs(5))
            .build();
        all.push(Instance {
            service,
            store,
            seen,
        });
    }
    let counted = eventually(Duration::from_secs(10), async || {
        all.iter().all(|i| i.store.instances() == 4)
    })
    .await;
    assert!(counted, "every instance heard the others' heartbeats");
    all
}

/// One request: whether it was admitted (`None`: no answer).
async fn ask(service: &RateLimitService) -> Option<bool> {
    let response = service.should_rate_limit(request()).await.ok()?;
    match response.overall_code() {
        Code::Ok => Some(true),
        Code::OverLimit => Some(false),
        _ => None,
    }
}

/// Requests back to back through each service until its store decides one in memory (every
/// counter hot there); answers the requests made.
async fn hot_everywhere(fleet: &[Instance]) -> Checks {
    let mut checks = Checks::new();
    for (i, one) in fleet.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while one.seen.local.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
            checks.push((Instant::now(), ask(&one.service).await));
        }
        assert!(
            one.seen.local.load(Ordering::Relaxed) > 0,
            "instance {i}: the request's counters turned hot"
        );
    }
    checks
}

/// Offers `OFFERED` requests a second to each service for `span` (three every tick; a load
/// held up by a busy machine resumes at its rate, as the layer's load test's does).
async fn load(fleet: &[Instance], span: Duration) -> (Checks, Duration) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for one in fleet {
        let service = one.service.clone();
        tasks.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_micros(3_000_000 / OFFERED));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut checks = Checks::new();
            while started.elapsed() < span {
                ticks.tick().await;
                for _ in 0..3 {
                    checks.push((Instant::now(), ask(&service).await));
                }
            }
            checks
        }));
    }
    let mut checks = Checks::new();
    for task in tasks {
        checks.extend(task.await.unwrap());
    }
    (checks, started.elapsed())
}

/// The units Redis holds for the route's counter, read by an exact service (a check of
/// nothing: its remaining).
async fn route_used(exact: &RateLimitService) -> Option<u64> {
    let read = RateLimitDescriptor {
        hits_addend: Some(0),
        ..d(&[("route", "/api")])
    };
    let response = exact
        .should_rate_limit(RateLimitRequest {
            domain: "fleet".into(),
            descriptors: vec![read],
            hits_addend: 0,
        })
        .await
        .ok()?;
    let remaining = response.statuses.first()?.limit_remaining;
    Some(WIDE - u64::from(remaining))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_services_on_local_first_stores_hold_a_hot_descriptor_at_three_times_its_rate() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let server = RedisServer::start();
    let prefix = unique_prefix("rls-lf");
    let fleet = instances(&server, &prefix).await;
    let warm = hot_everywhere(&fleet).await;

    let before = commands(&server);
    let rounds_before: Vec<u64> = fleet.iter().map(|i| i.store.syncs()).collect();
    let exact_before: u64 = fleet
        .iter()
        .map(|i| i.seen.exact.load(Ordering::Relaxed))
        .sum();
    let cooled_before: u64 = fleet
        .iter()
        .map(|i| i.seen.cooled.load(Ordering::Relaxed))
        .sum();
    let (run, elapsed) = load(&fleet, Duration::from_secs(10)).await;
    let after = commands(&server);
    let rounds: u64 = fleet
        .iter()
        .zip(rounds_before)
        .map(|(i, before)| i.store.syncs() - before)
        .sum();
    let exact: u64 = fleet
        .iter()
        .map(|i| i.seen.exact.load(Ordering::Relaxed))
        .sum::<u64>()
        - exact_before;
    let cooled: u64 = fleet
        .iter()
        .map(|i| i.seen.cooled.load(Ordering::Relaxed))
        .sum::<u64>()
        - cooled_before;

    let offered = run.len() as u64;
    let all: Checks = warm.iter().chain(&run).copied().collect();
    let (expected, pause) = exact_admits(&all, RATE, BURST);
    let admitted = all.iter().filter(|c| c.1 == Some(true)).count() as u64;
    let unanswered = all.iter().filter(|c| c.1.is_none()).count() as u64;
    let ratio = admitted as f64 / expected;
    let (clients, _) = client_commands(&before, &after);
    let n = fleet.len() as u64;
    let intervals = elapsed.as_secs_f64() / INTERVAL.as_secs_f64();
    eprintln!(
        "offered {offered} in {elapsed:?} (longest pause {pause:?}); admitted {admitted}, \
         exact mode {expected:.0}: {ratio:.3}; Redis commands from clients {clients} \
         ({:.2}/instance/interval); {rounds} sync calls ({:.2}/instance/interval), {exact} \
         decided by Redis, back to Redis {cooled} times, {unanswered} unanswered",
        clients as f64 / n as f64 / intervals,
        rounds as f64 / n as f64 / intervals,
    );
    assert!(
        offered as f64 >= 1.5 * expected,
        "the load must be well over the limit: {offered} offered, exact mode admits {expected:.0}"
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "admitted {admitted} against {expected:.0}"
    );
    // Decided in memory: a service whose store sent every check to Redis (the RLS's checks
    // of limit keys always exact) fails.
    assert!(
        exact * 4 <= offered,
        "{exact} of {offered} requests decided by Redis"
    );
    // Redis's cost is per interval, not per request: one sync call per instance and interval
    // (both counters in one call), a quarter more, and a round in flight at each end; each
    // return to Redis (a counter cooled on a machine that held the load up) adds a round.
    let rounds_bound = (n as f64 * (1.25 * intervals + 2.0)) as u64 + cooled;
    assert!(
        rounds <= rounds_bound,
        "{rounds} sync calls in {intervals:.0} intervals of {n} instances (bound {rounds_bound})"
    );
    // Nothing else costs Redis: the syncs, a heartbeat a second per instance, and the checks
    // Redis decided (one script call each).
    let heartbeats = n * (elapsed.as_secs() + 2);
    assert!(
        clients <= rounds + heartbeats + exact + 2 * n,
        "{clients} commands: {rounds} syncs, {exact} exact decisions, {heartbeats} heartbeats"
    );
    // All or none: once every instance has synced, the route's counter holds exactly the
    // admitted requests (a request refused by the hot descriptor charged it nothing). An
    // unanswered one may have been charged.
    let redis = RedisStore::builder(server.url())
        .prefix(prefix.as_str())
        .connect()
        .await
        .expect("connect to the test redis");
    let reader = RateLimitService::builder(redis)
        .config(config())
        .store_deadline(Duration::from_secs(5))
        .build();
    let mut used = None;
    let synced = within(Duration::from_secs(10), async || {
        used = route_used(&reader).await;
        used.is_some_and(|u| (admitted..=admitted + unanswered).contains(&u))
    })
    .await;
    assert!(
        synced,
        "the route's counter holds {used:?} units; {admitted} requests admitted, \
         {unanswered} unanswered"
    );
}

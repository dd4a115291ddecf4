//! Concurrency (in-flight) limits: at most N requests of a key in flight across replicas
//! sharing one store, slots given back when a response ends, when a client goes away, when a
//! handler panics, and lapsing after the lease timeout when their replica died.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use futures_util::future::join_all;
use http::StatusCode;
use http_body_util::BodyExt;
use redlimit::key::Global;
use redlimit::layer::RateLimitBuilder;
use redlimit::store::{ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, Key, Limit, Policy, RateLimitLayer};
use support::*;
use tokio::sync::{Notify, watch};

const N: u64 = 5;
const REQUESTS: usize = 200;
/// A bound for conditions that hold within milliseconds on an idle machine.
const DEADLINE: Duration = Duration::from_secs(30);

fn in_flight_policy(timeout: Duration) -> Policy {
    Policy::new("uploads", [Limit::concurrency(N, timeout).unwrap()]).unwrap()
}

/// What the handler sees: how many requests are inside it now and at most, how many came
/// in; it holds every request until the test opens the gate.
struct Gate {
    inside: AtomicUsize,
    most: AtomicUsize,
    entered: AtomicUsize,
    arrived: Notify,
    open: watch::Sender<bool>,
}

impl Gate {
    fn new() -> Arc<Self> {
        Arc::new(Gate {
            inside: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            entered: AtomicUsize::new(0),
            arrived: Notify::new(),
            open: watch::channel(false).0,
        })
    }

    async fn handle(self: Arc<Self>) -> &'static str {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.entered.fetch_add(1, Ordering::SeqCst);
        self.arrived.notify_waiters();
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        self.inside.fetch_sub(1, Ordering::SeqCst);
        "done"
    }

    /// Waits (bounded) until `n` requests entered the handler.
    async fn wait_entered(&self, n: usize) {
        let waited = tokio::time::timeout(DEADLINE, async {
            loop {
                let arrived = self.arrived.notified();
                if self.entered.load(Ordering::SeqCst) >= n {
                    return;
                }
                arrived.await;
            }
        })
        .await;
        assert!(waited.is_ok(), "{n} requests never reached the handler");
    }
}

/// An app whose every request waits at `gate`; a generous deadline so a loaded machine never
/// pushes a decision to the in-memory fallback.
fn gated_app(layer: RateLimitBuilder, gate: &Arc<Gate>) -> Router {
    let gate = Arc::clone(gate);
    Router::new()
        .route("/", get(move || Arc::clone(&gate).handle()))
        .layer(
            layer
                .key(Global)
                .store_deadline(Duration::from_secs(10))
                .build()
                .expect("valid layer"),
        )
}

/// Free slots of the policy's concurrency limit, as the store reads them.
async fn free_slots(store: &dyn Store, policy: &Policy) -> u64 {
    let state = store
        .admin()
        .expect("admin")
        .inspect(policy, &Key::new("global"))
        .await
        .unwrap();
    state.limits()[0].remaining()
}

/// 200 requests at once through two layers (two replicas) sharing `store_a`/`store_b`: exactly
/// N get in, never more than N are inside the handler, and every slot comes back once the
/// responses end.
async fn never_more_than_n_in_flight(a: RateLimitBuilder, b: RateLimitBuilder, store: &dyn Store) {
    let policy = in_flight_policy(Duration::from_secs(60));
    let gate = Gate::new();
    let (app_a, app_b) = (gated_app(a, &gate), gated_app(b, &gate));
    let denied = Arc::new(AtomicUsize::new(0));
    let calls: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let app = if i % 2 == 0 {
                app_a.clone()
            } else {
                app_b.clone()
            };
            let denied = Arc::clone(&denied);
            tokio::spawn(async move {
                let response = send(&app, request("/", "198.51.100.7", &[])).await;
                let status = response.status();
                if status == StatusCode::TOO_MANY_REQUESTS {
                    assert_eq!(header(&response, "retry-after"), "1");
                    denied.fetch_add(1, Ordering::SeqCst);
                } else {
                    assert_eq!(body_text(response).await, "done");
                }
                status
            })
        })
        .collect();
    gate.wait_entered(N as usize).await;
    let all_denied = eventually(DEADLINE, async || {
        denied.load(Ordering::SeqCst) == REQUESTS - N as usize
    })
    .await;
    assert!(all_denied, "{} denied", denied.load(Ordering::SeqCst));
    assert_eq!(gate.entered.load(Ordering::SeqCst), N as usize);
    assert_eq!(free_slots(store, &policy).await, 0);
    gate.open.send_replace(true);
    let statuses: Vec<StatusCode> = join_all(calls)
        .await
        .into_iter()
        .map(|s| s.expect("task"))
        .collect();
    let admitted = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(admitted, N as usize);
    assert_eq!(gate.most.load(Ordering::SeqCst), N as usize);
    // Released on spawned tasks: back soon, never awaited by the responses.
    assert!(eventually(DEADLINE, async || free_slots(store, &policy).await == N).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_sharing_redis_hold_at_most_n_in_flight() {
    let server = RedisServer::start();
    let prefix = unique_prefix("in-flight");
    let replica = || async {
        RedisStore::builder(server.url())
            .prefix(prefix.as_str())
            .connect()
            .await
            .unwrap()
    };
    let (a, b) = (replica().await, replica().await);
    let policy = in_flight_policy(Duration::from_secs(60));
    let inspector = a.clone();
    never_more_than_n_in_flight(
        RateLimitLayer::builder(a, policy.clone()),
        RateLimitLayer::builder(b, policy),
        &inspector,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_layers_sharing_a_memory_store_hold_at_most_n_in_flight() {
    let store = MemoryStore::new();
    let policy = in_flight_policy(Duration::from_secs(60));
    never_more_than_n_in_flight(
        RateLimitLayer::builder(store.clone(), policy.clone()),
        RateLimitLayer::builder(store.clone(), policy),
        &store,
    )
    .await;
}

/// The ways a request ends without reading its body to the end, each giving its slot back.
async fn slots_return_however_the_request_ends(store: impl Store + Clone) {
    let policy = in_flight_policy(Duration::from_secs(60));
    let layer = || RateLimitLayer::builder(store.clone(), policy.clone());

    // The client goes away while the handler runs: the response future is dropped.
    let gate = Gate::new();
    let app = gated_app(layer(), &gate);
    let call = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request("/", "10.0.0.1", &[])).await }
    });
    gate.wait_entered(1).await;
    assert_eq!(free_slots(&store, &policy).await, N - 1);
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(eventually(DEADLINE, async || free_slots(&store, &policy).await == N).await);

    // The response arrives; its body is held, then read to its end (still held), then dropped.
    gate.open.send_replace(true);
    let response = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        free_slots(&store, &policy).await,
        N - 1,
        "held with its body"
    );
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        frame.unwrap();
    }
    assert!(
        eventually(DEADLINE, async || free_slots(&store, &policy).await == N).await,
        "given back when the body ended"
    );
    drop(body);

    // A response dropped unread.
    let response = send(&app, request("/", "10.0.0.1", &[])).await;
    assert_eq!(free_slots(&store, &policy).await, N - 1);
    drop(response);
    assert!(eventually(DEADLINE, async || free_slots(&store, &policy).await == N).await);

    // The handler panics: its task unwinds and drops the response future.
    let panicking = Router::new()
        .route(
            "/",
            get(|| async {
                panic!("handler failed");
                #[allow(unreachable_code)]
                ""
            }),
        )
        .layer(layer().key(Global).build().expect("valid layer"));
    let call = tokio::spawn(async move { send(&panicking, request("/", "10.0.0.1", &[])).await });
    assert!(call.await.unwrap_err().is_panic());
    assert!(eventually(DEADLINE, async || free_slots(&store, &policy).await == N).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_return_on_disconnect_body_end_drop_and_panic_with_redis() {
    let server = RedisServer::start();
    slots_return_however_the_request_ends(redis_store(&server, "ends").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_return_on_disconnect_body_end_drop_and_panic_in_memory() {
    slots_return_however_the_request_ends(MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_abandoned_while_redis_is_slow_gives_its_lease_back() {
    let server = RedisServer::start();
    let store = redis_store(&server, "abandoned").await;
    let policy = in_flight_policy(Duration::from_secs(60));
    let layer = RateLimitLayer::builder(store.clone(), policy.clone())
        .key(Global)
        .store_deadline(Duration::from_secs(30))
        .build()
        .expect("valid layer");
    let app = app(layer);
    // The script loaded, and the slot of this first request back.
    assert_eq!(status_of(&app, "10.0.0.2").await, StatusCode::OK);
    assert!(eventually(DEADLINE, async || free_slots(&store, &policy).await == N).await);
    server.freeze();
    let mut call = tokio::spawn({
        let app = app.clone();
        async move { status_of(&app, "10.0.0.2").await }
    });
    // Time for the call to go out to the frozen server (had it not, it could take no lease).
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut call)
            .await
            .is_err()
    );
    call.abort();
    server.thaw();
    // The script ran once Redis woke, for a client long gone: its lease is given back.
    assert!(
        eventually(DEADLINE, async || free_slots(&store, &policy).await == N).await,
        "the abandoned request's slot never came back"
    );
}

#[tokio::test]
async fn a_dead_replica_s_lease_lapses_after_the_timeout_on_redis() {
    let server = RedisServer::start();
    let prefix = unique_prefix("lapse");
    let connect = || {
        RedisStore::builder(server.url())
            .prefix(prefix.as_str())
            .connect()
    };
    // The lease's timeout must outlast the one call that sees it taken, on a busy machine too.
    let timeout = Duration::from_secs(2);
    let policy = Policy::new("lapse", [Limit::concurrency(1, timeout).unwrap()]).unwrap();
    let key = Key::new("k");
    let alive = connect().await.unwrap();
    // A replica takes the only slot, then dies without giving it back.
    let dead = connect().await.unwrap();
    let taken = dead.check(&policy, &key, 1).await.unwrap();
    assert!(taken.lease().is_some());
    drop(dead);
    let denied = alive.check(&policy, &key, 1).await.unwrap();
    assert!(!denied.is_allowed());
    assert!(denied.lease().is_none());
    let retry = denied.retry_after().unwrap();
    assert!(retry > Duration::ZERO && retry <= timeout);
    // Another replica gets the slot once the lease lapsed.
    let freed = eventually(DEADLINE, async || {
        alive.check(&policy, &key, 1).await.unwrap().is_allowed()
    })
    .await;
    assert!(freed, "the dead replica's lease never lapsed");
    // The slot lapsed for good: the dead replica's late release frees nothing of the new one.
    let reborn = connect().await.unwrap();
    reborn
        .release(&policy, &key, taken.lease().unwrap())
        .await
        .unwrap();
    assert!(!alive.check(&policy, &key, 1).await.unwrap().is_allowed());
}

#[tokio::test]
async fn a_lease_lapses_after_the_timeout_in_memory() {
    let clock = ManualClock::new(1_000_000);
    let store = MemoryStore::with_clock(clock.clone());
    let policy = Policy::new(
        "lapse",
        [Limit::concurrency(1, Duration::from_secs(30)).unwrap()],
    )
    .unwrap();
    let key = Key::new("k");
    assert!(store.check_now(&policy, &key, 1).lease().is_some());
    let denied = store.check_now(&policy, &key, 1);
    assert!(!denied.is_allowed());
    // A slot usually comes back when a response ends: try again within a second.
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    clock.advance(Duration::from_secs(30) - Duration::from_micros(1));
    assert!(!store.check_now(&policy, &key, 1).is_allowed());
    clock.advance(Duration::from_micros(1));
    assert!(store.check_now(&policy, &key, 1).is_allowed());
}

/// A concurrency limit beside a rate, checked atomically: a request denied for want of a
/// slot consumes no rate; one denied by the rate takes no slot; a release happens once.
async fn atomic_with_a_rate(store: &dyn Store) {
    let policy = Policy::new(
        "mixed",
        [
            Limit::concurrency(1, Duration::from_secs(60)).unwrap(),
            Limit::fixed_window(2, Duration::from_secs(86_400)).unwrap(),
        ],
    )
    .unwrap();
    let key = Key::new("k");
    let rate_left = async || {
        store
            .admin()
            .expect("admin")
            .inspect(&policy, &key)
            .await
            .unwrap()
            .limits()[1]
            .remaining()
    };
    let first = store.check(&policy, &key, 1).await.unwrap();
    let lease = first.lease().expect("admitted with a lease");
    let busy = store.check(&policy, &key, 1).await.unwrap();
    assert_eq!(busy.denied_by(), Some(0));
    assert_eq!(rate_left().await, 1, "a denial consumes no rate");
    store.release(&policy, &key, lease).await.unwrap();
    let second = store.check(&policy, &key, 1).await.unwrap();
    assert!(second.is_allowed());
    // The first lease, released again, must not free the second's slot.
    store.release(&policy, &key, lease).await.unwrap();
    assert!(!store.check(&policy, &key, 1).await.unwrap().is_allowed());
    store
        .release(&policy, &key, second.lease().unwrap())
        .await
        .unwrap();
    let over_rate = store.check(&policy, &key, 1).await.unwrap();
    assert_eq!(over_rate.denied_by(), Some(1));
    assert!(over_rate.lease().is_none());
    let state = store
        .admin()
        .expect("admin")
        .inspect(&policy, &key)
        .await
        .unwrap();
    assert_eq!(
        state.limits()[0].remaining(),
        1,
        "no slot taken by a denial"
    );
    assert_eq!(
        state.limits()[0].limit().algorithm(),
        Algorithm::Concurrency
    );
}

#[tokio::test]
async fn checked_atomically_with_rate_limits_on_redis() {
    let server = RedisServer::start();
    atomic_with_a_rate(&redis_store(&server, "mixed").await).await;
}

#[tokio::test]
async fn checked_atomically_with_rate_limits_in_memory() {
    atomic_with_a_rate(&MemoryStore::new()).await;
}

#[tokio::test]
async fn leases_live_in_the_key_s_slot_on_a_cluster() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("cluster"))
        .connect()
        .await
        .unwrap();
    atomic_with_a_rate(&store).await;
}

#[tokio::test]
async fn leases_are_taken_and_released_behind_sentinels() {
    let set = SentinelSet::start();
    let store = RedisStore::sentinel(set.sentinel_urls(), MASTER_NAME)
        .prefix(unique_prefix("sentinel"))
        .connect()
        .await
        .unwrap();
    atomic_with_a_rate(&store).await;
}

#[test]
fn a_policy_holds_one_concurrency_limit() {
    let limit = Limit::concurrency(2, Duration::from_secs(5)).unwrap();
    assert!(Policy::new("two", [limit, limit]).is_err());
    assert_eq!(
        "concurrency".parse::<Algorithm>().unwrap(),
        limit.algorithm()
    );
}

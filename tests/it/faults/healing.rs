//! Connections that heal, against real processes: a connection black-holed by a proxy (open,
//! silent, no FIN or RST) is replaced, standalone and behind a Sentinel that still names the
//! same master; a password refused once does not switch limiting off for good; a frozen
//! Cluster master is left for its promoted replica. In each case decisions come from Redis
//! again within seconds, without a restart.

use crate::support;

use std::time::{Duration, Instant};

use axum::Router;
use redlimit::layer::{CircuitBreaker, OnStoreError};
use redlimit::store::RedisStore;
use redlimit::{DecisionSource, RateLimitLayer};
use support::*;

const DEADLINE: Duration = Duration::from_millis(100);
/// Healing takes three missed calls and at most a second between attempts: seconds, not the
/// minutes (or forever) it took before.
const HEALS_WITHIN: Duration = Duration::from_secs(10);

/// An app that answers with its decision's source, failing open, with no breaker: every
/// request reaches the store, so what the test sees is the connection's doing.
fn app_on(store: RedisStore) -> Router {
    source_app(
        RateLimitLayer::builder(
            store,
            gcra_policy("heal", 100_000, Duration::from_secs(3600)),
        )
        .store_deadline(DEADLINE)
        .on_store_error(OnStoreError::Open)
        .circuit_breaker(CircuitBreaker::disabled())
        .build()
        .expect("valid layer"),
    )
}

/// The source of the decision for one request from `ip`.
async fn source_of(app: &Router, ip: &str) -> String {
    body_text(send(app, request("/", ip, &[])).await).await
}

fn from(source: DecisionSource) -> String {
    format!("{source:?}")
}

/// Black-holes the proxy's open connection, sees the next request not decided by the store,
/// then waits for store decisions again.
async fn heals_from_a_black_hole(app: &Router, proxy: &Proxy, what: &str) {
    proxy.black_hole();
    let started = Instant::now();
    assert_ne!(
        source_of(app, "10.0.0.1").await,
        from(DecisionSource::Store),
        "the black hole answers nothing"
    );
    let healed = eventually(HEALS_WITHIN, async || {
        source_of(app, "10.0.0.1").await == from(DecisionSource::Store)
    })
    .await;
    assert!(
        healed,
        "{what}: still failing {:?} after the black hole",
        started.elapsed()
    );
    eprintln!(
        "{what}: store decisions again after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_connection_is_replaced() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let store = RedisStore::builder(proxy.url())
        .prefix(unique_prefix("hole"))
        .connect()
        .await
        .unwrap();
    let app = app_on(store);
    assert_eq!(
        source_of(&app, "10.0.0.1").await,
        from(DecisionSource::Store)
    );
    assert_eq!(proxy.accepted(), 1);

    heals_from_a_black_hole(&app, &proxy, "black hole").await;
    assert_eq!(
        proxy.accepted(),
        2,
        "one new connection, not one per request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_heals_once_it_is_right_again() {
    let server = RedisServer::start_with(&["--requirepass", "old-secret"]);
    let url = |password: &str| format!("redis://:{password}@127.0.0.1:{}", server.port());
    let store = RedisStore::builder(url("old-secret"))
        .prefix(unique_prefix("auth"))
        .connect()
        .await
        .unwrap();
    let app = app_on(store);
    assert_eq!(
        source_of(&app, "10.0.0.1").await,
        from(DecisionSource::Store)
    );

    // As if Redis restarted with another password: the store's connection drops and every
    // new one is refused.
    let mut admin = redis::Client::open(url("old-secret"))
        .unwrap()
        .get_connection()
        .unwrap();
    let connections = |admin: &mut redis::Connection| -> u64 {
        let info: redis::InfoDict = redis::cmd("INFO").arg("stats").query(admin).unwrap();
        info.get("total_connections_received").unwrap()
    };
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("new-secret")
        .query(&mut admin)
        .unwrap();
    let before = connections(&mut admin);
    let _: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    // Refused, and tried again: not one cached refusal for good.
    let retried = eventually(HEALS_WITHIN, async || {
        let source = source_of(&app, "10.0.0.1").await;
        assert_ne!(
            source,
            from(DecisionSource::Store),
            "the old password was accepted"
        );
        connections(&mut admin) >= before + 2
    })
    .await;
    assert!(retried, "the refused connection was never dialled again");

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("old-secret")
        .query(&mut admin)
        .unwrap();
    let fixed = Instant::now();
    let healed = eventually(HEALS_WITHIN, async || {
        source_of(&app, "10.0.0.1").await == from(DecisionSource::Store)
    })
    .await;
    assert!(
        healed,
        "limiting did not resume once the password was right"
    );
    eprintln!(
        "password: store decisions again {:?} after the fix",
        fixed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_sentinel_master_is_reconnected_though_it_did_not_move() {
    // The Sentinel knows the master by the proxy's address, so the store reaches it through
    // the proxy; it never fails over (no replica, a minute before it would even suspect).
    let master = RedisServer::start();
    let proxy = Proxy::start(master.port()).await;
    let sentinel = RedisServer::start_sentinel(&format!(
        "sentinel monitor healing 127.0.0.1 {} 1\n\
         sentinel down-after-milliseconds healing 60000\n",
        proxy.port()
    ));
    let store = RedisStore::sentinel([sentinel.url()], "healing")
        .prefix(unique_prefix("sentinel"))
        .connect()
        .await
        .unwrap();
    let app = app_on(store);
    assert_eq!(
        source_of(&app, "10.0.0.1").await,
        from(DecisionSource::Store)
    );

    // The Sentinel still names the same master: only a new connection helps.
    heals_from_a_black_hole(&app, &proxy, "sentinel black hole").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_cluster_master_is_left_for_its_promoted_replica() {
    let cluster = RedisCluster::start();
    assert!(cluster.wait_replicas_synced(Duration::from_secs(30)));
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("frozen"))
        .connect()
        .await
        .unwrap();
    let app = app_on(store);
    let ip = "10.0.0.1";
    assert_eq!(source_of(&app, ip).await, from(DecisionSource::Store));
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(format!("{{ip:{ip}}}"))
        .query(&mut cluster.nodes[0].connection())
        .unwrap();
    let victim = cluster.master_of(slot);

    cluster.nodes[victim].freeze();
    let frozen = Instant::now();
    assert_ne!(
        source_of(&app, ip).await,
        from(DecisionSource::Store),
        "the frozen master answers nothing"
    );
    // Its replica takes over after the node timeout (1.5 s) and an election.
    let healed = eventually(Duration::from_secs(20), async || {
        source_of(&app, ip).await == from(DecisionSource::Store)
    })
    .await;
    cluster.nodes[victim].thaw();
    assert!(
        healed,
        "still failing open {:?} after the freeze",
        frozen.elapsed()
    );
    eprintln!(
        "frozen master: store decisions again after {:?}",
        frozen.elapsed()
    );
}

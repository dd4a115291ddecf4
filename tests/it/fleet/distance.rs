//! Redis a network away (the test support's delaying proxy): concurrent bursts over two
//! instances admit exactly the limit at 1, 10 and 30 ms RTT, the first burst after start
//! included; a missed deadline never adds a second budget; a frozen, black-holed or
//! partitioned Redis costs one request the deadline, then decisions are made at memory speed
//! until Redis answers again; a store that answers late under load is load, not death; the
//! first decision after start needs no `NOSCRIPT`. Timing is asserted only as counts of
//! requests that waited the whole deadline, and as generous "does not hang" bounds.

use crate::support;

use std::time::{Duration, Instant};

use axum::Router;
use http::StatusCode;
use redlimit::layer::OnStoreError;
use redlimit::store::RedisStore;
use redlimit::{DecisionSource, Limit, Policy, RateLimitLayer};
use support::*;

/// A request that took this long waited for the store's deadline (the layer's default,
/// 100 ms; a memory-speed decision takes microseconds).
const WAITED: Duration = Duration::from_millis(90);

/// Generous: far above every goal (2 s), far below a hang.
const RESUMES_WITHIN: Duration = Duration::from_secs(15);

fn policy(count: u64) -> Policy {
    Policy::new(
        "p",
        [Limit::gcra(count, Duration::from_secs(3600)).expect("limit")],
    )
    .expect("policy")
}

/// One instance: its own store (its own connections) through `url`, keyed on `x-api-key`,
/// answering with its decision's source; the layer's default deadline (100 ms).
async fn instance(url: String, prefix: &str, count: u64, mode: OnStoreError) -> Router {
    instance_with(url, prefix, count, mode, Duration::from_millis(100)).await
}

/// [`instance`] with a store deadline of its own.
async fn instance_with(
    url: String,
    prefix: &str,
    count: u64,
    mode: OnStoreError,
    deadline: Duration,
) -> Router {
    let store = RedisStore::builder(url)
        .prefix(prefix.to_owned())
        .connect()
        .await
        .expect("connect through the proxy");
    source_app(
        RateLimitLayer::builder(store, policy(count))
            .key(api_key())
            .on_store_error(mode)
            .store_deadline(deadline)
            .build()
            .expect("layer"),
    )
}

/// Sends one request for `key`; its status, its decision's source (the handler's answer,
/// when admitted) and how long it took.
async fn call(app: &Router, key: &str) -> (StatusCode, String, Duration) {
    let started = Instant::now();
    let res = send(app, request("/", "10.0.0.1", &[("x-api-key", key)])).await;
    let status = res.status();
    let source = if status == StatusCode::OK {
        body_text(res).await
    } else {
        String::new()
    };
    (status, source, started.elapsed())
}

/// Fires `n` requests for `key` at once, alternating between `apps`; returns how many were
/// admitted and each admitted request's source.
async fn burst(apps: &[Router], key: &str, n: usize) -> (usize, Vec<String>) {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let app = apps[i % apps.len()].clone();
            let key = key.to_owned();
            tokio::spawn(async move { call(&app, &key).await })
        })
        .collect();
    let mut sources = Vec::new();
    for task in tasks {
        let (status, source, _) = task.await.expect("request task");
        if status == StatusCode::OK {
            sources.push(source);
        }
    }
    (sources.len(), sources)
}

/// Two instances, each through its own proxy at `rtt`, built and fired at at once: four
/// bursts of 40 (20 each) on fresh keys admit exactly 5 of a 5-per-hour limit, every one of
/// them by Redis.
///
/// The deadline is a second: what is tested is exactness at a distance. Whether a burst is
/// decided within the default 100 ms (two round trips at 30 ms RTT leave 40 ms, which a busy
/// machine can take) is a benchmark figure: `benches/distance.rs`, `docs/bench/distance.md`.
async fn exact_at(rtt: Duration) {
    let server = RedisServer::start();
    let (a, b) = (
        Proxy::with_rtt(server.port(), rtt).await,
        Proxy::with_rtt(server.port(), rtt).await,
    );
    let prefix = unique_prefix("exact");
    let second = Duration::from_secs(1);
    let apps = [
        instance_with(a.url(), &prefix, 5, OnStoreError::default(), second).await,
        instance_with(b.url(), &prefix, 5, OnStoreError::default(), second).await,
    ];
    for round in 0..4 {
        let (admitted, sources) = burst(&apps, &format!("key-{round}"), 40).await;
        assert_eq!(admitted, 5, "burst {round} at {rtt:?} RTT: {sources:?}");
        assert!(
            sources.iter().all(|s| s == "Store"),
            "burst {round} at {rtt:?} RTT decided without Redis: {sources:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_over_two_instances_are_exact_at_1_ms_rtt() {
    exact_at(Duration::from_millis(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_over_two_instances_are_exact_at_10_ms_rtt() {
    exact_at(Duration::from_millis(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_over_two_instances_are_exact_at_30_ms_rtt() {
    exact_at(Duration::from_millis(30)).await;
}

/// The bound: while the store is late or gone, an instance admits at most its share of the
/// limit (`ceil(count / instances)`) minus what the store already admitted for it in the
/// period. Here a 10-per-hour limit, 3 admitted by Redis, then Redis out of reach (every
/// call past the deadline): with one instance at most 7 more, with `instances: 2` (a share
/// of 5) at most 2 more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_deadline_never_adds_a_second_budget() {
    for (instances, more) in [(1, 7), (2, 2)] {
        let server = RedisServer::start();
        let proxy = Proxy::start(server.port()).await;
        let app = instance(
            proxy.url(),
            &unique_prefix("bound"),
            10,
            OnStoreError::Local { instances },
        )
        .await;
        for _ in 0..3 {
            assert_eq!(call(&app, "k").await.1, "Store");
        }
        // Every reply now comes long after the deadline.
        proxy.set_rtt(Duration::from_secs(2));
        let mut admitted = 0;
        for _ in 0..20 {
            let (status, source, _) = call(&app, "k").await;
            if status == StatusCode::OK {
                assert_eq!(source, "Local");
                admitted += 1;
            }
        }
        assert_eq!(
            admitted, more,
            "instances {instances}: admitted in memory after 3 by Redis"
        );
    }
}

/// What cuts an instance off from Redis.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// `SIGSTOP`: connections stay open, nothing answers, new ones are accepted and hang.
    Frozen,
    /// The open connections drop everything; new ones work.
    BlackHole,
    /// Nothing crosses the link either way, open or new connections.
    Partition,
}

/// At 4 requests a second with Redis cut off, one request (at most three) waits the deadline;
/// the rest are decided at memory speed, in memory or failing open as the mode says; limiting
/// by Redis resumes once Redis answers again.
async fn noticed_at_once(cut: Cut, mode: OnStoreError) {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let app = instance(proxy.url(), &unique_prefix("cut"), 1_000_000, mode).await;
    for i in 0..3 {
        assert_eq!(call(&app, &format!("warm-{i}")).await.1, "Store");
    }
    match cut {
        Cut::Frozen => server.freeze(),
        Cut::BlackHole => proxy.black_hole(),
        Cut::Partition => proxy.freeze(),
    }
    // A call past its deadline is always decided in memory (load and death look alike until
    // the probe tells); once the circuit is open, the mode decides. A black hole swallows
    // only the open connection: once renewed, Redis decides again.
    let (local, open) = (
        format!("{:?}", DecisionSource::Local),
        format!("{:?}", DecisionSource::FailOpen),
    );
    let allowed: Vec<&str> = match (cut, mode) {
        (Cut::BlackHole, _) => vec![&local, &open, "Store"],
        (_, OnStoreError::Open) => vec![&local, &open],
        _ => vec![&local],
    };
    let mut waited = Vec::new();
    for i in 0..12 {
        let (status, source, took) = call(&app, &format!("cut-{i}")).await;
        assert_eq!(status, StatusCode::OK, "{cut:?}: request {i}");
        assert!(
            allowed.contains(&source.as_str()),
            "{cut:?}, {mode:?}: request {i} decided by {source}"
        );
        if took >= WAITED {
            waited.push((i, took));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        waited.len() <= 3,
        "{cut:?}, {mode:?}: {} of 12 requests waited the deadline: {waited:?}",
        waited.len()
    );
    match cut {
        Cut::Frozen => server.thaw(),
        Cut::BlackHole => {}
        Cut::Partition => proxy.thaw(),
    }
    let back = Instant::now();
    let resumed = eventually(RESUMES_WITHIN, async || {
        call(&app, "after").await.1 == "Store"
    })
    .await;
    assert!(
        resumed,
        "{cut:?}, {mode:?}: no Redis decision {:?} after",
        back.elapsed()
    );
    eprintln!(
        "{cut:?}, {mode:?}: {} waited the deadline; Redis decides again after {:?}",
        waited.len(),
        back.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_is_noticed_at_once_in_local_mode() {
    noticed_at_once(Cut::Frozen, OnStoreError::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_is_noticed_at_once_in_open_mode() {
    noticed_at_once(Cut::Frozen, OnStoreError::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_connection_is_noticed_at_once() {
    noticed_at_once(Cut::BlackHole, OnStoreError::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_redis_is_noticed_at_once() {
    noticed_at_once(Cut::Partition, OnStoreError::Open).await;
}

/// Replies arrive, each after the deadline: the store is slow, not gone. Every request is
/// decided in memory, but the breaker stays closed and Redis keeps being asked, and the
/// first request after the link is fast again is Redis's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_replies_under_load_are_load_not_death() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(140)).await;
    let app = instance(
        proxy.url(),
        &unique_prefix("late"),
        1_000_000,
        OnStoreError::Open,
    )
    .await;
    let evalsha_calls = || -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut server.connection())
            .expect("INFO");
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    // 16 clients back to back for 2 s: a reply lands every few milliseconds.
    let stop = Instant::now() + Duration::from_secs(2);
    let clients: Vec<_> = (0..16)
        .map(|c| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut sources = Vec::new();
                while Instant::now() < stop {
                    sources.push(call(&app, &format!("load-{c}")).await.1);
                }
                sources
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let midway = evalsha_calls();
    let mut sources = Vec::new();
    for client in clients {
        sources.extend(client.await.expect("client"));
    }
    assert!(
        evalsha_calls() > midway,
        "Redis was no longer asked in the second half of the load"
    );
    // Slow is load: decided in memory, never failing open.
    let local = format!("{:?}", DecisionSource::Local);
    assert!(
        sources.iter().all(|s| *s == local),
        "{:?}",
        sources.iter().find(|s| **s != local)
    );
    proxy.set_rtt(Duration::ZERO);
    let resumed = eventually(RESUMES_WITHIN, async || {
        call(&app, "after").await.1 == "Store"
    })
    .await;
    assert!(resumed, "the breaker opened on a slow store");
}

/// Reads `INFO commandstats`' `failed_calls` of `EVALSHA` (a `NOSCRIPT` answer counts).
fn failed_evalsha(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .expect("INFO");
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("failed_calls=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The layer loads its policy's scripts when it is built: the first decisions find them, and
/// after `SCRIPT FLUSH` a burst reloads them once and still admits exactly the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_loaded_before_the_first_decision_and_reloaded_once_after_a_flush() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(10)).await;
    let app = instance(
        proxy.url(),
        &unique_prefix("cold"),
        5,
        OnStoreError::default(),
    )
    .await;
    let sha = redis::Script::new(RedisStore::script_source_for(&policy(5)))
        .get_hash()
        .to_owned();
    let loaded = eventually(Duration::from_secs(10), async || {
        let exists: Vec<bool> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&sha)
            .query(&mut server.connection())
            .expect("SCRIPT EXISTS");
        exists == [true]
    })
    .await;
    assert!(loaded, "building the layer did not load its script");
    let (admitted, sources) = burst(std::slice::from_ref(&app), "first", 20).await;
    assert_eq!(admitted, 5, "{sources:?}");
    assert_eq!(failed_evalsha(&server), 0, "a decision met NOSCRIPT");

    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.connection())
        .expect("SCRIPT FLUSH");
    let (admitted, sources) = burst(std::slice::from_ref(&app), "flushed", 20).await;
    assert_eq!(admitted, 5, "after SCRIPT FLUSH: {sources:?}");
    assert!(sources.iter().all(|s| s == "Store"), "{sources:?}");
}

/// One master of a Cluster 10 ms away (the node announces the proxy in front of it), the
/// others on loopback: bursts on its keys are exact, over two instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cluster_master_is_exact() {
    let cluster = RedisCluster::start();
    let key = "far";
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(format!("{{{key}-0}}"))
        .query(&mut cluster.nodes[0].connection())
        .expect("CLUSTER KEYSLOT");
    let far = cluster.master_of(slot);
    let proxy = Proxy::with_rtt(cluster.nodes[far].port(), Duration::from_millis(10)).await;
    cluster.announce_port(far, proxy.port());
    let prefix = unique_prefix("cluster");
    let mut apps = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::cluster(cluster.urls())
            .prefix(prefix.clone())
            .connect()
            .await
            .expect("connect to the cluster");
        apps.push(source_app(
            RateLimitLayer::builder(store, policy(5))
                .key(api_key())
                .build()
                .expect("layer"),
        ));
    }
    // Hash tags pick the slot: `{far-0}` lives on the far master.
    let (admitted, sources) = burst(&apps, "far-0", 40).await;
    assert_eq!(admitted, 5, "the far master's key: {sources:?}");
    assert!(sources.iter().all(|s| s == "Store"), "{sources:?}");
    assert!(
        proxy.accepted() > 0,
        "the far master was not reached through its proxy"
    );
    for i in 0..4 {
        let (admitted, sources) = burst(&apps, &format!("near-{i}"), 20).await;
        assert_eq!(admitted, 5, "key near-{i}: {sources:?}");
    }
}

/// A Sentinel-managed master 10 ms away: bursts over two instances are exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_master_10_ms_away_is_exact() {
    let master = RedisServer::start();
    let proxy = Proxy::with_rtt(master.port(), Duration::from_millis(10)).await;
    let sentinel = RedisServer::start_sentinel(&format!(
        "sentinel monitor far 127.0.0.1 {} 1\n\
         sentinel down-after-milliseconds far 60000\n",
        proxy.port()
    ));
    let prefix = unique_prefix("sentinel");
    let mut apps = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::sentinel([sentinel.url()], "far")
            .prefix(prefix.clone())
            .connect()
            .await
            .expect("connect through the sentinel");
        apps.push(source_app(
            RateLimitLayer::builder(store, policy(5))
                .key(api_key())
                .build()
                .expect("layer"),
        ));
    }
    for round in 0..3 {
        let (admitted, sources) = burst(&apps, &format!("s-{round}"), 40).await;
        assert_eq!(admitted, 5, "burst {round}: {sources:?}");
        assert!(sources.iter().all(|s| s == "Store"), "{sources:?}");
    }
}

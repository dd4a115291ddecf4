//! Redis a network away: what the Redis path costs and decides when each round trip to Redis
//! takes 0 to 30 ms, measured with a same-run baseline.
//!
//! ```text
//! cargo bench --all-features --bench distance          # ~2 minutes; writes docs/bench/distance.md and .svg
//! REDLIMIT_BENCH_SECS=1 REDLIMIT_BENCH_RTTS=0,10 cargo bench --all-features --bench distance
//! REDLIMIT_BENCH_ONLY=frozen cargo bench --all-features --bench distance   # one part, nothing written
//! ```
//!
//! Redis is put at a distance by the tests' TCP proxy (`tests/it/support/proxy.rs`: each direction
//! delayed by half the round trip, order kept; freeze), which runs on a Tokio runtime of its own
//! (one worker thread), so the clients' tasks never hold up its deliveries (the two cores are
//! still shared). Each wait is a kernel timer (`timerfd`) in that runtime's poller, not Tokio's
//! millisecond timer: its measured round trip is within ~0.5 ms of the nominal one. The app and its
//! clients share one single-threaded runtime, as in `benches/failure_latency.rs`;
//! `redis-server` (started here on a free port) is a third process on the same two cores.
//!
//! **Requests are driven in process**: every client is a task calling
//! `tower::ServiceExt::oneshot` on a clone of the axum `Router`, back to back (yielding once
//! between requests, as a client awaiting a socket would), with the request's `x-api-key`
//! header cycling over `REDLIMIT_BENCH_KEYS` API keys. No HTTP, no sockets but Redis's: the
//! measuring client costs a few µs per request, and the latency is the layer's and the store's.
//!
//! Three parts:
//!
//! 1. **Added latency** at each round trip (`REDLIMIT_BENCH_RTTS`, ms) and number of concurrent
//!    clients (`REDLIMIT_BENCH_CLIENTS`), each cell `REDLIMIT_BENCH_SECS` after 0.5 s of
//!    warm-up, for (a) the app behind `RateLimitLayer` on a `MemoryStore` (the baseline: no
//!    network), (b) the same layer on a `RedisStore` connected through the proxy, GCRA 10^6 per
//!    second (everything admitted), default deadline (100 ms), and (c) a hand-written
//!    middleware sending exactly one `EVALSHA` of a minimal GCRA script
//!    (`benches/redis_cost/minimal_gcra.lua`) per request over one redis-rs multiplexed
//!    connection through the same proxy, with `TCP_NODELAY` and no deadline: the floor of any
//!    Redis limiter. Reported: p50/p99 of each, (b − a) and (c − a) in ms and in round trips,
//!    and the share of (b)'s decisions the store made (the rest missed the deadline and were
//!    decided in memory). The proxy's actual round trip (p50 of sequential `PING`s through it)
//!    is reported beside the nominal one.
//! 2. **Exactness**, at each round trip: `SCRIPT FLUSH` and `FLUSHALL` (a Redis that has never
//!    seen this service), then two `RedisStore`s (two instances), each through its own proxy,
//!    same prefix, behind two layers with GCRA 5 per hour keyed by `x-api-key`; right after
//!    connecting, four bursts of 40 requests at once (20 per instance), each burst on a key of
//!    its own. Goal: exactly 5 admitted per burst.
//! 3. **Frozen Redis**, through a proxy at `REDLIMIT_BENCH_FROZEN_RTT` ms (default 10): 4
//!    requests/s (open loop) for 2 s healthy, then for 4 s with the proxy frozen (nothing
//!    delivered either way) or `redis-server` stopped (`SIGSTOP`), under
//!    `OnStoreError::Local { instances: 1 }` (the default) and `OnStoreError::Open`; counts the
//!    requests over 50 ms while frozen. Then thaws and keeps 4 requests/s until a decision's
//!    source is the store again (`Decision::source`, read by the handler): the time from the
//!    thaw to that decision, to the nearest 250 ms request. Goals: ≤ 3 requests over 50 ms,
//!    resumed within 2 s.
//!
//! Knobs: `REDLIMIT_BENCH_SECS` (3, per latency cell and variant), `REDLIMIT_BENCH_RTTS`
//! (`0,1,10,30`), `REDLIMIT_BENCH_CLIENTS` (`16,256`), `REDLIMIT_BENCH_KEYS` (10 000),
//! `REDLIMIT_BENCH_FROZEN_RTT` (10), `REDLIMIT_BENCH_LINGER_MS` (the Redis store's batch
//! linger; its default otherwise), `REDLIMIT_BENCH_ONLY=latency,exactness,frozen` (some parts;
//! the results file and picture are then left alone). A full run appends its tables to
//! `docs/bench/distance.md` and draws `docs/bench/distance.svg` (added p50/p99 against the
//! round trip).

mod support;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::{HeaderValue, StatusCode};
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, IntoConnectionInfo};
use redlimit::key::Header;
use redlimit::layer::OnStoreError;
use redlimit::store::{MemoryStore, RedisStore, Store};
use redlimit::{Decision, DecisionSource, Limit, Policy, RateLimitLayer};
use support::proxy::Proxy;
use support::redis_server::RedisServer;
use support::{Table, percentile};
use tokio::runtime::Handle;
use tower::ServiceExt;

/// The latency cells' limit: 10^6 per second, so every request is admitted.
const RATE: u64 = 1_000_000;
/// The minimal script's arguments: N per P µs, cost 1.
const PERIOD_US: u64 = 1_000_000;
const MINIMAL_GCRA: &str = include_str!("redis_cost/minimal_gcra.lua");
const WARMUP: Duration = Duration::from_millis(500);
/// The frozen part's pace: 4 requests per second.
const TICK: Duration = Duration::from_millis(250);
/// A request slower than this counts against the frozen-Redis goal.
const SLOW: Duration = Duration::from_millis(50);
/// How long after the thaw the frozen part waits for a store decision.
const RESUME_LIMIT: Duration = Duration::from_secs(10);

/// Where a response's decision came from, as the handler (or the raw middleware) saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Store,
    Local,
    FailOpen,
    DenyCache,
    /// The raw middleware's `EVALSHA` answered.
    Raw,
    /// No decision, or another source.
    Other,
}

impl Seen {
    fn of(decision: Option<&Decision>) -> Self {
        match decision.map(Decision::source) {
            Some(DecisionSource::Store) => Seen::Store,
            Some(DecisionSource::Local) => Seen::Local,
            Some(DecisionSource::FailOpen) => Seen::FailOpen,
            Some(DecisionSource::DenyCache) => Seen::DenyCache,
            _ => Seen::Other,
        }
    }
}

/// The app: `GET /` → `ok`, telling the client (in the response's extensions) where the
/// layer's decision came from.
fn app() -> Router {
    Router::new().route(
        "/",
        get(|decision: Option<Decision>| async move {
            (Extension(Seen::of(decision.as_ref())), "ok")
        }),
    )
}

fn api_key() -> Header {
    Header::new("x-api-key").expect("a valid header name")
}

fn layered(store: impl Store, policy: Policy, mode: OnStoreError) -> Router {
    app().layer(
        RateLimitLayer::builder(store, policy)
            .key(api_key())
            .on_store_error(mode)
            .build()
            .expect("a valid layer"),
    )
}

fn wide_policy() -> Policy {
    Policy::new(
        "distance",
        [Limit::gcra(RATE, Duration::from_secs(1)).expect("a valid limit")],
    )
    .expect("a valid policy")
}

async fn redis_store(url: &str, prefix: &str) -> RedisStore {
    let builder = RedisStore::builder(url).prefix(prefix);
    // REDLIMIT_BENCH_LINGER_MS=0: the batcher's linger off (the store's default otherwise).
    let builder = match support::optional_knob::<u64>("REDLIMIT_BENCH_LINGER_MS") {
        Some(ms) => builder.batch_linger(Duration::from_millis(ms)),
        None => builder,
    };
    builder
        .connect()
        .await
        .expect("connect to the bench redis through the proxy")
}

/// The floor: one `EVALSHA` of the minimal GCRA per request, one multiplexed connection.
#[derive(Clone)]
struct Raw {
    connection: redis::aio::MultiplexedConnection,
    sha: Arc<str>,
}

async fn raw_evalsha(State(raw): State<Raw>, request: Request, next: Next) -> Response {
    let Some(key) = request.headers().get("x-api-key") else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut call = redis::cmd("EVALSHA");
    call.arg(&*raw.sha)
        .arg(1)
        .arg([b"raw:".as_slice(), key.as_bytes()].concat())
        .arg(RATE)
        .arg(PERIOD_US)
        .arg(1);
    let reply: redis::RedisResult<Vec<i64>> = call.query_async(&mut raw.connection.clone()).await;
    match reply {
        Ok(reply) if reply.get(1) == Some(&1) => {
            let mut response = next.run(request).await;
            response.extensions_mut().insert(Seen::Raw);
            response
        }
        Ok(_) => StatusCode::TOO_MANY_REQUESTS.into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// A multiplexed connection with `TCP_NODELAY` and no response timeout.
async fn raw_connection(url: &str) -> redis::aio::MultiplexedConnection {
    let info = url
        .into_connection_info()
        .expect("a redis URL")
        .set_tcp_settings(TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info).expect("a redis client");
    client
        .get_multiplexed_async_connection_with_config(
            &AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .expect("connect to the bench redis through the proxy")
}

async fn raw_app(url: &str) -> Router {
    let mut connection = raw_connection(url).await;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(MINIMAL_GCRA)
        .query_async(&mut connection)
        .await
        .expect("SCRIPT LOAD");
    let state = Raw {
        connection,
        sha: sha.into(),
    };
    app().layer(middleware::from_fn_with_state(state, raw_evalsha))
}

/// One request's fate.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    status: StatusCode,
    seen: Seen,
    took: Duration,
}

async fn call(app: &Router, key: HeaderValue) -> Outcome {
    let request = http::Request::get("/")
        .header("x-api-key", key)
        .body(Body::empty())
        .expect("a request");
    let started = Instant::now();
    let response = app
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    let took = started.elapsed();
    let extensions = response.extensions();
    let seen = extensions
        .get::<Seen>()
        .copied()
        .unwrap_or_else(|| Seen::of(extensions.get::<Decision>()));
    Outcome {
        status: response.status(),
        seen,
        took,
    }
}

/// Responses by status and by where their decision came from.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    admitted: u64,
    denied: u64,
    failed: u64,
    store: u64,
    local: u64,
    fail_open: u64,
    deny_cache: u64,
    raw: u64,
    other: u64,
}

impl Tally {
    fn add(&mut self, outcome: &Outcome) {
        match outcome.status {
            StatusCode::OK => self.admitted += 1,
            StatusCode::TOO_MANY_REQUESTS => self.denied += 1,
            _ => self.failed += 1,
        }
        *match outcome.seen {
            Seen::Store => &mut self.store,
            Seen::Local => &mut self.local,
            Seen::FailOpen => &mut self.fail_open,
            Seen::DenyCache => &mut self.deny_cache,
            Seen::Raw => &mut self.raw,
            Seen::Other => &mut self.other,
        } += 1;
    }

    fn merge(&mut self, other: &Tally) {
        self.admitted += other.admitted;
        self.denied += other.denied;
        self.failed += other.failed;
        self.store += other.store;
        self.local += other.local;
        self.fail_open += other.fail_open;
        self.deny_cache += other.deny_cache;
        self.raw += other.raw;
        self.other += other.other;
    }

    fn total(&self) -> u64 {
        self.admitted + self.denied + self.failed
    }

    /// The decisions' sources, e.g. `store 12, local 4`.
    fn sources(&self) -> String {
        let parts: Vec<String> = [
            ("store", self.store),
            ("local", self.local),
            ("fail-open", self.fail_open),
            ("deny cache", self.deny_cache),
            ("raw", self.raw),
            ("none", self.other),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
        parts.join(", ")
    }
}

/// What one latency cell measured.
struct Cell {
    /// Latencies in ms, sorted.
    sorted_ms: Vec<f64>,
    tally: Tally,
    per_sec: f64,
}

impl Cell {
    fn p(&self, q: f64) -> f64 {
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

/// Starts a proxy on the proxies' runtime.
async fn start_proxy(proxies: &Handle, port: u16, rtt: Duration) -> Proxy {
    proxies
        .spawn(Proxy::with_rtt(port, rtt))
        .await
        .expect("start a proxy")
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

/// Prints and keeps what a run reports.
#[derive(Default)]
struct Report(String);

impl Report {
    fn line(&mut self, text: impl AsRef<str>) {
        println!("{}", text.as_ref());
        self.0.push_str(text.as_ref());
        self.0.push('\n');
    }
}

fn ms(value: f64) -> String {
    if value.is_nan() {
        "–".into()
    } else if value.abs() < 1.0 {
        format!("{value:.3}")
    } else if value.abs() < 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.1}")
    }
}

/// `added` in round trips as measured (`ping_ms`), none when the nominal `rtt_ms` is 0.
fn in_rtts(added: f64, rtt_ms: f64, ping_ms: f64) -> String {
    if rtt_ms > 0.0 {
        format!("{:.2}", added / ping_ms)
    } else {
        "–".into()
    }
}

/// One latency cell's three variants.
struct Row {
    rtt_ms: f64,
    /// The proxy's round trip as measured (`PING` p50), ms.
    ping_ms: f64,
    clients: usize,
    memory: Cell,
    redis: Cell,
    raw: Cell,
}

async fn latency(
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

fn flush(redis: &RedisServer) {
    let mut con = redis.connection();
    redis::cmd("FLUSHALL").exec(&mut con).expect("FLUSHALL");
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut con)
        .expect("SCRIPT FLUSH");
}

async fn exactness(report: &mut Report, proxies: &Handle, redis: &RedisServer, rtts: &[f64]) {
    const BURSTS: usize = 4;
    const PER_BURST: usize = 40;
    const LIMIT: u64 = 5;
    let table = Table::new(&[
        "RTT ms",
        "admitted per burst (goal 5 each)",
        "decisions by source",
        "connect ms",
        "slowest request ms",
    ])
    .left(1)
    .left(2);
    report.line(
        "\n### Exactness: 2 instances freshly connected, 4 concurrent bursts of 40 (20 each), GCRA 5 per hour\n",
    );
    report.line(table.header());
    for &rtt_ms in rtts {
        flush(redis);
        let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
        let (one, two) = tokio::join!(
            start_proxy(proxies, redis.port(), rtt),
            start_proxy(proxies, redis.port(), rtt)
        );
        let policy = Policy::new(
            "exact",
            [Limit::gcra(LIMIT, Duration::from_secs(3600)).expect("a valid limit")],
        )
        .expect("a valid policy");
        let started = Instant::now();
        let (one_url, two_url) = (one.url(), two.url());
        let (first, second) = tokio::join!(
            redis_store(&one_url, "exact"),
            redis_store(&two_url, "exact")
        );
        let instances = [
            layered(first, policy.clone(), OnStoreError::local()),
            layered(second, policy, OnStoreError::local()),
        ];
        let connect = started.elapsed();
        let mut tasks = Vec::new();
        for burst in 0..BURSTS {
            let key =
                HeaderValue::from_str(&format!("exact-{rtt_ms}-{burst}")).expect("a header value");
            for i in 0..PER_BURST {
                let app = instances[i % 2].clone();
                let key = key.clone();
                tasks.push(tokio::spawn(async move { (burst, call(&app, key).await) }));
            }
        }
        let mut admitted = [0u64; BURSTS];
        let mut tally = Tally::default();
        let mut slowest = Duration::ZERO;
        for task in tasks {
            let (burst, outcome) = task.await.expect("a burst task");
            admitted[burst] += u64::from(outcome.status == StatusCode::OK);
            tally.add(&outcome);
            slowest = slowest.max(outcome.took);
        }
        let exact = admitted.iter().all(|&n| n == LIMIT);
        report.line(table.row([
            rtt_ms.to_string(),
            format!(
                "{}{}",
                admitted.map(|n| n.to_string()).join(", "),
                if exact { "" } else { " (missed)" }
            ),
            tally.sources(),
            ms(connect.as_secs_f64() * 1e3),
            ms(slowest.as_secs_f64() * 1e3),
        ]));
        drop(instances);
    }
}

/// How Redis is frozen.
#[derive(Clone, Copy)]
enum Stop {
    /// The proxy delivers nothing either way.
    Proxy,
    /// `redis-server` gets `SIGSTOP`.
    Sigstop,
}

/// Sends one request per `TICK` from `at` on, `count` of them, each in a task of its own (an
/// open loop: a slow answer delays no later request).
async fn paced(
    app: &Router,
    key: &HeaderValue,
    at: Instant,
    count: usize,
) -> Vec<(Instant, tokio::task::JoinHandle<Outcome>)> {
    let mut sent = Vec::with_capacity(count);
    for n in 0..count {
        let when = at + TICK * n as u32;
        tokio::time::sleep_until(when.into()).await;
        let (app, key) = (app.clone(), key.clone());
        sent.push((
            Instant::now(),
            tokio::spawn(async move { call(&app, key).await }),
        ));
    }
    sent
}

async fn outcomes(sent: Vec<(Instant, tokio::task::JoinHandle<Outcome>)>) -> Vec<Outcome> {
    let mut done = Vec::with_capacity(sent.len());
    for (_, task) in sent {
        done.push(task.await.expect("a request task"));
    }
    done
}

struct FrozenRow {
    frozen: Vec<Outcome>,
    /// From the thaw to the first store decision, if one came within `RESUME_LIMIT`.
    resumed: Option<Duration>,
    /// Requests after the thaw until then.
    after: Vec<Outcome>,
}

async fn frozen_run(
    proxies: &Handle,
    redis: &RedisServer,
    rtt: Duration,
    stop: Stop,
    mode: OnStoreError,
) -> FrozenRow {
    let proxy = start_proxy(proxies, redis.port(), rtt).await;
    let store = redis_store(&proxy.url(), "frozen").await;
    let app = layered(store, wide_policy(), mode);
    let key = HeaderValue::from_static("sk_frozen_client");
    // Healthy for 2 s.
    let healthy = outcomes(paced(&app, &key, Instant::now(), 8).await).await;
    if healthy.iter().any(|o| o.seen != Seen::Store) {
        eprintln!("WARNING: before the freeze, not every decision came from the store");
    }
    let frozen_at = Instant::now();
    match stop {
        Stop::Proxy => proxy.freeze(),
        Stop::Sigstop => redis.freeze(),
    }
    let frozen = outcomes(paced(&app, &key, frozen_at, 16).await).await;
    tokio::time::sleep_until((frozen_at + Duration::from_secs(4)).into()).await;
    let thawed_at = Instant::now();
    match stop {
        Stop::Proxy => proxy.thaw(),
        Stop::Sigstop => redis.thaw(),
    }
    // 4 per second until a decision comes from the store (checked as answers arrive).
    let mut flying: Vec<(Instant, tokio::task::JoinHandle<Outcome>)> = Vec::new();
    let mut after: Vec<(Instant, Outcome)> = Vec::new();
    let mut resumed = None;
    let mut n = 0u32;
    while resumed.is_none() && thawed_at.elapsed() < RESUME_LIMIT {
        tokio::time::sleep_until((thawed_at + TICK * n).into()).await;
        n += 1;
        let (app, key) = (app.clone(), key.clone());
        flying.push((
            Instant::now(),
            tokio::spawn(async move { call(&app, key).await }),
        ));
        // The answers due by the next tick.
        tokio::time::sleep_until((thawed_at + TICK * n - Duration::from_millis(1)).into()).await;
        let (done, still): (Vec<_>, Vec<_>) =
            flying.into_iter().partition(|(_, task)| task.is_finished());
        flying = still;
        for (at, task) in done {
            after.push((at, task.await.expect("a request task")));
        }
        // When the first store decision arrived, counted from the thaw.
        resumed = after
            .iter()
            .filter(|(_, outcome)| outcome.seen == Seen::Store)
            .map(|(at, outcome)| (*at + outcome.took).saturating_duration_since(thawed_at))
            .min();
    }
    for (at, task) in flying {
        after.push((at, task.await.expect("a request task")));
    }
    FrozenRow {
        frozen,
        resumed,
        after: after.into_iter().map(|(_, outcome)| outcome).collect(),
    }
}

async fn frozen(report: &mut Report, proxies: &Handle, redis: &RedisServer, rtt_ms: f64) {
    let table = Table::new(&[
        "Redis",
        "failure mode",
        "requests while frozen",
        "over 50 ms (goal ≤ 3)",
        "p50 ms",
        "max ms",
        "decisions by source",
        "store decides again after (goal ≤ 2 s)",
        "over 50 ms after the thaw",
    ])
    .left(1)
    .left(6);
    report.line(format!(
        "\n### Frozen Redis at {rtt_ms} ms: 4 requests/s, 4 s frozen, then thawed\n"
    ));
    report.line(table.header());
    let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
    for (stop, stop_name) in [
        (Stop::Proxy, "proxy frozen"),
        (Stop::Sigstop, "`redis-server` SIGSTOP"),
    ] {
        for (mode, mode_name) in [
            (OnStoreError::local(), "`Local { instances: 1 }`"),
            (OnStoreError::Open, "`Open`"),
        ] {
            let row = frozen_run(proxies, redis, rtt, stop, mode).await;
            let mut took: Vec<f64> = row
                .frozen
                .iter()
                .map(|o| o.took.as_secs_f64() * 1e3)
                .collect();
            took.sort_by(f64::total_cmp);
            let slow = row.frozen.iter().filter(|o| o.took > SLOW).count();
            let slow_after = row.after.iter().filter(|o| o.took > SLOW).count();
            let mut tally = Tally::default();
            row.frozen.iter().for_each(|o| tally.add(o));
            report.line(table.row([
                stop_name.to_owned(),
                mode_name.to_owned(),
                row.frozen.len().to_string(),
                format!("{slow}{}", if slow <= 3 { "" } else { " (missed)" }),
                ms(percentile(&took, 0.5)),
                ms(percentile(&took, 1.0)),
                tally.sources(),
                match row.resumed {
                    Some(after) => format!(
                        "{} ms{}",
                        ms(after.as_secs_f64() * 1e3),
                        if after <= Duration::from_secs(2) {
                            ""
                        } else {
                            " (missed)"
                        }
                    ),
                    None => format!("not within {} s (missed)", RESUME_LIMIT.as_secs()),
                },
                format!("{slow_after} of {}", row.after.len()),
            ]));
        }
    }
}

fn main() {
    if !support::bench_mode(
        "distance benchmark: run with `cargo bench --all-features --bench distance`",
    ) {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 3.0);
    let rtts = support::list_knob(
        "REDLIMIT_BENCH_RTTS",
        &[0.0, 1.0, 10.0, 30.0],
        "round trips in ms (0 to 1000)",
        |ms: &f64| (0.0..=1000.0).contains(ms),
    );
    let clients = support::list_knob(
        "REDLIMIT_BENCH_CLIENTS",
        &[16, 256],
        "client counts (1 to 4096)",
        |c: &usize| (1..=4096).contains(c),
    );
    let keys = support::knob_where(
        "REDLIMIT_BENCH_KEYS",
        10_000,
        "at least 1 key",
        |&k: &usize| k > 0,
    );
    let frozen_rtt = support::knob_where(
        "REDLIMIT_BENCH_FROZEN_RTT",
        10.0,
        "a round trip in ms under 40 (a healthy request must stay under 50 ms)",
        |ms: &f64| (0.0..40.0).contains(ms),
    );
    let only: Option<String> = support::optional_knob("REDLIMIT_BENCH_ONLY");
    let part = |name: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|p| p == name))
    };

    let redis = RedisServer::start();
    let proxies = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("proxy")
        .enable_all()
        .build()
        .expect("the proxies' runtime");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the bench runtime");
    let started = Instant::now();
    let mut report = Report::default();
    let rows = runtime.block_on(async {
        // Exactness first: it flushes Redis and its scripts before each round trip.
        if part("exactness") {
            exactness(&mut report, proxies.handle(), &redis, &rtts).await;
        }
        let rows = if part("latency") {
            latency(
                &mut report,
                proxies.handle(),
                &redis,
                &rtts,
                &clients,
                keys,
                secs,
            )
            .await
        } else {
            Vec::new()
        };
        if part("frozen") {
            frozen(&mut report, proxies.handle(), &redis, frozen_rtt).await;
        }
        rows
    });
    drop(runtime);
    drop(proxies);
    eprintln!("\ntook {:.0} s", started.elapsed().as_secs_f64());
    if only.is_none() {
        write_results(&report, &redis, secs, keys);
        plot(&rows);
    }
}

/// Appends this run to `docs/bench/distance.md` (made with its heading if missing).
fn write_results(report: &Report, redis: &RedisServer, secs: f64, keys: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/distance.md");
    std::fs::create_dir_all(path.parent().expect("a parent directory")).expect("docs/bench/");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        concat!(
            "<!-- Dated results of benches/distance.rs; how to run it: benches/README.md. ",
            "Newest runs are added at the end. -->\n\n",
            "# Redis a network away (`benches/distance.rs`)\n\n",
            "Redis behind the tests' delaying proxy (`tests/it/support/proxy.rs`), requests driven in\n",
            "process (`tower::ServiceExt::oneshot` on the axum router, no HTTP). Added latency against\n",
            "the round trip, beside a memory-store baseline and a raw one-`EVALSHA` floor measured in\n",
            "the same run; the exactness of concurrent bursts on two freshly connected instances; a\n",
            "frozen Redis at 4 requests/s. Latencies in ms; \"RTTs\" divides the added latency by the\n",
            "round trip as measured (the `PING` p50 through the proxy, in parentheses beside the\n",
            "nominal one). The module docs of `benches/distance.rs` say exactly what each part does.\n",
        )
        .to_owned()
    });
    let server = support::redis_info(&mut redis.connection(), "server");
    let _ = write!(
        text,
        "\n## {}\n\n`cargo bench --all-features --bench distance` (REDLIMIT_BENCH_SECS={secs}, \
         REDLIMIT_BENCH_KEYS={keys})\n\n{}; redis {}, on the same machine, through the proxy\n{}",
        support::today(),
        support::machine_line(),
        server.get("redis_version").map_or("?", String::as_str),
        report.0,
    );
    std::fs::write(&path, text).expect("write docs/bench/distance.md");
    println!("\nwrote {}", path.display());
}

/// `docs/bench/distance.svg`: added p50 and p99 (against the memory store) against the round
/// trip, for redlimit's Redis store and the raw `EVALSHA` floor at each client count.
fn plot(rows: &[Row]) {
    use plotters::prelude::*;

    if rows.is_empty() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/distance.svg");
    let root = SVGBackend::new(&path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).expect("draw");
    let (left, right) = root.split_horizontally(550);
    let max_rtt = rows.iter().map(|r| r.rtt_ms).fold(1.0, f64::max);
    let mut clients: Vec<usize> = rows.iter().map(|r| r.clients).collect();
    clients.sort_unstable();
    clients.dedup();
    let palette = [
        RGBColor(200, 60, 40),
        RGBColor(240, 150, 60),
        RGBColor(40, 90, 170),
        RGBColor(110, 170, 220),
    ];
    for (area, q, title) in [
        (&left, 0.5, "added p50 latency, ms"),
        (&right, 0.99, "added p99 latency, ms"),
    ] {
        let added = |cell: &Cell, row: &Row| cell.p(q) - row.memory.p(q);
        let max = rows
            .iter()
            .flat_map(|r| [added(&r.redis, r), added(&r.raw, r)])
            .filter(|v| v.is_finite())
            .fold(max_rtt, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..max_rtt * 1.02, 0.0..max)
            .expect("draw");
        chart
            .configure_mesh()
            .x_desc("round trip to Redis, ms")
            .y_desc("ms over the memory store")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .expect("draw");
        chart
            .draw_series(LineSeries::new(
                [(0.0, 0.0), (max_rtt, max_rtt)],
                RGBColor(160, 160, 160),
            ))
            .expect("draw")
            .label("one round trip")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RGBColor(160, 160, 160)));
        let mut color = palette.iter().cycle();
        for (name, redis) in [("redlimit redis", true), ("raw EVALSHA", false)] {
            for &c in &clients {
                let style = color.next().copied().unwrap_or(BLACK).stroke_width(2);
                let points: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r.clients == c)
                    .map(|r| {
                        let cell = if redis { &r.redis } else { &r.raw };
                        (r.rtt_ms, added(cell, r))
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), style))
                    .expect("draw")
                    .label(format!("{name}, {c} clients"))
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
                chart
                    .draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 3, style.filled())),
                    )
                    .expect("draw");
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .expect("draw");
    }
    root.present().expect("write docs/bench/distance.svg");
    println!("wrote {}", path.display());
}

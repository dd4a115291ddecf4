//! End-to-end HTTP benchmark: the same tiny axum app, the same load generator, the same
//! machine, variants alternated in one run.
//!
//! ```text
//! cargo bench --bench http            # ~3 minutes; writes docs/benchmarks.svg
//! REDLIMIT_BENCH_SECS=1 REDLIMIT_BENCH_ROUNDS=1 cargo bench --bench http   # a quick look
//! REDLIMIT_BENCH_ONLY=memory,governor cargo bench --bench http         # some variants only
//! REDLIMIT_BENCH_CONNECTIONS=64 cargo bench --bench http               # one connection count
//! REDLIMIT_BENCH_SYSCALLS=1 cargo bench --bench http    # + the server thread's syscalls per request
//! REDLIMIT_BENCH_LINGER_MS=0 cargo bench --bench http    # the Redis store's batch linger off
//! ```
//!
//! Variants: bare axum (the ceiling); redlimit with the memory store and with a Redis store
//! (GCRA and sliding log), each with one hot key and with 100k keys; tower_governor (in memory,
//! the in-process peer); a hand-written middleware sending one raw `EVALSHA` of the same
//! script over one multiplexed connection; and the minimal middleware (`support/minimal.rs`:
//! key from the `x-key` header, one `EVALSHA` of a minimal GCRA script, no headers), the
//! baseline the layer on Redis is judged against. Every
//! quota is high enough (10^6 per second) that requests are admitted: the benchmark measures
//! the cost of checking, not of denying. Every request carries an `x-key` header: a constant
//! (`hot`) for "hot key" (redlimit keys those on `Global`, the minimal middleware on the header),
//! one of 100k values for "100k keys".
//!
//! Server and load generator run in this process on one single-threaded Tokio runtime each,
//! and `redis-server` (started here, on a free port) is a third process: on a 2-core machine
//! they share the cores, identically for every variant. Each variant runs for
//! `REDLIMIT_BENCH_SECS` (default 2) after a warm-up, at 16 and 64 connections, in
//! `REDLIMIT_BENCH_ROUNDS` (default 3) alternating rounds; the report takes each number's median
//! over rounds.

mod support;

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hdrhistogram::Histogram;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use redlimit::key::Global;
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Algorithm, Key, KeyExtractor, Limit, Policy, RateLimitLayer};
use support::redis_server::RedisServer;
use support::{
    Table, command_stats, cpu_us, current_thread_proc, median, redis_cpu_secs, reset_redis_stats,
    syscalls,
};

const KEYS: u64 = 100_000;
const RATE: u64 = 1_000_000;
const CONNECTIONS: [usize; 2] = [16, 64];

/// How requests are keyed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    Hot,
    Many,
}

/// The same key text for every limiter: the `x-key` header (no hashing, as governor's
/// string key has none).
fn by_header() -> impl KeyExtractor + Clone {
    |parts: &http::request::Parts| parts.headers.get("x-key").map(|v| Key::new(v.as_bytes()))
}

/// Builds a variant's app inside the server's runtime (Redis connections are driven by the
/// runtime that made them), fresh for every measurement.
type Make = Box<dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Router>>>>;

struct Variant {
    name: String,
    keys: Keys,
    make: Make,
    /// Counts Redis commands (the variant uses Redis).
    redis: bool,
}

fn variant<F, Fut>(name: String, keys: Keys, redis: bool, make: F) -> Variant
where
    F: Fn(String) -> Fut + 'static,
    Fut: std::future::Future<Output = Router> + 'static,
{
    Variant {
        name,
        keys,
        redis,
        make: Box::new(move |url| Box::pin(make(url))),
    }
}

async fn redis_store(url: &str, prefix: &str) -> RedisStore {
    let builder = RedisStore::builder(url).prefix(prefix);
    // REDLIMIT_BENCH_LINGER_MS=0: the batcher's linger off (the store's default otherwise).
    let builder = match support::optional_knob::<u64>("REDLIMIT_BENCH_LINGER_MS") {
        Some(ms) => builder.batch_linger(std::time::Duration::from_millis(ms)),
        None => builder,
    };
    builder.connect().await.expect("connect to the bench redis")
}

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

fn policy(algorithm: Algorithm) -> Policy {
    Policy::new(
        "bench",
        [Limit::new(algorithm, RATE, Duration::from_secs(1)).unwrap()],
    )
    .unwrap()
}

fn redlimit(
    store: impl redlimit::store::Store + Clone,
    algorithm: Algorithm,
    keys: Keys,
) -> Router {
    let layer =
        RateLimitLayer::builder(store, policy(algorithm)).store_deadline(Duration::from_secs(1));
    let layer = match keys {
        Keys::Hot => layer.key(Global),
        Keys::Many => layer.key(by_header()),
    };
    app().layer(layer.build().expect("valid layer"))
}

/// tower_governor's key: the same header, or one global key.
#[derive(Clone)]
struct GovernorKey(Keys);

impl tower_governor::key_extractor::KeyExtractor for GovernorKey {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, tower_governor::GovernorError> {
        Ok(match self.0 {
            Keys::Hot => String::new(),
            Keys::Many => req
                .headers()
                .get("x-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
        })
    }
}

fn governor(keys: Keys) -> Router {
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .per_nanosecond(1_000) // 10^6 per second, like the others
        .burst_size(NonZeroU32::new(RATE as u32).unwrap().get())
        .key_extractor(GovernorKey(keys))
        .use_headers()
        .finish()
        .expect("governor config");
    app().layer(tower_governor::GovernorLayer::new(config))
}

/// The physical limit of a Redis-backed check: the very `EVALSHA` the store sends (same
/// script, keys and arguments), over one multiplexed connection, no deadline, no headers.
#[derive(Clone)]
struct Raw {
    connection: redis::aio::MultiplexedConnection,
    policy: Arc<Policy>,
    keys: Keys,
}

async fn raw_evalsha(State(raw): State<Raw>, request: Request, next: Next) -> Response {
    let key = match raw.keys {
        Keys::Hot => Key::new("global"),
        Keys::Many => match request.headers().get("x-key") {
            Some(v) => Key::new(v.as_bytes()),
            None => return StatusCode::BAD_REQUEST.into_response(),
        },
    };
    let reply: Result<Vec<i64>, _> = redlimit::__private::script_call("raw", &raw.policy, &key, 1)
        .query_async(&mut raw.connection.clone())
        .await;
    match reply {
        Ok(reply) if reply.get(1) == Some(&0) => StatusCode::TOO_MANY_REQUESTS.into_response(),
        _ => next.run(request).await,
    }
}

async fn raw(url: &str, keys: Keys) -> Router {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let policy = policy(Algorithm::Gcra);
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(RedisStore::script_source_for(&policy))
        .query_async(&mut connection)
        .await
        .unwrap();
    let state = Raw {
        connection,
        policy: Arc::new(policy),
        keys,
    };
    app().layer(middleware::from_fn_with_state(state, raw_evalsha))
}

/// What one measurement saw.
#[derive(Clone, Copy, Default)]
struct Sample {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    /// Redis round trips (script calls) per request (`None` for variants without Redis); below
    /// one when the store batches decisions.
    commands: Option<f64>,
    /// Commands Redis executed per request, counting those inside the script.
    executed: Option<f64>,
    errors: u64,
    /// CPU time of the server's thread per request, µs: what the variant costs the service,
    /// steadier than throughput on a shared machine.
    server_cpu_us: f64,
    /// Redis's CPU time per request, µs (`INFO cpu`; `None` for variants without Redis).
    redis_cpu_us: Option<f64>,
}

/// Serves the variant's app on a free port in a runtime of its own; returns the address and a
/// stopper.
fn serve(
    make: &Make,
    url: &str,
) -> (
    SocketAddr,
    std::path::PathBuf,
    std::thread::JoinHandle<()>,
    Arc<AtomicBool>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let flag = Arc::clone(&stop);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = runtime.block_on(make(url.to_owned()));
    let handle = std::thread::spawn(move || {
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send((listener.local_addr().unwrap(), current_thread_proc()))
                .unwrap();
            let shutdown = async move {
                while !flag.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(shutdown)
            .await
            .unwrap();
        });
    });
    let (addr, task) = rx.recv().unwrap();
    (addr, task, handle, stop)
}

/// Closed-loop load: `connections` HTTP/1.1 keep-alive connections, each sending its next
/// request when the last answer arrives, for `warmup` then `duration`. Returns the requests
/// and latencies of the measured part (after `on_measure` ran).
fn load(
    addr: SocketAddr,
    keys: Keys,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    on_measure: impl FnOnce(),
) -> (u64, Histogram<u64>, u64, Duration) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let start = Instant::now();
        let measure_from = start + warmup;
        let end = measure_from + duration;
        let tasks: Vec<_> = (0..connections)
            .map(|c| {
                tokio::spawn(async move {
                    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                    stream.set_nodelay(true).unwrap();
                    let (mut sender, conn) =
                        hyper::client::conn::http1::handshake(TokioIo::new(stream))
                            .await
                            .unwrap();
                    tokio::spawn(conn);
                    let mut histogram = Histogram::<u64>::new(3).unwrap();
                    let (mut done, mut errors) = (0u64, 0u64);
                    // Distinct keys per connection, cycling over all of them.
                    let mut next_key = (c as u64).wrapping_mul(7_919) % KEYS;
                    loop {
                        let sent = Instant::now();
                        if sent >= end {
                            break;
                        }
                        next_key = (next_key + 7_919) % KEYS;
                        let req = hyper::Request::get("/").header("host", "bench");
                        // Every variant gets the same request: the minimal middleware keys on
                        // the header in both cases.
                        let req = match keys {
                            Keys::Many => req.header("x-key", next_key),
                            Keys::Hot => req.header("x-key", "hot"),
                        };
                        let res = sender.send_request(req.body(Body::empty()).unwrap()).await;
                        let ok = match res {
                            Ok(res) => {
                                let status = res.status();
                                res.into_body().collect().await.is_ok() && status == StatusCode::OK
                            }
                            Err(_) => false,
                        };
                        if sent >= measure_from {
                            let us = sent.elapsed().as_micros() as u64;
                            histogram.record(us.max(1)).unwrap();
                            done += 1;
                            errors += u64::from(!ok);
                        }
                    }
                    (done, histogram, errors)
                })
            })
            .collect();
        tokio::time::sleep_until(measure_from.into()).await;
        on_measure();
        let measured_at = Instant::now();
        let mut total = Histogram::<u64>::new(3).unwrap();
        let (mut requests, mut errors) = (0, 0);
        for task in tasks {
            let (done, histogram, errs) = task.await.unwrap();
            requests += done;
            errors += errs;
            total.add(histogram).unwrap();
        }
        (
            requests,
            total,
            errors,
            end.saturating_duration_since(measured_at)
                .max(Duration::from_millis(1)),
        )
    })
}

/// Redis's command counts since the last reset: (calls from clients that are script runs or
/// loads, every command executed, including those a script runs).
fn redis_calls(redis: &RedisServer) -> (u64, u64) {
    let stats = command_stats(&mut redis.connection());
    let scripts = stats
        .iter()
        .filter(|(name, _)| *name == "evalsha" || *name == "eval" || name.starts_with("script"))
        .map(|(_, stat)| stat.calls)
        .sum();
    (scripts, stats.values().map(|stat| stat.calls).sum())
}

fn measure(variant: &Variant, connections: usize, redis: &RedisServer, secs: f64) -> Sample {
    let (addr, task, handle, stop) = serve(&variant.make, &redis.url());
    let cpu_before = std::cell::Cell::new(0.0);
    let redis_cpu_before = std::cell::Cell::new(0.0);
    let window = std::cell::Cell::new(None);
    let reset = || {
        reset_redis_stats(&mut redis.connection());
        // Started first: perf's attaching is then outside the CPU time measured.
        if syscalls::wanted() {
            let tid = task.file_name().and_then(|t| t.to_str()?.parse().ok());
            window.set(Some(syscalls::Window::start(std::process::id(), tid)));
        }
        cpu_before.set(cpu_us(&task));
        redis_cpu_before.set(redis_cpu_secs(&mut redis.connection()));
    };
    let (requests, histogram, errors, took) = load(
        addr,
        variant.keys,
        connections,
        Duration::from_millis(500),
        Duration::from_secs_f64(secs),
        reset,
    );
    let server_cpu = cpu_us(&task) - cpu_before.get();
    if let Some(window) = window.take() {
        eprintln!(
            "  {} c={connections}, the server's thread per request: {}",
            variant.name,
            window.stop().per(requests)
        );
    }
    let redis_cpu = redis_cpu_secs(&mut redis.connection()) - redis_cpu_before.get();
    let (calls, executed) = redis_calls(redis);
    stop.store(true, Ordering::Relaxed);
    handle.join().unwrap();
    Sample {
        rps: requests as f64 / took.as_secs_f64(),
        p50_us: histogram.value_at_quantile(0.50) as f64,
        p99_us: histogram.value_at_quantile(0.99) as f64,
        commands: variant.redis.then(|| calls as f64 / requests.max(1) as f64),
        executed: variant
            .redis
            .then(|| executed as f64 / requests.max(1) as f64),
        errors,
        server_cpu_us: server_cpu / requests.max(1) as f64,
        redis_cpu_us: variant
            .redis
            .then(|| redis_cpu * 1e6 / requests.max(1) as f64),
    }
}

fn main() {
    if !support::bench_mode("http benchmark: run with `cargo bench --bench http`") {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 2.0);
    let rounds: usize =
        support::knob_where("REDLIMIT_BENCH_ROUNDS", 3, "at least 1 round", |&n| n > 0);
    // REDLIMIT_BENCH_ONLY=a,b keeps the variants whose names contain one of those (bare axum stays).
    let only: Option<String> = support::optional_knob("REDLIMIT_BENCH_ONLY");
    let redis = RedisServer::start();
    let mut variants = vec![variant("bare axum".into(), Keys::Hot, false, |_| async {
        app()
    })];
    for keys in [Keys::Hot, Keys::Many] {
        let label = if keys == Keys::Hot {
            "hot key"
        } else {
            "100k keys"
        };
        variants.push(variant(
            format!("redlimit memory gcra, {label}"),
            keys,
            false,
            move |_| async move { redlimit(MemoryStore::new(), Algorithm::Gcra, keys) },
        ));
        variants.push(variant(
            format!("tower_governor, {label}"),
            keys,
            false,
            move |_| async move { governor(keys) },
        ));
        variants.push(variant(
            format!("minimal EVALSHA gcra, {label}"),
            keys,
            true,
            move |url| async move {
                support::minimal::Minimal::connect(&url, RATE, 1_000_000)
                    .await
                    .layer(app())
            },
        ));
        variants.push(variant(
            format!("raw EVALSHA gcra, {label}"),
            keys,
            true,
            move |url| async move { raw(&url, keys).await },
        ));
        // Local-first: decided in memory, synced with Redis every 100 ms.
        variants.push(variant(
            format!("redlimit local-first gcra, {label}"),
            keys,
            true,
            move |url| async move {
                let store = redis_store(&url, "local-first")
                    .await
                    .local_first(Duration::from_millis(100))
                    .expect("local-first settings");
                redlimit(store, Algorithm::Gcra, keys)
            },
        ));
        for algorithm in [Algorithm::Gcra, Algorithm::SlidingLog] {
            variants.push(variant(
                format!("redlimit redis {algorithm}, {label}"),
                keys,
                true,
                move |url| async move {
                    redlimit(redis_store(&url, algorithm.name()).await, algorithm, keys)
                },
            ));
        }
    }

    if let Some(only) = &only {
        let wanted: Vec<&str> = only.split(',').collect();
        variants.retain(|v| v.name == "bare axum" || wanted.iter().any(|w| v.name.contains(w)));
    }
    // samples[variant][connections index] over rounds
    // REDLIMIT_BENCH_CONNECTIONS=64 measures at those connection counts only (the picture is
    // then left alone).
    let connections_knob = support::list_knob(
        "REDLIMIT_BENCH_CONNECTIONS",
        &CONNECTIONS,
        "positive connection counts",
        |&c| c > 0,
    );
    let partial = only.is_some() || connections_knob != CONNECTIONS;
    let connection_counts = connections_knob;
    let mut samples = vec![vec![Vec::new(); connection_counts.len()]; variants.len()];
    for round in 0..rounds {
        for (ci, &connections) in connection_counts.iter().enumerate() {
            for (vi, variant) in variants.iter().enumerate() {
                let sample = measure(variant, connections, &redis, secs);
                eprintln!(
                    "round {round} c={connections:>2} {:<38} {:>9.0} req/s  p50 {:>6.0} µs  p99 {:>6.0} µs{}",
                    variant.name,
                    sample.rps,
                    sample.p50_us,
                    sample.p99_us,
                    if sample.errors > 0 {
                        format!("  ERRORS {}", sample.errors)
                    } else {
                        String::new()
                    }
                );
                // Every decision runs at least one command inside its script (a batched call
                // carries many decisions, so calls per request say nothing of it).
                // (Local-first runs a command per interval, not per request.)
                if sample.executed.is_some_and(|c| c < 0.95)
                    && !variant.name.contains("local-first")
                {
                    eprintln!(
                        "WARNING: {} ran fewer than one Redis command per request: it failed open, the numbers are not a measurement",
                        variant.name
                    );
                }
                samples[vi][ci].push(sample);
            }
        }
    }

    let summary: Vec<Vec<Sample>> = samples
        .iter()
        .map(|per_c| {
            per_c
                .iter()
                .map(|s| Sample {
                    rps: median(s.iter().map(|x| x.rps).collect()),
                    p50_us: median(s.iter().map(|x| x.p50_us).collect()),
                    p99_us: median(s.iter().map(|x| x.p99_us).collect()),
                    commands: s[0]
                        .commands
                        .map(|_| median(s.iter().filter_map(|x| x.commands).collect())),
                    executed: s[0]
                        .executed
                        .map(|_| median(s.iter().filter_map(|x| x.executed).collect())),
                    errors: s.iter().map(|x| x.errors).sum(),
                    server_cpu_us: median(s.iter().map(|x| x.server_cpu_us).collect()),
                    redis_cpu_us: s[0]
                        .redis_cpu_us
                        .map(|_| median(s.iter().filter_map(|x| x.redis_cpu_us).collect())),
                })
                .collect()
        })
        .collect();
    let find = |name: &str| variants.iter().position(|v| v.name == name).unwrap();
    let bare = find("bare axum");
    let table = Table::new(&[
        "variant",
        "req/s",
        "p50 µs",
        "p99 µs",
        "server CPU µs/req",
        "Redis CPU µs/req",
        "Redis calls/req",
        "commands run/req",
        "× bare axum (req/s)",
        "× raw EVALSHA (req/s)",
        "× raw EVALSHA (CPU)",
        "server CPU − baseline µs",
    ]);
    for (ci, &connections) in connection_counts.iter().enumerate() {
        println!("\n### {connections} connections\n");
        println!("{}", table.header());
        for (vi, variant) in variants.iter().enumerate() {
            let s = summary[vi][ci];
            let raw_name = if variant.keys == Keys::Hot {
                "raw EVALSHA gcra, hot key"
            } else {
                "raw EVALSHA gcra, 100k keys"
            };
            let raw = variants
                .iter()
                .position(|v| v.name == raw_name)
                .map(|i| summary[i][ci]);
            let raw = raw.filter(|_| variant.redis);
            // The baseline of the goals: the minimal middleware for Redis variants, governor
            // for the memory store.
            let label = if variant.keys == Keys::Hot {
                "hot key"
            } else {
                "100k keys"
            };
            let baseline = if variant.name.starts_with("redlimit redis") {
                Some(format!("minimal EVALSHA gcra, {label}"))
            } else if variant.name.starts_with("redlimit memory") {
                Some(format!("tower_governor, {label}"))
            } else {
                None
            };
            let baseline = baseline
                .and_then(|name| variants.iter().position(|v| v.name == name))
                .map(|i| summary[i][ci].server_cpu_us);
            println!(
                "{}",
                table.row([
                    variant.name.clone(),
                    format!("{:.0}", s.rps),
                    format!("{:.0}", s.p50_us),
                    format!("{:.0}", s.p99_us),
                    format!("{:.1}", s.server_cpu_us),
                    s.redis_cpu_us.map_or("–".into(), |c| format!("{c:.2}")),
                    s.commands.map_or("–".into(), |c| format!("{c:.2}")),
                    s.executed.map_or("–".into(), |c| format!("{c:.1}")),
                    format!("{:.2}", s.rps / summary[bare][ci].rps),
                    raw.map_or("–".into(), |raw| format!("{:.2}", s.rps / raw.rps)),
                    // Raw's CPU over ours: above 1 when ours costs less.
                    raw.map_or("–".into(), |raw| {
                        format!("{:.2}", raw.server_cpu_us / s.server_cpu_us)
                    }),
                    baseline.map_or("–".into(), |b| format!("{:+.2}", s.server_cpu_us - b)),
                ])
            );
        }
    }
    // A partial run must not overwrite the published picture.
    if !partial {
        plot(&variants, &summary);
    }
}

/// `docs/benchmarks.svg`: throughput, server CPU per request and p99 latency per variant, at
/// both connection counts. CPU per request sits beside throughput because on a shared 2-core
/// machine it is the steadier of the two.
fn plot(variants: &[Variant], summary: &[Vec<Sample>]) {
    use plotters::prelude::*;

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.svg");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let n = variants.len();
    let root = SVGBackend::new(&path, (1360, 34 * n as u32 + 110)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (names, charts) = root.split_horizontally(270);
    let (left, rest) = charts.split_horizontally(365);
    let (middle, right) = rest.split_horizontally(360);
    let colors = [RGBColor(70, 130, 180), RGBColor(230, 140, 40)];
    // Variant i occupies the band [n-1-i, n-i) from the top; one bar per connection count.
    let band = |vi: usize, ci: usize| {
        let top = (n - vi) as f64 - 0.12 - 0.38 * ci as f64;
        (top - 0.36, top)
    };
    let mut label_rows = Vec::new();
    for (area, title, value) in [
        (
            &left,
            "requests/s (more is better)",
            &(|s: &Sample| s.rps) as &dyn Fn(&Sample) -> f64,
        ),
        (
            &middle,
            "server CPU µs/request (less is better)",
            &|s: &Sample| s.server_cpu_us,
        ),
        (&right, "p99 latency µs (less is better)", &|s: &Sample| {
            s.p99_us
        }),
    ] {
        let max = summary.iter().flatten().map(value).fold(0.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .build_cartesian_2d(0.0..max, 0.0..n as f64)
            .unwrap();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_labels(4)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .unwrap();
        for (ci, color) in colors.iter().enumerate() {
            chart
                .draw_series(summary.iter().enumerate().map(|(vi, s)| {
                    let (y0, y1) = band(vi, ci);
                    Rectangle::new([(0.0, y0), (value(&s[ci]), y1)], color.filled())
                }))
                .unwrap()
                .label(format!("{} connections", CONNECTIONS[ci]))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .unwrap();
        if label_rows.is_empty() {
            label_rows = (0..n)
                .map(|vi| chart.backend_coord(&(0.0, (n - vi) as f64 - 0.5)).1)
                .collect();
        }
    }
    for (variant, y) in variants.iter().zip(label_rows) {
        names
            .draw(&Text::new(
                variant.name.clone(),
                (8, y - 7),
                ("sans-serif", 14).into_font(),
            ))
            .unwrap();
    }
    root.present().unwrap();
    println!("\nwrote {}", path.display());
}

//! One measurement: a variant's app served on a free port, a closed-loop HTTP/1.1 load, and
//! what the server's thread and Redis spent on it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use hdrhistogram::Histogram;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

use crate::support::redis_server::RedisServer;
use crate::support::{
    command_stats, cpu_us, current_thread_proc, redis_cpu_secs, reset_redis_stats, syscalls,
};
use crate::variants::{Keys, Make, Variant};

const KEYS: u64 = 100_000;

/// What one measurement saw.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) rps: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    /// Redis round trips (script calls) per request (`None` for variants without Redis); below
    /// one when the store batches decisions.
    pub(crate) commands: Option<f64>,
    /// Commands Redis executed per request, counting those inside the script.
    pub(crate) executed: Option<f64>,
    pub(crate) errors: u64,
    /// CPU time of the server's thread per request, µs: what the variant costs the service,
    /// steadier than throughput on a shared machine.
    pub(crate) server_cpu_us: f64,
    /// Redis's CPU time per request, µs (`INFO cpu`; `None` for variants without Redis).
    pub(crate) redis_cpu_us: Option<f64>,
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
pub(crate) fn load(
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

/// CPU time the server's thread has used so far, µs: the scheduler's own count
/// (`/proc/.../schedstat`, ns), else `utime + stime` (in clock ticks, 10 ms: too coarse for the
/// few thousand requests of a paced row).
fn thread_cpu_us(task: &std::path::Path) -> f64 {
    std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or_else(|| cpu_us(task), |ns| ns / 1e3)
}

/// A closed loop of `connections` for `secs` (after 500 ms of warm-up).
pub(crate) fn measure(
    variant: &Variant,
    connections: usize,
    redis: &RedisServer,
    secs: f64,
) -> Sample {
    measure_with(
        variant,
        redis,
        &format!("c={connections}"),
        |addr, on_measure| {
            load(
                addr,
                variant.keys,
                connections,
                Duration::from_millis(500),
                Duration::from_secs_f64(secs),
                on_measure,
            )
        },
    )
}

/// Serves `variant` and drives it with `load` (given the address and what to call when the
/// measured part starts; returning requests, latencies, failures and the measured time):
/// what the server's thread and Redis spent per request. `label` names the load.
pub(crate) fn measure_with(
    variant: &Variant,
    redis: &RedisServer,
    label: &str,
    load: impl FnOnce(SocketAddr, &dyn Fn()) -> (u64, Histogram<u64>, u64, Duration),
) -> Sample {
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
        cpu_before.set(thread_cpu_us(&task));
        redis_cpu_before.set(redis_cpu_secs(&mut redis.connection()));
    };
    let (requests, histogram, errors, took) = load(addr, &reset);
    let server_cpu = thread_cpu_us(&task) - cpu_before.get();
    if let Some(window) = window.take() {
        eprintln!(
            "  {} {label}, the server's thread per request: {}",
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

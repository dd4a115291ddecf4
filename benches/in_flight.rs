//! What a concurrency (in-flight) limit adds to a request: the same GCRA policy with and
//! without `Limit::concurrency` beside it, on the memory store and on Redis.
//!
//! ```text
//! cargo bench --bench in_flight                        # 3 rounds of 5 s per variant
//! REDLIMIT_BENCH_SECS=1 REDLIMIT_BENCH_ROUNDS=1 cargo bench --bench in_flight
//! ```
//!
//! 64 tasks send requests back to back through the layer (a `tower` service, no sockets) on a
//! 2-worker runtime, one hot key, limits never reached (the cost of keeping count, not of
//! denying); each response body is dropped, which releases the request's lease. Variants
//! alternate over `REDLIMIT_BENCH_ROUNDS` (default 3) rounds of `REDLIMIT_BENCH_SECS`
//! (default 5) s; medians reported. Per variant: requests per second, this process's CPU per
//! request (`utime + stime` delta ÷ requests), Redis CPU per request (`INFO cpu`
//! `used_cpu_user + used_cpu_sys` delta ÷ requests), and the commands Redis received per
//! request (`EVALSHA` of checks, single or batched, and `ZREM` of releases).

mod support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};
use redlimit::key::Global;
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Limit, Policy, RateLimitLayer};
use support::redis_server::RedisServer;
use support::{Table, command_stats, cpu_us, median, redis_cpu_secs, reset_redis_stats};
use tower::{Service, ServiceBuilder, ServiceExt};

const TASKS: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    MemoryRate,
    MemoryRateInFlight,
    RedisRate,
    RedisRateInFlight,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::MemoryRate,
        Variant::MemoryRateInFlight,
        Variant::RedisRate,
        Variant::RedisRateInFlight,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::MemoryRate => "memory, gcra",
            Variant::MemoryRateInFlight => "memory, gcra + concurrency",
            Variant::RedisRate => "redis, gcra",
            Variant::RedisRateInFlight => "redis, gcra + concurrency",
        }
    }

    fn redis(self) -> bool {
        matches!(self, Variant::RedisRate | Variant::RedisRateInFlight)
    }

    fn policy(self) -> Policy {
        let rate = Limit::gcra(1_000_000, Duration::from_secs(1)).unwrap();
        let in_flight = Limit::concurrency(1_000_000, Duration::from_secs(60)).unwrap();
        match self {
            Variant::MemoryRate | Variant::RedisRate => Policy::new("rate", [rate]),
            _ => Policy::new("in-flight", [in_flight, rate]),
        }
        .unwrap()
    }
}

struct Sample {
    rps: f64,
    cpu_us: f64,
    redis_cpu_us: f64,
    commands: f64,
}

async fn layer(variant: Variant, url: &str, round: usize) -> RateLimitLayer {
    let layer = if variant.redis() {
        let store = RedisStore::builder(url)
            .prefix(format!("inflight{round}{}", variant as u8))
            .connect()
            .await
            .expect("connect to the bench redis");
        RateLimitLayer::builder(store, variant.policy()).store_deadline(Duration::from_secs(1))
    } else {
        RateLimitLayer::builder(MemoryStore::new(), variant.policy())
    };
    layer.key(Global).build().expect("valid layer")
}

fn measure(variant: Variant, redis: &RedisServer, secs: f64, round: usize) -> Sample {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut con = redis.connection();
    runtime.block_on(async {
        let service = ServiceBuilder::new()
            .layer(layer(variant, &redis.url(), round).await)
            .service(tower::service_fn(|_: Request<()>| async {
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
        let requests = Arc::new(AtomicU64::new(0));
        reset_redis_stats(&mut con);
        let redis_before = redis_cpu_secs(&mut con);
        let cpu_before = cpu_us(std::path::Path::new("/proc/self"));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let mut service = service.clone();
                let requests = Arc::clone(&requests);
                tokio::spawn(async move {
                    while Instant::now() < until {
                        let response = service
                            .ready()
                            .await
                            .unwrap()
                            .call(Request::new(()))
                            .await
                            .unwrap();
                        assert_eq!(response.status(), StatusCode::OK);
                        // The body dropped: the request is no longer in flight.
                        drop(response);
                        requests.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let n = requests.load(Ordering::Relaxed) as f64;
        // The releases still on their way (spawned, never awaited by a response) count too.
        let stats = loop {
            let stats = command_stats(&mut con);
            let calls = |name: &str| stats.get(name).map_or(0, |s| s.calls);
            let released = calls("zrem") as f64;
            if variant != Variant::RedisRateInFlight
                || released >= n
                || started.elapsed() > Duration::from_secs_f64(secs + 10.0)
            {
                break stats;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let cpu = cpu_us(std::path::Path::new("/proc/self")) - cpu_before;
        let redis_cpu = redis_cpu_secs(&mut con) - redis_before;
        let calls = |name: &str| stats.get(name).map_or(0, |s| s.calls) as f64;
        Sample {
            rps: n / elapsed,
            cpu_us: cpu / n,
            redis_cpu_us: redis_cpu * 1e6 / n,
            commands: (calls("evalsha") + calls("zrem")) / n,
        }
    })
}

fn main() {
    if !support::bench_mode("in-flight benchmark: run with `cargo bench --bench in_flight`") {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 5.0);
    let rounds = support::rounds_knob(3);
    let redis = RedisServer::start();
    let samples = support::by_rounds(rounds, &Variant::ALL, |round, variant| {
        let s = measure(variant, &redis, secs, round);
        eprintln!(
            "round {round} {:<28} {:>8.0} req/s  {:>6.2} µs CPU/req  {:>6.2} µs Redis CPU/req  {:>5.2} commands/req",
            variant.name(),
            s.rps,
            s.cpu_us,
            s.redis_cpu_us,
            s.commands
        );
        s
    });
    let table = Table::new(&[
        "variant",
        "requests/s",
        "CPU µs/request",
        "Redis CPU µs/request",
        "Redis commands/request",
    ]);
    println!("{}", table.header());
    for (i, variant) in Variant::ALL.iter().enumerate() {
        let of = |f: fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
        let redis = |value: f64| {
            if variant.redis() {
                format!("{value:.2}")
            } else {
                "–".to_owned()
            }
        };
        println!(
            "{}",
            table.row([
                variant.name().to_owned(),
                format!("{:.0}", of(|s| s.rps)),
                format!("{:.2}", of(|s| s.cpu_us)),
                redis(of(|s| s.redis_cpu_us)),
                redis(of(|s| s.commands)),
            ])
        );
    }
    println!(
        "\n{TASKS} tasks, one hot key, limits never reached, {secs} s per variant, median of \
         {rounds} rounds."
    );
}

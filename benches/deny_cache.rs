//! A denied hot key, hammered: what it costs Redis and this process with the deny cache on,
//! off, and against the memory store on the same key (the in-process ceiling).
//!
//! ```text
//! cargo bench --bench deny_cache                      # 3 rounds of 5 s per variant
//! REDLIMIT_BENCH_SECS=1 REDLIMIT_BENCH_ROUNDS=1 cargo bench --bench deny_cache
//! ```
//!
//! 64 tasks send requests back to back through the layer (a `tower` service, no sockets:
//! what is measured is the layer and the store, not HTTP) on a 2-worker runtime, for
//! `REDLIMIT_BENCH_SECS` (default 5) per variant, variants alternated over `REDLIMIT_BENCH_ROUNDS`
//! (default 3); medians reported. The key is denied before the run starts: a GCRA limit of 60
//! per minute, its burst spent by a warm-up, so every request is a denial except one a second
//! (the retry period).
//! Reported per variant: decisions per second, this process's CPU time per decision
//! (`utime + stime` delta ÷ decisions: steadier than throughput on a shared machine), Redis
//! `EVALSHA` calls in the run, and those per retry period.

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
use support::{Table, command_stats, cpu_us, median, reset_redis_stats};
use tower::{Service, ServiceBuilder, ServiceExt};

const TASKS: usize = 64;
const PER_MINUTE: u64 = 60;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    RedisCached,
    RedisUncached,
    Memory,
}

impl Variant {
    const ALL: [Variant; 3] = [
        Variant::RedisCached,
        Variant::RedisUncached,
        Variant::Memory,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::RedisCached => "redis, deny cache on (default)",
            Variant::RedisUncached => "redis, deny cache off",
            Variant::Memory => "memory store",
        }
    }
}

struct Sample {
    rps: f64,
    cpu_us: f64,
    evalsha: f64,
}

async fn layer(variant: Variant, url: &str, round: usize) -> RateLimitLayer {
    let policy = Policy::new(
        "deny",
        [Limit::gcra(PER_MINUTE, Duration::from_secs(60)).unwrap()],
    )
    .unwrap();
    let layer = match variant {
        Variant::Memory => RateLimitLayer::builder(MemoryStore::new(), policy),
        _ => {
            let store = RedisStore::builder(url)
                .prefix(format!("deny{round}{}", variant as u8))
                .connect()
                .await
                .expect("connect to the bench redis");
            RateLimitLayer::builder(store, policy).store_deadline(Duration::from_secs(1))
        }
    };
    let layer = layer.key(Global);
    let layer = if variant == Variant::RedisUncached {
        layer.deny_cache(0)
    } else {
        layer
    };
    layer.build().expect("valid layer")
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
        let denied = Arc::new(AtomicU64::new(0));
        let admitted = Arc::new(AtomicU64::new(0));
        // Spend the burst: the run starts on a denied key.
        for _ in 0..=PER_MINUTE {
            let _ = service.clone().oneshot(Request::new(())).await;
        }
        reset_redis_stats(&mut con);
        let cpu_before = cpu_us(std::path::Path::new("/proc/self"));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let mut service = service.clone();
                let (denied, admitted) = (Arc::clone(&denied), Arc::clone(&admitted));
                tokio::spawn(async move {
                    while Instant::now() < until {
                        let response = service
                            .ready()
                            .await
                            .unwrap()
                            .call(Request::new(()))
                            .await
                            .unwrap();
                        let counter = if response.status() == StatusCode::TOO_MANY_REQUESTS {
                            &denied
                        } else {
                            &admitted
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        // As a server's socket I/O would: the Redis connection's task gets
                        // to run even when every answer here is immediate.
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let cpu = cpu_us(std::path::Path::new("/proc/self")) - cpu_before;
        let decisions = (denied.load(Ordering::Relaxed) + admitted.load(Ordering::Relaxed)) as f64;
        // One a second from the store, plus at worst as many decided in memory.
        assert!(
            admitted.load(Ordering::Relaxed) as f64 <= 2.0 * (secs + 1.0),
            "{} admitted",
            admitted.load(Ordering::Relaxed)
        );
        let evalsha = command_stats(&mut con)
            .get("evalsha")
            .map_or(0, |s| s.calls) as f64;
        Sample {
            rps: decisions / elapsed,
            cpu_us: cpu / decisions,
            evalsha,
        }
    })
}

fn main() {
    if !support::bench_mode("deny cache benchmark: run with `cargo bench --bench deny_cache`") {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 5.0);
    let rounds = support::rounds_knob(3);
    let redis = RedisServer::start();
    let samples = support::by_rounds(rounds, &Variant::ALL, |round, variant| {
        let s = measure(variant, &redis, secs, round);
        eprintln!(
            "round {round} {:<32} {:>9.0} decisions/s  {:>6.2} µs CPU/decision  {:>8.0} EVALSHA",
            variant.name(),
            s.rps,
            s.cpu_us,
            s.evalsha
        );
        s
    });
    let retry_periods = secs * PER_MINUTE as f64 / 60.0;
    let memory_rps = median(samples[2].iter().map(|s| s.rps).collect());
    let memory_cpu = median(samples[2].iter().map(|s| s.cpu_us).collect());
    let table = Table::new(&[
        "variant",
        "decisions/s",
        "CPU µs/decision",
        "EVALSHA in the run",
        "EVALSHA per retry period",
        "× memory (decisions/s)",
        "× memory (CPU)",
    ]);
    println!("{}", table.header());
    for (i, variant) in Variant::ALL.iter().enumerate() {
        let rps = median(samples[i].iter().map(|s| s.rps).collect());
        let cpu = median(samples[i].iter().map(|s| s.cpu_us).collect());
        let evalsha = median(samples[i].iter().map(|s| s.evalsha).collect());
        let per_period = if *variant == Variant::Memory {
            "–".to_owned()
        } else {
            format!("{:.1}", evalsha / retry_periods.max(1.0))
        };
        println!(
            "{}",
            table.row([
                variant.name().to_owned(),
                format!("{rps:.0}"),
                format!("{cpu:.2}"),
                format!("{evalsha:.0}"),
                per_period,
                format!("{:.2}", rps / memory_rps),
                format!("{:.2}", cpu / memory_cpu),
            ])
        );
    }
    println!(
        "\n{TASKS} tasks, one key denied (GCRA {PER_MINUTE}/min, its burst spent before the \
         run: one admission a second), {secs} s per variant, median of {rounds} rounds."
    );
}

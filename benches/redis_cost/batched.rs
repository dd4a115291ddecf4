//! Batched script calls against one call per decision, through the store itself: `CONCURRENCY`
//! tasks (the requests of as many client connections, default 64), each deciding GCRA for
//! its own client keys one decision after the other, on one store with batching on (the
//! default) and one with `.batch(1)`, alternating in the same run. Then a single task (the
//! uncontended path, where batching must cost nothing). Reported per variant, median over the
//! rounds: decisions per second, decisions per `EVALSHA`, the Redis CPU per decision
//! (`used_cpu_user + used_cpu_sys` delta ÷ decisions), this process's CPU per decision (the
//! service's side: the store, the client, the runtime) and the latency of a decision. A call
//! that fails (on a machine too busy for the client's response timeout) is counted and
//! reported, not a decision: the round goes on.
//!
//! Knobs: `REDLIMIT_BENCH_CONCURRENCY` (default 64), `REDLIMIT_BENCH_ROUNDS` (default 5) of
//! `REDLIMIT_BENCH_ROUND_SECS` per variant (default 2), `REDLIMIT_BENCH_KEYS` (default 10 000).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlimit::store::{RedisStore, Store};
use redlimit::{Limit, Policy};

use crate::support::{
    self, Table, client_key, command_stats, cpu_us, redis_cpu_secs, reset_redis_stats,
};

/// What one round of one variant measured.
#[derive(Clone, Copy)]
struct Sample {
    per_sec: f64,
    per_call: f64,
    redis_us: f64,
    service_us: f64,
    p50_us: f64,
    p99_us: f64,
    /// Checks that answered an error (counted in no other figure).
    failed: u64,
}

/// Runs the comparison against the server at `url` (`con` reads its statistics).
pub(crate) fn run(url: &str, con: &mut redis::Connection) -> String {
    let concurrency =
        support::knob_where("REDLIMIT_BENCH_CONCURRENCY", 64usize, "1 or more", |&c| {
            c > 0
        });
    let rounds = support::rounds_knob(5);
    let secs = support::secs_knob("REDLIMIT_BENCH_ROUND_SECS", 2.0);
    let keys = support::knob_where("REDLIMIT_BENCH_KEYS", 10_000usize, "1 or more", |&k| k > 0);
    let round = Duration::from_secs_f64(secs);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stores = runtime.block_on(async {
        let batched = RedisStore::builder(url).connect().await.expect("connect");
        let alone = RedisStore::builder(url)
            .batch(1)
            .connect()
            .await
            .expect("connect");
        [
            ("batched (default)", batched),
            ("one call per decision (`.batch(1)`)", alone),
        ]
    });
    // Every call admitted, state living through the run: only the algorithm's cost is seen.
    let policy = Policy::new(
        "api",
        [Limit::gcra(1_000_000, Duration::from_secs(60)).unwrap()],
    )
    .unwrap();

    let mut out = String::new();
    for tasks in [concurrency, 1] {
        eprintln!("redis_cost: batched against unbatched, {tasks} task(s) ...");
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); stores.len()];
        for _ in 0..rounds {
            for (i, (_, store)) in stores.iter().enumerate() {
                let sample = runtime.block_on(measure(con, store, &policy, tasks, keys, round));
                samples[i].push(sample);
            }
        }
        let _ = writeln!(
            out,
            "GCRA through the store, {tasks} concurrent task(s), {rounds} rounds of {secs} s \
             per variant, alternating (medians):\n"
        );
        let table = Table::new(&[
            "variant",
            "decisions/s",
            "decisions per EVALSHA",
            "Redis CPU µs/decision",
            "service CPU µs/decision",
            "latency p50 µs",
            "latency p99 µs",
        ]);
        let _ = writeln!(out, "{}", table.header());
        for ((name, _), samples) in stores.iter().zip(&samples) {
            let median = |f: fn(&Sample) -> f64| support::median(samples.iter().map(f).collect());
            let _ = writeln!(
                out,
                "{}",
                table.row([
                    (*name).to_owned(),
                    format!("{:.0}", median(|s| s.per_sec)),
                    format!("{:.1}", median(|s| s.per_call)),
                    format!("{:.2}", median(|s| s.redis_us)),
                    format!("{:.2}", median(|s| s.service_us)),
                    format!("{:.0}", median(|s| s.p50_us)),
                    format!("{:.0}", median(|s| s.p99_us)),
                ])
            );
        }
        let failed: u64 = samples.iter().flatten().map(|s| s.failed).sum();
        if failed > 0 {
            let _ = writeln!(
                out,
                "\n{failed} check(s) failed (the client's response timeout on a busy machine): \
                 left out of every figure above"
            );
        }
        let ratios: Vec<f64> = samples[0]
            .iter()
            .zip(&samples[1])
            .map(|(b, a)| b.redis_us / a.redis_us)
            .collect();
        let (low, high) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        let _ = writeln!(
            out,
            "\nRedis CPU per decision, batched ÷ unbatched: median {:.2} (rounds {low:.2}–{high:.2})\n",
            support::median(ratios.clone())
        );
    }
    out
}

/// `tasks` tasks deciding on `store` for `round`, each over its own share of `keys` keys.
async fn measure(
    con: &mut redis::Connection,
    store: &RedisStore,
    policy: &Policy,
    tasks: usize,
    keys: usize,
    round: Duration,
) -> Sample {
    let stop = Arc::new(AtomicBool::new(false));
    let decisions = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    reset_redis_stats(con);
    let redis_before = redis_cpu_secs(con);
    let service_before = cpu_us(Path::new("/proc/self"));
    let started = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|t| {
            let (store, policy) = (store.clone(), policy.clone());
            let (stop, decisions, failed) = (
                Arc::clone(&stop),
                Arc::clone(&decisions),
                Arc::clone(&failed),
            );
            tokio::spawn(async move {
                let mut i = t;
                let mut latencies = Vec::with_capacity(1 << 16);
                while !stop.load(Ordering::Relaxed) {
                    let asked = Instant::now();
                    match store.check(&policy, &client_key(i % keys), 1).await {
                        Ok(decision) => {
                            latencies.push(asked.elapsed().as_secs_f64() * 1e6);
                            assert!(decision.is_allowed(), "a limit of 10^6 a minute admits");
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    i += tasks;
                }
                decisions.fetch_add(latencies.len() as u64, Ordering::Relaxed);
                latencies
            })
        })
        .collect();
    tokio::time::sleep(round).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("worker"));
    }
    latencies.sort_by(f64::total_cmp);
    let wall = started.elapsed();
    let service_us = cpu_us(Path::new("/proc/self")) - service_before;
    let redis_us = (redis_cpu_secs(con) - redis_before) * 1e6;
    let calls = command_stats(con).get("evalsha").map_or(0, |s| s.calls);
    let decisions = decisions.load(Ordering::Relaxed) as f64;
    Sample {
        per_sec: decisions / wall.as_secs_f64(),
        per_call: decisions / calls.max(1) as f64,
        redis_us: redis_us / decisions,
        service_us: service_us / decisions,
        p50_us: support::percentile(&latencies, 0.5),
        p99_us: support::percentile(&latencies, 0.99),
        failed: failed.load(Ordering::Relaxed),
    }
}

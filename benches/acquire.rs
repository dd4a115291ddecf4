//! Waiting one's turn, three ways, in one run: W workers split over 4 "processes" (each its
//! own store connection or limiter) saturate one quota of 100/s for S seconds.
//!
//! ```text
//! cargo bench --bench acquire            # ~1 minute; writes docs/bench/acquire.csv and .svg
//! REDLIMIT_BENCH_SECS=5 REDLIMIT_BENCH_WORKERS=20 cargo bench --bench acquire
//! REDLIMIT_BENCH_ONLY=fleet cargo bench --bench acquire   # one part; writes nothing
//! ```
//!
//! - `limiter gcra`: `redlimit::limiter::Limiter` over a `RedisStore` (one reservation per
//!   permit, then a sleep until the slot);
//! - `limiter fixed-window`: the same limiter over a fixed window (it checks and retries with
//!   jitter: windows cannot reserve);
//! - `retry gcra`, `retry fixed-window`: the usual recipe, a store check and, while denied,
//!   a sleep of its `retry_after`, then a check again;
//! - `governor until_ready`: governor's in-process limiter, one per "process", each at the
//!   full quota (what a fleet of processes gets from an in-process limiter).
//!
//! Reported: permits against the quota (admitted ÷ (burst + rate × seconds); a fixed window
//! admits its count per epoch-aligned window touched instead), store calls per permit (the
//! decisions asked for) and Redis `EVALSHA` per permit (fewer than decisions when the store
//! batches checks waiting together), the most permits in any 100 ms (what the upstream sees: wake-up
//! times), the p50 and p99 wait of a permit, and the smallest and largest worker share ÷ the
//! mean. The 100 ms bound of a policy of 100/s with a burst of 100 is 110 (burst + rate × 0.1 s),
//! once, at the start; a fixed window of 100/s allows 200 across an edge. The permits each
//! variant granted per 100 ms (wake-up times: what the upstream sees) go to
//! `docs/bench/acquire.csv` and are drawn in `docs/bench/acquire.svg` (`acquire/plot.rs`).
//!
//! Then the fleet figures (`acquire/fleet.rs`): 20 workers over 4 limiters saturate 100/s for
//! `REDLIMIT_BENCH_FLEET_SECS` (10) seconds of slots, on loopback and with Redis 10 ms away
//! (the tests' delaying proxy): admitted against burst + rate × time, each worker's share,
//! `EVALSHA` and store calls per permit, the most slots in any 100 ms.
//!
//! Knobs: `REDLIMIT_BENCH_SECS` (5), `REDLIMIT_BENCH_WORKERS` (20),
//! `REDLIMIT_BENCH_FLEET_SECS` (10), `REDLIMIT_BENCH_ONLY=compare,fleet` (one part; the figures
//! and the picture are written only by a run of `compare`).

mod support;

#[path = "acquire/fleet.rs"]
mod fleet;
#[path = "acquire/plot.rs"]
mod plot;
#[path = "../tests/it/limiter/run.rs"]
#[allow(dead_code)]
mod run;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use governor::{Quota, RateLimiter};
use redlimit::limiter::Limiter;
use redlimit::store::{RedisStore, Store};
use redlimit::{Key, Limit, Policy};
use support::redis_server::RedisServer;
use support::{Table, percentile};

const RATE: u32 = 100;
const PROCESSES: usize = 4;
/// The bins of the admitted-over-time figures.
const BIN: Duration = Duration::from_millis(100);

#[derive(Clone, Copy)]
enum Variant {
    LimiterGcra,
    LimiterWindow,
    RetryGcra,
    RetryWindow,
    Governor,
}

impl Variant {
    const ALL: [Variant; 5] = [
        Variant::LimiterGcra,
        Variant::LimiterWindow,
        Variant::RetryGcra,
        Variant::RetryWindow,
        Variant::Governor,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::LimiterGcra => "limiter gcra",
            Variant::LimiterWindow => "limiter fixed-window",
            Variant::RetryGcra => "retry gcra",
            Variant::RetryWindow => "retry fixed-window",
            Variant::Governor => "governor until_ready",
        }
    }

    fn policy(self) -> Policy {
        let second = Duration::from_secs(1);
        let limit = match self {
            Variant::LimiterWindow | Variant::RetryWindow => {
                Limit::fixed_window(RATE.into(), second)
            }
            _ => Limit::gcra(RATE.into(), second),
        };
        Policy::new(
            format!("bench-{}", self.name().replace(' ', "-")),
            [limit.expect("limit")],
        )
        .expect("policy")
    }
}

/// One worker's permits: when each was asked for and when it was granted.
type Log = Vec<(Instant, Instant)>;

/// One worker: its permits, and the store calls it made itself (the retry recipe's checks).
async fn worker(process: Process, end: Instant) -> (Log, u64) {
    let (mut log, mut checks) = (Vec::new(), 0);
    let key = Key::new("upstream");
    while Instant::now() < end {
        let asked = Instant::now();
        match &process {
            Process::Limiter(limiter) => {
                let permit = limiter.acquire(&key, 1).await.expect("a permit");
                drop(permit);
            }
            Process::Store(store, policy) => loop {
                checks += 1;
                let decision = store.check(policy, &key, 1).await.expect("a decision");
                if decision.is_allowed() {
                    break;
                }
                let wait = decision.retry_after().unwrap_or(Duration::from_millis(10));
                tokio::time::sleep(wait).await;
            },
            Process::Governor(limiter) => limiter.until_ready().await,
        }
        log.push((asked, Instant::now()));
    }
    (log, checks)
}

#[derive(Clone)]
enum Process {
    Limiter(Limiter),
    Store(RedisStore, Policy),
    Governor(Arc<governor::DefaultDirectRateLimiter>),
}

async fn process(variant: Variant, url: &str, prefix: &str) -> Process {
    let connect = || async {
        RedisStore::builder(url)
            .prefix(prefix.to_owned())
            .connect()
            .await
            .expect("connect")
    };
    match variant {
        Variant::LimiterGcra | Variant::LimiterWindow => Process::Limiter(
            Limiter::builder(connect().await, variant.policy())
                .max_wait(Duration::from_secs(60))
                .build(),
        ),
        Variant::RetryGcra | Variant::RetryWindow => {
            let store = connect().await;
            store.prepare(&variant.policy());
            Process::Store(store, variant.policy())
        }
        Variant::Governor => {
            let rate = NonZeroU32::new(RATE).expect("non-zero");
            Process::Governor(Arc::new(RateLimiter::direct(Quota::per_second(rate))))
        }
    }
}

struct Outcome {
    /// Permits granted (woken) in each 100 ms from the start.
    per_bin: Vec<u64>,
    accuracy: f64,
    calls_per_permit: f64,
    evalsha_per_permit: f64,
    max_100ms: usize,
    p50_ms: f64,
    p99_ms: f64,
    min_share: f64,
    max_share: f64,
}

fn evalsha(server: &RedisServer) -> u64 {
    let stats = support::command_stats(&mut server.connection());
    stats.get("evalsha").map_or(0, |s| s.calls)
}

async fn measure(variant: Variant, server: &RedisServer, workers: usize, secs: f64) -> Outcome {
    let prefix = format!("bench-acquire-{}", support::today());
    let mut processes = Vec::new();
    for _ in 0..PROCESSES {
        processes.push(process(variant, &server.url(), &prefix).await);
    }
    // A fresh quota for each variant.
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .expect("FLUSHALL");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = evalsha(server);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..workers)
        .map(|w| tokio::spawn(worker(processes[w % PROCESSES].clone(), end)))
        .collect();
    let (mut logs, mut checks) = (Vec::new(), 0);
    for task in tasks {
        let (log, made) = task.await.expect("worker");
        logs.push(log);
        checks += made;
    }
    let calls = evalsha(server) - before;
    let store_calls = checks
        + processes
            .iter()
            .map(|p| match p {
                Process::Limiter(limiter) => limiter.store_calls(),
                _ => 0,
            })
            .sum::<u64>();
    let within: Vec<usize> = logs
        .iter()
        .map(|log| log.iter().filter(|(_, granted)| *granted <= end).count())
        .collect();
    let admitted: usize = within.iter().sum();
    let total: usize = logs.iter().map(Vec::len).sum();
    let ideal = f64::from(RATE) * (1.0 + secs);
    let mean = admitted as f64 / workers as f64;
    let mut granted: Vec<Instant> = logs.iter().flatten().map(|(_, g)| *g).collect();
    granted.sort();
    let window = Duration::from_millis(100);
    let (mut max_100ms, mut lo) = (0, 0);
    for hi in 0..granted.len() {
        while granted[hi] >= granted[lo] + window {
            lo += 1;
        }
        max_100ms = max_100ms.max(hi - lo + 1);
    }
    let mut waits: Vec<f64> = logs
        .iter()
        .flatten()
        .map(|(asked, granted)| (*granted - *asked).as_secs_f64() * 1e3)
        .collect();
    waits.sort_by(f64::total_cmp);
    let bins = (secs * 1000.0 / BIN.as_millis() as f64).ceil() as usize;
    let mut per_bin = vec![0; bins];
    for g in &granted {
        let bin = (g.saturating_duration_since(start).as_millis() / BIN.as_millis()) as usize;
        if let Some(n) = per_bin.get_mut(bin) {
            *n += 1;
        }
    }
    Outcome {
        per_bin,
        accuracy: admitted as f64 / ideal,
        calls_per_permit: store_calls as f64 / total.max(1) as f64,
        evalsha_per_permit: calls as f64 / total.max(1) as f64,
        max_100ms,
        p50_ms: percentile(&waits, 0.5),
        p99_ms: percentile(&waits, 0.99),
        min_share: within.iter().copied().min().unwrap_or(0) as f64 / mean,
        max_share: within.iter().copied().max().unwrap_or(0) as f64 / mean,
    }
}

fn main() {
    if !support::bench_mode("acquire benchmark: run with `cargo bench --bench acquire`") {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 5.0);
    let workers: usize =
        support::knob_where("REDLIMIT_BENCH_WORKERS", 20, "at least 1 worker", |&n| {
            n > 0
        });
    let only: Option<String> = support::optional_knob("REDLIMIT_BENCH_ONLY");
    let part = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p == name))
    };
    let server = RedisServer::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    if part("compare") {
        compare(&runtime, &server, workers, secs);
    }
    if part("fleet") {
        let fleet_secs = support::secs_knob("REDLIMIT_BENCH_FLEET_SECS", 10.0);
        runtime.block_on(fleet::run(&server, fleet_secs));
    }
}

/// The five variants side by side; their admitted-over-time figures and picture.
fn compare(runtime: &tokio::runtime::Runtime, server: &RedisServer, workers: usize, secs: f64) {
    let table = Table::new(&[
        "variant",
        "admitted ÷ (burst + rate × s)",
        "store calls/permit",
        "EVALSHA/permit",
        "most in 100 ms",
        "p50 wait ms",
        "p99 wait ms",
        "worker share min–max ÷ mean",
    ]);
    println!(
        "{workers} workers over {PROCESSES} processes, {RATE}/s, {secs} s; {}",
        support::machine_line()
    );
    println!("{}", table.header());
    let mut series = Vec::new();
    for variant in Variant::ALL {
        let o = runtime.block_on(measure(variant, server, workers, secs));
        println!(
            "{}",
            table.row([
                variant.name().to_owned(),
                format!("{:.3}", o.accuracy),
                format!("{:.2}", o.calls_per_permit),
                format!("{:.2}", o.evalsha_per_permit),
                o.max_100ms.to_string(),
                format!("{:.0}", o.p50_ms),
                format!("{:.0}", o.p99_ms),
                format!("{:.2}–{:.2}", o.min_share, o.max_share),
            ])
        );
        series.push((variant.name(), o.per_bin));
    }
    plot::write(&series, BIN, RATE);
}

//! The fleet figures: 20 workers over 4 limiters (each its own `RedisStore` connection, as
//! four processes would have) saturate one GCRA quota of 100/s with a burst of 100 for
//! `secs` seconds of slots, on loopback and with Redis 10 ms away (the tests' delaying
//! proxy). Counted on the slots Redis handed out (Redis time), with the tests' own run
//! (`tests/it/limiter/run.rs`), so a busy machine that wakes a worker late changes no count;
//! the wake-ups are reported beside them.

use std::time::{Duration, SystemTime};

use redlimit::limiter::Limiter;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy};

use crate::run::{Run, evalsha_calls, saturate};
use crate::support::proxy::Proxy;
use crate::support::redis_server::RedisServer;
use crate::support::{Table, machine_line, today};

const RATE: u64 = 100;
const WORKERS: usize = 20;
const LIMITERS: usize = 4;

/// Measures the fleet on loopback and 10 ms away, and prints a row for each.
pub(crate) async fn run(server: &RedisServer, secs: f64) {
    let table = Table::new(&[
        "Redis",
        "admitted in the span of slots",
        "expected (burst + rate × span)",
        "off",
        "worker share min–max ÷ mean",
        "EVALSHA/permit",
        "store calls/permit",
        "most slots in 100 ms (after the first second)",
        "most wake-ups in 100 ms (after the first second)",
    ]);
    println!(
        "\n{WORKERS} workers over {LIMITERS} limiters, GCRA {RATE}/s (burst {RATE}), {secs} s of slots; {}",
        machine_line()
    );
    println!("{}", table.header());
    for rtt_ms in [0, 10] {
        let proxy = if rtt_ms == 0 {
            None
        } else {
            Some(Proxy::with_rtt(server.port(), Duration::from_millis(rtt_ms)).await)
        };
        let url = proxy.as_ref().map_or_else(|| server.url(), Proxy::url);
        let f = measure(server, &url, Duration::from_secs_f64(secs), rtt_ms).await;
        println!(
            "{}",
            table.row([
                if rtt_ms == 0 {
                    "loopback".to_owned()
                } else {
                    format!("{rtt_ms} ms away")
                },
                f.admitted.to_string(),
                f.expected.to_string(),
                format!(
                    "{:+.2} %",
                    (f.admitted as f64 - f.expected as f64) / f.expected as f64 * 100.0
                ),
                format!("{:.2}–{:.2}", f.min_share, f.max_share),
                format!("{:.3}", f.evalsha as f64 / f.total as f64),
                format!("{:.3}", f.calls as f64 / f.total as f64),
                f.max_slots_100ms.to_string(),
                f.max_woken_100ms.to_string(),
            ])
        );
    }
}

struct Figures {
    admitted: u64,
    expected: u64,
    min_share: f64,
    max_share: f64,
    evalsha: u64,
    calls: u64,
    total: u64,
    max_slots_100ms: usize,
    max_woken_100ms: usize,
}

fn policy() -> Policy {
    Policy::new(
        "upstream",
        [Limit::gcra(RATE, Duration::from_secs(1)).expect("limit")],
    )
    .expect("policy")
}

async fn measure(server: &RedisServer, url: &str, span: Duration, rtt_ms: u64) -> Figures {
    let prefix = format!("bench-acquire-fleet-{}-{rtt_ms}", today());
    let mut limiters = Vec::new();
    for _ in 0..LIMITERS {
        let store = RedisStore::builder(url)
            .prefix(prefix.clone())
            .connect()
            .await
            .expect("connect");
        limiters.push(
            Limiter::builder(store, policy())
                .max_wait(Duration::from_secs(60))
                .build(),
        );
    }
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .expect("FLUSHALL");
    let before = evalsha_calls(server);
    // Half a second more than the span, so that the span's last slots are all taken.
    let run = saturate(&limiters, WORKERS, span + Duration::from_millis(500)).await;
    let evalsha = evalsha_calls(server) - before;
    let admitted = run.within(span) as u64;
    let shares = run.shares(span);
    let mean = admitted as f64 / shares.len() as f64;
    let first = run.all_slots()[0];
    let steady = first + Duration::from_secs(1);
    Figures {
        admitted,
        expected: RATE + span.as_millis() as u64 * RATE / 1000,
        min_share: shares.iter().copied().min().unwrap_or(0) as f64 / mean,
        max_share: shares.iter().copied().max().unwrap_or(0) as f64 / mean,
        evalsha,
        calls: limiters.iter().map(Limiter::store_calls).sum(),
        total: run.total() as u64,
        max_slots_100ms: most_slots_after(&run, steady),
        max_woken_100ms: most_woken_after(&run, steady, first),
    }
}

/// The most slots in any 100 ms from `from` on (the burst at the start excluded).
fn most_slots_after(run: &Run, from: SystemTime) -> usize {
    let slots: Vec<SystemTime> = run.all_slots().into_iter().filter(|s| *s >= from).collect();
    most_in_100ms(&slots)
}

/// The most wake-ups in any 100 ms from `from` on, on the slots' clock: a wake-up is placed
/// at the first slot plus its time since the run's start less the first wake-up's.
fn most_woken_after(run: &Run, from: SystemTime, first: SystemTime) -> usize {
    let mut woke: Vec<_> = run.woke.iter().flatten().copied().collect();
    woke.sort();
    let Some(&start) = woke.first() else {
        return 0;
    };
    let placed: Vec<SystemTime> = woke
        .iter()
        .map(|w| first + (*w - start))
        .filter(|s| *s >= from)
        .collect();
    most_in_100ms(&placed)
}

fn most_in_100ms<T: Copy + Ord + std::ops::Add<Duration, Output = T>>(sorted: &[T]) -> usize {
    let (mut best, mut lo) = (0, 0);
    for hi in 0..sorted.len() {
        while sorted[hi] >= sorted[lo] + Duration::from_millis(100) {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

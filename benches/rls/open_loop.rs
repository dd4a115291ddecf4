//! An open-loop load (`REDLIMIT_BENCH_RATES`): calls started on a schedule, `rate` a second
//! evenly spaced, whatever the answers, as Envoy's traffic arrives. A closed loop's latency at
//! 256 calls in flight is 256 ÷ its throughput (Little's law), which on two shared cores the
//! load generator's and the proxy's own CPU help set; here the latency is the server's and
//! Redis's at that offered rate, beside (never instead of) the closed loop's.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::load::{Clients, Tally, call, user_bodies};

/// Calls waiting for an answer beyond which a due call is not started but counted as failed:
/// a server that stops answering costs the bench this many tasks, never an unbounded pile.
const MAX_OUTSTANDING: usize = 4096;
/// How often the schedule is caught up with: calls due meanwhile start together.
const TICK: Duration = Duration::from_millis(1);

/// Starts `rate` calls a second on domain `bench` over `users` users from now until `end`,
/// counting only calls that complete in `[measure_from, end)` (each timed from its start);
/// then waits for the calls still out (each bounded by its own timeout).
pub(crate) async fn run(
    clients: &Clients,
    rate: u64,
    users: usize,
    measure_from: Instant,
    end: Instant,
    decided: &Arc<AtomicU64>,
) -> Tally {
    let bodies = user_bodies(users);
    let tally = Arc::new(Mutex::new(Tally::new()));
    let outstanding = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut issued: u64 = 0;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let now = Instant::now();
        if now >= end {
            break;
        }
        let due = ((now - start).as_secs_f64() * rate as f64) as u64;
        while issued < due {
            let i = issued;
            issued += 1;
            if outstanding.load(Ordering::Relaxed) >= MAX_OUTSTANDING {
                if now >= measure_from {
                    lock(&tally).errors += 1;
                }
                continue;
            }
            outstanding.fetch_add(1, Ordering::Relaxed);
            let clients = clients.clone();
            let body = bodies[(i % bodies.len() as u64) as usize].clone();
            let (tally, outstanding, decided) = (
                Arc::clone(&tally),
                Arc::clone(&outstanding),
                Arc::clone(decided),
            );
            tokio::spawn(async move {
                let started = Instant::now();
                let result = call(clients.get(i as usize), body).await;
                let done = Instant::now();
                outstanding.fetch_sub(1, Ordering::Relaxed);
                if let Ok(Code::Ok | Code::OverLimit) = result {
                    decided.fetch_add(1, Ordering::Relaxed);
                }
                if done < measure_from || done >= end {
                    return;
                }
                lock(&tally).record(&result, done - started);
            });
        }
    }
    while outstanding.load(Ordering::Relaxed) > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut total = Tally::new();
    total.merge(&lock(&tally));
    total
}

fn lock(tally: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(PoisonError::into_inner)
}

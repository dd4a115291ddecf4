//! Redis frozen under a saturating fleet (the delaying proxy holds every byte, as a stopped
//! server or a stalled link would), then thawed. Two limiters (two processes' worth, each its
//! own connection) at `local_share(2)`: while Redis is frozen each books at half the policy
//! in memory, never unlimited; the store gets one call per cool-down, not a stampede; and
//! when it answers again, what memory booked is told to it first, so that the whole run,
//! Redis's slots and memory's together, stays within burst + rate × time but for half a
//! burst. That half: each process tells its own bookings, so the first one back finds a store
//! that does not know the other's yet (measured: 0 to 5 permits over, of ~110). Without the
//! telling, Redis's idle limit hands out a fresh burst on top of what memory admitted
//! (measured: 27 over).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use redlimit::limiter::Limiter;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy};

use crate::support::{Proxy, RedisServer, eventually, unique_prefix};

const RATE: u64 = 20;

#[derive(Default)]
struct Seen {
    store: AtomicUsize,
    local: AtomicUsize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_store_and_its_return_keep_the_fleet_within_the_policy() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let prefix = unique_prefix("frozen");
    let policy = Policy::new("p", [Limit::gcra(RATE, Duration::from_secs(1)).unwrap()]).unwrap();
    let mut limiters = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::builder(proxy.url())
            .prefix(prefix.clone())
            .connect()
            .await
            .expect("connect");
        limiters.push(
            Limiter::builder(store, policy.clone())
                .local_share(2)
                .store_deadline(Duration::from_millis(200))
                .cool_down(Duration::from_millis(300))
                .max_wait(Duration::from_secs(30))
                .build(),
        );
    }
    let calls = || limiters.iter().map(Limiter::store_calls).sum::<u64>();

    let (seen, stop) = (Arc::new(Seen::default()), Arc::new(AtomicBool::new(false)));
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let limiter = limiters[w % 2].clone();
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut slots: Vec<(SystemTime, bool)> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let permit = limiter.acquire("upstream", 1).await.expect("a permit");
                    let counter = if permit.is_local() {
                        &seen.local
                    } else {
                        &seen.store
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    slots.push((permit.slot().expect("a reservation"), permit.is_local()));
                }
                slots
            })
        })
        .collect();
    let count = |n: &AtomicUsize| n.load(Ordering::Relaxed);
    let deadline = Duration::from_secs(20);

    assert!(
        eventually(deadline, async || count(&seen.store) >= 30).await,
        "permits from the store"
    );
    proxy.freeze();
    let (frozen_at, calls_at_freeze) = (Instant::now(), calls());
    assert!(
        eventually(deadline, async || count(&seen.local) >= 30).await,
        "permits from memory while Redis is frozen"
    );
    let frozen_for = frozen_at.elapsed();
    let calls_frozen = calls() - calls_at_freeze;
    proxy.thaw();
    let (store_at_thaw, calls_at_thaw) = (count(&seen.store), calls());
    assert!(
        eventually(deadline, async || count(&seen.store) >= store_at_thaw + 30).await,
        "permits from the store again"
    );
    stop.store(true, Ordering::Relaxed);
    let mut slots = Vec::new();
    for worker in workers {
        slots.extend(worker.await.expect("worker"));
    }
    let calls_after = calls() - calls_at_thaw;
    let store_after = count(&seen.store) - store_at_thaw;

    slots.sort();
    let (first, last) = (slots[0].0, slots[slots.len() - 1].0);
    let span = last.duration_since(first).unwrap_or_default().as_secs_f64();
    let most = RATE as f64 * (1.0 + span);
    let local = slots.iter().filter(|(_, local)| *local).count();
    println!(
        "{} permits ({local} from memory) over {span:.2} s of slots (the policy: at most \
         {most:.0}); {calls_frozen} store calls in {frozen_for:?} frozen; {calls_after} store \
         calls for {store_after} store permits after the thaw",
        slots.len()
    );
    let half_a_burst = RATE as f64 / 2.0;
    assert!(
        slots.len() as f64 <= most + half_a_burst,
        "{} permits in {span:.2} s of slots: above burst + rate × time + half a burst",
        slots.len()
    );
    // Frozen: the calls in flight (one per worker), then one per cool-down and limiter.
    let bound = 6 + 2 * (frozen_for.as_millis() as u64 / 300 + 1);
    assert!(
        calls_frozen <= bound,
        "{calls_frozen} store calls while frozen (at most {bound})"
    );
    // Back: one call per permit, and one per limiter telling what memory booked.
    assert!(
        calls_after <= store_after as u64 + 2 + 2,
        "{calls_after} store calls for {store_after} permits after the thaw"
    );
}

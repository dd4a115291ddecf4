//! A fleet run: workers over independent limiters (each its own store, as separate processes
//! would have) saturating one quota, and what it admitted.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use redlimit::limiter::Limiter;

use crate::support::RedisServer;

/// What a run admitted: per worker, the slot of each permit (Redis time) and when it woke.
pub(crate) struct Run {
    pub(crate) slots: Vec<Vec<SystemTime>>,
    pub(crate) woke: Vec<Vec<Instant>>,
    pub(crate) started: Instant,
}

/// `workers` workers spread over `limiters`, each acquiring 1 unit of `key` back to back
/// until `secs` have passed.
pub(crate) async fn saturate(limiters: &[Limiter], workers: usize, secs: Duration) -> Run {
    let started = Instant::now();
    let end = started + secs;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let limiter = limiters[w % limiters.len()].clone();
            tokio::spawn(async move {
                let (mut slots, mut woke) = (Vec::new(), Vec::new());
                while Instant::now() < end {
                    let permit = limiter.acquire("upstream", 1).await.expect("a permit");
                    woke.push(Instant::now());
                    slots.push(permit.slot().expect("a reservation"));
                }
                (slots, woke)
            })
        })
        .collect();
    let mut run = Run {
        slots: Vec::new(),
        woke: Vec::new(),
        started,
    };
    for task in tasks {
        let (slots, woke) = task.await.expect("worker");
        run.slots.push(slots);
        run.woke.push(woke);
    }
    run
}

impl Run {
    /// Every slot, in order.
    pub(crate) fn all_slots(&self) -> Vec<SystemTime> {
        let mut all: Vec<SystemTime> = self.slots.iter().flatten().copied().collect();
        all.sort();
        all
    }

    /// Permits whose slot lies within `span` of the first slot.
    pub(crate) fn within(&self, span: Duration) -> usize {
        let all = self.all_slots();
        let first = all[0];
        all.iter().filter(|s| **s <= first + span).count()
    }

    /// The most slots in any window of `window`.
    pub(crate) fn max_in_window(&self, window: Duration) -> usize {
        let all = self.all_slots();
        let mut best = 0;
        let mut lo = 0;
        for hi in 0..all.len() {
            while all[hi] >= all[lo] + window {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }

    /// Each worker's permits, from the first slot to `span` after it.
    pub(crate) fn shares(&self, span: Duration) -> Vec<usize> {
        let first = self.all_slots()[0];
        self.slots
            .iter()
            .map(|w| w.iter().filter(|s| **s <= first + span).count())
            .collect()
    }

    /// The most wake-ups (this process's clock) in any window of `window`.
    pub(crate) fn max_woken_in_window(&self, window: Duration) -> usize {
        let mut all: Vec<Instant> = self.woke.iter().flatten().copied().collect();
        all.sort();
        let (mut best, mut lo) = (0, 0);
        for hi in 0..all.len() {
            while all[hi] >= all[lo] + window {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }

    /// Every permit of the run.
    pub(crate) fn total(&self) -> usize {
        self.slots.iter().map(Vec::len).sum()
    }
}

/// `EVALSHA` calls the server ran so far (`INFO commandstats`).
pub(crate) fn evalsha_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .expect("INFO");
    let stats: HashMap<&str, u64> = info
        .lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name, calls))
        })
        .collect();
    stats.get("evalsha").copied().unwrap_or(0)
}

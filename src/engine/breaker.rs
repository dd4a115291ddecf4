//! A circuit breaker in front of the store: when most recent calls fail, stop calling it for a
//! cool-down and decide at once by the failure policy; then let one probe through, and close
//! on its success.
//!
//! It opens on a failure *rate* over a sliding window with a minimum number of calls, never on
//! a run of bad luck: a flood that pushes some calls past the deadline while others succeed
//! is load, not a dead store, and must not buy an attacker an unlimited window. It also opens
//! at once on *silence*: a call past its deadline with no answer in its domain since it was
//! sent, confirmed by a probe that gets no answer either (a frozen or black-holed store
//! answers nothing; a loaded one answers late, and answers a probe).
//!
//! An open breaker remembers whether the store went *silent* (no answer) or *refused* (errors):
//! a store starved of CPU is silent too, for as long as it is starved, so the layer fails open
//! only on a refusal (see [`OnStoreError::Open`](crate::failure::OnStoreError::Open)).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::failure::CircuitBreaker;
use crate::failure::circuit_breaker::BUCKETS;

/// What the breaker lets a request do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Call the store.
    Call,
    /// Call the store as the one probe after a cool-down.
    Probe,
    /// Do not call the store: decide by the failure policy now.
    Skip,
}

/// How a store call ended, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    /// The store answered with an error (or could not be reached).
    Failure,
    /// The store did not answer within the deadline.
    Timeout,
}

impl Outcome {
    /// How the breaker counts a call's end (`None`: no answer at all).
    pub(crate) fn of<T>(outcome: Option<&Result<T, StoreError>>) -> Outcome {
        match outcome {
            Some(Ok(_)) => Outcome::Success,
            Some(Err(error)) if error.is_timeout() => Outcome::Timeout,
            Some(Err(_)) => Outcome::Failure,
            None => Outcome::Timeout,
        }
    }
}

/// A change of a breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Opened on these calls in the window.
    Opened {
        calls: u32,
        failures: u32,
        timeouts: u32,
    },
    /// Opened because the store went silent: a call passed its deadline with no answer in
    /// the domain since it was sent, and a probe got none either.
    Silent,
    /// Opened because a call passed its deadline with no answer in the domain since it was
    /// sent, and a probe found the store refusing (an error, not silence).
    Refused,
    /// Closed by a successful probe.
    Closed,
    /// Opened again by a probe that failed (not a trip: it was open before the probe).
    Reopened,
}

/// One tenth of the window: the calls of one time slice, tagged with the slice's number so a
/// stale bucket is recognised and restarted.
#[derive(Debug, Default)]
struct Bucket {
    slice: AtomicU64,
    calls: AtomicU32,
    failures: AtomicU32,
    timeouts: AtomicU32,
}

/// The calls in the window, summed over its buckets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    calls: u32,
    failures: u32,
    timeouts: u32,
}

impl Tally {
    /// Whether these calls open the breaker: errors always count; timeouts only when nothing
    /// in the window succeeded (a slow store answers some calls, a dead one none).
    fn opens(&self, config: &CircuitBreaker) -> bool {
        let successes = self
            .calls
            .saturating_sub(self.failures)
            .saturating_sub(self.timeouts);
        let bad = if successes == 0 {
            self.failures + self.timeouts
        } else {
            self.failures
        };
        self.too_many(config, bad)
    }

    /// Whether these calls' errors alone open the breaker (not their timeouts): the store
    /// refuses, rather than stays silent.
    fn refused(&self, config: &CircuitBreaker) -> bool {
        self.too_many(config, self.failures)
    }

    fn too_many(&self, config: &CircuitBreaker, bad: u32) -> bool {
        self.calls >= config.min_calls
            && u64::from(bad) * 1000 >= u64::from(config.failure_permille) * u64::from(self.calls)
    }
}

/// What a probe sent to confirm a silence found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probed {
    /// The store answered it (slow, not gone), or this process was too starved to tell.
    Alive,
    /// The store answered with an error, or could not be reached at once.
    Refused,
    /// No answer within the probe's time.
    Silent,
}

/// One breaker's state. Lock-free: a closed breaker costs an atomic load and an increment per
/// call; the counts are approximate under races (a bucket restarted while another thread
/// counts into it may lose that count), which a rate over a window tolerates.
#[derive(Debug, Default)]
pub(crate) struct Breaker {
    buckets: [Bucket; BUCKETS],
    /// Milliseconds (of the owner's clock) until which the breaker is open; 0 when closed.
    open_until: AtomicU64,
    /// When the current probe started (ms, at least 1); 0 when none is in flight.
    probe_started: AtomicU64,
    /// When the store last answered a call in this domain (µs of the owner's clock; 0: never),
    /// an error included: a store that answers is there, however slow. Microseconds, because
    /// an answer to an earlier call in the same millisecond must not pass for one since.
    answered: AtomicU64,
    /// A probe is finding out whether the silent store is gone.
    confirming: AtomicBool,
    /// Why it is open: the store went silent (true) or refused (false). Meaningless while
    /// closed.
    silent: AtomicBool,
}

impl Breaker {
    /// Whether a request may call the store at `now_ms` (at least 1). `deadline` bounds a
    /// probe: one that has not reported within twice the deadline is presumed lost, and
    /// another may start.
    pub(crate) fn admit(&self, now_ms: u64, deadline: Duration) -> Admission {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Admission::Call;
        }
        if now_ms < until {
            return Admission::Skip;
        }
        let started = self.probe_started.load(Ordering::Acquire);
        let stale =
            started != 0 && now_ms.saturating_sub(started) > 2 * deadline.as_millis() as u64;
        if (started == 0 || stale)
            && self
                .probe_started
                .compare_exchange(started, now_ms, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Admission::Probe;
        }
        Admission::Skip
    }

    /// Records how a store call ended; returns what changed, for the caller to log.
    pub(crate) fn record(
        &self,
        config: &CircuitBreaker,
        now_ms: u64,
        admission: Admission,
        outcome: Outcome,
    ) -> Option<Change> {
        if admission == Admission::Probe && !config.disabled {
            self.probe_started.store(0, Ordering::Release);
            if outcome == Outcome::Success {
                self.clear();
                self.open_until.store(0, Ordering::Release);
                return Some(Change::Closed);
            }
            self.silent
                .store(outcome == Outcome::Timeout, Ordering::Release);
            self.open(config, now_ms);
            return Some(Change::Reopened);
        }
        if admission == Admission::Skip {
            return None;
        }
        let slice = now_ms / config.bucket_ms();
        let bucket = &self.buckets[slice as usize % BUCKETS];
        let seen = bucket.slice.load(Ordering::Acquire);
        if seen != slice
            && bucket
                .slice
                .compare_exchange(seen, slice, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            bucket.calls.store(0, Ordering::Relaxed);
            bucket.failures.store(0, Ordering::Relaxed);
            bucket.timeouts.store(0, Ordering::Relaxed);
        }
        bucket.calls.fetch_add(1, Ordering::Relaxed);
        match outcome {
            // A success cannot open the breaker: no need to look at the window.
            Outcome::Success => return None,
            Outcome::Failure => bucket.failures.fetch_add(1, Ordering::Relaxed),
            Outcome::Timeout => bucket.timeouts.fetch_add(1, Ordering::Relaxed),
        };
        if config.disabled || self.open_until.load(Ordering::Acquire) != 0 {
            return None;
        }
        let tally = self.tally(slice);
        if !tally.opens(config) {
            return None;
        }
        // Set before the breaker opens: a request that finds it open reads why.
        self.silent.store(!tally.refused(config), Ordering::Release);
        if self
            .open_until
            .compare_exchange(
                0,
                now_ms + config.cool_down.as_millis() as u64,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            self.clear();
            return Some(Change::Opened {
                calls: tally.calls,
                failures: tally.failures,
                timeouts: tally.timeouts,
            });
        }
        None
    }

    /// Notes that the store answered a call in this domain at `now_us`.
    pub(crate) fn note_answer(&self, now_us: u64) {
        self.answered.fetch_max(now_us, Ordering::AcqRel);
    }

    /// Whether the store answered a call in this domain at `since_us` or later.
    pub(crate) fn answered_since(&self, since_us: u64) -> bool {
        self.answered.load(Ordering::Acquire) >= since_us
    }

    /// Starts confirming that the store is gone; false if a confirmation is under way (or the
    /// breaker is open already).
    pub(crate) fn start_confirming(&self) -> bool {
        self.is_closed() && !self.confirming.swap(true, Ordering::AcqRel)
    }

    /// Ends a confirmation: a probe that found the store silent or refusing opens the breaker
    /// at `now_ms` (unless the store answered a call since `since_us`, or it is open already).
    /// Returns what changed.
    pub(crate) fn confirmed(
        &self,
        config: &CircuitBreaker,
        now_ms: u64,
        since_us: u64,
        probed: Probed,
    ) -> Option<Change> {
        let silent = probed == Probed::Silent;
        if probed != Probed::Alive && self.is_closed() {
            self.silent.store(silent, Ordering::Release);
        }
        let opened = probed != Probed::Alive
            && !config.disabled
            && !self.answered_since(since_us)
            && self
                .open_until
                .compare_exchange(
                    0,
                    (now_ms + config.cool_down.as_millis() as u64).max(1),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok();
        if opened {
            self.clear();
        }
        self.confirming.store(false, Ordering::Release);
        match (opened, silent) {
            (false, _) => None,
            (true, true) => Some(Change::Silent),
            (true, false) => Some(Change::Refused),
        }
    }

    /// Whether the breaker is open because the store went silent rather than refused (only
    /// meaningful while it is open).
    pub(crate) fn is_silent(&self) -> bool {
        self.silent.load(Ordering::Acquire)
    }

    /// Lets another request probe: this one's probe was never sent.
    pub(crate) fn abandon_probe(&self) {
        self.probe_started.store(0, Ordering::Release);
    }

    /// Whether the breaker is closed (one atomic load).
    pub(crate) fn is_closed(&self) -> bool {
        self.open_until.load(Ordering::Acquire) == 0
    }

    fn open(&self, config: &CircuitBreaker, now_ms: u64) {
        let until = now_ms + config.cool_down.as_millis() as u64;
        self.open_until.store(until.max(1), Ordering::Release);
    }

    /// The calls of the buckets still inside the window ending in `slice`.
    fn tally(&self, slice: u64) -> Tally {
        let oldest = slice.saturating_sub(BUCKETS as u64 - 1);
        let mut tally = Tally::default();
        for bucket in &self.buckets {
            let s = bucket.slice.load(Ordering::Acquire);
            if s >= oldest && s <= slice {
                tally.calls += bucket.calls.load(Ordering::Relaxed);
                tally.failures += bucket.failures.load(Ordering::Relaxed);
                tally.timeouts += bucket.timeouts.load(Ordering::Relaxed);
            }
        }
        tally
    }

    /// Forgets the window: after a state change, the old calls say nothing about the new
    /// state.
    fn clear(&self) {
        for bucket in &self.buckets {
            bucket.slice.store(0, Ordering::Relaxed);
            bucket.calls.store(0, Ordering::Relaxed);
            bucket.failures.store(0, Ordering::Relaxed);
            bucket.timeouts.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;

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

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::circuit_breaker::BUCKETS;
use super::circuit_breaker::CircuitBreaker;

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
        self.calls >= config.min_calls
            && u64::from(bad) * 1000 >= u64::from(config.failure_permille) * u64::from(self.calls)
    }
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
        if tally.opens(config)
            && self
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

    /// Ends a confirmation: `gone` opens the breaker at `now_ms` (unless the store answered
    /// a call since `since_us`, or it is open already). Returns what changed.
    pub(crate) fn confirmed(
        &self,
        config: &CircuitBreaker,
        now_ms: u64,
        since_us: u64,
        gone: bool,
    ) -> Option<Change> {
        let opened = gone
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
        opened.then_some(Change::Silent)
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
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_millis(100);

    fn config(min_calls: u32) -> CircuitBreaker {
        CircuitBreaker::new()
            .min_calls(min_calls)
            .cool_down(Duration::from_millis(1000))
    }

    /// Records `n` calls with this outcome at `now` (ms).
    fn record(b: &Breaker, c: &CircuitBreaker, now: u64, n: u32, outcome: Outcome) -> bool {
        (0..n).any(|_| {
            matches!(
                b.record(c, now, Admission::Call, outcome),
                Some(Change::Opened { .. })
            )
        })
    }

    #[test]
    fn opens_on_a_failure_rate_only_after_the_minimum_of_calls() {
        let (b, c) = (Breaker::default(), config(20));
        assert!(!record(&b, &c, 1, 19, Outcome::Failure), "19 calls < 20");
        assert_eq!(b.admit(1, DEADLINE), Admission::Call);
        assert!(record(&b, &c, 1, 1, Outcome::Failure));
        assert_eq!(b.admit(2, DEADLINE), Admission::Skip);
    }

    #[test]
    fn a_failure_rate_under_the_threshold_keeps_it_closed() {
        let (b, c) = (Breaker::default(), config(20));
        for _ in 0..100 {
            assert!(!record(&b, &c, 5, 2, Outcome::Success));
            assert!(!record(&b, &c, 5, 1, Outcome::Failure), "a third failing");
        }
        assert_eq!(b.admit(5, DEADLINE), Admission::Call);
    }

    #[test]
    fn timeouts_among_successes_do_not_open_it() {
        // A flood: most calls miss the deadline, some are answered in time.
        let (b, c) = (Breaker::default(), config(20));
        assert!(!record(&b, &c, 1, 1, Outcome::Success));
        assert!(!record(&b, &c, 1, 10_000, Outcome::Timeout));
        assert_eq!(b.admit(1, DEADLINE), Admission::Call);
    }

    #[test]
    fn timeouts_alone_open_it() {
        // A silent store: nothing answers.
        let (b, c) = (Breaker::default(), config(20));
        assert!(record(&b, &c, 1, 20, Outcome::Timeout));
        assert_eq!(b.admit(2, DEADLINE), Admission::Skip);
    }

    #[test]
    fn old_calls_leave_the_window() {
        let (b, c) = (Breaker::default(), config(20));
        // 10 s window: a success at t=0 no longer excuses timeouts at t=20 s.
        assert!(!record(&b, &c, 1, 1, Outcome::Success));
        assert!(record(&b, &c, 20_000, 20, Outcome::Timeout));
        // Failures spread thinner than the window never add up to the minimum.
        let (b, c) = (Breaker::default(), config(20));
        for second in 0..100 {
            assert!(!record(&b, &c, 1 + second * 1000, 1, Outcome::Failure));
        }
    }

    #[test]
    fn probes_once_after_the_cool_down_and_closes_on_success() {
        let (b, c) = (Breaker::default(), config(1));
        assert!(record(&b, &c, 1, 1, Outcome::Failure));
        assert_eq!(b.admit(999, DEADLINE), Admission::Skip);
        assert_eq!(b.admit(1001, DEADLINE), Admission::Probe);
        assert_eq!(
            b.admit(1001, DEADLINE),
            Admission::Skip,
            "one probe at a time"
        );
        assert_eq!(
            b.record(&c, 1002, Admission::Probe, Outcome::Success),
            Some(Change::Closed)
        );
        assert_eq!(b.admit(1003, DEADLINE), Admission::Call);
    }

    #[test]
    fn a_failed_probe_reopens_and_a_lost_one_is_replaced() {
        let (b, c) = (Breaker::default(), config(1));
        assert!(record(&b, &c, 1, 1, Outcome::Failure));
        assert_eq!(b.admit(1001, DEADLINE), Admission::Probe);
        assert_eq!(
            b.record(&c, 1001, Admission::Probe, Outcome::Timeout),
            Some(Change::Reopened)
        );
        assert_eq!(b.admit(1500, DEADLINE), Admission::Skip, "open again");
        assert_eq!(b.admit(2002, DEADLINE), Admission::Probe);
        // This probe never reports (its request was dropped): after 2 × the deadline, another.
        assert_eq!(b.admit(2100, DEADLINE), Admission::Skip);
        assert_eq!(b.admit(2203, DEADLINE), Admission::Probe);
    }

    #[test]
    fn silence_confirmed_opens_it_at_once_and_an_answer_since_keeps_it_closed() {
        let (b, c) = (Breaker::default(), config(20));
        b.note_answer(5);
        assert!(b.answered_since(5));
        assert!(!b.answered_since(6), "nothing answered after 5");
        assert!(b.start_confirming());
        assert!(!b.start_confirming(), "one confirmation at a time");
        // A call asked at 6 missed its deadline; the probe found nothing: open, one call in.
        assert_eq!(b.confirmed(&c, 300, 6, true), Some(Change::Silent));
        assert_eq!(b.admit(301, DEADLINE), Admission::Skip);
        assert!(!b.start_confirming(), "open already");

        // Silent when asked, but a late answer came before the probe failed: load.
        let b = Breaker::default();
        assert!(b.start_confirming());
        b.note_answer(150);
        assert_eq!(b.confirmed(&c, 300, 100, true), None);
        assert_eq!(b.admit(301, DEADLINE), Admission::Call);
        // The probe answered: slow, not gone.
        assert!(b.start_confirming());
        assert_eq!(b.confirmed(&c, 400, 350, false), None);
        assert_eq!(b.admit(401, DEADLINE), Admission::Call);
        // A disabled breaker never opens.
        let off = CircuitBreaker::disabled();
        assert!(b.start_confirming());
        assert_eq!(b.confirmed(&off, 500, 450, true), None);
    }

    #[test]
    fn closing_forgets_the_failures_before() {
        let (b, c) = (Breaker::default(), config(20));
        assert!(record(&b, &c, 1, 20, Outcome::Failure));
        assert_eq!(b.admit(1001, DEADLINE), Admission::Probe);
        b.record(&c, 1001, Admission::Probe, Outcome::Success);
        assert!(!record(&b, &c, 1002, 19, Outcome::Failure));
    }

    #[test]
    fn settings_are_clamped() {
        let c = CircuitBreaker::new()
            .min_calls(0)
            .failure_rate(7.0)
            .window(Duration::ZERO);
        assert_eq!(c.min_calls, 1);
        assert_eq!(c.failure_permille, 1000);
        assert_eq!(c.window, Duration::from_millis(10));
        assert_eq!(
            CircuitBreaker::new()
                .failure_rate(f64::NAN)
                .failure_permille,
            500
        );
        assert_eq!(CircuitBreaker::new().failure_rate(-1.0).failure_permille, 1);
    }
}

//! A circuit breaker in front of the store: after repeated failures, stop calling it for a
//! cool-down and decide at once by the failure policy; then let one probe through, and close
//! on its success.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// When to stop calling a failing store, and for how long.
///
/// After `failures` consecutive failures (errors or missed deadlines) the breaker opens: for
/// `cool_down`, requests do not touch the store and get the failure policy's answer at once
/// (no deadline to wait out). Then one request probes the store: success closes the breaker,
/// failure opens it for another cool-down. The default is 5 failures and 1 s.
///
/// ```
/// use std::time::Duration;
/// use redlimit::CircuitBreaker;
/// let breaker = CircuitBreaker::new(3, Duration::from_millis(500));
/// assert_eq!(CircuitBreaker::default(), CircuitBreaker::new(5, Duration::from_secs(1)));
/// assert!(CircuitBreaker::disabled().is_disabled());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    failures: u32,
    cool_down: Duration,
}

impl CircuitBreaker {
    /// Opens after `failures` consecutive failures (at least 1) for `cool_down`.
    pub fn new(failures: u32, cool_down: Duration) -> Self {
        CircuitBreaker {
            failures: failures.max(1),
            cool_down,
        }
    }

    /// Never opens: every request tries the store (and may wait up to the deadline).
    pub fn disabled() -> Self {
        CircuitBreaker {
            failures: u32::MAX,
            cool_down: Duration::ZERO,
        }
    }

    /// Whether this breaker never opens.
    pub fn is_disabled(&self) -> bool {
        self.failures == u32::MAX
    }
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker::new(5, Duration::from_secs(1))
    }
}

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

/// The breaker's state, shared by every clone of a layer. Lock-free: a closed breaker costs
/// one atomic load per request.
#[derive(Debug)]
pub(crate) struct Breaker {
    config: CircuitBreaker,
    epoch: Instant,
    consecutive: AtomicU32,
    /// Milliseconds since `epoch` until which the breaker is open; 0 when closed.
    open_until: AtomicU64,
    /// When the current probe started (ms since `epoch`, +1); 0 when none is in flight.
    probe_started: AtomicU64,
}

impl Breaker {
    pub(crate) fn new(config: CircuitBreaker) -> Self {
        Breaker {
            config,
            epoch: Instant::now(),
            consecutive: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probe_started: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Whether a request may call the store. `deadline` bounds a probe: one that has not
    /// reported within twice the deadline is presumed lost, and another may start.
    pub(crate) fn admit(&self, deadline: Duration) -> Admission {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Admission::Call;
        }
        let now = self.now_ms();
        if now < until {
            return Admission::Skip;
        }
        let started = self.probe_started.load(Ordering::Acquire);
        let stale = started != 0 && now.saturating_sub(started) > 2 * deadline.as_millis() as u64;
        if (started == 0 || stale)
            && self
                .probe_started
                .compare_exchange(started, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Admission::Probe;
        }
        Admission::Skip
    }

    /// Records the outcome of a store call.
    pub(crate) fn record(&self, admission: Admission, success: bool) {
        if success {
            // Loads first: a healthy store costs no write to shared cache lines.
            if self.consecutive.load(Ordering::Relaxed) != 0 {
                self.consecutive.store(0, Ordering::Relaxed);
            }
            if self.open_until.load(Ordering::Acquire) != 0
                && self.open_until.swap(0, Ordering::AcqRel) != 0
            {
                self.probe_started.store(0, Ordering::Release);
                tracing::info!("rate-limit store answers again; circuit closed");
            }
            return;
        }
        let open = |breaker: &Self| {
            let until = breaker.now_ms() + breaker.config.cool_down.as_millis() as u64;
            breaker.open_until.store(until.max(1), Ordering::Release);
        };
        if admission == Admission::Probe {
            open(self);
            self.probe_started.store(0, Ordering::Release);
            return;
        }
        let failures = self
            .consecutive
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if failures >= self.config.failures && self.open_until.load(Ordering::Acquire) == 0 {
            open(self);
            tracing::warn!(
                failures,
                cool_down = ?self.config.cool_down,
                "rate-limit store keeps failing; circuit open, deciding without it"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_millis(100);

    #[test]
    fn opens_after_consecutive_failures_and_probes_after_the_cool_down() {
        let b = Breaker::new(CircuitBreaker::new(3, Duration::ZERO));
        for _ in 0..2 {
            assert_eq!(b.admit(DEADLINE), Admission::Call);
            b.record(Admission::Call, false);
        }
        b.record(Admission::Call, true);
        for _ in 0..3 {
            b.record(Admission::Call, false);
        }
        // Cool-down of zero: the next request is the probe, and only one.
        assert_eq!(b.admit(DEADLINE), Admission::Probe);
        assert_eq!(b.admit(DEADLINE), Admission::Skip);
        b.record(Admission::Probe, true);
        assert_eq!(b.admit(DEADLINE), Admission::Call);
    }

    #[test]
    fn stays_open_during_the_cool_down() {
        let b = Breaker::new(CircuitBreaker::new(1, Duration::from_secs(3600)));
        b.record(Admission::Call, false);
        assert_eq!(b.admit(DEADLINE), Admission::Skip);
    }

    #[test]
    fn a_failed_probe_reopens() {
        let b = Breaker::new(CircuitBreaker::new(1, Duration::ZERO));
        b.record(Admission::Call, false);
        assert_eq!(b.admit(DEADLINE), Admission::Probe);
        b.record(Admission::Probe, false);
        assert_eq!(
            b.admit(DEADLINE),
            Admission::Probe,
            "cool-down of zero: probe again"
        );
    }

    #[test]
    fn disabled_never_opens() {
        let b = Breaker::new(CircuitBreaker::disabled());
        for _ in 0..1000 {
            b.record(Admission::Call, false);
        }
        assert_eq!(b.admit(DEADLINE), Admission::Call);
    }
}

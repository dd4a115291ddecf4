//! Time for the memory store: the wall clock read once and then advanced by a monotonic
//! clock, or one a test moves by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of Unix time in microseconds, injectable for tests.
///
/// ```
/// use redlimit::store::{Clock, SystemClock};
/// assert!(SystemClock.now_us() > 1_600_000_000_000_000);
/// ```
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> u64;
}

/// The system's clock: Unix time read once per process, then advanced by the monotonic clock.
///
/// So a step of the wall clock (an NTP correction, a VM restored from a snapshot) never moves
/// the limits' time backwards or forwards: a backward step would otherwise lock clients out
/// until the clock caught up, and a forward step would refill every limit at once. The price
/// is that a process's time drifts from the wall clock by whatever the steps were; reported
/// reset times are off by as much.
///
/// ```
/// use redlimit::store::{Clock, SystemClock};
/// let a = SystemClock.now_us();
/// assert!(SystemClock.now_us() >= a);
/// assert!(a > 1_600_000_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// The wall clock and the monotonic clock, read together once.
static ANCHOR: LazyLock<(u64, Instant)> = LazyLock::new(|| {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    (wall, Instant::now())
});

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        let (wall, at) = *ANCHOR;
        let elapsed = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
        wall.saturating_add(elapsed)
    }
}

/// A clock that moves only when told to: deterministic tests of time-dependent behaviour.
///
/// ```
/// use redlimit::store::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance(std::time::Duration::from_millis(2));
/// assert_eq!(clock.now_us(), 3_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock showing `now_us` (Unix µs). Clones share the time.
    ///
    /// ```
    /// use redlimit::store::{Clock, ManualClock};
    /// assert_eq!(ManualClock::new(7).now_us(), 7);
    /// ```
    pub fn new(now_us: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(now_us)))
    }

    /// Sets the time.
    ///
    /// ```
    /// use redlimit::store::{Clock, ManualClock};
    /// let clock = ManualClock::new(0);
    /// clock.set(42);
    /// assert_eq!(clock.now_us(), 42);
    /// ```
    pub fn set(&self, now_us: u64) {
        self.0.store(now_us, Ordering::SeqCst);
    }

    /// Moves the time forward.
    ///
    /// ```
    /// use redlimit::store::{Clock, ManualClock};
    /// let clock = ManualClock::new(0);
    /// clock.advance(std::time::Duration::from_secs(1));
    /// assert_eq!(clock.now_us(), 1_000_000);
    /// ```
    pub fn advance(&self, by: std::time::Duration) {
        let us = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        self.0.fetch_add(us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

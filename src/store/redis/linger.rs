//! How long a batch may wait for more decisions while a call is in flight.
//!
//! Each call costs Redis about as much in its own wake-up, read and write as in the scripts it
//! runs for a few decisions, so fewer, larger calls cost it less. A batch taken while a call is
//! in flight is held until that call is answered (the connection is idle again: what arrived
//! meanwhile goes with it), until a batch is full, or for at most `bound`, whichever comes
//! first; and only while the store's recent calls were answered within `bound`: on loopback
//! or a LAN the hold adds less than one round trip, and with Redis further away than `bound`
//! nothing is held (a decision ready goes out at once, pipelined, as without a hold). Every
//! script call is timed, a decision sent alone as well as a batch: a store that starts quiet
//! knows how far Redis is before its first burst, whose batches would otherwise be held.
//!
//! A pipeline window ([`Window`], envoyproxy/ratelimit's `REDIS_PIPELINE_WINDOW` and
//! `_LIMIT`) holds every batch instead, whatever the distance and whether or not a call is in
//! flight: for the window, or until `limit` decisions wait. It trades latency (up to the
//! window per decision) for fewer calls, so less Redis CPU per decision, where Redis is far
//! and the linger holds nothing.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long a batch may be held unless the builder says otherwise.
pub(super) const DEFAULT_LINGER: Duration = Duration::from_millis(1);

/// The hold of one store's batches.
pub(super) struct Linger {
    /// The longest a batch is held; zero holds none.
    bound_ns: u64,
    /// The round trip of recent calls, smoothed (ns); 0 before the first is measured.
    round_trip_ns: AtomicU64,
    /// A batch is held: an idle connection or a full batch must release it.
    holding: AtomicBool,
    released: Notify,
}

impl Linger {
    pub(super) fn new(bound: Duration) -> Self {
        Linger {
            bound_ns: u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX),
            round_trip_ns: AtomicU64::new(0),
            holding: AtomicBool::new(false),
            released: Notify::new(),
        }
    }

    /// Whether waiting is worth it now: holding is on and recent calls were answered within
    /// the bound.
    pub(super) fn worth_it(&self) -> bool {
        self.bound_ns > 0 && self.round_trip_ns.load(Ordering::Relaxed) <= self.bound_ns
    }

    /// Notes the round trip of a call just answered: the smoothed figure moves an eighth of
    /// the way to it.
    pub(super) fn observe(&self, took: Duration) {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let before = self.round_trip_ns.load(Ordering::Relaxed);
        let after = if before == 0 {
            took
        } else {
            before - before / 8 + took / 8
        };
        // Concurrent updates may lose one another's sample: a sample is a hint.
        self.round_trip_ns.store(after.max(1), Ordering::Relaxed);
    }

    /// Holds a batch: returns once `ready` (the connection idle or the batch full, asked once
    /// the hold is armed), once [`release`](Self::release) is called, or after the bound
    /// (Tokio's timer rounds it up to its next millisecond); at once if holding is not worth
    /// it now.
    pub(super) async fn hold(&self, ready: impl FnOnce() -> bool) {
        if !self.worth_it() {
            return;
        }
        let mut released = pin!(self.released.notified());
        released.as_mut().enable();
        // Armed before `ready` is asked: a release after it wakes this hold.
        self.holding.store(true, Ordering::SeqCst);
        if !ready() {
            let bound = Duration::from_nanos(self.bound_ns);
            let _ = tokio::time::timeout(bound, released).await;
        }
        self.holding.store(false, Ordering::SeqCst);
    }

    /// Ends a hold, if a batch is held (the connection went idle, or a batch is full).
    pub(super) fn release(&self) {
        if self.holding.load(Ordering::SeqCst) {
            self.released.notify_waiters();
        }
    }
}

/// The pipeline window of one store: every batch is held for `length`, or until `limit`
/// decisions wait.
pub(super) struct Window {
    length: Duration,
    /// The decisions waiting that end a hold.
    limit: usize,
    holding: AtomicBool,
    alarm: Arc<Alarm>,
}

/// Tokio's timer's tick: it rounds a wait up to its next one.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// Rings at the end of a hold shorter than Tokio's tick. Tokio's timer would turn the Go
/// service's usual 150 µs into 1 ms or more: a thread of the store's own sleeps to the instant
/// instead (its timer's slack, about 50 µs, aside), at the price of two more wake-ups a hold
/// (its own, and the runtime's thread's). Windows of 1 ms and more are Tokio's timer's, up to
/// a tick longer.
struct Alarm {
    /// The end of the hold under way, if one is.
    deadline: Mutex<Option<Instant>>,
    armed: Condvar,
    rang: tokio::sync::Notify,
    started: Once,
}

impl Window {
    /// A window of `length` ended early by `limit` decisions waiting; `None` for a zero length
    /// (no window, as the Go service's `0`).
    pub(super) fn new(length: Duration, limit: usize) -> Option<Self> {
        (!length.is_zero()).then(|| Window {
            length,
            limit: limit.max(1),
            holding: AtomicBool::new(false),
            alarm: Arc::new(Alarm {
                deadline: Mutex::new(None),
                armed: Condvar::new(),
                rang: tokio::sync::Notify::new(),
                started: Once::new(),
            }),
        })
    }

    /// The decisions waiting that end a hold.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// Holds a batch for the window: returns once `full` (asked once the hold is armed),
    /// once [`release`](Self::release) is called, or when the window has passed.
    pub(super) async fn hold(&self, full: impl FnOnce() -> bool) {
        let mut rang = pin!(self.alarm.rang.notified());
        rang.as_mut().enable();
        self.holding.store(true, Ordering::SeqCst);
        let held = !full();
        if held && self.length >= TIMER_TICK {
            let _ = tokio::time::timeout(self.length, rang).await;
        } else if held {
            self.alarm.set(Some(Instant::now() + self.length));
            // Tokio's timer as well, a little later: should the alarm's thread not start.
            let _ = tokio::time::timeout(self.length + TIMER_TICK, rang).await;
            self.alarm.set(None);
        }
        self.holding.store(false, Ordering::SeqCst);
    }

    /// Ends a hold, if a batch is held (`limit` decisions wait).
    pub(super) fn release(&self) {
        if self.holding.load(Ordering::SeqCst) {
            self.alarm.rang.notify_waiters();
        }
    }
}

impl Alarm {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Arms (or, with `None`, disarms) the alarm, starting its thread on first use.
    fn set(self: &Arc<Self>, deadline: Option<Instant>) {
        if deadline.is_some() {
            self.started.call_once(|| {
                let alarm = Arc::downgrade(self);
                // Without its thread, a hold ends on Tokio's timer instead.
                let _ = std::thread::Builder::new()
                    .name("redlimit-pipeline-window".to_owned())
                    .spawn(move || ring(&alarm));
            });
        }
        *self.lock() = deadline;
        self.armed.notify_one();
    }
}

/// The alarm's thread: sleeps to each deadline and rings; ends within a second of its store.
/// A ring may end the hold after the one it was armed for, early: that batch then goes out
/// sooner, nothing worse.
fn ring(alarm: &Weak<Alarm>) {
    while let Some(alarm) = alarm.upgrade() {
        let mut deadline = alarm.lock();
        let now = Instant::now();
        match *deadline {
            None => drop(alarm.armed.wait_timeout(deadline, Duration::from_secs(1))),
            Some(at) if at <= now => {
                *deadline = None;
                drop(deadline);
                alarm.rang.notify_waiters();
            }
            Some(at) => {
                drop(deadline);
                drop(alarm);
                std::thread::sleep(at - now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Poll;

    #[tokio::test]
    async fn a_hold_ends_on_release_and_only_then() {
        let linger = Linger::new(Duration::from_secs(3_600));
        let mut hold = pin!(linger.hold(|| false));
        for _ in 0..3 {
            assert!(futures_util::poll!(hold.as_mut()).is_pending());
            tokio::task::yield_now().await;
        }
        linger.release();
        assert_eq!(futures_util::poll!(hold.as_mut()), Poll::Ready(()));
    }

    #[tokio::test]
    async fn nothing_is_held_when_ready_off_or_far() {
        let linger = Linger::new(Duration::from_secs(3_600));
        linger.hold(|| true).await;
        Linger::new(Duration::ZERO).hold(|| false).await;
        // Recent calls took longer than the bound.
        let far = Linger::new(Duration::from_micros(250));
        far.observe(Duration::from_millis(10));
        far.hold(|| false).await;
        assert!(!far.worth_it());
        // They come back near, a sample at a time.
        for _ in 0..40 {
            far.observe(Duration::from_micros(50));
        }
        assert!(far.worth_it());
    }

    #[tokio::test]
    async fn a_hold_ends_after_its_bound_unreleased() {
        let linger = Linger::new(Duration::from_millis(5));
        let started = std::time::Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(60), linger.hold(|| false)).await;
        assert!(ended.is_ok(), "the hold outlived its bound");
        assert!(started.elapsed() >= Duration::from_millis(5));
    }

    #[tokio::test]
    async fn a_window_ends_on_its_own_or_once_released() {
        assert!(Window::new(Duration::ZERO, 8).is_none(), "no window");
        let window = Window::new(Duration::from_millis(5), 8).unwrap();
        let started = std::time::Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(60), window.hold(|| false)).await;
        assert!(ended.is_ok(), "the hold outlived its window");
        assert!(started.elapsed() >= Duration::from_millis(5));
        // Shorter than Tokio's tick: the alarm's thread.
        let short = Window::new(Duration::from_micros(200), 8).unwrap();
        for _ in 0..3 {
            let started = std::time::Instant::now();
            let ended = tokio::time::timeout(Duration::from_secs(60), short.hold(|| false)).await;
            assert!(ended.is_ok(), "the hold outlived its window");
            assert!(started.elapsed() >= Duration::from_micros(200));
        }
        let long = Window::new(Duration::from_secs(3_600), 8).unwrap();
        long.hold(|| true).await;
        let mut hold = pin!(long.hold(|| false));
        for _ in 0..3 {
            assert!(futures_util::poll!(hold.as_mut()).is_pending());
            tokio::task::yield_now().await;
        }
        long.release();
        assert_eq!(futures_util::poll!(hold.as_mut()), Poll::Ready(()));
    }
}

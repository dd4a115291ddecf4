//! The store deadline's timer, reused from one call to the next.
//!
//! Every call that waits for the store is bounded by a timer. A Tokio `Sleep` made and
//! dropped per call costs its allocation, a lock of the timer driver and an insertion into
//! its wheel when first polled, and another lock and a removal when dropped, the call answered
//! or not: about a thousand instructions a call, most of what a lone decision's deadline
//! costs. A [`Deadline`] dropped before it passed hands its timer to its thread's spares
//! instead, and the next deadline armed on that thread resets it: a later instant only moves
//! the timer's due time (an atomic store: the driver re-files it when the old instant comes,
//! without waking anyone), so a paced load arms each call's deadline without a lock, an
//! allocation or a wheel operation.
//!
//! A spare belongs to the runtime whose driver it was made on: it is reused only on that
//! runtime (a thread that enters another runtime drops its spares). It keeps the waker of the
//! last task that polled it; should its instant pass while it waits unused, that task is woken
//! once, for nothing, which a future always tolerates.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::{Handle, Id};
use tokio::time::{Instant, Sleep};

/// The most spare timers a thread keeps: the calls a thread has in flight at once, beyond
/// which a deadline's timer is dropped as Tokio's would be.
const SPARES: usize = 64;

thread_local! {
    static SPARE: RefCell<Spare> = const {
        RefCell::new(Spare {
            runtime: None,
            timers: Vec::new(),
        })
    };
}

/// A thread's spare timers, all made on `runtime`.
struct Spare {
    runtime: Option<Id>,
    timers: Vec<Pin<Box<Sleep>>>,
}

/// A store call's deadline: ready once `at` has passed. Made inside a Tokio runtime with its
/// timer enabled (as [`tokio::time::sleep_until`], it panics elsewhere).
pub(crate) struct Deadline {
    timer: Option<Pin<Box<Sleep>>>,
    runtime: Id,
}

impl Deadline {
    /// A deadline at `at`, on a spare timer of this thread if it has one.
    pub(crate) fn at(at: Instant) -> Self {
        let runtime = Handle::current().id();
        let spare = SPARE
            .try_with(|spare| {
                let mut spare = spare.try_borrow_mut().ok()?;
                if spare.runtime == Some(runtime) {
                    spare.timers.pop()
                } else {
                    None
                }
            })
            .ok()
            .flatten();
        let timer = match spare {
            Some(mut timer) => {
                timer.as_mut().reset(at);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(at)),
        };
        Deadline {
            timer: Some(timer),
            runtime,
        }
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.timer {
            Some(timer) => timer.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        let Some(timer) = self.timer.take() else {
            return;
        };
        // A timer that already fired is kept as well: resetting it files it again, as a new
        // one would be.
        let _ = SPARE.try_with(|spare| {
            let Ok(mut spare) = spare.try_borrow_mut() else {
                return;
            };
            if spare.runtime != Some(self.runtime) {
                // Another runtime's timers (or none yet): this thread now serves this one.
                spare.timers.clear();
                spare.runtime = Some(self.runtime);
            }
            if spare.timers.len() < SPARES {
                spare.timers.push(timer);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_deadline_passes_at_its_instant_on_a_new_timer_or_a_spare() {
        for _ in 0..3 {
            let started = Instant::now();
            Deadline::at(started + Duration::from_millis(50)).await;
            assert!(started.elapsed() >= Duration::from_millis(50));
        }
        // A spare armed for an earlier instant than it last had, and one dropped unfired.
        let mut later = Deadline::at(Instant::now() + Duration::from_secs(60));
        assert!(futures_util::poll!(&mut later).is_pending());
        drop(later);
        let started = Instant::now();
        Deadline::at(started + Duration::from_millis(5)).await;
        assert!(started.elapsed() >= Duration::from_millis(5));
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_spare_is_not_ready_before_its_new_instant() {
        drop(Deadline::at(Instant::now() + Duration::from_millis(1)));
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The spare's old instant has passed: reset, it waits for the new one.
        let started = Instant::now();
        let mut deadline = std::pin::pin!(Deadline::at(started + Duration::from_millis(200)));
        assert!(futures_util::poll!(deadline.as_mut()).is_pending());
        tokio::time::sleep(Duration::from_millis(10)).await;
        let early = started.elapsed() < Duration::from_millis(200);
        assert!(!early || futures_util::poll!(deadline.as_mut()).is_pending());
        deadline.await;
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    #[test]
    fn spares_stay_with_their_runtime() {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let first = runtime();
        first.block_on(async {
            drop(Deadline::at(Instant::now() + Duration::from_secs(60)));
        });
        drop(first);
        // The spare of the runtime shut down is not reused on this one.
        runtime().block_on(async {
            let started = Instant::now();
            Deadline::at(started + Duration::from_millis(5)).await;
            assert!(started.elapsed() >= Duration::from_millis(5));
        });
    }
}

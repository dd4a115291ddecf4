//! Batched calls: decisions that wait at the same moment go to Redis as one script call.
//!
//! A decision made while no call of this store is in flight is sent at once, as its own
//! `EVALSHA` (the uncontended path costs what it did before batching), unless the last batch
//! held several decisions and Redis answers within the linger (decisions come several at a
//! time: they then join the queue, as under load; a batch of one turns that off again).
//! Under load (calls in flight), a decision joins a queue, and the first to join spawns a
//! task that takes what the queue holds once
//! the tasks ready at that moment have run (one turn at the back of the run queue, without a
//! poll of the I/O driver: `after_ready_tasks`) and, while calls are in flight and
//! the store's recent calls were answered within the linger (`linger`: 1 ms unless the
//! builder says otherwise), once the call in flight is answered, `max` decisions wait, or the
//! linger has passed, whichever comes first: on loopback or a LAN a batch gathers what
//! arrives during one round trip, for less than one round trip more; with Redis further away
//! nothing is held and a batch goes out within one turn of the scheduler, pipelined behind
//! the calls in flight (holding it would cost up to a whole round trip). What it takes,
//! grouped by script (and by Cluster slot, since one script call reaches one node), goes out
//! as one call per group of at most `max` decisions, each group sent without waiting for the
//! others; a group of one is that decision's own `EVALSHA`. A decision keeps its arguments
//! until it is sent: the command written is the one sent, its own or its batch's.
//!
//! With a pipeline window (`pipeline_window`: the Go service's `REDIS_PIPELINE_WINDOW`),
//! every decision joins the queue, in flight or not, and the task that takes it holds it for
//! the window or until the window's limit of decisions waits, whatever the distance: the
//! linger is then not used.
//!
//! A failed call fails each of its decisions with its error, and is never sent again but on
//! `NOSCRIPT` (`evalsha`), as a single call. A call whose callers all gave up (the layer's
//! deadline) is dropped, which the connection's health counts as one missed call (`heal`).

use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use redis::{RedisError, RedisResult, Value};
use tokio::sync::oneshot;

use super::backend::Backend;
use super::linger::{Linger, Window};
use super::script::{CheckArgs, LuaScript, batch_command, split};

/// The decisions per call unless the builder says otherwise.
pub(super) const DEFAULT_MAX: usize = 32;

/// A decision queued for its call: its check's arguments, the script it runs (a check's, or
/// the always variant's: batches are per script), and its Cluster slot (0 elsewhere).
pub(super) struct Queued {
    pub(super) check: CheckArgs,
    pub(super) script: &'static LuaScript,
    pub(super) slot: u16,
}

type Reply = oneshot::Sender<RedisResult<Vec<i64>>>;

/// The calls of one store.
pub(super) struct Batcher {
    backend: Backend,
    /// The store's key prefix.
    prefix: String,
    /// Decisions per call; 1 sends each alone.
    max: usize,
    /// Script calls sent and not yet answered (or dropped).
    in_flight: AtomicUsize,
    /// How long a batch may wait for more while a call is in flight.
    linger: Linger,
    /// How long every batch waits for more, whatever is in flight; none unless set.
    window: Option<Window>,
    /// The last batch taken held more than one decision: decisions come several at a time.
    busy: AtomicBool,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<(Queued, Reply)>,
    /// A task will take `waiting`.
    taken_soon: bool,
}

impl Queue {
    /// Queues `item`; how many decisions now wait.
    fn push(&mut self, item: (Queued, Reply)) -> usize {
        self.waiting.push(item);
        self.waiting.len()
    }

    /// Whether a task must be spawned to take `waiting` now (and if so, notes that one is).
    fn take_now(&mut self) -> bool {
        let now = !self.taken_soon && !self.waiting.is_empty();
        self.taken_soon |= now;
        now
    }
}

impl Batcher {
    pub(super) fn new(
        backend: Backend,
        prefix: String,
        max: usize,
        linger: Duration,
        window: Option<Window>,
    ) -> Self {
        Batcher {
            backend,
            prefix,
            max: max.max(1),
            in_flight: AtomicUsize::new(0),
            linger: Linger::new(linger),
            window,
            busy: AtomicBool::new(false),
            queue: Mutex::default(),
        }
    }

    /// Runs `queued`, alone or in a batch; its reply (or error) as its own call gives it.
    ///
    /// An `async` block, not an `async fn`: this future is in every check's allocation, and
    /// an `async fn` keeps its arguments twice (as arguments, and as the body's locals they
    /// are moved into), `queued` among them.
    #[allow(clippy::manual_async_fn)] // see above
    pub(super) fn run(
        self: Arc<Self>,
        queued: Queued,
    ) -> impl Future<Output = RedisResult<Vec<i64>>> + Send + 'static {
        async move {
            if self.contended()
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                return self.queue(queued, &runtime).await;
            }
            let _flight = InFlight::start(&self);
            let sent = Instant::now();
            let (result, took) = self
                .backend
                .run_timed(&queued.check.command(&self.prefix), sent)
                .await;
            self.linger.observe(took);
            result
        }
    }

    /// Queues `queued` for the next batch and waits for its answer.
    async fn queue(
        self: &Arc<Self>,
        queued: Queued,
        runtime: &tokio::runtime::Handle,
    ) -> RedisResult<Vec<i64>> {
        let (reply, answer) = oneshot::channel();
        {
            let mut queue = self.lock_queue();
            let waiting = queue.push((queued, reply));
            if waiting >= self.max {
                self.linger.release();
            }
            if let Some(window) = &self.window
                && waiting >= window.limit()
            {
                window.release();
            }
            if queue.take_now() {
                runtime.spawn(Arc::clone(self).take());
            }
        }
        answer.await.unwrap_or_else(|_| Err(dropped()))
    }

    /// Whether a decision made now may wait for others: batching is on, and calls are in
    /// flight, or the last batch held several decisions and Redis answers within the linger
    /// (alone, it goes out at once: a turn's wait is worth it only when calls are short).
    /// A pipeline window queues every decision.
    fn contended(&self) -> bool {
        self.max > 1
            && (self.window.is_some()
                || self.in_flight.load(Ordering::Relaxed) > 0
                || (self.busy.load(Ordering::Relaxed) && self.linger.worth_it()))
    }

    /// Takes the queue once the tasks ready now have queued their decisions and the batch's
    /// hold is over (the window's, else the linger's), and sends it.
    async fn take(self: Arc<Self>) {
        after_ready_tasks().await;
        if let Some(window) = &self.window {
            window
                .hold(|| self.lock_queue().waiting.len() >= window.limit())
                .await;
        } else {
            self.linger
                .hold(|| {
                    self.in_flight.load(Ordering::SeqCst) == 0
                        || self.lock_queue().waiting.len() >= self.max
                })
                .await;
        }
        let mut batches = {
            let mut queue = self.lock_queue();
            queue.taken_soon = false;
            // A decision whose caller already gave up is not sent at all.
            let waiting: Vec<_> = mem::take(&mut queue.waiting)
                .into_iter()
                .filter(|(_, reply)| !reply.is_closed())
                .collect();
            self.busy.store(waiting.len() > 1, Ordering::Relaxed);
            batches(waiting, self.max)
        };
        let last = batches.pop();
        for batch in batches {
            tokio::spawn(Arc::clone(&self).send(batch));
        }
        if let Some(batch) = last {
            self.send(batch).await;
        }
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends one batch (of one script and slot) and answers each of its decisions.
    async fn send(self: Arc<Self>, mut batch: Vec<(Queued, Reply)>) {
        let _flight = InFlight::start(&self);
        let sent = Instant::now();
        if batch.len() == 1 {
            let (queued, mut reply) = batch.pop().expect("a batch of one");
            let command = queued.check.command(&self.prefix);
            tokio::select! {
                biased;
                (result, took) = self.backend.run_timed(&command, sent) => {
                    self.linger.observe(took);
                    let _ = reply.send(result);
                }
                // Its caller gave up: dropping the call counts it as missed, as before.
                () = reply.closed() => return,
            }
            return answered().await;
        }
        let (queued, mut replies): (Vec<Queued>, Vec<Reply>) = batch.into_iter().unzip();
        let first = &queued[0];
        let checks = queued.iter().map(|q| &q.check);
        let command = batch_command(&self.prefix, first.script, checks);
        let (result, took) = tokio::select! {
            biased;
            timed = self.backend.run_timed::<Vec<Value>>(&command, sent) => timed,
            () = AllClosed(&mut replies) => return,
        };
        self.linger.observe(took);
        match result {
            Ok(values) => {
                let results = split(values, queued.len(), first.script.limits);
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(err) => {
                for reply in replies {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
        answered().await;
    }
}

/// Lets the callers just answered run before their call stops counting as in flight: their
/// next decisions then join the queue (and the next batch) instead of each going out alone
/// because nothing happened to be in flight at that instant.
async fn answered() {
    after_ready_tasks().await;
}

/// Lets the tasks ready now run before this one goes on: it wakes itself and waits once,
/// which puts it at the back of its worker's run queue. Unlike Tokio's `yield_now`, this does
/// not poll the runtime's I/O driver first: `yield_now` defers the task until the run queue
/// is empty and then polls the driver, an `epoll_wait` each time, which at a paced rate (a
/// decision alone, the queue empty) is two more syscalls per decision for nothing to gather.
async fn after_ready_tasks() {
    let mut waited = false;
    std::future::poll_fn(|cx| {
        if waited {
            return Poll::Ready(());
        }
        waited = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// `waiting` grouped by script and slot (in the order they came within each group), in groups
/// of at most `max`.
fn batches(mut waiting: Vec<(Queued, Reply)>, max: usize) -> Vec<Vec<(Queued, Reply)>> {
    waiting.sort_by_key(|(d, _)| (std::ptr::from_ref(d.script) as usize, d.slot));
    let mut batches: Vec<Vec<(Queued, Reply)>> = Vec::new();
    for item in waiting {
        match batches.last_mut() {
            Some(batch)
                if batch.len() < max
                    && std::ptr::eq(batch[0].0.script, item.0.script)
                    && batch[0].0.slot == item.0.slot =>
            {
                batch.push(item);
            }
            _ => batches.push(vec![item]),
        }
    }
    batches
}

/// The error of a decision whose call was dropped before it answered (its runtime shut down).
fn dropped() -> RedisError {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the batch carrying this decision was dropped",
    )
    .into()
}

/// Counts a call in flight until dropped; the last one answered releases a held batch.
struct InFlight<'a>(&'a Batcher);

impl<'a> InFlight<'a> {
    fn start(batcher: &'a Batcher) -> Self {
        batcher.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(batcher)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.linger.release();
        }
    }
}

/// Ready once every caller of a batch has given up on it.
struct AllClosed<'a>(&'a mut [Reply]);

impl Future for AllClosed<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut open = false;
        for reply in self.0.iter_mut() {
            open |= reply.poll_closed(cx).is_pending();
        }
        if open { Poll::Pending } else { Poll::Ready(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use crate::store::redis::script::script_for;
    use std::time::Duration;

    fn queued(script: &'static LuaScript, slot: u16, n: u64) -> (Queued, Reply) {
        let policy = crate::Policy::new("p", [Limit::gcra(1, Duration::from_secs(1)).unwrap()]);
        let check = CheckArgs {
            policy: policy.unwrap(),
            key: crate::Key::new("k"),
            cost: n,
            costs: None,
            clock: Default::default(),
            lease: None,
            always: false,
        };
        let queued = Queued {
            check,
            script,
            slot,
        };
        (queued, oneshot::channel().0)
    }

    fn tag(batch: &[(Queued, Reply)]) -> Vec<String> {
        batch
            .iter()
            .map(|(d, _)| d.check.cost.to_string())
            .collect()
    }

    #[test]
    fn batches_hold_one_script_and_slot_in_arrival_order_up_to_max() {
        let gcra = script_for(&[Limit::gcra(1, Duration::from_secs(1)).unwrap()]);
        let log = script_for(&[Limit::sliding_log(1, Duration::from_secs(1)).unwrap()]);
        let waiting = vec![
            queued(gcra, 7, 1),
            queued(log, 7, 2),
            queued(gcra, 9, 3),
            queued(gcra, 7, 4),
            queued(gcra, 7, 5),
            queued(log, 7, 6),
        ];
        let mut made: Vec<Vec<String>> = batches(waiting, 2).iter().map(|b| tag(b)).collect();
        made.sort();
        assert_eq!(made, [["1", "4"].as_slice(), &["2", "6"], &["3"], &["5"]]);
    }

    #[test]
    fn a_queue_counts_its_decisions() {
        let gcra = script_for(&[Limit::gcra(1, Duration::from_secs(1)).unwrap()]);
        let mut queue = Queue::default();
        assert_eq!(queue.push(queued(gcra, 0, 1)), 1);
        assert_eq!(queue.push(queued(gcra, 0, 2)), 2);
        assert_eq!(queue.push(queued(gcra, 0, 3)), 3);
    }

    #[test]
    fn the_queue_is_taken_once_at_a_time() {
        let mut queue = Queue::default();
        assert!(!queue.take_now(), "nothing waiting");
        let gcra = script_for(&[Limit::gcra(1, Duration::from_secs(1)).unwrap()]);
        queue.waiting.push(queued(gcra, 0, 1));
        assert!(queue.take_now());
        assert!(!queue.take_now(), "a task will take it already");
        queue.taken_soon = false;
        assert!(
            queue.take_now(),
            "whatever is in flight, a task takes it at once: a hold behind a reply is the \
             linger's, bounded (`linger.rs`)"
        );
    }
}

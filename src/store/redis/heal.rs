//! A connection that heals: every call on it is watched, and when its [`Health`] says so the
//! connection is replaced by a freshly dialled one, in the background, while calls go on.
//!
//! redis-rs reconnects only after I/O errors. A connection that went silent (a black hole: a
//! host powered off, a NAT entry flushed, a proxy that lost its upstream) never gives one: its
//! calls time out or are dropped by the layer, and redis-rs reconnects on neither. Nor does a
//! failed authentication, which redis-rs caches and returns to every call. Both are healed
//! here. A call that was dropped or lost is never sent again (it may have run): healing only
//! serves later calls.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redis::RedisResult;

use super::health::{Health, Outcome};

/// The longest a replacement may take to dial (a Cluster reads its slot map from a healthy
/// node; a frozen node makes it wait out the connection timeout).
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Makes connections of one deployment.
pub(super) trait Dial: Send + Sync + 'static {
    /// A connection, cheap to clone (clones share it).
    type Connection: Clone + Send + Sync + 'static;

    /// A new connection (it may connect on first use).
    fn dial(&self) -> impl Future<Output = RedisResult<Self::Connection>> + Send;
}

/// The current connection of a deployment and the health of the calls made on it.
pub(super) struct Healing<D: Dial> {
    dialer: D,
    /// What a log line may show of the deployment (no credentials).
    target: String,
    /// The connection and its generation (bumped by each replacement), once dialled.
    current: RwLock<Option<(u64, D::Connection)>>,
    /// The generation of `current`: outcomes of calls on older connections are ignored.
    generation: AtomicU64,
    /// Serialises the first dial, so concurrent first calls share it.
    first: tokio::sync::Mutex<()>,
    health: Health,
    healing: AtomicBool,
}

impl<D: Dial> Healing<D> {
    /// A deployment dialled by `dialer` on first use, its calls' health kept in `buckets`
    /// buckets; `target` names it in logs.
    pub(super) fn new(dialer: D, target: String, buckets: usize) -> Self {
        Healing {
            dialer,
            target,
            current: RwLock::new(None),
            generation: AtomicU64::new(0),
            first: tokio::sync::Mutex::new(()),
            health: Health::new(buckets),
            healing: AtomicBool::new(false),
        }
    }

    pub(super) fn dialer(&self) -> &D {
        &self.dialer
    }

    /// The current connection, if one was dialled.
    pub(super) fn current(&self) -> Option<D::Connection> {
        self.read().map(|(_, connection)| connection)
    }

    /// The current connection and its generation, dialled now if there is none yet.
    pub(super) async fn connection(&self) -> RedisResult<(u64, D::Connection)> {
        if let Some(current) = self.read() {
            return Ok(current);
        }
        let _first = self.first.lock().await;
        if let Some(current) = self.read() {
            return Ok(current);
        }
        let connection = self.dialer.dial().await?;
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let generation = self.generation.load(Ordering::Acquire);
        *current = Some((generation, connection.clone()));
        Ok((generation, connection))
    }

    /// Runs one call on the current connection, watching how it ends (or that it never does).
    pub(super) async fn call<T, F, Fut>(self: &Arc<Self>, bucket: usize, call: F) -> RedisResult<T>
    where
        F: FnOnce(D::Connection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (generation, connection) = self.connection().await?;
        let watch = Watch {
            healing: self,
            generation,
            bucket,
            started: self.health.now(),
            finished: false,
        };
        let result = call(connection).await;
        watch.finish(Outcome::of(&result), self.health.now());
        result
    }

    /// [`call`](Self::call), for a caller that read the clock as it made the call (`started`)
    /// and reads it again when it ends: that instant is returned with the result (one clock
    /// read for both). An `async` block, as `Batcher::run` is, for its size.
    #[allow(clippy::manual_async_fn)] // an `async fn` keeps its arguments twice
    pub(super) fn call_from<T, F, Fut>(
        self: &Arc<Self>,
        bucket: usize,
        started: Instant,
        call: F,
    ) -> impl Future<Output = (RedisResult<T>, Instant)>
    where
        F: FnOnce(D::Connection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        async move {
            let (generation, connection) = match self.connection().await {
                Ok(current) => current,
                Err(err) => return (Err(err), Instant::now()),
            };
            let watch = Watch {
                healing: self,
                generation,
                bucket,
                started: self.health.micros(started),
                finished: false,
            };
            let result = call(connection).await;
            let ended = Instant::now();
            watch.finish(Outcome::of(&result), self.health.micros(ended));
            (result, ended)
        }
    }

    /// Puts `connection` in place of the current one (the Sentinels named another master).
    pub(super) fn install(&self, connection: D::Connection) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        *current = Some((generation, connection));
        self.health.replaced();
    }

    fn read(&self) -> Option<(u64, D::Connection)> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn record(
        self: &Arc<Self>,
        generation: u64,
        bucket: usize,
        started: u64,
        outcome: Outcome,
        now: u64,
    ) {
        if generation != self.generation.load(Ordering::Acquire) {
            return;
        }
        if self.health.record(bucket, started, outcome, now) {
            self.heal(generation, outcome);
        }
    }

    /// Replaces the current connection in the background: a connection of its own reached
    /// the server while calls on this one went unanswered, so this one is the silent part.
    pub(super) fn renew(self: &Arc<Self>) {
        if self.read().is_some() {
            self.heal(self.generation.load(Ordering::Acquire), Outcome::Missed);
        }
    }

    /// Dials a new connection in the background and puts it in place of generation
    /// `generation`, unless another replacement is under way or already happened.
    fn heal(self: &Arc<Self>, generation: u64, why: Outcome) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.healing.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        runtime.spawn(async move {
            let _done = Clear(&this.healing);
            match tokio::time::timeout(DIAL_TIMEOUT, this.dialer.dial()).await {
                Ok(Ok(connection)) => this.replace(generation, connection, why),
                Ok(Err(err)) => tracing::debug!(
                    redis = %this.target,
                    error = err.category(),
                    "replacing the redis connection failed; the next attempt follows the next failed call"
                ),
                Err(_) => tracing::debug!(
                    redis = %this.target,
                    "replacing the redis connection timed out"
                ),
            }
        });
    }

    fn replace(&self, generation: u64, connection: D::Connection, why: Outcome) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        self.generation.store(generation + 1, Ordering::Release);
        *current = Some((generation + 1, connection));
        drop(current);
        let streak = self.health.replaced();
        if streak == 1 {
            tracing::warn!(redis = %self.target, reason = why.reason(), "redis connection replaced");
        } else {
            tracing::debug!(redis = %self.target, reason = why.reason(), streak, "redis connection replaced again");
        }
    }
}

/// Watches one call: records its outcome when it finishes, or a miss if it is dropped first
/// (the layer gave up on it).
struct Watch<'a, D: Dial> {
    healing: &'a Arc<Healing<D>>,
    generation: u64,
    bucket: usize,
    started: u64,
    finished: bool,
}

impl<D: Dial> Watch<'_, D> {
    fn finish(mut self, outcome: Outcome, now: u64) {
        self.finished = true;
        self.healing
            .record(self.generation, self.bucket, self.started, outcome, now);
    }
}

impl<D: Dial> Drop for Watch<'_, D> {
    fn drop(&mut self) {
        if !self.finished {
            let now = self.healing.health.now();
            self.healing.record(
                self.generation,
                self.bucket,
                self.started,
                Outcome::Missed,
                now,
            );
        }
    }
}

/// Clears a flag when dropped (also if the task is cancelled).
struct Clear<'a>(&'a AtomicBool);

impl Drop for Clear<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

//! The engine's front door: [`Settings`] and the one constructor of what a front's engines
//! share ([`Shared::new`]). A front never builds the breakers, the call budget or the local
//! fallback's store itself.

use std::sync::Arc;
use std::time::Duration;

use super::breakers::Breakers;
use super::deny_cache::DEFAULT_DENY_CACHE;
use super::in_flight::{DEFAULT_MAX_STORE_CALLS, InFlight};
use super::throttle::Throttle;
use crate::failure::CircuitBreaker;
use crate::store::{MemoryStore, Store};

/// What a late, silent or overloaded store means to a front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Late {
    /// Load, not failure: decided in memory at this instance's share whatever the failure
    /// mode (the layer: a flood must never buy an unlimited window, nor a 503). Every
    /// admission of the store is mirrored into the local fallback.
    InMemory,
    /// A failure like any other: the rule's failure mode answers (the RLS, whose callers
    /// have their own answer to a late service, and the limiter). Admissions are mirrored
    /// only under a local failure mode, the one that decides in memory.
    ByMode,
}

/// An engine's settings, fixed when its [`Shared`] is made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// How long a decision may wait for the store.
    pub(crate) deadline: Duration,
    pub(crate) breaker: CircuitBreaker,
    /// Entries of each generation's deny cache (0: off).
    pub(crate) deny_cache: usize,
    /// The most store calls in flight (`None`: no bound, and nothing counted).
    pub(crate) max_calls: Option<usize>,
    pub(crate) late: Late,
}

impl Settings {
    /// The defaults with `deadline`: the default breaker and deny cache, at most
    /// [`DEFAULT_MAX_STORE_CALLS`] calls in flight, lateness decided in memory.
    pub(crate) fn new(deadline: Duration) -> Self {
        Settings {
            deadline,
            breaker: CircuitBreaker::new(),
            deny_cache: DEFAULT_DENY_CACHE,
            max_calls: Some(DEFAULT_MAX_STORE_CALLS),
            late: Late::InMemory,
        }
    }
}

/// What an engine shares with the engines of its front's later generations (a reload keeps
/// the breakers' counts, the calls in flight and the local fallback's state).
#[derive(Clone)]
pub(crate) struct Shared {
    pub(super) store: Arc<dyn Store>,
    pub(super) deadline: Duration,
    pub(super) breakers: Arc<Breakers>,
    /// The bound on store calls in flight (none: nothing counted).
    pub(super) in_flight: Option<Arc<InFlight>>,
    pub(super) throttle: Arc<Throttle>,
    /// The in-memory store of the local fallback and of the overflow past `in_flight`.
    pub(super) local_store: MemoryStore,
    pub(super) deny_cache: usize,
    pub(super) late: Late,
}

impl Shared {
    /// The shared parts of engines over `store`, by `settings`.
    pub(crate) fn new(store: Arc<dyn Store>, settings: Settings) -> Self {
        Shared {
            breakers: Arc::new(Breakers::new(settings.breaker, store.kind())),
            in_flight: settings.max_calls.map(|max| Arc::new(InFlight::new(max))),
            store,
            deadline: settings.deadline,
            throttle: Arc::default(),
            local_store: MemoryStore::new(),
            deny_cache: settings.deny_cache,
            late: settings.late,
        }
    }

    #[cfg(feature = "rls")]
    /// The same settings over another store (the RLS's per-second store): breakers and calls
    /// in flight of its own, the local fallback's memory and the log throttle shared (a
    /// counter's key names its limit: the two never meet in memory).
    pub(crate) fn beside(&self, store: Arc<dyn Store>, breaker: CircuitBreaker) -> Self {
        Shared {
            breakers: Arc::new(Breakers::new(breaker, store.kind())),
            in_flight: (self.in_flight.as_ref()).map(|b| Arc::new(InFlight::new(b.max()))),
            store,
            ..self.clone()
        }
    }

    /// The local fallback decides in `store` (a limiter's own, which others may share).
    pub(crate) fn with_local_store(mut self, store: MemoryStore) -> Self {
        self.local_store = store;
        self
    }

    #[cfg(feature = "rls")]
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// A builder's setting after the fact: the deadline (at least 1 ms).
    pub(crate) fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline.max(Duration::from_millis(1));
    }

    /// A builder's setting after the fact: new breakers (clones made before keep theirs).
    pub(crate) fn set_breaker(&mut self, breaker: CircuitBreaker) {
        self.breakers = Arc::new(Breakers::new(breaker, self.store.kind()));
    }

    /// A builder's setting after the fact: a new bound on store calls in flight.
    pub(crate) fn set_max_calls(&mut self, max: usize) {
        self.in_flight = Some(Arc::new(InFlight::new(max)));
    }

    /// A builder's setting after the fact: the deny cache's entries per generation.
    pub(crate) fn set_deny_cache(&mut self, capacity: usize) {
        self.deny_cache = capacity;
    }
}

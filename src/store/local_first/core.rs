//! The part of a local-first store that does no I/O: its entries, its clock, its decisions,
//! and both ends of a sync (what to send, and how to take the answer). The background task
//! (`task.rs`) and the simulation (`benches/local_first_sim.rs`) drive the same code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::entry::{Context, Entry, FleetReply};
use super::settings::Settings;
use crate::decision::{Decision, DecisionSource};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Clock;

const SHARDS: usize = 32;

/// One key's part of a sync: who counted, how much in all, and the limits to answer for.
#[derive(Debug, Clone)]
pub(crate) struct SyncItem {
    pub(crate) policy: Arc<str>,
    pub(crate) key: Key,
    /// The Redis hash field of this instance's entry: `INSTANCE.GENERATION`.
    pub(crate) field: String,
    pub(crate) generation: u64,
    /// When the first unit not acknowledged was counted (Redis time, µs).
    pub(crate) since: u64,
    pub(crate) counted: u64,
    pub(crate) acked: u64,
    pub(crate) offered: u64,
    pub(crate) limits: Arc<[crate::Limit]>,
}

#[derive(Default)]
struct Shard {
    map: HashMap<Arc<str>, HashMap<Key, Entry>>,
    touched: Vec<(Arc<str>, Key)>,
    rng: u64,
}

/// Entries, clock and sync bookkeeping of one local-first store.
pub(crate) struct Core {
    shards: Box<[Mutex<Shard>]>,
    clock: Box<dyn Clock>,
    /// Redis time minus the local clock, µs, from the last sync.
    offset: AtomicI64,
    pub(crate) settings: Settings,
    pub(crate) instance: String,
    generations: AtomicU64,
    /// Local time of the first failed sync since the last success; 0 when syncs succeed.
    failing_since: AtomicU64,
    instances: AtomicU32,
    rounds: AtomicU64,
    pub(crate) wake: tokio::sync::Notify,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn new(
        settings: Settings,
        clock: Box<dyn Clock>,
        instance: String,
        seed: u64,
    ) -> Self {
        let instances = settings.instances.max(1);
        Core {
            shards: (0..SHARDS as u64)
                .map(|i| {
                    Mutex::new(Shard {
                        rng: (seed ^ (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
                        ..Shard::default()
                    })
                })
                .collect(),
            clock,
            offset: AtomicI64::new(0),
            settings,
            instance,
            generations: AtomicU64::new(0),
            failing_since: AtomicU64::new(0),
            instances: AtomicU32::new(instances),
            rounds: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// This instance's estimate of Redis time (µs): its clock, offset by the last sync.
    pub(crate) fn now(&self) -> u64 {
        let local = self.clock.now_us() as i64;
        local
            .saturating_add(self.offset.load(Ordering::Relaxed))
            .max(0) as u64
    }

    /// The local clock (µs), which only measures elapsed time.
    pub(crate) fn local_now(&self) -> u64 {
        self.clock.now_us()
    }

    fn shard(&self, policy: &str, key: &Key) -> MutexGuard<'_, Shard> {
        use std::hash::{BuildHasher, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(7).build_hasher();
        h.write(policy.as_bytes());
        h.write(key.as_str().as_bytes());
        let i = (h.finish() >> 40) as usize % SHARDS;
        self.shards[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides in memory. The policy must have no sliding log (the store sends those to Redis).
    pub(crate) fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Decision {
        let now = self.now();
        let limits = policy.limits_arc();
        let mut shard = self.shard(policy.name(), key);
        let shard = &mut *shard;
        shard.rng ^= shard.rng << 13;
        shard.rng ^= shard.rng >> 7;
        shard.rng ^= shard.rng << 17;
        let ctx = Context {
            isolated: self.is_isolated(),
            instances: self.instances.load(Ordering::Relaxed),
            low: self.settings.low,
            high: self.settings.high,
            draw: (shard.rng >> 11) as f64 / (1u64 << 53) as f64,
        };
        let by_key = match shard.map.get_mut(policy.name()) {
            Some(by_key) => by_key,
            None => shard.map.entry(policy.name_arc()).or_default(),
        };
        let entry = match by_key.get_mut(key) {
            Some(entry) => entry,
            None => {
                let generation = self.generations.fetch_add(1, Ordering::Relaxed);
                by_key
                    .entry(key.clone())
                    .or_insert_with(|| Entry::new(Arc::clone(&limits), generation))
            }
        };
        entry.adopt(&limits);
        let (states, _) = entry.decide(cost, now, &ctx);
        if !entry.touched {
            entry.touched = true;
            shard.touched.push((policy.name_arc(), key.clone()));
        }
        let min_count = policy.limits().iter().map(|l| l.count()).min().unwrap_or(1);
        let early = (min_count as f64 * self.settings.early_share)
            .ceil()
            .max(1.0) as u64;
        if !entry.early && entry.unsent() >= early {
            entry.early = true;
            self.wake.notify_one();
        }
        Decision::from_states(policy.name_arc(), now, states)
            .with_source(DecisionSource::LocalFirst)
    }

    /// What to send: every key touched since the last sync (and those whose sync failed).
    pub(crate) fn begin_sync(&self) -> Vec<SyncItem> {
        let now = self.now();
        let warm = self.settings.warm_us();
        let mut items = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let shard = &mut *shard;
            let mut warm_keys = Vec::new();
            for (policy, key) in std::mem::take(&mut shard.touched) {
                let Some(entry) = shard.map.get_mut(&policy).and_then(|m| m.get_mut(&key)) else {
                    continue;
                };
                entry.early = false;
                entry.sent = entry.counted;
                let since = entry.since_unacked.unwrap_or(now).min(now);
                entry.since_sent = None;
                // A key used lately stays in the syncs for a while, so its view stays fresh
                // for its next request.
                if entry.last_used.saturating_add(warm) > now {
                    warm_keys.push((Arc::clone(&policy), key.clone()));
                } else {
                    entry.touched = false;
                }
                items.push(SyncItem {
                    since,
                    field: format!("{}.{}", self.instance, entry.generation),
                    generation: entry.generation,
                    counted: entry.counted,
                    acked: entry.acked,
                    offered: entry.offered,
                    limits: Arc::clone(&entry.limits),
                    policy,
                    key,
                });
            }
            shard.touched = warm_keys;
        }
        items
    }

    /// Takes the fleet's answers to `items`, sent at local time `sent_at` and answered at
    /// `received_at`, Redis having read `redis_now` in between; or, on failure, keeps them for
    /// the next sync and decides alone until one succeeds.
    pub(crate) fn finish_sync(
        &self,
        items: Vec<SyncItem>,
        outcome: Result<(u64, Vec<FleetReply>), ()>,
        sent_at: u64,
        received_at: u64,
    ) {
        let replies = match outcome {
            Ok((redis_now, replies)) if replies.len() == items.len() => {
                let midpoint = sent_at / 2 + received_at / 2;
                self.offset
                    .store(redis_now as i64 - midpoint as i64, Ordering::Relaxed);
                self.failing_since.store(0, Ordering::Relaxed);
                Some((redis_now, replies))
            }
            _ => {
                let _ = self.failing_since.compare_exchange(
                    0,
                    sent_at.max(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                None
            }
        };
        let now = self.now();
        let interval = self.settings.interval_us();
        let lag = (interval as f64 * self.settings.lag) as u64;
        let mut replies = replies.map(|(at, r)| (at, r.into_iter()));
        for item in items {
            let mut shard = self.shard(&item.policy, &item.key);
            let shard = &mut *shard;
            let Some(entry) = shard
                .map
                .get_mut(&item.policy)
                .and_then(|m| m.get_mut(&item.key))
                .filter(|e| e.generation == item.generation)
            else {
                continue;
            };
            match replies.as_mut().and_then(|(at, r)| Some((*at, r.next()?))) {
                Some((at, reply)) => entry.apply(
                    item.counted,
                    item.offered,
                    &reply,
                    at,
                    now,
                    lag,
                    2 * interval,
                    self.settings.smoothing,
                    self.instances(),
                ),
                None if !entry.touched => {
                    entry.touched = true;
                    shard.touched.push((item.policy, item.key));
                }
                None => {}
            }
        }
        self.rounds.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops entries idle for `idle_us` whose counts Redis acknowledged.
    pub(crate) fn sweep(&self, idle_us: u64) {
        let now = self.now();
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            for by_key in shard.map.values_mut() {
                by_key.retain(|_, e| e.touched || !e.settled() || e.last_used + idle_us > now);
            }
            shard.map.retain(|_, by_key| !by_key.is_empty());
        }
    }

    pub(crate) fn set_instances(&self, instances: u32) {
        self.instances.store(instances.max(1), Ordering::Relaxed);
    }

    pub(crate) fn instances(&self) -> u32 {
        self.instances.load(Ordering::Relaxed)
    }

    /// Whether syncs have failed for longer than the grace (three intervals): a sync that
    /// fails once, or a slow one, is covered by the next, and the units counted meanwhile
    /// reach the fleet with it.
    pub(crate) fn is_isolated(&self) -> bool {
        let since = self.failing_since.load(Ordering::Relaxed);
        since != 0 && self.clock.now_us().saturating_sub(since) >= 3 * self.settings.interval_us()
    }

    pub(crate) fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// How many keys hold state.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(PoisonError::into_inner);
                s.map.values().map(HashMap::len).sum::<usize>()
            })
            .sum()
    }
}

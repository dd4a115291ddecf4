//! The part of a local-first store that does no I/O: its entries, its clock, its decisions,
//! and both ends of a sync (what to send, and how to take the answer). The background task
//! (`task.rs`) and the simulation (`benches/local_first_sim.rs`) drive the same code.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use super::entry::{Context, Entry, FleetReply, Mode, Route, Sent, SwitchRule};
use super::settings::Settings;
use crate::decision::{Decision, DecisionSource};
use crate::key::Key;
use crate::limit::Limit;
use crate::policy::Policy;
use crate::store::Clock;
use crate::store::shard::ShardedMap;

mod counters;
mod keys;

pub(crate) use counters::counter_keys;

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
    /// What Redis takes as already counted if it has no record of this entry: the units it
    /// acknowledged, and those counted alone since (a Redis that forgot the key, restarted or
    /// after a cut of over a minute, resumes from its state without them).
    pub(crate) acked: u64,
    /// The units this entry counted alone (syncs failing), ever.
    pub(crate) alone: u64,
    pub(crate) offered: u64,
    pub(crate) limits: Arc<[crate::Limit]>,
}

/// What each shard keeps beside its entries, under the same lock.
struct Side {
    /// The keys to sync, each with its entry's generation: the entry of a key evicted and made
    /// again is synced once, as itself.
    touched: Vec<(Arc<str>, Key, u64)>,
    /// A xorshift state for admission draws.
    rng: u64,
}

/// Entries, clock and sync bookkeeping of one local-first store.
pub(crate) struct Core {
    entries: ShardedMap<Entry, Side>,
    clock: Box<dyn Clock>,
    /// Redis time minus the local clock, µs, from the last sync.
    offset: AtomicI64,
    pub(crate) settings: Settings,
    pub(crate) instance: String,
    generations: AtomicU64,
    /// Local time of the first failed sync since the last success; 0 when syncs succeed.
    failing_since: AtomicU64,
    /// Local time the last failed sync was taken, and the last heartbeat Redis answered: an
    /// answer after the failure, with nothing to sync, ends the isolation.
    failed_at: AtomicU64,
    heard_at: AtomicU64,
    /// Local time of the last sync: a call that succeeded, or a round with nothing to send.
    synced_at: AtomicU64,
    instances: AtomicU32,
    rounds: AtomicU64,
    /// The Redis store's resets version whose resets were last taken ([`Core::rejoin`]).
    resets_seen: AtomicU64,
    pub(crate) wake: tokio::sync::Notify,
    /// A refund waits for this instance's units to reach Redis: sync now, not at the interval.
    pub(crate) urgent: tokio::sync::Notify,
    /// Every waiter is woken when a round of syncs has been answered (or has failed).
    pub(crate) synced: tokio::sync::Notify,
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
        let created = clock.now_us();
        Core {
            entries: ShardedMap::new(settings.max_keys, seed, |i| Side {
                touched: Vec::new(),
                rng: (seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
            }),
            clock,
            offset: AtomicI64::new(0),
            settings,
            instance,
            generations: AtomicU64::new(0),
            failing_since: AtomicU64::new(0),
            failed_at: AtomicU64::new(0),
            heard_at: AtomicU64::new(0),
            synced_at: AtomicU64::new(created),
            instances: AtomicU32::new(instances),
            rounds: AtomicU64::new(0),
            resets_seen: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
            urgent: tokio::sync::Notify::new(),
            synced: tokio::sync::Notify::new(),
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

    /// Decides in memory if the key is hot on this instance; `None`: decide it exactly (the
    /// caller asks Redis). The policy must have no sliding log (the store sends those to
    /// Redis).
    pub(crate) fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Option<Decision> {
        let now = self.now();
        let limits = policy.limits_arc();
        let isolated = self.is_isolated();
        let rule = self.rule(&limits, isolated);
        let early = self.early(&limits);
        let place = self.entries.lookup_key(policy.name(), key);
        let mut shard = self.entries.shard(place.hash);
        let shard = &mut *shard;
        let ctx = self.context(&mut shard.side.rng, isolated);
        let ((states, newly_touched, wake), _) = shard.with_entry(
            place,
            now,
            || self.entry(Arc::clone(&limits)),
            || (policy.name_arc(), key.clone()),
            |entry| {
                entry.adopt(&limits);
                if let Route::Exact { join } = entry.route(cost, now, &rule) {
                    // A key turning hot syncs at once: its first sync brings the view.
                    let newly_touched = join && !std::mem::replace(&mut entry.touched, true);
                    return (None, newly_touched.then_some(entry.generation), join);
                }
                let (states, _) = entry.decide(cost, now, &ctx);
                let newly_touched = !std::mem::replace(&mut entry.touched, true);
                let wake = !entry.early && entry.unsent() >= early;
                entry.early |= wake;
                (
                    Some(states),
                    newly_touched.then_some(entry.generation),
                    wake,
                )
            },
        );
        if let Some(generation) = newly_touched {
            shard
                .side
                .touched
                .push((policy.name_arc(), key.clone(), generation));
        }
        if wake {
            self.wake.notify_one();
        }
        let states = states?;
        Some(
            Decision::from_states(policy.name_arc(), now, states)
                .with_source(DecisionSource::LocalFirst),
        )
    }

    /// The switching rule for a key of `limits`.
    fn rule(&self, limits: &[Limit], isolated: bool) -> SwitchRule {
        let interval = self.settings.interval_us();
        let local_after = u64::from(self.settings.local_after);
        SwitchRule {
            local_after,
            fits: limits.iter().all(|l| {
                u128::from(l.count()) * u128::from(interval)
                    >= u128::from(local_after) * u128::from(l.period_us())
            }),
            failing: self.is_failing(),
            isolated,
        }
    }

    /// The unsent units of a key of `limits` that ask for an early sync.
    fn early(&self, limits: &[Limit]) -> u64 {
        let min_count = limits.iter().map(|l| l.count()).min().unwrap_or(1);
        (min_count as f64 * self.settings.early_share)
            .ceil()
            .max(1.0) as u64
    }

    /// A decision's context, its draw taken from a shard's generator `rng`.
    fn context(&self, rng: &mut u64, isolated: bool) -> Context {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        Context {
            isolated,
            instances: self.instances.load(Ordering::Relaxed),
            low: self.settings.low,
            high: self.settings.high,
            draw: (*rng >> 11) as f64 / (1u64 << 53) as f64,
        }
    }

    /// A fresh entry of `limits`, of the next generation.
    fn entry(&self, limits: Arc<[Limit]>) -> Entry {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        Entry::new(limits, generation, self.settings.interval_us())
    }

    /// What to send: every key touched since the last sync (and those whose sync failed).
    pub(crate) fn begin_sync(&self) -> Vec<SyncItem> {
        let now = self.now();
        let warm = self.settings.warm_us();
        let cool = 3 * self.settings.interval_us();
        let failing = self.is_failing();
        let mut items = Vec::new();
        for mut shard in self.entries.shards() {
            let mut warm_keys = Vec::new();
            for (policy, key, generation) in std::mem::take(&mut shard.side.touched) {
                let place = self.entries.lookup_key(&policy, &key);
                let Some(entry) = shard.get_mut(place).filter(|e| e.generation == generation)
                else {
                    continue;
                };
                // A hot key that went quiet for a few intervals with all it counted
                // acknowledged is decided exactly again; one decided exactly needs no sync.
                // While syncs fail it stays hot, out of the syncs (it owes nothing): decided
                // exactly it would fail, and the layer's fallback would decide it on a budget
                // of its own beside this instance's share.
                let quiet = entry.mode == Mode::Local
                    && entry.settled()
                    && entry.last_used.saturating_add(cool) <= now;
                if quiet && failing {
                    entry.touched = false;
                    continue;
                }
                if quiet {
                    entry.demote();
                }
                if entry.mode == Mode::Exact {
                    entry.touched = false;
                    continue;
                }
                entry.early = false;
                entry.sent = entry.counted;
                let since = entry.since_unacked.unwrap_or(now).min(now);
                entry.since_sent = None;
                // A key used lately stays in the syncs for a while, so its view stays fresh
                // for its next request.
                if entry.last_used.saturating_add(warm) > now {
                    warm_keys.push((Arc::clone(&policy), key.clone(), generation));
                } else {
                    entry.touched = false;
                }
                items.push(SyncItem {
                    since,
                    field: format!("{}.{}", self.instance, entry.generation),
                    generation: entry.generation,
                    counted: entry.counted,
                    acked: entry.acked + entry.alone.saturating_sub(entry.alone_acked),
                    alone: entry.alone,
                    offered: entry.offered,
                    limits: Arc::clone(&entry.limits),
                    policy,
                    key,
                });
            }
            shard.side.touched = warm_keys;
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
                self.synced_at.fetch_max(received_at, Ordering::Relaxed);
                Some((redis_now, replies))
            }
            _ => {
                self.failed(sent_at, received_at);
                None
            }
        };
        let now = self.now();
        let interval = self.settings.interval_us();
        let lag = (interval as f64 * self.settings.lag) as u64;
        let mut replies = replies.map(|(at, r)| (at, r.into_iter()));
        for item in items {
            let place = self.entries.lookup_key(&item.policy, &item.key);
            let mut shard = self.entries.shard(place.hash);
            let Some(entry) = shard
                .get_mut(place)
                .filter(|e| e.generation == item.generation)
            else {
                continue;
            };
            let retouch = match replies.as_mut().and_then(|(at, r)| Some((*at, r.next()?))) {
                Some((at, reply)) => {
                    entry.alone_acked = entry.alone_acked.max(item.alone);
                    let sent = Sent {
                        counted: item.counted,
                        offered: item.offered,
                        at: sent_at,
                    };
                    entry.apply(
                        sent,
                        &reply,
                        at,
                        now,
                        lag,
                        2 * interval,
                        self.settings.smoothing,
                        self.instances(),
                    );
                    false
                }
                None => !std::mem::replace(&mut entry.touched, true),
            };
            if retouch {
                let generation = item.generation;
                shard.side.touched.push((item.policy, item.key, generation));
            }
        }
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.synced.notify_waiters();
    }

    /// Drops the entries that are moot: idle, out of the syncs, their counts acknowledged.
    /// Requests sweep a few entries each; this reaches the keys no request comes near.
    pub(crate) fn sweep(&self) {
        let now = self.now();
        for mut shard in self.entries.shards() {
            shard.retain_live(now);
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

    /// Whether the last sync failed (isolated or not yet): no hot key turns exact until one
    /// succeeds (or Redis answers a heartbeat with nothing to sync), since an exact decision
    /// would fail.
    pub(crate) fn is_failing(&self) -> bool {
        self.failing_since.load(Ordering::Relaxed) != 0
    }

    /// A sync round found nothing to send: the fleet is owed nothing, the view is current.
    /// If Redis answered a heartbeat since the last failed sync, the store is no longer
    /// isolated: no key waits for a sync that would say so (the one that failed was settled
    /// and has cooled), and a key that turns hot again takes the fleet's state first.
    pub(crate) fn nothing_to_sync(&self) {
        self.synced_at
            .fetch_max(self.clock.now_us(), Ordering::Relaxed);
        if self.heard_at.load(Ordering::Relaxed) > self.failed_at.load(Ordering::Relaxed) {
            self.failing_since.store(0, Ordering::Relaxed);
        }
    }

    /// A call to Redis sent at local time `sent_at` failed (seen at `received_at`): a sync,
    /// or a heartbeat (so an instance with nothing to sync, every key cold, also becomes
    /// isolated and decides its keys on its share rather than through a Redis that is gone).
    pub(crate) fn failed(&self, sent_at: u64, received_at: u64) {
        let _ = self.failing_since.compare_exchange(
            0,
            sent_at.max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        self.failed_at.fetch_max(received_at, Ordering::Relaxed);
    }

    /// Redis answered a heartbeat sent at local time `asked_at`: it was reachable then. The
    /// time it was sent, not answered: a reply taken late (a busy runtime) to a heartbeat sent
    /// before a sync failed says nothing about Redis since, and must not end the isolation.
    pub(crate) fn heard(&self, asked_at: u64) {
        self.heard_at.fetch_max(asked_at, Ordering::Relaxed);
    }

    /// How long ago this instance last synced (a call that succeeded, or a round with nothing
    /// to send).
    pub(crate) fn sync_age(&self) -> std::time::Duration {
        let at = self.synced_at.load(Ordering::Relaxed);
        std::time::Duration::from_micros(self.clock.now_us().saturating_sub(at))
    }

    pub(crate) fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// How many keys hold state.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

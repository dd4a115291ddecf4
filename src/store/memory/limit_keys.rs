//! Checks of keys with limit keys ([`Key::with_limit_key`]): each limit's state is its own
//! entry, under the key it counts under, so a tenant's limit is one entry whichever client
//! counts against it. Every shard involved is locked (in index order, so checks never wait on
//! each other in a cycle), every limit evaluated, and all committed or none.

use smallvec::SmallVec;

use super::MemoryStore;
use super::entry::{Entry, with_entry};
use super::penalty;
use crate::decision::{LimitState, LimitStates};
use crate::key::Key;
use crate::lease::Lease;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;
use crate::store::shard::{Locked, Lookup};

/// Where the memory store files the state of a limit key that names its state
/// ([`Key::with_named_limit_keys`]): one space per algorithm, each a name no policy can have.
fn named_space(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => "#named:fw",
        Algorithm::SlidingWindow => "#named:sw",
        Algorithm::SlidingLog => "#named:sl",
        Algorithm::TokenBucket => "#named:tb",
        Algorithm::Gcra => "#named:gc",
        Algorithm::Concurrency => "#named:cc",
        Algorithm::Calendar => "#named:cw",
    }
}

/// The shards a check of several parts locked.
type Shards<'a> = Locked<'a, Entry, ()>;

/// Some limits of a policy, counted under one key: one limit, or all of its sliding logs
/// (which share one log, under the first one's key).
struct Part<'a> {
    positions: SmallVec<[usize; 4]>,
    policy: &'a Policy,
    key: &'a Key,
    at: Lookup<'a>,
}

/// What to do with each part's entry once every shard is locked.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    Peek,
    /// Charge, whatever the state (`Entry::charge`).
    Charge,
    /// Charge each limit its own cost, committing those that fit (`Entry::always`).
    Always,
    /// Commit, holding this lease in the part of the concurrency limit, if any.
    Commit(Option<u128>),
}

impl MemoryStore {
    /// [`check_now`](Self::check_now) of a key with limit keys: the states, and whether the
    /// key is (now) in the policy's penalty box. The box is an entry of its own, under the key
    /// without its limit keys (it holds the client, not its tenant).
    pub(super) fn check_parts(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        now: u64,
        lease: Option<Lease>,
    ) -> (LimitStates, bool) {
        let parts = self.parts(policy, key);
        let penalty = policy.penalty_us();
        let entries = &self.inner.entries;
        let boxed = (penalty > 0).then(|| entries.lookup(policy.box_name(), key.as_str()));
        let mut shards = entries.lock(parts.iter().map(|p| p.at.hash).chain(boxed.map(|b| b.hash)));
        if let Some(boxed) = boxed {
            let left = self.in_box(&mut shards, policy, key, boxed, now, None);
            if left > 0 {
                return (penalty::blocked(policy, left), true);
            }
        }
        let (mut peeked, _) = self.each(&parts, &mut shards, Step::Peek, costs, now);
        if !peeked.iter().all(LimitState::is_allowed) {
            let Some(boxed) = boxed else {
                return (peeked, false);
            };
            // A cost no limit could ever admit is refused without boxing the key.
            if peeked.iter().any(LimitState::exceeds_capacity) {
                return (peeked, false);
            }
            let until = now.saturating_add(penalty);
            self.in_box(&mut shards, policy, key, boxed, now, Some(until));
            for state in peeked.iter_mut() {
                state.boxed(std::time::Duration::from_micros(penalty));
            }
            return (peeked, true);
        }
        let commit = Step::Commit(lease.map(|l| l.id()));
        let (committed, evicted) = self.each(&parts, &mut shards, commit, costs, now);
        drop(shards);
        self.count_evictions(evicted);
        (committed, false)
    }

    /// How long `key` has left in the penalty box; with `block`, boxes it until then first.
    fn in_box(
        &self,
        shards: &mut Shards<'_>,
        policy: &Policy,
        key: &Key,
        boxed: Lookup<'_>,
        now: u64,
        block: Option<u64>,
    ) -> u64 {
        let Some(shard) = shards.shard(boxed.hash) else {
            return 0;
        };
        let (left, _) = shard.with_entry(
            boxed,
            now,
            || Entry::new(policy),
            || (policy.box_name().into(), key.primary()),
            |entry| {
                if let Some(until) = block {
                    entry.blocked_until = until;
                    entry.expires_at = entry.expires_at.max(until);
                }
                entry.blocked_until.saturating_sub(now)
            },
        );
        left
    }

    /// [`release_now`](Self::release_now) of a key with limit keys: the lease, from the entry
    /// of the part holding the concurrency limit.
    pub(super) fn release_parts(&self, policy: &Policy, key: &Key, lease: u128) -> bool {
        let parts = self.parts(policy, key);
        let Some(part) = parts.iter().find(|p| p.policy.holds_leases()) else {
            return false;
        };
        let mut shards = self.inner.entries.lock(std::iter::once(part.at.hash));
        shards
            .shard(part.at.hash)
            .and_then(|shard| shard.get_mut(part.at))
            .is_some_and(|entry| entry.release(lease))
    }

    /// [`refund_now`](Self::refund_now) of a key with limit keys: every level's units given
    /// back, each as its algorithm says. Whether any was.
    pub(super) fn refund_parts(
        &self,
        policy: &Policy,
        key: &Key,
        (cost, at): (u64, u64),
        now: u64,
    ) -> bool {
        let parts = self.parts(policy, key);
        let mut shards = self.inner.entries.lock(parts.iter().map(|p| p.at.hash));
        let mut given = false;
        for part in &parts {
            let Some(shard) = shards.shard(part.at.hash) else {
                continue;
            };
            let policy = part.policy;
            let (gave, _) = with_entry(shard, part.at, policy, part.key, now, |entry| {
                entry.refund(policy, cost, at, now)
            });
            given |= gave;
        }
        given
    }

    /// [`charge_now`](Self::charge_now) of a key with limit keys: every level charged, each
    /// under the key it counts under.
    pub(super) fn charge_parts(
        &self,
        policy: &Policy,
        key: &Key,
        cost: u64,
        now: u64,
    ) -> LimitStates {
        let parts = self.parts(policy, key);
        let mut shards = self.inner.entries.lock(parts.iter().map(|p| p.at.hash));
        let (states, evicted) = self.each(&parts, &mut shards, Step::Charge, &[cost], now);
        drop(shards);
        self.count_evictions(evicted);
        states
    }

    /// [`check_costs_now`](Self::check_costs_now) under `Commit::Always` of a key with limit
    /// keys: each level charged its own cost, committed where it fits (no penalty box).
    pub(super) fn always_parts(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        now: u64,
    ) -> LimitStates {
        let parts = self.parts(policy, key);
        let mut shards = self.inner.entries.lock(parts.iter().map(|p| p.at.hash));
        let (states, evicted) = self.each(&parts, &mut shards, Step::Always, costs, now);
        drop(shards);
        self.count_evictions(evicted);
        states
    }

    /// [`inspect_now`](Self::inspect_now) of a key with limit keys.
    pub(super) fn peek_parts(&self, policy: &Policy, key: &Key, now: u64) -> LimitStates {
        let parts = self.parts(policy, key);
        let mut shards = self.inner.entries.lock(parts.iter().map(|p| p.at.hash));
        self.each(&parts, &mut shards, Step::Peek, &[1], now).0
    }

    /// [`reset_now`](Self::reset_now) of a key with limit keys: every limit's state, shared
    /// ones included.
    pub(super) fn reset_parts(&self, policy: &Policy, key: &Key) -> bool {
        let parts = self.parts(policy, key);
        let entries = &self.inner.entries;
        let boxed = entries.lookup(policy.box_name(), key.as_str());
        let mut shards = entries.lock(parts.iter().map(|p| p.at.hash).chain([boxed.hash]));
        let mut any = false;
        for at in parts.iter().map(|p| p.at).chain([boxed]) {
            if let Some(shard) = shards.shard(at.hash) {
                any |= shard.remove(at);
            }
        }
        any
    }

    /// The policy's limits as parts ([`Policy::parts`]), each under the key it counts under.
    fn parts<'a>(&self, policy: &'a Policy, key: &'a Key) -> SmallVec<[Part<'a>; 4]> {
        let limits = policy.limits();
        let is_log = |l: &Limit| l.algorithm() == Algorithm::SlidingLog;
        let mut singles = (0..limits.len()).filter(|&p| !is_log(&limits[p]));
        policy
            .parts()
            .iter()
            .map(|part| {
                let positions: SmallVec<[usize; 4]> = match singles.next() {
                    Some(position) => SmallVec::from_slice(&[position]),
                    None => (0..limits.len()).filter(|&p| is_log(&limits[p])).collect(),
                };
                let own = key.limit_key(positions.first().copied().unwrap_or(0));
                // A limit key that names its state alone: the entry is filed under the
                // algorithm's space (a name no policy can have), not the policy's part.
                let at = match part.limits().first() {
                    Some(limit) if key.names_limit_states() => self
                        .inner
                        .entries
                        .lookup(named_space(limit.algorithm()), own.as_str()),
                    _ => self.inner.entries.lookup(part.name(), own.as_str()),
                };
                Part {
                    positions,
                    policy: part,
                    key: own,
                    at,
                }
            })
            .collect()
    }

    /// Runs `step` on every part's entry, each with its cost among `costs` (one per limit, or
    /// one for all: a part of several sliding logs takes its first's, which they share);
    /// returns the states in the policy's order, and how many entries were evicted for room.
    fn each(
        &self,
        parts: &[Part<'_>],
        shards: &mut Shards<'_>,
        step: Step,
        costs: &[u64],
        now: u64,
    ) -> (LimitStates, u64) {
        let mut by_position: SmallVec<[Option<LimitState>; 4]> =
            SmallVec::from_elem(None, parts.iter().map(|p| p.positions.len()).sum());
        let mut evicted = 0;
        for part in parts {
            let policy = part.policy;
            let cost = crate::store::cost_at(costs, part.positions.first().copied().unwrap_or(0));
            // `lock` locked every part's shard.
            let Some(shard) = shards.shard(part.at.hash) else {
                continue;
            };
            let (states, lost) =
                with_entry(shard, part.at, policy, part.key, now, |entry| match step {
                    Step::Peek => entry.peek(policy, cost, now),
                    Step::Charge => entry.charge(policy, cost, now),
                    Step::Always => {
                        let mut states = LimitStates::new();
                        entry.always(policy, &[cost], now, &mut states);
                        states
                    }
                    Step::Commit(lease) => {
                        let states = entry.check(policy, cost, now);
                        if let Some(lease) = lease.filter(|_| policy.holds_leases()) {
                            entry.hold(lease, now);
                        }
                        states
                    }
                });
            evicted += u64::from(lost);
            for (&position, state) in part.positions.iter().zip(states) {
                if let Some(slot) = by_position.get_mut(position) {
                    *slot = Some(state);
                }
            }
        }
        (by_position.into_iter().flatten().collect(), evicted)
    }
}

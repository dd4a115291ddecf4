//! Checks of keys with limit keys ([`Key::with_limit_key`]): each limit's state is its own
//! entry, under the key it counts under, so a tenant's limit is one entry whichever client
//! counts against it. Every shard involved is locked (in index order, so checks never wait on
//! each other in a cycle), every limit evaluated, and all committed or none.

use std::hash::BuildHasher;
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};

use smallvec::SmallVec;

use super::entry::Entry;
use super::penalty;
use super::shard::{IdRef, Shard};
use super::{holds_leases, MemoryStore, SHARDS};
use crate::decision::{LimitState, LimitStates};
use crate::key::Key;
use crate::lease::Lease;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// Some limits of a policy, counted under one key: one limit, or all of its sliding logs
/// (which share one log, under the first one's key).
struct Part<'a> {
    positions: SmallVec<[usize; 4]>,
    policy: &'a Policy,
    key: &'a Key,
    hash: u64,
}

impl Part<'_> {
    fn id(&self) -> IdRef<'_> {
        IdRef {
            policy: self.policy.name(),
            key: self.key.as_str(),
        }
    }
}

/// What to do with each part's entry once every shard is locked.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    Peek,
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
        cost: u64,
        now: u64,
        lease: Option<Lease>,
    ) -> (LimitStates, bool) {
        let parts = self.parts(policy, key);
        let penalty = policy.penalty_us();
        let boxed = (penalty > 0).then(|| {
            let name = policy.box_name();
            let hash = self.inner.hasher.hash_one(IdRef {
                policy: name,
                key: key.as_str(),
            });
            (name, hash)
        });
        let mut shards = self.lock(
            parts
                .iter()
                .map(|p| p.hash)
                .chain(boxed.as_ref().map(|b| b.1)),
        );
        if let Some((name, hash)) = &boxed {
            let left = self.in_box(&mut shards, policy, key, (name, *hash), now, None);
            if left > 0 {
                return (penalty::blocked(policy, left), true);
            }
        }
        let (mut peeked, _) = self.each(&parts, &mut shards, Step::Peek, cost, now);
        if !peeked.iter().all(LimitState::is_allowed) {
            let Some((name, hash)) = &boxed else {
                return (peeked, false);
            };
            // A cost no limit could ever admit is refused without boxing the key.
            if peeked.iter().any(LimitState::exceeds_capacity) {
                return (peeked, false);
            }
            let until = now.saturating_add(penalty);
            self.in_box(&mut shards, policy, key, (name, *hash), now, Some(until));
            for state in peeked.iter_mut() {
                state.boxed(std::time::Duration::from_micros(penalty));
            }
            return (peeked, true);
        }
        let commit = Step::Commit(lease.map(|l| l.id()));
        let (committed, evicted) = self.each(&parts, &mut shards, commit, cost, now);
        drop(shards);
        if evicted > 0 {
            self.inner.evictions.fetch_add(evicted, Ordering::Relaxed);
            crate::telemetry::memory_eviction();
        }
        (committed, false)
    }

    /// How long `key` has left in the penalty box; with `block`, boxes it until then first.
    fn in_box(
        &self,
        shards: &mut [(usize, MutexGuard<'_, Shard>)],
        policy: &Policy,
        key: &Key,
        (name, hash): (&str, u64),
        now: u64,
        block: Option<u64>,
    ) -> u64 {
        let Some(shard) = shard_of(shards, hash) else {
            return 0;
        };
        let (left, _) = shard.with_entry(
            hash,
            IdRef {
                policy: name,
                key: key.as_str(),
            },
            || Entry::new(policy),
            || (name.into(), key.primary()),
            self.inner.cap_per_shard,
            now,
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
        let Some(part) = parts.iter().find(|p| holds_leases(p.policy)) else {
            return false;
        };
        let mut shards = self.lock(std::iter::once(part.hash));
        shard_of(&mut shards, part.hash)
            .and_then(|shard| shard.get_mut(part.hash, part.id()))
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
        let mut shards = self.lock(parts.iter().map(|p| p.hash));
        let mut given = false;
        for part in &parts {
            let Some(shard) = shard_of(&mut shards, part.hash) else {
                continue;
            };
            let policy = part.policy;
            let (gave, _) = shard.with_entry(
                part.hash,
                part.id(),
                || Entry::new(policy),
                || (policy.name_arc(), part.key.clone()),
                self.inner.cap_per_shard,
                now,
                |entry| {
                    entry.adopt(policy);
                    entry.refund(policy, cost, at, now)
                },
            );
            given |= gave;
        }
        given
    }

    /// [`inspect_now`](Self::inspect_now) of a key with limit keys.
    pub(super) fn peek_parts(&self, policy: &Policy, key: &Key, now: u64) -> LimitStates {
        let parts = self.parts(policy, key);
        let mut shards = self.lock(parts.iter().map(|p| p.hash));
        self.each(&parts, &mut shards, Step::Peek, 1, now).0
    }

    /// [`reset_now`](Self::reset_now) of a key with limit keys: every limit's state, shared
    /// ones included.
    pub(super) fn reset_parts(&self, policy: &Policy, key: &Key) -> bool {
        let parts = self.parts(policy, key);
        let name = policy.box_name();
        let boxed = self.inner.hasher.hash_one(IdRef {
            policy: name,
            key: key.as_str(),
        });
        let mut shards = self.lock(parts.iter().map(|p| p.hash).chain([boxed]));
        let mut any = false;
        if let Some(shard) = shard_of(&mut shards, boxed) {
            any |= shard.remove(
                boxed,
                IdRef {
                    policy: name,
                    key: key.as_str(),
                },
            );
        }
        for part in &parts {
            if let Some(shard) = shard_of(&mut shards, part.hash) {
                any |= shard.remove(part.hash, part.id());
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
                let key = key.limit_key(positions.first().copied().unwrap_or(0));
                let hash = self.inner.hasher.hash_one(IdRef {
                    policy: part.name(),
                    key: key.as_str(),
                });
                Part {
                    positions,
                    policy: part,
                    key,
                    hash,
                }
            })
            .collect()
    }

    /// Locks the shard of every hash, each once, in index order.
    fn lock(
        &self,
        hashes: impl Iterator<Item = u64>,
    ) -> SmallVec<[(usize, MutexGuard<'_, Shard>); 4]> {
        let mut indices: SmallVec<[usize; 4]> = hashes.map(shard_index).collect();
        indices.sort_unstable();
        indices.dedup();
        indices
            .into_iter()
            .map(|i| {
                let guard = self.inner.shards[i]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                (i, guard)
            })
            .collect()
    }

    /// Runs `step` on every part's entry; returns the states in the policy's order, and how
    /// many entries were evicted for room.
    fn each(
        &self,
        parts: &[Part<'_>],
        shards: &mut [(usize, MutexGuard<'_, Shard>)],
        step: Step,
        cost: u64,
        now: u64,
    ) -> (LimitStates, u64) {
        let mut by_position: SmallVec<[Option<LimitState>; 4]> =
            SmallVec::from_elem(None, parts.iter().map(|p| p.positions.len()).sum());
        let mut evicted = 0;
        for part in parts {
            let policy = part.policy;
            // `lock` locked every part's shard.
            let Some(shard) = shard_of(shards, part.hash) else {
                continue;
            };
            let (states, lost) = shard.with_entry(
                part.hash,
                part.id(),
                || Entry::new(policy),
                || (policy.name_arc(), part.key.clone()),
                self.inner.cap_per_shard,
                now,
                |entry| {
                    entry.adopt(policy);
                    match step {
                        Step::Peek => entry.peek(policy, cost, now),
                        Step::Commit(lease) => {
                            let states = entry.check(policy, cost, now);
                            if let Some(lease) = lease.filter(|_| holds_leases(policy)) {
                                entry.hold(lease, now);
                            }
                            states
                        }
                    }
                },
            );
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

/// The shard a hash belongs to (as [`MemoryStore`]'s single-key path picks it).
pub(super) fn shard_index(hash: u64) -> usize {
    // Not the bits the map uses for buckets or tags: mix before picking the shard.
    let mixed = (hash ^ (hash >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 58) as usize % SHARDS
}

/// The locked shard of `hash`, among `shards`.
fn shard_of<'g, 's>(
    shards: &'g mut [(usize, MutexGuard<'s, Shard>)],
    hash: u64,
) -> Option<&'g mut Shard> {
    let index = shard_index(hash);
    shards
        .iter_mut()
        .find(|(i, _)| *i == index)
        .map(|(_, guard)| &mut **guard)
}

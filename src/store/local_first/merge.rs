//! The fleet's side of a sync in Rust: twin of `lua/local_first_sync.lua`, the same merge on
//! the same integers, over the exact scripts' state (as [`State`], the twin of what they keep
//! in Redis). The simulation runs it as its Redis, exact checks included
//! ([`Keyspace::check`]), and the tests hold the counting to idempotency with it
//! (`tests/it/store/local_first.rs` holds the Lua to the same answers).

use std::collections::HashMap;

use smallvec::SmallVec;

use super::core::SyncItem;
use super::entry::FleetReply;
use super::view::{self, Fleet};
use crate::algorithm::{
    PerKey, State, emission_interval, fixed_window, gcra, sliding_window, token_bucket,
};
use crate::decision::{Decision, LimitState};
use crate::key::Key;
use crate::policy::Policy;

/// One key's bookkeeping hash: each instance entry's last cumulative count and demand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Record {
    fields: HashMap<String, u64>,
    total: u64,
    offered: u64,
    /// Unix µs; the record is gone from then on.
    expires_at: u64,
}

/// A keyspace as Redis holds it: bookkeeping hashes, and each limit's exact state.
#[derive(Debug, Default)]
pub(crate) struct Keyspace {
    records: HashMap<String, Record>,
    /// State key → the limit's state and when it is gone.
    states: HashMap<String, (State, u64)>,
}

impl Keyspace {
    /// Merges `item` at `now`, its keys under `prefix`: one key of one sync call.
    pub(crate) fn sync(
        &mut self,
        prefix: &str,
        item: &SyncItem,
        now: u64,
        min_ttl_ms: u64,
    ) -> FleetReply {
        let hash = super::task::hash_key(prefix, &item.policy, &item.key);
        let names: SmallVec<[String; 2]> = item
            .limits
            .iter()
            .enumerate()
            .map(|(i, limit)| {
                super::task::limit_state_key(prefix, &item.policy, &item.key, limit, i)
            })
            .collect();
        self.merge(&hash, &names, item, now, min_ttl_ms)
    }

    /// Merges `item` at `now` (Redis time, µs), as one key of the script does: `hash` is its
    /// bookkeeping hash, `names` its limits' state keys.
    pub(crate) fn merge(
        &mut self,
        hash: &str,
        names: &[String],
        item: &SyncItem,
        now: u64,
        min_ttl_ms: u64,
    ) -> FleetReply {
        let record = self.records.get(hash).filter(|r| r.expires_at > now);
        let last = record
            .and_then(|r| r.fields.get(&item.field).copied())
            .unwrap_or(item.acked);
        let delta = item.counted.saturating_sub(last);
        let total = record.map_or(0, |r| r.total) + delta;
        let offered_field = format!("{}:o", item.field);
        let offered_last = record.and_then(|r| r.fields.get(&offered_field).copied());
        let offered_delta = item
            .offered
            .saturating_sub(offered_last.unwrap_or(item.offered));
        let offered = record.map_or(0, |r| r.offered) + offered_delta;
        let since = item.since.min(now);
        let mut life = 0;
        let mut limits = SmallVec::new();
        for (limit, name) in item.limits.iter().zip(names) {
            let stored = self.live(name, now);
            let (fleet, write) = merge_limit(limit, stored, delta, since, now, min_ttl_ms);
            if let Some(write) = write {
                self.states.insert(name.clone(), write);
            }
            life = life.max(moot_after(limit, fleet, now));
            limits.push(fleet);
        }
        let fresh = record.is_none();
        let reply = FleetReply {
            total,
            offered,
            limits,
        };
        let offered_news = offered_delta > 0 || offered_last.is_none();
        if delta > 0 || (!fresh && offered_news) {
            let mut fields = record.map(|r| r.fields.clone()).unwrap_or_default();
            fields.insert(item.field.clone(), item.counted);
            fields.insert(offered_field, item.offered);
            let ttl_ms = life.div_ceil(1000).max(min_ttl_ms);
            self.records.insert(
                hash.to_owned(),
                Record {
                    fields,
                    total,
                    offered,
                    expires_at: now + ttl_ms * 1000,
                },
            );
        }
        reply
    }

    /// One exact check of `policy` for `key` at `now`, as the exact script decides it
    /// (every limit, all committed or none), on the same state the syncs merge into; state
    /// keys under `prefix`.
    pub(crate) fn check(
        &mut self,
        prefix: &str,
        policy: &Policy,
        key: &Key,
        cost: u64,
        now: u64,
    ) -> Decision {
        let limits = policy.limits();
        let names: SmallVec<[String; 2]> = (0..limits.len())
            .map(|i| super::task::limit_state_key(prefix, policy.name(), key, &limits[i], i))
            .collect();
        let steps: SmallVec<[_; 2]> = limits
            .iter()
            .zip(&names)
            .map(|(limit, name)| {
                let state = self
                    .live(name, now)
                    .unwrap_or(State::fresh(limit.algorithm()));
                state.check(
                    &PerKey::default(),
                    limit.count(),
                    limit.period_us(),
                    cost,
                    now,
                )
            })
            .collect();
        let allowed = steps.iter().all(|s| s.eval.allowed);
        if allowed {
            for (name, step) in names.iter().zip(&steps) {
                if step.ttl == 0 {
                    self.states.remove(name);
                } else {
                    self.states
                        .insert(name.clone(), (step.next, now.saturating_add(step.ttl)));
                }
            }
        }
        let states = limits
            .iter()
            .zip(&steps)
            .map(|(limit, step)| {
                let (remaining, reset) = step.eval.reported(allowed);
                LimitState::from_raw(*limit, step.eval.allowed, remaining, reset, step.eval.retry)
            })
            .collect();
        Decision::from_states(policy.name_arc(), now, states)
    }

    /// Gives `cost` units admitted at `at` back to `key`'s state under `policy` at `now`, as
    /// the refund script does (its marker aside); state keys under `prefix`.
    #[cfg(test)]
    pub(crate) fn refund(
        &mut self,
        prefix: &str,
        policy: &Policy,
        key: &Key,
        (cost, at): (u64, u64),
        now: u64,
    ) {
        for (i, limit) in policy.limits().iter().enumerate() {
            let name = super::task::limit_state_key(prefix, policy.name(), key, limit, i);
            if let Some((state, _)) = self.states.get_mut(&name) {
                state.refund(limit.count(), limit.period_us(), cost, at, now);
            }
        }
    }

    /// The state under `name` at `now`, if it has not expired.
    fn live(&self, name: &str, now: u64) -> Option<State> {
        self.states
            .get(name)
            .filter(|(_, expires_at)| *expires_at > now)
            .map(|(state, _)| *state)
    }
}

/// One limit's part of a merge: the fleet state to answer, and the state to write (with
/// when it is gone) when `delta` new units were forced into it.
fn merge_limit(
    limit: &crate::Limit,
    stored: Option<State>,
    delta: u64,
    since: u64,
    now: u64,
    min_ttl_ms: u64,
) -> (Fleet, Option<(State, u64)>) {
    let (n, p) = (limit.count(), limit.period_us());
    let t = emission_interval(n, p);
    match State::fresh(limit.algorithm()) {
        State::Gcra(_) | State::TokenBucket(_) => {
            let mut tat = match stored {
                Some(State::Gcra(Some(s))) if s.tat > now => {
                    let mut backlog = s.tat - now;
                    if s.t != t && s.t > 0 {
                        backlog = (backlog * t).div_ceil(s.t);
                    }
                    now + backlog
                }
                // Drained: its TAT floors a merge of units counted before it.
                Some(State::Gcra(Some(s))) => s.tat,
                // A bucket in debt holds up to twice its tokens missing (`debt_cap`).
                Some(State::TokenBucket(Some(s))) => {
                    s.last.min(now) + s.used.min(crate::algorithm::debt_cap(n)) * t
                }
                _ => 0,
            };
            let mut write = None;
            if delta > 0 {
                let burst = n * t;
                let cap = match limit.algorithm() {
                    // Two buckets' worth: one full, one owed (a charge's debt survives).
                    crate::Algorithm::TokenBucket => now + 2 * burst,
                    _ => now + view::max_backlog(n, t),
                };
                tat = (tat.max(since) + delta * t).min(cap);
                // Kept even when drained: a later sync of units counted before it floors at it.
                let ttl_ms = (tat.saturating_sub(now)).div_ceil(1000).max(min_ttl_ms);
                let state = match limit.algorithm() {
                    crate::Algorithm::TokenBucket => {
                        let used = tat.saturating_sub(now).div_ceil(t);
                        State::TokenBucket(Some(token_bucket::State {
                            used,
                            last: tat - used * t,
                        }))
                    }
                    _ => State::Gcra(Some(gcra::State { tat, t })),
                };
                write = Some((state, now + ttl_ms * 1000));
            }
            ((if tat > now { tat } else { 0 }, 0, 0), write)
        }
        State::FixedWindow(_) => {
            let end = (now / p + 1) * p;
            let mut count = match stored {
                Some(State::FixedWindow(Some(s))) if s.end > now => s.count,
                _ => 0,
            };
            let mut write = None;
            if delta > 0 {
                count += delta;
                write = Some((
                    State::FixedWindow(Some(fixed_window::State { end, count })),
                    end,
                ));
            }
            ((end, count, 0), write)
        }
        _ => {
            let start = now / p * p;
            let end = start + p;
            let (mut current, previous) = match stored {
                Some(State::SlidingWindow(Some(s))) if s.end > now => (s.current, s.previous),
                Some(State::SlidingWindow(Some(s))) if s.end == start => (0, s.current),
                _ => (0, 0),
            };
            let mut write = None;
            if delta > 0 {
                current += delta;
                write = Some((
                    State::SlidingWindow(Some(sliding_window::State {
                        end,
                        current,
                        previous,
                    })),
                    end + p,
                ));
            }
            ((end, current, previous), write)
        }
    }
}

/// How long (µs) the state answered as `fleet` matters: the bookkeeping hash lives as long.
fn moot_after(limit: &crate::Limit, fleet: Fleet, now: u64) -> u64 {
    match State::fresh(limit.algorithm()) {
        State::FixedWindow(_) => fleet.0 - now,
        State::SlidingWindow(_) => fleet.0 + limit.period_us() - now,
        _ => fleet.0.saturating_sub(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;
    use crate::limit::Limit;
    use std::sync::Arc;
    use std::time::Duration;

    fn item(field: &str, counted: u64, acked: u64, limit: Limit) -> SyncItem {
        SyncItem {
            policy: Arc::from("p"),
            key: Key::new("k"),
            field: field.to_owned(),
            generation: 0,
            since: u64::MAX,
            counted,
            acked,
            alone: 0,
            offered: counted,
            limits: Arc::from([limit]),
        }
    }

    fn merge(redis: &mut Keyspace, item: &SyncItem, now: u64) -> FleetReply {
        let names = [super::super::task::limit_state_key(
            "t",
            &item.policy,
            &item.key,
            &item.limits[0],
            0,
        )];
        redis.merge("t:p:{k}:lf", &names, item, now, 1000)
    }

    #[test]
    fn a_repeated_or_lost_sync_never_counts_twice() {
        let l = Limit::fixed_window(100, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        let now = 10_000_000;
        assert_eq!(
            merge(&mut redis, &item("a.0", 5, 0, l), now).limits[0],
            (11_000_000, 5, 0)
        );
        // The same sync again (its reply was lost): nothing added.
        assert_eq!(merge(&mut redis, &item("a.0", 5, 0, l), now).limits[0].1, 5);
        // A lost sync of 8, then one of 12: 12 in all.
        let r = merge(&mut redis, &item("a.0", 12, 5, l), now + 1);
        assert_eq!((r.total, r.limits[0].1), (12, 12));
        // Another instance adds its own.
        let r = merge(&mut redis, &item("b.0", 3, 0, l), now + 2);
        assert_eq!((r.total, r.limits[0].1), (15, 15));
    }

    #[test]
    fn an_expired_hash_takes_only_the_unacknowledged_units() {
        let l = Limit::gcra(10, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        merge(&mut redis, &item("a.0", 4, 0, l), 0);
        // Long after: the hash expired; 4 were acknowledged, 6 counted since.
        let r = merge(&mut redis, &item("a.0", 10, 4, l), 60_000_000);
        assert_eq!(r.total, 6);
        assert_eq!(r.limits[0], (60_000_000 + 600_000, 0, 0));
    }

    #[test]
    fn windows_roll_and_gcra_backlogs_drain() {
        let sw = Limit::sliding_window(10, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        merge(&mut redis, &item("a.0", 7, 0, sw), 1_500_000);
        let r = merge(&mut redis, &item("a.0", 9, 7, sw), 2_100_000);
        assert_eq!(r.limits[0], (3_000_000, 2, 7));
        let r = merge(&mut redis, &item("a.0", 9, 9, sw), 4_000_001);
        assert_eq!(r.limits[0], (5_000_000, 0, 0));
        let g = Limit::gcra(10, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        let r = merge(&mut redis, &item("a.0", 3, 0, g), 1_000_000);
        assert_eq!(r.limits[0].0, 1_300_000);
        let r = merge(&mut redis, &item("a.0", 4, 3, g), 2_000_000);
        assert_eq!(r.limits[0].0, 2_100_000, "drained, then one unit");
    }

    /// A token bucket in debt (a charge past it: up to twice its tokens missing) keeps its
    /// debt through a sync, and a sync's units land up to the same cap: two buckets.
    #[test]
    fn a_token_buckets_debt_survives_a_sync() {
        let tb = Limit::token_bucket(10, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        let now = 10_000_000;
        // 15 units counted at once: 5 owed, the bucket full again 1.5 s later.
        let r = merge(&mut redis, &item("a.0", 15, 0, tb), now);
        assert_eq!(r.limits[0], (now + 1_500_000, 0, 0));
        // A later sync of one more unit reads all 15 missing, not one bucket's 10.
        let r = merge(&mut redis, &item("a.0", 16, 15, tb), now);
        assert_eq!(r.limits[0], (now + 1_600_000, 0, 0));
        // Never more than two buckets missing.
        let r = merge(&mut redis, &item("a.0", 100, 16, tb), now);
        assert_eq!(r.limits[0], (now + 2_000_000, 0, 0));
    }

    /// Exact checks and syncs act on one state: what either counted, the other sees.
    #[test]
    fn syncs_and_exact_checks_count_into_the_same_state() {
        let now = 50_000_000;
        for limit in [
            Limit::gcra(10, Duration::from_secs(1)).unwrap(),
            Limit::token_bucket(10, Duration::from_secs(1)).unwrap(),
            Limit::fixed_window(10, Duration::from_secs(1)).unwrap(),
            Limit::sliding_window(10, Duration::from_secs(1)).unwrap(),
        ] {
            let policy = Policy::new("p", [limit]).unwrap();
            let key = Key::new("k");
            let mut redis = Keyspace::default();
            for _ in 0..3 {
                assert!(redis.check("t", &policy, &key, 1, now).is_allowed());
            }
            // Another instance's 4 local units reach the same state.
            let mut i = item("b.0", 4, 0, limit);
            i.since = now;
            let r = merge(&mut redis, &i, now);
            let expected = match limit.algorithm() {
                crate::Algorithm::FixedWindow => (now + 1_000_000, 7, 0),
                crate::Algorithm::SlidingWindow => (now + 1_000_000, 7, 0),
                _ => (now + 700_000, 0, 0),
            };
            assert_eq!(r.limits[0], expected, "{limit:?}");
            // Exact checks take what is left, and no more.
            let left = (0..10)
                .filter(|_| redis.check("t", &policy, &key, 1, now).is_allowed())
                .count();
            assert_eq!(left, 3, "{limit:?}");
        }
    }
}

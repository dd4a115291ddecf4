//! One key's state under one policy, and the check that runs every limit over it.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::algorithm::{Algorithm, PerKey, State, Step};
use crate::decision::{LimitState, LimitStates};
use crate::key::Key;
use crate::limit::Limit;
use crate::policy::Policy;
use crate::store::shard::{Lookup, Reclaim, Shard};

/// Each limit's step of one check: on the stack for up to four limits, no allocation besides
/// the decision's own.
type Steps = SmallVec<[Step<State>; 4]>;

/// Each limit's state: inline for a policy of one limit (most are), on the heap beyond. A
/// table of 100k keys makes a fresh entry for every key whose state lapsed: no allocation for
/// it, and one pointer fewer to chase on every check.
type States = SmallVec<[State; 1]>;

/// The state of every limit of a policy for one key.
pub(super) struct Entry {
    limits: Arc<[Limit]>,
    states: States,
    /// The log and the leases, one per key as in Redis: only for a policy with a sliding log or
    /// a concurrency limit (allocated at its first use), so that every other entry stays small.
    per_key: Option<Box<PerKey>>,
    /// When every limit's state is moot (Unix µs): the longest of the TTLs the Lua scripts
    /// would set. Past it, the entry may be reclaimed without changing any decision.
    pub(super) expires_at: u64,
    /// Until when the key is in its policy's penalty box (Unix µs; see `penalty.rs`).
    pub(super) blocked_until: u64,
}

impl Reclaim for Entry {
    fn expires_at(&self) -> u64 {
        self.expires_at
    }

    /// A state that lapsed reads as fresh.
    fn revive(&mut self, now: u64) {
        if self.expires_at <= now {
            self.clear();
        }
    }
}

impl Entry {
    pub(super) fn new(policy: &Policy) -> Self {
        let limits = policy.limits_arc();
        Entry {
            states: fresh(&limits).collect(),
            limits,
            per_key: None,
            expires_at: 0,
            blocked_until: 0,
        }
    }

    /// Forgets every limit's state (it became moot), keeping the entry's allocation: a hot
    /// key whose state lapses between requests must not allocate on each of them.
    fn clear(&mut self) {
        for state in self.states.iter_mut() {
            *state = State::fresh(state.algorithm());
        }
        if let Some(per_key) = &mut self.per_key {
            **per_key = PerKey::default();
        }
        self.expires_at = 0;
    }

    /// Takes this policy's limits as the ones to enforce and report, keeping the state of
    /// every limit whose position and algorithm are unchanged ([`State::adopt`]). The log, one
    /// per key as in Redis, is kept.
    // Inlined: the common case, the same `Arc`, is one comparison on every check.
    #[inline]
    pub(super) fn adopt(&mut self, policy: &Policy) {
        if !std::ptr::eq(self.limits.as_ptr(), policy.limits().as_ptr()) {
            self.adopt_other(policy);
        }
    }

    /// [`Entry::adopt`] of limits from another `Arc`: equal ones for a limit key's part of a
    /// policy (made afresh on each check), or changed ones.
    #[inline(never)]
    fn adopt_other(&mut self, policy: &Policy) {
        if *self.limits == *policy.limits() {
            return;
        }
        self.states = State::adopt::<States>(&self.states, fresh(policy.limits()));
        self.limits = policy.limits_arc();
    }

    /// Evaluates every limit, commits all or none, and reports each limit's state.
    pub(super) fn check(&mut self, policy: &Policy, cost: u64, now: u64) -> LimitStates {
        let mut states = LimitStates::new();
        self.check_into(policy, std::slice::from_ref(&cost), now, &mut states);
        states
    }

    /// [`Entry::check`] of `costs` (one per limit, or one for all: `store::cost_at`), each
    /// limit's state pushed onto `states` (the caller's, which becomes the decision's: the
    /// states are written once, not copied up through every return). The sliding logs share
    /// one cost (`store::validate_costs`).
    // Inlined: between its callers and the one-limit check, it only passes its arguments on.
    #[inline]
    pub(super) fn check_into(
        &mut self,
        policy: &Policy,
        costs: &[u64],
        now: u64,
        states: &mut LimitStates,
    ) {
        if let Some(checked) = self.check_one(costs, now) {
            states.push(checked);
            return;
        }
        let mut steps = Steps::new();
        let allowed = self.commit_steps(policy, costs, now, &mut steps);
        self.report(&steps, allowed, states);
    }

    /// [`Entry::check_into`] of a policy of one limit with no per-key part yet (no sliding
    /// log, no lease held): the same evaluation, commit and report, without the steps of
    /// several limits to gather and walk. `None` for any other entry.
    #[inline]
    fn check_one(&mut self, costs: &[u64], now: u64) -> Option<LimitState> {
        let ([limit], [state], None) = (&*self.limits, &mut self.states[..], &self.per_key) else {
            return None;
        };
        if limit.algorithm() == Algorithm::SlidingLog {
            return None;
        }
        let cost = crate::store::cost_at(costs, 0);
        let step = state.check(
            &PerKey::default(),
            limit.count(),
            limit.period_arg(now),
            cost,
            now,
        );
        let allowed = step.eval.allowed;
        if allowed {
            *state = step.next;
            self.expires_at = self.expires_at.max(now.saturating_add(step.ttl));
        }
        let (remaining, reset) = step.eval.reported(allowed);
        Some(LimitState::from_raw(
            *limit,
            allowed,
            remaining,
            reset,
            step.eval.retry,
        ))
    }

    /// [`Entry::check_into`] without the report: the states committed as a check commits
    /// them, for a charge nobody reads (the local fallback's mirror). Whether it fit.
    pub(super) fn commit(&mut self, policy: &Policy, costs: &[u64], now: u64) -> bool {
        if let Some(checked) = self.check_one(costs, now) {
            return checked.is_allowed();
        }
        let mut steps = Steps::new();
        self.commit_steps(policy, costs, now, &mut steps)
    }

    /// Evaluates every limit onto `steps` and commits all or none: whether all fit.
    fn commit_steps(
        &mut self,
        policy: &Policy,
        costs: &[u64],
        now: u64,
        steps: &mut Steps,
    ) -> bool {
        let max_log = policy.max_log_period_us();
        self.evaluate(max_log, costs, now, steps);
        let allowed = steps.iter().all(|s| s.eval.allowed);
        if allowed {
            for (state, step) in self.states.iter_mut().zip(steps.iter()) {
                *state = step.next;
                self.expires_at = self.expires_at.max(now.saturating_add(step.ttl));
            }
            if max_log > 0 {
                let log = self
                    .limits
                    .iter()
                    .position(|l| l.algorithm() == Algorithm::SlidingLog);
                let cost = log.map_or(0, |p| crate::store::cost_at(costs, p));
                self.per_key_mut().commit(max_log, cost, now);
            }
        }
        allowed
    }

    /// Charges `cost` units to every limit whatever their state (a charge: it always lands,
    /// past the limits as debt, up to the debt cap; `RateAlgorithm::charge`), the sliding
    /// logs' once (`Log::charge`), no concurrency slot; then reports each limit's state for a
    /// request of cost 1: the decision after the charge (`lua/prelude.lua`'s charge reply).
    pub(super) fn charge(&mut self, policy: &Policy, cost: u64, now: u64) -> LimitStates {
        let max_log = policy.max_log_period_us();
        for (limit, state) in self.limits.iter().zip(self.states.iter_mut()) {
            let (next, ttl) = state.charge(limit.count(), limit.period_arg(now), cost, now);
            *state = next;
            self.expires_at = self.expires_at.max(now.saturating_add(ttl));
        }
        if max_log > 0 {
            let logs = self
                .limits
                .iter()
                .filter(|l| l.algorithm() == Algorithm::SlidingLog)
                .map(|l| (l.count(), l.period_us()));
            let per_key = self.per_key.get_or_insert_with(Box::default);
            per_key.log.trim(now, max_log);
            per_key.log.charge(logs, cost, now);
        }
        self.peek(policy, 1, now)
    }

    /// Charges each limit its own cost among `costs` (one per limit, or one for all:
    /// `store::cost_at`) whatever the others say ([`Commit::Always`](crate::store::Commit)):
    /// a limit its cost fits commits it as a check would, one it does not fit is charged past
    /// its limit (debt, up to the cap; `RateAlgorithm::charge`); the sliding logs' units are
    /// charged once (`Log::charge`: the same as a commit when they fit). Each limit's state is
    /// pushed onto `states`: a fitting one as a check reports it, the others refused with
    /// nothing left and the state after the charge for a cost of 0 (its retry: when the debt
    /// is paid). The twin of `script/always.rs`.
    pub(super) fn always(
        &mut self,
        policy: &Policy,
        costs: &[u64],
        now: u64,
        states: &mut LimitStates,
    ) {
        let max_log = policy.max_log_period_us();
        let mut steps = Steps::new();
        self.evaluate(max_log, costs, now, &mut steps);
        let mut log_cost = None;
        for (i, ((limit, state), step)) in self
            .limits
            .iter()
            .zip(self.states.iter_mut())
            .zip(&steps)
            .enumerate()
        {
            let cost = crate::store::cost_at(costs, i);
            if limit.algorithm() == Algorithm::SlidingLog {
                log_cost.get_or_insert(cost);
                continue;
            }
            let (next, ttl) = if step.eval.allowed {
                (step.next, step.ttl)
            } else {
                state.charge(limit.count(), limit.period_arg(now), cost, now)
            };
            *state = next;
            self.expires_at = self.expires_at.max(now.saturating_add(ttl));
        }
        if let Some(cost) = log_cost {
            let logs = self
                .limits
                .iter()
                .filter(|l| l.algorithm() == Algorithm::SlidingLog)
                .map(|l| (l.count(), l.period_us()));
            let per_key = self.per_key.get_or_insert_with(Box::default);
            per_key.log.charge(logs, cost, now);
            self.expires_at = self.expires_at.max(now.saturating_add(max_log));
        }
        let after = if steps.iter().all(|s| s.eval.allowed) {
            LimitStates::new()
        } else {
            self.peek(policy, 0, now)
        };
        for (i, (limit, step)) in self.limits.iter().zip(&steps).enumerate() {
            if step.eval.allowed {
                let (remaining, reset) = step.eval.reported(true);
                states.push(LimitState::from_raw(*limit, true, remaining, reset, 0));
            } else {
                states.push(in_debt(*limit, after.get(i)));
            }
        }
    }

    /// Gives back `cost` units admitted at `at` to every limit (a refund; see
    /// `RateAlgorithm::refund`). Answers whether any limit got something back.
    pub(super) fn refund(&mut self, policy: &Policy, cost: u64, at: u64, now: u64) -> bool {
        let mut given = false;
        for (limit, state) in self.limits.iter().zip(self.states.iter_mut()) {
            given |= state.refund(limit.count(), limit.period_arg(at), cost, at, now);
        }
        given |= self
            .per_key
            .as_mut()
            .is_some_and(|p| p.refund(policy.max_log_period_us(), cost, at, now));
        given
    }

    /// Books `costs` (one per limit, or one for all: `store::cost_at`) at the earliest slot
    /// every limit allows (`lua/reserve.lua`'s twin), if it is no further than `max_wait` µs;
    /// with no `max_wait`, charges them now. The wait in µs, `Err(Some(wait))` for a slot too
    /// far, `Err(None)` for a cost never admitted. The limits must all reserve
    /// (`algorithm::reserve::reservable`).
    pub(super) fn reserve(
        &mut self,
        costs: &[u64],
        max_wait: Option<u64>,
        now: u64,
    ) -> Result<u64, Option<u64>> {
        use crate::algorithm::reserve::{commit, ready};
        use crate::store::cost_at;
        let slot = match max_wait {
            None => now,
            Some(max) => {
                let mut slot = now;
                for (i, (limit, state)) in self.limits.iter().zip(self.states.iter()).enumerate() {
                    let cost = cost_at(costs, i);
                    let at =
                        ready(state, limit.count(), limit.period_us(), cost, now).ok_or(None)?;
                    slot = slot.max(at);
                }
                if slot - now > max {
                    return Err(Some(slot - now));
                }
                slot
            }
        };
        for (i, (limit, state)) in self.limits.iter().zip(self.states.iter_mut()).enumerate() {
            let cost = cost_at(costs, i);
            if cost > 0 {
                let ttl = commit(
                    state,
                    limit.count(),
                    limit.period_us(),
                    cost,
                    (slot, max_wait.is_none()),
                    now,
                );
                self.expires_at = self.expires_at.max(now.saturating_add(ttl));
            }
        }
        Ok(slot - now)
    }

    /// Gives back a reservation of `costs` (`lua/reserve.lua`'s give back): each limit's
    /// refund.
    pub(super) fn give_back(&mut self, costs: &[u64], now: u64) -> bool {
        let mut given = false;
        for (i, (limit, state)) in self.limits.iter().zip(self.states.iter_mut()).enumerate() {
            let cost = crate::store::cost_at(costs, i);
            if cost > 0 {
                given |= state.refund(limit.count(), limit.period_arg(now), cost, now, now);
            }
        }
        given
    }

    /// Takes `lease` at `now` for the policy's concurrency limit, after a check admitted the
    /// request (its TTL already covers the lease).
    pub(super) fn hold(&mut self, lease: u128, now: u64) {
        self.per_key_mut().leases.hold(lease, now);
    }

    /// Gives `lease` back; answers whether it was held.
    pub(super) fn release(&mut self, lease: u128) -> bool {
        self.per_key
            .as_mut()
            .is_some_and(|p| p.leases.release(lease))
    }

    /// Each limit's state for `cost` now, committing nothing: what a check would find before
    /// consuming. Trims the log of entries no span counts, as a check would: no decision
    /// changes.
    pub(super) fn peek(&mut self, policy: &Policy, cost: u64, now: u64) -> LimitStates {
        let mut steps = Steps::new();
        self.evaluate(
            policy.max_log_period_us(),
            std::slice::from_ref(&cost),
            now,
            &mut steps,
        );
        let mut states = LimitStates::new();
        self.report(&steps, false, &mut states);
        states
    }

    fn report(&self, steps: &[Step<State>], committed: bool, states: &mut LimitStates) {
        for (limit, step) in self.limits.iter().zip(steps) {
            let (remaining, reset) = step.eval.reported(committed);
            states.push(LimitState::from_raw(
                *limit,
                step.eval.allowed,
                remaining,
                reset,
                step.eval.retry,
            ));
        }
    }

    /// Each limit's verdict on its cost among `costs`, its next state, and how long that state
    /// matters, pushed onto `steps` (the caller's: a few hundred bytes, not copied back
    /// through a return).
    fn evaluate(&mut self, max_log: u64, costs: &[u64], now: u64, steps: &mut Steps) {
        let none;
        let per_key = match &mut self.per_key {
            Some(per_key) => {
                let lease_timeout = self
                    .limits
                    .iter()
                    .find(|l| l.algorithm() == Algorithm::Concurrency)
                    .map(Limit::period_us);
                per_key.trim(lease_timeout, max_log, now);
                &**per_key
            }
            None => {
                none = PerKey::default();
                &none
            }
        };
        for (i, (limit, state)) in self.limits.iter().zip(self.states.iter()).enumerate() {
            let cost = crate::store::cost_at(costs, i);
            steps.push(state.check(per_key, limit.count(), limit.period_arg(now), cost, now));
        }
    }

    /// The key's log and leases, made at their first use.
    fn per_key_mut(&mut self) -> &mut PerKey {
        self.per_key.get_or_insert_with(Box::default)
    }
}

/// Runs `f` on the entry `at` points to in `shard`, that of `key` under `policy` (a fresh one if
/// absent, kept only if `f` left state that matters), its limits taken from `policy`; what every
/// check, peek and refund of one entry starts with. Whether live state was evicted for room.
pub(super) fn with_entry<T>(
    shard: &mut Shard<Entry>,
    at: Lookup<'_>,
    policy: &Policy,
    key: &Key,
    now: u64,
    f: impl FnOnce(&mut Entry) -> T,
) -> (T, bool) {
    shard.with_entry(
        at,
        now,
        || Entry::new(policy),
        // The entry's identity is the lookup's (a named limit key files it under its
        // algorithm's space, not the policy's name).
        || {
            let name = if policy.name() == at.policy {
                policy.name_arc()
            } else {
                std::sync::Arc::from(at.policy)
            };
            (name, key.clone())
        },
        |entry| {
            entry.adopt(policy);
            f(entry)
        },
    )
}

/// A limit refused in a charge that landed anyway (`Commit::Always`): nothing left, reset and
/// retry as `after` (its state after the charge, for a cost of 0) says; a retry of at least
/// 1 µs, as the debt was just charged.
pub(super) fn in_debt(limit: Limit, after: Option<&LimitState>) -> LimitState {
    let reset = after.map_or(0, |a| micros(a.reset_after()));
    let retry = after
        .and_then(LimitState::retry_after)
        .map_or(1, |r| micros(r).max(1));
    LimitState::from_raw(limit, false, 0, reset, retry as i64)
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The fresh states of `limits`.
fn fresh(limits: &[Limit]) -> impl Iterator<Item = State> + '_ {
    limits.iter().map(|l| State::fresh(l.algorithm()))
}

#[cfg(test)]
mod tests;

//! One key's state under one policy, and the check that runs every limit over it.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::algorithm::concurrency::Leases;
use crate::algorithm::{fixed_window, gcra, sliding_log::Log, sliding_window, token_bucket, Eval};
use crate::decision::{LimitState, LimitStates};
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// The state of every limit of a policy for one key.
pub(super) struct Entry {
    limits: Arc<[Limit]>,
    slots: Box<[Slot]>,
    log: Log,
    /// The leases of the policy's concurrency limit (a policy has at most one), as in Redis.
    leases: Leases,
    /// When every limit's state is moot (Unix µs): the longest of the TTLs the Lua scripts
    /// would set. Past it, the entry may be reclaimed without changing any decision.
    pub(super) expires_at: u64,
    /// Until when the key is in its policy's penalty box (Unix µs; see `penalty.rs`).
    pub(super) blocked_until: u64,
}

#[derive(Clone, Copy)]
enum Slot {
    FixedWindow(Option<fixed_window::State>),
    SlidingWindow(Option<sliding_window::State>),
    SlidingLog,
    TokenBucket(Option<token_bucket::State>),
    Gcra(Option<gcra::State>),
    Concurrency,
}

impl Entry {
    pub(super) fn new(policy: &Policy) -> Self {
        let limits = policy.limits_arc();
        let slots = limits
            .iter()
            .map(|l| match l.algorithm() {
                Algorithm::FixedWindow => Slot::FixedWindow(None),
                Algorithm::SlidingWindow => Slot::SlidingWindow(None),
                Algorithm::SlidingLog => Slot::SlidingLog,
                Algorithm::TokenBucket => Slot::TokenBucket(None),
                Algorithm::Gcra => Slot::Gcra(None),
                Algorithm::Concurrency => Slot::Concurrency,
            })
            .collect();
        Entry {
            limits,
            slots,
            log: Log::default(),
            leases: Leases::default(),
            expires_at: 0,
            blocked_until: 0,
        }
    }

    /// Forgets every limit's state (it became moot), keeping the entry's allocation: a hot
    /// key whose state lapses between requests must not allocate on each of them.
    pub(super) fn clear(&mut self) {
        for slot in self.slots.iter_mut() {
            *slot = match slot {
                Slot::FixedWindow(_) => Slot::FixedWindow(None),
                Slot::SlidingWindow(_) => Slot::SlidingWindow(None),
                Slot::SlidingLog => Slot::SlidingLog,
                Slot::TokenBucket(_) => Slot::TokenBucket(None),
                Slot::Gcra(_) => Slot::Gcra(None),
                Slot::Concurrency => Slot::Concurrency,
            };
        }
        self.log = Log::default();
        self.leases = Leases::default();
        self.expires_at = 0;
    }

    /// Takes this policy's limits as the ones to enforce and report, keeping the state of
    /// every limit whose position and algorithm are unchanged, as the Redis keys (which name a
    /// limit's position and algorithm) do: a changed `N` or period keeps the state (each
    /// algorithm says how it reads state written under another limit); a limit of another
    /// algorithm starts fresh. The log, one per key as in Redis, is kept.
    pub(super) fn adopt(&mut self, policy: &Policy) {
        // The same `Arc` in the common case; equal limits for a limit key's part of a policy,
        // which is made afresh on each check.
        if std::ptr::eq(self.limits.as_ptr(), policy.limits().as_ptr())
            || *self.limits == *policy.limits()
        {
            return;
        }
        let fresh = Entry::new(policy);
        let slots = fresh
            .slots
            .iter()
            .enumerate()
            .map(|(i, new)| match self.slots.get(i) {
                Some(old) if std::mem::discriminant(old) == std::mem::discriminant(new) => *old,
                _ => *new,
            })
            .collect();
        self.slots = slots;
        self.limits = fresh.limits;
    }

    /// Evaluates every limit, commits all or none, and reports each limit's state.
    pub(super) fn check(&mut self, policy: &Policy, cost: u64, now: u64) -> LimitStates {
        let max_log = policy.max_log_period_us();
        let evals = self.evaluate(max_log, cost, now);
        let allowed = evals.iter().all(|(e, _, _)| e.allowed);
        if allowed {
            for (slot, (_, next, ttl)) in self.slots.iter_mut().zip(&evals) {
                *slot = *next;
                self.expires_at = self.expires_at.max(now.saturating_add(*ttl));
            }
            if max_log > 0 {
                self.log.record(now, cost);
            }
        }
        self.report(&evals, allowed)
    }

    /// Gives back `cost` units admitted at `at` to every limit (a refund; see
    /// `crate::algorithm::refund`). Answers whether any limit got something back.
    pub(super) fn refund(&mut self, policy: &Policy, cost: u64, at: u64, now: u64) -> bool {
        use crate::algorithm::refund;
        let mut given = false;
        for (limit, slot) in self.limits.iter().zip(self.slots.iter_mut()) {
            let p = limit.period_us();
            given |= match slot {
                Slot::FixedWindow(s) => refund::fixed_window(s, p, cost, at, now),
                Slot::SlidingWindow(s) => refund::sliding_window(s, p, cost, at, now),
                // A slot is given back by its lease's release, not by a refund.
                Slot::SlidingLog | Slot::Concurrency => false,
                Slot::TokenBucket(s) => refund::token_bucket(s, limit.count(), p, cost, now),
                Slot::Gcra(s) => refund::gcra(s, cost, now),
            };
        }
        let max_log = policy.max_log_period_us();
        if max_log > 0 {
            given |= self.log.refund(at, cost, now, max_log);
        }
        given
    }

    /// Takes `lease` at `now` for the policy's concurrency limit, after a check admitted the
    /// request (its TTL already covers the lease).
    pub(super) fn hold(&mut self, lease: u128, now: u64) {
        self.leases.hold(lease, now);
    }

    /// Gives `lease` back; answers whether it was held.
    pub(super) fn release(&mut self, lease: u128) -> bool {
        self.leases.release(lease)
    }

    /// Each limit's state for `cost` now, committing nothing: what a check would find before
    /// consuming. Trims the log of entries no span counts, as a check would: no decision
    /// changes.
    pub(super) fn peek(&mut self, policy: &Policy, cost: u64, now: u64) -> LimitStates {
        let evals = self.evaluate(policy.max_log_period_us(), cost, now);
        self.report(&evals, false)
    }

    fn report(&self, evals: &[(Eval, Slot, u64)], committed: bool) -> LimitStates {
        self.limits
            .iter()
            .zip(evals)
            .map(|(limit, (e, _, _))| {
                let (remaining, reset) = e.reported(committed);
                LimitState::from_raw(*limit, e.allowed, remaining, reset, e.retry)
            })
            .collect()
    }

    /// Each limit's verdict, its next state, and how long that state matters.
    fn evaluate(&mut self, max_log: u64, cost: u64, now: u64) -> SmallVec<[(Eval, Slot, u64); 4]> {
        if max_log > 0 {
            self.log.trim(now, max_log);
        }
        for limit in self.limits.iter() {
            if limit.algorithm() == Algorithm::Concurrency {
                self.leases.trim(limit.period_us(), now);
            }
        }
        // On the stack for up to four limits: no allocation besides the decision's own.
        self.limits
            .iter()
            .zip(self.slots.iter())
            .map(|(limit, slot)| {
                let (n, p) = (limit.count(), limit.period_us());
                match *slot {
                    Slot::FixedWindow(s) => {
                        let step = fixed_window::check(s, n, p, cost, now);
                        (step.eval, Slot::FixedWindow(Some(step.next)), step.ttl)
                    }
                    Slot::SlidingWindow(s) => {
                        let step = sliding_window::check(s, n, p, cost, now);
                        (step.eval, Slot::SlidingWindow(Some(step.next)), step.ttl)
                    }
                    Slot::SlidingLog => {
                        (self.log.check(n, p, cost, now), Slot::SlidingLog, max_log)
                    }
                    Slot::TokenBucket(s) => {
                        let step = token_bucket::check(s, n, p, cost, now);
                        (step.eval, Slot::TokenBucket(Some(step.next)), step.ttl)
                    }
                    Slot::Gcra(s) => {
                        let step = gcra::check(s, n, p, cost, now);
                        (step.eval, Slot::Gcra(Some(step.next)), step.ttl)
                    }
                    // The lease itself is taken by `hold`, once the policy committed.
                    Slot::Concurrency => {
                        let ttl = if cost > 0 { p } else { 0 };
                        (self.leases.check(n, p, cost, now), Slot::Concurrency, ttl)
                    }
                }
            })
            .collect()
    }
}

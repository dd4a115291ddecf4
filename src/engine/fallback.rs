//! The engine's one failure path, for every front: a store that failed, whose circuit is open,
//! that is late or has too many calls in flight. By the rule's failure mode ([`OnFailure`]),
//! or, where lateness is load ([`Late::InMemory`]: the layer), in memory whatever the mode.
//! Every one is logged, at `warn` at most once a second (the circuit breaker's transitions are
//! logged too), at `debug` otherwise. The front maps the outcome ([`Failure`], or for a
//! decision begun by [`Engine::begin`] a [`Settled`]) to its own answer.

use std::sync::Arc;

use super::local::LocalShare;
use super::on_failure::OnFailure;
use super::shared::Late;
use super::{Engine, Settled, Ticket};
use crate::decision::Decision;
use crate::error::{Chain, StoreError};

/// Logs at `warn` if `throttle` allows one now, else at `debug`.
macro_rules! warn_or_debug {
    ($throttle:expr, $($arg:tt)+) => {
        if $throttle.should_warn() {
            tracing::warn!($($arg)+);
        } else {
            tracing::debug!($($arg)+);
        }
    };
}

/// What the failure path chose for a decision the store could not make.
#[derive(Clone, Copy)]
pub(crate) enum Failure<'a> {
    /// Decided in memory at this instance's share (a local failure mode, or lateness decided
    /// in memory).
    Local(LocalShare<'a>),
    /// Allowed, unlimited.
    Open,
    /// Denied.
    Closed,
    /// No decision: the store is unavailable.
    Unavailable,
}

impl Engine {
    /// The one failure path: what rule `rule`'s decision is, the store having failed with
    /// `error` (or its circuit open, or too many calls in flight). Logged here, at `warn` at
    /// most once a second; the front answers by it. (A decision begun by
    /// [`begin`](Self::begin) goes through [`store_failed`](Self::store_failed).)
    #[cold]
    #[inline(never)]
    pub(crate) fn failure(&self, rule: usize, error: &StoreError) -> Failure<'_> {
        self.failure_or_late(rule, None, error).0
    }

    /// [`failure`](Self::failure), and whether it was lateness decided in memory (counted
    /// where the lateness was seen, not as a failure).
    fn failure_or_late(
        &self,
        rule: usize,
        domain: Option<u16>,
        error: &StoreError,
    ) -> (Failure<'_>, bool) {
        let Some(slot) = self.rules.get(rule) else {
            return (Failure::Unavailable, false);
        };
        let share = || self.local.share(rule);
        if self.late == Late::InMemory {
            // A reply that did not come in time may be load as well as failure: see
            // `missed_deadline`. Only errors and an open circuit say the store is gone.
            if error.is_timeout() {
                let why = "rate-limit store timed out; deciding in memory";
                return (self.in_memory_of(rule, why), true);
            }
            // A circuit open on silence fails open no more than a missed deadline does: a
            // store starved of CPU (beside a flood, on an overloaded node) is silent too, for as
            // long as it is starved, and every cool-down of it would be an unlimited window.
            if slot.on_failure == OnFailure::Open
                && error.is_circuit_open()
                && domain.is_some_and(|domain| self.breakers.silent(domain))
            {
                let why = "rate-limit store is silent (circuit open); deciding in memory";
                return (self.in_memory_of(rule, why), true);
            }
        }
        let what = match slot.on_failure {
            OnFailure::Open => "allowing (fail open)",
            OnFailure::Closed => "denying (fail closed)",
            OnFailure::Local { .. } => "deciding in memory (local fallback)",
            OnFailure::Unavailable => "answering that it is unavailable",
        };
        let name = &*slot.name;
        warn_or_debug!(self.throttle, rule = name, error = %Chain(error), "rate-limit store failed; {what}");
        let failure = match slot.on_failure {
            OnFailure::Open => Failure::Open,
            OnFailure::Closed => Failure::Closed,
            OnFailure::Local { .. } => share().map_or(Failure::Unavailable, Failure::Local),
            OnFailure::Unavailable => Failure::Unavailable,
        };
        (failure, false)
    }

    /// Lateness decided in memory, logged with `why`.
    fn in_memory_of(&self, rule: usize, why: &str) -> Failure<'_> {
        let max = self.in_flight.as_ref().map_or(usize::MAX, |b| b.max());
        let name = self.rules.get(rule).map_or("", |r| &*r.name);
        warn_or_debug!(self.throttle, rule = name, max, "{why}");
        self.local
            .share(rule)
            .map_or(Failure::Unavailable, Failure::Local)
    }

    /// The store failed, or its circuit is open: the failure path decides `ticket`.
    #[cold]
    #[inline(never)]
    pub(crate) fn store_failed(&self, error: &StoreError, ticket: &Ticket) -> Settled {
        let (failure, late) = self.failure_or_late(ticket.rule, Some(ticket.domain), error);
        if !late {
            crate::telemetry::store_failure(
                self.meter.store(),
                crate::telemetry::failure_reason(error),
            );
        }
        self.settled(failure, ticket)
    }

    /// `failure` as `ticket`'s outcome.
    fn settled(&self, failure: Failure<'_>, ticket: &Ticket) -> Settled {
        let Some(name) = self.rules.get(ticket.rule).map(|r| &r.name) else {
            return Settled::Unavailable;
        };
        match failure {
            Failure::Open => Settled::Decided(Decision::fail_open(Arc::clone(name))),
            Failure::Closed => Settled::Decided(Decision::fail_closed(Arc::clone(name))),
            Failure::Local(share) => match share.decide(&ticket.key, ticket.cost) {
                Some(decision) => Settled::Decided(decision),
                // A keyed rule has no share of its own: failing open, as before there was one.
                None => Settled::Decided(Decision::fail_open(Arc::clone(name))),
            },
            Failure::Unavailable => Settled::Unavailable,
        }
    }

    /// Load, not failure: more store calls in flight than the engine allows, or a call that
    /// missed its deadline while the store answers others. Decided in memory with this
    /// instance's share of the limits, whatever the failure mode, so that load never buys an
    /// unlimited window (and never a 503: the store is busy, not gone).
    #[cold]
    #[inline(never)]
    pub(crate) fn in_memory(&self, ticket: &Ticket, why: &str) -> Settled {
        let Some(decision) = self.local_decision(ticket) else {
            return Settled::Unavailable;
        };
        let max = self.in_flight.as_ref().map_or(usize::MAX, |b| b.max());
        warn_or_debug!(self.throttle, rule = decision.policy(), max, "{why}");
        Settled::Decided(decision)
    }

    /// The local fallback's decision on `ticket`: this instance's share of its rule's policy,
    /// charged in memory.
    fn local_decision(&self, ticket: &Ticket) -> Option<Decision> {
        self.local
            .share(ticket.rule)?
            .decide(&ticket.key, ticket.cost)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::breaker::Probed;
    use super::super::{Engine, Rule, Settled, Ticket};
    use crate::decision::DecisionSource;
    use crate::error::StoreError;
    use crate::failure::OnStoreError;
    use crate::key::Key;
    use crate::store::MemoryStore;
    use crate::{Limit, Policy};

    fn engine(mode: OnStoreError) -> (Engine, Policy) {
        let policy = Policy::new("p", [Limit::gcra(4, Duration::from_secs(60)).unwrap()]).unwrap();
        let shared = super::super::testing::shared(MemoryStore::new());
        (Engine::new(&shared, [Rule::new(&policy, mode)]), policy)
    }

    #[test]
    fn a_timeout_is_load_decided_in_memory_whatever_the_mode() {
        let (engine, _) = engine(OnStoreError::Closed);
        let ticket = Ticket::unasked(0, Key::new("k"), 1);
        let timeout = StoreError::Timeout(Duration::from_millis(100));
        match engine.store_failed(&timeout, &ticket) {
            Settled::Decided(decision) => assert_eq!(decision.source(), DecisionSource::Local),
            _ => panic!("not decided in memory"),
        }
    }

    #[test]
    fn each_mode_decides_a_failed_store_its_way() {
        let failed = StoreError::Connection("refused".into());
        let source = |mode| {
            let (engine, _) = engine(mode);
            match engine.store_failed(&failed, &Ticket::unasked(0, Key::new("k"), 1)) {
                Settled::Decided(decision) => (decision.source(), decision.is_allowed()),
                _ => panic!("undecided"),
            }
        };
        assert_eq!(source(OnStoreError::Open), (DecisionSource::FailOpen, true));
        assert_eq!(
            source(OnStoreError::Closed),
            (DecisionSource::FailClosed, false)
        );
        let local = OnStoreError::Local { instances: 4 };
        assert_eq!(source(local), (DecisionSource::Local, true));
        // A rule the engine does not know has no decision.
        let (engine, _) = engine(OnStoreError::Open);
        let unknown = Ticket::unasked(7, Key::new("k"), 1);
        assert!(matches!(
            engine.store_failed(&failed, &unknown),
            Settled::Unavailable
        ));
    }

    #[test]
    fn open_fails_open_on_a_refusing_store_and_decides_in_memory_on_a_silent_one() {
        let circuit_open = |probed| {
            let (engine, _) = engine(OnStoreError::Open);
            let asked = std::time::Instant::now();
            assert!(engine.breakers.start_confirming(0, asked));
            engine.breakers.confirmed(0, asked, probed);
            let ticket = Ticket::unasked(0, Key::new("k"), 1);
            match engine.store_failed(&StoreError::CircuitOpen, &ticket) {
                Settled::Decided(decision) => decision.source(),
                _ => panic!("undecided"),
            }
        };
        assert_eq!(circuit_open(Probed::Silent), DecisionSource::Local);
        assert_eq!(circuit_open(Probed::Refused), DecisionSource::FailOpen);
    }
}

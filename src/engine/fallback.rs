//! Decisions without the store: its failure (by the rule's failure mode) and load (in memory,
//! whatever the mode). Every one is logged, at `warn` at most once a second (the circuit
//! breaker's transitions are logged too), at `debug` otherwise.

use super::{Engine, Settled, Ticket};
use crate::decision::{Decision, DecisionSource};
use crate::error::{Chain, StoreError};
use crate::failure::OnStoreError;

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

impl Engine {
    /// The store failed, or its circuit is open: the failure mode decides (a timeout, though,
    /// is load: decided in memory).
    #[cold]
    #[inline(never)]
    pub(crate) fn store_failed(&self, error: &StoreError, ticket: &Ticket) -> Settled {
        // A reply that did not come in time may be load as well as failure: see
        // `missed_deadline`. Only errors and an open circuit say the store is gone.
        if error.is_timeout() {
            return self.in_memory(ticket, "rate-limit store timed out; deciding in memory");
        }
        let Some(rule) = self.rules.get(ticket.rule) else {
            return Settled::Unavailable;
        };
        // A circuit open on silence fails open no more than a missed deadline does: a store
        // starved of CPU (beside a flood, on an overloaded node) is silent too, for as long as
        // it is starved, and every cool-down of it would be an unlimited window.
        if rule.mode == OnStoreError::Open
            && error.is_circuit_open()
            && self.breakers.silent(ticket.domain)
        {
            return self.in_memory(
                ticket,
                "rate-limit store is silent (circuit open); deciding in memory",
            );
        }
        let name = rule.policy.name();
        let mode = match rule.mode {
            OnStoreError::Open => "allowing request (fail open)",
            OnStoreError::Closed => "answering 503 (fail closed)",
            OnStoreError::Local { .. } => "deciding in memory (local fallback)",
        };
        warn_or_debug!(self.throttle, policy = name, error = %Chain(error), "rate-limit store failed; {mode}");
        crate::telemetry::store_failure(
            self.meter.store(),
            crate::telemetry::failure_reason(error),
        );
        Settled::Decided(match rule.mode {
            OnStoreError::Closed => Decision::fail_closed(rule.policy.name_arc()),
            OnStoreError::Local { .. } => self
                .local_decision(ticket)
                .unwrap_or_else(|| Decision::fail_open(rule.policy.name_arc())),
            OnStoreError::Open => Decision::fail_open(rule.policy.name_arc()),
        })
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
        let max = self.in_flight.max();
        warn_or_debug!(self.throttle, policy = decision.policy(), max, "{why}");
        Settled::Decided(decision)
    }

    /// The local fallback's decision on `ticket`: this instance's share of its rule's policy,
    /// charged in memory (the one place the fallback decides).
    fn local_decision(&self, ticket: &Ticket) -> Option<Decision> {
        let (store, scaled) = self.local.get(ticket.rule)?;
        Some(
            store
                .check_now(scaled, &ticket.key, ticket.cost)
                .with_source(DecisionSource::Local),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::breaker::Probed;
    use super::super::{Engine, Settled, Ticket};
    use super::OnStoreError;
    use crate::decision::DecisionSource;
    use crate::error::StoreError;
    use crate::key::Key;
    use crate::store::MemoryStore;
    use crate::{Limit, Policy};

    fn engine(mode: OnStoreError) -> (Engine, Policy) {
        let policy = Policy::new("p", [Limit::gcra(4, Duration::from_secs(60)).unwrap()]).unwrap();
        let shared = super::super::testing::shared(MemoryStore::new());
        (Engine::new(&shared, [(&policy, mode)].into_iter()), policy)
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

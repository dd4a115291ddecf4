//! Decisions without the store: its failure (by the failure mode) and load (in memory, whatever
//! the mode). Every one is logged, at `warn` at most once a second (the circuit breaker's
//! transitions are logged too), at `debug` otherwise.

use super::{Decider, Pending, Verdict};
use crate::decision::{Decision, DecisionSource};
use crate::error::{Chain, StoreError};
use crate::layer::settings::OnStoreError;

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

impl Decider {
    /// The store failed, or its circuit is open: the failure mode decides (a timeout, though,
    /// is load: decided in memory).
    pub(super) fn store_failed(&self, error: &StoreError, pending: &Pending) -> Verdict {
        let config = &*self.config;
        // A reply that did not come in time may be load as well as failure: see
        // `missed_deadline`. Only errors and an open circuit say the store is gone.
        if error.is_timeout() {
            return self.in_memory(pending, "rate-limit store timed out; deciding in memory");
        }
        // The id comes from this decider's own (immutable) rules: always there.
        let Some(rule) = config.rule(pending.rule) else {
            return Verdict::Respond(self.unavailable(pending.grpc));
        };
        let policy = rule.policy.name();
        let mode = match config.on_store_error {
            OnStoreError::Open => "allowing request (fail open)",
            OnStoreError::Closed => "answering 503 (fail closed)",
            OnStoreError::Local { .. } => "deciding in memory (local fallback)",
        };
        warn_or_debug!(config.throttle, policy, error = %Chain(error), "rate-limit store failed; {mode}");
        crate::telemetry::store_failure(
            self.meters.store(),
            crate::telemetry::failure_reason(error),
        );
        let decision = match config.on_store_error {
            OnStoreError::Closed => Decision::fail_closed(rule.policy.name_arc()),
            OnStoreError::Local { .. } => self
                .local_decision(pending)
                .unwrap_or_else(|| Decision::fail_open(rule.policy.name_arc())),
            OnStoreError::Open => Decision::fail_open(rule.policy.name_arc()),
        };
        self.decided(pending.rule, &pending.key, decision, pending.grpc, None)
    }

    /// Load, not failure: more store calls in flight than the layer allows, or a call that
    /// missed its deadline while the store answers others. Decided in memory with this
    /// instance's share of the limits, whatever the failure mode, so that load never buys an
    /// unlimited window (and never a 503: the store is busy, not gone).
    pub(super) fn in_memory(&self, pending: &Pending, why: &str) -> Verdict {
        let config = &*self.config;
        let Some((_, scaled)) = self.local.get(pending.rule) else {
            return Verdict::Respond(self.unavailable(pending.grpc));
        };
        let max = config.in_flight.max();
        warn_or_debug!(config.throttle, policy = scaled.name(), max, "{why}");
        match self.local_decision(pending) {
            Some(decision) => {
                self.decided(pending.rule, &pending.key, decision, pending.grpc, None)
            }
            None => Verdict::Respond(self.unavailable(pending.grpc)),
        }
    }

    /// The local fallback's decision on `pending`: this instance's share of its rule's policy,
    /// charged in memory (the one place the fallback decides).
    fn local_decision(&self, pending: &Pending) -> Option<Decision> {
        let (store, scaled) = self.local.get(pending.rule)?;
        Some(
            store
                .check_now(scaled, &pending.key, pending.cost)
                .with_source(DecisionSource::Local),
        )
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::super::Pending;
    use super::super::testing::{
        TestStore, decider, keyed, parts, policy, proceeds, responds, with_key,
    };
    use crate::decision::DecisionSource;
    use crate::error::StoreError;
    use crate::layer::OnStoreError;

    fn down() -> TestStore {
        let store = TestStore::default();
        store.fail(true);
        store
    }

    #[test]
    fn failing_closed_answers_503_never_429() {
        let d = decider(keyed(down(), policy("p", 1)).on_store_error(OnStoreError::Closed));
        for _ in 0..3 {
            let response = responds(d.start(&with_key("k")));
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            let decision = response.extensions().get::<crate::Decision>().unwrap();
            assert_eq!(decision.source(), DecisionSource::FailClosed);
        }
        let grpc = parts(
            "POST",
            "/pkg.Svc/Call",
            &[("x-api-key", "k"), ("content-type", "application/grpc")],
        );
        let response = responds(d.start(&grpc));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "14");
    }

    #[test]
    fn failing_open_lets_requests_through_and_says_so() {
        let d = decider(keyed(down(), policy("p", 1)).on_store_error(OnStoreError::Open));
        for _ in 0..3 {
            let decision = proceeds(d.start(&with_key("k")));
            assert_eq!(decision.source(), DecisionSource::FailOpen);
        }
    }

    #[test]
    fn the_local_fallback_decides_in_memory_with_this_instances_share() {
        let local = OnStoreError::Local { instances: 2 };
        let d = decider(keyed(down(), policy("p", 4)).on_store_error(local));
        for _ in 0..2 {
            assert_eq!(
                proceeds(d.start(&with_key("k"))).source(),
                DecisionSource::Local
            );
        }
        assert_eq!(responds(d.start(&with_key("k"))).status(), 429);
    }

    #[test]
    fn a_timeout_is_load_decided_in_memory_whatever_the_mode() {
        let d = decider(
            keyed(TestStore::default(), policy("p", 1)).on_store_error(OnStoreError::Closed),
        );
        let pending = Pending {
            rule: 0,
            domain: 0,
            admission: crate::layer::breaker::Admission::Call,
            grpc: None,
            key: crate::Key::new("k"),
            cost: 1,
            permit: None,
            _gate: None,
            asked: None,
            stamp: Default::default(),
        };
        let timeout = StoreError::Timeout(std::time::Duration::from_millis(100));
        match d.store_failed(&timeout, &pending) {
            super::Verdict::Proceed(decision, ..) => {
                assert_eq!(decision.source(), DecisionSource::Local);
            }
            super::Verdict::Respond(response) => panic!("answered {}", response.status()),
        }
    }
}

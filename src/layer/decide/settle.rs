//! Settling a store call: the breaker counts it, the deny cache and the local fallback's mirror
//! learn from it, and its decision is counted, traced and enforced (or only recorded, in shadow
//! mode). A call that missed its deadline is left to finish in the background.

use std::sync::Arc;
use std::time::Duration;

use super::{Decider, LOST_AFTER, PROBE_DEADLINES, Pending, Verdict};
use crate::decision::{Decision, DecisionSource};
use crate::error::StoreError;
use crate::key::Key;
use crate::layer::breaker::Outcome;
use crate::layer::grpc::Framing;
use crate::layer::headers::RateHeaders;
use crate::layer::held_lease::{HeldLease, LeaseStore};
use crate::layer::meters::{LeaseMeter, Undecided};
use crate::layer::refund::PendingRefund;
use crate::layer::settings::Shadow;
use crate::lease::Lease;
use crate::store::CheckFuture;

impl Decider {
    /// A call of `pending`'s domain missed its deadline: if nothing in the domain answered
    /// since it was asked, finds out (with a probe past the calls in flight, where the store
    /// offers one) whether the store is gone, and if so opens the domain's breaker at once,
    /// so that the requests after this one are decided at memory speed at any request rate.
    fn confirm_silence(&self, pending: &Pending) {
        let config = &*self.config;
        let Some(asked) = pending.asked else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !config.breakers.start_confirming(pending.domain, asked) {
            return;
        }
        let (breakers, domain) = (Arc::clone(&config.breakers), pending.domain);
        let probe = config.store.probe(domain);
        let within = PROBE_DEADLINES * config.deadline;
        runtime.spawn(async move {
            let gone = match probe {
                Some(probe) => !matches!(tokio::time::timeout(within, probe).await, Ok(Ok(()))),
                None => true,
            };
            breakers.confirmed(domain, asked, gone);
        });
    }

    /// Settles a store call that waited: the breaker counts it, then its decision or the
    /// failure mode's.
    pub(crate) fn verdict(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
    ) -> Verdict {
        self.record(pending, &outcome);
        let latency = pending.asked.map(|asked| asked.elapsed());
        if let Some(latency) = latency {
            self.meters.store_latency(latency);
        }
        // Only a store that waits can be late: what it admits is mirrored into the fallback,
        // which then knows this instance's spending when a later call misses its deadline.
        if let Ok(decision) = &outcome
            && decision.is_allowed()
            && decision.source() == DecisionSource::Store
        {
            self.local.mirror(pending.rule, &pending.key, pending.cost);
        }
        if let (Ok(decision), Some(asked)) = (&outcome, pending.asked) {
            self.deny_cache.insert(
                pending.rule,
                &pending.key,
                pending.cost,
                (asked, pending.stamp),
                decision,
            );
        }
        self.settle(outcome, pending, latency)
    }

    /// The store did not answer within the deadline. That alone does not show it failed: a
    /// flood that queues calls (here or in the store) looks the same for a while, and failing
    /// open on it would hand an attacker an unlimited window. So the request is decided in
    /// memory, and the call is left to finish in the background (holding its place among the
    /// calls in flight) for the breaker to learn whether the store answered late (alive,
    /// busy) or not within [`LOST_AFTER`] (gone).
    pub(crate) fn missed_deadline(&self, check: CheckFuture, pending: &mut Pending) -> Verdict {
        let breakers = Arc::clone(&self.config.breakers);
        let (domain, admission, permit) =
            (pending.domain, pending.admission, pending.permit.take());
        let lost_after = self.lost_after();
        let (latency, asked) = (self.meters.latency_handle(), pending.asked);
        // A late admission may have taken a concurrency lease that no response will hold:
        // given back at once (through a `HeldLease` dropped as soon as it is made).
        let lease_of = self.config.rule(pending.rule).map(|rule| {
            (
                Arc::clone(&self.config.store),
                rule.policy.clone(),
                pending.key.clone(),
            )
        });
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let outcome = tokio::time::timeout(lost_after, check).await;
                    breakers.record(domain, admission, outcome_of(outcome.as_ref().ok()));
                    if let (Ok(_), Some(asked)) = (&outcome, asked) {
                        latency.record(asked.elapsed());
                    }
                    if let (Ok(Ok(decision)), Some((store, policy, key))) = (&outcome, lease_of)
                        && let Some(lease) = decision.lease()
                    {
                        drop(HeldLease::new(
                            LeaseStore::Shared(store),
                            policy,
                            key,
                            lease,
                            LeaseMeter::uncounted(),
                        ));
                    }
                    drop(permit);
                });
            }
            Err(_) => breakers.record(domain, admission, Outcome::Timeout),
        }
        self.confirm_silence(pending);
        crate::telemetry::store_failure(self.meters.store(), "deadline");
        self.in_memory(
            pending,
            "rate-limit store missed the deadline; deciding in memory",
        )
    }

    pub(super) fn record(&self, pending: &Pending, outcome: &Result<Decision, StoreError>) {
        self.config
            .breakers
            .record(pending.domain, pending.admission, outcome_of(Some(outcome)));
    }

    pub(super) fn settle(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
        latency: Option<Duration>,
    ) -> Verdict {
        match outcome {
            Ok(decision) => {
                let refund = self.refund_of(&decision, pending);
                let mut verdict =
                    self.decided(pending.rule, &pending.key, decision, pending.grpc, latency);
                if let Verdict::Proceed(_, _, slot, _) = &mut verdict {
                    *slot = refund;
                }
                verdict
            }
            Err(error) => self.store_failed(&error, pending),
        }
    }

    /// What `decision` would give back after the response, if the layer refunds.
    fn refund_of(&self, decision: &Decision, pending: &Pending) -> Option<Box<PendingRefund>> {
        let config = &*self.config;
        let policy = &config.rule(pending.rule)?.policy;
        PendingRefund::of(
            config.refund.as_ref(),
            &config.store,
            policy,
            &pending.key,
            decision,
            pending.cost,
            self.lost_after(),
        )
        .map(Box::new)
    }

    /// Every decision ends here: counted, traced, then enforced (or, in shadow mode, only
    /// recorded). `latency`: how long the store took, when it was asked and waited for.
    pub(super) fn decided(
        &self,
        rule: usize,
        key: &Key,
        mut decision: Decision,
        grpc: Option<Framing>,
        latency: Option<Duration>,
    ) -> Verdict {
        decision.name_denied_key(key);
        let shadow = self.shadow(rule);
        let shadowed = shadow.is_on() && !decision.is_allowed();
        self.meters.decision(rule, &decision, shadowed);
        if shadowed {
            self.meters.undecided(rule, Undecided::Shadow);
        } else if decision.source() == DecisionSource::FailOpen {
            self.meters.undecided(rule, Undecided::StoreUnavailable);
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            crate::telemetry::trace(key, &decision, shadowed, latency);
        }
        let style = self.config.headers;
        if decision.is_allowed() || shadowed {
            let headers = match shadow {
                Shadow::Off => RateHeaders::of(&decision, style),
                Shadow::On => RateHeaders::default(),
                _ => RateHeaders::of(&decision, style).without_retry_after(),
            };
            let held = decision
                .lease()
                .and_then(|lease| self.hold(rule, key, &decision, lease));
            return Verdict::Proceed(decision, headers, None, held);
        }
        if decision.source() == DecisionSource::FailClosed {
            let mut response = self.unavailable(grpc);
            response.extensions_mut().insert(decision);
            return Verdict::Respond(response);
        }
        Verdict::Respond(self.reject(decision, grpc))
    }

    /// The lease of an admitted request, to be given back to the store that took it.
    fn hold(
        &self,
        rule: usize,
        key: &Key,
        decision: &Decision,
        lease: Lease,
    ) -> Option<Box<HeldLease>> {
        let (store, policy) = match decision.source() {
            DecisionSource::Local => {
                let (store, scaled) = self.local.get(rule)?;
                (LeaseStore::Local(store.clone()), scaled.clone())
            }
            _ => (
                LeaseStore::Shared(Arc::clone(&self.config.store)),
                self.config.rule(rule)?.policy.clone(),
            ),
        };
        let meter = self.meters.lease(rule);
        Some(Box::new(HeldLease::new(
            store,
            policy,
            key.clone(),
            lease,
            meter,
        )))
    }

    /// How long a call past its deadline may still answer: [`LOST_AFTER`], at least ten
    /// deadlines.
    fn lost_after(&self) -> Duration {
        LOST_AFTER.max(10 * self.config.deadline)
    }
}

/// How the breaker counts a call's end (`None`: no answer at all).
fn outcome_of(outcome: Option<&Result<Decision, StoreError>>) -> Outcome {
    match outcome {
        Some(Ok(_)) => Outcome::Success,
        Some(Err(error)) if error.is_timeout() => Outcome::Timeout,
        Some(Err(_)) => Outcome::Failure,
        None => Outcome::Timeout,
    }
}

#[cfg(test)]
mod tests {
    use std::future::IntoFuture;

    use http::StatusCode;

    use super::super::testing::{TestStore, decider, keyed, policy, proceeds, responds, with_key};
    use super::super::{Start, Verdict};
    use crate::decision::DecisionSource;
    use crate::layer::{OnStoreError, Shadow};
    use crate::store::MemoryStore;

    /// Asks the store through `d` for a request with key `key`, awaits and settles its answer.
    async fn asked(d: &super::Decider, key: &str) -> Verdict {
        match d.start(&with_key(key)) {
            Start::Check(check, pending) => d.verdict(check.into_future().await, &pending),
            other => panic!(
                "expected a store call, got {}",
                super::super::testing::name(&other)
            ),
        }
    }

    #[tokio::test]
    async fn a_denial_is_cached_and_answered_without_the_store() {
        let d = decider(keyed(TestStore::later(), policy("p", 1)));
        assert!(matches!(asked(&d, "k").await, Verdict::Proceed(..)));
        match asked(&d, "k").await {
            Verdict::Respond(response) => assert_eq!(response.status(), 429),
            Verdict::Proceed(..) => panic!("the second request of one an hour passed"),
        }
        // The store is not asked again: the deny cache answers at once.
        let response = responds(d.start(&with_key("k")));
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let decision = response.extensions().get::<crate::Decision>().unwrap();
        assert_eq!(decision.source(), DecisionSource::DenyCache);
        // Other keys still ask.
        assert!(matches!(d.start(&with_key("other")), Start::Check(..)));
    }

    #[tokio::test]
    async fn the_local_fallback_is_charged_with_what_a_waiting_store_admits() {
        let store = TestStore::later();
        let d = decider(keyed(store.clone(), policy("p", 2)).on_store_error(OnStoreError::local()));
        match asked(&d, "k").await {
            Verdict::Proceed(first, ..) => assert_eq!(first.source(), DecisionSource::Store),
            Verdict::Respond(response) => panic!("the first request answered {response:?}"),
        }
        store.fail(true);
        // One of two already admitted through the store: the fallback admits one more only.
        let second = proceeds(d.start(&with_key("k")));
        assert_eq!(second.source(), DecisionSource::Local);
        let third = responds(d.start(&with_key("k")));
        assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
        let decision = third.extensions().get::<crate::Decision>().unwrap();
        assert_eq!(decision.source(), DecisionSource::Local);
    }

    #[test]
    fn shadow_mode_never_denies() {
        let d = decider(keyed(MemoryStore::new(), policy("p", 1)).shadow(Shadow::On));
        assert!(proceeds(d.start(&with_key("k"))).is_allowed());
        for _ in 0..3 {
            let decision = proceeds(d.start(&with_key("k")));
            assert!(!decision.is_allowed(), "recorded as denied");
        }
        // Failing closed in shadow mode lets requests through too.
        let store = TestStore::default();
        store.fail(true);
        let closed = keyed(store, policy("p", 1)).on_store_error(OnStoreError::Closed);
        let d = decider(closed.shadow(Shadow::On));
        let decision = proceeds(d.start(&with_key("k")));
        assert_eq!(decision.source(), DecisionSource::FailClosed);
    }

    #[test]
    fn a_rules_own_shadow_mode_wins_over_the_layers() {
        use crate::layer::Rule;
        let key = || crate::key::Header::new("x-api-key").unwrap();
        let rule = Rule::new("/", policy("enforced", 1)).unwrap().key(key());
        let d = decider(
            crate::layer::RateLimitLayer::builder_per_route(MemoryStore::new())
                .rule(rule.shadow(Shadow::Off))
                .shadow(Shadow::On),
        );
        proceeds(d.start(&with_key("k")));
        assert_eq!(responds(d.start(&with_key("k"))).status(), 429);
    }
}

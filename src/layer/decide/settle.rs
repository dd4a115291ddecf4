//! The engine's outcome as the layer's verdict: counted, traced, then enforced (or only
//! recorded, in shadow mode), with the refund and the concurrency lease the response carries;
//! and the layer's own responses: a denial (429 or a gRPC status, with the rate-limit headers)
//! and fail closed (503 or gRPC `UNAVAILABLE`, never 429).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::{Decider, Pending, Verdict};
use crate::decision::{Decision, DecisionSource};
use crate::engine::{HeldLease, LeaseStore};
use crate::engine::{Settled, Ticket};
use crate::error::StoreError;
use crate::key::Key;
use crate::layer::meters::Undecided;
use crate::layer::reconcile::{Admission, After, PendingSettle};
use crate::layer::refund::PendingRefund;
use crate::layer::settings::{RejectBody, Shadow};
use crate::lease::Lease;
use crate::response::grpc::{self, Framing};
use crate::response::headers::RateHeaders;
use crate::response::problem;
use crate::store::CheckFuture;

impl Decider {
    /// Settles a store call that waited (see [`Engine::settle`](crate::engine::Engine::settle)).
    pub(crate) fn verdict(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
        headers: &HeaderMap,
    ) -> Verdict {
        let settled = self.engine.settle(outcome, &pending.ticket);
        self.finish(settled, &pending.ticket, headers)
    }

    /// The store missed the deadline (see
    /// [`Engine::missed_deadline`](crate::engine::Engine::missed_deadline)).
    pub(crate) fn missed_deadline(
        &self,
        check: CheckFuture,
        pending: &mut Pending,
        headers: &HeaderMap,
    ) -> Verdict {
        let settled = self.engine.missed_deadline(check, &mut pending.ticket);
        self.finish(settled, &pending.ticket, headers)
    }

    /// The verdict on the engine's outcome for the request with `headers`.
    pub(super) fn finish(&self, settled: Settled, ticket: &Ticket, headers: &HeaderMap) -> Verdict {
        let (decision, latency) = match settled {
            Settled::Store(decision, latency) => (decision, Some(latency)),
            Settled::Decided(decision) => (decision, None),
            Settled::Unavailable => {
                return Verdict::Respond(self.unavailable(Framing::of(headers)));
            }
        };
        let config = &*self.config;
        // Only the store's decisions are refunded; the local fallback's settle too.
        let after = if (config.refund.is_some() && latency.is_some()) || config.reconcile.is_some()
        {
            self.after(&decision, ticket)
        } else {
            None
        };
        let latency = latency.flatten();
        let mut verdict = self.decided(ticket.rule, &ticket.key, decision, headers, latency);
        if let Verdict::Proceed(_, _, slot, _) = &mut verdict {
            *slot = after;
        }
        verdict
    }

    /// What `decision` does once its response comes, if the layer refunds or settles: the
    /// refund of what it consumed, the settle of its estimate.
    #[inline(never)]
    fn after(&self, decision: &Decision, ticket: &Ticket) -> Option<Box<After>> {
        let config = &*self.config;
        let policy = self.engine.policy(ticket.rule)?;
        let patience = self.engine.lost_after();
        let refund = PendingRefund::of(
            config.refund.as_ref(),
            &config.store,
            policy,
            &ticket.key,
            decision,
            ticket.cost,
            patience,
        );
        let settle = config.reconcile.as_ref().and_then(|read| {
            let admission = Admission {
                rule: ticket.rule,
                decision,
                policy,
                key: &ticket.key,
                estimate: ticket.cost,
            };
            PendingSettle::of(
                admission,
                self.engine.denials(),
                &config.store,
                self.engine.local(ticket.rule),
                self.engine.mirror_target(ticket.rule),
                read,
                patience,
                &self.settle_log,
            )
        });
        (refund.is_some() || settle.is_some()).then(|| Box::new(After { refund, settle }))
    }

    /// Every decision ends here: counted, traced, then enforced (or, in shadow mode, only
    /// recorded). `latency`: how long the store took, when it was asked and waited for.
    pub(super) fn decided(
        &self,
        rule: usize,
        key: &Key,
        mut decision: Decision,
        headers: &HeaderMap,
        latency: Option<Duration>,
    ) -> Verdict {
        decision.name_denied_key(key);
        let shadow = self.shadow(rule);
        let shadowed = shadow.is_on() && !decision.is_allowed();
        self.meters.decision(rule, &decision, shadowed);
        if shadowed || decision.source() == DecisionSource::FailOpen {
            self.undecided(rule, shadowed);
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            traced(key, &decision, shadowed, latency);
        }
        if decision.is_allowed() || shadowed {
            let headers = match shadow {
                Shadow::Off => RateHeaders::of(&decision, self.config.headers),
                _ => self.shadow_headers(&decision, shadow),
            };
            let held = match decision.lease() {
                Some(lease) => self.hold(rule, key, &decision, lease),
                None => None,
            };
            return Verdict::Proceed(decision, headers, None, held);
        }
        Verdict::Respond(self.refused(decision, headers))
    }

    // The rare paths below are kept out of line (`#[cold]`): the admitting path of every
    // request stays short in code, and the instruction cache holds more of it.

    /// Counts a request let through without the limiter's verdict enforced: a denial in
    /// shadow mode (`shadowed`), else a store failure failing open.
    #[cold]
    #[inline(never)]
    fn undecided(&self, rule: usize, shadowed: bool) {
        let reason = if shadowed {
            Undecided::Shadow
        } else {
            Undecided::StoreUnavailable
        };
        self.meters.undecided(rule, reason);
    }

    /// The headers of a request let through in shadow mode `shadow` (not `Off`).
    #[cold]
    #[inline(never)]
    fn shadow_headers(&self, decision: &Decision, shadow: Shadow) -> RateHeaders {
        match shadow {
            Shadow::On => RateHeaders::default(),
            _ => RateHeaders::of(decision, self.config.headers).without_retry_after(),
        }
    }

    /// The layer's answer to a refused request: 503 (or gRPC `UNAVAILABLE`) failing closed,
    /// else the denial.
    #[cold]
    #[inline(never)]
    fn refused(&self, decision: Decision, headers: &HeaderMap) -> http::Response<bytes::Bytes> {
        if decision.source() == DecisionSource::FailClosed {
            let mut response = self.unavailable(Framing::of(headers));
            response.extensions_mut().insert(decision);
            return response;
        }
        self.reject(decision, Framing::of(headers))
    }

    /// The lease of an admitted request, to be given back to the store that took it.
    #[inline(never)]
    fn hold(
        &self,
        rule: usize,
        key: &Key,
        decision: &Decision,
        lease: Lease,
    ) -> Option<Box<HeldLease>> {
        let (store, policy) = match decision.source() {
            DecisionSource::Local => {
                let (store, scaled) = self.engine.local(rule)?;
                (LeaseStore::Local(store.clone()), scaled.clone())
            }
            _ => (
                LeaseStore::Shared(Arc::clone(&self.config.store)),
                self.engine.policy(rule)?.clone(),
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
}

/// Traces a decision at `debug` (out of line: tracing is off on the hot path by default).
#[cold]
#[inline(never)]
fn traced(key: &Key, decision: &Decision, shadowed: bool, latency: Option<Duration>) {
    crate::telemetry::trace(key, decision, shadowed, latency);
}

impl Decider {
    /// The denial: a gRPC status for gRPC calls (the custom rejection applies to the others),
    /// 429 otherwise, as text or a problem; the rate-limit headers (gRPC metadata) on both,
    /// and the decision in the response's extensions for the layers outside.
    pub(super) fn reject(&self, decision: Decision, grpc: Option<Framing>) -> Response<Bytes> {
        let config = &*self.config;
        let mut response = match (grpc, &config.rejection, config.reject_body) {
            (Some(framing), _, _) => grpc::status(
                framing,
                config.grpc_status.code(),
                &grpc::denial_message(&decision),
                Some((&decision, &config.grpc_domain)),
            ),
            (None, Some(custom), _) => custom(&decision),
            (None, None, RejectBody::ProblemJson) => problem::quota_exceeded(&decision),
            (None, None, _) if decision.exceeds_capacity() => text(
                StatusCode::TOO_MANY_REQUESTS,
                "request cost exceeds the rate limit\n",
            ),
            (None, None, _) => text(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n"),
        };
        RateHeaders::of(&decision, config.headers).write_missing(response.headers_mut());
        response.extensions_mut().insert(decision);
        response
    }

    /// Fail closed: 503, or gRPC `UNAVAILABLE`; never 429, the client did nothing wrong.
    pub(super) fn unavailable(&self, grpc: Option<Framing>) -> Response<Bytes> {
        match grpc {
            Some(framing) => {
                grpc::status(framing, grpc::UNAVAILABLE, "rate limiter unavailable", None)
            }
            None => self.error(StatusCode::SERVICE_UNAVAILABLE, "rate limiter unavailable"),
        }
    }

    /// Any other answer of the layer's own, `status` with a short `detail` (no full stop), in
    /// the layer's body style.
    pub(super) fn error(&self, status: StatusCode, detail: &'static str) -> Response<Bytes> {
        match self.config.reject_body {
            RejectBody::ProblemJson => problem::about_blank(status, detail),
            _ => text(status, format!("{detail}\n")),
        }
    }
}

/// A plain-text response.
pub(super) fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Bytes> {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
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
            Start::Check(check, pending) => {
                let headers = with_key(key).headers;
                d.verdict(check.into_future().await, &pending, &headers)
            }
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

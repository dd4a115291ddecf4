//! The layer's front of the [`Engine`](crate::engine::Engine): which rule applies to an HTTP
//! request, its key and cost ([`Decider::start`]); the engine decides; `settle.rs` turns its
//! outcome into a verdict (counted, traced, shadowed, enforced) and writes the layer's own
//! responses, `missing.rs` answers a request without a key.

#[cfg(test)]
mod failure_modes;
mod missing;
#[cfg(test)]
mod responds;
mod settle;
#[cfg(test)]
mod settles;
#[cfg(test)]
mod testing;

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use http::header::HeaderMap;
use http::request::Parts;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::decision::Decision;
use crate::engine::HeldLease;
use crate::engine::{self, Begin, Engine, Rule, Throttle, Ticket};
use crate::key::Key;
use crate::layer::layer_settings::LayerSettings;
use crate::layer::meters::Meters;
use crate::layer::reconcile::After;
use crate::layer::settings::Shadow;
use crate::response::headers::RateHeaders;
use crate::store::CheckFuture;

/// Decides requests by a layer's settings, with the state derived from them once.
pub(crate) struct Decider {
    pub(crate) config: Arc<LayerSettings>,
    /// How long a request waits for the store (the engine's deadline).
    pub(crate) deadline: std::time::Duration,
    engine: Engine,
    meters: Meters,
    /// Each rule's mode, by rule id: its own, else the layer's.
    shadow: Box<[Shadow]>,
    /// The logs of requests without a key, throttled apart from the store's: a dead store
    /// must not hide a misconfigured server.
    keyless_log: Throttle,
    /// The logs of settlements that failed, throttled apart from the store's decisions'.
    settle_log: Arc<Throttle>,
}

/// A store call under way. Whether its request is a gRPC call is read from the request's
/// headers when it settles, and only if the layer answers it itself.
pub(crate) struct Pending {
    ticket: Ticket,
}

/// A request waiting for another to refresh its key's expired denial.
pub(crate) struct Queued {
    queued: engine::Queued,
}

/// How a request starts.
pub(crate) enum Start {
    /// Ask the store.
    Check(CheckFuture, Pending),
    /// Wait at the gate (at most the deadline), then [`Decider::resume`].
    Wait(Arc<Semaphore>, Queued),
    /// Decided without waiting.
    Decided(Verdict),
    /// Call the inner service without limiting it.
    Unlimited,
}

/// What to do with the request.
pub(crate) enum Verdict {
    /// Call the inner service, with the decision in the request's extensions and these
    /// headers for its response; what to do once the response comes (the refund to send if
    /// it asks for it, the settle of an estimate to its real cost), and the request's
    /// concurrency lease (if any), held until its response body ends or is dropped (boxed:
    /// only requests that refund, settle or hold a lease pay for their size).
    Proceed(
        Decision,
        RateHeaders,
        Option<Box<After>>,
        Option<Box<HeldLease>>,
    ),
    /// Answer with this response.
    Respond(Response<Bytes>),
}

impl Decider {
    /// Derives what the settings imply: the engine of the rules, and their meters.
    pub(crate) fn new(config: Arc<LayerSettings>) -> Self {
        let mode = config.on_store_error;
        let rules = config.rules().map(|rule| Rule::new(&rule.policy, mode));
        let engine = Engine::new(&config.engine, rules);
        let meters = Meters::new(config.rules().map(|r| &r.policy));
        let shadow = config
            .rules()
            .map(|rule| rule.shadow.unwrap_or(config.shadow))
            .collect();
        Decider {
            deadline: config.engine.deadline(),
            config,
            engine,
            meters,
            shadow,
            keyless_log: Throttle::default(),
            settle_log: Arc::default(),
        }
    }

    fn shadow(&self, rule: usize) -> Shadow {
        self.shadow.get(rule).copied().unwrap_or_default()
    }

    /// Drops this layer's cached denials of `key` under the policy named `policy` (its
    /// override changed: they may no longer stand).
    pub(crate) fn forget_denials(&self, policy: &str, key: &Key) {
        self.engine.forget_denials(policy, key);
    }

    /// Forgets what this layer remembers of `key` under the policy named `policy`: the deny
    /// cache's denials and the local fallback's state, after the store's state was reset.
    pub(crate) fn forget(&self, policy: &str, key: &Key) {
        self.engine.forget(policy, key);
    }

    pub(crate) fn start(&self, parts: &Parts) -> Start {
        let config = &*self.config;
        if config.allow.iter().any(|allowed| allowed(parts)) {
            return Start::Unlimited;
        }
        // The first rule matching the request (the routes, then the default), and its id.
        let rules = config.routes.iter().chain(config.default.as_ref());
        let Some((rule_id, rule)) = rules.enumerate().find(|(_, r)| r.matches(parts)) else {
            return Start::Unlimited;
        };
        let key = match (*rule.key).extract(parts) {
            Some(key) => key,
            None => match self.keyless(rule_id, rule, parts) {
                Ok(key) => key,
                Err(start) => return start,
            },
        };
        let cost = config.cost.as_ref().map_or(1, |cost| cost(parts));
        self.begun(self.engine.begin(rule_id, key, cost), &parts.headers)
    }

    /// After waiting at the gate: with `turn`, or without it if the deadline passed first
    /// (`headers`: the request's).
    pub(crate) fn resume(
        &self,
        queued: Queued,
        turn: Option<OwnedSemaphorePermit>,
        headers: &HeaderMap,
    ) -> Start {
        self.begun(self.engine.resume(queued.queued, turn), headers)
    }

    /// What the engine's start means for the request with `headers`.
    fn begun(&self, begin: Begin, headers: &HeaderMap) -> Start {
        match begin {
            Begin::Ask(check, ticket) => Start::Check(check, Pending { ticket }),
            Begin::Wait(gate, queued) => Start::Wait(gate, Queued { queued }),
            Begin::Done(settled, ticket) => Start::Decided(self.finish(settled, &ticket, headers)),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::request::Parts;

    use super::Start;
    use super::testing::{decider, keyed, name, parts, policy, proceeds, with_key};
    use crate::key::Header;
    use crate::layer::{RateLimitLayer, Rule};
    use crate::store::MemoryStore;

    #[test]
    fn the_first_matching_rule_decides_then_the_layers_own_policy() {
        let api_key = || Header::new("x-api-key").unwrap();
        let d = decider(
            RateLimitLayer::builder(MemoryStore::new(), policy("api", 5))
                .key(api_key())
                .rule(
                    Rule::new("POST /login", policy("login", 1))
                        .unwrap()
                        .key(api_key()),
                )
                .rule(Rule::new("/v1/*", policy("v1", 1)).unwrap().key(api_key())),
        );
        let of = |method, path| {
            let start = d.start(&parts(method, path, &[("x-api-key", "k")]));
            proceeds(start).policy().to_owned()
        };
        assert_eq!(of("POST", "/login"), "login");
        assert_eq!(of("GET", "/login"), "api");
        assert_eq!(of("GET", "/v1/users"), "v1");
        assert_eq!(of("GET", "/other"), "api");
    }

    #[test]
    fn a_per_route_layer_leaves_unmatched_requests_unlimited() {
        let rule = Rule::new("POST /login", policy("login", 1)).unwrap();
        let d = decider(
            RateLimitLayer::builder_per_route(MemoryStore::new())
                .rule(rule.key(Header::new("x-api-key").unwrap())),
        );
        let start = d.start(&parts("GET", "/", &[("x-api-key", "k")]));
        assert!(matches!(start, Start::Unlimited), "{}", name(&start));
    }

    #[test]
    fn allow_rules_skip_limiting() {
        let d = decider(
            keyed(MemoryStore::new(), policy("p", 1))
                .allow_if(|parts: &Parts| parts.uri.path() == "/healthz"),
        );
        for _ in 0..3 {
            let start = d.start(&parts("GET", "/healthz", &[("x-api-key", "k")]));
            assert!(matches!(start, Start::Unlimited), "{}", name(&start));
        }
    }

    #[test]
    fn the_cost_is_charged() {
        let d = decider(keyed(MemoryStore::new(), policy("p", 5)).cost(|_: &Parts| 2));
        assert_eq!(proceeds(d.start(&with_key("k"))).remaining(), Some(3));
    }
}

//! A layer's settings as its builder set them, which the layer and all its services share:
//! the store, the rules (policy and key per route), and how to answer. What follows from them
//! is derived once, in [`Decider::new`](super::decide::Decider::new).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http::request::Parts;

use super::refund::RefundFn;
use super::rule::Rule;
use super::settings::GrpcStatus;
use super::settings::MissingKey;
use super::settings::RejectBody;
use super::settings::Shadow;
use super::usage::ReadFn;
use crate::decision::Decision;
use crate::engine;
use crate::failure::OnStoreError;
use crate::policy::Policy;
use crate::response::HeaderStyle;
use crate::store::Store;

/// The default store deadline: no request waits longer than this on the store.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);

pub(crate) type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
pub(crate) type RejectFn = dyn Fn(&Decision) -> Response<Bytes> + Send + Sync;
pub(crate) type AllowFn = dyn Fn(&Parts) -> bool + Send + Sync;

#[derive(Clone)]
pub(crate) struct LayerSettings {
    pub(crate) store: Arc<dyn Store>,
    /// Route rules, tried in order; then the default rule, if any.
    pub(crate) routes: Vec<Rule>,
    pub(crate) default: Option<Rule>,
    /// Requests any of these accept skip limiting.
    pub(crate) allow: Vec<Arc<AllowFn>>,
    pub(crate) missing_key: MissingKey,
    pub(crate) cost: Option<Arc<CostFn>>,
    pub(crate) on_store_error: OnStoreError,
    /// What the layer's engines share (the deadline, the breakers, the bound on calls in
    /// flight, the local fallback's memory), made with the settings so that every clone of
    /// the layer and every reload decides with the same state. The deny cache, which
    /// [`Decider::new`](super::decide::Decider::new) makes, names rules by their index here,
    /// so it belongs to exactly these rules.
    pub(crate) engine: engine::Shared,
    pub(crate) headers: HeaderStyle,
    pub(crate) grpc_status: GrpcStatus,
    /// The `ErrorInfo.domain` of a gRPC denial's details.
    pub(crate) grpc_domain: Arc<str>,
    pub(crate) reject_body: RejectBody,
    pub(crate) rejection: Option<Arc<RejectFn>>,
    /// The shadow mode of rules that do not set their own.
    pub(crate) shadow: Shadow,
    pub(crate) refund: Option<Arc<RefundFn>>,
    /// How a response says its request's real cost, to settle the estimate to.
    pub(crate) reconcile: Option<Arc<ReadFn>>,
}

impl LayerSettings {
    /// The defaults, with no rule yet.
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        let settings = engine::Settings::new(DEFAULT_DEADLINE);
        LayerSettings {
            engine: engine::Shared::new(Arc::clone(&store), settings),
            store,
            routes: Vec::new(),
            default: None,
            allow: Vec::new(),
            missing_key: MissingKey::default(),
            cost: None,
            on_store_error: OnStoreError::default(),
            headers: HeaderStyle::default(),
            grpc_status: GrpcStatus::default(),
            grpc_domain: Arc::from(crate::response::grpc::DEFAULT_DOMAIN),
            reject_body: RejectBody::default(),
            rejection: None,
            shadow: Shadow::Off,
            refund: None,
            reconcile: None,
        }
    }

    /// With `policy` as the layer's own, keyed by the peer IP.
    pub(crate) fn with_default(mut self, policy: Policy) -> Self {
        self.default = Some(Rule::all(policy));
        self
    }

    /// The same settings with `rules` in place of every rule (the layer's own policy too).
    pub(crate) fn with_rules(&self, rules: Vec<Rule>) -> Self {
        LayerSettings {
            routes: rules,
            default: None,
            ..self.clone()
        }
    }

    /// Every rule in the order they are tried: the routes, then the default. A rule's index
    /// here is its id.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.routes.iter().chain(self.default.as_ref())
    }
}

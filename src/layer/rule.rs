//! A rule: which requests a policy applies to, and the key it counts them under.

use std::sync::Arc;

use http::request::Parts;

use super::route_pattern::RoutePattern;
use super::settings::Shadow;
use crate::key::KeyExtractor;
use crate::policy::Policy;

/// A policy, the key it counts under, and the requests it applies to (all, for the layer's
/// default rule).
#[derive(Clone)]
pub(crate) struct Rule {
    pub(crate) pattern: Option<RoutePattern>,
    pub(crate) policy: Policy,
    pub(crate) key: Arc<dyn KeyExtractor>,
    /// Its own shadow mode; `None`: the layer's.
    pub(crate) shadow: Option<Shadow>,
}

impl Rule {
    pub(crate) fn matches(&self, parts: &Parts) -> bool {
        self.pattern.as_ref().is_none_or(|p| p.matches(parts))
    }
}

//! A rule: which requests a policy applies to, and the key it counts them under.

use std::sync::Arc;

use http::request::Parts;

use super::route_pattern::RoutePattern;
use super::settings::Shadow;
use crate::error::ConfigError;
use crate::key::{KeyExtractor, PeerIp};
use crate::policy::Policy;

/// A policy, the requests it applies to, and the key it counts them under: one route of a
/// [`RateLimitLayer`](super::RateLimitLayer)
/// ([`RateLimitBuilder::rule`](super::RateLimitBuilder::rule),
/// [`Handle::replace_rules`](super::Handle::replace_rules)).
///
/// The key is the socket peer's IP ([`PeerIp`]) until [`key`](Self::key) says otherwise; the
/// shadow mode is the layer's until [`shadow`](Self::shadow) sets one of the rule's own.
///
/// ```
/// use std::time::Duration;
/// use redlimit::key::Header;
/// use redlimit::layer::{Rule, Shadow};
/// use redlimit::{Limit, Policy};
///
/// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
/// let api = Policy::new("api", [Limit::gcra(1000, Duration::from_secs(60))?])?;
/// let rules = [
///     Rule::new("POST /login", login)?.shadow(Shadow::On),
///     Rule::new("/v1/*", api)?.key(Header::new("x-api-key")?),
/// ];
/// assert_eq!(rules[1].policy().name(), "api");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Rule {
    /// `None`: every request.
    pub(super) pattern: Option<RoutePattern>,
    pub(super) policy: Policy,
    pub(super) key: Arc<dyn KeyExtractor>,
    /// Its own shadow mode; `None`: the layer's.
    pub(super) shadow: Option<Shadow>,
}

impl Rule {
    /// Limits requests matching `route` by `policy`.
    ///
    /// `route` is `[METHOD] PATH`: `"POST /login"`, `"/v1/*"`, `"/grpc.health.v1.Health/Check"`.
    /// A path ending in `*` matches every URI path with that prefix; any other path matches the
    /// route the request matched in axum (`"/users/{id}"`, as written in the router) or, outside
    /// axum, the URI path exactly (for tonic, `/package.Service/Method`). A malformed pattern
    /// is a [`ConfigError::InvalidRoute`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::layer::Rule;
    /// use redlimit::{Limit, Policy};
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let rule = Rule::new("POST /login", login.clone())?;
    /// assert!(Rule::new("login", login).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(route: &str, policy: Policy) -> Result<Rule, ConfigError> {
        Ok(Rule {
            pattern: Some(RoutePattern::parse(route)?),
            ..Rule::all(policy)
        })
    }

    /// Limits every request by `policy` (as a layer's own policy does): put it after the
    /// route rules, which it would otherwise shadow.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::layer::Rule;
    /// use redlimit::{Limit, Policy};
    /// let api = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let rule = Rule::all(api);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn all(policy: Policy) -> Rule {
        Rule {
            pattern: None,
            policy,
            key: Arc::new(PeerIp),
            shadow: None,
        }
    }

    /// How to key the requests this rule limits (default: [`PeerIp`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::Header;
    /// use redlimit::layer::Rule;
    /// # use redlimit::{Limit, Policy};
    /// # let api = Policy::new("api", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let rule = Rule::new("/v1/*", api)?.key(Header::new("x-api-key")?);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    #[must_use]
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = Arc::new(key);
        self
    }

    /// A shadow mode of the rule's own, whatever the layer's
    /// ([`RateLimitBuilder::shadow`](super::RateLimitBuilder::shadow)) is: roll out one route's
    /// new limit in shadow while the others enforce theirs.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::layer::{Rule, Shadow};
    /// # use redlimit::{Limit, Policy};
    /// # let login = Policy::new("login", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let rule = Rule::new("POST /login", login)?.shadow(Shadow::On);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    #[must_use]
    pub fn shadow(mut self, shadow: Shadow) -> Self {
        self.shadow = Some(shadow);
        self
    }

    /// The rule's policy.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::layer::Rule;
    /// # use redlimit::{Limit, Policy};
    /// # let api = Policy::new("api", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// assert_eq!(Rule::all(api).policy().name(), "api");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub(super) fn matches(&self, parts: &Parts) -> bool {
        self.pattern.as_ref().is_none_or(|p| p.matches(parts))
    }
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("route", &self.pattern)
            .field("policy", &self.policy.name())
            .field("shadow", &self.shadow)
            .finish_non_exhaustive()
    }
}

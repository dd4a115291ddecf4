//! The file: TOML text to validated policies and rules.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use crate::error::ConfigError;
use crate::key::{ClientIp, KeyExtractor, PeerIp, PerLimit, parse_spec_with};
use crate::layer::{Rule, Shadow};
use crate::policy::Policy;
use limit::RawLimit;

/// A validated config file: named policies, route rules, an optional default rule.
///
/// The format (every field required unless marked optional; unknown fields are errors):
///
/// ```toml
/// allow_no_rules = false      # optional: a file without any [[route]] or [default] is an
///                             # error (ConfigError::NoRules) unless this says true
/// [client_ip]                 # optional: `ip` in key specs is the client behind these proxies
/// trusted_proxies = ["10.0.0.0/8"]   # (redlimit::key::ClientIp), not the socket peer
/// ipv6_prefix = 64            # optional: IPv6 clients grouped by this prefix (default 64)
///
/// [[policy]]                  # one per policy; names are unique
/// name = "api"
/// limits = [                  # 1 to 16 limits, all checked together
///   { algorithm = "gcra", rate = "1000/1m" },
///   { algorithm = "gcra", rate = "50/1s" },
///   # optional `key`: this limit counts under its own key (a hierarchical quota, see
///   # redlimit::key::PerLimit); the others count under the rule's key
///   { algorithm = "fixed-window", rate = "100000/1h", key = "header:x-tenant" },
///   # optional `calendar`: a fixed window whose windows follow the calendar (a calendar
///   # window, redlimit::Limit::calendar): the rate is N/day, N/week, N/month or N/year,
///   # `time_zone` is IANA's (default UTC), `anchor` where windows start (default: midnight,
///   # Monday, the 1st, January 1st; see redlimit::calendar::Calendar::parse)
///   { algorithm = "fixed-window", rate = "5000000/month",
///     calendar = { time_zone = "Europe/Berlin", anchor = "15T00:00" } },
/// ]
///
/// [[route]]                   # tried in order; the first match applies
/// route = "POST /login"       # [METHOD] /path, or /prefix* (see redlimit::layer::Rule::new)
/// policy = "api"              # a policy named above
/// key = "ip"                  # ip, header:NAME, query:NAME, route, global, joined by +
/// shadow = "on"               # optional: off (default), on, on-with-headers (see Shadow)
///
/// [default]                   # optional: every request no route matched
/// policy = "api"
/// key = "header:x-api-key"
/// ```
///
/// Algorithms: `fixed-window`, `sliding-window`, `sliding-log`, `token-bucket`, `gcra`; and
/// `calendar`, which is `fixed-window` with a `calendar` (only fixed windows follow one).
///
/// ```
/// use redlimit::config::ConfigFile;
/// let file = ConfigFile::parse(r#"
///     [[policy]]
///     name = "api"
///     limits = [{ algorithm = "gcra", rate = "100/1m" }]
///     [default]
///     policy = "api"
///     key = "ip"
/// "#)?;
/// assert_eq!(file.policies()[0].name(), "api");
///
/// let err = ConfigFile::parse("[default]\npolicy = \"nope\"\nkey = \"ip\"\n").unwrap_err();
/// assert_eq!(err.to_string(), "line 2: default.policy: no policy named `nope`");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ConfigFile {
    policies: Vec<Policy>,
    routes: Vec<Rule>,
    default: Option<Rule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    allow_no_rules: bool,
    client_ip: Option<RawClientIp>,
    #[serde(default)]
    policy: Vec<RawPolicy>,
    #[serde(default)]
    route: Vec<RawRoute>,
    default: Option<RawDefault>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClientIp {
    trusted_proxies: Spanned<Vec<String>>,
    ipv6_prefix: Option<Spanned<u8>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Spanned<String>,
    limits: Spanned<Vec<RawLimit>>,
    penalty: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    route: Spanned<String>,
    policy: Spanned<String>,
    key: Spanned<String>,
    shadow: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefault {
    policy: Spanned<String>,
    key: Spanned<String>,
    shadow: Option<Spanned<String>>,
}

impl ConfigFile {
    /// Parses and validates TOML text; a [`ConfigError::InFile`] names the line and field at
    /// fault. A file without any rule (no `[[route]]`, no `[default]`: an empty file, or one
    /// cut short) is a [`ConfigError::NoRules`] unless it says `allow_no_rules = true`.
    ///
    /// ```
    /// use redlimit::config::ConfigFile;
    /// let err = ConfigFile::parse(r#"
    /// [[policy]]
    /// name = "api"
    /// limits = [{ algorithm = "gcra", rate = "100 per minute" }]
    /// "#).unwrap_err();
    /// assert!(err.to_string().starts_with("line 4: policy.limits.rate: invalid rate"));
    /// ```
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let at = |start: usize, field: &str, reason: String| ConfigError::InFile {
            line: line_of(text, start),
            field: field.to_owned(),
            reason,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let start = e.span().map_or(0, |span| span.start);
            at(start, "toml", e.message().trim().replace('\n', " "))
        })?;

        let ip: Arc<dyn KeyExtractor> = match &raw.client_ip {
            None => Arc::new(PeerIp),
            Some(client_ip) => {
                let proxies = &client_ip.trusted_proxies;
                let mut extractor = ClientIp::trusting(proxies.get_ref()).map_err(|e| {
                    at(
                        proxies.span().start,
                        "client_ip.trusted_proxies",
                        e.to_string(),
                    )
                })?;
                if let Some(len) = &client_ip.ipv6_prefix {
                    extractor = extractor.ipv6_prefix(*len.get_ref()).map_err(|e| {
                        at(len.span().start, "client_ip.ipv6_prefix", e.to_string())
                    })?;
                }
                Arc::new(extractor)
            }
        };
        let mut policies: Vec<Policy> = Vec::with_capacity(raw.policy.len());
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut limit_keys: Vec<Vec<(usize, Arc<dyn KeyExtractor>)>> = Vec::new();
        for policy in raw.policy {
            let name = policy.name.get_ref();
            if by_name.contains_key(name) {
                let reason = format!("a second policy named `{name}`");
                return Err(at(policy.name.span().start, "policy.name", reason));
            }
            let mut limits = Vec::with_capacity(policy.limits.get_ref().len());
            let mut own_keys = Vec::new();
            for (position, limit) in policy.limits.get_ref().iter().enumerate() {
                if let Some(key) = &limit.key {
                    let extractor = parse_spec_with(key.get_ref(), &ip)
                        .map_err(|e| at(key.span().start, "policy.limits.key", e.to_string()))?;
                    own_keys.push((position, extractor));
                }
                let limit = limit
                    .limit()
                    .map_err(|(start, field, reason)| at(start, field, reason))?;
                limits.push(limit);
            }
            let checked = Policy::new(name.as_str(), limits).map_err(|e| {
                let (start, field) = match e {
                    ConfigError::InvalidPolicyName(_) => (policy.name.span().start, "policy.name"),
                    _ => (policy.limits.span().start, "policy.limits"),
                };
                at(start, field, e.to_string())
            })?;
            let checked = match &policy.penalty {
                None => checked,
                Some(penalty) => crate::duration::parse(penalty.get_ref())
                    .and_then(|d| checked.penalty(d))
                    .map_err(|e| at(penalty.span().start, "policy.penalty", e.to_string()))?,
            };
            by_name.insert(name.clone(), policies.len());
            policies.push(checked);
            limit_keys.push(own_keys);
        }

        let rule = |route: Option<&Spanned<String>>,
                    policy: &Spanned<String>,
                    key: &Spanned<String>,
                    shadow: Option<&Spanned<String>>,
                    table: &str|
         -> Result<Rule, ConfigError> {
            let shadow = shadow
                .map(|shadow| {
                    shadow.get_ref().parse::<Shadow>().map_err(|_| {
                        at(
                            shadow.span().start,
                            &format!("{table}.shadow"),
                            format!(
                                "`{}`: expected off, on or on-with-headers",
                                shadow.get_ref()
                            ),
                        )
                    })
                })
                .transpose()?;
            let id = by_name.get(policy.get_ref()).ok_or_else(|| {
                let reason = format!("no policy named `{}`", policy.get_ref());
                at(policy.span().start, &format!("{table}.policy"), reason)
            })?;
            let policy = policies[*id].clone();
            let rule = match route {
                Some(route) => Rule::new(route.get_ref(), policy).map_err(|e| {
                    at(route.span().start, &format!("{table}.route"), e.to_string())
                })?,
                None => Rule::all(policy),
            };
            let key_extractor = parse_spec_with(key.get_ref(), &ip)
                .map_err(|e| at(key.span().start, &format!("{table}.key"), e.to_string()))?;
            let rule = if limit_keys[*id].is_empty() {
                rule.key(key_extractor)
            } else {
                rule.key(
                    limit_keys[*id]
                        .iter()
                        .fold(PerLimit::new(key_extractor), |per, (position, own)| {
                            per.limit_dyn(*position, Arc::clone(own))
                        }),
                )
            };
            Ok(match shadow {
                Some(shadow) => rule.shadow(shadow),
                None => rule,
            })
        };
        let routes = raw
            .route
            .iter()
            .map(|r| {
                rule(
                    Some(&r.route),
                    &r.policy,
                    &r.key,
                    r.shadow.as_ref(),
                    "route",
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let default = raw
            .default
            .as_ref()
            .map(|d| rule(None, &d.policy, &d.key, d.shadow.as_ref(), "default"))
            .transpose()?;
        // Truncate-then-write leaves an empty file for a moment: applying it would open every
        // route, so only a file that says so may limit nothing.
        if routes.is_empty() && default.is_none() && !raw.allow_no_rules {
            return Err(ConfigError::NoRules);
        }
        Ok(ConfigFile {
            policies,
            routes,
            default,
        })
    }

    /// Reads and [`parse`](Self::parse)s the file at `path`; an unreadable file is a
    /// [`ConfigError::ReadFile`].
    ///
    /// ```
    /// use redlimit::config::ConfigFile;
    /// let file = ConfigFile::load(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redlimit.toml"))?;
    /// assert!(!file.policies().is_empty());
    /// assert!(ConfigFile::load("/nonexistent/redlimit.toml").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::ReadFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        ConfigFile::parse(&text)
    }

    /// The policies, in the file's order.
    ///
    /// ```
    /// use redlimit::config::ConfigFile;
    /// use redlimit::ConfigError;
    /// assert_eq!(ConfigFile::parse("").unwrap_err(), ConfigError::NoRules);
    /// let file = ConfigFile::parse("allow_no_rules = true")?;
    /// assert!(file.policies().is_empty() && file.rules().is_empty());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// The rules, in the order they are tried: the routes, then the default rule (if any),
    /// for [`RateLimitBuilder::rules`](crate::layer::RateLimitBuilder::rules) or
    /// [`Handle::replace_rules`](crate::layer::Handle::replace_rules).
    ///
    /// ```
    /// use redlimit::config::ConfigFile;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::RateLimitLayer;
    /// let file = ConfigFile::load(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redlimit.toml"))?;
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
    ///     .rules(file.rules())
    ///     .deny_cache(0)
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn rules(&self) -> Vec<Rule> {
        self.routes.iter().chain(&self.default).cloned().collect()
    }
}

impl std::str::FromStr for ConfigFile {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ConfigFile::parse(text)
    }
}

impl std::fmt::Debug for ConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigFile")
            .field("policies", &self.policies)
            .field("routes", &self.routes.len())
            .field("default", &self.default.as_ref().map(|r| r.policy().name()))
            .finish()
    }
}

/// The 1-based line of byte offset `start` in `text`.
fn line_of(text: &str, start: usize) -> usize {
    let start = start.min(text.len());
    text.as_bytes()[..start]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

mod limit;
#[cfg(test)]
mod tests;

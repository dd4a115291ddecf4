//! A descriptor rule: what a matched descriptor is limited by, and its stats key.

use std::sync::Arc;

use super::limit::RlsLimit;
use super::wildcard::wildcard_match;
use crate::rls::stats::StatsKeys;

/// One level of a rule's path from its domain: the descriptor's key and value as the Go service
/// stores them (`key` or `key_value`), and what decides that level's part of a stats key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Level {
    /// `key`, or `key_value` when the descriptor has a value.
    pub(crate) composite: String,
    /// The composite split on `*` when it holds one.
    pub(crate) wildcard: Option<Vec<String>>,
    pub(crate) value_to_metric: bool,
    pub(crate) share_threshold: bool,
}

/// The rule of one configured descriptor that has a `rate_limit` (or our `rate_limits`): its
/// limits and the flags the Go service reads beside them.
///
/// ```
/// use redlimit::rls::config::RlsConfig;
/// let config = RlsConfig::parse([("c.yaml", "
/// domain: edge
/// descriptors:
///   - key: remote_address
///     shadow_mode: true
///     rate_limit: {unit: second, requests_per_unit: 10, name: per-ip, replaces: [{name: global}]}
/// ")], false)?;
/// let rule = config.domain("edge").unwrap().find(&[("remote_address", "10.0.0.1")]).unwrap();
/// assert!(rule.shadow_mode() && !rule.quota_mode() && !rule.is_unlimited());
/// assert_eq!(rule.replaces(), ["global"]);
/// assert_eq!(rule.full_key(), "edge.remote_address");
/// assert_eq!(rule.stats_key("edge", &[("remote_address", "10.0.0.1")]), "edge.remote_address");
/// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RlsRule {
    pub(crate) limits: Vec<RlsLimit>,
    pub(crate) unlimited: bool,
    /// The `name` of an unlimited `rate_limit` (it has no [`RlsLimit`] to carry it).
    pub(crate) unlimited_name: Option<String>,
    /// The `requests_per_unit` written beside `unlimited: true` (shown by `/rlconfig` only).
    pub(crate) unlimited_requests_per_unit: u32,
    pub(crate) shadow_mode: bool,
    pub(crate) quota_mode: bool,
    pub(crate) detailed_metric: bool,
    pub(crate) replaces: Vec<String>,
    pub(crate) metadata: Option<serde_json::Value>,
    pub(crate) full_key: String,
    pub(crate) path: String,
    pub(crate) levels: Vec<Level>,
    /// The metric keys of its stats key when that holds no request value (no
    /// `detailed_metric`, no `value_to_metric`): the stats key is then its full key.
    pub(crate) stats_keys: Option<Arc<StatsKeys>>,
}

impl RlsRule {
    /// The limits, checked and charged together; empty if and only if the rule is
    /// `unlimited`. The Go service has one per rule; several come from our `rate_limits`.
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: d
    /// descriptors:
    ///   - key: k
    ///     rate_limits:
    ///       - {unit: second, requests_per_unit: 10}
    ///       - {unit: day, requests_per_unit: 1000}
    /// ")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "v")]).unwrap().limits().len(), 2);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn limits(&self) -> &[RlsLimit] {
        &self.limits
    }

    /// `unlimited: true`: the descriptor is always OK, never counted (`limit_remaining` is
    /// `u32::MAX` in the Go service's answers).
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}}\n")], false)?;
    /// let rule = c.domain("d").unwrap().find(&[("k", "v")]).unwrap();
    /// assert!(rule.is_unlimited() && rule.limits().is_empty());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn is_unlimited(&self) -> bool {
        self.unlimited
    }

    /// `shadow_mode: true`: over the limit is reported (stats, logs) but answered OK.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}}\n")], false)?;
    /// assert!(!c.domain("d").unwrap().find(&[("k", "v")]).unwrap().shadow_mode());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn shadow_mode(&self) -> bool {
        self.shadow_mode
    }

    /// `quota_mode: true`: over the limit makes the request OVER_LIMIT only when every
    /// quota-mode descriptor of the request is over.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, quota_mode: true, rate_limit: {unlimited: true}}\n")], false)?;
    /// assert!(c.domain("d").unwrap().find(&[("k", "v")]).unwrap().quota_mode());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn quota_mode(&self) -> bool {
        self.quota_mode
    }

    /// `detailed_metric: true`: the stats key holds every request value (see
    /// [`stats_key`](Self::stats_key)).
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unlimited: true}}\n")], false)?;
    /// assert!(!c.domain("d").unwrap().find(&[("k", "v")]).unwrap().detailed_metric());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn detailed_metric(&self) -> bool {
        self.detailed_metric
    }

    /// The metric keys made with the configuration, if its stats key holds no request value.
    pub(crate) fn stats_keys(&self) -> Option<&Arc<StatsKeys>> {
        self.stats_keys.as_ref()
    }

    /// The names of the limits this rule's limits replace: when a request's descriptors match
    /// several rules, a rule one of whose limits is named here is not checked.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: a}, {name: b}]}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "v")]).unwrap().replaces(), ["a", "b"]);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// The names of this rule's limits (what another rule's `replaces` refers to), the
    /// `name` of an unlimited `rate_limit` included.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1, name: n}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("k", "v")]).unwrap().names().collect::<Vec<_>>(), ["n"]);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.limits
            .iter()
            .filter_map(RlsLimit::name)
            .chain(self.unlimited_name.as_deref())
    }

    /// The descriptor's `metadata` (returned in the response's dynamic metadata), if it has
    /// any.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, metadata: {team: a}, rate_limit: {unlimited: true}}\n")], false)?;
    /// let meta = c.domain("d").unwrap().find(&[("k", "v")]).unwrap().metadata().unwrap();
    /// assert_eq!(meta["team"], "a");
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn metadata(&self) -> Option<&serde_json::Value> {
        self.metadata.as_ref()
    }

    /// The rule's key as the Go service names it in `/rlconfig` and in its default stats:
    /// the domain, then each level's `key` or `key_value`, joined by dots.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: a, value: b, descriptors: [{key: c, rate_limit: {unlimited: true}}]}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("a", "b"), ("c", "x")]).unwrap().full_key(), "d.a_b.c");
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn full_key(&self) -> &str {
        &self.full_key
    }

    /// A stable identity of the rule inside its domain, for counter keys: each level's `key`
    /// or `key_value` with `\` and `.` escaped by a `\`, joined by dots. Two rules of a domain
    /// never share one (the Go service's [`full_key`](Self::full_key) can: a key `a.b` and a
    /// key `b` under a key `a`). It names the rule, not the request: a rule without a value
    /// matches many values, each with its own counters.
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: a.b, rate_limit: {unlimited: true}}\n  - {key: a, descriptors: [{key: b, rate_limit: {unlimited: true}}]}\n")], false)?;
    /// let d = c.domain("d").unwrap();
    /// assert_eq!(d.find(&[("a.b", "")]).unwrap().path(), r"a\.b");
    /// assert_eq!(d.find(&[("a", "x"), ("b", "y")]).unwrap().path(), "a.b");
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How many entries a request descriptor has when it matches this rule (the rule's depth
    /// in its domain).
    ///
    /// ```
    /// # use redlimit::rls::config::RlsConfig;
    /// # let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: a, descriptors: [{key: b, rate_limit: {unlimited: true}}]}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().find(&[("a", "1"), ("b", "2")]).unwrap().depth(), 2);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// The stats key the Go service forms when this rule matches the request's `entries`
    /// (what follows `ratelimit.service.rate_limit.` in its stat names): the domain, then per
    /// level the key, with `_value` where the rule's level has a value (the request's value, or
    /// the wildcard pattern for a wildcard level), where `value_to_metric` asks for the
    /// request's value, or at every level with `detailed_metric`; `share_threshold` levels keep
    /// their pattern.
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: d
    /// descriptors:
    ///   - {key: path, value: /api/*, rate_limit: {unit: second, requests_per_unit: 5}}
    ///   - {key: user, value_to_metric: true, rate_limit: {unit: second, requests_per_unit: 5}}
    ///   - {key: ip, detailed_metric: true, rate_limit: {unit: second, requests_per_unit: 5}}
    /// ")], false)?;
    /// let d = c.domain("d").unwrap();
    /// let key = |e: &[(&str, &str)]| d.find(e).unwrap().stats_key("d", e);
    /// assert_eq!(key(&[("path", "/api/v1")]), "d.path_/api/*");
    /// assert_eq!(key(&[("user", "bob")]), "d.user_bob");
    /// assert_eq!(key(&[("ip", "10.0.0.1")]), "d.ip_10.0.0.1");
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn stats_key(&self, domain: &str, entries: &[(&str, &str)]) -> String {
        let mut key = String::from(domain);
        if self.detailed_metric {
            let shared =
                self.levels.iter().zip(entries).any(|(level, (k, v))| {
                    level.share_threshold && matched_by_wildcard(level, k, v)
                });
            for (i, (k, v)) in entries.iter().enumerate() {
                key.push('.');
                key.push_str(k);
                let level = self.levels.get(i);
                match level {
                    Some(level)
                        if shared && level.share_threshold && matched_by_wildcard(level, k, v) =>
                    {
                        key.push('_');
                        key.push_str(pattern_value(level, k));
                    }
                    _ if shared => {
                        if !v.is_empty() {
                            key.push('_');
                            key.push_str(v);
                        }
                    }
                    _ => {
                        key.push('_');
                        key.push_str(v);
                    }
                }
            }
            return key;
        }
        for (level, (k, v)) in self.levels.iter().zip(entries) {
            key.push('.');
            key.push_str(k);
            let value = if matched_by_wildcard(level, k, v) {
                if level.share_threshold || !level.value_to_metric {
                    pattern_value(level, k)
                } else {
                    v
                }
            } else if composite_is(&level.composite, k, v) || level.value_to_metric {
                // An exact `key_value` level, or a key-only level that asks for the value.
                v
            } else {
                ""
            };
            if !value.is_empty() {
                key.push('_');
                key.push_str(value);
            }
        }
        key
    }
}

impl RlsRule {
    /// The value each of `entries` is counted under: the request's, but at a level reached
    /// through a wildcard with `share_threshold: true`, where it is the pattern (`files/*`),
    /// so that every value the pattern matches counts on one counter. The Go service's cache
    /// key does the same (`ShareThresholdKeyPattern`, kept per entry index by `GetLimit`, so
    /// a sharing level above the rule's counts as well as the rule's own).
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: d
    /// descriptors:
    ///   - {key: files, value: files/*, share_threshold: true, rate_limit: {unit: hour, requests_per_unit: 3}}
    ///   - key: user
    ///     value: u*
    ///     share_threshold: true
    ///     descriptors:
    ///       - {key: file, value: f*, rate_limit: {unit: hour, requests_per_unit: 3}}
    /// ")], false)?;
    /// let d = c.domain("d").unwrap();
    /// let files = [("files", "files/a.pdf")];
    /// assert_eq!(d.find(&files).unwrap().counted_values(&files), ["files/*"]);
    /// let nested = [("user", "u1"), ("file", "f1")];
    /// assert_eq!(d.find(&nested).unwrap().counted_values(&nested), ["u*", "f1"]);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn counted_values<'a>(&'a self, entries: &[(&str, &'a str)]) -> Vec<&'a str> {
        entries
            .iter()
            .enumerate()
            .map(|(i, &(k, v))| match self.levels.get(i) {
                Some(level) if level.share_threshold && matched_by_wildcard(level, k, v) => {
                    pattern_value(level, k)
                }
                _ => v,
            })
            .collect()
    }

    /// Whether some level of the rule has `share_threshold: true` (most have none: their
    /// counters are the request's values, with nothing to look up).
    pub(crate) fn shares_threshold(&self) -> bool {
        self.levels.iter().any(|l| l.share_threshold)
    }
}

/// Whether `composite` is `key_value`.
fn composite_is(composite: &str, key: &str, value: &str) -> bool {
    composite
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|rest| rest == value)
}

/// Whether the Go service reached this level through its wildcard list: not by the exact
/// `key_value`, and the pattern matches.
fn matched_by_wildcard(level: &Level, key: &str, value: &str) -> bool {
    match &level.wildcard {
        Some(parts) if !composite_is(&level.composite, key, value) => {
            wildcard_match(parts, &format!("{key}_{value}"))
        }
        _ => false,
    }
}

/// The wildcard pattern without its `key_` (Go's `TrimPrefix(pattern, key + "_")`).
fn pattern_value<'a>(level: &'a Level, key: &str) -> &'a str {
    level
        .composite
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('_'))
        .unwrap_or(&level.composite)
}

/// The stats key the Go service uses for a descriptor that carries its own `limit` (an
/// override): the domain, then each entry's `key` or `key_value`, joined by dots.
///
/// ```
/// use redlimit::rls::config::override_stats_key;
/// assert_eq!(override_stats_key("d", &[("a", "1"), ("b", "")]), "d.a_1.b");
/// ```
pub fn override_stats_key(domain: &str, entries: &[(&str, &str)]) -> String {
    let mut key = format!("{domain}.");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            key.push('.');
        }
        key.push_str(k);
        if !v.is_empty() {
            key.push('_');
            key.push_str(v);
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::super::RlsConfig;

    /// The keys made with the configuration are the stats key every request would get, and
    /// are not made where request values enter it.
    #[test]
    fn stats_keys_are_made_once_exactly_where_no_request_value_enters() {
        let config = RlsConfig::parse(
            [(
                "c.yaml",
                "
domain: d
descriptors:
  - {key: user, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: client, value: vip, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: path, value: /api/*, rate_limit: {unit: second, requests_per_unit: 5}}
  - key: tenant
    descriptors:
      - {key: route, value: /a, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: ip, detailed_metric: true, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: team, value_to_metric: true, rate_limit: {unit: second, requests_per_unit: 5}}
",
            )],
            false,
        )
        .expect("valid config");
        let domain = config.domain("d").expect("domain d");
        let fixed: &[&[(&str, &str)]] = &[
            &[("user", "bob")],
            &[("client", "vip")],
            &[("path", "/api/v1")],
            &[("tenant", "acme"), ("route", "/a")],
        ];
        for entries in fixed {
            let rule = domain.find(entries).expect("a rule");
            let keys = rule.stats_keys().expect("keys made with the configuration");
            assert_eq!(keys.text, rule.stats_key("d", entries), "{entries:?}");
        }
        for entries in [[("ip", "10.0.0.1")], [("team", "a")]] {
            let rule = domain.find(&entries).expect("a rule");
            assert!(rule.stats_keys().is_none(), "{entries:?}");
        }
    }
}

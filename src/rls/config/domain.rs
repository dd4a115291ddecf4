//! One domain: the descriptor tree of every file that names it.

use super::matching::{Children, DescriptorNode};
use super::rule::RlsRule;
use crate::key::Key;

/// The descriptors of one `domain`, as a tree of `key` / `value` levels.
///
/// ```
/// use redlimit::rls::config::RlsConfig;
/// let config = RlsConfig::parse([("c.yaml", "
/// domain: edge
/// descriptors:
///   - key: remote_address
///     rate_limit: {unit: second, requests_per_unit: 10}
/// ")], false)?;
/// let domain = config.domain("edge").unwrap();
/// assert_eq!(domain.name(), "edge");
/// assert!(domain.find(&[("remote_address", "10.0.0.1")]).is_some());
/// assert!(domain.find(&[("path", "/")]).is_none());
/// assert_eq!(domain.rules().count(), 1);
/// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RlsDomain {
    /// Every counter's hash tag (`rls\0` and the name), made once.
    pub(crate) key: Key,
    pub(crate) name: String,
    pub(crate) root: Children,
    /// Our `on_store_error` key: the domain's failure mode, if it names one.
    pub(crate) on_store_error: Option<crate::rls::FailureMode>,
    /// Our `hash_tag` key: where the domain's counters live in a Redis Cluster, if it says.
    pub(crate) hash_tag: Option<crate::rls::HashTag>,
}

impl RlsDomain {
    /// The domain's name.
    ///
    /// ```
    /// # let c = redlimit::rls::config::RlsConfig::parse([("c.yaml", "domain: d")], false)?;
    /// assert_eq!(c.domain("d").unwrap().name(), "d");
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key every counter of the domain shares as its hash tag under
    /// [`HashTag::Domain`](crate::rls::HashTag::Domain).
    pub(crate) fn key(&self) -> &Key {
        &self.key
    }

    /// The domain's `hash_tag` key, if its files name one (else the service's setting
    /// decides).
    ///
    /// ```
    /// use redlimit::rls::{config::RlsConfig, HashTag};
    /// let c = RlsConfig::parse([("c.yaml", "domain: d\nhash_tag: descriptor\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().hash_tag(), Some(HashTag::Descriptor));
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn hash_tag(&self) -> Option<crate::rls::HashTag> {
        self.hash_tag
    }

    /// The rule for one request descriptor's entries (key, value), by the Go service's rules:
    /// per level the exact `key_value` first, then the wildcard values in file order, then the
    /// key alone, never backtracking; a rule applies only if its depth equals `entries.len()`.
    /// `None`: no rule, and the descriptor is OK without a `current_limit`.
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: d
    /// descriptors:
    ///   - key: client
    ///     value: vip
    ///     rate_limit: {unit: second, requests_per_unit: 1000}
    ///   - key: client
    ///     rate_limit: {unit: second, requests_per_unit: 10}
    ///     descriptors:
    ///       - {key: path, rate_limit: {unit: second, requests_per_unit: 1}}
    /// ")], false)?;
    /// let d = c.domain("d").unwrap();
    /// let rpu = |e: &[(&str, &str)]| d.find(e).map(|r| r.limits()[0].requests_per_unit());
    /// assert_eq!(rpu(&[("client", "vip")]), Some(1000));
    /// assert_eq!(rpu(&[("client", "bob")]), Some(10));
    /// assert_eq!(rpu(&[("client", "bob"), ("path", "/")]), Some(1));
    /// assert_eq!(rpu(&[("client", "vip"), ("path", "/")]), None); // `client_vip` has no level below
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn find(&self, entries: &[(&str, &str)]) -> Option<&RlsRule> {
        self.root.find(entries)
    }

    /// Every rule of the domain, depth first in file order.
    ///
    /// ```
    /// # let c = redlimit::rls::config::RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unlimited: true}}\n")], false)?;
    /// assert_eq!(c.domain("d").unwrap().rules().map(|r| r.full_key()).collect::<Vec<_>>(), ["d.a"]);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn rules(&self) -> impl Iterator<Item = &RlsRule> {
        let mut stack: Vec<&DescriptorNode> = self.root.nodes.values().rev().collect();
        std::iter::from_fn(move || {
            loop {
                let node = stack.pop()?;
                stack.extend(node.children.nodes.values().rev());
                if let Some(rule) = &node.rule {
                    return Some(rule);
                }
            }
        })
    }
}

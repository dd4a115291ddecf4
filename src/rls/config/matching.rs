//! The Go service's matching (`GetLimit`): per entry, the exact `key_value` first, then the
//! wildcard patterns of that level in file order, then the key alone; a rule applies only at
//! the depth of the request's last entry, and there is no backtracking.

use indexmap::IndexMap;
use smallvec::SmallVec;

use super::rule::RlsRule;
use super::wildcard::wildcard_match;

/// The descriptors of one level.
#[derive(Debug, Clone, Default)]
pub(crate) struct Children {
    /// By `key` or `key_value`, in file order.
    pub(crate) nodes: IndexMap<String, DescriptorNode>,
    /// The composite keys holding a `*`, in file order, split on `*`.
    pub(crate) wildcards: Vec<(String, Vec<String>)>,
}

/// One configured descriptor: its rule (if it has a limit) and the level below it.
#[derive(Debug, Clone, Default)]
pub(crate) struct DescriptorNode {
    pub(crate) rule: Option<RlsRule>,
    pub(crate) children: Children,
}

impl Children {
    /// The rule for a request descriptor's entries, if any.
    pub(crate) fn find(&self, entries: &[(&str, &str)]) -> Option<&RlsRule> {
        let last = entries.len().checked_sub(1)?;
        let mut level = self;
        // On the stack for the usual entry (a request's every decision comes here).
        let mut bytes: SmallVec<[u8; 128]> = SmallVec::new();
        for (i, (key, value)) in entries.iter().enumerate() {
            bytes.clear();
            bytes.extend_from_slice(key.as_bytes());
            bytes.push(b'_');
            bytes.extend_from_slice(value.as_bytes());
            // Two strings and an ASCII byte: always UTF-8.
            let composite = std::str::from_utf8(&bytes).unwrap_or_default();
            let node = level
                .nodes
                .get(composite)
                .or_else(|| {
                    level
                        .wildcards
                        .iter()
                        .find(|(_, parts)| wildcard_match(parts, composite))
                        .and_then(|(pattern, _)| level.nodes.get(pattern.as_str()))
                })
                .or_else(|| level.nodes.get(*key))?;
            if i == last {
                return node.rule.as_ref();
            }
            if node.children.nodes.is_empty() {
                return None;
            }
            level = &node.children;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::RlsConfig;

    const CONFIG: &str = "
domain: d
descriptors:
  - key: k1
    value: v1
    descriptors:
      - {key: sub, rate_limit: {unit: second, requests_per_unit: 5}}
      - {key: sub, value: exact, rate_limit: {unit: second, requests_per_unit: 10}}
  - {key: k2, rate_limit: {unit: minute, requests_per_unit: 20}}
  - {key: k2, value: v2, rate_limit: {unit: minute, requests_per_unit: 30}}
  - {key: k2, value: free}
  - {key: k2, value: 'pre*', rate_limit: {unit: minute, requests_per_unit: 40}}
  - {key: k2, value: 'p*', rate_limit: {unit: minute, requests_per_unit: 50}}
  - key: k3
    value: v3
    rate_limit: {unit: day, requests_per_unit: 15}
    descriptors:
      - {key: sub, value: s, rate_limit: {unit: day, requests_per_unit: 25}}
";

    fn rpu(entries: &[(&str, &str)]) -> Option<u32> {
        let config = RlsConfig::parse([("t.yaml", CONFIG)], false).unwrap();
        let rule = config.domain("d").unwrap().find(entries)?;
        Some(rule.limits()[0].requests_per_unit())
    }

    #[test]
    fn exact_value_then_wildcard_then_key() {
        assert_eq!(rpu(&[("k2", "v2")]), Some(30));
        assert_eq!(
            rpu(&[("k2", "prefix")]),
            Some(40),
            "the first pattern in file order"
        );
        assert_eq!(rpu(&[("k2", "px")]), Some(50));
        assert_eq!(rpu(&[("k2", "other")]), Some(20));
        assert_eq!(rpu(&[("k2", "")]), Some(20));
        assert_eq!(
            rpu(&[("k2", "free")]),
            None,
            "a value without a limit whitelists it"
        );
    }

    #[test]
    fn depth_must_equal_the_entries() {
        assert_eq!(rpu(&[("k1", "v1")]), None);
        assert_eq!(rpu(&[("k1", "v1"), ("sub", "x")]), Some(5));
        assert_eq!(rpu(&[("k1", "v1"), ("sub", "exact")]), Some(10));
        assert_eq!(rpu(&[("k1", "v1"), ("sub", "x"), ("more", "y")]), None);
        assert_eq!(rpu(&[("k3", "v3")]), Some(15));
        assert_eq!(rpu(&[("k3", "v3"), ("sub", "s")]), Some(25));
        assert_eq!(rpu(&[("k3", "v3"), ("sub", "t")]), None);
        assert_eq!(
            rpu(&[("k2", "v2"), ("sub", "s")]),
            None,
            "a leaf has no level below"
        );
        assert_eq!(rpu(&[]), None);
        assert_eq!(rpu(&[("nope", "x")]), None);
    }

    #[test]
    fn no_backtracking_from_an_exact_match() {
        // k1_v1 matches exactly; its level has no `other`, and the key-only `k1` is not tried.
        let config = RlsConfig::parse(
            [(
                "t.yaml",
                "domain: d\ndescriptors:\n  - {key: a, value: b, descriptors: [{key: x, rate_limit: {unit: second, requests_per_unit: 1}}]}\n  - {key: a, descriptors: [{key: y, rate_limit: {unit: second, requests_per_unit: 2}}]}\n",
            )],
            false,
        )
        .unwrap();
        let d = config.domain("d").unwrap();
        assert!(d.find(&[("a", "b"), ("y", "1")]).is_none());
        assert!(d.find(&[("a", "c"), ("y", "1")]).is_some());
    }
}

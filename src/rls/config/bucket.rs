//! A domain's rule for an RLQS `BucketId`: a map of keys to values, with no order of its own,
//! walked down the descriptor tree in the tree's order (used by `redlimit::rlqs`).

use super::domain::RlsDomain;
use super::matching::{Children, DescriptorNode, wildcard_match};
use super::rule::RlsRule;

impl RlsDomain {
    /// The rule for a set of entries in no particular order (an RLQS `BucketId`): at each
    /// level of the tree, the descriptors in file order each look for an entry with their
    /// `key`, and the first entry found whose value matches at that level (as
    /// [`find`](Self::find) matches it: the exact `key_value` first, then the wildcard values
    /// in file order, then the key alone) is taken; the walk goes down, and the rule is the
    /// descriptor reached when every entry is taken. `None`: no rule (an entry matched nowhere,
    /// or the descriptor reached has no limit).
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: d
    /// descriptors:
    ///   - key: tenant
    ///     descriptors:
    ///       - {key: path, value: /api, rate_limit: {unit: second, requests_per_unit: 5}}
    /// ")], false)?;
    /// let d = c.domain("d").unwrap();
    /// // The order the entries come in does not matter.
    /// assert!(d.find_unordered(&[("path", "/api"), ("tenant", "a")]).is_some());
    /// assert!(d.find_unordered(&[("tenant", "a"), ("path", "/api")]).is_some());
    /// assert!(d.find_unordered(&[("tenant", "a")]).is_none());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn find_unordered(&self, entries: &[(&str, &str)]) -> Option<&RlsRule> {
        if entries.is_empty() {
            return None;
        }
        let mut taken = vec![false; entries.len()];
        let mut level = &self.root;
        let mut left = entries.len();
        loop {
            let (i, node) = first_match(level, entries, &taken)?;
            taken[i] = true;
            left -= 1;
            if left == 0 {
                return node.rule.as_ref();
            }
            level = &node.children;
        }
    }
}

/// The entry to take at `level`: the descriptors of the level in file order, each asking the
/// entries for its key; the first entry whose key a descriptor names (`key` or `key_value`,
/// as the Go service stores them) and whose value matches at this level.
fn first_match<'a>(
    level: &'a Children,
    entries: &[(&str, &str)],
    taken: &[bool],
) -> Option<(usize, &'a DescriptorNode)> {
    let mut by_key: Vec<(usize, usize)> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| !taken[*i])
        .filter_map(|(i, (key, _))| {
            let first = level.nodes.keys().position(|name| {
                name.strip_prefix(key)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
            })?;
            Some((first, i))
        })
        .collect();
    by_key.sort_unstable();
    by_key.into_iter().find_map(|(_, i)| {
        let (key, value) = entries[i];
        let composite = format!("{key}_{value}");
        level
            .nodes
            .get(composite.as_str())
            .or_else(|| {
                level
                    .wildcards
                    .iter()
                    .find(|(_, parts)| wildcard_match(parts, &composite))
                    .and_then(|(pattern, _)| level.nodes.get(pattern.as_str()))
            })
            .or_else(|| level.nodes.get(key))
            .map(|node| (i, node))
    })
}

#[cfg(test)]
mod tests {
    use super::super::RlsConfig;

    #[test]
    fn entries_follow_the_tree_whatever_their_order() {
        let config = RlsConfig::parse(
            [(
                "t.yaml",
                "
domain: d
descriptors:
  - {key: vip, rate_limit: {unit: second, requests_per_unit: 100}}
  - key: tenant
    value: 'a*'
    descriptors:
      - {key: path, rate_limit: {unit: second, requests_per_unit: 7}}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 3}
    descriptors:
      - {key: path, value: /x, rate_limit: {unit: second, requests_per_unit: 9}}
",
            )],
            false,
        )
        .unwrap();
        let d = config.domain("d").unwrap();
        let rpu = |e: &[(&str, &str)]| {
            d.find_unordered(e)
                .map(|r| r.limits()[0].requests_per_unit())
        };
        assert_eq!(rpu(&[("path", "/y"), ("tenant", "abc")]), Some(7));
        assert_eq!(rpu(&[("tenant", "zed")]), Some(3));
        assert_eq!(rpu(&[("path", "/x"), ("tenant", "zed")]), Some(9));
        assert_eq!(rpu(&[("path", "/y"), ("tenant", "zed")]), None);
        assert_eq!(rpu(&[("vip", "1")]), Some(100));
        assert_eq!(rpu(&[("vip", "1"), ("other", "2")]), None);
        // `vip` comes first in the file: taken first, it leaves `tenant` no level to match.
        assert_eq!(rpu(&[("tenant", "zed"), ("vip", "1")]), None);
        // The first descriptor naming a key decides when its entry is taken, even when the
        // entry then matches a later descriptor of that key.
        let config = RlsConfig::parse(
            [(
                "t.yaml",
                "
domain: d
descriptors:
  - {key: k, value: v, descriptors: [{key: j, rate_limit: {unit: second, requests_per_unit: 1}}]}
  - {key: j, descriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 2}}]}
  - {key: k, descriptors: [{key: j, rate_limit: {unit: second, requests_per_unit: 3}}]}
",
            )],
            false,
        )
        .unwrap();
        let d = config.domain("d").unwrap();
        let rpu = |e: &[(&str, &str)]| {
            d.find_unordered(e)
                .map(|r| r.limits()[0].requests_per_unit())
        };
        assert_eq!(rpu(&[("j", "x"), ("k", "v")]), Some(1));
        assert_eq!(
            rpu(&[("j", "x"), ("k", "z")]),
            Some(3),
            "k's first descriptor is first"
        );
        assert_eq!(rpu(&[]), None);
    }
}

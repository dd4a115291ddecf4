//! A domain's rule for an RLQS `BucketId`: a map of keys to values, with no order of its own,
//! walked down the descriptor tree in the tree's order (used by `redlimit::rlqs`).

use super::domain::RlsDomain;
use super::matching::{Children, DescriptorNode, wildcard_match};
use super::rule::RlsRule;

impl RlsDomain {
    /// The rule for a set of entries in no particular order (an RLQS `BucketId`): at each
    /// level of the tree, the entry that matches a descriptor of that level first in file
    /// order is taken (each entry matched as [`find`](Self::find) matches it: the exact
    /// `key_value` first, then the wildcard values in file order, then the key alone), and the
    /// walk goes down; the rule is the descriptor reached when every entry is taken. `None`:
    /// no rule (an entry matched nowhere, or the descriptor reached has no limit).
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

/// The entry not taken yet whose descriptor at `level` comes first in file order.
fn first_match<'a>(
    level: &'a Children,
    entries: &[(&str, &str)],
    taken: &[bool],
) -> Option<(usize, &'a DescriptorNode)> {
    let mut best: Option<(usize, usize, &DescriptorNode)> = None;
    for (i, (key, value)) in entries.iter().enumerate() {
        if taken[i] {
            continue;
        }
        let composite = format!("{key}_{value}");
        let found = level
            .nodes
            .get_full(composite.as_str())
            .or_else(|| {
                level
                    .wildcards
                    .iter()
                    .find(|(_, parts)| wildcard_match(parts, &composite))
                    .and_then(|(pattern, _)| level.nodes.get_full(pattern.as_str()))
            })
            .or_else(|| level.nodes.get_full(*key));
        if let Some((position, _, node)) = found
            && best.is_none_or(|(p, _, _)| position < p)
        {
            best = Some((position, i, node));
        }
    }
    best.map(|(_, i, node)| (i, node))
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
        assert_eq!(rpu(&[]), None);
    }
}

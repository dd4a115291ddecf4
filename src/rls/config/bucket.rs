//! A domain's rule for an RLQS `BucketId`: a map of keys to values, with no order of its own,
//! found by a depth-first search of the descriptor tree with backtracking (used by
//! `redlimit::rlqs`).

use super::domain::RlsDomain;
use super::matching::{Children, DescriptorNode};
use super::rule::RlsRule;
use super::wildcard::wildcard_match;

/// The most descriptors one search visits: a guard against a tree and a bucket built to make
/// the backtracking search exponential (a real one visits a few); past it, no rule.
const MAX_VISITS: usize = 10_000;

impl RlsDomain {
    /// The rule for a set of entries in no particular order (an RLQS `BucketId`): a
    /// depth-first search down the descriptor tree, each level taking one entry not taken yet.
    /// At each level the candidates are tried in this order: the entries matching a
    /// descriptor's exact `key_value`, then those matching a wildcard value (`prefix*`), then
    /// those matching a descriptor by its key alone (no `value`), each kind in the file order
    /// of the descriptors; a candidate that leads nowhere is given up for the next
    /// (backtracking). The first complete match wins: every entry taken, at a descriptor with
    /// a limit. `None`: no rule.
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "
    /// domain: d
    /// descriptors:
    ///   - {key: tenant, rate_limit: {unit: second, requests_per_unit: 100}}
    ///   - key: path
    ///     value: /api
    ///     descriptors:
    ///       - {key: tenant, rate_limit: {unit: second, requests_per_unit: 5}}
    /// ")], false)?;
    /// let d = c.domain("d").unwrap();
    /// let rpu = |e: &[(&str, &str)]| d.find_unordered(e).map(|r| r.limits()[0].requests_per_unit());
    /// // The order of the entries, and of the descriptors, does not matter.
    /// assert_eq!(rpu(&[("path", "/api"), ("tenant", "a")]), Some(5));
    /// assert_eq!(rpu(&[("tenant", "a"), ("path", "/api")]), Some(5));
    /// assert_eq!(rpu(&[("tenant", "a")]), Some(100));
    /// assert_eq!(rpu(&[("path", "/api")]), None);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn find_unordered(&self, entries: &[(&str, &str)]) -> Option<&RlsRule> {
        if entries.is_empty() {
            return None;
        }
        let mut taken = vec![false; entries.len()];
        let mut visits = 0;
        search(&self.root, entries, &mut taken, entries.len(), &mut visits)
    }
}

/// The depth-first search from `level`, `left` entries not taken yet.
fn search<'a>(
    level: &'a Children,
    entries: &[(&str, &str)],
    taken: &mut [bool],
    left: usize,
    visits: &mut usize,
) -> Option<&'a RlsRule> {
    for (i, node) in candidates(level, entries, taken) {
        *visits += 1;
        if *visits > MAX_VISITS {
            return None;
        }
        if left == 1 {
            if let Some(rule) = node.rule.as_ref() {
                return Some(rule);
            }
            continue;
        }
        if node.children.nodes.is_empty() {
            continue;
        }
        taken[i] = true;
        let found = search(&node.children, entries, taken, left - 1, visits);
        taken[i] = false;
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The (entry, descriptor) pairs to try at `level`, in order: exact values, then wildcard
/// values, then keys alone, each by the descriptor's place in the file (then the entry's).
fn candidates<'a>(
    level: &'a Children,
    entries: &[(&str, &str)],
    taken: &[bool],
) -> Vec<(usize, &'a DescriptorNode)> {
    // (kind, descriptor's index in the file, entry)
    let mut found: Vec<(u8, usize, usize)> = Vec::new();
    let mut composite = String::new();
    for (i, (key, value)) in entries.iter().enumerate() {
        if taken[i] {
            continue;
        }
        composite.clear();
        composite.push_str(key);
        composite.push('_');
        composite.push_str(value);
        if let Some((at, _, _)) = level.nodes.get_full(composite.as_str()) {
            found.push((0, at, i));
        }
        for (pattern, parts) in &level.wildcards {
            // A pattern is its descriptor's `key_value`: it names this entry's key.
            let names_key = pattern
                .strip_prefix(key)
                .is_some_and(|rest| rest.starts_with('_'));
            if names_key
                && wildcard_match(parts, &composite)
                && let Some((at, _, _)) = level.nodes.get_full(pattern.as_str())
            {
                found.push((1, at, i));
            }
        }
        if let Some((at, _, _)) = level.nodes.get_full(*key) {
            found.push((2, at, i));
        }
    }
    found.sort_unstable();
    found.dedup();
    found
        .into_iter()
        .filter_map(|(_, at, i)| Some((i, level.nodes.get_index(at)?.1)))
        .collect()
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
        // No descriptor under `vip` nor `tenant` takes the other: no rule.
        assert_eq!(rpu(&[("tenant", "zed"), ("vip", "1")]), None);
        // At each level, exact values before wildcards before keys alone, whatever the file
        // order; a branch that leads nowhere is given up for the next.
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
        assert_eq!(rpu(&[("j", "x"), ("k", "v")]), Some(1), "k_v is exact");
        assert_eq!(
            rpu(&[("j", "x"), ("k", "z")]),
            Some(2),
            "keys alone, in file order: j's descriptor first"
        );
        assert_eq!(rpu(&[]), None);
    }

    #[test]
    fn a_bare_descriptor_listed_first_no_longer_hides_a_deeper_one() {
        // The guide's case: `tenant` alone listed before `route`'s subtree.
        let config = RlsConfig::parse(
            [(
                "t.yaml",
                "
domain: d
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: tenant
    value: free-*
    rate_limit: {unit: minute, requests_per_unit: 600}
  - key: route
    value: /admin
    descriptors:
      - key: tenant
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: route
    descriptors:
      - key: tenant
        value: free-*
        descriptors:
          - {key: plan, rate_limit: {unit: second, requests_per_unit: 4}}
      - key: tenant
        descriptors:
          - {key: plan, value: gold, rate_limit: {unit: second, requests_per_unit: 5}}
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
        for entries in [
            [("route", "/admin"), ("tenant", "x")],
            [("tenant", "x"), ("route", "/admin")],
        ] {
            assert_eq!(rpu(&entries), Some(10), "{entries:?}");
        }
        assert_eq!(rpu(&[("tenant", "x")]), Some(1000));
        assert_eq!(
            rpu(&[("tenant", "free-1")]),
            Some(600),
            "wildcard before key alone"
        );
        assert_eq!(rpu(&[("route", "/x"), ("tenant", "x")]), None);
        // Backtracking two levels down: `free-*` leads to `plan` alone, then the bare tenant
        // to `plan: gold`.
        assert_eq!(
            rpu(&[("plan", "gold"), ("tenant", "free-1"), ("route", "/y")]),
            Some(4)
        );
        assert_eq!(
            rpu(&[("plan", "gold"), ("tenant", "paid"), ("route", "/y")]),
            Some(5)
        );
        assert_eq!(
            rpu(&[("plan", "silver"), ("tenant", "paid"), ("route", "/y")]),
            None
        );
    }

    #[test]
    fn a_tree_built_to_make_the_search_explode_gets_no_rule_rather_than_a_long_search() {
        // Every level names each of 7 keys (5040 orders, 13699 descriptors); the one rule is
        // at the end of the last order tried.
        fn level(out: &mut String, path: &mut Vec<usize>, n: usize) {
            let pad = "  ".repeat(2 * path.len());
            let free: Vec<usize> = (0..n).filter(|k| !path.contains(k)).collect();
            for k in free {
                out.push_str(&format!("{pad}- key: k{k}\n"));
                path.push(k);
                if path.len() == n {
                    if path.iter().rev().copied().eq(0..n) {
                        out.push_str(&format!(
                            "{pad}  rate_limit: {{unit: second, requests_per_unit: 1}}\n"
                        ));
                    }
                } else {
                    out.push_str(&format!("{pad}  descriptors:\n"));
                    level(out, path, n);
                }
                path.pop();
            }
        }
        let n = 7;
        let mut yaml = String::from("domain: d\ndescriptors:\n");
        level(&mut yaml, &mut Vec::new(), n);
        let config = RlsConfig::parse([("t.yaml", yaml.as_str())], false).unwrap();
        let d = config.domain("d").unwrap();
        let names: Vec<String> = (0..n).map(|k| format!("k{k}")).collect();
        let entries: Vec<(&str, &str)> = names.iter().map(|k| (k.as_str(), "v")).collect();
        assert!(d.find_unordered(&entries).is_none());
        // Six keys (1956 descriptors) are within the budget: the rule at the end is found.
        let mut yaml = String::from("domain: d\ndescriptors:\n");
        level(&mut yaml, &mut Vec::new(), n - 1);
        let config = RlsConfig::parse([("t.yaml", yaml.as_str())], false).unwrap();
        let d = config.domain("d").unwrap();
        assert!(d.find_unordered(&entries[..n - 1]).is_some());
    }
}

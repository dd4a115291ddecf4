//! Go's `wildcardMatch` (envoyproxy/ratelimit PR #1085): a descriptor value against a rule's
//! pattern with `*`s, for the matching of requests and of rules alike.

/// Whether `value` matches a pattern split on `*` (each `*` matches any run of characters,
/// the empty one too): Go's `wildcardMatch` from envoyproxy/ratelimit PR #1085.
pub(crate) fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    if !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
        return false;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed {
        return false;
    }
    let mut remaining = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match remaining.find(part.as_str()) {
            Some(i) => remaining = &remaining[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(pattern: &str) -> Vec<String> {
        pattern.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn wildcards_match_as_go() {
        assert!(wildcard_match(&parts("wild_foo*"), "wild_foo"));
        assert!(wildcard_match(&parts("wild_foo*"), "wild_foobar"));
        assert!(!wildcard_match(&parts("wild_foo*"), "wild_fo"));
        assert!(wildcard_match(&parts("k_bar*b"), "k_barb"));
        assert!(wildcard_match(&parts("k_bar*b"), "k_bar_xyz_b"));
        assert!(!wildcard_match(&parts("k_bar*b"), "k_bar_xyz_c"));
        assert!(wildcard_match(&parts("k_foo*bar*baz"), "k_foo1bar2baz"));
        assert!(wildcard_match(&parts("k_foo*bar*baz"), "k_foobarbaz"));
        assert!(!wildcard_match(&parts("k_foo*bar*baz"), "k_foobaz"));
        // The prefix and suffix may not overlap.
        assert!(!wildcard_match(&parts("k_ab*ba"), "k_aba"));
        assert!(wildcard_match(&parts("k_a**b"), "k_ab"));
        assert!(wildcard_match(&parts("k_é*ü"), "k_éxü"));
    }
}

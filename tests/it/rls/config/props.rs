//! Properties: reading never panics on YAML-ish noise, and matching never panics on any
//! entries (multi-byte characters, `*`, `_`, empty strings).

use proptest::prelude::*;
use redlimit::rls::config::RlsConfig;

use super::parse;

/// Pieces that make YAML-ish text: structure, scalars of every resolution, our keys.
fn yamlish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("domain: d\n".to_owned()),
        Just("descriptors:\n".to_owned()),
        Just("  - key: k\n".to_owned()),
        Just("    value: ".to_owned()),
        Just("    rate_limit:\n".to_owned()),
        Just("      unit: second\n".to_owned()),
        Just("      requests_per_unit: ".to_owned()),
        Just("    rate_limits: [{unit: day, requests_per_unit: 3}]\n".to_owned()),
        Just("      algorithm: gcra\n".to_owned()),
        Just("      unit_multiplier: ".to_owned()),
        Just("      unlimited: yes\n".to_owned()),
        Just("      replaces: [{name: ".to_owned()),
        Just("    metadata: {a: [1, 2.5, ~]}\n".to_owned()),
        Just("&a ".to_owned()),
        Just("*a ".to_owned()),
        Just("<<: ".to_owned()),
        Just("---\n".to_owned()),
        "[ -~]{0,12}",
        "[0-9a-fx_.+-]{1,8}\n",
        "[\\[\\]{}:,'\"|>#!*&?\n ]{1,6}",
        "[ \t]{0,6}",
        "\\PC{0,4}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-c*_]{0,4}", "\\PC{0,3}", Just(String::new())]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics(input in yamlish()) {
        let _ = parse(&input);
        let _ = RlsConfig::parse([("a.yaml", input.as_str()), ("b.yaml", input.as_str())], true);
    }

    #[test]
    fn find_never_panics(
        levels in prop::collection::vec(prop::collection::vec((text(), text()), 1..4), 1..4),
        entries in prop::collection::vec((text(), text()), 0..5),
    ) {
        // A tree with a descriptor per (key, value) at each level, nested under the first.
        let mut yaml = String::from("domain: d\ndescriptors:\n");
        for (depth, level) in levels.iter().enumerate() {
            let indent = "  ".repeat(depth * 2);
            for (i, (key, value)) in level.iter().enumerate() {
                yaml.push_str(&format!(
                    "{indent}- key: {key:?}\n{indent}  value: {value:?}\n{indent}  rate_limit: {{unit: second, requests_per_unit: {}}}\n",
                    i + 1
                ));
                if i + 1 == level.len() && depth + 1 < levels.len() {
                    yaml.push_str(&format!("{indent}  descriptors:\n"));
                }
            }
        }
        let Ok(config) = parse(&yaml) else { return Ok(()) };
        let domain = config.domain("d").expect("the domain loads when the file does");
        let entries: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        if let Some(rule) = domain.find(&entries) {
            prop_assert_eq!(rule.depth(), entries.len());
            let _ = rule.stats_key("d", &entries);
        }
        // Every configured path finds a rule of its own depth.
        let mut path = Vec::new();
        for level in &levels {
            let (key, value) = &level[level.len() - 1];
            path.push((key.as_str(), value.as_str()));
            let rule = domain.find(&path);
            if let Some(rule) = rule {
                prop_assert_eq!(rule.depth(), path.len());
            }
        }
        let _ = config.dump();
    }
}

#[test]
fn hostile_documents_are_refused_without_a_crash() {
    let deep_flow = "[".repeat(100_000);
    let deep_map = format!("domain: d\ndescriptors: {}", "{a: ".repeat(50_000));
    let deep_block: String = (0..2_000)
        .map(|i| format!("{}- descriptors:\n", "  ".repeat(i)))
        .collect();
    let long_value = format!(
        "domain: d\ndescriptors:\n  - key: k\n    value: {}\n",
        "v".repeat(1 << 20)
    );
    for text in [deep_flow.as_str(), &deep_map, &deep_block] {
        assert!(parse(text).is_err());
    }
    let c = parse(&long_value).unwrap();
    assert!(c.domain("d").unwrap().find(&[("k", "v")]).is_none());
}

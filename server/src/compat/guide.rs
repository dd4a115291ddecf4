//! The migration guide's table of variables (`docs/guide/migrating-from-envoy-ratelimit.md`),
//! rendered from [`GO_VARIABLES`] and checked against the guide by a test.

use super::GO_VARIABLES;
use super::Support::{Differs, Honoured, NoEffect, Unsupported};

/// The migration guide's table of variables, rendered from [`GO_VARIABLES`].
fn markdown_table() -> String {
    let mut out = String::from("| variable | default there | here |\n|---|---|---|\n");
    for v in GO_VARIABLES {
        let here = match v.support {
            Honoured => "honoured".to_owned(),
            Differs(how) => format!("differs: {how}"),
            NoEffect(why) => format!("no effect (warned): {why}"),
            Unsupported(why) => format!("**not supported** (warned): {why}"),
        };
        let default = if v.default.is_empty() { "" } else { v.default };
        out.push_str(&format!("| `{}` | `{default}` | {here} |\n", v.name).replace("``", ""));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{GO_VARIABLES, warnings};
    use super::markdown_table;

    const GUIDE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/guide/migrating-from-envoy-ratelimit.md"
    );
    const BEGIN: &str = "<!-- variables: begin (generated from server/src/compat.rs) -->\n";
    const END: &str = "<!-- variables: end -->";

    /// The guide's table is this list: `REDLIMIT_WRITE_DOCS=1` rewrites it.
    #[test]
    fn the_migration_guide_lists_every_variable() {
        let guide = std::fs::read_to_string(GUIDE).expect("the migration guide");
        let start = guide.find(BEGIN).expect("the table's begin marker") + BEGIN.len();
        let end = guide.find(END).expect("the table's end marker");
        let table = markdown_table();
        if guide[start..end] != table {
            if std::env::var_os("REDLIMIT_WRITE_DOCS").is_some() {
                let updated = format!("{}{table}{}", &guide[..start], &guide[end..]);
                std::fs::write(GUIDE, updated).expect("the guide is writable");
            } else {
                panic!("the guide's table is stale: run with REDLIMIT_WRITE_DOCS=1");
            }
        }
    }

    #[test]
    fn every_variable_is_listed_once() {
        let mut names: Vec<_> = GO_VARIABLES.iter().map(|v| v.name).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a variable is listed twice");
    }

    #[test]
    fn set_variables_without_effect_are_named_and_honoured_ones_are_not() {
        let set = ["REDIS_POOL_SIZE", "MEMCACHE_HOST_PORT", "REDIS_URL", "PORT"];
        let warnings = warnings(|name| set.contains(&name).then(|| "x".to_owned()));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].starts_with("MEMCACHE_HOST_PORT is set but not supported"));
        assert!(warnings[0].starts_with("REDIS_POOL_SIZE is set but has no effect"));
    }
}

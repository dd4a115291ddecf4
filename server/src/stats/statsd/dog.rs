//! DogStatsD (`USE_DOG_STATSD`), as the Go service's sink writes it: each gostats name split
//! into a metric name and tags (`name:value|c|#key:value,...`), first the tags gostats carried
//! in the name (`.__key=value`: `EXTRA_TAGS`), then those of the first mogrifier whose pattern
//! matches the name (`USE_DOG_STATSD_MOGRIFIERS=A,B` and, for each,
//! `DOG_STATSD_MOGRIFIER_A_PATTERN`, `_NAME` and `_TAGS`, in which `$1`, `$2`, ... are the
//! pattern's groups).

use regex::Regex;

use crate::settings::key_values;

/// The variables of one mogrifier: `DOG_STATSD_MOGRIFIER_<NAME>_<PART>`, upper case as
/// envconfig reads them.
const PREFIX: &str = "DOG_STATSD_MOGRIFIER";

/// One mogrifier: a metric whose name matches `pattern` is sent as `name` with `tags`.
#[derive(Debug)]
struct Mogrifier {
    pattern: Regex,
    name: String,
    tags: Vec<(String, String)>,
}

/// How gostats names become DogStatsD lines: the mogrifiers, tried in the order named.
#[derive(Debug, Default)]
pub(crate) struct Dog {
    mogrifiers: Vec<Mogrifier>,
}

impl Dog {
    /// The mogrifiers `names` (`USE_DOG_STATSD_MOGRIFIERS`) with their variables from `env`;
    /// an error names the variable that is missing or wrong (the Go service does not start
    /// either).
    pub(crate) fn from_env(
        names: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut mogrifiers = Vec::with_capacity(names.len());
        for mogrifier in names {
            let var = |part: &str| format!("{PREFIX}_{mogrifier}_{part}").to_uppercase();
            let read = |part: &str| env(&var(part)).filter(|v| !v.is_empty());
            let pattern = read("PATTERN")
                .ok_or_else(|| format!("mogrifier {mogrifier}: {} is not set", var("PATTERN")))?;
            let pattern = Regex::new(&pattern).map_err(|e| {
                format!(
                    "mogrifier {mogrifier}: {} does not compile: {e}",
                    var("PATTERN")
                )
            })?;
            let name = read("NAME")
                .ok_or_else(|| format!("mogrifier {mogrifier}: {} is not set", var("NAME")))?;
            let tags = tags(&read("TAGS").unwrap_or_default())
                .map_err(|e| format!("mogrifier {mogrifier}: {}: {e}", var("TAGS")))?;
            mogrifiers.push(Mogrifier {
                pattern,
                name,
                tags,
            });
        }
        Ok(Dog { mogrifiers })
    }

    /// The DogStatsD name of a gostats name, and its tags as a line ends with them (`|#a:b,c:d`,
    /// or nothing).
    pub(crate) fn split(&self, go_name: &str) -> (String, String) {
        let (short, mut tags) = carried_tags(go_name);
        let mut name = short.to_owned();
        if let Some((mogrifier, groups)) = self
            .mogrifiers
            .iter()
            .find_map(|m| m.pattern.captures(short).map(|c| (m, c)))
        {
            let groups: Vec<&str> = groups
                .iter()
                .map(|g| g.map_or("", |g| g.as_str()))
                .collect();
            name = substitute(&mogrifier.name, &groups);
            for (key, value) in &mogrifier.tags {
                tags.push(format!("{key}:{}", substitute(value, &groups)));
            }
        }
        let suffix = if tags.is_empty() {
            String::new()
        } else {
            format!("|#{}", tags.join(","))
        };
        (name, suffix)
    }
}

/// A mogrifier's `TAGS` (envconfig's map), neither key nor value empty.
fn tags(text: &str) -> Result<Vec<(String, String)>, String> {
    key_values(text)?
        .into_iter()
        .map(|(key, value)| match key.is_empty() || value.is_empty() {
            true => Err(format!("`{key}:{value}` is not a key:value pair")),
            false => Ok((key.to_owned(), value.to_owned())),
        })
        .collect()
}

/// The name before gostats' first `.__`, and the `key=value` tags after it as `key:value`
/// (an item without `=` is dropped, as the Go sink drops it).
fn carried_tags(go_name: &str) -> (&str, Vec<String>) {
    let Some((short, rest)) = go_name.split_once(".__") else {
        return (go_name, Vec::new());
    };
    let tags = rest
        .split(".__")
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    (short, tags)
}

/// `template` with each `$N` replaced by group N; a `$N` past the last group stays as written.
fn substitute(template: &str, groups: &[&str]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let group = after[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|i| groups.get(i));
        match group {
            Some(value) => out.push_str(value),
            None => out.push_str(&rest[at..at + 1 + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    /// The Go README's example: DOMAIN, then HITS.
    #[test]
    fn the_first_matching_mogrifier_names_and_tags_the_metric() {
        let dog = Dog::from_env(
            &names(&["DOMAIN", "hits"]),
            env(&[
                (
                    "DOG_STATSD_MOGRIFIER_DOMAIN_PATTERN",
                    r"^some\.original\.metric\.(.*)$",
                ),
                ("DOG_STATSD_MOGRIFIER_DOMAIN_NAME", "some.original.metric"),
                ("DOG_STATSD_MOGRIFIER_DOMAIN_TAGS", "domain:$1"),
                (
                    "DOG_STATSD_MOGRIFIER_HITS_PATTERN",
                    r"^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$",
                ),
                (
                    "DOG_STATSD_MOGRIFIER_HITS_NAME",
                    "ratelimit.service.rate_limit.$3",
                ),
                ("DOG_STATSD_MOGRIFIER_HITS_TAGS", "domain:$1,descriptor:$2"),
            ]),
        )
        .expect("valid mogrifiers");
        assert_eq!(
            dog.split("some.original.metric.abc"),
            ("some.original.metric".to_owned(), "|#domain:abc".to_owned())
        );
        assert_eq!(
            dog.split("ratelimit.service.rate_limit.gs.key_value.total_hits.__app=rl.__v=2"),
            (
                "ratelimit.service.rate_limit.total_hits".to_owned(),
                "|#app:rl,v:2,domain:gs,descriptor:key_value".to_owned()
            )
        );
        assert_eq!(
            dog.split("ratelimit.service.config_load_success"),
            (
                "ratelimit.service.config_load_success".to_owned(),
                String::new()
            ),
            "no mogrifier matches: the name as it is, no tags"
        );
    }

    #[test]
    fn names_keep_their_tags_without_mogrifiers() {
        let dog = Dog::default();
        assert_eq!(
            dog.split("a.b.__x=1.__malformed.__y=2"),
            ("a.b".to_owned(), "|#x:1,y:2".to_owned())
        );
    }

    #[test]
    fn placeholders_past_the_groups_stay_as_written() {
        assert_eq!(
            substitute("$0-$1-$2-$9-$-$x", &["all", "one"]),
            "all-one-$2-$9-$-$x"
        );
        assert_eq!(substitute("$10", &["a"; 11]), "a");
        assert_eq!(substitute("plain", &[]), "plain");
        assert_eq!(
            substitute("$99999999999999999999999", &["a"]),
            "$99999999999999999999999"
        );
    }

    #[test]
    fn a_missing_or_broken_variable_is_named() {
        let err = |list: &[&str], vars: &[(&str, &str)]| {
            Dog::from_env(&names(list), env(vars)).expect_err("refused")
        };
        assert!(err(&["m"], &[]).contains("DOG_STATSD_MOGRIFIER_M_PATTERN is not set"));
        let bad_pattern = err(&["m"], &[("DOG_STATSD_MOGRIFIER_M_PATTERN", "(")]);
        assert!(bad_pattern.contains("DOG_STATSD_MOGRIFIER_M_PATTERN does not compile"));
        let no_name = err(&["m"], &[("DOG_STATSD_MOGRIFIER_M_PATTERN", "x")]);
        assert!(no_name.contains("DOG_STATSD_MOGRIFIER_M_NAME is not set"));
        for tags in ["a", "a:b:c", ":v", "k:", "a:b,"] {
            let bad_tags = err(
                &["m"],
                &[
                    ("DOG_STATSD_MOGRIFIER_M_PATTERN", "x"),
                    ("DOG_STATSD_MOGRIFIER_M_NAME", "y"),
                    ("DOG_STATSD_MOGRIFIER_M_TAGS", tags),
                ],
            );
            assert!(
                bad_tags.contains("DOG_STATSD_MOGRIFIER_M_TAGS"),
                "{tags}: {bad_tags}"
            );
        }
    }
}

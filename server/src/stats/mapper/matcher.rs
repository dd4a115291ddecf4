//! Which rule a statsd name matches, as statsd_exporter's mapper finds it: the glob rules
//! first (its state machine, with ordering on: of the glob rules that match, the one written
//! first), then, when none does, the regex rules in the order written (the first that matches
//! and whose `match_metric_type` fits).
//!
//! A glob's `*` is one whole dot-separated field (any text, even none) and a glob matches only
//! names of as many fields. Two quirks of the state machine are kept, since the Go service's
//! users live with them: a glob whose fields are a prefix of an earlier glob's, or that
//! repeats one, never matches itself (the earlier rule's state has no result, or keeps its
//! own), and a repeated glob moves the earlier rule's precedence to its own place.

use std::collections::{HashMap, HashSet};

use super::{MetricType, Rule, Selector};

/// The glob rules of one metric type, in the order they take precedence.
#[derive(Debug, Default)]
pub(super) struct Globs {
    /// (precedence, the pattern's fields, the rule whose result the pattern's state holds).
    entries: Vec<(usize, Vec<String>, usize)>,
}

/// A final state of the state machine: the rule whose result it holds (none when it was an
/// earlier glob's inner state), and its precedence.
type Final = (Option<usize>, usize);

/// The glob rules by the metric type they apply to (counter, gauge, observer).
pub(super) fn index(rules: &[Rule]) -> [Globs; 3] {
    let mut globs: [Globs; 3] = Default::default();
    // Per type: every state's fields, and the final states' (result, precedence).
    let mut states: [HashSet<Vec<String>>; 3] = Default::default();
    let mut finals: [HashMap<Vec<String>, Final>; 3] = Default::default();
    let mut precedence = 0;
    for (at, rule) in rules.iter().enumerate() {
        let Selector::Glob(fields) = &rule.selector else {
            continue;
        };
        for ty in MetricType::ALL {
            if rule.metric_type.is_some_and(|t| t != ty) {
                continue;
            }
            let (states, finals) = (&mut states[ty as usize], &mut finals[ty as usize]);
            let new = !states.contains(fields);
            for n in 1..=fields.len() {
                states.insert(fields[..n].to_vec());
            }
            let entry = finals.entry(fields.clone()).or_insert((None, precedence));
            if new {
                entry.0 = Some(at);
            }
            entry.1 = precedence;
        }
        precedence += 1;
    }
    for (ty, finals) in finals.into_iter().enumerate() {
        let mut entries: Vec<_> = finals
            .into_iter()
            .filter_map(|(fields, (result, precedence))| Some((precedence, fields, result?)))
            .collect();
        entries.sort_by_key(|(precedence, _, _)| *precedence);
        globs[ty].entries = entries;
    }
    globs
}

impl Globs {
    /// The rule the name's fields match first, and the fields its `*` took.
    pub(super) fn find<'a>(&self, fields: &[&'a str]) -> Option<(usize, Vec<&'a str>)> {
        self.entries.iter().find_map(|(_, pattern, rule)| {
            if pattern.len() != fields.len() {
                return None;
            }
            let mut captures = Vec::new();
            for (p, f) in pattern.iter().zip(fields) {
                if p == "*" {
                    captures.push(*f);
                } else if p != f {
                    return None;
                }
            }
            Some((*rule, captures))
        })
    }
}

/// A glob rule's `name` or label value with its `$1`, `${2}` ... made the captured fields, as
/// statsd_exporter's template formatter makes them: a reference past the captures, to `$0`,
/// or by a name (`$x`, `$1x`: the longest run of letters, digits, `_` and `$`) is removed.
pub(super) fn format(template: &str, captures: &[&str]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let braced = after.starts_with('{');
        let body = if braced { &after[1..] } else { after };
        let len = body
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(body.len());
        if len == 0 {
            // No reference: the `$` stays (its pattern needs a name after it).
            out.push('$');
            rest = after;
            continue;
        }
        // The pattern's closing `}` is optional, and taken even without an opening one.
        let end = usize::from(braced) + len + usize::from(body[len..].starts_with('}'));
        let name = &body[..len];
        if let Ok(n) = name.parse::<usize>()
            && (1..=captures.len()).contains(&n)
        {
            out.push_str(captures[n - 1]);
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// statsd_exporter's `EscapeMetricName`: every character but ASCII letters, digits and `_`
/// becomes `_` (a run of `-` one `_`), and a leading digit gets a `_` before it.
pub(crate) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        out.push('_');
    }
    let mut previous = '\0';
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if c == '-' && previous == '-' {
            continue;
        } else {
            out.push('_');
        }
        previous = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_take_the_captures_as_statsd_exporter_does() {
        let caps = ["a", "b"];
        assert_eq!(format("x_${1}_${2}_y", &caps), "x_a_b_y");
        assert_eq!(format("x_$1_y", &caps), "x_", "one name, `1_y`");
        assert_eq!(format("${2}_${1}", &caps), "b_a");
        assert_eq!(format("$2_$1", &caps), "", "one name, `2_$1`");
        assert_eq!(format("$1$2", &caps), "", "one name, `1$2`");
        assert_eq!(format("$1}_", &caps), "a_");
        assert_eq!(format("${3}_${0}_${x}_${1x}", &caps), "___");
        assert_eq!(format("plain", &caps), "plain");
        assert_eq!(format("a$", &caps), "a$");
        assert_eq!(format("${1}z", &caps), "az");
    }

    #[test]
    fn names_are_escaped_as_statsd_exporter_escapes_them() {
        assert_eq!(escape("a.b-c"), "a_b_c");
        assert_eq!(escape("a--b---c"), "a_b_c");
        assert_eq!(escape("1a"), "_1a");
        assert_eq!(escape("é.x"), "__x");
        assert_eq!(escape("ok_name"), "ok_name");
    }
}

//! `PROMETHEUS_MAPPER_YAML`: the Go service's statsd names made Prometheus metrics by the
//! user's statsd_exporter mapping file, as the Go service's Prometheus sink makes them
//! (prometheus/statsd_exporter's `pkg/mapper` at v0.26.1, the version it is built with).
//!
//! Each of the Go service's statistics is named as it names it for statsd (`statsd::go_name`,
//! `EXTRA_TAGS` included), then mapped: the first rule that matches gives the metric's name and
//! labels (`$1`... the name's fields or groups), `scale`, and for the response time whether it
//! is a histogram (`buckets`) or a summary (`quantiles`), or drops it (`action: drop`); a name
//! no rule matches is exported under itself made a valid metric name. The mapping is worked out
//! once per series (see `recorder`), never per call.
//!
//! What the mapping language has that is not done here stops the start with its line named
//! (`parse`): a metric is never exported under a name other than the Go service's.

mod matcher;
mod parse;
mod recorder;
mod shapes;
mod values;
mod yaml;

use std::time::Duration;

use regex::Regex;

pub(crate) use matcher::escape;
pub(crate) use recorder::Mapped;

/// A statsd event's type, as the mapper tells them apart (`match_metric_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricType {
    Counter = 0,
    Gauge = 1,
    /// A timer (`observer`, or `timer` in older files).
    Observer = 2,
}

impl MetricType {
    const ALL: [MetricType; 3] = [MetricType::Counter, MetricType::Gauge, MetricType::Observer];
}

/// How a timer is exported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Observer {
    /// A histogram with these bucket bounds.
    Histogram(Vec<f64>),
    /// A summary: these quantiles over a sliding window of `max_age` in `age_buckets` parts.
    Summary {
        quantiles: Vec<f64>,
        max_age: Duration,
        age_buckets: u32,
    },
}

/// What a statsd name becomes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Not exported (`action: drop`, or a name the rule's template left empty).
    Drop,
    Metric(Metric),
}

/// A Prometheus metric: its name, labels (sorted by name), the factor its values are
/// multiplied by, how it is observed when it is a timer, and its help text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metric {
    pub(crate) name: String,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) scale: Option<f64>,
    pub(crate) observer: Observer,
    pub(crate) help: Option<String>,
}

/// How a rule selects names.
#[derive(Debug)]
enum Selector {
    /// The glob's dot-separated fields (`*` for any one field).
    Glob(Vec<String>),
    Regex(Regex),
}

/// One mapping of the file, its defaults applied.
#[derive(Debug)]
struct Rule {
    selector: Selector,
    metric_type: Option<MetricType>,
    drop: bool,
    name: String,
    /// Label names and value templates, sorted by name.
    labels: Vec<(String, String)>,
    scale: Option<f64>,
    observer: Observer,
    help: Option<String>,
}

/// A loaded mapping file.
#[derive(Debug)]
pub(crate) struct Mapper {
    rules: Vec<Rule>,
    globs: [matcher::Globs; 3],
    /// How a timer no rule matches is observed (the defaults').
    unmatched: Observer,
}

impl Mapper {
    /// Reads and checks the mapping file at `path`; `tags` are `EXTRA_TAGS`' fields, appended
    /// to every statsd name (a rule's `scale` is refused where it could reach a counter).
    /// `None`, with an error logged, when the file cannot be read: Envoy Gateway mounts it
    /// from an optional ConfigMap, and a rate limit service that will not start over its
    /// metrics' names takes every gateway's limits down (the Go service starts too). The
    /// built-in mapping's names are emitted then. A file that is read but cannot be used is
    /// an error (its line named).
    pub(crate) fn load(path: &std::path::Path, tags: &[String]) -> Result<Option<Mapper>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!(
                    "PROMETHEUS_MAPPER_YAML: cannot read {}: {e}; the built-in mapping's names are emitted",
                    path.display()
                );
                return Ok(None);
            }
        };
        Mapper::parse(&text, tags)
            .map(Some)
            .map_err(|e| format!("PROMETHEUS_MAPPER_YAML: {}: {e}", path.display()))
    }

    /// The mapping in `text` (a sentence naming the line when it cannot be used).
    pub(crate) fn parse(text: &str, tags: &[String]) -> Result<Mapper, String> {
        let (rules, unmatched) = parse::rules(text, tags)?;
        let globs = matcher::index(&rules);
        Ok(Mapper {
            rules,
            globs,
            unmatched,
        })
    }

    /// What the statsd name `name`, of type `ty`, becomes.
    pub(crate) fn map(&self, name: &str, ty: MetricType) -> Outcome {
        let fields: Vec<&str> = name.split('.').collect();
        if let Some((at, captures)) = self.globs[ty as usize].find(&fields) {
            let rule = &self.rules[at];
            let format = |template: &str| matcher::format(template, &captures);
            return outcome(rule, format);
        }
        for rule in &self.rules {
            let Selector::Regex(regex) = &rule.selector else {
                continue;
            };
            let Some(captures) = regex.captures(name) else {
                continue;
            };
            if rule.metric_type.is_some_and(|t| t != ty) {
                continue;
            }
            let format = |template: &str| {
                let mut out = String::new();
                captures.expand(template, &mut out);
                out
            };
            return outcome(rule, format);
        }
        Outcome::Metric(Metric {
            name: escape(name),
            labels: Vec::new(),
            scale: None,
            observer: self.unmatched.clone(),
            help: None,
        })
    }
}

/// The rule's metric, its templates filled by `format`.
fn outcome(rule: &Rule, format: impl Fn(&str) -> String) -> Outcome {
    let name = format(&rule.name);
    if rule.drop || name.is_empty() {
        return Outcome::Drop;
    }
    Outcome::Metric(Metric {
        name: escape(&name),
        labels: rule
            .labels
            .iter()
            .map(|(label, value)| (label.clone(), format(value)))
            .collect(),
        scale: rule.scale,
        observer: rule.observer.clone(),
        help: rule.help.clone(),
    })
}

#[cfg(test)]
mod tests;

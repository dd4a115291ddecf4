//! The mapping file read as statsd_exporter v0.26.1 reads it (`defaults` and `mappings`, the
//! deprecated `timer_type`, top-level `buckets` and `quantiles` and `match_metric_type: timer`
//! included) and checked as it checks it, every error naming its line. Where that exporter
//! would do something this process does not, the file is refused: a key it does not know (it
//! ignores one, so a misspelt key silently does nothing there), `ttl`, `glob_disable_ordering`,
//! and a `scale` that could reach a counter (counters count whole numbers here).

use std::time::Duration;

use regex::Regex;

use super::values::{
    boolean, duration, entries, float, floats, match_type, observer_type, quantiles, string,
    unknown, whole,
};
use super::yaml::{self, Kind, Node};
use super::{MetricType, Observer, Rule, Selector};

/// client_golang's default buckets (`prometheus.DefBuckets`), statsd_exporter's default.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// statsd_exporter's default quantiles.
const DEFAULT_QUANTILES: [f64; 3] = [0.5, 0.9, 0.99];
/// client_golang's summary window: `DefMaxAge` in `DefAgeBuckets` parts.
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);
const DEFAULT_AGE_BUCKETS: u32 = 5;

/// The observer keys a mapping or the defaults give.
#[derive(Debug, Default, Clone)]
struct Observing {
    /// `Some(true)` for histogram, `Some(false)` for summary (an explicit `""` too), `None`
    /// when neither `observer_type` nor `timer_type` is given.
    histogram: Option<bool>,
    /// `buckets` and `quantiles` at the top level (deprecated) and in the options blocks.
    top_buckets: Option<Vec<f64>>,
    buckets: Option<Vec<f64>>,
    top_quantiles: Option<Vec<f64>>,
    quantiles: Option<Vec<f64>>,
    max_age: Duration,
    age_buckets: u32,
    /// Whether `histogram_options` / `summary_options` are given (the exporter refuses the
    /// other kind's options beside an observer type).
    histogram_options: bool,
    summary_options: bool,
}

/// The rules of `text`, and how a timer no rule matches is observed.
pub(super) fn rules(text: &str, tags: &[String]) -> Result<(Vec<Rule>, Observer), String> {
    let Some(root) = yaml::parse(text)? else {
        return Ok((
            Vec::new(),
            summary(&Observing::default(), &Observing::default()),
        ));
    };
    let top = entries(&root, "the file")?;
    let mut defaults = Observing::default();
    let mut glob_default = true;
    let mut mappings: &[Node] = &[];
    for (key, line, value) in top {
        match key.as_str() {
            "defaults" => (defaults, glob_default) = read_defaults(value)?,
            "mappings" => match &value.kind {
                Kind::List(items) => mappings = items,
                _ if value.is_null() => {}
                _ => return Err(format!("line {line}: `mappings` must be a list")),
            },
            other => return Err(unknown(*line, other)),
        }
    }
    let mut rules = Vec::with_capacity(mappings.len());
    for mapping in mappings {
        rules.push(read_rule(mapping, &defaults, glob_default, tags)?);
    }
    Ok((rules, unmatched(&defaults)))
}

fn read_defaults(node: &Node) -> Result<(Observing, bool), String> {
    let mut observing = Observing::default();
    let mut timer_type = None;
    let mut glob = true;
    for (key, line, value) in entries(node, "`defaults`")? {
        match key.as_str() {
            "observer_type" => observing.histogram = Some(observer_type(value, *line)?),
            "timer_type" => timer_type = Some(observer_type(value, *line)?),
            "match_type" => glob = match_type(value, *line)?,
            "glob_disable_ordering" => {
                if boolean(value, *line)? {
                    return Err(unsupported(*line, "glob_disable_ordering: true"));
                }
            }
            "ttl" => no_ttl(value, *line)?,
            "buckets" | "quantiles" | "summary_options" | "histogram_options" => {
                read_observing(&mut observing, key, *line, value)?;
            }
            other => return Err(unknown(*line, other)),
        }
    }
    observing.histogram = observing.histogram.or(timer_type);
    // The defaults' top-level quantiles replace the whole of `summary_options` when it has
    // none (v0.26.1's decoding of the deprecated keys).
    if observing.quantiles.as_ref().is_none_or(Vec::is_empty)
        && observing
            .top_quantiles
            .as_ref()
            .is_some_and(|q| !q.is_empty())
    {
        (observing.max_age, observing.age_buckets) = (Duration::ZERO, 0);
    }
    Ok((observing, glob))
}

fn read_rule(
    node: &Node,
    defaults: &Observing,
    glob_default: bool,
    tags: &[String],
) -> Result<Rule, String> {
    let at = node.line;
    let mut selector_text = None;
    let (mut name, mut labels, mut help, mut scale) = (None, Vec::new(), None, None);
    let (mut glob, mut drop, mut metric_type, mut timer_type) = (glob_default, false, None, None);
    let mut observing = Observing::default();
    for (key, line, value) in entries(node, "a mapping")? {
        let line = *line;
        match key.as_str() {
            "match" => selector_text = Some(string(value, line)?),
            "name" => name = Some(string(value, line)?),
            "help" => help = Some(string(value, line)?),
            "labels" => {
                for (label, line, value) in entries(value, "`labels`")? {
                    if !valid(r"^[a-zA-Z_][a-zA-Z0-9_]+$", label) {
                        return Err(format!("line {line}: invalid label name `{label}`"));
                    }
                    labels.push((label.clone(), string(value, *line)?));
                }
            }
            "honor_labels" => {
                // The Go service's statistics carry no labels of their own: nothing to honour.
                boolean(value, line)?;
            }
            "match_type" => glob = match_type(value, line)?,
            "action" => {
                drop = match string(value, line)?.as_str() {
                    "drop" => true,
                    "map" | "" => false,
                    other => return Err(format!("line {line}: invalid action type `{other}`")),
                }
            }
            "match_metric_type" => {
                metric_type = Some(match string(value, line)?.as_str() {
                    "counter" => MetricType::Counter,
                    "gauge" => MetricType::Gauge,
                    "observer" | "timer" => MetricType::Observer,
                    other => return Err(format!("line {line}: invalid metric type `{other}`")),
                })
            }
            "observer_type" => observing.histogram = Some(observer_type(value, line)?),
            "timer_type" => timer_type = Some(observer_type(value, line)?),
            "ttl" => no_ttl(value, line)?,
            "scale" => scale = Some(float(value, line)?),
            "buckets" | "quantiles" | "summary_options" | "histogram_options" => {
                read_observing(&mut observing, key, line, value)?;
            }
            other => return Err(unknown(line, other)),
        }
    }
    observing.histogram = observing.histogram.or(timer_type);
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("line {at}: the mapping sets no metric name"))?;
    let reference = r"\$\{?\d+\}?";
    let name_pattern = format!(r"^([a-zA-Z_]|{reference})([a-zA-Z0-9_]|{reference})*$");
    if !valid(&name_pattern, &name) {
        return Err(format!("line {at}: invalid metric name `{name}`"));
    }
    let text = selector_text.unwrap_or_default();
    let selector = if glob {
        let field = r"[a-zA-Z0-9_][a-zA-Z0-9_\-]*";
        let first = r"\*|[a-zA-Z_][a-zA-Z0-9_\-]*";
        if !valid(&format!(r"^({first})(\.\*|\.{field})*$"), &text) {
            return Err(format!("line {at}: invalid glob match `{text}`"));
        }
        Selector::Glob(text.split('.').map(str::to_owned).collect())
    } else {
        Selector::Regex(
            Regex::new(&text)
                .map_err(|e| format!("line {at}: invalid regex `{text}` in the mapping: {e}"))?,
        )
    };
    if let Some(factor) = scale
        && super::shapes::can_reach_counter(&selector, metric_type, tags)
    {
        return Err(format!(
            "line {at}: `scale: {factor}` on a mapping that can match a counter is not \
             supported (counters count whole numbers here); set `match_metric_type: observer`"
        ));
    }
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Rule {
        selector,
        metric_type,
        drop,
        name,
        labels,
        scale,
        observer: observer(&observing, defaults, at)?,
        help,
    })
}

/// The observer of a mapping, as the exporter resolves it: its own type, else the defaults',
/// else a summary; its own buckets or quantiles (the top-level ones first), else the defaults'.
fn observer(own: &Observing, defaults: &Observing, line: usize) -> Result<Observer, String> {
    if own.top_buckets.is_some() && own.buckets.is_some() {
        return Err(format!(
            "line {line}: buckets both at the top level and in histogram_options"
        ));
    }
    if own.top_quantiles.is_some() && own.quantiles.is_some() {
        return Err(format!(
            "line {line}: quantiles both at the top level and in summary_options"
        ));
    }
    match own.histogram.or(defaults.histogram) {
        Some(true) if own.summary_options => Err(format!(
            "line {line}: a histogram observer with summary_options"
        )),
        Some(false) if own.histogram_options => Err(format!(
            "line {line}: a summary observer with histogram_options"
        )),
        Some(true) => {
            let buckets = own
                .buckets()
                .or_else(|| defaults.buckets())
                .unwrap_or_else(|| DEFAULT_BUCKETS.to_vec());
            if buckets.windows(2).any(|w| w[0] >= w[1]) || buckets.iter().any(|b| b.is_nan()) {
                return Err(format!(
                    "line {line}: histogram buckets must be in increasing order"
                ));
            }
            Ok(Observer::Histogram(buckets))
        }
        _ => Ok(summary(own, defaults)),
    }
}

impl Observing {
    /// The buckets given, the top-level ones first; `None` when none or empty.
    fn buckets(&self) -> Option<Vec<f64>> {
        first_given(&self.top_buckets, &self.buckets)
    }

    fn quantiles(&self) -> Option<Vec<f64>> {
        first_given(&self.top_quantiles, &self.quantiles)
    }
}

fn first_given(top: &Option<Vec<f64>>, options: &Option<Vec<f64>>) -> Option<Vec<f64>> {
    [top, options]
        .into_iter()
        .flatten()
        .find(|v| !v.is_empty())
        .cloned()
}

fn summary(own: &Observing, defaults: &Observing) -> Observer {
    let quantiles = own
        .quantiles()
        .or_else(|| defaults.quantiles())
        .unwrap_or_else(|| DEFAULT_QUANTILES.to_vec());
    let max_age = [own.max_age, defaults.max_age, DEFAULT_MAX_AGE]
        .into_iter()
        .find(|d| !d.is_zero())
        .unwrap_or(DEFAULT_MAX_AGE);
    let age_buckets = [own.age_buckets, defaults.age_buckets, DEFAULT_AGE_BUCKETS]
        .into_iter()
        .find(|n| *n != 0)
        .unwrap_or(DEFAULT_AGE_BUCKETS);
    Observer::Summary {
        quantiles,
        max_age,
        age_buckets,
    }
}

/// How a timer no mapping matches is observed: the defaults' type, a summary if none.
fn unmatched(defaults: &Observing) -> Observer {
    match defaults.histogram {
        Some(true) => Observer::Histogram(
            defaults
                .buckets()
                .unwrap_or_else(|| DEFAULT_BUCKETS.to_vec()),
        ),
        _ => summary(&Observing::default(), defaults),
    }
}

/// `buckets`, `quantiles` (top level) and the `histogram_options` / `summary_options` blocks.
fn read_observing(
    into: &mut Observing,
    key: &str,
    line: usize,
    value: &Node,
) -> Result<(), String> {
    match key {
        "buckets" => into.top_buckets = Some(floats(value, line)?),
        "quantiles" => into.top_quantiles = Some(quantiles(value, line)?),
        "histogram_options" => {
            into.histogram_options = true;
            for (key, line, value) in entries(value, "`histogram_options`")? {
                match key.as_str() {
                    "buckets" => into.buckets = Some(floats(value, *line)?),
                    // Native histograms are not in the text format Prometheus scrapes here.
                    "native_histogram_bucket_factor" | "native_histogram_max_buckets" => {
                        float(value, *line)?;
                    }
                    other => return Err(unknown(*line, other)),
                }
            }
        }
        _ => {
            into.summary_options = true;
            for (key, line, value) in entries(value, "`summary_options`")? {
                match key.as_str() {
                    "quantiles" => into.quantiles = Some(quantiles(value, *line)?),
                    "max_age" => into.max_age = duration(value, *line)?,
                    "age_buckets" => into.age_buckets = whole(value, *line)?,
                    // The window's buffer: how precise, not which quantiles.
                    "buf_cap" => {
                        whole(value, *line)?;
                    }
                    other => return Err(unknown(*line, other)),
                }
            }
        }
    }
    Ok(())
}

fn unsupported(line: usize, what: &str) -> String {
    format!("line {line}: `{what}` is not supported by redlimit-server")
}

fn valid(pattern: &str, text: &str) -> bool {
    Regex::new(pattern).is_ok_and(|re| re.is_match(text))
}

fn no_ttl(node: &Node, line: usize) -> Result<(), String> {
    match duration(node, line)? {
        Duration::ZERO => Ok(()),
        _ => Err(unsupported(line, "ttl")),
    }
}

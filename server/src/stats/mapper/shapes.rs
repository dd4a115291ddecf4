//! Whether a rule can match one of the Go service's counters, from the shapes of their statsd
//! names (`statsd::names`): a `scale` there would make a whole count fractional, which this
//! process's counters cannot hold, so such a rule is refused rather than rounded.

use super::{MetricType, Selector};
use crate::stats::statsd::names::{RULE_STATS, SERVICE};

/// One field of a counter's name, or a run of them.
enum Part {
    Lit(String),
    /// Any one field (a method, an error type).
    Any,
    /// One field or more (a domain and its descriptor's keys and values, which may hold dots).
    Many,
}

/// Whether `selector` can select a counter's name; `tags` are the fields `EXTRA_TAGS` appends.
/// A regex rule is taken to (what it matches is not worked out here) unless it is for another
/// metric type.
pub(super) fn can_reach_counter(
    selector: &Selector,
    metric_type: Option<MetricType>,
    tags: &[String],
) -> bool {
    if metric_type.is_some_and(|t| t != MetricType::Counter) {
        return false;
    }
    let Selector::Glob(fields) = selector else {
        return true;
    };
    shapes(tags).iter().any(|shape| fits(fields, shape))
}

fn shapes(tags: &[String]) -> Vec<Vec<Part>> {
    let lit = |s: &str| Part::Lit(s.to_owned());
    let mut shapes = Vec::new();
    for stat in RULE_STATS {
        shapes.push(vec![
            lit("ratelimit"),
            lit("service"),
            lit("rate_limit"),
            Part::Many,
            lit(stat),
        ]);
    }
    let call = ["ratelimit", "service", "call", "should_rate_limit"];
    shapes.push(call.iter().map(|s| lit(s)).chain([Part::Any]).collect());
    for name in SERVICE {
        let stat = name.trim_start_matches("ratelimit_service_");
        shapes.push(vec![lit("ratelimit"), lit("service"), lit(stat)]);
    }
    shapes.push(vec![
        lit("ratelimit_server"),
        Part::Any,
        lit("total_requests"),
    ]);
    for shape in &mut shapes {
        shape.extend(tags.iter().map(|t| lit(t)));
    }
    shapes
}

/// Whether the glob's fields can match a name of this shape.
fn fits(glob: &[String], shape: &[Part]) -> bool {
    match (glob.split_first(), shape.split_first()) {
        (None, None) => true,
        (_, Some((Part::Many, rest))) => (1..=glob.len()).any(|n| fits(&glob[n..], rest)),
        (Some((field, glob)), Some((part, rest))) => {
            let one = match part {
                Part::Lit(lit) => field == "*" || field == lit,
                _ => true,
            };
            one && fits(glob, rest)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(text: &str) -> Selector {
        Selector::Glob(text.split('.').map(str::to_owned).collect())
    }

    #[test]
    fn globs_that_can_and_cannot_reach_a_counter() {
        let none: [String; 0] = [];
        for counter in [
            "ratelimit.service.rate_limit.*.*.total_hits",
            "ratelimit.service.rate_limit.*.*.*.*.over_limit",
            "ratelimit.service.*.*.*",
            "ratelimit_server.*.*",
            "ratelimit.service.config_load_success",
            "ratelimit.service.call.should_rate_limit.*",
        ] {
            assert!(can_reach_counter(&glob(counter), None, &none), "{counter}");
        }
        for other in [
            "ratelimit_server.*.response_time",
            "ratelimit.service.rate_limit.total_hits",
            "ratelimit.service.other",
            "ratelimit_server.*.total_requests.*",
        ] {
            assert!(!can_reach_counter(&glob(other), None, &none), "{other}");
        }
        let counter = glob("ratelimit.service.rate_limit.*.*.total_hits");
        assert!(!can_reach_counter(
            &counter,
            Some(MetricType::Observer),
            &none
        ));
        let tags = ["__env=prod".to_owned()];
        assert!(!can_reach_counter(&counter, None, &tags), "tags are fields");
        let tagged = glob("ratelimit_server.*.total_requests.*");
        assert!(can_reach_counter(&tagged, None, &tags));
        let regex = Selector::Regex(regex::Regex::new("x").unwrap());
        assert!(can_reach_counter(&regex, None, &none));
        assert!(!can_reach_counter(&regex, Some(MetricType::Gauge), &none));
    }
}

//! envoyproxy/ratelimit's statsd names, from the metrics this process records under its
//! Prometheus mapping's names: `ratelimit_service_rate_limit_total_hits{domain="d",
//! key1="k_v",key2="inner"}` is `ratelimit.service.rate_limit.d.k_v.inner.total_hits`, as the
//! Go service's `stats.NewStats` names it (the stats key made safe by its
//! `SanitizeStatName`: `:` and `|` become `_`, and so do the dots of an IPv4 address), then
//! gostats' tags appended (`.__key=value`, sorted by key: `EXTRA_TAGS`).

use metrics::Key;

use crate::settings::ExtraTags;
use crate::stats::grpc_methods::{RESPONSE_TIME, TOTAL_REQUESTS};

/// The per-rule counters, by the Prometheus name's suffix (the statsd name's last part), and
/// the per-domain one (`domain_not_found`, labelled `domain` alone:
/// `ratelimit.service.rate_limit.DOMAIN.domain_not_found`).
pub(crate) const RULE_PREFIX: &str = "ratelimit_service_rate_limit_";
pub(crate) const RULE_STATS: [&str; 7] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "within_limit",
    "shadow_mode",
    "over_limit_with_local_cache",
    "domain_not_found",
];
const CALL_ERROR: &str = "ratelimit_service_should_rate_limit_error";
/// The service's own counters: `ratelimit.service.NAME`.
pub(crate) const SERVICE: [&str; 3] = [
    "ratelimit_service_config_load_success",
    "ratelimit_service_config_load_error",
    "ratelimit_service_global_shadow_mode",
];

/// Whether the Go service has a statsd counter for this metric (redlimit's own metrics are
/// Prometheus's only).
pub(crate) fn is_go_counter(name: &str) -> bool {
    name.strip_prefix(RULE_PREFIX)
        .is_some_and(|stat| RULE_STATS.contains(&stat))
        || name == CALL_ERROR
        || SERVICE.contains(&name)
        || name == TOTAL_REQUESTS
}

/// Whether the Go service has a statsd timer for this metric.
pub(crate) fn is_go_timer(name: &str) -> bool {
    name == RESPONSE_TIME
}

/// The Go service's statsd name for `key`, tagged; `None` for a metric it has none for.
pub(crate) fn go_name(key: &Key, tags: &ExtraTags) -> Option<String> {
    let name = key.name();
    let label = |wanted: &str| {
        key.labels()
            .find(|l| l.key() == wanted)
            .map(|l| l.value().to_owned())
    };
    let mut out = if let Some(stat) = name.strip_prefix(RULE_PREFIX) {
        if !RULE_STATS.contains(&stat) {
            return None;
        }
        // The library split the stats key at its first two dots: joined, it is whole again.
        let mut stats_key = label("domain")?;
        for part in [label("key1"), label("key2")].into_iter().flatten() {
            stats_key.push('.');
            stats_key.push_str(&part);
        }
        format!(
            "ratelimit.service.rate_limit.{}.{stat}",
            sanitize(&stats_key)
        )
    } else if name == CALL_ERROR {
        format!(
            "ratelimit.service.call.should_rate_limit.{}",
            label("err_type")?
        )
    } else if let Some(what) = SERVICE.iter().find(|n| **n == name) {
        format!("ratelimit.service.{}", &what["ratelimit_service_".len()..])
    } else if name == TOTAL_REQUESTS {
        format!("ratelimit_server.{}.total_requests", label("grpc_method")?)
    } else if name == RESPONSE_TIME {
        format!("ratelimit_server.{}.response_time", label("grpc_method")?)
    } else {
        return None;
    };
    for (key, value) in &tags.0 {
        out.push_str(".__");
        out.push_str(key);
        out.push('=');
        out.push_str(value);
    }
    Some(out)
}

/// The Go service's `SanitizeStatName`: `:` and `|` become `_`, and so do the dots of every
/// match of `\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}` (Go's leftmost-first, greedy, ASCII digits).
fn sanitize(stats_key: &str) -> String {
    let mut bytes: Vec<u8> = stats_key
        .bytes()
        .map(|b| if b == b':' || b == b'|' { b'_' } else { b })
        .collect();
    let mut i = 0;
    while i < bytes.len() {
        match ipv4_at(&bytes, i) {
            Some(end) => {
                for b in &mut bytes[i..end] {
                    if *b == b'.' {
                        *b = b'_';
                    }
                }
                i = end;
            }
            None => i += 1,
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes: still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The end of an IPv4-like match starting at `start`.
fn ipv4_at(bytes: &[u8], start: usize) -> Option<usize> {
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take(3)
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut at = start;
    for _ in 0..3 {
        // `\d{1,3}\.`: three digits followed by a fourth cannot be followed by a dot.
        let n = digits(at);
        if n == 0 || bytes.get(at + n) != Some(&b'.') {
            return None;
        }
        at += n + 1;
    }
    match digits(at) {
        0 => None,
        n => Some(at + n),
    }
}

#[cfg(test)]
mod tests {
    use metrics::Label;

    use super::*;

    fn key(name: &'static str, labels: &[(&'static str, &str)]) -> Key {
        let labels: Vec<Label> = labels
            .iter()
            .map(|(k, v)| Label::new(*k, (*v).to_owned()))
            .collect();
        Key::from_parts(name, labels)
    }

    #[test]
    fn names_are_the_go_services() {
        let none = ExtraTags::default();
        let hits = key(
            "ratelimit_service_rate_limit_total_hits",
            &[
                ("domain", "edge"),
                ("key1", "nested_outer"),
                ("key2", "inner.deeper"),
            ],
        );
        assert_eq!(
            go_name(&hits, &none).as_deref(),
            Some("ratelimit.service.rate_limit.edge.nested_outer.inner.deeper.total_hits")
        );
        let ip = key(
            "ratelimit_service_rate_limit_over_limit",
            &[
                ("domain", "edge"),
                ("key1", "remote_address_10.0.0.1:8080|x"),
            ],
        );
        assert_eq!(
            go_name(&ip, &none).as_deref(),
            Some("ratelimit.service.rate_limit.edge.remote_address_10_0_0_1_8080_x.over_limit")
        );
        let error = key(CALL_ERROR, &[("err_type", "redis_error")]);
        let tags = ExtraTags(vec![
            ("app".into(), "rl".into()),
            ("env".into(), "prod".into()),
        ]);
        assert_eq!(
            go_name(&error, &tags).as_deref(),
            Some("ratelimit.service.call.should_rate_limit.redis_error.__app=rl.__env=prod")
        );
        let load = key("ratelimit_service_config_load_success", &[]);
        assert_eq!(
            go_name(&load, &none).as_deref(),
            Some("ratelimit.service.config_load_success")
        );
        let calls = key(TOTAL_REQUESTS, &[("grpc_method", "ShouldRateLimit")]);
        assert_eq!(
            go_name(&calls, &tags).as_deref(),
            Some("ratelimit_server.ShouldRateLimit.total_requests.__app=rl.__env=prod")
        );
        let time = key(RESPONSE_TIME, &[("grpc_method", "Check")]);
        assert_eq!(
            go_name(&time, &none).as_deref(),
            Some("ratelimit_server.Check.response_time")
        );
        let cached = key(
            "ratelimit_service_rate_limit_over_limit_with_local_cache",
            &[("domain", "edge"), ("key1", "ip_10.0.0.1")],
        );
        assert_eq!(
            go_name(&cached, &none).as_deref(),
            Some("ratelimit.service.rate_limit.edge.ip_10_0_0_1.over_limit_with_local_cache")
        );
        let unknown = key(
            "ratelimit_service_rate_limit_domain_not_found",
            &[("domain", "nowhere:x")],
        );
        assert_eq!(
            go_name(&unknown, &none).as_deref(),
            Some("ratelimit.service.rate_limit.nowhere_x.domain_not_found")
        );
        let shadow = key("ratelimit_service_global_shadow_mode", &[]);
        assert_eq!(
            go_name(&shadow, &tags).as_deref(),
            Some("ratelimit.service.global_shadow_mode.__app=rl.__env=prod")
        );
        assert!(is_go_timer(RESPONSE_TIME) && !is_go_counter(RESPONSE_TIME));
        assert!(!is_go_counter("redlimit_decisions_total"));
        assert!(!is_go_counter("ratelimit_service_rate_limit_other"));
        assert!(is_go_counter("ratelimit_service_rate_limit_shadow_mode"));
        assert_eq!(go_name(&key("redlimit_decisions_total", &[]), &none), None);
    }

    #[test]
    fn ipv4_dots_are_replaced_where_gos_regexp_matches() {
        assert_eq!(sanitize("d.ip_1.2.3.4"), "d.ip_1_2_3_4");
        // Leftmost-first: the match starts after the fourth digit of `1234`.
        assert_eq!(sanitize("d.v_1234.5.6.7"), "d.v_1234_5_6_7");
        // The last group is greedy up to three digits.
        assert_eq!(sanitize("d.v_1.2.3.4567"), "d.v_1_2_3_4567");
        assert_eq!(sanitize("d.v_1.2.3"), "d.v_1.2.3");
        assert_eq!(sanitize("d.v_a.b.c.d"), "d.v_a.b.c.d");
        assert_eq!(sanitize("d.v_1.2.3.4.5.6.7.8"), "d.v_1_2_3_4.5_6_7_8");
    }
}

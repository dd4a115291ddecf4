//! The mapper on the two files it exists for (the Go service's built-in mapping and Envoy
//! Gateway's, verbatim under `tests/fixtures/mapper/`), on statsd_exporter's rules of
//! precedence, and on what it refuses.

use super::*;

const GO_DEFAULT: &str =
    include_str!("../../../tests/fixtures/mapper/ratelimit-default_mapper.yaml");
const GATEWAY: &str = include_str!("../../../tests/fixtures/mapper/envoy-gateway-statsd_conf.yaml");
const DEF_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn mapper(text: &str) -> Mapper {
    Mapper::parse(text, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// The name and labels a counter's statsd name becomes.
fn counter(mapper: &Mapper, statsd: &str) -> (String, Vec<(String, String)>) {
    match mapper.map(statsd, MetricType::Counter) {
        Outcome::Metric(m) => {
            assert_eq!(m.scale, None, "{statsd}");
            (m.name, m.labels)
        }
        Outcome::Drop => panic!("{statsd} dropped"),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn refused(text: &str) -> String {
    match Mapper::parse(text, &[]) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn both_files_map_the_go_services_counters_as_it_does() {
    for file in [GO_DEFAULT, GATEWAY] {
        let m = mapper(file);
        let hits = "ratelimit.service.rate_limit.edge.path_api.total_hits";
        assert_eq!(
            counter(&m, hits),
            (
                "ratelimit_service_rate_limit_total_hits".to_owned(),
                labels(&[("domain", "edge"), ("key1", "path_api")])
            )
        );
        // Three fields or more after the domain: the regex rules, first two kept as key1, key2.
        let deep = "ratelimit.service.rate_limit.edge.a_1.b_2.c_3.over_limit";
        assert_eq!(
            counter(&m, deep),
            (
                "ratelimit_service_rate_limit_over_limit".to_owned(),
                labels(&[("domain", "edge"), ("key1", "a_1"), ("key2", "b_2")])
            )
        );
        // statsd_exporter's regexes are not anchored: `.over_limit` is found inside
        // `.over_limit_with_local_cache`, so the Go service counts those hits there too.
        let cached = "ratelimit.service.rate_limit.edge.a.b.over_limit_with_local_cache";
        assert_eq!(
            counter(&m, cached).0,
            "ratelimit_service_rate_limit_over_limit"
        );
        // No rule: the statsd name itself, made a metric name.
        let cached = "ratelimit.service.rate_limit.edge.a.over_limit_with_local_cache";
        assert_eq!(
            counter(&m, cached),
            (
                "ratelimit_service_rate_limit_edge_a_over_limit_with_local_cache".to_owned(),
                vec![]
            )
        );
        let unknown = "ratelimit.service.rate_limit.nowhere.domain_not_found";
        assert_eq!(
            counter(&m, unknown).0,
            "ratelimit_service_rate_limit_nowhere_domain_not_found"
        );
        let error = "ratelimit.service.call.should_rate_limit.redis_error";
        assert_eq!(
            counter(&m, error),
            (
                "ratelimit_service_should_rate_limit_error".to_owned(),
                labels(&[("err_type", "redis_error")])
            )
        );
        let calls = "ratelimit_server.ShouldRateLimit.total_requests";
        assert_eq!(
            counter(&m, calls),
            (
                "ratelimit_service_total_requests".to_owned(),
                labels(&[("grpc_method", "ShouldRateLimit")])
            )
        );
        let loaded = counter(&m, "ratelimit.service.config_load_success");
        assert_eq!(
            loaded,
            ("ratelimit_service_config_load_success".to_owned(), vec![])
        );
        let shadow = counter(&m, "ratelimit.service.global_shadow_mode");
        assert_eq!(shadow.0, "ratelimit_service_global_shadow_mode");
        // EXTRA_TAGS make the names longer than the globs: unmatched, as in the Go service.
        let tagged = counter(&m, "ratelimit.service.config_load_success.__env=prod");
        assert_eq!(tagged.0, "ratelimit_service_config_load_success___env_prod");
    }
}

#[test]
fn the_response_time_is_a_histogram_in_seconds_by_default_and_milliseconds_for_the_gateway() {
    let timer = "ratelimit_server.Check.response_time";
    for (file, scale) in [(GO_DEFAULT, Some(0.001)), (GATEWAY, None)] {
        let Outcome::Metric(metric) = mapper(file).map(timer, MetricType::Observer) else {
            panic!("dropped");
        };
        assert_eq!(metric.name, "ratelimit_service_response_time_seconds");
        assert_eq!(metric.labels, labels(&[("grpc_method", "Check")]));
        assert_eq!(metric.scale, scale);
        assert_eq!(metric.observer, Observer::Histogram(DEF_BUCKETS.to_vec()));
    }
    // `match_metric_type: counter`: a timer of that name is not the rule's.
    let error = "ratelimit.service.call.should_rate_limit.redis_error";
    let Outcome::Metric(metric) = mapper(GATEWAY).map(error, MetricType::Observer) else {
        panic!("dropped");
    };
    assert_eq!(
        metric.name,
        "ratelimit_service_call_should_rate_limit_redis_error"
    );
    assert!(
        matches!(metric.observer, Observer::Summary { .. }),
        "the default"
    );
}

#[test]
fn globs_take_precedence_in_the_order_written_then_regexes() {
    let m = mapper(
        "mappings:
  - match: a.*.c
    name: first_$1
  - match: a.b.c
    name: second
  - match: a.*
    name: never
  - match: '^a\\.(.*)$'
    match_type: regex
    name: re_$1
  - match: x.*
    name: dropped
    action: drop
  - match: y.*
    name: $1
",
    );
    let name = |statsd: &str| match m.map(statsd, MetricType::Counter) {
        Outcome::Metric(metric) => metric.name,
        Outcome::Drop => "DROP".to_owned(),
    };
    assert_eq!(name("a.b.c"), "first_b", "the first glob written wins");
    assert_eq!(name("a..c"), "first_", "`*` takes an empty field");
    // `a.*` is a prefix of `a.*.c`: its state has no result (the state machine's quirk).
    assert_eq!(name("a.z"), "re_z");
    assert_eq!(name("x.y"), "DROP");
    assert_eq!(name("y."), "DROP", "a name its template leaves empty");
    assert_eq!(name("q-1.2"), "q_1_2");
}

#[test]
fn observers_follow_their_type_the_defaults_and_the_deprecated_keys() {
    let m = mapper(
        "defaults:
  timer_type: histogram
  buckets: [1, 2]
mappings:
  - match: t.own
    name: own
    histogram_options: {buckets: [5, 10]}
  - match: t.sum
    name: sum
    observer_type: summary
    quantiles: [{quantile: 0.75, error: 0.01}]
    summary_options: null
  - match: t.inherit
    name: inherit
",
    );
    let observer = |statsd: &str| match m.map(statsd, MetricType::Observer) {
        Outcome::Metric(metric) => metric.observer,
        Outcome::Drop => panic!("dropped"),
    };
    assert_eq!(observer("t.own"), Observer::Histogram(vec![5.0, 10.0]));
    assert_eq!(observer("t.inherit"), Observer::Histogram(vec![1.0, 2.0]));
    assert_eq!(observer("t.other"), Observer::Histogram(vec![1.0, 2.0]));
    assert_eq!(
        observer("t.sum"),
        Observer::Summary {
            quantiles: vec![0.75],
            max_age: Duration::from_secs(600),
            age_buckets: 5
        }
    );
}

#[test]
fn what_is_not_done_here_stops_the_start_with_its_line() {
    let cases = [
        (
            "mappings:\n  - match: a.b\n    name: x\n    ttl: 1m\n",
            "line 4:",
        ),
        ("defaults:\n  glob_disable_ordering: true\n", "line 2:"),
        (
            "mappings:\n  - match: a.b\n    name: x\n    lables: {a: b}\n",
            "line 4:",
        ),
        (
            "d: &d {name: x}\nmappings:\n  - match: a\n    <<: *d\n",
            "line 4:",
        ),
        (
            "mappings:\n  - match: a.b\n    name: x\n  - match: ratelimit.service.rate_limit.*.*.total_hits\n    name: y\n    scale: 2\n",
            "line 4:",
        ),
        (
            "mappings:\n  - match: a.b\n    name: x\n    scale: 2\n    match_type: regex\n",
            "line 2:",
        ),
        ("mappings:\n  - match: 'a.*b'\n    name: x\n", "line 2:"),
        (
            "mappings:\n  - match: a\n    name: x\n    labels: {a: v}\n",
            "line 4:",
        ),
        (
            "mappings:\n  - match: '(a'\n    match_type: regex\n    name: x\n",
            "line 2:",
        ),
        ("mappings:\n  - match: a\n    name: 'x.y'\n", "line 2:"),
        ("mappings:\n  - match: a\n", "line 2:"),
        (
            "mappings:\n  - match: a\n    name: x\n    observer_type: histo\n",
            "line 4:",
        ),
        (
            "mappings:\n  - match: a\n    name: x\n    observer_type: histogram\n    buckets: [2, 1]\n",
            "line 2:",
        ),
    ];
    for (text, line) in cases {
        let error = refused(text);
        assert!(error.starts_with(line), "{error} for\n{text}");
    }
    // The timer's scale is allowed: no counter has a name it matches.
    Mapper::parse(
        "mappings:\n  - match: a.b\n    name: x\n    scale: 2\n    match_type: regex\n    match_metric_type: observer\n",
        &[],
    )
    .expect("a timer's scale");
}

//! The limiter's own health in metrics, on a real Redis, rendered by a Prometheus recorder:
//! decisions allowed and denied, the deny cache filled, a concurrency lease held and given
//! back, a frozen Redis that trips the breaker and isolates a local-first store, both healing
//! once it thaws, config reloads applied and refused, and a request without a peer address
//! (answered 500, counted as not limited). Every metric the Grafana dashboard
//! (`docs/grafana/redlimit.json`) queries must be rendered by then.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use redlimit::config::Reloader;
use redlimit::key::PeerIp;
use redlimit::layer::{CircuitBreaker, Rule};
use redlimit::store::LocalFirstStore;
use redlimit::telemetry::{
    BREAKER_STATE, BREAKER_TRANSITIONS, CONFIG_RELOADS, DECISIONS, DENY_CACHE_ENTRIES,
    HISTOGRAM_BUCKETS, LEASES_IN_FLIGHT, LOCAL_FIRST_ISOLATED, LOCAL_FIRST_SYNC_AGE,
    REQUESTS_UNDECIDED,
};
use redlimit::{Limit, Policy, RateLimitLayer};
use support::*;

/// Generous: a frozen Redis stalls the local-first task for a heartbeat's timeout (3 s) a round.
const WITHIN: Duration = Duration::from_secs(30);

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/grafana/redlimit.json");

/// The value of the series `name` whose labels include `labels`, if rendered.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            let rest = line.strip_prefix(name);
            rest.is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .find(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

/// An app answering every GET with its decision's source (`Store`, `DenyCache`, ...).
fn source_app(layer: RateLimitLayer) -> Router {
    let source = |d: redlimit::Decision| async move { format!("{:?}", d.source()) };
    Router::new().route("/{*rest}", get(source)).layer(layer)
}

async fn get_source(app: &Router, path: &str, ip: &str) -> (StatusCode, String) {
    let response = send(app, request(path, ip, &[])).await;
    let status = response.status();
    (status, body_text(response).await)
}

/// Every `redlimit_*` name in the dashboard's queries (panel targets and variables).
fn dashboard_metrics() -> BTreeSet<String> {
    fn walk(value: &serde_json::Value, names: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    if let (true, Some(query)) = (key == "expr" || key == "definition", v.as_str())
                    {
                        for (start, _) in query.match_indices("redlimit_") {
                            let name: String = query[start..]
                                .chars()
                                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                                .collect();
                            names.insert(name);
                        }
                    }
                    walk(v, names);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, names)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(DASHBOARD).expect("the dashboard");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut names = BTreeSet::new();
    walk(&json, &mut names);
    names
}

#[test]
fn the_dashboard_is_templated_on_the_datasource_and_policy() {
    let text = std::fs::read_to_string(DASHBOARD).expect("the dashboard");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let vars = json["templating"]["list"].as_array().expect("variables");
    let var = |name: &str| vars.iter().find(|v| v["name"] == name).expect(name);
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    assert_eq!(var("policy")["type"], "query");
    let panels = json["panels"].as_array().expect("panels");
    let targets: Vec<_> = panels
        .iter()
        .filter_map(|p| p["targets"].as_array())
        .flatten()
        .collect();
    assert!(targets.len() >= 12, "{} queries", targets.len());
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{panel}");
    }
    let uses_policy = targets
        .iter()
        .filter(|t| t["expr"].as_str().is_some_and(|e| e.contains("$policy")))
        .count();
    assert!(uses_policy >= 4, "{uses_policy} queries filter by $policy");
}

#[tokio::test(flavor = "current_thread")]
async fn the_limiters_health_is_rendered_for_the_dashboard() {
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in HISTOGRAM_BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)
            .expect("valid buckets");
    }
    let recorder = builder.build_recorder();
    let metrics: PrometheusHandle = recorder.handle();
    // This thread's recorder: the runtime is current-thread, so the layers' spawned probes and
    // the local-first task record here too, and nothing meets other tests' recorder.
    let _local = metrics::set_default_local_recorder(&recorder);
    let redis = RedisServer::start();

    let exact = RateLimitLayer::builder_per_route(redis_store(&redis, "health").await)
        .rule(
            Rule::new(
                "/api*",
                gcra_policy("health-api", 2, Duration::from_secs(3600)),
            )
            .unwrap()
            .key(PeerIp),
        )
        .rule(
            Rule::new(
                "/lease*",
                Policy::new(
                    "health-lease",
                    [Limit::concurrency(1, Duration::from_secs(60)).unwrap()],
                )
                .unwrap(),
            )
            .unwrap()
            .key(PeerIp),
        )
        .store_deadline(Duration::from_millis(100))
        .circuit_breaker(CircuitBreaker::new().cool_down(Duration::from_millis(300)))
        .build()
        .expect("valid layer");
    let app = source_app(exact.clone());

    // Allowed, denied by Redis (cached), then denied by the deny cache.
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(get_source(&app, "/api", "10.0.0.1").await);
    }
    assert_eq!(
        seen.iter().map(|(s, _)| s.as_u16()).collect::<Vec<_>>(),
        [200, 200, 429, 429]
    );
    assert_eq!(seen[0].1, "Store");
    let text = metrics.render();
    let decisions = |outcome, source| {
        let labels = [
            ("policy", "health-api"),
            ("outcome", outcome),
            ("source", source),
        ];
        value(&text, DECISIONS, &labels)
    };
    assert_eq!(decisions("allowed", "store"), Some(2.0), "{text}");
    assert_eq!(decisions("denied", "store"), Some(1.0), "{text}");
    assert_eq!(decisions("denied", "deny_cache"), Some(1.0), "{text}");
    assert_eq!(value(&text, DENY_CACHE_ENTRIES, &[]), Some(1.0), "{text}");

    // A request without a peer address (no key): answered 500, and counted as not limited.
    let no_peer = http::Request::get("/api")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = send(&app, no_peer).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let labels = [("policy", "health-api"), ("reason", "no_key")];
    let text = metrics.render();
    assert_eq!(
        value(&text, REQUESTS_UNDECIDED, &labels),
        Some(1.0),
        "{text}"
    );

    // A concurrency lease, held while the response body is.
    let held = send(&app, request("/lease", "10.0.0.3", &[])).await;
    assert_eq!(held.status(), StatusCode::OK);
    let leases = |text: &str| value(text, LEASES_IN_FLIGHT, &[("policy", "health-lease")]);
    let text = metrics.render();
    assert_eq!(leases(&text), Some(1.0), "{text}");
    let (second, _) = get_source(&app, "/lease", "10.0.0.3").await;
    assert_eq!(second, StatusCode::TOO_MANY_REQUESTS, "one at a time");
    drop(held);
    assert_eq!(leases(&metrics.render()), Some(0.0));

    // A local-first policy, synced: its key hot from its first decision (exact, by Redis),
    // decided in memory from its first sync.
    let local_first = LocalFirstStore::builder(redis_store(&redis, "health-lf").await)
        .interval(Duration::from_millis(50))
        .local_after(1)
        .build()
        .expect("local-first store");
    let lf_app = source_app(RateLimitLayer::new(
        local_first.clone(),
        gcra_policy("health-lf", 1_000_000, Duration::from_secs(3600)),
    ));
    assert_eq!(get_source(&lf_app, "/lf", "10.0.0.1").await.1, "Store");
    let synced = eventually(WITHIN, async || {
        let text = metrics.render();
        get_source(&lf_app, "/lf", "10.0.0.1").await.1 == "LocalFirst"
            && local_first.syncs() > 0
            && value(&text, LOCAL_FIRST_ISOLATED, &[]) == Some(0.0)
            && value(&text, LOCAL_FIRST_SYNC_AGE, &[]).is_some_and(|age| age < 1.0)
    })
    .await;
    assert!(synced, "{}", metrics.render());

    // Redis freezes: a call misses its deadline in silence, a probe finds nothing, the
    // breaker opens; it stays open while no request comes to probe it.
    redis.freeze();
    let breaker = |text: &str, state| {
        let labels = [("store", "redis"), ("domain", "0"), ("state", state)];
        value(text, BREAKER_STATE, &labels)
    };
    let transitions = |text: &str, state| {
        let labels = [("store", "redis"), ("domain", "0"), ("state", state)];
        value(text, BREAKER_TRANSITIONS, &labels)
    };
    let (status, source) = get_source(&app, "/api", "10.0.0.2").await;
    assert_eq!((status, source.as_str()), (StatusCode::OK, "Local"));
    let tripped = eventually(WITHIN, async || {
        breaker(&metrics.render(), "open") == Some(1.0)
    })
    .await;
    let text = metrics.render();
    assert!(tripped, "{text}");
    assert_eq!(breaker(&text, "closed"), Some(0.0), "{text}");
    assert_eq!(breaker(&text, "half_open"), Some(0.0), "{text}");
    assert_eq!(transitions(&text, "open"), Some(1.0), "{text}");
    assert_eq!(transitions(&text, "closed"), Some(0.0), "{text}");

    // The local-first store, its syncs failing, decides alone.
    let isolated = eventually(WITHIN, async || {
        get_source(&lf_app, "/lf", "10.0.0.1").await;
        let text = metrics.render();
        value(&text, LOCAL_FIRST_ISOLATED, &[]) == Some(1.0)
            && value(&text, LOCAL_FIRST_SYNC_AGE, &[]).is_some_and(|age| age >= 1.0)
    })
    .await;
    assert!(isolated, "{}", metrics.render());

    // Redis thaws: a probe closes the breaker, and the local-first store syncs again.
    redis.thaw();
    let mut ip = 0;
    let healed = eventually(WITHIN, async || {
        ip += 1;
        get_source(&app, "/api", &format!("10.0.1.{ip}")).await.1 == "Store"
    })
    .await;
    let text = metrics.render();
    assert!(healed, "{text}");
    assert_eq!(breaker(&text, "closed"), Some(1.0), "{text}");
    assert_eq!(breaker(&text, "open"), Some(0.0), "{text}");
    assert_eq!(breaker(&text, "half_open"), Some(0.0), "{text}");
    assert_eq!(transitions(&text, "open"), Some(1.0), "one trip: {text}");
    assert_eq!(transitions(&text, "closed"), Some(1.0), "{text}");
    let resynced = eventually(WITHIN, async || {
        get_source(&lf_app, "/lf", "10.0.0.1").await;
        let text = metrics.render();
        value(&text, LOCAL_FIRST_ISOLATED, &[]) == Some(0.0)
            && value(&text, LOCAL_FIRST_SYNC_AGE, &[]).is_some_and(|age| age < 1.0)
    })
    .await;
    assert!(resynced, "{}", metrics.render());

    // Reloads: a valid file applied (its rules replace the layer's, and with them the deny
    // cache), a broken one refused.
    let dir = std::env::temp_dir().join(unique_prefix("health-reload"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let good = dir.join("good.toml");
    let broken = dir.join("broken.toml");
    std::fs::write(
        &good,
        r#"
[[policy]]
name = "health-api"
limits = [{ algorithm = "gcra", rate = "2/1h" }]

[[route]]
route = "/api*"
policy = "health-api"
key = "ip"
"#,
    )
    .expect("write");
    std::fs::write(&broken, "[[policy]]\nname = 7\n").expect("write");
    let empty = dir.join("empty.toml");
    std::fs::write(&empty, "").expect("write");
    let reloader = Reloader::new(exact.handle());
    reloader.reload_from(&good).expect("a valid file");
    assert!(reloader.reload_from(&broken).is_err());
    assert!(reloader.reload_from(&empty).is_err());
    assert!(reloader.reload_from(dir.join("missing.toml")).is_err());
    let text = metrics.render();
    for reason in ["invalid", "no_rules", "unreadable"] {
        assert_eq!(
            value(
                &text,
                CONFIG_RELOADS,
                &[("result", "refused"), ("reason", reason)]
            ),
            Some(1.0),
            "{reason}: {text}"
        );
    }
    assert_eq!(
        value(&text, CONFIG_RELOADS, &[("result", "applied")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(value(&text, DENY_CACHE_ENTRIES, &[]), Some(0.0), "{text}");
    std::fs::remove_dir_all(&dir).ok();

    // Everything the dashboard asks for is there.
    let names = dashboard_metrics();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        let rendered = text.lines().any(|line| {
            line.strip_prefix(name.as_str())
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        });
        assert!(
            rendered,
            "the dashboard queries {name}, not rendered:\n{text}"
        );
    }
}

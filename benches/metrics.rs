//! What the metrics cost per request: the layer's decision path (memory store, no I/O) with a
//! Prometheus recorder installed, against the same path with no recorder (the `metrics`
//! facade's no-op handles).
//!
//! `cargo bench --bench metrics` (9 rounds × 2 s per variant; `-- --quick`: 2 rounds × 1 s).
//!
//! Both layers live in one process: the one without a recorder takes its (no-op) handles
//! before the recorder is installed, and keeps them. The variants alternate round by round on
//! one thread of a current-thread runtime; the figure is that thread's CPU time per request
//! (`/proc/thread-self`), the median of the rounds; the cost of the metrics is the median of
//! each round's difference (the variants of one round ran side by side, under the same load).
//!
//! The memory store answers inline, so that path records no store latency; a Redis call adds
//! one record of the latency histogram, measured alone at the end (CPU per record).

#[path = "support/mod.rs"]
mod support;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use http::request::Parts;
use http::{Request, Response};
use metrics_exporter_prometheus::PrometheusBuilder;
use redlimit::store::MemoryStore;
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use support::{Table, cpu_us, current_thread_proc, median};
use tower::{Service, ServiceBuilder, ServiceExt};

/// Distinct clients, each far below its limits: every request is admitted, so each one costs
/// the full path (store, decision counter, headers).
const KEYS: usize = 1024;

fn layer() -> RateLimitLayer {
    let policy = Policy::new(
        "bench",
        [
            Limit::gcra(1_000_000, Duration::from_secs(1)).unwrap(),
            Limit::sliding_window(1_000_000, Duration::from_secs(60)).unwrap(),
        ],
    )
    .unwrap();
    RateLimitLayer::builder(MemoryStore::new(), policy)
        .key(|parts: &Parts| {
            let n: &usize = parts.extensions.get()?;
            Some(Key::new(format!("c{}", n % KEYS)))
        })
        .build()
        .expect("valid layer")
}

/// Runs requests through `layer` for `secs`; CPU µs per request of this thread.
async fn measure(layer: &RateLimitLayer, secs: f64) -> f64 {
    let mut service = ServiceBuilder::new()
        .layer(layer.clone())
        .service(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let proc = current_thread_proc();
    let cpu_before = cpu_us(&proc);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut requests = 0usize;
    while Instant::now() < until {
        for _ in 0..256 {
            let mut request = Request::new(());
            request.extensions_mut().insert(requests);
            let response = service.ready().await.unwrap().call(request).await.unwrap();
            std::hint::black_box(response);
            requests += 1;
        }
    }
    (cpu_us(&proc) - cpu_before) / requests as f64
}

fn main() {
    if !support::bench_mode("metrics benchmark: run with `cargo bench --bench metrics`") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, secs) = if quick { (2, 1.0) } else { (9, 2.0) };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let without = layer();
        // Its handles are taken now, from no recorder: no-ops for good.
        measure(&without, 0.2).await;
        let handle = PrometheusBuilder::new().install_recorder().unwrap();
        let with = layer();
        measure(&with, 0.2).await;
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for round in 1..=rounds {
            off.push(measure(&without, secs).await);
            on.push(measure(&with, secs).await);
            handle.run_upkeep();
            eprintln!(
                "round {round}: no recorder {:.3} µs CPU/request, Prometheus {:.3}",
                off[off.len() - 1],
                on[on.len() - 1]
            );
        }
        assert!(handle.render().contains("redlimit_decisions_total{"));
        let histogram = histogram_cost(&handle, secs);
        let cost = median(on.iter().zip(&off).map(|(on, off)| on - off).collect());
        let (off, on) = (median(off), median(on));
        let table = Table::new(&["variant", "CPU µs/request", "metrics µs/request"]);
        println!("{}", table.header());
        println!(
            "{}",
            table.row([
                "no recorder".to_owned(),
                format!("{off:.3}"),
                "–".to_owned()
            ])
        );
        println!(
            "{}",
            table.row([
                "Prometheus recorder".to_owned(),
                format!("{on:.3}"),
                format!("{cost:.3}")
            ])
        );
        println!(
            "\nstore latency histogram (Prometheus), once per Redis call: {histogram:.3} µs CPU/record"
        );
    });
}

/// CPU µs per record of the store-latency histogram, as a Redis call records it.
fn histogram_cost(handle: &metrics_exporter_prometheus::PrometheusHandle, secs: f64) -> f64 {
    let histogram = metrics::histogram!("redlimit_store_duration_seconds", "store" => "redis");
    let proc = current_thread_proc();
    let cpu_before = cpu_us(&proc);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut records = 0u64;
    while Instant::now() < until {
        for i in 0..4096u32 {
            histogram.record(std::hint::black_box(0.000_3 + f64::from(i) * 1e-9));
        }
        records += 4096;
        // As a scrape would: the recorder drains the values kept since the last one.
        if records.is_multiple_of(1 << 20) {
            handle.render();
        }
    }
    (cpu_us(&proc) - cpu_before) / records as f64
}

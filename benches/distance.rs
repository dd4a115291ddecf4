//! Redis a network away: what the Redis path costs and decides when each round trip to Redis
//! takes 0 to 30 ms, measured with a same-run baseline.
//!
//! ```text
//! cargo bench --all-features --bench distance          # ~2 minutes; writes docs/bench/distance.md and .svg
//! REDLIMIT_BENCH_SECS=1 REDLIMIT_BENCH_RTTS=0,10 cargo bench --all-features --bench distance
//! REDLIMIT_BENCH_ONLY=frozen cargo bench --all-features --bench distance   # one part, nothing written
//! ```
//!
//! Redis is put at a distance by the tests' TCP proxy (`tests/it/support/proxy.rs`: each direction
//! delayed by half the round trip, order kept; freeze), which runs on a Tokio runtime of its own
//! (one worker thread), so the clients' tasks never hold up its deliveries (the two cores are
//! still shared). Each wait is a kernel timer (`timerfd`) in that runtime's poller, not Tokio's
//! millisecond timer: its measured round trip is within ~0.5 ms of the nominal one. The app and its
//! clients share one single-threaded runtime, as in `benches/failure_latency.rs`;
//! `redis-server` (started here on a free port) is a third process on the same two cores.
//!
//! **Requests are driven in process**: every client is a task calling
//! `tower::ServiceExt::oneshot` on a clone of the axum `Router`, back to back (yielding once
//! between requests, as a client awaiting a socket would), with the request's `x-api-key`
//! header cycling over `REDLIMIT_BENCH_KEYS` API keys. No HTTP, no sockets but Redis's: the
//! measuring client costs a few µs per request, and the latency is the layer's and the store's.
//!
//! Three parts:
//!
//! 1. **Added latency** at each round trip (`REDLIMIT_BENCH_RTTS`, ms) and number of concurrent
//!    clients (`REDLIMIT_BENCH_CLIENTS`), each cell `REDLIMIT_BENCH_SECS` after 0.5 s of
//!    warm-up, for (a) the app behind `RateLimitLayer` on a `MemoryStore` (the baseline: no
//!    network), (b) the same layer on a `RedisStore` connected through the proxy, GCRA 10^6 per
//!    second (everything admitted), default deadline (100 ms), and (c) a hand-written
//!    middleware sending exactly one `EVALSHA` of a minimal GCRA script
//!    (`benches/redis_cost/minimal_gcra.lua`) per request over one redis-rs multiplexed
//!    connection through the same proxy, with `TCP_NODELAY` and no deadline: the floor of any
//!    Redis limiter. Reported: p50/p99 of each, (b − a) and (c − a) in ms and in round trips,
//!    and the share of (b)'s decisions the store made (the rest missed the deadline and were
//!    decided in memory). The proxy's actual round trip (p50 of sequential `PING`s through it)
//!    is reported beside the nominal one.
//! 2. **Exactness**, at each round trip: `SCRIPT FLUSH` and `FLUSHALL` (a Redis that has never
//!    seen this service), then two `RedisStore`s (two instances), each through its own proxy,
//!    same prefix, behind two layers with GCRA 5 per hour keyed by `x-api-key`; right after
//!    connecting, four bursts of 40 requests at once (20 per instance), each burst on a key of
//!    its own. Goal: exactly 5 admitted per burst.
//! 3. **Frozen Redis**, through a proxy at `REDLIMIT_BENCH_FROZEN_RTT` ms (default 10): 4
//!    requests/s (open loop) for 2 s healthy, then for 4 s with the proxy frozen (nothing
//!    delivered either way) or `redis-server` stopped (`SIGSTOP`), under
//!    `OnStoreError::Local { instances: 1 }` (the default) and `OnStoreError::Open`; counts the
//!    requests over 50 ms while frozen. Then thaws and keeps 4 requests/s until a decision's
//!    source is the store again (`Decision::source`, read by the handler): the time from the
//!    thaw to that decision, to the nearest 250 ms request. Goals: ≤ 3 requests over 50 ms,
//!    resumed within 2 s.
//!
//! Knobs: `REDLIMIT_BENCH_SECS` (3, per latency cell and variant), `REDLIMIT_BENCH_RTTS`
//! (`0,1,10,30`), `REDLIMIT_BENCH_CLIENTS` (`16,256`), `REDLIMIT_BENCH_KEYS` (10 000),
//! `REDLIMIT_BENCH_FROZEN_RTT` (10), `REDLIMIT_BENCH_LINGER_MS` (the Redis store's batch
//! linger; its default otherwise), `REDLIMIT_BENCH_ONLY=latency,exactness,frozen` (some parts;
//! the results file and picture are then left alone). A full run appends its tables to
//! `docs/bench/distance.md` and draws `docs/bench/distance.svg` (added p50/p99 against the
//! round trip).

mod support;

#[path = "distance/app.rs"]
mod app;
#[path = "distance/exactness.rs"]
mod exactness;
#[path = "distance/frozen.rs"]
mod frozen;
#[path = "distance/latency.rs"]
mod latency;
#[path = "distance/report.rs"]
mod report;

use std::time::Instant;

use support::Report;
use support::redis_server::RedisServer;

fn main() {
    if !support::bench_mode(
        "distance benchmark: run with `cargo bench --all-features --bench distance`",
    ) {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 3.0);
    let rtts = support::rtts_knob(&[0.0, 1.0, 10.0, 30.0]);
    let clients = support::clients_knob(&[16, 256]);
    let keys = support::knob_where(
        "REDLIMIT_BENCH_KEYS",
        10_000,
        "at least 1 key",
        |&k: &usize| k > 0,
    );
    let frozen_rtt = support::knob_where(
        "REDLIMIT_BENCH_FROZEN_RTT",
        10.0,
        "a round trip in ms under 40 (a healthy request must stay under 50 ms)",
        |ms: &f64| (0.0..40.0).contains(ms),
    );
    let only: Option<String> = support::optional_knob("REDLIMIT_BENCH_ONLY");
    let part = |name: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|p| p == name))
    };

    let redis = RedisServer::start();
    let proxies = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("proxy")
        .enable_all()
        .build()
        .expect("the proxies' runtime");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the bench runtime");
    let started = Instant::now();
    let mut report = Report::default();
    let rows = runtime.block_on(async {
        // Exactness first: it flushes Redis and its scripts before each round trip.
        if part("exactness") {
            exactness::exactness(&mut report, proxies.handle(), &redis, &rtts).await;
        }
        let rows = if part("latency") {
            latency::latency(
                &mut report,
                proxies.handle(),
                &redis,
                &rtts,
                &clients,
                keys,
                secs,
            )
            .await
        } else {
            Vec::new()
        };
        if part("frozen") {
            frozen::frozen(&mut report, proxies.handle(), &redis, frozen_rtt).await;
        }
        rows
    });
    drop(runtime);
    drop(proxies);
    eprintln!("\ntook {:.0} s", started.elapsed().as_secs_f64());
    if only.is_none() {
        report::write_results(&report, &redis, secs, keys);
        report::plot(&rows);
    }
}

//! End-to-end HTTP benchmark: the same tiny axum app, the same load generator, the same
//! machine, variants alternated in one run.
//!
//! ```text
//! cargo bench --bench http            # ~3 minutes; writes docs/benchmarks.svg
//! REDLIMIT_BENCH_SECS=1 REDLIMIT_BENCH_ROUNDS=1 cargo bench --bench http   # a quick look
//! REDLIMIT_BENCH_ONLY=memory,governor cargo bench --bench http         # some variants only
//! REDLIMIT_BENCH_CONNECTIONS=64 cargo bench --bench http               # one connection count
//! REDLIMIT_BENCH_SYSCALLS=1 cargo bench --bench http    # + the server thread's syscalls per request
//! REDLIMIT_BENCH_LINGER_MS=0 cargo bench --bench http    # the Redis store's batch linger off
//! REDLIMIT_BENCH_CLOSED=0 REDLIMIT_BENCH_RATES=1000,5000 cargo bench --bench http  # paced rows only
//! ```
//!
//! After the closed loops, paced (open-loop) rows (`http/paced.rs`): at each rate of
//! `REDLIMIT_BENCH_RATES` (requests a second; 1 000 and 5 000 by default), requests started on a
//! schedule whatever the answers, over 16 keep-alive connections, for the layer on Redis beside
//! the minimal middleware and the memory store beside tower_governor, alternated in each round;
//! reported as ratios of server CPU per request (the goals: ≤ 1.10× each).
//!
//! Variants: bare axum (the ceiling); redlimit with the memory store and with a Redis store
//! (GCRA and sliding log), each with one hot key and with 100k keys; tower_governor (in memory,
//! the in-process peer); a hand-written middleware sending one raw `EVALSHA` of the same
//! script over one multiplexed connection; and the minimal middleware (`support/minimal.rs`:
//! key from the `x-key` header, one `EVALSHA` of a minimal GCRA script, no headers), the
//! baseline the layer on Redis is judged against. Every
//! quota is high enough (10^6 per second) that requests are admitted: the benchmark measures
//! the cost of checking, not of denying. Every request carries an `x-key` header: a constant
//! (`hot`) for "hot key" (redlimit keys those on `Global`, the minimal middleware on the header),
//! one of 100k values for "100k keys".
//!
//! Server and load generator run in this process on one single-threaded Tokio runtime each,
//! and `redis-server` (started here, on a free port) is a third process: on a 2-core machine
//! they share the cores, identically for every variant. Each variant runs for
//! `REDLIMIT_BENCH_SECS` (default 2) after a warm-up, at 16 and 64 connections, in
//! `REDLIMIT_BENCH_ROUNDS` (default 3) alternating rounds; the report takes each number's median
//! over rounds.

mod support;

#[path = "http/measure.rs"]
mod measure;
#[path = "http/paced.rs"]
mod paced;
#[path = "http/plot.rs"]
mod plot;
#[path = "http/variants.rs"]
mod variants;

use measure::{Sample, measure};
use support::redis_server::RedisServer;
use support::{Table, median};
use variants::Keys;

/// The connection counts measured, and drawn in the picture.
const CONNECTIONS: [usize; 2] = [16, 64];

fn main() {
    if !support::bench_mode("http benchmark: run with `cargo bench --bench http`") {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 2.0);
    let rounds = support::rounds_knob(3);
    // REDLIMIT_BENCH_ONLY=a,b keeps the variants whose names contain one of those (bare axum stays).
    let only: Option<String> = support::optional_knob("REDLIMIT_BENCH_ONLY");
    let redis = RedisServer::start();
    let mut variants = variants::all();

    if let Some(only) = &only {
        let wanted: Vec<&str> = only.split(',').collect();
        variants.retain(|v| v.name == "bare axum" || wanted.iter().any(|w| v.name.contains(w)));
    }
    // samples[variant][connections index] over rounds
    // REDLIMIT_BENCH_CONNECTIONS=64 measures at those connection counts only (the picture is
    // then left alone).
    let connections_knob = support::list_knob(
        "REDLIMIT_BENCH_CONNECTIONS",
        &CONNECTIONS,
        "positive connection counts",
        |&c| c > 0,
    );
    let partial = only.is_some() || connections_knob != CONNECTIONS;
    let connection_counts = connections_knob;
    // REDLIMIT_BENCH_RATES=1000,5000: the paced rows' rates; REDLIMIT_BENCH_CLOSED=0 leaves
    // the closed loops out (the picture is then left alone).
    let rates = support::list_knob(
        "REDLIMIT_BENCH_RATES",
        &[1000, 5000],
        "paced requests a second (1 to 1 000 000)",
        |r: &u64| (1..=1_000_000).contains(r),
    );
    let closed = support::knob_where("REDLIMIT_BENCH_CLOSED", 1u8, "0 or 1", |c| *c <= 1) == 1;
    let partial = partial || !closed;
    let mut samples = vec![vec![Vec::new(); connection_counts.len()]; variants.len()];
    for round in (0..rounds).filter(|_| closed) {
        for (ci, &connections) in connection_counts.iter().enumerate() {
            for (vi, variant) in variants.iter().enumerate() {
                let sample = measure(variant, connections, &redis, secs);
                eprintln!(
                    "round {round} c={connections:>2} {:<38} {:>9.0} req/s  p50 {:>6.0} µs  p99 {:>6.0} µs{}",
                    variant.name,
                    sample.rps,
                    sample.p50_us,
                    sample.p99_us,
                    if sample.errors > 0 {
                        format!("  ERRORS {}", sample.errors)
                    } else {
                        String::new()
                    }
                );
                // Every decision runs at least one command inside its script (a batched call
                // carries many decisions, so calls per request say nothing of it).
                // (Local-first runs a command per interval, not per request.)
                if sample.executed.is_some_and(|c| c < 0.95)
                    && !variant.name.contains("local-first")
                {
                    eprintln!(
                        "WARNING: {} ran fewer than one Redis command per request: it failed open, the numbers are not a measurement",
                        variant.name
                    );
                }
                samples[vi][ci].push(sample);
            }
        }
    }

    println!("{}", support::machine_line());
    paced::run(&variants, &redis, &rates, rounds, secs);
    if !closed {
        return;
    }
    let summary: Vec<Vec<Sample>> = samples
        .iter()
        .map(|per_c| {
            per_c
                .iter()
                .map(|s| Sample {
                    rps: median(s.iter().map(|x| x.rps).collect()),
                    p50_us: median(s.iter().map(|x| x.p50_us).collect()),
                    p99_us: median(s.iter().map(|x| x.p99_us).collect()),
                    commands: s[0]
                        .commands
                        .map(|_| median(s.iter().filter_map(|x| x.commands).collect())),
                    executed: s[0]
                        .executed
                        .map(|_| median(s.iter().filter_map(|x| x.executed).collect())),
                    errors: s.iter().map(|x| x.errors).sum(),
                    server_cpu_us: median(s.iter().map(|x| x.server_cpu_us).collect()),
                    redis_cpu_us: s[0]
                        .redis_cpu_us
                        .map(|_| median(s.iter().filter_map(|x| x.redis_cpu_us).collect())),
                })
                .collect()
        })
        .collect();
    let find = |name: &str| variants.iter().position(|v| v.name == name).unwrap();
    let bare = find("bare axum");
    let table = Table::new(&[
        "variant",
        "req/s",
        "p50 µs",
        "p99 µs",
        "server CPU µs/req",
        "Redis CPU µs/req",
        "Redis calls/req",
        "commands run/req",
        "× bare axum (req/s)",
        "× raw EVALSHA (req/s)",
        "× raw EVALSHA (CPU)",
        "server CPU − baseline µs",
    ]);
    for (ci, &connections) in connection_counts.iter().enumerate() {
        println!("\n### {connections} connections\n");
        println!("{}", table.header());
        for (vi, variant) in variants.iter().enumerate() {
            let s = summary[vi][ci];
            let raw_name = if variant.keys == Keys::Hot {
                "raw EVALSHA gcra, hot key"
            } else {
                "raw EVALSHA gcra, 100k keys"
            };
            let raw = variants
                .iter()
                .position(|v| v.name == raw_name)
                .map(|i| summary[i][ci]);
            let raw = raw.filter(|_| variant.redis);
            // The baseline of the goals: the minimal middleware for Redis variants, governor
            // for the memory store.
            let label = if variant.keys == Keys::Hot {
                "hot key"
            } else {
                "100k keys"
            };
            let baseline = if variant.name.starts_with("redlimit redis") {
                Some(format!("minimal EVALSHA gcra, {label}"))
            } else if variant.name.starts_with("redlimit memory") {
                Some(format!("tower_governor, {label}"))
            } else {
                None
            };
            let baseline = baseline
                .and_then(|name| variants.iter().position(|v| v.name == name))
                .map(|i| summary[i][ci].server_cpu_us);
            println!(
                "{}",
                table.row([
                    variant.name.clone(),
                    format!("{:.0}", s.rps),
                    format!("{:.0}", s.p50_us),
                    format!("{:.0}", s.p99_us),
                    format!("{:.1}", s.server_cpu_us),
                    s.redis_cpu_us.map_or("–".into(), |c| format!("{c:.2}")),
                    s.commands.map_or("–".into(), |c| format!("{c:.2}")),
                    s.executed.map_or("–".into(), |c| format!("{c:.1}")),
                    format!("{:.2}", s.rps / summary[bare][ci].rps),
                    raw.map_or("–".into(), |raw| format!("{:.2}", s.rps / raw.rps)),
                    // Raw's CPU over ours: above 1 when ours costs less.
                    raw.map_or("–".into(), |raw| {
                        format!("{:.2}", raw.server_cpu_us / s.server_cpu_us)
                    }),
                    baseline.map_or("–".into(), |b| format!("{:+.2}", s.server_cpu_us - b)),
                ])
            );
        }
    }
    // A partial run must not overwrite the published picture.
    if !partial {
        plot::plot(&variants, &summary);
    }
}

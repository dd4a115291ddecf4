//! What each algorithm costs Redis, to size a Redis for a request rate: decisions per second
//! that one client connection drives through pipelined `EVALSHA`s, the Redis CPU time per
//! decision (the honest "one Redis core" number, independent of the client), the commands per
//! decision, and the memory per client key at a typical state. A plain `INCR` and a minimal
//! script are measured the same way, as baselines. Then each algorithm's script time against a
//! minimal hand-written script of the same algorithm (`redis_cost/per_call.rs`).
//!
//! `cargo bench --bench redis_cost` starts a private `redis-server` (`$REDIS_SERVER`, else the
//! one on the PATH) on a free loopback port and kills it at the end; about 2 minutes.
//! `REDLIMIT_BENCH_SECS` sets the measured time per workload (default 3);
//! `REDLIMIT_BENCH_ONLY=per-call` runs the comparison with minimal scripts alone (its knobs are
//! in `redis_cost/per_call.rs`); `REDLIMIT_BENCH_ONLY=batched` the store's batched calls against
//! one call per decision at 64 concurrent tasks (`redis_cost/batched.rs`);
//! `REDLIMIT_BENCH_ONLY=penalty-refund` the cost of a penalty box and of a refund per call
//! (`redis_cost/penalty_refund.rs`). Run without `--bench` it does nothing: `cargo test
//! --all-targets` (and `--benches`) still runs bench targets marked `test = false`, without
//! that flag.

#[path = "redis_cost/batched.rs"]
mod batched;
#[path = "redis_cost/function.rs"]
mod function;
#[path = "redis_cost/memory.rs"]
mod memory;
#[path = "redis_cost/penalty_refund.rs"]
mod penalty_refund;
#[path = "redis_cost/per_call.rs"]
mod per_call;
mod support;
#[path = "redis_cost/throughput.rs"]
mod throughput;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlimit::__private::script_call;
use redlimit::{Algorithm, Limit, Policy};

use support::redis_server::{RedisServer, redis_binary};
use support::{Table, client_key, redis_info};
use throughput::{Row, Workload, load_script, measure, warm_up};

/// Distinct client keys the throughput workloads spread over.
const CLIENT_KEYS: usize = 100_000;
/// Commands per pipeline (one round trip).
const PIPELINE: usize = 100;
/// The store's default prefix, so key names (and so memory) are those of a default setup.
const PREFIX: &str = "redlimit";
/// A script doing the least a script can: one `INCR`. Its cost minus `INCR`'s is the price of
/// going through Lua at all.
const MINIMAL_SCRIPT: &str = "return redis.call('INCR', KEYS[1])";

/// Empties the database, synchronously: no earlier workload's keys left to expire (at a
/// cost) during the next one.
pub(crate) fn flush(con: &mut redis::Connection) {
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .exec(con)
        .expect("FLUSHALL");
}

fn machine_facts(con: &mut redis::Connection, out: &mut String) {
    let server = redis_info(con, "server");
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = support::cpu_model().unwrap_or_else(|| "unknown".into());
    let load = support::load_average().unwrap_or_else(|| "unknown".into());
    let _ = writeln!(
        out,
        "machine: nproc {cpus}, {model}; load average at the end {load}\n\
         redis: {} {} ({}, {}), on the same machine as the client, over loopback TCP",
        server.get("redis_mode").map_or("", String::as_str),
        server.get("redis_version").map_or("?", String::as_str),
        server.get("multiplexing_api").map_or("?", String::as_str),
        server.get("os").map_or("?", String::as_str),
    );
}

fn main() {
    if !support::bench_mode(
        "redis_cost: a load harness; run it with `cargo bench --bench redis_cost`",
    ) {
        return;
    }
    let binary = redis_binary();
    if std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "redis_cost: skipped: cannot run `{binary}` (install redis-server or set REDIS_SERVER)"
        );
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 3.0);
    let duration = Duration::from_secs_f64(secs);

    let server = RedisServer::start();
    let mut con = server.connection();

    let only: Option<String> = support::optional_knob("REDLIMIT_BENCH_ONLY");
    if let Some(only) = only.as_deref() {
        let mut out = match only {
            "per-call" => per_call::run(&server.url(), &mut con),
            "batched" => batched::run(&server.url(), &mut con),
            "penalty-refund" => penalty_refund::run(&server.url(), &mut con),
            _ => {
                eprintln!(
                    "error: REDLIMIT_BENCH_ONLY={only:?}: expected per-call, batched or penalty-refund"
                );
                std::process::exit(2);
            }
        };
        out.push('\n');
        machine_facts(&mut con, &mut out);
        println!("{out}");
        return;
    }

    let minimal_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(MINIMAL_SCRIPT)
        .query(&mut con)
        .expect("SCRIPT LOAD");

    // Sanity: one real call decodes as the store would decode it.
    {
        let policy = std::sync::Arc::new(
            Policy::new("sanity", [Limit::gcra(5, Duration::from_secs(1)).unwrap()]).unwrap(),
        );
        load_script(&mut con, &policy);
        let reply = script_call(PREFIX, &policy, &client_key(0), 1)
            .run(&mut con)
            .expect("EVALSHA");
        let decision = redlimit::__private::decode_reply(&policy, &reply).expect("decodes");
        assert!(decision.is_allowed());
    }

    let mut rows = Vec::new();
    let started = Instant::now();

    eprintln!("redis_cost: INCR baseline ...");
    let incr = Workload::new(
        (0..CLIENT_KEYS).map(|i| ("INCR", vec![format!("incr:{{{}}}", client_key(i).as_str())])),
    );
    warm_up(&mut con, &incr);
    rows.push(Row {
        name: "`INCR` (baseline)".into(),
        algorithm: None,
        measured: measure(&mut con, &incr, duration, "incr"),
        client: "incr",
        bytes_per_key: String::new(),
    });
    drop(incr);

    eprintln!("redis_cost: minimal script baseline ...");
    let minimal = Workload::new((0..CLIENT_KEYS).map(|i| {
        (
            "EVALSHA",
            vec![
                minimal_sha.clone(),
                "1".into(),
                format!("lua:{{{}}}", client_key(i).as_str()),
            ],
        )
    }));
    warm_up(&mut con, &minimal);
    rows.push(Row {
        name: format!("`EVALSHA` of `{MINIMAL_SCRIPT}` (baseline)"),
        algorithm: None,
        measured: measure(&mut con, &minimal, duration, "evalsha"),
        client: "evalsha",
        bytes_per_key: String::new(),
    });
    drop(minimal);

    // High limits: nearly every check is admitted (the common, writing path).
    let period = Duration::from_secs(60);
    let mut policies: Vec<(String, Option<Algorithm>, Policy)> = Algorithm::ALL
        .into_iter()
        .map(|a| {
            let limit = Limit::new(a, 1_000_000, period).unwrap();
            (
                format!("{a} 1M/60s"),
                Some(a),
                Policy::new(format!("tp-{a}"), [limit]).unwrap(),
            )
        })
        .collect();
    policies.push((
        "gcra 1M/60s + fixed-window 10M/1d (2 limits)".into(),
        None,
        Policy::new(
            "tp-multi",
            [
                Limit::gcra(1_000_000, period).unwrap(),
                Limit::fixed_window(10_000_000, Duration::from_secs(86_400)).unwrap(),
            ],
        )
        .unwrap(),
    ));
    for (name, algorithm, policy) in &policies {
        eprintln!("redis_cost: {name} ...");
        let workload = Workload::script(&mut con, policy, 0..CLIENT_KEYS);
        warm_up(&mut con, &workload);
        rows.push(Row {
            name: name.clone(),
            algorithm: *algorithm,
            measured: measure(&mut con, &workload, duration, "evalsha"),
            client: "evalsha",
            bytes_per_key: String::new(),
        });
    }

    eprintln!("redis_cost: memory per key ...");
    let memory = memory::scenarios(&mut con);
    for row in &mut rows {
        let per_algorithm: Vec<String> = memory
            .iter()
            .filter(|m| m.typical && Some(m.algorithm) == row.algorithm)
            .map(|m| match m.entries {
                Some(entries) => format!("{:.0} ({entries} entries)", m.usage_per_client),
                None => format!("{:.0}", m.usage_per_client),
            })
            .collect();
        row.bytes_per_key = per_algorithm.join(" / ");
    }
    eprintln!("redis_cost: per-call against minimal scripts ...");
    let per_call = per_call::run(&server.url(), &mut con);
    eprintln!("redis_cost: batched calls against one call per decision ...");
    flush(&mut con);
    let batched = batched::run(&server.url(), &mut con);
    let elapsed = started.elapsed();

    let incr_cpu = rows[0].measured.cpu_us();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Redis cost per decision\n\n\
         One client connection, pipelines of {PIPELINE}, {CLIENT_KEYS} client keys, \
         {secs} s per row after one unmeasured pass over every key; limits high enough that \
         every check is admitted.\n"
    );
    let cost = Table::new(&[
        "workload",
        "decisions/s (1 connection)",
        "Redis CPU µs/decision",
        "decisions/s per Redis core (1e6 / CPU µs)",
        "CPU ratio to `INCR`",
        "script exec µs (commandstats)",
        "client commands/decision",
        "`redis.call`s/decision",
        "bytes/client key (100/60s)",
    ])
    .left(8);
    let _ = writeln!(out, "{}", cost.header());
    for row in &rows {
        let m = &row.measured;
        let (inner, _) = row.inner_per_decision();
        let _ = writeln!(
            out,
            "{}",
            cost.row([
                row.name.clone(),
                format!("{:.0}", m.per_sec()),
                format!("{:.2}", m.cpu_us()),
                format!("{:.0}", 1e6 / m.cpu_us()),
                format!("{:.1}×", m.cpu_us() / incr_cpu),
                format!("{:.2}", m.exec_us()),
                format!("{:.2}", row.client_per_decision()),
                format!("{inner:.2}"),
                row.bytes_per_key.clone(),
            ])
        );
    }
    let _ = writeln!(out, "\n`redis.call`s inside the script, per decision:\n");
    for row in &rows {
        let m = &row.measured;
        let (_, detail) = row.inner_per_decision();
        let _ = writeln!(
            out,
            "- {}: {} ({} decisions, {:.1}% admitted, {} errors)",
            row.name,
            if detail.is_empty() {
                "none".into()
            } else {
                detail
            },
            m.decisions,
            100.0 * m.allowed as f64 / m.decisions as f64,
            m.errors,
        );
    }
    let _ = writeln!(
        out,
        "\n## Redis memory per client key\n\n\
         `MEMORY USAGE key SAMPLES 0` summed over the keys written (key name, value, dict entry), \
         and the growth of `used_memory` (adds the TTL entry and hash-table slots), \
         per client key; key names `{PREFIX}:<policy>:{{ip:10.0.x.y}}:...`.\n"
    );
    let per_key = Table::new(&[
        "state",
        "Redis keys/client key",
        "`MEMORY USAGE` bytes/client key",
        "`used_memory` growth bytes/client key",
        "encoding, sample",
    ])
    .left(4);
    let _ = writeln!(out, "{}", per_key.header());
    for m in &memory {
        let _ = writeln!(
            out,
            "{}",
            per_key.row([
                m.name.clone(),
                format!("{:.0}", m.redis_keys_per_client),
                format!("{:.0}", m.usage_per_client),
                format!("{:.0}", m.used_memory_per_client),
                m.encoding.clone(),
            ])
        );
    }
    out.push_str(&per_call);
    out.push('\n');
    out.push_str(&batched);
    machine_facts(&mut con, &mut out);
    let _ = writeln!(out, "total time: {:.1} s", elapsed.as_secs_f64());
    println!("{out}");
    drop(con);
    drop(server); // kills redis-server
}

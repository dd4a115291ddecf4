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
#[path = "redis_cost/penalty_refund.rs"]
mod penalty_refund;
#[path = "redis_cost/per_call.rs"]
mod per_call;
mod support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};
use redlimit::__private::script_call;
use redlimit::store::RedisStore;
use redlimit::{Algorithm, Limit, Policy};

use support::redis_server::{RedisServer, redis_binary};
use support::{Table, client_key, command_stats, redis_cpu_secs, redis_info, reset_redis_stats};

/// Distinct client keys the throughput workloads spread over.
const CLIENT_KEYS: usize = 100_000;
/// Commands per pipeline (one round trip).
const PIPELINE: usize = 100;
/// The store's default prefix, so key names (and so memory) are those of a default setup.
const PREFIX: &str = "redlimit";
/// A script doing the least a script can: one `INCR`. Its cost minus `INCR`'s is the price of
/// going through Lua at all.
const MINIMAL_SCRIPT: &str = "return redis.call('INCR', KEYS[1])";

/// One command of a workload, as `(name, args)`.
type Command = (&'static str, Vec<String>);

/// Pre-encoded pipelines of `PIPELINE` commands each, so the client does as little as it can
/// while measuring.
struct Workload {
    /// `(encoded pipeline, commands in it)`.
    pipelines: Vec<(Vec<u8>, usize)>,
}

impl Workload {
    fn new(commands: impl Iterator<Item = Command>) -> Self {
        let commands: Vec<Command> = commands.collect();
        let pipelines = commands
            .chunks(PIPELINE)
            .map(|chunk| {
                let mut pipe = redis::pipe();
                for (name, args) in chunk {
                    pipe.cmd(name).arg(args);
                }
                (pipe.get_packed_pipeline(), chunk.len())
            })
            .collect();
        Workload { pipelines }
    }

    /// `EVALSHA` of the redlimit script for `policy`, one per client key.
    /// (Loads the policy's script first.)
    fn script(
        con: &mut redis::Connection,
        policy: &Policy,
        clients: impl Iterator<Item = usize>,
    ) -> Self {
        let sha = load_script(con, policy);
        Workload::new(clients.map(|i| evalsha(&sha, policy, i)))
    }
}

/// Loads the script the Redis store runs for `policy`; returns its SHA1.
fn load_script(con: &mut redis::Connection, policy: &Policy) -> String {
    let source = RedisStore::script_source_for(policy);
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(con)
        .expect("SCRIPT LOAD");
    assert_eq!(sha, redis::Script::new(source).get_hash());
    sha
}

/// The `EVALSHA` the Redis store sends for one check of client key `i` (the script must be
/// loaded under `sha`, which it names).
fn evalsha(sha: &str, policy: &Policy, i: usize) -> Command {
    let cmd = script_call(PREFIX, policy, &client_key(i), 1);
    let args: Vec<String> = cmd
        .args_iter()
        .skip(1) // "EVALSHA"
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => String::new(), // no cursors in EVALSHA
        })
        .collect();
    assert_eq!(args[0], sha, "the store's script is the one loaded");
    ("EVALSHA", args)
}

/// What one timed run measured.
struct Measured {
    decisions: u64,
    allowed: u64,
    errors: u64,
    wall: Duration,
    cpu_secs: f64,
    /// `INFO commandstats` calls per command over the run (the bench's own INFO excluded).
    calls: HashMap<String, u64>,
    /// Server-side execution µs of the client's command, from `INFO commandstats`.
    exec_usec: u64,
}

impl Measured {
    fn per_sec(&self) -> f64 {
        self.decisions as f64 / self.wall.as_secs_f64()
    }

    fn cpu_us(&self) -> f64 {
        self.cpu_secs * 1e6 / self.decisions as f64
    }

    fn exec_us(&self) -> f64 {
        self.exec_usec as f64 / self.decisions as f64
    }
}

/// Sends one pipeline; returns `(replies, allowed, errors)`.
fn send(con: &mut redis::Connection, pipeline: &[u8], commands: usize) -> (u64, u64, u64) {
    let replies = con
        .req_packed_commands(pipeline, 0, commands)
        .expect("pipeline");
    let mut allowed = 0;
    let mut errors = 0;
    for reply in &replies {
        match reply {
            // The script: `{ now, allowed, ... }`.
            Value::Array(items) => {
                allowed += u64::from(matches!(items.get(1), Some(Value::Int(1))))
            }
            // `INCR`, or the minimal script: counted as allowed.
            Value::Int(_) => allowed += 1,
            Value::ServerError(_) => errors += 1,
            other => panic!("unexpected reply {other:?}"),
        }
    }
    (replies.len() as u64, allowed, errors)
}

/// Empties the database (so no earlier workload's keys expire, at a cost, during this one),
/// then sends every pipeline of `workload` once, unmeasured, so the run starts from state.
fn warm_up(con: &mut redis::Connection, workload: &Workload) {
    flush(con);
    for (pipeline, commands) in &workload.pipelines {
        let (n, _, errors) = send(con, pipeline, *commands);
        assert_eq!(
            (n, errors),
            (*commands as u64, 0),
            "errors while warming up"
        );
    }
}

/// Sends the workload's pipelines round-robin for `duration`; `client` is the command the
/// workload sends (`evalsha`, `incr`), for its server-side time.
fn measure(
    con: &mut redis::Connection,
    workload: &Workload,
    duration: Duration,
    client: &str,
) -> Measured {
    reset_redis_stats(con);
    let cpu_before = redis_cpu_secs(con);
    let start = Instant::now();
    let (mut decisions, mut allowed, mut errors) = (0, 0, 0);
    let mut i = 0;
    while start.elapsed() < duration {
        let (pipeline, commands) = &workload.pipelines[i % workload.pipelines.len()];
        let (n, a, e) = send(con, pipeline, *commands);
        decisions += n;
        allowed += a;
        errors += e;
        i += 1;
    }
    let wall = start.elapsed();
    let cpu_secs = redis_cpu_secs(con) - cpu_before;
    let stats = command_stats(con);
    let exec_usec = stats.get(client).map_or(0, |s| s.usec);
    let calls = stats
        .into_iter()
        .map(|(name, stat)| (name, stat.calls))
        .collect();
    Measured {
        decisions,
        allowed,
        errors,
        wall,
        cpu_secs,
        calls,
        exec_usec,
    }
}

/// One throughput row.
struct Row {
    name: String,
    /// The algorithm of a single-limit policy.
    algorithm: Option<Algorithm>,
    measured: Measured,
    /// The command the client sends (`evalsha`, `incr`).
    client: &'static str,
    bytes_per_key: String,
}

impl Row {
    fn client_per_decision(&self) -> f64 {
        let m = &self.measured;
        m.calls.get(self.client).copied().unwrap_or(0) as f64 / m.decisions as f64
    }

    /// `redis.call`s inside the script per decision, by command.
    fn inner_per_decision(&self) -> (f64, String) {
        let m = &self.measured;
        let mut inner: Vec<(&String, &u64)> = m
            .calls
            .iter()
            .filter(|(name, _)| name.as_str() != self.client)
            .collect();
        inner.sort();
        let total: u64 = inner.iter().map(|(_, c)| **c).sum();
        let detail = inner
            .iter()
            .map(|(name, calls)| {
                format!(
                    "{} {:.2}",
                    name.to_uppercase(),
                    **calls as f64 / m.decisions as f64
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        (total as f64 / m.decisions as f64, detail)
    }
}

/// One memory scenario: client keys driven to a typical state.
struct MemoryRow {
    name: String,
    algorithm: Algorithm,
    /// At the typical limit (100/60s), so it goes in the main table.
    typical: bool,
    /// Sliding log entries per key.
    entries: Option<usize>,
    redis_keys_per_client: f64,
    usage_per_client: f64,
    used_memory_per_client: f64,
    encoding: String,
}

fn flush(con: &mut redis::Connection) {
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .exec(con)
        .expect("FLUSHALL");
}

/// Drives `clients` client keys with `calls` allowed checks each (interleaved, so every check
/// of a key has its own time), then sums `MEMORY USAGE` over the keys written.
fn memory_scenario(
    con: &mut redis::Connection,
    name: &str,
    limit: Limit,
    calls: usize,
    clients: usize,
) -> MemoryRow {
    flush(con);
    let policy_name = "api";
    let policy = Policy::new(policy_name, [limit]).unwrap();
    let used_memory = |con: &mut redis::Connection| -> f64 {
        redis_info(con, "memory")["used_memory"]
            .parse()
            .expect("used_memory")
    };
    let used_before = used_memory(con);
    let workload = Workload::script(con, &policy, (0..calls).flat_map(|_| 0..clients));
    for (pipeline, commands) in &workload.pipelines {
        let (n, allowed, errors) = send(con, pipeline, *commands);
        assert_eq!(
            (n, allowed, errors),
            (*commands as u64, n, 0),
            "{name}: every check should be allowed"
        );
    }
    drop(workload);
    let used_after = used_memory(con);
    let pattern = format!("{PREFIX}:{policy_name}:*");
    let mut keys: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .cursor_arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(con)
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys.dedup();
    assert!(!keys.is_empty(), "{name}: no keys written");
    let mut usage = 0u64;
    for key in &keys {
        let bytes: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(con)
            .expect("MEMORY USAGE");
        usage += bytes;
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).expect("PTTL");
        assert!(ttl > 0, "{key} has no TTL");
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(&keys[0])
        .query(con)
        .expect("OBJECT ENCODING");
    let encoding = if limit.algorithm() == Algorithm::SlidingLog {
        let entries: u64 = redis::cmd("ZCARD").arg(&keys[0]).query(con).expect("ZCARD");
        format!("{encoding}, {entries} entries, key `{}`", keys[0])
    } else {
        let value: String = redis::cmd("GET").arg(&keys[0]).query(con).expect("GET");
        format!("{encoding} `{value}`, key `{}`", keys[0])
    };
    MemoryRow {
        name: name.to_owned(),
        algorithm: limit.algorithm(),
        typical: limit.count() == 100,
        entries: (limit.algorithm() == Algorithm::SlidingLog).then_some(calls),
        redis_keys_per_client: keys.len() as f64 / clients as f64,
        usage_per_client: usage as f64 / clients as f64,
        used_memory_per_client: (used_after - used_before) / clients as f64,
        encoding,
    }
}

fn machine_facts(con: &mut redis::Connection, out: &mut String) {
    let server = redis_info(con, "server");
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
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
        let reply: Vec<i64> = script_call(PREFIX, &policy, &client_key(0), 1)
            .query(&mut con)
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
    let typical = Duration::from_secs(60);
    let mut memory = Vec::new();
    for algorithm in Algorithm::ALL {
        let limit = Limit::new(algorithm, 100, typical).unwrap();
        if algorithm == Algorithm::SlidingLog {
            memory.push(memory_scenario(
                &mut con,
                "sliding-log 100/60s, 10 entries",
                limit,
                10,
                1000,
            ));
            memory.push(memory_scenario(
                &mut con,
                "sliding-log 100/60s, 100 entries (full)",
                limit,
                100,
                1000,
            ));
            memory.push(memory_scenario(
                &mut con,
                "sliding-log 200/60s, 200 entries (full)",
                Limit::sliding_log(200, typical).unwrap(),
                200,
                100,
            ));
        } else {
            memory.push(memory_scenario(
                &mut con,
                &format!("{algorithm} 100/60s, after 10 checks"),
                limit,
                10,
                1000,
            ));
        }
    }
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

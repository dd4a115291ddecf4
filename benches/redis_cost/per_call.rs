//! Redis's time per decision, redlimit's script against a minimal hand-written script of the
//! same algorithm (`minimal_*.lua` beside this file: same state, same reply, numbers passed to
//! `redis.call` as numbers as redlimit's are, none of the edge cases), measured in the same
//! run, alternating: each round runs every variant once, for the same time, from the same
//! state (flushed, then every key written once). Reported per variant: `usec_per_call` (`INFO
//! commandstats`: the script's execution time) and the Redis CPU per decision
//! (`used_cpu_user + used_cpu_sys` delta ÷ decisions, which adds reading and writing the
//! sockets), each the median over the rounds, and the median and range of the per-round
//! ratios. Goals are judged on the CPU ratio.
//!
//! Rows: each algorithm at 10^6 per minute (every call admitted, state living through the run);
//! the sliding log again at 10^6 per second, whose members leave the span and are trimmed on
//! nearly every call (its steady state); a two-limit policy against the minimal single GCRA;
//! and the GCRA script loaded as a Redis 7 function (`function.rs`), for what `FCALL` would
//! gain.
//!
//! Knobs: `REDLIMIT_BENCH_CLIENTS` connections (default 16), each sending
//! `REDLIMIT_BENCH_PIPELINE` calls at a time (default 1: unbatched), over
//! `REDLIMIT_BENCH_KEYS` client keys (default 10 000); `REDLIMIT_BENCH_ROUNDS` rounds (default
//! 5) of `REDLIMIT_BENCH_ROUND_SECS` per variant (default 1).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};
use redlimit::__private::script_call;
use redlimit::{Algorithm, Limit, Policy};

use crate::support::{self, Table, client_key, command_stats, redis_cpu_secs, reset_redis_stats};

/// The store's default prefix, so key names are those of a default setup.
const PREFIX: &str = "redlimit";

/// The minimal script of one algorithm (same state, same reply shape, none of the edge cases).
fn minimal_source(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => include_str!("minimal_fixed_window.lua"),
        Algorithm::SlidingWindow => include_str!("minimal_sliding_window.lua"),
        Algorithm::SlidingLog => include_str!("minimal_sliding_log.lua"),
        Algorithm::TokenBucket => include_str!("minimal_token_bucket.lua"),
        Algorithm::Gcra => include_str!("minimal_gcra.lua"),
        _ => unreachable!("a new algorithm needs its minimal script"),
    }
}

/// One variant: a packed command per client key.
struct Variant {
    name: String,
    commands: Arc<Vec<Vec<u8>>>,
    /// The command sent, as `INFO commandstats` names it.
    command: &'static str,
}

/// What one round of one variant measured.
#[derive(Clone, Copy)]
struct Sample {
    exec_us: f64,
    cpu_us: f64,
    per_sec: f64,
}

/// The commands redlimit's store sends for `policy`, one per client key, and the same keys
/// (the state keys redlimit would use) with the minimal script's arguments.
fn variants_for(con: &mut redis::Connection, keys: usize, limit: Limit) -> (Variant, Variant) {
    let algorithm = limit.algorithm();
    let name = match limit.period().as_secs() {
        60 => algorithm.to_string(),
        secs => format!("{algorithm} ({secs} s period)"),
    };
    let policy = Policy::new(
        format!("pc-{algorithm}-{}", limit.period().as_secs()),
        [limit],
    )
    .unwrap();
    let redlimit = redlimit_variant(con, format!("redlimit {name}"), &policy, keys);
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(minimal_source(algorithm))
        .query(con)
        .expect("SCRIPT LOAD minimal");
    let commands = (0..keys)
        .map(|i| {
            let call = script_call(PREFIX, &policy, &client_key(i), 1);
            let words = call.words();
            let key = words.get(3).expect("the first key");
            redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(1)
                .arg(key)
                .arg(limit.count())
                .arg(limit.period().as_micros() as u64)
                .arg(1)
                .get_packed_command()
        })
        .collect();
    let minimal = Variant {
        name: format!("minimal {name}"),
        commands: Arc::new(commands),
        command: "evalsha",
    };
    (redlimit, minimal)
}

/// The store's own calls for `policy`, its script loaded first.
fn redlimit_variant(
    con: &mut redis::Connection,
    name: String,
    policy: &Policy,
    keys: usize,
) -> Variant {
    crate::load_script(con, policy);
    let commands = (0..keys)
        .map(|i| script_call(PREFIX, policy, &client_key(i), 1).packed())
        .collect();
    Variant {
        name,
        commands: Arc::new(commands),
        command: "evalsha",
    }
}

/// Whether a reply admitted the call; anything else stops the run. The minimal scripts answer
/// `{ now, allowed, ... }` (6 values); ours an admission's short reply (`lua/prelude.lua`: at
/// most 5 values for these policies of one or two limits), or a long one, `{ now, allowed,
/// ... }`.
fn admitted(reply: &Value) -> bool {
    match reply {
        Value::Array(items) if items.len() < 6 => true,
        Value::Array(items) => matches!(items.get(1), Some(Value::Int(1))),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Flushes, then sends every command once, pipelined and unmeasured: each round starts from
/// the same state (every key written once).
fn warm_up(con: &mut redis::Connection, variant: &Variant) {
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .exec(con)
        .expect("FLUSHALL");
    for chunk in variant.commands.chunks(100) {
        let packed: Vec<u8> = chunk.concat();
        let replies = con
            .req_packed_commands(&packed, 0, chunk.len())
            .expect("warm-up pipeline");
        assert!(
            replies.iter().all(admitted),
            "{}: warm-up denied",
            variant.name
        );
    }
}

/// How a round loads Redis: `clients` connections, each sending `pipeline` calls at a time.
#[derive(Clone, Copy)]
struct Load {
    clients: usize,
    pipeline: usize,
}

/// One round of one variant: `load` for `secs`.
fn round(
    url: &str,
    con: &mut redis::Connection,
    variant: &Variant,
    Load { clients, pipeline }: Load,
    secs: f64,
) -> Sample {
    warm_up(con, variant);
    let stop = Arc::new(AtomicBool::new(false));
    let mut connections: Vec<redis::Connection> = (0..clients)
        .map(|_| {
            redis::Client::open(url)
                .and_then(|c| c.get_connection())
                .expect("client connection")
        })
        .collect();
    reset_redis_stats(con);
    let cpu_before = redis_cpu_secs(con);
    let start = Instant::now();
    let threads: Vec<_> = connections
        .drain(..)
        .enumerate()
        .map(|(t, mut client)| {
            let commands = Arc::clone(&variant.commands);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut sent = 0u64;
                let mut i = t;
                let mut batch = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    batch.clear();
                    for _ in 0..pipeline {
                        batch.extend_from_slice(&commands[i % commands.len()]);
                        i += clients;
                    }
                    let replies = client
                        .req_packed_commands(&batch, 0, pipeline)
                        .expect("calls");
                    assert!(replies.iter().all(admitted), "denied");
                    sent += pipeline as u64;
                }
                sent
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let decisions: u64 = threads.into_iter().map(|t| t.join().expect("client")).sum();
    let wall = start.elapsed().as_secs_f64();
    let cpu_secs = redis_cpu_secs(con) - cpu_before;
    let stats = command_stats(con);
    let script = stats
        .get(variant.command)
        .expect("the variant's command in commandstats");
    assert_eq!(
        script.calls, decisions,
        "{}: one call per decision",
        variant.name
    );
    Sample {
        exec_us: script.usec as f64 / decisions as f64,
        cpu_us: cpu_secs * 1e6 / decisions as f64,
        per_sec: decisions as f64 / wall,
    }
}

/// A row to report: `variant` against `base`, with the goal for their ratio, if any.
struct Comparison {
    variant: usize,
    base: usize,
    goal: Option<f64>,
}

/// Runs the comparison; returns its markdown section.
pub(crate) fn run(url: &str, con: &mut redis::Connection) -> String {
    let clients = support::knob_where("REDLIMIT_BENCH_CLIENTS", 16usize, "1 or more", |&c| c > 0);
    let pipeline = support::knob_where("REDLIMIT_BENCH_PIPELINE", 1usize, "1 or more", |&p| p > 0);
    let load = Load { clients, pipeline };
    let keys = support::knob_where("REDLIMIT_BENCH_KEYS", 10_000usize, "1 or more", |&k| k > 0);
    let rounds = support::rounds_knob(5);
    let secs = support::secs_knob("REDLIMIT_BENCH_ROUND_SECS", 1.0);

    let mut variants = Vec::new();
    let mut comparisons = Vec::new();
    // Every algorithm at 10^6 per minute: state lives through the run, as for a typical limit.
    // The sliding log once more at 10^6 per second: with a few calls per key per second its
    // members leave the span and are trimmed on nearly every call, its steady state.
    let singles = Algorithm::ALL
        .into_iter()
        .map(|a| Limit::new(a, 1_000_000, Duration::from_secs(60)).unwrap())
        .chain([Limit::sliding_log(1_000_000, Duration::from_secs(1)).unwrap()]);
    for limit in singles {
        let (redlimit, minimal) = variants_for(con, keys, limit);
        let gcra = limit.algorithm() == Algorithm::Gcra;
        // Judged on Redis CPU (issue 27's table): GCRA at most what the minimal script costs,
        // the sliding log within 10%, the others within 30%.
        let goal = match limit.algorithm() {
            Algorithm::Gcra => 1.0,
            Algorithm::SlidingLog => 1.1,
            _ => 1.3,
        };
        comparisons.push(Comparison {
            variant: variants.len(),
            base: variants.len() + 1,
            goal: Some(goal),
        });
        variants.push(redlimit);
        variants.push(minimal);
        // Not what the store sends: what it would gain as a Redis 7 function.
        let function = || {
            let policy = Policy::new("pc-gcra-60", [limit]).unwrap();
            crate::function::load(con, &policy)
        };
        if let Some(fcall) = gcra.then(function).flatten() {
            comparisons.push(Comparison {
                variant: variants.len(),
                base: variants.len() - 1,
                goal: None,
            });
            variants.push(Variant {
                name: "redlimit gcra, loaded as a function (`FCALL`)".into(),
                commands: Arc::new((0..keys).map(|i| fcall(i).get_packed_command()).collect()),
                command: "fcall",
            });
        }
    }
    // The two-limit policy against the minimal single-limit GCRA script.
    let gcra = comparisons
        .iter()
        .find(|c| variants[c.variant].name == "redlimit gcra")
        .expect("gcra")
        .base;
    let two = Policy::new(
        "pc-two",
        [
            Limit::gcra(1_000_000, Duration::from_secs(60)).unwrap(),
            Limit::fixed_window(10_000_000, Duration::from_secs(86_400)).unwrap(),
        ],
    )
    .unwrap();
    comparisons.push(Comparison {
        variant: variants.len(),
        base: gcra,
        goal: Some(1.3),
    });
    variants.push(redlimit_variant(
        con,
        "redlimit gcra + fixed window (2 limits)".into(),
        &two,
        keys,
    ));

    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); variants.len()];
    for r in 0..rounds {
        eprintln!("redis_cost: per-call round {}/{rounds} ...", r + 1);
        for (v, variant) in variants.iter().enumerate() {
            samples[v].push(round(url, con, variant, load, secs));
        }
    }

    let median_of =
        |v: usize, f: fn(&Sample) -> f64| support::median(samples[v].iter().map(f).collect());
    // Per-round ratios, sorted: their median is reported, their range shows the noise.
    let ratios = |a: usize, b: usize, f: fn(&Sample) -> f64| {
        let mut r: Vec<f64> = samples[a]
            .iter()
            .zip(&samples[b])
            .map(|(x, y)| f(x) / f(y))
            .collect();
        r.sort_by(f64::total_cmp);
        r
    };
    let exec = |s: &Sample| s.exec_us;
    let cpu = |s: &Sample| s.cpu_us;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Redis time per decision against a minimal script\n\n\
         {clients} connections, one call at a time, {keys} client keys, every call admitted; \
         {rounds} alternating rounds of {secs} s per variant, medians (ratios: median of the \
         per-round ratios).\n"
    );
    let table = Table::new(&[
        "variant",
        "against",
        "Redis CPU µs/decision",
        "its CPU µs/decision",
        "CPU ratio",
        "per-round range",
        "goal (CPU)",
        "`usec_per_call`",
        "its `usec_per_call`",
        "ratio",
        "decisions/s",
    ])
    .left(2);
    let _ = writeln!(out, "{}", table.header());
    for c in &comparisons {
        let cpu_ratios = ratios(c.variant, c.base, cpu);
        let ratio = support::percentile(&cpu_ratios, 0.5);
        let _ = writeln!(
            out,
            "{}",
            table.row([
                variants[c.variant].name.clone(),
                variants[c.base].name.clone(),
                format!("{:.2}", median_of(c.variant, cpu)),
                format!("{:.2}", median_of(c.base, cpu)),
                format!("{ratio:.2}×"),
                format!(
                    "{:.2}–{:.2}",
                    cpu_ratios[0],
                    cpu_ratios[cpu_ratios.len() - 1]
                ),
                match c.goal {
                    Some(goal) if ratio <= goal => format!("≤ {goal:.1}× met"),
                    Some(goal) => format!("≤ {goal:.1}× missed"),
                    None => "–".into(),
                },
                format!("{:.2}", median_of(c.variant, exec)),
                format!("{:.2}", median_of(c.base, exec)),
                format!(
                    "{:.2}×",
                    support::percentile(&ratios(c.variant, c.base, exec), 0.5)
                ),
                format!("{:.0}", median_of(c.variant, |s| s.per_sec)),
            ])
        );
    }
    out
}

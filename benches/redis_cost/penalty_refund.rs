//! What the penalty box and refunds cost Redis (`REDLIMIT_BENCH_ONLY=penalty-refund`): per
//! call, the script's execution time (`INFO commandstats` `usec` ÷ calls) and Redis's CPU
//! (`used_cpu_user + used_cpu_sys` delta ÷ calls), medians over alternating rounds, each round
//! one pass over every client key from a prepared state, pipelined 100 calls deep over one
//! connection.
//!
//! Rows: a GCRA check admitted, without and with a penalty box (the box adds one `GET`);
//! denied by the limit without a box, and denied inside the box (the box answers before any
//! limit is read); a refund of one admitted request for GCRA, the sliding log and a policy of
//! all five algorithms, beside the check of the same policy.
//!
//! Knobs: `REDLIMIT_BENCH_KEYS` client keys (default 10 000), `REDLIMIT_BENCH_ROUNDS`
//! (default 5).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};
use redlimit::__private::{decode_reply, refund_call, script_call};
use redlimit::store::{RedisStore, Refund};
use redlimit::{Algorithm, Limit, Policy};

use crate::flush;
use crate::support::{self, Table, client_key, command_stats, redis_cpu_secs, reset_redis_stats};

const PREFIX: &str = "redlimit";

/// What one pass measured, per call.
#[derive(Clone, Copy)]
struct Sample {
    exec_us: f64,
    cpu_us: f64,
    per_sec: f64,
}

/// Sends `commands` pipelined (unmeasured), returning the replies.
fn send(con: &mut redis::Connection, commands: &[Vec<u8>]) -> Vec<Value> {
    let mut replies = Vec::with_capacity(commands.len());
    for chunk in commands.chunks(100) {
        replies.extend(
            con.req_packed_commands(&chunk.concat(), 0, chunk.len())
                .expect("pipeline"),
        );
    }
    replies
}

/// Sends `commands` once, measured; `ok` must hold for every reply.
fn measure(con: &mut redis::Connection, commands: &[Vec<u8>], ok: fn(&Value) -> bool) -> Sample {
    let packed: Vec<(Vec<u8>, usize)> = commands
        .chunks(100)
        .map(|chunk| (chunk.concat(), chunk.len()))
        .collect();
    reset_redis_stats(con);
    let cpu = redis_cpu_secs(con);
    let start = Instant::now();
    for (pipeline, n) in &packed {
        let replies = con.req_packed_commands(pipeline, 0, *n).expect("pipeline");
        assert!(replies.iter().all(ok), "unexpected reply: {:?}", replies[0]);
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu_us = (redis_cpu_secs(con) - cpu) * 1e6;
    let stats = command_stats(con);
    let evalsha = stats.get("evalsha").expect("evalsha in commandstats");
    let calls = commands.len() as f64;
    assert_eq!(evalsha.calls, commands.len() as u64, "one call per command");
    Sample {
        exec_us: evalsha.usec as f64 / calls,
        cpu_us: cpu_us / calls,
        per_sec: calls / wall,
    }
}

/// A reply's verdict: the second value of a long reply (0 denied, 1 admitted, 2 in the box),
/// 1 for an admission's short one (`lua/prelude.lua`: `2 + 4k` values against at most
/// `1 + 2k`; for these policies' 1 and 5 limits no short reply has a long one's length).
fn verdict(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if items.len() >= 6 && (items.len() - 2) % 4 == 0 => {
            match items.get(1) {
                Some(Value::Int(v)) => *v,
                _ => panic!("unexpected reply {reply:?}"),
            }
        }
        Value::Array(_) => 1,
        other => panic!("unexpected reply {other:?}"),
    }
}

fn load(con: &mut redis::Connection, source: &str) {
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(con)
        .expect("SCRIPT LOAD");
}

fn checks(policy: &Policy, keys: usize) -> Vec<Vec<u8>> {
    (0..keys)
        .map(|i| script_call(PREFIX, policy, &client_key(i), 1).packed())
        .collect()
}

/// Brings Redis to a variant's starting state; returns the commands to measure.
type Prepare = Box<dyn Fn(&mut redis::Connection) -> Vec<Vec<u8>>>;

/// A variant: how to bring Redis to its starting state (returning the commands to measure),
/// and what every reply must be.
struct Variant {
    name: String,
    prepare: Prepare,
    ok: fn(&Value) -> bool,
}

fn check_variant(
    name: &str,
    policy: Policy,
    keys: usize,
    warm: usize,
    ok: fn(&Value) -> bool,
) -> Variant {
    Variant {
        name: name.to_owned(),
        prepare: Box::new(move |con| {
            flush(con);
            load(con, RedisStore::script_source_for(&policy));
            let commands = checks(&policy, keys);
            for _ in 0..warm {
                send(con, &commands);
            }
            commands
        }),
        ok,
    }
}

fn refund_variant(name: &str, policy: Policy, keys: usize) -> Variant {
    Variant {
        name: name.to_owned(),
        prepare: Box::new(move |con| {
            flush(con);
            load(con, RedisStore::script_source_for(&policy));
            load(con, RedisStore::refund_script_source());
            // One admission per key, then its refund: each refund gives back once.
            let replies = send(con, &checks(&policy, keys));
            replies
                .iter()
                .enumerate()
                .map(|(i, reply)| {
                    let Value::Array(items) = reply else {
                        panic!("{reply:?}")
                    };
                    let ints: Vec<i64> = items
                        .iter()
                        .map(|v| match v {
                            Value::Int(n) => *n,
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    let decision = decode_reply(&policy, &ints).expect("a decision");
                    let refund = Refund::of(&decision, 1).expect("admitted");
                    refund_call(PREFIX, &policy, &client_key(i), &refund).packed()
                })
                .collect()
        }),
        ok: |reply| matches!(reply, Value::Int(1)),
    }
}

pub(crate) fn run(_url: &str, con: &mut redis::Connection) -> String {
    let keys = support::knob_where("REDLIMIT_BENCH_KEYS", 10_000usize, "1 or more", |&k| k > 0);
    let rounds = support::rounds_knob(5);
    let minute = Duration::from_secs(60);
    let gcra = |n| Policy::new("pr-gcra", [Limit::gcra(n, minute).unwrap()]).unwrap();
    let boxed = |n: u64| gcra(n).penalty(Duration::from_secs(3600)).unwrap();
    // Refunds need state that still holds the admission when the refund comes (up to a
    // second later in a pass): 100 per hour, one unit every 36 s.
    let hour = Duration::from_secs(3600);
    let slow = Policy::new("pr-slow", [Limit::gcra(100, hour).unwrap()]).unwrap();
    let log = Policy::new("pr-log", [Limit::sliding_log(100, hour).unwrap()]).unwrap();
    let mix = Policy::new(
        "pr-mix",
        Algorithm::ALL.map(|a| Limit::new(a, 100, hour).unwrap()),
    )
    .unwrap();
    let admitted = |r: &Value| verdict(r) == 1;
    let denied = |r: &Value| verdict(r) == 0;
    let in_box = |r: &Value| verdict(r) == 2;
    let variants = [
        check_variant("check, GCRA, admitted", gcra(1_000_000), keys, 1, admitted),
        check_variant(
            "check, GCRA + penalty box, admitted",
            boxed(1_000_000),
            keys,
            1,
            admitted,
        ),
        check_variant("check, GCRA, denied by the limit", gcra(1), keys, 1, denied),
        // Admitted, then denied (which boxes the key): every measured call finds the box.
        check_variant(
            "check, GCRA + penalty box, denied in the box",
            boxed(1),
            keys,
            2,
            in_box,
        ),
        check_variant(
            "check, GCRA 100/h, admitted",
            slow.clone(),
            keys,
            1,
            admitted,
        ),
        refund_variant("refund, GCRA 100/h", slow, keys),
        check_variant(
            "check, sliding log 100/h, admitted",
            log.clone(),
            keys,
            1,
            admitted,
        ),
        refund_variant("refund, sliding log 100/h", log, keys),
        check_variant(
            "check, 5 algorithms 100/h each, admitted",
            mix.clone(),
            keys,
            1,
            admitted,
        ),
        refund_variant("refund, 5 algorithms 100/h each", mix, keys),
    ];
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); variants.len()];
    for r in 0..rounds {
        eprintln!("redis_cost: penalty-refund round {}/{rounds} ...", r + 1);
        for (v, variant) in variants.iter().enumerate() {
            let commands = (variant.prepare)(con);
            samples[v].push(measure(con, &commands, variant.ok));
        }
    }
    let median =
        |v: usize, f: fn(&Sample) -> f64| support::median(samples[v].iter().map(f).collect());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Penalty box and refunds: Redis time per call\n\n\
         One connection, pipelined 100 deep, {keys} client keys, one pass per round from a \
         prepared state; {rounds} alternating rounds, medians.\n"
    );
    let table = Table::new(&["call", "`usec_per_call`", "Redis CPU µs/call", "calls/s"]).left(0);
    let _ = writeln!(out, "{}", table.header());
    for (v, variant) in variants.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}",
            table.row([
                variant.name.clone(),
                format!("{:.2}", median(v, |s| s.exec_us)),
                format!("{:.2}", median(v, |s| s.cpu_us)),
                format!("{:.0}", median(v, |s| s.per_sec)),
            ])
        );
    }
    out
}

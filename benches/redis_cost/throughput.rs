//! The throughput rows: pre-encoded pipelines of one command each per client key, sent
//! round-robin on one connection, and what Redis spent on them (`INFO cpu`, `commandstats`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};
use redlimit::__private::script_call;
use redlimit::store::RedisStore;
use redlimit::{Algorithm, Policy};

use crate::support::{client_key, command_stats, redis_cpu_secs, reset_redis_stats};
use crate::{PIPELINE, PREFIX, flush};

/// One command of a workload, as `(name, args)`.
pub(crate) type Command = (&'static str, Vec<String>);

/// Pre-encoded pipelines of `PIPELINE` commands each, so the client does as little as it can
/// while measuring.
pub(crate) struct Workload {
    /// `(encoded pipeline, commands in it)`.
    pub(crate) pipelines: Vec<(Vec<u8>, usize)>,
}

impl Workload {
    pub(crate) fn new(commands: impl Iterator<Item = Command>) -> Self {
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
    pub(crate) fn script(
        con: &mut redis::Connection,
        policy: &Policy,
        clients: impl Iterator<Item = usize>,
    ) -> Self {
        let sha = load_script(con, policy);
        Workload::new(clients.map(|i| evalsha(&sha, policy, i)))
    }
}

/// Loads the script the Redis store runs for `policy`; returns its SHA1.
pub(crate) fn load_script(con: &mut redis::Connection, policy: &Policy) -> String {
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
pub(crate) fn evalsha(sha: &str, policy: &Policy, i: usize) -> Command {
    let args: Vec<String> = script_call(PREFIX, policy, &client_key(i), 1)
        .words()
        .iter()
        .skip(1) // "EVALSHA"
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    assert_eq!(args[0], sha, "the store's script is the one loaded");
    ("EVALSHA", args)
}

/// What one timed run measured.
pub(crate) struct Measured {
    pub(crate) decisions: u64,
    pub(crate) allowed: u64,
    pub(crate) errors: u64,
    pub(crate) wall: Duration,
    pub(crate) cpu_secs: f64,
    /// `INFO commandstats` calls per command over the run (the bench's own INFO excluded).
    pub(crate) calls: HashMap<String, u64>,
    /// Server-side execution µs of the client's command, from `INFO commandstats`.
    pub(crate) exec_usec: u64,
}

impl Measured {
    pub(crate) fn per_sec(&self) -> f64 {
        self.decisions as f64 / self.wall.as_secs_f64()
    }

    pub(crate) fn cpu_us(&self) -> f64 {
        self.cpu_secs * 1e6 / self.decisions as f64
    }

    pub(crate) fn exec_us(&self) -> f64 {
        self.exec_usec as f64 / self.decisions as f64
    }
}

/// Sends one pipeline; returns `(replies, allowed, errors)`.
pub(crate) fn send(
    con: &mut redis::Connection,
    pipeline: &[u8],
    commands: usize,
) -> (u64, u64, u64) {
    let replies = con
        .req_packed_commands(pipeline, 0, commands)
        .expect("pipeline");
    let mut allowed = 0;
    let mut errors = 0;
    for reply in &replies {
        match reply {
            // Ours: an admission's short reply (`lua/prelude.lua`: at most 5 values for these
            // policies of one or two limits), else `{ now, allowed, ... }`.
            Value::Array(items) => {
                allowed += u64::from(items.len() < 6 || matches!(items.get(1), Some(Value::Int(1))))
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
pub(crate) fn warm_up(con: &mut redis::Connection, workload: &Workload) {
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
pub(crate) fn measure(
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
pub(crate) struct Row {
    pub(crate) name: String,
    /// The algorithm of a single-limit policy.
    pub(crate) algorithm: Option<Algorithm>,
    pub(crate) measured: Measured,
    /// The command the client sends (`evalsha`, `incr`).
    pub(crate) client: &'static str,
    pub(crate) bytes_per_key: String,
}

impl Row {
    pub(crate) fn client_per_decision(&self) -> f64 {
        let m = &self.measured;
        m.calls.get(self.client).copied().unwrap_or(0) as f64 / m.decisions as f64
    }

    /// `redis.call`s inside the script per decision, by command.
    pub(crate) fn inner_per_decision(&self) -> (f64, String) {
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

//! The load: one `wrk` process per server, all started together, each counting the answers
//! by status in its Lua `response` callback (`scripts/flood_count.lua` for a flood, `paced.lua`
//! beside this file for a paced load, `sweep.lua` for a sweep over keys).

use std::collections::HashMap;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Instant;

/// How long a paced connection waits after each answer (`paced.lua`), ms.
pub(crate) const PACE_MS: f64 = 10.0;

/// What a load does on each server.
pub(crate) enum Load {
    /// Requests back to back on `connections` connections (one wrk thread) for `secs`.
    Flood { secs: u64, connections: usize },
    /// About `per_server` requests per second to each server for `secs`: connections that wait
    /// [`PACE_MS`] after each answer, as many as that rate needs (fewer requests when the
    /// machine cannot keep up, never more).
    Paced { secs: u64, per_server: f64 },
    /// Keys `0..keys` by `x-api-key`, `repeat` requests each in a row, over `threads`
    /// connections (a wrk thread each); server `i` starts at key `i × keys / servers` when
    /// `staggered`, else every server at key 0 (each key's requests reach every server at
    /// about the same time). Ends when every key has had its requests.
    Sweep {
        keys: u64,
        repeat: u64,
        threads: usize,
        staggered: bool,
    },
}

/// The answers of a load, over every server.
#[derive(Default)]
pub(crate) struct Answers {
    pub(crate) ok: u64,
    pub(crate) limited: u64,
    pub(crate) server_errors: u64,
    pub(crate) other: u64,
    /// Requests admitted per key number (sweeps only; keys never admitted are absent).
    pub(crate) admitted: HashMap<u64, u64>,
}

impl Answers {
    /// Every answer, whatever its status.
    pub(crate) fn total(&self) -> u64 {
        self.ok + self.limited + self.server_errors + self.other
    }
}

/// Runs `load` on every server at `addrs` at once; the answers and the wall time from the
/// first wrk's start to the last one's exit, seconds.
pub(crate) fn run(addrs: &[String], load: &Load) -> (Answers, f64) {
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/local_first_fleet");
    let start = Instant::now();
    let workers: Vec<_> = addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            let mut command = Command::new("wrk");
            let expect_finished = match *load {
                Load::Flood { secs, connections } => {
                    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/flood_count.lua");
                    command.args(["-t1", &format!("-c{connections}"), &format!("-d{secs}s")]);
                    command.args(["--timeout", "10s", "-s", script]);
                    command.arg(format!("http://{addr}/"));
                    None
                }
                Load::Paced { secs, per_server } => {
                    let connections = (per_server * PACE_MS / 1000.0).ceil().max(1.0);
                    command.args(["-t1", &format!("-c{connections}"), &format!("-d{secs}s")]);
                    command.args(["--timeout", "10s", "-s", &format!("{here}/paced.lua")]);
                    command.arg(format!("http://{addr}/"));
                    None
                }
                Load::Sweep {
                    keys,
                    repeat,
                    threads,
                    staggered,
                } => {
                    let offset = if staggered {
                        i as u64 * keys / addrs.len() as u64
                    } else {
                        0
                    };
                    // The duration only bounds a sweep that went wrong: it ends on its own.
                    command.args([&format!("-t{threads}"), &format!("-c{threads}"), "-d600s"]);
                    command.args(["--timeout", "10s", "-s", &format!("{here}/sweep.lua")]);
                    command.arg(format!("http://{addr}/"));
                    command.args(["--", &keys.to_string(), &offset.to_string()]);
                    command.args([&repeat.to_string(), &threads.to_string(), "report"]);
                    Some(threads)
                }
            };
            let mut child = command
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn wrk (apt-get install wrk): {e}"));
            let stdout = child.stdout.take().expect("piped stdout");
            std::thread::spawn(move || {
                let mut lines = Vec::new();
                let mut finished = 0;
                for line in std::io::BufReader::new(stdout).lines() {
                    let line = line.expect("read wrk's output");
                    if line == "FINISHED" {
                        finished += 1;
                        if Some(finished) == expect_finished {
                            // wrk sleeps out its -d whatever its threads do; SIGINT cuts the
                            // sleep short and it reports as usual.
                            let status = Command::new("kill")
                                .args(["-INT", &child.id().to_string()])
                                .status()
                                .expect("run kill");
                            assert!(status.success(), "kill -INT wrk failed");
                        }
                    }
                    lines.push(line);
                }
                let status = child.wait().expect("wait for wrk");
                assert!(status.success(), "wrk failed: {status}");
                lines
            })
        })
        .collect();
    let mut answers = Answers::default();
    for worker in workers {
        let lines = worker.join().expect("a wrk reader thread");
        parse(&lines, &mut answers);
    }
    (answers, start.elapsed().as_secs_f64())
}

/// Adds one wrk's `STATUS ok=.. 429=.. 5xx=.. other=..` and `ADMITTED key n` lines.
fn parse(lines: &[String], answers: &mut Answers) {
    let mut status = false;
    for line in lines {
        if let Some(counts) = line.strip_prefix("STATUS ") {
            status = true;
            for field in counts.split_whitespace() {
                let (name, value) = field.split_once('=').expect("name=value");
                let value: u64 = value.parse().expect("a count");
                match name {
                    "ok" => answers.ok += value,
                    "429" => answers.limited += value,
                    "5xx" => answers.server_errors += value,
                    _ => answers.other += value,
                }
            }
        } else if let Some(pair) = line.strip_prefix("ADMITTED ") {
            let (key, n) = pair.split_once(' ').expect("ADMITTED key n");
            let key: u64 = key.parse().expect("a key number");
            *answers.admitted.entry(key).or_default() += n.parse::<u64>().expect("a count");
        }
    }
    assert!(status, "wrk printed no STATUS line:\n{}", lines.join("\n"));
}

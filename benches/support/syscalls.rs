//! Syscalls and context switches of a process (or one of its threads) over a measured window,
//! per request: what CPU time per request holds besides instructions, and what a busy machine
//! does not blur (counts hold where µs do not).
//!
//! `REDLIMIT_BENCH_SYSCALLS=1` turns it on in the harnesses that use it: `perf trace -s`
//! attached for the window (Linux `perf`; the harness says so and goes on without it when it
//! cannot run), and the `voluntary_ctxt_switches` / `nonvoluntary_ctxt_switches` deltas of
//! `/proc/PID/task/*/status`. Tracing slows the traced process a little (each syscall is
//! reported): compare counts, not the µs of a traced run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `REDLIMIT_BENCH_SYSCALLS` asks for counts.
pub(crate) fn wanted() -> bool {
    std::env::var("REDLIMIT_BENCH_SYSCALLS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Counts summed over windows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counts {
    /// Syscalls by name.
    pub(crate) by_kind: BTreeMap<String, u64>,
    /// Context switches: the thread slept (voluntary) or was preempted.
    pub(crate) voluntary: u64,
    pub(crate) nonvoluntary: u64,
    /// Whether `perf trace` ran in every window.
    pub(crate) traced: bool,
    windows: u32,
}

impl Counts {
    pub(crate) fn merge(&mut self, other: &Counts) {
        for (kind, n) in &other.by_kind {
            *self.by_kind.entry(kind.clone()).or_default() += n;
        }
        self.voluntary += other.voluntary;
        self.nonvoluntary += other.nonvoluntary;
        self.traced = if self.windows == 0 {
            other.traced
        } else {
            self.traced && other.traced
        };
        self.windows += other.windows.max(1);
    }

    pub(crate) fn syscalls(&self) -> u64 {
        self.by_kind.values().sum()
    }

    /// `3.71 syscalls (writev 1.19, epoll_wait 0.90, …); 0.95 + 0.02 context switches`, per
    /// one of `n` requests: the kinds over 0.01 each, most first.
    pub(crate) fn per(&self, n: u64) -> String {
        let n = n.max(1) as f64;
        let mut kinds: Vec<(&String, &u64)> = self.by_kind.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1));
        let kinds: Vec<String> = kinds
            .iter()
            .filter(|(_, c)| **c as f64 / n >= 0.01)
            .map(|(k, c)| format!("{k} {:.2}", **c as f64 / n))
            .collect();
        let switches = format!(
            "{:.2} + {:.2} context switches (voluntary + not)",
            self.voluntary as f64 / n,
            self.nonvoluntary as f64 / n
        );
        if self.traced {
            format!(
                "{:.2} syscalls ({}); {switches}",
                self.syscalls() as f64 / n,
                kinds.join(", ")
            )
        } else {
            switches
        }
    }
}

/// One window being counted.
pub(crate) struct Window {
    perf: Option<(Child, PathBuf)>,
    tasks: PathBuf,
    only: Option<u32>,
    switches: (u64, u64),
}

impl Window {
    /// Starts counting `pid`'s syscalls (only thread `tid`'s with `Some`).
    pub(crate) fn start(pid: u32, tid: Option<u32>) -> Window {
        let out = std::env::temp_dir().join(format!(
            "redlimit-bench-trace-{}-{pid}-{}.txt",
            std::process::id(),
            tid.unwrap_or(0)
        ));
        let target = match tid {
            Some(tid) => ["-t".to_owned(), tid.to_string()],
            None => ["-p".to_owned(), pid.to_string()],
        };
        let perf = Command::new("perf")
            .args(["trace", "-s", "-o"])
            .arg(&out)
            .args(target)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| eprintln!("  (no syscall counts: cannot run perf: {e})"))
            .ok()
            .map(|child| (child, out));
        // perf needs a moment to attach; the syscalls before it are not counted, which the
        // window's length dwarfs.
        std::thread::sleep(Duration::from_millis(300));
        let tasks = Path::new("/proc").join(pid.to_string()).join("task");
        let switches = switches(&tasks, tid);
        Window {
            perf,
            tasks,
            only: tid,
            switches,
        }
    }

    /// Stops counting.
    pub(crate) fn stop(self) -> Counts {
        let now = switches(&self.tasks, self.only);
        let mut counts = Counts {
            voluntary: now.0.saturating_sub(self.switches.0),
            nonvoluntary: now.1.saturating_sub(self.switches.1),
            windows: 1,
            ..Counts::default()
        };
        if let Some((mut child, out)) = self.perf {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            let _ = std::fs::remove_file(&out);
            counts.by_kind = parse_summary(&text);
            counts.traced = !counts.by_kind.is_empty();
        }
        counts
    }
}

/// Voluntary and involuntary context switches of the threads under `tasks` (one with `only`).
fn switches(tasks: &Path, only: Option<u32>) -> (u64, u64) {
    let dirs: Vec<PathBuf> = match only {
        Some(tid) => vec![tasks.join(tid.to_string())],
        None => std::fs::read_dir(tasks)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default(),
    };
    let mut sum = (0, 0);
    for dir in dirs {
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        for line in status.lines() {
            let value = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(v) = value("voluntary_ctxt_switches:") {
                sum.0 += v;
            } else if let Some(v) = value("nonvoluntary_ctxt_switches:") {
                sum.1 += v;
            }
        }
    }
    sum
}

/// `perf trace -s`'s summary, summed over threads: syscall name → calls.
fn parse_summary(text: &str) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some(count)) = (words.next(), words.next()) else {
            continue;
        };
        // Rows are `name calls errors total min avg max stddev%`; the header and rule lines
        // fail the number test.
        let (Ok(count), Some(errors)) = (count.parse::<u64>(), words.next()) else {
            continue;
        };
        if errors.parse::<u64>().is_ok()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            *calls.entry(name.to_owned()).or_default() += count;
        }
    }
    calls
}

/// The calling thread's id (for [`Window::start`] from another thread).
pub(crate) fn current_tid() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

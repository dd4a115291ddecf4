//! The RLS servers under test, as separate processes on free loopback ports: our
//! `redlimit-server` (built in release by the bench) and Kuadrant's `limitador-server`
//! (prebuilt), each given equivalent limits and the same Redis.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cpu_split_us;

/// envoyproxy/ratelimit's YAML for ours, equivalent to Limitador's file below: domain `bench`
/// effectively unlimited (10^9 an hour per `user`), domain `small` 3 per minute per `user`.
/// The default algorithm (their fixed window aligned to the clock), as a drop-in runs it.
const OURS_BENCH: &str = "domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n      \
                          unit: hour\n      requests_per_unit: 1000000000\n";
const OURS_SMALL: &str = "domain: small\ndescriptors:\n  - key: user\n    rate_limit:\n      \
                          unit: minute\n      requests_per_unit: 3\n";

/// Limitador's limits when no `limits.yaml` sits beside its binary: the same two domains.
const LIMITADOR_LIMITS: &str = "\
- namespace: bench
  name: bench_per_user
  max_value: 1000000000
  seconds: 3600
  conditions: []
  variables: [\"descriptors[0]['user']\"]
- namespace: small
  name: small_per_user
  max_value: 3
  seconds: 60
  conditions: []
  variables: [\"descriptors[0]['user']\"]
";

/// How long a server may take to start on a busy machine before the bench gives up.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// Which server a process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Ours,
    /// Ours with more variables (`REDLIMIT_BENCH_OURS_VARIANTS`), named by its label.
    OursWith(&'static str),
    Limitador,
    /// A tonic server answering `OK` without a store (`floor.rs`).
    FloorOk,
    /// A tonic server sending one `EVALSHA` per call (`floor.rs`).
    FloorEvalsha,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Ours => "redlimit-server",
            Kind::OursWith(label) => label,
            Kind::Limitador => "Limitador",
            Kind::FloorOk => "floor: tonic, OK",
            Kind::FloorEvalsha => "floor: one EVALSHA",
        }
    }

    /// Ours, with or without more variables.
    pub(crate) fn is_ours(self) -> bool {
        matches!(self, Kind::Ours | Kind::OursWith(_))
    }

    /// A floor server, which has no rules: no exactness bursts, no goals.
    pub(crate) fn is_floor(self) -> bool {
        matches!(self, Kind::FloorOk | Kind::FloorEvalsha)
    }
}

/// A running server, killed on drop (its scratch directory removed).
pub(crate) struct Server {
    pub(crate) kind: Kind,
    child: Child,
    /// Its gRPC listener, `127.0.0.1:PORT`.
    pub(crate) grpc: String,
    dir: PathBuf,
}

impl Server {
    /// CPU time the process has used so far, µs: user and system apart.
    pub(crate) fn cpu_split_us(&self) -> (f64, f64) {
        cpu_split_us(&self.proc())
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Context switches of all its threads so far: [`context_switches`].
    pub(crate) fn context_switches(&self) -> (u64, u64) {
        context_switches(self.child.id())
    }

    fn proc(&self) -> PathBuf {
        Path::new("/proc").join(self.child.id().to_string())
    }

    /// A server that prints `grpc on ADDR` once it listens (ours and the floors): waits for
    /// that line, then keeps draining its stdout (a closed pipe would fail its later prints).
    pub(crate) fn from_child(kind: Kind, mut child: Child, dir: PathBuf) -> Server {
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let grpc = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(addr) = line.trim().strip_prefix("grpc on ") {
                        break addr.to_owned();
                    }
                }
                _ => {
                    let _ = child.kill();
                    panic!(
                        "{} exited before printing `grpc on ADDR`: {:?}",
                        kind.name(),
                        child.wait()
                    );
                }
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        Server {
            kind,
            child,
            grpc,
            dir,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds `redlimit-server` in release mode (`cargo build --release -p redlimit-server`, the
/// bench's own target directory) and returns its path.
/// `REDLIMIT_BENCH_OURS_BIN` instead, when set: a build of another tree, or a copy kept apart
/// from a target directory other builds share.
pub(crate) fn build_ours() -> PathBuf {
    if let Some(path) = std::env::var_os("REDLIMIT_BENCH_OURS_BIN") {
        return PathBuf::from(path);
    }
    let mut command = crate::support::cargo::command();
    eprintln!("building redlimit-server (release) ...");
    let out = command
        .args([
            "build",
            "--release",
            "-p",
            "redlimit-server",
            "--message-format=json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run cargo build -p redlimit-server: {e}"));
    assert!(out.status.success(), "building redlimit-server failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.contains("\"compiler-artifact\"") && l.contains("\"name\":\"redlimit-server\"")
        })
        .find_map(|l| {
            let start = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + l[start..].find('"')?;
            Some(PathBuf::from(&l[start..end]))
        })
        .expect("cargo reported no executable for redlimit-server")
}

/// Limitador's binary: `$REDLIMIT_BENCH_LIMITADOR`, else `../shared/peers/limitador/
/// limitador-server` from the repository root; `None` (with the reason) when it is not there.
pub(crate) fn limitador_binary() -> Result<PathBuf, String> {
    let path = match std::env::var_os("REDLIMIT_BENCH_LIMITADOR") {
        Some(path) => PathBuf::from(path),
        None => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/peers/limitador/limitador-server")
        }
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no Limitador binary at {} (set REDLIMIT_BENCH_LIMITADOR to a limitador-server \
             built from Kuadrant/limitador: `cargo build --release -p limitador-server`)",
            path.display()
        ))
    }
}

/// A scratch directory of its own under the system temp dir.
pub(crate) fn scratch(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "redlimit-bench-rls-{}-{name}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// `REDLIMIT_BENCH_OURS_ENV` (`NAME=VALUE`, space-separated) for our server on top of the
/// bench's own settings: its environment is otherwise cleared, so a variable set around the
/// bench (`TOKIO_WORKER_THREADS`, say) would not reach it.
fn ours_env() -> Vec<(String, String)> {
    let text = std::env::var("REDLIMIT_BENCH_OURS_ENV").unwrap_or_default();
    text.split_whitespace()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None => panic!("REDLIMIT_BENCH_OURS_ENV: `{pair}` is not NAME=VALUE"),
        })
        .collect()
}

/// `REDLIMIT_BENCH_OURS_VARIANTS`: more of our servers beside the plain one, each a label and
/// its variables, `label:NAME=VALUE,NAME=VALUE;label:...` (e.g.
/// `window 150us:REDIS_PIPELINE_WINDOW=150us`); none by default.
pub(crate) fn ours_variants() -> Vec<(Kind, Vec<(String, String)>)> {
    let text = std::env::var("REDLIMIT_BENCH_OURS_VARIANTS").unwrap_or_default();
    text.split(';')
        .filter(|v| !v.trim().is_empty())
        .map(|variant| {
            let (label, vars) = variant.split_once(':').unwrap_or_else(|| {
                panic!("REDLIMIT_BENCH_OURS_VARIANTS: `{variant}` is not label:NAME=VALUE,...")
            });
            let vars = vars
                .split(',')
                .map(|pair| match pair.trim().split_once('=') {
                    Some((name, value)) => (name.to_owned(), value.to_owned()),
                    None => panic!("REDLIMIT_BENCH_OURS_VARIANTS: `{pair}` is not NAME=VALUE"),
                })
                .collect();
            let label: &'static str = Box::leak(format!("ours, {}", label.trim()).into());
            (Kind::OursWith(label), vars)
        })
        .collect()
}

/// Starts our server on `redis_port` (Redis, or a proxy to it), with its config files written
/// into a runtime directory of its own; returns once it has printed its gRPC address.
pub(crate) fn start_ours(binary: &Path, redis_port: u16) -> Server {
    start_ours_as(Kind::Ours, &[], binary, redis_port)
}

/// [`start_ours`] as `kind`, with `vars` on top of `REDLIMIT_BENCH_OURS_ENV`.
pub(crate) fn start_ours_as(
    kind: Kind,
    vars: &[(String, String)],
    binary: &Path,
    redis_port: u16,
) -> Server {
    let dir = scratch("ours");
    let config = dir.join("runtime/ratelimit/config");
    std::fs::create_dir_all(&config).expect("create the runtime directory");
    std::fs::write(config.join("bench.yaml"), OURS_BENCH).expect("write bench.yaml");
    std::fs::write(config.join("small.yaml"), OURS_SMALL).expect("write small.yaml");
    let child = Command::new(binary)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("REDIS_URL", format!("127.0.0.1:{redis_port}"))
        .env("RUNTIME_ROOT", dir.join("runtime"))
        .envs([
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("HOST", "127.0.0.1"),
            ("PORT", "0"),
            ("GRPC_HOST", "127.0.0.1"),
            ("GRPC_PORT", "0"),
            ("DEBUG_HOST", "127.0.0.1"),
            ("DEBUG_PORT", "0"),
            ("LOG_LEVEL", "warn"),
        ])
        .envs(ours_env())
        .envs(vars.iter().cloned())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
    Server::from_child(kind, child, dir)
}

/// Context switches of all the threads of process `pid` so far (`voluntary_ctxt_switches` and
/// `nonvoluntary_ctxt_switches` of `/proc/PID/task/*/status`): a voluntary one is a thread
/// going to sleep, so each is a wake-up later; threads that ended are not counted.
pub(crate) fn context_switches(pid: u32) -> (u64, u64) {
    let mut total = (0, 0);
    let Ok(tasks) = std::fs::read_dir(Path::new("/proc").join(pid.to_string()).join("task")) else {
        return total;
    };
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            let count = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(n) = count("voluntary_ctxt_switches:") {
                total.0 += n;
            } else if let Some(n) = count("nonvoluntary_ctxt_switches:") {
                total.1 += n;
            }
        }
    }
    total
}

/// A free loopback port (bound, then released for the server to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// Starts Limitador on `redis_port` with the `limits.yaml` beside its binary (else the same
/// limits written here); returns once its gRPC port accepts connections. Its log goes to a
/// file in its scratch directory, printed if it does not come up.
pub(crate) fn start_limitador(binary: &Path, redis_port: u16) -> Server {
    let dir = scratch("limitador");
    let limits = match binary.parent().map(|d| d.join("limits.yaml")) {
        Some(path) if path.is_file() => path,
        _ => {
            let path = dir.join("limits.yaml");
            std::fs::write(&path, LIMITADOR_LIMITS).expect("write limits.yaml");
            path
        }
    };
    let (grpc_port, http_port) = (free_port(), free_port());
    let log = std::fs::File::create(dir.join("limitador.log")).expect("create the log file");
    let mut child = Command::new(binary)
        .args(["-b", "127.0.0.1", "-p", &grpc_port.to_string()])
        .args(["-B", "127.0.0.1", "-P", &http_port.to_string()])
        .arg(&limits)
        .args(["redis", &format!("redis://127.0.0.1:{redis_port}")])
        .stdout(log.try_clone().expect("clone the log file"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
    let grpc = format!("127.0.0.1:{grpc_port}");
    let started = Instant::now();
    loop {
        if std::net::TcpStream::connect(&grpc).is_ok() {
            break;
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || started.elapsed() > START_DEADLINE {
            let _ = child.kill();
            let text = std::fs::read_to_string(dir.join("limitador.log")).unwrap_or_default();
            panic!("Limitador did not listen on {grpc} ({exited:?}):\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        kind: Kind::Limitador,
        child,
        grpc,
        dir,
    }
}

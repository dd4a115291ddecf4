//! Builds an example binary for black-box tests.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};

/// Builds the example `name` once per test binary (cargo's own lock makes this safe beside
/// other tests) and returns its path.
pub(crate) fn example_binary(name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, path)) = built.iter().find(|(n, _)| n == name) {
        return path.clone();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    // Variables cargo sets for this test binary would look like a changed environment to
    // build scripts that track them (ring's does), forcing a rebuild of half the tree.
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy();
        let per_crate = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_PRIMARY_",
            "CARGO_BIN_",
            "CARGO_TARGET_TMPDIR",
        ];
        if per_crate.iter().any(|p| var.starts_with(p)) {
            command.env_remove(var.as_ref());
        }
    }
    // The same packages and features as `scripts/test.sh` builds, so the build reuses its
    // artifacts: without `--workspace` the library and the tonic crates would be built again
    // without the server's features (nine units of the dependency tree, cargo's unit graph
    // shows).
    let out = command
        .args([
            "build",
            "--workspace",
            "--all-features",
            "--example",
            name,
            "--message-format=json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run cargo build --example {name}: {e}"));
    assert!(out.status.success(), "building the {name} example failed");
    let needle = format!("\"name\":\"{name}\"");
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains(&needle))
        .find_map(|l| {
            let start = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + l[start..].find('"')?;
            Some(PathBuf::from(&l[start..end]))
        })
        .unwrap_or_else(|| panic!("cargo reported no executable for the {name} example"));
    built.push((name.to_owned(), path.clone()));
    path
}

/// A running example, killed on drop.
pub(crate) struct RunningExample {
    child: std::process::Child,
    /// The address it listens on, as it announced it.
    pub(crate) addr: String,
    /// Its other listeners, as announced before that (`metrics on ADDR` gives `("metrics",
    /// ADDR)`).
    pub(crate) listeners: Vec<(String, String)>,
}

impl RunningExample {
    /// Starts the example `name` on a free loopback port with `args`, and waits for its
    /// `listening on ADDR` line (it prints it once the listener is bound, after a `WHAT on ADDR`
    /// line for each other listener; if it exits first, this panics with what it printed
    /// instead).
    pub(crate) fn start(name: &str, args: &[&str]) -> RunningExample {
        RunningExample::start_with_env(name, args, &[])
    }

    /// [`start`](Self::start) with these environment variables set for it.
    pub(crate) fn start_with_env(
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> RunningExample {
        let mut command = Command::new(example_binary(name));
        command
            .args(["--bind", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied());
        RunningExample::spawn(name, command)
    }

    /// Runs `command` (the example `name`, set up by the caller: its listeners on free
    /// ports) and waits for its `listening on ADDR` line, as [`start`](Self::start) does.
    pub(crate) fn spawn(name: &str, mut command: Command) -> RunningExample {
        use std::io::BufRead;
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn the {name} example: {e}"));
        // Killed on drop, also if this panics.
        let mut example = RunningExample {
            child,
            addr: String::new(),
            listeners: Vec::new(),
        };
        let stdout = example.child.stdout.take().expect("piped stdout");
        let mut stdout = std::io::BufReader::new(stdout);
        loop {
            let mut line = String::new();
            stdout
                .read_line(&mut line)
                .unwrap_or_else(|e| panic!("read the {name} example's stdout: {e}"));
            let line = line.trim();
            if let Some(addr) = line.strip_prefix("listening on ") {
                example.addr = addr.to_owned();
                return example;
            }
            match line.split_once(" on ") {
                Some((what, addr)) if !what.contains(' ') => {
                    example.listeners.push((what.to_owned(), addr.to_owned()))
                }
                _ => panic!("the {name} example printed {line:?} before `listening on`"),
            }
        }
    }

    /// The process id, to send it signals.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `deadline` for the process to exit; its status, or `None` if it still runs.
    pub(crate) fn wait_exit(
        &mut self,
        deadline: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let end = std::time::Instant::now() + deadline;
        while std::time::Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    /// The address of the listener announced as `what` (`metrics`, `admin`).
    pub(crate) fn listener(&self, what: &str) -> &str {
        self.listeners
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, addr)| addr.as_str())
            .unwrap_or_else(|| panic!("no {what} listener announced: {:?}", self.listeners))
    }
}

impl Drop for RunningExample {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

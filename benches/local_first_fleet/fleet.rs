//! The fleet under test: `examples/server` built in release mode and run as separate
//! processes, each on a free loopback port, all sharing one `redis-server`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::cpu_us;

/// Builds `examples/server` in release mode (default features and `admin`, which it requires)
/// and returns its path. The bench's own profile is release too, so after `cargo bench` this
/// compiles only the example; under `--all-features` it builds the library once more.
pub(crate) fn server_binary() -> PathBuf {
    let mut command = crate::support::cargo::command();
    eprintln!("building examples/server (release) ...");
    let out = command
        .args([
            "build",
            "--release",
            "--features",
            "admin",
            "--example",
            "server",
            "--message-format=json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run cargo build --example server: {e}"));
    assert!(out.status.success(), "building the server example failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains("\"name\":\"server\""))
        .find_map(|l| {
            let start = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + l[start..].find('"')?;
            Some(PathBuf::from(&l[start..end]))
        })
        .expect("cargo reported no executable for the server example")
}

/// Server processes started with the same flags, killed on drop.
pub(crate) struct Fleet {
    servers: Vec<Child>,
    /// Where each listens, as it announced it (`127.0.0.1:PORT`).
    pub(crate) addrs: Vec<String>,
}

impl Fleet {
    /// Starts `instances` servers from `binary` with `args` (and `--bind 127.0.0.1:0`), and
    /// waits until each has announced its address.
    pub(crate) fn start(binary: &Path, instances: usize, args: &[String]) -> Fleet {
        let mut fleet = Fleet {
            servers: Vec::new(),
            addrs: Vec::new(),
        };
        for _ in 0..instances {
            let mut child = Command::new(binary)
                .args(["--bind", "127.0.0.1:0"])
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
            let stdout = child.stdout.take().expect("piped stdout");
            // Pushed before reading, so it is killed on drop if it never announces itself.
            fleet.servers.push(child);
            let mut line = String::new();
            std::io::BufReader::new(stdout)
                .read_line(&mut line)
                .expect("read the server's stdout");
            let addr = line
                .trim()
                .strip_prefix("listening on ")
                .unwrap_or_else(|| panic!("the server printed {line:?}, not `listening on`"));
            fleet.addrs.push(addr.to_owned());
        }
        fleet
    }

    /// CPU time (user + system) the servers have used so far, µs, summed.
    pub(crate) fn cpu_us(&self) -> f64 {
        self.servers
            .iter()
            .map(|s| cpu_us(&Path::new("/proc").join(s.id().to_string())))
            .sum()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for server in &mut self.servers {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

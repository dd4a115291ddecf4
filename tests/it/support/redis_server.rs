//! Starts and stops `redis-server` processes (and Valkey's, and Sentinels). Never uses a Redis
//! that happens to run on 6379.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server on a free loopback port, killed on drop.
pub(crate) struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    binary: String,
    /// Extra arguments; `{port}` and `{dir}` are replaced.
    args: Vec<String>,
    /// A config file written before start (Sentinels need one they can rewrite).
    config: Option<String>,
}

/// The server binary: `$REDIS_SERVER`, else `redis-server` on the PATH.
pub(crate) fn redis_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl RedisServer {
    /// Starts a standalone server on a free port and waits until it answers PING.
    pub(crate) fn start() -> Self {
        Self::launch(redis_binary(), Vec::new(), None)
    }

    /// Starts a server with extra arguments (`{port}` and `{dir}` are replaced).
    pub(crate) fn start_with(args: &[&str]) -> Self {
        Self::launch(
            redis_binary(),
            args.iter().map(|s| s.to_string()).collect(),
            None,
        )
    }

    /// Starts another server binary (e.g. `valkey-server`) with the same arguments.
    pub(crate) fn start_binary(binary: &str) -> Self {
        Self::launch(binary.to_owned(), Vec::new(), None)
    }

    /// Starts a Sentinel with this config (`{port}` and `{dir}` are replaced).
    pub(crate) fn start_sentinel(config: &str) -> Self {
        Self::launch(
            redis_binary(),
            vec!["--sentinel".into()],
            Some(config.to_owned()),
        )
    }

    fn launch(binary: String, args: Vec<String>, config: Option<String>) -> Self {
        // The port is free when picked but may be taken before the server binds it: retry.
        for _ in 0..10 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("redlimit-test-{}-{port}", std::process::id()));
            let mut server = RedisServer {
                child: None,
                port,
                dir,
                binary: binary.clone(),
                args: args.clone(),
                config: config.clone(),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start {binary} (is it installed? scripts/test.sh installs redis-server)");
    }

    fn fill(&self, text: &str) -> String {
        text.replace("{port}", &self.port.to_string())
            .replace("{dir}", self.dir.to_str().expect("utf-8 temp dir"))
    }

    fn spawn(&mut self) -> bool {
        std::fs::create_dir_all(&self.dir).expect("temp dir");
        let mut command = Command::new(&self.binary);
        if let Some(config) = &self.config {
            let path = self.dir.join("sentinel.conf");
            std::fs::write(&path, self.fill(config)).expect("write config");
            command.arg(&path);
        }
        command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")]);
        if self.config.is_none() {
            command.args(["--save", "", "--appendonly", "no"]);
        }
        let args: Vec<String> = self.args.iter().map(|a| self.fill(a)).collect();
        let child = command
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            panic!(
                "could not run {} (is it installed? scripts/test.sh installs it)",
                self.binary
            );
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return false; // exited: port taken
            }
            if self.ping() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    /// Whether the server answers; a server that requires a password answers with `NOAUTH`.
    fn ping(&self) -> bool {
        let reply = redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        match reply {
            Ok(_) => true,
            Err(err) => {
                err.code() == Some("NOAUTH") || err.kind() == redis::ErrorKind::AuthenticationFailed
            }
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while running.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// A synchronous connection for assertions.
    pub(crate) fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("connect to test redis")
    }

    /// Sends a signal (`STOP`, `CONT`, ...) to the server.
    pub(crate) fn signal(&self, name: &str) {
        let pid = self.pid().expect("server running");
        let status = Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing answers.
    pub(crate) fn freeze(&self) {
        self.signal("STOP");
    }

    /// Resumes a frozen server.
    pub(crate) fn thaw(&self) {
        self.signal("CONT");
    }

    /// Kills the server (SIGKILL: no goodbye to clients).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again, empty, on the same port.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("could not restart redis on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A frozen server ignores SIGKILL until continued on some systems: continue first.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Starts and stops `redis-server` processes. Never uses a Redis that happens to run on 6379.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a free loopback port, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

/// The server binary: `$REDIS_SERVER`, else `redis-server` on the PATH.
fn binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> Self {
        // The port is free when picked but may be taken before redis binds it: retry.
        for _ in 0..10 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("redlimit-test-{}-{port}", std::process::id()));
            let mut server = RedisServer {
                child: None,
                port,
                dir,
            };
            if server.spawn() {
                return server;
            }
        }
        panic!(
            "could not start {} (is it installed? scripts/test.sh installs it)",
            binary()
        );
    }

    fn spawn(&mut self) -> bool {
        std::fs::create_dir_all(&self.dir).expect("temp dir");
        let child = Command::new(binary())
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            panic!(
                "could not run {} (is it installed? scripts/test.sh installs it)",
                binary()
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

    fn ping(&self) -> bool {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A synchronous connection for assertions.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("connect to test redis")
    }

    /// Kills the server (SIGKILL: no goodbye to clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again, empty, on the same port.
    pub fn restart(&mut self) {
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
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

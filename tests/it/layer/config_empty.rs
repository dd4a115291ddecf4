//! A config file without rules: an empty or half-written file (a deploy that truncates, then
//! writes) is refused, counted and logged, and the rules in force keep limiting; a file that
//! says `allow_no_rules = true` is applied. At start, such a file is an error.

use crate::support;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use http::StatusCode;
use redlimit::config::{ConfigFile, Reloader};
use redlimit::{ConfigError, RateLimitLayer};
use support::*;

const DEADLINE: Duration = Duration::from_secs(10);

/// One policy of `n` an hour, the default rule, keyed by IP.
fn file(n: u64) -> String {
    format!(
        "[[policy]]\nname = \"a\"\nlimits = [{{ algorithm = \"fixed-window\", rate = \"{n}/1h\" }}]\n\
         [default]\npolicy = \"a\"\nkey = \"ip\"\n"
    )
}

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_prefix(name));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// How many of `n` GETs pass.
async fn passed(app: &Router, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if send(app, request("/", "10.0.0.1", &[])).await.status() == StatusCode::OK {
            ok += 1;
        }
    }
    ok
}

/// A writer into a shared buffer, for the log.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// Alone in a process: it reads its own log lines, and tracing caches each callsite's
// interest process-wide (a test on another thread can race this subscriber out).
#[tokio::test]
async fn truncate_then_write_keeps_limiting_in_the_gap() {
    if !alone(
        module_path!(),
        "truncate_then_write_keeps_limiting_in_the_gap",
    ) {
        return;
    }
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // The watcher's task runs on this (current-thread) runtime, so on this thread.
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = RedisServer::start();
    let dir = dir("truncate");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(2)).unwrap();
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "truncate").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let reloader = Reloader::new(layer.handle());
    let app = app(layer);
    assert_eq!(passed(&app, 3).await, 2, "the client is at its limit");
    let _watcher = reloader.watch(&path).expect("watch");

    // The deploy truncates the file in place...
    std::fs::File::create(&path).expect("truncate");
    let refused = eventually(DEADLINE, async || reloader.refused() >= 1).await;
    assert!(refused, "the watcher did not read the truncated file");
    assert_eq!(reloader.applied(), 0);
    // ...and requests in the gap are still limited.
    assert_eq!(passed(&app, 5).await, 0, "the empty file opened the route");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("ERROR"), "{text}");
    assert!(text.contains("no_rules"), "{text}");
    assert!(text.contains("allow_no_rules = true"), "{text}");

    // Then it writes the new text, in place: applied, with the units already used kept.
    std::fs::write(&path, file(5)).unwrap();
    let applied = eventually(DEADLINE, async || reloader.applied() >= 1).await;
    assert!(applied, "the new text was not applied");
    assert_eq!(passed(&app, 4).await, 3, "2 of 5 used before");
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_file_that_means_no_rules_is_applied() {
    let server = RedisServer::start();
    let dir = dir("no-rules");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(1)).unwrap();
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "no-rules").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let reloader = Reloader::new(layer.handle());
    let app = app(layer);
    assert_eq!(passed(&app, 2).await, 1);

    // Only policies left (a file cut after them): no rule, refused.
    let policies_only = file(1).split("[default]").next().unwrap().to_owned();
    std::fs::write(&path, &policies_only).unwrap();
    assert_eq!(reloader.reload_from(&path), Err(ConfigError::NoRules));
    assert_eq!(passed(&app, 2).await, 0);

    std::fs::write(&path, format!("allow_no_rules = true\n{policies_only}")).unwrap();
    reloader.reload_from(&path).expect("an explicit empty file");
    assert_eq!((reloader.applied(), reloader.refused()), (1, 1));
    assert_eq!(
        passed(&app, 3).await,
        3,
        "nothing is limited, as the file says"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// At start, `examples/server --config` refuses a file without rules: exit status 2 and one
/// line saying why, instead of a server that limits nothing.
#[test]
fn the_server_example_refuses_to_start_on_an_empty_file() {
    let dir = dir("server-empty");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, "").unwrap();
    let mut child = std::process::Command::new(example_binary("server"))
        .args(["--config", path.to_str().unwrap(), "--bind", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the server example");
    // A server that starts anyway serves until killed: fail instead of hanging.
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > end {
            child.kill().ok();
            panic!("the server example started on an empty config file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("its output");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: --config: "), "{stderr}");
    assert!(stderr.contains("allow_no_rules = true"), "{stderr}");
    std::fs::remove_dir_all(dir).ok();
}

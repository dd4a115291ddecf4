//! Policies and routes from a TOML file: built from it, reloaded live through the watcher,
//! broken files refused with the old configuration kept, state kept across reloads.

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use http::StatusCode;
use redlimit::RateLimitLayer;
use redlimit::config::{ConfigFile, Reloader};
use redlimit::store::MemoryStore;
use support::*;

const DEADLINE: Duration = Duration::from_secs(10);

/// A file of two policies: `a` (the default rule) and `b` (GET /b*), fixed windows of an hour.
fn file(a: u64, b: u64) -> String {
    format!(
        r#"
[[policy]]
name = "a"
limits = [{{ algorithm = "fixed-window", rate = "{a}/1h" }}]

[[policy]]
name = "b"
limits = [{{ algorithm = "sliding-log", rate = "{b}/1h" }}]

[[route]]
route = "GET /b*"
policy = "b"
key = "ip"

[default]
policy = "a"
key = "ip"
"#
    )
}

/// A fresh directory of this test's own.
fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_prefix(name));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Replaces `path` as editors do: a new file renamed over the old one.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

async fn get_status(app: &Router, path: &str) -> StatusCode {
    send(app, request(path, "10.0.0.1", &[])).await.status()
}

/// How many of `n` GETs of `path` pass.
async fn passed(app: &Router, path: &str, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        if get_status(app, path).await == StatusCode::OK {
            ok += 1;
        }
    }
    ok
}

#[tokio::test]
async fn the_example_file_loads_and_limits() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redlimit.toml");
    let config = ConfigFile::load(path).expect("the example file is valid");
    let names: Vec<_> = config.policies().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["login", "api", "search", "tenant-api"]);
    let app = Router::new()
        .route("/login", post(|| async { "ok" }))
        .route("/v1/{*rest}", get(|| async { "ok" }))
        .layer(
            RateLimitLayer::builder_per_route(MemoryStore::new())
                .rules(config.rules())
                .build()
                .expect("valid layer"),
        );
    let login = || {
        let mut req = request("/login", "10.0.0.9", &[]);
        *req.method_mut() = http::Method::POST;
        req
    };
    for _ in 0..5 {
        assert_eq!(send(&app, login()).await.status(), StatusCode::OK);
    }
    assert_eq!(
        send(&app, login()).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Two API keys of one tenant: 5 a minute each at most, 8 together.
    let v1 = |api_key: &str| {
        request(
            "/v1/items",
            "10.0.0.9",
            &[("x-api-key", api_key), ("x-tenant", "acme")],
        )
    };
    let mut passed = [0, 0];
    for _ in 0..6 {
        for (i, api_key) in ["k1", "k2"].iter().enumerate() {
            if send(&app, v1(api_key)).await.status() == StatusCode::OK {
                passed[i] += 1;
            }
        }
    }
    assert_eq!(passed, [4, 4]);
}

#[tokio::test]
async fn a_changed_file_applies_without_a_restart_and_keeps_used_units() {
    let server = RedisServer::start();
    let dir = dir("watch");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(2, 1)).unwrap();
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "watch").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let handle = Reloader::new(layer.handle());
    let app = app(layer);
    assert_eq!(passed(&app, "/", 3).await, 2);

    let _watcher = handle.watch(&path).expect("watch");
    replace(&path, &file(5, 1));
    let reloaded = eventually(DEADLINE, async || handle.applied() >= 1).await;
    assert!(reloaded, "the watcher did not reload the changed file");
    // 2 of 5 used before the change: 3 left, not 5.
    assert_eq!(passed(&app, "/", 4).await, 3);
    std::fs::remove_dir_all(dir).ok();
}

/// Kubernetes mounts a ConfigMap as `FILE -> ..data/FILE` and `..data -> ..TIMESTAMP/`, and
/// updates it by writing a new `..TIMESTAMP/`, renaming a fresh `..data_tmp` link over
/// `..data` and removing the old directory: no event names `FILE`. The watcher follows it.
#[cfg(unix)]
#[tokio::test]
async fn a_kubernetes_configmap_update_is_followed() {
    use std::os::unix::fs::symlink;

    let server = RedisServer::start();
    let dir = dir("configmap");
    std::fs::create_dir(dir.join("..2026_11_25_01")).unwrap();
    std::fs::write(dir.join("..2026_11_25_01/redlimit.toml"), file(2, 1)).unwrap();
    symlink("..2026_11_25_01", dir.join("..data")).unwrap();
    symlink("..data/redlimit.toml", dir.join("redlimit.toml")).unwrap();
    let path = dir.join("redlimit.toml");
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "configmap").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let handle = Reloader::new(layer.handle());
    let app = app(layer);
    assert_eq!(passed(&app, "/", 3).await, 2);
    let _watcher = handle.watch(&path).expect("watch");

    // The kubelet's update, step by step.
    std::fs::create_dir(dir.join("..2026_11_25_02")).unwrap();
    std::fs::write(dir.join("..2026_11_25_02/redlimit.toml"), file(5, 1)).unwrap();
    symlink("..2026_11_25_02", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join("..2026_11_25_01")).unwrap();

    let reloaded = eventually(DEADLINE, async || handle.applied() >= 1).await;
    assert!(reloaded, "the watcher missed the ConfigMap's update");
    assert_eq!(handle.applied(), 1, "one update, one reload");
    assert_eq!(
        passed(&app, "/", 4).await,
        3,
        "2 of 5 used before the update"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// `kill -HUP` reloads the file, changed or not by any file event.
#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads_the_file() {
    let server = RedisServer::start();
    let dir = dir("sighup");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(2, 1)).unwrap();
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "sighup").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let handle = Reloader::new(layer.handle());
    let _hangup = handle.reload_on_hangup(&path).expect("listen for SIGHUP");
    std::fs::write(&path, file(5, 1)).unwrap();
    let pid = std::process::id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let reloaded = eventually(DEADLINE, async || handle.applied() >= 1).await;
    assert!(reloaded, "SIGHUP did not reload the file");
    std::fs::remove_dir_all(dir).ok();
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
async fn a_broken_file_is_refused_logged_and_the_old_config_stays() {
    if !alone(
        module_path!(),
        "a_broken_file_is_refused_logged_and_the_old_config_stays",
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
    let dir = dir("broken");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(2, 1)).unwrap();
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "broken").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let handle = Reloader::new(layer.handle());
    let app = app(layer);
    let _watcher = handle.watch(&path).expect("watch");

    // An unknown policy, written in place.
    std::fs::write(
        &path,
        file(9, 1).replace("policy = \"b\"", "policy = \"c\""),
    )
    .unwrap();
    let refused = eventually(DEADLINE, async || handle.refused() >= 1).await;
    assert!(refused, "the watcher did not read the broken file");
    assert_eq!(handle.applied(), 0);
    assert_eq!(passed(&app, "/", 3).await, 2, "the old limit of 2 stays");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("ERROR"), "{text}");
    assert!(
        text.contains("line 12: route.policy: no policy named `c`"),
        "{text}"
    );

    // The same through the handle: the error is returned.
    let err = handle.reload_from(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 12: route.policy: no policy named `c`"
    );
    std::fs::write(&path, "[[policy]\n").unwrap();
    assert!(handle.reload_from(&path).is_err());
    assert_eq!(passed(&app, "/", 1).await, 0);
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn unchanged_limits_keep_their_state_across_a_reload() {
    let server = RedisServer::start();
    let dir = dir("unchanged");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(3, 2)).unwrap();
    let layer = RateLimitLayer::builder_per_route(redis_store(&server, "unchanged").await)
        .rules(ConfigFile::load(&path).unwrap().rules())
        .deny_cache(0)
        .build()
        .expect("valid layer");
    let handle = Reloader::new(layer.handle());
    // A service made before the reload: it must see the new rules too.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/b", get(|| async { "ok" }))
        .layer(layer.clone());
    assert_eq!(passed(&app, "/", 2).await, 2);
    assert_eq!(passed(&app, "/b", 2).await, 2);
    assert_eq!(get_status(&app, "/b").await, StatusCode::TOO_MANY_REQUESTS);

    // `a` unchanged, `b` raised from 2 to 4.
    std::fs::write(&path, file(3, 4)).unwrap();
    handle.reload_from(&path).expect("reload");
    assert_eq!(passed(&app, "/", 2).await, 1, "a: 2 of 3 used before");
    assert_eq!(passed(&app, "/b", 3).await, 2, "b: 2 of 4 used before");
    std::fs::remove_dir_all(dir).ok();
}

/// The status of a GET `/` to a running example.
fn http_status(addr: &str) -> u16 {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let req = "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    stream.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    response[9..12].parse().expect("status code")
}

#[test]
fn the_server_example_reloads_its_config_file_on_change() {
    let server = RedisServer::start();
    let dir = dir("server");
    let path = dir.join("redlimit.toml");
    std::fs::write(&path, file(2, 1)).unwrap();
    let prefix = unique_prefix("server");
    let example = RunningExample::start(
        "server",
        &[
            "--config",
            path.to_str().unwrap(),
            "--redis",
            &server.url(),
            "--prefix",
            &prefix,
        ],
    );
    let statuses: Vec<u16> = (0..3).map(|_| http_status(&example.addr)).collect();
    assert_eq!(statuses, [200, 200, 429]);

    replace(&path, &file(5, 1));
    // Denied (and cached) until the reload; then 3 of the new 5 are left.
    let end = std::time::Instant::now() + DEADLINE;
    while http_status(&example.addr) != 200 {
        assert!(
            std::time::Instant::now() < end,
            "no reload within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let statuses: Vec<u16> = (0..3).map(|_| http_status(&example.addr)).collect();
    assert_eq!(statuses, [200, 200, 429]);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_readme_shows_the_example_file_as_it_is() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/docs/guide/operations.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/redlimit.toml")).unwrap();
    assert!(
        readme.contains(&format!("```toml\n{example}```")),
        "docs/guide/operations.md's copy of examples/redlimit.toml differs"
    );
}

/// `[client_ip]` makes `ip` the client behind the trusted proxies, and a rule's `shadow`
/// records without denying.
#[tokio::test]
async fn client_ip_behind_proxies_and_shadowed_rules() {
    let config = ConfigFile::parse(
        r#"
[client_ip]
trusted_proxies = ["10.0.0.0/8"]

[[policy]]
name = "one"
limits = [{ algorithm = "fixed-window", rate = "1/1h" }]

[[route]]
route = "/shadow*"
policy = "one"
key = "ip"
shadow = "on-with-headers"

[default]
policy = "one"
key = "ip"
"#,
    )
    .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/shadow", get(|| async { "ok" }))
        .layer(
            RateLimitLayer::builder_per_route(MemoryStore::new())
                .rules(config.rules())
                .build()
                .expect("valid layer"),
        );
    let via_proxy =
        |path: &str, client: &str| request(path, "10.0.0.1", &[("x-forwarded-for", client)]);
    // Two clients behind one proxy: one each.
    assert_eq!(
        send(&app, via_proxy("/", "203.0.113.7")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&app, via_proxy("/", "203.0.113.8")).await.status(),
        StatusCode::OK
    );
    let denied = send(&app, via_proxy("/", "203.0.113.7")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // Shadowed: over the limit, let through, with the headers but no Retry-After.
    for _ in 0..3 {
        let res = send(&app, via_proxy("/shadow", "203.0.113.9")).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, "x-ratelimit-limit"), "1");
        assert_eq!(header(&res, "retry-after"), "");
    }
}

//! A test that needs a process of its own: process-wide state other tests of this binary set
//! (rustls's default crypto provider, tracing's callsite interest cache) would make it pass or
//! fail by what ran beside it.

use std::process::Command;

/// Set in the process [`alone`] starts, where no other test runs.
const ALONE: &str = "REDLIMIT_TEST_ALONE";

/// Runs the test `name` of the module `module` (the caller's `module_path!()`) again in a
/// process of its own and asserts it passed there. Returns `true` in that process, where the
/// caller then does the work, and `false` in the parent, which has nothing left to do.
pub(crate) fn alone(module: &str, name: &str) -> bool {
    if std::env::var_os(ALONE).is_some() {
        return true;
    }
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    let test = format!("{module}::{name}");
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([&test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(ALONE, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{test} alone: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

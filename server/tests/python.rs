//! The black-box suite: the real `redlimit-server` binary driven by PyPI's `xds-protos` stubs
//! (the gRPC project's generated Envoy API, a client we did not write) against real
//! `redis-server` processes. `scripts/test.sh` installs `xds-protos` and `grpcio`; the
//! scenarios are in `tests/python/test_*.py` (the processes they start: `harness.py`).

use std::process::Command;

#[test]
fn the_python_suite_passes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python");
    let output = Command::new("python3")
        .args(["-m", "unittest", "discover", "-v", "-p", "test_*.py"])
        .current_dir(dir)
        .env("REDLIMIT_SERVER_BIN", env!("CARGO_BIN_EXE_redlimit-server"))
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the Python suite failed (pip install xds-protos grpcio if it could not import them)"
    );
}

//! `cargo` run from a harness, to build the release binaries it starts.

use std::process::Command;

/// A `cargo` command (the one running the bench, else the `PATH`'s) without the variables cargo
/// set for this bench binary: they would look like a changed environment to build scripts that
/// track them (ring's does), forcing a rebuild of half the tree.
pub(crate) fn command() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
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
    command
}

#!/usr/bin/env bash
# The whole test suite: installs redis-server if missing, then fmt, clippy, docs and every test.
# Tests start their own redis-server processes on free loopback ports; a Redis on 6379 is
# never used.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found; installing it with apt-get" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
fi
redis-server --version

cargo fmt --all -- --check
cargo clippy --all-targets --all-features -- -D warnings
cargo clippy --lib --no-default-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features --quiet
cargo test --all-features --all-targets
cargo test --all-features --doc

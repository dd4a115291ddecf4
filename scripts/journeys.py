#!/usr/bin/env python3
"""The three journeys, counted by running them: which Rust files of the crate (and of the
server) one request's execution passes through.

    scripts/journeys.py a            # an HTTP request through the Tower layer, a 429 on Redis
    scripts/journeys.py b            # a ShouldRateLimit call through redlimit-server on Redis
    scripts/journeys.py c            # Limiter::acquire on Redis
    scripts/journeys.py a b c --markdown   # the lists as ARCHITECTURE.md shows them

How: every function of the crates is a breakpoint that records its name and goes on (gdb, on a
debug build's symbols). (a) and (c) are tests of the `it` binary (`tests/it/journeys.rs`):
each warms its path up (connections, scripts loaded, overrides read, another key denied), then
runs one journey between `journey_begins` and `journey_ends`, and only those calls are
recorded. (b) starts the server binary (`REDLIMIT_SERVER_BIN`, else the debug build) on a
redis-server, warms it up with the same calls, attaches gdb, makes the one call and stops.

A function is placed in the file that defines it by its symbol's path (`a::b::f` is in
`a/b.rs` or `a/b/mod.rs`; an impl's methods where the impl is, which legacy symbols name:
`a::b::<impl T>::f`, or `<a::T as Trait>::f` when the impl sits beside its type); closures and
async bodies count for the function they are in. Drop glue (`drop_in_place`) and other crates'
generic code instantiated with our types are not counted; our `Drop` impls are. Everything
that runs counts, the small accessors of values (`Policy::limits`, `Decision::is_allowed`)
too. In (b), the functions of the server's background tasks that a slow (traced) call lets run
(`BACKGROUND`) are left out.

Binaries: the `it` test binary (`REDLIMIT_IT_BIN`, else cargo builds it: `cargo test -p
redlimit --all-features --test it --no-run`); the server, `REDLIMIT_SERVER_BIN`, else
`debug/redlimit-server` under `CARGO_TARGET_DIR` (or `target/`).
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = {"redlimit": "src", "redlimit_server": "server/src"}

# Background work that may run while a traced (slow) journey waits: a function whose stack
# holds one of these is not the journey's (its name is reported apart).
BACKGROUND = (
    "redlimit::store::redis::poll::poller",
    "redlimit_server::health::",
    "redlimit_server::stats::process::",
    "redlimit_server::stats::statsd::",
    "redlimit_server::config::files::watch",
)

# The crate's values and settings, whose accessors every path calls (`Policy::limits`,
# `Decision::is_allowed`): counted, and listed apart, as the vocabulary a path speaks in
# rather than a step it takes.
VOCABULARY = re.compile(
    r"src/(policy|limit|identity|algorithm/kind|key/encoding|decision/\w+|failure/\w+"
    r"|layer/settings/\w+)\.rs$")

# Methods of std's derivable traits: a file that only contributes them where `#[derive]`
# wrote them is passed through by no written code.
DERIVABLE = {"clone": "Clone", "eq": "PartialEq", "ne": "PartialEq", "default": "Default",
             "hash": "Hash", "fmt": "Debug", "cmp": "Ord", "partial_cmp": "PartialOrd"}

GDB_SCRIPT = r'''
import gdb, json, os
hits, background = set(), set()
class Rec(gdb.Breakpoint):
    def __init__(self, spec, name):
        super().__init__(spec, internal=True)
        self.fname = name
    def stop(self):
        if self.fname in hits:
            return False
        frame = gdb.newest_frame()
        while frame is not None:
            name = frame.name() or ""
            if any(b in name for b in BACKGROUND):
                background.add(self.fname)
                return False
            frame = frame.older()
        hits.add(self.fname)
        return False
def base():
    pid = gdb.selected_inferior().pid
    exe = os.path.realpath("/proc/%d/exe" % pid)
    with open("/proc/%d/maps" % pid) as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == exe and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise RuntimeError("no mapping of the executable")
def arm():
    offset = base() if PIE else 0
    with open(SYMBOLS) as f:
        for line in f:
            addr, name = line.rstrip("\n").split(" ", 1)
            Rec("*0x%x" % (int(addr, 16) + offset), name)
def dump():
    with open(OUT, "w") as f:
        json.dump({"hits": sorted(hits), "background": sorted(background - hits)}, f)
gdb.execute("set pagination off")
gdb.execute("set confirm off")
'''

GDB_TEST = r'''
gdb.execute("starti")
for marker in MARKERS:
    gdb.Breakpoint("*0x%x" % (marker + (base() if PIE else 0)), internal=True)
gdb.execute("continue")
arm()
gdb.execute("continue")
dump()
for b in gdb.breakpoints():
    b.enabled = False
gdb.execute("continue")
'''

GDB_ATTACH = r'''
gdb.execute("handle SIGINT stop nopass")
arm()
open(READY, "w").close()
gdb.execute("continue")
dump()
gdb.execute("detach")
'''


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def it_binary():
    """The `it` test binary of this tree (`REDLIMIT_IT_BIN`, else built, or found, by cargo)."""
    if os.environ.get("REDLIMIT_IT_BIN"):
        return os.environ["REDLIMIT_IT_BIN"]
    import json
    built = subprocess.run(
        ["cargo", "test", "-p", "redlimit", "--all-features", "--test", "it", "--no-run",
         "--message-format=json"], cwd=ROOT, capture_output=True, text=True, check=True)
    for line in built.stdout.splitlines():
        message = json.loads(line)
        if message.get("executable") and message["target"]["name"] == "it":
            return message["executable"]
    sys.exit("cargo built no it test binary")


def symbols(binary, path):
    """Writes `addr name` for each function of the crates in `binary` to `path`."""
    nm = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True,
                        check=True).stdout
    seen = set()
    with open(path, "w") as out:
        for line in nm.splitlines():
            parts = line.split(" ", 2)
            if len(parts) != 3 or parts[1] not in "tTwW":
                continue
            addr, name = parts[0], parts[2]
            if owner(name) is None or addr in seen:
                continue
            seen.add(addr)
            out.write(f"{addr} {name}\n")


def is_pie(binary):
    header = subprocess.run(["readelf", "-h", binary], capture_output=True, text=True).stdout
    return "DYN" in header


def split_top(text, sep="::"):
    """`text` split at `sep` outside <> and ()."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def strip_generics(path):
    out, depth = [], 0
    for c in path:
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def qualified_end(name):
    """Where the `<Type as Trait>` that `name` starts with ends (its `>`), if it does."""
    depth = 0
    for i, c in enumerate(name):
        depth += c == "<"
        depth -= c == ">"
        if depth == 0:
            return i
    return None


def owner(name):
    """The module path (crate first) of the code `name` is, if it is one of the crates'."""
    if name.startswith("<"):
        end = qualified_end(name)
        if end is None:
            return None
        qualified = split_top(name[1:end], " as ")
        for path in qualified:
            segments = split_top(strip_generics(path).strip("&*").replace("mut ", "").strip())
            if segments[0] in CRATES:
                return segments[:-1]
        return None
    segments = split_top(name)
    if segments[0] not in CRATES:
        return None
    module = []
    for segment in segments:
        if segment.startswith("<") or segment.startswith("{{"):
            break
        module.append(strip_generics(segment))
    return module


def file_of(module):
    """The file a module path lives in (its longest prefix that is a file)."""
    crate, rest = module[0], module[1:]
    root = os.path.join(ROOT, CRATES[crate])
    best = "lib.rs" if crate == "redlimit" else "main.rs"
    if crate == "redlimit" and rest[:1] == ["__private"]:
        rest = ["private"] + rest[1:]
    for n in range(1, len(rest) + 1):
        base = os.path.join(*rest[:n])
        for candidate in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.isfile(os.path.join(root, candidate)):
                best = candidate
        # A generated module included by its dotted name (rls/proto/).
        folder = os.path.dirname(os.path.join(root, best))
        for m in range(len(rest), n + 1, -1):
            dotted = ".".join(rest[n:m]) + ".rs"
            if os.path.isfile(os.path.join(folder, dotted)):
                return os.path.relpath(os.path.join(folder, dotted), ROOT)
    return os.path.join(CRATES[crate], best)


def short(name):
    """A function's name as a reader looks for it: `Type::method`, closures folded."""
    name = re.sub(r"::\{\{closure\}\}", "", name)
    end = qualified_end(name) if name.startswith("<") else None
    if end is not None:
        typ = split_top(strip_generics(split_top(name[1:end], " as ")[0]))[-1]
        return typ + "::" + "::".join(split_top(name[end + 3:]))
    raw = split_top(name)
    segments = [strip_generics(s) for s in raw]
    for i, s in enumerate(raw):
        if s.startswith("<impl"):
            m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)$", strip_generics(s[1:-1]))
            return (m.group(1) if m else "impl") + "::" + "::".join(segments[i + 1:])
    return "::".join(segments[-2:]) if len(segments) > 2 else segments[-1]


def gdb(script, args):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(script)
    return subprocess.Popen(["gdb", "-nx", "-batch", "-x", f.name, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def preamble(work, binary, out):
    syms = os.path.join(work, "symbols")
    symbols(binary, syms)
    return (GDB_SCRIPT + f"\nBACKGROUND = {BACKGROUND!r}\nPIE = {is_pie(binary)}\nSYMBOLS = {syms!r}\nOUT = {out!r}\n"
            f"READY = {os.path.join(work, 'ready')!r}\n")


def run_test(test):
    """Runs `test` of the it binary under gdb; the functions of its journey."""
    binary = it_binary()
    work = tempfile.mkdtemp(prefix="journeys-")
    out = os.path.join(work, "hits.json")
    nm = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True,
                        text=True, check=True).stdout
    markers = [int(line.split()[0], 16) for line in nm.splitlines()
               for marker in ("journey_begins", "journey_ends")
               if line.endswith(f" it::journeys::{marker}")]
    if len(markers) != 2:
        sys.exit("the it binary has no journey markers (tests/it/journeys.rs)")
    script = preamble(work, binary, out) + f"MARKERS = {markers!r}\n" + GDB_TEST
    proc = gdb(script, ["--args", binary, "--exact", test, "--test-threads=1"])
    log, _ = proc.communicate()
    if not os.path.exists(out) or not re.search(r"\b1 passed; 0 failed", log):
        sys.exit(f"journey {test} did not run:\n{log[-4000:]}")
    import json
    with open(out) as f:
        return json.load(f)


def run_server():
    """(b): the server on a redis-server, one ShouldRateLimit call traced."""
    import json
    sys.path.insert(0, os.path.join(ROOT, "server", "tests", "python"))
    import harness
    binary = os.environ.get("REDLIMIT_SERVER_BIN") or os.path.join(
        target_dir(), "debug", "redlimit-server")
    work = tempfile.mkdtemp(prefix="journeys-")
    out, ready = os.path.join(work, "hits.json"), os.path.join(work, "ready")
    config = {"config.yaml": (
        "domain: journey\n"
        "descriptors:\n"
        "  - key: user\n"
        "    rate_limit: {unit: hour, requests_per_unit: 1}\n")}
    redis = harness.Redis()
    # A deadline a traced (slow) call meets: the journey is the answer's, not a timeout's.
    server = harness.Server(config, redis=redis, program=binary,
                            env={"REDLIMIT_STORE_DEADLINE": "60s"})
    try:
        harness.wait_for("the config", server.healthy)
        assert server.call("journey", [("user", "a")]).overall_code == harness.OK
        assert server.call("journey", [("user", "a")]).overall_code == harness.OVER_LIMIT
        assert server.call("journey", [("user", "b")]).overall_code == harness.OK
        proc = gdb(preamble(work, binary, out) + GDB_ATTACH, ["-p", str(server.process.pid)])
        harness.wait_for("gdb to arm", lambda: os.path.exists(ready) or proc.poll() is not None,
                         deadline=600)
        code = server.call("journey", [("user", "b")], timeout=600).overall_code
        os.kill(server.process.pid, signal.SIGINT)
        log, _ = proc.communicate(timeout=600)
        if code != harness.OVER_LIMIT or not os.path.exists(out):
            sys.exit(f"journey b did not run ({code}):\n{log[-4000:]}")
        with open(out) as f:
            return json.load(f)
    finally:
        server.stop()
        redis.stop()


JOURNEYS = {
    "a": ("an HTTP request through the Tower layer, denied (429) on Redis",
          lambda: run_test("journeys::an_http_request_denied_on_redis")),
    "b": ("a ShouldRateLimit call through redlimit-server, decided (OVER_LIMIT) on Redis",
          run_server),
    "c": ("Limiter::acquire on Redis (a reservation)",
          lambda: run_test("journeys::an_acquire_on_redis")),
}


def derived(path, function):
    """Whether `function` (`Type::method`) is a derived impl of a std trait in `path`."""
    typ, _, method = function.rpartition("::")
    trait = DERIVABLE.get(method)
    if trait is None or not typ:
        return False
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    written = re.search(rf"impl\b[^{{;]*\b{trait}\b[^{{;]*\bfor\s+{typ}\b", text)
    return written is None


def by_file(hits):
    """Each file's functions run (derived impls left out)."""
    files = defaultdict(set)
    for name in hits:
        module = owner(name)
        if module is None:
            continue
        path, function = file_of(module), short(name)
        if not derived(path, function):
            files[path].add(function)
    return files


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    markdown = "--markdown" in sys.argv
    for journey in args or "abc":
        what, run = JOURNEYS[journey]
        found = run()
        files = by_file(found["hits"])
        words = [p for p in files if VOCABULARY.search(p)]
        steps = sorted(p for p in files if p not in words)
        print(f"\n({journey}) {what}: {len(files)} files, {len(steps)} besides the vocabulary"
              if not markdown else
              f"\n**({journey}) {what}: {len(files)} files; {len(steps)} besides the "
              f"vocabulary**\n")
        for path in steps + sorted(words):
            names = ", ".join(f"`{n}`" for n in sorted(files[path]))
            mark = " (vocabulary)" if path in words else ""
            print(f"- `{path}`{mark}: {names}" if markdown else f"  {path}{mark}: {names}")
        if found["background"]:
            left = ", ".join(short(n) for n in found["background"])
            print(f"  (background, left out: {left})")


if __name__ == "__main__":
    main()

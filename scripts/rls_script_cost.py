#!/usr/bin/env python3
"""Redis's cost per RLS decision: the scripts a built `redlimit-server` sends, against
Limitador's commands, measured in the same run inside one `redis-server`.

    python3 scripts/rls_script_cost.py target/release/redlimit-server [--rounds 5] [--calls 100000]
        [--batches 1,2,8] [--pipeline 1] [--callgrind] [--accounting] [--lua NAME=FILE:single|batch ...]

Results and the commands that made them: docs/bench/redis_cost.md, "The RLS decision against
Limitador's".

It starts its own `redis-server` (free loopback port) and the server binary on it, with
envoyproxy/ratelimit's YAML for domain `bench` (10^9 an hour per `user`: every call a counted
admission, the RLS default "every hit lands"); it makes one `ShouldRateLimit` call, then 64 at
once (Python `grpcio` and `xds-protos`), and takes from `MONITOR` the two scripts the server
loaded for that rule: the single call's (`EVALSHA` with one key) and the batch's. The server is
then stopped, and `redis-benchmark` (16 connections, `--pipeline` calls at a time each, 1 by
default; users drawn from 1 000, every key written first) sends to a Redis of its own, per
variant and round, alternating:

- `ours, batch of B`: B = 1 is the single call's script as the server sends it alone; B > 1
  the batch script with B decisions (its arguments as the store writes them);
- `Limitador`: what Limitador's Redis storage sends per decision (its source,
  `limitador/src/storage/redis/redis_async.rs`): an `MGET` of the counter, then an `EVALSHA`
  of its `SCRIPT_UPDATE_COUNTER` (`INCRBY`, and `EXPIRE`+`SADD` on a counter's first hit);
- `EVALSHA INCRBY`: a script of one `INCRBY`, the floor of any one-script decision;
- each `--lua` file, with the single or batch arguments (for trying a script by hand);
- with `--accounting`, the pieces of a single call (`scripts/rls_script_cost/*.lua`: the
  reply alone, the clock, the read, the text work; a bare counter's script; `c_*` and `h_*`,
  prototypes of other states: the window in the key or in a hash field) and ours without
  its `SET`: where a decision's cost goes (best read with `--callgrind`, which counts
  instructions and does not move with the machine's load).

Reported per variant, medians over rounds: Redis's own time per decision (`INFO commandstats`:
the `usec` of the commands sent, a script's holding what it ran, ÷ decisions), Redis CPU per
decision (`used_cpu_user + used_cpu_sys` delta ÷ decisions: adds reading and writing the
sockets), and each against Limitador's in the same round. With `--callgrind`, Redis runs under
valgrind and each variant's instructions per decision (user space) are reported instead. The
scripts taken from the server are left in the printed temporary directory.
"""

import argparse
import hashlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# Limitador's SCRIPT_UPDATE_COUNTER (Kuadrant/limitador, Apache-2.0,
# limitador/src/storage/redis/scripts.rs), verbatim.
LIMITADOR_UPDATE = """
    local c = redis.call('incrby', KEYS[1], ARGV[2])
    if c == tonumber(ARGV[2]) then
      redis.call('expire', KEYS[1], ARGV[1])
      redis.call('sadd', KEYS[2], KEYS[1])
    end
    return c"""
INCRBY = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
BENCH_YAML = ("domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n"
              "      requests_per_unit: 1000000000\n")
USERS = 1000
CONNECTIONS = 16


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                         check=True)
    return out.stdout.decode()


def info(port, section):
    fields = {}
    for line in cli(port, "info", section).splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


def cpu_secs(port):
    f = info(port, "cpu")
    return float(f["used_cpu_user"]) + float(f["used_cpu_sys"])


def command_usec(port):
    """Every command's (calls, usec) from `INFO commandstats`."""
    stats = {}
    for k, v in info(port, "commandstats").items():
        m = re.match(r"calls=(\d+),usec=(\d+)", v)
        if m:
            stats[k[len("cmdstat_"):]] = (int(m.group(1)), int(m.group(2)))
    return stats


def unrepr(s):
    """The bytes of a `MONITOR` argument (Redis's sdscatrepr escaping)."""
    out, i = bytearray(), 0
    esc = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}
    while i < len(s):
        if s[i] == "\\":
            if s[i + 1] == "x":
                out.append(int(s[i + 2:i + 4], 16))
                i += 4
            else:
                out += esc[s[i + 1]]
                i += 2
        else:
            out += s[i].encode()
            i += 1
    return bytes(out)


def capture_scripts(server_bin, port, workdir):
    """The single call's and the batch's script text of `server_bin` for the bench rule."""
    config = os.path.join(workdir, "runtime", "ratelimit", "config")
    os.makedirs(config, exist_ok=True)
    with open(os.path.join(config, "bench.yaml"), "w") as f:
        f.write(BENCH_YAML)
    # MONITOR on a socket of our own (redis-cli's output to a pipe is block-buffered: killing
    # it would lose the last lines).
    monitor = socket.create_connection(("127.0.0.1", port))
    monitor.sendall(b"MONITOR\r\n")
    assert monitor.recv(5) == b"+OK\r\n"
    chunks = []
    reader = threading.Thread(target=lambda: read_all(monitor, chunks))
    reader.start()
    env = {"PATH": os.environ.get("PATH", ""), "REDIS_URL": f"127.0.0.1:{port}",
           "REDIS_SOCKET_TYPE": "tcp", "RUNTIME_ROOT": os.path.join(workdir, "runtime"),
           "RUNTIME_SUBDIRECTORY": "ratelimit", "HOST": "127.0.0.1", "PORT": "0",
           "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0", "DEBUG_HOST": "127.0.0.1",
           "DEBUG_PORT": "0", "LOG_LEVEL": "warn"}
    server = subprocess.Popen([server_bin], env=env, stdout=subprocess.PIPE, text=True)
    try:
        grpc_addr = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            if line.startswith("grpc on "):
                grpc_addr = line.split()[-1]
                break
        if not grpc_addr:
            sys.exit("the server printed no `grpc on ADDR`")
        drive(grpc_addr, port)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        cli(port, "ping")  # the last line MONITOR shows, so that it has shown all before
        time.sleep(0.2)
        monitor.shutdown(socket.SHUT_RDWR)
        reader.join()
        monitor.close()
    sources, single, batch = {}, None, None
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        m = re.search(r'"SCRIPT" "LOAD" "(.*)"\s*$', line)
        if m:
            src = unrepr(m.group(1))
            sources[hashlib.sha1(src).hexdigest()] = src
            continue
        m = re.search(r'"EVALSHA" "([0-9a-f]{40})" "(\d+)" "redlimit:rls:', line)
        if m:
            if m.group(2) == "1" and single is None:
                single = m.group(1)
            elif m.group(2) != "1" and batch is None:
                batch = m.group(1)
    if single not in sources or batch not in sources:
        sys.exit(f"did not see both scripts loaded and called (single {single}, batch {batch})")
    return sources[single], sources[batch]


def read_all(sock, chunks):
    while True:
        try:
            data = sock.recv(1 << 16)
        except OSError:
            return
        if not data:
            return
        chunks.append(data)


def drive(addr, port):
    """One call alone, then 64 at once: the server sends its single and its batch script.
    Until its rules are loaded the server answers without Redis: the first call is repeated
    until its key is in Redis."""
    import asyncio
    import grpc
    from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

    async def run():
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = rls_pb2_grpc.RateLimitServiceStub(channel)

            async def one(i):
                entry = ratelimit_pb2.RateLimitDescriptor.Entry(key="user", value=f"u{i}")
                request = rls_pb2.RateLimitRequest(
                    domain="bench", descriptors=[ratelimit_pb2.RateLimitDescriptor(entries=[entry])])
                return (await stub.ShouldRateLimit(request, timeout=10)).overall_code

            deadline = time.time() + 60
            while not cli(port, "keys", "redlimit:rls:*").strip():
                if time.time() > deadline:
                    sys.exit("the server sent no EVALSHA within 60 s")
                assert await one(0) == rls_pb2.RateLimitResponse.OK
                await asyncio.sleep(0.05)
            # Calls past the store's deadline on a busy machine are fine: the batch went out.
            for _ in range(5):
                await asyncio.gather(*(one(i) for i in range(64)), return_exceptions=True)

    asyncio.run(run())


def ours_key(i):
    return f"redlimit:rls:{{rls%00bench}}:bench%00user%00u__rand_int__%00%23{i}:fw"


def single_args():
    # The store's single call: the key; '' (Redis's clock), cost 1, count, period µs, the cost.
    return ["1", ours_key(0), "", "1", "1000000000", "3600000000", "1"]


def batch_args(b):
    # The batch: the keys; one run of b decisions ('' time, cost 1, its length, count, period,
    # the cost); no key met twice ('').
    return [str(b), *(ours_key(i) for i in range(b)), "", "1", str(b), "1000000000",
            "3600000000", "1", ""]


class Variant:
    def __init__(self, name, commands, decisions_per_call):
        self.name = name
        # Each a redis-benchmark command line; all of them run once per decision set.
        self.commands = commands
        self.per_call = decisions_per_call
        self.samples = []


PIPELINE = 1


def bench(port, argv, n):
    subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(CONNECTIONS), "-n", str(n),
                    "-r", str(USERS), "-P", str(PIPELINE), "-q", *argv], check=True,
                   capture_output=True)


def callgrind(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def measure(port, variant, calls, valgrind=None):
    cli(port, "flushall")
    n = max(1, calls // variant.per_call)
    # Every key written first, unmeasured: each of a batch's key positions draws its user at
    # random, so 6 calls per user leave about 0.25 % of them unwritten.
    for argv in variant.commands:
        bench(port, argv, USERS * 6)
    if valgrind:
        # Instructions (callgrind, user space) per decision: what the load does not change.
        pid, outdir = valgrind
        before = set(os.listdir(outdir))
        callgrind(pid, "-i", "on")
        for argv in variant.commands:
            bench(port, argv, n)
        callgrind(pid, "-i", "off")
        callgrind(pid, "-d")
        for _ in range(100):
            new = [f for f in set(os.listdir(outdir)) - before if f.startswith("callgrind.out")]
            if new:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        with open(os.path.join(outdir, new[0])) as f:
            totals = [int(line.split()[1]) for line in f if line.startswith("totals:")]
        variant.samples.append((totals[0] / (n * variant.per_call), 0.0))
        return
    cli(port, "config", "resetstat")
    cpu = cpu_secs(port)
    for argv in variant.commands:
        bench(port, argv, n)
    cpu = cpu_secs(port) - cpu
    stats = command_usec(port)
    decisions = n * variant.per_call
    # The commands sent (a script's time holds the commands it runs: not counted again).
    sent = {argv[0].lower() for argv in variant.commands}
    usec = sum(u for name, (c, u) in stats.items() if name in sent)
    variant.samples.append((usec / decisions, cpu * 1e6 / decisions))


def start_redis(argv, port, workdir):
    redis = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             cwd=workdir)
    for _ in range(600):
        try:
            cli(port, "ping")
            return redis
        except subprocess.CalledProcessError:
            time.sleep(0.05)
    redis.kill()
    sys.exit(f"redis-server did not answer on port {port}")


def capture(server_bin, workdir):
    """The scripts, from a server on a plain Redis of its own."""
    port = free_port()
    redis = start_redis(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save",
                         "", "--appendonly", "no"], port, workdir)
    try:
        return capture_scripts(server_bin, port, workdir)
    finally:
        redis.kill()
        redis.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("server")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=100_000, help="decisions per variant and round")
    p.add_argument("--batches", default="1,2,8")
    p.add_argument("--pipeline", type=int, default=1,
                   help="calls each connection sends at a time (many calls in flight on one "
                        "connection, as a server with Redis far away sends them)")
    p.add_argument("--callgrind", action="store_true",
                   help="Redis under valgrind: instructions per decision instead of times")
    p.add_argument("--lua", action="append", default=[], help="NAME=FILE:single|batch[B]")
    p.add_argument("--accounting", action="store_true",
                   help="also the pieces of a single call (scripts/rls_script_cost/*.lua, with "
                        "the single call's keys and arguments) and ours without its SET")
    a = p.parse_args()
    global PIPELINE
    PIPELINE = a.pipeline
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="rls-script-cost-")
    single, batch = capture(a.server, workdir)
    redis_argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no"]
    if a.callgrind:
        redis_argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                      f"--callgrind-out-file={workdir}/callgrind.out.%p", *redis_argv]
    redis = start_redis(redis_argv, port, workdir)
    try:
        for name, src in (("single", single), ("batch", batch)):
            with open(os.path.join(workdir, f"{name}.lua"), "wb") as f:
                f.write(src)
        print(f"scripts: {workdir}/single.lua ({len(single)} bytes), batch.lua ({len(batch)})",
              file=sys.stderr)

        def load(src):
            return cli(port, "script", "load", src if isinstance(src, str) else src.decode()).strip()

        sha_single, sha_batch = load(single), load(batch)
        variants = []
        for b in (int(x) for x in a.batches.split(",")):
            argv = (["EVALSHA", sha_single, *single_args()] if b == 1
                    else ["EVALSHA", sha_batch, *batch_args(b)])
            variants.append(Variant(f"ours, batch of {b}" if b > 1 else "ours, one call",
                                    [argv], b))
        limitador = Variant("Limitador (MGET, then EVALSHA of INCRBY)", [
            ["MGET", "limitador:{bench}:u__rand_int__"],
            ["EVALSHA", load(LIMITADOR_UPDATE), "2", "limitador:{bench}:u__rand_int__",
             "limitador:{bench}:counters", "3600", "1"]], 1)
        variants.append(limitador)
        variants.append(Variant("EVALSHA of one INCRBY", [
            ["EVALSHA", load(INCRBY), "1", "floor:{bench}:u__rand_int__", "1"]], 1))
        if a.accounting:
            here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rls_script_cost")
            for name in sorted(os.listdir(here)):
                a.lua.append(f"{name[:-4]}={os.path.join(here, name)}:single")
            write = "redis.call('SET', KEYS[1], state1, 'KEEPTTL')"
            text = single.decode()
            if write not in text:
                sys.exit("the single script has no `SET ... KEEPTTL` to leave out")
            path = os.path.join(workdir, "single_without_set.lua")
            with open(path, "w") as f:
                f.write(text.replace(write, "local _ = state1"))
            a.lua.append(f"ours without its SET (same window)={path}:single")
        for spec in a.lua:
            name, rest = spec.split("=", 1)
            path, kind = rest.rsplit(":", 1)
            with open(path) as f:
                sha = load(f.read())
            b = 1 if kind == "single" else int(kind[len("batch"):] or 8)
            argv = (["EVALSHA", sha, *single_args()] if kind == "single"
                    else ["EVALSHA", sha, *batch_args(b)])
            variants.append(Variant(name, [argv], b))
        for r in range(a.rounds):
            print(f"round {r + 1}/{a.rounds}", file=sys.stderr)
            for v in variants:
                measure(port, v, a.calls, (redis.pid, workdir) if a.callgrind else None)
        lim = variants.index(limitador)
        if a.callgrind:
            print(f"\nredis {info(port, 'server')['redis_version']} under callgrind, "
                  f"{CONNECTIONS} connections, {PIPELINE} call(s) at a time each, {a.calls} "
                  f"decisions per variant; instructions per decision (user space)\n")
            print("| variant | instructions/decision | × Limitador |")
            print("|---|---:|---:|")
            for v in variants:
                mine = statistics.median(s[0] for s in v.samples)
                theirs = statistics.median(s[0] for s in variants[lim].samples)
                print(f"| {v.name} | {mine:,.0f} | {mine / theirs:.2f}× |")
            return
        print(f"\nredis {info(port, 'server')['redis_version']}, {CONNECTIONS} connections, "
              f"{PIPELINE} call(s) at a time each, {USERS} users, {a.rounds} alternating rounds of {a.calls} "
              f"decisions per variant; medians (ratios: median of the per-round ratios)\n")
        print("| variant | Redis time µs/decision (commandstats) | × Limitador | "
              "Redis CPU µs/decision | × Limitador |")
        print("|---|---:|---:|---:|---:|")
        for v in variants:
            exec_r = statistics.median(s[0] / l[0] for s, l in zip(v.samples, variants[lim].samples))
            cpu_r = statistics.median(s[1] / l[1] for s, l in zip(v.samples, variants[lim].samples))
            print(f"| {v.name} | {statistics.median(s[0] for s in v.samples):.2f} | "
                  f"{exec_r:.2f}× | {statistics.median(s[1] for s in v.samples):.2f} | "
                  f"{cpu_r:.2f}× |")
    finally:
        redis.kill()
        redis.wait()


if __name__ == "__main__":
    main()

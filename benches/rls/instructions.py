#!/usr/bin/env python3
"""Instructions per decision of `redlimit-server`, counted by callgrind: repeatable on a busy
machine, where CPU time is not.

    cargo build --release -p redlimit-server
    python3 benches/rls/instructions.py $CARGO_TARGET_DIR/release/redlimit-server [CALLS] [IN_FLIGHT]

    # beside the floor ("floor: one EVALSHA", `benches/rls/floor.rs`: the bench binary run with
    # REDLIMIT_BENCH_FLOOR=evalsha), with the split of both (`split.py`):
    cargo bench --features rls,redis --bench rls --no-run   # prints the binary's path
    python3 benches/rls/instructions.py $CARGO_TARGET_DIR/release/redlimit-server [CALLS] \
        [IN_FLIGHT] --floor $CARGO_TARGET_DIR/release/deps/rls-HASH
    # cachegrind's simulated cache misses per decision of both instead (`--cache`)

Runs the server twice under `valgrind --tool=callgrind`, each time on a fresh `redis-server`
on a free port with the bench's config (domain `bench`, one counter per `user`, never
reached): once for 200 calls, once for 200 + CALLS (default 2000; IN_FLIGHT at once, default
16, on one HTTP/2 connection or spread over `--connections N`; users cycling over 1000); the
difference of the two totals over CALLS is the server's instructions per decision (every
thread: the runtime, the Redis client, its idle loops; start-up and shutdown cancel out),
printed with the Redis scripts per decision of the longer run (how the server batched). Needs `grpcio` and `xds-protos` (as the
server's Python tests do). Valgrind runs threads one at a time and slower: Redis's batching
differs from a real run (at 16 in flight it moves a total by some ±700 from run to run; at
1 in flight, one script per decision, by ±200). `REDLIMIT_WORKER_THREADS` set
around the script reaches the server (its runtime's threads).

With `--floor BENCH_BINARY` the floor server is measured the same way (the same calls, a fresh
Redis of its own) and both are split per decision side by side (`split.py`: each function's
own instructions, the longer run's less the shorter's, by where they go, and the inclusive
count of the functions that say where a call's time goes).
"""

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

CONFIG = """domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
"""
WARM_UP = 200
FAILED = [0]
# The scripts Redis ran in the last run (`EVALSHA` and `EVAL` calls, `INFO commandstats`):
# how the server batched under valgrind, which differs from a real run's.
SCRIPTS = [0]
# HTTP/2 connections the calls spread over (`--connections`).
CONNECTIONS = [1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, seconds=30):
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def request(i):
    entry = ratelimit_pb2.RateLimitDescriptor.Entry(key="user", value=f"u{i % 1000}")
    return rls_pb2.RateLimitRequest(
        domain="bench",
        descriptors=[ratelimit_pb2.RateLimitDescriptor(entries=[entry])],
    )


async def drive(addr, start, calls, in_flight):
    # Each channel its own HTTP/2 connection (gRPC would otherwise share one between them);
    # the calls in flight spread over them, as the bench's client spreads its own over four.
    options = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(addr, options=options) for _ in range(CONNECTIONS[0])]
    try:
        stubs = [rls_pb2_grpc.RateLimitServiceStub(channel) for channel in channels]
        next_call = start
        end = start + calls

        async def worker(stub):
            nonlocal next_call
            while next_call < end:
                i = next_call
                next_call += 1
                # Under valgrind the store's deadline or health may fail a call: made again,
                # and counted.
                while True:
                    try:
                        response = await stub.ShouldRateLimit(request(i), timeout=60)
                    except grpc.aio.AioRpcError:
                        FAILED[0] += 1
                        continue
                    assert response.overall_code == rls_pb2.RateLimitResponse.OK, response
                    break

        await asyncio.gather(*(worker(stubs[w % len(stubs)]) for w in range(in_flight)))
    finally:
        for channel in channels:
            await channel.close()


# `--cache`: cachegrind's simulated caches instead of callgrind (instructions, first-level
# instruction and data misses, last-level misses): what instructions alone do not say of
# where a CPU's time goes.
TOOL = ["--tool=callgrind"]
CACHE = ["--tool=cachegrind", "--cache-sim=yes"]


def scripts(redis_port):
    """`EVALSHA` and `EVAL` calls Redis on `redis_port` has served."""
    info = subprocess.run(["redis-cli", "-p", str(redis_port), "INFO", "commandstats"],
                          check=True, capture_output=True, text=True).stdout
    total = 0
    for line in info.splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
            total += int(line.split("calls=")[1].split(",")[0])
    return total


def run(binary, calls, in_flight, floor=False, tool=None):
    """Total instructions of one server process that served `calls` calls, and its dump
    (`floor`: `binary` is the bench binary, run as the `evalsha` floor server; `tool`:
    `CACHE` for cachegrind's counts, then a dict of every event's total)."""
    work = tempfile.mkdtemp(prefix="rls-instructions-")
    redis_port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        cwd=work,
    )
    wait_for_port(redis_port)
    config = os.path.join(work, "runtime/ratelimit/config")
    os.makedirs(config)
    with open(os.path.join(config, "bench.yaml"), "w") as f:
        f.write(CONFIG)
    out = os.path.join(work, "callgrind.out")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "REDIS_SOCKET_TYPE": "tcp",
        "REDIS_URL": f"127.0.0.1:{redis_port}",
        "RUNTIME_ROOT": os.path.join(work, "runtime"),
        "RUNTIME_SUBDIRECTORY": "ratelimit",
        "HOST": "127.0.0.1",
        "PORT": "0",
        "GRPC_HOST": "127.0.0.1",
        "GRPC_PORT": "0",
        "DEBUG_HOST": "127.0.0.1",
        "DEBUG_PORT": "0",
        "LOG_LEVEL": "warn",
        # Generous: valgrind runs the server some 50 times slower.
        "REDLIMIT_STORE_DEADLINE": "10s",
    }
    if floor:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "REDLIMIT_BENCH_FLOOR": "evalsha",
            "REDLIMIT_BENCH_FLOOR_REDIS": str(redis_port),
        }
    # The runtime's threads as asked around the script (`REDLIMIT_WORKER_THREADS=0`: one per
    # core, the former default), else the server's default (one).
    if "REDLIMIT_WORKER_THREADS" in os.environ:
        env["REDLIMIT_WORKER_THREADS"] = os.environ["REDLIMIT_WORKER_THREADS"]
    server = subprocess.Popen(
        ["valgrind", *(tool or TOOL), f"--{'cachegrind' if tool else 'callgrind'}-out-file={out}",
         binary],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        addr = None
        for line in server.stdout:
            if line.startswith("grpc on "):
                addr = line.split()[-1]
                break
        if addr is None:
            sys.exit("the server exited before printing its gRPC address")
        asyncio.run(drive(addr, 0, calls, in_flight))
        SCRIPTS[0] = scripts(redis_port)
    finally:
        server.terminate()
        server.wait()
        redis.terminate()
        redis.wait()
    with open(out) as f:
        lines = f.read().splitlines()
    if tool:
        events = next(l.split()[1:] for l in lines if l.startswith("events:"))
        summary = next(l.split()[1:] for l in lines if l.startswith("summary:"))
        return dict(zip(events, map(int, summary))), out
    total = next(int(l.split()[1]) for l in lines if l.startswith("summary:"))
    return total, out


def measure(binary, calls, in_flight, floor=False):
    """Instructions per decision of `binary`, and the dumps of its two runs."""
    FAILED[0] = 0
    # The difference of two whole runs: start-up, warm-up and shutdown cancel out.
    base, base_dump = run(binary, WARM_UP, in_flight, floor)
    base_scripts = SCRIPTS[0]
    total, dump = run(binary, WARM_UP + calls, in_flight, floor)
    name = "floor: one EVALSHA" if floor else "redlimit-server"
    print(f"{name}: {calls} calls, {in_flight} in flight: {total - base} instructions, "
          f"{(total - base) / calls:.0f} per decision; "
          f"{(SCRIPTS[0] - base_scripts) / calls:.2f} Redis scripts per decision; "
          f"{FAILED[0]} failed calls made again")
    print(f"dumps: {base_dump} {dump}")
    return base_dump, dump


def measure_cache(binary, calls, in_flight, floor=False):
    """Cachegrind's events per decision of `binary`."""
    base, _ = run(binary, WARM_UP, in_flight, floor, CACHE)
    total, _ = run(binary, WARM_UP + calls, in_flight, floor, CACHE)
    return {e: (total[e] - base[e]) / calls for e in total}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", help="the release redlimit-server")
    parser.add_argument("calls", nargs="?", type=int, default=2000)
    parser.add_argument("in_flight", nargs="?", type=int, default=16)
    parser.add_argument("--floor", metavar="BENCH_BINARY",
                        help="the rls bench binary, measured as the `evalsha` floor beside")
    parser.add_argument("--cache", action="store_true",
                        help="cachegrind's cache misses per decision instead of the split")
    parser.add_argument("--connections", type=int, default=1,
                        help="HTTP/2 connections the calls in flight spread over (the bench: 4)")
    args = parser.parse_args()
    CONNECTIONS[0] = args.connections
    if args.cache:
        servers = {"redlimit-server": measure_cache(args.server, args.calls, args.in_flight)}
        if args.floor:
            servers["floor: one EVALSHA"] = measure_cache(
                args.floor, args.calls, args.in_flight, floor=True)
        events = list(next(iter(servers.values())))
        print("| per decision | " + " | ".join(events) + " |")
        print("|---|" + "---:|" * len(events))
        for name, counts in servers.items():
            print(f"| {name} | " + " | ".join(f"{counts[e]:,.0f}" for e in events) + " |")
        return
    ours = measure(args.server, args.calls, args.in_flight)
    if args.floor is None:
        print(f"split: python3 {os.path.dirname(__file__)}/split.py {args.calls} "
              f"{ours[0]} {ours[1]}")
        return
    floor = measure(args.floor, args.calls, args.in_flight, floor=True)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import split

    split.side_by_side(args.calls, {"redlimit-server": ours, "floor: one EVALSHA": floor})
    print(f"again: python3 {os.path.dirname(__file__)}/split.py {args.calls} "
          f"{ours[0]} {ours[1]} {floor[0]} {floor[1]}")


if __name__ == "__main__":
    main()

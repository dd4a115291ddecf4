#!/usr/bin/env python3
"""Instructions per decision of `redlimit-server`, counted by callgrind: repeatable on a busy
machine, where CPU time is not.

    cargo build --release -p redlimit-server
    python3 benches/rls/instructions.py $CARGO_TARGET_DIR/release/redlimit-server [CALLS] [IN_FLIGHT]

Runs the server twice under `valgrind --tool=callgrind`, each time on a fresh `redis-server`
on a free port with the bench's config (domain `bench`, one counter per `user`, never
reached): once for 200 calls, once for 200 + CALLS (default 2000; IN_FLIGHT at once on one
HTTP/2 connection, default 16; users cycling over 1000); the difference of the two totals over
CALLS is the server's instructions per decision (every thread: the runtime, the Redis client,
its idle loops; start-up and shutdown cancel out). Needs `grpcio` and `xds-protos` (as the
server's Python tests do). Valgrind runs threads one at a time and slower: Redis's batching
differs from a real run, the same for every build compared. `REDLIMIT_WORKER_THREADS` set
around the script reaches the server (its runtime's threads).
"""

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
    async with grpc.aio.insecure_channel(addr) as channel:
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        next_call = start
        end = start + calls

        async def worker():
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

        await asyncio.gather(*(worker() for _ in range(in_flight)))


def run(binary, calls, in_flight):
    """Total instructions of one server process that served `calls` calls, and its dump."""
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
    # The runtime's threads as asked around the script (`REDLIMIT_WORKER_THREADS=0`: one per
    # core, the former default), else the server's default (one).
    if "REDLIMIT_WORKER_THREADS" in os.environ:
        env["REDLIMIT_WORKER_THREADS"] = os.environ["REDLIMIT_WORKER_THREADS"]
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary],
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
    finally:
        server.terminate()
        server.wait()
        redis.terminate()
        redis.wait()
    with open(out) as f:
        total = next(int(l.split()[1]) for l in f if l.startswith("summary:"))
    return total, out


def main():
    binary = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    in_flight = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    # The difference of two whole runs: start-up, warm-up and shutdown cancel out.
    base, _ = run(binary, WARM_UP, in_flight)
    total, dump = run(binary, WARM_UP + calls, in_flight)
    print(f"{calls} calls, {in_flight} in flight: {total - base} instructions, "
          f"{(total - base) / calls:.0f} per decision; {FAILED[0]} failed calls made again")
    print(f"dump of the longer run: callgrind_annotate --inclusive=yes {dump}")


if __name__ == "__main__":
    main()

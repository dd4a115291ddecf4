"""Processes for the black-box tests: a real redis-server and the real redlimit-server binary,
on free loopback ports, driven with PyPI's xds-protos stubs (the gRPC project's generated Envoy
API) and plain HTTP. Nothing here is ours but the binary under test."""

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

# Generous bounds for "does not hang": a busy 2-core machine may be slow, never this slow.
START_DEADLINE = 60.0
CONDITION_DEADLINE = 30.0
CALL_TIMEOUT = 10.0


def _below_ephemeral():
    """The first port of the kernel's ephemeral range (where `bind(0)` and outgoing connections
    take theirs)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# The servers this suite starts listen below the kernel's ephemeral range, and a cluster's bus
# ports (10 000 above) too: the Rust tests beside it (scripts/test.sh runs both at once) take
# theirs from that range with `bind(0)`, so a port picked here is never taken by them between
# its pick and the server's bind. Only this (sequential) suite picks ports here.
_PORTS = range(10000, _below_ephemeral() - 10000)
_random = random.Random()


def free_port():
    if len(_PORTS) < 1000:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    while True:
        port = _random.choice(_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def cluster_port():
    """A free port whose cluster bus port (10 000 above it) is free too and exists."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def wait_for(what, condition, deadline=CONDITION_DEADLINE, every=0.05):
    """Polls `condition` until it returns a true value, which it returns; fails after `deadline`."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline}s waiting for {what}")
        time.sleep(every)


class Redis:
    """A redis-server on a free loopback port (or `port`: to bring a stopped one back where it
    was), without persistence, stopped by `stop`; `args` are more of its options."""

    def __init__(self, args=(), port=None):
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="rls-redis-")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("redis-server to answer", self._answers, START_DEADLINE)

    def _answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args):
        """One command in RESP; the raw reply."""
        payload = f"*{len(args)}\r\n".encode()
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            payload += f"${len(a)}\r\n".encode() + a + b"\r\n"
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(payload)
            return s.recv(65536)

    def stop(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Server:
    """The redlimit-server binary, with `config` (file name -> YAML text) in its runtime
    directory and `env` on top of a loopback setup (a None value removes a variable); its
    listeners' addresses from its stdout (gRPC's `unix:PATH` with GRPC_UDS). `program`: the path
    to start it by (the binary by another name), the binary under test by default."""

    def __init__(self, config, redis=None, env=None, layout="plain", program=None):
        self.root = tempfile.mkdtemp(prefix="rls-runtime-")
        self.config_dir = os.path.join(self.root, "ratelimit", "config")
        os.makedirs(self.config_dir)
        self.layout = layout
        self.generation = 0
        self.write_config(config)
        full_env = {
            "PATH": os.environ.get("PATH", ""),
            "HOST": "127.0.0.1", "PORT": "0",
            "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0",
            "DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": "0",
            "RUNTIME_ROOT": self.root, "RUNTIME_SUBDIRECTORY": "ratelimit",
            "LOG_LEVEL": "info",
            # statsd is on by default, as in the Go service: off here unless a test listens.
            "USE_STATSD": "false",
        }
        if redis is not None:
            full_env.update({"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"127.0.0.1:{redis.port}"})
        else:
            full_env["BACKEND_TYPE"] = "memory"
        full_env.update(env or {})
        # A value of None removes a variable (to see a default).
        full_env = {k: v for k, v in full_env.items() if v is not None}
        self.stderr_lines = []
        self.process = subprocess.Popen(
            [program or os.environ["REDLIMIT_SERVER_BIN"]], env=full_env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self.drain.start()
        self.addresses = {}
        wanted = {"grpc", "http", "debug"} | ({"metrics"} if full_env.get("USE_PROMETHEUS") == "true" else set())
        if full_env.get("REDLIMIT_ADMIN_TOKEN_FILE") or full_env.get("REDLIMIT_ADMIN_TOKEN"):
            wanted.add("admin")
        end = time.monotonic() + START_DEADLINE
        # A server that never prints its listeners (one waiting for a config) is killed at the
        # deadline, so the read below ends instead of waiting for ever.
        watchdog = threading.Timer(START_DEADLINE, self.process.kill)
        watchdog.start()
        while not wanted <= self.addresses.keys():
            line = self.process.stdout.readline()
            if not line:
                watchdog.cancel()
                self.process.stdout.close()
                shutil.rmtree(self.root, ignore_errors=True)
                status = self.process.wait()
                # Its last words may still be on their way through the drain.
                self.drain.join(CONDITION_DEADLINE)
                self.process.stderr.close()
                raise AssertionError(
                    f"redlimit-server exited ({status}) before listening:\n"
                    + "".join(self.stderr_lines))
            name, _, addr = line.strip().partition(" on ")
            if addr:
                self.addresses[name] = addr
            if time.monotonic() > end:
                raise AssertionError("redlimit-server did not print its listeners in time")
        watchdog.cancel()
        # grpc-core sends a Unix socket's path as :authority, which HTTP/2 servers on
        # hyperium/h2 (tonic's) refuse as malformed (their issue #487): it is told to send
        # `localhost`, as grpc-go does and Envoy's envoy_grpc sends its cluster's name.
        unix = self.addresses["grpc"].startswith("unix:")
        self.channel = grpc.insecure_channel(
            self.addresses["grpc"],
            options=[("grpc.default_authority", "localhost")] if unix else None)
        self.stub = rls_pb2_grpc.RateLimitServiceStub(self.channel)

    def _drain_stderr(self):
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    def write_config(self, config):
        """Writes the config files: plainly, or as a Kubernetes ConfigMap volume does (each
        generation in a `..<stamp>` directory, `..data` pointing at it, and each file a link
        through `..data`, swapped by renaming a new `..data` link over the old one)."""
        if self.layout == "plain":
            for name in os.listdir(self.config_dir):
                os.remove(os.path.join(self.config_dir, name))
            for name, text in config.items():
                path = os.path.join(self.config_dir, name)
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)
            return
        self.generation += 1
        stamp = f"..2026_11_26_00_00_{self.generation:02d}"
        os.makedirs(os.path.join(self.config_dir, stamp))
        for name, text in config.items():
            with open(os.path.join(self.config_dir, stamp, name), "w") as f:
                f.write(text)
        tmp_link = os.path.join(self.config_dir, "..data_tmp")
        os.symlink(stamp, tmp_link)
        os.replace(tmp_link, os.path.join(self.config_dir, "..data"))
        for name in config:
            link = os.path.join(self.config_dir, name)
            if not os.path.islink(link):
                os.symlink(os.path.join("..data", name), link)

    def url(self, listener, path):
        return f"http://{self.addresses[listener]}{path}"

    def get(self, listener, path):
        """(status, body) of a GET; (None, error) when the connection fails."""
        try:
            with urllib.request.urlopen(self.url(listener, path), timeout=CALL_TIMEOUT) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return None, str(e)

    def post(self, path, body):
        request = urllib.request.Request(self.url("http", path), data=body, method="POST",
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def healthy(self):
        return self.get("http", "/healthcheck") == (200, "OK")

    def call(self, domain, *descriptors, hits_addend=0, timeout=CALL_TIMEOUT):
        """ShouldRateLimit; each descriptor a list of (key, value) pairs, or a
        RateLimitDescriptor as it is."""
        request = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits_addend)
        for d in descriptors:
            request.descriptors.append(d if isinstance(d, ratelimit_pb2.RateLimitDescriptor)
                                       else descriptor(d))
        return self.stub.ShouldRateLimit(request, timeout=timeout)

    def terminate(self):
        self.process.send_signal(signal.SIGTERM)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        # The drain ends at the exited server's end of file; closed under it, it would fail.
        self.drain.join(CONDITION_DEADLINE)
        self.process.stderr.close()
        self.channel.close()
        shutil.rmtree(self.root, ignore_errors=True)


def descriptor(entries, hits_addend=None, limit=None):
    d = ratelimit_pb2.RateLimitDescriptor()
    for key, value in entries:
        d.entries.add(key=key, value=value)
    if hits_addend is not None:
        d.hits_addend.value = hits_addend
    if limit is not None:
        d.limit.requests_per_unit, d.limit.unit = limit
    return d


OK = rls_pb2.RateLimitResponse.OK
OVER_LIMIT = rls_pb2.RateLimitResponse.OVER_LIMIT


class RedisCluster:
    """Three redis-server masters in cluster mode on free ports, joined with
    `redis-cli --cluster create`, healthy before use."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rls-cluster-")
        self.ports = [cluster_port() for _ in range(3)]
        self.processes = [
            subprocess.Popen(
                ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--cluster-enabled", "yes",
                 "--cluster-config-file", f"nodes-{p}.conf", "--cluster-node-timeout", "2000"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for p in self.ports]
        for p in self.ports:
            wait_for(f"node {p}", lambda p=p: _pong(p), START_DEADLINE)
        subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        wait_for("the cluster to be healthy", lambda: all(
            b"cluster_state:ok" in _command(p, "CLUSTER", "INFO") for p in self.ports),
            START_DEADLINE)

    def url(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def stop(self):
        for process in self.processes:
            process.kill()
            process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sentinel:
    """A master and one Sentinel watching it as `mymaster`."""

    def __init__(self):
        self.master = Redis()
        self.dir = tempfile.mkdtemp(prefix="rls-sentinel-")
        self.port = free_port()
        config = os.path.join(self.dir, "sentinel.conf")
        with open(config, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n"
                    f"sentinel monitor mymaster 127.0.0.1 {self.master.port} 1\n")
        self.process = subprocess.Popen(["redis-server", config, "--sentinel"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("the Sentinel to know the master", lambda: str(self.master.port).encode() in
                 _command(self.port, "SENTINEL", "get-master-addr-by-name", "mymaster"),
                 START_DEADLINE)

    def url(self):
        return f"mymaster,127.0.0.1:{self.port}"

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.master.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class DelayProxy:
    """A TCP proxy in front of `port` that holds each chunk `delay` seconds in each direction
    (so a round trip costs twice that), and can freeze: hold everything until thawed."""

    def __init__(self, port, delay):
        import asyncio
        self.asyncio = asyncio
        self.target, self.delay = port, delay
        self.port = free_port()
        self.thawed = None
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=10)

    async def _start(self):
        self.thawed = self.asyncio.Event()
        self.thawed.set()
        self.server = await self.asyncio.start_server(self._connection, "127.0.0.1", self.port)

    async def _connection(self, reader, writer):
        try:
            up_reader, up_writer = await self.asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        await self.asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer),
                                  return_exceptions=True)

    async def _pipe(self, reader, writer):
        queue = self.asyncio.Queue()

        async def send():
            while True:
                due, data = await queue.get()
                await self.asyncio.sleep(max(0.0, due - self.loop.time()))
                await self.thawed.wait()
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        sender = self.asyncio.ensure_future(send())
        try:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((self.loop.time() + self.delay, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()

    def freeze(self):
        self.loop.call_soon_threadsafe(self.thawed.clear)

    def thaw(self):
        self.loop.call_soon_threadsafe(self.thawed.set)

    def stop(self):
        self.asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def _stop(self):
        self.server.close()
        current = self.asyncio.current_task()
        tasks = [t for t in self.asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await self.asyncio.gather(*tasks, return_exceptions=True)


def _command(port, *args):
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        a = a.encode()
        payload += f"${len(a)}\r\n".encode() + a + b"\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(payload)
            return s.recv(65536)
    except OSError:
        return b""


def _pong(port):
    return _command(port, "PING").startswith(b"+PONG")

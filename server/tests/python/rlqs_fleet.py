"""A fleet of simulated Envoys against RLQS servers (`StreamRateLimitQuotas`), each enforcing
its assignments as Envoy's `rate_limit_quota` filter does (`rlqs_envoy.Filter`), with Poisson
traffic on a timeline that runs in real time (the server's clock is real).

Each Envoy keeps one stream per (server, domain), opened with its first bucket
(`global_client_impl.cc` `createBucketImpl`, `filter_persistence.cc` `getTlsStore`); reports
every `interval` seconds from then on (Envoy hard-codes 5 s, `filter_persistence.cc`
`initTlsStore`); a stream the server ended is reopened only at the next report, to the next of
its `targets` (a cluster of server instances), and what went unsent is lost
(`onRemoteClose`, `onSendReportsTimer`). Events are decided at their own times (arrivals,
responses as received, expiries, reports), batched into ticks of `tick` seconds so that 50
Envoys stay cheap in one Python thread; admitted requests are counted per wall-clock second.

    fleet = Fleet(["127.0.0.1:8081"], "edge", rates=skewed(400, 5), interval=1.0)
    fleet.start(); ...; fleet.kill(0); ...; fleet.stop()
    fleet.admitted_per_second()
"""

import asyncio
import bisect
import collections
import math
import random
import threading
import time

import grpc
from envoy.service.rate_limit_quota.v3 import rlqs_pb2_grpc

from rlqs_envoy import ALLOW_ALL, Filter, make_bucket_id

ENVOY_REPORT_INTERVAL = 5.0


def skewed(total, count, shares=(0.80, 0.15, 0.05)):
    """Per-Envoy request rates summing to `total`: a hot tenth of the Envoys (at least one)
    offers 80 %, the next three tenths 15 %, the rest 5 % (folded into the warm group when no
    Envoy is left for it)."""
    hot = max(1, round(count / 10))
    warm = max(1, round(3 * count / 10)) if count > 1 else 0
    warm = min(warm, count - hot)
    cold = count - hot - warm
    groups = [(hot, shares[0]), (warm, shares[1] + (shares[2] if cold == 0 else 0)),
              (cold, shares[2] if cold else 0)]
    if warm == 0:
        groups = [(hot, 1.0)]
    rates = []
    for size, share in groups:
        if size == 0:
            continue
        rates += [total * share / size] * size
    return rates


class _Stream:
    """One `StreamRateLimitQuotas` call: messages written in order from a queue, responses and
    the end appended to the Envoy's inbox with the time they arrived."""

    def __init__(self, envoy, target):
        self.envoy = envoy
        # Its own connection, as each Envoy has (not grpcio's process-wide shared one).
        self.channel = grpc.aio.insecure_channel(
            target, options=[("grpc.use_local_subchannel_pool", 1)])
        self.queue = asyncio.Queue()
        stub = rlqs_pb2_grpc.RateLimitQuotaServiceStub(self.channel)
        self.call = stub.StreamRateLimitQuotas(self._requests())
        self.task = asyncio.get_running_loop().create_task(self._read())

    async def _requests(self):
        while True:
            message = await self.queue.get()
            if message is None:
                return
            yield message

    async def _read(self):
        try:
            async for response in self.call:
                self.envoy.inbox.append((time.monotonic(), self, response))
            code, details = await self.call.code(), await self.call.details()
        except grpc.aio.AioRpcError as e:
            code, details = e.code(), e.details()
        except asyncio.CancelledError:
            code, details = grpc.StatusCode.CANCELLED, "cancelled by the Envoy"
        self.envoy.inbox.append((time.monotonic(), self, (code, details)))
        # The request side ends too (grpcio would wait on it for ever).
        self.queue.put_nowait(None)
        await self.channel.close()

    def send(self, message):
        self.queue.put_nowait(message)

    def close(self):
        self.queue.put_nowait(None)
        self.call.cancel()


class SimulatedEnvoy:
    """One Envoy: its filter, its stream, its traffic (`rate` requests a second over
    `buckets`, a list of (entries, weight))."""

    def __init__(self, fleet, index, rate, buckets, default):
        self.fleet, self.index = fleet, index
        self.filter = Filter(fleet.domain, default)
        self.rate = rate
        self.bucket_ids = [make_bucket_id(entries) for entries, _ in buckets]
        self.weights = list(_cumulative(w for _, w in buckets))
        self.random = random.Random(fleet.seed * 1000 + index)
        self.next_arrival = math.inf
        self.target = index % len(fleet.targets)
        self.stream = None
        self.report_due = None
        self.inbox = collections.deque()
        self.alive = True
        self.allowed = self.denied = 0
        self.closes = []  # (time, status code, details) of each stream's end
        self.streams_opened = 0
        self.reports_sent = 0

    def start(self, now):
        self.next_arrival = now + self._gap()

    def _gap(self):
        return self.random.expovariate(self.rate) if self.rate > 0 else math.inf

    def _open(self):
        """`startStreamImpl`."""
        self.stream = _Stream(self, self.fleet.targets[self.target])
        self.streams_opened += 1

    def _send(self, report):
        """`sendUsageReportImpl`: dropped when no stream is open."""
        if self.stream is not None:
            self.stream.send(report)
            self.reports_sent += 1

    def request(self, bucket_id, now):
        """One request decided at `now`: whether it was admitted."""
        allowed, first_report = self.filter.request(bucket_id, now)
        if first_report is not None:
            if self.report_due is None:
                self.report_due = now + self.fleet.interval
                self._open()
            self._send(first_report)
        if allowed:
            self.allowed += 1
        else:
            self.denied += 1
        return allowed

    def step(self, now):
        """Everything due by `now`, each at its own time."""
        while True:
            t_in = self.inbox[0][0] if self.inbox else math.inf
            t_exp = self.filter.next_expiry()
            t_exp = math.inf if t_exp is None else t_exp
            t_rep = math.inf if self.report_due is None else self.report_due
            t_arr = self.next_arrival if self.alive else math.inf
            t = min(t_in, t_exp, t_rep, t_arr)
            if t > now:
                return
            if t == t_in:
                _, stream, message = self.inbox.popleft()
                if isinstance(message, tuple):
                    self._closed(t, stream, *message)
                elif stream is self.stream:
                    self.filter.apply(message, t)
            elif t == t_exp:
                self.filter.expire(t)
            elif t == t_rep:
                self.report_due = t + self.fleet.interval
                report = self.filter.reports(t)
                if self.stream is None:
                    self._open()
                self._send(report)
            else:
                self.next_arrival = t + self._gap()
                pick = bisect.bisect_right(self.weights, self.random.random() * self.weights[-1])
                bucket_id = self.bucket_ids[min(pick, len(self.bucket_ids) - 1)]
                self.fleet.record(self.index, t, self.request(bucket_id, t))

    def _closed(self, t, stream, code, details):
        """`onRemoteClose`: the next report reopens it (to the next instance, when it failed)."""
        self.closes.append((t, code, details))
        if stream is self.stream:
            self.stream = None
            self.target = (self.target + 1) % len(self.fleet.targets)

    def kill(self):
        """The Envoy dies: its stream is cancelled, its traffic and timers stop."""
        self.alive = False
        self.report_due = None
        if self.stream is not None:
            self.stream.close()
            self.stream = None


def _cumulative(weights):
    total = 0.0
    for w in weights:
        total += w
        yield total


class Fleet:
    """`len(rates)` simulated Envoys for `domain` on servers at `targets` ("host:port"; Envoy
    i starts on targets[i % len]), Envoy i offering `rates[i]` requests a second over
    `buckets` ([(entries dict, weight)]), reporting every `interval` seconds, with the
    `no_assignment_behavior` `default` (a blanket rule)."""

    def __init__(self, targets, domain, rates, buckets=(({"name": "fleet"}, 1.0),),
                 interval=ENVOY_REPORT_INTERVAL, default=ALLOW_ALL, tick=0.01, seed=1):
        self.targets, self.domain = list(targets), domain
        self.interval, self.tick, self.seed = interval, tick, seed
        self.envoys = [SimulatedEnvoy(self, i, r, list(buckets), default)
                       for i, r in enumerate(rates)]
        self.t0 = None
        # second -> [admitted, denied]; (envoy, second) -> admitted, and denied
        self.seconds = collections.defaultdict(lambda: [0, 0])
        self.per_envoy = collections.defaultdict(int)
        self.per_envoy_denied = collections.defaultdict(int)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.stopping = False
        self.runner = None

    def record(self, envoy, t, allowed):
        second = int(t - self.t0)
        self.seconds[second][0 if allowed else 1] += 1
        if allowed:
            self.per_envoy[(envoy, second)] += 1
        else:
            self.per_envoy_denied[(envoy, second)] += 1

    def start(self):
        """Starts the clock and the traffic (each Envoy's stream opens with its first
        request)."""
        self.thread.start()

        async def begin():
            self.t0 = time.monotonic()
            for envoy in self.envoys:
                envoy.start(self.t0)
            self.runner = asyncio.get_running_loop().create_task(self._run())

        asyncio.run_coroutine_threadsafe(begin(), self.loop).result(timeout=10)

    async def _run(self):
        due = time.monotonic()
        while not self.stopping:
            now = time.monotonic()
            for envoy in self.envoys:
                envoy.step(now)
            due = max(due + self.tick, now)
            await asyncio.sleep(max(0.0, due - time.monotonic()))

    def call(self, fn, timeout=10):
        """`fn(fleet, now)` run in the fleet's thread, every Envoy caught up to `now`; its
        result."""
        async def run():
            now = time.monotonic()
            for envoy in self.envoys:
                envoy.step(now)
            return fn(self, now)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=timeout)

    def request(self, envoy, entries):
        """One request for the bucket `entries` through Envoy `envoy`, now: admitted?"""
        bucket_id = make_bucket_id(entries)
        return self.call(lambda fleet, now: fleet.envoys[envoy].request(bucket_id, now))

    def kill(self, envoy):
        """Kills Envoy `envoy`; the second it died in."""
        def kill(fleet, now):
            fleet.envoys[envoy].kill()
            return int(now - fleet.t0)

        return self.call(kill)

    def elapsed(self):
        return time.monotonic() - self.t0

    def stop(self):
        """Stops the traffic, cancels every stream and the thread."""
        def stop(fleet, now):
            fleet.stopping = True
            for envoy in fleet.envoys:
                if envoy.alive:
                    envoy.kill()

        self.call(stop)

        async def drain():
            await self.runner
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)

        asyncio.run_coroutine_threadsafe(drain(), self.loop).result(timeout=20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def admitted_per_second(self, first=0, last=None):
        """[(second, admitted, denied)] for the whole seconds from `first` to `last`
        (exclusive; by default the last whole second so far)."""
        end = int(self.elapsed()) if last is None else last
        return [(s, *self.seconds.get(s, (0, 0))) for s in range(first, end)]

    def envoy_admitted(self, envoy, first, last):
        """Envoy `envoy`'s admitted requests per second from `first` to `last` (exclusive)."""
        return [self.per_envoy.get((envoy, s), 0) for s in range(first, last)]

    def envoy_denied(self, envoy, first, last):
        """Envoy `envoy`'s denied requests per second from `first` to `last` (exclusive)."""
        return [self.per_envoy_denied.get((envoy, s), 0) for s in range(first, last)]

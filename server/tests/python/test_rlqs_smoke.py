"""RLQS smoke test on the real binary, with the full data-plane-api stubs (xds-protos): two
servers on one Redis answer a bucket's first report with a token bucket each, the shares of
one fleet-wide limit; SIGTERM sends every stream its bucket with TTL 0, then ends it; a config
reloaded from the runtime directory reaches the open streams."""

import queue
import threading
import unittest

from envoy.service.rate_limit_quota.v3 import rlqs_pb2, rlqs_pb2_grpc

from harness import CONDITION_DEADLINE, Redis, Server, wait_for

CONFIG = {"quota.yaml": """
domain: smoke
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000}
"""}

ENV = {"RLQS_SYNC_INTERVAL": "100ms"}


def bulk_strings(reply):
    """The bulk strings of a RESP array reply (KEYS, HKEYS)."""
    lines = reply.split(b"\r\n")
    return [line.decode() for line in lines[2::2] if line]


class Stream:
    """One StreamRateLimitQuotas call: reports put in, responses read by a thread."""

    def __init__(self, server):
        self.reports = queue.Queue()
        self.responses = queue.Queue()
        stub = rlqs_pb2_grpc.RateLimitQuotaServiceStub(server.channel)
        self.call = stub.StreamRateLimitQuotas(iter(self.reports.get, None))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for response in self.call:
                self.responses.put(response)
        except Exception as e:  # the call's end, whatever it was
            self.responses.put(e)
        self.responses.put(None)

    def report(self, tenant, allowed):
        usage = rlqs_pb2.RateLimitQuotaUsageReports.BucketQuotaUsage(
            num_requests_allowed=allowed)
        usage.bucket_id.bucket["tenant"] = tenant
        usage.time_elapsed.seconds = 0
        self.reports.put(rlqs_pb2.RateLimitQuotaUsageReports(
            domain="smoke", bucket_quota_usages=[usage]))

    def next(self):
        """The next response; None when the call ended cleanly (an error fails the test)."""
        response = self.responses.get(timeout=CONDITION_DEADLINE)
        if isinstance(response, Exception):
            raise AssertionError(f"the stream failed: {response!r}")
        return response

    def close(self):
        self.reports.put(None)
        self.call.cancel()


class RlqsSmoke(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.servers = [Server(CONFIG, self.redis, env=ENV) for _ in range(2)]

    def tearDown(self):
        for server in self.servers:
            server.stop()
        self.redis.stop()

    def test_two_servers_share_a_bucket_and_sigterm_expires_it(self):
        streams = [Stream(server) for server in self.servers]
        firsts = []
        for stream in streams:
            stream.report("a", 1)
            response = stream.next()
            action = response.bucket_action[0]
            self.assertEqual(dict(action.bucket_id.bucket), {"tenant": "a"})
            assignment = action.quota_assignment_action
            self.assertEqual(assignment.assignment_time_to_live.seconds, 15)
            bucket = assignment.rate_limit_strategy.token_bucket
            self.assertEqual(bucket.fill_interval.seconds, 1)
            self.assertGreaterEqual(bucket.max_tokens, 3)
            firsts.append(bucket.tokens_per_fill.value)
        # The first server, alone then, took the whole limit; the second shared it at once.
        self.assertEqual(firsts[0], 1000)
        self.assertLess(firsts[1], 1000)
        # Both in Redis: one key, one entry per server.
        keys = bulk_strings(self.redis.command("KEYS", "*rlqs:*"))
        self.assertEqual(len(keys), 1, keys)
        wait_for("two entries", lambda: len(bulk_strings(self.redis.command("HKEYS", keys[0]))) == 2)

        self.servers[0].terminate()
        while True:  # a share change may come first
            response = streams[0].next()
            self.assertIsNotNone(response, "the stream ended before its TTL 0")
            assignment = response.bucket_action[0].quota_assignment_action
            if assignment.assignment_time_to_live.seconds == 0:
                break
        self.assertTrue(assignment.rate_limit_strategy.HasField("token_bucket"))
        self.assertIsNone(streams[0].next(), "the stream ends")
        self.assertEqual(self.servers[0].process.wait(timeout=CONDITION_DEADLINE), 0)
        for stream in streams:
            stream.close()


class RlqsReload(unittest.TestCase):
    def test_a_reloaded_config_reaches_the_streams(self):
        server = Server(CONFIG, env={**ENV, "USE_PROMETHEUS": "true",
                                     "PROMETHEUS_ADDR": "127.0.0.1:0"})
        try:
            stream = Stream(server)
            stream.report("b", 1)
            first = stream.next().bucket_action[0].quota_assignment_action.rate_limit_strategy
            self.assertTrue(first.HasField("token_bucket"))
            server.write_config({"quota.yaml": CONFIG["quota.yaml"].replace(
                "requests_per_unit: 1000", "requests_per_unit: 0")})
            while True:
                response = stream.next()
                self.assertIsNotNone(response, "the stream ended")
                strategy = response.bucket_action[0].quota_assignment_action.rate_limit_strategy
                if strategy.HasField("blanket_rule"):
                    break
            self.assertEqual(strategy.blanket_rule, strategy.DENY_ALL)
            metrics = server.get("metrics", "/metrics")[1]
            for line in ("redlimit_rlqs_streams 1", "redlimit_rlqs_buckets 1",
                         'redlimit_rlqs_assignments_total{action="token_bucket"} 1',
                         'redlimit_rlqs_assignments_total{action="deny_all"} 1',
                         'redlimit_rlqs_requests_total{outcome="allowed"} 1'):
                self.assertIn(line, metrics)
            stream.close()
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()

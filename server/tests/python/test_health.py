"""Health through a Redis outage, as the Go service reports it. By default Redis counts until it
first answers (the Go service connects at start, then never looks again): afterwards an outage
leaves /healthcheck at 200 and gRPC health SERVING, and every call is answered at once by its
domain's failure mode, so Kubernetes' probes keep every pod in service. With
REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true health follows Redis: unhealthy while it is down,
healthy when it is back. gRPC health is asked with grpcio-health-checking's stubs."""

import time
import unittest

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from harness import OK, OVER_LIMIT, Redis, Server, wait_for

LIMIT = "descriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 4}\n"
CONFIG = {
    "error.yaml": "domain: error\n" + LIMIT,
    "closed.yaml": "domain: closed\non_store_error: closed\n" + LIMIT,
    "local.yaml": "domain: local\non_store_error: local:2\n" + LIMIT,
}
# Far above what a call takes while Redis answers, on a busy machine too; an outage's calls
# must be answered well before it (`AT_ONCE`), not at it.
DEADLINE = "5s"
AT_ONCE = 1.0
# Longer than a few of the one-second probes that would turn health (the active check does
# within about two).
WATCH = 5.0

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def grpc_health(server, service=""):
    stub = health_pb2_grpc.HealthStub(server.channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def health(server):
    """(HTTP status, gRPC status of "" and of "ratelimit")."""
    return (server.get("http", "/healthcheck")[0],
            grpc_health(server), grpc_health(server, "ratelimit"))


HEALTHY = (200, SERVING, SERVING)
UNHEALTHY = (500, NOT_SERVING, NOT_SERVING)


def start(redis_port, **env):
    return Server(CONFIG, env={
        "BACKEND_TYPE": "redis", "REDIS_SOCKET_TYPE": "tcp",
        "REDIS_URL": f"127.0.0.1:{redis_port}", "REDLIMIT_STORE_DEADLINE": DEADLINE, **env})


class RedisOutage(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.addCleanup(lambda: self.redis.stop())

    def code(self, server, domain, value):
        """The call's overall code, or its gRPC status code when it fails; and its time."""
        start = time.monotonic()
        try:
            answer = server.call(domain, [("k", value)]).overall_code
        except grpc.RpcError as e:
            answer = e.code()
        return answer, time.monotonic() - start

    def assert_failure_modes(self, server, value):
        """Each domain's failure mode answers, each call at once."""
        answers = [self.code(server, "closed", value), self.code(server, "error", value)]
        answers += [self.code(server, "local", value) for _ in range(3)]
        self.assertEqual([a for a, _ in answers], [
            OVER_LIMIT, grpc.StatusCode.UNAVAILABLE,
            # local:2: this server's share of 4 an hour.
            OK, OK, OVER_LIMIT])
        for _, took in answers:
            self.assertLess(took, AT_ONCE, answers)

    def test_by_default_an_outage_is_the_failure_modes_and_health_stays(self):
        server = start(self.redis.port)
        self.addCleanup(server.stop)
        wait_for("healthy", lambda: health(server) == HEALTHY)
        self.assertEqual(self.code(server, "closed", "up")[0], OK)
        self.redis.stop()
        wait_for("the closed domain's failure mode",
                 lambda: self.code(server, "closed", "down")[0] == OVER_LIMIT)
        end = time.monotonic() + WATCH
        round_ = 0
        while time.monotonic() < end:
            self.assertEqual(health(server), HEALTHY, "health follows Redis without the variable")
            self.assert_failure_modes(server, f"down-{round_}")
            round_ += 1
            time.sleep(0.2)
        self.redis = Redis(port=self.redis.port)
        wait_for("decisions in Redis again",
                 lambda: self.code(server, "closed", "back")[0] == OK)
        self.assertEqual(health(server), HEALTHY)
        self.assertFalse(any("is set but" in line for line in server.stderr_lines))

    def test_by_default_redis_counts_until_it_first_answers(self):
        # The Go service waits for Redis at start: its pods are not ready before it answers.
        self.redis.stop()
        server = start(self.redis.port)
        self.addCleanup(server.stop)
        self.assertEqual(health(server), UNHEALTHY)
        self.redis = Redis(port=self.redis.port)
        wait_for("healthy once Redis answers", lambda: health(server) == HEALTHY)
        self.redis.stop()
        self.assert_failure_modes(server, "after")
        self.assertEqual(health(server), HEALTHY)

    def test_the_active_check_follows_redis_down_and_back(self):
        server = start(self.redis.port, REDIS_HEALTH_CHECK_ACTIVE_CONNECTION="true")
        self.addCleanup(server.stop)
        wait_for("healthy", lambda: health(server) == HEALTHY)
        self.redis.stop()
        wait_for("unhealthy while Redis is down", lambda: health(server) == UNHEALTHY)
        # Calls are still answered by the failure modes: health is for the probes alone.
        self.assert_failure_modes(server, "down")
        self.redis = Redis(port=self.redis.port)
        wait_for("healthy again", lambda: health(server) == HEALTHY)
        self.assertEqual(self.code(server, "closed", "back")[0], OK)
        self.assertFalse(any("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION is set but" in line
                             for line in server.stderr_lines))


if __name__ == "__main__":
    unittest.main()

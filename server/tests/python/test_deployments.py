"""redlimit-server on each Redis deployment envoyproxy/ratelimit supports (standalone,
Sentinel, Cluster) and with Redis a network away, driven by xds-protos stubs."""

import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import grpc

from harness import (OK, OVER_LIMIT, DelayProxy, Redis, RedisCluster, Sentinel, Server,
                     wait_for)

CONFIG = """
domain: deploy
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000}
"""

EXACT = {"REDLIMIT_STORE_DEADLINE": "10s"}


def admitted(server, calls, user, workers=16):
    with ThreadPoolExecutor(workers) as pool:
        codes = list(pool.map(
            lambda i: server.call("deploy", [("user", user)], [("tenant", f"t-{user}")]).overall_code,
            range(calls)))
    return codes.count(OK)


class Deployments(unittest.TestCase):
    def exact_on(self, redis_type, url):
        server = Server({"config.yaml": CONFIG}, env={
            **EXACT, "REDIS_TYPE": redis_type, "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": url,
            "BACKEND_TYPE": "redis"})
        try:
            wait_for("healthy", server.healthy)
            self.assertEqual(admitted(server, 130, f"{redis_type}-user"), 100)
            r = server.call("deploy", [("user", f"{redis_type}-user")], [("tenant", f"t-{redis_type}-user")])
            self.assertEqual([s.code for s in r.statuses], [OVER_LIMIT, OK])
            # Every hit lands (the Go service's default): the tenant was charged by all 131
            # calls, refused ones included, exactly.
            self.assertEqual(r.statuses[1].limit_remaining, 869)
        finally:
            server.stop()

    def test_a_cluster(self):
        cluster = RedisCluster()
        try:
            self.exact_on("cluster", cluster.url())
        finally:
            cluster.stop()

    def test_a_master_found_through_a_sentinel(self):
        sentinel = Sentinel()
        try:
            self.exact_on("sentinel", sentinel.url())
        finally:
            sentinel.stop()


class Distance(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        # 5 ms each way: a round trip of 10 ms.
        self.proxy = DelayProxy(self.redis.port, 0.005)

    def tearDown(self):
        self.proxy.stop()
        self.redis.stop()

    def server(self, env):
        return Server({"config.yaml": CONFIG}, env={
            "BACKEND_TYPE": "redis", "REDIS_SOCKET_TYPE": "tcp",
            "REDIS_URL": f"127.0.0.1:{self.proxy.port}", **env})

    def test_exact_with_redis_ten_milliseconds_away(self):
        server = self.server(EXACT)
        try:
            wait_for("healthy", server.healthy)
            self.assertEqual(admitted(server, 130, "far"), 100)
        finally:
            server.stop()

    def test_a_frozen_redis_answers_unavailable_at_the_deadline_never_ok(self):
        server = self.server({"REDLIMIT_STORE_DEADLINE": "50ms",
                              "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"})
        try:
            wait_for("healthy", server.healthy)
            self.proxy.freeze()
            start = time.monotonic()
            for _ in range(5):
                with self.assertRaises(grpc.RpcError) as caught:
                    server.call("deploy", [("user", "frozen")])
                self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
            # Does not hang: five calls at a 50 ms deadline, far under this bound.
            self.assertLess(time.monotonic() - start, 10)
            wait_for("unhealthy while frozen", lambda: not server.healthy())
            self.proxy.thaw()
            wait_for("healthy again", server.healthy)
            wait_for("decisions again", lambda: server.call("deploy", [("user", "thawed")]).overall_code == OK)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()

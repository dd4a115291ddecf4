"""REDIS_PERSECOND as the Go service reads it, end to end: two real redis-servers, the second
(with a password, REDIS_PERSECOND_AUTH) holding the counters of every limit whose unit is
`second`, the first every other; a request refused by the per-second limit charges nothing in
the first; /healthcheck fails while the per-second Redis is down (with
REDIS_HEALTH_CHECK_ACTIVE_CONNECTION), and a request that needs it
gets the failure mode (UNAVAILABLE by default) while one that does not is answered."""

import socket
import unittest

import grpc

from harness import (OK, OVER_LIMIT, Redis, RedisCluster, Sentinel, Server, _command, descriptor,
                     wait_for)
from test_redis_tls import TlsRedis, pem


CONFIG = """
domain: persec
descriptors:
  - key: fast
    rate_limit: {unit: second, unit_multiplier: 3600, requests_per_unit: 1}
  - key: tick
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: slow
    rate_limit: {unit: minute, unit_multiplier: 1440, requests_per_unit: 5}
"""

PASSWORD = "per-second secret"


def resp(*args):
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        a = a.encode()
        payload += f"${len(a)}\r\n".encode() + a + b"\r\n"
    return payload


def keys(redis, password=None):
    """The keys of `redis` (after AUTH with `password`), as one raw reply."""
    with socket.create_connection(("127.0.0.1", redis.port), timeout=5) as s:
        if password is not None:
            s.sendall(resp("AUTH", password))
            assert s.recv(64).startswith(b"+OK"), "AUTH refused"
        s.sendall(resp("KEYS", "*"))
        return s.recv(65536)


class PasswordRedis(Redis):
    """A redis-server asking for PASSWORD: it answers a PING without one with NOAUTH."""

    def __init__(self):
        super().__init__(args=["--requirepass", PASSWORD])

    def _answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"-NOAUTH")
        except OSError:
            return False


class PerSecondRedis(unittest.TestCase):
    def setUp(self):
        self.main = Redis()
        self.addCleanup(self.main.stop)
        self.per_second = PasswordRedis()
        self.addCleanup(self.per_second.stop)
        self.env = {
            "BACKEND_TYPE": "redis",
            "REDIS_PERSECOND": "true",
            "REDIS_PERSECOND_TYPE": "single",
            "REDIS_PERSECOND_SOCKET_TYPE": "tcp",
            "REDIS_PERSECOND_URL": f"127.0.0.1:{self.per_second.port}",
            "REDIS_PERSECOND_AUTH": PASSWORD,
            "REDIS_PERSECOND_TIMEOUT": "2s",
            "REDIS_PERSECOND_POOL_SIZE": "20",
            "REDLIMIT_STORE_DEADLINE": "5s",
            # Health follows both Redis servers for good (by default, only until they answer).
            "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true",
        }
        self.srv = Server({"persec.yaml": CONFIG}, redis=self.main, env=self.env)
        self.addCleanup(self.srv.stop)

    def left(self, entry):
        return self.left_in(self.srv, entry)

    def left_in(self, server, entry):
        read = descriptor([entry], hits_addend=0)
        return server.call("persec", read).statuses[0].limit_remaining

    def test_second_limits_count_in_the_per_second_redis(self):
        wait_for("healthy", self.srv.healthy)
        answer = self.srv.call("persec", [("fast", "1")], [("slow", "1")])
        self.assertEqual(answer.overall_code, OK)
        self.assertEqual([s.limit_remaining for s in answer.statuses], [0, 4])
        in_main, in_per_second = keys(self.main), keys(self.per_second, PASSWORD)
        self.assertIn(b"slow", in_main)
        self.assertNotIn(b"fast", in_main)
        self.assertIn(b"fast", in_per_second)
        self.assertNotIn(b"slow", in_per_second)

        # A plain per-second limit: its key lives a second, so look right after a request.
        def ticked():
            self.assertEqual(self.srv.call("persec", [("tick", "1")]).overall_code, OK)
            self.assertNotIn(b"tick", keys(self.main))
            return b"tick" in keys(self.per_second, PASSWORD)
        wait_for("the tick counter in the per-second Redis", ticked)

        # The per-second variables are read, not warned about; the pool's size is.
        stderr = "".join(self.srv.stderr_lines)
        self.assertNotIn("REDIS_PERSECOND is set but", stderr)
        self.assertNotIn("REDIS_PERSECOND_URL is set but", stderr)
        self.assertIn("REDIS_PERSECOND_POOL_SIZE is set but has no effect", stderr)

    def test_every_hit_lands_in_both_redis(self):
        wait_for("healthy", self.srv.healthy)
        self.assertEqual(self.srv.call("persec", [("fast", "4")]).overall_code, OK)
        refused = self.srv.call("persec", [("slow", "4")], [("fast", "4")])
        self.assertEqual(refused.overall_code, OVER_LIMIT)
        # The Go service's default: the main Redis's counter is charged all the same, at once.
        self.assertEqual(self.left(("slow", "4")), 4)

    def test_a_refusal_by_the_per_second_limit_charges_nothing_in_the_main_redis(self):
        # STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true: all or none, across the two Redis.
        self.strict = Server({"persec.yaml": CONFIG}, redis=self.main, env={
            **self.env, "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})
        self.addCleanup(self.strict.stop)
        wait_for("healthy", self.strict.healthy)
        self.assertEqual(self.strict.call("persec", [("fast", "2")]).overall_code, OK)
        refused = self.strict.call("persec", [("slow", "2")], [("fast", "2")])
        self.assertEqual(refused.overall_code, OVER_LIMIT)
        self.assertEqual(refused.statuses[1].code, OVER_LIMIT)
        wait_for("the slow charge given back", lambda: self.left_in(self.strict, ("slow", "2")) == 5)

    def test_the_per_second_redis_down_fails_health_and_its_requests(self):
        wait_for("healthy", self.srv.healthy)
        self.per_second.stop()
        wait_for("unhealthy", lambda: not self.srv.healthy())
        with self.assertRaises(grpc.RpcError) as caught:
            self.srv.call("persec", [("fast", "3")])
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        # The main Redis's limits alone do not need it.
        answer = self.srv.call("persec", [("slow", "3")])
        self.assertEqual(answer.overall_code, OK)
        self.assertEqual(answer.statuses[0].limit_remaining, 4)


class PerSecondDeployments(unittest.TestCase):
    """The per-second Redis as a Cluster (REDIS_PERSECOND_TYPE=cluster), a master found through
    a Sentinel (REDIS_PERSECOND_TYPE=sentinel) or over TLS (REDIS_PERSECOND_TLS, with the shared
    REDIS_TLS_CACERT), the main one a single server."""

    def setUp(self):
        self.main = Redis()
        self.addCleanup(self.main.stop)

    def server(self, **env):
        srv = Server({"persec.yaml": CONFIG}, redis=self.main, env={
            "BACKEND_TYPE": "redis", "REDIS_PERSECOND": "true",
            "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDLIMIT_STORE_DEADLINE": "5s", **env})
        self.addCleanup(srv.stop)
        wait_for("healthy", srv.healthy)
        answer = srv.call("persec", [("fast", "1")], [("slow", "1")])
        self.assertEqual(answer.overall_code, OK)
        self.assertEqual(srv.call("persec", [("fast", "1")]).overall_code, OVER_LIMIT)
        in_main = keys(self.main)
        self.assertIn(b"slow", in_main)
        self.assertNotIn(b"fast", in_main)
        return srv

    def test_a_cluster(self):
        cluster = RedisCluster()
        self.addCleanup(cluster.stop)
        self.server(REDIS_PERSECOND_TYPE="cluster", REDIS_PERSECOND_URL=cluster.url())
        on_nodes = b"".join(_command(port, "KEYS", "*") for port in cluster.ports)
        self.assertIn(b"fast", on_nodes)
        self.assertNotIn(b"slow", on_nodes)

    def test_a_master_found_through_a_sentinel(self):
        sentinel = Sentinel()
        self.addCleanup(sentinel.stop)
        self.server(REDIS_PERSECOND_TYPE="sentinel", REDIS_PERSECOND_URL=sentinel.url())
        self.assertIn(b"fast", keys(sentinel.master))
        self.assertNotIn(b"slow", keys(sentinel.master))

    def test_tls(self):
        redis = TlsRedis(auth_clients="no")
        self.addCleanup(redis.stop)
        self.server(REDIS_PERSECOND_URL=f"127.0.0.1:{redis.tls_port}",
                    REDIS_PERSECOND_TLS="true", REDIS_TLS_CACERT=pem("ca.pem"))
        self.assertIn(b"fast", redis.command("KEYS", "*"))
        self.assertNotIn(b"slow", redis.command("KEYS", "*"))


if __name__ == "__main__":
    unittest.main()

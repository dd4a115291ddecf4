"""redlimit-server's answers where envoyproxy/ratelimit's users rely on them, driven by
xds-protos stubs against a real redis-server (and a Redis Cluster with descriptor hash tags):
`share_threshold` counts every value its wildcard matches on one counter (the Go service's
integration test `share-threshold-test`, and nested shapes of its `test/config`); with
`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true` (all or none), a request refused for any reason
charges none of its descriptors, whatever their hits, and no concurrent call sees it charged
(the default, every hit landing, is `test_token_budgets.py`'s); a refused descriptor has `limit_remaining` 0; a counter nothing has
charged yet answers `duration_until_reset` to the end of its window."""

import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from harness import OK, OVER_LIMIT, Redis, RedisCluster, Server, descriptor, wait_for

# Days, not the Go fixtures' hours and minutes: two calls that must meet in one fixed window
# could straddle a shorter window's end on a busy machine.
CONFIG = """
domain: share-threshold-test
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: files_no_share
    value: files_no_share/*
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: user
    value: user/*
    share_threshold: true
    descriptors:
      - key: resource
        value: res/*
        share_threshold: true
        descriptors:
          - key: action
            rate_limit: {unit: day, requests_per_unit: 3}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        descriptors:
          - key: type
            rate_limit: {unit: day, requests_per_unit: 3}
  - key: big
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: small
    rate_limit: {unit: day, requests_per_unit: 3}
"""

DOMAIN = "share-threshold-test"


def setUpModule():
    global REDIS, SERVER
    REDIS = Redis()
    SERVER = Server({"config.yaml": CONFIG}, redis=REDIS, env={
        "REDLIMIT_STORE_DEADLINE": "10s", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})
    wait_for("the server to be healthy", SERVER.healthy)


def tearDownModule():
    SERVER.stop()
    REDIS.stop()


def left(response):
    return [(s.code, s.limit_remaining) for s in response.statuses]


class ShareThreshold(unittest.TestCase):
    def test_every_value_the_wildcard_matches_counts_on_one_counter(self):
        # The Go integration test: ten hits on files/a.pdf leave files/b.csv over the limit.
        for i in range(10):
            r = SERVER.call(DOMAIN, [("files", "files/a.pdf")])
            self.assertEqual(left(r), [(OK, 9 - i)])
        r = SERVER.call(DOMAIN, [("files", "files/b.csv")])
        self.assertEqual(r.overall_code, OVER_LIMIT)
        self.assertEqual(left(r), [(OVER_LIMIT, 0)])
        # Without share_threshold, each value has a counter of its own.
        for i in range(10):
            r = SERVER.call(DOMAIN, [("files_no_share", f"files_no_share/{i}")])
            self.assertEqual(left(r), [(OK, 9)])

    def test_nested_levels_share_by_their_own_flag(self):
        for user, res in [("user/1", "res/1"), ("user/2", "res/2"), ("user/3", "res/3")]:
            SERVER.call(DOMAIN, [("user", user), ("resource", res), ("action", "read")])
        r = SERVER.call(DOMAIN, [("user", "user/4"), ("resource", "res/4"), ("action", "read")])
        self.assertEqual(left(r), [(OVER_LIMIT, 0)])
        # path/* shares, file/* below it does not: another file has its own counter.
        for p in ["path/a", "path/b", "path/c"]:
            SERVER.call(DOMAIN, [("path", p), ("file", "file/x"), ("type", "pdf")])
        r = SERVER.call(DOMAIN, [("path", "path/d"), ("file", "file/x"), ("type", "pdf")])
        self.assertEqual(left(r), [(OVER_LIMIT, 0)])
        r = SERVER.call(DOMAIN, [("path", "path/d"), ("file", "file/y"), ("type", "pdf")])
        self.assertEqual(left(r), [(OK, 2)])

    def test_on_a_cluster_with_a_slot_per_descriptor(self):
        cluster = RedisCluster()
        server = Server({"config.yaml": CONFIG}, env={
            "REDLIMIT_STORE_DEADLINE": "10s", "REDIS_TYPE": "cluster", "REDIS_SOCKET_TYPE": "tcp",
            "REDIS_URL": cluster.url(), "BACKEND_TYPE": "redis", "REDLIMIT_HASH_TAG": "descriptor"})
        try:
            wait_for("healthy", server.healthy)
            for i in range(10):
                server.call(DOMAIN, [("files", f"files/{i}.pdf")])
            r = server.call(DOMAIN, [("files", "files/last.csv")])
            self.assertEqual(left(r), [(OVER_LIMIT, 0)])
        finally:
            server.stop()
            cluster.stop()


class RefusedRequests(unittest.TestCase):
    def test_a_refused_descriptor_has_no_units_left(self):
        r = SERVER.call(DOMAIN, [("small", "left")], hits_addend=2)
        self.assertEqual(left(r), [(OK, 1)])
        r = SERVER.call(DOMAIN, [("small", "left")], hits_addend=3)
        self.assertEqual(left(r), [(OVER_LIMIT, 0)])
        # Nothing charged: the unit is still there.
        r = SERVER.call(DOMAIN, [("small", "left")])
        self.assertEqual(left(r), [(OK, 0)])

    def test_hits_past_one_descriptors_limit_charge_no_other(self):
        r = SERVER.call(DOMAIN, descriptor([("big", "alone")], hits_addend=1),
                        descriptor([("small", "alone")], hits_addend=5))
        self.assertEqual(r.overall_code, OVER_LIMIT)
        self.assertEqual(left(r), [(OK, 1000), (OVER_LIMIT, 0)])
        r = SERVER.call(DOMAIN, descriptor([("big", "alone")], hits_addend=0))
        self.assertEqual(left(r), [(OK, 1000)])

    def test_no_concurrent_call_sees_a_refused_request_charged(self):
        def refuse(_):
            return SERVER.call(DOMAIN, descriptor([("big", "race")], hits_addend=1),
                               descriptor([("small", "race")], hits_addend=5)).overall_code

        def read(_):
            return SERVER.call(DOMAIN, descriptor([("big", "race")], hits_addend=0)).statuses[0].limit_remaining

        with ThreadPoolExecutor(8) as pool:
            refused = pool.map(refuse, range(200))
            seen = pool.map(read, range(200))
            self.assertEqual(set(refused), {OVER_LIMIT})
            self.assertEqual(set(seen), {1000})


class Resets(unittest.TestCase):
    def test_a_fresh_counter_answers_the_time_to_its_window_end(self):
        # The Go service's CalculateReset: the unit's length less the time into it.
        to_midnight = 86400 - time.time() % 86400
        r = SERVER.call(DOMAIN, descriptor([("small", "fresh")], hits_addend=0))
        self.assertEqual(left(r), [(OK, 3)])
        reset = r.statuses[0].duration_until_reset.ToTimedelta().total_seconds()
        self.assertLess(abs(reset - to_midnight), 5, reset)


if __name__ == "__main__":
    unittest.main()

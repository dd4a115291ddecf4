"""The Go service's three statistics beyond the per-rule hits, in statsd (gostats' lines, to a
statsd of ours) and in Prometheus at once: `over_limit_with_local_cache` (a descriptor answered
over the limit from the deny cache, LOCAL_CACHE_SIZE_IN_BYTES: the Go service's local cache),
`domain_not_found` (each descriptor of a request whose domain is not configured) and
`global_shadow_mode` (a request over the limit answered OK by SHADOW_MODE)."""

import unittest

from harness import OK, OVER_LIMIT, Server, wait_for
from test_gateway import StatsdReceiver, statsd_env

CONFIG = """
domain: gs
descriptors:
  - key: once
    rate_limit: {unit: hour, requests_per_unit: 1}
"""

RULE = "ratelimit.service.rate_limit.gs.once."


def server(receiver, **env):
    return Server({"gs.yaml": CONFIG}, env=statsd_env(
        receiver, USE_STATSD="true", STATSD_PROTOCOL="udp", USE_PROMETHEUS="true",
        PROMETHEUS_ADDR="127.0.0.1:0", **env))


class GoStats(unittest.TestCase):
    def setUp(self):
        self.receiver = StatsdReceiver("udp")
        self.addCleanup(self.receiver.close)

    def metrics(self, srv):
        return srv.get("metrics", "/metrics")[1]

    def test_denials_from_the_deny_cache_and_unknown_domains_are_counted(self):
        srv = server(self.receiver, LOCAL_CACHE_SIZE_IN_BYTES="1000000")
        self.addCleanup(srv.stop)
        codes = [srv.call("gs", [("once", "a")]).overall_code for _ in range(4)]
        # Admitted; refused by the store (the denial cached); twice refused from the cache.
        self.assertEqual(codes, [OK, OVER_LIMIT, OVER_LIMIT, OVER_LIMIT])
        answer = srv.call("nowhere", [("once", "a")], [("other", "b")])
        self.assertEqual(answer.overall_code, OK)
        expected = {
            RULE + "total_hits": 4,
            RULE + "within_limit": 1,
            RULE + "over_limit": 3,
            RULE + "over_limit_with_local_cache": 2,
            "ratelimit.service.rate_limit.nowhere.domain_not_found": 2,
        }
        wait_for(f"the statsd lines {expected}", lambda: self.receiver.received(expected))
        self.assertEqual(self.receiver.bad, [])
        self.assertNotIn("ratelimit.service.global_shadow_mode", self.receiver.sums)
        prometheus = [
            'ratelimit_service_rate_limit_over_limit{domain="gs",key1="once"} 3',
            'ratelimit_service_rate_limit_over_limit_with_local_cache{domain="gs",key1="once"} 2',
            'ratelimit_service_rate_limit_domain_not_found{domain="nowhere"} 2',
        ]
        metrics = wait_for("the Prometheus metrics", lambda: (
            lambda text: text if all(line in text for line in prometheus) else None)(
                self.metrics(srv)))
        self.assertNotIn("ratelimit_service_global_shadow_mode ", metrics)

    def test_without_the_deny_cache_nothing_is_over_from_it(self):
        srv = server(self.receiver)
        self.addCleanup(srv.stop)
        codes = [srv.call("gs", [("once", "a")]).overall_code for _ in range(3)]
        self.assertEqual(codes, [OK, OVER_LIMIT, OVER_LIMIT])
        expected = {RULE + "total_hits": 3, RULE + "over_limit": 2}
        wait_for(f"the statsd lines {expected}", lambda: self.receiver.received(expected))
        self.assertNotIn(RULE + "over_limit_with_local_cache", self.receiver.sums)

    def test_requests_over_the_limit_in_global_shadow_mode_are_counted(self):
        srv = server(self.receiver, SHADOW_MODE="true")
        self.addCleanup(srv.stop)
        codes = [srv.call("gs", [("once", "a")]).overall_code for _ in range(3)]
        self.assertEqual(codes, [OK, OK, OK])
        expected = {
            RULE + "total_hits": 3,
            RULE + "over_limit": 2,
            "ratelimit.service.global_shadow_mode": 2,
        }
        wait_for(f"the statsd lines {expected}", lambda: self.receiver.received(expected))
        wait_for("the Prometheus counter", lambda: "ratelimit_service_global_shadow_mode 2"
                 in self.metrics(srv))


if __name__ == "__main__":
    unittest.main()

"""DogStatsD (USE_DOG_STATSD): the Go service's statistics as DogStatsD lines over UDP, gostats'
tags (EXTRA_TAGS) and the mogrifiers' (USE_DOG_STATSD_MOGRIFIERS, DOG_STATSD_MOGRIFIER_*) as
DogStatsD tags; a setting the Go service would not start with stops the start, named."""

import re
import unittest

from harness import OK, OVER_LIMIT, Server, wait_for
from test_gateway import StatsdReceiver

CONFIG = """
domain: dd
descriptors:
  - key: two_per_hour
    rate_limit: {unit: hour, requests_per_unit: 2}
"""

# The Go README's example mogrifier: the domain and the descriptor out of the name, as tags.
HITS = {
    "USE_DOG_STATSD_MOGRIFIERS": "hits",
    "DOG_STATSD_MOGRIFIER_HITS_PATTERN": r"^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$",
    "DOG_STATSD_MOGRIFIER_HITS_NAME": "ratelimit.service.rate_limit.$3",
    "DOG_STATSD_MOGRIFIER_HITS_TAGS": "domain:$1,descriptor:$2",
}

# name:value|type, then DogStatsD's optional |#tag,tag (nothing else: the sink samples nothing).
LINE = re.compile(r"^([^:|#]+):(\d+)\|(c|ms)(?:\|#([^|]+))?$")


class DogReceiver(StatsdReceiver):
    """A DogStatsD agent of ours on a loopback UDP port: counter sums and timer values by
    (name, tags), and every line it could not read."""

    def __init__(self):
        super().__init__("udp")

    def _take(self, text):
        with self.lock:
            for line in text.splitlines():
                match = LINE.match(line)
                if not match:
                    self.bad.append(line)
                    continue
                name, value, kind, tags = match.groups()
                key = (name, tuple(tags.split(",")) if tags else ())
                if kind == "c":
                    self.sums[key] = self.sums.get(key, 0) + int(value)
                else:
                    self.timers.setdefault(key, []).append(int(value))


def dog_env(receiver, **extra):
    # STATSD_PROTOCOL is left at its default, tcp: DogStatsD goes over UDP whatever it says.
    env = {"USE_DOG_STATSD": "true", "STATSD_HOST": "127.0.0.1",
           "STATSD_PORT": str(receiver.port), "STATS_FLUSH_INTERVAL": "100ms"}
    env.update(extra)
    return env


class DogStatsd(unittest.TestCase):
    def setUp(self):
        self.receiver = DogReceiver()
        self.addCleanup(self.receiver.close)

    def test_mogrifiers_turn_the_names_parts_into_tags_after_the_extra_tags(self):
        srv = Server({"dd.yaml": CONFIG}, env=dog_env(
            self.receiver, EXTRA_TAGS="env:ci", USE_STATSD=None, **HITS))
        self.addCleanup(srv.stop)
        codes = [srv.call("dd", [("two_per_hour", "a")]).overall_code for _ in range(3)]
        self.assertEqual(codes, [OK, OK, OVER_LIMIT])
        rule = ("env:ci", "domain:dd", "descriptor:two_per_hour")
        expected = {
            ("ratelimit.service.rate_limit.total_hits", rule): 3,
            ("ratelimit.service.rate_limit.within_limit", rule): 2,
            ("ratelimit.service.rate_limit.over_limit", rule): 1,
            ("ratelimit.service.rate_limit.near_limit", rule): 1,
            # No mogrifier matches these: their names as gostats has them, the extra tags.
            ("ratelimit.service.config_load_success", ("env:ci",)): 1,
            ("ratelimit_server.ShouldRateLimit.total_requests", ("env:ci",)): 3,
        }
        timers = {("ratelimit_server.ShouldRateLimit.response_time", ("env:ci",)): 3}
        wait_for(f"the DogStatsD lines {expected} {timers}",
                 lambda: self.receiver.received(expected, timers))
        self.assertEqual(self.receiver.bad, [])
        names = {name for name, _ in self.receiver.sums}
        self.assertFalse(any("__" in name or "two_per_hour" in name for name in names),
                         f"tags left in a name: {names}")

    def test_without_mogrifiers_only_gostats_tags_leave_the_name(self):
        srv = Server({"dd.yaml": CONFIG}, env=dog_env(
            self.receiver, EXTRA_TAGS="b:2,a:1", USE_STATSD="false"))
        self.addCleanup(srv.stop)
        srv.call("dd", [("two_per_hour", "a")])
        expected = {("ratelimit.service.rate_limit.dd.two_per_hour.total_hits", ("a:1", "b:2")): 1}
        wait_for(f"the DogStatsD lines {expected}", lambda: self.receiver.received(expected, {}))
        self.assertEqual(self.receiver.bad, [])

    def test_a_setting_the_go_service_refuses_stops_the_start_and_is_named(self):
        cases = [
            ({"USE_STATSD": "true"}, "USE_DOG_STATSD=true and USE_STATSD=true"),
            ({"USE_DOG_STATSD_MOGRIFIERS": "m"}, "DOG_STATSD_MOGRIFIER_M_PATTERN is not set"),
            ({"USE_DOG_STATSD_MOGRIFIERS": "m", "DOG_STATSD_MOGRIFIER_M_PATTERN": "(",
              "DOG_STATSD_MOGRIFIER_M_NAME": "x"}, "DOG_STATSD_MOGRIFIER_M_PATTERN does not compile"),
            ({"USE_DOG_STATSD_MOGRIFIERS": "m", "DOG_STATSD_MOGRIFIER_M_PATTERN": "x",
              "DOG_STATSD_MOGRIFIER_M_NAME": "y", "DOG_STATSD_MOGRIFIER_M_TAGS": "novalue"},
             "DOG_STATSD_MOGRIFIER_M_TAGS"),
        ]
        for env, message in cases:
            with self.subTest(message):
                with self.assertRaises(AssertionError) as caught:
                    Server({"dd.yaml": CONFIG}, env=dog_env(self.receiver, **env))
                self.assertIn("exited (1) before listening", str(caught.exception))
                self.assertIn(message, str(caught.exception))


if __name__ == "__main__":
    unittest.main()

"""redlimit-server's `calendar` extension, driven by xds-protos stubs against a real
redis-server: a limit with `calendar: {time_zone, anchor}` answers `duration_until_reset` to
the end of its calendar window (a UTC month, a New York day, computed here with Python's
zoneinfo), where a plain `unit: month` keeps the Go service's 30-day windows."""

import time
import unittest
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from harness import OK, OVER_LIMIT, Redis, Server, wait_for

CONFIG = """
domain: llm
descriptors:
  - key: tokens
    rate_limit:
      unit: month
      requests_per_unit: 5
      calendar: {time_zone: UTC, anchor: "1T00:00"}
  - key: daily
    rate_limit: {unit: day, requests_per_unit: 1, calendar: {time_zone: America/New_York}}
  - key: go_month
    rate_limit: {unit: month, requests_per_unit: 5}
"""


def setUpModule():
    global REDIS, SERVER
    REDIS = Redis()
    SERVER = Server({"config.yaml": CONFIG}, redis=REDIS, env={"REDLIMIT_STORE_DEADLINE": "10s"})
    wait_for("the server to be healthy", SERVER.healthy)


def tearDownModule():
    SERVER.stop()
    REDIS.stop()


def month_end(now):
    at = datetime.fromtimestamp(now, timezone.utc)
    first = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first + timedelta(days=32)).replace(day=1).timestamp()


def day_end(now, zone):
    at = datetime.fromtimestamp(now, ZoneInfo(zone))
    tomorrow = at.date() + timedelta(days=1)
    midnight = datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=ZoneInfo(zone))
    return midnight.timestamp()


def go_month_end(now):
    thirty = 30 * 86400
    return (now // thirty + 1) * thirty


class CalendarWindows(unittest.TestCase):
    def assert_resets_at(self, response, end, before, after):
        reset = response.statuses[0].duration_until_reset.ToTimedelta().total_seconds()
        # Redis's time lies between the two readings (one host): the reset lands on the end.
        self.assertLessEqual(before + reset, end + 1, reset)
        self.assertGreaterEqual(after + reset, end - 1, reset)

    def test_a_calendar_month_and_day_end_with_the_calendar(self):
        ny = "America/New_York"
        # Tried again with fresh counters if the calls ran across a window's end (midnight in
        # New York): the expectations are computed for one window.
        for attempt in range(2):
            before = time.time()
            tokens = SERVER.call("llm", [("tokens", f"k{attempt}")], hits_addend=2)
            daily = SERVER.call("llm", [("daily", f"u{attempt}")], hits_addend=1)
            go = SERVER.call("llm", [("go_month", f"k{attempt}")], hits_addend=1)
            over = SERVER.call("llm", [("daily", f"u{attempt}")], hits_addend=1)
            after = time.time()
            same = (month_end(before), day_end(before, ny), go_month_end(before)) == (
                month_end(after),
                day_end(after, ny),
                go_month_end(after),
            )
            if same:
                break
        self.assertTrue(same, "two attempts ran across a window's end")
        self.assertEqual([(s.code, s.limit_remaining) for s in tokens.statuses], [(OK, 3)])
        self.assert_resets_at(tokens, month_end(before), before, after)
        self.assert_resets_at(daily, day_end(before, ny), before, after)
        self.assert_resets_at(go, go_month_end(before), before, after)
        # The day's one unit is spent: refused until New York's midnight.
        self.assertEqual(over.overall_code, OVER_LIMIT)
        self.assert_resets_at(over, day_end(before, ny), before, after)

if __name__ == "__main__":
    unittest.main()

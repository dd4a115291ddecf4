"""REDIS_PIPELINE_WINDOW and REDIS_PIPELINE_LIMIT, read as the Go service (radix v3) reads them:
each call to Redis waits up to the window for others, and the limit's count of waiting calls
ends the wait early. Only lower bounds of time are asserted (a window is never cut short),
and the limit's effect as calls answered well before a window of a minute."""

import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from harness import CALL_TIMEOUT, OK, Redis, Server, wait_for

CONFIG = """
domain: pw
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000}
"""


class PipelineWindow(unittest.TestCase):
    def start(self, env):
        self.redis = Redis()
        self.addCleanup(self.redis.stop)
        self.srv = Server({"config.yaml": CONFIG}, self.redis, env=env)
        self.addCleanup(self.srv.stop)
        wait_for("healthy", self.srv.healthy)

    def test_a_call_waits_out_the_window(self):
        self.start({"REDIS_PIPELINE_WINDOW": "1.5s", "REDLIMIT_STORE_DEADLINE": "5s"})
        started = time.monotonic()
        self.assertEqual(self.srv.call("pw", [("k", "alone")]).overall_code, OK)
        self.assertGreaterEqual(time.monotonic() - started, 1.5)
        stderr = "".join(self.srv.stderr_lines)
        self.assertNotIn("REDIS_PIPELINE_WINDOW is set but", stderr)

    def test_the_limit_ends_the_window_early(self):
        self.start({"REDIS_PIPELINE_WINDOW": "1m", "REDIS_PIPELINE_LIMIT": "3",
                    "REDLIMIT_STORE_DEADLINE": "2m"})
        with ThreadPoolExecutor(3) as pool:
            calls = [pool.submit(self.srv.call, "pw", [("k", f"v{i}")]) for i in range(3)]
            # Each would wait a minute for the others; the third ends the wait.
            codes = [c.result(timeout=CALL_TIMEOUT).overall_code for c in calls]
        self.assertEqual(codes, [OK] * 3)
        stderr = "".join(self.srv.stderr_lines)
        self.assertNotIn("REDIS_PIPELINE_LIMIT is set but", stderr)

    def test_a_window_as_long_as_the_deadline_stops_the_server(self):
        redis = Redis()
        self.addCleanup(redis.stop)
        with self.assertRaises(AssertionError) as stopped:
            Server({"config.yaml": CONFIG}, redis, env={"REDIS_PIPELINE_WINDOW": "15ms"})
        self.assertIn("REDIS_PIPELINE_WINDOW (15ms) must be shorter than REDLIMIT_STORE_DEADLINE",
                      str(stopped.exception))


if __name__ == "__main__":
    unittest.main()

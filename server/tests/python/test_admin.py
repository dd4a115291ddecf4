"""The admin listener (REDLIMIT_ADMIN_PORT) of two redlimit-server processes on one Redis,
driven with urllib, while Envoy's side is driven by the xds-protos gRPC stubs: a descriptor's
counters inspected and reset, its limits overridden, shadow mode set, each change made through
one server and seen in the other's answers; hostile requests get typed JSON errors."""

import json
import os
import tempfile
import unittest
import urllib.error
import urllib.request

from harness import CALL_TIMEOUT, OK, OVER_LIMIT, Redis, Server, wait_for

CONFIG = """
domain: admin
on_store_error: open
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 2, name: daily}
  - key: other
    rate_limit: {unit: day, requests_per_unit: 1}
"""

TOKEN = "s3cret-admin-token-for-tests"


def setUpModule():
    global REDIS, ONE, TWO, PLAIN, TOKEN_DIR
    REDIS = Redis()
    TOKEN_DIR = tempfile.mkdtemp(prefix="rls-admin-token-")
    path = os.path.join(TOKEN_DIR, "token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    # The deny cache on (LOCAL_CACHE_SIZE_IN_BYTES): a reset must reach the other's cache too.
    base = {"REDLIMIT_STORE_DEADLINE": "10s", "REDLIMIT_ADMIN_HOST": "127.0.0.1",
            "REDLIMIT_ADMIN_PORT": "0", "LOCAL_CACHE_SIZE_IN_BYTES": "1048576"}
    # One token from a file, the other from the environment: never from argv.
    ONE = Server({"config.yaml": CONFIG}, redis=REDIS,
                 env={**base, "REDLIMIT_ADMIN_TOKEN_FILE": path})
    TWO = Server({"config.yaml": CONFIG}, redis=REDIS, env={**base, "REDLIMIT_ADMIN_TOKEN": TOKEN})
    PLAIN = Server({"config.yaml": CONFIG}, redis=REDIS)


def tearDownModule():
    for server in (ONE, TWO, PLAIN):
        server.stop()
    REDIS.stop()
    os.remove(os.path.join(TOKEN_DIR, "token"))
    os.rmdir(TOKEN_DIR)


def admin(server, method, path, body=None, token=TOKEN):
    """(status, JSON answer) of an admin request."""
    headers = {}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(server.url("admin", path), data=data, method=method,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            raise AssertionError(f"{e.code}: not JSON: {text[:200]}")


def code(server, value):
    return server.call("admin", [("user", value)]).overall_code


def limit_of(server, value):
    return server.call("admin", [("user", value)]).statuses[0].current_limit.requests_per_unit


class Admin(unittest.TestCase):
    def test_only_servers_given_a_token_listen(self):
        self.assertIn("admin", ONE.addresses)
        self.assertIn("admin", TWO.addresses)
        self.assertNotIn("admin", PLAIN.addresses)
        self.assertFalse(any(TOKEN in line for line in ONE.stderr_lines + TWO.stderr_lines))

    def test_counters_inspected_and_reset_through_either_server(self):
        path = "/rls/admin/counters?user=alice"
        status, fresh = admin(ONE, "GET", path)
        self.assertEqual(status, 200, fresh)
        self.assertEqual(fresh["limits"][0]["remaining"], 2)
        self.assertEqual(fresh["limits"][0]["name"], "daily")
        self.assertEqual(fresh["limits"][0]["key"], "admin%00user%00alice%00%230")
        for _ in range(2):
            self.assertEqual(code(TWO, "alice"), OK)
        for _ in range(2):  # the second from TWO's deny cache
            self.assertEqual(code(TWO, "alice"), OVER_LIMIT)
        _, over = admin(ONE, "GET", path)
        self.assertEqual(over["limits"][0]["remaining"], 0)
        self.assertGreater(over["limits"][0]["retry_after"], 0)
        status, reset = admin(ONE, "DELETE", path)
        self.assertEqual(status, 200, reset)
        self.assertEqual(reset["keys"], ["admin%00user%00alice%00%230"])
        wait_for("the reset to reach the other server's deny cache",
                 lambda: code(TWO, "alice") == OK)

    def test_an_override_set_on_one_server_governs_the_other(self):
        path = "/rls/admin/override?user=bob"
        status, body = admin(ONE, "PUT", path, {"limits": ["20/1d"]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["key"], "admin%00user%00bob%00")
        wait_for("the override on the other server", lambda: limit_of(TWO, "bob") == 20)
        self.assertEqual(limit_of(TWO, "carol"), 2)
        status, read = admin(TWO, "GET", path)
        self.assertEqual((status, read["limits"]), (200, ["20/1d"]))
        status, _ = admin(TWO, "DELETE", path)
        self.assertEqual(status, 200)
        wait_for("the override gone on the first server", lambda: limit_of(ONE, "bob") == 2)

    def test_shadow_mode_set_on_one_server_reaches_the_other(self):
        self.assertEqual(TWO.call("admin", [("other", "x")]).overall_code, OK)
        self.assertEqual(TWO.call("admin", [("other", "x")]).overall_code, OVER_LIMIT)
        status, on = admin(ONE, "PUT", "/rls/admin/shadow?other=x", {"shadow": True})
        self.assertEqual((status, on["shadow"], on["set"]), (200, True, True))
        wait_for("shadow mode on the other server",
                 lambda: TWO.call("admin", [("other", "x")]).overall_code == OK)
        reply = TWO.call("admin", [("other", "x")])
        self.assertEqual((reply.statuses[0].code, reply.statuses[0].limit_remaining), (OK, 0))
        status, _ = admin(ONE, "DELETE", "/rls/admin/shadow?other=x")
        self.assertEqual(status, 200)
        wait_for("shadow mode off again",
                 lambda: TWO.call("admin", [("other", "x")]).overall_code == OVER_LIMIT)

    def test_rlconfig_shows_each_domains_failure_mode(self):
        status, text = ONE.get("debug", "/rlconfig")
        self.assertEqual(status, 200)
        self.assertIn("admin: on_store_error=open", text)

    def test_hostile_requests_get_typed_answers(self):
        for token in [None, "wrong", TOKEN + "x"]:
            status, body = admin(ONE, "GET", "/rls/admin/counters?user=a", token=token)
            self.assertEqual((status, body["error"] in {"unauthorized", "invalid_token"}),
                             (401, True))
        cases = [
            ("GET", "/rls/nope/counters?user=a", None, 404, "no_such_domain"),
            ("GET", "/rls/admin/counters?who=a", None, 404, "no_rule"),
            ("GET", "/rls/admin/counters?user", None, 400, "bad_descriptor"),
            ("GET", "/rls/admin/counters?user=%FF", None, 400, "bad_descriptor"),
            ("GET", "/rls/admin/counters?" + "a=b&" * 100, None, 400, "bad_descriptor"),
            ("PUT", "/rls/admin/override?user=a", b"{", 400, "bad_request"),
            ("PUT", "/rls/admin/override?user=a", b"x" * (16 << 10), 413, "bad_request"),
            ("PUT", "/rls/admin/override?user=a", {"limits": ["0/1s"]}, 400, "bad_override"),
            ("PUT", "/rls/admin/override?user=a", {"limits": ["1/1s", "2/1s"]}, 400,
             "bad_override"),
            ("DELETE", "/rls/admin/override?user=nobody", None, 404, "no_override"),
            ("GET", "/elsewhere", None, 404, "not_found"),
        ]
        for method, path, body, status, error in cases:
            got, answer = admin(ONE, method, path, body)
            self.assertEqual((got, answer.get("error")), (status, error), f"{method} {path[:60]}")
        self.assertTrue(ONE.healthy())


if __name__ == "__main__":
    unittest.main()

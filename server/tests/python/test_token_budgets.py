"""Token budgets that cannot be bypassed, through the binary against a real redis-server, as an
Envoy Gateway user meets them: a budget of 1000 tokens an hour, a check of nothing on the
request path (`cost.request` 0, `hits_addend` 0), and a charge of the response's tokens after
it (`cost.response`: Envoy's `apply_on_stream_done`, `hits_addend` = the tokens). With the Go
service's default (`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` unset or false) every charge
lands, past the limit too, and the checks after it are refused: with the rules from a YAML file
and from an xDS server (Envoy Gateway's way, where no YAML extension can be set). With `true`
the charge that does not fit is refused and never counted (the all-or-none admission).

Then a reservation settled through the service, as Envoy drives it: the request path's
descriptor carries a last entry `redlimit.reserve` (a `generic_key` action) and the estimate as
its hits; the answer's `dynamic_metadata` holds `redlimit.receipt`; the stream-done call's
descriptor carries `redlimit.settle` = that receipt (a `metadata` action reading it back) and
the real cost as its hits: only the difference is counted."""

import unittest

from harness import OK, OVER_LIMIT, Redis, Server, descriptor, wait_for
from test_xds import Ads, resource, xds_env

BUDGET = """
domain: llm
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000}
"""


def check(server, tenant):
    return server.call("llm", descriptor([("tenant", tenant)], hits_addend=0))


def charge(server, tenant, tokens):
    return server.call("llm", descriptor([("tenant", tenant)], hits_addend=tokens))


def status(response):
    return (response.statuses[0].code, response.statuses[0].limit_remaining)


def setUpModule():
    global REDIS
    REDIS = Redis()


def tearDownModule():
    REDIS.stop()


class EveryChargeLands(unittest.TestCase):
    """Three responses of 300 leave 100; the fourth's 300 land all the same (200 owed), and
    every check after is refused: the client cannot use tokens beyond the budget."""

    def bypass_is_closed(self, server, tenant):
        for left in [1000, 700, 400, 100]:
            self.assertEqual(status(check(server, tenant)), (OK, left))
            answer = charge(server, tenant, 300)
            self.assertEqual(status(answer), (OK, left - 300) if left > 100 else (OVER_LIMIT, 0))
        for _ in range(5):
            answer = check(server, tenant)
            self.assertEqual(answer.overall_code, OVER_LIMIT)
            self.assertEqual(status(answer), (OVER_LIMIT, 0))
            self.assertLessEqual(answer.statuses[0].duration_until_reset.seconds, 3600)
            # Each refused response's tokens are counted too: the debt grows (capped at a
            # budget beyond the limit), never shrinks but by time.
            self.assertEqual(status(charge(server, tenant, 300)), (OVER_LIMIT, 0))

    def test_with_the_rules_from_yaml(self):
        server = Server({"config.yaml": BUDGET}, redis=REDIS,
                        env={"REDLIMIT_STORE_DEADLINE": "10s"})
        self.addCleanup(server.stop)
        wait_for("healthy", server.healthy)
        self.bypass_is_closed(server, "yaml")

    def test_with_false_said_aloud(self):
        server = Server({"config.yaml": BUDGET}, redis=REDIS, env={
            "REDLIMIT_STORE_DEADLINE": "10s", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "false"})
        self.addCleanup(server.stop)
        wait_for("healthy", server.healthy)
        self.bypass_is_closed(server, "false")

    def test_with_the_rules_from_an_xds_server(self):
        ads = Ads()
        ads.start()
        self.addCleanup(ads.stop)
        ads.push("1", resource("llm", [("tenant", 1000)]))
        env = xds_env(ads, REDLIMIT_STORE_DEADLINE="10s")
        env.update({"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"127.0.0.1:{REDIS.port}",
                    "BACKEND_TYPE": "redis"})
        server = Server({}, env=env)
        self.addCleanup(server.stop)
        self.assertFalse(ads.reply_to("1").HasField("error_detail"))
        self.bypass_is_closed(server, "xds")

    def test_local_first_counts_every_charge_too(self):
        server = Server({"config.yaml": BUDGET}, redis=REDIS, env={
            "REDLIMIT_STORE_DEADLINE": "10s", "REDLIMIT_LOCAL_FIRST": "true"})
        self.addCleanup(server.stop)
        wait_for("healthy", server.healthy)
        self.bypass_is_closed(server, "local-first")


def receipt_of(response):
    fields = response.dynamic_metadata.fields
    return fields["redlimit.receipt"].string_value if "redlimit.receipt" in fields else None


def reserve(server, tenant, estimate):
    return server.call("llm", descriptor([("tenant", tenant), ("redlimit.reserve", "1")],
                                         hits_addend=estimate))


def settle(server, tenant, receipt, real):
    return server.call("llm", descriptor([("tenant", tenant), ("redlimit.settle", receipt)],
                                         hits_addend=real))


def left(server, tenant):
    return check(server, tenant).statuses[0].limit_remaining


class Settle(unittest.TestCase):
    def server(self, key="a secret both replicas share", **env):
        server = Server({"config.yaml": BUDGET}, redis=REDIS, env={
            "REDLIMIT_STORE_DEADLINE": "10s", "REDLIMIT_SETTLE_KEY": key, **env})
        self.addCleanup(server.stop)
        wait_for("healthy", server.healthy)
        return server

    def test_the_difference_is_given_back_or_charged(self):
        server = self.server()
        reserved = reserve(server, "s1", 500)
        self.assertEqual(status(reserved), (OK, 500))
        receipt = receipt_of(reserved)
        self.assertIsNotNone(receipt, reserved)
        # 120 used of the 500 reserved: 380 given back.
        settle(server, "s1", receipt, 120)
        wait_for("the 380 given back", lambda: left(server, "s1") == 880)
        # A receipt brought back again gives nothing more.
        settle(server, "s1", receipt, 0)
        self.assertEqual(left(server, "s1"), 880)
        # 700 used of 500 reserved: the excess of 200 is charged.
        receipt = receipt_of(reserve(server, "s1", 500))
        self.assertEqual(status(settle(server, "s1", receipt, 700)), (OK, 180))
        self.assertEqual(left(server, "s1"), 180)

    def test_a_refused_reservation_landed_and_is_given_back_whole(self):
        server = self.server()
        reserve(server, "s2", 900)
        refused = reserve(server, "s2", 500)
        # Every hit lands: the 500 were charged (400 owed), and a receipt says so.
        self.assertEqual(status(refused), (OVER_LIMIT, 0))
        receipt = receipt_of(refused)
        self.assertIsNotNone(receipt)
        # Envoy answered 429: nothing was used, the whole reservation comes back.
        settle(server, "s2", receipt, 0)
        wait_for("the 500 given back", lambda: left(server, "s2") == 100)

    def test_a_receipt_that_does_not_verify_settles_nothing(self):
        server = self.server()
        receipt = receipt_of(reserve(server, "s3", 500))
        forged = receipt.replace("500.", "900.", 1)
        for bad in [forged, "none", ""]:
            settle(server, "s3", bad, 10)
        # Each charged its real cost in full: 500 + 3 x 10.
        self.assertEqual(left(server, "s3"), 470)
        # Another replica with another key: the receipt settles nothing there either.
        other = self.server(key="another secret")
        self.assertEqual(status(settle(other, "s3", receipt, 0)), (OK, 470))
        self.assertEqual(left(server, "s3"), 470)
        # A replica sharing the key gives the reservation back.
        same = self.server()
        settle(same, "s3", receipt, 0)
        wait_for("the 500 given back", lambda: left(server, "s3") == 970)

    def test_all_or_none_issues_no_receipt_for_a_refused_reservation(self):
        server = self.server(STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT="true")
        reserve(server, "s4", 900)
        refused = reserve(server, "s4", 500)
        self.assertEqual(status(refused), (OVER_LIMIT, 0))
        self.assertIsNone(receipt_of(refused), "nothing was charged: nothing to give back")
        # The settlement of the admitted one still lands its excess, in this mode too.
        admitted = receipt_of(reserve(server, "s4", 50))
        self.assertIsNotNone(admitted)
        self.assertEqual(status(settle(server, "s4", admitted, 300)), (OVER_LIMIT, 0))
        self.assertEqual(status(check(server, "s4")), (OVER_LIMIT, 0))


class AllOrNone(unittest.TestCase):
    def test_true_refuses_the_charge_that_does_not_fit_and_counts_none_of_it(self):
        server = Server({"config.yaml": BUDGET}, redis=REDIS, env={
            "REDLIMIT_STORE_DEADLINE": "10s", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})
        self.addCleanup(server.stop)
        wait_for("healthy", server.healthy)
        for _ in range(3):
            charge(server, "strict", 300)
        self.assertEqual(status(charge(server, "strict", 300)), (OVER_LIMIT, 0))
        # The bypass this mode leaves open: the 300 were never counted.
        self.assertEqual(status(check(server, "strict")), (OK, 100))
        # Two descriptors, one over: the other is not charged either.
        both = server.call("llm", descriptor([("tenant", "a")], hits_addend=1),
                           descriptor([("tenant", "strict")], hits_addend=300))
        self.assertEqual([(s.code, s.limit_remaining) for s in both.statuses],
                         [(OK, 1000), (OVER_LIMIT, 0)])
        self.assertEqual(status(check(server, "a")), (OK, 1000))


if __name__ == "__main__":
    unittest.main()

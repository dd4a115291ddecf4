"""redlimit-server driven as Envoy drives a rate limit service, by a client we did not write
(PyPI's xds-protos stubs over grpcio), against a real redis-server. Scenarios after
envoyproxy/ratelimit's integration suite: simple, trigger, shadow, replaces, quota, token
quota with hits_addend, value in stats key; then every field of the protocol, the HTTP
endpoints, health and SIGTERM, reload, the environment, and hostile requests."""

import json
import os
import socket
import time
import unittest

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2
from envoy.type.v3 import ratelimit_unit_pb2

from harness import OK, OVER_LIMIT, Redis, Server, descriptor, wait_for

CONFIG = """
domain: basic
descriptors:
  - key: three_per_hour
    rate_limit: {unit: hour, requests_per_unit: 3, name: hourly}
  # A day, not a minute: two calls that must meet in one fixed window could straddle a
  # minute's end on a busy machine (1 MB values take a while), hardly a day's.
  - key: one_per_day
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: tokens
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: unl
    rate_limit: {unlimited: true}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: nested
    value: outer
    descriptors:
      - key: inner
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: wild
    value: "pre*"
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: rep_a
    rate_limit: {unit: hour, requests_per_unit: 1, name: a}
  - key: rep_b
    rate_limit:
      unit: hour
      requests_per_unit: 5
      replaces: [{name: a}]
"""

HOUR = rls_pb2.RateLimitResponse.RateLimit.HOUR
DAY = rls_pb2.RateLimitResponse.RateLimit.DAY


def setUpModule():
    global REDIS, SERVER
    REDIS = Redis()
    # A deadline far above Envoy's 20 ms: these tests are about decisions, and a busy machine
    # must not turn a late store into UNAVAILABLE here (the deadline has tests of its own).
    SERVER = Server({"config.yaml": CONFIG}, redis=REDIS, env={"REDLIMIT_STORE_DEADLINE": "10s"})
    wait_for("the server to be healthy", SERVER.healthy)


def tearDownModule():
    SERVER.stop()
    REDIS.stop()


class Protocol(unittest.TestCase):
    def test_simple_counts_down_then_over_limit_with_every_field(self):
        remaining = []
        for _ in range(3):
            r = SERVER.call("basic", [("three_per_hour", "simple")])
            self.assertEqual(r.overall_code, OK)
            (status,) = r.statuses
            self.assertEqual(status.code, OK)
            self.assertEqual(status.current_limit.requests_per_unit, 3)
            self.assertEqual(status.current_limit.unit, HOUR)
            self.assertEqual(status.current_limit.name, "hourly")
            self.assertTrue(0 < status.duration_until_reset.ToTimedelta().total_seconds() <= 3600)
            remaining.append(status.limit_remaining)
        self.assertEqual(remaining, [2, 1, 0])
        r = SERVER.call("basic", [("three_per_hour", "simple")])
        self.assertEqual(r.overall_code, OVER_LIMIT)
        self.assertEqual(r.statuses[0].code, OVER_LIMIT)
        self.assertEqual(r.statuses[0].limit_remaining, 0)
        wait = r.statuses[0].duration_until_reset.ToTimedelta().total_seconds()
        self.assertTrue(0 < wait <= 3600, wait)

    def test_values_count_apart_and_statuses_follow_the_request_order(self):
        r = SERVER.call("basic", [("one_per_day", "order")], [("nothing_matches", "x")],
                        [("three_per_hour", "order")])
        self.assertEqual([s.code for s in r.statuses], [OK, OK, OK])
        self.assertEqual(r.statuses[0].current_limit.requests_per_unit, 1)
        self.assertFalse(r.statuses[1].HasField("current_limit"))
        self.assertEqual(r.statuses[2].current_limit.requests_per_unit, 3)
        other = SERVER.call("basic", [("one_per_day", "order-other-value")])
        self.assertEqual(other.overall_code, OK)

    def test_a_rejected_request_charges_every_descriptor(self):
        # The Go service's default (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false): every
        # descriptor is charged, the rejected request's too.
        SERVER.call("basic", [("one_per_day", "atomic")])
        r = SERVER.call("basic", [("three_per_hour", "atomic")], [("one_per_day", "atomic")])
        self.assertEqual(r.overall_code, OVER_LIMIT)
        self.assertEqual([(s.code, s.limit_remaining) for s in r.statuses],
                         [(OK, 2), (OVER_LIMIT, 0)])
        for expected in [1, 0]:
            r = SERVER.call("basic", [("three_per_hour", "atomic")])
            self.assertEqual(r.overall_code, OK)
            self.assertEqual(r.statuses[0].limit_remaining, expected)
        self.assertEqual(SERVER.call("basic", [("three_per_hour", "atomic")]).overall_code,
                         OVER_LIMIT)

    def test_token_quota_with_hits_addend(self):
        r = SERVER.call("basic", [("tokens", "quota")], hits_addend=60)
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 40))
        # The 50 do not fit: counted all the same (110 of 100), as the Go service counts.
        r = SERVER.call("basic", [("tokens", "quota")], hits_addend=50)
        self.assertEqual(r.overall_code, OVER_LIMIT)
        r = SERVER.call("basic", descriptor([("tokens", "quota")], hits_addend=0))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OVER_LIMIT, 0))

    def test_per_descriptor_hits_addend_zero_checks_without_charging(self):
        for _ in range(3):
            r = SERVER.call("basic", descriptor([("three_per_hour", "peek")], hits_addend=0))
            self.assertEqual(r.overall_code, OK)
            self.assertEqual(r.statuses[0].limit_remaining, 3)
        for _ in range(3):
            SERVER.call("basic", [("three_per_hour", "peek")])
        # At the limit exactly: OK with nothing left, as the Go service answers (3 is not
        # past 3); one hit more is over, and so is a check after it.
        r = SERVER.call("basic", descriptor([("three_per_hour", "peek")], hits_addend=0))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 0))
        SERVER.call("basic", [("three_per_hour", "peek")])
        r = SERVER.call("basic", descriptor([("three_per_hour", "peek")], hits_addend=0))
        self.assertEqual(r.overall_code, OVER_LIMIT)

    def test_a_limit_override_counts_apart_per_limit_value(self):
        two_per_hour = (2, ratelimit_unit_pb2.HOUR)
        five_per_hour = (5, ratelimit_unit_pb2.HOUR)
        for _ in range(2):
            r = SERVER.call("basic", descriptor([("three_per_hour", "ovr")], limit=two_per_hour))
            self.assertEqual(r.overall_code, OK)
            self.assertEqual(r.statuses[0].current_limit.requests_per_unit, 2)
        r = SERVER.call("basic", descriptor([("three_per_hour", "ovr")], limit=two_per_hour))
        self.assertEqual(r.overall_code, OVER_LIMIT)
        r = SERVER.call("basic", descriptor([("three_per_hour", "ovr")], limit=five_per_hour))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 4))

    def test_unlimited_and_unmatched(self):
        for _ in range(5):
            r = SERVER.call("basic", [("unl", "x")])
            self.assertEqual(r.overall_code, OK)
        self.assertEqual(r.statuses[0].limit_remaining, 2**32 - 1)
        r = SERVER.call("basic", [("no_such_key", "x")])
        self.assertEqual(r.overall_code, OK)
        self.assertFalse(r.statuses[0].HasField("current_limit"))

    def test_shadow_mode_answers_ok_over_the_limit(self):
        for _ in range(3):
            r = SERVER.call("basic", [("shadowed", "s")])
            self.assertEqual(r.overall_code, OK)

    def test_nested_and_wildcard_rules(self):
        for expected in [OK, OK, OVER_LIMIT]:
            r = SERVER.call("basic", [("nested", "outer"), ("inner", "n1")])
            self.assertEqual(r.overall_code, expected)
            self.assertEqual(r.statuses[0].current_limit.unit, DAY)
        # The depth must equal the request's entries: `nested` alone matches nothing.
        r = SERVER.call("basic", [("nested", "outer")])
        self.assertFalse(r.statuses[0].HasField("current_limit"))
        self.assertEqual(SERVER.call("basic", [("wild", "prefix-1")]).overall_code, OK)
        self.assertEqual(SERVER.call("basic", [("wild", "prefix-1")]).overall_code, OVER_LIMIT)
        r = SERVER.call("basic", [("wild", "other")])
        self.assertFalse(r.statuses[0].HasField("current_limit"))

    def test_replaces_drops_the_replaced_limit(self):
        for _ in range(3):
            r = SERVER.call("basic", [("rep_a", "r")], [("rep_b", "r")])
            self.assertEqual(r.overall_code, OK)

    def test_unknown_and_empty_domains(self):
        with self.assertRaises(grpc.RpcError) as caught:
            SERVER.call("", [("three_per_hour", "x")])
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as caught:
            SERVER.call("basic")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        r = SERVER.call("no-such-domain", [("three_per_hour", "x")])
        self.assertEqual(r.overall_code, OK)

    def test_exact_under_concurrency(self):
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(
                lambda _: SERVER.call("basic", [("tokens", "parallel")]).overall_code, range(150)))
        self.assertEqual(codes.count(OK), 100)


class Http(unittest.TestCase):
    def test_healthcheck(self):
        self.assertEqual(SERVER.get("http", "/healthcheck"), (200, "OK"))

    def test_json_answers_200_then_429(self):
        body = json.dumps({"domain": "basic",
                           "descriptors": [{"entries": [{"key": "one_per_day", "value": "json"}]}]})
        status, text = SERVER.post("/json", body.encode())
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["overallCode"], "OK")
        status, text = SERVER.post("/json", body.encode())
        self.assertEqual(status, 429, text)
        reply = json.loads(text)
        self.assertEqual(reply["statuses"][0]["code"], "OVER_LIMIT")
        self.assertEqual(reply["statuses"][0]["currentLimit"], {"requestsPerUnit": 1, "unit": "DAY"})

    def test_json_refuses_what_is_not_a_request(self):
        for body in [b"{", b'{"domain":"basic","bogus":1}', b'{"domain":""}']:
            status, _ = SERVER.post("/json", body)
            self.assertEqual(status, 400, body)

    def test_rlconfig_dumps_the_config(self):
        status, text = SERVER.get("debug", "/rlconfig")
        self.assertEqual(status, 200)
        self.assertIn("basic.three_per_hour", text)


class Hostile(unittest.TestCase):
    def test_ten_thousand_descriptors_get_a_clear_answer(self):
        ds = [descriptor([("three_per_hour", f"many-{i}")]) for i in range(10000)]
        try:
            r = SERVER.call("basic", *ds)
            self.assertEqual(len(r.statuses), 10000)
        except grpc.RpcError as e:
            self.assertIn(e.code(), {grpc.StatusCode.INVALID_ARGUMENT,
                                     grpc.StatusCode.RESOURCE_EXHAUSTED})
        self.assertTrue(SERVER.healthy())

    def test_a_megabyte_value_is_limited_like_any_other(self):
        big = "v" * (1 << 20)
        try:
            first = SERVER.call("basic", [("one_per_day", big)])
            self.assertEqual(first.overall_code, OK)
            second = SERVER.call("basic", [("one_per_day", big)])
            self.assertEqual(second.overall_code, OVER_LIMIT)
        except grpc.RpcError as e:
            self.assertIn(e.code(), {grpc.StatusCode.INVALID_ARGUMENT,
                                     grpc.StatusCode.RESOURCE_EXHAUSTED})

    def test_huge_hits_never_pass_unlimited(self):
        r = SERVER.call("basic", [("tokens", "huge-request")], hits_addend=2**32 - 1)
        self.assertEqual(r.overall_code, OVER_LIMIT)
        try:
            r = SERVER.call("basic", descriptor([("tokens", "huge-descriptor")], hits_addend=2**64 - 1))
            self.assertEqual(r.overall_code, OVER_LIMIT)
        except grpc.RpcError as e:
            self.assertEqual(e.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # Charged, past the limit (up to twice it, the debt's cap): the next call is over.
        r = SERVER.call("basic", descriptor([("tokens", "huge-request")], hits_addend=0))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OVER_LIMIT, 0))

    def test_garbage_frames_do_not_hurt_the_server(self):
        host, port = SERVER.addresses["grpc"].rsplit(":", 1)
        for junk in [b"\x00" * 64, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + os.urandom(4096),
                     b"GET / HTTP/1.1\r\n\r\n", os.urandom(65536)]:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                try:
                    s.sendall(junk)
                    s.recv(1024)
                except OSError:
                    pass
        self.assertEqual(SERVER.call("basic", [("three_per_hour", "after-junk")]).overall_code, OK)


class Lifecycle(unittest.TestCase):
    def test_sigterm_fails_health_before_the_listeners_drain(self):
        server = Server({"config.yaml": CONFIG}, redis=REDIS,
                        env={"REDLIMIT_DRAIN_DELAY": "3s"})
        try:
            wait_for("healthy", server.healthy)
            server.terminate()
            status = wait_for("/healthcheck to fail",
                              lambda: (lambda s: s if s[0] != 200 else None)(server.get("http", "/healthcheck")))
            self.assertEqual(status[0], 500, status)
            self.assertEqual(server.process.wait(timeout=30), 0)
        finally:
            server.stop()

    def test_health_fails_while_redis_is_unreachable_with_the_active_check(self):
        redis = Redis()
        server = Server({"config.yaml": CONFIG}, redis=redis,
                        env={"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"})
        try:
            wait_for("healthy", server.healthy)
            redis.stop()
            wait_for("unhealthy", lambda: not server.healthy())
        finally:
            server.stop()

    def test_a_dead_redis_gets_each_domains_failure_mode_and_known_denials_stand(self):
        limited = "descriptors:\n  - key: ip\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
        redis = Redis()
        server = Server({"by_env.yaml": "domain: by_env\n" + limited,
                         "closed.yaml": "domain: closed\non_store_error: closed\n" + limited},
                        redis=redis,
                        env={"REDLIMIT_ON_STORE_ERROR": "open",
                             "LOCAL_CACHE_SIZE_IN_BYTES": "1000000",
                             # While Redis is up, every call must reach it: a call past the
                             # default 15 ms on a busy machine would be answered open.
                             "REDLIMIT_STORE_DEADLINE": "2s"})
        try:
            code = lambda domain, ip: server.call(domain, [("ip", ip)]).overall_code
            self.assertEqual(code("by_env", "1"), OK)
            self.assertEqual(code("by_env", "1"), OVER_LIMIT)
            redis.stop()
            # Known over: answered from the deny cache, as Redis would (open would say OK).
            self.assertEqual(code("by_env", "1"), OVER_LIMIT)
            self.assertEqual(code("by_env", "2"), OK)
            self.assertEqual(code("closed", "2"), OVER_LIMIT)
        finally:
            server.stop()

    def test_reload_on_change_keeps_the_old_config_when_broken(self):
        for layout in ["plain", "configmap"]:
            with self.subTest(layout=layout):
                self._reload(layout)

    def _reload(self, layout):
        one = "domain: reload\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
        two = one.replace("requests_per_unit: 1", "requests_per_unit: 2")
        server = Server({"config.yaml": one}, env={"USE_PROMETHEUS": "true",
                                                   "PROMETHEUS_ADDR": "127.0.0.1:0"},
                        layout=layout)
        try:
            limit = lambda: server.call("reload", [("k", "v")]).statuses[0].current_limit.requests_per_unit
            self.assertEqual(limit(), 1)
            server.write_config({"config.yaml": two})
            wait_for("the new limit", lambda: limit() == 2)
            server.write_config({"config.yaml": "domain: reload\ndescriptors: [{key: k, bogus: 1}]\n"})
            wait_for("the load error to be counted",
                     lambda: "ratelimit_service_config_load_error 1" in server.get("metrics", "/metrics")[1])
            self.assertEqual(limit(), 2)
        finally:
            server.stop()

    def test_unsupported_environment_is_named_at_start(self):
        server = Server({"config.yaml": CONFIG}, env={"REDIS_POOL_SIZE": "20", "TRACING_ENABLED": "true"})
        try:
            wait_for("the warnings", lambda: sum("REDIS_POOL_SIZE" in l or "TRACING_ENABLED" in l
                                                 for l in server.stderr_lines) >= 2)
        finally:
            server.stop()

    def test_a_broken_config_at_start_stops_the_server(self):
        with self.assertRaises(AssertionError) as caught:
            Server({"config.yaml": "domain: x\ndescriptors: [{key: k, nope: 1}]\n"})
        self.assertIn("config", str(caught.exception))

    def test_force_start_with_a_broken_config_answers_unknown_until_one_loads(self):
        # As the Go service with no config: an error Envoy's failure_mode_deny decides, never
        # an unlimited OK.
        server = Server({"config.yaml": "domain: x\ndescriptors: [{key: k, nope: 1}]\n"},
                        env={"FORCE_START_WITHOUT_INITIAL_CONFIG": "true"})
        try:
            with self.assertRaises(grpc.RpcError) as refused:
                server.call("x", [("k", "v")])
            self.assertEqual((refused.exception.code(), refused.exception.details()),
                             (grpc.StatusCode.UNKNOWN, "no rate limit configuration loaded"))
            status, body = server.post("/json", b'{"domain": "x", "descriptors": '
                                                b'[{"entries": [{"key": "k", "value": "v"}]}]}')
            self.assertEqual(status, 400)
            self.assertIn("no rate limit configuration loaded", body)
            server.write_config({"config.yaml": "domain: x\ndescriptors:\n  - key: k\n"
                                                "    rate_limit: {unit: hour, requests_per_unit: 1}\n"})

            def answered():
                try:
                    return server.call("x", [("k", "v")]).overall_code
                except grpc.RpcError:
                    return None
            wait_for("the first config to load", answered)
            self.assertEqual(server.call("x", [("k", "v")]).overall_code, OVER_LIMIT)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()


class GoCompatibleOutputs(unittest.TestCase):
    def test_limit_headers_and_prometheus_names_as_the_go_service(self):
        server = Server({"config.yaml": CONFIG}, redis=REDIS, env={
            "REDLIMIT_STORE_DEADLINE": "10s", "USE_PROMETHEUS": "true",
            "PROMETHEUS_ADDR": "127.0.0.1:0", "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
            "LIMIT_REMAINING_HEADER": "X-Left"})
        try:
            first = server.call("basic", [("three_per_hour", "go-names")])
            headers = {h.key.lower(): h.value for h in first.response_headers_to_add}
            self.assertEqual(headers["ratelimit-limit"], "3")
            self.assertEqual(headers["x-left"], "2")
            self.assertTrue(0 < int(headers["ratelimit-reset"]) <= 3600)
            for _ in range(3):
                server.call("basic", [("three_per_hour", "go-names")])
            server.call("basic", [("nested", "outer"), ("inner", "go-names")])
            metrics = server.get("metrics", "/metrics")[1]
            for line in [
                'ratelimit_service_rate_limit_total_hits{domain="basic",key1="three_per_hour"} 4',
                'ratelimit_service_rate_limit_within_limit{domain="basic",key1="three_per_hour"} 3',
                'ratelimit_service_rate_limit_over_limit{domain="basic",key1="three_per_hour"} 1',
                'ratelimit_service_rate_limit_near_limit{domain="basic",key1="three_per_hour"} 1',
                'ratelimit_service_rate_limit_total_hits{domain="basic",key1="nested_outer",key2="inner"} 1',
                "ratelimit_service_config_load_success 1",
            ]:
                self.assertIn(line, metrics)
            with self.assertRaises(grpc.RpcError):
                server.call("", [("x", "y")])
            wait_for("the error counted", lambda: 'ratelimit_service_should_rate_limit_error{err_type="service_error"} 1'
                     in server.get("metrics", "/metrics")[1])
        finally:
            server.stop()

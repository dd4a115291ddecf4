"""redlimit-server's gRPC listener and statistics as envoyproxy/ratelimit's deployments use
them: TLS and mTLS (grpcio's ssl_channel_credentials, a client we did not write, against the
certificates tests/python.rs writes to REDLIMIT_TEST_PKI), the certificate reloaded when its
files change, a Unix socket (GRPC_UDS), statsd (sockets of ours receive gostats' lines), and
Prometheus's legacy response time in milliseconds."""

import os
import re
import shutil
import socket
import tempfile
import threading
import unittest

import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

from harness import CALL_TIMEOUT, OK, Server, descriptor, free_port, wait_for

CONFIG = """
domain: gw
descriptors:
  - key: three_per_hour
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: nested
    value: outer
    descriptors:
      - key: inner
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 5}
"""


def pki(name):
    directory = os.environ.get("REDLIMIT_TEST_PKI")
    if not directory:
        raise AssertionError("REDLIMIT_TEST_PKI is not set: run the suite through cargo test")
    return os.path.join(directory, name)


def pem(name):
    with open(pki(name), "rb") as f:
        return f.read()


def tls_call(server, client=None, name="localhost"):
    """One ShouldRateLimit over a new TLS channel trusting the test CA, with `client`'s
    certificate if given, verifying the server as `name`; the response, or the RpcError."""
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pem("ca.pem"),
        private_key=pem(f"{client}.key") if client else None,
        certificate_chain=pem(f"{client}.pem") if client else None)
    channel = grpc.secure_channel(server.addresses["grpc"], credentials,
                                  options=[("grpc.ssl_target_name_override", name)])
    try:
        request = rls_pb2.RateLimitRequest(domain="gw")
        request.descriptors.append(descriptor([("unlimited_here", "x")]))
        return rls_pb2_grpc.RateLimitServiceStub(channel).ShouldRateLimit(
            request, timeout=CALL_TIMEOUT)
    except grpc.RpcError as e:
        return e
    finally:
        channel.close()


def tls_env(**extra):
    env = {"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": pki("server.pem"),
           "GRPC_SERVER_TLS_KEY": pki("server.key")}
    env.update(extra)
    return env


class Tls(unittest.TestCase):
    def assertServed(self, answer):
        self.assertNotIsInstance(answer, grpc.RpcError, answer)
        self.assertEqual(answer.overall_code, OK)

    def assertRefused(self, answer):
        self.assertIsInstance(answer, grpc.RpcError)
        self.assertEqual(answer.code(), grpc.StatusCode.UNAVAILABLE, answer)

    def test_tls_serves_a_client_that_trusts_the_ca_and_not_plaintext(self):
        server = Server({"config.yaml": CONFIG}, env=tls_env())
        try:
            self.assertServed(tls_call(server))
            self.assertServed(tls_call(server, client="client"))  # offered, not asked for
            with self.assertRaises(grpc.RpcError) as plaintext:
                server.call("gw", [("unlimited_here", "x")])
            self.assertEqual(plaintext.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            server.stop()

    def test_mtls_refuses_no_certificate_a_wrong_san_and_another_ca(self):
        server = Server({"config.yaml": CONFIG}, env=tls_env(
            GRPC_CLIENT_TLS_CACERT=pki("ca.pem"), GRPC_CLIENT_TLS_SAN="envoy.client.test"))
        try:
            self.assertRefused(tls_call(server))
            self.assertRefused(tls_call(server, client="wrong-san"))
            self.assertRefused(tls_call(server, client="other-ca"))
            self.assertServed(tls_call(server, client="client"))
            wait_for("the wrong SAN logged", lambda: any(
                "GRPC_CLIENT_TLS_SAN" in line for line in server.stderr_lines))
        finally:
            server.stop()

    def test_mtls_without_a_san_takes_any_certificate_of_the_ca(self):
        server = Server({"config.yaml": CONFIG}, env=tls_env(GRPC_CLIENT_TLS_CACERT=pki("ca.pem")))
        try:
            self.assertServed(tls_call(server, client="wrong-san"))
            self.assertRefused(tls_call(server))
            self.assertRefused(tls_call(server, client="other-ca"))
        finally:
            server.stop()

    def test_the_certificate_is_reloaded_when_its_files_change(self):
        directory = tempfile.mkdtemp(prefix="rls-certs-")
        cert, key = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")

        def install(name):
            for source, target in [(f"{name}.key", key), (f"{name}.pem", cert)]:
                shutil.copy(pki(source), target + ".tmp")
                os.replace(target + ".tmp", target)

        install("server")
        server = Server({"config.yaml": CONFIG}, env=tls_env(
            GRPC_SERVER_TLS_CERT=cert, GRPC_SERVER_TLS_KEY=key))
        try:
            self.assertRefused(tls_call(server, name="reloaded.test"))
            install("server2")
            wait_for("the new certificate", lambda: not isinstance(
                tls_call(server, name="reloaded.test"), grpc.RpcError))
            # A broken certificate leaves the one in force.
            refusals = lambda: sum("not reloaded" in line for line in server.stderr_lines)
            before = refusals()
            with open(cert + ".tmp", "w") as f:
                f.write("not a certificate")
            os.replace(cert + ".tmp", cert)
            wait_for("the refusal logged", lambda: refusals() > before)
            self.assertServed(tls_call(server, name="reloaded.test"))
        finally:
            server.stop()
            shutil.rmtree(directory, ignore_errors=True)

    def test_tls_without_a_certificate_stops_the_start(self):
        with self.assertRaises(AssertionError) as caught:
            Server({"config.yaml": CONFIG}, env={"GRPC_SERVER_USE_TLS": "true"})
        self.assertIn("GRPC_SERVER_TLS_CERT", str(caught.exception))


class UnixSocket(unittest.TestCase):
    def test_grpc_on_a_unix_socket_instead_of_host_and_port(self):
        directory = tempfile.mkdtemp(prefix="rls-uds-")
        path = os.path.join(directory, "ratelimit.sock")
        # A socket file left by a process that died, and GRPC_PORT taken: neither matters.
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(path)
        stale.close()
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = Server({"config.yaml": CONFIG}, env={
            "GRPC_UDS": path, "GRPC_PORT": str(busy.getsockname()[1])})
        try:
            self.assertEqual(server.addresses["grpc"], "unix:" + path)
            self.assertEqual(server.call("gw", [("three_per_hour", "uds")]).overall_code, OK)
            server.terminate()
            self.assertEqual(server.process.wait(timeout=CALL_TIMEOUT), 0)
            self.assertFalse(os.path.exists(path), "the socket file is removed at exit")
        finally:
            server.stop()
            busy.close()
            shutil.rmtree(directory, ignore_errors=True)


LINE = re.compile(r"^([^:]+):(\d+)\|(c|ms)$")


class StatsdReceiver:
    """A statsd of ours on a loopback port, over UDP or TCP: the sums of the counter lines it
    received, by name, and the timer lines' values."""

    def __init__(self, protocol, port=None):
        self.sums, self.timers, self.bad = {}, {}, []
        self.lock = threading.Lock()
        kind = socket.SOCK_DGRAM if protocol == "udp" else socket.SOCK_STREAM
        self.socket = socket.socket(socket.AF_INET, kind)
        self.socket.bind(("127.0.0.1", port or 0))
        self.port = self.socket.getsockname()[1]
        if protocol == "tcp":
            self.socket.listen()
        target = self._datagrams if protocol == "udp" else self._connections
        threading.Thread(target=target, daemon=True).start()

    def _take(self, text):
        with self.lock:
            for line in text.splitlines():
                match = LINE.match(line)
                if match and match.group(3) == "c":
                    name, value = match.group(1), int(match.group(2))
                    self.sums[name] = self.sums.get(name, 0) + value
                elif match:
                    self.timers.setdefault(match.group(1), []).append(int(match.group(2)))
                elif line:
                    self.bad.append(line)

    def _datagrams(self):
        while True:
            try:
                data = self.socket.recv(65536)
            except OSError:
                return
            self._take(data.decode())

    def _connections(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            threading.Thread(target=self._lines, args=(connection,), daemon=True).start()

    def _lines(self, connection):
        pending = b""
        with connection:
            while True:
                data = connection.recv(65536)
                if not data:
                    return
                pending += data
                complete, _, pending = pending.rpartition(b"\n")
                self._take(complete.decode())

    def received(self, expected, timers=None):
        """Whether every expected name's sum is what is expected, and each of `timers` (name:
        count) has that many values."""
        with self.lock:
            return (all(self.sums.get(name) == value for name, value in expected.items())
                    and all(len(self.timers.get(name, [])) == count
                            for name, count in (timers or {}).items()))

    def close(self):
        self.socket.close()


def statsd_env(receiver, **extra):
    env = {"STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(receiver.port),
           "STATS_FLUSH_INTERVAL": "100ms"}
    env.update(extra)
    return env


class Statsd(unittest.TestCase):
    def test_udp_lines_carry_the_go_services_names_counts_and_tags_beside_prometheus(self):
        receiver = StatsdReceiver("udp")
        server = Server({"config.yaml": CONFIG}, env=statsd_env(
            receiver, USE_STATSD="true", STATSD_PROTOCOL="udp", EXTRA_TAGS="env:ci,app:r.l",
            USE_PROMETHEUS="true", PROMETHEUS_ADDR="127.0.0.1:0"))
        try:
            for _ in range(4):
                server.call("gw", [("three_per_hour", "a")])
            server.call("gw", [("nested", "outer"), ("inner", "b")])
            server.call("gw", [("ip", "10.0.0.1")])
            with self.assertRaises(grpc.RpcError):
                server.call("", [("x", "y")])
            tags = ".__app=r_l.__env=ci"
            rule = "ratelimit.service.rate_limit.gw."
            expected = {
                rule + "three_per_hour.total_hits" + tags: 4,
                rule + "three_per_hour.within_limit" + tags: 3,
                rule + "three_per_hour.over_limit" + tags: 1,
                rule + "three_per_hour.near_limit" + tags: 1,
                rule + "nested_outer.inner.total_hits" + tags: 1,
                rule + "ip_10_0_0_1.total_hits" + tags: 1,
                "ratelimit.service.config_load_success" + tags: 1,
                "ratelimit.service.call.should_rate_limit.service_error" + tags: 1,
                "ratelimit_server.ShouldRateLimit.total_requests" + tags: 7,
            }
            timers = {"ratelimit_server.ShouldRateLimit.response_time" + tags: 7}
            wait_for(f"the statsd lines {expected} {timers}",
                     lambda: receiver.received(expected, timers))
            self.assertEqual(receiver.bad, [])
            self.assertFalse(any(name.startswith("redlimit") for name in receiver.sums),
                             "redlimit's own metrics are Prometheus's")
            metrics = server.get("metrics", "/metrics")[1]
            self.assertIn('ratelimit_service_rate_limit_total_hits{domain="gw",key1="three_per_hour"} 4',
                          metrics)
            self.assertIn('ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 7', metrics)
            self.assertIn('ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 7',
                          metrics)
        finally:
            server.stop()
            receiver.close()

    def test_tcp_by_default_and_counts_wait_for_a_statsd_that_comes_late(self):
        port = free_port()
        server = Server({"config.yaml": CONFIG}, env={
            "USE_STATSD": None, "STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(port),
            "STATS_FLUSH_INTERVAL": "100ms"})
        try:
            for _ in range(2):
                server.call("gw", [("three_per_hour", "late")])
            wait_for("statsd's absence logged", lambda: any(
                "statsd" in line and "unreachable" in line for line in server.stderr_lines))
            receiver = StatsdReceiver("tcp", port)
            try:
                server.call("gw", [("three_per_hour", "late")])
                expected = {"ratelimit.service.rate_limit.gw.three_per_hour.total_hits": 3}
                wait_for(f"the statsd lines {expected}", lambda: receiver.received(expected))
            finally:
                receiver.close()
        finally:
            server.stop()

    def test_what_was_counted_since_the_last_flush_is_sent_at_exit(self):
        receiver = StatsdReceiver("udp")
        server = Server({"config.yaml": CONFIG}, env=statsd_env(
            receiver, USE_STATSD="true", STATSD_PROTOCOL="udp", STATS_FLUSH_INTERVAL="1h"))
        try:
            server.call("gw", [("three_per_hour", "exit")])
            server.terminate()
            self.assertEqual(server.process.wait(timeout=CALL_TIMEOUT), 0)
            expected = {"ratelimit.service.rate_limit.gw.three_per_hour.total_hits": 1}
            wait_for(f"the statsd lines {expected}", lambda: receiver.received(expected))
        finally:
            server.stop()
            receiver.close()


class PrometheusLegacyMilliseconds(unittest.TestCase):
    def test_the_response_time_is_observed_in_milliseconds_only_when_asked(self):
        series = 'ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le='
        # Each call answered within the last bucket: 10 s, or 10 000 ms.
        for legacy, present, absent in ((None, '"10"}', '"10000"}'),
                                        ("true", '"10000"}', '"0.0005"}')):
            env = {"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0"}
            if legacy:
                env["PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"] = legacy
            server = Server({"config.yaml": CONFIG}, env=env)
            try:
                for _ in range(3):
                    server.call("gw", [("three_per_hour", "a")])
                metrics = server.get("metrics", "/metrics")[1]
                self.assertIn(series + present + " 3", metrics)
                self.assertNotIn(series + absent, metrics)
                self.assertIn('ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 3',
                              metrics)
                # Honoured, so not among the variables warned about at start.
                self.assertNotIn("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
                                 "".join(server.stderr_lines))
            finally:
                server.stop()


if __name__ == "__main__":
    unittest.main()

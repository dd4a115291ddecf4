"""Redis over TLS as the Go service's REDIS_TLS_* variables describe it, against a real
redis-server serving TLS: a client certificate (REDIS_TLS_CLIENT_CERT and _KEY) for a Redis
that asks for one (`tls-auth-clients yes`), and REDIS_TLS_SKIP_HOSTNAME_VERIFICATION (the
certificate's chain verified, not its name). The certificates are python.rs's
(`REDLIMIT_TEST_PKI`)."""

import os
import unittest

import grpc

from harness import OK, OVER_LIMIT, Redis, Server, free_port, wait_for


CONFIG = """
domain: tls
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2}
"""


def pem(name):
    directory = os.environ.get("REDLIMIT_TEST_PKI")
    if not directory:
        raise AssertionError("REDLIMIT_TEST_PKI is not set: run the suite through cargo test")
    return os.path.join(directory, name)


class TlsRedis(Redis):
    """A redis-server serving TLS on `tls_port` with certificate `cert` (by python.rs's CA),
    and plain TCP on `port` for the test's own commands."""

    def __init__(self, cert="server", auth_clients="yes"):
        self.tls_port = free_port()
        super().__init__(args=[
            "--tls-port", str(self.tls_port), "--tls-cert-file", pem(f"{cert}.pem"),
            "--tls-key-file", pem(f"{cert}.key"), "--tls-ca-cert-file", pem("ca.pem"),
            "--tls-auth-clients", auth_clients])


def server(redis, **env):
    return Server({"tls.yaml": CONFIG}, env={
        "BACKEND_TYPE": "redis", "REDIS_SOCKET_TYPE": "tcp",
        "REDIS_URL": f"127.0.0.1:{redis.tls_port}", "REDIS_TLS": "true",
        "REDIS_TLS_CACERT": pem("ca.pem"), "REDLIMIT_STORE_DEADLINE": "5s", **env})


def limited(test, srv, user):
    """The limit holds through Redis: two admitted, the third over."""
    wait_for("healthy", srv.healthy)
    codes = [srv.call("tls", [("user", user)]).overall_code for _ in range(3)]
    test.assertEqual(codes, [OK, OK, OVER_LIMIT])


def refused(test, srv):
    """Every decision fails: Redis is never reached."""
    for _ in range(3):
        with test.assertRaises(grpc.RpcError) as caught:
            srv.call("tls", [("user", "never")])
        test.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
    wait_for("unhealthy", lambda: not srv.healthy())


class ClientCertificates(unittest.TestCase):
    def setUp(self):
        self.redis = TlsRedis(auth_clients="yes")

    def tearDown(self):
        self.redis.stop()

    def test_a_redis_asking_for_a_client_certificate_gets_ours(self):
        srv = server(self.redis, REDIS_TLS_CLIENT_CERT=pem("client.pem"),
                     REDIS_TLS_CLIENT_KEY=pem("client.key"))
        try:
            limited(self, srv, "mtls")
            self.assertIn(b"mtls", self.redis.command("KEYS", "*mtls*"))
        finally:
            srv.stop()

    def test_without_one_redis_refuses_every_connection(self):
        srv = server(self.redis)
        try:
            refused(self, srv)
        finally:
            srv.stop()

    def test_a_certificate_without_its_key_stops_the_server_at_start(self):
        with self.assertRaises(AssertionError) as caught:
            server(self.redis, REDIS_TLS_CLIENT_CERT=pem("client.pem")).stop()
        self.assertIn("REDIS_TLS_CLIENT_KEY", str(caught.exception))


class HostnameVerification(unittest.TestCase):
    """Redis's certificate names `elsewhere.test`; the server dials 127.0.0.1."""

    def test_a_certificate_for_another_name_is_refused_by_default(self):
        redis = TlsRedis(cert="elsewhere", auth_clients="no")
        srv = server(redis)
        try:
            refused(self, srv)
        finally:
            srv.stop()
            redis.stop()

    def test_skipped_the_name_alone_is_not_verified_and_start_warns(self):
        redis = TlsRedis(cert="elsewhere", auth_clients="no")
        srv = server(redis, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION="true")
        try:
            limited(self, srv, "anyname")
            self.assertTrue(any("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION is on" in line
                                for line in srv.stderr_lines), "".join(srv.stderr_lines))
        finally:
            srv.stop()
            redis.stop()

    def test_skipped_the_chain_is_still_verified(self):
        redis = TlsRedis(cert="elsewhere-other-ca", auth_clients="no")
        srv = server(redis, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION="true")
        try:
            refused(self, srv)
        finally:
            srv.stop()
            redis.stop()


if __name__ == "__main__":
    unittest.main()

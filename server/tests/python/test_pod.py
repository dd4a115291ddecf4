"""The pod contract: the binary started as Envoy Gateway's Deployment and Istio's sample start
envoyproxy/ratelimit's image, `/bin/ratelimit` (here a link named `ratelimit` to the binary
under test), with their environment as they write it.

Envoy Gateway (`internal/infrastructure/kubernetes/ratelimit/resource.go` and its golden
Deployments, e.g. `testdata/deployments/redis-tls-settings.yaml`): its config from an xDS
server over mutual TLS (an ADS server in this test, grpcio on xds-protos, asking for a client
certificate), gRPC served over TLS with the same certificate (shaped as Envoy Gateway's: no
extended key usage), Redis over TLS with a client certificate
(a redis-server with `tls-auth-clients yes`), Prometheus on `:PORT`. What differs from the
Deployment, and why: the ports (0, so the kernel picks free ones, `PROMETHEUS_ADDR=:0`), the
files' directories (temporary ones laid out as its volumes: `certs/{tls.crt,tls.key,ca.crt}`,
`redis-certs/tls.{crt,key}`), the xDS server's address (127.0.0.1 and this test's
certificate, not `envoy-gateway:18001`), `REDIS_TLS_CACERT` (this test's Redis has a private
authority: a user adds it to the container's env, as the Go image would need it too), and
`PROMETHEUS_MAPPER_YAML` (Envoy Gateway's file, verbatim, from `tests/fixtures/mapper/`
rather than `/etc/statsd-exporter/conf.yaml`).

Istio (`samples/ratelimit/rate-limit-service.yaml`): its environment, the config file where
its ConfigMap is mounted (as a ConfigMap volume lays it out), `HOST="::"` and `GRPC_HOST="::"`,
which must take IPv4 clients too."""

import os
import shutil
import tempfile
import unittest

import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from google.protobuf import any_pb2

from harness import CALL_TIMEOUT, OK, OVER_LIMIT, Redis, Server, descriptor, wait_for
from test_redis_tls import TlsRedis
from test_xds import HOUR, Ads, RateLimitConfig, TYPE_URL

# Envoy Gateway's names, as the translator writes them (`internal/xds/translator/testdata/out/
# ratelimit-config/`): the domain is the listener's, a route's descriptor holds the rule's.
DOMAIN = "default/eg/http"
ROUTE = "httproute/default/backend/rule/0"
MATCH = "rule-0-match-0"
# The rate limit service's address in Envoy Gateway's config (`GetServiceURL`), the name in
# python.rs's `envoy-rate-limit` certificate. Envoy itself checks the chain alone (a trusted CA,
# no name: `buildEnvoyClientTLSSocket`); grpcio checks the name too.
POD_NAME = "envoy-ratelimit.envoy-gateway-system.svc.cluster.local"


GATEWAY_MAPPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                              "mapper", "envoy-gateway-statsd_conf.yaml")


def pki(name):
    directory = os.environ.get("REDLIMIT_TEST_PKI")
    if not directory:
        raise AssertionError("REDLIMIT_TEST_PKI is not set: run the suite through cargo test")
    return os.path.join(directory, name)


def read(name):
    with open(pki(name), "rb") as f:
        return f.read()


def volume(root, name, files):
    """A directory `name` under `root` holding `files` (its name -> a PKI file's name), as a
    Secret volume mounts them."""
    directory = os.path.join(root, name)
    os.makedirs(directory)
    for mounted, source in files.items():
        shutil.copy(pki(source), os.path.join(directory, mounted))
    return directory


def as_ratelimit(root):
    """A path named `ratelimit` to the binary under test, as the image's `/bin/ratelimit`."""
    path = os.path.join(root, "bin", "ratelimit")
    os.makedirs(os.path.dirname(path))
    os.symlink(os.environ["REDLIMIT_SERVER_BIN"], path)
    return path


def gateway_config(per_hour):
    """The RateLimitConfig Envoy Gateway sends for one route with one rule: `per_hour` requests
    an hour for each value of its match."""
    config = RateLimitConfig(name=DOMAIN, domain=DOMAIN)
    route = config.descriptors.add(key=ROUTE, value=ROUTE)
    rule = route.descriptors.add(key=MATCH)
    rule.rate_limit.unit = HOUR
    rule.rate_limit.requests_per_unit = per_hour
    return any_pb2.Any(type_url=TYPE_URL, value=config.SerializeToString())


def tls_channel(address, client=None):
    """A channel to the gRPC listener over TLS, trusting the test CA and verifying the server
    as Envoy Gateway's Envoy would find it; presenting `client`'s certificate if given."""
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read("ca.pem"),
        private_key=read(f"{client}.key") if client else None,
        certificate_chain=read(f"{client}.pem") if client else None)
    return grpc.secure_channel(address, credentials,
                               options=[("grpc.ssl_target_name_override", POD_NAME)])


def should_rate_limit(channel, user):
    request = rls_pb2.RateLimitRequest(domain=DOMAIN)
    request.descriptors.append(descriptor([(ROUTE, ROUTE), (MATCH, user)]))
    return rls_pb2_grpc.RateLimitServiceStub(channel).ShouldRateLimit(
        request, timeout=CALL_TIMEOUT).overall_code


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def warnings(server):
    return [line for line in server.stderr_lines if line.startswith("warning:")]


class EnvoyGateway(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="rls-pod-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.redis = TlsRedis(auth_clients="yes")
        self.addCleanup(self.redis.stop)
        self.ads = Ads()
        # Envoy Gateway's xDS server asks for the client's certificate, by its own authority.
        self.ads.start(grpc.ssl_server_credentials(
            [(read("server.key"), read("server.pem"))], root_certificates=read("ca.pem"),
            require_client_auth=True))
        self.addCleanup(self.ads.stop)
        certs = volume(self.root, "certs", {
            "tls.crt": "envoy-rate-limit.pem", "tls.key": "envoy-rate-limit.key",
            "ca.crt": "ca.pem"})
        redis_certs = volume(self.root, "redis-certs", {
            "tls.crt": "client.pem", "tls.key": "client.key"})
        data = os.path.join(self.root, "data")
        os.makedirs(data)
        # resource.go's expectedRateLimitContainerEnv, in its order, with the Redis settings
        # of a Redis with TLS and a client certificate and Prometheus on.
        self.env = {
            "RUNTIME_ROOT": data,
            "RUNTIME_SUBDIRECTORY": "ratelimit",
            "RUNTIME_IGNOREDOTFILES": "true",
            "RUNTIME_WATCH_ROOT": "false",
            "LOG_LEVEL": "info",
            "USE_STATSD": "false",
            "CONFIG_TYPE": "GRPC_XDS_SOTW",
            "CONFIG_GRPC_XDS_SERVER_URL": f"127.0.0.1:{self.ads.port}",
            "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
            "GRPC_SERVER_USE_TLS": "true",
            "GRPC_SERVER_TLS_CERT": os.path.join(certs, "tls.crt"),
            "GRPC_SERVER_TLS_KEY": os.path.join(certs, "tls.key"),
            "GRPC_SERVER_TLS_CA_CERT": os.path.join(certs, "ca.crt"),
            "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": os.path.join(certs, "tls.crt"),
            "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": os.path.join(certs, "tls.key"),
            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": os.path.join(certs, "ca.crt"),
            "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
            "REDIS_SOCKET_TYPE": "tcp",
            "REDIS_URL": f"127.0.0.1:{self.redis.tls_port}",
            "REDIS_TLS": "true",
            "REDIS_TLS_CLIENT_CERT": os.path.join(redis_certs, "tls.crt"),
            "REDIS_TLS_CLIENT_KEY": os.path.join(redis_certs, "tls.key"),
            "USE_PROMETHEUS": "true",
            "PROMETHEUS_ADDR": ":0",
            "PROMETHEUS_MAPPER_YAML": GATEWAY_MAPPER,
            # Not Envoy Gateway's: the test's Redis has a private authority.
            "REDIS_TLS_CACERT": pki("ca.pem"),
            # The harness's loopback addresses removed: the defaults listen everywhere.
            "HOST": None, "GRPC_HOST": None, "DEBUG_HOST": None, "BACKEND_TYPE": None,
        }

    def start(self):
        server = Server({}, env=self.env, program=as_ratelimit(self.root))
        self.addCleanup(server.stop)
        return server

    def test_the_deployments_environment_serves_limits_over_tls(self):
        self.ads.push("1", gateway_config(2))
        server = self.start()
        # The xDS client presented the pod's certificate (the server asks for one) and the node
        # id; the config is in force once ACKed.
        ack = self.ads.reply_to("1")
        self.assertFalse(ack.HasField("error_detail"), ack)
        self.assertEqual(self.ads.requests[0].node.id, "envoy-ratelimit")

        grpc_port = port_of(server.addresses["grpc"])
        http_port = port_of(server.addresses["http"])
        metrics_port = port_of(server.addresses["metrics"])
        # The default host listens on every address, IPv4 as IPv6: the kubelet probes the
        # pod's own.
        for host in ["127.0.0.1", "[::1]"]:
            server.addresses["http"] = f"{host}:{http_port}"
            wait_for(f"/healthcheck on {host}", server.healthy)
        self.assertEqual(server.get("http", "/healthcheck"), (200, "OK"))
        server.addresses["metrics"] = f"127.0.0.1:{metrics_port}"
        self.assertEqual(server.get("metrics", "/metrics")[0], 200)

        # Envoy presents its certificate; GRPC_SERVER_TLS_CA_CERT is not a variable of the
        # service (nor of this one): no client certificate is asked for, as there.
        with tls_channel(f"127.0.0.1:{grpc_port}", client="client") as envoy:
            codes = [should_rate_limit(envoy, "alice") for _ in range(3)]
        self.assertEqual(codes, [OK, OK, OVER_LIMIT])
        with tls_channel(f"[::1]:{grpc_port}") as anonymous:
            self.assertEqual(should_rate_limit(anonymous, "alice"), OVER_LIMIT)
            self.assertEqual(should_rate_limit(anonymous, "bob"), OK)
        # The dashboard's series, named by Envoy Gateway's mapping file.
        wait_for("the over-limit series under Envoy Gateway's mapping", lambda: any(
            line.startswith("ratelimit_service_rate_limit_over_limit")
            and f'domain="{DOMAIN}"' in line
            for line in server.get("metrics", "/metrics")[1].splitlines()))
        # Counted in the Redis that asks for a client certificate.
        self.assertIn(b"alice", self.redis.command("KEYS", "*alice*"))

        started = [line for line in server.stderr_lines if "starting (as " in line]
        self.assertTrue(started and started[0].rstrip().endswith("/bin/ratelimit)"), started)
        self.assertEqual(warnings(server), [], "every variable Envoy Gateway sets is read")

    def test_plaintext_is_refused_where_tls_is_served(self):
        self.ads.push("1", gateway_config(2))
        server = self.start()
        self.ads.reply_to("1")
        with grpc.insecure_channel(f"127.0.0.1:{port_of(server.addresses['grpc'])}") as plain:
            with self.assertRaises(grpc.RpcError) as refused:
                should_rate_limit(plain, "carol")
        self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAVAILABLE)


ISTIO_CONFIG = """domain: echo-ratelimit
descriptors:
  - key: PATH
    value: "/"
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: PATH
    rate_limit:
      unit: minute
      requests_per_unit: 100
"""


class Istio(unittest.TestCase):
    def test_the_samples_environment_answers_ipv4_and_ipv6_on_the_ipv6_wildcard(self):
        redis = Redis()
        self.addCleanup(redis.stop)
        root = tempfile.mkdtemp(prefix="rls-istio-")
        self.addCleanup(shutil.rmtree, root, True)
        # The sample's env, in its order; its ConfigMap at /data/ratelimit/config (here under
        # the harness's runtime root, as a ConfigMap volume lays it out).
        server = Server({"config.yaml": ISTIO_CONFIG}, layout="configmap", env={
            "LOG_LEVEL": "debug",
            "REDIS_SOCKET_TYPE": "tcp",
            "REDIS_URL": f"127.0.0.1:{redis.port}",
            "USE_STATSD": "false",
            "RUNTIME_SUBDIRECTORY": "ratelimit",
            "RUNTIME_WATCH_ROOT": "false",
            "RUNTIME_IGNOREDOTFILES": "true",
            "HOST": "::",
            "GRPC_HOST": "::",
            "BACKEND_TYPE": None, "DEBUG_HOST": None,
        }, program=as_ratelimit(root))
        self.addCleanup(server.stop)
        self.assertTrue(server.addresses["http"].startswith("[::]:"), server.addresses)
        self.assertTrue(server.addresses["grpc"].startswith("[::]:"), server.addresses)
        http_port = port_of(server.addresses["http"])
        grpc_port = port_of(server.addresses["grpc"])
        for host in ["127.0.0.1", "[::1]"]:
            server.addresses["http"] = f"{host}:{http_port}"
            wait_for(f"/healthcheck on {host}", server.healthy)
        codes = []
        for host in ["127.0.0.1", "[::1]"]:
            with grpc.insecure_channel(f"{host}:{grpc_port}") as channel:
                request = rls_pb2.RateLimitRequest(domain="echo-ratelimit")
                request.descriptors.append(descriptor([("PATH", "/")]))
                stub = rls_pb2_grpc.RateLimitServiceStub(channel)
                codes.append(stub.ShouldRateLimit(request, timeout=CALL_TIMEOUT).overall_code)
        self.assertEqual(codes, [OK, OVER_LIMIT], "one a minute, over either family")
        self.assertEqual(warnings(server), [])


if __name__ == "__main__":
    unittest.main()

"""CONFIG_TYPE=GRPC_XDS_SOTW: redlimit-server takes its config from an xDS server, as Envoy
Gateway configures envoyproxy/ratelimit. The xDS server is grpcio serving xds-protos'
`AggregatedDiscoveryService` (state of the world); the `RateLimitConfig` resource is not in
xds-protos, so its message is built here at run time from envoyproxy/ratelimit's
`rls_conf.proto` definition (field numbers typed in from that file, not from our copy)."""

import os
import queue
import threading
import unittest
from concurrent import futures

import grpc
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, struct_pb2

from harness import OK, OVER_LIMIT, Server, free_port, wait_for

TYPE_URL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"
PACKAGE = "ratelimit.config.ratelimit.v3"


def _rls_conf():
    """The messages of envoyproxy/ratelimit's api/ratelimit/config/ratelimit/v3/rls_conf.proto."""
    f = descriptor_pb2.FileDescriptorProto(
        name="ratelimit/config/ratelimit/v3/rls_conf.proto", package=PACKAGE, syntax="proto3",
        dependency=["google/protobuf/struct.proto"])
    T = descriptor_pb2.FieldDescriptorProto
    one, many = T.LABEL_OPTIONAL, T.LABEL_REPEATED

    def message(name, *fields):
        m = f.message_type.add(name=name)
        for field_name, number, kind, label, *type_name in fields:
            field = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name[0]

    message("RateLimitConfig",
            ("name", 1, T.TYPE_STRING, one),
            ("domain", 2, T.TYPE_STRING, one),
            ("descriptors", 3, T.TYPE_MESSAGE, many, f".{PACKAGE}.RateLimitDescriptor"))
    message("RateLimitDescriptor",
            ("key", 1, T.TYPE_STRING, one),
            ("value", 2, T.TYPE_STRING, one),
            ("rate_limit", 3, T.TYPE_MESSAGE, one, f".{PACKAGE}.RateLimitPolicy"),
            ("descriptors", 4, T.TYPE_MESSAGE, many, f".{PACKAGE}.RateLimitDescriptor"),
            ("shadow_mode", 5, T.TYPE_BOOL, one),
            ("detailed_metric", 6, T.TYPE_BOOL, one),
            ("quota_mode", 7, T.TYPE_BOOL, one),
            ("metadata", 8, T.TYPE_MESSAGE, one, ".google.protobuf.Struct"))
    message("RateLimitPolicy",
            ("unit", 1, T.TYPE_ENUM, one, f".{PACKAGE}.RateLimitUnit"),
            ("requests_per_unit", 2, T.TYPE_UINT32, one),
            ("unlimited", 3, T.TYPE_BOOL, one),
            ("name", 4, T.TYPE_STRING, one),
            ("replaces", 5, T.TYPE_MESSAGE, many, f".{PACKAGE}.RateLimitReplace"))
    message("RateLimitReplace", ("name", 1, T.TYPE_STRING, one))
    unit = f.enum_type.add(name="RateLimitUnit")
    for name, number in [("UNKNOWN", 0), ("SECOND", 1), ("MINUTE", 2), ("HOUR", 3), ("DAY", 4),
                         ("WEEK", 7), ("MONTH", 5), ("YEAR", 6)]:
        unit.value.add(name=name, number=number)
    pool = descriptor_pool.DescriptorPool()
    well_known = descriptor_pb2.FileDescriptorProto()
    struct_pb2.DESCRIPTOR.CopyToProto(well_known)
    pool.Add(well_known)
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.RateLimitConfig"))


RateLimitConfig = _rls_conf()
HOUR = 3


def resource(domain, limits, name=None):
    """A packed RateLimitConfig of `domain` with one descriptor per (key, requests per hour)."""
    config = RateLimitConfig(name=name or domain, domain=domain)
    for key, per_hour in limits:
        d = config.descriptors.add(key=key)
        d.rate_limit.unit = HOUR
        d.rate_limit.requests_per_unit = per_hour
    return any_pb2.Any(type_url=TYPE_URL, value=config.SerializeToString())


class Ads(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    """A state-of-the-world ADS server: each stream gets the snapshot in force once it has
    asked, and again whenever it changes; every request and each stream's metadata is kept."""

    def __init__(self):
        self.changed = threading.Condition()
        self.snapshot = None
        self.nonce = 0
        self.requests = []
        self.sent = {}  # nonce -> version
        self.streams = []
        self.server = None
        self.port = free_port()

    def start(self, credentials=None):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(self, self.server)
        if credentials is None:
            self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        else:
            self.server.add_secure_port(f"127.0.0.1:{self.port}", credentials)
        self.server.start()

    def stop(self):
        self.server.stop(grace=0).wait()
        with self.changed:
            self.changed.notify_all()

    def push(self, version, *resources):
        with self.changed:
            self.snapshot = (version, list(resources))
            self.changed.notify_all()

    def StreamAggregatedResources(self, request_iterator, context):
        asked = queue.Queue()
        with self.changed:
            self.streams.append(dict(context.invocation_metadata()))

        def read():
            try:
                for request in request_iterator:
                    with self.changed:
                        self.requests.append(request)
                        self.changed.notify_all()
                    asked.put(request)
            except grpc.RpcError:
                pass

        threading.Thread(target=read, daemon=True).start()
        asked.get()  # Nothing before the client subscribes.
        sent = None
        while context.is_active():
            with self.changed:
                self.changed.wait_for(lambda: not context.is_active() or (
                    self.snapshot is not None and self.snapshot[0] != sent), timeout=0.2)
                if not context.is_active():
                    break
                if self.snapshot is None or self.snapshot[0] == sent:
                    continue
                self.nonce += 1
                version, resources = self.snapshot
                self.sent[str(self.nonce)] = version
                response = discovery_pb2.DiscoveryResponse(
                    version_info=version, resources=resources, type_url=TYPE_URL,
                    nonce=str(self.nonce))
            sent = version
            yield response

    def reply_to(self, version):
        """The client's request answering a response of that version, once it has arrived."""
        def find():
            with self.changed:
                return next((r for r in self.requests
                             if self.sent.get(r.response_nonce) == version), None)
        return wait_for(f"the ACK or NACK of version {version}", find)


def xds_env(ads, **more):
    env = {
        "CONFIG_TYPE": "GRPC_XDS_SOTW",
        "CONFIG_GRPC_XDS_SERVER_URL": f"127.0.0.1:{ads.port}",
        "CONFIG_GRPC_XDS_NODE_ID": "redlimit-test",
        "CONFIG_GRPC_XDS_NODE_METADATA": "zone=a,team=edge",
        "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-token:secret",
        "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "200ms",
        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "200ms",
        "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "1s",
        "USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0",
    }
    env.update(more)
    return env


def limit_of(srv, domain, value):
    answer = srv.call(domain, [("k", value)])
    return answer.overall_code, answer.statuses[0].current_limit.requests_per_unit


class Xds(unittest.TestCase):
    def setUp(self):
        self.ads = Ads()
        self.ads.start()
        self.addCleanup(lambda: self.ads.server and self.ads.stop())

    def metric(self, srv, name):
        for line in srv.get("metrics", "/metrics")[1].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def test_config_updates_nacks_and_reconnects(self):
        self.ads.push("1", resource("xds", [("k", 2)]))
        srv = Server({}, env=xds_env(self.ads))
        self.addCleanup(srv.stop)
        # A response is ACKed once its config is in force: the calls below see it.
        ack = self.ads.reply_to("1")
        self.assertEqual((ack.version_info, ack.type_url), ("1", TYPE_URL))
        self.assertFalse(ack.HasField("error_detail"))
        first = self.ads.requests[0]
        self.assertEqual((first.version_info, first.response_nonce, first.type_url), ("", "", TYPE_URL))
        self.assertEqual(first.node.id, "redlimit-test")
        self.assertEqual(first.node.metadata.fields["zone"].string_value, "a")
        self.assertEqual(first.node.metadata.fields["team"].string_value, "edge")
        self.assertEqual(self.ads.streams[0].get("x-token"), "secret")
        codes = [srv.call("xds", [("k", "a")]).overall_code for _ in range(3)]
        self.assertEqual(codes, [OK, OK, OVER_LIMIT])

        # An update: the new limit takes effect.
        self.ads.push("2", resource("xds", [("k", 5)]))
        self.assertFalse(self.ads.reply_to("2").HasField("error_detail"))
        wait_for("limit 5", lambda: limit_of(srv, "xds", "b") == (OK, 5))

        # A bad update (one domain twice) is NACKed: the version in force, the nonce, why.
        self.ads.push("3", resource("xds", [("k", 9)], name="one"),
                      resource("xds", [("k", 9)], name="two"))
        nack = self.ads.reply_to("3")
        self.assertEqual(nack.version_info, "2")
        self.assertTrue(nack.HasField("error_detail"), nack)
        self.assertIn("xds", nack.error_detail.message)
        self.assertEqual(limit_of(srv, "xds", "c"), (OK, 5), "the old config still enforces")
        self.assertEqual(self.metric(srv, "ratelimit_service_config_load_success"), 2)
        self.assertEqual(self.metric(srv, "ratelimit_service_config_load_error"), 1)

        # The xDS server goes away and comes back: the client reconnects, says what it has.
        self.ads.stop()
        self.ads.push("4", resource("xds", [("k", 7)]), resource("other", [("k", 1)]))
        self.ads.start()
        self.assertFalse(self.ads.reply_to("4").HasField("error_detail"))
        self.assertGreaterEqual(len(self.ads.streams), 2)
        reopened = [r for r in self.ads.requests if r.response_nonce == ""]
        self.assertEqual(reopened[-1].version_info, "2", "a new stream starts from the version in force")
        wait_for("limit 7", lambda: limit_of(srv, "xds", "d") == (OK, 7))
        self.assertEqual(limit_of(srv, "other", "x"), (OK, 1))

    def assert_no_config_yet(self, srv):
        """Calls answered as the Go service answers them with no config loaded."""
        with self.assertRaises(grpc.RpcError) as refused:
            srv.call("xds", [("k", "a")])
        self.assertEqual((refused.exception.code(), refused.exception.details()),
                         (grpc.StatusCode.UNKNOWN, "no rate limit configuration loaded"))

    def test_the_listeners_answer_while_the_first_config_is_withheld(self):
        # The xDS server has no snapshot for the node: the client subscribes and hears nothing.
        # Without FORCE_START_WITHOUT_INITIAL_CONFIG the listeners open all the same (the Go
        # service opens none before its first config: a liveness probe is refused), health
        # follows Redis as the Go service's does once it serves, and calls answer as it does
        # with no config.
        srv = Server({}, env=xds_env(self.ads))
        self.addCleanup(srv.stop)
        wait_for("the subscription", lambda: self.ads.requests)
        wait_for("health", srv.healthy)
        self.assert_no_config_yet(srv)
        status, body = srv.post("/json", b'{"domain": "xds", "descriptors": '
                                         b'[{"entries": [{"key": "k", "value": "a"}]}]}')
        self.assertEqual(status, 400)
        self.assertIn("no rate limit configuration loaded", body)
        self.assertEqual(srv.get("debug", "/rlconfig"), (200, ""))
        with self.assertRaises(grpc.RpcError) as refused:
            srv.call("", [("k", "a")])
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         "a request without a domain is refused first, as always")
        errors = 'ratelimit_service_should_rate_limit_error{err_type="service_error"}'
        self.assertEqual(self.metric(srv, errors), 3)
        self.assertEqual(self.metric(srv, "ratelimit_service_config_load_success"), 0)
        self.assertEqual(len(self.ads.requests), 1, "still waiting for the first response")

        self.ads.push("1", resource("xds", [("k", 1)]))
        self.assertFalse(self.ads.reply_to("1").HasField("error_detail"))
        codes = [srv.call("xds", [("k", "a")]).overall_code for _ in range(2)]
        self.assertEqual(codes, [OK, OVER_LIMIT])
        self.assertTrue(srv.healthy())

    def test_force_start_serves_before_the_first_config(self):
        # No xDS server yet: FORCE_START_WITHOUT_INITIAL_CONFIG serves at once too, with no
        # config, and health waits for a domain when asked to.
        self.ads.stop()
        srv = Server({}, env=xds_env(self.ads, FORCE_START_WITHOUT_INITIAL_CONFIG="true",
                                     HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED="true"))
        self.addCleanup(srv.stop)
        self.assert_no_config_yet(srv)
        self.assertEqual(srv.get("http", "/healthcheck")[0], 500)
        self.ads.push("1", resource("xds", [("k", 1)]))
        self.ads.start()
        wait_for("health once a domain is in", srv.healthy)
        codes = [srv.call("xds", [("k", "a")]).overall_code for _ in range(2)]
        self.assertEqual(codes, [OK, OVER_LIMIT])
        # A later snapshot with no resource is a config with no domain: health fails again,
        # as the Go service's does, and comes back with the next one that has a domain.
        self.ads.push("2")
        self.assertFalse(self.ads.reply_to("2").HasField("error_detail"))
        wait_for("health to fail with no domain", lambda: not srv.healthy())
        self.ads.push("3", resource("xds", [("k", 1)]))
        self.assertFalse(self.ads.reply_to("3").HasField("error_detail"))
        wait_for("health with a domain again", srv.healthy)


def pem(name):
    directory = os.environ.get("REDLIMIT_TEST_PKI")
    if not directory:
        raise AssertionError("REDLIMIT_TEST_PKI is not set: run the suite through cargo test")
    with open(os.path.join(directory, name), "rb") as f:
        return f.read()


def pem_path(name):
    return os.path.join(os.environ["REDLIMIT_TEST_PKI"], name)


class XdsTls(unittest.TestCase):
    """CONFIG_GRPC_XDS_SERVER_USE_TLS against an xDS server serving python.rs's certificates
    and asking for a client certificate; its own certificate names `elsewhere.test` alone."""

    def setUp(self):
        self.ads = Ads()
        self.ads.start(grpc.ssl_server_credentials(
            [(pem("elsewhere.key"), pem("elsewhere.pem"))], root_certificates=pem("ca.pem"),
            require_client_auth=True))
        self.addCleanup(self.ads.stop)
        self.ads.push("1", resource("tls", [("k", 1)]))

    def tls_env(self, **more):
        return xds_env(self.ads, CONFIG_GRPC_XDS_SERVER_USE_TLS="true",
                       CONFIG_GRPC_XDS_SERVER_TLS_CACERT=pem_path("ca.pem"),
                       CONFIG_GRPC_XDS_CLIENT_TLS_CERT=pem_path("client.pem"),
                       CONFIG_GRPC_XDS_CLIENT_TLS_KEY=pem_path("client.key"), **more)

    def test_mtls_with_the_servers_name_in_the_san_setting(self):
        srv = Server({}, env=self.tls_env(CONFIG_GRPC_XDS_SERVER_TLS_SAN="elsewhere.test"))
        self.addCleanup(srv.stop)
        self.assertFalse(self.ads.reply_to("1").HasField("error_detail"))
        codes = [srv.call("tls", [("k", "a")]).overall_code for _ in range(2)]
        self.assertEqual(codes, [OK, OVER_LIMIT])

    def test_a_certificate_for_another_name_is_refused(self):
        # Dialled as 127.0.0.1, without CONFIG_GRPC_XDS_SERVER_TLS_SAN: the name does not match.
        srv = Server({}, env=self.tls_env(FORCE_START_WITHOUT_INITIAL_CONFIG="true"))
        self.addCleanup(srv.stop)
        wait_for("the refused certificate in the log", lambda: any(
            "cannot connect" in line and "certificate" in line for line in srv.stderr_lines))
        self.assertEqual(self.ads.requests, [], "nothing reached the xDS server")


if __name__ == "__main__":
    unittest.main()

"""Tracing (TRACING_ENABLED): a span per ShouldRateLimit, exported over OTLP to collectors of
ours built on PyPI's opentelemetry-proto (the OpenTelemetry project's generated messages and
gRPC service), over HTTP (POST /v1/traces, protobuf) and gRPC, with the variables Envoy Gateway
sets: the resource's service attributes, the call's domain, descriptor count and outcome and
never a descriptor's value, the caller's trace continued (W3C traceparent, B3 single and
multiple headers), parent-based sampling at TRACING_SAMPLING_RATE, the last spans flushed on
SIGTERM, and nothing at all with tracing off."""

import http.server
import os
import threading
import unittest
from concurrent import futures

import grpc
from envoy.service.ratelimit.v3 import rls_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from harness import CONDITION_DEADLINE, OK, OVER_LIMIT, Server, descriptor, wait_for

CONFIG = """
domain: traced
descriptors:
  - key: one_per_hour
    rate_limit: {unit: hour, requests_per_unit: 1}
"""

# A descriptor's key and value that must appear in no span, resource or attribute sent.
SECRET_KEY = "one_per_hour"
SECRET_VALUE = "tenant-7f3a-secret"

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Collector:
    """What an OTLP collector received: each export request's raw body and its spans, with the
    resource each came under."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bodies = []
        self.spans = []

    def take(self, body):
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        with self.lock:
            self.bodies.append(body)
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append((resource, span))

    def span_of(self, domain):
        """The (resource, span) of the call to `domain`, once received."""
        with self.lock:
            found = [(r, s) for r, s in self.spans if attributes(s.attributes).get("domain") == domain]
        assert len(found) <= 1, f"{len(found)} spans for {domain}"
        return found[0] if found else None

    def wait_span(self, domain):
        return wait_for(f"the span of the call to {domain}", lambda: self.span_of(domain))

    def received(self):
        with self.lock:
            return b"".join(self.bodies)


class HttpCollector(Collector):
    """OTLP/HTTP: POST /v1/traces with a protobuf body, answered with an empty response."""

    def __init__(self):
        super().__init__()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path != "/v1/traces" or \
                        self.headers.get("content-type") != "application/x-protobuf":
                    self.send_error(404)
                    return
                collector.take(body)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class GrpcCollector(Collector, trace_service_pb2_grpc.TraceServiceServicer):
    """OTLP/gRPC: opentelemetry.proto.collector.trace.v1.TraceService/Export."""

    def __init__(self):
        Collector.__init__(self)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{port}"

    def Export(self, request, context):
        self.take(request.SerializeToString())
        return trace_service_pb2.ExportTraceServiceResponse()

    def stop(self):
        self.server.stop(None)


def attributes(key_values):
    """OTLP attributes as a dict of Python values."""
    out = {}
    for kv in key_values:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind) if kind else None
    return out


def tracing_env(collector, **extra):
    """What Envoy Gateway sets when tracing is on (no TRACING_EXPORTER_PROTOCOL: http), with
    batches sent every 50 ms."""
    env = {
        "TRACING_ENABLED": "true",
        "TRACING_SERVICE_NAME": "envoy-ratelimit",
        "TRACING_SERVICE_NAMESPACE": "envoy-gateway-system",
        "TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-5d8f7-abcde",
        "TRACING_SAMPLING_RATE": "1.0",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    env.update(extra)
    return env


def call(server, domain, metadata=(), value=SECRET_VALUE):
    request = rls_pb2.RateLimitRequest(domain=domain,
                                       descriptors=[descriptor([(SECRET_KEY, value)])])
    return server.stub.ShouldRateLimit(request, metadata=list(metadata), timeout=10)


class Tracing(unittest.TestCase):
    def setUp(self):
        self.collectors, self.servers = [], []

    def tearDown(self):
        for server in self.servers:
            server.stop()
        for collector in self.collectors:
            collector.stop()

    def collector(self, kind):
        collector = kind()
        self.collectors.append(collector)
        return collector

    def start(self, env):
        server = Server({"traced.yaml": CONFIG}, env=env)
        self.servers.append(server)
        return server

    def assert_span(self, collector, domain, outcome, descriptors=1):
        resource, span = collector.wait_span(domain)
        self.assertEqual(resource["service.name"], "envoy-ratelimit")
        self.assertEqual(resource["service.namespace"], "envoy-gateway-system")
        self.assertEqual(resource["service.instance.id"], "envoy-ratelimit-5d8f7-abcde")
        self.assertEqual(span.name, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
        self.assertEqual(span.kind, span.SPAN_KIND_SERVER)
        attrs = attributes(span.attributes)
        self.assertEqual(attrs["descriptors"], descriptors)
        self.assertEqual(attrs["outcome"], outcome)
        self.assertEqual(attrs["rpc.system"], "grpc")
        self.assertEqual(attrs["rpc.method"], "ShouldRateLimit")
        return span

    def assert_no_descriptor(self, collector):
        received = collector.received()
        self.assertTrue(received)
        self.assertNotIn(SECRET_VALUE.encode(), received)
        self.assertNotIn(SECRET_KEY.encode(), received)

    def test_spans_over_http_as_envoy_gateway_configures_it(self):
        collector = self.collector(HttpCollector)
        server = self.start(tracing_env(collector))
        self.assertEqual(call(server, "traced").overall_code, OK)
        self.assertEqual(call(server, "traced").overall_code, OVER_LIMIT)
        # Two calls to one domain: told apart by their outcome.
        wait_for("both calls' spans", lambda: len(collector.spans) >= 2)
        outcomes = sorted(attributes(s.attributes)["outcome"] for _, s in collector.spans)
        self.assertEqual(outcomes, ["OK", "OVER_LIMIT"])
        for _, span in collector.spans:
            self.assertEqual(len(span.parent_span_id), 0, "a root: no caller's trace")
            self.assertEqual(attributes(span.attributes)["domain"], "traced")
        # A refused call (no descriptors): an error, its message not recorded.
        with self.assertRaises(grpc.RpcError) as refused:
            server.stub.ShouldRateLimit(rls_pb2.RateLimitRequest(domain="refused"), timeout=10)
        span = self.assert_span(collector, "refused", "ERROR", descriptors=0)
        self.assertEqual(span.status.code, span.status.STATUS_CODE_ERROR)
        self.assertEqual(attributes(span.attributes)["rpc.grpc.status_code"],
                         refused.exception.code().value[0])
        self.assertNotIn(refused.exception.details().encode(), collector.received())
        self.assert_no_descriptor(collector)

    def test_the_callers_trace_is_continued(self):
        collector = self.collector(HttpCollector)
        server = self.start(tracing_env(collector))
        cases = {
            "w3c": [("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01")],
            "b3-single": [("b3", f"{TRACE_ID}-{PARENT_ID}-1")],
            "b3-multi": [("x-b3-traceid", TRACE_ID), ("x-b3-spanid", PARENT_ID),
                         ("x-b3-sampled", "1")],
            # Envoy's Zipkin tracer may send a 64-bit trace id.
            "b3-short": [("x-b3-traceid", TRACE_ID[16:]), ("x-b3-spanid", PARENT_ID),
                         ("x-b3-sampled", "1")],
        }
        for domain, metadata in cases.items():
            call(server, domain, metadata)
        for domain in cases:
            with self.subTest(domain):
                span = self.assert_span(collector, domain, "OK")
                expected = TRACE_ID if domain != "b3-short" else "0" * 16 + TRACE_ID[16:]
                self.assertEqual(span.trace_id.hex(), expected)
                self.assertEqual(span.parent_span_id.hex(), PARENT_ID)
                self.assertNotEqual(span.span_id.hex(), PARENT_ID)
        self.assert_no_descriptor(collector)

    def test_spans_over_grpc(self):
        collector = self.collector(GrpcCollector)
        server = self.start(tracing_env(collector, TRACING_EXPORTER_PROTOCOL="grpc"))
        call(server, "traced", [("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01")])
        call(server, "traced")
        wait_for("both calls' spans", lambda: len(collector.spans) >= 2)
        resource, _ = collector.spans[0]
        self.assertEqual(resource["service.name"], "envoy-ratelimit")
        self.assertEqual(resource["service.instance.id"], "envoy-ratelimit-5d8f7-abcde")
        by_outcome = {attributes(s.attributes)["outcome"]: s for _, s in collector.spans}
        self.assertEqual(by_outcome["OK"].trace_id.hex(), TRACE_ID)
        self.assertEqual(by_outcome["OK"].parent_span_id.hex(), PARENT_ID)
        self.assertNotEqual(by_outcome["OVER_LIMIT"].trace_id.hex(), TRACE_ID)
        self.assert_no_descriptor(collector)

    def test_sampling_follows_the_rate_and_the_caller(self):
        collector = self.collector(HttpCollector)
        server = self.start(tracing_env(collector, TRACING_SAMPLING_RATE="0"))
        # Rate 0: a call that starts its trace here is not sampled...
        call(server, "unsampled")
        # ...nor one whose caller did not sample (W3C flags 00, B3 0)...
        call(server, "caller-declined", [("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-00")])
        call(server, "b3-declined", [("b3", f"{TRACE_ID}-{PARENT_ID}-0")])
        # ...and one whose caller sampled is: parent-based. Exported after the calls above
        # (one batch task, in order), its arrival says theirs would have arrived.
        call(server, "barrier", [("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01")])
        self.assert_span(collector, "barrier", "OK")
        for domain in ["unsampled", "caller-declined", "b3-declined"]:
            self.assertIsNone(collector.span_of(domain), domain)
        # Unset, the rate is 1: every trace started here is sampled.
        rate_one = self.collector(HttpCollector)
        env = tracing_env(rate_one, TRACING_SAMPLING_RATE=None)
        second = self.start(env)
        call(second, "sampled")
        self.assert_span(rate_one, "sampled", "OK")

    def test_the_last_spans_are_flushed_on_sigterm(self):
        collector = self.collector(HttpCollector)
        # Batches every 10 minutes: only the shutdown's flush can send this one in time.
        server = self.start(tracing_env(collector, OTEL_BSP_SCHEDULE_DELAY="600000"))
        call(server, "flushed")
        server.terminate()
        self.assertEqual(server.process.wait(timeout=CONDITION_DEADLINE), 0)
        self.assertIsNotNone(collector.span_of("flushed"), "sent before the process exited")

    def test_nothing_is_sent_with_tracing_off(self):
        collector = self.collector(HttpCollector)
        env = tracing_env(collector, TRACING_ENABLED=None)
        server = self.start(env)
        call(server, "traced", [("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01")])
        server.terminate()
        # On, the shutdown would have flushed the call's span before the exit.
        self.assertEqual(server.process.wait(timeout=CONDITION_DEADLINE), 0)
        self.assertEqual(collector.received(), b"")

    def test_a_bad_setting_stops_the_start_named(self):
        collector = self.collector(HttpCollector)
        for name, value, named in [
                ("TRACING_EXPORTER_PROTOCOL", "udp", "TRACING_EXPORTER_PROTOCOL"),
                ("TRACING_SAMPLING_RATE", "half", "TRACING_SAMPLING_RATE"),
                ("TRACING_ENABLED", "yes", "--tracing-enabled"),
                # TLS to the collector: refused, not failing every export later.
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4318",
                 "OTEL_EXPORTER_OTLP_ENDPOINT=`https://127.0.0.1:4318`")]:
            with self.subTest(name):
                with self.assertRaises(AssertionError) as refused:
                    self.start(tracing_env(collector, **{name: value}))
                self.assertIn("exited (", str(refused.exception))
                self.assertIn(named, str(refused.exception))


if __name__ == "__main__":
    unittest.main()

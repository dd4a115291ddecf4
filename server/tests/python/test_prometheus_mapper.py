"""PROMETHEUS_MAPPER_YAML through the real binary: the Go service's built-in mapping file and
Envoy Gateway's (verbatim, tests/fixtures/mapper/), a file of our own (renames, drops), one
with a construct this server does not implement (the start fails, naming the line), and the
process_* series every scrape carries."""

import math
import os
import re
import tempfile
import time
import unittest

from harness import Server, wait_for

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "mapper")
GATEWAY = os.path.join(FIXTURES, "envoy-gateway-statsd_conf.yaml")
GO_DEFAULT = os.path.join(FIXTURES, "ratelimit-default_mapper.yaml")

CONFIG = """domain: gs
descriptors:
  - key: once
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: outer
    value: o
    descriptors:
      - key: inner
        rate_limit: {unit: minute, requests_per_unit: 100}
"""

# client_golang's DefBuckets, statsd_exporter's default.
DEF_BUCKETS = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
               "+Inf"]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Prometheus's text format: {(name, ((label, value), ...) sorted): value}."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        pairs = tuple(sorted(LABEL.findall(labels or "")))
        samples[(name, pairs)] = float(value)
    return samples


def key(name, **labels):
    return (name, tuple(sorted(labels.items())))


def server(mapper_file, **env):
    full = {"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0"}
    if mapper_file is not None:
        full["PROMETHEUS_MAPPER_YAML"] = mapper_file
    full.update(env)
    return Server({"gs.yaml": CONFIG}, env=full)


class Mapped(unittest.TestCase):
    def scrape(self, srv):
        status, body = srv.get("metrics", "/metrics")
        self.assertEqual(status, 200, body)
        return parse(body)

    def calls(self, srv):
        """Three hits on `once` (one within, two over) and one on the nested descriptor."""
        for _ in range(3):
            srv.call("gs", [("once", "a")])
        srv.call("gs", [("outer", "o"), ("inner", "i")])
        return 4

    def wait_scrape(self, srv, wanted):
        """The scrape once every (key, value) in `wanted` is in it."""
        return wait_for(f"the metrics {wanted}", lambda: (
            lambda s: s if all(s.get(k) == v for k, v in wanted.items()) else None)(
                self.scrape(srv)))

    def response_time(self, samples, calls):
        """The response time histogram's buckets, and its sum, as the Go service observes it."""
        name = "ratelimit_service_response_time_seconds"
        method = (("grpc_method", "ShouldRateLimit"),)
        buckets = sorted(
            (dict(labels)["le"], value) for (n, labels), value in samples.items()
            if n == name + "_bucket" and dict(labels).get("grpc_method") == "ShouldRateLimit")
        self.assertEqual(sorted(le for le, _ in buckets), sorted(DEF_BUCKETS))
        self.assertEqual(samples[(name + "_count", method)], calls)
        return samples[(name + "_sum", method)]

    def test_envoy_gateways_file(self):
        srv = server(GATEWAY)
        self.addCleanup(srv.stop)
        calls = self.calls(srv)
        hits = "ratelimit_service_rate_limit_total_hits"
        samples = self.wait_scrape(srv, {
            key(hits, domain="gs", key1="once"): 3,
            key("ratelimit_service_rate_limit_over_limit", domain="gs", key1="once"): 2,
            key("ratelimit_service_rate_limit_within_limit", domain="gs", key1="once"): 1,
            # Three fields after the domain: the file's regex rules (key2 the third).
            key(hits, domain="gs", key1="outer_o", key2="inner"): 1,
            key("ratelimit_service_total_requests", grpc_method="ShouldRateLimit"): calls,
        })
        # Envoy Gateway's file has no `scale`: whole milliseconds under the `_seconds` name, in
        # the default buckets, as the Go service exports them with it.
        total = self.response_time(samples, calls)
        self.assertEqual(total, math.floor(total), "whole milliseconds")

    def test_the_go_services_built_in_file(self):
        srv = server(GO_DEFAULT)
        self.addCleanup(srv.stop)
        calls = self.calls(srv)
        samples = self.wait_scrape(srv, {
            key("ratelimit_service_rate_limit_total_hits", domain="gs", key1="once"): 3,
            key("ratelimit_service_total_requests", grpc_method="ShouldRateLimit"): calls,
        })
        # `scale: 0.001`: whole milliseconds made seconds.
        total = self.response_time(samples, calls) * 1000
        self.assertAlmostEqual(total, round(total), places=6)

    def test_a_file_that_renames_and_drops(self):
        mapping = """mappings:
  - match: ratelimit.service.rate_limit.*.*.total_hits
    name: hits_${1}_total
    labels:
      descriptor: $2
  - match: ratelimit.service.rate_limit.*.*.*
    name: dropped
    action: drop
  - match: ratelimit.service.rate_limit.*.*.*.*
    name: dropped
    action: drop
  - match: ratelimit_server.*.response_time
    name: rls_seconds
    match_metric_type: observer
    observer_type: histogram
    scale: 0.001
    histogram_options:
      buckets: [0.001, 1]
"""
        path = self.file(mapping)
        srv = server(path)
        self.addCleanup(srv.stop)
        calls = self.calls(srv)
        samples = self.wait_scrape(srv, {
            key("hits_gs_total", descriptor="once"): 3,
            # Labels are the rule's alone: the method is not one here.
            key("rls_seconds_count"): calls,
        })
        names = {name for name, _ in samples}
        self.assertFalse([n for n in names if "over_limit" in n or "within_limit" in n], names)
        buckets = {dict(labels)["le"] for (n, labels) in samples if n == "rls_seconds_bucket"}
        self.assertEqual(buckets, {"0.001", "1", "+Inf"})
        # A name no rule matches: itself, made a metric name.
        self.assertIn(
            key("ratelimit_server_ShouldRateLimit_total_requests"), samples)

    def test_an_unsupported_construct_stops_the_start_naming_its_line(self):
        path = self.file("mappings:\n  - match: a.b\n    name: x\n    ttl: 5m\n")
        with self.assertRaises(AssertionError) as failed:
            server(path)
        message = str(failed.exception)
        self.assertIn("exited", message)
        self.assertIn(f"PROMETHEUS_MAPPER_YAML: {path}: line 4: `ttl`", message)

    def test_a_file_that_cannot_be_read_leaves_the_built_in_names(self):
        # Envoy Gateway mounts the file from an optional ConfigMap: the service starts, says
        # so, and emits the built-in mapping's names.
        missing = os.path.join(tempfile.gettempdir(), f"no-such-mapper-{os.getpid()}.yaml")
        srv = server(missing)
        self.addCleanup(srv.stop)
        srv.call("gs", [("once", "a")])
        hits = key("ratelimit_service_rate_limit_total_hits", domain="gs", key1="once")
        self.assertEqual(self.wait_scrape(srv, {hits: 1})[hits], 1)
        wait_for("the error logged", lambda: any(
            f"cannot read {missing}" in line for line in srv.stderr_lines))

    def test_the_process_series_and_an_empty_file_name(self):
        started = time.time()
        # Empty is unset, as in the Go service: the built-in mapping's names.
        srv = server("")
        self.addCleanup(srv.stop)
        srv.call("gs", [("once", "a")])
        samples = self.scrape(srv)
        hits = key("ratelimit_service_rate_limit_total_hits", domain="gs", key1="once")
        self.assertEqual(samples[hits], 1)
        for name in ["process_cpu_seconds_total", "process_resident_memory_bytes",
                     "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                     "process_start_time_seconds"]:
            self.assertIn(key(name), samples)
        self.assertGreater(samples[key("process_resident_memory_bytes")], 1 << 20)
        self.assertGreaterEqual(samples[key("process_open_fds")], 3)
        # Boot time and start ticks are whole seconds and hundredths: a second's leeway.
        self.assertLess(abs(samples[key("process_start_time_seconds")] - started), 2)
        # Read at each scrape: the CPU time never goes back, and the open descriptors move
        # with the process (the scrape's own connection among them).
        later = self.scrape(srv)
        self.assertGreaterEqual(later[key("process_cpu_seconds_total")],
                                samples[key("process_cpu_seconds_total")])

    def file(self, text):
        handle, path = tempfile.mkstemp(prefix="mapper-", suffix=".yaml")
        with os.fdopen(handle, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path


if __name__ == "__main__":
    unittest.main()

"""The Go service's response settings, against a real Redis: RESPONSE_DYNAMIC_METADATA (the
response's `dynamic_metadata`: domain, descriptors, hitsAddend and the passed rules' YAML
`metadata`, merged, as its `ratelimitToMetadata`) and QUOTA_MODE (every descriptor in quota
mode: over only when all are)."""

import unittest

from google.protobuf import json_format

from harness import OK, OVER_LIMIT, Redis, Server, descriptor

METADATA_CONFIG = """
domain: meta
descriptors:
  - key: user
    metadata:
      team: payments
      owner: {name: alice, oncall: pager-1}
      tags: [1, two, true]
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: tenant
    metadata:
      team: other
      tier: gold
      owner: {name: bob, escalation: pager-2}
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: free
    metadata: {unlimited_rule: true}
    rate_limit: {unlimited: true}
  - key: shadowed
    shadow_mode: true
    metadata: {shadow: seen}
    rate_limit: {unit: hour, requests_per_unit: 0}
"""

QUOTA_CONFIG = """
domain: quota
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 2}
"""


# Answers are tested, not speed: a busy machine's first call (a connection, a script load) may
# take longer than the default 15 ms deadline.
EXACT = {"REDLIMIT_STORE_DEADLINE": "10s"}


def metadata(response):
    return json_format.MessageToDict(response.dynamic_metadata)


class DynamicMetadata(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.server = Server({"meta.yaml": METADATA_CONFIG}, self.redis,
                             env={**EXACT, "RESPONSE_DYNAMIC_METADATA": "true"})

    def tearDown(self):
        self.server.stop()
        self.redis.stop()

    def test_the_passed_descriptors_metadata_merged_first_wins(self):
        first = self.server.call("meta", [("user", "u1")], [("tenant", "t1")],
                                 [("free", "x")], [("shadowed", "s")])
        self.assertEqual(first.overall_code, OK)
        self.assertEqual(metadata(first), {
            "domain": "meta",
            "descriptors": [{"entries": ["user=u1"]}, {"entries": ["tenant=t1"]},
                            {"entries": ["free=x"]}, {"entries": ["shadowed=s"]}],
            # The user's values win; mappings merge; the unlimited rule's is left out; the
            # shadow rule's, over but answered OK, is in.
            "metadata": {"team": "payments", "tier": "gold", "tags": [1, "two", True],
                         "owner": {"name": "alice", "oncall": "pager-1",
                                   "escalation": "pager-2"},
                         "shadow": "seen"},
        })
        # The user is over now: only the tenant's metadata (and the shadow rule's).
        second = self.server.call("meta", [("user", "u1")], [("tenant", "t1")],
                                  [("shadowed", "s")])
        self.assertEqual([s.code for s in second.statuses], [OVER_LIMIT, OK, OK])
        self.assertEqual(metadata(second)["metadata"], {
            "team": "other", "tier": "gold", "owner": {"name": "bob", "escalation": "pager-2"},
            "shadow": "seen"})

    def test_hits_addend_a_descriptors_own_limit_and_an_unknown_domain(self):
        own = descriptor([("user", "u2"), ("path", "/p")], hits_addend=1, limit=(5, 2))
        r = self.server.call("meta", own, [("tenant", "t2")], hits_addend=2)
        self.assertEqual(r.overall_code, OK)
        self.assertEqual(metadata(r), {
            "domain": "meta",
            "descriptors": [
                {"entries": ["user=u2", "path=/p"], "limit": "requests_per_unit:5 unit:MINUTE",
                 "hitsAddend": 1},
                {"entries": ["tenant=t2"]}],
            "hitsAddend": 2,
            # A descriptor's own limit is no rule: no metadata of its own.
            "metadata": {"team": "other", "tier": "gold",
                         "owner": {"name": "bob", "escalation": "pager-2"}},
        })
        unknown = self.server.call("nowhere", [("user", "u3")])
        self.assertEqual(metadata(unknown),
                         {"domain": "nowhere", "descriptors": [{"entries": ["user=u3"]}]})

    def test_off_by_default(self):
        plain = Server({"meta.yaml": METADATA_CONFIG}, self.redis, env=EXACT)
        try:
            r = plain.call("meta", [("tenant", "t4")])
            self.assertEqual(r.overall_code, OK)
            self.assertFalse(r.HasField("dynamic_metadata"))
        finally:
            plain.stop()


class QuotaMode(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()

    def tearDown(self):
        self.redis.stop()

    def test_over_only_when_every_descriptor_is_and_each_counted_on_its_own(self):
        server = Server({"quota.yaml": QUOTA_CONFIG}, self.redis,
                        env={**EXACT, "QUOTA_MODE": "true"})
        try:
            call = lambda *extra: server.call("quota", [("a", "x")], [("b", "x")], *extra)
            self.assertEqual(call().overall_code, OK)
            second = call()
            # `a` is over, `b` is not: OK overall; `b` was charged although `a` refused.
            self.assertEqual([s.code for s in second.statuses], [OVER_LIMIT, OK])
            self.assertEqual(second.overall_code, OK)
            self.assertEqual(second.statuses[1].limit_remaining, 0)
            # A descriptor no rule matches counts as a quota descriptor that is never over.
            with_unmatched = call([("nothing", "here")])
            self.assertEqual([s.code for s in with_unmatched.statuses],
                             [OVER_LIMIT, OVER_LIMIT, OK])
            self.assertEqual(with_unmatched.overall_code, OK)
            self.assertEqual(call().overall_code, OVER_LIMIT)
        finally:
            server.stop()

    def test_off_one_descriptor_over_is_enough(self):
        server = Server({"quota.yaml": QUOTA_CONFIG}, self.redis, env=EXACT)
        try:
            self.assertEqual(server.call("quota", [("a", "y")], [("b", "y")]).overall_code, OK)
            second = server.call("quota", [("a", "y")], [("b", "y")])
            self.assertEqual(second.overall_code, OVER_LIMIT)
            # Every hit lands (the Go service's default): `b` was charged all the same.
            self.assertEqual(second.statuses[1].limit_remaining, 0)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
